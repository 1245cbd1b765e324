"""`swapgen report`: the plan as one self-contained page, every figure of which is a value of the
report `--json` prints and, per model, of `swapgen show --json` (docs/plan-page.md)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re

import pytest
import yaml

from autogen.commands import cli, sample
from autogen.router.matrix_dsl import compile_sets, expand
from autogen.settings.owned import PAGE_MARK
from tests import page_check
from tests.builders import SETTINGS, add_model
from tests.fleet_fixtures import build_fleet
from tests.whisper_fixtures import write_silero, write_whisper

#: The sample library on two cards, planned as a routing matrix: skips (a broken file, an
#: incomplete download), a projector, profiles (`share`), CPU-only and pinned entries.
MATRIX = """\
roots: [sample-library]
output: matrix.yaml
cache_dir: cache-matrix
vram_budget_gb: 22
gpus: [{index: 0, name: RTX 4090, vram_gb: 24, vendor: nvidia},
       {index: 1, name: RTX 4070, vram_gb: 12, vendor: nvidia}]
backends:
  - {id: llama-cuda, kind: llama, path: llama-server, default: true, variant: cuda}
  - {id: vllm, kind: vllm, path: vllm, version: "0.11.0"}
  - {id: sd-cuda, kind: sd, path: sd-server, default: true}
routing: auto
default_profiles:
  - {name: share, vram_budget_gb: 10}
overrides:
  - {match: '*nomic*', devices: [1]}
  - {match: '*Mistral-7B-Instruct-v0.3*', backend: vllm, devices: [1]}
"""
#: The same library with groups: a coexisting group, a swapping one, and models in none.
GROUPS = """\
roots: [sample-library]
output: groups.yaml
cache_dir: cache-groups
vram_budget_gb: 22
card_vram_gb: 24
backends:
  - {id: llama-cuda, kind: llama, path: llama-server, default: true, variant: cuda}
  - {id: vllm, kind: vllm, path: vllm, version: "0.11.0"}
  - {id: sd-cuda, kind: sd, path: sd-server, default: true}
groups:
  - {name: small, match: ["nomic*", "mistral*"], coexist: true}
  - {name: big, match: ["qwen3*", "gemma*"]}
overrides:
  - {match: '*Qwen3-8B*', skip: true}
"""


#: Two vLLM models sleeping through llama-swap's vllm-wrapper, planned as a matrix: what they keep
#: on the card is there in every set.
SLEEP = """\
roots: [sample-library]
output: sleep.yaml
cache_dir: cache-sleep
vram_budget_gb: 22
gpus: [{index: 0, name: RTX 4090, vram_gb: 24, vendor: nvidia}]
host_ram_gb: 64
backends:
  - {id: llama-cuda, kind: llama, path: llama-server, default: true, variant: cuda}
  - {id: vllm, kind: vllm, path: /opt/vllm/bin/vllm, version: "0.33.0", sleep: true}
  - {id: sd-cuda, kind: sd, path: sd-server, default: true}
routing: auto
overrides:
  - {match: '*Mistral-7B-Instruct-v0.3*', backend: vllm, vllm_tokenizer: mistralai/Mistral-7B-Instruct-v0.3}
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    root = tmp_path_factory.mktemp("page")
    sample.build(root / "sample-library")
    (root / "matrix.settings.yaml").write_text(MATRIX)
    (root / "groups.settings.yaml").write_text(GROUPS)
    (root / "sleep.settings.yaml").write_text(SLEEP)
    return root


def swapgen(*args: str) -> tuple[int, str, str]:
    """`swapgen ARGS` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(list(args))
    return rc, out.getvalue(), err.getvalue()


def generated(settings) -> tuple[dict, str, dict]:
    """Generate the config, write the page, print the report: (the report's JSON, the page, the config)."""
    assert swapgen("--settings", str(settings))[0] == 0
    rc, _, err = swapgen("--settings", str(settings), "report")
    assert rc == 0 and "report.html written" in err
    rc, out, _ = swapgen("--settings", str(settings), "report", "--json")
    assert rc == 0
    config = yaml.safe_load((settings.parent / yaml.safe_load(settings.read_text()).get("output", "config.yaml")).read_text())
    return json.loads(out), (settings.parent / "report.html").read_text(encoding="utf-8"), config


@pytest.fixture(scope="module", params=["matrix", "groups"])
def run(request, library):
    return generated(library / f"{request.param}.settings.yaml")


def test_every_figure_on_the_page_is_the_reports(run):
    data, html, _ = run
    shown = page_check.figures(html)
    assert len(shown) > 200
    for path, value, text in shown:
        assert page_check.at(data, path) == value, path
        assert not text or text in page_check.renderings(value), (path, value, text)


def test_each_models_figures_are_show_json(run, library):
    """The page holds, per model, exactly `swapgen show ID --json`'s values where it shows them."""
    data, html, _ = run
    settings = library / os.path.basename(data["settings"])
    shown = page_check.figures(html)
    for i, model in enumerate(data["models"]):
        rc, out, _ = swapgen("--settings", str(settings), "show", model["id"], "--json")
        assert rc == 0
        assert json.loads(out) == model
        prefix = f"models.{i}."
        own = [(p[len(prefix):], v) for p, v, _ in shown if p.startswith(prefix)]
        assert own or not model["entries"]
        for path, value in own:
            assert page_check.at(json.loads(out), path) == value


def test_the_page_fetches_nothing_and_runs_no_script(run):
    _, html, _ = run
    assert page_check.fetches(html) == []
    assert "<script" not in html.lower() and "@font-face" not in html and "http://" not in html


def test_light_dark_and_print_are_the_pages_own(run):
    _, html, _ = run
    assert "prefers-color-scheme:dark" in html and "@media print" in html and 'name="color-scheme"' in html


def test_every_skip_in_the_config_is_on_the_page_with_its_reason(run, library):
    data, html, _ = run
    text = (library / os.path.basename(data["hosts"][0]["config"])).read_text()
    skips = dict(re.findall(r'^ *# SKIPPED "([^"]+)": (.*)$', text, re.M))
    assert skips, "the library has skips"
    shown = {u["id"]: u for u in data["unserved"] if u["kind"] == "skipped"}
    on_page = {text for path, _, text in page_check.figures(html) if re.fullmatch(r"unserved\.\d+\.reason", path)}
    for model_id, reason in skips.items():
        assert shown[model_id]["reason"] == reason and shown[model_id]["hint"] and reason in on_page
    ignored = [u for u in data["unserved"] if u["kind"] in ("ignored", "attached")]
    assert {u["kind"] for u in ignored} == {"ignored", "attached"} and all(u["reason"] and u["hint"] for u in ignored)


def test_the_chart_marks_the_emitted_context(run):
    """Each LLM entry's chart marks the context its command sets (`-c`, `--max-model-len`)."""
    data, html, _ = run
    marked = {p: v for p, v, _ in page_check.figures(html) if p.endswith(".context.chosen")}
    charted = 0
    for i, model in enumerate(data["models"]):
        for j, entry in enumerate(model["entries"]):
            if entry["context"] is None:
                continue
            argv = entry["argv"]
            flag = "-c" if "-c" in argv else "--max-model-len"
            assert entry["context"]["chosen"] == int(argv[argv.index(flag) + 1])
            if j == 0 and entry["context"]["curves"]:
                assert '<circle cx="' in html and marked[f"models.{i}.entries.0.context.chosen"] == int(
                    argv[argv.index(flag) + 1])
                charted += 1
    assert charted >= 4


@pytest.mark.parametrize("name", ["matrix", "sleep"])
def test_matrix_sets_are_the_configs(library, name):
    data, _, config = generated(library / f"{name}.settings.yaml")
    matrix = config["routing"]["router"]["settings"]["matrix"]
    roots = compile_sets(list(matrix["sets"].items()), lambda v: matrix["vars"].get(v))
    written = {m for name in matrix["sets"] for m in expand(roots[name], roots)}
    (host,) = data["hosts"]
    residency = host["residency"]
    assert residency["mode"] == "matrix"
    expanded = {frozenset((*s["members"], *alt)) for s in residency["sets"]
                for alt in ([(a,) for a in s["alternatives"]] or [()])}
    assert expanded == written and [s["name"] for s in residency["sets"]] == list(matrix["sets"])
    if name == "matrix":
        assert [g["index"] for g in host["gpus"]] == [0, 1] and host["gpus"][1]["card_gb"] == 12
    else:  # the sleepers' share is off the card every set is drawn on, as the planner sees it
        assert any("sleeping vLLM models keep part of their cards" in n for n in residency["notes"])
        assert all(u["card_gb"] < 24 for s in residency["sets"] for u in s["usage"])
        sleepers = {e["id"] for m in data["models"] for e in m["entries"] if e["asleep"]}
        assert sleepers == {"llama-3.1-8b-instruct-bf16", "mistral-7b-instruct-v0.3-q4_k_m"}
    for s in residency["sets"]:
        for use in s["usage"]:
            assert not use["over"] and round(sum(x["gb"] for x in use["shares"]), 2) == use["used_gb"]
    # a pair kept apart says why: the same weights twice, or a card it would overfill
    whys = {a["why"] for a in residency["apart"]}
    assert name == "sleep" or any("the same weights twice" in w for w in whys)
    assert any("models may share" in w for w in whys)
    pairs = [(a["first"], other) for a in residency["apart"] for other in a["others"]]
    assert len(pairs) == len(set(pairs)) and all(first < other for first, other in pairs)
    for first, other in pairs:
        assert not any({first, other} <= members for members in expanded)


def test_groups_are_the_configs_with_llama_swaps_rules(library):
    data, _, config = generated(library / "groups.settings.yaml")
    (host,) = data["hosts"]
    residency = host["residency"]
    groups = {g["name"]: g for g in residency["groups"]}
    assert set(groups) == set(config["groups"])
    for name, group in config["groups"].items():
        assert groups[name]["members"] == group["members"] and groups[name]["swap"] == group["swap"]
    sets = {frozenset(s["members"]) for s in residency["sets"]}
    small = frozenset(groups["small"]["members"])
    persistent = {m for g in groups.values() if g["persistent"] for m in g["members"]}
    assert small | persistent in sets
    assert all(len(s - persistent) == 1 for s in sets if not s & small)
    apart = {(a["first"], other): a["why"] for a in residency["apart"] for other in a["others"]}
    assert apart[("gemma-3-12b-it-q4_k_m", "qwen3-30b-a3b-q4_k_m")] == "group big swaps: one of its models at a time"
    skipped = [u for u in data["unserved"] if u["id"] == "qwen3-8b-bf16"]
    assert skipped[0]["reason"] == "skip: true in the matching override" and "skip: true" in skipped[0]["hint"]


def test_each_gpus_bars_add_up_and_follow_the_pins(library):
    data, _, _ = generated(library / "matrix.settings.yaml")
    (host,) = data["hosts"]
    on = {k: {load["entry"] for load in gpu["loads"]} for k, gpu in enumerate(host["gpus"])}
    assert "nomic-embed-text-v1.5-q8_0" in on[1] and "nomic-embed-text-v1.5-q8_0" not in on[0]
    assert "gemma-3-12b-it-q4_k_m" in on[0]
    parts = ("weights", "kv_state", "compute", "projector", "runtime", "base", "draft", "other", "margin")
    for gpu in host["gpus"]:
        for load in gpu["loads"]:
            assert sum(load["figures"][p] for p in parts) == load["figures"]["total"]
    gemma = next(m for m in data["models"] if m["id"] == "gemma-3-12b-it-q4_k_m")
    assert any(d["projector"] > 0 for d in gemma["entries"][0]["memory"][0]["devices"])


def test_the_fleet_is_one_page(tmp_path):
    front = build_fleet(tmp_path, multi_node=None)
    assert swapgen("--settings", str(front))[0] == 0
    assert swapgen("--settings", str(front), "report")[0] == 0
    html = (tmp_path / "report.html").read_text()
    out = swapgen("--settings", str(front), "report", "--json")[1]
    data = json.loads(out)
    assert [h["name"] for h in data["hosts"]] == ["gpu-a", "gpu-b"]
    assert {(m["host"], m["id"]) for m in data["models"]} >= {("gpu-a", "qwen3-8b-q4_k_m"),
                                                               ("gpu-b", "qwen3-8b-q4_k_m")}
    for path, value, _ in page_check.figures(html):
        assert page_check.at(data, path) == value
    shown = json.loads(swapgen("--settings", str(front), "show", "gpu-b/qwen3-8b-q4_k_m", "--json")[1])
    i = next(i for i, m in enumerate(data["models"]) if (m["host"], m["id"]) == ("gpu-b", "qwen3-8b-q4_k_m"))
    assert shown == data["models"][i]


def test_any_engine_is_drawn_from_its_footprint(tmp_path):
    """A whisper.cpp model (an engine with no KV cost per token and a VAD model beside it) is on
    the page by its footprint like any other: its engine, its files, its bytes on the card."""
    add_model(tmp_path / "models", "pub/A-GGUF/Alpha-Q4_K_M.gguf")
    write_whisper(tmp_path / "models" / "whisper" / "ggml-base.en.bin", "base", 6, 6, english=True)
    write_silero(tmp_path / "models" / "whisper" / "ggml-silero-v6.2.0.bin")
    settings = tmp_path / "swapgen.yaml"
    settings.write_text(SETTINGS.replace("card_vram_gb: 0", "card_vram_gb: 24")
                        + "  - {id: whisper, kind: whisper, path: /opt/whisper/whisper-server}\n")
    data, html, _ = generated(settings)
    (whisper,) = [m for m in data["models"] if m["role"] == "asr"]
    entry = whisper["entries"][0]
    assert entry["engine"] and entry["vram"] > 0 and entry["context"] is None and whisper["files"]["vad"]
    loads = {load["entry"]: load for gpu in data["hosts"][0]["gpus"] for load in gpu["loads"]}
    assert loads[entry["id"]]["figures"]["total"] > 0
    for path, value, _ in page_check.figures(html):
        assert page_check.at(data, path) == value


def test_a_path_given_is_where_the_page_goes(tmp_path):
    add_model(tmp_path / "models", "pub/A-GGUF/Alpha-Q4_K_M.gguf")
    settings = tmp_path / "swapgen.yaml"
    settings.write_text(SETTINGS)
    rc = swapgen("--settings", str(settings), "report", str(tmp_path / "out" / "plan.html"))[0]
    assert rc == 0 and (tmp_path / "out" / "plan.html").is_file() and not (tmp_path / "report.html").exists()
    for wrong in (("a.html", "b.html"), ("--jsn",)):
        with pytest.raises(SystemExit) as exit_:
            swapgen("--settings", str(settings), "report", *wrong)
        assert exit_.value.code == 2


def test_a_page_that_cannot_be_written_is_a_message(tmp_path):
    add_model(tmp_path / "models", "pub/A-GGUF/Alpha-Q4_K_M.gguf")
    settings = tmp_path / "swapgen.yaml"
    settings.write_text(SETTINGS)
    (tmp_path / "file").write_text("")
    rc, _, err = swapgen("--settings", str(settings), "report", str(tmp_path / "file" / "plan.html"))
    assert rc == 1 and "cannot be created (Not a directory)" in err and "Traceback" not in err


class TestOnlyItsOwnPage:
    """The page is written only where swapgen may write (docs/maintainers/safe-io.md): never over
    the settings, the config or a file it did not write, never into a root."""

    def settings(self, tmp_path, extra: str = ""):
        add_model(tmp_path / "models", "pub/A-GGUF/Alpha-Q4_K_M.gguf")
        settings = tmp_path / "swapgen.yaml"
        settings.write_text(SETTINGS + extra)
        return settings

    def test_a_hand_written_file_is_left_as_it_is(self, tmp_path):
        settings = self.settings(tmp_path)
        (tmp_path / "report.html").write_text("<html>my notes</html>\n")
        rc, _, err = swapgen("--settings", str(settings), "report")
        assert rc == 1 and "was not written by swapgen" in err and "Nothing was written" in err
        assert (tmp_path / "report.html").read_text() == "<html>my notes</html>\n"

    def test_its_own_page_and_an_empty_file_are_replaced(self, tmp_path):
        settings = self.settings(tmp_path)
        (tmp_path / "report.html").write_text("")
        assert swapgen("--settings", str(settings), "report")[0] == 0
        page = (tmp_path / "report.html").read_text()
        assert PAGE_MARK.on(page.splitlines()[0]) and page.startswith("<!DOCTYPE html>")
        add_model(tmp_path / "models", "pub/B-GGUF/Beta-Q8_0.gguf")
        assert swapgen("--settings", str(settings), "report")[0] == 0
        assert "beta-q8_0" in (tmp_path / "report.html").read_text()

    @pytest.mark.parametrize("where", ["swapgen.yaml", "config.yaml", "models/report.html"])
    def test_the_setting_may_not_name_an_input_the_config_or_a_root(self, tmp_path, where):
        settings = self.settings(tmp_path, f"report: {where}\n")
        before = settings.read_text()
        rc, _, err = swapgen("--settings", str(settings))
        assert rc == 1 and "report: " in err and "Traceback" not in err
        assert settings.read_text() == before and not (tmp_path / "models" / "report.html").exists()

    def test_a_path_given_is_checked_too(self, tmp_path):
        settings = self.settings(tmp_path)
        rc, _, err = swapgen("--settings", str(settings), "report", str(settings))
        assert rc == 1 and "swapgen report PATH: " in err and settings.read_text().startswith("roots:")


def test_hostile_names_are_text_not_markup(tmp_path):
    """A folder named like markup is shown as written, never as an element of the page."""
    add_model(tmp_path / "models", '<img src=x onerror=alert(1)>/Alpha" & <b>-Q4_K_M.gguf')
    settings = tmp_path / "swapgen.yaml"
    settings.write_text(SETTINGS)
    assert swapgen("--settings", str(settings), "report")[0] == 0
    html = (tmp_path / "report.html").read_text()
    assert "<img" not in html and "<b>" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert page_check.fetches(html) == []


class TestTheSetting:
    """`report:` makes every run (and so every `swapgen watch` cycle) write the page, only when
    its bytes change."""

    def settings(self, tmp_path):
        add_model(tmp_path / "models", "pub/A-GGUF/Alpha-Q4_K_M.gguf")
        settings = tmp_path / "swapgen.yaml"
        settings.write_text(SETTINGS + "report: pages/plan.html\n")
        return settings

    def test_a_run_writes_it_and_a_second_leaves_it(self, tmp_path):
        settings = self.settings(tmp_path)
        rc, out, _ = swapgen("--settings", str(settings))
        page = tmp_path / "pages" / "plan.html"
        assert rc == 0 and page.is_file() and "; plan.html written" in out
        before = page.stat().st_mtime_ns
        rc, out, _ = swapgen("--settings", str(settings))
        assert rc == 0 and "; plan.html unchanged" in out and page.stat().st_mtime_ns == before

    def test_a_new_model_rewrites_it(self, tmp_path):
        settings = self.settings(tmp_path)
        swapgen("--settings", str(settings))
        add_model(tmp_path / "models", "pub/B-GGUF/Beta-Q8_0.gguf")
        assert swapgen("--settings", str(settings))[0] == 0 and "beta-q8_0" in (tmp_path / "pages" / "plan.html").read_text()

    def test_a_page_edited_by_hand_is_written_again_unless_it_is_no_longer_ours(self, tmp_path):
        """Its header says swapgen may replace it; without it the run says so and keeps the file."""
        settings = self.settings(tmp_path)
        swapgen("--settings", str(settings))
        page = tmp_path / "pages" / "plan.html"
        written = page.read_text()
        page.write_text(written.splitlines()[0] + "\nedited\n")
        assert swapgen("--settings", str(settings))[0] == 0 and page.read_text() == written
        page.write_text("my own notes\n")
        rc, _, err = swapgen("--settings", str(settings))
        assert rc == 1 and "report: " in err and "was not written by swapgen" in err
        assert page.read_text() == "my own notes\n"

    def test_without_it_no_run_writes_a_page(self, tmp_path):
        add_model(tmp_path / "models", "pub/A-GGUF/Alpha-Q4_K_M.gguf")
        settings = tmp_path / "swapgen.yaml"
        settings.write_text(SETTINGS)
        assert swapgen("--settings", str(settings))[0] == 0
        assert not list(tmp_path.glob("*.html"))
