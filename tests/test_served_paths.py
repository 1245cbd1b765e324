"""`path_map`: host paths in, served paths out, for every path of a plan, and a path outside the
map refused with its name."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import yaml

from autogen.cmdline import split_command
from autogen.commands import sample
from autogen.commands.detect import detect
from autogen.discovery.rows import Adapter, ModelRow
from autogen.emit.entry import Entry, Plan
from autogen.emit.served_paths import PathMap, plan_files, serve_plan
from autogen.errors import SettingsError, SwapgenError
from autogen.settings.load import load_settings
from autogen.settings.schema import Override, PathMapping, Settings
from tests.builders import SETTINGS, add_model
from tests.guide_pages import code_blocks, page, yaml_blocks
from tests.real_library import chat, hub_gguf
from tests.runs import generate

EXE = "/app/llama-server"


def path_map(*pairs: tuple[str, str | None], roots: tuple[str, ...] = ()) -> PathMap:
    return PathMap.of(Settings(roots=roots, path_map=tuple(PathMapping(h, s) for h, s in pairs)))


def served(plan: Plan, pmap: PathMap, *files: str, opened: tuple[str, ...] = ()) -> Plan:
    return serve_plan(plan, pmap, files, opened)


def entry_plan(*args: str, env: tuple[str, ...] = (), files: tuple[tuple[str, str], ...] = ()) -> Plan:
    return Plan(model_id="m", entries=(Entry(id="m", argv=(EXE, *args), env=env),), files=files)


class TestServe:
    def test_prefixes_match_on_whole_path_components(self):
        pmap = path_map(("/mnt/models", "/models"))
        assert pmap.serve("/mnt/models/a/x.gguf") == "/models/a/x.gguf"
        assert pmap.serve("/mnt/models") == "/models"
        assert pmap.serve("/mnt/models2/x.gguf") is None
        assert pmap.serve("/mnt/model") is None

    def test_the_first_matching_pair_wins(self):
        pmap = path_map(("/mnt/models/big", "/big"), ("/mnt/models", "/models"))
        assert pmap.serve("/mnt/models/big/x.gguf") == "/big/x.gguf"
        assert pmap.serve("/mnt/models/small/x.gguf") == "/models/small/x.gguf"

    def test_keep_and_the_root_folder(self):
        pmap = path_map(("/mnt/models", "/"), ("/", None))
        assert pmap.serve("/mnt/models/x.gguf") == "/x.gguf"
        assert pmap.serve("/mnt/models") == "/"
        assert pmap.serve("/opt/elsewhere/x.gguf") == "/opt/elsewhere/x.gguf"

    def test_a_symlinked_root_is_served_through_its_real_path(self, tmp_path):
        """The root the settings name is a link into the mapped folder."""
        (tmp_path / "disk/models").mkdir(parents=True)
        (tmp_path / "home").mkdir()
        (tmp_path / "home/models").symlink_to(tmp_path / "disk/models")
        pmap = path_map((str(tmp_path / "disk/models"), "/models"), roots=(str(tmp_path / "home/models"),))
        assert pmap.serve(str(tmp_path / "home/models/a/x.gguf")) == "/models/a/x.gguf"

    def test_a_symlinked_host_folder_matches_by_its_real_path_too(self, tmp_path):
        (tmp_path / "disk/models").mkdir(parents=True)
        (tmp_path / "link").symlink_to(tmp_path / "disk")
        pmap = path_map((str(tmp_path / "link/models"), "/models"))
        assert pmap.serve(str(tmp_path / "disk/models/x.gguf")) == "/models/x.gguf"
        assert pmap.serve(str(tmp_path / "link/models/x.gguf")) == "/models/x.gguf"


class TestServePlan:
    pmap = path_map(("/mnt/models", "/models"), ("/srv/cache", "/cache"))

    def test_every_argument_form_is_served(self):
        plan = entry_plan("-m", "/mnt/models/a/x.gguf", "--lora-scaled", "/mnt/models/a/l.gguf:0.5",
                          "--mmproj=/mnt/models/a/p.gguf", "--models", "/mnt/models/a.gguf,/mnt/models/b.gguf",
                          env=("HF_HOME=/mnt/models/hf",))
        out = served(plan, self.pmap, "/mnt/models/a/x.gguf").entries[0]
        assert out.argv == (EXE, "-m", "/models/a/x.gguf", "--lora-scaled", "/models/a/l.gguf:0.5",
                            "--mmproj=/models/a/p.gguf", "--models", "/models/a.gguf,/models/b.gguf")
        assert out.env == ("HF_HOME=/models/hf",)

    def test_side_files_are_served_where_they_are_written(self):
        text = json.dumps({"models": [{"path": "/mnt/models/tts/m.gguf"}]})
        plan = entry_plan("--config", "/srv/cache/audiocpp/m.json", files=(("/srv/cache/audiocpp/m.json", text),))
        out = served(plan, self.pmap, "/srv/cache/audiocpp/m.json", "/mnt/models/tts/m.gguf")
        assert out.files == (("/srv/cache/audiocpp/m.json", '{"models": [{"path": "/models/tts/m.gguf"}]}'),)
        assert out.entries[0].argv[-1] == "/cache/audiocpp/m.json" and out.conflicts == ()

    def test_the_executable_and_other_text_stay_as_written(self):
        """The backend path is the container's own; `/v1` and a name that only starts alike are not paths."""
        plan = Plan(model_id="m", entries=(Entry(id="m", argv=("/mnt/models/bin/server", "--api-prefix", "/v1",
                                                               "-m", "/mnt/models2/x.gguf", "--alias", "x/mnt/models")),))
        assert served(plan, self.pmap).entries == plan.entries

    def test_a_flag_no_emitter_knows_is_served_from_the_plan_files(self):
        """A LoRA or draft flag added later names one of the row's inputs: served with no code of its own."""
        row = ModelRow(id="m", format="gguf", path="/mnt/models/a/x.gguf",
                       inputs=("/mnt/models/a/x.gguf", "/data/loras/style.gguf"))
        plan = entry_plan("-m", row.path, "--lora", "/data/loras/style.gguf")
        out = served(plan, self.pmap, *plan_files(row, None, Settings(roots=()), plan))
        assert out.entries[0].argv[2] == "/models/a/x.gguf"
        assert out.conflicts == ("path_map: model 'm': /data/loras/style.gguf is outside every mapped folder; "
                                 "map a folder above it, or serve it as it is with `/data/loras: keep`",)

    def test_adapters_and_a_pinned_draft_are_plan_files(self):
        """A LoRA paired by discovery and a draft an override pins outside the roots are mapped or refused."""
        row = ModelRow(id="m", format="gguf", path="/mnt/models/a/x.gguf",
                       loras=(Adapter(path="/mnt/models/a/style.gguf", name="style", kind="gguf", size_bytes=1),))
        override = Override(match="*", draft="/data/drafts/small.gguf")
        plan = entry_plan("-m", row.path, "--lora", "/mnt/models/a/style.gguf", "-md", "/data/drafts/small.gguf")
        files = plan_files(row, override, Settings(roots=()), plan)
        assert {"/mnt/models/a/style.gguf", "/data/drafts/small.gguf"} <= set(files)
        out = served(plan, self.pmap, *files)
        assert out.entries[0].argv[4] == "/models/a/style.gguf"
        assert out.conflicts == ("path_map: model 'm': /data/drafts/small.gguf is outside every mapped folder; "
                                 "map a folder above it, or serve it as it is with `/data/drafts: keep`",)

    def test_a_path_outside_the_map_is_named_with_its_model(self):
        plan = entry_plan("-m", "/home/me/models/x.gguf")
        pmap = path_map(("/mnt/models", "/models"), roots=("/home/me/models",))
        assert served(plan, pmap, "/home/me/models/x.gguf").conflicts == (
            "path_map: model 'm': /home/me/models/x.gguf is outside every mapped folder; map a folder above it, "
            "or serve it as it is with `/home/me/models: keep`",)

    def test_kept_paths_are_not_a_problem(self):
        plan = entry_plan("-m", "/home/me/models/x.gguf")
        pmap = path_map(("/mnt/models", "/models"), ("/home/me", None))
        out = served(plan, pmap, "/home/me/models/x.gguf")
        assert out.entries == plan.entries and out.conflicts == ()


class TestLinks:
    """The container follows a link inside its own view: an absolute target is a container path."""

    def layout(self, tmp_path):
        host = tmp_path / "host"
        (host / "blobs").mkdir(parents=True)
        (host / "blobs/abc").write_bytes(b"GGUF")
        (host / "snap").mkdir()
        return host, path_map((str(host), "/models"))

    def test_a_relative_link_inside_the_mapped_folder_is_fine(self, tmp_path):
        host, pmap = self.layout(tmp_path)
        (host / "snap/x.gguf").symlink_to("../blobs/abc")
        assert pmap.unreachable(str(host / "snap/x.gguf")) is None

    def test_an_absolute_link_to_a_host_path_is_refused(self, tmp_path):
        host, pmap = self.layout(tmp_path)
        (host / "snap/x.gguf").symlink_to(host / "blobs/abc")
        plan = entry_plan("-m", str(host / "snap/x.gguf"))
        out = served(plan, pmap, str(host / "snap/x.gguf"))
        assert out.entries[0].argv[-1] == "/models/snap/x.gguf"
        assert out.conflicts == (
            f"path_map: model 'm': {host}/snap/x.gguf is served as /models/snap/x.gguf, but the container's lookup "
            f"reaches /{tmp_path.parts[1]}, outside every mapped "
            "folder (a link to a host path); use a relative link, or map the folder it points into",)

    def test_an_absolute_link_to_a_served_path_is_fine(self, tmp_path):
        host, pmap = self.layout(tmp_path)
        (host / "snap/x.gguf").symlink_to("/models/blobs/abc")
        assert pmap.unreachable(str(host / "snap/x.gguf")) is None

    def test_a_link_above_the_mount_is_refused(self, tmp_path):
        host, pmap = self.layout(tmp_path)
        (tmp_path / "outside.gguf").write_bytes(b"GGUF")
        (host / "snap/x.gguf").symlink_to("../../outside.gguf")
        assert pmap.unreachable(str(host / "snap/x.gguf")) == "/outside.gguf"

    def test_every_file_the_engine_opens_is_checked(self, tmp_path):
        """The command names shard 1; shard 2 is opened by name beside it."""
        host, pmap = self.layout(tmp_path)
        (host / "snap/x-00001-of-00002.gguf").write_bytes(b"GGUF")
        (host / "snap/x-00002-of-00002.gguf").symlink_to(host / "blobs/abc")
        first, second = str(host / "snap/x-00001-of-00002.gguf"), str(host / "snap/x-00002-of-00002.gguf")
        out = served(entry_plan("-m", first), pmap, first, second, opened=(first, second))
        assert len(out.conflicts) == 1 and second in out.conflicts[0]


class TestSettings:
    def write(self, tmp_path, text):
        (tmp_path / "swapgen.yaml").write_text("roots: [models]\n" + text)
        return tmp_path / "swapgen.yaml"

    def test_host_folders_resolve_like_roots_and_lose_trailing_slashes(self, tmp_path):
        s = load_settings(self.write(tmp_path, "path_map:\n  models/: /models/\n  ~/shared: keep\n  /: keep\n"))
        assert s.path_map == (PathMapping(str(tmp_path / "models"), "/models"),
                              PathMapping(os.path.expanduser("~/shared"), None), PathMapping("/", None))

    @pytest.mark.parametrize(("text", "problem"), [
        ("path_map: {/mnt/models: models}",
         "path_map: /mnt/models: expected the absolute folder the container sees it as, or 'keep', got 'models'"),
        ("path_map: {/mnt/models: ~/models}",
         "path_map: /mnt/models: expected the absolute folder the container sees it as, or 'keep', got '~/models'"),
        ("path_map: [/mnt/models, /models]",
         "path_map: expected a mapping of host folders to served folders, got a list"),
        ("path_map: {/mnt/models: '/m${PORT}'}",
         "path_map: /mnt/models: the served folder '/m${PORT}' cannot be carried in a command (no '${', line "
         "breaks or NUL)"),
        ("path_map: {/mnt: /m, /mnt/models: /models}",
         "path_map: '/mnt/models' is never used: '/mnt' above it matches its files first; list the longer "
         "folder first"),
        ("path_map: {/mnt/models: /a, /mnt/models/: /b}", "path_map: '/mnt/models' is listed twice"),
    ])
    def test_mistakes_are_named(self, tmp_path, text, problem):
        with pytest.raises(SettingsError) as info:
            load_settings(self.write(tmp_path, text + "\n"))
        assert info.value.problems == [problem]
        assert info.value.lines == [2]

    def test_backends_detect_says_it_cannot_check_container_paths(self, tmp_path):
        settings = load_settings(self.write(tmp_path, "backends_file: b.yaml\npath_map: {/mnt/models: /models}\n"))
        with pytest.raises(SwapgenError, match="path_map is set, so backend paths are the executables as the "
                                               "container sees them"):
            detect(settings, dry_run=True)
        assert not (tmp_path / "b.yaml").exists()


def cmd_paths(config: str) -> list[str]:
    """Every absolute path argument of every `cmd` (the executable aside), `NAME=PATH` values included."""
    paths = []
    for model in yaml.safe_load(config)["models"].values():
        for arg in split_command(model["cmd"])[1:]:
            value = arg.partition("=")[2] if "=" in arg else arg
            if value.startswith("/"):
                paths.append(value)
    return paths


class TestContainerLayout:
    """The sample library on the host, served under /models: every path of the config opens
    inside the mapped tree, and a model outside the map stops the run naming it."""

    def settings(self, tmp_path, extra=""):
        (tmp_path / "swapgen.yaml").write_text(
            f"roots: [host/{sample.SAMPLE_DIR}]\nvram_budget_gb: 8\ncard_vram_gb: 0\n"
            f"backends:\n  - {{id: llama, kind: llama, path: {EXE}, default: true}}\n"
            f"  - {{id: sd, kind: sd, path: /app/sd-server}}\n"
            f"  - {{id: asr, kind: asr, path: /app/parakeet-server}}\n"
            f"  - {{id: vllm, kind: vllm, path: /app/vllm, version: '0.11.0'}}\n"
            f"path_map:\n  host/{sample.SAMPLE_DIR}: /models\n{extra}")
        return tmp_path / "swapgen.yaml"

    def test_every_path_resolves_inside_the_mapped_tree(self, tmp_path):
        sample.ensure(tmp_path / "host" / sample.SAMPLE_DIR)
        rc, graph = generate(self.settings(tmp_path))
        assert rc == 0
        config = (tmp_path / "config.yaml").read_text()
        paths = cmd_paths(config)
        assert len(paths) >= 8 and str(tmp_path) not in config.split("models:", 1)[1].replace("# ", "")
        pmap = graph.library.path_map
        for path in paths:
            assert path.startswith("/models/"), path
            host = pmap.host_of(path)
            assert os.path.exists(host), path
        assert any("/models/hf-cache/" in p for p in paths)  # an HF snapshot (relative links into blobs/)

    def test_a_model_outside_the_map_is_refused_with_its_name(self, tmp_path):
        sample.ensure(tmp_path / "host" / sample.SAMPLE_DIR)
        settings = self.settings(tmp_path)
        assert generate(settings)[0] == 0
        before = (tmp_path / "config.yaml").read_bytes()
        add_model(tmp_path / "elsewhere", "E-GGUF/Extra-Q4_0.gguf")
        settings.write_text(settings.read_text().replace(f"roots: [host/{sample.SAMPLE_DIR}]",
                                                         f"roots: [host/{sample.SAMPLE_DIR}, elsewhere]"))
        rc, _ = generate(settings)
        assert rc != 0
        assert (tmp_path / "config.yaml").read_bytes() == before

    def test_the_refusal_names_the_model_and_the_path(self, tmp_path, capfd):
        add_model(tmp_path / "host" / "m", "A-GGUF/Alpha-Q4_0.gguf")
        add_model(tmp_path / "elsewhere", "E-GGUF/Extra-Q4_0.gguf")
        (tmp_path / "swapgen.yaml").write_text(SETTINGS.replace("roots: [models]", "roots: [host/m, elsewhere]")
                                               + "path_map: {host/m: /models}\n")
        rc, _ = generate(tmp_path / "swapgen.yaml")
        err = capfd.readouterr().err
        assert rc != 0 and not (tmp_path / "config.yaml").exists()
        assert (f"path_map: model 'extra-q4_0': {tmp_path}/elsewhere/E-GGUF/Extra-Q4_0.gguf is outside every "
                f"mapped folder; map a folder above it, or serve it as it is with `{tmp_path}/elsewhere: keep`") in err

    def test_a_file_reached_twice_is_served_by_the_path_the_container_opens(self, tmp_path, capsys):
        """LM Studio's links into the hub cache are absolute host paths; the cache's own snapshot
        links are relative. The same file is served through the second, never refused."""
        hub, lms = tmp_path / "host/hub", tmp_path / "host/lmstudio/models"
        link = hub_gguf(hub, "Qwen/Qwen3-4B-GGUF", "Qwen3-4B-Q4_K_M.gguf",
                        lambda p: chat(p, "qwen3", blocks=6, embd=192))
        lm = lms / "lmstudio-community/Qwen3-4B-GGUF/Qwen3-4B-Q4_K_M.gguf"
        lm.parent.mkdir(parents=True)
        lm.symlink_to(link.resolve())
        (tmp_path / "swapgen.yaml").write_text(SETTINGS.replace("roots: [models]", "roots: [host/lmstudio/models, host/hub]")
                                               + "path_map:\n  host/lmstudio/models: /lmstudio\n  host/hub: /hub\n")
        rc, graph = generate(tmp_path / "swapgen.yaml")
        assert rc == 0
        (row,) = graph.library.discovery.models
        assert row.path == str(link)
        assert "-m /hub/models--Qwen--Qwen3-4B-GGUF/snapshots/abc123/Qwen3-4B-Q4_K_M.gguf" in (
            tmp_path / "config.yaml").read_text()
        (same,) = [i for i in graph.library.discovery.ignored if i.path == str(lm)]
        assert same.reason == f"same file as {link}" and same.attached
        (tmp_path / "swapgen.yaml").write_text(SETTINGS.replace("roots: [models]", "roots: [host/lmstudio/models, host/hub]"))
        assert generate(tmp_path / "swapgen.yaml")[1].library.discovery.models[0].path == str(lm)  # no map: found first

    def test_a_llama_server_preset_is_served_too(self, library):
        """`target: llama-server`: the router in the container reads the same served paths."""
        (library / "swapgen.yaml").write_text(SETTINGS + f"target: llama-server\npath_map: {{{library}: /srv}}\n")
        assert generate(library / "swapgen.yaml")[0] == 0
        text = (library / "models.ini").read_text()
        models = [line.split(" = ", 1)[1] for line in text.splitlines() if line.startswith("model = ")]
        assert len(models) == 2 and all(m.startswith("/srv/models/") for m in models)
        assert str(library) not in text  # the start command names the preset where the router reads it too
        assert "--models-preset /srv/models.ini" in text

    def test_the_map_is_part_of_every_fragment_key(self, tmp_path):
        add_model(tmp_path / "host" / "m", "A-GGUF/Alpha-Q4_0.gguf")
        settings = tmp_path / "swapgen.yaml"
        settings.write_text(SETTINGS.replace("roots: [models]", "roots: [host/m]") + "path_map: {host/m: /models}\n")
        assert generate(settings)[0] == 0
        settings.write_text(settings.read_text().replace("/models}", "/srv/models}"))
        rc, graph = generate(settings)
        assert rc == 0 and graph.stats["emitted"] == 1
        assert "-m /srv/models/A-GGUF/Alpha-Q4_0.gguf" in (tmp_path / "config.yaml").read_text()
        shutil.rmtree(tmp_path / "cache")


class TestGuideExample:
    """docs/containers-and-watch.md's worked example with llama-swap's CUDA image, on the sample library."""

    def blocks(self):
        guide = page("containers-and-watch.md")
        (settings, _), = [b for b in yaml_blocks("# swapgen.yaml", guide) if "path_map:" in b[0]]
        (entry, _), = yaml_blocks("# config.yaml (container)", guide)
        (error,) = [body for lang, body, _ in code_blocks(guide) if lang == "text" and "path_map: model" in body]
        return settings, entry.split("\n", 1)[1], error

    def test_the_entry_is_what_a_run_writes(self, tmp_path):
        settings, entry, _ = self.blocks()
        host = tmp_path / "mnt/models"
        sample.ensure(host)
        (tmp_path / "swapgen.yaml").write_text(settings.replace("/mnt/models", str(host))
                                               .replace("/srv/llama-swap", str(tmp_path / "srv")))
        assert generate(tmp_path / "swapgen.yaml")[0] == 0
        assert entry in (tmp_path / "srv/config.yaml").read_text()

    def test_the_refusal_is_what_a_run_prints(self, tmp_path, capfd):
        settings, _, error = self.blocks()
        add_model(tmp_path / "mnt/models", "A-GGUF/Alpha-Q4_0.gguf")
        add_model(tmp_path / "home/me/models", "E-GGUF/Extra-Q4_0.gguf")
        text = settings.replace("roots: [/mnt/models]", "roots: [/mnt/models, /home/me/models]")
        for folder in ("/mnt/models", "/home/me/models", "/srv/llama-swap"):
            text = text.replace(folder, str(tmp_path) + folder)
        (tmp_path / "srv/llama-swap").mkdir(parents=True)
        (tmp_path / "srv/llama-swap/swapgen.yaml").write_text(text)
        rc, _ = generate(tmp_path / "srv/llama-swap/swapgen.yaml")
        printed = capfd.readouterr().err.replace(str(tmp_path), "")
        assert rc != 0
        for line in error.strip().splitlines():
            assert line.strip() in printed
