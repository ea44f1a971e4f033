"""Finding things in a conversation's source tree: the node under the cursor, id mentions.

Offsets are code points into the document text. A string value's range includes its
quotes (JSON, quoted YAML) or its block indicator (YAML ``|``/``>``); the places found in
string values are mapped back to the text with ``assembly.sourcemap.string_offset_map``,
so a mention inside an escaped JSON string (a tool call's ``arguments``) is exact.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from assembly.sourcemap import string_offset_map
from assembly.syntax import SNode
from assembly.text import TextRange

_ID_CHAR = re.compile(r"[A-Za-z0-9_\-]")


@dataclass(frozen=True, slots=True)
class Step:
    """One node on the way from the root to the cursor and how it was reached."""

    key: str | int | None  # the member key or array index; None for the root
    node: SNode


@dataclass(frozen=True, slots=True)
class Mention:
    """A place in a string value that names an id."""

    range: TextRange  # the id's own characters in the document
    exact: bool  # the whole string value is the id (a ``file_id`` field, not prose)
    value_range: TextRange  # the range of the string value it is in


def path_at(root: SNode | None, offset: int) -> list[Step]:
    """Return the nodes from the root down to the deepest one whose range holds ``offset``.

    A range holds the offsets from its start through its end (the cursor right after a
    closing quote still counts). An empty list when the root does not hold it.
    """
    if root is None or not root.range.contains(offset):
        return []
    res = [Step(None, root)]
    node = root
    while True:
        child: Step | None = None
        if node.kind == "object" and node.members:
            i = bisect.bisect_right(node.members, offset, key=lambda m: m.value.range.start) - 1
            if i >= 0 and node.members[i].value.range.contains(offset):
                member = node.members[i]
                child = Step(member.key, member.value)
        elif node.kind == "array" and node.items:
            i = bisect.bisect_right(node.items, offset, key=lambda n: n.range.start) - 1
            if i >= 0 and node.items[i].range.contains(offset):
                child = Step(i, node.items[i])
        if child is None:
            return res
        res.append(child)
        node = child.node


def inner_range(text: str, node: SNode) -> TextRange:
    """The range of a scalar's own characters (quotes and block indicators left out)."""
    if node.kind != "string":
        return node.range
    return string_offset_map(text, node.range, node.value).range(0, len(node.value))


def mentions_in(text: str, node: SNode, needle: str) -> list[Mention]:
    """Where the string ``node`` names ``needle`` (as a whole id, not inside a longer one)."""
    value = node.value
    if node.kind != "string" or not needle or needle not in value:
        return []
    if value == needle:
        return [Mention(inner_range(text, node), True, node.range)]
    offsets = string_offset_map(text, node.range, value)
    res = []
    i = value.find(needle)
    while i != -1:
        end = i + len(needle)
        if _is_whole(value, i, end):
            res.append(Mention(offsets.range(i, end), False, node.range))
        i = value.find(needle, end)
    return res


def mentions(root: SNode | None, text: str, needle: str) -> list[Mention]:
    """Every mention of the id ``needle`` in the string values of the document, in order.

    The text is searched first (fast on a large document) and each hit checked against the
    string value that holds it; a mention written only with escapes (``\\u0041``) is found
    when the same string also names it literally.
    """
    res: list[Mention] = []
    if root is None or not needle:
        return res
    seen: set[int] = set()  # the strings read, by start (nodes are views made on demand)
    pos = text.find(needle)
    while pos != -1:
        path = path_at(root, pos)
        node = path[-1].node if path else None
        if node is not None and node.kind == "string" and node.range.start not in seen:
            seen.add(node.range.start)
            res.extend(mentions_in(text, node, needle))
        pos = text.find(needle, pos + len(needle))
    return res


def _is_whole(value: str, start: int, end: int) -> bool:
    before = value[start - 1] if start > 0 else ""
    after = value[end] if end < len(value) else ""
    return not (before and _ID_CHAR.match(before)) and not (after and _ID_CHAR.match(after))
