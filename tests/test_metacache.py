"""The metadata cache's scan progress: one stderr line on a terminal, nothing otherwise."""

from __future__ import annotations

import io
import os

from autogen.metacache import MetaCache, Progress
from tests.gguf_fixtures import Q, write_gguf

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
