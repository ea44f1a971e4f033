"""Which fixes to offer: the quick fixes at a range, and one "fix all" for the document.

A finding's ``fix`` edits the document the finding is in; findings in other files (a
referenced template) are left out here. Offsets are code points into the document text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from assembly.diagnostics import Diagnostic, Fix, TextEdit
from assembly.text import TextRange


@dataclass(frozen=True, slots=True)
class FindingKey:
    """How an editor names a finding it shows: its code and range."""

    code: str
    range: TextRange


@dataclass(frozen=True, slots=True)
class QuickFix:
    diagnostic: Diagnostic
    fix: Fix
    preferred: bool  # the only fix offered here: safe to apply without choosing


def quick_fixes(
    diagnostics: Iterable[Diagnostic], rng: TextRange, named: Sequence[FindingKey] = ()
) -> list[QuickFix]:
    """The fixes of the findings that overlap ``rng`` or that the editor names, in order."""
    wanted = set(named)
    found = [
        d
        for d in diagnostics
        if d.fix is not None
        and d.path is None
        and (_overlaps(d.range, rng) or FindingKey(d.code, d.range) in wanted)
    ]
    found.sort(key=lambda d: (d.range.start, d.range.end, d.code))
    return [QuickFix(d, d.fix, len(found) == 1) for d in found if d.fix is not None]


def fix_all(diagnostics: Iterable[Diagnostic]) -> list[TextEdit]:
    """The edits of every fix of the document that does not overlap an earlier one.

    A fix is taken whole or not at all; the edits come back in document order.
    """
    fixes = sorted(
        (d for d in diagnostics if d.fix is not None and d.path is None),
        key=lambda d: (d.range.start, d.range.end, d.code),
    )
    taken: list[TextEdit] = []
    for d in fixes:
        assert d.fix is not None
        edits = d.fix.edits
        if any(_overlaps_strictly(e.range, t.range) for e in edits for t in taken):
            continue
        if any(
            _overlaps_strictly(a.range, b.range)
            for i, a in enumerate(edits)
            for b in edits[i + 1 :]
        ):
            continue
        taken.extend(edits)
    return sorted(taken, key=lambda e: (e.range.start, e.range.end))


def _overlaps(a: TextRange, b: TextRange) -> bool:
    """Ranges meet (touching counts: a cursor at the end of a finding is on it)."""
    return a.start <= b.end and b.start <= a.end


def _overlaps_strictly(a: TextRange, b: TextRange) -> bool:
    """Edits collide: they share a character, or both insert at the same place."""
    if a.start == a.end == b.start == b.end:
        return True
    return a.start < b.end and b.start < a.end
