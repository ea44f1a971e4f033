"""pi coding-agent sessions are read as the chat-completions request they send next.

A session (``~/.pi/agent/sessions/--<path>--/<time>_<id>.jsonl``) is a header line, then
entries; since version 2 each has an ``id`` and a ``parentId`` (a tree: the user may go back
and branch). These tests build sessions in the shapes of pi's own (a real one is in
``tests/data/real-logs/pi``) and check what the reader takes of them, as pi builds its
context: the current branch, the calls and their results, no failed or stopped turn, the
summary of a compaction and what it kept, a command the user ran in pi's words, the model;
ranges at the entries' own text; an edit read as a whole read reads it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from assembly.formats.pi import is_pi_session
from assembly.model import DocFormat, Role
from assembly.reading import parse_conversation
from assembly.syntax import parse_jsonl
from tests.support.rereads import whole_reads_of_small_edits

HEADER = {"type": "session", "version": 3, "id": "s-1", "cwd": "/repo", "timestamp": "t"}


def _entry(eid: str, parent: str | None, kind: str = "message", **kw: Any) -> dict[str, Any]:
    return {"type": kind, "id": eid, "parentId": parent, "timestamp": "t", **kw}


def _user(eid: str, parent: str | None, text: str) -> dict[str, Any]:
    return _entry(
        eid, parent, message={"role": "user", "content": [{"type": "text", "text": text}]}
    )


def _assistant(
    eid: str, parent: str | None, *blocks: Any, stop: str = "stop", model: str = "claude-sonnet-4-5"
) -> dict[str, Any]:
    message = {
        "role": "assistant",
        "content": list(blocks),
        "provider": "anthropic",
        "model": model,
        "stopReason": stop,
    }
    return _entry(eid, parent, message=message)


def _text(t: str) -> dict[str, str]:
    return {"type": "text", "text": t}


def _call(cid: str) -> dict[str, Any]:
    return {"type": "toolCall", "id": cid, "name": "read", "arguments": {"path": "a.py"}}


def _result(eid: str, parent: str, cid: str, out: str) -> dict[str, Any]:
    message = {"role": "toolResult", "toolCallId": cid, "toolName": "read", "content": [_text(out)]}
    return _entry(eid, parent, message=message)


def _read(entries: list[dict[str, Any]], header: dict[str, Any] = HEADER) -> tuple[str, Any]:
    text = "".join(json.dumps(e) + "\n" for e in [header, *entries])
    return text, parse_conversation(text, DocFormat.JSONL)


# A session: a question, a reply thinking and calling a tool, its result, the answer; then
# a turn stopped by the user, and a follow-up; the model changed between.
BASE = [
    _user("e1", None, "What is in a.py?"),
    _assistant(
        "e2", "e1", {"type": "thinking", "thinking": "Read it."}, _text("Reading."), _call("c1")
    ),
    _result("e3", "e2", "c1", "print('hi')"),
    _assistant("e4", "e3", _text("It prints hi.")),
    _entry("e5", "e4", "model_change", provider="openai", modelId="gpt-5"),
    _user("e6", "e5", "Run it"),
    _assistant("e7", "e6", _text("Running"), _call("c2"), stop="aborted", model="gpt-5"),
    _user("e8", "e7", "Never mind. Thanks!"),
]


def test_a_session_is_read_as_pi_builds_its_context() -> None:
    text, conv = _read(BASE)
    assert is_pi_session(parse_jsonl(text).root)  # type: ignore[arg-type]
    assert conv.source_format == "openai-chat"
    assert "pi coding-agent" in conv.source_format_why
    assert conv.settings["model"] == "gpt-5"
    assert not conv.issues, conv.issues
    msgs = conv.messages
    # The stopped turn is not sent (and so its call is no unanswered one).
    assert [(m.role, m.id) for m in msgs] == [
        (Role.USER, "e1"),
        (Role.ASSISTANT, "e2"),
        (Role.TOOL, "e3"),
        (Role.ASSISTANT, "e4"),
        (Role.USER, "e6"),
        (Role.USER, "e8"),
    ]
    assert msgs[1].content == "Reading."  # (its thinking is not counted)
    assert [(c.id, c.name, c.arguments) for c in msgs[1].tool_calls] == [
        ("c1", "read", {"path": "a.py"})
    ]
    assert (msgs[2].tool_call_id, msgs[2].content) == ("c1", "print('hi')")
    for m in msgs:
        assert text[m.range.start : m.range.end].startswith('{"type": "message"')


def test_only_the_current_branch_is_read() -> None:
    # The user went back to e2 and asked again: the branch is e1, e2, e5, e6.
    entries = [
        _user("e1", None, "Hi"),
        _assistant("e2", "e1", _text("Hello.")),
        _user("e3", "e2", "Tell a joke"),
        _assistant("e4", "e3", _text("A joke.")),
        _user("e5", "e2", "Tell a story"),
        _assistant("e6", "e5", _text("A story.")),
    ]
    _, conv = _read(entries)
    assert [m.id for m in conv.messages] == ["e1", "e2", "e5", "e6"]


def test_a_compaction_sends_its_summary_then_what_it_kept() -> None:
    entries = [
        _user("e1", None, "Old question"),
        _assistant("e2", "e1", _text("Old answer.")),
        _user("e3", "e2", "Recent question"),
        _assistant("e4", "e3", _text("Recent answer.")),
        _entry(
            "c", "e4", "compaction", summary="We talked.", firstKeptEntryId="e3", tokensBefore=9
        ),
        _user("e5", "c", "New question"),
    ]
    _, conv = _read(entries)
    assert [(m.role, m.id) for m in conv.messages] == [
        (Role.USER, "c"),
        (Role.USER, "e3"),
        (Role.ASSISTANT, "e4"),
        (Role.USER, "e5"),
    ]
    summary = conv.messages[0].content
    assert summary.startswith("The conversation history before this point was compacted")
    assert "<summary>\nWe talked.\n</summary>" in summary


def test_a_first_version_session_follows_its_lines() -> None:
    # Version 1: no ids; a compaction names the first line it kept by its index.
    v1 = {"type": "session", "id": "s", "cwd": "/r", "provider": "anthropic", "modelId": "m-1"}

    def msg(role: str, text: str) -> dict[str, Any]:
        return {"type": "message", "message": {"role": role, "content": [_text(text)]}}

    entries = [
        msg("user", "a"),
        msg("assistant", "b"),
        msg("user", "c"),
        {"type": "compaction", "summary": "S", "firstKeptEntryIndex": 3, "tokensBefore": 1},
        msg("user", "d"),
    ]
    _, conv = _read(entries, v1)
    assert [(m.id, m.content) for m in conv.messages][1:] == [("3", "c"), ("5", "d")]
    assert conv.messages[0].id == "4"
    assert conv.settings["model"] == "m-1"


def test_a_command_the_user_ran_is_sent_in_pis_words() -> None:
    ran = {"role": "bashExecution", "command": "ls", "output": "a.py", "exitCode": 2}
    hidden = {**ran, "command": "env", "excludeFromContext": True}
    entries = [
        _user("e1", None, "Hi"),
        _entry("e2", "e1", message=ran),
        _entry("e3", "e2", message=hidden),
        _entry(
            "e4", "e3", "custom_message", customType="x", content="From an extension.", display=True
        ),
        _entry("e5", "e4", "branch_summary", fromId="e1", summary="Tried another way."),
    ]
    _, conv = _read(entries)
    assert [m.id for m in conv.messages] == ["e1", "e2", "e4", "e5"]
    assert conv.messages[1].content == "Ran `ls`\n```\na.py\n```\n\nCommand exited with code 2"
    assert conv.messages[2].content == "From an extension."
    assert "summary of a branch" in conv.messages[3].content


def test_a_call_left_without_a_result_is_answered_as_pi_answers_it() -> None:
    # A compaction came between the call and its result: pi answers the call when the
    # next message comes. A call still running at the end of the file is unanswered.
    entries = [
        _user("e1", None, "Build it"),
        _assistant("e2", "e1", _call("c1")),
        _user("e3", "e2", "Go on"),
        _assistant("e4", "e3", _call("c2")),
    ]
    _, conv = _read(entries)
    assert [(m.role, m.id) for m in conv.messages] == [
        (Role.USER, "e1"),
        (Role.ASSISTANT, "e2"),
        (Role.TOOL, "c1/result"),
        (Role.USER, "e3"),
        (Role.ASSISTANT, "e4"),
    ]
    assert (conv.messages[2].tool_call_id, conv.messages[2].content) == (
        "c1",
        "No result provided",
    )


def test_title_lines_may_come_before_the_header() -> None:
    # Some versions write the session's title first (`{"type": "title", "v": 1, …}`).
    title = {"type": "title", "v": 1, "title": "A question"}
    text = "".join(json.dumps(e) + "\n" for e in [title, HEADER, *BASE[:4]])
    conv = parse_conversation(text, DocFormat.JSONL)
    assert "pi coding-agent" in conv.source_format_why
    assert [m.id for m in conv.messages] == ["e1", "e2", "e3", "e4"]


@pytest.mark.parametrize(
    "first",
    [
        '{"type": "session", "cwd": "/r"}',  # no id
        '{"type": "session_meta", "payload": {"id": "x"}}',  # a Codex CLI rollout
        '{"type": "session.start", "data": {}, "id": "x"}',  # a Copilot CLI session
        '{"type": "session", "id": "x", "role": "user", "content": "Hi"}',
        '{"type": "title", "title": "t"}\n{"role": "user", "content": "Hi"}',
    ],
)
def test_other_json_lines_are_no_pi_session(first: str) -> None:
    assert not is_pi_session(parse_jsonl(first + "\n").root)  # type: ignore[arg-type]


def test_every_one_character_edit_reads_as_a_whole_read() -> None:
    text, _ = _read(BASE)
    assert whole_reads_of_small_edits(text, DocFormat.JSONL, step=5)
