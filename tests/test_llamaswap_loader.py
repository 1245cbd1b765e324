"""Generated configs as llama-swap itself loads them: its own config loader (with `-config-dir`
merging) and its router constructors, run by `tools/llamaswap-loadcheck` on the sample library,
every kind of `llama_swap:` key, a fragment beside a hand-written main file, `routing: auto` on
one and two cards, and the guide's fleet front config with `peers:`. The checker is built by
`tools/llamaswap-loadcheck/setup.sh` (through `scripts/setup-slow-checks.sh`); without it these tests skip,
saying how to get it."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from autogen.commands import sample
from tests.builders import SETTINGS
from tests.guide_pages import page, section_blocks
from tests.runs import generate
from tests.shared import not_set_up
from tests.test_emit_whisper import PARAKEET_ROW, WHISPER_ROW, parakeet
from tests.test_emit_whisper import library as whisper_library
from tests.test_emit_whisper import settings as whisper_settings
from tests.test_guide_llama_swap import FRAGMENT, GUIDE, OWN_KEYS, block
from tests.test_guide_llama_swap import library as guide_library
from tests.test_llama_swap_keys import EVERY_KIND_OF_KEY
from tests.test_routing import BASE as ROUTING_BASE
from tests.test_routing import HOSTS as ROUTING_HOSTS

REPO = Path(__file__).resolve().parents[1]
CACHED = Path(os.environ.get("TMPDIR") or "/tmp") / "llamaswap-loadcheck" / "bin" / "swapgen-loadcheck"
CHECKER = Path(os.environ.get("LLAMASWAP_LOADCHECK") or CACHED)
#: every `${env.…}` the configs below use: llama-swap refuses a file whose variable is unset
ENV = {"LLAMA_SWAP_API_KEY": "k-loadcheck", "GPU_A_KEY": "k-gpu-a"}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.access(CHECKER, os.X_OK),
                       reason=not_set_up(f"llama-swap's loader check ({CHECKER}; building it needs the Go "
                                         "module proxy)")),
]


def load(config: Path | None = None, config_dir: Path | None = None) -> tuple[int, str]:
    """(exit code, output) of llama-swap's loader and router constructors on these files."""
    argv = [str(CHECKER)]
    if config is not None:
        argv += ["-config", str(config)]
    if config_dir is not None:
        argv += ["-config-dir", str(config_dir)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, **ENV})
    return done.returncode, (done.stdout + done.stderr).strip()


def accepted(config: Path | None = None, config_dir: Path | None = None) -> str:
    rc, out = load(config, config_dir)
    assert rc == 0 and out.startswith("OK "), f"llama-swap refuses {config or config_dir}:\n{out}"
    return out


def summary(out: str) -> dict[str, str]:
    """`OK router=matrix models=3 …` as {'router': 'matrix', 'models': '3', …}."""
    return dict(word.split("=", 1) for word in out.split()[1:])


def test_the_checker_refuses_what_llama_swap_refuses(tmp_path):
    """A hand-made config llama-swap rejects (a model in two groups) is reported with its error,
    so an OK below means llama-swap's own code accepted the file."""
    config = tmp_path / "config.yaml"
    config.write_text(textwrap.dedent("""\
        models:
          a: {cmd: "llama-server --port ${PORT}"}
        groups:
          one: {members: [a]}
          two: {members: [a]}
        """))
    rc, out = load(config)
    assert rc == 1 and out.startswith("REJECTED: failed to load config: ") and "multiple groups" in out


def test_the_sample_library(tmp_path):
    shutil.copy2(REPO / "swapgen.yaml", tmp_path / "swapgen.yaml")
    sample.ensure(tmp_path / sample.SAMPLE_DIR)
    rc, _ = generate(tmp_path / "swapgen.yaml")
    assert rc == 0
    seen = summary(accepted(tmp_path / "config.yaml"))
    assert seen["router"] == "group" and int(seen["models"]) > 5 and seen["groups"] != "0"


def test_whisper_entries_with_their_alias_groups_and_routing(tmp_path):
    """whisper.cpp models of several sizes and types, a VAD model and an encoder folder, beside a
    parakeet model, one of them on the CPU (the `asr` group), `whisper-1` on one entry, planned by
    `routing: auto` too."""
    (whisper_library(tmp_path) / "ggml-base.en-encoder.mlmodelc").mkdir()
    parakeet(tmp_path)
    rows = WHISPER_ROW + PARAKEET_ROW
    overrides = "overrides:\n  - {match: '*base.en*', ngl: 0}\n"
    for extra in (overrides, overrides + "routing: auto\n"):
        (tmp_path / "swapgen.yaml").write_text(whisper_settings(rows, extra=extra))
        rc, _ = generate(tmp_path / "swapgen.yaml")
        assert rc == 0
        seen = summary(accepted(tmp_path / "config.yaml"))
        assert seen["models"] == "4" and "asr" in (tmp_path / "config.yaml").read_text()


def test_ik_llama_cpp_entries(library):
    """Models pinned to an ik_llama.cpp row, with its options and profiles, load as llama-swap
    loads its config (tests/test_ik_llama_flags.py checks each command against ik_llama.cpp's parser)."""
    (library / "swapgen.yaml").write_text(SETTINGS + textwrap.dedent("""\
          - {id: ik, kind: ik_llama, path: /opt/ik/llama-server}
        run_time_repack: true
        overrides:
          - match: "*Beta*"
            backend: ik
            mla: 1
            fused_moe: false
            n_cpu_moe: 2
            ctx_profiles: [4096]
            profiles: [{name: two slots, parallel: 2, kv_type: q8_0}]
        """))
    rc, _ = generate(library / "swapgen.yaml")
    assert rc == 0
    text = (library / "config.yaml").read_text()
    assert text.count("/opt/ik/llama-server") == 3 and "-rtr" in text
    assert summary(accepted(library / "config.yaml"))["models"] == "4"


def test_every_kind_of_llama_swap_key(library, monkeypatch):
    """Top-level keys (secrets, macros, hooks, selectors, profiles, peers, the scheduler) and
    every per-model key an override may carry, as tests/test_llama_swap_keys.py writes them."""
    monkeypatch.setenv("LLAMA_SWAP_API_KEY", ENV["LLAMA_SWAP_API_KEY"])
    (library / "swapgen.yaml").write_text(SETTINGS + EVERY_KIND_OF_KEY)
    rc, _ = generate(library / "swapgen.yaml")
    assert rc == 0
    seen = summary(accepted(library / "config.yaml"))
    assert (seen["models"], seen["peers"], seen["selectors"], seen["profiles"]) == ("3", "1", "2", "1")


def test_the_guide_own_settings_example(tmp_path, monkeypatch):
    blocks = section_blocks(OWN_KEYS, GUIDE)
    root = guide_library(tmp_path, block(blocks, "yaml", "# swapgen.yaml"))
    monkeypatch.setenv("LLAMA_SWAP_API_KEY", ENV["LLAMA_SWAP_API_KEY"])
    rc, _ = generate(root / "swapgen.yaml")
    assert rc == 0
    assert summary(accepted(root / "config.yaml"))["selectors"] == "1"


def test_a_fragment_beside_the_readme_main_file(tmp_path, monkeypatch):
    """docs/llama-swap-settings.md "A config-dir fragment": `llama-swap --config config.yaml --config-dir conf.d`."""
    blocks = section_blocks(FRAGMENT, GUIDE)
    root = guide_library(tmp_path, block(blocks, "yaml", "# swapgen.yaml"))
    (root / "config.yaml").write_text(block(blocks, "yaml", "# config.yaml"))
    monkeypatch.chdir(root)
    rc, _ = generate(root / "swapgen.yaml")
    assert rc == 0
    assert summary(accepted(root / "config.yaml", root / "conf.d"))["models"] == "3"
    assert summary(accepted(config_dir=root / "conf.d"))["models"] == "2", "the fragment alone loads too"


def test_a_fragment_holding_the_matrix_beside_a_main_file(library):
    """`routing: auto` in fragment mode: the matrix sits in the fragment, the main file's own
    model runs alone (llama-swap's matrix router gives every model a process)."""
    (library / "conf.d").mkdir()
    (library / "swapgen.yaml").write_text(
        SETTINGS.replace("card_vram_gb: 0", "card_vram_gb: 24")
        + "output: conf.d/50-swapgen.yaml\noutput_mode: fragment\nrouting: auto\n")
    (library / "main.yaml").write_text(textwrap.dedent("""\
        healthCheckTimeout: 300
        models:
          whisper: {cmd: "whisper-server --port ${PORT}", proxy: "http://127.0.0.1:${PORT}"}
        """))
    rc, _ = generate(library / "swapgen.yaml")
    assert rc == 0
    seen = summary(accepted(library / "main.yaml", library / "conf.d"))
    assert (seen["router"], seen["models"]) == ("matrix", "3") and seen["sets"] != "0"


def test_the_guide_front_config(tmp_path):
    """docs/gpu-hosts.md: the front's `peers:` block as the page shows it."""
    front = tmp_path / "config.yaml"
    front.write_text(block(section_blocks("# Several GPU hosts", page("gpu-hosts.md")), "yaml", "# config.yaml"))
    seen = summary(accepted(front))
    assert (seen["models"], seen["peers"]) == ("0", "2")


@pytest.fixture(scope="module")
def sample_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("loadcheck-routing")
    sample.build(root / "sample-library")
    return root


@pytest.mark.parametrize("host", ["pooled", "one-gpu", "two-gpus"])
def test_routing_auto(sample_root, host):
    """tests/test_routing.py's hosts: one pooled card, one declared GPU, two declared GPUs."""
    settings = sample_root / f"{host}.settings.yaml"
    settings.write_text(ROUTING_BASE.format(name=host) + ROUTING_HOSTS[host][0])
    rc, _ = generate(settings)
    assert rc == 0
    seen = summary(accepted(sample_root / f"{host}.yaml"))
    assert seen["router"] == "matrix" and int(seen["sets"]) > 0 and seen["groups"] == "0"
