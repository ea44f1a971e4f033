"""Anthropic Messages and OpenAI Responses documents: detection, reading, rendering.

The readers (``assembly/formats``) build the same ``Conversation`` as the promptls reader:
these tests check what they read against the source text (every range points at the
characters it names), that detection follows the shape, that hostile input never raises
and keeps messages in source order, and that every Anthropic request the render prints
passes the validator written from Anthropic's documented rules
(``tests/support/anthropic_validator.py``).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from assembly.formats.anthropic_out import render_anthropic
from assembly.formats.detect import SourceFormat, message_nodes
from assembly.ide.completion import conversation_completions
from assembly.ide.folding import conversation_folds
from assembly.ide.hover import conversation_hover
from assembly.ide.inlay import conversation_inlay_hints
from assembly.ide.lens import conversation_lenses
from assembly.ide.navigation import definition, references
from assembly.ide.symbols import conversation_symbols
from assembly.incremental import reparse_conversation
from assembly.model import DocFormat, Role, TextBlock
from assembly.reading import parse_conversation
from assembly.syntax import parse_json
from assembly.text import TextRange
from tests.support.anthropic_validator import validate
from tests.support.engine import analyze

ROOT = Path(__file__).resolve().parents[2]


def _parse(doc: Any, fmt: DocFormat = DocFormat.JSON) -> tuple[str, Any]:
    text = doc if isinstance(doc, str) else json.dumps(doc, indent=1)
    return text, parse_conversation(text, fmt)


ANTHROPIC = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "tools": [{"name": "calc", "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": "6*7?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "easy", "signature": "sig"},
                {"type": "text", "text": "Computing."},
                {"type": "tool_use", "id": "toolu_1", "name": "calc", "input": {"e": "6*7"}},
                {"type": "tool_use", "id": "toolu_2", "name": "calc", "input": {"e": "7*6"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": [{"type": "text", "text": "42"}],
                    "is_error": False,
                },
                {"type": "text", "text": "Double it."},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"},
                },
                {
                    "type": "document",
                    "title": "notes.txt",
                    "source": {"type": "text", "media_type": "text/plain", "data": "hello"},
                },
            ],
        },
    ],
}


def test_anthropic_body_reads_into_the_model_with_exact_ranges() -> None:
    text, conv = _parse(ANTHROPIC)
    assert conv.source_format == SourceFormat.ANTHROPIC
    assert "top-level `system`" in conv.source_format_why
    assert not conv.issues
    assert conv.settings == {"model": "claude-sonnet-4-5", "provider": "anthropic"}
    assert isinstance(conv.system_prompt, TextBlock)
    assert conv.system_prompt.content == "Be brief."
    r = conv.system_prompt.content_range
    assert r is not None and json.loads(text[r.start : r.end]) == "Be brief."
    assert [t.name for t in conv.tools or ()] == ["calc"]
    assert [(m.id, m.role) for m in conv.messages] == [
        ("0", Role.USER),
        ("1", Role.ASSISTANT),
        ("2/0", Role.TOOL),
        ("2/1", Role.TOOL),
        ("2", Role.USER),
    ]
    a = conv.messages[1]
    assert a.content == "Computing."  # thinking is not counted
    assert [c.id for c in a.tool_calls] == ["toolu_1", "toolu_2"]
    for c in a.tool_calls:
        assert json.loads(text[c.id_range.start : c.id_range.end]) == c.id
        assert json.loads(text[c.arguments_range.start : c.arguments_range.end]) == c.arguments
    for m in conv.messages[2:4]:
        assert m.content == "42"
        tr = m.tool_call_id_range
        assert tr is not None and json.loads(text[tr.start : tr.end]) == m.tool_call_id
    user = conv.messages[4]
    assert user.content == "Double it."
    assert [i.ref for i in user.images] == ["data:image/png;base64,iVBOR"]
    assert [(f.filename, f.content) for f in user.files] == [("notes.txt", "hello")]
    # Source order, disjoint ranges, index = position.
    starts = [m.range.start for m in conv.messages]
    assert starts == sorted(starts)
    for x, y in zip(conv.messages, conv.messages[1:], strict=False):
        assert x.range.end <= y.range.start
    assert [m.index for m in conv.messages] == list(range(len(conv.messages)))


def test_responses_body_reads_calls_outputs_and_instructions() -> None:
    doc = {
        "model": "gpt-4.1",
        "instructions": "Look up orders.",
        "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}],
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Order 7?"}]},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "message", "role": "assistant", "content": []},
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "lookup", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "shipped"},
            {"type": "function_call_output", "call_id": "c2", "output": "lost"},
            {"role": "developer", "content": "Be kind."},
            {"role": "user", "content": "Thanks"},
        ],
        "temperature": 0.2,
        "store": False,
    }
    _, conv = _parse(doc)
    assert conv.source_format == SourceFormat.RESPONSES
    assert not conv.issues
    assert isinstance(conv.system_prompt, TextBlock)
    assert conv.system_prompt.content == "Look up orders."
    assert [(m.id, m.role) for m in conv.messages] == [
        ("0", Role.USER),
        ("2", Role.ASSISTANT),
        ("5", Role.TOOL),
        ("6", Role.TOOL),
        ("7", Role.SYSTEM),
        ("8", Role.USER),
    ]
    assert [c.id for c in conv.messages[1].tool_calls] == ["c1", "c2"]
    assert [m.tool_call_id for m in conv.messages[2:4]] == ["c1", "c2"]
    assert conv.settings == {"model": "gpt-4.1"}


def test_responses_calls_of_tools_the_client_runs_are_read_with_their_outputs() -> None:
    """A shell, computer-use or apply-patch call is run by the client, which sends its
    output back: the model reads that output, so it counts, and a call never answered is
    one. They were skipped as hosted-tool items: an agent's shell traffic cost nothing."""
    doc = {
        "model": "codex-mini-latest",
        "tools": [{"type": "local_shell"}, {"type": "shell"}, {"type": "computer_use_preview"}],
        "input": [
            {"role": "user", "content": "List the files."},
            {
                "type": "local_shell_call",
                "id": "lsh_1",
                "call_id": "c1",
                "status": "completed",
                "action": {"type": "exec", "command": ["ls"], "env": {}},
            },
            {"type": "local_shell_call_output", "id": "c1", "output": "a.txt\nb.txt\n"},
            {"type": "shell_call", "call_id": "c2", "action": {"commands": ["cat a.txt"]}},
            {
                "type": "shell_call_output",
                "call_id": "c2",
                "output": [{"stdout": "hello", "stderr": "warn", "outcome": {"type": "exit"}}],
            },
            {
                "type": "computer_call",
                "call_id": "c3",
                "action": {"type": "screenshot"},
                "pending_safety_checks": [],
            },
            {
                "type": "computer_call_output",
                "call_id": "c3",
                "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA"},
            },
            {"type": "apply_patch_call", "call_id": "c4", "operation": {"type": "create_file"}},
            # Codex writes a local shell call with a null ``call_id``: its ``id`` names it.
            {"type": "local_shell_call", "id": "c5", "call_id": None, "action": {}},
            {"type": "local_shell_call_output", "id": "c5", "output": "ok"},
        ],
    }
    _, conv = _parse(doc)
    assert conv.source_format == SourceFormat.RESPONSES
    assert not conv.issues
    calls = [(c.id, c.name, c.arguments) for m in conv.messages for c in m.tool_calls]
    assert calls == [
        ("c1", "local_shell", {"type": "exec", "command": ["ls"], "env": {}}),
        ("c2", "shell", {"commands": ["cat a.txt"]}),
        ("c3", "computer_use_preview", {"type": "screenshot"}),
        ("c4", "apply_patch", {"type": "create_file"}),
        ("c5", "local_shell", {}),
    ]
    tools = [m for m in conv.messages if m.role is Role.TOOL]
    assert [(m.id, m.tool_call_id, m.content) for m in tools] == [
        ("2", "c1", "a.txt\nb.txt\n"),
        ("4", "c2", "hello\nwarn"),
        ("6", "c3", ""),
        ("9", "c5", "ok"),
    ]
    assert [i.ref for i in tools[2].images] == ["data:image/png;base64,AA"]
    path = ROOT / "tests" / "data" / "ide" / "agent.conv.json"  # never written
    analysed = analyze(path, text=json.dumps(doc), root=path.parent)
    codes = [d.code for d in analysed.diagnostics]
    assert codes == ["unanswered-tool-call"]  # the patch call's output never came


@pytest.mark.parametrize(
    ("doc", "fmt", "expected"),
    [
        ([{"role": "user", "content": "hi"}], DocFormat.JSON, SourceFormat.OPENAI_CHAT),
        ({"settings": {}, "messages": []}, DocFormat.JSON, SourceFormat.PROMPTLS),
        (
            {"model": "gpt-4o", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]},
            DocFormat.JSON,
            SourceFormat.OPENAI_CHAT,
        ),
        # Claude behind an OpenAI-compatible endpoint: the chat marks win.
        (
            {
                "model": "anthropic/claude-3.5-sonnet",
                "messages": [{"role": "system", "content": "x"}],
            },
            DocFormat.JSON,
            SourceFormat.OPENAI_CHAT,
        ),
        (
            {
                "model": "claude-haiku-4-5",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": "x"}],
            },
            DocFormat.JSON,
            SourceFormat.ANTHROPIC,
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}],
                }
            ],
            DocFormat.JSON,
            SourceFormat.ANTHROPIC,
        ),
        (
            [{"type": "function_call_output", "call_id": "c", "output": "x"}],
            DocFormat.JSON,
            SourceFormat.RESPONSES,
        ),
        ({"input": "hello", "model": "gpt-4.1"}, DocFormat.JSON, SourceFormat.RESPONSES),
        (
            '{"role": "user", "content": "hi"}\n'
            '{"role": "assistant", "content": '
            '[{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}\n',
            DocFormat.JSONL,
            SourceFormat.ANTHROPIC,
        ),
        (
            "system: Be brief.\nmessages:\n  - {role: user, content: hi}\n",
            DocFormat.YAML,
            SourceFormat.ANTHROPIC,
        ),
    ],
)
def test_detection_follows_the_shape(doc: Any, fmt: DocFormat, expected: SourceFormat) -> None:
    _, conv = _parse(doc, fmt)
    assert conv.source_format == expected, conv.source_format_why


def test_a_wrong_guess_is_said_at_the_place() -> None:
    """An OpenAI message in a document read as Anthropic is a finding that names the format."""
    doc = {
        "system": "x",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "c", "content": "r"},
        ],
    }
    text, conv = _parse(doc)
    assert conv.source_format == SourceFormat.ANTHROPIC
    assert conv.issues
    assert all("Anthropic Messages request" in i.message for i in conv.issues)
    places = {text[i.range.start : i.range.end] for i in conv.issues}
    assert places == {'"tool"', '"tool_call_id"'}


def test_ids_are_the_document_index_whatever_is_wrong() -> None:
    doc = {
        "system": "s",
        "messages": [
            {"role": "user", "content": "a"},
            {"role": "system", "content": "b"},  # refused: not a role of the format
            42,
            {"role": "assistant", "content": [{"type": "bogus"}, {"type": "text", "text": "c"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]},
        ],
    }
    _, conv = _parse(doc)
    assert [m.id for m in conv.messages] == ["0", "3", "4"]
    assert len(conv.issues) == 3


def test_a_foreign_document_is_always_read_whole() -> None:
    text, conv = _parse(ANTHROPIC)
    edited = text.replace("6*7?", "6*8?")
    assert reparse_conversation(conv, text, edited, DocFormat.JSON) is None
    chat = json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
    conv2 = parse_conversation(chat, DocFormat.JSON)
    # An edit that makes a message Anthropic changes the format: no incremental re-read.
    marked = chat.replace('"yo"', '[{"type": "tool_use", "id": "t", "name": "f", "input": {}}]')
    assert reparse_conversation(conv2, chat, marked, DocFormat.JSON) is None
    assert parse_conversation(marked, DocFormat.JSON).source_format == SourceFormat.ANTHROPIC
    same = chat.replace('"yo"', '"yes"')
    again = reparse_conversation(conv2, chat, same, DocFormat.JSON)
    assert again is not None and again.source_format == SourceFormat.OPENAI_CHAT


# ------------------------------------------------------------------------------ hostile

_leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=4))
_block = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            ["text", "tool_use", "tool_result", "image", "document", "thinking", "x"]
        )
    },
    optional={
        "text": _leaf,
        "id": st.sampled_from(["t1", "t2", "", 5]),
        "tool_use_id": st.sampled_from(["t1", "t2", None]),
        "name": _leaf,
        "input": st.one_of(_leaf, st.just({"a": 1})),
        "content": st.one_of(
            _leaf,
            st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _leaf}), max_size=2),
        ),
        "source": st.one_of(
            _leaf,
            st.just({"type": "url", "url": "http://x/a.png"}),
            st.just({"type": "text", "data": "d"}),
        ),
    },
)
_amsg = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["user", "assistant", "system", 3]),
        "content": st.one_of(_leaf, st.lists(_block, max_size=4)),
        "id": _leaf,
    },
)
_item = st.one_of(
    _amsg,
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(
                ["function_call", "function_call_output", "message", "reasoning", "zzz"]
            )
        },
        optional={
            "call_id": st.sampled_from(["c1", "c2", "", None]),
            "name": _leaf,
            "arguments": st.sampled_from(["{}", "[", '{"a":1}', None]),
            "output": st.one_of(
                _leaf,
                st.lists(
                    st.fixed_dictionaries({"type": st.just("input_text"), "text": _leaf}),
                    max_size=2,
                ),
            ),
            "role": st.sampled_from(["user", "assistant", "developer"]),
            "content": st.one_of(
                _leaf,
                st.lists(
                    st.fixed_dictionaries(
                        {
                            "type": st.sampled_from(["input_text", "output_text", "input_image"]),
                            "text": _leaf,
                        }
                    ),
                    max_size=2,
                ),
            ),
        },
    ),
)
_doc = st.one_of(
    st.builds(
        lambda s, m: {"system": s, "messages": m},
        st.one_of(_leaf, st.just([{"type": "text", "text": "s"}])),
        st.lists(_amsg, max_size=6),
    ),
    st.builds(lambda m: {"input": m, "instructions": "i"}, st.lists(_item, max_size=6)),
    st.lists(_item, max_size=6),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_doc)
@example(  # found by hypothesis: a split tool result takes the written id as its prefix
    {
        "system": None,
        "messages": [
            {},
            {"role": "user", "id": 0, "content": [{"type": "tool_result", "tool_use_id": "t1"}]},
        ],
    }
)
def test_hostile_documents_never_raise_and_keep_messages_in_order(doc: Any) -> None:
    text = json.dumps(doc)
    conv = parse_conversation(text, DocFormat.JSON)
    ids = [m.id for m in conv.messages]
    assert len(ids) == len(set(ids))
    assert [m.index for m in conv.messages] == list(range(len(conv.messages)))
    for x, y in zip(conv.messages, conv.messages[1:], strict=False):
        assert x.range.start <= y.range.start and x.range.end <= y.range.start, (x, y)
    for m in conv.messages:
        assert 0 <= m.range.start <= m.range.end <= len(text)
    # Every id is the document's: the index k of the message (or item) it comes from,
    # `<its id or k>/<block>` for a tool result split from it, or the `id` written on it.
    nodes = message_nodes(parse_json(text).root, jsonl=False)
    for m in conv.messages:
        if m.id == "input":
            continue
        k = next(
            i
            for i, n in enumerate(nodes)
            if n.range.start <= m.range.start < max(n.range.end, n.range.start + 1)
        )
        written = nodes[k].get("id") if nodes[k].is_object else None
        own = (
            str(written.value)
            if written is not None and written.kind in ("string", "number")
            else None
        )
        # A tool result split from a message is `<that message's id>/<block>`.
        prefixes = (f"{k}/", f"{own}/") if own is not None else (f"{k}/",)
        assert m.id in (str(k), own) or m.id.startswith(prefixes), (m.id, k)


# ------------------------------------------------------------------------------ render

_role = st.sampled_from(["user", "assistant", "tool", "system"])


@st.composite
def _openai_messages(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in range(draw(st.integers(0, 10))):
        role = draw(_role)
        if role == "assistant" and draw(st.booleans()):
            n = draw(st.integers(1, 2))
            calls = [
                {
                    "id": draw(st.sampled_from(["c1", "c2", "c:3", "c 4"])),
                    "type": "function",
                    "function": {
                        "name": "f",
                        "arguments": draw(st.sampled_from(["{}", "[1]", "x"])),
                    },
                }
                for _ in range(n)
            ]
            out.append(
                {
                    "role": "assistant",
                    "content": draw(st.sampled_from([None, "", "ok"])),
                    "tool_calls": calls,
                }
            )
        elif role == "tool":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": draw(st.sampled_from(["c1", "c2", "c:3", "zz"])),
                    "content": draw(st.sampled_from(["", "r"])),
                }
            )
        elif role == "user" and draw(st.booleans()):
            out.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": draw(st.sampled_from(["", " ", "look"]))},
                        {
                            "type": "image_url",
                            "image_url": {
                                "url": draw(
                                    st.sampled_from(
                                        ["data:image/png;base64,AAA", "https://x/y.png", "file-1"]
                                    )
                                )
                            },
                        },
                    ],
                }
            )
        else:
            out.append({"role": role, "content": draw(st.sampled_from(["", "  ", f"m{k}"]))})
    return out


@settings(max_examples=400, deadline=None)
@given(_openai_messages())
def test_every_rendered_anthropic_request_validates(messages: list[dict[str, Any]]) -> None:
    ids = [f"m{k}" for k in range(len(messages))]
    r = render_anthropic(messages, ids)
    if r.messages:
        assert validate({"system": r.system, "messages": r.messages}) == []
    assert sum(len(s) for s in r.sources) <= len(messages)


def test_validator_refuses_what_the_api_refuses() -> None:
    bad = {
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "a b", "name": "f", "input": {}}],
            },
            {"role": "assistant", "content": "again"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "x"},
                    {"type": "tool_result", "tool_use_id": "q"},
                ],
            },
            {"role": "user", "content": ""},
        ]
    }
    problems = validate(bad)
    assert any("^[a-zA-Z0-9_-]+$" in p for p in problems)
    assert any("no tool_result in the next message" in p for p in problems)
    assert any("roles must alternate" in p for p in problems)
    assert any("must come before any other content" in p for p in problems)
    assert any("answers no tool_use" in p for p in problems)
    assert any("must not be empty" in p for p in problems)
    assert validate({"messages": [{"role": "user", "content": "hi"}]}) == []


# ------------------------------------------------------------------------------ editor

REAL = sorted((ROOT / "tests" / "data" / "real-logs").glob("*/*.conv.json*"))
REAL = [
    p
    for p in REAL
    if p.parent.name
    in ("anthropic", "responses", "codex", "claude-code", "copilot", "gemini-cli", "pi")
    and p.suffix != ".expected"
]


@pytest.mark.parametrize("path", REAL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_editor_feature_answers_on_real_foreign_documents(path: Path) -> None:
    """Hover, inlay hints, lens, symbols, folds, navigation and completion over a real
    Anthropic or Responses document, or an agent's session read as a request (Codex CLI,
    Claude Code, Copilot CLI, Gemini CLI, pi): answers inside the document, hovers on messages
    name the message under the cursor, and no feature raises."""
    today = dt.date(2026, 7, 15)
    doc = analyze(path, root=path.parent, today=today)
    text, conv = str(doc.text), doc.conversation
    n = len(text)
    hints = conversation_inlay_hints(doc, TextRange(0, n))
    assert len(hints) == len(conv.messages)
    assert all(0 <= h.offset <= n for h in hints)
    assert conversation_lenses(doc, command="c", arguments=())
    assert conversation_symbols(conv)
    assert conversation_folds(conv, text)
    for offset in range(0, n, max(1, n // 97)):
        hover = conversation_hover(doc, offset, today=today)
        assert hover is not None and hover.range.start <= offset <= hover.range.end
        # (The innermost message: a Gemini CLI reply holds its calls' results.)
        under = [m for m in conv.messages if m.range.start <= offset < m.range.end]
        if under and "message `" in hover.markdown[:40]:
            m = min(under, key=lambda m: m.range.end - m.range.start)
            assert f"message `{m.id}`" in hover.markdown
        definition(conv, text, offset)
        references(conv, text, offset, include_declaration=True)
        conversation_completions(conv, text, offset)


def test_dataset_records_are_detected_one_by_one() -> None:
    lines = [
        {"system": "s", "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}]},
        {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "b"}]},
        {"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]},
    ]
    text = "\n".join(json.dumps(x) for x in lines) + "\n"
    conv = parse_conversation(text, DocFormat.JSONL)
    assert [r.source_format for r in conv.records] == [
        SourceFormat.ANTHROPIC,
        SourceFormat.OPENAI_CHAT,
        SourceFormat.RESPONSES,
    ]
    assert conv.source_format == SourceFormat.ANTHROPIC
    assert conv.source_format_why.startswith("one conversation per line; record 1: ")
    assert conv.records[0].settings["provider"] == "anthropic"


def test_the_cache_mark_goes_on_the_last_block_of_its_message() -> None:
    mark = {"type": "ephemeral"}
    msgs = [
        {"role": "system", "content": "S", "cache_control": mark},
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b", "cache_control": mark},
        {"role": "user", "content": "c"},
    ]
    r = render_anthropic(msgs, ["$system", "0", "1", "2"])
    assert r.system == [{"type": "text", "text": "S", "cache_control": mark}]
    assert r.messages[1]["content"][-1] == {"type": "text", "text": "b", "cache_control": mark}
    assert validate({"system": r.system, "messages": r.messages}) == []


@pytest.mark.parametrize(
    ("head", "want"),
    [
        ("model: claude-sonnet-4\nmax_tokens: 100\nsystem: !custom hi\nmessages:\n", "anthropic"),
        ("model: gpt-4.1\ninstructions: !custom hi\ninput:\n", "responses"),
    ],
)
def test_a_foreign_request_keeps_the_severity_of_the_parse_findings(head: str, want: str) -> None:
    """Every reader reports the parse's own findings the one way (``Reader.report_syntax``):
    an unsupported YAML tag is a warning in an Anthropic or Responses request too."""
    text = head + "  - role: user\n    content: hello\n"
    conv = parse_conversation(text, DocFormat.YAML)
    assert want in conv.source_format
    assert [(i.code, i.severity) for i in conv.issues] == [("schema-error", "warning")]


@pytest.mark.parametrize("inp", ["", ', "input": null'])
def test_anthropic_tool_use_without_input_is_an_error_at_the_block(inp: str) -> None:
    """The Messages API requires a `tool_use` block's `input` (an object, `{}` for no
    arguments) and refuses the request without it; it was read silently as `{}`. It is an
    error at the block (at the null when `input` is null), and the call is still read so
    its result pairs with it."""
    use = '{"type": "tool_use", "id": "t1", "name": "f"' + inp + "}"
    result = '{"type": "tool_result", "tool_use_id": "t1", "content": "r"}'
    text = (
        '{"messages": [{"role": "user", "content": "go"},\n'
        f' {{"role": "assistant", "content": [{use}]}},\n'
        f' {{"role": "user", "content": [{result}]}}]}}'
    )
    conv = parse_conversation(text, DocFormat.JSON)
    assert conv.source_format == SourceFormat.ANTHROPIC
    (issue,) = conv.issues
    assert issue.code == "schema-error"
    assert "needs an object `input`" in issue.message
    assert text[issue.range.start : issue.range.end] == (use if not inp else "null")
    (call,) = conv.messages[1].tool_calls
    assert (call.id, call.name, call.arguments) == ("t1", "f", {})
    assert conv.messages[2].tool_call_id == "t1"


def test_local_shell_call_output_object_is_read_as_its_json_text_with_a_warning() -> None:
    """The Responses API takes a `local_shell_call_output`'s `output` as "a JSON string of
    the output" (Codex's: `{"output": …, "metadata": {"exit_code": …}}`, serialised). An
    object there was an error saying "a string or an array of content parts" and its text
    was dropped from the count; it is read as the JSON text a client sends, with a
    warning at the object."""
    out = '{"output": "a.txt\\n", "metadata": {"exit_code": 0}}'
    text = (
        '{"model": "codex-mini-latest", "tools": [{"type": "local_shell"}], "input": [\n'
        ' {"role": "user", "content": "ls"},\n'
        ' {"type": "local_shell_call", "call_id": "c1", "action": {"type": "exec",'
        ' "command": ["ls"], "env": {}}},\n'
        f' {{"type": "local_shell_call_output", "id": "c1", "output": {out}}}]}}'
    )
    conv = parse_conversation(text, DocFormat.JSON)
    assert conv.source_format == SourceFormat.RESPONSES
    (issue,) = conv.issues
    assert issue.severity == "warning"
    assert text[issue.range.start : issue.range.end] == out
    tool = conv.messages[-1]
    assert (tool.role, tool.tool_call_id) == (Role.TOOL, "c1")
    assert json.loads(tool.content) == {"output": "a.txt\n", "metadata": {"exit_code": 0}}
    path = ROOT / "tests" / "data" / "ide" / "shell.conv.json"  # never written
    analysed = analyze(path, text=text, root=path.parent)
    assert "unanswered-tool-call" not in [d.code for d in analysed.diagnostics]
