"""YAML conversations: the message list stored position-free, re-read one piece at a time.

libyaml (PyYAML's ``CSafeLoader``, ``syntax.parse_yaml``) has no incremental mode, so an
edit re-reads only the top-level piece it touched, with that same parser, and keeps the
rest of the previous source tree:

- ``parse_yaml_conversation`` is the whole read: ``parse_yaml``, then the message list (the
  top-level sequence, or the top-level mapping's ``messages``) stored like JSON's: each item
  relative to its own start (``RelRange``s) with the starts in ``SNode.starts``, so a
  ``Message`` read from it does not depend on where it stands (value snapshots).
- ``reparse_yaml`` re-reads after an edit. Item boundaries come from the previous tree (the
  starts of the items and of the top-level keys) checked against the text's indentation:
  an item starts on a line made of its indentation and ``-``; a top-level key starts a
  line. The window is the item(s) of ``messages`` (or the top-level member(s)) the edit
  touched, from the start of the line of the first to the start of the line of the next
  untouched one; it is parsed alone by ``parse_yaml`` at its depth and spliced in.

Why the window alone gives what a whole parse gives: it starts and ends at line starts, so
every column is the same; in both parses the scanner is at that point in the same state (a
block sequence at the item's indentation expecting an entry, or the root mapping expecting
a key at column 0: the text before it is unchanged, and an item's content lies deeper than
its ``-``); and it ends where a line holds the next item's ``-`` (or the next top-level key,
or the end of the text), which ends whatever the window left open in both. What could tell
the two apart is declined, and the caller then reads the whole text: a previous parse with
any finding or any alias (``tokens`` is 0 then); a window with a finding, an alias, a line
starting with ``---``, ``...`` or ``%`` (another document, a directive), or a result that is
not a block sequence at the item's indentation (a block mapping at column 0); items that do
not begin on their ``-`` line; a top-level key repeated or named ``messages``; an edit
before the first top-level key or on the ``messages:`` line; limits that might be reached.
The randomized test (``tests/assembly/test_yaml_incremental.py``) compares every result with
a whole read.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right

from assembly.model import Conversation
from assembly.rope import Text
from assembly.syntax import (
    MAX_TOP_ITEMS,
    MAX_YAML_NODES,
    Member,
    ParsedData,
    SNode,
    iter_nodes,
    parse_yaml,
)
from assembly.text import RelRange, TextRange

# A line that may begin or end a document or hold a directive: outside one item.
_DOCUMENT_LINE = re.compile(r"^(?:---|\.\.\.|%)", re.MULTILINE)


def parse_yaml_conversation(text: str) -> ParsedData:
    """``parse_yaml`` with the message list's items stored relative to their starts."""
    parsed = parse_yaml(text)
    if parsed.root is None:
        return parsed
    root = _with_relative_messages(parsed.root)
    return ParsedData(root, parsed.errors, tokens=parsed.tokens)


def _with_relative_messages(root: SNode) -> SNode:
    if root.is_array:
        return _relative_list(root)
    holder = root.member("messages") if root.is_object else None
    if holder is None or not holder.value.is_array:
        return root
    members = tuple(
        Member(m.key, m.key_range, _relative_list(m.value)) if m is holder else m
        for m in root.members
    )
    return SNode("object", root.range, members=members)


def _relative_list(node: SNode) -> SNode:
    starts = tuple(item.range.start for item in node.items)
    items = tuple(_relative(item, s) for item, s in zip(node.items, starts, strict=True))
    return SNode("array", node.range, items=items, starts=starts)


def _relative(node: SNode, base: int) -> SNode:
    """``node`` (absolute ranges) with every range relative to ``base``."""
    r = node.range
    rel = RelRange(r.start - base, r.end - base)
    if node.kind == "object":
        members = tuple(
            Member(
                m.key,
                RelRange(m.key_range.start - base, m.key_range.end - base),
                _relative(m.value, base),
            )
            for m in node.members
        )
        return SNode("object", rel, members=members)
    if node.kind == "array":
        return SNode("array", rel, items=tuple(_relative(i, base) for i in node.items))
    return SNode(node.kind, rel, node.value)


def _shifted(node: SNode, delta: int) -> SNode:
    """``node`` (absolute ranges; a message list's items relative to their starts) moved by
    ``delta``: the message list's items stay, its starts move."""
    if not delta:
        return node
    r = node.range
    moved = TextRange(r.start + delta, r.end + delta)
    if node.kind == "object":
        members = tuple(
            Member(m.key, m.key_range.shift(delta), _shifted(m.value, delta)) for m in node.members
        )
        return SNode("object", moved, members=members)
    if node.kind == "array":
        if node.starts is not None:
            starts = tuple(s + delta for s in node.starts)
            return SNode("array", moved, items=node.items, starts=starts)
        return SNode("array", moved, items=tuple(_shifted(i, delta) for i in node.items))
    return SNode(node.kind, moved, node.value)


def _values(node: SNode) -> int:
    """How many values ``parse_yaml`` counted for ``node`` (``ParsedData.tokens``)."""
    return sum(1 for _ in iter_nodes(node))


def _is_dash_line(text: Text, at: int, indent: int) -> bool:
    """Whether the line starting at ``at`` begins with ``indent`` spaces and a ``-`` entry."""
    head = text[at : at + indent + 2]
    return (
        head[:indent] == " " * indent
        and head[indent : indent + 1] == "-"
        and (len(head) == indent + 1 or head[indent + 1] in " \r\n")
    )


def _line_start(text: Text, at: int) -> int:
    return text.rfind("\n", 0, at) + 1


def reparse_yaml(
    prev: Conversation, prev_text: Text, new_text: Text, span: tuple[int, int, int]
) -> ParsedData | None:
    """The parse of ``new_text`` (what ``parse_yaml_conversation`` gives), sharing the
    previous tree's untouched items and members, or None (parse it all).

    ``span``: ``prev_text[p:old_end]`` became ``new_text[p:new_end]``.
    """
    if prev.syntax is None or prev.tree is None:
        return None
    errors, tokens = prev.syntax
    if errors or tokens <= 0 or 2 * tokens > MAX_YAML_NODES:
        return None
    root = prev.tree
    holder: SNode | None = None
    mi = -1
    if root.is_array:
        holder = root
    elif root.is_object:
        mi = max((j for j, m in enumerate(root.members) if m.key == "messages"), default=-1)
        if mi >= 0 and root.members[mi].value.is_array:
            holder = root.members[mi].value
    p = span[0]
    if holder is not None and holder.items and holder.starts is not None:
        if holder.range.start < p:
            return _reparse_items(prev, prev_text, new_text, span, holder, mi)
    if root.is_object and root.members:
        return _reparse_members(prev, prev_text, new_text, span, mi)
    return None


def _reparse_items(
    prev: Conversation,
    prev_text: Text,
    new_text: Text,
    span: tuple[int, int, int],
    holder: SNode,
    mi: int,
) -> ParsedData | None:
    """An edit after the first ``-`` of the message list: the items it touched are parsed
    again as one block sequence, the others kept."""
    p, old_end, new_end = span
    delta = new_end - old_end
    root = prev.tree
    assert root is not None and holder.starts is not None
    starts, items = holder.starts, holder.items
    n = len(starts)
    first = _line_start(prev_text, holder.range.start)
    indent = holder.range.start - first
    if not _is_dash_line(prev_text, first, indent):
        return None

    def line_of(k: int) -> int | None:
        """The start of item ``k``'s ``-`` line in the previous text."""
        at = _line_start(prev_text, starts[k])
        return at if _is_dash_line(prev_text, at, indent) else None

    # The first item touched: the last whose line starts before the edit.
    c = bisect_right(starts, p)
    k0 = c - 1
    if c < n:
        at = line_of(c)
        if at is None:
            return None
        if at < p:
            k0 = c
    if k0 < 0:
        return None
    ws = line_of(k0)
    if ws is None or ws >= p:
        return None
    # The first item untouched: its line starts at or after the edit's end.
    j = max(bisect_left(starts, old_end), k0 + 1)
    end: int | None = None
    while j < n:
        at = line_of(j)
        if at is None:
            return None
        if at >= old_end:
            end = at
            break
        j += 1
    if end is None:  # to the end of the list: the next top-level key, or the text's end
        if root is holder or mi == len(root.members) - 1:
            end = prev.length
        else:
            end = root.members[mi + 1].key_range.start
            if end == 0 or prev_text[end - 1] != "\n":
                return None
        if end < old_end:
            return None
    we = end + delta
    if we < len(new_text) and (we <= ws or new_text[we - 1] != "\n"):
        return None
    window = new_text[ws:we]
    if not _is_dash_line(window, 0, indent) or _DOCUMENT_LINE.search(window):
        return None
    parsed = parse_yaml(window, depth=0 if root is holder else 1)
    seq = parsed.root
    if (
        parsed.errors
        or parsed.tokens <= 0
        or seq is None
        or not seq.is_array
        or seq.range.start != indent
        or not seq.items
    ):
        return None
    if j < n and indent and seq.items[-1].range.end > len(window.rstrip()):
        return None  # an empty value placed at the next token: the next ``-``, not the end
    new_count = k0 + len(seq.items) + n - j
    if new_count > MAX_TOP_ITEMS:
        return None
    tokens = prev.syntax[1] if prev.syntax else 0
    tokens += parsed.tokens - 1 - sum(_values(items[k]) for k in range(k0, j))
    if 2 * tokens > MAX_YAML_NODES:
        return None
    new_starts = [ws + item.range.start for item in seq.items]
    new_items = [_relative(item, item.range.start) for item in seq.items]
    hend = ws + seq.items[-1].range.end if j == n else holder.range.end + delta
    new_holder = SNode(
        "array",
        TextRange(holder.range.start, hend),
        items=(*items[:k0], *new_items, *items[j:]),
        starts=(*starts[:k0], *new_starts, *(s + delta for s in starts[j:])),
    )
    if root is holder:
        return ParsedData(new_holder, (), tokens=tokens)
    members = list(root.members)
    members[mi] = Member("messages", members[mi].key_range, new_holder)
    for i in range(mi + 1, len(members)):
        m = members[i]
        members[i] = Member(m.key, m.key_range.shift(delta), _shifted(m.value, delta))
    new_root = SNode(
        "object",
        TextRange(root.range.start, members[-1].value.range.end),
        members=tuple(members),
    )
    return ParsedData(new_root, (), tokens=tokens)


def _reparse_members(
    prev: Conversation,
    prev_text: Text,
    new_text: Text,
    span: tuple[int, int, int],
    mi: int,
) -> ParsedData | None:
    """An edit in top-level members other than ``messages`` (the root a block mapping at
    column 0): the members it touched are parsed again as one mapping, the others kept."""
    p, old_end, new_end = span
    delta = new_end - old_end
    root = prev.tree
    assert root is not None
    members = root.members
    keys = [m.key_range.start for m in members]
    i0 = bisect_left(keys, p) - 1  # the last key starting before the edit
    if i0 < 0:
        return None
    j = max(bisect_left(keys, old_end), i0 + 1)  # the first key at or after its end
    if i0 <= mi < j:
        return None  # the message list is in the window: parse it all
    ws = keys[i0]
    end = keys[j] if j < len(members) else prev.length
    for at in (ws, end):
        if at != prev.length and at > 0 and prev_text[at - 1] != "\n":
            return None  # not a key at column 0
    we = end + delta
    if we < len(new_text) and (we <= ws or new_text[we - 1] != "\n"):
        return None
    window = new_text[ws:we]
    if _DOCUMENT_LINE.search(window):
        return None
    parsed = parse_yaml(window)
    top = parsed.root
    if (
        parsed.errors
        or parsed.tokens <= 0
        or top is None
        or not top.is_object
        or top.range.start != 0
        or not top.members
    ):
        return None
    outside = {m.key for m in members[:i0]} | {m.key for m in members[j:]}
    if any(m.key in outside or m.key == "messages" for m in top.members):
        return None
    if any(m.value.is_array and len(m.value.items) > MAX_TOP_ITEMS for m in top.members):
        return None
    tokens = prev.syntax[1] if prev.syntax else 0
    tokens += parsed.tokens - 1 - sum(_values(members[i].value) for i in range(i0, j))
    if 2 * tokens > MAX_YAML_NODES:
        return None
    new_members = (
        *members[:i0],
        *(Member(m.key, m.key_range.shift(ws), _shifted(m.value, ws)) for m in top.members),
        *(Member(m.key, m.key_range.shift(delta), _shifted(m.value, delta)) for m in members[j:]),
    )
    new_root = SNode(
        "object",
        TextRange(new_members[0].key_range.start, new_members[-1].value.range.end),
        members=new_members,
    )
    return ParsedData(new_root, (), tokens=tokens)
