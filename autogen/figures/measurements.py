"""What `swapgen calibrate` measured, kept in `cache_dir/calibration/`: one file per command,
named by the model files' stamp and a digest of the exact command (argv with `${PORT}` as
written, env, the engine binary's identity). A changed argv, env, binary or model file names
another file, so stale figures are never read; a later run uses a measurement only for the
command it was taken of. A command that failed to start is kept too, with the engine's own line.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence

import xxhash
from attrs import frozen

from autogen.figures.binaries import CALIBRATION_DIR
from autogen.footprint import MemoryRecord, record_from_data, record_to_data
from autogen.fsutil import write_if_changed


@frozen
class Measurement:
    """One start of one command.

    Example: Measurement(entry_id="qwen3-8b-q4_k_m", engine="llama", record=MemoryRecord(…),
    per_process=(9_663_676_416,), error="", seconds=14.2).
    """

    entry_id: str
    engine: str
    #: The parts the engine reported (source "measured", no margin); None when it failed. Its
    #: file key stays "footprint", the name earlier versions wrote, so their calibrations still count.
    record: MemoryRecord | None
    #: Per device of the record: bytes the driver's per-process table showed for the engine's
    #: processes (nvidia-smi, rocm-smi); () = no such table here.
    per_process: tuple[int, ...] = ()
    #: The engine's own line on why it did not start ("" = it started and answered).
    error: str = ""
    seconds: float = 0.0
    #: The KV cache's capacity the engine reported, in tokens (vLLM's `GPU KV cache size`); 0 = none.
    kv_tokens: int = 0


class Measurements:
    """The calibration folder of one `cache_dir`."""

    DIR = CALIBRATION_DIR

    def __init__(self, cache_dir: str):
        self.root = os.path.join(cache_dir, self.DIR)
        self._names: list[str] | None = None

    @staticmethod
    def model_prefix(model_stamp: str) -> str:
        return xxhash.xxh3_64_hexdigest(model_stamp.encode("utf-8", "surrogatepass"))

    def path(self, model_stamp: str, argv: Sequence[str], env: Sequence[str], engine_identity: str) -> str:
        command = xxhash.xxh3_128_hexdigest(repr((tuple(argv), tuple(env), engine_identity)).encode(
            "utf-8", "surrogatepass"))
        return os.path.join(self.root, f"{self.model_prefix(model_stamp)}-{command}.json")

    def get(self, model_stamp: str, argv: Sequence[str], env: Sequence[str],
            engine_identity: str) -> Measurement | None:
        path = self.path(model_stamp, argv, env, engine_identity)
        if self._names is not None and os.path.basename(path) not in self._names:
            return None
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            return Measurement(entry_id=str(data["entry_id"]), engine=str(data["engine"]),
                               record=record_from_data(data["footprint"]) if data["footprint"] else None,
                               per_process=tuple(int(n) for n in data["per_process"]), error=str(data["error"]),
                               seconds=float(data["seconds"]),
                               kv_tokens=int(data.get("kv_tokens", 0)))  # files of before it was kept: none
        return None

    def put(self, model_stamp: str, argv: Sequence[str], env: Sequence[str], engine_identity: str,
            measurement: Measurement) -> str:
        path = self.path(model_stamp, argv, env, engine_identity)
        data = {"entry_id": measurement.entry_id, "engine": measurement.engine,
                "footprint": record_to_data(measurement.record) if measurement.record else None,
                "per_process": list(measurement.per_process), "error": measurement.error,
                "seconds": round(measurement.seconds, 2), "kv_tokens": measurement.kv_tokens,
                "argv": list(argv), "env": list(env)}
        write_if_changed(path, json.dumps(data, indent=1).encode(), durable=False)
        self._names = None
        return path

    def names(self) -> list[str]:
        """The folder's files, read once."""
        if self._names is None:
            try:
                self._names = sorted(os.listdir(self.root))
            except OSError:
                self._names = []
        return self._names

    def of_model(self, model_stamp: str) -> tuple[tuple[str, int, int], ...]:
        """(name, size, mtime) of every measurement of one model's files: part of its fragment's
        key, so a new calibration re-emits the model."""
        prefix = self.model_prefix(model_stamp) + "-"
        found = []
        for name in self.names():
            if name.startswith(prefix):
                with contextlib.suppress(OSError):
                    st = os.stat(os.path.join(self.root, name))
                    found.append((name, st.st_size, st.st_mtime_ns))
        return tuple(found)
