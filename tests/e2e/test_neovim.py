"""Headless Neovim (0.7+, the built-in LSP client) drives ``python -m server``.

The driver (editors/neovim_driver.lua) runs README's "Neovim 0.7+" snippet with this venv's
server command, opens examples/overflow.conv.yaml, waits for its diagnostics, hovers the
document head (the raw answer, and the float ``vim.lsp.buf.hover()`` opens) and applies a
quick fix in a copy of a fixture. Skipped without ``nvim``, except with CI=true, where that
is a failure.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.editors import (
    EDITORS,
    FIX_LINE,
    FIX_LINE_AFTER,
    OVERFLOW,
    check_part,
    hermetic_env,
    require_editor,
    run_editor,
    server_command,
    write_fix_document,
    write_readme_snippet,
)

DRIVER = EDITORS / "neovim_driver.lua"
# (code, vim severity, lnum, col, end_lnum, end_col): 0-based lines, byte columns.
OVERFLOW_DIAGNOSTICS = [
    ("compression-due", 3, 121, 4, 410, 34),
    ("history-truncated", 3, 121, 4, 314, 95),
    ("orphaned-tool-response", 2, 316, 4, 320, 324),
]


@pytest.fixture(scope="module")
def nvim_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    nvim = require_editor("nvim", "neovim")
    tmp = tmp_path_factory.mktemp("nvim")
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
        PROMPTLS_INIT=str(write_readme_snippet("Neovim 0.7+", "lua", tmp / "init.lua")),
    )
    run = run_editor(
        [nvim, "--headless", "--clean", "-n", "-c", f"luafile {DRIVER}", "-c", "cquit 3"],
        env=env,
        out=out,
        server_stderr=server_stderr,
        logs={"nvim lsp.log": Path(env["XDG_CACHE_HOME"]) / "nvim" / "lsp.log"},
    )
    if run.returncode != 0 or not run.result:
        pytest.fail(f"headless Neovim run failed\n{run.report()}")
    return {**run.result, "report": run.report(), "elapsed_s": run.elapsed_s}


def test_diagnostics_at_the_right_places(nvim_run: dict[str, Any]) -> None:
    check_part(nvim_run, "diagnostics")
    got = [
        (d["code"], d["severity"], d["lnum"], d["col"], d["end_lnum"], d["end_col"])
        for d in nvim_run["diagnostics"]
    ]
    assert got == OVERFLOW_DIAGNOSTICS, nvim_run["report"]
    assert nvim_run["offset_encoding"] == "utf-16"  # 0.7 offers no positionEncodings


def test_hover_shows_the_segment_table(nvim_run: dict[str, Any]) -> None:
    check_part(nvim_run, "hover")
    assert nvim_run["hover"]["contents"]["kind"] == "markdown"
    shown = "\n".join(nvim_run["hover_window"])  # what vim.lsp.buf.hover() shows, in a float
    assert "| segment |" in shown and "tokens" in shown, shown
    for segment in ("| system |", "| history |", "| forgotten_files |", "| reminder |"):
        assert segment in shown, shown
    assert "max_input_tokens 4,096" in shown, shown  # the budget line


def test_quick_fix_applied(nvim_run: dict[str, Any]) -> None:
    check_part(nvim_run, "quick_fix")
    [before] = nvim_run["fix_diagnostics"]
    # Byte columns: "😀" and "📊" are 4 bytes each, so the finding starts at byte 53.
    assert (before["code"], before["lnum"], before["col"], before["end_col"]) == (
        "filename-instead-of-file-id",
        FIX_LINE,
        53,
        66,
    )
    assert nvim_run["code_actions"][0]["kind"] == "quickfix"
    assert nvim_run["fixed_lines"][FIX_LINE] == FIX_LINE_AFTER


def test_readme_snippet_starts_promptls_serve(nvim_run: dict[str, Any]) -> None:
    # The driver runs README's snippet with only the command swapped for this venv's server.
    assert nvim_run["readme_cmd"] == ["promptls", "serve"]


def test_servers_exit_cleanly(nvim_run: dict[str, Any]) -> None:
    check_part(nvim_run, "exit")
    # One server per root (README's snippet): the repository and the fix document's folder.
    assert nvim_run["server_exit"] == [[0, 0], [0, 0]], nvim_run["report"]
