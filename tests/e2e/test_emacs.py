"""Emacs (batch) with eglot 1.9+ drives ``python -m server``.

The driver (editors/emacs_driver.el) loads README's eglot snippet with this venv's server
command, opens examples/overflow.conv.yaml, waits for its flymake diagnostics, hovers the
document head (the raw answer, and the text eglot shows) and applies a quick fix in a copy
of a fixture. Skipped without ``emacs``, except with CI=true, where that is a failure.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.editors import (
    EDITORS,
    FIX_LINE_AFTER,
    FIX_LINE_BEFORE,
    OVERFLOW,
    check_part,
    hermetic_env,
    require_editor,
    run_editor,
    server_command,
    write_fix_document,
    write_readme_snippet,
)

# (code, flymake type, line, column, end line, end column): 0-based lines, code-point
# columns (the buffer's), so a wrong UTF-16 -> character mapping would show.
OVERFLOW_DIAGNOSTICS = [
    ("compression-due", "eglot-note", 121, 4, 410, 34),
    ("history-truncated", "eglot-note", 121, 4, 314, 95),
    ("orphaned-tool-response", "eglot-warning", 316, 4, 320, 324),
]


@pytest.fixture(scope="module")
def emacs_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    emacs = require_editor(
        "emacs", "emacs-nox elpa-eglot", probe=["--batch", "--eval", "(require 'eglot)"]
    )
    tmp = tmp_path_factory.mktemp("emacs")
    fix_dir = tmp / "fix"
    fix_dir.mkdir()
    fix = write_fix_document(fix_dir)
    out, server_stderr = tmp / "out.json", tmp / "server.stderr"
    env = hermetic_env(
        tmp,
        PROMPTLS_CMD=json.dumps(server_command(server_stderr)),
        CONV_FILE=str(OVERFLOW),
        FIX_FILE=str(fix),
        OUT=str(out),
        PROMPTLS_INIT=str(write_readme_snippet("Emacs (eglot)", "elisp", tmp / "init.el")),
    )
    run = run_editor(
        [emacs, "--batch", "-l", str(EDITORS / "emacs_driver.el")],
        env=env,
        out=out,
        server_stderr=server_stderr,
    )
    if run.returncode != 0 or not run.result:
        pytest.fail(f"Emacs eglot run failed\n{run.report()}")
    return {**run.result, "report": run.report(), "elapsed_s": run.elapsed_s}


def test_diagnostics_at_the_right_places(emacs_run: dict[str, Any]) -> None:
    check_part(emacs_run, "diagnostics")
    got = [
        (d["code"], d["type"], d["line"], d["col"], d["end_line"], d["end_col"])
        for d in emacs_run["diagnostics"]
    ]
    assert got == OVERFLOW_DIAGNOSTICS, emacs_run["report"]
    truncated = emacs_run["diagnostics"][1]
    assert truncated["covered"].startswith("id: m1\n"), truncated


def test_hover_shows_the_segment_table(emacs_run: dict[str, Any]) -> None:
    check_part(emacs_run, "hover")
    shown = emacs_run["hover_shown"]
    assert "max_input_tokens 4,096" in shown, shown  # the budget line
    if emacs_run["hover"]["contents"]["kind"] == "markdown":  # markdown-mode is installed
        for segment in ("| system |", "| history |", "| forgotten_files |", "| reminder |"):
            assert segment in shown, shown
        return
    # Without markdown-mode (CI), eglot asks for plain text and gets a plain-text table.
    lines = shown.split("\n")
    assert any(line.split()[:2] == ["segment", "messages"] for line in lines if line), lines
    for segment in ("system", "history", "forgotten_files", "reminder"):
        assert any(line.startswith(segment + " ") for line in lines), lines


def test_quick_fix_applied(emacs_run: dict[str, Any]) -> None:
    check_part(emacs_run, "quick_fix")
    [before] = emacs_run["fix_diagnostics"]
    # Code-point columns: the finding starts after the two emoji, at column 47.
    assert (before["code"], before["col"], before["end_col"], before["covered"]) == (
        "filename-instead-of-file-id",
        47,
        60,
        "q2-export.csv",
    )
    assert emacs_run["code_actions"][0]["kind"] == "quickfix"
    lines = emacs_run["fixed_text"].split("\n")
    assert FIX_LINE_AFTER in lines and FIX_LINE_BEFORE not in lines


def test_readme_snippet_starts_promptls_serve(emacs_run: dict[str, Any]) -> None:
    # The driver runs README's snippet with only the command swapped for this venv's server.
    assert emacs_run["readme_cmd"] == ["promptls", "serve"]


def test_servers_exit_cleanly(emacs_run: dict[str, Any]) -> None:
    check_part(emacs_run, "exit")
    # One server per project (README's snippet): the repository and the fix document's folder.
    assert emacs_run["server_exit"] == [["exit", 0], ["exit", 0]], emacs_run["report"]
