"""README.md and the user guide (docs/*.md) stay true: the settings reference covers every
settings key with the code's defaults, every settings example loads, every llama-swap config
shown validates, and the README's sample-library tour matches a real run. How the pages are read
(tables, block markers, transcripts) is in tests/guide_pages.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
from pathlib import Path

import attrs
import pytest
from ruamel.yaml import YAML

from autogen.commands import cli, sample
from autogen.router.validate import validate_text
from autogen.settings.fields import key_of
from autogen.settings.load import load_backends_file, load_settings
from autogen.settings.schema import BackendRow, Encoders, Gpu, Group, Host, Override, Profile, Settings, Watch
from tests.fleet_fixtures import FRONT_SETTINGS, HOST_SETTINGS, MULTI_NODE, build_fleet
from tests.guide_pages import (
    MARKERS,
    PAGES,
    README,
    code_blocks,
    marker,
    page,
    page_name,
    page_text,
    prose,
    section,
    section_blocks,
    table_rows_under,
    yaml_blocks,
)

REPO = README.parent
TEXT = page_text(README)
#: Where the settings tables are.
REFERENCE = page("settings.md")

SETTINGS_CLASSES = (Settings, BackendRow, Override, Profile, Group, Gpu, Encoders, Host, Watch)
#: Fields that are not keys of the file: `Settings.source` is filled by `load_settings`.
NOT_KEYS = {(Settings, "source")}
#: The path the README's tour writes in place of the clone's absolute path.
TOUR_ROOT = "/home/me/swapgen"

_NAME = re.compile(r"`([a-z_][a-z0-9_]*)`")


def examples(wanted: str) -> list:
    """The ```yaml blocks of every page whose marker is `wanted`, as pytest params named by
    their page and line."""
    return [pytest.param(body, line, id=f"{page_name(path)}:{line}")
            for path in PAGES for body, line in yaml_blocks(wanted, path)]


def table_rows(cls: type) -> list[list[str]]:
    """Cells of the table rows under every heading that names `cls` in backticks."""
    return table_rows_under(lambda heading: f"`{cls.__name__}`" in heading, REFERENCE)


def documented(cls: type) -> dict[str, list[str]]:
    """Key → its row's cells, for every backticked name in a row's first cell."""
    return {name: cells for cells in table_rows(cls) for name in _NAME.findall(cells[0])}


def keys(cls: type) -> list[str]:
    return [key_of(a) for a in attrs.fields(cls) if (cls, a.name) not in NOT_KEYS]


def render_default(field: attrs.Attribute) -> str:
    """A field's default as the reference's default column writes it."""
    default = field.default
    if default is attrs.NOTHING:
        return "required"
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        default = default.factory()
    if attrs.has(type(default)) or field.metadata.get("check") == "path map":  # a mapping, kept as pairs
        default = {}
    if default is None:
        return "`null`"
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    if isinstance(default, tuple):
        default = list(default)
    if isinstance(default, str):
        return f'`"{default}"`'
    return f"`{default!r}`".replace("'", '"')


# ---------------------------------------------------------------------------------------------
# opening


def test_readme_opens_with_the_two_setup_commands():
    """The first thing a reader sees is exactly the two commands a fresh clone needs."""
    lang, body, _line = code_blocks()[0]
    assert not re.search(r"^## ", TEXT[: TEXT.index("```")], re.MULTILINE), "commands must come first"
    commands = [ln.split("#", 1)[0].strip() for ln in body.splitlines() if ln.split("#", 1)[0].strip()]
    assert lang == "sh"
    assert commands == ["pip install -e . && doit", "pip install -e '.[test]' && pytest"]


# ---------------------------------------------------------------------------------------------
# settings tables


@pytest.mark.parametrize("cls", SETTINGS_CLASSES, ids=lambda c: c.__name__)
def test_every_settings_key_has_a_table_row(cls):
    """A key added to settings.py fails here until the reference's table for its class describes it."""
    missing = [name for name in keys(cls) if name not in documented(cls)]
    assert not missing, f"docs/settings.md: no row in the `{cls.__name__}` table for {missing}"


@pytest.mark.parametrize("cls", SETTINGS_CLASSES, ids=lambda c: c.__name__)
def test_tables_document_no_key_the_code_lacks(cls):
    """A renamed or removed key fails here instead of lingering in the reference."""
    stale = sorted(set(documented(cls)) - set(keys(cls)))
    assert not stale, f"docs/settings.md: `{cls.__name__}` table names keys the code does not have: {stale}"


@pytest.mark.parametrize("cls", SETTINGS_CLASSES, ids=lambda c: c.__name__)
def test_table_defaults_are_the_code_defaults(cls):
    rows = documented(cls)
    wrong = {}
    for field in attrs.fields(cls):
        if key_of(field) in rows:
            cells = rows[key_of(field)]
            assert len(cells) == 4, f"row of {key_of(field)!r} needs key | type | default | meaning"
            if cells[2] != render_default(field):
                wrong[key_of(field)] = (cells[2], render_default(field))
    assert not wrong, f"docs/settings.md `{cls.__name__}` defaults (page, code): {wrong}"


def test_table_helpers_read_a_known_row():
    """The parser itself works: a row the reference certainly has is found with its cells."""
    row = documented(Override)["vllm_tool_parser"]
    assert row[2] == "`null`" and "none" in row[3]
    assert render_default(attrs.fields_dict(Settings)["ttl"]) == "`600`"
    assert render_default(attrs.fields_dict(Settings)["roots"]) == "required"
    assert render_default(attrs.fields_dict(Settings)["tool_parsers"]) == "`{}`"
    assert render_default(attrs.fields_dict(Settings)["output"]) == '`"config.yaml"`'


# ---------------------------------------------------------------------------------------------
# YAML examples


@pytest.mark.parametrize("path", PAGES, ids=page_name)
def test_every_yaml_block_says_what_it_is(path):
    """Unmarked YAML would escape the checks below."""
    unmarked = [line for lang, body, line in code_blocks(path)
                if lang == "yaml" and marker(body.splitlines()[0].strip()) not in MARKERS]
    assert not unmarked, f"{page_name(path)}: ```yaml blocks at lines {unmarked} need a marker line, one of {MARKERS}"


def test_the_pages_have_settings_examples_to_check():
    assert len(examples("# swapgen.yaml")) >= 20
    assert examples("# config.yaml") and examples("# backends.yaml")


@pytest.mark.parametrize("body,line", examples("# swapgen.yaml"))
def test_settings_example_loads(body, line, tmp_path):
    data = YAML(typ="safe", pure=True).load(body)
    for root in data.get("roots", []):
        if not Path(root).expanduser().is_absolute():
            (tmp_path / root).mkdir(parents=True, exist_ok=True)
    (tmp_path / "swapgen.yaml").write_text(body, encoding="utf-8")
    settings = load_settings(tmp_path / "swapgen.yaml")
    assert settings.roots or settings.hosts


@pytest.mark.parametrize("body,line", examples("# backends.yaml"))
def test_backends_file_example_loads(body, line, tmp_path):
    (tmp_path / "backends.yaml").write_text(body, encoding="utf-8")
    assert load_backends_file(tmp_path / "backends.yaml")


@pytest.mark.parametrize("body,line", examples("# config.yaml"))
def test_whole_config_example_is_valid_for_llama_swap(body, line):
    errors = [str(p) for p in validate_text(body, f"block at line {line}") if p.fatal]
    assert not errors


def test_compose_example_runs_the_watcher_beside_llama_swap():
    """The sidecar sees the models where the host does (the settings' roots), llama-swap where
    `path_map` serves them, and both share the config's folder (not the file: it is renamed)."""
    guide = page("containers-and-watch.md")
    (body, _line), = yaml_blocks("# compose.yaml", guide)
    services = YAML(typ="safe", pure=True).load(body)["services"]
    assert services["swapgen"]["command"][-1] == "watch"
    (settings, _), = [b for b in yaml_blocks("# swapgen.yaml", guide) if "path_map:" in b[0]]
    data = YAML(typ="safe", pure=True).load(settings)
    (host, served), = data["path_map"].items()
    config_dir = os.path.dirname(data["output"])
    assert f"{host}:{host}:ro" in services["swapgen"]["volumes"]
    assert f"{config_dir}:{config_dir}" in services["swapgen"]["volumes"]
    assert f"{host}:{served}:ro" in services["llama-swap"]["volumes"]
    assert f"{config_dir}:/config:ro" in services["llama-swap"]["volumes"]
    assert services["llama-swap"]["entrypoint"][-2:] == ["/config/config.yaml", "--watch-config"]


def test_validate_example_prints_what_the_page_shows(tmp_path, monkeypatch):
    """The labelled lines and the exit status of `swapgen validate` on the example with mistakes,
    then the summary line once the error is fixed."""
    guide = page("commands.md")
    blocks = section_blocks("## Checking a config: swapgen validate", guide)
    (config,) = [b for lang, b, _ in blocks if lang == "yaml" and b.startswith("# config.yaml (with mistakes)\n")]
    (shown,) = [b for lang, b, _ in blocks if lang == "text" and b.startswith("$ swapgen validate config.yaml")]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yaml").write_text(config.split("\n", 1)[1])
    out, rc = _run(["validate", "config.yaml"])
    assert f"$ swapgen validate config.yaml; echo \"exit $?\"\n{out}exit {rc}\n" == shown
    (tmp_path / "config.yaml").write_text(config.split("\n", 1)[1].replace("ttl: soon", "ttl: 600"))
    out, rc = _run(["validate", "config.yaml"])
    assert rc == 0 and f"`{out.splitlines()[-1]}`" in prose(guide)


def _run(argv: list[str]) -> tuple[str, int]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main(argv)
    return out.getvalue(), rc


def test_settings_errors_are_what_two_runs_print(tmp_path, capsys):
    """The settings example with mistakes: the first run's lines, then the next run's once the
    key and type mistakes are fixed (paths shown under /home/me/models)."""
    blocks = section_blocks("## How the file is read", REFERENCE)
    (settings,) = [b for lang, b, _ in blocks if lang == "yaml" and b.startswith("# swapgen.yaml (with mistakes)\n")]
    shown = [b for lang, b, _ in blocks if lang == "text" and b.startswith("$ swapgen\n")]
    (tmp_path / "models").mkdir()
    path = tmp_path / "swapgen.yaml"
    fixed = settings.split("\n", 1)[1].replace("high", "0.9").replace("vllm_gpu_utl", "vllm_gpu_util")
    runs = []
    for text in (settings.split("\n", 1)[1], fixed):
        path.write_text(text)
        assert cli.main(["--settings", str(path)]) == 1
        runs.append("$ swapgen\n" + capsys.readouterr().err.replace(str(tmp_path), "/home/me/models"))
    assert runs == shown


def test_precommit_rev_is_this_release():
    """`rev:` is the tag of the version pyproject and `swapgen --version` give (`v0.3.0`)."""
    import tomllib  # noqa: PLC0415 - only here

    from autogen import __version__  # noqa: PLC0415 - only here

    (body, _line), = yaml_blocks("# .pre-commit-config.yaml", page("pre-commit.md"))
    (repo,) = YAML(typ="safe", pure=True).load(body)["repos"]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert repo["rev"] == f"v{__version__}" == f"v{project}"


def test_precommit_example_uses_the_hooks_this_repo_defines():
    (body, _line), = yaml_blocks("# .pre-commit-config.yaml", page("pre-commit.md"))
    hooks = {h["id"] for h in YAML(typ="safe", pure=True).load((REPO / ".pre-commit-hooks.yaml").read_text())}
    used = [h["id"] for repo in YAML(typ="safe", pure=True).load(body)["repos"] for h in repo["hooks"]]
    assert set(used) == hooks == {"swapgen", "swapgen-validate"}


# ---------------------------------------------------------------------------------------------
# the tour matches a real run


def _captured(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(argv) == 0
    return out.getvalue()


def run_tour(root: Path) -> dict[str, str]:
    """The repo's swapgen.yaml over a fresh sample library in `root`: the generated config, the
    `swapgen list` output and the first run's summary line, with paths as the tour shows them."""
    shutil.copy2(REPO / "swapgen.yaml", root / "swapgen.yaml")
    sample.ensure(root / sample.SAMPLE_DIR)
    settings = ["--settings", str(root / "swapgen.yaml")]
    output = _captured(settings)
    summary = output.splitlines()[-1]
    listing = _captured([*settings, "list"]).replace(f"{root}/{sample.SAMPLE_DIR}/", "…/")
    config = (root / "config.yaml").read_text(encoding="utf-8").replace(str(root), TOUR_ROOT)
    return {"config": config, "list": listing, "summary": summary, "output": output}


@pytest.fixture(scope="module")
def tour(tmp_path_factory) -> dict[str, str]:
    return run_tour(tmp_path_factory.mktemp("tour"))


def excerpt_units(models: str) -> list[str]:
    """Split the excerpt's `models:` text into entries (comment lines + block) and SKIPPED lines."""
    units: list[list[str]] = []
    previous = ""
    for line in models.splitlines():
        comment = line.startswith("  # ")
        starts = line.startswith("  # SKIPPED") or (comment and (not previous.startswith("  # ")
                                                                 or previous.startswith("  # SKIPPED")))
        if starts or not units:
            units.append([])
        units[-1].append(line)
        previous = line
    return ["\n".join(u) + "\n" for u in units]


def list_block() -> tuple[str, int]:
    (body, line), = [(b, n) for lang, b, n in code_blocks() if lang == "text" and b.startswith("$ swapgen list\n")]
    return body.split("\n", 1)[1], line


def test_tour_uses_the_repo_settings_file():
    (body, _), *_ = yaml_blocks("# swapgen.yaml")
    ours = YAML(typ="safe", pure=True).load((REPO / "swapgen.yaml").read_text())
    assert YAML(typ="safe", pure=True).load(body) == ours


def test_tour_config_excerpt_is_what_doit_writes(tour):
    """Each entry and SKIPPED line of the excerpt appears verbatim in a real run."""
    (excerpt, line), = yaml_blocks("# config.yaml (excerpt)")
    head, models = excerpt.split("\n", 1)[1].split("models:\n", 1)
    assert tour["config"].startswith(head + "models:\n"), REFRESH
    units = excerpt_units(models)
    assert sum(u.startswith("  # SKIPPED") for u in units) >= 1 and len(units) >= 3
    for unit in units:
        assert unit in tour["config"], f"README.md line {line}: excerpt differs from a real run:\n{unit}{REFRESH}"


def test_tour_prose_says_where_the_projector_went(tour):
    """The tour's reading of the gemma entry agrees with the entry's own comment."""
    said = prose(README)
    on_gpu = "# projector mmproj-F16.gguf on the GPU\n" in tour["config"]
    assert ("The projector stays on the GPU" in said) == on_gpu
    assert ("The projector runs on the CPU" in said) == (not on_gpu)


def test_tour_list_output_is_what_swapgen_prints(tour):
    """`swapgen list` in the tour is a real run's output, paths under the library shown as `…/`."""
    shown, line = list_block()
    assert shown == tour["list"], f"README.md line {line}: `swapgen list` output differs{REFRESH}"


def test_tour_run_output_is_what_doit_prints(tour):
    """The first run's lines as the tour shows them (`…` for the ones left out), in order."""
    (shown,) = [b for lang, b, _ in code_blocks() if lang == "text" and b.startswith(".  model:")]
    lines, at = tour["output"].splitlines(), 0
    for line in shown.splitlines():
        if line.strip() != "…":
            assert line in lines[at:], f"README.md: {line!r} is not (in this order) in a real run's output"
            at = lines.index(line, at) + 1


def test_tour_summary_line_is_what_doit_prints(tour):
    assert tour["summary"].startswith("swapgen: ")
    assert f"\n{tour['summary']}\n" in TEXT, f"README.md: first `doit` summary differs{REFRESH}"


def test_list_json_rows_have_the_keys_the_commands_page_names(tmp_path):
    """Every row of `swapgen list --json` (ignored rows too) has exactly the documented keys."""
    run_tour(tmp_path)
    out, rc = _run(["--settings", str(tmp_path / "swapgen.yaml"), "list", "--json"])
    rows = json.loads(out)
    documented = set(re.findall(r"`([a-z_]+)`", section("## JSON for scripts", page("commands.md"))))
    assert rc == 0 and {r["class"] for r in rows} >= {"llm", "ignored"}
    assert set(rows[0]) <= documented, f"docs/commands.md does not name {sorted(set(rows[0]) - documented)}"
    for row in rows:
        assert list(row) == list(rows[0]), row
    ignored = [r for r in rows if r["class"] == "ignored"]
    assert all(r["engine"] is None and r["backend"] is None and r["role"] is None for r in ignored), ignored
    served = [r for r in rows if r["task"] and not r["skipped"]]
    assert all(r["engine"] and r["backend"] for r in served), served


def test_sample_library_table_covers_every_model(tour):
    """Each folder the tour's table names exists, and every listed model lives in one of them."""
    folders = [cells[0].strip("`") for cells in table_rows_under("## A tour of the sample library")]
    assert folders
    paths = [line.split("…/", 1)[1].split("  (")[0] for line in tour["list"].splitlines() if "…/" in line]
    for path in paths:
        assert any(path == f or path.startswith(f + "/") for f in folders), f"no sample-library row for {path}"
    for folder in folders:
        assert any(p == folder or p.startswith(folder + "/") for p in paths), f"{folder} is not in the library"


# ---------------------------------------------------------------------------------------------
# the fleet section matches a real fleet run (tests/fleet_fixtures.py builds the same fleet)

#: The path the fleet section writes in place of the fleet's folder.
FLEET_ROOT = "/repo"


@pytest.fixture(scope="module")
def fleet_run(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("fleet")
    front = build_fleet(root)
    summary = _captured(["--settings", str(front)]).splitlines()[-3:]
    configs = {name: (root / path).read_text(encoding="utf-8").replace(str(root), FLEET_ROOT)
               for name, path in (("front", "config.yaml"), ("gpu-a", "hosts/gpu-a/config.yaml"))}
    (root / "hosts" / "gpu-a" / "swapgen.yaml").write_text(HOST_SETTINGS + MULTI_NODE + "    vllm_distributed: mp\n")
    shown = _captured(["--settings", str(front), "show", "gpu-a/llama-3.1-70b-instruct-fp8-bf16"])
    workers = [line.split("on gpu-b: ", 1)[1] for line in shown.replace(str(root), FLEET_ROOT).splitlines()
               if "on gpu-b: " in line]
    return {**configs, "summary": "\n".join(summary), "worker": workers[0]}


#: The fleet's page.
FLEET = page("gpu-hosts.md")


def _fleet_blocks(lang: str, first: str) -> list[str]:
    return [body for lg, body, _ in code_blocks(FLEET) if lg == lang and body.startswith(first)]


def test_fleet_settings_examples_are_the_fleet_tested():
    (front,) = _fleet_blocks("yaml", "# fleet.yaml: the front's settings\n")
    (host,) = _fleet_blocks("yaml", "# hosts/gpu-a/swapgen.yaml")
    load = YAML(typ="safe", pure=True).load
    assert load(front) == load(FRONT_SETTINGS)
    assert load(host) == load(HOST_SETTINGS + MULTI_NODE)


def test_fleet_front_config_is_what_swapgen_writes(fleet_run):
    (block,) = _fleet_blocks("yaml", "# config.yaml\n# Generated by swapgen from fleet.yaml")
    assert block.split("\n", 1)[1] == fleet_run["front"]


def test_fleet_summary_and_head_command_are_a_real_run(fleet_run):
    assert f"\n{fleet_run['summary']}\n" in page_text(FLEET)
    (head,) = _fleet_blocks("text", "# hosts/gpu-a/config.yaml\n")
    assert head.split("\n", 1)[1] in fleet_run["gpu-a"]
    (worker,) = _fleet_blocks("text", "vllm serve ")
    assert worker.strip() == fleet_run["worker"]


# ---------------------------------------------------------------------------------------------
# refreshing the tour after a sizing or sample-library change

REFRESH = "\n(refresh the tour: python tests/test_readme.py, then read the diff)"
#: Entries the excerpt shows, besides every SKIPPED line.
EXCERPT_IDS = ('"gemma-3-12b-it-q4_k_m":', '"llama-3.1-8b-instruct-bf16":')


def refreshed(text: str, tour: dict[str, str]) -> str:
    """README text with the excerpt, the list output and the summary line taken from `tour`."""
    head, models = tour["config"].split("models:\n", 1)
    units = excerpt_units(models.split("\ngroups:\n")[0])
    keep = [u for u in units if u.startswith("  # SKIPPED") or any(i in u for i in EXCERPT_IDS)]
    (excerpt, _), = yaml_blocks("# config.yaml (excerpt)")
    text = text.replace(excerpt, "# config.yaml (excerpt)\n" + head + "models:\n" + "".join(keep))
    shown, _ = list_block()
    text = text.replace("$ swapgen list\n" + shown, "$ swapgen list\n" + tour["list"])
    return re.sub(r"^swapgen: \d+ models .*$", lambda _: tour["summary"], text, count=1, flags=re.MULTILINE)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        README.write_text(refreshed(TEXT, run_tour(Path(tmp))), encoding="utf-8")
    print(f"rewrote the tour in {README}")


def test_routing_example_is_what_a_run_writes(tmp_path):
    """The "Routing planned from VRAM" settings over the sample library write that routing block."""
    guide = page("vram-routing.md")
    (routing, line), = yaml_blocks("# config.yaml (routing)", guide)
    settings = [body for body, at in yaml_blocks("# swapgen.yaml", guide) if at < line][-1]
    (tmp_path / "swapgen.yaml").write_text(settings)
    sample.ensure(tmp_path / sample.SAMPLE_DIR)
    _captured(["--settings", str(tmp_path / "swapgen.yaml")])
    written = (tmp_path / "config.yaml").read_text(encoding="utf-8")
    block = routing.split("\n", 1)[1]
    assert written.endswith(block), f"docs/vram-routing.md line {line}: the routing block differs from a real run"
