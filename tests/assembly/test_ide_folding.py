"""Folding ranges (``assembly.ide.folding``) of conversations and templates.

Each fixture under ``tests/data/ide/folding/`` is rendered as its lines with a gutter:
``┌`` where a fold starts, ``│`` inside it, ``└`` on its last folded line (nested folds
show as one column per level), and compared with the fixture's ``.expected``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from assembly.ide import folding
from assembly.text import LineIndex
from tests.support.engine import analyze, analyze_prompt
from tests.support.golden import check_golden

DATA = Path(__file__).resolve().parent.parent / "data" / "ide" / "folding"
FIXTURES = sorted(p for p in DATA.iterdir() if p.suffix != ".expected")


def check_folding(path: Path) -> None:
    text = path.read_bytes().decode("utf-8")  # keep CRLF as written
    if path.name.endswith(".prompt.md"):
        template = analyze_prompt(path, text=text, root=DATA).template
        folds = folding.template_folds(template)
    else:
        conv = analyze(path, text=text, root=DATA, today=dt.date(2026, 7, 15)).conversation
        folds = folding.conversation_folds(conv, text)
    index = LineIndex(text)
    spans = [
        (index.line_col(f.range.start).line, index.line_col(f.range.end).line, f.kind)
        for f in folds
    ]
    starts = [s for s, _, _ in spans]
    assert starts == sorted(set(starts)), "one fold per start line, in order"
    # One gutter column per nesting level.
    depth = [sum(1 for s, e, _ in spans if s < start <= e) for start, _, _ in spans]
    width = max(depth, default=-1) + 1
    lines = text.split("\n")
    out = []
    for n, line in enumerate(lines):
        gutter = [" "] * width
        for (start, end, _), level in zip(spans, depth, strict=True):
            if start <= n <= end:
                gutter[level] = "┌" if n == start else "└" if n == end else "│"
        kinds = [k.value for s, _, k in spans if s == n and k is not None]
        note = f"  [{', '.join(kinds)}]" if kinds else ""
        out.append(f"{n + 1:>3} {''.join(gutter)} | {line.rstrip(chr(13))}{note}".rstrip())
    check_golden("\n".join(out) + "\n", path.with_name(path.name + ".expected"))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_folding(path: Path) -> None:
    check_folding(path)
