"""The hooks in `.pre-commit-hooks.yaml`, end to end with the real pre-commit (docs/pre-commit.md).

The hook repo is a throwaway git repo holding a copy of the working tree (pre-commit needs a
committed `rev`, and the tree's own commits may lag behind it). pre-commit then builds the hook's
venv from it (`pip install .`, offline from the machine's wheel index) once per module, in a
private PRE_COMMIT_HOME.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gguf_fixtures import llama_tensors, write_gguf

REPO = Path(__file__).resolve().parent.parent
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("git") is None, reason="needs git")]


def sh(cwd: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env={**os.environ, **GIT_ENV, **(env or {})},
                          capture_output=True, text=True, timeout=600)


def commit_all(repo: Path) -> str:
    sh(repo, "git", "add", "-A")
    assert sh(repo, "git", "commit", "-q", "-m", "snapshot").returncode == 0
    return sh(repo, "git", "rev-parse", "HEAD").stdout.strip()


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> tuple[Path, str]:
    """A committed copy of the package and the hooks file: (path, rev)."""
    repo = tmp_path_factory.mktemp("hook-repo")
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copy2(REPO / name, repo / name)
    shutil.copytree(REPO / "autogen", repo / "autogen", ignore=shutil.ignore_patterns("__pycache__"))
    sh(repo, "git", "init", "-q")
    return repo, commit_all(repo)


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def config_repo(tmp_path, hook_repo) -> Path:
    """A config repo: swapgen.yaml over a one-model library outside git, a stale config.yaml."""
    (tmp_path / "models").mkdir()
    write_gguf(tmp_path / "models" / "Tiny-Llama-Q4_K_M.gguf", "llama",
               kv={"{arch}.context_length": 4096, "{arch}.block_count": 2, "{arch}.embedding_length": 256,
                   "{arch}.attention.head_count": 4, "{arch}.attention.head_count_kv": 2,
                   "general.file_type": 15},
               tensors=llama_tensors(2, 256, 1000, 512))
    repo = tmp_path / "config-repo"
    repo.mkdir()
    (repo / "swapgen.yaml").write_text(
        "roots: [../models]\nvram_budget_gb: 8\ncard_vram_gb: 24\n"
        "backends:\n  - {id: llama-cpu, kind: llama, path: llama-server, default: true}\n")
    (repo / "config.yaml").write_text("models: {}\n")
    (repo / ".gitignore").write_text("/cache/\n")
    path, rev = hook_repo
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {path}\n    rev: {rev}\n    hooks:\n      - id: swapgen\n      - id: swapgen-validate\n")
    sh(repo, "git", "init", "-q")
    commit_all(repo)
    return repo


def pre_commit(repo: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    return sh(repo, sys.executable, "-m", "pre_commit", "run", *args, "--color", "never",
              env={"PRE_COMMIT_HOME": str(home)})


def test_regenerate_hook_fails_once_then_passes_after_git_add(config_repo, pre_commit_home):
    first = pre_commit(config_repo, pre_commit_home, "--all-files")
    out = first.stdout + first.stderr
    assert first.returncode == 1, out
    assert "files were modified by this hook" in out
    config = (config_repo / "config.yaml").read_text()
    assert "Tiny-Llama" in config and "llama-server" in config
    sh(config_repo, "git", "add", "config.yaml")
    second = pre_commit(config_repo, pre_commit_home, "--all-files")
    assert second.returncode == 0, second.stdout + second.stderr
    assert (config_repo / "config.yaml").read_text() == config


def test_regenerate_hook_fails_the_first_time_it_writes_a_config(config_repo, pre_commit_home):
    """No config.yaml yet: pre-commit sees no tracked file change, the hook itself must fail."""
    sh(config_repo, "git", "rm", "-q", "config.yaml")
    commit_all(config_repo)
    first = pre_commit(config_repo, pre_commit_home, "swapgen")
    assert first.returncode == 1 and "review it and `git add` it" in first.stdout + first.stderr
    assert "Tiny-Llama" in (config_repo / "config.yaml").read_text()
    sh(config_repo, "git", "add", "config.yaml")
    second = pre_commit(config_repo, pre_commit_home, "swapgen")
    assert second.returncode == 0, second.stdout + second.stderr


def test_validate_hook_fails_on_a_broken_config_with_file_and_line(config_repo, pre_commit_home):
    (config_repo / "config.yaml").write_text('models:\n  "m1":\n    proxy: "http://127.0.0.1:9999"\n')
    result = pre_commit(config_repo, pre_commit_home, "swapgen-validate", "--files", "config.yaml")
    assert result.returncode == 1
    assert "config.yaml:2: error: models.m1: missing required key 'cmd'" in result.stdout
