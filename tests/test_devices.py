"""Multi-GPU hosts (issue 11): the inventory (declared, or probed with fake tools), device pins
with the resolved build's vendor variables, budgets per device, vLLM tensor parallelism and
per-GPU utilization, llama-server layer splits, and a valid config through the whole pipeline."""

from __future__ import annotations

import json
import math
import stat

import attrs
import pytest
from ruamel.yaml import YAML

from autogen.commands import cli
from autogen.discovery.rows import ModelRow
from autogen.emit.dispatch import build_plan, global_inputs, model_inputs
from autogen.emit.vllm import emit_vllm
from autogen.errors import ModelError
from autogen.flags.vllm import vllm_tensor_parallel
from autogen.metadata.cache import MetaCache
from autogen.metadata.kvcost import KvCost
from autogen.metadata.model_meta import ModelMeta
from autogen.numfmt import GIB
from autogen.resolve import devices, gpus
from autogen.resolve.backends import Resolved
from autogen.resolve.context import EmitContext
from autogen.resolve.devices import Placement, place
from autogen.resolve.job import budget_for, make_job
from autogen.router.validate import validate_text
from autogen.settings.schema import BackendRow, Gpu, Override, Settings
from autogen.sizing.vllm import size_vllm
from tests.gguf_fixtures import Q, write_gguf
from tests.runs import generate

RTX4090 = Gpu(index=0, vram_gb=24.0, name="RTX 4090", vendor="nvidia")
RTX3060 = Gpu(index=1, vram_gb=12.0, name="RTX 3060", vendor="nvidia")
RX7900 = Gpu(index=2, vram_gb=24.0, name="RX 7900 XTX", vendor="amd")
IGPU = Gpu(index=3, vram_gb=0.5, name="UHD 770", vendor="intel")
MIXED = (RTX4090, RTX3060, RX7900, IGPU)
PAIR = (RTX4090, RTX3060)

CUDA_ROW = BackendRow(id="llama-cuda", kind="llama", path="/opt/llama/cuda/llama-server", default=True,
                      build="cuda")
VK_ROW = BackendRow(id="llama-vulkan", kind="llama", path="/opt/llama/vk/llama-server", build="vulkan",
                    derived=True)
ROCM_ROW = BackendRow(id="llama-rocm", kind="llama", path="/opt/llama/rocm/llama-server", build="rocm",
                      derived=True)
CPU_ROW = BackendRow(id="llama-cpu", kind="llama", path="/opt/llama/cpu/llama-server", build="cpu", derived=True)
PLAIN_ROW = BackendRow(id="llama-own", kind="llama", path="/opt/own/llama-server", derived=True)
VLLM_ROW = BackendRow(id="vllm", kind="vllm", path="/opt/vllm/bin/vllm", version="0.11.0")


def settings_of(*overrides: Override, gpus=MIXED, backends=(CUDA_ROW, VK_ROW, ROCM_ROW, CPU_ROW, PLAIN_ROW),
                **kw) -> Settings:
    return Settings(roots=(), gpus=gpus, backends=backends, overrides=overrides, card_vram_gb=None, **kw)


def llama_kv(blocks=4, ctx=8192):
    return {"{arch}.block_count": blocks, "{arch}.context_length": ctx, "{arch}.embedding_length": 256,
            "{arch}.attention.head_count": 8, "{arch}.attention.head_count_kv": 2,
            "{arch}.feed_forward_length": 1024}


def gguf_model(tmp_path, name="m.gguf", size=GIB):
    path = write_gguf(tmp_path / name, "llama", kv=llama_kv(),
                      tensors=[("token_embd.weight", (256, 1024), Q.F16)], sparse_size=size)
    meta = MetaCache(str(tmp_path / "cache")).meta(str(path), hf=False)
    row = ModelRow(id=path.stem.lower(), format="gguf", path=str(path), size_bytes=size)
    return row, meta


def planned(settings, row, meta):
    job = make_job(settings, row, meta, None, gpus.card_vram_gb(settings))
    return job, build_plan(job, meta, settings)


# ---------------------------------------------------------------------------------------------
# inventory


def fake_tool(folder, name, stdout="", code=0):
    path = folder / name
    assert "'" not in stdout
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{stdout}'\nexit {code}\n")  # builtins only: PATH is bare
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def fake_host(tmp_path, monkeypatch):
    """An empty PATH of fake tools, no NVML, an empty sysfs; the probe cache cleared around."""
    bin_dir, drm = tmp_path / "bin", tmp_path / "drm"
    bin_dir.mkdir()
    drm.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(gpus, "_probe_nvml", lambda: None)
    monkeypatch.setattr(gpus, "SYSFS_DRM", str(drm))
    gpus.probe_gpus.cache_clear()
    yield bin_dir, drm
    gpus.probe_gpus.cache_clear()


def sysfs_card(drm, name, total_bytes):
    device = drm / name / "device"
    device.mkdir(parents=True)
    (device / "mem_info_vram_total").write_text(f"{total_bytes}\n")


ROCM_JSON = json.dumps({"card0": {"VRAM Total Memory (B)": str(24 * GIB), "VRAM Total Used Memory (B)": "0"},
                        "system": {"Driver version": "6.8"}})


class TestProbe:
    def test_mixed_host_numbers_nvidia_first_then_amd(self, fake_host):
        bin_dir, _ = fake_host
        fake_tool(bin_dir, "nvidia-smi", "1, NVIDIA GeForce RTX 3060, 12288\n0, NVIDIA GeForce RTX 4090, 24564")
        fake_tool(bin_dir, "rocm-smi", ROCM_JSON)
        found = gpus.probe_gpus()
        assert [(g.index, g.vendor) for g in found] == [(0, "nvidia"), (1, "nvidia"), (2, "amd")]
        assert found[0].name == "NVIDIA GeForce RTX 4090" and found[0].vram_gb == pytest.approx(24564 / 1024)
        assert found[2].vram_gb == 24.0

    def test_sysfs_answers_when_rocm_smi_is_absent_and_keeps_small_cards(self, fake_host):
        _, drm = fake_host
        sysfs_card(drm, "card1", 16 * GIB)
        sysfs_card(drm, "card0", 512 << 20)  # an APU's carve-out: counted by HIP, never eligible
        (drm / "card0-DP-1").mkdir()
        found = gpus.probe_gpus()
        assert [(g.index, g.vram_gb, g.vendor) for g in found] == [(0, 0.5, "amd"), (1, 16.0, "amd")]
        assert gpus.eligible(found) == (found[1],)

    def test_broken_tools_fall_through_to_nothing(self, fake_host):
        bin_dir, _ = fake_host
        fake_tool(bin_dir, "nvidia-smi", "NVIDIA-SMI has failed", code=9)
        fake_tool(bin_dir, "rocm-smi", "not json {")
        assert gpus.probe_gpus() == ()

    def test_garbage_lines_are_skipped_not_fatal(self, fake_host):
        bin_dir, _ = fake_host
        fake_tool(bin_dir, "nvidia-smi", "0, RTX 4090, 24564\nwhat, is, this\n1, RTX 3060")
        fake_tool(bin_dir, "rocm-smi", json.dumps({"card0": {"VRAM Total Memory (B)": "lots"}, "card1": []}))
        assert [g.name for g in gpus.probe_gpus()] == ["RTX 4090"]

    def test_probed_once_per_process(self, fake_host, monkeypatch):
        calls = []
        monkeypatch.setattr(gpus, "_probe_nvidia_smi", lambda: calls.append(1) or (RTX4090,))
        gpus.probe_gpus()
        gpus.probe_gpus()
        assert calls == [1]

    def test_pooled_card_counts_eligible_gpus_only(self):
        assert gpus.card_vram_gb(settings_of()) == 60.0
        assert gpus.card_vram_gb(settings_of(gpus=(IGPU,))) is None

    def test_declared_inventory_is_never_probed(self):
        def boom():
            raise AssertionError("probed")

        assert gpus.inventory(settings_of(gpus=(RTX3060, RTX4090)), probe=boom) == (RTX4090, RTX3060)


class TestRememberedInventory:
    """The probed inventory is kept in cache_dir per boot: one probe per boot, not per run."""

    @pytest.fixture
    def boot(self, tmp_path, monkeypatch):
        path = tmp_path / "boot_id"
        path.write_text("4e372466-70ea-4949-8daf-9c4aca556f93\n")
        monkeypatch.setattr(gpus, "BOOT_ID", str(path))
        gpus._remembered.cache_clear()
        yield path
        gpus._remembered.cache_clear()

    @staticmethod
    def counting(found=(RTX4090, IGPU)):
        calls = []
        return calls, lambda: calls.append(1) or found

    def test_probed_once_per_boot_across_runs(self, tmp_path, boot):
        calls, probe = self.counting()
        cache = str(tmp_path / "cache")
        assert gpus.remembered_gpus(cache, probe) == (RTX4090, IGPU)
        assert gpus.remembered_gpus(cache, probe) == (RTX4090, IGPU)
        assert calls == [1]
        assert json.loads((tmp_path / "cache" / gpus.GPU_CACHE_FILE).read_text())["boot_id"] == boot.read_text().strip()

    def test_a_reboot_probes_again(self, tmp_path, boot):
        calls, probe = self.counting()
        gpus.remembered_gpus(str(tmp_path), probe)
        boot.write_text("0b9c7a52-0000-4000-8000-000000000000\n")
        gpus.remembered_gpus(str(tmp_path), probe)
        assert calls == [1, 1]

    def test_removing_the_file_probes_again(self, tmp_path, boot):
        calls, probe = self.counting()
        gpus.remembered_gpus(str(tmp_path), probe)
        (tmp_path / gpus.GPU_CACHE_FILE).unlink()
        gpus.remembered_gpus(str(tmp_path), probe)
        assert calls == [1, 1]

    @pytest.mark.parametrize("text", ["{broken", "[]", '{"boot_id": "x"}', '{"gpus": [{"index": "a"}]}'])
    def test_an_unreadable_file_probes_again(self, tmp_path, boot, text):
        (tmp_path / gpus.GPU_CACHE_FILE).write_text(text.replace('"x"', json.dumps(boot.read_text().strip())))
        calls, probe = self.counting()
        assert gpus.remembered_gpus(str(tmp_path), probe) == (RTX4090, IGPU) and calls == [1]

    def test_without_a_boot_id_every_call_probes(self, tmp_path, monkeypatch):
        monkeypatch.setattr(gpus, "BOOT_ID", str(tmp_path / "absent"))
        calls, probe = self.counting()
        gpus.remembered_gpus(str(tmp_path), probe)
        gpus.remembered_gpus(str(tmp_path), probe)
        assert calls == [1, 1] and not (tmp_path / gpus.GPU_CACHE_FILE).exists()

    def test_no_gpu_is_remembered_too(self, tmp_path, boot):
        calls, probe = self.counting(())
        gpus.remembered_gpus(str(tmp_path), probe)
        assert gpus.remembered_gpus(str(tmp_path), probe) == () and calls == [1]

    def test_settings_without_gpus_read_the_stored_inventory(self, tmp_path, boot, monkeypatch):
        calls, probe = self.counting((RTX4090, RTX3060))
        monkeypatch.setattr(gpus, "probe_gpus", probe)
        settings = settings_of(gpus=None, cache_dir=str(tmp_path / "cache"))
        assert gpus.card_vram_gb(settings) == 36.0
        gpus._remembered.cache_clear()  # a later run (a new process)
        assert gpus.inventory(settings) == (RTX4090, RTX3060) and calls == [1]


# ---------------------------------------------------------------------------------------------
# placement and vendor variables


def placed(override=None, row=CUDA_ROW, engine="llama", inventory=MIXED, **kw) -> Placement:
    return place(settings_of(**kw), override, row, engine, inventory, vllm_tensor_parallel(override))


class TestVendorOf:
    @pytest.mark.parametrize("vendor, expected", [
        ("nvidia", "nvidia"), ("NVIDIA Corporation", "nvidia"), ("", "nvidia"),
        ("amd", "amd"), ("Advanced Micro Devices, Inc. [AMD/ATI]", "amd"), ("ATI Technologies Inc.", "amd"),
        ("AMD Radeon", "amd"), ("Intel Corporation", "intel"), ("intel", "intel"), ("Apple", "apple"),
        ("Moore Threads", "moore threads"), ("Corporation", "corporation"), ("Innovation Lab", "innovation lab"),
    ])
    def test_vendor_names_match_as_whole_words(self, vendor, expected):
        """"Intel Corporation" holds "ati" only inside a word: it is Intel, not AMD."""
        assert devices.vendor_of(Gpu(index=0, vram_gb=8.0, vendor=vendor)) == expected

    def test_an_intel_card_is_counted_as_intel_by_vulkan_pins(self):
        arc = Gpu(index=1, vram_gb=16.0, name="Arc A770", vendor="Intel Corporation")
        p = placed(Override(match="*", devices=(1,)), row=PLAIN_ROW, inventory=(RTX4090, arc))
        assert p.family == "vulkan" and p.env == ("GGML_VK_VISIBLE_DEVICES=1",)


class TestVendorVariables:
    @pytest.mark.parametrize("row, wanted, env", [
        (CUDA_ROW, (0, 1), ("CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=0,1")),
        (ROCM_ROW, (2,), ("HIP_VISIBLE_DEVICES=0",)),  # HIP counts AMD cards only
        (VK_ROW, (2, 0), ("GGML_VK_VISIBLE_DEVICES=2,0",)),  # Vulkan counts every card, any vendor
        (CPU_ROW, (1,), ()),
    ])
    def test_variables_follow_the_rows_build(self, row, wanted, env):
        p = placed(Override(match="*", devices=wanted), row=row)
        assert p.env == env and p.label == ",".join(map(str, wanted)) and p.why == "pinned"

    def test_names_are_upper_case_name_value_strings(self):
        for row in (CUDA_ROW, ROCM_ROW, VK_ROW):
            wanted = (2,) if row is ROCM_ROW else (0,)
            for e in placed(Override(match="*", devices=wanted), row=row).env:
                name, _, value = e.partition("=")
                assert name == name.upper() and value

    def test_cuda_build_refuses_an_amd_card(self):
        with pytest.raises(ModelError, match=r"'llama-cuda' is a cuda build: device 2: RX 7900 XTX 24 GiB amd is not an NVIDIA GPU"):
            placed(Override(match="*", devices=(0, 2)))

    @pytest.mark.parametrize("wanted, family, note", [
        ((1,), "cuda", "no variant; cuda inferred from nvidia GPUs"),
        ((2,), "rocm", "no variant; rocm inferred from amd GPUs"),
    ])
    def test_unknown_variant_is_inferred_from_the_cards_vendor(self, wanted, family, note):
        p = placed(Override(match="*", devices=wanted), row=PLAIN_ROW)
        assert p.family == family and p.why == f"pinned; {note}"

    def test_unknown_variant_on_mixed_vendors_is_refused(self):
        with pytest.raises(ModelError, match=r"mix amd and nvidia GPUs .* pin a vulkan build"):
            placed(Override(match="*", devices=(1, 2)), row=attrs.evolve(PLAIN_ROW, build="sycl"))

    def test_declared_gpu_without_vendor_counts_as_nvidia(self):
        bare = (Gpu(index=0, vram_gb=24.0), Gpu(index=1, vram_gb=24.0))
        assert placed(Override(match="*", devices=(1,)), row=None, inventory=bare).env[-1] == "CUDA_VISIBLE_DEVICES=1"


class TestRequest:
    def test_override_devices_win_over_the_settings_default(self):
        assert placed(Override(match="*", devices=(1,)), devices=(0,)).label == "1"
        p = placed(None, devices=(0, 0, 1))
        assert p.label == "0,1" and p.why == "settings devices"

    def test_empty_override_list_means_no_pin(self):
        assert placed(Override(match="*", devices=()), devices=(0,)) == devices.NO_PLACEMENT

    @pytest.mark.parametrize("wanted, named", [((7,), "devices 7 "), ((3, 9), "devices 3,9 ")])
    def test_unknown_or_ineligible_index_names_indices_and_inventory(self, wanted, named):
        with pytest.raises(ModelError) as err:
            placed(Override(match="*", devices=wanted))
        text = str(err.value)
        assert text.startswith(named) and "not in the GPU inventory" in text
        assert "0: RTX 4090 24 GiB nvidia" in text and "3: UHD 770 0.5 GiB intel (under 3 GiB)" in text

    def test_no_inventory_makes_every_pin_unknown(self):
        with pytest.raises(ModelError, match=r"devices 0 not in the GPU inventory \(none\)"):
            placed(Override(match="*", devices=(0,)), inventory=())


class TestDefaultPlacement:
    def test_vllm_goes_to_the_largest_card_lowest_index_on_ties(self):
        p = placed(None, row=VLLM_ROW, engine="vllm")
        assert p.label == "0" and p.why.startswith("largest card") and "cuda inferred" in p.why
        assert placed(None, row=VLLM_ROW, engine="vllm", inventory=(RTX3060, attrs.evolve(RTX4090, index=5))).label == "5"

    def test_vllm_tensor_parallel_pin_takes_the_largest_cards(self):
        p = placed(Override(match="*", vllm_tensor_parallel=2), row=VLLM_ROW, engine="vllm",
                   inventory=(RTX3060, attrs.evolve(RTX4090, index=2), attrs.evolve(RTX4090, index=3)))
        assert p.label == "2,3"

    @pytest.mark.parametrize("extra", [
        ("-tp", "2"), ("-tp=2",), ("--tensor-parallel-size", "2"), ("--tensor-parallel-size=2",),
        ("--tensor_parallel_size", "2"), ("--te", "2"), ("--enforce-eager", "-tp", "2"),
    ])
    def test_vllm_tensor_parallel_in_extra_args_takes_the_largest_cards(self, extra):
        """Every spelling `vllm_args.read_extra_args` reads, as vLLM's argparse does."""
        p = placed(Override(match="*", extra_args=extra), row=VLLM_ROW, engine="vllm",
                   inventory=(RTX3060, attrs.evolve(RTX4090, index=2), attrs.evolve(RTX4090, index=3)))
        assert p.label == "2,3" and p.env[-1] == "CUDA_VISIBLE_DEVICES=1,2"
        assert p.why.startswith("the 2 largest cards for extra_args --tensor-parallel-size 2")

    def test_extra_args_tensor_parallel_beats_the_override_field(self):
        """extra_args come last on vLLM's command line, so their value is the one vLLM runs with."""
        four = (RTX3060, *(attrs.evolve(RTX4090, index=i) for i in (2, 3, 4)))
        ov = Override(match="*", vllm_tensor_parallel=3, extra_args=("-tp", "2"))
        assert placed(ov, row=VLLM_ROW, engine="vllm", inventory=four).label == "2,3"
        ov = Override(match="*", vllm_tensor_parallel=2, extra_args=("-tp", "1"))
        p = placed(ov, row=VLLM_ROW, engine="vllm", inventory=PAIR)
        assert p.label == "0" and p.why.startswith("largest card")

    @pytest.mark.parametrize("extra", [("-tp", "two"), ("-tp", "0"), ("--tensor-parallel-size",)])
    def test_a_tensor_parallel_value_vllm_refuses_is_a_model_error(self, extra):
        with pytest.raises(ModelError, match="is not a GPU count"):
            placed(Override(match="*", extra_args=extra), row=VLLM_ROW, engine="vllm", inventory=PAIR)

    def test_extra_args_tensor_parallel_is_planned_on_two_cards_not_skipped(self, tmp_path):
        """Before, `-tp 2` placed the model on the largest card alone and sizing refused it as
        "needs 2 GPUs; devices 1 give 1"; now it runs on both cards, sized per GPU."""
        s = settings_of(Override(match="*", extra_args=("-tp", "2")), backends=(VLLM_ROW,),
                        gpus=(RTX3060, attrs.evolve(RTX4090, index=1), attrs.evolve(RTX4090, index=2)))
        (tmp_path / "q").mkdir()
        row = ModelRow(id="q", format="hf", path=str(tmp_path / "q"), size_bytes=8 * GIB)
        meta = ModelMeta(source="hf", arch="qwen3", context_length=40960, block_count=48, head_count=32,
                         head_count_kv=(8,) * 48, key_length=128, value_length=128)
        job, plan = planned(s, row, meta)
        assert job.error is None and plan.skips == ()
        (entry,) = plan.entries
        assert job.placement.label == "1,2" and entry.env[-1] == "CUDA_VISIBLE_DEVICES=1,2"
        assert job.budget_gb == 48.0 and entry.argv[-2:] == ("-tp", "2")
        assert "--tensor-parallel-size" not in entry.argv
        util = float(entry.argv[entry.argv.index("--gpu-memory-utilization") + 1])
        assert dict(entry.metadata)["est_vram_gb"] == pytest.approx(util * 48, abs=0.01)

    def test_single_gpu_host_and_other_engines_keep_the_drivers_default(self):
        assert placed(None, row=VLLM_ROW, engine="vllm", inventory=(RTX4090, IGPU)) == devices.NO_PLACEMENT
        assert placed(None) == devices.NO_PLACEMENT


# ---------------------------------------------------------------------------------------------
# budgets and the up-to-date key


class TestBudget:
    def test_small_and_big_card_pair(self):
        s = settings_of()
        assert budget_for(s, None, 60.0, (RTX3060,)) == 12.0
        assert budget_for(s, None, 60.0, PAIR) == 36.0
        assert budget_for(s, None, 60.0) == 60.0  # no devices: the pooled reading as before

    def test_settings_budget_caps_each_card_and_an_override_budget_wins(self):
        s = settings_of(vram_budget_gb=20.0)
        assert budget_for(s, None, 60.0, PAIR) == 32.0
        assert budget_for(s, Override(match="*", vram_budget_gb=30.0), 60.0, PAIR) == 30.0

    def test_job_budget_follows_its_devices(self, tmp_path):
        row, meta = gguf_model(tmp_path)
        s = settings_of(Override(match="*", devices=(1,)))
        job = make_job(s, row, meta, None, gpus.card_vram_gb(s))
        assert job.budget_gb == 12.0 and job.placement.label == "1"

    def test_key_holds_the_devices_and_the_inventory_entries_used(self, tmp_path):
        row, meta = gguf_model(tmp_path)

        def key(s):
            return model_inputs(make_job(s, row, meta, None, 36.0), s, "k")

        pin = Override(match="*", devices=(1,))
        base = key(settings_of(pin))
        assert key(settings_of(Override(match="*", devices=(0,)))) != base
        assert key(settings_of(pin, gpus=(RTX4090, attrs.evolve(RTX3060, vram_gb=16.0), RX7900))) != base
        assert key(settings_of(pin, gpus=(attrs.evolve(RTX4090, name="renamed"), RTX3060, RX7900))) == base

    def test_a_new_card_changes_no_shared_key(self):
        """Only the models placed on (or sized against) a card re-emit when the inventory changes."""
        assert global_inputs(settings_of()) == global_inputs(settings_of(gpus=PAIR, devices=(1,)))


# ---------------------------------------------------------------------------------------------
# whole plans: env on every entry, from the resolved row


class TestPlans:
    def test_pin_on_another_build_row_takes_that_rows_variables_not_the_stars(self, tmp_path):
        row, meta = gguf_model(tmp_path)
        s = settings_of(Override(match="*", backend="llama-vulkan", devices=(1,)))
        job, plan = planned(s, row, meta)
        entry = plan.entries[0]
        assert job.backend_id == "llama-vulkan" and entry.argv[0] == VK_ROW.path
        assert entry.env == ("GGML_VK_VISIBLE_DEVICES=1",)
        assert ("devices", "1") in entry.metadata
        assert "devices 1 (pinned): GGML_VK_VISIBLE_DEVICES=1" in entry.comment

    def test_auto_model_with_settings_devices_gets_the_star_rows_variables(self, tmp_path):
        row, meta = gguf_model(tmp_path)
        _, plan = planned(settings_of(devices=(0,)), row, meta)
        assert plan.entries[0].env == ("CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=0")

    def test_unknown_device_is_a_skip_with_the_reason(self, tmp_path):
        row, meta = gguf_model(tmp_path)
        _, plan = planned(settings_of(Override(match="*", devices=(4,))), row, meta)
        assert plan.entries == () and "devices 4 not in the GPU inventory" in plan.skips[0].reason

    def test_cpu_build_writes_no_variables_and_says_so(self, tmp_path):
        row, meta = gguf_model(tmp_path)
        _, plan = planned(settings_of(Override(match="*", backend="llama-cpu", devices=(0,))), row, meta)
        assert plan.entries[0].env == ()
        assert any("a cpu build takes no device pin" in c for c in plan.entries[0].comment)

    def test_no_devices_no_env(self, tmp_path):
        row, meta = gguf_model(tmp_path)
        _, plan = planned(settings_of(), row, meta)
        entry = plan.entries[0]
        assert entry.env == () and "devices" not in dict(entry.metadata)


# ---------------------------------------------------------------------------------------------
# llama-server over several cards


class TestLlamaSplit:
    def test_model_too_big_for_one_card_splits_layers_by_vram(self, tmp_path):
        row, meta = gguf_model(tmp_path, "big.gguf", size=30 * GIB)
        _, plan = planned(settings_of(Override(match="*", devices=(0, 1))), row, meta)
        entry = plan.entries[0]
        argv = entry.argv
        assert argv[argv.index("-sm") + 1] == "layer" and argv[argv.index("-ts") + 1] == "24,12"
        assert entry.env[-1] == "CUDA_VISIBLE_DEVICES=0,1" and dict(entry.metadata)["devices"] == "0,1"
        assert dict(entry.metadata)["ngl"] == meta.block_count + 1  # all layers, over both cards

    def test_model_that_fits_one_card_is_pinned_to_the_largest_alone(self, tmp_path):
        row, meta = gguf_model(tmp_path, "small.gguf", size=GIB)
        _, plan = planned(settings_of(Override(match="*", devices=(1, 0))), row, meta)
        entry = plan.entries[0]
        assert "-ts" not in entry.argv and "-sm" not in entry.argv
        assert entry.env[-1] == "CUDA_VISIBLE_DEVICES=0" and dict(entry.metadata)["devices"] == "0"
        assert any(c.startswith("devices 0 (pinned; fits card 0 alone)") for c in entry.comment)

    def test_tensor_split_in_extra_args_replaces_ours(self, tmp_path):
        row, meta = gguf_model(tmp_path, "big.gguf", size=30 * GIB)
        ov = Override(match="*", devices=(0, 1), extra_args=("--tensor-split", "1,1"))
        _, plan = planned(settings_of(ov), row, meta)
        argv = plan.entries[0].argv
        assert argv.count("--tensor-split") == 1 and "-ts" not in argv and argv[-1] == "1,1"


# ---------------------------------------------------------------------------------------------
# vLLM: tensor parallel, utilization per GPU

QWEN3_8B = KvCost(bytes_per_token=196_608, note="48 layers × 8 KV heads × (128+128) × 2 B")


def vllm_ctx(devs, *, override=None, budget=None, kv_heads=8, size_gb=8):
    meta = ModelMeta(source="hf", arch="qwen3", context_length=40960, head_count_kv=(kv_heads,) * 48)
    row = ModelRow(id="q", format="hf", path="/models/q", size_bytes=size_gb * GIB)
    backend = Resolved(engine="vllm", exe=VLLM_ROW.path, row=VLLM_ROW, why="pinned")
    return EmitContext(row=row, meta=meta, kv=QWEN3_8B, override=override or Override(match="*", ctx=8192),
                       settings=Settings(roots=()), backend=backend,
                       budget_gb=budget if budget is not None else sum(g.vram_gb for g in devs),
                       card_vram_gb=60.0, ttl=600, devices=tuple(devs))


def mib_ceil(x_bytes):
    return math.ceil(x_bytes / (1 << 20)) * (1 << 20)


class TestVllm:
    def test_two_devices_mean_tensor_parallel_two_and_utilization_of_the_smallest_card(self):
        sizing = size_vllm(vllm_ctx(PAIR), (0, 11, 0))
        kv = 196_608 * 8192  # 1.5 GiB over both ranks
        pin = mib_ceil(kv / 2 * 1.1 + GIB / 4)
        per_gpu = 8 / 2 + pin / GIB + 1.5
        assert sizing.tensor_parallel == 2 and sizing.kv_cache_bytes == pin
        assert sizing.footprint / GIB == pytest.approx(per_gpu)
        assert sizing.util == math.ceil(per_gpu / 12 * 100) / 100 == 0.55
        assert sizing.est_vram / GIB == pytest.approx(0.55 * 36)

    def test_argv_carries_tensor_parallel_and_the_env_both_cards(self):
        entry = emit_vllm(vllm_ctx(PAIR)).entries[0]
        argv = entry.argv
        assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
        assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.55"

    def test_fewer_kv_heads_than_ranks_are_replicated(self):
        one_head = size_vllm(vllm_ctx(PAIR, kv_heads=1), (0, 11, 0))
        assert one_head.kv_cache_bytes == mib_ceil(196_608 * 8192 * 1.1 + GIB / 4)

    def test_pinned_tensor_parallel_wins_and_too_many_ranks_is_a_skip(self):
        ov = Override(match="*", ctx=8192, vllm_tensor_parallel=1)
        assert size_vllm(vllm_ctx(PAIR, override=ov), (0, 11, 0)).tensor_parallel == 1
        plan = emit_vllm(vllm_ctx(PAIR, override=Override(match="*", vllm_tensor_parallel=4)))
        assert plan.entries == () and plan.skips[0].reason == "vllm_tensor_parallel 4 needs 4 GPUs; devices 0,1 give 2"

    def test_one_small_card_is_sized_against_that_card_not_the_pool(self):
        sizing = size_vllm(vllm_ctx((RTX3060,), size_gb=6), (0, 11, 0))
        per_gpu = 6 + mib_ceil(196_608 * 8192 * 1.1 + GIB / 4) / GIB + 1.5
        assert sizing.tensor_parallel == 1 and sizing.util == math.ceil(per_gpu / 12 * 100) / 100 == 0.79
        assert "of 12.0 GiB card 1" in sizing.util_note

    def test_no_devices_on_a_multi_gpu_host_places_vllm_on_the_largest_card(self, tmp_path):
        s = settings_of(gpus=(RTX3060, attrs.evolve(RTX4090, index=1)), backends=(VLLM_ROW,))
        (tmp_path / "q").mkdir()
        row = ModelRow(id="q", format="hf", path=str(tmp_path / "q"), size_bytes=8 * GIB)
        meta = ModelMeta(source="hf", arch="qwen3", context_length=40960, block_count=48, head_count=32,
                         head_count_kv=(8,) * 48, key_length=128, value_length=128)
        job, plan = planned(s, row, meta)
        entry = plan.entries[0]
        assert job.budget_gb == 24.0 and entry.env[-1] == "CUDA_VISIBLE_DEVICES=1"
        assert "--tensor-parallel-size" not in entry.argv
        util = float(entry.argv[entry.argv.index("--gpu-memory-utilization") + 1])
        assert dict(entry.metadata)["est_vram_gb"] == pytest.approx(util * 24, abs=0.01)


# ---------------------------------------------------------------------------------------------
# the whole pipeline and `swapgen show`

SETTINGS = """roots: [models]
card_vram_gb: null
gpus:
  - {index: 0, name: RTX 4090, vram_gb: 24, vendor: nvidia}
  - {index: 1, name: RTX 3060, vram_gb: 12, vendor: nvidia}
  - {index: 2, name: RX 7900 XTX, vram_gb: 24, vendor: amd}
devices: [1]
backends:
  - {id: llama-cuda, kind: llama, path: /opt/llama/cuda/llama-server, default: true, variant: cuda}
  - {id: llama-rocm, kind: llama, path: /opt/llama/rocm/llama-server, variant: rocm, build: true}
overrides:
  - {match: "*Big*", devices: [0, 1]}
  - {match: "*Amd*", backend: llama-rocm, devices: [2]}
  - {match: "*Lost*", devices: [5]}
"""


@pytest.fixture
def library(tmp_path):
    for name, size in (("Small", GIB), ("Big", 30 * GIB), ("Amd", GIB), ("Lost", GIB)):
        path = tmp_path / "models" / name / f"{name}-Q8_0.gguf"
        path.parent.mkdir(parents=True)
        write_gguf(path, "llama", kv=llama_kv(), tensors=[("token_embd.weight", (256, 1024), Q.F16)],
                   sparse_size=size)
    (tmp_path / "swapgen.yaml").write_text(SETTINGS)
    return tmp_path


class TestPipeline:
    def test_config_stays_valid_with_every_kind_of_pin(self, library):
        assert cli.main(["--settings", str(library / "swapgen.yaml")]) == 0
        text = (library / "config.yaml").read_text()
        assert validate_text(text, "config.yaml") == []
        models = YAML(typ="safe").load(text)["models"]
        assert models["small-q8_0"]["env"] == ["CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=1"]
        assert models["big-q8_0"]["env"][-1] == "CUDA_VISIBLE_DEVICES=0,1"
        assert "-sm layer\n  -ts 24,12" in models["big-q8_0"]["cmd"]
        assert models["amd-q8_0"]["env"] == ["HIP_VISIBLE_DEVICES=0"]
        assert models["small-q8_0"]["metadata"]["devices"] == "1"
        assert "lost-q8_0" not in models and '# SKIPPED "lost-q8_0": devices 5 not in the GPU inventory' in text

    def test_a_changed_card_re_emits_only_the_models_that_use_it(self, library):
        settings = library / "swapgen.yaml"
        assert cli.main(["--settings", str(settings)]) == 0
        rc, graph = generate(settings)
        assert rc == 0 and graph.stats["emitted"] == 0
        settings.write_text(SETTINGS.replace("vram_gb: 24, vendor: amd", "vram_gb: 20, vendor: amd"))
        rc, graph = generate(settings)
        assert rc == 0 and graph.stats["emitted"] == 2  # amd-q8_0 on it, lost-q8_0 whose reason lists it

    def test_show_says_which_devices_and_why(self, library, capsys):
        assert cli.main(["--settings", str(library / "swapgen.yaml"), "show", "amd-q8_0"]) == 0
        out = capsys.readouterr().out
        assert "  devices   2 (pinned): HIP_VISIBLE_DEVICES=0" in out
        assert "    HIP_VISIBLE_DEVICES=0" in out
        assert cli.main(["--settings", str(library / "swapgen.yaml"), "show", "small-q8_0", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["devices"] == {"ids": "1", "why": "settings devices",
                                   "env": ["CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=1"]}
