"""Hostile agent session files are read without an exception, and ranges stay in the text.

Copilot CLI, Gemini CLI and pi sessions are read by building a request of the session's
own nodes (``formats/copilot.py``, ``formats/gemini_cli.py``, ``formats/pi.py``): every
value found where the reader looks may have any JSON type, any id may repeat or be
missing, a rewind may name nothing. Hypothesis writes such sessions from each format's own
keys with values of any type; each must read (``parse_conversation`` never raises) into
messages whose ranges, and whose content ranges, lie in the text, and an edit must read as
a whole read reads it.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assembly.incremental import reparse_conversation
from assembly.model import DocFormat
from assembly.reading import parse_conversation

ANY = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
IDS = st.sampled_from(["a", "b", "c", ""]) | ANY


def _maybe(keys: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A dict holding any of ``keys`` (each with its strategy)."""
    return st.fixed_dictionaries({}, optional=keys)


COPILOT_DATA = _maybe(
    {
        "content": st.text(max_size=10) | ANY,
        "transformedContent": st.text(max_size=10) | ANY,
        "role": st.sampled_from(["system", "developer", "user"]) | ANY,
        "toolRequests": st.lists(
            _maybe({"toolCallId": IDS, "name": st.text(max_size=5) | ANY, "arguments": ANY}),
            max_size=3,
        )
        | ANY,
        "toolCallId": IDS,
        "result": _maybe({"content": st.text(max_size=10) | ANY}) | ANY,
        "error": _maybe({"message": st.text(max_size=10) | ANY}) | ANY,
        "parentToolCallId": IDS,
        "upToEventId": IDS,
        "summaryContent": st.text(max_size=10) | ANY,
        "success": ANY,
        "newModel": st.text(max_size=6) | ANY,
    }
)
COPILOT_EVENT = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            [
                "system.message",
                "user.message",
                "assistant.message",
                "tool.execution_complete",
                "session.snapshot_rewind",
                "session.compaction_complete",
                "session.model_change",
                "session.info",
            ]
        )
        | ANY,
        "data": COPILOT_DATA | ANY,
    },
    optional={"id": IDS},
)
GEMINI_CALL = _maybe(
    {
        "id": IDS,
        "name": st.text(max_size=5) | ANY,
        "args": ANY,
        "result": st.lists(
            _maybe(
                {
                    "functionResponse": _maybe(
                        {"response": _maybe({"output": ANY, "error": ANY}) | ANY}
                    )
                }
            )
            | ANY,
            max_size=2,
        )
        | ANY,
    }
)
GEMINI_RECORD = st.one_of(
    st.fixed_dictionaries(
        {"id": IDS, "type": st.sampled_from(["user", "gemini", "info"]) | ANY},
        optional={
            "content": st.text(max_size=10)
            | st.lists(_maybe({"text": st.text(max_size=6) | ANY}), max_size=3)
            | ANY,
            "toolCalls": st.lists(GEMINI_CALL, max_size=3) | ANY,
            "model": st.text(max_size=6) | ANY,
        },
    ),
    st.fixed_dictionaries({"$rewindTo": IDS}),
    st.fixed_dictionaries({"$set": ANY}),
)


PI_MESSAGE = _maybe(
    {
        "role": st.sampled_from(["user", "assistant", "toolResult", "bashExecution", "custom"])
        | ANY,
        "content": st.text(max_size=8)
        | st.lists(
            _maybe(
                {
                    "type": st.sampled_from(["text", "toolCall", "thinking"]) | ANY,
                    "text": ANY,
                    "id": IDS,
                    "name": ANY,
                    "arguments": ANY,
                }
            ),
            max_size=3,
        )
        | ANY,
        "toolCallId": IDS,
        "stopReason": st.sampled_from(["stop", "aborted"]) | ANY,
        "command": ANY,
        "output": ANY,
        "exitCode": ANY,
        "model": ANY,
    }
)
PI_ENTRY = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            ["message", "compaction", "model_change", "custom_message", "branch_summary"]
        )
        | ANY
    },
    optional={
        "id": IDS,
        "parentId": IDS,
        "message": PI_MESSAGE | ANY,
        "summary": ANY,
        "firstKeptEntryId": IDS,
        "firstKeptEntryIndex": ANY,
        "modelId": ANY,
        "content": ANY,
    },
)


def _lines(first: dict[str, Any], rest: list[Any]) -> str:
    return "".join(json.dumps(x) + "\n" for x in [first, *rest])


def _check(text: str, fmt: DocFormat) -> None:
    conv = parse_conversation(text, fmt)
    n = len(text)
    for m in conv.messages:
        assert 0 <= m.range.start <= m.range.end <= n
        if m.content_range is not None:  # (None: no content, a reply of calls alone)
            assert 0 <= m.content_range.start <= m.content_range.end <= n
    # An edit at the middle reads as a whole read reads it.
    at = n // 2
    new = text[:at] + " " + text[at:]
    again = reparse_conversation(conv, text, new, fmt, span=(at, at, at + 1))
    if again is not None:
        fresh = parse_conversation(new, fmt)
        assert [(m.id, m.content) for m in again.messages] == [
            (m.id, m.content) for m in fresh.messages
        ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(COPILOT_EVENT, max_size=8))
def test_any_copilot_session_reads(events: list[dict[str, Any]]) -> None:
    start = {"type": "session.start", "data": {"sessionId": "s"}, "id": "start"}
    text = _lines(start, events)
    conv = parse_conversation(text, DocFormat.JSONL)
    assert "Copilot CLI" in conv.source_format_why
    _check(text, DocFormat.JSONL)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(GEMINI_RECORD, max_size=8))
def test_any_gemini_cli_session_reads(records: list[dict[str, Any]]) -> None:
    meta = {"sessionId": "s", "projectHash": "h"}
    text = _lines(meta, records)
    assert "Gemini CLI" in parse_conversation(text, DocFormat.JSONL).source_format_why
    _check(text, DocFormat.JSONL)
    legacy = json.dumps({**meta, "messages": records})
    assert "Gemini CLI" in parse_conversation(legacy, DocFormat.JSON).source_format_why
    _check(legacy, DocFormat.JSON)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PI_ENTRY, max_size=8))
def test_any_pi_session_reads(entries: list[dict[str, Any]]) -> None:
    text = _lines({"type": "session", "id": "s", "version": 3}, entries)
    assert "pi coding-agent" in parse_conversation(text, DocFormat.JSONL).source_format_why
    _check(text, DocFormat.JSONL)
