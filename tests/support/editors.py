"""Running real editors (headless Neovim, Emacs eglot) against the server, for tests/e2e.

An editor is started in its own process group with a private HOME and XDG folders, under a
hard time limit; on a timeout the whole group (editor and server) is killed. The server's
stderr goes to a file, and everything that could explain a failure (the driver's error, the
editor's output, the server's stderr) goes into the failure message.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
EDITORS = Path(__file__).resolve().parents[1] / "e2e" / "editors"
OVERFLOW = REPO / "examples" / "overflow.conv.yaml"
FIX_FIXTURE = (
    REPO
    / "tests"
    / "data"
    / "diagnostics"
    / "filename-instead-of-file-id"
    / "mapping-arguments.conv.yaml"
)
FILE_ID = "5f0c2a9e-7d41-4b8e-9a3c-2e6f1d8b4c70"
# The fixture's read_file arguments as one flow mapping with emoji before the finding, so a
# client or server that mixes up bytes, UTF-16 units and code points puts the fix elsewhere.
FIX_LINE_BEFORE = '          arguments: {note: "😀 Q2 📊", file_id: q2-export.csv, num_lines: 40}'
FIX_LINE_AFTER = f'          arguments: {{note: "😀 Q2 📊", file_id: "{FILE_ID}", num_lines: 40}}'
FIX_LINE = 15  # 0-based


def require_editor(binary: str, package: str, *, probe: Sequence[str] = ()) -> str:
    """The editor's path; a missing editor skips the test, or fails it when CI=true.

    ``probe`` (arguments after the binary) must exit 0 for the editor to count as there,
    e.g. Emacs without eglot is not.
    """
    path = shutil.which(binary)
    if path is not None and (not probe or _succeeds([path, *probe])):
        return path
    what = f"`{binary} {' '.join(probe)}` failed" if path else f"`{binary}` not found"
    msg = f"{what}: apt-get install -y --no-install-recommends {package}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{msg} (CI=true: real-editor tests must run)")
    pytest.skip(msg)


def check_part(run: dict[str, Any], part: str) -> None:
    """Fail with the whole run's report when the editor driver recorded an error for ``part``."""
    if part in run["errors"]:
        pytest.fail(f"{part}: {run['errors'][part]}\n\n{run['report']}")


EDITORS_DOC = REPO / "docs" / "editors.md"


def write_readme_snippet(heading: str, lang: str, path: Path) -> Path:
    """Write the first ``lang`` code block under docs/editors.md's ``## heading`` (or
    ``### heading``) to ``path``: the set-up users copy is the one the editor tests run."""
    doc = EDITORS_DOC.read_text(encoding="utf-8")
    section = re.split(rf"\n#{{2,3}} {re.escape(heading)}\n", doc, maxsplit=1)
    assert len(section) == 2, f"docs/editors.md has no section '{heading}'"
    block = section[1].split(f"```{lang}\n", 1)
    assert len(block) == 2, f"docs/editors.md's '{heading}' has no {lang} block"
    path.write_text(block[1].split("```", 1)[0], encoding="utf-8")
    return path


def write_fix_document(folder: Path) -> Path:
    """A copy of the filename-instead-of-file-id fixture with one fixable finding."""
    text = FIX_FIXTURE.read_text(encoding="utf-8")
    block = "          arguments:\n            file_id: q2-export.csv\n            num_lines: 40\n"
    assert block in text
    path = folder / "upload.conv.yaml"
    path.write_text(text.replace(block, FIX_LINE_BEFORE + "\n"), encoding="utf-8")
    assert path.read_text(encoding="utf-8").split("\n")[FIX_LINE] == FIX_LINE_BEFORE
    return path


def server_command(stderr_file: Path) -> list[str]:
    """``python -m server`` (this venv's python), its stderr appended to ``stderr_file``."""
    return ["/bin/sh", "-c", 'exec "$0" -m server 2>>"$1"', sys.executable, str(stderr_file)]


def hermetic_env(tmp: Path, **extra: str) -> dict[str, str]:
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env = dict(os.environ, HOME=str(home), **extra)
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        env[var] = str(home / var.lower())
    return env


@dataclass
class EditorRun:
    """What one editor run left behind."""

    returncode: int | None  # None: killed on timeout
    stdout: str
    stderr: str
    elapsed_s: float
    result: dict[str, Any]  # the driver's JSON ({} if it wrote none)
    server_stderr: str
    logs: dict[str, str]  # further logs worth showing (name -> text)

    def report(self) -> str:
        parts = [
            f"editor exit: {self.returncode} after {self.elapsed_s:.1f} s",
            f"driver error: {self.result.get('error')}",
            f"driver steps: {self.result.get('steps')}",
            f"editor stdout:\n{self.stdout[-4000:]}",
            f"editor stderr:\n{self.stderr[-4000:]}",
            f"server stderr:\n{self.server_stderr[-8000:]}",
        ]
        parts += [f"{name}:\n{text[-4000:]}" for name, text in self.logs.items()]
        return "\n\n".join(parts)


def run_editor(
    argv: list[str],
    *,
    env: dict[str, str],
    out: Path,
    server_stderr: Path,
    logs: dict[str, Path] | None = None,
    timeout_s: float = 90,
) -> EditorRun:
    """Run an editor driver to completion (or kill its process group at ``timeout_s``)."""
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
        returncode: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        returncode = None
    finally:
        # Whatever the editor left running (a server that did not exit) goes too.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    elapsed = time.monotonic() - start
    result: dict[str, Any] = {}
    if out.exists() and out.stat().st_size:
        result = json.loads(out.read_text(encoding="utf-8"))
    return EditorRun(
        returncode=returncode,
        stdout=stdout,
        stderr=stderr,
        elapsed_s=elapsed,
        result=result,
        server_stderr=_read(server_stderr),
        logs={name: _read(p) for name, p in (logs or {}).items()},
    )


def _succeeds(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else "(none)"
