"""``promptls lint --watch . > lint.log``: the watcher's own output, written into the folder
it watches, is a change it saw, so it re-linted and printed again, which was a change, and
so on forever (dozens of identical reports a second). A change nothing linted reads is
now ignored; a change to a document is still re-linted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _summaries(log: Path) -> list[str]:
    text = log.read_text(encoding="utf-8") if log.exists() else ""
    return [ln for ln in text.splitlines() if ln.startswith(("Found ", "All checks passed"))]


def _wait(pred: object, seconds: float = 60.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pred():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def test_watch_output_written_into_the_watched_folder_does_not_loop(tmp_path: Path) -> None:
    doc = tmp_path / "a.conv.json"
    doc.write_text('[{"role": "user", "content": "hi"}]', encoding="utf-8")
    log = tmp_path / "lint.log"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # Started as a terminal would (SIGINT's default action), as test_lint's watch test.
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with log.open("w", encoding="utf-8") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "server.cli", "lint", "--watch", "."],
                cwd=tmp_path,
                stdout=out,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
    finally:
        signal.signal(signal.SIGINT, saved)
    try:
        assert proc.stderr is not None
        assert "watching" in proc.stderr.readline()
        assert _wait(lambda: len(_summaries(log)) == 1)
        (tmp_path / "notes.txt").write_text("not a document", encoding="utf-8")
        time.sleep(3)  # the watcher's debounce is 0.4 s: a loop would have printed by now
        assert _summaries(log) == ["All checks passed (1 file)"]
        doc.write_text('[{"role": "robot", "content": "hi"}]', encoding="utf-8")
        assert _wait(lambda: len(_summaries(log)) == 2)
        time.sleep(2)
        assert len(_summaries(log)) == 2 and _summaries(log)[1].startswith("Found 1 problem")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
