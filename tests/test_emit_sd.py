"""The sd-server emitter: worked examples A–F (docs/maintainers/classes.md#image-worked-examples), detection, components, budget."""

from __future__ import annotations

import attrs
import pytest
from gguf_fixtures import Q, write_gguf

from autogen.discovery.rows import ModelRow
from autogen.emit.sd import arm_components, emit_sd, guidance_for, is_reference_edit, max_vram
from autogen.engines import Role
from autogen.errors import ModelError
from autogen.metadata.gguf_header import read_gguf_header
from autogen.metadata.gguf_meta import meta_from_gguf
from autogen.metadata.model_meta import ModelMeta
from autogen.resolve.backends import Resolved
from autogen.resolve.context import EmitContext
from autogen.resolve.roles import image_arch, is_image_arch, model_role
from autogen.settings.schema import BackendRow, Encoders, Override, Settings

GIB = 1 << 30
SIZES = {"/c/ae.safetensors": int(0.31 * GIB), "/c/clip_l.safetensors": int(0.23 * GIB),
         "/c/t5xxl.gguf": int(4.9 * GIB), "/c/clip_g.safetensors": int(1.3 * GIB), "/c/qwen3.gguf": int(4.3 * GIB),
         "/c/flux2-vae.safetensors": int(0.3 * GIB), "/c/zae.safetensors": int(0.3 * GIB)}
FLUX_ENC = Encoders(flux_vae="/c/ae.safetensors", clip_l="/c/clip_l.safetensors", t5xxl="/c/t5xxl.gguf")


def context(arch="flux", *, path="/models/flux.gguf", size_gb=6.5, budget=7.0, override=None, encoders=FLUX_ENC,
            threads=7, meta_kw=None) -> EmitContext:
    meta = ModelMeta(source="gguf", arch=arch, general_type="diffusion", **(meta_kw or {}))
    row = ModelRow(id="flux-q4", format="gguf", path=path, size_bytes=int(size_gb * GIB))
    backend = Resolved(engine="sd", exe="sd-server", row=BackendRow(id="sd", kind="sd", path="sd-server"),
                       why="★ of class image")
    settings = Settings(roots=("/models",), threads=threads, encoders=encoders)
    return EmitContext(row=row, meta=meta, kv=None, override=override, settings=settings, backend=backend,
                       budget_gb=budget, card_vram_gb=None, ttl=600)


def emit(ctx, sizes=SIZES):
    plan = emit_sd(ctx, sizes.get)
    assert not plan.skips
    (entry,) = plan.entries
    return entry


class TestWorkedExamples:
    def test_example_a_flux_offloaded_argv_in_reference_order(self):
        entry = emit(context())
        assert entry.argv == (
            "sd-server", "--diffusion-model", "/models/flux.gguf", "-l", "127.0.0.1", "--listen-port", "${PORT}",
            "--max-vram", "6.5", "--vae", "/c/ae.safetensors", "--clip_l", "/c/clip_l.safetensors",
            "--t5xxl", "/c/t5xxl.gguf", "--lora-model-dir", "/models", "--diffusion-fa", "--vae-tiling",
            "-t", "7", "--backend", "te=cpu", "--offload-to-cpu", "--vae-on-cpu")
        assert entry.check_endpoint == "/" and entry.ttl == 600
        assert entry.capabilities.inputs == ("text",) and entry.capabilities.outputs == ("image",)
        assert "offload=true" in entry.comment[0]
        assert not any(line.startswith("WARNING") for line in entry.comment)
        assert dict(entry.metadata)["est_vram_gb"] == 6.5

    def test_example_b_override_components_and_toggles(self):
        ov = Override(match="*", vae="/c/ae.safetensors", clip_l="/c/clip_l.safetensors", t5xxl="/c/t5xxl.gguf",
                      llm_text_encoder="/c/qwen3.gguf", vae_tiling=False, diffusion_fa=False, te_on_cpu=False,
                      offload_to_cpu=False, steps=8, cfg_scale=1.0, sampling_method="euler", width=768, height=512,
                      extra_args=("--clip-on-cpu",))
        entry = emit(context(override=ov, encoders=Encoders()))
        argv = entry.argv
        for pair in (("--llm", "/c/qwen3.gguf"), ("--steps", "8"), ("--cfg-scale", "1"),
                     ("--sampling-method", "euler"), ("--width", "768"), ("--height", "512"), ("--max-vram", "-1")):
            i = argv.index(pair[0])
            assert argv[i + 1] == pair[1]
        assert argv[-1] == "--clip-on-cpu"
        for absent in ("--vae-tiling", "--diffusion-fa", "--backend", "--offload-to-cpu"):
            assert absent not in argv
        assert "offload=false" in entry.comment[0]

    def test_the_memory_record_says_where_the_weights_are(self):
        """Offloaded (example A): weights, VAE and text encoders in RAM, the GPU's charge all
        compute; on the GPU (example B's toggles): the weights and encoders there, nothing in RAM."""
        offloaded = emit(context()).footprint.memory
        assert offloaded.source == "estimate" and offloaded.devices[0].model == 0
        assert offloaded.devices[0].compute == int(6.5 * GIB)
        assert offloaded.host.model == int(6.5 * GIB) + SIZES["/c/ae.safetensors"] + SIZES["/c/clip_l.safetensors"] \
            + SIZES["/c/t5xxl.gguf"]
        ov = Override(match="*", te_on_cpu=False, offload_to_cpu=False)
        entry = emit(context(override=ov, budget=16.0))
        resident = int(6.5 * GIB) + SIZES["/c/ae.safetensors"] + SIZES["/c/clip_l.safetensors"] + SIZES["/c/t5xxl.gguf"]
        (gpu,) = entry.footprint.memory.devices
        assert gpu.model == resident and gpu.total == entry.footprint.vram and entry.footprint.memory.host is None
        assert entry.estimate == entry.footprint.memory

    def test_example_c_sd15_full_checkpoint_loads_with_m_and_no_components(self):
        entry = emit(context("sd1", path="/models/sd15.gguf", size_gb=2.0, meta_kw={"has_baked_encoders": True}))
        assert "full checkpoint (-m): text encoders and VAE are baked in" in entry.comment
        assert not any(line.startswith("WARNING") for line in entry.comment)
        assert entry.argv[1:3] == ("-m", "/models/sd15.gguf")
        assert "--diffusion-model" not in entry.argv and "--vae" not in entry.argv
        assert "--offload-to-cpu" not in entry.argv and "--vae-on-cpu" not in entry.argv
        assert "--vae-tiling" in entry.argv and entry.argv[entry.argv.index("--backend") + 1] == "te=cpu"

    @pytest.mark.parametrize("name,arch,roles", [
        ("flux1-schnell-q4_k_m.gguf", "flux", {"vae": "ae", "clip_l": "cl", "t5xxl": "t5"}),
        ("chroma1-hd-q8_0.gguf", "flux", {"vae": "ae", "t5xxl": "t5"}),
        ("z-image-turbo-q8_0.gguf", "lumina2", {"vae": "zae", "llm": "qwen"}),
        ("flux-2-klein-9b.gguf", "flux", {"vae": "f2", "llm": "qwen"}),
        ("qwen-image-2512-q4_k_m.gguf", "qwen_image", {"vae": "qi", "llm": "qwen"}),
        ("ernie-image-turbo.gguf", "wan", {"vae": "f2", "llm": "qwen"}),
        ("sdxl-base.gguf", "sdxl", {}),
        ("sd3.5-medium.gguf", "sd3", {}),
    ])
    def test_example_d_component_arms(self, name, arch, roles):
        enc = Encoders(flux_vae="ae", flux2_vae="f2", zimage_vae="zae", qwen_image_vae="qi", clip_l="cl", clip_g="cg",
                       t5xxl="t5", llm_text_encoder="qwen")
        _, picks = arm_components(name, arch, enc)
        if arch == "sdxl":
            assert picks == {}  # only reached for split DiTs; SDXL loads whole with -m
        else:
            assert picks == roles

    def test_example_d_empty_pool_warns_for_three_roles_but_still_emits(self):
        entry = emit(context(encoders=Encoders()))
        warning = next(line for line in entry.comment if line.startswith("WARNING"))
        assert "vae (not declared)" in warning and "clip_l" in warning and "t5xxl" in warning
        assert "--vae" not in entry.argv and "--t5xxl" not in entry.argv

    def test_example_d_override_supplying_all_three_clears_the_warning(self):
        ov = Override(match="*", vae="/c/ae.safetensors", clip_l="/c/clip_l.safetensors", t5xxl="/c/t5xxl.gguf")
        entry = emit(context(encoders=Encoders(), override=ov))
        assert not any(line.startswith("WARNING") for line in entry.comment)

    @pytest.mark.parametrize("name,value", [("flux1-kontext-dev-q4_k_m", 2.5), ("flux1-fill-dev-q4_k_s", 30.0),
                                            ("flux1-schnell", None), ("flux1-dev", None)])
    def test_example_e_guidance(self, name, value):
        assert guidance_for(name) == value

    def test_example_f_graph_budget(self):
        assert max_vram(22.3, False, 14.6) == 7.7
        assert max_vram(22.3, True, 14.6) == 22.3
        assert max_vram(14.0, False, 14.6) == -1


class TestComponents:
    def test_declared_file_missing_on_disk_is_left_out_and_warned(self):
        entry = emit(context(), sizes={k: v for k, v in SIZES.items() if k != "/c/t5xxl.gguf"})
        assert "--t5xxl" not in entry.argv
        assert any("t5xxl (/c/t5xxl.gguf not found)" in line for line in entry.comment)

    def test_override_none_drops_a_required_component_without_warning(self):
        entry = emit(context(override=Override(match="*", clip_l="none")))
        assert "--clip_l" not in entry.argv
        assert not any(line.startswith("WARNING") for line in entry.comment)

    def test_component_path_with_a_macro_is_refused(self):
        with pytest.raises(ModelError, match="vae path"):
            emit_sd(context(override=Override(match="*", vae="/c/${HOME}/ae.safetensors")), SIZES.get)

    def test_resident_vae_and_encoders_shrink_the_graph_budget(self):
        # 6.5 GB DiT on a 23.5 budget: resident DiT + VAE (encoders on the CPU by default)
        entry = emit(context(budget=24.0))
        assert entry.argv[entry.argv.index("--max-vram") + 1] == "16.6"
        ov = Override(match="*", te_on_cpu=False)
        entry = emit(context(budget=24.0, override=ov))
        assert entry.argv[entry.argv.index("--max-vram") + 1] == "11.5"  # + clip_l 0.23 + t5 4.9

    def test_extra_args_replace_the_generated_flag_of_the_same_meaning(self):
        entry = emit(context(override=Override(match="*", extra_args=("--max-vram", "7", "--threads", "3"))))
        assert entry.argv.count("--max-vram") == 1 and entry.argv[-4:] == ("--max-vram", "7", "--threads", "3")
        assert "-t" not in entry.argv

    def test_per_model_budget_is_used_without_the_overhead(self):
        entry = emit(context(override=Override(match="*", vram_budget_gb=10.0)))
        assert dict(entry.metadata)["est_vram_gb"] == 10.0
        assert "--offload-to-cpu" not in entry.argv

    def test_reference_edit_models_take_an_image_input(self):
        entry = emit(context(path="/models/flux1-kontext-dev-Q4_K_M.gguf"))
        assert entry.capabilities.inputs == ("text", "image")
        assert entry.argv[entry.argv.index("--guidance") + 1] == "2.5"
        assert is_reference_edit("qwen-image-edit-2509") and not is_reference_edit("flux1-dev")


class TestUnetOnly:
    """docs/maintainers/classes.md#full-checkpoint-or-split-load: an SD/SDXL file without baked text encoders gets the UNet-only
    WARNING and is still emitted."""

    @pytest.mark.parametrize("arch", ["sd1", "sdxl", "stable-diffusion"])
    def test_bare_unet_is_warned_and_still_emitted(self, arch):
        entry = emit(context(arch, path="/models/unet.gguf", size_gb=2.0))
        assert entry.argv[1:3] == ("-m", "/models/unet.gguf")
        assert entry.comment[1] == ("WARNING: flux-q4 looks UNet-only (no baked text encoder) - sd.cpp can't load "
                                    "SD/SDXL split; supply an all-in-one checkpoint")
        assert not any("baked in" in line for line in entry.comment)

    def test_declared_clip_files_do_not_silence_it(self):
        """sd.cpp tells SD/SDXL apart by baked encoder tensors; --clip_l/--clip_g do not count."""
        ov = Override(match="*", clip_l="/c/clip_l.safetensors", clip_g="/c/clip_g.safetensors")
        entry = emit(context("sdxl", override=ov, encoders=Encoders(clip_l="/c/clip_l.safetensors")))
        assert any("looks UNet-only" in line for line in entry.comment)

    def test_split_loaded_dits_never_get_it(self):
        entry = emit(context("flux"))
        assert not any("UNet-only" in line for line in entry.comment)

    def test_metadata_stripped_sdxl_unet_from_a_real_header(self, tmp_path):
        """ComfyUI-GGUF style: no arch keys, UNet names only (docs/maintainers/classes.md#image-detection)."""
        path = write_gguf(tmp_path / "sdxl-unet-Q8_0.gguf", "", tensors=[
            ("input_blocks.0.0.weight", (3, 3, 4, 320), Q.F16), ("label_emb.0.0.weight", (2816, 1280), Q.F16)])
        meta = meta_from_gguf(read_gguf_header(path))
        assert (image_arch(meta), meta.has_baked_encoders) == ("sdxl", False)
        ctx = attrs.evolve(context(path=str(path)), meta=meta)
        entry = emit(ctx)
        assert entry.comment[0].startswith("sd-server · sdxl")
        assert "looks UNet-only" in entry.comment[1]

    def test_checkpoint_with_baked_encoders_from_a_real_header(self, tmp_path):
        path = write_gguf(tmp_path / "sd_xl_base_1.0-Q8_0.gguf", "sdxl", tensors=[
            ("model.diffusion_model.input_blocks.0.0.weight", (3, 3, 4, 320), Q.F16),
            ("model.diffusion_model.label_emb.0.0.weight", (2816, 1280), Q.F16),
            ("conditioner.embedders.1.model.token_embedding.weight", (1280, 64), Q.F16)])
        ctx = attrs.evolve(context(path=str(path)), meta=meta_from_gguf(read_gguf_header(path)))
        entry = emit(ctx)
        assert "full checkpoint (-m): text encoders and VAE are baked in" in entry.comment
        assert not any("UNet-only" in line for line in entry.comment)


class TestDetection:
    @pytest.mark.parametrize("arch", ["flux", "flux.1", "sd3.5", "lumina2", "qwen_image", "z_image", "sdxl", "wan"])
    def test_image_archs_match_exactly_or_by_prefix(self, arch):
        assert is_image_arch(arch)

    @pytest.mark.parametrize("arch", ["", "sd2", "llama", "qwen3", "clip"])
    def test_other_archs_are_not_image_archs(self, arch):
        assert not is_image_arch(arch)

    def test_metadata_stripped_unet_is_found_by_its_tensor_names(self):
        meta = ModelMeta(source="gguf", arch="", diffusion_kind="sdxl")
        assert image_arch(meta) == "sdxl"
        row = ModelRow(id="x", format="gguf", path="/m/x.gguf")
        assert model_role(row, meta) == Role.IMAGE

    def test_general_type_diffusion_makes_an_image_model_even_with_an_llm_arch(self):
        meta = ModelMeta(source="gguf", arch="qwen", general_type="diffusion")
        assert model_role(ModelRow(id="x", format="gguf", path="/m/hidream-o1.gguf"), meta) == Role.IMAGE

    def test_video_dits_are_never_served_as_llms(self):
        meta = ModelMeta(source="gguf", arch="ltxv", block_count=48)
        assert model_role(ModelRow(id="x", format="gguf", path="/m/ltx-2.gguf"), meta) == Role.IMAGE

    def test_chat_and_embedding_models_stay_in_their_roles(self):
        row = ModelRow(id="x", format="gguf", path="/m/x.gguf")
        assert model_role(row, ModelMeta(source="gguf", arch="qwen3")) == Role.LLM
        assert model_role(row, ModelMeta(source="gguf", arch="bert")) == Role.EMBEDDING
