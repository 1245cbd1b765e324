"""The SAM emitter: discovery of `.ggml` rows (worked example N), argv, CPU-only YAML."""

from __future__ import annotations

import attrs

from autogen.discovery.walk import discover
from autogen.emit.sam import emit_sam, sam_arch
from autogen.engines import Role
from autogen.metadata.probes import HeaderInfo
from autogen.numfmt import size_gb
from autogen.resolve.backends import resolve_backend
from autogen.resolve.context import EmitContext
from autogen.resolve.roles import model_role
from autogen.settings.schema import BackendRow, Override, Settings


def sam_library(tmp_path):
    folder = tmp_path / "sam"
    folder.mkdir()
    model = folder / "sam2.1_hiera_tiny_f16.ggml"
    with open(model, "wb") as f:
        f.truncate(22 * 1024 * 1024)
    (folder / "not-a-model.ggml").write_bytes(b"ggml")
    return discover((str(tmp_path),), lambda *a: HeaderInfo())


def context(row, settings, override=None) -> EmitContext:
    backend = resolve_backend(settings, override, "segment")
    return EmitContext(row=row, meta=None, kv=None, override=override, settings=settings, backend=backend,
                       budget_gb=8.0, card_vram_gb=None, ttl=600)


def test_example_n_one_sam_row_and_the_other_ggml_ignored(tmp_path):
    found = sam_library(tmp_path)
    (row,) = found.models
    assert row.id == "sam2.1-hiera-tiny-f16" and row.format == "sam"
    assert model_role(row, None) == Role.SEGMENT


def test_argv_yaml_and_coexistence_group(tmp_path):
    (row,) = sam_library(tmp_path).models
    s = Settings(roots=(str(tmp_path),), server_exe="/opt/llama/llama-server", threads=6)
    (entry,) = emit_sam(context(row, s)).entries
    assert entry.argv == ("/opt/llama/sam3_server", "--model", row.path, "--host", "127.0.0.1", "--port", "${PORT}",
                          "--threads", "6", "--no-gpu")
    assert entry.check_endpoint == "/health" and entry.coexist_group == "sam"
    assert entry.capabilities.inputs == ("image",) and entry.capabilities.outputs == ("image",)
    meta = dict(entry.metadata)
    assert meta["segmentation"] is True and meta["arch"] == "sam2.1" and "est_vram_gb" not in meta
    assert entry.comment[0].startswith("sam3_server · sam2.1 · 0.02 GiB · ")  # 22 MiB = 0.0215 GiB


def test_size_gb_has_two_decimals_rounded_half_away_like_every_other_entry(tmp_path):
    """`numfmt.size_gb`, the helper every emitter uses: 128 MiB = 0.125 GiB → 0.13 (not banker's 0.12)."""
    (row,) = sam_library(tmp_path).models
    row = attrs.evolve(row, size_bytes=128 * 1024 * 1024)
    (entry,) = emit_sam(context(row, Settings(roots=(str(tmp_path),)))).entries
    assert dict(entry.metadata)["size_gb"] == 0.13 == size_gb(row.size_bytes)
    assert " · 0.13 GiB · " in entry.comment[0]


def test_registry_row_and_extra_args(tmp_path):
    (row,) = sam_library(tmp_path).models
    s = Settings(roots=(str(tmp_path),), backends=(BackendRow(id="sam", kind="sam3", path="/b/sam3_server"),))
    ov = Override(match="*", extra_args=("--no-gpu", "--verbose"), unlisted=True)
    (entry,) = emit_sam(context(row, s, ov)).entries
    assert entry.argv[0] == "/b/sam3_server" and entry.argv.count("--no-gpu") == 1
    assert entry.argv[-2:] == ("--no-gpu", "--verbose") and entry.unlisted


def test_arch_label_from_the_name():
    assert sam_arch("/m/sam3_f16.ggml") == "sam3"
    assert sam_arch("/m/EdgeTAM-f16.ggml") == "edgetam"
    assert sam_arch("/m/hiera_base.ggml") == "sam"
