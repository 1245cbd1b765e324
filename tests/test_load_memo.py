"""The load memo: a no-op run reuses what loading produced, and any change it depends on is seen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest

from autogen.commands import library as library_module
from autogen.commands import tasks
from autogen.discovery import walk
from autogen.discovery.rows import Adapter, ModelRow, SpecDraft
from autogen.records import dumps, loads
from autogen.settings.schema import Gpu
from autogen.vision_tower import VisionTower
from tests.builders import SETTINGS, add_model


def load(library):
    pipeline = tasks.load(str(library / "swapgen.yaml"))
    pipeline.close()
    return pipeline


def served_from_memo(library, monkeypatch) -> bool:
    """True when loading did not rediscover (discovery is made to fail if it is called)."""
    called = []

    def spy(*args, **kwargs):
        called.append(True)
        return real(*args, **kwargs)

    real = walk.walk_roots
    monkeypatch.setattr(walk, "walk_roots", spy)
    try:
        load(library)
    finally:
        monkeypatch.setattr(walk, "walk_roots", real)
    return not called


def test_an_unchanged_library_is_served_from_the_memo(library, monkeypatch):
    first = load(library)
    again = tasks.load(str(library / "swapgen.yaml"))
    again.close()
    assert [j.row for j in again.library.jobs] == [j.row for j in first.library.jobs]
    assert again.library.stamps == first.library.stamps
    assert served_from_memo(library, monkeypatch)


@pytest.mark.parametrize("change", ["new file", "size", "touch", "removed", "new folder", "settings"])
def test_every_change_discovery_could_see_is_a_miss(library, monkeypatch, change):
    load(library)
    model = library / "models/pub/A-GGUF/Alpha-Q4_K_M.gguf"
    if change == "new file":
        add_model(library / "models", "pub/C-GGUF/Gamma-Q4_0.gguf")
    elif change == "size":
        with open(model, "ab") as f:
            f.write(b"\0")
    elif change == "touch":
        later = time.time() + 5
        os.utime(model, (later, later))
    elif change == "removed":
        model.unlink()
    elif change == "new folder":
        (library / "models/pub/empty").mkdir()
    elif change == "settings":
        (library / "swapgen.yaml").write_text(SETTINGS + "ttl: 5\n")
    assert not served_from_memo(library, monkeypatch)
    assert served_from_memo(library, monkeypatch)  # and the new state is memoised


def test_a_symlink_target_changing_is_a_miss(library, monkeypatch):
    """HF cache snapshots are symlinks into blobs/, a folder discovery does not walk."""
    target = library / "elsewhere/Delta-Q4_0.gguf"
    add_model(library, "elsewhere/Delta-Q4_0.gguf")
    (library / "models/pub/link-Q4_0.gguf").symlink_to(target)
    load(library)
    with open(target, "ab") as f:
        f.write(b"\0")
    assert not served_from_memo(library, monkeypatch)


def test_hidden_folders_do_not_invalidate(library, monkeypatch):
    (library / "models/.trash").mkdir()
    load(library)
    (library / "models/.trash/junk.gguf").write_bytes(b"x")
    assert served_from_memo(library, monkeypatch)


def test_a_new_gpu_inventory_or_generator_version_is_a_miss(library, monkeypatch):
    load(library)
    monkeypatch.setattr(library_module, "inventory", lambda settings: ())
    load(library)

    monkeypatch.setattr(library_module, "inventory", lambda settings: (Gpu(index=0, vram_gb=24.0),))
    assert not served_from_memo(library, monkeypatch)
    monkeypatch.setattr(library_module, "GENERATOR_VERSION", "test-bump")
    assert not served_from_memo(library, monkeypatch)


def test_a_corrupt_memo_is_a_miss_and_is_rewritten(library, monkeypatch):
    load(library)
    memo = library / "cache" / library_module.RUN_MEMO
    memo.write_bytes(b"not a record")
    assert not served_from_memo(library, monkeypatch)
    assert served_from_memo(library, monkeypatch)


#: Modules only planning, emitting, assembling or parsing settings needs.
NOT_ON_A_NO_OP = ("autogen.emit.dispatch", "autogen.emit.llama", "autogen.emit.llama_profiles", "autogen.sizing",
                  "autogen.router.assemble", "autogen.router.validate", "autogen.settings.structure",
                  "autogen.metadata", "autogen.resolve.context", "autogen.discovery.walk",
                  "autogen.discovery.pairing", "autogen.discovery.naming", "autogen.figures.plan",
                  "decimal")
NO_OP = """import json, sys
from autogen.commands.cli import main
code = main(["--settings", sys.argv[1]])
print(json.dumps([code, sorted(sys.modules)]))
"""


def test_a_no_op_run_imports_no_emitter_sizer_or_assembler(library):
    """What a no-op run does not need stays unimported: a fresh `swapgen` process, served from
    the settings cache and the load memo, runs no task."""
    settings = str(library / "swapgen.yaml")
    load(library)  # settings cache and memo
    assert tasks.run_doit(tasks.load(settings), []) == 0  # fragments and config
    done = subprocess.run([sys.executable, "-c", NO_OP, settings], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    code, modules = json.loads(done.stdout.splitlines()[-1])
    assert code == 0 and ".  " not in done.stdout  # no task ran
    assert [m for m in modules if m.startswith(NOT_ON_A_NO_OP)] == []


def test_a_row_reads_back_from_the_memo_as_it_was():
    """A row stored through the one converter comes back equal, nested records included."""
    row = ModelRow(id="a", format="gguf", path="/m/a.gguf", quant="Q4_K_M", size_bytes=5, publisher="p", repo="r",
                   shards=("/m/a-1.gguf", "/m/a-2.gguf"), mmproj="/m/mm.gguf", inputs=("/m/a.gguf",), mmproj_bytes=7,
                   mmproj_tower=VisionTower(projector_type="gemma3", image_size=896, patch_size=14),
                   foreign_format="", loras=(Adapter(path="/m/l.gguf", name="l", kind="gguf", size_bytes=3),),
                   spec_draft=SpecDraft(path="/m/d.gguf", model_id="d", size_bytes=2, why="same vocabulary"))
    again = loads("row", ModelRow, dumps("row", row))
    assert again == row and attrs.asdict(again) == attrs.asdict(row)
