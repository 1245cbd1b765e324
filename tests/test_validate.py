"""The validator reports what llama-swap (schema + loader + router start) would refuse."""

from __future__ import annotations

import textwrap

import pytest
from ruamel.yaml import YAML

from autogen.cmdline import render_cmd
from autogen.router.validate import Problem, main_validate, validate_file, validate_text
from tests import schema_facts


def found(text: str) -> list[str]:
    return [str(p) for p in validate_text(textwrap.dedent(text))]


def model(extra: str = "", cmd: str = "srv --port ${PORT}") -> str:
    """A config with one valid model `m` (line 3 is `m:`) plus `extra` model lines."""
    body = textwrap.indent(textwrap.dedent(extra), "    ")
    return f"healthCheckTimeout: 300\nmodels:\n  m:\n    cmd: {cmd}\n{body}"


VALID = """\
healthCheckTimeout: 300
logLevel: info
macros:
  base: /opt/llama
  ctx: 8192
models:
  # llama, 4.1 GB
  a-model:
    cmd: |
      ${base}/llama-server
        -m '/models/a b.gguf'
        --port ${PORT}
        -c ${ctx}
    ttl: 600
    aliases: [a]
    env: [CUDA_VISIBLE_DEVICES=0]
    checkEndpoint: /health
    metadata: {backend: llama-cuda, est_vram_gb: 4.5, port: "${PORT}", id: "${MODEL_ID}"}
    capabilities: {in: [text, image], out: [text], tools: true, context: 8192}
  b-model:
    cmd: sd-server --listen-port 9999
    proxy: http://127.0.0.1:9999
    checkEndpoint: /
    cmdStop: kill ${PID}
    unlisted: true
groups:
  images:
    swap: false
    members: [b-model]
hooks:
  on_startup:
    preload: [a]
"""


def test_valid_config_has_no_problems():
    assert validate_text(VALID) == []


def test_problem_prints_as_file_line_message():
    assert str(Problem(4, "boom", "x.yaml")) == "x.yaml:4: error: boom"
    assert str(Problem(None, "boom", "x.yaml")) == "x.yaml: error: boom"
    assert str(Problem(2, "unset", "x.yaml", "warning")) == "x.yaml:2: warning: unset"


# --- YAML level ---------------------------------------------------------------------------


def test_yaml_that_does_not_parse_names_the_line():
    assert found("models:\n  a: [1, 2\n  b: 3\n") == [
        "config.yaml:3: error: YAML does not parse: did not find expected ',' or ']'"
    ]


def test_self_referencing_alias_is_refused_not_crashed():
    assert found("a: &x [*x]\n") == ["config.yaml: error: lists and mappings nested more than 64 deep (or a YAML alias "
                                     "inside itself), the most swapgen reads of a config"]


def test_duplicate_key_is_reported_with_both_lines():
    assert found(model("ttl: 1\nttl: 2\n")) == ["config.yaml:6: error: mapping key 'ttl' already defined at line 5"]


def test_duplicate_model_id_is_reported():
    text = model() + "  m:\n    cmd: other ${PORT}\n"
    assert found(text) == ["config.yaml:5: error: mapping key 'm' already defined at line 3"]


def test_top_level_must_be_a_mapping():
    assert found("- a\n- b\n") == ["config.yaml:1: error: the top level must be a mapping, got a list"]


def test_yes_is_a_string_not_a_bool_as_in_yaml_v3():
    assert found(model("unlisted: yes\n")) == ["config.yaml:5: error: models.m.unlisted: expected true or false, got 'yes'"]


def test_quoted_number_is_not_an_integer():
    assert found(model('ttl: "600"\n')) == ["config.yaml:5: error: models.m.ttl: expected an integer, got '600'"]


# --- schema rules -------------------------------------------------------------------------


def test_models_is_required():
    assert found("logLevel: info\n") == ["config.yaml:1: error: missing required key 'models'"]


def test_models_must_be_a_mapping():
    assert found("models: [a]\n") == ["config.yaml:1: error: models: expected a mapping, got a list"]


def test_model_needs_cmd():
    assert found("models:\n  m:\n    ttl: 5\n") == ["config.yaml:2: error: models.m: missing required key 'cmd'"]


def test_model_must_be_a_mapping():
    assert found("models:\n  m: llama-server\n") == [
        "config.yaml:2: error: models.m: expected a mapping, got 'llama-server'"
    ]


def test_cmd_must_not_be_empty():
    assert found("models:\n  m:\n    cmd: ''\n    proxy: http://x:1\n") == [
        "config.yaml:3: error: models.m.cmd: must not be empty"
    ]


def test_cmd_of_only_comment_lines_is_an_empty_command():
    text = "models:\n  m:\n    cmd: |\n      # llama-server\n    proxy: http://x:1\n"
    assert found(text) == ["config.yaml:3: error: models.m.cmd: empty command (only comment lines or blanks)"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("env: [cuda_visible_devices=0]", "models.m.env[0]: 'cuda_visible_devices=0' does not match ^[A-Z_][A-Z0-9_]*=.*$"),
        ("checkEndpoint: health", "models.m.checkEndpoint: 'health' does not match ^/.*$|^none$"),
        ("ttl: -2", "models.m.ttl: must be >= -1 (got -2)"),
        ("unloadTimeout: -1", "models.m.unloadTimeout: must be >= 0 (got -1)"),
        ("concurrencyLimit: -3", "models.m.concurrencyLimit: must be >= 0 (got -3)"),
        ("name: " + "n" * 129, "models.m.name: must be at most 128 characters (got 129)"),
        ("description: " + "d" * 1025, "models.m.description: must be at most 1024 characters (got 1025)"),
        ("aliases: ['']", "models.m.aliases[0]: must not be empty"),
        ("aliases: a", "models.m.aliases: expected a list, got 'a'"),
        ("capabilities: {in: []}", "models.m.capabilities.in: must list at least 1 item(s)"),
        ("capabilities: {out: [video]}", "models.m.capabilities.out[0]: must be one of 'text', 'audio', 'image'; got 'video'"),
        ("capabilities: {in: [text, text]}", "models.m.capabilities.in[1]: 'text' is listed twice"),
        ("capabilities: {context: -1}", "models.m.capabilities.context: must be >= 0 (got -1)"),
        ("capabilities: {reranker: 1}", "models.m.capabilities.reranker: expected true or false, got 1"),
        ("capabilities: {vision: true}", "models.m.capabilities: unknown key 'vision' (not allowed here)"),
        ("filters: {stripParams: 'a;b'}", "models.m.filters.stripParams: 'a;b' does not match ^[a-zA-Z0-9_, ]*$"),
        ("filters: {strip_params: a}", "models.m.filters: unknown key 'strip_params' (not allowed here; did you mean 'stripParams'?)"),
        ("timeouts: {connect: -1}", "models.m.timeouts.connect: must be >= 0 (got -1)"),
        ("timeouts: {read: 5}", "models.m.timeouts: unknown key 'read' (not allowed here)"),
        ("compat: {ignoreWebsockets: 1}", "models.m.compat.ignoreWebsockets: expected true or false, got 1"),
        ("metadata: [a]", "models.m.metadata: expected a mapping, got a list"),
        ("sendLoadingState: 'no'", "models.m.sendLoadingState: expected true or false, got 'no'"),
    ],
)
def test_model_field_rules(extra, message):
    assert found(model(extra + "\n")) == [f"config.yaml:5: error: {message}"]


def test_unknown_model_key_is_reported_with_a_hint():
    (problem,) = validate_text(model("checkendpoint: /health\n"))
    assert str(problem) == (
        "config.yaml:5: warning: models.m: unknown key 'checkendpoint' (llama-swap ignores it; did you mean 'checkEndpoint'?)"
    )
    assert problem.severity == "ignored" and problem.fatal


@pytest.mark.parametrize(
    ("top", "message"),
    [
        ("logLevel: verbose", "logLevel: must be one of 'debug', 'info', 'warn', 'error'; got 'verbose'"),
        ("logToStdout: stderr", "logToStdout: must be one of 'proxy', 'upstream', 'both', 'none'; got 'stderr'"),
        ("logTimeFormat: iso", "logTimeFormat: must be one of '', 'ansic', 'unixdate', 'rubydate', 'rfc822', "
         "'rfc822z', 'rfc850', 'rfc1123', 'rfc1123z', 'rfc3339', 'rfc3339nano', 'kitchen', 'stamp', "
         "'stampmilli', 'stampmicro', 'stampnano'; got 'iso'"),
        ("healthCheckTimeout: 10", "healthCheckTimeout: must be >= 15 (got 10)"),
        ("startPort: 0", "startPort: must be >= 1 (got 0)"),
        ("globalTTL: -1", "globalTTL: must be >= 0 (got -1)"),
        ("unloadTimeout: -5", "unloadTimeout: must be >= 0 (got -5)"),
        ("captureBuffer: -1", "captureBuffer: must be >= 0 (got -1)"),
        ("apiKeys: ['']", "apiKeys[0]: must not be empty"),
        ("apiKeys: ['a b']", "apiKeys[0]: api key cannot contain spaces"),
        ("includeAliasesInList: 1", "includeAliasesInList: expected true or false, got 1"),
        ("store: {}", "store: missing required key 'path'"),
        ("performance: {every: 1s}", "performance.every: must be at least 5s (got 1s)"),
        ("performance: {every: soon}", "performance.every: 'soon' does not match ^[-+]?(\\d+(\\.\\d+)?(ns|us|ms|s|m|h))+$"),
        ("hooks: {on_startup: {preload: [m], profile: x}}", "hooks.on_startup: unknown key 'profile' (not allowed here)"),
        ("peers: {far: {models: [a]}}", "peers.far: missing required key 'proxy'"),
        ("peers: {far: {proxy: 'http://h:1', models: ['']}}", "peers.far.models[0]: must not be empty"),
        ("routing: {scheduler: {use: lifo}}", "routing.scheduler.use: must be one of 'fifo'; got 'lifo'"),
        ("selectors: {s: {strategy: warm, targets: []}}", "selectors.s.targets: must list at least 1 item(s)"),
        ("profiles: {p: {pins: {}}}", "profiles.p.pins: must have at least 1 entry"),
    ],
)
def test_top_level_rules(top, message):
    assert found(top + "\n" + model().split("\n", 1)[1]) == [f"config.yaml:1: error: {message}"]


def test_unknown_top_level_key_is_reported_with_a_hint():
    assert found("healthchecktimeout: 30\n" + model().split("\n", 1)[1]) == [
        "config.yaml:1: warning: unknown key 'healthchecktimeout' (llama-swap ignores it; did you mean 'healthCheckTimeout'?)"
    ]


# --- macros -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("bad.name", "macros: macro name 'bad.name' contains invalid characters, must match ^[a-zA-Z0-9_-]+$"),
        ("x" * 64, f"macros: macro name '{'x' * 64}' exceeds maximum length of 63 characters"),
        ("PORT", "macros: macro name 'PORT' is reserved"),
        ("MODEL_ID", "macros: macro name 'MODEL_ID' is reserved"),
        ("PID", "macros: macro name 'PID' is reserved"),
    ],
)
def test_macro_names(name, message):
    assert found(f"macros:\n  {name}: 1\n" + model().split("\n", 1)[1]) == [f"config.yaml:2: error: {message}"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("[1, 2]", "macros.v: a macro must be a string, number or boolean, got a list"),
        ("", "macros.v: a macro must be a string, number or boolean, got null"),
        ("x" * 1025, "macros.v: must be at most 1024 characters (got 1025)"),
        ("'a ${v}'", "macros: macro 'v' contains self-reference"),
    ],
)
def test_macro_values(value, message):
    assert found(f"macros:\n  v: {value}\n" + model().split("\n", 1)[1])[0] == f"config.yaml:2: error: {message}"


def test_unknown_macro_in_cmd_names_field_and_line():
    assert found(model(cmd="srv --port ${PORT} -m ${model_dir}/a.gguf")) == [
        "config.yaml:4: error: models.m.cmd: unknown macro '${model_dir}'"
    ]


def test_macro_may_only_use_macros_defined_before_it():
    text = "macros:\n  a: '${b}/x'\n  b: /opt\n" + model(cmd="${a} --port ${PORT}").split("\n", 1)[1]
    assert found(text) == [
        "config.yaml:6: error: models.m.cmd: unknown macro '${b}' (a macro may only use macros defined before it)"
    ]


def test_macro_defined_earlier_is_usable_and_model_macros_override_global():
    text = (
        "macros:\n  dir: /global\n  exe: '${dir}/srv'\n"
        "models:\n  m:\n    macros: {dir: /local}\n    cmd: ${exe} --port ${PORT}\n"
        "    metadata: {exe: '${exe}'}\n"
    )
    assert found(text) == []


def test_unknown_macro_in_metadata_points_at_the_nested_key():
    assert found(model("metadata:\n  a: 1\n  b: 'x ${nope}'\n")) == [
        "config.yaml:7: error: models.m.metadata.b: unknown macro '${nope}'"
    ]


def test_macro_in_an_ignored_cmd_comment_line_counts_for_nothing():
    text = "models:\n  m:\n    cmd: |\n      srv --port 80\n      # --port ${PORT}\n    proxy: http://h:80\n"
    assert found(text) == []


def test_typed_macro_keeps_its_number_type():
    """Checked after expansion, as the loader does (the JSON schema alone would refuse it)."""
    text = "macros: {ctx: 4096}\n" + model("capabilities: {context: '${ctx}'}\n").split("\n", 1)[1]
    assert found(text) == []


def test_unset_env_macro_is_a_warning_that_does_not_fail(monkeypatch, tmp_path):
    monkeypatch.delenv("SWAPGEN_TEST_UNSET", raising=False)
    path = tmp_path / "c.yaml"
    path.write_text(model(cmd="srv --port ${PORT} --key ${env.SWAPGEN_TEST_UNSET}"))
    (problem,) = validate_file(str(path))
    assert str(problem) == (
        f"{path}:4: warning: environment variable 'SWAPGEN_TEST_UNSET' is not set "
        "(llama-swap refuses the file unless it is set where it runs)"
    )
    assert main_validate([str(path)]) == 0


def test_set_env_macro_is_substituted_before_parsing(monkeypatch):
    monkeypatch.setenv("SWAPGEN_TEST_TTL", "-7")
    assert found(model("ttl: ${env.SWAPGEN_TEST_TTL}\n")) == ["config.yaml:5: error: models.m.ttl: must be >= -1 (got -7)"]


def test_env_value_with_newline_is_refused(monkeypatch):
    monkeypatch.setenv("SWAPGEN_TEST_NL", "a\nb")
    assert found(model(cmd="srv --port ${PORT} ${env.SWAPGEN_TEST_NL}")) == [
        "config.yaml:4: error: environment variable 'SWAPGEN_TEST_NL' contains newlines or null bytes "
        "which are not allowed in YAML substitution"
    ]


# --- ${PORT}, ${PID}, ${MODEL_ID} ---------------------------------------------------------


def test_port_in_proxy_needs_port_in_cmd():
    assert found(model("proxy: http://127.0.0.1:${PORT}\n", cmd="srv --port 8080")) == [
        "config.yaml:5: error: models.m: proxy uses ${PORT} but cmd does not - ${PORT} is only available when used in cmd"
    ]


def test_default_proxy_with_fixed_port_cmd_is_refused():
    assert found(model(cmd="sd-server --listen-port 9999")) == [
        "config.yaml:3: error: models.m: proxy uses ${PORT} but cmd does not - ${PORT} is only available when "
        "used in cmd (no proxy set, so the default http://localhost:${PORT} applies)"
    ]


def test_pid_outside_cmd_stop_is_refused():
    assert found(model(cmd="srv --port ${PORT} --pid ${PID}")) == [
        "config.yaml:4: error: models.m.cmd: unknown macro '${PID}' (${PID} is only allowed in cmdStop)"
    ]


def test_pid_in_cmd_stop_and_model_id_anywhere_are_fine():
    assert found(model("cmdStop: kill ${PID}\nname: '${MODEL_ID}'\n", cmd="srv --port ${PORT} -a ${MODEL_ID}")) == []


def test_port_in_metadata_without_port_in_cmd_is_unknown():
    text = model("proxy: http://h:1\nmetadata: {p: '${PORT}'}\n", cmd="srv --port 1")
    assert found(text) == ["config.yaml:6: error: models.m.metadata.p: unknown macro '${PORT}' (${PORT} is only set when cmd uses it)"]


# --- aliases, groups, references -----------------------------------------------------------


def test_duplicate_alias_across_models():
    text = model("aliases: [x]\n") + "  n:\n    cmd: srv --port ${PORT}\n    aliases: [x]\n"
    assert found(text) == ["config.yaml:8: error: models.n.aliases[0]: duplicate alias 'x' (already used by model 'm')"]


def test_alias_equal_to_another_model_id():
    text = model("aliases: [n]\n") + "  n:\n    cmd: srv --port ${PORT}\n"
    assert found(text) == ["config.yaml:5: error: models.m.aliases[0]: alias 'n' is the id of another model, which wins"]


def test_set_params_by_id_key_may_not_be_another_model():
    text = model("filters:\n  setParamsByID:\n    n: {temperature: 0}\n") + "  n:\n    cmd: srv --port ${PORT}\n"
    assert found(text) == ["config.yaml:7: error: models.m.filters.setParamsByID: key 'n' conflicts with an existing model ID"]


GROUPED = model() + "  n:\n    cmd: srv --port ${PORT}\n"


@pytest.mark.parametrize(
    ("groups", "line", "message"),
    [
        ("groups:\n  g: {members: [m]}\n  h: {members: [m]}\n", 9, "groups.h.members[0]: model member m is used in multiple groups: g and h"),
        ("groups:\n  g: {members: [m, m]}\n", 8, "groups.g.members[1]: duplicate model member m found in group: g"),
        ("groups:\n  g: {members: [ghost]}\n", 8, "groups.g.members[0]: 'ghost' is not a model id (llama-swap fails to start: no model config for \"ghost\")"),
        ("groups:\n  g: {swap: maybe, members: [m]}\n", 8, "groups.g.swap: expected true or false, got 'maybe'"),
        ("groups:\n  g: {exclusive: false}\n", 8, "groups.g: missing required key 'members'"),
        ("groups:\n  g: {members: [m]}\nrouting:\n  router: {use: group}\n", 9,
         "config uses both the legacy top-level 'matrix'/'groups' keys and the new 'routing.router' block"),
        ("routing:\n  router: {use: matrix}\n", 8, "routing.router.use is 'matrix' but routing.router.settings.matrix is not set"),
        ("routing:\n  router:\n    settings:\n      groups:\n        g: {members: [m, ghost]}\n", 11,
         "routing.router.settings.groups.g.members[1]: 'ghost' is not a model id (llama-swap fails to start: no model config for \"ghost\")"),
    ],
)
def test_group_rules(groups, line, message):
    assert found(GROUPED + groups) == [f"config.yaml:{line}: error: {message}"]


def test_groups_and_matrix_together_are_refused():
    text = GROUPED + "groups:\n  g: {members: [m]}\nmatrix:\n  vars: {a: m}\n  sets: {s: a}\n"
    assert found(text) == ["config.yaml:9: error: config cannot use both 'groups' and 'matrix'"]


def test_matrix_vars_must_name_models():
    assert found(GROUPED + "matrix:\n  vars: {a: ghost}\n  sets: {s: a}\n") == [
        "config.yaml:8: error: matrix.vars.a: 'ghost' is not a model id"
    ]


ROUTED = GROUPED + "routing:\n  router:\n    use: matrix\n    settings:\n      matrix:\n        vars: {a: m, b: n}\n"


@pytest.mark.parametrize(
    ("tail", "line", "message"),
    [
        ('        sets: {s1: "a & ghost"}\n', 13, 'set "s1": unknown var or model "ghost"'),
        ('        sets: {s1: "a & (b"}\n', 13, 'set "s1": parse: missing closing parenthesis'),
        ('        sets: {s1: "a , b"}\n', 13, "set \"s1\": tokenize: unexpected character ',' at position 2"),
        ('        sets: {s1: "a &"}\n', 13, 'set "s1": parse: unexpected token ""'),
        ('        sets: {s1: "+s9 & a"}\n', 13, 'set "s1" references undefined set "s9"'),
        ('        sets:\n          s1: "+s2"\n          s2: "a | +s1"\n', 14,
         'circular reference detected involving set "s1"'),
        ('        evict_costs: {ghost: 2}\n        sets: {s1: "a & b"}\n', 13,
         'evict_costs: unknown var or model "ghost"'),
    ],
)
def test_matrix_sets_compile_as_llama_swap_compiles_them(tail, line, message):
    """config/matrix.go ValidateMatrix and matrix/program.go Compile, first problem only."""
    where = "routing.router.settings.matrix"
    sep = "." if message.startswith("evict_costs") else ": "
    assert found(ROUTED + tail) == [f"config.yaml:{line}: error: {where}{sep}{message}"]


def test_a_matrix_of_vars_models_and_references_is_accepted():
    tail = '        evict_costs: {a: 5, n: 1}\n        sets:\n          s1: "a & (b | n)"\n          s2: "+s1 & m"\n'
    assert found(ROUTED + tail) == []


def test_a_matrix_under_use_group_is_not_compiled():
    """load.go reads routing.router.settings.matrix only when `use: matrix`."""
    text = GROUPED + "routing:\n  router:\n    use: group\n    settings:\n      matrix:\n        vars: {a: m}\n" \
                     '        sets: {s1: "a & ghost"}\n'
    assert found(text) == []


def test_preload_of_unknown_id_is_reported_as_ignored():
    (problem,) = validate_text(GROUPED + "hooks:\n  on_startup:\n    preload: [ghost]\n")
    assert str(problem) == (
        "config.yaml:9: warning: hooks.on_startup.preload[0]: 'ghost' is not a model id or alias (llama-swap drops it)"
    )
    assert problem.severity == "ignored"


# --- files and the CLI --------------------------------------------------------------------


def test_unreadable_file_is_one_problem(tmp_path):
    assert [str(p) for p in validate_file(str(tmp_path / "missing.yaml"))] == [
        f"{tmp_path / 'missing.yaml'}: error: cannot read: No such file or directory"
    ]


def test_non_utf8_file_is_one_problem(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"models: {}\n# \xff\n")
    assert [str(p) for p in validate_file(str(path))] == [f"{path}: error: not valid UTF-8 (byte 13)"]


def test_main_prints_summary_for_a_valid_file(tmp_path, capsys):
    path = tmp_path / "config.yaml"
    path.write_text(VALID)
    assert main_validate([str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: valid llama-swap config (2 models, 1 group)\n"


def test_main_prints_one_line_per_problem_and_fails(tmp_path, capsys):
    path = tmp_path / "config.yaml"
    path.write_text(model("ttl: -2\ncheckendpoint: /\n"))
    assert main_validate([str(path)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{path}:5: error: models.m.ttl: must be >= -1 (got -2)",
        f"{path}:6: warning: models.m: unknown key 'checkendpoint' (llama-swap ignores it; did you mean 'checkEndpoint'?)",
    ]


def test_only_warnings_pass_with_a_summary_that_counts_them(tmp_path, capsys, monkeypatch):
    """A key llama-swap ignores and an unset variable are warnings: the file loads, exit 0."""
    monkeypatch.delenv("SWAPGEN_TEST_UNSET", raising=False)
    path = tmp_path / "config.yaml"
    path.write_text("logLevl: debug\napiKeys: ['${env.SWAPGEN_TEST_UNSET}']\n" + model())
    assert main_validate([str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(": ", 2)[1] for line in lines[:-1]] == ["warning", "warning"]
    assert lines[0] == f"{path}:1: warning: unknown key 'logLevl' (llama-swap ignores it; did you mean 'logLevel'?)"
    assert lines[-1] == f"{path}: valid llama-swap config (1 model, 0 groups; 2 warnings)"


def test_every_line_is_labelled_error_or_warning_and_the_exit_follows_the_label(tmp_path, capsys):
    path = tmp_path / "config.yaml"
    path.write_text("logLevl: debug\n" + model("ttl: soon\n"))
    assert main_validate([str(path)]) == 1
    assert [line.split(": ", 2)[1] for line in capsys.readouterr().out.splitlines()] == ["warning", "error"]


def test_problem_severities_map_to_two_labels():
    labels = {severity: Problem(1, "m", "c.yaml", severity).label for severity in ("error", "ignored", "warning")}
    assert labels == {"error": "error", "ignored": "warning", "warning": "warning"}
    assert [Problem(1, "m", "c.yaml", s).fatal for s in labels] == [True, True, False]  # never written by swapgen


def test_hostile_paths_rendered_by_cmdline_validate():
    argv = ["/opt/llama server", "-m", "/m/it's \"here\" \\ $HOME 日本.gguf", "--port", "${PORT}"]
    cmd = textwrap.indent(render_cmd(argv), "      ")
    assert found(f"models:\n  m:\n    cmd: |\n{cmd}") == []


def test_a_thousand_generated_models_validate():
    lines = ["healthCheckTimeout: 300", "models:"]
    for i in range(1000):
        cmd = render_cmd(["llama-server", "-m", f"/models/dir {i}/m.gguf", "--port", "${PORT}", "-c", "4096"])
        lines += [f"  model-{i:04d}:", "    cmd: |", textwrap.indent(cmd, "      ").rstrip("\n")]
        lines += ["    ttl: 600", f"    aliases: [alias-{i}]", "    metadata: {backend: llama, size_gb: 4.1}"]
    assert validate_text("\n".join(lines) + "\n") == []


# --- agreement with the upstream JSON schema ----------------------------------------------

SCHEMA_SAMPLES = [
    (VALID, True),
    (model("ttl: -1\nunlisted: false\ncapabilities: {in: [audio], out: [text], reranker: true}\n"), True),
    (model("filters: {stripParams: 'temperature, top_p', setParams: {x: 1}}\n"), True),
    (model("timeouts: {connect: 5, idleConn: 0}\ncompat: {ignoreWebsockets: true}\n"), True),
    ("macros: {a-b_1: 1.5, flag: true}\n" + model().split("\n", 1)[1], True),
    ("logLevel: debug\nlogToStdout: both\nlogTimeFormat: rfc3339\n" + model().split("\n", 1)[1], True),
    ("logLevel: loud\n" + model().split("\n", 1)[1], False),
    ("healthCheckTimeout: 14\nmodels: {}\n", False),
    ("macros: {PID: 1}\nmodels: {}\n", False),
    ("macros: {'a b': 1}\nmodels: {}\n", False),
    ("macros: {a: [1]}\nmodels: {}\n", False),
    ("logLevel: info\n", False),
    ("models:\n  m: {ttl: 5}\n", False),
    (model("env: [lower=1]\n"), False),
    (model("checkEndpoint: health\n"), False),
    (model("ttl: -2\n"), False),
    (model("ttl: '5'\n"), False),
    (model("capabilities: {in: []}\n"), False),
    (model("capabilities: {in: [smell]}\n"), False),
    (model("capabilities: {extra: 1}\n"), False),
    (model("filters: {stripParams: 'a;b'}\n"), False),
    (model("timeouts: {connect: -1}\n"), False),
    (model("aliases: ['']\n"), False),
    (model("name: " + "n" * 129 + "\n"), False),
    (GROUPED + "groups:\n  g: {swap: true}\n", False),
    (GROUPED + "groups:\n  g: {members: [m]}\nmatrix:\n  vars: {a: m}\n  sets: {s: a}\n", False),
]


@pytest.mark.parametrize(("text", "schema_valid"), SCHEMA_SAMPLES)
def test_agrees_with_llama_swaps_json_schema(text, schema_valid):
    """Each sample as llama-swap's schema judges it (its facts from `tests/data`, applied by jsonschema)
    and as our validator does."""
    jsonschema = pytest.importorskip("jsonschema")
    data = YAML(typ="safe", pure=True).load(text)
    schema = schema_facts.to_json_schema(schema_facts.load())
    upstream_ok = not list(jsonschema.Draft7Validator(schema).iter_errors(data))
    assert upstream_ok == schema_valid
    assert (validate_text(text) == []) == schema_valid
