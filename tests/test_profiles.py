"""llama profiles: ctx tiers and named variants of one model, each sized on its own."""

from __future__ import annotations

import subprocess
import sys

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from autogen.commands import tasks
from autogen.commands.report import task_doc
from autogen.emit.llama import emit_llama
from autogen.emit.llama_profiles import ctx_tag, profile_clashes, profile_ids, profile_owners
from autogen.ids import slugify
from autogen.router.assemble import _groups
from autogen.router.validate import validate_text
from autogen.settings.schema import Group, Override, Profile, Settings
from tests.builders import HEAD, context, meta
from tests.gguf_fixtures import Q, write_gguf
from tests.runs import generate

GIB = 1 << 30
BUDGET = 11.5
MM = "/models/mmproj-F16.gguf"


def tier_override(*tiers: int, **kw) -> Override:
    return Override(match="*", ctx_profiles=tiers, **kw)


def plan_of(ctx):
    plan = emit_llama(ctx)
    return plan, {e.id: e for e in plan.entries}


def md(entry) -> dict:
    return dict(entry.metadata)


def flag(argv, name):
    return argv[argv.index(name) + 1] if name in argv else None


class TestNames:
    @pytest.mark.parametrize("tokens, tag", [(65536, "64k"), (131072, "128k"), (1024, "1k"), (3072, "3k"),
                                             (1048576, "1m"), (2097152, "2m"), (100000, "100000"),
                                             (1536, "1536"), (1572864, "1536k"), (1, "1")])
    def test_ctx_tag_is_k_or_m_for_exact_multiples_else_the_number(self, tokens, tag):
        assert ctx_tag(tokens) == tag

    @pytest.mark.parametrize("name, slug", [("Long Context", "long-context"), ("  Fast!! ", "fast"),
                                            ("Q8/KV_cache", "q8-kv-cache"), ("coding", "coding"), ("ÄÖ", "")])
    def test_slugify_follows_the_reference(self, name, slug):
        assert slugify(name) == slug

    def test_ids_in_order_tiers_model_variants_default_variants_vision(self):
        ctx = context(override=tier_override(65536, 131072, 65536, profiles=(Profile(name="Coding"),)),
                      settings=Settings(roots=("/m",), default_profiles=(Profile(name="long"), Profile(name="Vision"))),
                      mmproj=MM)
        assert profile_ids(ctx.row, ctx.override, ctx.settings) == [
            "llama-8b-64k", "llama-8b-128k", "llama-8b-coding", "llama-8b-long", "llama-8b-vision"]

    def test_no_override_and_no_default_variants_means_no_profiles(self):
        ctx = context()
        assert profile_ids(ctx.row, None, ctx.settings) == []
        assert [e.id for e in emit_llama(ctx).entries] == ["llama-8b"]

    def test_profile_clashes_keeps_only_taken_candidate_ids(self):
        ctx = context(override=tier_override(65536, profiles=(Profile(name="fast"),)))
        taken = {"llama-8b", "llama-8b-fast", "other-model", "llama-8b-128k"}
        assert profile_clashes(ctx.row, ctx.override, ctx.settings, taken) == {"llama-8b-fast": ""}

    def test_names_and_clashes_load_without_the_emitter(self):
        """The task graph computes them for every model on every run, emitted or not."""
        code = "import sys, autogen.emit.llama_profiles; print(sorted(m for m in sys.modules if 'llama' in m))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert "'autogen.emit.llama'" not in out.stdout and "autogen.emit.llama_profiles" in out.stdout

    def test_an_id_several_models_make_goes_to_the_model_that_sorts_first(self):
        """Model `a` + variant `b-long` and model `a-b` + variant `long` both make `a-b-long`."""
        ctx = context()
        s = ctx.settings
        a = (attrs.evolve(ctx.row, id="a"), Override(match="*", profiles=(Profile(name="b-long"),)))
        ab = (attrs.evolve(ctx.row, id="a-b"), Override(match="*", profiles=(Profile(name="long"), Profile(name="x"))))
        owners = profile_owners([ab, a], s)
        assert owners == {"a-b-long": "a"}  # only shared ids; input order does not matter
        assert profile_clashes(*ab, s, {"a", "a-b"}, owners) == {"a-b-long": "a"}
        assert profile_clashes(*a, s, {"a", "a-b"}, owners) == {}
        assert profile_clashes(*ab, s, {"a", "a-b", "a-b-long"}, owners) == {"a-b-long": ""}  # a model id first


class TestSizing:
    def test_each_tier_is_pinned_and_within_the_budget(self):
        _, entries = plan_of(context(override=tier_override(65536, 131072)))
        for tokens, pid in ((65536, "llama-8b-64k"), (131072, "llama-8b-128k")):
            e = entries[pid]
            assert (md(e)["ctx"], flag(e.argv, "-c"), e.capabilities.context) == (tokens, str(tokens), tokens)
            assert 0 < md(e)["est_vram_gb"] <= BUDGET
            assert e.argv[:len(HEAD)] == HEAD

    @settings(max_examples=60, deadline=None)
    @given(budget=st.floats(4.0, 48.0), tiers=st.lists(st.sampled_from([4096, 16384, 65536, 100000, 131072]),
                                                       max_size=3),
           moe=st.booleans(), kv=st.sampled_from([None, "f16", "q8_0", "q4_0"]), parallel=st.integers(1, 4))
    def test_every_profile_fits_its_budget_and_keeps_its_context(self, budget, tiers, moe, kv, parallel):
        m = meta(arch="qwen3moe", block_count=48, embedding_length=2048, head_count_kv=(4,) * 48,
                 vocab_size=151936, expert_count=128, expert_used_count=8) if moe else meta()
        ov = Override(match="*", ctx_profiles=tuple(tiers), flash_attn="on",
                      profiles=(Profile(name="v", kv_type=kv, parallel=parallel, ctx=32768),))
        plan, entries = plan_of(context(m, size_gb=17.3 if moe else 4.58, budget=budget, override=ov))
        for e in plan.entries:
            assert md(e)["est_vram_gb"] <= budget + 0.005, e.id
        for t in set(tiers):
            assert md(entries[f"llama-8b-{ctx_tag(t)}"])["ctx"] == t
        v = entries["llama-8b-v"]
        assert (md(v)["ctx"], flag(v.argv, "-c")) == (32768, str(32768 * parallel))

    def test_a_tier_that_does_not_fit_offloads_layers_and_says_so(self):
        _, entries = plan_of(context(override=tier_override(131072)))
        e = entries["llama-8b-128k"]
        assert int(flag(e.argv, "-ngl")) < 33 and md(e)["est_ram_gb"] > 0
        assert "ctx pinned" in e.comment[0] and e.comment[-1] == "profile of llama-8b: ctx tier 131072"

    def test_moe_tier_moves_experts_to_the_cpu_within_the_budget(self):
        m = meta(arch="qwen3moe", context_length=131072, block_count=48, embedding_length=2048,
                 head_count_kv=(4,) * 48, vocab_size=151936, expert_count=128, expert_used_count=8)
        _, entries = plan_of(context(m, size_gb=17.282, override=tier_override(131072)))
        e = entries["llama-8b-128k"]
        assert md(e)["ctx"] == 131072 and int(flag(e.argv, "--n-cpu-moe")) > 0
        assert md(e)["est_vram_gb"] <= BUDGET

    def test_tiers_use_the_models_own_budget(self):
        _, entries = plan_of(context(budget=6.0, override=tier_override(65536, vram_budget_gb=6.0)))
        assert md(entries["llama-8b-64k"])["est_vram_gb"] <= 6.0
        assert "of 6 GiB" in entries["llama-8b-64k"].comment[1]

    def test_a_tier_drops_the_overrides_ctx_flag_but_keeps_the_rest(self):
        ov = tier_override(65536, extra_args=("--ctx-size=4096", "--jinja"))
        _, entries = plan_of(context(override=ov))
        assert entries["llama-8b"].argv[-3:] == ("--ctx-size", "4096", "--jinja")
        tier = entries["llama-8b-64k"].argv
        assert "--ctx-size" not in tier and flag(tier, "-c") == "65536" and tier[-1] == "--jinja"

    def test_a_tier_above_the_trained_context_is_refused(self):
        plan, entries = plan_of(context(meta(context_length=32768), override=tier_override(65536, 16384)))
        assert list(entries) == ["llama-8b", "llama-8b-16k"]
        assert [(s.id, s.reason) for s in plan.skips] == [
            ("llama-8b-64k", "ctx tier 65536 is above the trained context 32768")]

    def test_a_variant_budget_sizes_that_profile_only(self):
        ov = Override(match="*", profiles=(Profile(name="big", vram_budget_gb=24.0, ctx=131072),
                                           Profile(name="small", ctx=131072)))
        _, entries = plan_of(context(override=ov))
        big, small = entries["llama-8b-big"], entries["llama-8b-small"]
        assert flag(big.argv, "-ngl") == "33" and BUDGET < md(big)["est_vram_gb"] <= 24.0
        assert int(flag(small.argv, "-ngl")) < 33 and md(small)["est_vram_gb"] <= BUDGET


class TestInheritance:
    def test_variant_kv_type_beats_the_overrides(self):
        ov = Override(match="*", kv_type="q4_0", flash_attn="on",
                      profiles=(Profile(name="q8", kv_type="q8_0"), Profile(name="same")))
        _, entries = plan_of(context(override=ov))
        assert flag(entries["llama-8b-q8"].argv, "-ctk") == "q8_0" and md(entries["llama-8b-q8"])["kv_type"] == "q8_0"
        assert flag(entries["llama-8b-same"].argv, "-ctk") == "q4_0"

    def test_unset_variant_fields_inherit_override_then_settings(self):
        s = Settings(roots=("/m",), threads=8, flash_attn="on")
        ov = Override(match="*", ctx=16384, parallel=2, flash_attn="auto",
                      profiles=(Profile(name="fast", parallel=4),))
        _, entries = plan_of(context(settings=s, override=ov))
        argv = entries["llama-8b-fast"].argv
        assert (flag(argv, "-c"), flag(argv, "--parallel"), flag(argv, "-fa"), flag(argv, "-t")) == (
            str(4 * 16384), "4", "auto", "8")

    def test_variant_extra_args_are_appended_and_replace_the_same_flag(self):
        ov = Override(match="*", extra_args=("-ngl", "10", "--jinja", "-c", "8192"),
                      profiles=(Profile(name="gpu", extra_args=("--n-gpu-layers=20",)),
                                Profile(name="ctx", ctx=4096)))
        _, entries = plan_of(context(override=ov))
        gpu = entries["llama-8b-gpu"].argv
        assert gpu[len(HEAD):] == ("-fit", "off", "--jinja", "-c", "8192", "--n-gpu-layers", "20")
        assert md(entries["llama-8b-gpu"])["ngl"] == 20
        ctx_only = entries["llama-8b-ctx"].argv
        assert ctx_only.count("-c") == 1 and flag(ctx_only, "-c") == "4096" and flag(ctx_only, "-ngl") == "10"

    def test_unlisted_is_the_variants_own_and_tiers_follow_the_model(self):
        ov = Override(match="*", unlisted=True, ctx_profiles=(65536,),
                      profiles=(Profile(name="shown"), Profile(name="hidden", unlisted=True)))
        _, entries = plan_of(context(override=ov))
        assert {k: e.unlisted for k, e in entries.items()} == {
            "llama-8b": True, "llama-8b-64k": True, "llama-8b-shown": False, "llama-8b-hidden": True}

    def test_a_model_variant_shadows_a_default_variant_of_the_same_name(self):
        s = Settings(roots=("/m",), default_profiles=(Profile(name="Long", ctx=131072), Profile(name="fast")))
        ov = Override(match="*", profiles=(Profile(name="long", ctx=65536),))
        plan, entries = plan_of(context(settings=s, override=ov))
        assert list(entries) == ["llama-8b", "llama-8b-long", "llama-8b-fast"] and not plan.skips
        assert md(entries["llama-8b-long"])["ctx"] == 65536

    def test_profile_notes_follow_the_models_for_swapgen_show(self):
        plan, _ = plan_of(context(override=tier_override(65536)))
        i = plan.notes.index("profile llama-8b-64k (ctx tier 65536):")
        assert any("ctx 65536: ctx pinned" in n for n in plan.notes[i:])


class TestRefusals:
    def test_a_variant_named_like_a_tier_is_refused_not_duplicated(self):
        ov = tier_override(65536, profiles=(Profile(name="64K"),))
        plan, entries = plan_of(context(override=ov))
        assert [e.id for e in plan.entries].count("llama-8b-64k") == 1 and md(entries["llama-8b-64k"])["ctx"] == 65536
        assert [(s.id, s.reason) for s in plan.skips] == [
            ("llama-8b-64k", "profile '64K' clashes with ctx tier 65536 of this model (same id)")]

    def test_two_variants_of_one_slug_keep_the_first(self):
        ov = Override(match="*", profiles=(Profile(name="Fast Mode", ctx=8192), Profile(name="fast_mode")))
        plan, entries = plan_of(context(override=ov))
        assert md(entries["llama-8b-fast-mode"])["ctx"] == 8192
        assert plan.skips[0].reason == "profile 'fast_mode' clashes with profile 'Fast Mode' of this model (same id)"

    def test_a_name_taken_by_another_model_is_refused(self):
        ctx = attrs.evolve(context(override=tier_override(65536, profiles=(Profile(name="x"),))),
                           taken_ids=frozenset({"llama-8b-x", "llama-8b-64k"}))
        plan, entries = plan_of(ctx)
        assert list(entries) == ["llama-8b"]
        assert [(s.id, s.reason) for s in plan.skips] == [
            ("llama-8b-64k", "ctx tier 65536 clashes with another model's id"),
            ("llama-8b-x", "profile 'x' clashes with another model's id")]

    def test_a_name_another_models_profile_keeps_is_refused_naming_that_model(self):
        ctx = attrs.evolve(context(override=tier_override(65536, profiles=(Profile(name="x"),))),
                           taken_ids=frozenset({"llama-8b-x", "llama-8b-64k"}), taken_by=(("llama-8b-x", "llama"),))
        plan, _entries = plan_of(ctx)
        assert [(s.id, s.reason) for s in plan.skips] == [
            ("llama-8b-64k", "ctx tier 65536 clashes with another model's id"),
            ("llama-8b-x", "profile 'x' clashes with a profile of model 'llama'")]

    def test_a_name_without_letters_or_digits_is_refused(self):
        plan, entries = plan_of(context(override=Override(match="*", profiles=(Profile(name="!!"),))))
        assert list(entries) == ["llama-8b"]
        assert plan.skips[0].reason == "profile name '!!' has no letter or digit to make an id of"

    def test_profiles_of_an_unsizable_model_are_not_tried(self):
        plan = emit_llama(context(meta(block_count=0), override=tier_override(65536)))
        assert not plan.entries and [s.id for s in plan.skips] == ["llama-8b"]


class TestClassesWithoutProfiles:
    def test_embedding_models_get_no_profiles_and_say_why(self):
        m = meta(arch="bert", pooling_type=1, context_length=512, block_count=12, embedding_length=768,
                 head_count=12, head_count_kv=(12,) * 12, key_length=64, value_length=64, vocab_size=30522)
        s = Settings(roots=("/m",), default_profiles=(Profile(name="long"),))
        _plan, entries = plan_of(context(m, size_gb=0.2, settings=s))
        assert list(entries) == ["llama-8b"] and not any("ignored" in c for c in entries["llama-8b"].comment)
        _, entries = plan_of(context(m, size_gb=0.2, settings=s, override=tier_override(1024)))
        assert list(entries) == ["llama-8b"]
        assert entries["llama-8b"].comment[-1] == ("ctx_profiles and profiles of the override are ignored: "
                                                   "embedding models have none")


class TestVision:
    def test_vision_profile_puts_the_projector_on_the_gpu_and_takes_images(self):
        s = Settings(roots=("/m",), default_profiles=(Profile(name="vision"),))
        ctx = context(budget=8.0, settings=s, mmproj=MM, mmproj_bytes=int(0.8 * GIB))
        _, entries = plan_of(ctx)
        base, vision = entries["llama-8b"], entries["llama-8b-vision"]
        assert "--no-mmproj-offload" in base.argv  # the tight budget keeps the default on the CPU
        assert flag(vision.argv, "--mmproj") == MM and "--no-mmproj-offload" not in vision.argv
        assert vision.capabilities.inputs == ("text", "image")
        assert md(vision)["est_vram_gb"] <= 8.0 and md(vision)["ctx"] < md(base)["ctx"]
        assert "projector mmproj-F16.gguf on the GPU" in vision.comment

    def test_a_default_vision_variant_passes_text_only_models_silently(self):
        s = Settings(roots=("/m",), default_profiles=(Profile(name="vision"),))
        plan, entries = plan_of(context(settings=s))
        assert list(entries) == ["llama-8b"] and not plan.skips

    def test_a_models_own_vision_variant_without_projector_is_a_skip(self):
        plan, _ = plan_of(context(override=Override(match="*", profiles=(Profile(name="Vision"),))))
        assert [(s.id, s.reason) for s in plan.skips] == [("llama-8b-vision", "no projector to put on the GPU")]

    def test_vision_variant_may_pin_cpu_and_model_wide_none_drops_it(self):
        ov = Override(match="*", profiles=(Profile(name="vision", mmproj="cpu", ctx=8192),))
        _, entries = plan_of(context(override=ov, mmproj=MM))
        assert "--no-mmproj-offload" in entries["llama-8b-vision"].argv
        s = Settings(roots=("/m",), default_profiles=(Profile(name="vision"),))
        _, entries = plan_of(context(override=Override(match="*", mmproj="none"), settings=s, mmproj=MM))
        assert list(entries) == ["llama-8b"]

    def test_the_vision_variants_own_file_goes_on_the_gpu_and_is_checked(self):
        ov = Override(match="*", profiles=(Profile(name="vision", mmproj="/p/mm.gguf"),))
        _, entries = plan_of(context(override=ov, mmproj=MM))
        argv = entries["llama-8b-vision"].argv
        assert flag(argv, "--mmproj") == "/p/mm.gguf" and "--no-mmproj-offload" not in argv
        ov = Override(match="*", profiles=(Profile(name="vision", mmproj="/p/${HOME}.gguf"),))
        plan, entries = plan_of(context(override=ov, mmproj=MM))
        assert list(entries) == ["llama-8b"] and plan.skips[0].id == "llama-8b-vision"
        assert "cannot be passed safely" in plan.skips[0].reason

    def test_a_projector_pinned_by_path_goes_on_the_gpu(self):
        ov = Override(match="*", mmproj="/other/mmproj.gguf", profiles=(Profile(name="vision"),))
        _, entries = plan_of(context(override=ov))
        argv = entries["llama-8b-vision"].argv
        assert flag(argv, "--mmproj") == "/other/mmproj.gguf" and "--no-mmproj-offload" not in argv


def test_groups_follow_the_models_base_id():
    settings = Settings(roots=("/m",), groups=(Group(name="long", match=("*-64k",)), Group(name="big", match=("qwen*",))))
    members = [("qwen-8b", None, "qwen-8b"), ("qwen-8b-64k", None, "qwen-8b"), ("llama-64k", None, "llama-64k")]
    lines = _groups(settings, members)
    text = "\n".join(lines)
    assert text.index('"llama-64k"') < text.index('"big"') < text.index('"qwen-8b"') < text.index('"qwen-8b-64k"')


# -- the pipeline ---------------------------------------------------------------------------------

def add_llama(root, rel, *, ctx=131072, pooling=None, arch="llama"):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    kv = {"{arch}.block_count": 4, "{arch}.context_length": ctx, "{arch}.embedding_length": 256,
          "{arch}.attention.head_count": 8, "{arch}.attention.head_count_kv": 2, "{arch}.feed_forward_length": 1024}
    if pooling is not None:
        kv["{arch}.pooling_type"] = pooling
    tensors = [("token_embd.weight", (256, 1024), Q.F16)]
    tensors += [(f"blk.{i}.attn_q.weight", (256, 256), Q.F16) for i in range(4)]
    return write_gguf(path, arch, kv=kv, tensors=tensors, sparse_size=2 * GIB)


SETTINGS = """roots: [models]
vram_budget_gb: 8
card_vram_gb: 0
backends:
  - {id: llama, kind: llama, path: /opt/llama/llama-server, default: true}
  - {id: vllm, kind: vllm, path: /opt/vllm/bin/vllm, version: "0.11.0"}
default_variants: [{name: long, ctx: 131072}]
groups: [{name: chat, match: ["alpha*"]}]
overrides:
  - {match: "*Alpha*", ctx_variants: [65536], variants: [{name: coding, kv_type: q8_0}]}
  - {match: "*Beta*", variants: [{name: fast, parallel: 2}]}
  - {match: "*Gamma*", backend: vllm, vllm_tokenizer: "Qwen/Qwen3-8B", ctx_variants: [65536]}
"""


@pytest.fixture
def library(tmp_path):
    root = tmp_path / "models"
    add_llama(root, "pub/A-GGUF/Alpha-Q4_K_M.gguf")
    add_llama(root, "pub/B-GGUF/Beta-Q4_K_M.gguf")
    add_llama(root, "pub/C-GGUF/Gamma-Q4_K_M.gguf")
    add_llama(root, "pub/E-GGUF/Embed-F16.gguf", ctx=512, pooling=1, arch="bert")
    (tmp_path / "swapgen.yaml").write_text(SETTINGS)
    return tmp_path


def run(folder):
    rc, graph = generate(folder / "swapgen.yaml")
    return rc, graph.stats, (folder / "config.yaml").read_text()


class TestPipeline:
    def test_config_carries_every_profile_and_stays_valid(self, library):
        rc, stats, text = run(library)
        assert rc == 0 and stats["emitted"] == 4
        assert validate_text(text, "config.yaml") == []
        data = YAML(typ="safe").load(text)
        assert sorted(data["models"]) == ["alpha-q4_k_m", "alpha-q4_k_m-64k", "alpha-q4_k_m-coding",
                                          "alpha-q4_k_m-long", "beta-q4_k_m", "beta-q4_k_m-fast", "beta-q4_k_m-long",
                                          "embed-f16", "gamma-q4_k_m"]
        assert data["groups"]["chat"]["members"] == ["alpha-q4_k_m", "alpha-q4_k_m-64k", "alpha-q4_k_m-coding",
                                                     "alpha-q4_k_m-long"]
        assert "# ctx_profiles and profiles of the override are ignored: vLLM entries have no profiles" in text

    def test_editing_one_variant_re_emits_exactly_that_model(self, library):
        run(library)
        settings = library / "swapgen.yaml"
        settings.write_text(settings.read_text().replace("{name: fast, parallel: 2}", "{name: fast, parallel: 3}"))
        rc, stats, text = run(library)
        assert rc == 0 and stats["emitted"] == 1 and stats["config"] == "written"
        cmd = YAML(typ="safe").load(text)["models"]["beta-q4_k_m-fast"]["cmd"]
        assert "--parallel 3" in cmd

    def test_an_unrelated_new_model_re_emits_only_itself(self, library):
        run(library)
        add_llama(library / "models", "pub/D-GGUF/Delta-Q4_K_M.gguf")
        rc, stats, text = run(library)
        assert rc == 0 and stats["emitted"] == 1 and "delta-q4_k_m-long" in text

    def test_a_new_model_taking_a_profile_id_refuses_that_profile(self, library):
        run(library)
        add_llama(library / "models", "x/alpha-q4_k_m-coding.gguf")
        rc, stats, text = run(library)
        assert rc == 0 and stats["emitted"] == 2
        assert validate_text(text, "config.yaml") == []
        assert '# SKIPPED "alpha-q4_k_m-coding": profile \'coding\' clashes with another model\'s id' in text
        assert text.count('\n  "alpha-q4_k_m-coding":\n') == 1

    def test_a_bad_cache_type_in_extra_args_skips_that_model_and_the_run_goes_on(self, library):
        settings = library / "swapgen.yaml"
        settings.write_text(settings.read_text().replace(
            '{match: "*Beta*", variants:', '{match: "*Beta*", extra_args: ["-ctk", "Q8_0"], variants:'))
        rc, _stats, text = run(library)
        assert rc == 0 and validate_text(text, "config.yaml") == []
        assert "# SKIPPED \"beta-q4_k_m\": extra_args: -ctk 'Q8_0': expected f32, f16, bf16, q8_0" in text
        models = YAML(typ="safe").load(text)["models"]
        assert "alpha-q4_k_m" in models and not any(m.startswith("beta") for m in models)

    def test_doit_list_names_the_profiles(self, library):
        graph = tasks.load(str(library / "swapgen.yaml"))
        try:
            docs = {job.row.id: task_doc(graph.library, job) for job in graph.library.jobs}
        finally:
            graph.close()
        assert docs["alpha-q4_k_m"].endswith("(+ profiles: -64k, -coding, -long)")
        assert docs["beta-q4_k_m"].endswith("(+ profiles: -fast, -long)")
        assert "profiles" not in docs["gamma-q4_k_m"] and "profiles" not in docs["embed-f16"]


CLASHING = """roots: [models]
vram_budget_gb: 8
card_vram_gb: 0
backends:
  - {id: llama, kind: llama, path: /opt/llama/llama-server, default: true}
overrides:
  - {match: "*/A.gguf", variants: [{name: b-long, ctx: 8192}]}
  - {match: "*/A-B.gguf", variants: [{name: long, ctx: 16384}]}
"""
SKIP_LINE = '# SKIPPED "a-b-long": profile \'long\' clashes with a profile of model \'a\''


class TestProfilesOfTwoModels:
    def test_a_shared_profile_id_is_written_once_and_the_other_model_says_why(self, tmp_path):
        add_llama(tmp_path / "models", "x/A.gguf")
        add_llama(tmp_path / "models", "y/A-B.gguf")
        (tmp_path / "swapgen.yaml").write_text(CLASHING)
        rc, stats, text = run(tmp_path)
        assert rc == 0 and stats["emitted"] == 2
        assert validate_text(text, "config.yaml") == []
        assert text.count(SKIP_LINE) == 1 and text.count("# SKIPPED") == 1
        data = YAML(typ="safe").load(text)
        assert sorted(data["models"]) == ["a", "a-b", "a-b-long"]
        cmd = data["models"]["a-b-long"]["cmd"]
        assert "/x/A.gguf\n" in cmd and "\n  -c 8192\n" in cmd  # model a's variant

    def test_the_clash_re_emits_only_the_model_that_loses_the_id(self, tmp_path):
        add_llama(tmp_path / "models", "y/A-B.gguf")
        (tmp_path / "swapgen.yaml").write_text(CLASHING)
        rc, _, text = run(tmp_path)
        assert rc == 0 and "/y/A-B.gguf\n" in YAML(typ="safe").load(text)["models"]["a-b-long"]["cmd"]
        add_llama(tmp_path / "models", "x/A.gguf")
        rc, stats, text = run(tmp_path)
        assert rc == 0 and stats["emitted"] == 2 and text.count(SKIP_LINE) == 1  # a is new, a-b loses the id
        assert "/x/A.gguf\n" in YAML(typ="safe").load(text)["models"]["a-b-long"]["cmd"]
        rc, stats, _ = run(tmp_path)
        assert rc == 0 and stats["emitted"] == 0
