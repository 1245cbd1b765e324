"""`-config` plus `-config-dir` merged as llama-swap merges them (`internal/config/merge.go`), and
`output_mode: fragment`: swapgen's part beside a hand-written main file."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from autogen.commands import cli
from autogen.router.merge import validate_sources
from tests.builders import SETTINGS
from tests.runs import generate

MAIN = """\
healthCheckTimeout: 300
logLevel: info
apiKeys: [k-main]
macros: {threads: 8}
models:
  hand-made:
    cmd: srv --port ${PORT}
"""


def write(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def problems(main, folder) -> list[str]:
    return [str(p) for p in validate_sources(str(main) if main else None, str(folder))[0]]


@pytest.fixture
def pair(tmp_path):
    """A main file and an empty `conf.d/`."""
    return write(tmp_path / "main.yaml", MAIN), tmp_path / "conf.d"


class TestMergeRules:
    def test_a_fragment_that_adds_models_and_groups_merges(self, pair):
        main, folder = pair
        write(folder / "10-models.yaml", """\
            models:
              gen-a: {cmd: "srv --port ${PORT}"}
            groups:
              g: {swap: false, members: [gen-a, hand-made]}
            """)
        found, doc = validate_sources(str(main), str(folder))
        assert found == []
        assert sorted(doc["models"]) == ["gen-a", "hand-made"] and list(doc["groups"]) == ["g"]

    @pytest.mark.parametrize("key", ["models", "groups", "profiles", "selectors", "peers"])
    def test_an_id_two_files_define_is_refused(self, pair, key):
        main, folder = pair
        bodies = {
            "models": "hand-made: {cmd: 'srv --port ${PORT}'}",
            "groups": "g: {members: [hand-made]}",
            "profiles": "p: {pins: {x: hand-made}}",
            "selectors": "s: {strategy: pin, targets: [hand-made]}",
            "peers": "far: {proxy: 'http://far:1', models: [x]}",
        }
        if key != "models":
            write(main, MAIN + f"{key}:\n  {bodies[key]}\n")
        write(folder / "a.yaml", f"{key}:\n  {bodies[key]}\n")
        name = bodies[key].split(":")[0]
        assert problems(main, folder) == [f'{folder}/a.yaml:2: error: duplicate {key} "{name}" found in {folder}/a.yaml '
                                          "(already defined in another config source)"]

    def test_a_duplicate_in_the_routing_groups_is_refused(self, tmp_path):
        folder = tmp_path / "d"
        write(folder / "a.yaml", "routing: {router: {settings: {groups: {g: {members: [m]}}}}}\n"
                                 "models: {m: {cmd: 'srv --port ${PORT}'}}\n")
        write(folder / "b.yaml", "routing: {router: {settings: {groups: {g: {members: []}}}}}\n")
        (problem,) = problems(None, folder)
        assert 'duplicate groups "g" found in' in problem and problem.startswith(f"{folder}/b.yaml:1:")

    def test_a_value_two_files_set_differently_is_refused(self, pair):
        main, folder = pair
        write(folder / "10.yaml", "healthCheckTimeout: 120\nmacros: {threads: 4}\nlogLevel: info\n")
        assert problems(main, folder) == [
            f'{folder}/10.yaml:1: error: conflict at "healthCheckTimeout": {folder}/10.yaml sets a different value than a '
            "previous source (300 before, 120 here)",
            f'{folder}/10.yaml:2: error: conflict at "macros.threads": {folder}/10.yaml sets a different value than a '
            "previous source (8 before, 4 here)"]

    def test_a_number_and_the_same_text_quoted_differ(self, pair):
        main, folder = pair
        write(folder / "10.yaml", 'healthCheckTimeout: "300"\n')
        assert "conflict at \"healthCheckTimeout\"" in problems(main, folder)[0]

    @pytest.mark.parametrize(("text", "conflict"), [
        ("macros: {threads: 0x8}", True), ("macros: {threads: +8}", True), ("macros: {threads: 08}", True),
        ("macros: {threads: 8.0}", True), ("macros: {threads: !!int 8}", False),
        ("logLevel: !!str info", False), ("logLevel: 'info'", False), ("logLevel: |-\n  info", False),
        ("logLevel: ~", True), ("logLevel: null", True), ("logLevel:", False), ("macros: ~", True),
    ])
    def test_scalars_compare_as_written_with_their_tag(self, pair, text, conflict):
        """merge.go compares yaml.v3's `Value` and `Tag`, not the values they decode to: `0x8` is
        not `8`, and only an empty null yields (`~` is the text "~")."""
        main, folder = pair
        write(folder / "10.yaml", text + "\n")
        found = problems(main, folder)
        assert bool(found) == conflict, found
        assert all("conflict at" in p for p in found)

    def test_lists_concatenate_and_null_yields(self, pair):
        main, folder = pair
        write(folder / "10.yaml", "apiKeys: [k-dir]\nlogLevel:\nmacros: {ctx: 4096}\n")
        found, doc = validate_sources(str(main), str(folder))
        assert found == []
        assert doc["apiKeys"] == ["k-main", "k-dir"] and doc["logLevel"] == "info"
        assert dict(doc["macros"]) == {"threads": 8, "ctx": 4096}

    def test_a_mapping_against_a_scalar_is_refused(self, pair):
        main, folder = pair
        write(folder / "10.yaml", "logLevel: {a: 1}\n")
        assert 'conflict at "logLevel": incompatible YAML node kinds' in problems(main, folder)[0]

    def test_files_merge_in_name_order_and_only_yaml_files_count(self, tmp_path):
        folder = tmp_path / "d"
        write(folder / "b.yaml", "logLevel: warn\nmodels: {}\n")
        write(folder / "a.yml", "logLevel: debug\n")
        write(folder / "notes.txt", "logLevel: [not yaml config]\n")
        write(folder / "sub" / "c.yaml", "logLevel: error\n")
        (problem,) = problems(None, folder)
        assert problem.startswith(f'{folder}/b.yaml:1: error: conflict at "logLevel"')
        assert "('debug' before, 'warn' here)" in problem

    def test_the_main_file_inside_the_folder_is_refused(self, tmp_path):
        folder = tmp_path / "d"
        main = write(folder / "main.yaml", MAIN)
        assert problems(main, folder) == [f"{main}: error: -config path {main} is also present in -config-dir {folder}; "
                                          "remove it from one"]

    def test_empty_files_add_nothing_and_a_list_at_the_top_is_refused(self, pair):
        main, folder = pair
        write(folder / "00-empty.yaml", "# nothing yet\n")
        write(folder / "10-list.yaml", "- a\n")
        assert problems(main, folder) == [f"{folder}/10-list.yaml:1: error: top-level YAML must be a mapping"]

    def test_env_macros_are_substituted_per_file_before_merging(self, pair, monkeypatch):
        main, folder = pair
        monkeypatch.setenv("SWAPGEN_TEST_LEVEL", "info")
        write(folder / "10.yaml", "logLevel: ${env.SWAPGEN_TEST_LEVEL}\n")
        assert problems(main, folder) == []

    def test_a_problem_after_the_merge_names_its_own_file_and_line(self, pair):
        """A selector in the main file may target a model of the folder, but not an absent one."""
        main, folder = pair
        write(main, MAIN + "selectors:\n  s: {strategy: pin, targets: [gen-a]}\n"
                           "  t: {strategy: pin, targets: [gone]}\n")
        write(folder / "10.yaml", "models:\n  gen-a: {cmd: 'srv --port ${PORT}'}\n"
                                  "  bad: {cmd: 'srv --port ${PORT}', ttl: -5}\n")
        assert problems(main, folder) == [
            f"{folder}/10.yaml:3: error: models.bad.ttl: must be >= -1 (got -5)",
            f"{main}:10: error: selectors.t.targets[0] references unknown model 'gone' (not a model id, alias or peer "
            "model of this config)"]

    def test_validate_command_merges_with_config_dir(self, pair, capsys):
        main, folder = pair
        write(folder / "10.yaml", "models:\n  gen-a: {cmd: 'srv --port ${PORT}'}\n")
        assert cli.main(["validate", str(main), "--config-dir", str(folder)]) == 0
        out = capsys.readouterr().out
        assert out == f"{main} + {folder}: valid llama-swap config once merged (2 models, 0 groups)\n"
        write(folder / "20.yaml", "models:\n  gen-a: {cmd: 'srv --port ${PORT}'}\n")
        assert cli.main(["validate", f"--config-dir={folder}", str(main)]) == 1
        assert 'duplicate models "gen-a"' in capsys.readouterr().out

    def test_validate_command_refuses_two_main_files(self, pair, capsys):
        main, folder = pair
        with pytest.raises(SystemExit):
            cli.main(["validate", str(main), str(main), "--config-dir", str(folder)])
        assert "at most one main FILE" in capsys.readouterr().err


class TestFragmentMode:
    SETTINGS = SETTINGS + "output: conf.d/50-swapgen.yaml\noutput_mode: fragment\n"

    def run(self, library, extra: str = ""):
        settings = library / "swapgen.yaml"
        settings.write_text(self.SETTINGS + textwrap.dedent(extra))
        rc, _ = generate(settings)
        assert rc == 0
        return (library / "conf.d" / "50-swapgen.yaml").read_text()

    def test_only_models_and_groups_are_written(self, library):
        text = self.run(library, "groups: [{name: small, match: ['beta*']}]\n")
        assert text.startswith("# Generated by swapgen from swapgen.yaml: its part of a llama-swap -config-dir")
        assert list(yaml.safe_load(text)) == ["models", "groups"], "no healthCheckTimeout: the main file sets it"

    def test_the_fragment_and_a_hand_written_main_file_merge(self, library):
        main = write(library / "config.yaml", MAIN + "hooks: {on_startup: {preload: [alpha-q4_k_m]}}\n")
        self.run(library, "llama_swap:\n  selectors:\n    chat: {strategy: pin, targets: [beta-q8_0]}\n")
        assert main.read_text() == MAIN + "hooks: {on_startup: {preload: [alpha-q4_k_m]}}\n", "main file untouched"
        found, doc = validate_sources(str(main), str(library / "conf.d"))
        assert found == []
        assert sorted(doc["models"]) == ["alpha-q4_k_m", "beta-q8_0", "hand-made"]
        assert list(doc["selectors"]) == ["chat"]

    def test_a_model_id_the_main_file_has_too_is_caught_by_the_merge(self, library):
        main = write(library / "config.yaml", MAIN.replace("hand-made", "alpha-q4_k_m"))
        self.run(library)
        (problem,) = problems(main, library / "conf.d")
        assert 'duplicate models "alpha-q4_k_m"' in problem

    def test_health_check_timeout_may_be_given_as_a_llama_swap_key(self, library, capsys):
        """In a fragment `healthCheckTimeout` is not swapgen's: `llama_swap:` may set it (then it
        must agree with the main file's), and `health_check_timeout` is not written, with a warning."""
        text = self.run(library, "health_check_timeout: 600\nllama_swap: {healthCheckTimeout: 300}\n")
        assert yaml.safe_load(text)["healthCheckTimeout"] == 300
        assert "health_check_timeout is not written in output_mode: fragment" in capsys.readouterr().err
        main = write(library / "config.yaml", MAIN)
        assert problems(main, library / "conf.d") == []

    def test_switching_mode_rewrites_the_output(self, library):
        self.run(library)
        settings = library / "swapgen.yaml"
        settings.write_text(self.SETTINGS.replace("output_mode: fragment", "output_mode: full"))
        assert generate(settings)[0] == 0
        assert (library / "conf.d" / "50-swapgen.yaml").read_text().splitlines()[1] == "healthCheckTimeout: 300"


def test_an_empty_folder_is_an_empty_config(tmp_path):
    """llama-swap loads empty sources as an empty document; the schema then asks for `models`."""
    (tmp_path / "d").mkdir()
    assert problems(None, tmp_path / "d") == [f"{tmp_path / 'd'}:1: error: missing required key 'models'"]
