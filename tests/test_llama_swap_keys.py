"""The user's own llama-swap keys (`llama_swap:` blocks), secrets, and the entry keys that follow
from what runs (`proxy`, `concurrencyLimit`), end to end on a two-model library."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from autogen.emit.entry import Entry, Plan
from autogen.emit.llama_swap_keys import bind_proxy, engine_slots, finish_plan, flag_value
from autogen.errors import SettingsError
from autogen.router.fragments import render_data
from autogen.router.validate import validate_text
from tests import schema_facts
from tests.builders import SETTINGS
from tests.runs import generate


def settings_file(library, extra: str):
    path = library / "swapgen.yaml"
    path.write_text(SETTINGS + textwrap.dedent(extra))
    return path


def run(library, extra: str = ""):
    rc, graph = generate(settings_file(library, extra))
    return rc, graph.stats


def written(library) -> dict:
    return yaml.safe_load((library / "config.yaml").read_text())


def settings_problems(library, extra: str) -> list[str]:
    """The `file:line: message` lines of the settings error a run raises."""
    with pytest.raises(SettingsError) as caught:
        generate(settings_file(library, extra))
    return str(caught.value).splitlines()[1:]


# --- top-level keys -----------------------------------------------------------------------------


class TestTopLevelKeys:
    def test_keys_are_written_as_given_in_their_order(self, library, monkeypatch):
        """Every top-level key reaches the config with its value and type, before `models`."""
        monkeypatch.setenv("LLAMA_SWAP_API_KEY", "k-123")
        rc, _ = run(library, """\
            llama_swap:
              logLevel: debug
              sendLoadingState: true
              startPort: 9000
              globalTTL: 0
              includeAliasesInList: true
              macros: {threads: 8, on: "yes"}
              hooks: {on_startup: {preload: [alpha-q4_k_m]}}
              apiKeys: ["${env.LLAMA_SWAP_API_KEY}"]
            """)
        assert rc == 0
        text = (library / "config.yaml").read_text()
        head = text.split("models:\n")[0]
        assert head.splitlines()[2:] == [
            'logLevel: "debug"', "sendLoadingState: true", "startPort: 9000", "globalTTL: 0",
            "includeAliasesInList: true", "macros:", "  threads: 8", '  "on": "yes"', "hooks:",
            "  on_startup:", "    preload:", '      - "alpha-q4_k_m"', "apiKeys:", '  - "${env.LLAMA_SWAP_API_KEY}"']
        assert written(library)["macros"] == {"threads": 8, "on": "yes"}
        assert [p for p in validate_text(text) if p.fatal] == []

    def test_a_whole_float_stays_a_float(self, library):
        """`1.0` written as `1` would reach llama-swap as an int (a `setParams` value sent as 1,
        a macro that no longer equals the main file's `1.0` under `-config-dir`)."""
        rc, _ = run(library, """\
            llama_swap:
              macros: {temp: 1.0, big: 1.0e+20, n: 3}
            """)
        assert rc == 0
        assert "  temp: 1.0\n" in (library / "config.yaml").read_text()
        macros = written(library)["macros"]
        assert macros == {"temp": 1.0, "big": 1e20, "n": 3}
        assert [type(v) for v in macros.values()] == [float, float, int]
        assert render_data("cap", float("-inf"), "") == ["cap: -.inf"]  # a float, not the text "-inf"

    def test_selectors_and_profiles_naming_generated_models_are_written(self, library):
        rc, _ = run(library, """\
            groups: [{name: both, match: ["*"], coexist: true}]
            llama_swap:
              selectors:
                chat: {strategy: spillover, targets: [alpha-q4_k_m, beta-q8_0]}
              profiles:
                small: {pins: {chat: beta-q8_0, alpha-q4_k_m: null}}
              routing: {scheduler: {settings: {fifo: {priority: {alpha-q4_k_m: 10}}}}}
            """)
        assert rc == 0
        config = written(library)
        assert config["selectors"]["chat"]["targets"] == ["alpha-q4_k_m", "beta-q8_0"]
        assert config["profiles"]["small"]["pins"] == {"chat": "beta-q8_0", "alpha-q4_k_m": None}

    @pytest.mark.parametrize(("block", "message"), [
        ("selectors: {chat: {strategy: pin, targets: [gamma]}}",
         "selectors.chat.targets[0] references unknown model 'gamma'"),
        ("profiles: {p: {pins: {chat: gamma}}}", "profiles.p.pins.chat references unknown model 'gamma'"),
        ("routing: {scheduler: {settings: {fifo: {priority: {gamma: 1}}}}}",
         "routing.scheduler.settings.fifo.priority references unknown model 'gamma'"),
        ("hooks: {on_startup: {preload: [gamma]}}", "hooks.on_startup.preload[0]: 'gamma' is not a model id"),
    ])
    def test_a_name_no_generated_model_has_fails_the_run_and_keeps_the_config(self, library, capsys, block, message):
        """Selector targets, profile pins, fifo priorities and preloads must name generated models."""
        assert run(library)[0] == 0
        before = (library / "config.yaml").read_bytes()
        rc, _ = run(library, f"llama_swap:\n  {block}\n")
        assert rc != 0
        err = capsys.readouterr().err
        assert message in err and "the previous file is kept" in err and "`llama_swap:` keys" in err
        assert (library / "config.yaml").read_bytes() == before

    def test_a_first_run_that_fails_says_nothing_was_written(self, library, capsys):
        """No config yet: there is no previous file to keep."""
        rc, _ = run(library, "llama_swap:\n  selectors: {chat: {strategy: pin, targets: [gamma]}}\n")
        err = capsys.readouterr().err
        assert rc != 0 and "; nothing was written." in err and "previous file" not in err
        assert not (library / "config.yaml").exists()

    def test_a_name_no_generated_model_has_is_also_shown_at_its_settings_line(self, library, capsys):
        """The config's line says what llama-swap would read; the settings' line is what to edit."""
        rc, _ = run(library, """\
            llama_swap:
              logLevel: info
              selectors:
                chat:
                  strategy: pin
                  targets: [alpha-q4_k_m, gamma]
            """)
        assert rc != 0
        err = capsys.readouterr().err
        assert f"\n  {library / 'swapgen.yaml'}:11: llama_swap.selectors.chat.targets[1]" in err

    @pytest.mark.parametrize(("block", "line", "message"), [
        ("models: {}", 7, "llama_swap.models: a key swapgen owns (swapgen writes every model entry"),
        ("groups: {}", 7, "llama_swap.groups: a key swapgen owns (swapgen writes the groups"),
        ("healthCheckTimeout: 120", 7, "llama_swap.healthCheckTimeout: a key swapgen owns (swapgen writes it from "
                                       "`health_check_timeout`)"),
        ("routing: {router: {use: group}}", 7, "llama_swap.routing.router: a key swapgen owns"),
        ("logLevl: debug", 7, "llama_swap.logLevl: unknown top-level llama-swap key (did you mean 'logLevel'?)"),
        ("logLevel: verbose", 7, "llama_swap.logLevel: must be one of 'debug', 'info', 'warn', 'error'; got 'verbose'"),
        ("apiKeys: ['a b']", 7, "llama_swap.apiKeys[0]: api key cannot contain spaces"),
        ("startPort: 0", 7, "llama_swap.startPort: must be >= 1 (got 0)"),
        ("macros: {PORT: 1}", 7, "llama_swap.macros: macro name 'PORT' is reserved"),
        ("hooks: {on_startup: {preloads: [a]}}", 7, "llama_swap.hooks.on_startup: unknown key 'preloads'"),
        ("since: 2024-01-01", 7, "llama_swap.since: expected a string, number, true/false, null, list or mapping, "
                                 "got date"),
    ])
    def test_a_bad_key_is_a_settings_error_at_its_line(self, library, block, line, message):
        problems = settings_problems(library, f"llama_swap:\n  {block}\n")
        assert len(problems) == 1
        assert problems[0].startswith(f"  {library / 'swapgen.yaml'}:{line}: {message}"), problems

    def test_schema_rules_apply_to_peers_and_selectors(self, library):
        problems = settings_problems(library, """\
            llama_swap:
              peers:
                far: {models: [x]}
              selectors:
                s: {strategy: random, targets: [alpha-q4_k_m]}
            """)
        assert [p.split(": ", 1)[1] for p in problems] == [
            "llama_swap.peers.far: missing required key 'proxy'",
            "llama_swap.selectors.s.strategy: must be one of 'warm', 'pin', 'spillover'; got 'random'"]


# --- secrets ------------------------------------------------------------------------------------


class TestSecrets:
    def test_an_env_key_stays_a_macro_in_the_config(self, library, monkeypatch, capsys):
        """`${env.LLAMA_SWAP_API_KEY}` is written verbatim; llama-swap substitutes it when it reads
        the file, and the validator does the same where the variable is set."""
        monkeypatch.delenv("LLAMA_SWAP_API_KEY", raising=False)
        rc, _ = run(library, 'llama_swap: {apiKeys: ["${env.LLAMA_SWAP_API_KEY}"]}\n')
        assert rc == 0
        text = (library / "config.yaml").read_text()
        assert 'apiKeys:\n  - "${env.LLAMA_SWAP_API_KEY}"\n' in text
        assert "plain text" not in capsys.readouterr().err
        (unset,) = validate_text(text)
        assert unset.severity == "warning" and "'LLAMA_SWAP_API_KEY' is not set" in unset.message
        monkeypatch.setenv("LLAMA_SWAP_API_KEY", "s3cr3t-key")
        assert validate_text(text) == []
        monkeypatch.setenv("LLAMA_SWAP_API_KEY", "two words")
        assert "api key cannot contain spaces" in str(validate_text(text)[0])

    def test_a_plain_text_key_is_a_warning_and_still_written(self, library, capsys):
        rc, _ = run(library, """\
            llama_swap:
              apiKeys: [sk-plain]
              peers: {far: {proxy: "http://far.lan:8080", apiKey: sk-peer, models: [m]}}
            """)
        assert rc == 0 and written(library)["apiKeys"] == ["sk-plain"]
        err = capsys.readouterr().err
        assert ("swapgen: warning: swapgen.yaml:7: llama_swap.apiKeys[0]: an API key in plain text ends up in "
                f"{library / 'config.yaml'} (and in git); write \"${{env.LLAMA_SWAP_API_KEY}}\"") in err
        # a peer's key is the peer's own, so it gets a variable of its own
        assert ("swapgen: warning: swapgen.yaml:8: llama_swap.peers.far.apiKey: an API key in plain text ends up "
                f"in {library / 'config.yaml'} (and in git); write \"${{env.FAR_API_KEY}}\"") in err


# --- per-model keys -----------------------------------------------------------------------------


class TestModelKeys:
    OVERRIDE = """\
        overrides:
          - match: "*Alpha*"
            ctx_variants: [4096]
            llama_swap:
              aliases: [alpha]
              name: Alpha 8B
              description: the first model
              filters:
                stripParams: "top_k, min_p"
                setParams: {temperature: 0.7}
                setParamsByID: {alpha-cold: {temperature: 0}}
              concurrencyLimit: 3
              cmdStop: kill -TERM ${PID}
              env: [OMP_NUM_THREADS=8]
              macros: {who: alpha}
              metadata: {team: research, tags: [a, b]}
        """

    def test_keys_reach_the_model_entry(self, library):
        rc, _ = run(library, self.OVERRIDE)
        assert rc == 0
        alpha = written(library)["models"]["alpha-q4_k_m"]
        assert alpha["aliases"] == ["alpha"] and alpha["name"] == "Alpha 8B"
        assert alpha["filters"]["setParams"] == {"temperature": 0.7}
        assert alpha["filters"]["setParamsByID"] == {"alpha-cold": {"temperature": 0}}
        assert alpha["concurrencyLimit"] == 3 and alpha["cmdStop"] == "kill -TERM ${PID}"
        assert alpha["env"] == ["OMP_NUM_THREADS=8"] and alpha["macros"] == {"who": "alpha"}
        assert alpha["metadata"]["team"] == "research" and alpha["metadata"]["tags"] == ["a", "b"]
        assert alpha["metadata"]["engine"] == "llama.cpp", "swapgen's metadata stays"
        assert [p for p in validate_text((library / "config.yaml").read_text()) if p.fatal] == []

    def test_a_profile_takes_every_key_but_the_ones_naming_the_model(self, library):
        """`<id>-4k` has its own id: no alias, name or setParamsByID (their ids are aliases)."""
        run(library, self.OVERRIDE)
        profile = written(library)["models"]["alpha-q4_k_m-4k"]
        assert "aliases" not in profile and "name" not in profile
        assert profile["filters"] == {"stripParams": "top_k, min_p", "setParams": {"temperature": 0.7}}
        assert profile["description"] == "the first model" and profile["env"] == ["OMP_NUM_THREADS=8"]

    @pytest.mark.parametrize(("key", "message"), [
        ("cmd: srv", "overrides[0].llama_swap.cmd: a key swapgen owns (swapgen writes the command; add flags with "
                     "the override's `extra_args`)"),
        ("proxy: http://h:1", "overrides[0].llama_swap.proxy: a key swapgen owns"),
        ("ttl: 5", "overrides[0].llama_swap.ttl: a key swapgen owns (swapgen writes it from `ttl`)"),
        ("unlisted: true", "overrides[0].llama_swap.unlisted: a key swapgen owns (use the override's `unlisted`)"),
        ("capabilities: {tools: true}", "overrides[0].llama_swap.capabilities: a key swapgen owns"),
        ("alias: [a]", "overrides[0].llama_swap.alias: unknown per-model llama-swap key (did you mean 'aliases'?)"),
        ("env: [lower=1]", "overrides[0].llama_swap.env[0]: 'lower=1' does not match ^[A-Z_][A-Z0-9_]*=.*$"),
        ("filters: {stripParams: 'a;b'}", "overrides[0].llama_swap.filters.stripParams: 'a;b' does not match"),
        ("concurrencyLimit: -1", "overrides[0].llama_swap.concurrencyLimit: must be >= 0 (got -1)"),
        ("name: 7", "overrides[0].llama_swap.name: expected a string, got 7"),
    ])
    def test_a_bad_key_is_a_settings_error_at_its_line(self, library, key, message):
        (problem,) = settings_problems(library, f"overrides:\n  - match: '*Alpha*'\n    llama_swap:\n      {key}\n")
        assert problem.startswith(f"  {library / 'swapgen.yaml'}:9: {message}"), problem

    def test_a_metadata_key_swapgen_writes_stops_the_run(self, library, capsys):
        assert run(library)[0] == 0
        before = (library / "config.yaml").read_bytes()
        rc, _ = run(library, "overrides:\n  - match: '*Alpha*'\n    llama_swap:\n      metadata: {arch: mine}\n")
        assert rc != 0
        err = capsys.readouterr().err
        assert (f"{library / 'swapgen.yaml'}:9: overrides[0].llama_swap.metadata.arch: swapgen writes this metadata "
                "key for 'alpha-q4_k_m' (arch: 'llama'); pick another name") in err
        assert (library / "config.yaml").read_bytes() == before

    def test_a_duplicate_alias_across_models_fails_the_run(self, library, capsys):
        rc, _ = run(library, """\
            overrides:
              - {match: "*Alpha*", llama_swap: {aliases: [chat]}}
              - {match: "*Beta*", llama_swap: {aliases: [chat]}}
            """)
        assert rc != 0
        assert "duplicate alias 'chat' (already used by model 'alpha-q4_k_m')" in capsys.readouterr().err


# --- entries match what runs --------------------------------------------------------------------


class TestWhatRuns:
    @pytest.mark.parametrize(("argv", "engine", "proxy"), [
        (["srv", "--host", "127.0.0.1", "--port", "${PORT}"], "llama", "http://127.0.0.1:${PORT}"),
        (["srv", "--host=10.0.0.5"], "vllm", "http://10.0.0.5:${PORT}"),
        (["srv", "--host", "0.0.0.0"], "llama", "http://127.0.0.1:${PORT}"),
        (["srv", "--host", "::"], "llama", "http://[::1]:${PORT}"),
        (["srv", "--host", "fe80::1"], "llama", "http://[fe80::1]:${PORT}"),
        (["sd-server", "-l", "127.0.0.2", "--listen-port", "${PORT}"], "sd", "http://127.0.0.2:${PORT}"),
        (["parakeet-server", "--port", "${PORT}"], "asr", "http://127.0.0.1:${PORT}"),
        (["llama-server", "-l", "15+1"], "llama", "http://127.0.0.1:${PORT}"),  # -l is a logit bias there
    ])
    def test_proxy_is_the_bind_host(self, argv, engine, proxy):
        assert bind_proxy(argv, engine) == proxy

    @pytest.mark.parametrize(("argv", "engine", "slots"), [
        (["srv", "--parallel", "4"], "llama", 4),
        (["srv", "-np", "2", "--parallel=3"], "llama", 3),
        (["srv", "-np", "-1"], "llama", None),
        (["srv"], "llama", None),
        (["vllm", "serve", "m", "--max-num-seqs", "16"], "vllm", 16),
        (["sd-server", "--parallel", "4"], "sd", None),
    ])
    def test_slots_the_command_sets(self, argv, engine, slots):
        assert engine_slots(argv, engine) == slots

    def test_flag_value_reads_the_last_spelling(self):
        assert flag_value(["a", "-np", "2", "--parallel", "5"], ("-np", "--parallel")) == "5"
        assert flag_value(["a", "--parallel"], ("--parallel",)) is None

    def test_entries_carry_proxy_and_concurrency_limit(self, library):
        rc, _ = run(library, "overrides:\n  - {match: '*Alpha*', parallel: 2}\n")
        assert rc == 0
        models = written(library)["models"]
        assert models["alpha-q4_k_m"]["proxy"] == "http://127.0.0.1:${PORT}"
        assert models["alpha-q4_k_m"]["concurrencyLimit"] == 2
        assert "concurrencyLimit" not in models["beta-q8_0"], "llama-server picks its own slots: no limit"

    def test_the_users_limit_replaces_the_slot_count(self, library):
        run(library, "overrides:\n  - {match: '*Alpha*', parallel: 2, llama_swap: {concurrencyLimit: 8}}\n")
        assert written(library)["models"]["alpha-q4_k_m"]["concurrencyLimit"] == 8


class TestEngineClashes:
    """Keys an engine's entry sets itself are not the user's to give (`Plan.conflicts`)."""

    def plan(self, **entry):
        base = Entry(id="m", argv=("sd-server", "-l", "127.0.0.1", "--listen-port", "${PORT}"), **entry)
        return lambda block: finish_plan(Plan(model_id="m", entries=(base,)), "sd", block, "overrides[0].llama_swap")

    def test_check_endpoint_and_use_model_name_clash_where_the_engine_sets_them(self):
        finish = self.plan(check_endpoint="/", use_model_name="kokoro")
        plan = finish({"checkEndpoint": "/health", "useModelName": "tts-1"})
        assert plan.conflicts == (
            "overrides[0].llama_swap.checkEndpoint: swapgen sets checkEndpoint '/' for 'm' (its engine's readiness "
            "path)",
            "overrides[0].llama_swap.useModelName: swapgen sets useModelName 'kokoro' for 'm' (the name its engine "
            "answers to)")
        assert plan.entries[0].check_endpoint == "/", "swapgen's value stays"

    def test_they_are_the_users_where_the_engine_sets_none(self):
        plan = self.plan()({"checkEndpoint": "none"})
        assert plan.conflicts == () and plan.entries[0].llama_swap == (("checkEndpoint", "none"),)

    def test_a_device_variable_swapgen_sets_clashes(self):
        plan = self.plan(env=("CUDA_VISIBLE_DEVICES=0",))({"env": ["CUDA_VISIBLE_DEVICES=1", "OMP_NUM_THREADS=4"]})
        assert plan.conflicts == ("overrides[0].llama_swap.env[0]: swapgen sets CUDA_VISIBLE_DEVICES for 'm' "
                                  "(CUDA_VISIBLE_DEVICES=0)",)


#: Every kind of user key, top level and per model (the per-model ones as `TestModelKeys`
#: writes them, plus two the schema knows); llama-swap's own loader reads the same text
#: (tests/test_llamaswap_loader.py).
EVERY_KIND_OF_KEY = textwrap.dedent(TestModelKeys.OVERRIDE) + textwrap.dedent("""\
          unloadTimeout: 20
          sendLoadingState: false
    groups: [{name: both, match: ["*"], coexist: true}]
    llama_swap:
      apiKeys: ["${env.LLAMA_SWAP_API_KEY}"]
      logLevel: warn
      sendLoadingState: true
      startPort: 9000
      globalTTL: 0
      includeAliasesInList: true
      macros: {threads: 8, "on": "yes"}
      hooks: {on_startup: {preload: [alpha]}}
      selectors:
        chat: {strategy: spillover, targets: [alpha-q4_k_m, beta-q8_0], settings: {spillover: 2}}
        hot: {strategy: warm, targets: [beta-q8_0, alpha-q4_k_m-4k]}
      profiles:
        small: {description: one model, pins: {chat: beta-q8_0}}
      peers:
        far: {proxy: "http://far.lan:8080", apiKey: "${env.LLAMA_SWAP_API_KEY}", models: [remote]}
      routing: {scheduler: {use: fifo, settings: {fifo: {priority: {alpha: 5}}}}}
    """)


def test_llama_swaps_json_schema_accepts_a_config_with_every_kind_of_key(library, monkeypatch):
    """The user's keys, top level and per model, as llama-swap's `config-schema.json` reads them
    (its facts as `tests/data` records them, applied by jsonschema)."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = schema_facts.to_json_schema(schema_facts.load())
    monkeypatch.setenv("LLAMA_SWAP_API_KEY", "k-1")
    rc, _ = run(library, EVERY_KIND_OF_KEY)
    assert rc == 0
    config = written(library)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in jsonschema.Draft7Validator(schema).iter_errors(config)]
    assert errors == []
    assert [p for p in validate_text((library / "config.yaml").read_text()) if p.fatal] == []


def test_the_users_scheduler_joins_the_planned_router_under_one_routing_key(library):
    """With `routing: auto` swapgen writes `routing.router`; the user's `routing.scheduler`
    goes into the same mapping (a second `routing:` key would be a YAML error)."""
    path = library / "swapgen.yaml"
    path.write_text(SETTINGS.replace("card_vram_gb: 0", "card_vram_gb: 24") + textwrap.dedent("""\
        routing: auto
        llama_swap:
          logLevel: info
          routing: {scheduler: {settings: {fifo: {priority: {alpha-q4_k_m: 10}}}}}
        """))
    rc, _ = generate(path)
    assert rc == 0
    text = (library / "config.yaml").read_text()
    assert text.count("\nrouting:\n") == 1
    routing = yaml.safe_load(text)["routing"]
    assert routing["scheduler"] == {"settings": {"fifo": {"priority": {"alpha-q4_k_m": 10}}}}
    assert routing["router"]["use"] == "matrix"
    assert [p for p in validate_text(text) if p.fatal] == []
