"""Go to definition and find references (``assembly.ide.navigation``) on cursor fixtures.

Each fixture under ``tests/data/ide/navigation/`` is a conversation with one ``$0``; the
id under it, its definitions and its references are rendered and compared with the
fixture's ``.expected`` (``UPDATE_GOLDEN=1`` rewrites).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from assembly.ide import navigation
from tests.support.engine import analyze
from tests.support.golden import check_golden
from tests.support.markers import cursor
from tests.support.places import place, position

DATA = Path(__file__).resolve().parent.parent / "data" / "ide" / "navigation"
FIXTURES = sorted(p for p in DATA.iterdir() if p.suffix != ".expected")


def check_navigation(path: Path) -> None:
    text, offset = cursor(path.read_text(encoding="utf-8"))
    conv = analyze(path, text=text, root=DATA, today=dt.date(2026, 7, 15)).conversation
    at = navigation.id_at(conv, text, offset)
    out = [f"cursor at {position(text, offset)}"]
    if at is None:
        out.append("no id here")
    else:
        out.append(f"{at.kind.value} `{at.id}`:")
        out.append(place(text, at.range))
    out.append("definition:")
    for t in navigation.definition(conv, text, offset) or ():
        assert t.range.start <= t.focus_range.start <= t.focus_range.end <= t.range.end
        out.append(place(text, t.focus_range))
    refs = navigation.references(conv, text, offset, include_declaration=True) or []
    out.append("references:")
    out.extend(place(text, r) for r in refs)
    others = navigation.references(conv, text, offset, include_declaration=False) or []
    out.append(f"references without the declaration: {len(others)}")
    check_golden("\n".join(out) + "\n", path.with_name(path.name + ".expected"))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_navigation(path: Path) -> None:
    check_navigation(path)
