"""GitHub Actions: the job summary (``$GITHUB_STEP_SUMMARY``) that ``lint`` and ``diff``
append to."""

from __future__ import annotations

import os
import sys


def append_step_summary(text: str) -> bool:
    """Append ``text`` to the job summary; False when not in GitHub Actions (no
    ``$GITHUB_STEP_SUMMARY``). A summary file that cannot be written is a warning on
    stderr, never a failure of the command."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    try:
        with open(path, "a", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(text)
    except OSError as exc:
        print(
            f"promptls: warning: cannot write the job summary {path}: {exc.strerror}",
            file=sys.stderr,
        )
    return True
