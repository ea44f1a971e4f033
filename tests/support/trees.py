"""A source tree as a comparable value: every node's kind, value and range (of which kind,
absolute or relative), every key's range, the message list's starts."""

from __future__ import annotations

from typing import Any

from assembly.syntax import SNode


def tree_shape(node: SNode | None) -> Any:
    """``node``'s tree as nested tuples (equal trees give equal values)."""
    if node is None:
        return None
    r = node.range
    return (
        node.kind,
        type(r).__name__,
        r.start,
        r.end,
        repr(node.value),
        node.starts,
        tuple(
            (
                m.key,
                type(m.key_range).__name__,
                m.key_range.start,
                m.key_range.end,
                tree_shape(m.value),
            )
            for m in node.members
        ),
        tuple(tree_shape(i) for i in node.items),
    )
