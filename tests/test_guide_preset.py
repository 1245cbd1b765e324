"""docs/llama-server-router.md stays true: its example's settings run on a library with the
models it names, and what it shows is what swapgen prints and writes, in that order (`…` lines
stand for lines left out; the page's library lives at /home/me/lib)."""

from __future__ import annotations

from autogen.router.preset_check import check_preset_text
from tests.builders import llama_kv
from tests.gguf_fixtures import Q, write_gguf
from tests.guide_pages import chunks, in_order, page, section_blocks
from tests.hf_fixtures import write_config, write_safetensors
from tests.test_guide_llama_swap import block, run

SHOWN_ROOT = "/home/me/lib"
#: (path under models/, bytes on disk, blocks, trained context)
GGUFS = (("Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf", 5_027_783_488, 36, 40960),
         ("google/gemma-3-4b-it-GGUF/gemma-3-4b-it-Q4_K_M.gguf", 2_489_757_856, 34, 131072))


def build(root):
    for rel, size, blocks, ctx in GGUFS:
        tensors = [("token_embd.weight", (256, 1024), Q.F16)]
        tensors += [(f"blk.{i}.attn_q.weight", (256, 256), Q.F16) for i in range(blocks)]
        path = root / "models" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        write_gguf(path, "llama", kv=llama_kv(blocks, ctx), tensors=tensors, sparse_size=size)
    folder = root / "models" / "meta-llama" / "Llama-3.2-3B-Instruct"
    write_config(folder)
    write_safetensors(folder / "model.safetensors", 6_425_499_648)


def test_router_example_prints_and_writes_what_it_shows(tmp_path):
    blocks = section_blocks("## An example", page("llama-server-router.md"))
    build(tmp_path)
    (tmp_path / "swapgen.yaml").write_text(block(blocks, "yaml", "# swapgen.yaml"))
    rc, out, err = run(["--settings", str(tmp_path / "swapgen.yaml")])
    assert rc == 0, err
    written = (tmp_path / "models.ini").read_text()
    assert check_preset_text(written) == []
    actual = (out + written).replace(str(tmp_path), SHOWN_ROOT)
    _, shown = block(blocks, "text", "$ swapgen && cat models.ini").split("\n", 1)
    missing = in_order(chunks(shown), actual)
    assert missing is None, f"docs/llama-server-router.md: not in what swapgen printed and wrote (in this order):\n{missing}"
