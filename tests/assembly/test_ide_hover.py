"""Hover as data: every ``tests/data/ide/hover/*`` fixture, each ``$0`` a cursor.

``check_hover`` is the only code that calls the hover API: it analyses the fixture as the
server does (``analyze``/``analyze_prompt`` with today's date pinned), hovers at each
cursor and renders the results (the range under the cursor, then the Markdown) for the
golden ``<fixture>.expected`` (``UPDATE_GOLDEN=1`` rewrites them). The folder's
``promptls.toml`` pins cl100k_base; the tiktoken cache is emptied so that a document asking
for p50k_base (not bundled) always shows the fallback.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from assembly.ide.hover import HoverResult, conversation_hover, plain_text, prompt_hover
from assembly.text import LineIndex, TextRange
from tests.support.engine import analyze, analyze_prompt, loaded
from tests.support.golden import check_golden
from tests.support.markers import markers

DATA = Path(__file__).resolve().parent.parent / "data" / "ide"
TODAY = dt.date(2026, 7, 15)
CASES = sorted(p for p in (DATA / "hover").iterdir() if not p.name.endswith(".expected"))


@pytest.fixture(autouse=True)
def _offline_encodings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # no cache: offline cl100k_base only


@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_hover(path: Path) -> None:
    check_hover(path)


def test_plain_text_keeps_tables_readable() -> None:
    md = (
        "**message `m1`** · user · **kept** in `history`\n\n"
        "| segment | tokens |\n|:--|--:|\n| system | 1,114 |\n| **all** | **5,087** |\n\n"
        '- a \\*literal\\* star and a pipe \\| here\n\n```json\n{"a": 1}\n```'
    )
    assert plain_text(md) == (
        "message m1 · user · kept in history\n\n"
        "segment  tokens\n"
        "system    1,114\n"
        "all       5,087\n\n"
        "- a *literal* star and a pipe | here\n\n"
        '    {"a": 1}'
    )


# ------------------------------------------------------------------------------ helper


def check_hover(path: Path) -> None:
    """Hover at every ``$0`` of the fixture and compare with its golden file."""
    text, offsets = markers(path.read_text(encoding="utf-8"))
    assert offsets, f"{path.name} has no $0 cursor"
    blocks = []
    for n, offset in enumerate(offsets, start=1):
        res = _hover(path, text, offset)
        head = f"── $0 #{n} at {_position(text, offset)}"
        if res is None:
            blocks.append(f"{head}: no hover")
            continue
        blocks.append(f"{head}: {_place(text, res.range)}\n{res.markdown}")
    check_golden("\n\n".join(blocks) + "\n", path.with_name(path.name + ".expected"))


def _hover(path: Path, text: str, offset: int) -> HoverResult | None:
    if path.name.endswith(".prompt.md"):
        p = analyze_prompt(path, text=text, root=DATA)
        tokenizer = loaded(p.settings.encoding, model=p.settings.model).tokenizer
        return prompt_hover(p, offset, tokenizer=tokenizer, today=TODAY)
    a = analyze(path, text=text, root=DATA, today=TODAY)
    return conversation_hover(a, offset, today=TODAY)


def _position(text: str, offset: int) -> str:
    lc = LineIndex(text).line_col(offset)
    return f"{lc.line + 1}:{lc.column + 1}"


def _place(text: str, rng: TextRange) -> str:
    """``start-end `first line of the range```."""
    shown = text[rng.start : rng.end].split("\n", 1)[0]
    if len(shown) < rng.end - rng.start:
        shown += "⏎…"
    if len(shown) > 70:
        shown = shown[:69] + "…"
    return f"{_position(text, rng.start)}-{_position(text, rng.end)} `{shown}`"


@pytest.mark.parametrize("path", [p for p in CASES if ".conv." in p.name], ids=lambda p: p.name)
def test_a_series_of_placements_equals_each_alone(path: Path) -> None:
    """``Placements`` looks ids up by scanning on its first message and by tables from the
    second on (``placement.Placements._has``): every message of every hover fixture is
    placed alike both ways, and the fixtures place messages of every status."""
    from assembly.ide.placement import Placements

    text, _ = markers(path.read_text(encoding="utf-8"))
    a = analyze(path, text=text, root=DATA, today=TODAY)
    messages = a.conversation.messages
    series = Placements(a.conversation, a.assembly)
    alone = [Placements(a.conversation, a.assembly).of(m) for m in messages]
    assert [series.of(m) for m in messages] == alone
    if any(p.status != "kept" for p in alone[1:]):
        assert series._tables  # a look-up after the first made the tables


def test_the_hover_fixtures_place_messages_of_every_status() -> None:
    from assembly.ide.placement import Placements

    seen: set[str] = set()
    for path in (p for p in CASES if ".conv." in p.name):
        text, _ = markers(path.read_text(encoding="utf-8"))
        a = analyze(path, text=text, root=DATA, today=TODAY)
        pl = Placements(a.conversation, a.assembly)
        seen.update(pl.of(m).status for m in a.conversation.messages)
    assert {"kept", "dropped", "orphan", "summarized", "other_branch"} <= seen
