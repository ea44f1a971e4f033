"""Real VS Code: the built promptls .vsix in code-server 4.100.3, driven by headless Chromium.

code-server (client-vscode/e2e/install-code-server.sh, testing-clients.md §5b) is the VS Code
1.100 workbench and extension host; the .vsix (client-vscode/scripts/ci.sh) is installed into a
private extensions dir and starts ``python -m server`` through ``promptls.server.interpreter``.
client-vscode/e2e/drive.mjs (playwright-core + /usr/bin/chromium) opens the overflow example and
checks the Problems panel, the status bar total, the hover's segment table, the assembled view
(the webview: its bar, table and theme colours; a click and the keyboard going to a message; the
view following an edit), the Markdown export and a quick fix. Everything runs on 127.0.0.1
with the gallery pointed at loopback.

Skipped without code-server, chromium or the .vsix, except with CI=true, where that is a failure.
``UPDATE_SCREENSHOTS=1`` copies the screenshots to client-vscode/e2e/screenshots/.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.editors import OVERFLOW, REPO

CLIENT = REPO / "client-vscode"
E2E = CLIENT / "e2e"
CODE_SERVER = E2E / ".cs" / "node_modules" / ".bin" / "code-server"
PLAYWRIGHT = E2E / ".cs" / "node_modules" / "playwright-core"
CHROMIUM = Path("/usr/bin/chromium")
DRIVER = E2E / "drive.mjs"
FIX_DOC = (
    REPO / "tests" / "data" / "diagnostics" / "filename-instead-of-file-id"
) / "string-arguments.conv.json"
FILE_ID = "5f0c2a9e-7d41-4b8e-9a3c-2e6f1d8b4c70"
SCREENSHOTS = E2E / "screenshots"
SHOT_NAMES = ("problems", "status-bar", "status-bar-closeup", "hover", "assembled-view")
SHOT_NAMES += ("assembled-view-live",)
SHOT_NAMES += ("quickfix", "after-fix")
# Keep the marketplace on loopback: nothing may leave the machine.
GALLERY = json.dumps(
    {
        "serviceUrl": "http://127.0.0.1:9/api",
        "itemUrl": "http://127.0.0.1:9/item",
        "resourceUrlTemplate": "http://127.0.0.1:9/files/{publisher}/{name}/{version}/{path}",
    }
)
DRIVER_TIMEOUT_S = 180


def _vsix() -> Path | None:
    if os.environ.get("PROMPTLS_VSIX"):
        return Path(os.environ["PROMPTLS_VSIX"])
    found = sorted(CLIENT.glob("promptls-*.vsix"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def _require() -> Path:
    """The .vsix; a missing piece skips the test, or fails it when CI=true."""
    vsix = _vsix()
    missing = []
    if shutil.which("node") is None:
        missing.append("`node`")
    if not CHROMIUM.exists():
        missing.append(f"{CHROMIUM} (apt-get install chromium)")
    if not CODE_SERVER.exists() or not PLAYWRIGHT.exists():
        missing.append("code-server/playwright-core (run client-vscode/e2e/install-code-server.sh)")
    if vsix is None or not vsix.exists():
        missing.append("client-vscode/promptls-*.vsix (run client-vscode/scripts/ci.sh)")
    if missing:
        msg = "missing " + ", ".join(missing)
        if os.environ.get("CI") == "true":
            pytest.fail(f"{msg} (CI=true: the real VS Code test must run)")
        pytest.skip(msg)
    assert vsix is not None
    return vsix


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    for sig, wait_s in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait_s)
            if sig == signal.SIGTERM:  # the leader is gone; make sure its children are too
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            return


def _tail(path: Path, n: int = 4000) -> str:
    return path.read_text(encoding="utf-8", errors="replace")[-n:] if path.exists() else "(none)"


@pytest.fixture(scope="module")
def vscode_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    vsix = _require()
    tmp = tmp_path_factory.mktemp("vscode")
    # The workspace folder is called "examples": its name shows in the screenshots.
    ws, ud, ext, shots = tmp / "examples", tmp / "ud", tmp / "ext", tmp / "shots"
    for d in (ws, ud / "User", ext):
        d.mkdir(parents=True)
    shutil.copy(OVERFLOW, ws / OVERFLOW.name)
    shutil.copy(FIX_DOC, ws / FIX_DOC.name)
    settings = {
        "promptls.server.interpreter": sys.executable,
        "workbench.startupEditor": "none",
        "security.workspace.trust.enabled": False,
        "telemetry.telemetryLevel": "off",
        "update.mode": "none",
        "extensions.autoCheckUpdates": False,
        "extensions.autoUpdate": False,
        "git.enabled": False,
        "workbench.tips.enabled": False,
    }
    (ud / "User" / "settings.json").write_text(json.dumps(settings, indent=1), encoding="utf-8")
    # A short private TMPDIR (unix socket paths are capped at 108 bytes) for code-server's sockets.
    sock_tmp = Path(tempfile.mkdtemp(prefix="pls-cs-"))
    home = tmp / "home"
    env = dict(
        os.environ,
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
        XDG_CACHE_HOME=str(home / "cache"),
        XDG_STATE_HOME=str(home / "state"),
        EXTENSIONS_GALLERY=GALLERY,
        TMPDIR=str(sock_tmp),
    )
    dirs = ["--user-data-dir", str(ud), "--extensions-dir", str(ext)]
    started = time.monotonic()
    install = subprocess.run(
        [str(CODE_SERVER), *dirs, "--install-extension", str(vsix)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )
    assert install.returncode == 0, (
        f"--install-extension failed:\n{install.stdout}\n{install.stderr}"
    )
    install_s = time.monotonic() - started

    port = _free_port()
    cs_log = tmp / "code-server.log"
    with cs_log.open("w") as log:
        server = subprocess.Popen(
            [
                str(CODE_SERVER),
                *dirs,
                "--bind-addr",
                f"127.0.0.1:{port}",
                "--auth",
                "none",
                "--disable-telemetry",
                "--disable-update-check",
                "--disable-workspace-trust",
                "--disable-getting-started-override",
                "--ignore-last-opened",
                str(ws),
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    driver: subprocess.Popen[str] | None = None
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"code-server did not start\n{_tail(cs_log)}")
                time.sleep(0.3)
        listening_s = time.monotonic() - started

        driver = subprocess.Popen(
            ["node", str(DRIVER)],
            env=dict(
                env,
                CS_URL=f"http://127.0.0.1:{port}/?folder={ws}",
                SHOTS=str(shots),
                PROFILE=str(tmp / "chromium-profile"),
            ),
            cwd=E2E,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = driver.communicate(timeout=DRIVER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _kill_group(driver)
            stdout, stderr = driver.communicate()
        result: dict[str, Any] = {}
        with contextlib.suppress(ValueError):
            result = json.loads(stdout[stdout.find("{") :])
        (tmp / "result.json").write_text(stdout, encoding="utf-8")
    finally:
        if driver is not None:
            _kill_group(driver)
        _kill_group(server)
        shutil.rmtree(sock_tmp, ignore_errors=True)

    logs = {
        p.relative_to(ud).as_posix(): _tail(p)
        for p in sorted((ud / "logs").rglob("*.log"))
        if "promptls" in p.name.lower() or p.name in ("exthost.log", "remoteexthost.log")
    }
    report = "\n\n".join(
        [
            f"driver exit {driver.returncode}; error: {result.get('error')}",
            f"steps: {result.get('steps')}",
            f"driver stderr:\n{stderr[-4000:]}",
            f"code-server log:\n{_tail(cs_log)}",
            *(f"{name}:\n{text}" for name, text in logs.items()),
            f"screenshots: {shots}",
        ]
    )
    if driver.returncode != 0 or not result.get("ok"):
        pytest.fail(f"VS Code run failed\n{report}")
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(exist_ok=True)
        for name in SHOT_NAMES:
            shutil.copy(shots / f"{name}.png", SCREENSHOTS / f"{name}.png")
    result.update(report=report, install_s=install_s, listening_s=listening_s)
    print(
        f"\nVS Code e2e: install {install_s:.1f} s, listening {listening_s:.1f} s, "
        f"driver {result['timings']}"
    )
    yield result


def test_problems_panel_shows_the_overflow_findings(vscode_run: dict[str, Any]) -> None:
    text = vscode_run["problems_text"]
    for code in ("history-truncated", "compression-due", "orphaned-tool-response"):
        assert code in text, text
    assert "10 older messages (1,605 tokens) will not be sent" in text, text
    assert "tool response to `call_Lg03` is not sent" in text or "call_Lg03" in text, text


def test_status_bar_shows_the_token_total(vscode_run: dict[str, Any]) -> None:
    # 2,785 used + 433 tools of 3,891 available (examples/overflow.conv.yaml pins cl100k_base).
    assert "3.2k / 3.9k tokens" in vscode_run["status_text"], vscode_run["status_text"]


def test_hover_shows_the_segment_table(vscode_run: dict[str, Any]) -> None:
    text = vscode_run["hover_text"]
    for word in ("segment", "system", "history", "forgotten_files", "tokens"):
        assert word in text, text


def test_assembled_view_draws_the_window_and_the_messages(vscode_run: dict[str, Any]) -> None:
    text = vscode_run["webview_text"]
    assert "3,218 / 3,891 tokens" in text, text
    for segment in ("system", "history", "forgotten_files", "last_user", "this_turn"):
        assert segment in text, text
    # The bar: the non-empty segments in the model's order, then tools, free room, margin.
    parts = vscode_run["webview_parts"]
    assert parts[:2] == ["system", "history"], parts
    assert parts[-3:] == ["tools", "free", "margin"], parts
    assert "compression threshold: history 2,718" in vscode_run["webview_marker"]
    # m1 … m10 and the file uploaded with m1, cut by the budget, and the orphan m11.
    assert vscode_run["webview_dropped_rows"] == 12
    assert "over the history budget" in text and "its tool call is not sent" in text, text


def test_assembled_view_uses_the_theme_colours(vscode_run: dict[str, Any]) -> None:
    blue = vscode_run["webview_theme_blue"]
    assert blue.startswith("#"), blue
    r, g, b = (int(blue[i : i + 2], 16) for i in (1, 3, 5))
    assert vscode_run["webview_history_colour"] == f"rgb({r}, {g}, {b})"


def test_assembled_view_click_and_keyboard_go_to_the_message(vscode_run: dict[str, Any]) -> None:
    # Lines of m19 and m13 in examples/overflow.conv.yaml.
    assert vscode_run["m19_line"] == 413 and vscode_run["m13_line"] == 334
    assert "Ln 413" in vscode_run["click_cursor"], vscode_run["click_cursor"]
    assert vscode_run["focused_after_arrow"] == "m13"
    assert "Ln 334" in vscode_run["keyboard_cursor"], vscode_run["keyboard_cursor"]


def test_assembled_view_follows_typing(vscode_run: dict[str, Any]) -> None:
    assert "m19x" in vscode_run["live_text"], vscode_run["live_text"]


def test_markdown_export_lists_the_segments(vscode_run: dict[str, Any]) -> None:
    assert any("(assembled)" in tab for tab in vscode_run["tabs"]), vscode_run["tabs"]
    text = vscode_run["assembled_text"]
    for segment in ("system", "history", "forgotten_files", "last_user", "this_turn"):
        assert segment in text, text
        # Its row in the Markdown's segment table (the webview's table has no pipes).
        assert re.search(rf"\|\s*\d+\s*\|\s*{segment}\s*\|", text), (segment, text)


def test_quick_fix_applies(vscode_run: dict[str, Any]) -> None:
    assert "filename-instead-of-file-id" in vscode_run["fix_problem_text"]
    assert f"Pass the file_id `{FILE_ID}`" in vscode_run["quickfix_menu"] or (
        "Pass the file_id" in vscode_run["quickfix_menu"]
    ), vscode_run["quickfix_menu"]
    assert FILE_ID in vscode_run["after_fix_text"], vscode_run["after_fix_text"]
