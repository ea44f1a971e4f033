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
from assembly.text import LineIndex, TextRange
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
    assert [f.lines for f in folds] == [(a, b) for a, b, _ in spans], "the lines it says"
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


def test_folding_a_conversation_leaves_no_views_of_its_messages(tmp_path: Path) -> None:
    # ``NodeAt`` views keep the children they make: a walk through them over every message
    # would leave a copy of the whole tree's shape on the conversation (10 MB at 10 MB).
    import json

    from assembly.syntax import NodeAt

    doc = {
        "messages": [
            {"id": f"m{i}", "role": "user", "content": f"line one\nline {i}"} for i in range(4)
        ]
    }
    text = json.dumps(doc, indent=2)
    path = tmp_path / "chat.conv.json"
    conv = analyze(path, text=text, root=tmp_path, today=dt.date(2026, 7, 15)).conversation
    root = conv.root
    assert isinstance(root, NodeAt)
    before = (root._members, root._items)
    folds = folding.conversation_folds(conv, text)
    assert (root._members, root._items) == before
    if before[0] is not None:  # made by the analysis: the messages' views are still unmade
        holder = next(m.value for m in before[0] if m.key == "messages")
        assert isinstance(holder, NodeAt) and holder._items is None
    # One fold per message and one for the list (each message spans several lines).
    index = LineIndex(text)
    assert len(folds) == 1 + 4
    assert [index.line_col(f.range.start).line for f in folds] == [1, 2, 7, 12, 17]


@pytest.mark.parametrize("suffix", [".conv.json", ".conv.yaml"])
def test_folds_kept_by_message_equal_folds_made_afresh(tmp_path: Path, suffix: str) -> None:
    """A message's folds are kept by its stored node and moved to where it starts: after
    edits that add and remove a line above unchanged messages (which keep their nodes),
    and one inside a message, the folds equal those made with nothing kept. (JSON Lines
    records are one line each: nothing to fold.)"""
    import json

    import yaml

    from assembly.host import AnalysisHost, Edit
    from assembly.rope import Rope

    messages = [
        {"id": f"m{i}", "role": "user", "content": f"one\nline {i}", "tags": ["a", "b"]}
        for i in range(6)
    ]
    if suffix == ".conv.json":
        text = json.dumps({"messages": messages}, indent=2)
    else:
        text = yaml.safe_dump({"messages": messages}, sort_keys=False)
    path = tmp_path / f"chat{suffix}"
    today = dt.date(2026, 7, 15)
    host, rope = AnalysisHost(), Rope.from_str(text)
    a = analyze(path, text=rope, host=host, root=tmp_path, today=today)
    folding.conversation_folds(a.conversation, a.text)  # fills the memo
    line = text.rindex("\n", 0, text.index("m1")) + 1  # the line of the second message's id
    word = text.index("line 2")
    edits = [(line, line, "\n"), (line, line + 1, ""), (word, word, "x"), (line, line, "\n")]
    for start, end, new in edits:
        rope = rope.edit(start, end, new)
        edit = Edit.replace(start, end, new)
        a = analyze(path, text=rope, host=host, root=tmp_path, edit=edit, today=today)
        kept = folding.conversation_folds(a.conversation, a.text)
        folding._MEMO.clear()
        assert kept == folding.conversation_folds(a.conversation, a.text)
        assert len(kept) > 6  # the messages and their lists are folded


def _depths(folds: list[folding.Fold]) -> list[int]:
    """How many folds each one lies inside (by lines), counted pair by pair."""
    spans = [f.lines for f in folds]
    return [
        sum(1 for o in spans if o is not s and o[0] < s[0] <= o[1] and s[1] <= o[1]) for s in spans
    ]


@pytest.mark.parametrize("limit", [0, 1, 3, 5, 8, 12, 40])
def test_a_limit_keeps_the_outermost_folds_in_document_order(limit: int) -> None:
    """``limit_folds`` keeps every fold of the levels that fit whole, then the next
    level's in document order, up to the limit (VS Code's own rule for its 5,000)."""
    path = DATA / "messages.conv.json"
    text = path.read_bytes().decode("utf-8")
    conv = analyze(path, text=text, root=DATA, today=dt.date(2026, 7, 15)).conversation
    folds = folding.conversation_folds(conv, text)
    depths = _depths(folds)
    assert max(depths) >= 2, "a fixture with folds nested in folds"
    kept = folding.limit_folds(folds, limit)
    assert len(kept) == min(limit, len(folds))
    # Asked with the limit, the folds are limited before they are made: the same ones.
    assert folding.conversation_folds(conv, text, limit=limit) == kept
    assert kept == [f for f in folds if f in kept], "in document order"
    by_fold = dict(zip(map(id, folds), depths, strict=True))
    kept_depths = [by_fold[id(f)] for f in kept]
    if kept and len(kept) < len(folds):
        deepest = max(kept_depths)
        # Every fold shallower than the deepest kept is kept; of the deepest level, the first.
        assert all(f in kept for f, d in zip(folds, depths, strict=True) if d < deepest)
        level = [f for f, d in zip(folds, depths, strict=True) if d == deepest]
        assert [f for f in kept if by_fold[id(f)] == deepest] == level[: kept_depths.count(deepest)]


def test_a_fold_starting_on_the_last_line_of_another_is_its_sibling() -> None:
    """In compact JSON (``}, {`` on one line) a message's fold starts on the line the one
    before ends on: the two are at one level, and the limit keeps them in order."""
    spans = [(0, 20), (1, 5), (5, 9), (10, 14), (11, 13)]
    folds = [folding.Fold(TextRange(a, b), None, (a, b)) for a, b in spans]
    kept = folding.limit_folds(folds, 3)
    assert [f.lines for f in kept] == [(0, 20), (1, 5), (5, 9)]


@pytest.mark.parametrize("suffix", [".conv.json", ".conv.yaml", ".conv.jsonl"])
def test_the_check_is_called_between_messages_and_stops_the_walk(
    tmp_path: Path, suffix: str
) -> None:
    """``check`` is the caller's checkpoint (a language server's request cancelled): it is
    called every ``CHECK_EVERY`` messages, and what it raises ends the walk there; the
    folds made afterwards are those of a walk that was never stopped."""
    import json

    import yaml

    n = 3 * folding.CHECK_EVERY + 5
    messages = [{"id": f"m{i}", "role": "user", "content": f"a\nb {i}"} for i in range(n)]
    if suffix == ".conv.json":
        text = json.dumps({"messages": messages}, indent=2)
    elif suffix == ".conv.yaml":
        text = yaml.safe_dump({"messages": messages}, sort_keys=False)
    else:
        text = "".join(json.dumps(m) + "\n" for m in messages)
    conv = analyze(tmp_path / f"chat{suffix}", text=text, root=tmp_path).conversation
    calls: list[int] = []

    class Stop(Exception):
        pass

    def check() -> None:
        calls.append(1)
        if len(calls) == 2:
            raise Stop

    with pytest.raises(Stop):
        folding.conversation_folds(conv, text, check=check)
    assert len(calls) == 2
    folding._MEMO.clear()
    whole = folding.conversation_folds(conv, text)
    counted: list[int] = []
    assert folding.conversation_folds(conv, text, check=lambda: counted.append(1)) == whole
    assert len(counted) >= n // folding.CHECK_EVERY
