"""Codex CLI rollouts are read as the Responses request their session makes.

A rollout (``~/.codex/sessions/…/rollout-….jsonl``) is one ``{"timestamp", "type",
"payload"}`` event a line. These tests build rollouts in the shapes of real ones (two are in
``tests/data/real-logs/codex``) and check what the reader takes of them: the items of the
``response_item`` lines, the session's instructions and model, and a compaction replacing
the history as Codex rebuilds it (its ``replacement_history``, or the user messages and
the summary in Codex's words); an edit reads as a whole read reads it.
"""

from __future__ import annotations

import json
from typing import Any

from assembly.model import DocFormat, Role
from assembly.reading import parse_conversation
from tests.support.rereads import whole_reads_of_small_edits


def _line(kind: str, payload: dict[str, Any]) -> str:
    return json.dumps({"timestamp": "2026-01-01T00:00:00Z", "type": kind, "payload": payload})


def _said(role: str, text: str) -> str:
    part = {"type": "input_text" if role == "user" else "output_text", "text": text}
    return _line("response_item", {"type": "message", "role": role, "content": [part]})


META = _line("session_meta", {"id": "s", "cwd": "/r", "instructions": "You are Codex."})
CONTEXT = _line("turn_context", {"model": "gpt-5-codex", "cwd": "/r"})
BASE = [
    META,
    CONTEXT,
    _said("user", "<environment_context>cwd: /r</environment_context>"),
    _said("user", "Fix the bug"),
    _line(
        "response_item",
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "shell",
            "arguments": '{"command":["ls"]}',
        },
    ),
    _line("response_item", {"type": "function_call_output", "call_id": "c1", "output": "a.py"}),
    _said("assistant", "Fixed."),
    _line("event_msg", {"type": "agent_message", "message": "Fixed."}),
]


def _read(lines: list[str]) -> Any:
    return parse_conversation("\n".join(lines) + "\n", DocFormat.JSONL)


def test_a_rollout_is_read_as_the_responses_request_its_session_makes() -> None:
    conv = _read(BASE)
    assert conv.source_format == "openai-responses"
    assert conv.settings["model"] == "gpt-5-codex"
    assert [m.role for m in conv.messages] == [
        Role.USER,
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert not [i for i in conv.issues if i.severity == "error"], conv.issues


def test_a_compaction_with_its_replacement_history_replaces_the_items() -> None:
    replacement = [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Fix the bug"}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Summary: fixed."}],
        },
    ]
    conv = _read(
        [
            *BASE,
            _line("compacted", {"message": "", "replacement_history": replacement}),
            _said("user", "Thanks"),
        ]
    )
    assert [m.content for m in conv.messages] == ["Fix the bug", "Summary: fixed.", "Thanks"]


def test_a_compaction_without_it_keeps_the_user_messages_and_sends_the_summary() -> None:
    conv = _read(
        [*BASE, _line("compacted", {"message": "The bug is fixed."}), _said("user", "Thanks")]
    )
    contents = [m.content for m in conv.messages]
    assert contents[:2] == ["<environment_context>cwd: /r</environment_context>", "Fix the bug"]
    assert contents[2].startswith("Another language model started to solve this problem")
    assert contents[2].endswith("\nThe bug is fixed.")
    assert contents[3:] == ["Thanks"]
    # A second compaction keeps the user messages, not the first summary.
    again = _read(
        [*BASE, _line("compacted", {"message": "One."}), _line("compacted", {"message": "Two."})]
    )
    assert [m.content.endswith("\nTwo.") for m in again.messages] == [False, False, True]


def test_every_one_character_edit_reads_as_a_whole_read() -> None:
    text = "\n".join([*BASE, _line("compacted", {"message": "Done."})]) + "\n"
    assert whole_reads_of_small_edits(text, DocFormat.JSONL, step=7)
