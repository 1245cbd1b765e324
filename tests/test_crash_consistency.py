"""An interrupted run at any instant: the next run writes the bytes a run from an empty cache writes.

A child `swapgen` moving the library from state A to state B is stopped at each of its durable
steps (`tests/killpoints.py`) with SIGKILL and with SIGTERM; then a run back in state A, or
straight on in state B, must write exactly the config of a fresh run in that state.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builders import GIB, SETTINGS, add_model, llama_kv
from tests.gguf_fixtures import Q, write_gguf
from tests.runs import generate

KILLPOINTS = Path(__file__).with_name("killpoints.py")
ALPHA = "models/pub/A-GGUF/Alpha-Q4_K_M.gguf"
GAMMA = "models/pub/C-GGUF/Gamma-Q4_0.gguf"


def write_alpha(library: Path, ctx: int) -> None:
    """Same size, other bytes: only the head hash tells the two apart."""
    tensors = [("token_embd.weight", (256, 1024), Q.F16)]
    tensors += [(f"blk.{i}.attn_q.weight", (256, 256), Q.F16) for i in range(4)]
    (library / ALPHA).parent.mkdir(parents=True, exist_ok=True)
    write_gguf(library / ALPHA, "llama", kv=llama_kv(4, ctx), tensors=tensors)


def state_a(library: Path) -> None:
    (library / "swapgen.yaml").write_text(SETTINGS)
    write_alpha(library, 8192)
    (library / GAMMA).unlink(missing_ok=True)


#: The change from state A to state B.
CHANGE = {"wide": "another budget (every fragment changes), a file rewritten in place, a new model",
          "small": "a new model and an override of one other model: the walk replays the other folders and the "
                   "untouched model keeps its record (commands.library)"}


def state_b(library: Path, change: str = "wide") -> None:
    """State B of `CHANGE`."""
    if change == "wide":
        (library / "swapgen.yaml").write_text(SETTINGS.replace("vram_budget_gb: 8", "vram_budget_gb: 6"))
        write_alpha(library, 4096)
    else:
        (library / "swapgen.yaml").write_text(SETTINGS + "overrides:\n  - {match: '*Alpha*', ctx: 2048}\n")
        if not (library / ALPHA).exists():
            write_alpha(library, 8192)  # as in state A
    add_model(library / "models", GAMMA.removeprefix("models/"))


def generate_config(library: Path) -> bytes:
    rc, _ = generate(library / "swapgen.yaml")
    assert rc == 0
    return (library / "config.yaml").read_bytes()


def fresh_config(library: Path) -> bytes:
    """The config a run from an empty cache_dir writes (the library keeps its paths)."""
    shutil.move(library / "cache", library / "cache.kept")
    try:
        return generate_config(library)
    finally:
        shutil.rmtree(library / "cache")
        shutil.move(library / "cache.kept", library / "cache")


def snapshot(library: Path, name: str) -> None:
    shutil.rmtree(library / name, ignore_errors=True)
    shutil.copytree(library / "cache", library / name / "cache")
    shutil.copy2(library / "config.yaml", library / name / "config.yaml")


def restore(library: Path, name: str) -> None:
    shutil.rmtree(library / "cache")
    shutil.copytree(library / name / "cache", library / "cache")
    shutil.copy2(library / name / "config.yaml", library / "config.yaml")


def interrupted_run(library: Path, point: int, signame: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(KILLPOINTS), str(point), signame,
                           "--settings", str(library / "swapgen.yaml")],
                          capture_output=True, text=True, env=os.environ.copy(), timeout=120)


@pytest.fixture(params=sorted(CHANGE))
def library(tmp_path, request):
    change = request.param
    add_model(tmp_path / "models", "pub/B-GGUF/Beta-Q8_0.gguf", size=GIB)
    state_b(tmp_path, change)
    fresh_b = generate_config(tmp_path)
    shutil.rmtree(tmp_path / "cache")
    state_a(tmp_path)
    fresh_a = generate_config(tmp_path)  # the baseline every interrupted run starts from
    snapshot(tmp_path, "baseline")
    assert fresh_config(tmp_path) == fresh_a and fresh_a != fresh_b
    return tmp_path, fresh_a, fresh_b, change


@pytest.mark.parametrize("signame", ["SIGKILL", "SIGTERM"])
def test_an_interrupt_at_every_step_never_leaves_a_stale_config(library, signame):
    library, fresh_a, fresh_b, change = library
    stopped = 0
    for point in range(1, 40):
        state_a(library)
        restore(library, "baseline")
        state_b(library, change)
        child = interrupted_run(library, point, signame)
        if child.returncode == 0:
            break
        stopped += 1
        if signame == "SIGKILL":
            assert child.returncode == -signal.SIGKILL
        else:  # stopped like Ctrl-C: a clean exit code and no traceback
            assert child.returncode == 128 + signal.SIGTERM, child.stderr
            assert "Traceback" not in child.stderr
        snapshot(library, "interrupted")
        # back to A (the changes undone), or straight on in B
        state_a(library)
        assert generate_config(library) == fresh_a, f"state A after a {signame} at step {point}"
        restore(library, "interrupted")
        state_b(library, change)
        assert generate_config(library) == fresh_b, f"state B after a {signame} at step {point}"
        leftovers = [p.name for p in [*library.iterdir(), *(library / "cache").rglob("*")] if p.suffix == ".tmp"]
        assert leftovers == [], f"temp files after a {signame} at step {point}"
    print(f"{signame}, {CHANGE[change]}: {stopped} interruption points")
    assert stopped >= 8  # settings cache, metadata cache, load memo, three fragments, summary, config, doit state
