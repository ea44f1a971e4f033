"""The pre-commit hook (``.pre-commit-hooks.yaml``) runs the installed ``promptls lint``.

pre-commit installs this repository into a virtual environment (``language: python``) and
calls ``entry`` with the staged files that match ``files``; so the entry's executable must
be the package's console script and ``files`` must match every document promptls reads.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml

from assembly.documents import CONVERSATION_SUFFIXES
from server.cli.main import main

REPO = Path(__file__).resolve().parent.parent
DOCUMENT_SUFFIXES = (*CONVERSATION_SUFFIXES, ".prompt.md")


def _hook() -> dict:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert isinstance(hooks, list)
    assert [h["id"] for h in hooks] == ["promptls"]
    return hooks[0]


def test_hook_runs_the_console_script() -> None:
    hook = _hook()
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "scripts"
    ]
    executable, *args = shlex.split(hook["entry"])
    assert executable in scripts
    assert scripts[executable] == "server.cli.main:run"
    assert args == ["lint"]
    assert hook["language"] == "python"
    assert hook["pass_filenames"] is True


def test_hook_entry_lints_the_files_it_is_given() -> None:
    _, *args = shlex.split(_hook()["entry"])
    files = ["examples/support-agent.conv.json", "examples/prompts/support-agent.prompt.md"]
    assert main([*args, *(str(REPO / f) for f in files)]) == 0


@pytest.mark.parametrize("suffix", DOCUMENT_SUFFIXES)
def test_hook_matches_every_document(suffix: str) -> None:
    assert re.search(_hook()["files"], f"dir/case{suffix}")


@pytest.mark.parametrize(
    "name", ["pyproject.toml", "notes.md", "data.json", "a.conv.json.bak", "conv.yaml"]
)
def test_hook_skips_other_files(name: str) -> None:
    assert not re.search(_hook()["files"], name)


def _ci_md() -> str:
    return (REPO / "docs" / "ci.md").read_text(encoding="utf-8")


def _local_hook() -> dict:
    """The ``repo: local`` hook docs/ci.md tells users to paste under ``repos:``."""
    blocks = re.findall(r"```yaml\n(.*?)```", _ci_md(), flags=re.DOTALL)
    [block] = [b for b in blocks if "repo: local" in b]
    [repo] = yaml.safe_load(block)
    assert repo["repo"] == "local"
    [hook] = repo["hooks"]
    return hook


def test_docs_local_hook_is_the_published_hook() -> None:
    local, published = _local_hook(), _hook()
    for key in ("id", "entry", "files", "require_serial"):
        assert local[key] == published[key], key
    # `system`: the promptls of the environment one commits from (no tag needed).
    assert local["language"] == "system"


def test_docs_local_hook_lints_what_it_is_given() -> None:
    _, *args = shlex.split(_local_hook()["entry"])
    good = [REPO / "examples" / "support-agent.conv.json"]
    assert main([*args, *map(str, good)]) == 0
    pattern = _local_hook()["files"]
    assert re.search(pattern, "examples/overflow.conv.yaml")
    assert not re.search(pattern, "README.md")


def test_pre_commit_runs_the_docs_local_hook(tmp_path: Path) -> None:
    """The snippet of docs/ci.md, pasted into a project, run by pre-commit itself."""
    import os
    import subprocess
    import sys

    blocks = re.findall(r"```yaml\n(.*?)```", _ci_md(), flags=re.DOTALL)
    [snippet] = [b for b in blocks if "repo: local" in b]
    project = tmp_path / "project"
    project.mkdir()
    (project / ".pre-commit-config.yaml").write_text("repos:\n" + snippet, encoding="utf-8")
    good = project / "good.conv.json"
    good.write_text(
        '[{"role": "user", "content": "What changed in the Q2 export?"}]\n', encoding="utf-8"
    )
    bad = project / "bad.conv.yaml"
    bad.write_text("messages:\n  - {role: human, content: hi}\n", encoding="utf-8")
    (project / "notes.md").write_text("# not linted\n", encoding="utf-8")
    bin_dir = Path(sys.executable).parent
    env = dict(
        os.environ,
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"),
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        TIKTOKEN_CACHE_DIR="",
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args, cwd=project, env=env, capture_output=True, text=True, timeout=120
        )

    assert run("git", "init", "-q").returncode == 0
    assert run("git", "add", ".").returncode == 0
    clean = run(str(bin_dir / "pre-commit"), "run", "--files", "good.conv.json", "notes.md")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "promptls" in clean.stdout and "Passed" in clean.stdout
    failing = run(str(bin_dir / "pre-commit"), "run", "--all-files")
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "bad.conv.yaml:2:" in failing.stdout and "schema-error" in failing.stdout
    assert "notes.md" not in failing.stdout
