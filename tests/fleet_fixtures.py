"""A fleet on disk, as docs/gpu-hosts.md lays it out: a front settings file, two hosts
with two 24 GB cards each, small GGUF libraries and a 70B Hugging Face folder that only the two
hosts together can hold. A plain module (like `vllm_fixtures`): `test_fleet` and `test_readme`
build the same fleet."""

from __future__ import annotations

from pathlib import Path

from tests.builders import GIB, add_model
from tests.hf_fixtures import sharded
from tests.shared import HF_CONFIGS

HOST_SETTINGS = """roots: [models]
output: config.yaml
gpus:
  - {index: 0, vram_gb: 24, name: RTX 4090, vendor: nvidia}
  - {index: 1, vram_gb: 24, name: RTX 4090, vendor: nvidia}
vram_budget_gb: 22
backends:
  - {id: llama-cuda, kind: llama, path: llama-server, default: true}
  - {id: vllm, kind: vllm, path: vllm, version: "0.33.0"}
"""

#: The head host's override: the 70B model runs on gpu-a and gpu-b together.
MULTI_NODE = """overrides:
  - match: "*Llama-3.1-70B*"
    vllm_nodes: [gpu-b]
"""

FRONT_SETTINGS = """roots: []
output: config.yaml
hosts:
  - {name: gpu-a, settings: hosts/gpu-a/swapgen.yaml, url: "http://gpu-a.lan:8080", api_key_env: GPU_A_KEY}
  - {name: gpu-b, settings: hosts/gpu-b/swapgen.yaml, url: "http://gpu-b.lan:8080"}
"""

LIBRARIES = {
    "gpu-a": ["google/gemma-3-12b-it-GGUF/gemma-3-12b-it-Q4_K_M.gguf", "Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf"],
    "gpu-b": ["Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf", "Qwen/Qwen3-30B-A3B-GGUF/Qwen3-30B-A3B-Q4_K_M.gguf"],
}
LLAMA_70B = "meta-llama/Llama-3.1-70B-Instruct-FP8"


def build_fleet(root: Path, *, multi_node: str | None = MULTI_NODE) -> Path:
    """The fleet under `root`; returns the front settings file. `multi_node`: the override
    block of gpu-a's settings (None: the 70B folder is not added)."""
    for host, models in LIBRARIES.items():
        folder = root / "hosts" / host
        for rel in models:
            add_model(folder / "models", rel, size=5 * GIB)
        (folder / "swapgen.yaml").write_text(HOST_SETTINGS + ((multi_node or "") if host == "gpu-a" else ""))
    if multi_node is not None:
        config = (HF_CONFIGS / "llama-3.1-70b-instruct-fp8-modelopt" / "config.json").read_text()
        sharded(root / "hosts" / "gpu-a" / "models" / LLAMA_70B, 2, 35 * GIB, config=config)
    front = root / "fleet.yaml"
    front.write_text(FRONT_SETTINGS)
    return front
