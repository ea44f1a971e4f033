"""The fixtures of the findings the IO layer makes (tests/data/diagnostics/<code>/): a
referenced file that is missing or lies outside the workspace. Checked through
``server.workspace`` as the command line and the language server read them, against the
same ``.expected`` files as every other rule's fixtures (tests/assembly/test_rules.py)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from server.workspace import analyze
from tests.support.annotate import annotate
from tests.support.golden import check_golden

DATA = Path(__file__).resolve().parent.parent / "data" / "diagnostics"
TODAY = dt.date(2026, 7, 15)
IO_CODES = ("file-not-found", "path-outside-workspace")
FIXTURES = sorted(p for code in IO_CODES for p in (DATA / code).glob("*.conv.*"))
FIXTURES = [p for p in FIXTURES if not p.name.endswith(".expected")]


def test_there_are_fixtures() -> None:
    assert {p.parent.name for p in FIXTURES} == set(IO_CODES)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_findings(path: Path) -> None:
    a = analyze(path, root=DATA, today=TODAY)
    actual = annotate(list(a.diagnostics), str(a.text), path.name, a.other_texts)
    check_golden(actual, path.with_name(path.name + ".expected"))
