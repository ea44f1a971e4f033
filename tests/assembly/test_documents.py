"""Reading conversation documents (SPEC §2.1, §9): the schema, its errors and hostile input.

``check_document`` is the only code that calls ``parse_conversation``: it renders what was
read (one line per message) and every issue (code, severity, 1-based ``line:column`` range
in code points, the source it covers, message), and compares with the expectation. The
settings cases go through ``assembly.host`` (``tests/support/engine.py``), as the command
line and the language server do; reading files (invalid bytes, a BOM) is tested with the IO
half, in tests/server/test_workspace.py.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import textwrap
import time
from pathlib import Path

import pytest

from assembly.host import Analysis
from assembly.model import Conversation, DocFormat
from assembly.reading import parse_conversation
from assembly.syntax import MAX_DEPTH
from assembly.text import LineIndex, TextRange
from tests.support.engine import analyze

TODAY = dt.date(2025, 1, 15)


def check_document(text: str, fmt: DocFormat, expected: str) -> Conversation:
    """Parse ``text`` and compare the rendering of its messages and issues."""
    conv = parse_conversation(text, fmt)
    assert _render(conv, text) == textwrap.dedent(expected).strip("\n")
    return conv


def _render(conv: Conversation, text: str) -> str:
    index = LineIndex(text)
    lines = []
    for m in conv.messages:
        extra = []
        if m.tool_calls:
            extra.append("calls=" + ",".join(f"{c.id}:{c.name}" for c in m.tool_calls))
        if m.tool_call_id is not None:
            extra.append(f"answers={m.tool_call_id}")
        if m.files:
            extra.append("files=" + ",".join(f.file_id for f in m.files))
        if m.file_id is not None:
            extra.append(f"file_id={m.file_id}")
        if m.token_count is not None:
            extra.append(f"token_count={m.token_count}")
        if m.summarizes_through is not None:
            extra.append(f"through={m.summarizes_through}")
        lines.append(" ".join([f"message {m.id} {m.role.value} {m.content!r}", *extra]))
    for i in conv.issues:
        lines.append(
            f"{i.severity} {i.code} {_span(index, i.range)} `{text[i.range.start : i.range.end]}`"
            f": {i.message}"
        )
    return "\n".join(lines)


def _span(index: LineIndex, rng: TextRange) -> str:
    start, end = index.line_col(rng.start), index.line_col(rng.end)
    return f"{start.line + 1}:{start.column + 1}-{end.line + 1}:{end.column + 1}"


def analyze_text(tmp_path: Path, name: str, text: str) -> Analysis:
    """Analyze an editor buffer (``text=``) of a document in a fresh workspace."""
    return analyze(tmp_path / name, text=text, root=tmp_path, today=TODAY)


# ------------------------------------------------------------------------------ shapes


def test_bare_array_is_a_message_list() -> None:
    check_document(
        '[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]',
        DocFormat.JSON,
        """
        message 0 system 'Be brief.'
        message 1 user 'hi'
        """,
    )


def test_bare_array_in_yaml() -> None:
    check_document(
        "- role: user\n  content: hi\n- {role: assistant, content: hello}\n",
        DocFormat.YAML,
        """
        message 0 user 'hi'
        message 1 assistant 'hello'
        """,
    )


def test_object_form_reads_every_document_key() -> None:
    text = """\
{
  "$schema": "https://example.com/conv.schema.json",
  "settings": {"max_input_tokens": 4000, "model": "gpt-4"},
  "system_prompt": {"content": "You are helpful.", "token_count": 5},
  "custom_agent_prompt": "Answer in French.",
  "project_files": [{"file_id": "p1", "filename": "a.md", "content": "A"}],
  "tools": ["read_file", {"type": "function", "function": {"name": "web_search"}}],
  "reminder": {"content": "Cite sources."},
  "user_info": {"name": "Ada"},
  "messages": [{"id": "u1", "role": "user", "content": "hi"}]
}
"""
    conv = check_document(text, DocFormat.JSON, "message u1 user 'hi'")
    assert conv.settings == {"max_input_tokens": 4000, "model": "gpt-4"}
    assert text[slice(*_pair(conv.settings_ranges["max_input_tokens"]))] == "4000"
    assert conv.custom_agent_prompt is not None
    assert conv.custom_agent_prompt.content == "Answer in French."
    assert [f.file_id for f in conv.project_files] == ["p1"]
    assert [t.name for t in conv.tools or ()] == ["read_file", "web_search"]
    assert conv.reminder is not None and conv.reminder.content == "Cite sources."
    assert conv.user_info == {"name": "Ada"}


def _pair(rng: TextRange) -> tuple[int, int]:
    return rng.start, rng.end


def test_jsonl_header_line_then_messages() -> None:
    conv = check_document(
        '{"settings": {"max_input_tokens": 500}, "reminder": "Be kind."}\n'
        '{"role": "user", "content": "a"}\n'
        '{"role": "assistant", "content": "b"}\n',
        DocFormat.JSONL,
        """
        message 0 user 'a'
        message 1 assistant 'b'
        """,
    )
    assert conv.settings == {"max_input_tokens": 500}


def test_jsonl_header_after_a_message_is_an_error() -> None:
    check_document(
        '{"role": "user", "content": "a"}\n{"settings": {"max_input_tokens": 500}}\n',
        DocFormat.JSONL,
        """
        message 0 user 'a'
        error schema-error 2:1-2:40 `{"settings": {"max_input_tokens": 500}}`: document keys must come before the first message line
        """,  # noqa: E501
    )


def test_object_without_messages() -> None:
    check_document(
        '{"settings": {}}',
        DocFormat.JSON,
        "error schema-error 1:1-1:2 `{`: missing `messages`: the conversation has no message list",
    )


def test_a_scalar_document() -> None:
    check_document(
        '"hello"',
        DocFormat.JSON,
        'error schema-error 1:1-1:8 `"hello"`: a conversation must be an array of messages or an '
        "object with `messages`",
    )


# ------------------------------------------------------------------------------ messages


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        pytest.param(
            '{"role": "robot", "content": "beep"}',
            'error schema-error 2:10-2:17 `"robot"`: unknown role `robot`: expected one of '
            "`system`, `user`, `assistant`, `tool`, `reminder`, `summary`; the message is left "
            "out",
            id="unknown-role",
        ),
        pytest.param(
            '{"role": 7, "content": "beep"}',
            "error schema-error 2:10-2:11 `7`: unknown role 7: expected one of "
            "`system`, `user`, `assistant`, `tool`, `reminder`, `summary`; the message is left "
            "out",
            id="role-not-a-string",
        ),
        pytest.param(
            '{"content": "beep"}',
            "error schema-error 2:1-2:2 `{`: message has no `role`: it is left out",
            id="missing-role",
        ),
        pytest.param(
            '"just text"',
            'error schema-error 2:1-2:12 `"just text"`: a message must be an object with a `role`',
            id="not-an-object",
        ),
    ],
)
def test_a_message_that_cannot_be_read_is_left_out(message: str, expected: str) -> None:
    # The rest of the document is still read, and the messages after it keep their index.
    check_document(
        f'[{{"role": "user", "content": "a"}},\n{message},\n{{"role": "user", "content": "b"}}]',
        DocFormat.JSON,
        f"""
        message 0 user 'a'
        message 2 user 'b'
        {expected}
        """,
    )


def test_bad_tool_calls() -> None:
    text = """\
[
{"role": "assistant", "content": "", "tool_calls": {"id": "c1"}},
{"role": "assistant", "content": "", "tool_calls": [
  {"id": 5, "type": "function", "function": {"name": "f", "arguments": "{}"}},
  {"id": "c2", "type": "function"},
  {"id": "c3", "function": {"arguments": "{}"}},
  {"id": "c4", "function": {"name": "f", "arguments": "not json"}},
  {"id": "c5", "function": {"name": "f", "arguments": 5}},
  {"id": "c6", "function": {"name": "g", "arguments": {"k": 1}}},
  "c7"
]},
{"role": "user", "content": "x", "tool_calls": []},
{"role": "tool", "content": "r"},
{"role": "tool", "tool_call_id": 6, "content": "r"}
]
"""
    check_document(
        text,
        DocFormat.JSON,
        """
        message 0 assistant ''
        message 1 assistant '' calls=c4:f,c6:g
        message 2 user 'x'
        message 3 tool 'r'
        message 4 tool 'r'
        error schema-error 2:52-2:64 `{"id": "c1"}`: `tool_calls` must be an array
        error schema-error 4:10-4:11 `5`: a tool call `id` must be a string
        error schema-error 5:3-5:35 `{"id": "c2", "type": "function"}`: a tool call needs a `function` object
        error schema-error 6:28-6:47 `{"arguments": "{}"}`: a tool call needs `function.name`
        warning schema-warning 7:55-7:65 `"not json"`: tool call `arguments` is not a JSON object
        error schema-error 8:55-8:56 `5`: `arguments` must be a JSON string or an object
        error schema-error 10:3-10:7 `"c7"`: a tool call must be an object with `id` and `function`
        error schema-error 12:48-12:50 `[]`: only assistant messages make `tool_calls`
        error schema-error 14:34-14:35 `6`: `tool_call_id` must be a string
        error schema-error 13:10-13:16 `"tool"`: a tool message needs `tool_call_id`
        """,  # noqa: E501
    )


def test_duplicate_message_ids() -> None:
    check_document(
        """\
[{"id": "a", "role": "user", "content": "first"},
 {"id": "a", "role": "assistant", "content": "second"},
 {"id": 1, "role": "user", "content": "third"},
 {"id": "1", "role": "user", "content": "fourth"},
 {"id": "", "role": "user", "content": "fifth"}]
""",
        DocFormat.JSON,
        """
        message a user 'first'
        message 1 user 'third'
        message 3 user 'fourth'
        message 4 user 'fifth'
        error schema-error 5:9-5:11 `""`: message `id` must be a non-empty string or an integer
        error schema-error 2:9-2:12 `"a"`: duplicate message id `a`: the message is left out
        error schema-error 4:9-4:12 `"1"`: duplicate message id `1`: this message is read as `3`, its index
        """,  # noqa: E501
    )


@pytest.mark.parametrize("value", ["-1", "1.5", '"10"', "true", "[3]"])
def test_invalid_token_count_is_reported_and_counted_instead(value: str) -> None:
    text = f'[{{"role": "user", "content": "hi", "token_count": {value}}}]'
    check_document(
        text,
        DocFormat.JSON,
        f"""
        message 0 user 'hi'
        error schema-error 1:51-1:{51 + len(value)} `{value}`: `token_count` must be a whole number ≥ 0
        """,  # noqa: E501
    )


def test_valid_token_counts() -> None:
    check_document(
        '[{"role": "user", "content": "hi", "token_count": 0},'
        ' {"role": "assistant", "content": "yo", "token_count": null},'
        ' {"role": "user", "content": "ok", "token_count": 12}]',
        DocFormat.JSON,
        """
        message 0 user 'hi' token_count=0
        message 1 assistant 'yo'
        message 2 user 'ok' token_count=12
        """,
    )


def test_files_on_a_non_user_message() -> None:
    check_document(
        """\
- role: assistant
  content: here
  files: [{file_id: f1, filename: a.txt, content: A}]
- role: user
  content: take it
  files: [{file_id: f2, filename: b.txt, content: B}, {filename: c.txt}]
- role: assistant
  file_id: f3
  content: C
""",
        DocFormat.YAML,
        """
        message 0 assistant 'here'
        message 1 user 'take it' files=f2
        message 2 assistant 'C'
        error schema-error 3:10-3:54 `[{file_id: f1, filename: a.txt, content: A}]`: only user messages carry uploaded `files`
        error schema-error 6:55-6:56 `{`: a file needs `file_id`
        error schema-error 8:12-8:14 `f3`: only user messages can be injected files (`file_id`)
        """,  # noqa: E501
    )


def test_summary_needs_summarizes_through() -> None:
    check_document(
        """\
[{"id": "u", "role": "user", "content": "a"},
 {"id": "s", "role": "summary", "content": "sum"},
 {"id": "t", "role": "summary", "content": "sum", "summarizes_through": {"id": "u"}},
 {"id": "v", "role": "user", "content": "b", "summarizes_through": "u"},
 {"id": "w", "role": "summary", "content": "ok", "summarizes_through": "u"}]
""",
        DocFormat.JSON,
        """
        message u user 'a'
        message s summary 'sum'
        message t summary 'sum'
        message v user 'b'
        message w summary 'ok' through=u
        error schema-error 2:22-2:31 `"summary"`: a summary needs `summarizes_through`: the id of the last summarized message
        error schema-error 3:73-3:84 `{"id": "u"}`: `summarizes_through` must be a message id
        error schema-error 4:68-4:71 `"u"`: `summarizes_through` belongs on a message with role `summary`
        """,  # noqa: E501
    )


def test_unknown_keys_are_warnings() -> None:
    check_document(
        '{"mesages": [], "messages": [{"role": "user", "content": "a", "colour": "red"}]}',
        DocFormat.JSON,
        """
        message 0 user 'a'
        warning unknown-key 1:2-1:11 `"mesages"`: unknown key `mesages` (expected one of `settings`, `system_prompt`, `custom_agent_prompt`, `project_files`, `tools`, `reminder`, `additional_context`, `messages`, `user_info`, or a chat-completions request field)
        warning unknown-key 1:63-1:71 `"colour"`: unknown message key `colour`: it is ignored
        """,  # noqa: E501
    )


def test_every_message_field_is_read_into_its_own_place() -> None:
    """Each field a message can write lands in its own ``Message`` field, its range on its
    own text (the reader builds a ``Message`` by position: a swap would show here)."""
    text = (
        '[{"id": "u1", "role": "user", "content": "hi", "parent": "p0", "name": "ann",'
        ' "tool_call_id": "c9", "file_id": "f1", "filename": "a.txt", "token_count": 7,'
        ' "files": [{"file_id": "f2", "filename": "b.txt", "content": "B"}],'
        ' "promptls-ignore": "rule-x"},'
        ' {"id": "s1", "role": "summary", "content": "sum", "summarizes_through": "u1"},'
        ' {"role": "developer", "content": "dev"}]'
    )
    conv = parse_conversation(text, DocFormat.JSON)
    user, summary, dev = conv.message_data
    start = conv.starts[0]

    def at(rng: object) -> str:
        assert rng is not None
        return text[start + rng.start : start + rng.end]  # type: ignore[attr-defined]

    assert (user.id, user.role.value, user.content) == ("u1", "user", "hi")
    assert (user.parent, user.name, user.tool_call_id) == ("p0", "ann", "c9")
    assert (user.file_id, user.filename, user.token_count) == ("f1", "a.txt", 7)
    assert [(f.file_id, f.filename, f.content) for f in user.files] == [("f2", "b.txt", "B")]
    assert (user.ignore, user.images, user.tool_calls, user.written_role) == (
        ("rule-x",),
        (),
        (),
        None,
    )
    assert (at(user.range)[:7], at(user.content_range), at(user.id_range)) == (
        '{"id": ',
        '"hi"',
        '"u1"',
    )
    assert (at(user.role_range), at(user.parent_range), at(user.tool_call_id_range)) == (
        '"user"',
        '"p0"',
        '"c9"',
    )
    assert (summary.summarizes_through, summary.summarizes_through_range is not None) == (
        "u1",
        True,
    )
    assert (summary.parent_range, summary.tool_call_id_range, summary.token_count) == (
        None,
        None,
        None,
    )
    assert (dev.role.value, dev.written_role, dev.id, dev.content) == (
        "system",
        "developer",
        "2",
        "dev",
    )


def test_a_read_message_is_a_value() -> None:
    """``Message`` is not a frozen dataclass (its frozen ``__init__`` was a fifth of reading
    a 10 MB conversation), but it is still equal and hashed by value: two reads of the same
    text give equal messages with equal hashes, and a changed copy differs."""
    text = '[{"id": "a", "role": "developer", "content": "x", "colour": 1}, {"role": "user"}]'
    first = parse_conversation(text, DocFormat.JSON).message_data
    second = parse_conversation(text, DocFormat.JSON).message_data
    assert first == second and first[0] is not second[0]
    assert {hash(m) for m in first} == {hash(m) for m in second}
    assert len({*first, *second}) == 2
    changed = dataclasses.replace(first[0], content="y")
    assert changed != first[0] and first[0].content == "x"
    assert first[0].written_role == "developer" and first[1].id == "1"


# ------------------------------------------------------------------------------ settings


def test_invalid_setting_is_reported_at_its_value_and_the_default_used(tmp_path: Path) -> None:
    text = (
        '{"settings": {"max_input_tokens": 1000, "safety_margin": 1.5},\n'
        ' "messages": [{"role": "user", "content": "hi"}]}\n'
    )
    res = analyze_text(tmp_path, "doc.conv.json", text)
    [diag] = [d for d in res.diagnostics if d.code == "invalid-setting"]
    assert diag.severity == "error"
    assert diag.path is None
    assert text[diag.range.start : diag.range.end] == "1.5"
    assert (diag.range.start, diag.range.end) == (57, 60)
    assert "safety_margin" in diag.message
    assert res.settings.safety_margin == 0.05
    assert res.settings.max_input_tokens == 1000
    assert res.assembly.budget.available_tokens == 950
    assert res.assembly.ok


@pytest.mark.parametrize(
    ("name", "text", "source"),
    [
        (
            "doc.conv.yaml",
            "settings:\n  safety_margin: 1.5\nmessages:\n  - {role: user, content: hi}\n",
            "1.5",
        ),
        (
            "doc.conv.jsonl",
            '{"settings": {"provider": "bedrock"}}\n{"role": "user", "content": "hi"}\n',
            '"bedrock"',
        ),
        (
            "doc.conv.json",
            '{"settings": {"max_input_tokens": 0}, "messages": []}',
            "0",
        ),
    ],
)
def test_invalid_setting_in_every_format(tmp_path: Path, name: str, text: str, source: str) -> None:
    res = analyze_text(tmp_path, name, text)
    [diag] = [d for d in res.diagnostics if d.code == "invalid-setting"]
    assert text[diag.range.start : diag.range.end] == source
    assert res.settings.safety_margin == 0.05
    assert res.settings.provider == "openai"
    assert res.settings.max_input_tokens == 128000


def test_unknown_setting_is_a_warning(tmp_path: Path) -> None:
    text = '{"settings": {"safety_marign": 0.1}, "messages": []}'
    res = analyze_text(tmp_path, "doc.conv.json", text)
    [diag] = [d for d in res.diagnostics if d.code == "invalid-setting"]
    assert diag.severity == "warning"
    assert text[diag.range.start : diag.range.end] == "0.1"


# ------------------------------------------------------------------------------ hostile input


def _billion_laughs() -> str:
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    previous = "a"
    for name in "bcdefghi":
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
        previous = name
    lines.append("messages: [{role: user, content: hi}]")
    return "\n".join(lines) + "\n"


def test_yaml_alias_bomb_is_refused_in_bounded_time(tmp_path: Path) -> None:
    text = _billion_laughs()  # 9^9 ≈ 387 million values when expanded
    started = time.monotonic()
    res = analyze_text(tmp_path, "bomb.conv.yaml", text)
    # A generous bound: the refusal takes well under a second; expansion would take hours.
    assert time.monotonic() - started < 10
    too_large = [d for d in res.diagnostics if d.code == "document-too-large"]
    assert len(too_large) == 1
    assert too_large[0].severity == "error"
    assert "aliases" in too_large[0].message


def test_deeply_nested_json_is_a_diagnostic_not_a_recursion_error() -> None:
    text = "[" * 10_000
    conv = parse_conversation(text, DocFormat.JSON)
    assert [(i.code, i.message) for i in conv.issues] == [
        ("syntax-error", f"nesting deeper than {MAX_DEPTH} levels"),
        ("schema-error", "a message must be an object with a `role`"),
    ]
    # At the first bracket past the limit; no "unclosed" error per bracket.
    assert conv.issues[0].range == TextRange(MAX_DEPTH, MAX_DEPTH + 1)


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        (DocFormat.JSON, "[" * 10_000 + "]" * 10_000),
        (DocFormat.JSON, '{"a":' * 10_000),
        (DocFormat.JSONL, '{"a":' * 10_000 + "\n" + '{"role": "user", "content": "hi"}'),
        (DocFormat.YAML, "[" * 10_000),
        (DocFormat.YAML, "- " * 10_000 + "x"),
        (DocFormat.YAML, "a:\n" + "".join("  " * k + "b:\n" for k in range(1, 2_000))),
    ],
    ids=["json-balanced", "json-objects", "jsonl", "yaml-flow", "yaml-block", "yaml-mapping"],
)
def test_deep_nesting_in_every_format(fmt: DocFormat, text: str) -> None:
    conv = parse_conversation(text, fmt)
    depth_errors = [i for i in conv.issues if i.code == "syntax-error" and "nest" in i.message]
    assert len(depth_errors) == 1, conv.issues
    # One clear finding, not one per bracket.
    assert len(conv.issues) <= 3, conv.issues
    if fmt is DocFormat.JSONL:
        assert [m.content for m in conv.messages] == ["hi"]


# ------------------------------------------------------------------- real log shapes


def test_developer_is_a_system_message_and_function_a_tool_response() -> None:
    conv = check_document(
        """\
[{"role": "developer", "content": "Be terse."},
 {"role": "user", "content": "weather?"},
 {"role": "assistant", "content": null, "function_call": {"name": "get_weather", "arguments": "{}"}},
 {"role": "function", "name": "get_weather", "content": "rain"},
 {"role": "assistant", "content": "Rain."}]
""",  # noqa: E501
        DocFormat.JSON,
        """
        message 0 system 'Be terse.'
        message 1 user 'weather?'
        message 2 assistant '' calls=call_2_0:get_weather
        message 3 tool 'rain' answers=call_2_0
        message 4 assistant 'Rain.'
        info synthesized-tool-call-id 3:58-3:59 `{`: a legacy `function_call` is read as tool call `call_2_0` (an id made up here, sent in the assembled messages); the response that answers it, if any (in conversation order), gets the same id
        """,  # noqa: E501
    )
    assert conv.messages[0].written_role == "developer"
    assert conv.messages[3].written_role == "function"


def test_empty_tool_call_ids_are_paired_in_conversation_order() -> None:
    # Gemini's OpenAI-compatible endpoint answers with `"id": ""`; the Agents SDK logs the
    # responses with `"tool_call_id": ""`.
    check_document(
        """\
[{"role": "user", "content": "a and b"},
 {"role": "assistant", "tool_calls": [
   {"id": "", "type": "function", "function": {"name": "a", "arguments": "{}"}},
   {"id": "", "type": "function", "function": {"name": "b", "arguments": "{}"}}]},
 {"role": "tool", "tool_call_id": "", "content": "A"},
 {"role": "tool", "tool_call_id": "", "content": "B"},
 {"role": "tool", "tool_call_id": "", "content": "C"}]
""",
        DocFormat.JSON,
        """
        message 0 user 'a and b'
        message 1 assistant '' calls=call_1_0:a,call_1_1:b
        message 2 tool 'A' answers=call_1_0
        message 3 tool 'B' answers=call_1_1
        message 4 tool 'C' answers=
        info synthesized-tool-call-id 3:11-3:13 `""`: a tool call with `"id": ""` is read as tool call `call_1_0` (an id made up here, sent in the assembled messages); the response that answers it, if any (in conversation order), gets the same id
        info synthesized-tool-call-id 4:11-4:13 `""`: a tool call with `"id": ""` is read as tool call `call_1_1` (an id made up here, sent in the assembled messages); the response that answers it, if any (in conversation order), gets the same id
        """,  # noqa: E501
    )


def test_log_fields_and_request_body_keys_are_read_silently() -> None:
    conv = check_document(
        """\
{"model": "gpt-4.1", "temperature": 0, "max_completion_tokens": 100, "stream": false,
 "tool_choice": "auto", "parallel_tool_calls": true, "response_format": {"type": "text"},
 "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
 "messages": [
  {"role": "user", "content": "hi"},
  {"role": "assistant", "content": "yo", "refusal": null, "annotations": [], "audio": null,
   "reasoning_content": "think", "reasoning": "think", "thinking": "think"}]}
""",
        DocFormat.JSON,
        """
        message 0 user 'hi'
        message 1 assistant 'yo'
        """,
    )
    assert conv.settings == {"model": "gpt-4.1"}
    assert [t.name for t in conv.tools or ()] == ["f"]


def test_null_tools_are_none_offered() -> None:
    # Together's SDK (openllmetry's recorded request) sends every optional field, ``null``
    # when not set: the API takes ``"tools": null`` as no tools, and so does the reader.
    conv = check_document(
        """\
{"model": "m", "tools": null, "functions": null, "tool_choice": null,
 "messages": [{"role": "user", "content": "hi"}]}
""",
        DocFormat.JSON,
        """
        message 0 user 'hi'
        """,
    )
    assert not conv.tools


def test_settings_model_wins_over_the_request_body_model() -> None:
    for text in (
        '{"model": "gpt-4.1", "settings": {"model": "o3"}, "messages": []}',
        '{"settings": {"model": "o3"}, "model": "gpt-4.1", "messages": []}',
    ):
        assert parse_conversation(text, DocFormat.JSON).settings == {"model": "o3"}


def test_swe_agent_tool_call_ids() -> None:
    check_document(
        """\
[{"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
 {"role": "tool", "tool_call_ids": ["c1"], "content": "r"},
 {"role": "tool", "tool_call_ids": ["c1", "c2"], "content": "r"}]
""",  # noqa: E501
        DocFormat.JSON,
        """
        message 0 assistant '' calls=c1:f
        message 1 tool 'r' answers=c1
        message 2 tool 'r'
        error schema-error 3:36-3:48 `["c1", "c2"]`: `tool_call_ids` must name exactly one tool call
        error schema-error 3:11-3:17 `"tool"`: a tool message needs `tool_call_id`
        """,
    )


def test_documented_parts_and_builtin_tools_are_read() -> None:
    conv = check_document(
        """\
{"tools": [{"type": "web_search_preview"}, {"type": "function", "function": {"name": "f"}}],
 "messages": [
  {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "file", "file": {"file_id": "f1"}}]},
  {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]}]}
""",  # noqa: E501
        DocFormat.JSON,
        """
        message 0 user 'hi'
        message 1 assistant 'No.'
        warning schema-warning 3:64-3:107 `{"type": "file", "file": {"file_id": "f1"}}`: content part `file` is neither counted nor sent: promptls assembles text and images
        """,  # noqa: E501
    )
    assert [t.name for t in conv.tools or ()] == ["web_search_preview", "f"]


def test_reading_findings_have_their_rules_severity() -> None:
    """`promptls rules` and the findings agree: one severity per code of reading."""
    from assembly.diagnostics import rule_by_code
    from assembly.documents import format_for_path

    data = Path(__file__).resolve().parents[1] / "data"
    seen: set[str] = set()
    for path in data.rglob("*"):
        fmt = format_for_path(path.name) if path.is_file() else None
        if fmt is None:
            continue
        conv = parse_conversation(path.read_text(encoding="utf-8", errors="replace"), fmt)
        for issue in (i for c in (conv, *conv.records) for i in c.issues):
            rule = rule_by_code(issue.code)
            assert rule is not None, issue.code
            if issue.code in ("schema-error", "schema-warning", "unknown-key"):
                assert issue.severity == rule.severity, (path.name, issue)
                seen.add(issue.code)
    assert seen == {"schema-error", "schema-warning", "unknown-key"}


def test_ollama_images_are_the_messages_images() -> None:
    """Ollama's ``/api/chat`` documents ``images`` (bare base64) on a message: it was an
    ``unknown-key`` warning and the images were dropped from what is sent."""
    png, jpeg = "iVBORw0KGgoAAAANSUhEUg", "/9j/4AAQSkZJRgABAQ"
    text = (
        '[{"role": "user", "content": "what is this?", "images": ["' + png + '", "' + jpeg + '"]},'
        ' {"role": "assistant", "content": "a pig", "images": null},'
        ' {"role": "user", "content": "and?", "images": [5, ""]}]'
    )
    conv = parse_conversation(text, DocFormat.JSON)
    first = conv.messages[0]
    assert [i.ref for i in first.images] == [
        f"data:image/png;base64,{png}",
        f"data:image/jpeg;base64,{jpeg}",
    ]
    assert [text[i.range.start : i.range.end] for i in first.images] == [f'"{png}"', f'"{jpeg}"']
    assert conv.messages[1].images == ()
    assert [(i.code, text[i.range.start : i.range.end]) for i in conv.issues] == [
        ("schema-error", "5"),
        ("schema-error", '""'),
    ]
