"""A YAML mapping's string values as the conversion reads them.

Most values of a YAML conversation are string scalars in a mapping (a message's `id`,
`role` and `content`); ``_YamlConverter`` reads those in its loop over the mapping's
members. Each must come out as every other value does: its range the scalar's text
(absolute at the root, relative to its message inside the list), a block scalar's range
trimmed of its trailing breaks, a value reached again through an alias counted as one
(the value count is then 0), and the value and nesting limits reported at the value that
passes them.
"""

from __future__ import annotations

import pytest

from assembly import syntax
from assembly.syntax import SNode, parse_yaml

DOC = (
    "settings: {model: gpt-4o, note: 'it''s'}\n"
    "custom_agent_prompt: Be brief.\n"
    "messages:\n"
    "  - id: m1\n"
    "    role: user\n"
    '    content: "a \\"quoted\\" text\\n"\n'
    "  - id: m2\n"
    "    role: assistant\n"
    "    content: a plain\n"
    "      text over two lines\n"
    "  - role: user\n"
    "    content: |\n"
    "      literal\n"
    "      block\n"
    "\n"
    "\n"
    "  - role: assistant\n"
    "    content: >\n"
    "      folded\n"
    "\n"
)


def _member(node: SNode, key: str) -> SNode:
    found = node.get(key)
    assert found is not None, key
    return found


def test_string_values_cover_their_scalars_text() -> None:
    parsed = parse_yaml(DOC, messages=True)
    root = parsed.root
    assert root is not None and not parsed.errors
    settings = _member(root, "settings")
    note = _member(settings, "note")
    assert note.value == "it's"
    assert DOC[note.range.start : note.range.end] == "'it''s'"
    prompt = _member(root, "custom_agent_prompt")
    assert DOC[prompt.range.start : prompt.range.end] == "Be brief."
    items = _member(root, "messages").items
    starts = _member(root, "messages").starts
    assert starts is not None

    def source(i: int, key: str) -> str:
        value = _member(items[i], key)
        return DOC[starts[i] + value.range.start : starts[i] + value.range.end]

    assert source(0, "id") == "m1"
    assert _member(items[0], "content").value == 'a "quoted" text\n'
    assert source(0, "content") == '"a \\"quoted\\" text\\n"'
    assert source(1, "content") == "a plain\n      text over two lines"
    assert _member(items[1], "content").value == "a plain text over two lines"
    # Block scalars end at their last line, not at the blank lines after them.
    assert source(2, "content") == "|\n      literal\n      block"
    assert source(3, "content") == ">\n      folded"
    # Keys too: relative inside the list, absolute outside it.
    key_range = items[0].members[2].key_range
    assert DOC[starts[0] + key_range.start : starts[0] + key_range.end] == "content"
    assert DOC[root.members[1].key_range.start : root.members[1].key_range.end] == (
        "custom_agent_prompt"
    )


def test_a_string_reached_twice_through_an_alias_counts_as_an_alias() -> None:
    plain = "a: text\nb: other\n"
    aliased = "a: &t text\nb: *t\n"
    assert parse_yaml(plain).tokens == 3  # the mapping and its two values
    read = parse_yaml(aliased)
    assert read.root is not None
    assert [m.value.value for m in read.root.members] == ["text", "text"]
    assert read.tokens == 0  # a value read twice: counted only when read whole


@pytest.mark.parametrize(("budget", "past"), [(16, "one"), (17, "two")])
def test_the_value_limit_is_reported_at_the_first_value_past_it(
    monkeypatch: pytest.MonkeyPatch, budget: int, past: str
) -> None:
    # 15 parser events (the limit counted before composing), 18 values once the aliases
    # are read: the root, `a`'s list and its 4 items, twice again through `*l`, `d`, `e`.
    monkeypatch.setattr(syntax, "MAX_YAML_NODES", budget)
    text = "a: &l [x, y, z, w]\nb: *l\nc: *l\nd: one\ne: two\n"
    read = parse_yaml(text)
    assert [e.code for e in read.errors] == ["document-too-large"]
    error = read.errors[0]
    assert text[error.range.start : error.range.end] == past
    assert read.root is not None
    values = {m.key: m.value.value for m in read.root.members if m.value.kind == "string"}
    assert values == ({} if past == "one" else {"d": "one"})


def test_a_string_past_the_nesting_limit_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(syntax, "MAX_DEPTH", 3)
    text = "a:\n  b:\n    c: deep\n    d: [x]\n  e: shallow\n"
    read = parse_yaml(text)
    assert [e.message for e in read.errors] == ["nesting deeper than 3 levels"]
    assert text[read.errors[0].range.start : read.errors[0].range.end] == "deep"
    root = read.root
    assert root is not None
    a = _member(root, "a")
    assert _member(a, "e").value == "shallow"
    assert [m.key for m in _member(a, "b").members] == []  # `c` and `d` are too deep
