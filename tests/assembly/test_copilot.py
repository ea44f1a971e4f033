"""GitHub Copilot CLI sessions are read as the chat-completions request they send next.

A session (``~/.copilot/session-state/<id>/events.jsonl``) is one event a line,
``{"type", "data", "id", "timestamp", "parentId"}``. These tests build sessions event by
event (in the shapes of a real Copilot CLI 1.0 session, ``tests/data/real-logs/copilot``)
and check what the reader takes of them: the last system prompt, the prompts as sent, the
replies and their calls, each call's result, no subagent's events, what a rewind took back,
the summary of a compaction in place of what it summarised, ranges that point at the
events' own text, and an edit read as a whole read reads it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from assembly.formats.copilot import is_copilot_session
from assembly.model import DocFormat, Role
from assembly.reading import parse_conversation
from assembly.syntax import parse_jsonl
from tests.support.rereads import whole_reads_of_small_edits

_n = iter(range(1, 1000))


def _event(kind: str, data: dict[str, Any], eid: str | None = None) -> str:
    eid = eid or f"e{next(_n)}"
    return json.dumps(
        {"type": kind, "data": data, "id": eid, "timestamp": "2026-04-23T17:08:08.908Z"},
        ensure_ascii=False,
    )


def _start(model: str | None = None) -> str:
    data: dict[str, Any] = {"sessionId": "s-1", "version": 1, "producer": "copilot-agent"}
    if model:
        data["selectedModel"] = model
    return _event("session.start", data, "start")


def _system(content: str, eid: str, role: str = "system") -> str:
    return _event("system.message", {"role": role, "content": content}, eid)


def _user(content: str, eid: str, sent: str | None = None) -> str:
    data: dict[str, Any] = {"content": content, "attachments": []}
    if sent is not None:
        data["transformedContent"] = sent
    return _event("user.message", data, eid)


def _assistant(eid: str, content: str = "", calls: Any = (), **data: Any) -> str:
    requests = [
        {"toolCallId": c, "name": name, "arguments": args, "type": "function"}
        for c, name, args in calls
    ]
    return _event(
        "assistant.message",
        {"messageId": f"m-{eid}", "content": content, "toolRequests": requests, **data},
        eid,
    )


def _done(call: str, eid: str, out: str | None = None, error: str | None = None, **kw: Any) -> str:
    body: dict[str, Any] = {"toolCallId": call, "success": error is None, **kw}
    if out is not None:
        body["result"] = {"content": out, "detailedContent": f"{out}\n(detail)"}
    if error is not None:
        body["error"] = {"message": error, "code": "failure"}
    return _event("tool.execution_complete", body, eid)


def _read(lines: list[str]) -> tuple[str, Any]:
    text = "\n".join(lines) + "\n"
    return text, parse_conversation(text, DocFormat.JSONL)


# A session: the system prompt, the model changed, a prompt (the CLI adds the date), a reply
# with two calls, their results (the second failed), the system prompt written again before
# the next prompt, and the answer.
BASE = [
    _start("gpt-5"),
    _event("session.model_change", {"newModel": "claude-sonnet-4.6"}),
    _system("You are the GitHub Copilot CLI.", "sys1"),
    _user("List the repo", "u1", sent="<current_datetime>2026-04-24</current_datetime>\n\nList"),
    _event("assistant.turn_start", {"turnId": "0"}),
    _assistant(
        "a1", "Looking.", [("call_1", "view", {"path": "/"}), ("call_2", "bash", {"c": "ls"})]
    ),
    _event("tool.execution_start", {"toolCallId": "call_1", "toolName": "view"}),
    _done("call_1", "r1", out="README.md\nsrc"),
    _done("call_2", "r2", error="permission denied"),
    _event("assistant.turn_end", {"turnId": "0"}),
    _system("You are the GitHub Copilot CLI. Today: 2026-04-24.", "sys2"),
    _user("Thanks", "u2"),
    _assistant("a2", "You're welcome."),
    _event("session.shutdown", {"shutdownType": "routine", "currentModel": "claude-sonnet-4.6"}),
]


def test_a_session_is_detected_and_read_as_a_chat_completions_request() -> None:
    text, conv = _read(BASE)
    assert is_copilot_session(parse_jsonl(text).root)  # type: ignore[arg-type]
    assert conv.source_format == "openai-chat"
    assert "Copilot CLI" in conv.source_format_why
    assert conv.settings["model"] == "claude-sonnet-4.6"
    assert not conv.issues, conv.issues
    msgs = conv.messages
    assert [(m.role, m.id) for m in msgs] == [
        (Role.SYSTEM, "sys2"),
        (Role.USER, "u1"),
        (Role.ASSISTANT, "a1"),
        (Role.TOOL, "r1"),
        (Role.TOOL, "r2"),
        (Role.USER, "u2"),
        (Role.ASSISTANT, "a2"),
    ]
    # The last system prompt is the one sent; the prompt as the CLI sent it.
    assert msgs[0].content == "You are the GitHub Copilot CLI. Today: 2026-04-24."
    assert msgs[1].content.startswith("<current_datetime>")
    # The calls (their arguments read from the API's JSON text); each result (a failure's
    # message).
    assert [(c.id, c.name, c.arguments) for c in msgs[2].tool_calls] == [
        ("call_1", "view", {"path": "/"}),
        ("call_2", "bash", {"c": "ls"}),
    ]
    assert [(m.tool_call_id, m.content) for m in msgs[3:5]] == [
        ("call_1", "README.md\nsrc"),
        ("call_2", "permission denied"),
    ]
    # Ranges point at the events' own text: a message at its line, its content at its string.
    for m in msgs:
        assert text[m.range.start] == "{" and text[m.range.end - 1] == "}"
        assert text[m.range.start : m.range.end].startswith('{"type": ')
    u1 = msgs[1]
    assert json.loads(text[u1.content_range.start : u1.content_range.end]) == u1.content


def test_a_developer_message_is_the_system_prompt() -> None:
    _, conv = _read([_start(), _system("Be brief.", "s", role="developer"), _user("Hi", "u")])
    assert [(m.role, m.content) for m in conv.messages] == [
        (Role.SYSTEM, "Be brief."),
        (Role.USER, "Hi"),
    ]


def test_a_subagents_events_are_not_the_sessions_request() -> None:
    # As Copilot CLI 1.0.8x writes a `task` run: the subagent's events carry
    # `parentToolCallId`, its opening prompt (a `user.message`) does not; in the background
    # the user may go on talking to the session meanwhile.
    lines = [
        _start(),
        _user("Explore", "u1"),
        _assistant("a1", "", [("task_1", "task", {"prompt": "look around"})]),
        _event("tool.execution_start", {"toolCallId": "task_1", "toolName": "task"}),
        _event("subagent.started", {"toolCallId": "task_1", "agentName": "explore"}),
        _user("look around", "sp"),
        _user("meanwhile, what time is it?", "u2"),
        _assistant("s1", "", [("sub_1", "grep", {"q": "x"})], parentToolCallId="task_1"),
        _done("sub_1", "sr1", out="found", parentToolCallId="task_1"),
        _assistant("s2", "Found x.", parentToolCallId="task_1"),
        _done("task_1", "r1", out="x is in a.py"),
        _assistant("a2", "x is in a.py."),
    ]
    _, conv = _read(lines)
    assert [m.id for m in conv.messages] == ["u1", "a1", "u2", "r1", "a2"]
    # Newer sessions mark a subagent's events with an `agentId` of their own.
    marked = json.loads(_user("Found it: a.py", "sp2"))
    marked["agentId"] = "task_1"
    _, conv = _read([*lines, json.dumps(marked)])
    assert [m.id for m in conv.messages] == ["u1", "a1", "u2", "r1", "a2"]


def test_a_result_may_be_a_string_and_the_reply_names_the_model_in_auto_mode() -> None:
    lines = [
        _start(),
        _event("session.model_change", {"newModel": "auto"}),
        _user("Start it", "u1"),
        _assistant(
            "a1", "", [("c1", "task", {"prompt": "p", "mode": "background"})], model="mai-1"
        ),
        _event(
            "tool.execution_complete",
            {"toolCallId": "c1", "success": True, "result": "Agent started in background."},
            "r1",
        ),
    ]
    _, conv = _read(lines)
    assert [(m.id, m.content) for m in conv.messages][2:] == [
        ("r1", "Agent started in background.")
    ]
    assert conv.settings["model"] == "mai-1"


def test_a_result_the_session_does_not_hold_answers_nothing() -> None:
    # A tool run without its result written: the call is unanswered, which is what the
    # session says (promptls reports the call; it does not make up an answer).
    lines = [
        _start(),
        _user("Run it", "u1"),
        _assistant("a1", "", [("call_1", "bash", {"command": "make"})]),
        _event("tool.execution_complete", {"toolCallId": "call_1", "success": True}),
    ]
    _, conv = _read(lines)
    assert [m.id for m in conv.messages] == ["u1", "a1"]


def test_a_rewind_takes_back_the_events_after_the_one_it_names() -> None:
    lines = [
        _start(),
        _user("First try", "u1"),
        _assistant("a1", "Answer one."),
        _user("No, wrong", "u2"),
        _assistant("a2", "Answer two."),
        _event("session.snapshot_rewind", {"upToEventId": "a1", "eventsRemoved": 2}),
        _user("Second try", "u3"),
        _assistant("a3", "Answer three."),
    ]
    _, conv = _read(lines)
    assert [m.id for m in conv.messages] == ["u1", "a1", "u3", "a3"]
    # A rewind naming no event takes nothing back.
    _, conv = _read([*lines, _event("session.snapshot_rewind", {"upToEventId": "zz"})])
    assert [m.id for m in conv.messages] == ["u1", "a1", "u3", "a3"]


def test_a_compaction_sends_its_summary_in_place_of_what_it_summarised() -> None:
    lines = [
        _start(),
        _system("System.", "sys"),
        _user("Old question", "u1"),
        _assistant("a1", "Old answer."),
        _event("session.compaction_start", {}),
        _event(
            "session.compaction_complete",
            {"success": True, "summaryContent": "We discussed an old question."},
            "c1",
        ),
        _user("New question", "u2"),
        _event("session.compaction_complete", {"success": False, "error": "too short"}, "c2"),
    ]
    _, conv = _read(lines)
    assert [(m.role, m.id) for m in conv.messages] == [
        (Role.SYSTEM, "sys"),
        (Role.USER, "c1"),
        (Role.USER, "u2"),
    ]
    assert conv.messages[1].content == "We discussed an old question."
    # A compaction whose summary the log does not hold (the CLI keeps it in a checkpoint
    # file): what it replaced is still not sent.
    lines.insert(6, _event("session.compaction_complete", {"success": True}, "c0"))
    _, conv = _read(lines)
    assert [m.id for m in conv.messages] == ["sys", "u2"]


def test_a_session_without_a_prompt_has_no_turn() -> None:
    _, conv = _read([_start(), _event("session.info", {"infoType": "model", "message": "x"})])
    assert conv.messages == ()


@pytest.mark.parametrize(
    "first",
    [
        '{"type": "human", "data": {"content": "Hi"}}',  # a LangChain message dump
        '{"type": "response_item", "payload": {"type": "message"}}',  # a Codex rollout
        '{"type": "user", "uuid": "u", "message": {"role": "user", "content": "Hi"}}',
        '{"type": "session.start", "data": "not an object"}',
        '{"role": "user", "content": "Hi"}',
    ],
)
def test_other_json_lines_are_no_copilot_session(first: str) -> None:
    assert not is_copilot_session(parse_jsonl(first + "\n").root)  # type: ignore[arg-type]


def test_every_one_character_edit_reads_as_a_whole_read() -> None:
    text, _ = _read(BASE)
    # (A session is read whole; an edit that makes it another document may not be.)
    assert whole_reads_of_small_edits(text, DocFormat.JSONL, step=5)
