"""Value snapshots: an analysis stays exactly true of its own text, whatever comes after.

Issue 13's defect: a re-parse moved message ranges in place through a shared anchor, so an
older analysis still read by hover, inlay hints and code lens changed under them (a
diagnostic covering ``"call_1"`` later covered ``_1", "ty``). Here a document is opened, its
analysis taken, ten edits applied as an editor sends them (``AnalysisHost.apply_change``
with each edit's span; some edits move every later message, one inserts a message, one changes a
tool-call id), and the first analysis's every range (its diagnostics and related
locations, its conversation's message, content, id and tool-call ranges resolved through
its own table of starts, what its hover, inlay hints, code lens and outline return) must
still point at the same text in its own version. Each later analysis must also equal a
fresh analysis of its text.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from assembly.host import Analysis, AnalysisHost, Edit
from assembly.ide import hover, inlay, lens, symbols
from assembly.model import Conversation
from assembly.rope import Rope
from assembly.text import TextRange
from tests.support.engine import analyze

TODAY = dt.date(2025, 6, 2)

DOC: dict[str, Any] = {
    "settings": {"model": "gpt-4o", "provider": "openai"},
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}],
    "messages": [
        {"id": "s", "role": "system", "content": "You are terse. Use get_weather for weather."},
        {"id": "u1", "role": "user", "content": "What is the weather in Paris?"},
        {
            "id": "a1",
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Lyon"}'},
                },
            ],
        },
        {"id": "t1", "role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"},
        {"id": "t9", "role": "tool", "tool_call_id": "call_9", "content": "an orphan"},
        {"id": "a2", "role": "assistant", "content": "Paris: 18 C and sunny."},
        {"id": "u2", "role": "user", "content": "And tomorrow?"},
    ],
}


def _slice(text: str | Rope, r: TextRange) -> str:
    return str(text[r.start : r.end])


def _conversation_places(conv: Conversation) -> list[tuple[str, TextRange]]:
    """Every range of every message, resolved through this version's table of starts."""
    res: list[tuple[str, TextRange]] = []
    for i, stored in enumerate(conv.message_data):
        seen = conv.messages[i]
        for name in (
            "range",
            "content_range",
            "id_range",
            "role_range",
            "parent_range",
            "tool_call_id_range",
        ):
            rel = getattr(stored, name)
            if rel is None:
                continue
            absolute = conv.absolute(i, rel)
            assert getattr(seen, name) == absolute  # the view and the accessor agree
            res.append((f"{stored.id}.{name}", absolute))
        for k, call in enumerate(seen.tool_calls):
            for name in ("range", "id_range", "name_range", "arguments_range"):
                res.append((f"{stored.id}.call{k}.{name}", getattr(call, name)))
    return res


def _features(a: Analysis) -> dict[str, Any]:
    """What the editor features answer on ``a`` (ranges and the text they cover)."""
    text = a.text
    n = len(text)
    hovers = []
    for offset in range(0, n, max(1, n // 60)):
        h = hover.conversation_hover(a, offset, today=TODAY)
        if h is not None and h.range is not None:
            hovers.append((offset, h.range, _slice(text, h.range), h.markdown))
    hints = [
        (h.offset, h.label, str(text[max(0, h.offset - 8) : h.offset]))
        for h in inlay.conversation_inlay_hints(a, TextRange(0, n))
    ]
    lenses = [
        (x.range, _slice(text, x.range), x.title)
        for x in lens.conversation_lenses(a, command="c", arguments=())
    ]
    outline = []
    stack = list(symbols.conversation_symbols(a.conversation))
    while stack:
        s = stack.pop()
        outline.append((s.name, s.range, s.focus_range, _slice(text, s.focus_range)))
        stack.extend(s.children)
    return {"hovers": hovers, "hints": hints, "lenses": lenses, "outline": outline}


def _snapshot(a: Analysis) -> dict[str, Any]:
    text = a.text
    diags = []
    for d in a.diagnostics:
        related = tuple(
            (r.range, _slice(text, r.range), r.message) for r in d.related if r.path is None
        )
        diags.append((d.code, d.range, _slice(text, d.range), related))
    places = [(name, r, _slice(text, r)) for name, r in _conversation_places(a.conversation)]
    return {"diagnostics": diags, "places": places, **_features(a)}


def _edits(text: str) -> list[tuple[int, int, str]]:
    """Ten edits, each as (start, end, new text) on the text left by the ones before."""
    res: list[tuple[int, int, str]] = []

    def at(needle: str, cur: str) -> int:
        return cur.index(needle)

    steps = [
        # Typing inside the first message moves every later one.
        lambda cur: (at("terse", cur) + 5, at("terse", cur) + 5, " and kind"),
        lambda cur: (at("Paris?", cur), at("Paris?", cur), "lovely "),
        # Inside the tool calls' arguments.
        lambda cur: (at("Lyon", cur) + 4, at("Lyon", cur) + 4, " 2e"),
        # A new message in the middle, before the tool responses.
        lambda cur: (
            at('{\n      "id": "t1"', cur),
            at('{\n      "id": "t1"', cur),
            '{"id": "n1", "role": "user", "content": "also Nice"},\n    ',
        ),
        # Deleting characters at the start of a message's content.
        lambda cur: (at("You are", cur), at("You are", cur) + 4, ""),
        # Changing a tool-call id (the orphan's answer now finds its call).
        lambda cur: (at('"call_2"', cur) + 6, at('"call_2"', cur) + 7, "9"),
        # Typing at the end of the last message.
        lambda cur: (at("tomorrow?", cur) + 9, at("tomorrow?", cur) + 9, " Thanks"),
        # A setting before the messages (every message moves).
        lambda cur: (at('"gpt-4o"', cur) + 7, at('"gpt-4o"', cur) + 7, "-mini"),
        # A new message at the end.
        lambda cur: (
            at('"And tomorrow', cur) + len('"And tomorrow? Thanks"\n    }'),
            at('"And tomorrow', cur) + len('"And tomorrow? Thanks"\n    }'),
            ',\n    {"id": "a3", "role": "assistant", "content": "Rain."}',
        ),
        # Deleting a span across two messages (the syntax breaks, then is read whole).
        lambda cur: (at("sunny", cur), at("Paris: 18", cur), ""),
    ]
    cur = text
    for step in steps:
        start, end, new = step(cur)
        res.append((start, end, new))
        cur = cur[:start] + new + cur[end:]
    return res


def test_an_analysis_stays_true_of_its_own_text_after_ten_edits(tmp_path: Path) -> None:
    path = tmp_path / "weather.conv.json"
    text = json.dumps(DOC, indent=2)
    path.write_text(text, encoding="utf-8")
    rope = Rope.from_str(text)
    host = AnalysisHost()
    first = analyze(path, text=rope, root=tmp_path, today=TODAY, host=host)
    codes = {d.code for d in first.diagnostics}
    assert {"orphaned-tool-response", "unanswered-tool-call"} <= codes
    before = _snapshot(first)
    assert all(before[k] for k in ("hovers", "hints", "lenses", "outline"))
    # The ranges inside the first analysis point at what they name.
    places = dict((name, s) for name, _, s in before["places"])
    assert places["a1.call0.id_range"] == '"call_1"'
    assert places["t9.tool_call_id_range"] == '"call_9"'
    assert any(s == '"call_2"' for _, _, s, _ in before["diagnostics"])

    prev, cur, moved_shared = first, rope, 0
    for start, end, new in _edits(text):
        cur = cur.edit(start, end, new)
        edit = Edit.replace(start, end, new)
        nxt = analyze(path, text=cur, root=tmp_path, today=TODAY, host=host, edit=edit)
        fresh = analyze(path, text=str(cur), root=tmp_path, today=TODAY)
        # Each version is what a fresh analysis of its text says.
        assert [(d.code, d.range, d.message) for d in nxt.diagnostics] == [
            (d.code, d.range, d.message) for d in fresh.diagnostics
        ]
        assert _conversation_places(nxt.conversation) == _conversation_places(fresh.conversation)
        if prev.parsed is not None and nxt.parsed is not None:
            old, new_conv = prev.parsed, nxt.parsed
            moved_shared += sum(
                1
                for i, m in enumerate(new_conv.message_data)
                if (j := old.index_of(m)) is not None and old.starts[j] != new_conv.starts[i]
            )
        prev = nxt
        # The first analysis is untouched, however far the edits moved its messages.
        assert _snapshot(first) == before
    # The re-read shared message objects that moved (the case the anchors got wrong).
    assert moved_shared > 0
    assert str(first.text) == text


def test_a_version_reuses_the_views_its_prior_made_that_did_not_move() -> None:
    """``MessageViews``: a re-read version gives, of the views the version it was made from
    had made, the very objects for the messages at the same place with the same start, and
    new views, at their new starts, for the others; equal to a fresh version's views."""
    path = Path(__file__).resolve().parents[2] / "examples" / "support-agent.conv.json"
    text = path.read_text(encoding="utf-8")
    host = AnalysisHost()
    conv = analyze(path, text=Rope.from_str(text), host=host).conversation
    n = len(conv.messages)
    seen = [conv.messages[i] for i in range(n)]  # every view made
    k = n // 2
    inside = seen[k].content_range
    assert inside is not None
    for new in ("x", "\\u00e9", "yz"):
        at = inside.start + 1
        rope = Rope.from_str(text[:at] + new + text[at:])
        views = analyze(path, text=rope, host=host, edit=Edit.replace(at, at, new))
        got = views.conversation.messages
        assert [got[i] is seen[i] for i in range(n)] == [i < k for i in range(n)]
        assert list(got) == list(analyze(path, text=str(rope)).conversation.messages)
        text, seen = str(rope), list(got)


def test_the_messages_an_edit_reads_again_keep_no_version_of_the_document(
    tmp_path: Path,
) -> None:
    """A message read by the C scanner finds its ranges when first asked, in the text it
    was read from. At the open that is the document's own rope (read window by window,
    never joined); a message an edit reads again keeps a copy of its own text instead:
    keeping that edit's version of the document would keep, with it, every chunk of text
    later edits replace, one version per edit, for as long as the message stays unedited
    (an editor's session grew by a chunk, 20 KB, every few keystrokes)."""
    import gc
    import weakref

    messages = [
        {"id": f"m{i}", "role": "user" if i % 2 else "assistant", "content": f"{i} " * 250}
        for i in range(300)
    ]
    text = json.dumps({"messages": messages}, indent=2)
    assert len(text) > 4 * 65536  # read at the open a window at a time, from the rope
    path = tmp_path / "long.conv.json"
    path.write_text(text, encoding="utf-8")
    rope = Rope.from_str(text)
    host = AnalysisHost()
    analysis = analyze(path, text=rope, root=tmp_path, today=TODAY, host=host)
    versions = [weakref.ref(rope)]
    new = '{"role": "user", "content": "inserted"},\n    '
    for k in range(20):
        # A message inserted before another, then taken away: both read the list again.
        at = str(rope).index('{\n      "id": "m' + str(10 + 13 * k) + '"')
        for start, end, insert in ((at, at, new), (at, at + len(new), "")):
            rope = rope.edit(start, end, insert)
            edit = Edit.replace(start, end, insert)
            analysis = analyze(path, text=rope, root=tmp_path, today=TODAY, host=host, edit=edit)
            versions.append(weakref.ref(rope))
    assert str(analysis.text) == text
    gc.collect()
    alive = [i for i, v in enumerate(versions) if v() is not None]
    # The open's, and the last few (the current one, the host's previous analysis…).
    assert [i for i in alive if 0 < i < len(versions) - 3] == [], alive
    # The messages read again still find their ranges.
    for m in analysis.conversation.messages[:300]:
        assert str(analysis.text)[m.content_range.start : m.content_range.end].startswith('"')
