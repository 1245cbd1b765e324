"""The metadata cache: its scan progress, its one signature store, and what no-op runs read."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import pytest

from autogen.commands import tasks
from autogen.metadata.cache import CACHE_FILE, HEAD_BYTES, MetaCache, Progress, head_hash
from tests.gguf_fixtures import Q, write_gguf
from tests.runs import generate

KV = {"{arch}.block_count": 2, "{arch}.context_length": 4096, "{arch}.embedding_length": 64,
      "{arch}.attention.head_count": 4}


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _models(tmp_path, n: int) -> list[str]:
    paths = []
    (tmp_path / "models").mkdir(exist_ok=True)
    for i in range(n):
        path = write_gguf(tmp_path / "models" / f"m{i}.gguf", "llama", kv=KV,
                          tensors=[("token_embd.weight", (64, 256), Q.F16)])
        paths.append(str(path))
    return paths


def _probe_all(cache: MetaCache, paths: list[str]) -> None:
    for p in paths:
        st = os.stat(p)
        cache.gguf(p, st.st_size, st.st_mtime_ns)
    cache.save()


class TestProgress:
    def test_silent_when_stderr_is_not_a_terminal(self, tmp_path):
        """A pipe or a log file gets no progress, however long the scan."""
        stream = io.StringIO()
        cache = MetaCache(str(tmp_path / "cache"), progress=Progress(stream, delay=0, interval=0))
        _probe_all(cache, _models(tmp_path, 3))
        assert cache.reads == 3
        assert stream.getvalue() == ""

    def test_terminal_shows_headers_read_and_files_checked_then_ends_the_line(self, tmp_path):
        stream = Terminal()
        cache = MetaCache(str(tmp_path / "cache"), progress=Progress(stream, delay=0, interval=0))
        _probe_all(cache, _models(tmp_path, 3))
        text = stream.getvalue()
        assert text.startswith("\rswapgen: read 1 model headers (1 files checked, ")
        assert "\rswapgen: read 3 model headers (3 files checked, " in text
        assert text.endswith("/s)\n") and text.count("\n") == 1

    def test_a_scan_shorter_than_the_delay_stays_silent(self, tmp_path):
        stream = Terminal()
        cache = MetaCache(str(tmp_path / "cache"), progress=Progress(stream, delay=3600))
        _probe_all(cache, _models(tmp_path, 2))
        assert stream.getvalue() == ""

    def test_a_warm_run_reads_nothing_and_shows_nothing(self, tmp_path):
        paths = _models(tmp_path, 2)
        _probe_all(MetaCache(str(tmp_path / "cache"), progress=Progress(io.StringIO())), paths)
        stream = Terminal()
        warm = MetaCache(str(tmp_path / "cache"), progress=Progress(stream, delay=0, interval=0))
        _probe_all(warm, paths)
        assert warm.reads == 0
        assert stream.getvalue() == ""

    def test_a_closed_or_odd_stream_counts_as_not_a_terminal(self):
        closed = io.StringIO()
        closed.close()
        assert Progress(closed).enabled is False
        assert Progress(object()).enabled is False  # type: ignore[arg-type]


class TestSignatures:
    """One store of (size, mtime_ns, head) serves the header cache and the doit file checker."""

    def test_a_head_is_read_once_per_signature_and_kept_across_runs(self, tmp_path):
        (path,) = _models(tmp_path, 1)
        st = os.stat(path)
        cache = MetaCache(str(tmp_path / "cache"))
        assert cache.head(path, st.st_size, st.st_mtime_ns) == head_hash(path)
        cache.save()
        again = MetaCache(str(tmp_path / "cache"))
        before = _rchar()
        assert again.head(path, st.st_size, st.st_mtime_ns) == head_hash(path) and again.dirty is False
        assert _rchar() - before < HEAD_BYTES  # only the comparison's own head_hash read

    def test_a_touch_costs_one_head_read_then_none(self, tmp_path):
        (path,) = _models(tmp_path, 1)
        _probe_all(MetaCache(str(tmp_path / "cache"), progress=Progress(io.StringIO())), [path])
        os.utime(path, ns=(1, 1))
        touched = MetaCache(str(tmp_path / "cache"))
        _probe_all(touched, [path])
        assert touched.reads == 0  # same head: the parsed header stands, with the new mtime
        later = MetaCache(str(tmp_path / "cache"))
        assert later.entries[path]["mtime_ns"] == 1
        assert later.head(path, os.path.getsize(path), 1) == head_hash(path) and later.dirty is False

    def test_a_new_head_of_the_same_size_drops_what_was_parsed(self, tmp_path):
        (path,) = _models(tmp_path, 1)
        cache = MetaCache(str(tmp_path / "cache"))
        _probe_all(cache, [path])
        data = bytearray(Path(path).read_bytes())
        at = data.index(b"\x05\x00\x00\x00\x00\x00\x00\x00llama") + 8 + 4  # the architecture's value
        data[at] = ord("b")  # same size, another architecture
        with open(path, "wb") as f:
            f.write(data)
        os.utime(path, ns=(2, 2))
        again = MetaCache(str(tmp_path / "cache"))
        st = os.stat(path)
        assert again.gguf(path, st.st_size, st.st_mtime_ns).arch == "llamb" and again.reads == 1

    def test_headers_are_parsed_once_whoever_asks_first(self, tmp_path):
        (path,) = _models(tmp_path, 1)
        st = os.stat(path)
        cache = MetaCache(str(tmp_path / "cache"))
        cache.head(path, st.st_size, st.st_mtime_ns)
        cache.gguf(path, st.st_size, st.st_mtime_ns)
        cache.meta(path)
        assert cache.reads == 1

    def test_an_unreadable_file_keeps_its_reason_and_has_no_head(self, tmp_path, monkeypatch):
        (path,) = _models(tmp_path, 1)
        real_open = open

        def guarded(file, *args, **kwargs):
            if str(file) == path:
                raise PermissionError(13, "Permission denied", str(file))
            return real_open(file, *args, **kwargs)

        monkeypatch.setattr("builtins.open", guarded)
        st = os.stat(path)
        cache = MetaCache(str(tmp_path / "cache"))
        assert "Permission denied" in cache.gguf(path, st.st_size, st.st_mtime_ns).error
        assert cache.entries[path]["head"] == ""
        with pytest.raises(OSError):
            cache.head(path, st.st_size, st.st_mtime_ns)


def _rchar() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar")).split()[1])


PIPELINE_SETTINGS = """roots: [models]
vram_budget_gb: 8
card_vram_gb: 0
backends:
  - {id: llama, kind: llama, path: /opt/llama/llama-server, default: true}
  - {id: vllm, kind: vllm, path: /opt/vllm/bin/vllm}
"""
HF_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16",
             "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "hidden_size": 64,
             "intermediate_size": 128, "vocab_size": 1000, "max_position_embeddings": 4096}


@pytest.fixture
def library(tmp_path):
    """GGUF models and an HF folder of 4 safetensors, each file a sparse GiB."""
    root = tmp_path / "models"
    for i in range(3):
        (root / f"pub/R{i}").mkdir(parents=True)
        write_gguf(root / f"pub/R{i}/M{i}-Q4_K_M.gguf", "llama", kv=KV,
                   tensors=[("token_embd.weight", (64, 256), Q.F16)], sparse_size=1 << 30)
    hf = root / "meta/Llama-3-8B"
    hf.mkdir(parents=True)
    (hf / "config.json").write_text(json.dumps(HF_CONFIG))
    for j in range(1, 5):
        with open(hf / f"model-{j:05d}-of-00004.safetensors", "wb") as f:
            f.truncate(1 << 30)
    (tmp_path / "swapgen.yaml").write_text(PIPELINE_SETTINGS)
    return tmp_path


def _run(settings) -> tuple[int, dict]:
    rc, graph = generate(settings)
    return rc, graph.stats


class TestNoOpRuns:
    def test_after_a_touch_of_every_model_file_only_the_first_run_reads_heads(self, library):
        settings = library / "swapgen.yaml"
        assert _run(settings)[0] == 0
        later = time.time() + 5
        files = [p for p in (library / "models").rglob("*") if p.is_file()]
        for p in files:
            os.utime(p, (later, later))
        before = _rchar()
        rc, stats = _run(settings)
        first = _rchar() - before
        before = _rchar()
        rc2, stats2 = _run(settings)
        second = _rchar() - before
        assert rc == rc2 == 0 and stats["emitted"] == stats2["emitted"] == 0
        assert first < (len(files) + 2) * HEAD_BYTES, f"{first} bytes for {len(files)} touched files"
        assert second < HEAD_BYTES // 2, f"read {second} bytes on the second no-op after a touch"

    def test_a_no_op_run_parses_no_config_json(self, library, monkeypatch):
        settings = library / "swapgen.yaml"
        assert _run(settings)[0] == 0

        def refuse(path):
            raise AssertionError(f"parsed {path}")

        monkeypatch.setattr("autogen.metadata.probes.read_config_json", refuse)
        monkeypatch.setattr("autogen.metadata.hf_config.read_config_json", refuse)
        rc, graph = generate(settings)
        assert rc == 0 and graph.stats["emitted"] == 0 and graph.library.cache.reads == 0


def test_the_task_graph_names_the_cache_file_as_the_cache_does():
    """`commands.tasks` spells the name itself, so a no-op run does not import the cache's readers."""
    assert tasks.CACHE_FILE == CACHE_FILE
