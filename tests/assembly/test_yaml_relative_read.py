"""A whole YAML read makes the message list's items relative in its one conversion.

``parse_yaml(text, messages=True)`` must give exactly the tree that reading every range
absolute and then copying the message list's items relative to their starts gives
(``yamldoc._with_relative_messages`` on the absolute tree): every node's kind, value and
range (absolute or relative), every key range, the table of starts, the findings and the
value count. Checked on the project's YAML documents and on hostile ones (aliases into the
list, a list that contains itself, duplicate ``messages`` keys, a last ``messages`` that is
not a list, flow and root lists, block scalars, unknown tags, nesting past the limit, the
value and alias limits).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from assembly.formats.yamldoc import _with_relative_messages, parse_yaml_conversation
from assembly.syntax import MAX_YAML_ALIAS_NODES, parse_yaml
from tests.support.trees import tree_shape

DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

HOSTILE = {
    "alias": "a: &x {role: user, content: hi}\nmessages:\n  - *x\n  - *x\n"
    "  - role: assistant\n    content: |\n      block\n      text\n\n\n",
    "duplicate-messages": "messages:\n  - {role: user, content: a}\nmessages:\n"
    "  - role: user\n    content: b\n",
    "last-messages-not-a-list": "messages:\n  - {role: user, content: a}\nmessages:\n  x: 1\n",
    "nested-messages": "messages:\n  messages:\n    - role: user\n      content: b\n",
    "flow-root": "[{role: user, content: a}, {role: assistant, content: b}]\n",
    "block-root": "- role: user\n  content: >\n    folded\n    text\n\n"
    "- role: assistant\n  content: ok  # c\n# trailing\n",
    "empty": "messages: []\n",
    "scalar": "just text\n",
    "contains-itself": "messages: &m\n  - role: user\n    content: *m\n",
    "tags": "messages:\n  - !!str role: user\n    content: !custom x\n    n: 0x1F\n"
    "    f: 1_000.5\n    b: yes\n    z: ~\n",
    "complex-key": "messages:\n  - ? [a, b]\n    : 1\n    role: user\n",
    "too-deep": "messages:\n  - " + "[" * 300 + "]" * 300 + "\n",
    "settings-after": "settings: {model: gpt-4o}\nmessages:\n  - role: user\n"
    "    content: a\ntools: []\n",
    "alias-bomb": "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    "messages: [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n",
    "alias-limit-in-list": "x: &x ["
    + ",".join(["v"] * 40)
    + "]\nmessages:\n"
    + "".join("  - *x\n" for _ in range(MAX_YAML_ALIAS_NODES // 40 + 2)),
    "broken": "messages:\n  - role: user\n    content: a\n  - role: [\n"
    "  - role: user\n    content: c\n",
}


def _read(text: str, messages: bool) -> Any:
    parsed = parse_yaml(text, messages=messages)
    root = parsed.root
    if root is not None:
        # The copy the one conversion replaces (still made of a tree kept before a syntax
        # error, which the conversion did not read whole).
        copied = _with_relative_messages(root)
        if messages and not parsed.errors:
            assert copied is root  # nothing left to copy
        root = copied
    errors = tuple((e.message, e.range.start, e.range.end, e.code) for e in parsed.errors)
    return tree_shape(root), errors, parsed.tokens


def _documents() -> list[tuple[str, str]]:
    files = sorted(
        p
        for folder in (DATA, EXAMPLES)
        for p in folder.rglob("*")
        if p.suffix in (".yaml", ".yml") and p.is_file()
    )
    return [(str(p.relative_to(p.parents[1])), p.read_text(encoding="utf-8")) for p in files]


def test_the_project_has_yaml_documents_to_check() -> None:
    assert len(_documents()) > 100


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_documents_read_as_the_copy_reads_them(name: str) -> None:
    assert _read(HOSTILE[name], True) == _read(HOSTILE[name], False)


def test_project_documents_read_as_the_copy_reads_them() -> None:
    for name, text in _documents():
        assert _read(text, True) == _read(text, False), name


def test_the_message_list_is_relative_and_the_rest_absolute() -> None:
    text = "settings: {model: gpt-4o}\nmessages:\n  - role: user\n    content: hi\n"
    root = parse_yaml_conversation(text).root
    assert root is not None
    holder = root.get("messages")
    assert holder is not None and holder.starts == (text.index("role"),)
    item = holder.items[0]
    assert type(item.range).__name__ == "RelRange" and item.range.start == 0
    assert type(root.members[0].key_range).__name__ == "TextRange"
    content = item.get("content")
    assert content is not None and content.range.start == text.index("hi") - holder.starts[0]


@pytest.mark.parametrize("messages", [False, True])
def test_a_block_collection_ending_in_an_alias_ends_where_libyaml_ends_it(
    messages: bool,
) -> None:
    # The alias's value lies at its anchor, before the collection: it cannot end there
    # (this was an AssertionError, an internal-error finding, before).
    text = "x: &x [a, b]\nm:\n  k: *x\nmessages:\n  - *x\n  - *x\n"
    parsed = parse_yaml(text, messages=messages)
    assert parsed.root is not None and not parsed.errors
    m, holder = parsed.root.get("m"), parsed.root.get("messages")
    assert m is not None and holder is not None
    assert (m.range.start, m.range.end) == (text.index("k:"), text.index("messages"))
    assert (holder.range.start, holder.range.end) == (text.index("  - *x") + 2, len(text))
