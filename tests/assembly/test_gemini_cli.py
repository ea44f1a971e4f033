"""Gemini CLI sessions are read as the chat-completions request they send next.

A session (``~/.gemini/tmp/<project>/chats/session-….jsonl``) is a metadata line, then
message records (``user``, ``gemini``, ``info``…) that a later line with the same ``id``
replaces, metadata updates (``$set``) and rewinds (``$rewindTo``); the earlier sessions are
one JSON object with ``messages``. These tests build sessions in the shapes of a real one
(``tests/data/real-logs/gemini-cli``) and check what the reader takes of them, as Gemini
CLI rebuilds the history it resumes: the last version of each record, no terminal message
or slash command, each call and its result, the model; both syntaxes alike; ranges at the
records' own text; an edit read as a whole read reads it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from assembly.formats.gemini_cli import is_gemini_cli_session
from assembly.incremental import reparse_conversation
from assembly.model import DocFormat, Role
from assembly.reading import parse_conversation
from assembly.syntax import parse_json, parse_jsonl
from tests.support.rereads import whole_reads_of_small_edits

META = {"sessionId": "s-1", "projectHash": "9da8b3", "startTime": "2026-04-23T12:52:52Z"}


def _user(rid: str, content: Any) -> dict[str, Any]:
    return {"id": rid, "timestamp": "2026-04-23T12:53:05Z", "type": "user", "content": content}


def _gemini(rid: str, text: str = "", calls: Any = (), model: str = "gemini-2.5-pro") -> dict:
    record: dict[str, Any] = {
        "id": rid,
        "type": "gemini",
        "content": text,
        "thoughts": [{"subject": "Planning", "description": "I will read the files first."}],
        "tokens": {"input": 100, "output": 10},
        "model": model,
    }
    if calls:
        record["toolCalls"] = list(calls)
    return record


def _call(cid: str, name: str, args: dict[str, Any], response: Any) -> dict[str, Any]:
    result = (
        response
        if isinstance(response, str)
        else [{"functionResponse": {"id": cid, "name": name, "response": response}}]
    )
    return {"id": cid, "name": name, "args": args, "result": result, "status": "success"}


# A session: the CLI's notice, a slash command, a prompt of two text parts, a reply written
# twice (first without its calls, then with them and their results: an output, an error,
# an object, a bare string), the date updated between them, and the answer.
CALLS = [
    _call("c1", "read_file", {"file_path": "README.md"}, {"output": "# Title"}),
    _call("c2", "read_file", {"file_path": "missing.md"}, {"error": "File not found"}),
    _call("c3", "glob", {"pattern": "*.py"}, {"files": ["a.py"], "count": 1}),
    _call("c4", "run_shell_command", {"command": "ls"}, "a.py\nREADME.md"),
]
RECORDS: list[dict[str, Any]] = [
    {"id": "i1", "type": "info", "content": "Empty GEMINI.md created."},
    _user("u0", [{"text": "/init"}]),
    _user("u1", [{"text": "Read the README"}, {"text": " and list files."}]),
    _gemini("g1"),
    {"$set": {"lastUpdated": "2026-04-23T12:53:11Z"}},
    _gemini("g1", calls=CALLS),
    _gemini("g2", "Done: a README and a.py.", model="gemini-3-flash-preview"),
]


def _jsonl(records: list[dict[str, Any]]) -> str:
    lines = [META, *records]
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines)


def test_a_session_is_read_as_gemini_cli_rebuilds_it() -> None:
    text = _jsonl(RECORDS)
    assert is_gemini_cli_session(parse_jsonl(text).root, DocFormat.JSONL)  # type: ignore[arg-type]
    conv = parse_conversation(text, DocFormat.JSONL)
    assert conv.source_format == "openai-chat"
    assert "Gemini CLI" in conv.source_format_why
    assert conv.settings["model"] == "gemini-3-flash-preview"
    assert not conv.issues, conv.issues
    msgs = conv.messages
    assert [(m.role, m.id) for m in msgs] == [
        (Role.USER, "u1"),
        (Role.ASSISTANT, "g1"),
        (Role.TOOL, "g1/0"),
        (Role.TOOL, "g1/1"),
        (Role.TOOL, "g1/2"),
        (Role.TOOL, "g1/3"),
        (Role.ASSISTANT, "g2"),
    ]
    # (Two text parts, as the request sends them: read as any message's parts are.)
    assert msgs[0].content == "Read the README\n and list files."
    # The reply's last version: its calls, each answered; thoughts are not sent as text.
    assert [(c.id, c.name, c.arguments) for c in msgs[1].tool_calls] == [
        ("c1", "read_file", {"file_path": "README.md"}),
        ("c2", "read_file", {"file_path": "missing.md"}),
        ("c3", "glob", {"pattern": "*.py"}),
        ("c4", "run_shell_command", {"command": "ls"}),
    ]
    assert not msgs[1].content
    assert [(m.tool_call_id, m.content) for m in msgs[2:6]] == [
        ("c1", "# Title"),
        ("c2", "File not found"),
        ("c3", '{"files":["a.py"],"count":1}'),
        ("c4", "a.py\nREADME.md"),
    ]
    # Ranges point at the records' own text: a message at its record, a result at its text.
    assert text[msgs[1].range.start : msgs[1].range.end].startswith('{"id": "g1"')
    assert "toolCalls" in text[msgs[1].range.start : msgs[1].range.end]
    c1 = msgs[2]
    assert json.loads(text[c1.range.start : c1.range.end]) == "# Title"


def test_the_earlier_sessions_one_json_object_read_alike() -> None:
    text = json.dumps({**META, "lastUpdated": "x", "messages": RECORDS}, indent=2)
    assert is_gemini_cli_session(parse_json(text).root, DocFormat.JSON)  # type: ignore[arg-type]
    conv = parse_conversation(text, DocFormat.JSON)
    lines = parse_conversation(_jsonl(RECORDS), DocFormat.JSONL)
    assert [(m.id, m.role, m.content) for m in conv.messages] == [
        (m.id, m.role, m.content) for m in lines.messages
    ]
    assert not conv.issues


def test_a_rewind_takes_back_the_record_it_names_and_those_after() -> None:
    records = [
        _user("u1", "First try"),
        _gemini("g1", "Answer one."),
        _user("u2", "No, wrong"),
        _gemini("g2", "Answer two."),
        {"$rewindTo": "u2"},
        _user("u3", "Second try"),
        _gemini("g3", "Answer three."),
    ]
    conv = parse_conversation(_jsonl(records), DocFormat.JSONL)
    assert [m.id for m in conv.messages] == ["u1", "g1", "u3", "g3"]
    # A rewind to an id the session does not hold takes back every record before it (as
    # Gemini CLI's own loader does).
    conv = parse_conversation(
        _jsonl([*records, {"$rewindTo": "zz"}, _user("u4", "Again")]), DocFormat.JSONL
    )
    assert [m.id for m in conv.messages] == ["u4"]


def test_a_set_of_the_messages_is_the_list_and_thoughts_are_not_counted() -> None:
    # As Gemini CLI writes them: a `$set` may state the whole message list (its loader then
    # takes that list), and a reply's parts may hold its thoughts (`"thought": true`).
    stated = [
        _user("u1", [{"text": "Explain it"}]),
        {
            "id": "g1",
            "type": "gemini",
            "content": [{"text": "Thinking about it", "thought": True}, {"text": "It moves."}],
        },
    ]
    records = [_user("old", "Gone"), {"$set": {"messages": stated, "lastUpdated": "t"}}]
    conv = parse_conversation(_jsonl(records), DocFormat.JSONL)
    assert [(m.id, m.content) for m in conv.messages] == [("u1", "Explain it"), ("g1", "It moves.")]


@pytest.mark.parametrize(
    "content", ["", "   ", "/compress", "?", "<session_context>cwd: /repo</session_context>"]
)
def test_commands_and_the_clis_own_context_are_not_sent(content: str) -> None:
    conv = parse_conversation(_jsonl([_user("u0", content), _user("u1", "Hi")]), DocFormat.JSONL)
    assert [m.id for m in conv.messages] == ["u1"]


@pytest.mark.parametrize(
    "first",
    [
        '{"sessionId": "s", "messages": []}',  # no projectHash
        '{"type": "session.start", "data": {"sessionId": "s"}}',  # a Copilot CLI session
        '{"sessionId": "s", "projectHash": "h", "role": "user", "content": "Hi"}',
        '{"role": "user", "content": "Hi"}',
    ],
)
def test_other_json_lines_are_no_gemini_cli_session(first: str) -> None:
    root = parse_jsonl(first + "\n").root
    assert not is_gemini_cli_session(root, DocFormat.JSONL)  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", [DocFormat.JSONL, DocFormat.JSON])
def test_every_one_character_edit_reads_as_a_whole_read(fmt: DocFormat) -> None:
    text = _jsonl(RECORDS) if fmt is DocFormat.JSONL else json.dumps({**META, "messages": RECORDS})
    assert whole_reads_of_small_edits(text, fmt, step=5)


def test_a_chat_document_becomes_a_session_when_its_keys_say_so() -> None:
    # An edit that adds the session's keys to a chat-completions document: read as a whole
    # read reads it, a Gemini CLI session.
    before = '{"messages": [{"id": "u1", "type": "user", "content": "Hi"}]}'
    after = before.replace("{", '{"sessionId": "s", "projectHash": "h", ', 1)
    prev = parse_conversation(before, DocFormat.JSON)
    again = reparse_conversation(
        prev, before, after, DocFormat.JSON, span=(1, 1, len(after) - len(before) + 1)
    )
    fresh = parse_conversation(after, DocFormat.JSON)
    assert "Gemini CLI" in fresh.source_format_why
    assert again is None or [(m.id, m.content) for m in again.messages] == [
        (m.id, m.content) for m in fresh.messages
    ]
