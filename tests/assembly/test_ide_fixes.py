"""Quick fixes at a range and "fix all" (``assembly.ide.fixes``) on the rule fixtures.

Every fixture of ``tests/data/diagnostics/`` with a fixable finding is fixed all at once:
the result must still parse, and each code must have lost exactly the findings whose fix
was taken. Quick fixes at a finding's range include its own fix, preferred when alone.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path

import pytest

from assembly.diagnostics import Diagnostic
from assembly.ide import fixes
from assembly.text import TextRange
from tests.support.annotate import apply_edits
from tests.support.engine import analyze, analyze_prompt

DATA = Path(__file__).resolve().parent.parent / "data" / "diagnostics"
SUFFIXES = (".conv.yaml", ".conv.json", ".conv.jsonl", ".prompt.md")


def _findings(path: Path, text: str | None = None) -> tuple[str, list[Diagnostic]]:
    if path.name.endswith(".prompt.md"):
        pa = analyze_prompt(path, text=text, root=DATA)
        return pa.text, list(pa.diagnostics)
    a = analyze(path, text=text, root=DATA, today=dt.date(2026, 7, 15))
    return a.text, list(a.diagnostics)


FIXABLE = sorted(
    p
    for p in DATA.glob("*/*")
    if p.name.endswith(SUFFIXES) and any(d.fix and d.path is None for d in _findings(p)[1])
)


def check_fix_all(path: Path) -> None:
    text, before = _findings(path)
    edits = fixes.fix_all(before)
    taken = Counter(
        d.code
        for d in before
        if d.fix is not None and d.path is None and all(e in edits for e in d.fix.edits)
    )
    assert taken, "at least the first fix is always taken"
    fixed = apply_edits(text, ((e.range, e.new_text) for e in edits))
    _, after = _findings(path, fixed)
    assert not [d for d in after if d.code in ("syntax-error", "schema-error")]
    count_before, count_after = Counter(d.code for d in before), Counter(d.code for d in after)
    for code, n in taken.items():
        assert count_after[code] == count_before[code] - n, code


def check_quick_fixes_at_each_finding(path: Path) -> None:
    _, found = _findings(path)
    for d in found:
        if d.fix is None or d.path is not None:
            continue
        offered = fixes.quick_fixes(found, TextRange.empty(d.range.start))
        assert d in [q.diagnostic for q in offered]
        assert all(q.preferred == (len(offered) == 1) for q in offered)
        named = fixes.quick_fixes(found, TextRange.empty(0), [fixes.FindingKey(d.code, d.range)])
        assert d in [q.diagnostic for q in named]


@pytest.mark.parametrize("path", FIXABLE, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fix_all(path: Path) -> None:
    check_fix_all(path)


@pytest.mark.parametrize("path", FIXABLE, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_quick_fixes(path: Path) -> None:
    check_quick_fixes_at_each_finding(path)


def test_fixable_fixtures_exist() -> None:
    assert len(FIXABLE) >= 5
