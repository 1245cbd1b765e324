"""The GPU charge of a vision projector: its file and llama.cpp's CLIP compute buffer, held to
llama.cpp b11434's own reports (`tests/data/clip_alloc_b11434.json`, recorded by
`tests/data/record_clip_alloc.py` from projectors of real widths)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import attrs
import pytest

from autogen.discovery.walk import discover
from autogen.metadata.cache import MetaCache, _meta_from_json, _meta_to_json
from autogen.metadata.gguf_header import read_gguf_header
from autogen.metadata.gguf_meta import meta_from_gguf
from autogen.sizing.projector import CLIP_BUFFER_ASSUMED, MMPROJ_ASSUMED, clip_buffer, projector_charge
from autogen.vision_tower import VisionTower
from tests.gguf_fixtures import Q, write_gguf

GIB = 1 << 30
MIB = 1 << 20
DATA = Path(__file__).parent / "data" / "clip_alloc_b11434.json"
ALL_ROWS = json.loads(DATA.read_text())["rows"]
#: llama.cpp refused to load these (a minimum token count above Idefics3's unset maximum:
#: "image_max_pixels (-1) is less than image_min_pixels").
REFUSED = {("smolvlm2-2.2b", "min-tokens-100")}
ROWS = [r for r in ALL_ROWS if (r["projector"], r["launch"]) not in REFUSED]
#: Records the formula misses by more than TOLERANCE, with the bound it holds there instead:
#: Qwen2.5-VL's window attention at a 20 × 20-patch warmup reserves some 5 MiB the per-position
#: count does not see.
LOOSER = {("qwen2.5vl-7b", "max-tokens-100"): 0.25}
#: How close the formula stays to llama.cpp's figure for every recorded projector and launch.
TOLERANCE = 0.10
GEMMA3 = VisionTower(projector_type="gemma3", image_size=896, patch_size=14, embedding_length=1152,
                     feed_forward_length=4304, head_count=16, projection_dim=2560)


def write_projector_header(path: Path, keys: dict) -> Path:
    """A projector GGUF with the recorded `clip.*` keys, read back through swapgen's own reader."""
    kv = {"general.type": "mmproj", "clip.has_vision_encoder": True, **keys}
    return write_gguf(path, "clip", kv=kv, tensors=[("v.patch_embd.weight", (14, 14, 3, 64), Q.F16)])


def tower_of(path: Path) -> VisionTower:
    tower = meta_from_gguf(read_gguf_header(str(path))).vision_tower
    assert tower is not None
    return tower


def _type(row: dict) -> str:
    return row["keys"].get("clip.projector_type") or row["keys"]["clip.vision.projector_type"]


def _max_tokens(row: dict) -> int | None:
    args = row["args"]
    return int(args[args.index("--image-max-tokens") + 1]) if "--image-max-tokens" in args else None


def test_the_recording_covers_the_common_projector_types_with_flash_attention_on_and_off():
    types = {_type(r) for r in ROWS}
    assert {"gemma3", "qwen2.5vl_merger", "qwen3vl_merger", "mlp", "pixtral", "internvl", "gemma4v", "idefics3",
            "lfm2", "kimivl", "glm4v", "llama4"} <= types
    assert {r["flash_attn"] for r in ROWS} == {True, False}
    assert all(r["compute_bytes"] and r["warmup_image"] for r in ROWS), "every launch logged its buffer"
    assert all(not r["compute_bytes"] for r in ALL_ROWS if (r["projector"], r["launch"]) in REFUSED)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['projector']}-{r['launch']}")
def test_the_buffer_matches_llama_cpp_for_each_recorded_projector(tmp_path, row):
    tower = tower_of(write_projector_header(tmp_path / "mmproj.gguf", row["keys"]))
    buffer = clip_buffer(tower, row["flash_attn"], _max_tokens(row))
    assert buffer is not None
    assert buffer.image == row["warmup_image"], "the warmup image llama.cpp picked"
    assert abs(buffer.bytes / row["compute_bytes"] - 1) <= LOOSER.get((row["projector"], row["launch"]), TOLERANCE), \
        f"{buffer.bytes / MIB:.2f} MiB vs llama.cpp's {row['compute_bytes'] / MIB:.2f} MiB"


def test_the_charge_is_the_file_and_the_buffer_and_says_so():
    charge = projector_charge(int(0.8 * GIB), GEMMA3, None)
    buffer = clip_buffer(GEMMA3, True)
    assert buffer is not None and buffer.bytes == 4096 * (4304 + 3 * 1152) * 4
    assert charge.bytes == int(0.8 * GIB) + buffer.bytes
    assert charge.reason == ("its file 0.80 GiB and llama.cpp's CLIP compute buffer for a 896×896 image, 0.12 GiB")


def test_flash_attention_off_charges_the_attention_scores():
    on, off = projector_charge(GIB, GEMMA3, "on"), projector_charge(GIB, GEMMA3, "off")
    assert off.bytes - GIB >= 16 * 4096 * 4096 * 4 > 8 * (on.bytes - GIB)
    assert off.reason.endswith("896×896 image, flash attention off, 1.09 GiB")
    assert projector_charge(GIB, GEMMA3, "auto") == on


@pytest.mark.parametrize("tower, why", [
    (None, "no vision tower read from its header"),
    (attrs.evolve(GEMMA3, projector_type="gemma3nv"), "projector type gemma3nv not measured"),
    (attrs.evolve(GEMMA3, image_size=0, head_count=0), "header lacks clip.vision.attention.head_count, clip.vision.image_size"),
    (attrs.evolve(GEMMA3, has_audio=True), "an audio encoder too, not measured"),
])
def test_without_what_the_formula_needs_the_buffer_is_the_flat_assumption_and_the_reason_says_why(tower, why):
    charge = projector_charge(int(0.5 * GIB), tower, None)
    assert charge.bytes == int(0.5 * GIB) + CLIP_BUFFER_ASSUMED
    assert charge.reason == f"its file 0.50 GiB and an assumed 1.00 GiB CLIP compute buffer ({why})"


def test_a_projector_file_not_read_is_assumed_and_said_so():
    charge = projector_charge(0, GEMMA3, None)
    assert charge.bytes == MMPROJ_ASSUMED + clip_buffer(GEMMA3, True).bytes
    assert charge.reason.startswith("its file, assumed 1.00 GiB (not read) and llama.cpp's CLIP compute buffer")


def test_qwen_warmup_follows_the_merge_and_patch_the_header_gives():
    qwen = VisionTower(projector_type="qwen2vl_merger", patch_size=14, embedding_length=1280,
                       feed_forward_length=5120, head_count=16, projection_dim=3584)
    assert clip_buffer(qwen, True).image == 46 * 2 * 14, "llama.cpp's default merge of 2"
    assert clip_buffer(attrs.evolve(qwen, merge=1), True).image == 46 * 14


def test_image_max_tokens_shrinks_the_warmup_of_the_types_that_count_tokens():
    """clip.cpp `set_warmup_n_tokens`: a maximum below the warmup count caps it at its square root
    per side; a larger one, and an image-size warmup (Gemma 3), are left alone."""
    qwen = VisionTower(projector_type="qwen2vl_merger", patch_size=14, embedding_length=1280,
                       feed_forward_length=5120, head_count=16, projection_dim=3584)
    assert clip_buffer(qwen, True, 100).image == 10 * 2 * 14
    assert clip_buffer(qwen, True, 99).image == 9 * 2 * 14, "the whole square root"
    assert clip_buffer(qwen, True, 5000) == clip_buffer(qwen, True) == clip_buffer(qwen, True, 0)
    assert clip_buffer(GEMMA3, True, 100) == clip_buffer(GEMMA3, True)


def test_image_max_tokens_sets_lfm2s_largest_image_either_way():
    """LFM2-VL warms up on its largest image, 256 tokens unless the user says otherwise."""
    lfm2 = VisionTower(projector_type="lfm2", image_size=256, patch_size=16, embedding_length=1152,
                       feed_forward_length=4304, head_count=16, projection_dim=2048, merge=2)
    assert clip_buffer(lfm2, True).image == 512
    assert clip_buffer(lfm2, True, 1024).image == 1024
    assert clip_buffer(lfm2, True, 1024).bytes > 3 * clip_buffer(lfm2, True).bytes
    assert clip_buffer(lfm2, True, 1000).image == 1011, "isqrt(1000 × 32²), as clip.cpp truncates"


def test_the_charge_follows_image_max_tokens_and_says_the_smaller_image():
    gemma4 = VisionTower(projector_type="gemma4v", image_size=224, patch_size=16, embedding_length=1152,
                         feed_forward_length=4304, head_count=16, projection_dim=5376)
    full, capped = projector_charge(GIB, gemma4, None), projector_charge(GIB, gemma4, None, 100)
    assert capped.bytes < full.bytes
    assert "768×768 image" in full.reason and "480×480 image" in capped.reason


def test_the_header_reader_hands_the_tower_on_and_the_cache_keeps_it(tmp_path):
    row = next(r for r in ROWS if r["projector"] == "qwen3vl-8b")
    meta = meta_from_gguf(read_gguf_header(str(write_projector_header(tmp_path / "mmproj.gguf", row["keys"]))))
    assert meta.vision_tower == VisionTower(
        projector_type="qwen3vl_merger", image_size=768, patch_size=16, embedding_length=1152,
        feed_forward_length=4304, head_count=16, projection_dim=4096, merge=2, deepstack_layers=3)
    assert _meta_from_json(json.loads(json.dumps(_meta_to_json(meta)))) == meta


def test_an_older_converters_projector_gives_its_tower_but_not_its_projection_as_a_text_width(tmp_path):
    """The image-encoder converter wrote architecture `clip`, no `general.type`, and CLIP's own
    projection as `projection_dim`: the tower is read, the width not, so LLaVA's projection stage
    (text-wide rows) falls back to the flat buffer and says so."""
    keys = {"clip.has_vision_encoder": True, "clip.projector_type": "mlp", "clip.vision.image_size": 336,
            "clip.vision.patch_size": 14, "clip.vision.embedding_length": 1024, "clip.vision.feed_forward_length": 4096,
            "clip.vision.attention.head_count": 16, "clip.vision.projection_dim": 768}
    tower = tower_of(write_gguf(tmp_path / "mmproj-model-f16.gguf", "clip", kv=keys))
    assert (tower.projector_type, tower.image_size, tower.projection_dim) == ("mlp", 336, 0)
    assert projector_charge(GIB, tower, None).reason.endswith("(header lacks clip.vision.projection_dim)")


def test_a_model_file_or_a_projector_without_a_type_has_no_tower(tmp_path):
    plain = write_gguf(tmp_path / "clip.gguf", "clip", kv={"general.type": "mmproj", "clip.has_vision_encoder": True})
    assert meta_from_gguf(read_gguf_header(str(plain))).vision_tower is None
    model = write_gguf(tmp_path / "m.gguf", "llama", kv={"general.type": "model", "clip.projector_type": "gemma3"})
    assert meta_from_gguf(read_gguf_header(str(model))).vision_tower is None


def test_discovery_pairs_the_projector_with_its_tower(tmp_path):
    folder = tmp_path / "models/g"
    folder.mkdir(parents=True)
    write_gguf(folder / "gemma-3-4b-it-Q4_K_M.gguf", "gemma3",
               kv={"{arch}.block_count": 2, "{arch}.embedding_length": 2560, "{arch}.attention.head_count": 8},
               tensors=[("token_embd.weight", (2560, 64), Q.F16)])
    gemma = next(r for r in ROWS if r["projector"] == "gemma3-siglip-896-4b")
    write_projector_header(folder / "mmproj-F16.gguf", gemma["keys"])
    found = discover((str(tmp_path / "models"),), MetaCache(str(tmp_path / "cache")).gguf)
    (row,) = found.models
    assert row.mmproj == str(folder / "mmproj-F16.gguf")
    assert row.mmproj_tower == attrs.evolve(GEMMA3, projection_dim=2560)


@pytest.mark.slow
def test_llama_server_reserves_what_was_recorded(tmp_path):
    """Re-measure the Gemma 3 projector on the real engine: its warmup logs the same buffer."""
    server = os.environ.get("LLAMA_SERVER")
    if not server or not os.access(server, os.X_OK):
        pytest.skip("set LLAMA_SERVER to a llama-server b11434 binary")
    from tests.clip_projectors import SHAPES, write_projector  # noqa: PLC0415 - gguf writes tensor data
    from tests.data.record_clip_alloc import measure  # noqa: PLC0415
    from tests.tiny_model import write_tiny  # noqa: PLC0415

    shape = SHAPES["gemma3-siglip-896-4b"]
    tiny, projector = write_tiny(tmp_path / "tiny.gguf"), write_projector(shape, tmp_path / "mmproj.gguf")
    got = measure(server, tiny, projector, [], tmp_path / "server.log")
    recorded = next(r for r in ROWS if r["projector"] == shape.name and r["launch"] == "fa-auto")
    assert (got["warmup_image"], got["compute_bytes"]) == (recorded["warmup_image"], recorded["compute_bytes"])
    buffer = clip_buffer(tower_of(projector), got["flash_attn"])
    assert abs(buffer.bytes / got["compute_bytes"] - 1) <= TOLERANCE
