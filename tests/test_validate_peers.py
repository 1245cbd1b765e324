"""Peers, selectors and profiles, checked as llama-swap's loader checks them (`internal/config/
peer.go`, `selectors.go`, `load.go: validateProfiles`); the cases follow upstream's own tests."""

from __future__ import annotations

import textwrap

import pytest

from autogen.router.validate import go_url_problem, resolve_base_model, resolve_peer_model, validate_text

#: Two local models (`a` with an alias and a setParamsByID id), one peer model.
BASE = """\
models:
  a:
    cmd: srv --port ${PORT}
    aliases: [alias-a]
    filters:
      setParamsByID:
        variant:
          temperature: 0
  b:
    cmd: srv --port ${PORT}
peers:
  remote:
    proxy: http://example.com
    models: [remote-model]
"""


def messages(extra: str, base: str = BASE) -> list[str]:
    return [p.message for p in validate_text(base + textwrap.dedent(extra)) if p.fatal]


class TestSelectors:
    @pytest.mark.parametrize(("selectors", "message"), [
        ("' ': {strategy: pin, targets: [a]}", "selectors: selector names cannot be empty"),
        ("public: {targets: [a]}", "selectors.public: missing required key 'strategy'"),
        ("public: {strategy: random, targets: [a]}",
         "selectors.public.strategy: must be one of 'warm', 'pin', 'spillover'; got 'random'"),
        ("public: {strategy: pin}", "selectors.public: missing required key 'targets'"),
        ("public: {strategy: pin, targets: [missing]}",
         "selectors.public.targets[0] references unknown model 'missing' (not a model id, alias or peer model "
         "of this config)"),
        ("a: {strategy: pin, targets: [b]}", "selectors.a: name conflicts with model ID 'a'"),
        ("alias-a: {strategy: pin, targets: [a]}", "selectors.alias-a: name conflicts with model alias 'alias-a'"),
        ("variant: {strategy: pin, targets: [a]}", "selectors.variant: name conflicts with model alias 'variant'"),
        ("public: {strategy: warm, targets: [remote-model]}",
         'selectors.public.targets[0] must resolve to a local model for strategy "warm"'),
        ("public: {strategy: spillover, targets: [a], settings: {spillover: 0}}",
         "selectors.public.settings.spillover: must be >= 1 (got 0)"),
        ("public: {strategy: spillover, targets: [a, alias-a]}",
         "selectors.public.targets contains duplicate resolved model 'a'"),
        ("public: {strategy: spillover, targets: [remote-model, remote/remote-model]}",
         "selectors.public.targets contains duplicate resolved model 'remote/remote-model'"),
        ("public: {strategy: spillover, targets: [a, b]}",
         "selectors.public spillover targets must share a group with swap: false (group '(default)' swaps)"),
    ])
    def test_rules(self, selectors, message):
        """The first problem is the one llama-swap stops at (it reports one error; we report all)."""
        assert messages(f"selectors:\n  {selectors}\n")[0] == message

    def test_chaining_is_refused(self):
        assert messages("selectors:\n  first: {strategy: pin, targets: [a]}\n"
                        "  second: {strategy: pin, targets: [first]}\n") == [
            "selectors.second.targets[0] references selector 'first'; selector chaining is not supported"]

    def test_targets_may_span_local_and_peer_models(self):
        """pin and spillover may mix local models, aliases and peer models (`<peer>/<model>` too)."""
        assert messages("""\
            groups:
              pair: {swap: false, members: [a, b]}
            selectors:
              coding: {strategy: pin, targets: [alias-a, remote/remote-model, b]}
              workers: {strategy: spillover, targets: [a, b, remote-model], settings: {spillover: 2}}
              warm: {strategy: warm, targets: [variant, b]}
            """) == []

    def test_spillover_targets_in_two_groups_are_refused(self):
        assert messages("""\
            groups:
              one: {swap: false, members: [a]}
              two: {swap: false, members: [b]}
            selectors:
              s: {strategy: spillover, targets: [a, b]}
            """) == ["selectors.s spillover targets must share one routing group"]

    @pytest.mark.parametrize(("sets", "ok"), [
        ({"s1": "a & b"}, True),
        ({"s1": "c & (a | b)", "s2": "a"}, False),  # a and b are alternatives, never together
        ({"s1": "a", "s2": "b"}, False),
        ({"s1": "c & (+s2)", "s2": "a & b"}, True),  # through a reference
        ({"s1": "(a | m1) & (b | m2) & (c | m3) & (m4 | m5) & (m6 | m7 | m8)"}, True),
    ])
    def test_spillover_targets_under_a_matrix_must_share_an_expanded_set(self, sets, ok):
        """selectors.go validateSpilloverCoexistence, matrix branch (`CanContainAll`)."""
        models = "".join(f"  {m}:\n    cmd: srv --port ${{PORT}}\n" for m in ["c", *(f"m{i}" for i in range(1, 9))])
        lines = "".join(f'          {name}: "{text}"\n' for name, text in sets.items())
        found = messages("routing:\n  router:\n    use: matrix\n    settings:\n      matrix:\n        vars: {va: a}\n        sets:\n"
                         + lines + "selectors:\n  s: {strategy: spillover, targets: [alias-a, b, remote-model]}\n",
                         BASE.replace("peers:", models + "peers:"))
        assert found == ([] if ok else ["selectors.s.targets must all appear together in one expanded matrix set"])

    def test_spillover_with_a_single_local_target_needs_no_group(self):
        assert messages("selectors:\n  s: {strategy: spillover, targets: [a, remote-model]}\n") == []


class TestPeers:
    @pytest.mark.parametrize(("peer", "message"), [
        ("{proxy: '', models: [x]}", "peers.far.proxy: proxy is required"),
        ("{proxy: '://invalid', models: [x]}",
         "peers.far.proxy: invalid peer proxy URL (://invalid): missing protocol scheme"),
        ("{proxy: 'http://far:port', models: [x]}",
         "peers.far.proxy: invalid peer proxy URL (http://far:port): invalid port ':port' after host"),
        ("{proxy: 'http://far:8080', models: []}", "peers.far.models: peer models can not be empty"),
        ("{proxy: 'http://far:8080'}", "peers.far: missing required key 'models'"),
        ("{proxy: 'http://far:8080', models: [x], key: 1}", "peers.far: unknown key 'key' (llama-swap ignores it)"),
    ])
    def test_rules(self, peer, message):
        assert messages(f"peers:\n  far: {peer}\n", base="models: {}\n") == [message]

    def test_an_ambiguous_qualified_name_is_refused(self):
        """`x/y` + `z` and `x` + `y/z` both name `x/y/z`."""
        assert messages("""\
            peers:
              x/y: {proxy: "http://h1:1", models: [z]}
              x: {proxy: "http://h2:1", models: [y/z]}
            """, base="models: {}\n") == [
            "peers.x/y: peer model name 'x/y/z' is ambiguous between peers.x model 'y/z' and peers.x/y model 'z'"]

    def test_a_model_id_equal_to_a_qualified_name_is_refused(self):
        base = BASE.replace("  b:\n", "  remote/remote-model:\n")
        assert messages("", base=base) == [
            "models.remote/remote-model: model ID 'remote/remote-model' conflicts with fully qualified peer model name"]

    def test_an_alias_or_selector_or_pin_equal_to_a_qualified_name_is_refused(self):
        base = BASE.replace("aliases: [alias-a]", "aliases: [remote/remote-model]")
        found = messages("""\
            selectors:
              remote/remote-model: {strategy: pin, targets: [b]}
            profiles:
              p: {pins: {remote/remote-model: b}}
            """, base=base)
        assert "peers.remote: alias 'remote/remote-model' of model 'a' conflicts with fully qualified peer model name" \
            in found
        assert "peers.remote: selector ID 'remote/remote-model' conflicts with fully qualified peer model name" in found
        assert "peers.remote: profile p pin 'remote/remote-model' conflicts with fully qualified peer model name" \
            in found

    def test_resolution_follows_resolve_peer_model(self):
        peers = {"p1": {"models": ["m", "shared", "m"]}, "p2": {"models": ["shared"]}}
        assert resolve_peer_model("m", peers) == ("p1", "m")
        assert resolve_peer_model("p2/shared", peers) == ("p2", "shared")
        assert resolve_peer_model("shared", peers) is None, "two peers list it: ambiguous"
        assert resolve_base_model("shared", {"shared": {}}, {}, peers) == "shared", "a local id wins"
        assert resolve_base_model("alias", {}, {"alias": "x"}, peers) == "x"


class TestProfiles:
    @pytest.mark.parametrize(("profiles", "message"), [
        ("p: [a]", "profiles.p: profile must be a mapping with description and pins; the legacy list syntax "
                   "is no longer supported"),
        ("p: {pins: {}}", "profiles.p.pins: must have at least 1 entry"),
        ("p: {pins: {x: missing}}", "profiles.p.pins.x references unknown model 'missing'"),
        ("' ': {pins: {x: a}}", "profiles: profile names cannot be empty"),
        ("p: {pins: {' ': a}}", "profiles.p.pins: pin names cannot be empty"),
    ])
    def test_rules(self, profiles, message):
        found = messages(f"profiles:\n  {profiles}\n")
        assert message in found, found

    def test_pins_may_name_models_aliases_peer_models_selectors_or_nothing(self):
        assert messages("""\
            selectors:
              s: {strategy: pin, targets: [a]}
            profiles:
              p: {description: small, pins: {x: alias-a, y: remote/remote-model, z: s, b: null, a: ""}}
            """) == []


class TestGoURL:
    @pytest.mark.parametrize(("url", "problem"), [
        ("http://127.0.0.1:5800/v1", None),
        ("https://openrouter.ai/api", None),
        ("http://[::1]:8080", None),
        ("a:b", None),
        ("", None),
        ("://invalid", "missing protocol scheme"),
        ("host:80/x", None),  # scheme "host", as Go reads it
        ("1host:80", "first path segment in URL cannot contain colon"),
        ("http://h:8o", "invalid port ':8o' after host"),
        ("http://[::1", "missing ']' in host"),
        ("http://a b/", "invalid character ' ' in host name"),
        ("http://h/%zz", "invalid URL escape"),
        ("http://h/\x01", "invalid control character in URL"),
    ])
    def test_like_net_url_parse(self, url, problem):
        assert go_url_problem(url) == problem
