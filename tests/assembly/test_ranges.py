"""Exact source ranges of conversation documents in the three formats (SPEC §4 step 1, §9).

``check_ranges`` parses a fixture, checks the range invariants of every message (the message
range slices the message object's source, ``content_range`` its string literal, tool-call
ranges their values: each slice, read back on its own, is the value the model holds) and
compares a rendering: one line per message, tool call and issue, with 1-based
``line:column`` positions counted in code points and the sliced source text.

Fixtures mix CJK, emoji (ZWJ sequences such as 👩‍👩‍👧 are five code points, flags such as
🇯🇵 are two) and CRLF line endings, where an off-by-one in offsets would show at once.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import yaml

from assembly.model import Conversation, DocFormat
from assembly.reading import parse_conversation
from assembly.text import LineIndex, TextRange

FAMILY = "👩\u200d👩\u200d👧"  # woman, ZWJ, woman, ZWJ, girl: five code points
FLAG = "🇯🇵"  # two regional indicators


def check_ranges(text: str, fmt: DocFormat, expected: str) -> Conversation:
    """Parse ``text``, check every range invariant, and compare the rendering."""
    conv = parse_conversation(text, fmt)
    index = LineIndex(text)
    # With a syntax error an object may be cut short: its slice is not a whole value then.
    whole = not any(i.code == "syntax-error" for i in conv.issues)
    lines: list[str] = []
    for m in conv.messages:
        _check_value(text, fmt, m.range, None, whole=whole)
        content = "content -"
        if m.content_range is not None:
            _check_value(text, fmt, m.content_range, m.content or None)
            content = f"content {_span(index, m.content_range)} {_slice(text, m.content_range)}"
        lines.append(f"{m.id} {m.role.value} {_span(index, m.range)} {content}")
        for c in m.tool_calls:
            _check_value(text, fmt, c.range, None, whole=whole)
            _check_value(text, fmt, c.id_range, c.id)
            _check_value(text, fmt, c.name_range, c.name)
            src_args = c.arguments_text if _is_string(text, c.arguments_range) else c.arguments
            _check_value(text, fmt, c.arguments_range, src_args)
            lines.append(
                f"  call {_span(index, c.range)} id {_span(index, c.id_range)} "
                f"name {_span(index, c.name_range)} {_slice(text, c.name_range)} "
                f"arguments {_span(index, c.arguments_range)} {_slice(text, c.arguments_range)}"
            )
    for issue in conv.issues:
        lines.append(
            f"{issue.code} {_span(index, issue.range)} {_slice(text, issue.range)}: {issue.message}"
        )
    assert "\n".join(lines) == textwrap.dedent(expected).strip("\n")
    return conv


def _is_string(text: str, rng: TextRange) -> bool:
    return text[rng.start : rng.start + 1] in ("'", '"')


def _span(index: LineIndex, rng: TextRange) -> str:
    start, end = index.line_col(rng.start), index.line_col(rng.end)
    return f"{start.line + 1}:{start.column + 1}-{end.line + 1}:{end.column + 1}"


def _slice(text: str, rng: TextRange) -> str:
    """The source in backticks, line breaks shown as ⏎ (so CRLF stays visible as one)."""
    return "`" + text[rng.start : rng.end].replace("\r\n", "⏎").replace("\n", "↵") + "`"


def _check_value(
    text: str, fmt: DocFormat, rng: TextRange, value: Any, *, whole: bool = True
) -> None:
    """The slice is one whole value of the source: reading it alone gives ``value``.

    ``None`` checks that the slice is a complete object (a message or a call) or ``null``.
    A YAML block scalar's range stops at the end of its last line, before the line break
    that (with the default chomping) belongs to its value.
    """
    src = text[rng.start : rng.end]
    assert src == src.strip(), f"range {rng} has surrounding whitespace: {src!r}"
    if not whole:
        return
    if fmt is DocFormat.YAML:
        # Indent the slice as it sits in the document, so block mappings read alone.
        column = rng.start - (text.rfind("\n", 0, rng.start) + 1)
        block = src.startswith(("|", ">"))
        read = yaml.safe_load(" " * column + src + ("\n" if block else ""))
    else:
        read = json.loads(src)
    if value is None:
        assert read is None or isinstance(read, dict), src
    else:
        assert read == value, (read, value)


def crlf(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n").replace("\n", "\r\n")


# ------------------------------------------------------------------------------ well formed


def test_json_with_cjk_emoji_and_crlf() -> None:
    text = crlf(
        f"""
        {{"messages": [
          {{"role": "user", "content": "你好，世界 {FAMILY} {FLAG}"}},
          {{"id": "a1", "role": "assistant", "content": "好的 😋",
            "tool_calls": [{{"id": "call_图", "type": "function",
              "function": {{"name": "read_file", "arguments": "{{\\"file_id\\": \\"{FLAG}\\"}}"}}}}]}},
          {{"role": "tool", "tool_call_id": "call_图", "content": "{FAMILY}{FAMILY}"}},
          {{"role": "user", "content": "escaped \\u00e9 \\"q\\" {FLAG}"}}
        ]}}
        """  # noqa: E501
    )
    check_ranges(
        text,
        DocFormat.JSON,
        r"""
        0 user 2:3-2:48 content 2:31-2:47 `"你好，世界 👩‍👩‍👧 🇯🇵"`
        a1 assistant 3:3-5:81 content 3:48-3:54 `"好的 😋"`
          call 4:20-5:79 id 4:27-4:35 name 5:28-5:39 `"read_file"` arguments 5:54-5:77 `"{\"file_id\": \"🇯🇵\"}"`
        2 tool 6:3-6:70 content 6:57-6:69 `"👩‍👩‍👧👩‍👩‍👧"`
        3 user 7:3-7:57 content 7:31-7:56 `"escaped \u00e9 \"q\" 🇯🇵"`
        """,  # noqa: E501
    )


def test_jsonl_with_crlf_and_a_header_line() -> None:
    text = (
        '{"settings": {"max_input_tokens": 1000}, "reminder": "答えは日本語で"}\r\n'
        f'{{"role": "user", "content": "{FLAG}{FLAG} 東京"}}\r\n'
        "\r\n"
        f'{{"role": "assistant", "content": null, "tool_calls": [{{"id": "c{FAMILY}", '
        '"type": "function", "function": {"name": "search", "arguments": {"q": "京都"}}}]}\r\n'
        f'{{"role": "tool", "tool_call_id": "c{FAMILY}", "content": "晴れ"}}\r\n'
    )
    check_ranges(
        text,
        DocFormat.JSONL,
        r"""
        0 user 2:1-2:39 content 2:29-2:38 `"🇯🇵🇯🇵 東京"`
        1 assistant 4:1-4:151 content 4:34-4:38 `null`
          call 4:55-4:149 id 4:62-4:70 name 4:113-4:121 `"search"` arguments 4:136-4:147 `{"q": "京都"}`
        2 tool 5:1-5:60 content 5:55-5:59 `"晴れ"`
        """,  # noqa: E501
    )


def test_yaml_block_and_flow_styles_with_crlf() -> None:
    text = crlf(
        f"""
        settings:
          max_input_tokens: 1000
        messages:
          - role: user  # 質問
            content: "天気は？ {FLAG}"

          - {{role: assistant, content: "調べます {FAMILY}", tool_calls: [{{id: c1, type: function, function: {{name: web_search, arguments: '{{"q": "天気"}}'}}}}]}}
          - role: tool
            tool_call_id: c1
            content: |
              晴れ {FAMILY}
              最高 20℃

        # the last turn
          - role: user
            content: >-
              thanks
              {FLAG}
        """  # noqa: E501
    )
    check_ranges(
        text,
        DocFormat.YAML,
        r"""
        0 user 4:5-5:23 content 5:14-5:23 `"天気は？ 🇯🇵"`
        1 assistant 7:5-7:141 content 7:32-7:44 `"調べます 👩‍👩‍👧"`
          call 7:59-7:139 id 7:64-7:66 name 7:101-7:111 `web_search` arguments 7:124-7:137 `'{"q": "天気"}'`
        2 tool 8:5-12:13 content 10:14-12:13 `|⏎      晴れ 👩‍👩‍👧⏎      最高 20℃`
        3 user 15:5-18:9 content 16:14-18:9 `>-⏎      thanks⏎      🇯🇵`
        """,  # noqa: E501
    )


def test_bare_array_json_without_line_breaks() -> None:
    text = f'[{{"role":"user","content":"{FAMILY}"}},{{"role":"assistant","content":"{FLAG}"}}]'
    check_ranges(
        text,
        DocFormat.JSON,
        r"""
        0 user 1:2-1:35 content 1:27-1:34 `"👩‍👩‍👧"`
        1 assistant 1:36-1:71 content 1:66-1:70 `"🇯🇵"`
        """,
    )


# ------------------------------------------------------------------------------ half typed


def test_half_typed_json_keeps_the_first_message() -> None:
    text = '{"messages": [{"role": "user", "content": "hi"}, {"role": "assi'
    check_ranges(
        text,
        DocFormat.JSON,
        r"""
        0 user 1:15-1:48 content 1:43-1:47 `"hi"`
        syntax-error 1:59-1:64 `"assi`: unterminated string
        syntax-error 1:50-1:51 `{`: unclosed object: expected `}`
        syntax-error 1:14-1:15 `[`: unclosed array: expected `]`
        syntax-error 1:1-1:2 `{`: unclosed object: expected `}`
        schema-error 1:50-1:51 `{`: message has no `role`: it is left out
        """,
    )


def test_half_typed_json_after_emoji_and_crlf() -> None:
    text = crlf(
        f"""
        [
          {{"role": "user", "content": "{FAMILY} {FLAG}"}}
          {{"role": "assistant", "content": "日本語
        """
    )
    check_ranges(
        text,
        DocFormat.JSON,
        r"""
        0 user 2:3-2:42 content 2:31-2:41 `"👩‍👩‍👧 🇯🇵"`
        1 assistant 3:3-3:40 content -
        syntax-error 2:42-2:42 ``: expected `,` or `]`
        syntax-error 3:36-3:40 `"日本語`: unterminated string
        syntax-error 3:3-3:4 `{`: unclosed object: expected `}`
        syntax-error 1:1-1:2 `[`: unclosed array: expected `]`
        """,
    )


def test_half_typed_jsonl_line_does_not_spill() -> None:
    text = (
        f'{{"role": "user", "content": "{FLAG} one"}}\r\n'
        f'{{"role": "assistant", "content": "{FAMILY} tw\r\n'
        '{"role": "user", "content": "three"}\r\n'
    )
    check_ranges(
        text,
        DocFormat.JSONL,
        r"""
        0 user 1:1-1:38 content 1:29-1:37 `"🇯🇵 one"`
        1 assistant 2:1-2:43 content -
        2 user 3:1-3:37 content 3:29-3:36 `"three"`
        syntax-error 2:34-2:43 `"👩‍👩‍👧 tw`: unterminated string
        syntax-error 2:1-2:2 `{`: unclosed object: expected `}`
        """,
    )


def test_half_typed_yaml_keeps_the_lines_before_the_error() -> None:
    text = crlf(
        f"""
        messages:
          - role: user
            content: "{FAMILY} 完成"
          - role: assistant
            content: "未完成 {FLAG}
        """
    )
    check_ranges(
        text,
        DocFormat.YAML,
        r"""
        0 user 2:5-3:24 content 3:14-3:24 `"👩‍👩‍👧 完成"`
        1 assistant 4:5-4:20 content -
        syntax-error 5:14-5:21 `"未完成 🇯🇵`: invalid YAML: found unexpected end of stream while scanning a quoted scalar
        """,  # noqa: E501
    )
