"""Tests for assembly.sourcemap: decoded-string offsets back to document offsets.

Each case parses a small document with the real parser, finds a piece of the decoded value
of one key and checks which source text the mapped range covers.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assembly import sourcemap
from assembly.sourcemap import string_offset_map
from assembly.syntax import SNode, iter_nodes, parse_json, parse_yaml
from assembly.text import TextRange


def _node(text: str, fmt: str, key: str) -> SNode:
    root = (parse_json if fmt == "json" else parse_yaml)(text).root
    assert root is not None
    for node in iter_nodes(root):
        member = node.member(key) if node.is_object else None
        if member is not None:
            return member.value
    raise AssertionError(f"no key {key!r}")


def check_map(text: str, fmt: str, key: str, needle: str, expect: str) -> None:
    """Map the first ``needle`` in the decoded value of ``key``; expect that source text."""
    node = _node(text, fmt, key)
    value = node.value
    assert isinstance(value, str)
    start = value.index(needle)
    rng = string_offset_map(text, node.range, value).range(start, start + len(needle))
    assert node.range.start <= rng.start <= rng.end <= node.range.end
    assert text[rng.start : rng.end] == expect


@pytest.mark.parametrize(
    ("text", "needle", "expect"),
    [
        ('{"c": "plain text here"}', "text", "text"),
        ('{"c": "line\\nbreak then call"}', "call", "call"),
        ('{"c": "a\\nb"}', "\nb", "\\nb"),
        ('{"c": "say \\"hi\\" now"}', '"hi"', '\\"hi\\"'),
        ('{"c": "x\\\\y\\/z"}', "\\y/", "\\\\y\\/"),
        ('{"c": "tab\\there"}', "\there", "\\there"),
        ('{"c": "caf\\u00e9 ok"}', "é ok", "\\u00e9 ok"),
        ('{"c": "smile \\ud83d\\ude00 end"}', "😀", "\\ud83d\\ude00"),
        ('{"c": "smile \\ud83d\\ude00 end"}', "end", "end"),
        ('{"c": "raw 😀 then {\\"k\\": 1}"}', '{"k": 1}', '{\\"k\\": 1}'),
        ('{"c": "\\b\\f\\r done"}', "done", "done"),
    ],
)
def test_json_strings(text: str, needle: str, expect: str) -> None:
    check_map(text, "json", "c", needle, expect)


@pytest.mark.parametrize(
    ("text", "needle", "expect"),
    [
        # Plain scalars, single and folded over lines.
        ("c: plain words\n", "words", "words"),
        ("c: first line\n  second line\n", "second", "second"),
        ("c: first line\n  second line\n", "line second", "line\n  second"),
        # Single-quoted: '' is one quote.
        ("c: 'it''s here'\n", "s here", "s here"),
        ("c: 'it''s here'\n", "'s", "''s"),
        # Double-quoted: YAML escapes and folding.
        ('c: "A \\x41 \\U0001F600 z"\n', "A A 😀", "A \\x41 \\U0001F600"),
        ('c: "fold\n   me"\n', "fold me", "fold\n   me"),
        ('c: "joined\\\n   here"\n', "here", "here"),
        ('c: "tab\\tand \\"q\\""\n', '"q"', '\\"q\\"'),
        # Block literal: indentation skipped, extra indentation kept.
        ("c: |\n  one\n    two\n  three\n", "two", "two"),
        ("c: |\n  one\n    two\n  three\n", "  two", "  two"),
        ("c: |\n  one\n    two\n  three\n", "two\nthree", "two\n  three"),
        ('msgs:\n  - c: |-\n      deep {"a": 1}\n      next\n', '{"a": 1}', '{"a": 1}'),
        # Block folded: line breaks become spaces, blank lines become breaks.
        ("c: >\n  folded\n  text\n\n  para\n", "text\npara", "text\n\n  para"),
        ("c: >-\n  folded\n  text\n", "folded text", "folded\n  text"),
        # Explicit indentation indicator.
        ("c: |2\n     extra\n", " extra", " extra"),
        # CRLF line breaks.
        ("c: |\r\n  one\r\n  two\r\n", "two", "two"),
    ],
)
def test_yaml_scalars(text: str, needle: str, expect: str) -> None:
    check_map(text, "yaml", "c", needle, expect)


def test_start_and_end_boundaries_differ_across_skipped_indentation() -> None:
    text = "c: |\n  one\n  two\n"
    node = _node(text, "yaml", "c")
    offsets = string_offset_map(text, node.range, node.value)
    # "one\n" ends after the line break; "two" starts after the indentation.
    assert text[offsets.range(0, 4).start : offsets.range(0, 4).end] == "one\n"
    assert offsets(4) == text.index("two")
    assert offsets.end(4) == text.index("two") - 2


def test_offsets_are_clamped_and_monotonic() -> None:
    text = '{"c": "a\\nb\\u00e9"}'
    node = _node(text, "json", "c")
    offsets = string_offset_map(text, node.range, node.value)
    mapped = [offsets(i) for i in range(-2, len(node.value) + 3)]
    assert mapped == sorted(mapped)
    assert offsets(-5) == node.range.start + 1
    assert offsets(99) == node.range.end - 1
    assert offsets.range(2, 2) == TextRange(offsets(2), offsets(2))


def test_a_value_that_does_not_match_its_source_never_raises() -> None:
    text = '{"c": "abc"}'
    node = _node(text, "json", "c")
    offsets = string_offset_map(text, node.range, "something else entirely")
    for i in range(30):
        assert node.range.start <= offsets(i) <= node.range.end
        assert node.range.start <= offsets.end(i) <= node.range.end


@given(st.text(max_size=40))
def test_every_json_string_maps_each_character_to_its_own_encoding(value: str) -> None:
    for ensure_ascii in (True, False):
        text = '{"c": ' + json.dumps(value, ensure_ascii=ensure_ascii) + "}"
        node = _node(text, "json", "c")
        assert node.value == value
        offsets = string_offset_map(text, node.range, value)
        for i, ch in enumerate(value):
            src = text[offsets(i) : offsets.end(i + 1)]
            assert json.loads('"' + src + '"') == ch


def test_a_surrogate_pair_kept_apart_maps_each_half_to_its_escape() -> None:
    text = '{"c": "x\\ud83d\\ude00y"}'
    node = _node(text, "json", "c")
    offsets = string_offset_map(text, node.range, "x\ud83d\ude00y")  # not combined
    assert text[offsets(1) : offsets.end(2)] == "\\ud83d"
    assert text[offsets(2) : offsets.end(3)] == "\\ude00"
    assert text[offsets(3) : offsets.end(4)] == "y"


@given(
    st.text(
        alphabet=st.sampled_from(
            ["a", " ", "\n", '"', "\\", "/", "\t", "é", "😀", "\ud83d", "\ude00", "\x01"]
        ),
        min_size=1,
        max_size=60,
    )
)
def test_a_json_string_mapped_by_its_escapes_maps_as_one_aligned_character_by_character(
    value: str,
) -> None:
    # A one-line string keeps only its escapes (a long prompt's few hundred, not two entries
    # per character); every offset maps as the general aligner's character table does.
    for ensure_ascii in (True, False):
        encoded = json.dumps(value, ensure_ascii=ensure_ascii)
        text = '{"c": ' + encoded + "}"
        start, end = 7, 6 + len(encoded) - 1
        by_escapes = sourcemap._single_line_escaped(text, start, end, value)
        assert by_escapes is not None
        aligned = sourcemap._Aligner(text, start, end, escapes=sourcemap._double_quoted_escape)
        each = aligned.align(value)
        for i in range(-1, len(value) + 2):
            assert (by_escapes(i), by_escapes.end(i)) == (each(i), each.end(i)), i
