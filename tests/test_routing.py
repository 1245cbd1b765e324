"""`routing: auto` end to end on the sample library: the written matrix is valid for llama-swap,
each set fits every card it uses by the entries' own metadata, sets are maximal, CPU-only
engines are in every set, and the same inputs write the same bytes."""

from __future__ import annotations

import itertools
import json
import math

import attrs
import pytest
import yaml

from autogen.commands import sample
from autogen.emit import dispatch
from autogen.router import fragments
from autogen.router.matrix_dsl import compile_sets, expand
from autogen.router.validate import main_validate, validate_text
from tests import schema_facts
from tests.builders import add_model
from tests.runs import generate

BASE = """\
roots: [sample-library]
output: {name}.yaml
cache_dir: cache-{name}
vram_budget_gb: 22
backends:
  - {{id: llama-cuda, kind: llama, path: llama-server, default: true, variant: cuda}}
  - {{id: vllm, kind: vllm, path: vllm, version: "0.11.0"}}
  - {{id: sd-cuda, kind: sd, path: sd-server, default: true}}
routing: auto
default_profiles:
  - {{name: share, vram_budget_gb: 10}}
"""
MISTRAL_ON_VLLM = ("  - {match: '*Mistral-7B-Instruct-v0.3*', backend: vllm, "
                   "vllm_tokenizer: mistralai/Mistral-7B-Instruct-v0.3")
#: host → (settings lines: cards and overrides, each card's VRAM by index; None = the pooled card)
HOSTS = {
    "pooled": ("card_vram_gb: 24\noverrides:\n" + MISTRAL_ON_VLLM + "}\n", {None: 24.0}),
    "one-gpu": ("gpus: [{index: 0, name: RTX 4090, vram_gb: 24, vendor: nvidia}]\noverrides:\n"
                + MISTRAL_ON_VLLM + "}\n", {0: 24.0}),
    "two-gpus": ("gpus: [{index: 0, name: RTX 4090, vram_gb: 24, vendor: nvidia},\n"
                 "       {index: 1, name: RTX 4070, vram_gb: 12, vendor: nvidia}]\n"
                 "overrides:\n  - {match: '*nomic*', devices: [1]}\n" + MISTRAL_ON_VLLM + ", devices: [1]}\n",
                 {0: 24.0, 1: 12.0}),
    # no embedder: nothing small is left to sit beside the big entries
    "crowded": ("gpus: [{index: 0, vram_gb: 24}]\noverrides:\n  - {match: '*nomic*', skip: true}\n"
                + MISTRAL_ON_VLLM + "}\n", {0: 24.0}),
}


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    root = tmp_path_factory.mktemp("routing")
    sample.build(root / "sample-library")
    return root


def run(library, name: str, capsys=None) -> tuple[str, str]:
    (library / f"{name}.settings.yaml").write_text(BASE.format(name=name) + HOSTS[name][0])
    rc, _ = generate(library / f"{name}.settings.yaml")
    assert rc == 0
    err = capsys.readouterr().err if capsys is not None else ""
    return (library / f"{name}.yaml").read_text(), err


def concrete_sets(doc) -> list[frozenset[str]]:
    matrix = doc["routing"]["router"]["settings"]["matrix"]
    roots = compile_sets(list(matrix["sets"].items()), lambda v: matrix["vars"].get(v))
    return [m for name in matrix["sets"] for m in expand(roots[name], roots)]


def per_card(entry: dict, cards: dict) -> dict:
    """What the entry takes of each card, from its own metadata (docs/vram-routing.md's rule)."""
    meta = entry.get("metadata", {})
    est = meta.get("est_vram_gb") or 0
    if not est:
        return {}
    used = [int(d) for d in str(meta["devices"]).split(",")] if "devices" in meta else None
    if used is None:
        used = list(cards) if meta.get("engine") == "llama.cpp" else list(cards)[:1]
    total = sum(cards[d] for d in used)
    return {d: est * cards[d] / total for d in used}


#: The settings' `vram_budget_gb`: what entries sharing a card may take of it together.
BUDGET = 22.0


def fits(members, models, cards) -> bool:
    """A card holding one entry takes up to its VRAM, one holding several up to the budget."""
    used = {d: [] for d in cards}
    for m in members:
        for d, gb in per_card(models[m], cards).items():
            used[d].append(gb)
    return all(sum(gbs) <= (cards[d] if len(gbs) == 1 else min(cards[d], BUDGET)) + 0.011 for d, gbs in used.items())


def model_of(entry_id: str, ids) -> str:
    return entry_id.removesuffix("-share") if entry_id.endswith("-share") and entry_id[:-6] in ids else entry_id


@pytest.mark.parametrize("host", list(HOSTS))
def test_every_set_fits_every_card_and_is_maximal(library, host):
    text, _ = run(library, host)
    doc = yaml.safe_load(text)
    models, cards = doc["models"], HOSTS[host][1]
    assert "groups" not in doc
    sets = concrete_sets(doc)
    assert sets
    gpu = [m for m in models if per_card(models[m], cards)]
    cpu = set(models) - set(gpu)
    assert cpu == {"parakeet-tdt-0.6b-v3-q8_0"}
    for members in sets:
        assert fits(members, models, cards), (host, sorted(members))
        assert cpu <= members
        owners = [model_of(m, models) for m in members]
        assert len(owners) == len(set(owners)), "two profiles of one model share"
        joinable = [m for m in gpu if m not in members and model_of(m, models) not in owners
                    and fits(members | {m}, models, cards)]
        assert joinable == [], (host, sorted(members), joinable)
    # every pair of GPU entries of different models that fits together shares a set
    for a, b in itertools.combinations(gpu, 2):
        if model_of(a, models) != model_of(b, models) and fits({a, b}, models, cards):
            assert any({a, b} <= s for s in sets), (a, b)


@pytest.mark.parametrize("host", list(HOSTS))
def test_the_config_is_valid_for_llama_swap(library, host):
    text, _ = run(library, host)
    assert validate_text(text) == []
    jsonschema = pytest.importorskip("jsonschema")
    schema = schema_facts.to_json_schema(schema_facts.load())
    errors = list(jsonschema.Draft7Validator(schema).iter_errors(yaml.safe_load(text)))
    assert errors == []


def test_evict_costs_are_the_size_on_disk(library):
    doc = yaml.safe_load(run(library, "pooled")[0])
    matrix = doc["routing"]["router"]["settings"]["matrix"]
    for var, entry in matrix["vars"].items():
        size = doc["models"][entry]["metadata"]["size_gb"]
        assert matrix["evict_costs"][var] == max(1, math.ceil(size))


def test_the_same_inputs_write_the_same_routing(library, tmp_path):
    first, _ = run(library, "two-gpus")
    (library / "two-gpus.yaml").unlink()
    again, _ = run(library, "two-gpus")
    assert again == first


def test_a_model_too_big_to_share_is_a_warning_and_a_comment(library, capfd):
    """Without the 1 GiB embedder, nothing fits beside vLLM's 22.8 GiB."""
    (library / "crowded.yaml").unlink(missing_ok=True)  # earlier tests wrote it: assemble again
    capfd.readouterr()
    text, err = run(library, "crowded", capfd)
    doc = yaml.safe_load(text)
    assert doc["models"]["llama-3.1-8b-instruct-bf16"]["metadata"]["est_vram_gb"] == 22.8
    message = "too big to share a card with any other model, so each runs alone: "
    assert f"swapgen: warning: routing: {message}" in err and "'llama-3.1-8b-instruct-bf16' (22.8 GiB)" in err
    assert f"# routing: {message}" in text


def test_swapgen_validate_names_the_matrix(library, capsys):
    run(library, "pooled")
    assert main_validate([str(library / "pooled.yaml")]) == 0
    out = capsys.readouterr().out
    assert out.endswith("valid llama-swap config (12 models, a matrix of 5 sets)\n")


def test_fragments_written_before_routing_existed_are_emitted_again(library):
    """A fragment without its entries' footprints (an older swapgen) is re-emitted, not misread."""
    first, _ = run(library, "one-gpu")
    for path in (library / "cache-one-gpu" / "fragments").glob("*.json"):
        data = json.loads(path.read_text())
        del data["footprints"]
        path.write_text(json.dumps(data))
    (library / "one-gpu.yaml").unlink()
    assert run(library, "one-gpu")[0] == first


#: Two cards, a llama model split over both (one card alone keeps its sizing: the entry moves
#: there), the embedder pinned to the second card.
RENAMED = """\
roots: [sample-library]
output: {name}.{ext}
cache_dir: cache-{name}
target: {target}
vram_budget_gb: 22
gpus: [{{index: 0, name: RTX 4090, vram_gb: 24, vendor: nvidia}},
       {{index: 1, name: RTX 4070, vram_gb: 12, vendor: nvidia}}]
backends:
  - {{id: llama-cuda, kind: llama, path: llama-server, default: true, variant: cuda}}
  - {{id: vllm, kind: vllm, path: vllm, version: "0.11.0"}}
  - {{id: sd-cuda, kind: sd, path: sd-server, default: true}}
{routing}default_variants:
  - {{name: share, vram_budget_gb: 10}}
overrides:
  - {{match: '*nomic*', devices: [1]}}
  - {{match: '*Meta-Llama*', devices: [0, 1]}}
  - {{match: '*gemma*', devices: [0, 1], vram_budget_gb: 30}}
"""


def _renamed(plan):
    """The plan with every metadata key its entries carry renamed (once)."""
    entries = tuple(attrs.evolve(e, metadata=tuple((k if k.startswith("renamed_") else f"renamed_{k}", v)
                                                   for k, v in e.metadata)) for e in plan.entries)
    return attrs.evolve(plan, entries=entries)


@pytest.mark.parametrize("target", ["llama-swap", "llama-server"])
def test_routing_reads_no_metadata_key(library, monkeypatch, target):
    """Every metadata key renamed where the emitters and the placement write it: the matrix, the
    devices each entry runs on, a preset's `--models-max` and sections stay the same (routing
    reads each entry's typed footprint, never its metadata)."""
    ext = "yaml" if target == "llama-swap" else "ini"

    def generate_as(name):
        path = library / f"{name}.settings.yaml"
        routing = "routing: auto\n" if target == "llama-swap" else ""
        path.write_text(RENAMED.format(name=name, target=target, ext=ext, routing=routing))
        assert generate(path)[0] == 0
        return (library / f"{name}.{ext}").read_text()

    plain = generate_as(f"plain-{target}")
    dispatched, placed = dispatch._dispatch, dispatch._placed
    monkeypatch.setattr(dispatch, "_dispatch", lambda job, ctx: _renamed(dispatched(job, ctx)))
    monkeypatch.setattr(dispatch, "_placed", lambda job, ctx, plan: _renamed(placed(job, ctx, plan)))
    monkeypatch.setattr(fragments, "MEMORY_KEY", "renamed_memory")  # the memory record's key too
    renamed = generate_as(f"renamed-{target}")
    assert "renamed_" in renamed or target == "llama-server"
    if target == "llama-server":
        assert renamed.replace("renamed-", "plain-") == plain
        return
    doc, base = yaml.safe_load(renamed), yaml.safe_load(plain)
    assert "routing" in base and doc["routing"] == base["routing"]
    assert {m: (e["cmd"], e.get("env")) for m, e in doc["models"].items()} == {
        m: (e["cmd"], e.get("env")) for m, e in base["models"].items()}
    moved = base["models"]["meta-llama-3.1-8b-instruct-q4_k_m"]
    assert moved["metadata"]["devices"] == "0"  # fits the first card alone: moved there
    for m, entry in doc["models"].items():
        keys = {k.removeprefix("renamed_") for k in entry.get("metadata", {})}
        assert keys == set(base["models"][m].get("metadata", {})), m


def test_one_set_is_said_in_the_singular(tmp_path):
    """Two small models share the card: the plan is one set, and the comment says so."""
    add_model(tmp_path / "models", "pub/A-GGUF/Alpha-Q4_K_M.gguf")
    add_model(tmp_path / "models", "pub/B-GGUF/Beta-Q4_K_M.gguf")
    settings = tmp_path / "swapgen.yaml"
    settings.write_text("roots: [models]\nvram_budget_gb: 22\ncard_vram_gb: 24\nrouting: auto\nbackends:\n"
                        "  - {id: llama, kind: llama, path: llama-server, default: true}\n")
    assert generate(settings)[0] == 0
    config = (tmp_path / "config.yaml").read_text()
    assert "# routing: auto: 1 set of models that fit together on " in config
