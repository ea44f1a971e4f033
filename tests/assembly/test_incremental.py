"""Incremental re-reading after an edit inside one message (``assembly.incremental``).

The property: for any conversation and any single edit, ``reparse_conversation`` either
declines (None) or gives exactly what ``parse_conversation`` of the new text gives, every
range of the model and of the source tree included.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assembly import incremental
from assembly.host import AnalysisHost
from assembly.incremental import common_prefix, common_suffix, reparse_conversation
from assembly.model import Conversation, DocFormat, Role
from assembly.reading import parse_conversation
from assembly.rope import Rope
from assembly.syntax import NodeAt, SNode, absolute, iter_nodes
from assembly.text import RelRange
from tests.support.engine import analyze


def _tree(node: SNode | None) -> Any:
    """The tree with every range absolute: ``syntax.absolute`` of the stored nodes (the
    same ranges as the view ``syntax.located`` gives, made without a view of each node;
    the views' own reads are tested where they are used)."""
    if isinstance(node, NodeAt):
        node = absolute(node.green, node.base)
    if node is None:
        return None
    return (
        node.kind,
        node.range,
        node.value,
        tuple(map(_tree, node.items)),
        tuple((m.key, m.key_range, _tree(m.value)) for m in node.members),
    )


def normalise(conv: Conversation) -> tuple[Any, ...]:
    """Every field of the conversation and its tree, ranges absolute. The messages are
    compared as their views are (``Located``: the same stored values at the same places),
    which implies that every field read through a view is the same."""
    skip = ("tree", "_views", "message_data", "syntax")
    fields = {f.name: getattr(conv, f.name) for f in dataclasses.fields(conv) if f.name not in skip}
    fields["messages"] = tuple((m.index, m.base, m.green) for m in conv.messages)
    fields["records"] = tuple(map(normalise, conv.records))  # (a tree is compared by identity)
    return (tuple(sorted(fields.items(), key=lambda kv: kv[0])), _tree(conv.root))


def check_edit(text: str, new_text: str, fmt: DocFormat) -> Conversation | None:
    prev = parse_conversation(text, fmt)
    res = reparse_conversation(prev, text, new_text, fmt)
    if res is not None:
        assert normalise(res) == normalise(parse_conversation(new_text, fmt))
    return res


# ---------------------------------------------------------------------------------------
# Documents

_TEXT = st.text(
    alphabet=st.sampled_from([*'ab xyz"\\{}[],:\t\n', "é", "😀", "\u2028", "\ufeff"]),
    max_size=12,
)


@st.composite
def conversations(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    n = draw(st.integers(1, 5))
    messages: list[dict[str, Any]] = []
    for i in range(n):
        role = draw(st.sampled_from(["user", "assistant", "tool", "system"]))
        msg: dict[str, Any] = {"role": role, "content": draw(_TEXT)}
        if draw(st.booleans()):
            msg = {"id": f"m{i}", **msg}
        if role == "assistant" and draw(st.booleans()):
            args = json.dumps({"q": draw(_TEXT)})
            msg["tool_calls"] = [
                {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": args}}
            ]
        if role == "tool":
            msg["tool_call_id"] = f"c{i}"
        messages.append(msg)
    head: dict[str, Any] = {}
    if draw(st.booleans()):
        head["settings"] = {"model": "gpt-4o"}
    return head, messages


def render(head: dict[str, Any], messages: list[dict[str, Any]], fmt: DocFormat, style: int) -> str:
    if fmt is DocFormat.JSONL:
        lines = [json.dumps(head, ensure_ascii=False)] if head else []
        lines += [json.dumps(m, ensure_ascii=False) for m in messages]
        return "\n".join(lines) + "\n"
    if style == 0:
        return json.dumps(messages, ensure_ascii=False, indent=2)
    # Top-level fields before and after the messages: those after move with an edit.
    doc = {
        **head,
        "messages": messages,
        "system_prompt": {"content": "Be brief."},
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "reminder": "r",
    }
    return json.dumps(doc, ensure_ascii=False, indent=2 if style == 1 else None)


def _anchor_positions(text: str, conv: Conversation) -> list[int]:
    """Places worth editing at: inside contents and arguments, and message boundaries."""
    res = [0, 1, len(text)]
    for m in conv.messages:
        res += [m.range.start, m.range.start + 1, m.range.end - 1, m.range.end]
        if m.content_range is not None:
            res += [m.content_range.start, m.content_range.start + 1, m.content_range.end - 1]
        for c in m.tool_calls:
            res += [c.arguments_range.start + 1, c.arguments_range.end - 1, c.id_range.start + 1]
        if m.id_range is not None:
            res.append(m.id_range.start + 1)
    if conv.root is not None and conv.root.is_object:  # inside the other top-level values
        for member in conv.root.members:
            r = member.value.range
            res += [r.start + 1, (r.start + r.end) // 2, r.end - 1]
    return [min(max(p, 0), len(text)) for p in res]


@settings(
    max_examples=int(os.environ.get("INCREMENTAL_EXAMPLES", "400")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    doc=conversations(),
    fmt=st.sampled_from([DocFormat.JSON, DocFormat.JSONL]),
    style=st.integers(0, 2),
    data=st.data(),
)
def test_reparse_equals_full_parse(
    doc: tuple[dict[str, Any], list[dict[str, Any]]],
    fmt: DocFormat,
    style: int,
    data: st.DataObject,
) -> None:
    text = render(*doc, fmt, style)
    conv = parse_conversation(text, fmt)
    anchors = _anchor_positions(text, conv)
    start = data.draw(st.one_of(st.sampled_from(anchors), st.integers(0, len(text))))
    kind = data.draw(st.sampled_from(["insert", "delete", "replace", "across"]))
    if kind == "across":
        # From somewhere to a later anchor: may span two messages.
        end = data.draw(st.sampled_from(sorted({a for a in anchors if a >= start} | {start})))
    elif kind == "insert":
        end = start
    else:
        end = min(len(text), start + data.draw(st.integers(1, 6)))
    insert = "" if kind == "delete" else data.draw(_TEXT)
    new_text = text[:start] + insert + text[end:]
    check_edit(text, new_text, fmt)
    # A second edit on top of an incremental result: it is a valid ``prev`` too.
    res = reparse_conversation(conv, text, new_text, fmt)
    if res is not None:
        pos = data.draw(st.integers(0, len(new_text)))
        newer = new_text[:pos] + "z" + new_text[pos:]
        again = reparse_conversation(res, new_text, newer, fmt)
        if again is not None:
            assert normalise(again) == normalise(parse_conversation(newer, fmt))


@settings(
    max_examples=int(os.environ.get("INCREMENTAL_EXAMPLES", "400")) // 4,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    doc=conversations(),
    fmt=st.sampled_from([DocFormat.JSON, DocFormat.JSONL]),
    style=st.integers(0, 2),
    data=st.data(),
)
def test_chains_of_edits_stay_exact(
    doc: tuple[dict[str, Any], list[dict[str, Any]]],
    fmt: DocFormat,
    style: int,
    data: st.DataObject,
) -> None:
    """Each re-parse is the base of the next, as in an editor: every link stays exact, and
    a base is never changed by the re-read it served."""
    text = render(*doc, fmt, style)
    conv = parse_conversation(text, fmt)
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.sampled_from(_anchor_positions(text, conv)))
        cut = data.draw(st.integers(0, 3))
        new_text = text[:pos] + data.draw(_TEXT) + text[pos + cut :]
        res = reparse_conversation(conv, text, new_text, fmt)
        full = parse_conversation(new_text, fmt)
        if res is None:
            conv = full
        else:
            assert normalise(res) == normalise(full)
            if res is not conv:
                # The base is a value: untouched by the re-read, it reads its own text still
                # and serves as a base again.
                assert normalise(conv) == normalise(parse_conversation(text, fmt))
                again = reparse_conversation(conv, text, new_text, fmt)
                assert again is not None and normalise(again) == normalise(full)
            conv = res
        text = new_text


# ---------------------------------------------------------------------------------------
# Examples

DOC = {
    "settings": {"model": "gpt-4o"},
    "messages": [
        {"id": "a", "role": "user", "content": "hello there"},
        {
            "id": "b",
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"q": "x"}'},
                }
            ],
        },
        {"id": "c", "role": "tool", "tool_call_id": "c1", "content": "result"},
        {"id": "d", "role": "user", "content": "thanks"},
    ],
    "tools": [{"type": "function", "function": {"name": "search"}}],
    "system_prompt": {"content": "Be brief."},
}


def _doc(fmt: DocFormat) -> str:
    if fmt is DocFormat.JSONL:
        return render({"settings": DOC["settings"]}, DOC["messages"], fmt, 0)
    return json.dumps(DOC, indent=2)


def _insert(text: str, after: str, what: str) -> str:
    at = text.index(after) + len(after)
    return text[:at] + what + text[at:]


def test_edit_in_content_is_incremental() -> None:
    for fmt in (DocFormat.JSON, DocFormat.JSONL):
        text = _doc(fmt)
        res = check_edit(text, _insert(text, "hello", " dear"), fmt)
        assert res is not None
        assert res.messages[0].content == "hello dear there"
        assert res.messages[3].range.start > parse_conversation(text, fmt).messages[3].range.start
        assert res.tools is not None or fmt is DocFormat.JSONL


def test_untouched_messages_are_shared_and_moved_by_the_table_of_starts() -> None:
    text = _doc(DocFormat.JSON)
    prev = parse_conversation(text, DocFormat.JSON)
    before = [m.range.start for m in prev.messages]
    res = reparse_conversation(prev, text, _insert(text, "hello", " dear"), DocFormat.JSON)
    assert res is not None
    assert res.message_data[0] is not prev.message_data[0]
    shared = zip(res.message_data[1:], prev.message_data[1:], strict=True)
    assert all(a is b for a, b in shared)
    assert [m.range.start for m in res.messages] == [before[0], *(b + 5 for b in before[1:])]
    assert isinstance(res.message_data[2].tool_call_id_range, RelRange)
    # The previous version is untouched (a value): its ranges still read its own text,
    # and it can be the base of another re-read.
    assert [m.range.start for m in prev.messages] == before
    other = _insert(text, "hello", "!")
    assert normalise(reparse_conversation(prev, text, other, DocFormat.JSON)) == normalise(
        parse_conversation(other, DocFormat.JSON)
    )


def test_edit_in_a_top_level_value_keeps_the_messages() -> None:
    text = _doc(DocFormat.JSON)
    prev = parse_conversation(text, DocFormat.JSON)
    before = [m.range.start for m in prev.messages]
    new_text = _insert(text, '"model": "gpt-4o', "-mini")
    res = reparse_conversation(prev, text, new_text, DocFormat.JSON)
    assert res is not None and res.settings == {"model": "gpt-4o-mini"}
    assert normalise(res) == normalise(parse_conversation(new_text, DocFormat.JSON))
    assert all(a is b for a, b in zip(res.message_data, prev.message_data, strict=True))
    assert [m.range.start for m in res.messages] == [b + 5 for b in before]
    # After the messages: the system prompt's text.
    newer = _insert(new_text, "Be brief", " and kind")
    again = check_edit(new_text, newer, DocFormat.JSON)
    assert again is not None and again.system_prompt is not None
    assert again.system_prompt.content == "Be brief and kind."  # type: ignore[union-attr]


def test_edit_in_tool_call_arguments_is_incremental() -> None:
    for fmt in (DocFormat.JSON, DocFormat.JSONL):
        text = _doc(fmt)
        res = check_edit(text, _insert(text, '\\"q\\": \\"x', "yz"), fmt)
        assert res is not None
        assert res.messages[1].tool_calls[0].arguments == {"q": "xyz"}


def test_delete_shrinks_later_ranges() -> None:
    text = _doc(DocFormat.JSON)
    at = text.index("thanks")
    res = check_edit(text, text[:at] + text[at + 3 :], DocFormat.JSON)
    assert res is not None and res.messages[3].content == "nks"


def test_edits_beyond_one_message_are_read_from_the_first_changed_item() -> None:
    """A changed id, a syntax error, an edit across two messages, a new schema error, an
    edit in a broken document: the list is parsed again from the message the edit starts
    in (JSON), and the result is the whole parse's."""
    text = _doc(DocFormat.JSON)
    prev = parse_conversation(text, DocFormat.JSON)
    cases = [
        text.replace('"id": "a"', '"id": "aa"'),
        _insert(text, "hello", '"'),
        text.replace('"hello there"\n    },', '"hello there", "x": 1}, {"role": "user"},'),
        text.replace('"role": "user"', '"role": "bogus"', 1),
    ]
    for new_text in cases:
        res = reparse_conversation(prev, text, new_text, DocFormat.JSON)
        assert res is not None
        assert normalise(res) == normalise(parse_conversation(new_text, DocFormat.JSON))
    broken = text[:-3]
    bad = parse_conversation(broken, DocFormat.JSON)
    assert bad.issues
    fixed = _insert(broken, "hello", "x")
    res = reparse_conversation(bad, broken, fixed, DocFormat.JSON)
    assert res is not None and res.issues
    assert normalise(res) == normalise(parse_conversation(fixed, DocFormat.JSON))


def test_declines_what_it_cannot_do() -> None:
    text = _doc(DocFormat.JSON)
    prev = parse_conversation(text, DocFormat.JSON)
    # An edit at the head of the document that takes the message list into a value of
    # its own (an array left open before it); YAML.
    at = text.index("{") + 1
    opened = text[:at] + '"x": [' + text[at:]
    assert reparse_conversation(prev, text, opened, DocFormat.JSON) is None
    check_edit(text, opened, DocFormat.JSON)
    assert reparse_conversation(prev, text, text + " ", DocFormat.YAML) is None


def test_jsonl_line_break_inside_a_message_reads_as_a_whole_parse() -> None:
    """A line broken in two near the end: both halves fail alone, the first is read as a
    record over two lines (reported), exactly as a whole parse reads it."""
    text = _doc(DocFormat.JSONL)
    new_text = _insert(text, '"role": "user",', "\n")
    res = check_edit(text, new_text, DocFormat.JSONL)
    assert res is not None and any("spans 2 lines" in i.message for i in res.issues)


def test_a_top_level_edit_that_changes_the_format_is_read_as_a_whole_read_reads_it() -> None:
    """A top-level ``model`` typed into a Claude model is a mark of Anthropic's format: the
    re-read of that value alone must not keep the format told before."""
    text = '{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}'
    new_text = text.replace("gpt-4o", "claude-3")
    assert parse_conversation(new_text, DocFormat.JSON).source_format != "openai-chat"
    check_edit(text, new_text, DocFormat.JSON)


def test_common_prefix_and_suffix() -> None:
    assert common_prefix("abcdef", "abXdef") == 2
    assert common_suffix("abcdef", "abXdef", 4) == 3
    assert common_prefix("abc", "abc") == 3
    assert common_prefix("", "x") == 0
    assert common_suffix("aaa", "aaaa", 3) == 3


def test_analyze_with_previous_gives_the_same_diagnostics(tmp_path: Path) -> None:
    path = tmp_path / "chat.conv.json"
    text = _doc(DocFormat.JSON)
    path.write_text(text)
    today = dt.date(2025, 1, 15)
    host = AnalysisHost()
    first = analyze(path, text=text, root=tmp_path, today=today, host=host)
    assert first.parsed is not None
    new_text = _insert(text, "hello", " dear")
    inc = analyze(path, text=new_text, root=tmp_path, today=today, host=host)
    full = analyze(path, text=new_text, root=tmp_path, today=today)
    assert inc.diagnostics == full.diagnostics
    assert inc.parsed is not None and full.parsed is not None
    assert normalise(inc.parsed) == normalise(full.parsed)
    assert normalise(inc.conversation) == normalise(full.conversation)


def test_ropes_are_re_read_like_strings() -> None:
    """The server's texts are ropes: the edit is found by chunk identity, never by a copy."""
    for fmt in (DocFormat.JSON, DocFormat.JSONL):
        text = _doc(fmt)
        new_text = _insert(text, "hello", " dear")
        old, new = Rope.from_str(text), Rope.from_str(text)
        new = new.edit(text.index("hello") + 5, text.index("hello") + 5, " dear")
        res = reparse_conversation(parse_conversation(text, fmt), old, new, fmt)
        assert res is not None
        assert normalise(res) == normalise(parse_conversation(new_text, fmt))
        # A string and a rope are not compared (that would copy the rope): parse it all.
        assert reparse_conversation(parse_conversation(text, fmt), text, new, fmt) is None


def test_typing_in_top_level_values_analyses_like_a_fresh_start(tmp_path: Path) -> None:
    """Keystrokes in the settings, prompts and project files of the example, analysed
    with the previous analysis: diagnostics (with their ranges) and the assembly equal a
    fresh analysis every time, and the messages are never read again."""
    example = Path(__file__).resolve().parents[2] / "examples"
    for name in ("support-agent.conv.json", "prompts"):
        src = example / name
        if src.is_dir():
            shutil.copytree(src, tmp_path / name)
        else:
            shutil.copy(src, tmp_path / name)
    path = tmp_path / "support-agent.conv.json"
    text = path.read_text(encoding="utf-8")
    today = dt.date(2025, 1, 15)
    host = AnalysisHost()
    prev = analyze(path, text=text, root=tmp_path, today=today, host=host)
    rnd = random.Random(5)
    kept = 0
    for _ in range(40):
        assert prev.parsed is not None and prev.parsed.root is not None
        strings = [
            n.range
            for m in prev.parsed.root.members
            if m.key != "messages"
            for n in iter_nodes(m.value)
            if n.is_string and len(n.range) > 2
        ]
        r = rnd.choice(strings)
        at = rnd.randrange(r.start + 1, r.end - 1)
        if text[at - 1] == "\\" or text[at] in '"\\':
            continue
        cut = rnd.choice((0, 0, 1))
        new_text = text[:at] + rnd.choice("ab 7") + text[at + cut :]
        inc = analyze(path, text=new_text, root=tmp_path, today=today, host=host)
        full = analyze(path, text=new_text, root=tmp_path, today=today)
        assert [(d, d.range.start, d.range.end) for d in inc.diagnostics] == [
            (d, d.range.start, d.range.end) for d in full.diagnostics
        ]
        assert inc.assembly == full.assembly
        assert inc.parsed is not None and full.parsed is not None
        assert normalise(inc.parsed) == normalise(full.parsed)
        assert not inc.parsed.issues, new_text[at - 20 : at + 20]
        kept += inc.parsed.message_data[0] is prev.parsed.message_data[0]
        prev, text = inc, new_text
    assert kept >= 20  # the re-read kept the messages, not only the fallback


def test_edit_in_additional_context_and_in_a_processing_file() -> None:
    """The keys issue 12 added re-read like the others: the additional context as a
    top-level value (messages kept), an upload's ``processing`` flag inside its message."""
    text = (
        '{"additional_context": "Thread: deploy failed", "messages": [\n'
        '  {"id": "u1", "role": "user", "content": "Why?",'
        ' "files": [{"file_id": "f1", "filename": "a.log", "processing": false}]}\n]}'
    )
    prev = parse_conversation(text, DocFormat.JSON)
    new_text = _insert(text, "deploy", " of 14:02")
    res = reparse_conversation(prev, text, new_text, DocFormat.JSON)
    assert res is not None and res.additional_context is not None
    assert normalise(res) == normalise(parse_conversation(new_text, DocFormat.JSON))
    assert res.additional_context.content == "Thread: deploy of 14:02 failed"
    assert all(a is b for a, b in zip(res.message_data, prev.message_data, strict=True))
    flipped = new_text.replace('"processing": false', '"processing": true')
    again = check_edit(new_text, flipped, DocFormat.JSON)
    final = again if again is not None else parse_conversation(flipped, DocFormat.JSON)
    assert final.messages[0].files[0].processing is True


def test_additional_context_after_the_messages_moves_with_an_edit_before_it() -> None:
    text = (
        '{"messages": [\n  {"id": "u1", "role": "user", "content": "Why?"}\n],'
        ' "additional_context": "Thread: deploy failed"}'
    )
    res = check_edit(text, _insert(text, "Why", " not"), DocFormat.JSON)
    assert res is not None and res.additional_context is not None


# ---------------------------------------------------------------------------------------
# Every edit kind (JSON): re-read from the first changed item on, equal to a whole parse


def _chain(text: str, edits: list[tuple[int, int, str]]) -> list[Conversation]:
    """Apply ``edits`` one after another, each re-read from the last result (as the server
    does); every step must be re-read incrementally and equal a whole parse."""
    conv = parse_conversation(text, DocFormat.JSON)
    res = [conv]
    for start, end, new in edits:
        new_text = text[:start] + new + text[end:]
        nxt = reparse_conversation(conv, text, new_text, DocFormat.JSON)
        assert nxt is not None, (start, end, new)
        assert normalise(nxt) == normalise(parse_conversation(new_text, DocFormat.JSON))
        conv, text = nxt, new_text
        res.append(conv)
    return res


def _big_doc(n: int = 30) -> str:
    messages: list[dict[str, Any]] = []
    for i in range(n):
        messages.append({"id": f"u{i}", "role": "user", "content": f"question {i}"})
        messages.append(
            {
                "id": f"a{i}",
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "search", "arguments": '{"q": "x"}'},
                    }
                ],
            }
        )
        messages.append(
            {"id": f"t{i}", "role": "tool", "tool_call_id": f"call_{i}", "content": "r"}
        )
    doc = {
        "settings": {"model": "gpt-4o"},
        "tools": [{"type": "function", "function": {"name": "search"}}],
    }
    return json.dumps({**doc, "messages": messages}, indent=2)


def test_typing_a_new_message_at_the_end_character_by_character() -> None:
    """Through every syntax-broken state: each keystroke re-reads only the last message and
    what follows it."""
    text = _big_doc()
    at = text.rindex("}") - len("\n  ]\n")
    typed = ',\n    {"id": "u99", "role": "user", "content": "and then?"}'
    edits = [(at + i, at + i, ch) for i, ch in enumerate(typed)]
    chain = _chain(text, edits)
    assert any(c.issues for c in chain[1:-1])  # it was broken on the way
    assert not chain[-1].issues and chain[-1].messages[-1].id == "u99"
    first, last = chain[0], chain[-1]
    assert all(a is b for a, b in zip(first.message_data, last.message_data[:-1], strict=False))


def test_inserting_deleting_and_renaming_messages_in_the_middle() -> None:
    text = _big_doc()
    middle = text.index('"id": "u15"') - len("{\n      ")
    new_message = '{"id": "n1", "role": "user", "content": "inserted"},\n    '
    chain = _chain(text, [(middle, middle, new_message)])
    before, after = chain
    k = next(i for i, m in enumerate(after.messages) if m.id == "n1")
    # Every other message object is shared, the later ones moved by the table of starts
    # (but the one right after: the texts' common prefix ends inside it, at its ``{``).
    assert all(a is b for a, b in zip(before.message_data[:k], after.message_data[:k], strict=True))
    later = zip(before.message_data[k + 1 :], after.message_data[k + 2 :], strict=True)
    assert all(a is b for a, b in later)
    assert after.starts[k + 2] == before.starts[k + 1] + len(new_message)
    text2 = text[:middle] + new_message + text[middle:]
    # A span deleted across messages (from one content into a later one).
    a, b = text2.index("question 20"), text2.index("question 22")
    edits: list[tuple[int, int, str]] = [(a + 5, b + 5, "")]
    text3 = text2[: a + 5] + text2[b + 5 :]
    # An id, a role, a parent and a tool-call id changed.
    for old, new in (
        ('"id": "u3"', '"id": "u3b"'),
        ('"id": "u4",\n      "role": "user"', '"id": "u4",\n      "role": "system"'),
        ('"id": "u5",', '"id": "u5", "parent": "u3b",'),
        ('"tool_call_id": "call_7"', '"tool_call_id": "call_77"'),
    ):
        i = text3.index(old)
        edits.append((i, i + len(old), new))
        text3 = text3[:i] + new + text3[i + len(old) :]
    _chain(text2, edits)


@settings(max_examples=int(os.environ.get("INCREMENTAL_EXAMPLES", "400")) // 4, deadline=None)
@given(st.data())
def test_random_edit_chains_equal_whole_parses(data: st.DataObject) -> None:
    """Random edits anywhere after the list's bracket (breaking and mending the syntax),
    each re-read from the previous result: every step equals a whole parse."""
    text = _big_doc(3)
    conv = parse_conversation(text, DocFormat.JSON)
    alphabet = st.sampled_from([*'ab "\\{}[],:\n', "é", '{"role": "user", "content": "x"},'])
    for _ in range(data.draw(st.integers(1, 10))):
        lo = text.index("[", text.index('"messages"')) + 1
        pos = data.draw(st.integers(lo, len(text)))
        cut = data.draw(st.integers(0, 40))
        new_text = text[:pos] + data.draw(alphabet) + text[pos + cut :]
        res = reparse_conversation(conv, text, new_text, DocFormat.JSON)
        full = parse_conversation(new_text, DocFormat.JSON)
        if res is not None:
            assert normalise(res) == normalise(full)
        conv, text = (res if res is not None else full), new_text


def _big_jsonl(n: int = 3) -> str:
    doc = json.loads(_big_doc(n))
    lines = [json.dumps({"settings": doc["settings"], "tools": doc["tools"]})]
    lines += [json.dumps(m) for m in doc["messages"]]
    return "\n".join(lines) + "\n"


def test_jsonl_lines_are_read_again_alone() -> None:
    """A new line typed at the end, a line pasted in the middle, an id changed, the header
    line edited: only the lines touched are parsed again."""
    text = _big_jsonl(10)
    conv = parse_conversation(text, DocFormat.JSONL)
    middle = text.index('{"id": "u5"')
    for new_text in (
        text + '{"id": "u99", "role": "user", "content": "and then?"}\n',
        text[:middle] + '{"id": "n1", "role": "user", "content": "pasted"}\n' + text[middle:],
        text.replace('"id": "u3"', '"id": "u3b"'),
        text.replace('"gpt-4o"', '"gpt-4o-mini"'),
    ):
        res = reparse_conversation(conv, text, new_text, DocFormat.JSONL)
        assert res is not None
        assert normalise(res) == normalise(parse_conversation(new_text, DocFormat.JSONL))
        shared = sum(a is b for a, b in zip(conv.message_data, res.message_data, strict=False))
        assert shared >= len(conv.message_data) // 2


@settings(max_examples=int(os.environ.get("INCREMENTAL_EXAMPLES", "400")) // 4, deadline=None)
@given(st.data())
def test_random_jsonl_edit_chains_equal_whole_parses(data: st.DataObject) -> None:
    text = _big_jsonl()
    conv = parse_conversation(text, DocFormat.JSONL)
    alphabet = st.sampled_from(
        [*'ab "\\{}[],:\n', "é", "\ufeff", '{"role": "user", "content": "x"}\n']
    )
    if data.draw(st.booleans()):
        text = "\ufeff" + text  # a byte order mark an editor sent
        conv = parse_conversation(text, DocFormat.JSONL)
    for _ in range(data.draw(st.integers(1, 10))):
        pos = data.draw(st.sampled_from([0, 1])) if data.draw(st.booleans()) else None
        pos = data.draw(st.integers(0, len(text))) if pos is None else pos
        cut = data.draw(st.integers(0, 40))
        new_text = text[:pos] + data.draw(alphabet) + text[pos + cut :]
        res = reparse_conversation(conv, text, new_text, DocFormat.JSONL)
        full = parse_conversation(new_text, DocFormat.JSONL)
        if res is not None:
            assert normalise(res) == normalise(full)
        conv, text = (res if res is not None else full), new_text


def test_id_role_and_tool_call_id_edits_read_one_message(monkeypatch: Any) -> None:
    """An edit that changes a message's id, role or tool-call id (the format's marks
    included: a role ``system`` is an OpenAI mark) re-reads that message alone: the tree is
    not read again as a whole (``read_parsed`` is not called), and the result equals a
    whole parse, the format read and its reasons included."""
    import assembly.incremental as incremental

    def whole(*args: Any, **kwargs: Any) -> Conversation:
        raise AssertionError("the whole tree was read again")

    for fmt in (DocFormat.JSON, DocFormat.JSONL):
        text = _big_doc(5) if fmt is DocFormat.JSON else _big_jsonl(5)
        sep = "" if fmt is DocFormat.JSONL else "\n      "
        for old, new in (
            ('"id": "u3"', '"id": "u3b"'),
            ('"id": "a2"', '"id": "renamed"'),
            (f'"id": "u4",{sep or " "}"role": "user"', f'"id": "u4",{sep or " "}"role": "system"'),
            ('"tool_call_id": "call_1"', '"tool_call_id": "call_11"'),
        ):
            assert old in text, old
            i = text.index(old)
            new_text = text[:i] + new + text[i + len(old) :]
            prev = parse_conversation(text, fmt)
            with monkeypatch.context() as m:
                m.setattr(incremental, "read_parsed", whole)
                res = reparse_conversation(prev, text, new_text, fmt)
            assert res is not None, (fmt, new)
            assert normalise(res) == normalise(parse_conversation(new_text, fmt))
            changed = [a is not b for a, b in zip(res.message_data, prev.message_data, strict=True)]
            assert sum(changed) == 1


def test_an_id_made_a_duplicate_is_read_as_a_whole_parse_reads_it() -> None:
    """Renaming a message to another's id: the whole list decides which is renamed (its
    index) and reports it; the re-read gives exactly that, and so does renaming it back."""
    for fmt in (DocFormat.JSON, DocFormat.JSONL):
        text = _big_doc(5) if fmt is DocFormat.JSON else _big_jsonl(5)
        i = text.index('"id": "u3"')
        dup = text[:i] + '"id": "u1"' + text[i + len('"id": "u3"') :]
        conv = parse_conversation(text, fmt)
        res = reparse_conversation(conv, text, dup, fmt)
        full = parse_conversation(dup, fmt)
        assert any("duplicate message id" in x.message for x in full.issues)
        assert res is None or normalise(res) == normalise(full)
        back = reparse_conversation(res or full, dup, text, fmt)
        assert back is None or normalise(back) == normalise(parse_conversation(text, fmt))


def test_pasting_and_deleting_messages_reads_only_those(monkeypatch: Any) -> None:
    """A message pasted in the middle, deleted again, and a span deleted from one
    message's content into a later one's: only the items the edit touched are read (the
    tree is not read again as a whole), and each result equals a whole parse."""
    import assembly.incremental as incremental

    def whole(*args: Any, **kwargs: Any) -> Conversation:
        raise AssertionError("the whole tree was read again")

    text = _big_doc(8)
    at = text.index('"id": "u4"') - len("{\n      ")
    pasted = '{"id": "p1", "role": "system", "content": "pasted"},\n    '
    a, b = text.index("question 5"), text.index("question 6")
    for start, end, new in ((at, at, pasted), (at, at + len(pasted), ""), (a + 3, b + 3, "")):
        prev = parse_conversation(text, DocFormat.JSON)
        new_text = text[:start] + new + text[end:]
        with monkeypatch.context() as m:
            m.setattr(incremental, "read_parsed", whole)
            res = reparse_conversation(prev, text, new_text, DocFormat.JSON)
        assert res is not None
        assert normalise(res) == normalise(parse_conversation(new_text, DocFormat.JSON))
        kept = {id(x) for x in prev.message_data}
        assert sum(id(x) not in kept for x in res.message_data) <= 2
        text = new_text if new else text


def test_messages_whose_id_is_their_place_are_read_again_when_places_move() -> None:
    """Without ids, a message's id is its index: pasting a message before others renames
    them all, as a whole parse does."""
    doc = [{"role": "user", "content": f"q{i}"} for i in range(6)]
    text = json.dumps(doc, indent=2)
    at = text.index('"content": "q3"') - len('{\n    "role": "user",\n    ')
    new_text = text[:at] + '{"role": "user", "content": "new"},\n  ' + text[at:]
    res = check_edit(text, new_text, DocFormat.JSON)
    assert res is not None
    assert [m.id for m in res.messages] == [str(i) for i in range(7)]


def test_views_of_messages_that_did_not_move_are_shared() -> None:
    """A view is a value (stored message, start, index): the next version takes the views
    of the messages standing where they stood (the head; the tail too when nothing moved),
    makes the others, and every view equals one made afresh for its version."""
    text = _big_doc(4)
    prev = parse_conversation(text, DocFormat.JSON)
    old_views = list(prev.messages)
    i = text.index("question 2")
    for new_text, moved in (
        (text[:i] + "Question" + text[i + len("question") :], False),  # same length
        (text[:i] + "a question" + text[i + len("question") :], True),  # two more characters
    ):
        res = reparse_conversation(prev, text, new_text, DocFormat.JSON)
        assert res is not None
        edited = next(k for k, m in enumerate(res.messages) if "uestion 2" in m.content)
        fresh = parse_conversation(new_text, DocFormat.JSON)
        assert list(res.messages) == list(fresh.messages)
        shared = [a is b for a, b in zip(res.messages, old_views, strict=True)]
        assert shared[:edited] == [True] * edited
        assert not shared[edited]
        after = shared[edited + 1 :]
        assert after == [not moved] * len(after)
        # The previous version's views still read the previous text.
        assert [v.range for v in prev.messages] == [v.range for v in old_views]


@pytest.mark.parametrize("fmt", [DocFormat.JSON, DocFormat.JSONL])
@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_a_byte_order_mark_an_editor_sends_is_read_as_whitespace(fmt: DocFormat, eol: str) -> None:
    """A text starting with U+FEFF (an editor may send the file's BOM in ``didOpen``) reads
    the messages of the text without it, one character later, and no error; typing it,
    deleting it and editing after it re-read as a whole read reads (it read no message).
    A U+FEFF anywhere else is a character: an error between values, as before."""
    text = (_big_doc(4) if fmt is DocFormat.JSON else _big_jsonl(4)).replace("\n", eol)
    plain = parse_conversation(text, fmt)
    marked = parse_conversation("\ufeff" + text, fmt)
    assert len(plain.messages) >= 8 and not marked.issues
    assert marked.syntax is not None and not marked.syntax[0]
    assert [m.range.start for m in marked.messages] == [m.range.start + 1 for m in plain.messages]
    assert [m.content for m in marked.messages] == [m.content for m in plain.messages]
    if fmt is DocFormat.JSONL:
        second = text.index("\n") + 1  # at a later line's start, it is not a BOM
        inner = parse_conversation(text[:second] + "\ufeff" + text[second:], fmt)
        assert inner.syntax is not None and inner.syntax[0][0].range.start == second
    at = text.index('"content": "') + len('"content": "')
    conv, incremental = plain, 0
    for start, end, new in [
        (0, 0, "\ufeff"),  # typed (or pasted) at the start
        (at + 1, at + 1, "x"),  # in the first message
        (len(text) // 2, len(text) // 2 + 30, ""),  # across messages
        (len(text) - 40, len(text) - 40, "\ufeff"),  # a character inside the last one
        (0, 1, ""),  # deleted
        (0, 0, "\ufeff"),
        (at + 2, at + 2, "y"),
    ]:
        new_text = text[:start] + new + text[end:]
        res = reparse_conversation(conv, text, new_text, fmt)
        full = parse_conversation(new_text, fmt)
        if res is not None:
            assert normalise(res) == normalise(full), (start, end, new)
            incremental += start > 0
        conv, text = (res if res is not None else full), new_text
        assert len(conv.messages) >= len(plain.messages) - 2
    assert incremental >= 3


def test_a_deletion_into_an_attached_files_text_closes_the_list_and_undoes() -> None:
    """Deleting from a message's text into the text of a file uploaded with it closes the
    message list there: the rest of the document is one syntax error (not one per message
    after it), the messages before it are read, and the undo reads them all again."""
    messages = [{"id": f"u{i}", "role": "user", "content": f"question {i}"} for i in range(12)]
    messages[5]["files"] = [{"file_id": "f1", "name": "notes.txt", "content": "file text"}]
    text = json.dumps({"messages": messages}, indent=2)
    a = text.index("question 5") + 3
    b = text.index("file text") + 3
    removed = text[a:b]
    closed, back = _chain(text, [(a, b, ""), (a, a, removed)])[1:]
    assert [m.id for m in closed.messages] == [f"u{i}" for i in range(6)]
    assert [i.message for i in closed.issues] == [
        "unexpected content after the end of the document"
    ]
    assert [m.id for m in back.messages] == [m["id"] for m in messages] and not back.issues


def _found(conv: Conversation) -> list[tuple[str, int, int]]:
    return [(i.message, i.range.start, i.range.end) for i in conv.issues]


def test_findings_outside_an_edit_are_kept_by_the_splice(monkeypatch: pytest.MonkeyPatch) -> None:
    """A document with findings of its own fields (unknown top-level keys, before and
    after the list: an SDK's fields) and of messages before and after the edit (a file
    without an id, a tool call without a function, rejected): edits between them splice
    the items read again into the list, the other findings kept, those after the edit
    moved, never a whole read (a 10 MB log with one such finding took 50 ms a keystroke
    for one); every version equals a whole parse. A finding of the list as a whole (an
    unknown key in a message) is still left to a whole read."""
    doc = json.loads(_big_doc())
    doc["messages"][9]["files"] = [{"name": "a.txt"}]  # a finding in a message
    doc["messages"][61]["files"] = [{"name": "b.txt"}]
    doc["messages"][4]["tool_calls"].append({"id": "call_x", "type": "function"})  # rejected
    doc["messages"][88]["tool_calls"].append({"id": "call_y", "type": "function"})
    text = json.dumps({"sdk_before": 1, **doc, "sdk_after": 2}, indent=2)
    conv = parse_conversation(text, DocFormat.JSON)
    assert len(conv.issues) == 6 and len(conv.rejected_calls) == 2

    def whole(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("read whole")

    at = text.index("question 20") + len("question")
    a, b = text.index("question 21") + 3, text.index("question 23") + 3
    new = '{"id": "n1", "role": "user", "content": "inserted"},\n    '
    middle = text.index('"id": "u25"') - len("{\n      ") - (b - a)  # (after the deletion)
    with monkeypatch.context() as m:
        m.setattr(incremental, "read_parsed", whole)
        chain = _chain(text, [(at, at, "x"), (at, at + 1, ""), (a, b, ""), (middle, middle, new)])
    last = chain[-1]
    assert len(last.issues) == 6 and len(last.rejected_calls) == 2
    shift = len(new) - (b - a)
    assert _found(last)[-1] == (_found(conv)[-1][0], *(p + shift for p in _found(conv)[-1][1:]))
    # Unknown message keys (a framework's own field, as SWE-agent's `thought`): one
    # finding each, after the messages', at the key's first place with a count of the
    # others. Typed into messages before, inside and after an edit, and the edits made
    # before the first place, across it and after it: spliced, equal to whole parses.
    keyed = text
    for n in (27, 12, 3):
        at = keyed.index(f'"content": "question {n}"')
        keyed = keyed[:at] + '"thought": "t", ' + keyed[at:]
    at = keyed.index('"content": "question 20"')
    a, b = keyed.index("question 11") + 3, keyed.index("question 13") + 3
    first = keyed.index('"content": "question 3"')
    early = keyed.index('"question 1"') + 3
    with monkeypatch.context() as m:
        m.setattr(incremental, "read_parsed", whole)
        chain = _chain(
            keyed,
            [
                (at, at, '"thought": "u", '),  # a place more
                (at, at + len('"thought": "u", '), ""),
                (a, b, ""),  # across a place: one fewer
                (first, first, '"plan": 1, '),  # a second key
                (early, early, "x"),  # before every place: all move
            ],
        )
    said = [[i.message for i in c.issues if "thought" in i.message] for c in chain]
    assert said[0] == ["unknown message key `thought` (and on 2 more messages): it is ignored"]
    assert said[1][0].startswith("unknown message key `thought` (and on 3 more")
    assert said[3][0].startswith("unknown message key `thought` (and on 1 more")
    assert any("`plan`" in i.message for i in chain[-1].issues)
    # A repeated id, a finding of the list as a whole, made or already there: read whole
    # (with unknown keys and without).
    for doc_text in (keyed, text):
        at = doc_text.index('"id": "u25"') + len('"id": "u')
        repeated = doc_text[:at] + "24" + doc_text[at + 2 :]
        typing = repeated.index("question 20") + 3
        for before, edit in ((doc_text, (at, at + 2, "24")), (repeated, (typing, typing, "x"))):
            with monkeypatch.context() as m:
                m.setattr(incremental, "read_parsed", whole)
                with pytest.raises(AssertionError, match="read whole"):
                    _chain(before, [edit])


def test_a_top_level_key_typed_before_the_messages_keeps_the_list() -> None:
    """A key typed character by character at the document's head (an SDK's field), in a
    document without findings, with findings (its own unknown key, a message's), with a
    field after the list, with an error after the list, and with the top-level object
    left unclosed (its error reported after the list's, at the document's start): every
    keystroke is re-read without the list being parsed again (its messages the same
    objects), equal to a whole parse; only the states where an open bracket takes the list
    into the new value (or just did) are declined (a 10 MB conversation was parsed whole
    on every keystroke of the head: 1.6 s)."""
    plain = _big_doc()
    doc = json.loads(plain)
    doc["messages"][5]["files"] = [{"name": "x"}]
    end = plain.rindex("}")
    broken = plain.replace('"question 7"', "tru")  # (an error inside the list)
    variants = [
        plain,
        json.dumps({"zzz": 1, **doc}, indent=2),
        json.dumps({**json.loads(plain), "tail_key": {"a": [1, 2]}}, indent=2),
        plain[:end] + ', "tail": tru\n}',
        broken[: broken.rindex("}")],
    ]

    def open_bracket(s: str) -> bool:
        return s.count("{") > s.count("}") or s.count("[") > s.count("]")

    typed = '\n  "sdk_field": {"a": [1, "x"]},'
    for text in variants:
        at = text.index("{") + 1
        conv = parse_conversation(text, DocFormat.JSON)
        for i, ch in enumerate(typed):
            new_text = text[: at + i] + ch + text[at + i :]
            res = reparse_conversation(conv, text, new_text, DocFormat.JSON)
            full = parse_conversation(new_text, DocFormat.JSON)
            swallowed = open_bracket(typed[: i + 1]) or open_bracket(typed[:i])
            assert (res is None) == swallowed, (text[-20:], typed[: i + 1])
            if res is not None:
                assert normalise(res) == normalise(full)
                assert res.syntax == full.syntax
                kept = zip(conv.message_data, res.message_data, strict=True)
                assert all(a is b for a, b in kept)
            conv, text = res or full, new_text
        assert conv.issues


_DATA = Path(__file__).resolve().parents[1] / "data"
_FORMATS = {".json": DocFormat.JSON, ".jsonl": DocFormat.JSONL, ".yml": DocFormat.YAML}


def test_keystrokes_in_real_logs_read_only_what_they_touch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Logs and prompt files nobody here wrote (``tests/data/real-logs``, SWE-agent's
    trajectories with their `agent`, `thought` and `action` on every message, and the
    GitHub Models prompt files of ``tests/data/yaml-real`` with their own top-level keys):
    a character typed in messages spread over each is re-read without the whole list
    being read again, and equals a whole parse. Before, 72 of these keystrokes in 9 of the
    logs and all 17 in the prompt files read every message again (their findings were not
    the edited message's)."""
    calls: list[int] = []
    real = incremental.read_parsed

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(incremental, "read_parsed", counted)
    paths = [*(_DATA / "real-logs").rglob("*"), *(_DATA / "yaml-real").rglob("*")]
    edits = with_findings = 0
    for path in sorted(paths):
        fmt = _FORMATS.get(path.suffix)
        if fmt is None:
            continue
        text = path.read_text(encoding="utf-8")
        conv = parse_conversation(text, fmt)
        if conv.source_format not in ("promptls", "openai-chat") or not conv.message_data:
            continue
        key = "content: " if fmt is DocFormat.YAML else '"content": "'
        spots = [at + len(key) + 1 for at in _all_at(text, key) if text[at + len(key)] != "\\"]
        # A tool response written without `tool_call_id` (Writer's log) takes the id of the
        # call it answers from the whole list's pairing: typing in it reads the list again.
        # Typing in the message of the call whose id was made up does not.
        paired = [
            (start + m.range.start, start + m.range.end)
            for m, start in zip(conv.message_data, conv.starts, strict=True)
            if m.role is Role.TOOL and m.tool_call_id_range is None
        ]
        spots = [at for at in spots if not any(a <= at < b for a, b in paired)]
        for at in spots[:: max(1, len(spots) // 8)][:8]:
            new_text = text[:at] + "x" + text[at:]
            res = reparse_conversation(conv, text, new_text, fmt, span=(at, at, at + 1))
            assert res is not None and not calls, (path.name, at)
            assert normalise(res) == normalise(parse_conversation(new_text, fmt)), path.name
            edits += 1
            with_findings += bool(conv.issues)
    assert edits >= 250 and with_findings >= 80, (edits, with_findings)


def _all_at(text: str, needle: str) -> list[int]:
    res, at = [], text.find(needle)
    while at >= 0:
        res.append(at)
        at = text.find(needle, at + 1)
    return res


def test_keystrokes_that_make_a_string_invalid_are_read_as_one_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A backslash typed before a letter that no escape starts with (``C:\\Users`` typed
    into a message), a control character, a lone surrogate's escape: findings inside a
    string. Such a keystroke, and every one after it in that message or anywhere else, is
    re-read from the message it is in, as any keystroke is (before, each read the whole
    list again: 750 ms a keystroke at 10 MB), and equals a whole parse."""

    def whole(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("read whole")

    text = _big_doc()
    at = text.index("question 20") + len("question")
    other = text.index("question 7") + len("question")
    typed = ["\\", "U", "s", "\x01", "\\", "u", "d", "8", "0", "0", "x"]
    edits = [(at + k, at + k, ch) for k, ch in enumerate(typed)]
    edits += [(other, other, "z"), (other, other + 1, "")]  # elsewhere, the findings there
    edits += [(at + len(typed) - k - 1, at + len(typed) - k, "") for k in range(len(typed))]
    with monkeypatch.context() as m:
        m.setattr(incremental, "read_parsed", whole)
        chain = _chain(text, edits)
    found = [len(c.issues) for c in chain]
    assert found[0] == found[-1] == 0 and max(found) == 2, found  # the escape, the control


@pytest.mark.parametrize("made_up", [None, "kept", "removed"])
def test_a_splice_that_removes_hundreds_of_messages_reads_as_a_whole_parse(
    made_up: str | None,
) -> None:
    """A deletion from one message's text into another's far below removes hundreds of
    messages at once (past ``_CARRY_IDS``): the replaced messages are checked to read
    alone only when some message of the previous version may not (a call without ``id``,
    whose made-up id pairs it with the response below it): whether that message is kept
    or removed, the re-read equals a whole parse, and a second edit on it as well."""
    text = _big_doc(120)
    if made_up == "kept":  # a call without ``id`` and its response without one, kept
        text = text.replace('"id": "call_2",', "", 1)
        text = text.replace('"tool_call_id": "call_2", ', "", 1)
    elif made_up == "removed":  # a removed call without ``id`` that a kept response
        # without one answered
        text = text.replace('"id": "call_60",', "", 1)
        text = text.replace('"tool_call_id": "call_115", ', "", 1)
    a = text.index('"question 5"') + 4
    b = text.index('"content": "r"', text.index('"id": "t110"')) + len('"content": "')
    first = check_edit(text, text[:a] + text[b:], DocFormat.JSON)
    assert first is not None
    assert len(first.messages) < 3 * 120 - 256
    if made_up is None:
        assert first._views.get("alone") is True  # known for the next edit
    else:
        assert "alone" not in first._views
    second_text = text[:a] + text[b:]
    at = second_text.index('"question 1"') + 3
    second = reparse_conversation(
        first, second_text, second_text[:at] + "x" + second_text[at:], DocFormat.JSON
    )
    assert second is not None
    whole = parse_conversation(second_text[:at] + "x" + second_text[at:], DocFormat.JSON)
    assert normalise(second) == normalise(whole)
    assert second._views.get("alone") is (True if made_up is None else None)
    assert parse_conversation(text, DocFormat.JSON).messages[-1].tool_call_id == "call_119"


def test_every_keystroke_in_a_log_whose_calls_have_no_id_reads_as_a_whole_parse() -> None:
    """Calls written without `id` (Writer, Ollama) and legacy `function_call`s get made-up
    ids, and responses without `tool_call_id` take them in conversation order. Typing in
    the message of such a call is now re-read alone (its made-up ids are its own, and the
    pairing's input is unchanged); every insertion and deletion of one character, anywhere,
    must still read as a whole parse does."""
    doc = [
        {"role": "user", "content": "What is the weather?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": "w", "arguments": '{"a": 1}'}},
                {"type": "function", "function": {"name": "t", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "content": "sunny"},
        {"role": "assistant", "function_call": {"name": "t", "arguments": "{}"}},
        {"role": "function", "name": "t", "content": "noon"},
        {"role": "tool", "content": "late"},
        {"role": "assistant", "content": "ok", "tool_calls": [{"function": {"name": "w"}}]},
        {"role": "user", "content": "thanks"},
    ]
    text = json.dumps(doc, indent=1)
    conv = parse_conversation(text, DocFormat.JSON)
    assert sum(c.synthesized_id for m in conv.message_data for c in m.tool_calls) == 4
    for at in range(1, len(text) - 1):
        for new_text, span in (
            (text[:at] + "x" + text[at:], (at, at, at + 1)),
            (text[:at] + text[at + 1 :], (at, at + 1, at)),
        ):
            res = reparse_conversation(conv, text, new_text, DocFormat.JSON, span=span)
            assert res is not None
            assert normalise(res) == normalise(parse_conversation(new_text, DocFormat.JSON)), at
