"""Golden files: compare rendered text with ``<case>.expected`` beside the fixture.

``UPDATE_GOLDEN=1 pytest`` rewrites every compared file (as ``UPDATE_EXPECT=1`` does in
rust-analyzer); a missing ``.expected`` is written and the test fails, so a new case is
always looked at once before it passes.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest


def check_golden(actual: str, path: Path) -> None:
    """Assert that ``path`` holds ``actual``; rewrite it under ``UPDATE_GOLDEN=1``."""
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(actual, encoding="utf-8")
        return
    if not path.exists():
        path.write_text(actual, encoding="utf-8")
        pytest.fail(f"{path.name} did not exist and was written: review it, then rerun")
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            fromfile=f"{path.name} (expected)",
            tofile="actual",
        )
        pytest.fail(
            f"{path.name} differs (UPDATE_GOLDEN=1 rewrites it):\n{''.join(diff)}", pytrace=False
        )
