"""llama-fit-params: which binary, the exact call for a generated command, its per-device output,
and its answers kept with the binary's identity in the key."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from autogen.engines import ENGINES, Engine
from autogen.figures.binaries import estimator_for, identity
from autogen.figures.fit_params import AnswerCache, EstimatorCall, estimator_call, parse, run
from autogen.footprint import MIB, DeviceMemory, MemoryRecord, Source
from tests.shared import not_set_up

ESTIMATOR = ENGINES[Engine.LLAMA].estimator

SERVER = "/opt/llama/bin/llama-server"
HEAD = [SERVER, "-m", "/models/Qwen3 8B.gguf", "--host", "127.0.0.1", "--port", "${PORT}"]
#: What the real CPU build of b11434 prints on stdout (the log goes to stderr).
CPU_OUTPUT = "Host 96 632 98 \n"
#: `common_fit_print` (common/fit.cpp) on a build with two CUDA devices: one line per device in
#: the model's device order, then the host; the name is `ggml_backend_dev_name`, numbers are MiB.
TWO_CUDA_OUTPUT = "CUDA0 9216 192 898 \nCUDA1 8688 192 898 \nHost 380 0 12 \n"


class TestParse:
    def test_cpu_build_the_host_stands_for_the_device(self):
        figures = parse(CPU_OUTPUT)
        assert figures == MemoryRecord(source=Source.FIT_PARAMS, devices=(DeviceMemory("Host", 96 * MIB, 632 * MIB,
                                                                                      98 * MIB),))
        assert figures.host_only

    def test_several_devices_in_order_and_the_host_apart(self):
        figures = parse("llama_fit_params: printing estimated memory\n" + TWO_CUDA_OUTPUT)
        assert [d.name for d in figures.devices] == ["CUDA0", "CUDA1"]
        assert figures.devices[1] == DeviceMemory("CUDA1", 8688 * MIB, 192 * MIB, 898 * MIB)
        assert figures.host == DeviceMemory("Host", 380 * MIB, 0, 12 * MIB)
        assert not figures.host_only

    @pytest.mark.parametrize("name", ["Vulkan0", "ROCm1", "MTL0", "SYCL0", "RPC[10.0.0.2:50052]"])
    def test_any_device_name_llama_cpp_gives(self, name):
        assert parse(f"{name} 1 2 3 \nHost 0 0 1 \n").devices[0].name == name

    @pytest.mark.parametrize("text", ["", "error: invalid argument: -kvu\n", "CUDA0 12 x 3\n", "Host 1 2\n",
                                      "CUDA0 -1 2 3\n"])
    def test_no_figures_in_anything_else(self, text):
        assert parse(text) is None


class TestCall:
    """The estimator is asked about the command as llama-server will run it."""

    def test_sizing_flags_pass_as_written_and_server_flags_do_not(self):
        argv = [*HEAD, "-c", "32768", "-ngl", "49", "--n-cpu-moe", "12", "-fit", "off", "-fa", "on", "-ctk", "q8_0",
                "-ctv", "q8_0", "--parallel", "2", "-t", "8", "--mmproj", "/m/p.gguf", "--no-mmproj-offload",
                "-sm", "layer", "-ts", "24,12", "-ot", "exps=CPU", "--swa-full", "-nkvo", "-md", "/m/d.gguf"]
        call = estimator_call("/opt/llama/bin/llama-fit-params", argv, ("CUDA_VISIBLE_DEVICES=0,1",))
        assert call.argv == ("/opt/llama/bin/llama-fit-params", "-m", "/models/Qwen3 8B.gguf", "-c", "32768",
                             "-ngl", "49", "--n-cpu-moe", "12", "-fa", "on", "-ctk", "q8_0", "-ctv", "q8_0",
                             "--parallel", "2", "-sm", "layer", "-ts", "24,12", "-ot", "exps=CPU", "--swa-full",
                             "-nkvo", "--no-repack", "--fit-print", "on")
        assert call.env == ("CUDA_VISIBLE_DEVICES=0,1",) and call.unified_slots == 0

    @pytest.mark.parametrize("given", [(), ("--repack",), ("-nr",), ("--no-repack",)])
    def test_asked_without_repacking_so_the_host_row_counts_every_weight(self, given):
        """llama-fit-params leaves weights in the CPU's repack buffers out of its figures; repacked
        or not, they take the same bytes."""
        call = estimator_call("fp", [*HEAD, "-c", "8192", "--parallel", "1", *given, "-ngl", "0"])
        assert call.argv == ("fp", "-m", "/models/Qwen3 8B.gguf", "-c", "8192", "--parallel", "1", "-ngl", "0",
                             "--no-repack", "--fit-print", "on")

    def test_auto_slots_are_asked_as_one_sequence_of_the_same_cells(self):
        """llama-server without --parallel runs 4 sequences over one unified KV pool; the estimator
        runs 1 and refuses --kv-unified, so it is asked with -np 1 and the emitter prices the rest."""
        call = estimator_call("fp", [*HEAD, "-c", "32768", "-ngl", "99"])
        assert call.argv[-4:] == ("-np", "1", "--fit-print", "on") and call.unified_slots == 4

    def test_explicit_unified_slots_too(self):
        call = estimator_call("fp", [*HEAD, "-c", "32768", "--parallel", "3", "--kv-unified"])
        assert "--kv-unified" not in call.argv and call.argv[-4:-2] == ("-np", "1") and call.unified_slots == 3
        assert "--parallel" not in call.argv

    def test_one_slot_needs_no_substitute(self):
        assert estimator_call("fp", [*HEAD, "-c", "8192", "--parallel", "1"]).unified_slots == 0


class TestWhichBinary:
    def make(self, folder: Path, name: str) -> str:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
        return str(path)

    def test_beside_the_server(self, tmp_path):
        server = self.make(tmp_path / "bin", "llama-server")
        assert estimator_for(ESTIMATOR, server) is None
        beside = self.make(tmp_path / "bin", "llama-fit-params")
        assert estimator_for(ESTIMATOR, server) == beside

    def test_named_on_the_row_or_turned_off(self, tmp_path):
        server = self.make(tmp_path / "bin", "llama-server")
        named = self.make(tmp_path / "build", "llama-fit-params")
        self.make(tmp_path / "bin", "llama-fit-params")
        assert estimator_for(ESTIMATOR, server, named) == named
        assert estimator_for(ESTIMATOR, server, "none") is None
        assert estimator_for(ESTIMATOR, server, str(tmp_path / "missing")) is None

    def test_an_engine_without_an_estimator_has_none(self, tmp_path):
        """vLLM has no estimator: a llama-fit-params beside it, or named on its row, is never asked."""
        server = self.make(tmp_path / "bin", "vllm")
        named = self.make(tmp_path / "bin", "llama-fit-params")
        assert ENGINES[Engine.VLLM].estimator == ""
        assert estimator_for(ENGINES[Engine.VLLM].estimator, server) is None
        assert estimator_for(ENGINES[Engine.VLLM].estimator, server, named) is None

    def test_identity_changes_with_the_binary(self, tmp_path):
        path = self.make(tmp_path, "llama-fit-params")
        before = identity(path)
        os.utime(path, ns=(1, 1))
        assert identity(path) != before and identity(None) == "" and identity(str(tmp_path / "x")) == ""


def fake_estimator(tmp_path: Path, body: str) -> str:
    path = tmp_path / "llama-fit-params"
    path.write_text(f"#!/bin/sh\necho called >> {tmp_path}/calls\n{body}")
    path.chmod(0o755)
    return str(path)


class TestRun:
    def test_figures_from_stdout_and_the_env_reaches_it(self, tmp_path):
        estimator = fake_estimator(tmp_path, 'echo "CUDA$DEV 10 20 30 "\necho "Host 1 0 2 "\n')
        figures, error = run(EstimatorCall(argv=(estimator,), env=("DEV=7",)))
        assert error == "" and figures.devices[0].name == "CUDA7"

    def test_failure_is_its_own_last_line(self, tmp_path):
        estimator = fake_estimator(tmp_path, 'echo "load: x" >&2\necho "error: invalid argument: -q" >&2\nexit 1\n')
        assert run(EstimatorCall(argv=(estimator,), env=())) == (
            None, "llama-fit-params exited 1: error: invalid argument: -q")

    def test_failure_says_why_before_the_exception_it_ends_with(self, tmp_path):
        """llama-fit-params b11434 logs the cause, then aborts on an uncaught exception that only
        says "failed to load model" (recorded on the CPU build: a GGUF without ffn_norm)."""
        estimator = fake_estimator(tmp_path, (
            "echo \"0.00.106.442 E llama_model_load: error loading model: check_tensor_dims: tensor "
            "'blk.0.ffn_norm.weight' not found\" >&2\n"
            "echo \"0.00.106.640 E llama_model_load_from_file_impl: failed to load model\" >&2\n"
            "echo \"terminate called after throwing an instance of 'std::runtime_error'\" >&2\n"
            "echo \"  what():  failed to load model\" >&2\nexit 134\n"))
        assert run(EstimatorCall(argv=(estimator,), env=())) == (
            None, "llama-fit-params exited 134: llama_model_load: error loading model: check_tensor_dims: tensor "
                  "'blk.0.ffn_norm.weight' not found")

    def test_answers_are_kept_and_a_new_binary_asks_again(self, tmp_path):
        estimator = fake_estimator(tmp_path, 'echo "Host 1 2 3 "\n')
        cache = AnswerCache(str(tmp_path / "cache"))
        call = EstimatorCall(argv=(estimator, "-c", "4096"), env=())
        first = cache.answer(estimator, call, "stamp")
        assert cache.answer(estimator, call, "stamp") == first
        assert (tmp_path / "calls").read_text().count("called") == 1
        os.utime(estimator, ns=(2, 2))  # a rebuilt estimator
        cache.answer(estimator, call, "stamp")
        cache.answer(estimator, call, "another model stamp")
        assert (tmp_path / "calls").read_text().count("called") == 3


REAL = Path(os.environ.get("LLAMA_SERVER", "/tmp/llama-e2e/bin/llama-server"))
REAL_ESTIMATOR = next((p for p in (REAL.parent / "llama-fit-params", REAL.parent.parent / "build" / "bin" /
                                   "llama-fit-params") if p.is_file()), None)


@pytest.mark.slow
@pytest.mark.skipif(REAL_ESTIMATOR is None, reason=not_set_up("llama-fit-params beside $LLAMA_SERVER"))
def test_the_real_cpu_build_prints_what_the_parser_reads(tiny_model):
    proc = subprocess.run([str(REAL_ESTIMATOR), "-m", str(tiny_model), "-c", "4096", "-np", "1", "--fit-print", "on"],
                          capture_output=True, text=True, timeout=120, check=False)
    figures = parse(proc.stdout)
    assert proc.returncode == 0 and figures is not None and figures.host_only
    assert figures.devices[0].context == 4 << 20  # 4096 cells × 2 layers × 2 KV heads × 64 × 2 (K, V) × 2 B


@pytest.mark.slow
@pytest.mark.skipif(REAL_ESTIMATOR is None, reason=not_set_up("llama-fit-params beside $LLAMA_SERVER"))
def test_the_real_cpu_build_counts_every_weight_of_a_repacked_model(tmp_path):
    """A Q4_K model (sparse: llama-fit-params reads no weight) asked as swapgen asks: its Host row
    holds all its weights, which llama.cpp otherwise leaves in an uncounted repack buffer."""
    from tests.gguf_fixtures import Q, llama_tensors, tensor_nbytes, write_gguf  # noqa: PLC0415

    blocks, embd, vocab, ffn = 4, 1024, 2048, 4096
    tensors = llama_tensors(blocks, embd, vocab, ffn) + [(f"blk.{i}.ffn_norm.weight", (embd,), Q.F32)
                                                         for i in range(blocks)]
    model = write_gguf(tmp_path / "Repacked-Q4_K_M.gguf", "llama", vocab=vocab, tensors=tensors, kv={
        "{arch}.block_count": blocks, "{arch}.context_length": 4096, "{arch}.embedding_length": embd,
        "{arch}.attention.head_count": 8, "{arch}.attention.head_count_kv": 2, "{arch}.feed_forward_length": ffn,
        "{arch}.attention.layer_norm_rms_epsilon": 1e-5})
    call = estimator_call(str(REAL_ESTIMATOR), [str(REAL), "-m", str(model), "-c", "4096", "-ngl", "0"])
    figures, error = run(call)
    assert error == "" and figures is not None and figures.host_only
    weights = sum(tensor_nbytes(dims, qtype) for _, dims, qtype in tensors)
    assert figures.devices[0].model >= weights - MIB  # whole MiB, rounded down
    without = run(EstimatorCall(argv=tuple(a for a in call.argv if a != "--no-repack"), env=()))[0]
    assert without is not None and without.devices[0].model < weights / 2  # what llama.cpp's own default shows
