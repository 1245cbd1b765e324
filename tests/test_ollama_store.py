"""Ollama stores: one model per `name:tag` read through its manifest, hostile manifests and
partial pulls skipped with a reason naming the file, and the store never written or hashed."""

from __future__ import annotations

import io
import json
import os
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from autogen.commands import cli
from autogen.discovery import walk
from autogen.discovery.ollama_store import OllamaName
from autogen.discovery.tree import walk_signature
from autogen.discovery.walk import discover
from autogen.metadata.cache import MetaCache
from tests.builders import SETTINGS, add_model
from tests.gguf_fixtures import Q
from tests.guide_pages import code_blocks, page, page_text, yaml_blocks
from tests.ollama_fixtures import (
    MODEL,
    PARAMS,
    PROJECTOR,
    add_gguf_blob,
    add_text_blob,
    blob_path,
    digest_for,
    guide_store,
    pull,
    write_manifest,
)
from tests.runs import generate

GIB = 1 << 30


@pytest.fixture
def store(tmp_path) -> Path:
    """`~/.ollama/models` after `ollama pull llama3.2:3b` and `ollama pull llava:7b`."""
    models = tmp_path / "models"
    pull(models, "llama3.2:3b")
    pull(models, "llava:7b", projector=True)
    return models


def scan(tmp_path, *roots):
    cache = MetaCache(str(tmp_path / "cache"))
    return discover(tuple(str(r) for r in roots), cache.gguf)


def by_id(found):
    return {m.id: m for m in found.models}


def layer_json(media_type, digest, size) -> str:
    return json.dumps({"schemaVersion": 2, "layers": [{"mediaType": media_type, "digest": digest, "size": size}]})


def reason(found, model_id):
    return found.row_errors.get(model_id)


def ignored(found):
    return {os.path.basename(i.path): i.reason for i in found.ignored}


class TestEntries:
    def test_one_entry_per_name_and_tag_with_its_blobs(self, tmp_path, store):
        found = scan(tmp_path, store)
        rows = by_id(found)
        assert sorted(rows) == ["llama3.2-3b", "llava-7b"] and not found.row_errors
        llava = rows["llava-7b"]
        model = json.loads((store / "manifests/registry.ollama.ai/library/llava/7b").read_text())
        assert llava.path == str(blob_path(store, model["layers"][0]["digest"]))
        assert llava.mmproj == str(blob_path(store, model["layers"][1]["digest"]))
        assert llava.size_bytes == model["layers"][0]["size"] and llava.mmproj_bytes == model["layers"][1]["size"]
        assert llava.format == "gguf" and llava.quant == "Q4_K_M"
        assert llava.manifest == str(store / "manifests/registry.ollama.ai/library/llava/7b")
        # the model and projector blobs are the inputs; template, license, params and config are not
        assert llava.inputs == (llava.path, llava.mmproj)

    def test_the_projector_blobs_vision_tower_reaches_the_row(self, tmp_path):
        """llava:7b's projector, as Ollama ships it (the image-encoder converter: architecture
        `clip`, no `general.type`): its tower is read for the CLIP compute buffer."""
        models = tmp_path / "models"
        tower = {"clip.projector_type": "mlp", "clip.vision.image_size": 336, "clip.vision.patch_size": 14,
                 "clip.vision.embedding_length": 1024, "clip.vision.feed_forward_length": 4096,
                 "clip.vision.attention.head_count": 16}
        write_manifest(models, "llava:7b", [add_gguf_blob(models, "model llava"),
                                            add_gguf_blob(models, "projector llava", "clip", media_type=PROJECTOR,
                                                          kv=tower)])
        (row,) = scan(tmp_path, models).models
        assert row.mmproj_tower is not None
        assert (row.mmproj_tower.projector_type, row.mmproj_tower.image_size) == ("mlp", 336)

    @pytest.mark.parametrize("name, model_id", [
        ("llama3.2:3b", "llama3.2-3b"),
        ("llama3.2:latest", "llama3.2-latest"),
        ("mannix/llama3.1-8b-abliterated:q5_K_M", "mannix-llama3.1-8b-abliterated-q5_k_m"),
        ("hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M", "hf.co-bartowski-llama-3.2-1b-instruct-gguf-q4_k_m"),
        ("localhost:5000/team/coder:v1", "localhost-5000-team-coder-v1"),
    ])
    def test_ids_read_as_ollama_list_shows_the_name(self, tmp_path, name, model_id):
        """The default registry and `library` namespace are left out, as `ollama list` does."""
        pull(tmp_path / "models", name)
        assert list(by_id(scan(tmp_path, tmp_path / "models"))) == [model_id]

    def test_shortest_name_follows_ollama(self):
        assert OllamaName("registry.ollama.ai", "library", "llama3.2", "3b").shortest == "llama3.2:3b"
        assert OllamaName("Registry.Ollama.AI", "Library", "m", "t").shortest == "m:t"
        assert OllamaName("registry.ollama.ai", "mannix", "m", "t").shortest == "mannix/m:t"
        assert OllamaName("hf.co", "bartowski", "m", "t").shortest == "hf.co/bartowski/m:t"

    def test_two_tags_of_one_blob_are_two_entries(self, tmp_path, store):
        pull(store, "llama3.2:latest", blob="model llama3.2:3b")
        rows = by_id(scan(tmp_path, store))
        assert rows["llama3.2-latest"].path == rows["llama3.2-3b"].path

    def test_a_root_holding_the_store_finds_it_even_under_dot_ollama(self, tmp_path):
        pull(tmp_path / "home/.ollama/models", "llama3.2:3b")
        pull(tmp_path / "home/ollama-usb/models", "qwen3:8b")
        (tmp_path / "home/.cache").mkdir()
        add_model(tmp_path / "home/.cache", "pub/R/Hidden-Q4_0.gguf")
        assert sorted(by_id(scan(tmp_path, tmp_path / "home"))) == ["llama3.2-3b", "qwen3-8b"]

    def test_the_load_memo_sees_a_pull_under_dot_ollama(self, tmp_path):
        """The walk signature enters `.ollama` as discovery does: a new pull there is a change."""
        pull(tmp_path / "home/.ollama/models", "llama3.2:3b")
        before = walk_signature((str(tmp_path / "home"),))
        pull(tmp_path / "home/.ollama/models", "qwen3:8b")
        assert walk_signature((str(tmp_path / "home"),)) != before

    def test_blobs_are_never_walked_as_loose_files(self, tmp_path, store):
        add_model(store / "blobs", "stray-Q4_0.gguf")
        add_model(store / "manifests", "stray-Q8_0.gguf")
        found = scan(tmp_path, store)
        assert sorted(by_id(found)) == ["llama3.2-3b", "llava-7b"]

    def test_older_stores_name_blobs_with_a_colon(self, tmp_path, store):
        for blob in (store / "blobs").iterdir():
            blob.rename(blob.with_name(blob.name.replace("-", ":", 1)))
        found = scan(tmp_path, store)
        assert sorted(by_id(found)) == ["llama3.2-3b", "llava-7b"] and not found.row_errors and not found.ignored
        assert os.path.basename(by_id(found)["llava-7b"].path).startswith("sha256:")

    def test_ollama_layers_do_not_break_it(self, tmp_path):
        """params (num_ctx included), system and a config blob that is not JSON are read past."""
        models = tmp_path / "models"
        layers = [add_gguf_blob(models, "m"), add_text_blob(models, "p", '{"num_ctx": 2048}', PARAMS),
                  add_text_blob(models, "s", "You are Mario.", "application/vnd.ollama.image.system"),
                  add_text_blob(models, "x", "\x00\xff", "application/vnd.ollama.image.messages")]
        write_manifest(models, "mario:latest", layers, config=add_text_blob(models, "c", "not json", "x"))
        found = scan(tmp_path, models)
        assert not found.row_errors and by_id(found)["mario-latest"].quant == ""

    def test_an_id_clash_with_a_loose_gguf_follows_the_clash_rules(self, tmp_path, store):
        add_model(tmp_path / "gguf", "zeta/repo/llama3.2-3b.gguf")
        rows = by_id(scan(tmp_path, store, tmp_path / "gguf"))
        assert rows["llama3.2-3b"].manifest is not None
        assert rows["llama3.2-3b-zeta"].path.endswith("llama3.2-3b.gguf")


class TestSkipped:
    @pytest.mark.parametrize("arch, words", [("mllama", "mllama (Llama 3.2 Vision)"), ("gptoss", "gpt-oss"),
                                             ("qwen25vl", "qwen2vl")])
    def test_architectures_llama_server_cannot_load(self, tmp_path, arch, words):
        pull(tmp_path / "models", "vision:11b", arch=arch)
        found = scan(tmp_path, tmp_path / "models")
        assert f"architecture {arch}" in reason(found, "vision-11b") and words in reason(found, "vision-11b")

    def test_a_vision_tower_packed_into_the_model_blob(self, tmp_path):
        """Ollama's Gemma 3/4 blobs carry `v.*`/`mm.*` tensors, which llama-server's loader refuses."""
        models = tmp_path / "models"
        tensors = [("token_embd.weight", (256, 1024), Q.Q4_K), ("blk.0.attn_q.weight", (256, 256), Q.Q4_K),
                   ("v.blk.0.attn_q.weight", (256, 256), Q.F16), ("v.patch_embd.weight", (14, 14, 3, 256), Q.F16),
                   ("mm.input_projection.weight", (256, 256), Q.F16)]
        write_manifest(models, "gemma3:4b", [add_gguf_blob(models, "gemma3", "gemma3", tensors=tensors)])
        pull(models, "llava:7b", projector=True)  # a projector's own v.* tensors are no reason
        found = scan(tmp_path, models)
        assert reason(found, "gemma3-4b").startswith("the model blob packs 3 vision-tower tensors (v.*, mm.*)")
        assert reason(found, "llava-7b") is None

    def test_a_pull_under_way_is_skipped_and_its_partial_blob_not_listed_twice(self, tmp_path, store):
        manifest = json.loads((store / "manifests/registry.ollama.ai/library/llama3.2/3b").read_text())
        blob = blob_path(store, manifest["layers"][0]["digest"])
        blob.rename(blob.with_name(blob.name + "-partial"))
        (store / "blobs" / (blob.name + "-partial-0")).write_text('{"N": 0}')
        found = scan(tmp_path, store)
        why = reason(found, "llama3.2-3b")
        assert why.startswith("model layer: pull not finished") and f"{blob.name}-partial" in why
        assert not any(name.startswith(blob.name) for name in ignored(found))

    def test_a_blob_shorter_than_its_layer_is_an_incomplete_pull(self, tmp_path):
        pull(tmp_path / "models", "qwen3:8b", sparse_size=4096)
        found = scan(tmp_path, tmp_path / "models")
        assert reason(found, "qwen3-8b").startswith("model layer: incomplete pull of ")
        assert found.downloads["qwen3-8b"].have_bytes == 4096

    def test_a_blob_longer_than_its_layer_is_damaged(self, tmp_path, store):
        manifest = json.loads((store / "manifests/registry.ollama.ai/library/llama3.2/3b").read_text())
        with open(blob_path(store, manifest["layers"][0]["digest"]), "ab") as f:
            f.write(b"\0")
        assert "a damaged or replaced blob" in reason(scan(tmp_path, store), "llama3.2-3b")

    def test_a_missing_blob(self, tmp_path, store):
        manifest = json.loads((store / "manifests/registry.ollama.ai/library/llava/7b").read_text())
        blob_path(store, manifest["layers"][1]["digest"]).unlink()
        why = reason(scan(tmp_path, store), "llava-7b")
        assert why.startswith("projector layer: blob sha256-") and why.endswith(f"is missing from {store / 'blobs'}")

    def test_a_broken_symlink_blob_and_a_followed_one(self, tmp_path, store):
        """Blobs moved to another disk and linked back are read through the link."""
        for name in ("llama3.2:3b", "llava:7b"):
            manifest = json.loads(store.joinpath("manifests/registry.ollama.ai/library", *name.split(":")).read_text())
            blob = blob_path(store, manifest["layers"][0]["digest"])
            moved = tmp_path / "usb" / blob.name
            moved.parent.mkdir(exist_ok=True)
            blob.rename(moved)
            blob.symlink_to(moved)
        moved.unlink()
        found = scan(tmp_path, store)
        assert reason(found, "llama3.2-3b") is None and by_id(found)["llama3.2-3b"].size_bytes > 0
        assert "is a broken symlink (its target" in reason(found, "llava-7b")

    def test_a_header_that_is_no_gguf(self, tmp_path):
        models = tmp_path / "models"
        layer = add_text_blob(models, "html", "<html>Too many requests</html>", MODEL)
        write_manifest(models, "broken:1b", [layer])
        assert "not a GGUF file" in reason(scan(tmp_path, models), "broken-1b")

    @pytest.mark.parametrize("text, words", [
        ("not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"layers": {}}', "`layers` must be a list"),
        ('{"layers": [7]}', "layers[0] must be an object"),
        (layer_json(MODEL, "sha256:../../../etc/passwd", 1), "layers[0].digest must be sha256:<64 hex digits>"),
        (layer_json(MODEL, digest_for("m"), 1 << 60), "layers[0].size must be a byte count"),
        (layer_json(MODEL, digest_for("m"), -1), "layers[0].size must be a byte count"),
        (layer_json(MODEL, digest_for("m"), "4 GiB"), "layers[0].size must be a byte count"),
        (layer_json(None, digest_for("m"), 1), "layers[0].mediaType must be a string"),
        ('{"layers": []}', "no model layer (application/vnd.ollama.image.model)"),
        (layer_json("application/vnd.ollama.image.tensor", digest_for("t"), 1),
         "safetensors tensor layers for Ollama's MLX engine"),
    ])
    def test_hostile_manifests_name_the_file(self, tmp_path, store, text, words):
        path = store / "manifests/registry.ollama.ai/library/evil/latest"
        path.parent.mkdir(parents=True)
        path.write_text(text)
        found = scan(tmp_path, store)
        assert words in reason(found, "evil-latest") and str(path) in reason(found, "evil-latest")
        assert sorted(by_id(found)) == ["evil-latest", "llama3.2-3b", "llava-7b"]  # the others stand

    def test_a_huge_manifest_is_not_read(self, tmp_path, store):
        path = store / "manifests/registry.ollama.ai/library/evil/latest"
        path.parent.mkdir(parents=True)
        with open(path, "wb") as f:
            f.truncate(64 << 20)
        assert "larger than 4194304 bytes, not an Ollama manifest" in reason(scan(tmp_path, store), "evil-latest")

    @pytest.mark.parametrize("extra, words", [
        ("adapter", "a LoRA adapter layer"),
        ("model", "2 model layers; llama-server finds the shards of a split GGUF by file name"),
        ("projector", "2 projector layers; llama-server takes one"),
    ])
    def test_layer_sets_llama_server_cannot_serve(self, tmp_path, extra, words):
        models = tmp_path / "models"
        media = {"adapter": "application/vnd.ollama.image.adapter", "model": MODEL, "projector": PROJECTOR}[extra]
        layers = [add_gguf_blob(models, "m"), add_gguf_blob(models, "p", "clip", media_type=PROJECTOR),
                  add_gguf_blob(models, "x", media_type=media)]
        path = write_manifest(models, "odd:1b", layers)
        why = reason(scan(tmp_path, models), "odd-1b")
        assert why.startswith(f"{path}: {words}")


class TestIgnored:
    def test_blobs_no_manifest_names_and_pulls_under_way(self, tmp_path, store):
        orphan = add_gguf_blob(store, "removed model")
        partial = blob_path(store, digest_for("new pull")).name + "-partial"
        (store / "blobs" / partial).write_bytes(b"\0" * 64)
        (store / "blobs" / (partial + "-0")).write_text("{}")
        (store / "blobs" / "README").write_text("not a blob")
        found = scan(tmp_path, store)
        assert ignored(found) == {
            blob_path(store, orphan["digest"]).name: "Ollama blob no manifest names (left by a removed model); "
                                                     "not served",
            partial: "an Ollama pull under way or interrupted; no manifest names it yet"}

    def test_names_and_places_that_are_no_manifest(self, tmp_path, store):
        manifests = store / "manifests"
        (manifests / "registry.ollama.ai/library/bad name").mkdir()
        (manifests / "registry.ollama.ai/library/bad name/latest").write_text("{}")
        (manifests / "registry.ollama.ai/my.team/m").mkdir(parents=True)
        (manifests / "registry.ollama.ai/my.team/m/latest").write_text("{}")
        (manifests / "registry.ollama.ai/stray.json").write_text("{}")
        (manifests / "registry.ollama.ai/library/llava/13b").mkdir()
        (manifests / "registry.ollama.ai/library/llava/gone").symlink_to(tmp_path / "nowhere")
        (manifests / "registry.ollama.ai/vanished").symlink_to(tmp_path / "unmounted")
        llava = manifests / "registry.ollama.ai/library/llava"
        (llava / "7b-link").symlink_to(llava / "7b")
        found = scan(tmp_path, store)
        assert sorted(by_id(found)) == ["llama3.2-3b", "llava-7b", "llava-7b-link"]  # a symlinked manifest is read
        why = ignored(found)
        assert why["latest"].startswith("not an Ollama model name (") and len(
            [i for i in found.ignored if i.path.endswith("/latest")]) == 2
        assert {i.reason.split(";")[0] for i in found.ignored if i.path.endswith("/latest")} == {
            "not an Ollama model name (model 'bad name')", "not an Ollama model name (namespace 'my.team')"}
        assert why["stray.json"].startswith("not an Ollama manifest: manifests sit at")
        assert why["13b"] == "a folder where a tag's manifest file belongs; not walked"
        assert why["gone"].startswith("broken symlink (its target")
        assert why["vanished"] == f"broken symlink (its target {tmp_path / 'unmounted'} is missing)"


# -- through the task graph ----------------------------------------------------------------------

def setup_library(tmp_path, store_at="models/ollama", extra=""):
    (tmp_path / "swapgen.yaml").write_text(SETTINGS.replace("roots: [models]", f"roots: [{store_at}]") + extra)
    return tmp_path / "swapgen.yaml"


def snapshot(folder: Path) -> dict[str, tuple]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.join(dirpath, name)] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    st = os.lstat(folder)
    out[str(folder)] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return out


_WRITES_UNDER: list[str] = []
_WRITES_SEEN: list[str] = []


def _audit(event, args):
    """Any write-mode open, rename, removal, chmod or utime of a path under the watched folder."""
    if not _WRITES_UNDER:
        return
    if event == "open" and isinstance(args[0], str | bytes | os.PathLike):
        path, mode, flags = args
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND))
        paths = [path] if writes else []
    elif event in ("os.rename", "os.remove", "os.rmdir", "os.chmod", "os.utime", "os.truncate", "os.mkdir",
                   "os.symlink", "os.link", "os.chown"):
        paths = [a for a in args if isinstance(a, str | bytes | os.PathLike)]
    else:
        return
    for path in paths:
        text = os.fsdecode(path) if not isinstance(path, int) else ""
        if text and os.path.abspath(text).startswith(_WRITES_UNDER[0]):
            _WRITES_SEEN.append(f"{event} {text}")


def _watch(folder: Path) -> None:
    """Start recording writes under `folder` (the audit hook is installed once, on first use:
    hooks cannot be removed, and other tests need not pay for it)."""
    if not _AUDITING:
        sys.addaudithook(_audit)
        _AUDITING.append(True)
    _WRITES_UNDER[:] = [str(folder)]


_AUDITING: list[bool] = []


def read_io() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar")).split()[1])


class TestPipeline:
    def test_config_serves_each_name_and_tag_and_lists_what_it_skips(self, tmp_path):
        store = tmp_path / "models/ollama"
        pull(store, "llama3.2:3b")
        pull(store, "llava:7b", projector=True)
        pull(store, "llama3.2-vision:11b", arch="mllama")
        add_gguf_blob(store, "removed")
        settings = setup_library(tmp_path)
        rc, graph = generate(settings)
        assert rc == 0
        models = YAML(typ="safe").load((tmp_path / "config.yaml").read_text())["models"]
        assert sorted(models) == ["llama3.2-3b", "llava-7b"]
        llava = next(m for m in graph.library.discovery.models if m.id == "llava-7b")
        argv = models["llava-7b"]["cmd"].split()
        assert argv[argv.index("-m") + 1] == llava.path and argv[argv.index("--mmproj") + 1] == llava.mmproj
        text = (tmp_path / "config.yaml").read_text()
        assert '# SKIPPED "llama3.2-vision-11b": architecture mllama (Llama 3.2 Vision)' in text
        out = io.StringIO()
        with redirect_stdout(out):
            assert cli.main(["--settings", str(settings), "list"]) == 0
        lines = out.getvalue().splitlines()
        assert any(line.startswith("llama3.2-vision-11b") and "SKIPPED" in line and "mllama" in line for line in lines)
        assert any("ignored" in line and "Ollama blob no manifest names" in line for line in lines)

    def test_show_names_the_manifest(self, tmp_path):
        pull(tmp_path / "models/ollama", "llava:7b", projector=True)
        settings = setup_library(tmp_path)
        out = io.StringIO()
        with redirect_stdout(out):
            assert cli.main(["--settings", str(settings), "show", "llava-7b"]) == 0
        manifest = tmp_path / "models/ollama/manifests/registry.ollama.ai/library/llava/7b"
        assert f"\n  manifest  {manifest}\n  mmproj    {tmp_path / 'models/ollama/blobs'}/sha256-" in out.getvalue()

    def test_an_override_matches_the_manifest_path(self, tmp_path):
        pull(tmp_path / "models/ollama", "llama3.2:3b")
        pull(tmp_path / "models/ollama", "qwen3:8b")
        settings = setup_library(tmp_path, extra="overrides:\n  - {match: '*/library/llama3.2/*', ctx: 2048}\n")
        rc, _ = generate(settings)
        models = YAML(typ="safe").load((tmp_path / "config.yaml").read_text())["models"]
        assert rc == 0 and "-c 2048" in models["llama3.2-3b"]["cmd"] and "-c 2048" not in models["qwen3-8b"]["cmd"]

    def test_the_store_is_never_written_and_no_blob_read_whole(self, tmp_path):
        """A read-only store with "8 GiB" sparse blobs: first run, no-op run, a touched blob and
        `list` write nothing under it (an audit hook sees every write-mode open, rename and
        chmod) and read far less than one blob (/proc/self/io)."""
        if not os.path.exists("/proc/self/io"):
            pytest.skip("needs /proc/self/io to count the bytes read")
        store = tmp_path / "models/ollama"
        pull(store, "llama3.2:3b", projector=True)
        manifest = json.loads((store / "manifests/registry.ollama.ai/library/llama3.2/3b").read_text())
        for layer in manifest["layers"][:2]:
            os.truncate(blob_path(store, layer["digest"]), 8 * GIB)
            layer["size"] = 8 * GIB
        (store / "manifests/registry.ollama.ai/library/llama3.2/3b").write_text(json.dumps(manifest))
        settings = setup_library(tmp_path)
        for dirpath, _, filenames in os.walk(store):
            for name in filenames:
                os.chmod(os.path.join(dirpath, name), 0o444)
        for dirpath, _, _ in sorted(os.walk(store), reverse=True):
            os.chmod(dirpath, 0o555)
        try:
            before = snapshot(store)
            _watch(store)
            start = read_io()
            assert generate(settings)[0] == 0
            assert generate(settings)[0] == 0
            blob = blob_path(store, manifest["layers"][0]["digest"])
            later = time.time() + 10
            _WRITES_UNDER.clear()
            os.utime(blob, (later, later))  # the test's own touch, not swapgen's
            before[str(blob)] = (*before[str(blob)][:2], os.stat(blob).st_mtime_ns, os.stat(blob).st_ctime_ns)
            _watch(store)
            assert generate(settings)[0] == 0
            assert cli.main(["--settings", str(settings), "list"]) == 0
            read = read_io() - start
            after = snapshot(store)
        finally:
            _WRITES_UNDER.clear()
            for dirpath, _, _ in os.walk(store):
                os.chmod(dirpath, 0o755)
        assert _WRITES_SEEN == []
        assert after == before
        assert read < 64 << 20, f"read {read} bytes: a blob was read whole"
        models = YAML(typ="safe").load((tmp_path / "config.yaml").read_text())["models"]
        assert list(models) == ["llama3.2-3b"]

    def test_a_new_pull_is_seen_and_a_no_op_run_is_served_from_the_memo(self, tmp_path, monkeypatch):
        store = tmp_path / "models/ollama"
        pull(store, "llama3.2:3b")
        settings = setup_library(tmp_path)
        rc, _ = generate(settings)
        called = []
        real = walk.walk_roots
        monkeypatch.setattr(walk, "walk_roots", lambda *a, **k: called.append(1) or real(*a, **k))
        rc, graph = generate(settings)
        assert rc == 0 and not called and graph.stats["emitted"] == 0
        pull(store, "qwen3:8b")
        rc, graph = generate(settings)
        assert rc == 0 and called and graph.stats["emitted"] == 1
        models = YAML(typ="safe").load((tmp_path / "config.yaml").read_text())["models"]
        assert sorted(models) == ["llama3.2-3b", "qwen3-8b"]

    def test_a_re_pulled_tag_re_emits_only_that_model(self, tmp_path):
        """`ollama pull` of a newer llama3.2:3b writes a new blob and a new manifest."""
        store = tmp_path / "models/ollama"
        pull(store, "llama3.2:3b")
        pull(store, "qwen3:8b")
        settings = setup_library(tmp_path)
        generate(settings)
        layer = add_gguf_blob(store, "llama3.2 v2", blocks=6)
        write_manifest(store, "llama3.2:3b", [layer])
        rc, graph = generate(settings)
        assert rc == 0 and graph.stats["emitted"] == 1
        row = next(j.row for j in graph.library.jobs if j.row.id == "llama3.2-3b")
        assert row.path == str(blob_path(store, layer["digest"]))

    def test_fragment_keys_carry_each_blobs_size_and_head(self, tmp_path):
        store = tmp_path / "models/ollama"
        pull(store, "llava:7b", projector=True)
        _, graph = generate(setup_library(tmp_path))
        stamp = graph.library.stamps["llava-7b"]
        assert stamp.count("|") == 2 and "None" not in stamp
        job = graph.library.jobs[0]
        assert graph.fragments["llava-7b"].endswith(f"-{graph.library.model_key(job.row.id)}.json")


# -- the guide's worked example (docs/ollama-models.md) ---------------------------------------------

GUIDE = page("ollama-models.md")
#: Where the guide's example store lives (the test's store path is shown as this).
SHOWN_STORE = "/home/me/.ollama/models"
GUIDE_SETTINGS = """roots: [STORE]
vram_budget_gb: 8
card_vram_gb: 0
backends:
  - {id: llama-cuda, kind: llama, path: /opt/llama/bin/llama-server, default: true}
"""


def guide_example(tmp_path: Path) -> str:
    """The text block of the guide's "Models from Ollama" example, from a real run."""
    store = tmp_path / "home/me/.ollama/models"
    guide_store(store)
    settings = tmp_path / "swapgen.yaml"
    settings.write_text(GUIDE_SETTINGS.replace("STORE", str(store)))
    outputs = []
    for argv in ([], ["list"]):
        out = io.StringIO()
        with redirect_stdout(out):
            assert cli.main(["--settings", str(settings), *argv]) == 0
        outputs.append(out.getvalue())
    lines = (tmp_path / "config.yaml").read_text().splitlines(keepends=True)
    start = lines.index('  "llava-7b":\n')
    text = (f"$ swapgen\n{outputs[0]}$ swapgen list\n{outputs[1]}$ grep -B 3 -A 10 '\"llava-7b\":' config.yaml\n"
            + "".join(lines[start - 3:start + 11]))
    return text.replace(str(store), SHOWN_STORE)


def guide_block() -> str:
    (body,) = [b for lang, b, _ in code_blocks(GUIDE) if lang == "text" and b.startswith("$ swapgen\n")]
    return body


def test_guide_ollama_example_is_a_real_run(tmp_path):
    assert guide_block() == guide_example(tmp_path), (
        "docs/ollama-models.md's example differs from a real run (refresh: python tests/test_ollama_store.py)")


def test_guide_ollama_settings_are_the_example_settings():
    (body, _), = yaml_blocks("# swapgen.yaml", GUIDE)
    assert body.split("\n", 1)[1] == GUIDE_SETTINGS.replace("STORE", "~/.ollama/models")


if __name__ == "__main__":  # refresh the guide's example from a real run
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        fresh = guide_example(Path(tmp))
    GUIDE.write_text(page_text(GUIDE).replace(guide_block(), fresh, 1), encoding="utf-8")
