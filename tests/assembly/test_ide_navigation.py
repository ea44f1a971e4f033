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


def test_ids_are_followed_without_a_view_of_every_message(tmp_path: Path) -> None:
    """Definition, references and hover on a tool call id, a response's `tool_call_id`, a
    file id and a message id look at the stored messages and make views (absolute ranges)
    of the few they answer with: one of every message, kept by the version, made every
    later edit compare ten thousand of them (``MessageViews``) at 10 MB."""
    import json

    from assembly.ide.hover import conversation_hover

    msgs: list[dict[str, object]] = [
        {"id": f"m{i}", "role": "user" if i % 2 else "assistant", "content": f"turn {i}"}
        for i in range(300)
    ]
    msgs[150] = {
        "id": "a",
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_7", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    msgs[151] = {"id": "t", "role": "tool", "tool_call_id": "call_7", "content": "ok"}
    msgs[160] = {
        "id": "u",
        "role": "user",
        "content": "see the file",
        "files": [{"file_id": "file-9", "filename": "a.md", "content": "text"}],
    }
    msgs[170] = {"id": "c", "role": "user", "content": "a branch", "parent": "m120"}
    text = json.dumps({"messages": msgs}, indent=2)
    path = tmp_path / "chat.conv.json"
    today = dt.date(2026, 7, 15)
    response = text.index('"tool_call_id": "call_7"') + len('"tool_call_id": "') + 2
    call = text.index('"id": "call_7"') + len('"id": "') + 2
    upload = text.index('"file_id": "file-9"') + len('"file_id": "') + 2
    parent = text.index('"parent": "m120"') + len('"parent": "') + 2
    for offset in (response, call, upload, parent):
        doc = analyze(path, text=text, root=tmp_path, today=today)
        conv = doc.conversation
        views = conv.messages
        found = navigation.definition(conv, text, offset)
        refs = navigation.references(conv, text, offset, include_declaration=True)
        hover = conversation_hover(doc, offset, today=today)
        assert found and refs and hover.markdown
        if offset == response:
            t = found[0]  # the call object
            assert json.loads(text[t.range.start : t.range.end])["id"] == "call_7"
            assert "`f` called in `a`" in hover.markdown
        if offset == call:
            assert "Answered by `t`" in hover.markdown
        if offset == parent:
            assert text[found[0].focus_range.start : found[0].focus_range.end] == "m120"
        assert len(views.made()) < 40, offset
