"""What engines report about their own memory, read from recorded lines in the formats their
sources print (llama.cpp b11434, vLLM 0.33, whisper.cpp 1.8.5, nvidia-smi, rocm-smi)."""

from __future__ import annotations

import pytest

from autogen.figures.logs import (
    GIB,
    IK_LLAMA_LOG,
    VllmReport,
    buffer_device,
    llama_error,
    llama_report,
    nvidia_per_process,
    rocm_per_process,
    vllm_error,
    vllm_report,
    whisper_error,
    whisper_report,
)
from autogen.footprint import MIB, DeviceMemory

#: llama-server b11434 on the CPU build, `LLAMA_ARG_LOG_VERBOSITY=4` (recorded here, memcheck Gemma-3
#: GGUF, `-c 32768`): the buffer lines and the memory breakdown it prints at exit.
CPU_LOG = """\
0.00.073.304 I load_tensors:   CPU_Mapped model buffer size =    96.70 MiB
0.00.074.296 I llama_context: n_seq_max             = 4
0.00.074.534 I llama_context:        CPU  output buffer size =     0.49 MiB
0.00.074.551 I llama_kv_cache_iswa: creating non-SWA KV cache, size = 32768 cells
0.00.075.751 I llama_kv_cache:        CPU KV buffer size =   512.00 MiB
0.00.353.590 I llama_kv_cache_iswa: creating     SWA KV cache, size = 4608 cells
0.00.353.776 I llama_kv_cache:        CPU KV buffer size =   360.00 MiB
0.00.536.277 I sched_reserve:        CPU compute buffer size =    55.03 MiB
0.01.054.949 I common_memory_breakdown_print: |   - Host               |                 1023 =    96 +     872 +      55                |
"""
#: Two CUDA devices, printed with the same format strings (src/llama-model.cpp "%s: %12s model buffer
#: size = %8.2f MiB", src/llama-kv-cache.cpp, src/llama-context.cpp "%s: %10s compute buffer size"),
#: a graph reserved twice, a projector on CUDA0 and a draft model after the main one.
CUDA_LOG = """\
load_tensors: offloaded 49/49 layers to GPU
load_tensors:        CUDA0 model buffer size =  8688.25 MiB
load_tensors:        CUDA1 model buffer size =  8100.00 MiB
load_tensors:   CPU_Mapped model buffer size =   380.00 MiB
llama_context:  CUDA_Host  output buffer size =     0.58 MiB
llama_kv_cache:      CUDA0 KV buffer size =   192.00 MiB
llama_kv_cache:      CUDA1 KV buffer size =   192.00 MiB
sched_reserve:      CUDA0 compute buffer size =   800.00 MiB
sched_reserve:      CUDA1 compute buffer size =   100.00 MiB
sched_reserve:  CUDA_Host compute buffer size =    12.01 MiB
sched_reserve:      CUDA0 compute buffer size =   898.01 MiB
clip_ctx: CLIP using CUDA0 backend
load_hparams: model size:         851.86 MiB
alloc_compute_meta:      CUDA0 compute buffer size =    20.00 MiB
load_tensors:        CUDA0 model buffer size =   500.00 MiB
llama_kv_cache:      CUDA0 KV buffer size =    64.00 MiB
sched_reserve:      CUDA0 compute buffer size =    40.00 MiB
"""


class TestLlamaReport:
    def test_cpu_build_everything_is_host_memory(self):
        report = llama_report(CPU_LOG)
        (host,) = report.devices
        assert host.name == "Host" and report.host_only
        assert host.model == round(96.70 * MIB) and host.context == round(872.00 * MIB)
        assert host.compute == round((55.03 + 0.49) * MIB)  # the output buffer counts with compute

    def test_each_device_its_buffers_and_the_host_apart(self):
        """The main model's buffers; the re-reserved graph counts once; the projector and the draft
        after it are left to swapgen's charges, as in llama-fit-params' report."""
        report = llama_report(CUDA_LOG)
        cuda0, cuda1 = report.devices
        assert cuda0 == DeviceMemory("CUDA0", round(8688.25 * MIB), round(192.00 * MIB), round(898.01 * MIB))
        assert cuda1 == DeviceMemory("CUDA1", round(8100.00 * MIB), round(192.00 * MIB), round(100.00 * MIB))
        assert report.host == DeviceMemory("Host", round(380.00 * MIB), 0, round((12.01 + 0.58) * MIB))

    def test_a_log_without_buffer_lines_has_no_report(self):
        assert llama_report("0.00.1 I srv load_model: loading model\n") is None

    @pytest.mark.parametrize("buffer, device", [("CUDA0", "CUDA0"), ("CPU_REPACK", "Host"), ("CUDA_Host", "Host"),
                                                ("Vulkan1", "Vulkan1"), ("ROCm0", "ROCm0"), ("CPU", "Host")])
    def test_buffer_names_to_devices(self, buffer, device):
        assert buffer_device(buffer) == device


class TestLlamaError:
    """The engine's own line on why it stopped, as b11434 prints it (recorded on the CPU build)."""

    @pytest.mark.parametrize("log, line", [
        ("0.00.065 I load: x\n0.00.065.550 E llama_init_from_model: quantized V cache requires flash_attn to be "
         "enabled\n0.00.072.560 E common_fit_params: encountered an error while trying to fit params\n"
         "0.00.119.036 E srv  llama_server: exiting due to model loading error\n",
         "llama_init_from_model: quantized V cache requires flash_attn to be enabled"),
        ("0.00.019.072 E llama_model_load: error loading model: llama_model_loader: failed to load model from "
         "bad.gguf\n0.00.019.632 E srv  llama_server: exiting due to model loading error\n",
         "llama_model_load: error loading model: llama_model_loader: failed to load model from bad.gguf"),
        ("error: invalid argument: --bogus\n", "error: invalid argument: --bogus"),
        ("0.00.019.391 E srv    load_model: failed to load model, '/x.gguf'\n",
         "load_model: failed to load model, '/x.gguf'"),
        ("0.00.019.391 I srv    load_model: loading model\n", ""),
        # the projector's memory probe fails first, and the server goes on until the projector loads
        ("0.00.006.411 E mtmd_get_memory_usage: error: Failed to load CLIP model from /m/mmproj.gguf\n"
         "0.00.018.084 E clip_init: failed to load model '/m/mmproj.gguf': Key not found: clip.vision.embedding_length\n"
         "0.00.018.247 E mtmd_init_from_file: error: Failed to load CLIP model from /m/mmproj.gguf\n"
         "0.00.018.264 E srv    load_model: failed to load multimodal model, '/m/mmproj.gguf'\n"
         "0.00.019.102 E srv  llama_server: exiting due to model loading error\n",
         "clip_init: failed to load model '/m/mmproj.gguf': Key not found: clip.vision.embedding_length"),
        ("0.00.006.411 E mtmd_get_memory_usage: error: Failed to load CLIP model from /m/mmproj.gguf\n",
         "mtmd_get_memory_usage: error: Failed to load CLIP model from /m/mmproj.gguf"),
    ])
    def test_first_error_that_is_not_an_echo(self, log, line):
        assert llama_error(log) == line


#: vLLM 0.33 with tensor parallel 2 (vllm/logger.py `_FORMAT`: "(process pid=N) LEVEL date [file:line] msg").
VLLM_TP2 = """\
(APIServer pid=100) INFO 12-02 01:20:00 [api_server.py:1000] vLLM API server version 0.33.0
(Worker_TP0 pid=201) INFO 12-02 01:21:10 [gpu_model_runner.py:5089] Model loading took 7.51 GiB memory and 9.871234 seconds
(Worker_TP1 pid=202) INFO 12-02 01:21:10 [gpu_model_runner.py:5089] Model loading took 7.5 GiB memory and 9.901234 seconds
(Worker_TP0 pid=201) INFO 12-02 01:21:30 [gpu_worker.py:773] Available KV cache memory: 12.34 GiB
(Worker_TP1 pid=202) INFO 12-02 01:21:30 [gpu_worker.py:773] Available KV cache memory: 12.3 GiB
(EngineCore pid=150) INFO 12-02 01:21:31 [kv_cache_utils.py:1148] GPU KV cache size: 202,176 tokens, Maximum concurrency for 32,768 tokens per request: 6.17x
"""


class TestVllm:
    def test_per_worker_weights_and_kv_pool(self):
        assert vllm_report(VLLM_TP2) == VllmReport(weights=(round(7.51 * GIB), round(7.5 * GIB)),
                                                   kv=(round(12.34 * GIB), round(12.3 * GIB)), kv_tokens=202176,
                                                   max_model_len=32768)

    def test_a_pinned_kv_cache_size(self):
        log = ("(EngineCore pid=1) INFO 12-02 01:00:00 [gpu_model_runner.py:5089] Model loading took 3.2 GiB memory "
               "and 2.1 seconds\n(EngineCore pid=1) INFO 12-02 01:00:05 [gpu_worker.py:676] Initial free memory "
               "22.1 GiB, reserved 4.25 GiB memory for KV Cache as specified by kv_cache_memory_bytes config and "
               "skipped memory profiling.\n")
        assert vllm_report(log).kv == (round(4.25 * GIB),)

    def test_no_model_no_report(self):
        assert vllm_report("(APIServer pid=1) INFO 12-02 01:00:00 [x.py:1] starting\n") is None

    def test_its_own_reason(self):
        log = ("(EngineCore pid=150) ERROR 12-02 01:21:31 [core.py:900] EngineCore failed to start.\n"
               "(EngineCore pid=150) ERROR 12-02 01:21:31 [core.py:900] Traceback (most recent call last):\n"
               "(EngineCore pid=150) ERROR 12-02 01:21:31 [core.py:900] ValueError: To serve at least one request "
               "with the model's max seq len (131072), (16.0 GiB KV cache is needed, which is larger than the "
               "available KV cache memory (6.0 GiB).\n"
               "RuntimeError: Engine core initialization failed. See root cause above.\n")
        assert vllm_error(log) == "RuntimeError: Engine core initialization failed. See root cause above."
        assert vllm_error(log.rsplit("RuntimeError", 1)[0]).startswith("ValueError: To serve at least one request")
        assert vllm_error("(EngineCore pid=1) ERROR 12-02 01:00:00 [core.py:1] EngineCore failed to start.\n") == \
            "EngineCore failed to start."


class TestDriverTables:
    def test_nvidia_smi_per_process_by_gpu_index(self):
        gpus = "0, GPU-aaaa\n1, GPU-bbbb\n"
        apps = "201, GPU-aaaa, 20480\n202, GPU-bbbb, 20100\n999, GPU-aaaa, 4000\n"
        assert nvidia_per_process(apps, gpus, [201, 202, 150]) == {0: 20480 * MIB, 1: 20100 * MIB}

    def test_rocm_smi_showpids(self):
        text = ("======== ROCm System Management Interface ========\nKFD process information:\n"
                "PID\tPROCESS NAME\tGPU(s)\tVRAM USED\tSDMA USED\tCU OCCUPANCY\n"
                "4242\tllama-server\t1\t9663676416\t0\t0\n77\tother\t1\t100\t0\t0\n")
        assert rocm_per_process(text, [4242]) == {0: 9663676416}


#: whisper-server 1.8.5 on the CPU build, the large-v3-turbo-q5_0 shape (recorded here).
WHISPER_CPU_LOG = """\
whisper_init_with_params_no_state: use gpu    = 1
whisper_init_with_params_no_state: flash attn = 1
whisper_model_load: ftype         = 8
whisper_model_load:          CPU total size =   573.40 MB
whisper_model_load: model size    =  573.40 MB
whisper_backend_init_gpu: device 0: CPU (type: 0)
whisper_backend_init_gpu: no GPU found
whisper_init_state: kv self size  =   10.49 MB
whisper_init_state: kv cross size =   31.46 MB
whisper_init_state: kv pad  size  =    7.86 MB
whisper_init_state: compute buffer (conv)   =   36.15 MB
whisper_init_state: compute buffer (encode) =   55.35 MB
whisper_init_state: compute buffer (cross)  =    9.27 MB
whisper_init_state: compute buffer (decode) =   99.12 MB
whisper_vad_init_context: compute buffer (VAD)   =    1.60 MB
"""
#: The same model on a CUDA build, printed with the same format strings (src/whisper.cpp: "%s: %12s
#: total size = %8.2f MB", `whisper_backend_init_gpu` "using %s backend").
WHISPER_CUDA_LOG = """\
whisper_model_load:        CUDA0 total size =   573.40 MB
whisper_model_load: model size    =  573.40 MB
whisper_backend_init_gpu: found GPU device 0: CUDA0 (type: 1, cnt: 0)
whisper_backend_init_gpu: using CUDA0 backend
whisper_init_state: kv self size  =   10.49 MB
whisper_init_state: kv cross size =   31.46 MB
whisper_init_state: kv pad  size  =    7.86 MB
whisper_init_state: compute buffer (conv)   =   36.15 MB
whisper_init_state: compute buffer (encode) =   55.35 MB
whisper_init_state: compute buffer (cross)  =    9.27 MB
whisper_init_state: compute buffer (decode) =   99.12 MB
"""


class TestWhisper:
    def test_a_cpu_build_reports_on_the_host(self):
        record = whisper_report(WHISPER_CPU_LOG)
        assert record.devices == (DeviceMemory("Host", 573_400_000, 49_810_000, 199_890_000),)
        assert record.host is None  # the VAD's line comes at a request, and is not the model's

    def test_a_gpu_build_reports_on_its_device(self):
        record = whisper_report(WHISPER_CUDA_LOG)
        assert record.devices == (DeviceMemory("CUDA0", 573_400_000, 49_810_000, 199_890_000),)

    def test_no_model_loaded_no_report(self):
        assert whisper_report("whisper_model_load: invalid model data (bad magic)\n") is None

    @pytest.mark.parametrize(("log", "line"), [
        ("whisper_model_load: loading model\nwhisper_model_load: invalid model data (bad magic)\n"
         "error: failed to initialize whisper context\n", "whisper_model_load: invalid model data (bad magic)"),
        ("error: unknown argument: --m\n\nusage: whisper-server [options]\n", "error: unknown argument: --m"),
        (WHISPER_CPU_LOG, ""),
    ])
    def test_the_engines_own_line_on_why_it_stopped(self, log, line):
        assert whisper_error(log) == line


#: ik_llama.cpp's llama-server (ik-llama-cpp-python 0.1.5, CPU build, its default verbosity),
#: recorded on the tiny llama model with `-c 4096`: the weights' line names no kind.
IK_LOG = """\
llm_load_tensors: ggml ctx size =    0.01 MiB
llm_load_tensors:        CPU buffer size =     5.36 MiB
llama_init_from_model: n_ctx         = 4096
llama_kv_cache_init:        CPU KV buffer size =     4.00 MiB
llama_init_from_model: KV self size  =    4.00 MiB, K (f16):    2.00 MiB, V (f16):    2.00 MiB
llama_init_from_model:        CPU  output buffer size =     0.00 MiB
llama_init_from_model:        CPU compute buffer size =     8.01 MiB
"""
#: The same for a CUDA build with a draft model after the main one (src/llama.cpp's format strings).
IK_CUDA_LOG = """\
llm_load_tensors:        CPU buffer size =   333.84 MiB
llm_load_tensors:      CUDA0 buffer size = 17031.25 MiB
llama_kv_cache_init:      CUDA0 KV buffer size =  1088.00 MiB
llama_init_from_model:  CUDA_Host  output buffer size =     0.58 MiB
llama_init_from_model:      CUDA0 compute buffer size =  1312.00 MiB
llama_init_from_model:  CUDA_Host compute buffer size =    72.01 MiB
llm_load_tensors:      CUDA0 buffer size =   600.00 MiB
"""


class TestIkLlama:
    def test_the_cpu_report_is_host_memory_by_part(self):
        record, tokens = IK_LLAMA_LOG.figures(IK_LOG, ())
        (host,) = record.devices
        assert (host.name, host.model, host.context, host.compute, tokens) == (
            "Host", round(5.36 * MIB), 4 * MIB, round(8.01 * MIB), 0)

    def test_a_cuda_report_splits_device_and_host_and_stops_at_the_draft(self):
        record, _ = IK_LLAMA_LOG.figures(IK_CUDA_LOG, ())
        (gpu,) = record.devices
        assert (gpu.name, gpu.model, gpu.context, gpu.compute) == ("CUDA0", round(17031.25 * MIB), 1088 * MIB,
                                                                    1312 * MIB)
        assert record.host.model == round(333.84 * MIB)
        assert record.host.compute == round(0.58 * MIB) + round(72.01 * MIB)

    @pytest.mark.parametrize("log, reason", [
        ("llama_model_load: error loading model: check_tensor_dims: tensor 'blk.0.attn_q.bias' not found\n"
         "llama_init_from_gpt_params: error: failed to load model 'm.gguf'\n",
         "check_tensor_dims: tensor 'blk.0.attn_q.bias' not found"),
        ("error: unknown argument: -fit\n", "unknown argument: -fit"),
        ("all good\n", ""),
    ])
    def test_its_own_line_on_why_it_stopped(self, log, reason):
        assert IK_LLAMA_LOG.error(log) == reason
        assert IK_LLAMA_LOG.env == ()
