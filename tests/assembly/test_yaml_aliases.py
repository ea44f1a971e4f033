"""A YAML node reached again through an alias reads as if converted again, node by node.

``_YamlConverter`` gives a node reached again (at the same depth, from the same item of the
message list) the tree it made the first time it was reached again, when that conversion
reported nothing and passed no limit, and charges its budgets as a conversion node by node
would (``_YamlConverter._again``). The tree, the findings (where a limit is passed
included) and the value count must be exactly those of converting every alias node by node
(``SHARE`` off), for graphs of anchors and aliases of every kind: nested, merged, repeated
in the message list, containing themselves, with unknown tags and duplicate keys, and at
every limit (values, aliases, nesting).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembly import syntax
from assembly.syntax import parse_yaml
from tests.support.trees import tree_shape


def _read(text: str, messages: bool) -> Any:
    parsed = parse_yaml(text, messages=messages)
    errors = [(e.code, e.message, e.range.start, e.range.end) for e in parsed.errors]
    return tree_shape(parsed.root), errors, parsed.tokens


def _both(monkeypatch: pytest.MonkeyPatch, text: str, messages: bool) -> tuple[Any, Any]:
    shared = _read(text, messages)
    with monkeypatch.context() as m:
        m.setattr(syntax._YamlConverter, "SHARE", False)
        alone = _read(text, messages)
    return shared, alone


@st.composite
def _documents(draw: st.DrawFn) -> str:
    n = draw(st.integers(1, 5))
    kinds: list[str] = []
    lines: list[str] = []

    def ref(k: int) -> str:
        # An earlier anchor, or (rarely) the one being written: a value containing itself.
        j = draw(st.integers(0, k if draw(st.integers(0, 6)) == 0 else max(k - 1, 0)))
        return f"*a{j}" if j < k or draw(st.booleans()) else "x"

    for k in range(n):
        kind = draw(st.sampled_from(["seq", "map", "str"]))
        if kind == "str":
            value = draw(st.sampled_from(["plain", "'quoted'", "!custom tagged", "|\n    block"]))
        elif kind == "seq":
            items = [
                draw(st.sampled_from(["x", "1", "[y, z]"]))
                if k == 0 or draw(st.booleans())
                else ref(k)
                for _ in range(draw(st.integers(1, 6)))
            ]
            value = "[" + ", ".join(items) + "]"
        else:
            members = [f"k{i}: {ref(k) if k and draw(st.booleans()) else 'v'}" for i in range(3)]
            merged = [j for j in range(k) if kinds[j] == "map"]
            if merged and draw(st.booleans()):
                members.append(f"<<: *a{draw(st.sampled_from(merged))}")
            if draw(st.integers(0, 4)) == 0:
                members.append("k0: again")  # a duplicate key
            value = "{" + ", ".join(members) + "}"
        kinds.append(kind)
        lines.append(f"a{k}: &a{k} {value}")
    lines.append("messages:")
    for _ in range(draw(st.integers(0, 4))):
        j = draw(st.integers(0, n - 1))
        if kinds[j] == "map" and draw(st.booleans()):
            lines.append(f"  - *a{j}")
        else:
            lines.append(f"  - role: user\n    content: hi\n    extra: *a{j}")
    return "\n".join(lines) + "\n"


@settings(max_examples=300, deadline=None)
@given(
    _documents(),
    st.booleans(),
    st.sampled_from([3, 12, 40, syntax.MAX_YAML_ALIAS_NODES]),
    st.sampled_from([25, 60, syntax.MAX_YAML_NODES]),
    st.sampled_from([3, 5, syntax.MAX_DEPTH]),
)
def test_aliases_read_as_if_converted_node_by_node(
    text: str, messages: bool, alias_limit: int, value_limit: int, depth_limit: int
) -> None:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(syntax, "MAX_YAML_ALIAS_NODES", alias_limit)
        m.setattr(syntax, "MAX_YAML_NODES", value_limit)
        m.setattr(syntax, "MAX_DEPTH", depth_limit)
        shared, alone = _both(m, text, messages)
    assert shared == alone


BOMB = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{k}: &a{k} [{', '.join([f'*a{k - 1}'] * 10)}]\n" for k in range(1, 9)
)


def test_an_alias_bomb_is_counted_without_converting_each_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = BOMB + "messages: [{role: user, content: hi, extra: *a8}]\n"
    shared, alone = _both(monkeypatch, text, messages=True)
    assert shared == alone
    _, errors, tokens = shared
    assert [e[:2] for e in errors] == [
        (
            "document-too-large",
            f"YAML aliases expand to more than {syntax.MAX_YAML_ALIAS_NODES:,} repeated "
            "values: the rest is ignored",
        )
    ]
    assert tokens == 0
    # The limit's 100,000 values, each converted node by node without the shared trees; a
    # few hundred conversions with them.
    calls = {True: 0, False: 0}
    convert = syntax._YamlConverter.convert

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls[type(self).SHARE] += 1
        return convert(self, *args, **kwargs)

    monkeypatch.setattr(syntax._YamlConverter, "convert", counted)
    parse_yaml(text, messages=True)
    monkeypatch.setattr(syntax._YamlConverter, "SHARE", False)
    parse_yaml(text, messages=True)
    assert calls[False] > syntax.MAX_YAML_ALIAS_NODES
    assert calls[True] < 1_000


def test_a_shared_value_stands_in_each_place() -> None:
    text = "base: &b {role: user, content: hi}\nmessages:\n  - *b\n  - *b\n  - *b\n"
    root = parse_yaml(text, messages=True).root
    assert root is not None
    items = root.get("messages").items  # type: ignore[union-attr]
    assert [i.get("content").value for i in items] == ["hi", "hi", "hi"]  # type: ignore[union-attr]
