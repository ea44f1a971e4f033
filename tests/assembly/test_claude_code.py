"""Claude Code session transcripts are read as the Anthropic request their session sends.

A transcript (``~/.claude/projects/…/<session>.jsonl``) is one event a line; the messages
sit inside ``message`` objects, linked by ``uuid``/``parentUuid``. These tests build
transcripts line by line and check what the reader takes of them: the current branch only,
no subagent's sidechain, the history from the last compaction on, one message for the
lines of one streamed reply or of parallel calls' results, ranges that point at the lines'
own text, and an edit read as a whole read reads it.
"""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Any

import pytest

from assembly.documents import is_claude_code_transcript
from assembly.host import document_format
from assembly.model import DocFormat, Role
from assembly.reading import parse_conversation
from assembly.syntax import parse_jsonl
from tests.support.rereads import whole_reads_of_small_edits

SESSION = {"sessionId": "s-1", "cwd": "/repo", "version": "2.0.0", "userType": "external"}


def _line(kind: str, uuid: str, parent: str | None, message: Any = None, **kw: Any) -> str:
    obj: dict[str, Any] = {"type": kind, "uuid": uuid, "parentUuid": parent, **SESSION, **kw}
    if message is not None:
        obj["message"] = message
    return json.dumps(obj)


def _user(uuid: str, parent: str | None, content: Any, **kw: Any) -> str:
    return _line("user", uuid, parent, {"role": "user", "content": content}, **kw)


def _assistant(uuid: str, parent: str | None, msg_id: str, blocks: list[Any], **kw: Any) -> str:
    message = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": blocks,
        "stop_reason": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    return _line("assistant", uuid, parent, message, **kw)


def _text(t: str) -> dict[str, str]:
    return {"type": "text", "text": t}


def _use(call: str, name: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call, "name": name, "input": {"command": "ls"}}


def _result(call: str, out: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call, "content": out}


def _read(lines: list[str]) -> tuple[str, Any]:
    text = "\n".join(lines) + "\n"
    return text, parse_conversation(text, DocFormat.JSONL)


# A session: a question, a streamed reply of two blocks (two lines, one message id) whose
# second is two parallel calls, their two results (two lines), the answer.
BASE = [
    json.dumps({"type": "summary", "summary": "Listing files", "leafUuid": "a3"}),
    _user("u1", None, "What is in the repo?"),
    _assistant("a1", "u1", "msg_1", [_text("Let me look.")]),
    _assistant("a1b", "a1", "msg_1", [_use("toolu_1", "Bash"), _use("toolu_2", "Glob")]),
    _user("r1", "a1b", [_result("toolu_1", "README.md")], toolUseResult={"stdout": "README.md"}),
    _user("r2", "r1", [_result("toolu_2", "src/")]),
    _assistant("a3", "r2", "msg_2", [_text("A README and src/.")]),
]


def test_a_transcript_is_detected_and_read_as_an_anthropic_request() -> None:
    text, conv = _read(BASE)
    assert is_claude_code_transcript(parse_jsonl(text).root)  # type: ignore[arg-type]
    assert conv.source_format == "anthropic-messages"
    assert "Claude Code" in conv.source_format_why
    assert conv.settings == {"model": "claude-sonnet-4-5-20250929", "provider": "anthropic"}
    assert not [i for i in conv.issues if i.severity == "error"], conv.issues
    msgs = conv.messages
    # The streamed reply is one assistant message with both calls; each result is a tool
    # message; the ids are the lines' uuids.
    assert [(m.role, m.id) for m in msgs] == [
        (Role.USER, "u1"),
        (Role.ASSISTANT, "a1"),
        (Role.TOOL, "r1/0"),
        (Role.TOOL, "r1/1"),
        (Role.ASSISTANT, "a3"),
    ]
    assert msgs[1].content == "Let me look."
    assert [(c.id, c.name) for c in msgs[1].tool_calls] == [
        ("toolu_1", "Bash"),
        ("toolu_2", "Glob"),
    ]
    assert [(m.tool_call_id, m.content) for m in msgs[2:4]] == [
        ("toolu_1", "README.md"),
        ("toolu_2", "src/"),
    ]
    # Ranges point at the lines' own text.
    for m in msgs:
        assert text[m.range.start] == "{" and text[m.range.end - 1] == "}"
    assert text[msgs[0].range.start : msgs[0].range.end].startswith('{"role": "user"')


def test_only_the_current_branch_is_read() -> None:
    # The user edited their question: a second child of the summary line's parent (u1),
    # written later; the first reply's branch is abandoned.
    lines = [
        *BASE,
        _user("u2", None, "What is in src/?"),
        _assistant("a4", "u2", "msg_3", [_text("Only main.py.")]),
    ]
    _, conv = _read(lines)
    assert [m.id for m in conv.messages] == ["u2", "a4"]
    # A rewind to the middle: a new reply to the first question, after the results.
    lines = [*BASE, _assistant("a5", "u1", "msg_4", [_text("It holds a README.")])]
    _, conv = _read(lines)
    assert [(m.id, m.content) for m in conv.messages] == [
        ("u1", "What is in the repo?"),
        ("a5", "It holds a README."),
    ]


def test_results_that_hang_off_their_own_calls_are_on_the_branch() -> None:
    # Claude Code 2.1 parents each parallel call's result to its own call's line: the
    # branch from the last line passes through the second result only.
    lines = [
        _user("u1", None, "Search twice."),
        _assistant("c1", "u1", "msg_1", [_use("toolu_1", "WebSearch")]),
        _assistant("c2", "c1", "msg_1", [_use("toolu_2", "WebSearch")]),
        _user("r1", "c1", [_result("toolu_1", "one")]),
        _user("r2", "c2", [_result("toolu_2", "two")]),
        _assistant("a2", "r2", "msg_2", [_text("Both found.")]),
    ]
    _, conv = _read(lines)
    assert [(m.id, m.tool_call_id) for m in conv.messages] == [
        ("u1", None),
        ("c1", None),
        ("r1/0", "toolu_1"),
        ("r1/1", "toolu_2"),
        ("a2", None),
    ]
    # A result of a call the branch already answers is another branch's, not a second one.
    again = _user("r1b", "c1", [_result("toolu_1", "one, again")])
    _, conv = _read([*lines[:5], again, lines[5]])
    assert [m.content for m in conv.messages if m.role is Role.TOOL] == ["one", "two"]


def test_a_subagents_sidechain_is_not_the_sessions_request() -> None:
    side = [
        _user("s1", None, "Find the tests.", isSidechain=True),
        _assistant("s2", "s1", "msg_9", [_text("tests/ has three files.")], isSidechain=True),
    ]
    _, conv = _read([*BASE[:3], *side, *BASE[3:]])
    assert [m.id for m in conv.messages] == ["u1", "a1", "r1/0", "r1/1", "a3"]
    # A subagent's own file (its lines all sidechain) is its own session.
    _, conv = _read(side)
    assert [m.id for m in conv.messages] == ["s1", "s2"]


def test_the_history_starts_at_the_last_compaction() -> None:
    boundary = json.dumps(
        {
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": "b1",
            "parentUuid": None,
            "logicalParentUuid": "a3",
            "content": "Conversation compacted",
            **SESSION,
        }
    )
    summary = _user(
        "c1", "b1", "This session is being continued … (summary)", isCompactSummary=True
    )
    lines = [*BASE, boundary, summary, _assistant("a6", "c1", "msg_5", [_text("Continuing.")])]
    _, conv = _read(lines)
    assert [m.id for m in conv.messages] == ["c1", "a6"]


def test_lines_shown_but_not_sent_are_left_out() -> None:
    lines = [
        _user("u1", None, "Hi"),
        _assistant("e1", "u1", "msg_e", [_text("API Error: overloaded")], isApiErrorMessage=True),
        _user("v1", "e1", "(shown in the transcript only)", isVisibleInTranscriptOnly=True),
        _assistant("a1", "v1", "msg_1", [_text("Hello.")]),
    ]
    _, conv = _read(lines)
    assert [m.id for m in conv.messages] == ["u1", "a1"]


def test_lines_without_parent_links_are_read_in_file_order() -> None:
    lines = [
        json.dumps(
            {
                "type": "user",
                "sessionId": "s",
                "uuid": "m1",
                "message": {"role": "user", "content": "Hi"},
            }
        ),
        json.dumps(
            {
                "type": "assistant",
                "sessionId": "s",
                "uuid": "m2",
                "message": {"role": "assistant", "content": [_text("Hello.")]},
            }
        ),
        json.dumps(
            {
                "type": "user",
                "sessionId": "s",
                "uuid": "m3",
                "message": {"role": "user", "content": "Bye"},
            }
        ),
    ]
    _, conv = _read(lines)
    assert [(m.id, m.content) for m in conv.messages] == [
        ("m1", "Hi"),
        ("m2", "Hello."),
        ("m3", "Bye"),
    ]


def test_consecutive_user_lines_of_text_are_one_turn() -> None:
    lines = [
        _user(
            "u1", None, "Caveat: the messages below were generated by local commands.", isMeta=True
        ),
        _user("u2", "u1", "<command-name>/status</command-name>"),
        _assistant("a1", "u2", "msg_1", [_text("OK.")]),
    ]
    _, conv = _read(lines)
    assert [(m.id, m.role) for m in conv.messages] == [("u1", Role.USER), ("a1", Role.ASSISTANT)]
    assert "Caveat" in conv.messages[0].content and "/status" in conv.messages[0].content


def test_a_session_of_titles_and_snapshots_alone_is_a_transcript_with_no_message() -> None:
    # Claude Code writes files of `summary` lines (session titles) or file snapshots only.
    for lines in (
        [json.dumps({"type": "summary", "summary": "Fix the build", "leafUuid": "a9"})],
        [json.dumps({"type": "file-history-snapshot", "messageId": "u1", "snapshot": {}})],
    ):
        text, conv = _read(lines)
        assert is_claude_code_transcript(parse_jsonl(text).root)  # type: ignore[arg-type]
        assert conv.source_format == "anthropic-messages" and not conv.messages
        assert not conv.issues


def test_a_one_line_session_named_jsonl_is_read_as_json_lines() -> None:
    # A subagent's warm-up file is one line: its first characters say JSON, its name says
    # JSON Lines (Claude Code names sessions `<id>.jsonl`).
    line = _assistant("a1", None, "msg_1", [_text("Ready.")], isSidechain=True)
    assert document_format(PurePath("agent-3430b97e.jsonl"), line) is DocFormat.JSONL
    assert document_format(PurePath("x.ndjson"), line) is DocFormat.JSONL
    assert document_format(PurePath("agent-3430b97e.json"), line) is DocFormat.JSON
    conv = parse_conversation(line + "\n", DocFormat.JSONL)
    assert [m.id for m in conv.messages] == ["a1"]


@pytest.mark.parametrize(
    "first",
    [
        '{"type": "user", "message": {"role": "user", "content": "Hi"}}',  # no uuid nor session
        '{"role": "user", "content": "Hi"}',
        '{"type": "message", "role": "user", "content": "Hi"}',
    ],
)
def test_other_json_lines_are_no_transcript(first: str) -> None:
    assert not is_claude_code_transcript(parse_jsonl(first + "\n").root)  # type: ignore[arg-type]


def test_every_one_character_edit_reads_as_a_whole_read() -> None:
    text, _ = _read(BASE)
    # (A session is read whole; an edit that makes it another document may not be.)
    assert whole_reads_of_small_edits(text, DocFormat.JSONL, step=7)
