"""Completion (``assembly.ide.completion``) on cursor fixtures.

Each fixture under ``tests/data/ide/completion/`` has one ``$0``; the proposals are
rendered one per line (label, kind, detail, the text they write and where) and compared
with the fixture's ``.expected``. Every item is also applied: the edit must cover the
cursor and stay on its line.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from assembly.ide import completion
from tests.support.engine import analyze, analyze_prompt
from tests.support.golden import check_golden
from tests.support.markers import cursor
from tests.support.places import place, position

DATA = Path(__file__).resolve().parent.parent / "data" / "ide" / "completion"
FIXTURES = sorted(p for p in DATA.iterdir() if p.suffix != ".expected")


def check_completion(path: Path) -> None:
    text, offset = cursor(path.read_text(encoding="utf-8"))
    if path.name.endswith(".prompt.md"):
        template = analyze_prompt(path, text=text, root=DATA).template
        items = completion.template_completions(template, offset)
    else:
        a = analyze(path, text=text, root=DATA, today=dt.date(2026, 7, 15))
        items = completion.conversation_completions(a.conversation, text, offset)
    out = [f"cursor at {position(text, offset)}"]
    if not items:
        out.append("no completions")
    else:
        ranges = {i.range for i in items}
        assert len(ranges) == 1, "one completion request replaces one range"
        rng = ranges.pop()
        assert rng.start <= offset <= rng.end and "\n" not in text[rng.start : rng.end]
        out.append("replacing:")
        out.append(place(text, rng))
    for i in sorted(items, key=lambda i: (i.sort_text or "", i.label)):
        detail = f" ({i.detail})" if i.detail else ""
        doc = f" — {i.documentation.splitlines()[0]}" if i.documentation else ""
        out.append(f"- {i.label} [{i.kind.value}]{detail} writes {i.new_text!r}{doc}")
    check_golden("\n".join(out) + "\n", path.with_name(path.name + ".expected"))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_completion(path: Path) -> None:
    check_completion(path)


def test_completion_after_a_space_makes_no_view_of_every_message(tmp_path: Path) -> None:
    """Editors ask for completions at every space typed: in a long conversation that must
    not make a view of each message (``Conversation.messages``: 10,000 at 10 MB, kept on
    every later version); the stored messages and their starts say whether the cursor is in
    a prompt's text and which calls are open, with the same answers."""
    import json

    msgs: list[dict[str, object]] = [
        {"id": f"m{i}", "role": "user", "content": f"question {i}"} for i in range(300)
    ]
    msgs[1] = {"id": "s", "role": "system", "content": "You are {{"}
    msgs[2] = {
        "id": "a",
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    msgs[3] = {"id": "t", "role": "tool", "tool_call_id": "", "content": "ok"}
    text = json.dumps({"messages": msgs}, indent=2)
    path = tmp_path / "chat.conv.json"
    conv = analyze(path, text=text, root=tmp_path, today=dt.date(2026, 7, 15)).conversation
    views = conv.messages
    space = text.index("question 200") + len("question")
    assert completion.conversation_completions(conv, text, space) == []
    placeholder = text.index("You are {{") + len("You are {{")
    assert completion.conversation_completions(conv, text, placeholder)  # a prompt's text
    open_call = text.index('"tool_call_id": "') + len('"tool_call_id": "')
    labels = [i.label for i in completion.conversation_completions(conv, text, open_call)]
    assert labels == ["call_9"]
    assert len(views.made()) < 20
