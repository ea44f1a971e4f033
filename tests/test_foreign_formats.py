"""Formats users keep conversations in that promptls does not read (ShareGPT datasets,
Gemini requests and interactions, Bedrock Converse requests): one finding at the key that
tells the format, naming it.

Before, a ShareGPT record said "missing `messages`: the conversation has no message list" at
its first character (or "message has no `role`" per record), leaving the user to guess why.
The real file and its source are in ``tests/data/foreign-formats/MANIFEST.md``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from server.workspace import analyze

FOLDER = Path(__file__).resolve().parent / "data" / "foreign-formats"
SHAREGPT = "this looks like a ShareGPT record (`conversations` of `from`/`value` turns)"
SHAREGPT_TURN = "this looks like a ShareGPT turn (`from`/`value`)"
GEMINI = "this looks like a Gemini request (`contents` of `role`/`parts` turns)"
GEMINI_TURN = "this looks like a Gemini turn (`role`/`parts`)"
INTERACTIONS = "this looks like a Gemini Interactions request (`input` with `generation_config`)"
CONVERSE = (
    "this looks like a Bedrock Converse request (`messages` of untyped `text`/`toolUse` blocks)"
)


def _errors(path: Path, root: Path) -> list[tuple[str, str, int]]:
    a = analyze(path, root=root)
    return [
        (d.code, d.message, d.range.start) for d in a.diagnostics if d.severity.value == "error"
    ]


def test_the_real_sharegpt_dataset_is_named_at_its_conversations_key(tmp_path: Path) -> None:
    name = "llama-factory-glaive-toolcall-en-demo-record3.conv.json"
    doc = tmp_path / name
    shutil.copy(FOLDER / name, doc)
    text = doc.read_text(encoding="utf-8")
    assert _errors(doc, tmp_path) == [
        (
            "schema-error",
            f"message has no `role`: {SHAREGPT}, which promptls does not read; write OpenAI "
            "chat messages (`messages` of `role`/`content`); it is left out",
            text.index('"conversations"'),
        )
    ]
    assert name in (FOLDER / "MANIFEST.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "key", "what"),
    [
        # Its `system` made it an Anthropic request: "unsupported content block type
        # (none)", the user's text left out, and `inferenceConfig` an unknown key.
        ("openllmetry_bedrock_converse.conv.json", "inferenceConfig", CONVERSE),
        # Its `input` made it a Responses request: "unsupported input item type `text`"
        # for each part, and `generation_config` an unknown key.
        ("openinference_gemini_interactions.conv.json", "generation_config", INTERACTIONS),
    ],
)
def test_a_real_request_of_a_provider_format_not_read_is_one_error_at_its_key(
    tmp_path: Path, name: str, key: str, what: str
) -> None:
    doc = tmp_path / name
    shutil.copy(FOLDER / name, doc)
    text = doc.read_text(encoding="utf-8")
    a = analyze(doc, root=tmp_path)
    assert [(d.code, d.severity.value) for d in a.diagnostics] == [("schema-error", "error")]
    assert _errors(doc, tmp_path) == [
        (
            "schema-error",
            f"`{key}`: {what}, which promptls does not read; write OpenAI chat messages "
            "(`messages` of `role`/`content`)",
            text.index(f'"{key}"'),
        )
    ]
    assert name in (FOLDER / "MANIFEST.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "keys", "what"),
    [
        (
            "langgraph-values_vercel-ai_weather.conv.json",
            ("kwargs",),
            "a LangChain serialized message",
        ),
        (
            "gemini-cli-checkpoint_derived-from-agent-history.conv.json",
            ("parts", "model"),
            "a Gemini turn",
        ),
    ],
)
def test_an_agent_transcript_names_its_format_at_each_line_and_nothing_else(
    tmp_path: Path, name: str, keys: tuple[str, ...], what: str
) -> None:
    # Before: a Claude Code line (its `role` inside `message`) was "message has no `role`"
    # at its first character, with an `unknown-key` warning for each of its keys; a Gemini
    # `user` turn of `parts` was assembled as an empty user message.
    doc = tmp_path / name
    shutil.copy(FOLDER / name, doc)
    text = doc.read_text(encoding="utf-8")
    a = analyze(doc, root=tmp_path)
    assert a.diagnostics and {d.code for d in a.diagnostics} == {"schema-error"}
    for d in a.diagnostics:
        assert (
            f"this looks like {what}" in d.message and "which promptls does not read" in d.message
        )
        assert any(text.startswith(f'"{key}"', d.range.start) for key in keys), d
    assert not a.conversation.messages
    assert name in (FOLDER / "MANIFEST.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "text", "key", "words"),
    [
        (
            "o.conv.json",
            '{"conversations": [{"from": "human", "value": "Hi"}]}',
            '"conversations"',
            f"missing `messages`: {SHAREGPT}",
        ),
        (
            "o.conv.yaml",
            "conversations:\n  - {from: human, value: Hi}\n",
            "conversations",
            f"missing `messages`: {SHAREGPT}",
        ),
        (
            "l.conv.jsonl",
            '{"conversations": [{"from": "human", "value": "Hi"}]}\n',
            '"conversations"',
            f"message has no `role`: {SHAREGPT}",
        ),
        (
            "t.conv.json",
            '{"messages": [{"from": "human", "value": "Hi"}]}',
            '"from"',
            f"message has no `role`: {SHAREGPT_TURN}",
        ),
        (
            "g.conv.json",
            '{"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}',
            '"contents"',
            f"missing `messages`: {GEMINI}",
        ),
        (
            "m.conv.json",
            '[{"role": "user", "content": "Hi"}, {"role": "model", "parts": [{"text": "Yo"}]}]',
            '"model"',
            f"unknown role `model`: expected one of `system`, `user`, `assistant`, `tool`, "
            f"`reminder`, `summary` ({GEMINI_TURN}",
        ),
        (
            "c.conv.yaml",
            "messages:\n  - {role: user, content: [{text: Hi}]}\ntoolConfig: {tools: []}\n",
            "toolConfig",
            f"`toolConfig`: {CONVERSE}",
        ),
    ],
)
def test_each_foreign_shape_is_one_error_at_the_key_that_tells_it(
    tmp_path: Path, name: str, text: str, key: str, words: str
) -> None:
    doc = tmp_path / name
    doc.write_text(text, encoding="utf-8")
    errors = _errors(doc, tmp_path)
    assert len(errors) == 1, errors
    code, message, start = errors[0]
    assert code == "schema-error"
    assert message.startswith(words)
    assert "which promptls does not read" in message
    assert start == text.index(key)


def test_a_plain_missing_messages_is_still_said_plainly(tmp_path: Path) -> None:
    # A `conversations` that is not a list, or `from` without `value`, is no foreign shape.
    doc = tmp_path / "p.conv.json"
    doc.write_text('{"conversations": "x", "messages_": []}', encoding="utf-8")
    assert _errors(doc, tmp_path) == [
        ("schema-error", "missing `messages`: the conversation has no message list", 0)
    ]
    doc.write_text('[{"from": "human", "content": "Hi"}]', encoding="utf-8")
    assert _errors(doc, tmp_path) == [("schema-error", "message has no `role`: it is left out", 1)]
