"""Document symbols (``assembly.ide.symbols``): the outline of conversations and templates.

Each fixture under ``tests/data/ide/symbols/`` is rendered as an indented tree (kind, name,
detail, and the line and text of the part an editor selects) and compared with its
``.expected``. The example conversation gives the same outline in its three formats.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from assembly.ide import symbols
from assembly.ide.symbols import Symbol
from tests.support.engine import analyze, analyze_prompt
from tests.support.golden import check_golden
from tests.support.places import position

TESTS = Path(__file__).resolve().parent.parent
DATA = TESTS / "data" / "ide" / "symbols"
EXAMPLES = TESTS.parent / "examples"
FIXTURES = sorted(p for p in DATA.iterdir() if p.suffix != ".expected")


def outline(path: Path, text: str | None = None) -> tuple[str, list[Symbol]]:
    if path.name.endswith(".prompt.md"):
        pa = analyze_prompt(path, text=text, root=path.parent)
        return pa.text, symbols.template_symbols(pa.template)
    a = analyze(path, text=text, root=path.parent, today=dt.date(2026, 7, 15))
    return a.text, symbols.conversation_symbols(a.conversation)


def render(text: str, syms: list[Symbol], *, depth: int = 0, places: bool = True) -> list[str]:
    out = []
    for s in syms:
        assert s.name, "editors reject an empty symbol name"
        assert s.range.start <= s.focus_range.start <= s.focus_range.end <= s.range.end
        detail = f"  ({s.detail})" if s.detail else ""
        focus = text[s.focus_range.start : s.focus_range.end].split("\n", 1)[0][:40]
        where = f"  @{position(text, s.focus_range.start)} {focus!r}" if places else ""
        out.append(f"{'  ' * depth}{s.kind.value}: {s.name}{detail}{where}")
        out.extend(render(text, list(s.children), depth=depth + 1, places=places))
    return out


def check_symbols(path: Path) -> None:
    text, syms = outline(path)
    check_golden("\n".join(render(text, syms)) + "\n", path.with_name(path.name + ".expected"))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_symbols(path: Path) -> None:
    check_symbols(path)


def test_example_outline_is_the_same_in_every_format() -> None:
    trees = {}
    for suffix in ("json", "jsonl", "yaml"):
        text, syms = outline(EXAMPLES / f"support-agent.conv.{suffix}")
        trees[suffix] = render(text, syms, places=False)
    assert trees["json"] == trees["jsonl"] == trees["yaml"]
    assert "assistant message: m11 · assistant → read_file" in trees["json"]
    assert "  tool call: read_file  (call_7Qd2Lx04)" in trees["json"]
