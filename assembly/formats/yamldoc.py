"""YAML conversations: the message list stored position-free, re-read one piece at a time.

libyaml (PyYAML's ``CSafeLoader``) has no incremental mode, so an edit re-reads only the
top-level piece it touched, with the steps of ``syntax.parse_yaml`` itself, and keeps the
rest of the previous source tree:

- ``parse_yaml_conversation`` is the whole read: ``parse_yaml``, then the message list (the
  top-level sequence, or the top-level mapping's ``messages``) stored like JSON's: each item
  relative to its own start (``RelRange``s) with the starts in ``SNode.starts``, so a
  ``Message`` read from it does not depend on where it stands (value snapshots). After a
  syntax error inside the message list it recovers (``_recover``): libyaml stops at the
  error, and the list goes on at the next line that starts an item (its indentation and
  ``-``), read alone to the end of the text; the damaged items between are left out, the
  error reports them.
- ``reread_yaml`` re-reads after an edit. Item boundaries come from the previous tree (the
  starts of the items and of the top-level keys) checked against the text's indentation:
  an item starts on a line made of its indentation and ``-``; a top-level key starts a
  line. The window is the items of the message list (or the top-level members) the edit
  touched, from the start of the line of the first to the start of the line of the next
  untouched one; it is composed alone, converted at its depth and spliced in.

Why the window alone gives what a whole parse gives: it starts and ends at line starts, so
every column is the same; at its start the scanner is in the same state in both parses (a
block sequence at the item's indentation expecting an entry, or the root mapping expecting
a key at column 0: the text before is unchanged, and an item's content lies deeper than its
``-``); and it ends where a line holds the next item's ``-`` (or the next top-level key, or
the end of the text), which ends whatever the window left open in both. What could tell the
two apart is declined, and the caller then reads the whole text: a previous parse with any
finding or any alias (``tokens`` is 0 then) unless it keeps its last whole parse (below); a
window with an alias, a line starting with ``---``, ``...`` or ``%`` (another document, a
directive), or a result that is not a block sequence at the item's indentation (a block
mapping at column 0); items that do not begin on their ``-`` line; a top-level key repeated
or named ``messages``; an edit on the ``messages:`` line or across the list's ends; limits
that might be reached. What converting the window finds (a duplicate key, an unsupported
tag) is what the whole parse finds, at the same places.

An item's ``-`` line at column 0 made a line that ends the list (``-`` typed at its start:
``-- id: m5`` is a top-level key; ``_list_ended``): the whole parse ends the list there and
stops at the error on the item's next line. The window is the ``messages:`` line, the item
before and the text from that line on; the items after it are left out, the document's
fields read again (``incremental._read_items`` with ``fields``), the items before kept.
Deleting the ``-`` re-reads from the last whole parse: the item read again reads as it
did and keeps its object (``incremental._as_before``), so the version is the one before,
object for object, and the stages go on from the memos they set aside (``seq.apart``
tells the nearer: the whole version's, or the ended one's when the list then ends one
item further).

Half-typed messages: while an item is being typed the text is often not YAML (``- id: x``
then ``  ro`` before its ``:``). An error of the scanner, or of the parser inside an item
(its context, the construct left open, starts after the item's ``-``), in the message
list's window, where the scanner cannot have reached the window's end (or the window ends
the document; else the window takes more items, a quote may be left open), is the whole
parse's error, and the tree it keeps (the longest prefix of whole lines before the error
that composes, ``syntax.yaml_prefix_tree``) is the items before the window and the
window's prefix. A quote left open at the window's end is told apart without reading on:
libyaml reads the text after the window into the scalar, which can end only where that
text holds its quote, a backslash (double-quoted) or a document marker (``_closer``, one
scan per whole parse); where it holds none, the whole parse fails at the end of the
text exactly as the window does at its own, and the window is read as if it ended the
text (it was read again to the end of the text on each keystroke).
The recovery's piece (``_recover_window``) starts at the next item's line:
in the window (read alone from there: what follows the window is the previous items, as
for a window) or at the window's end (the previous items from there on, kept; also when
the edit ends before the piece: the text from there on is unchanged). The result
remembers the last whole parse (``_Base``) and the span edited since, so the next
keystrokes are re-read from it until the text is whole again, the untouched messages the
same objects throughout. The randomized tests (``tests/assembly/test_yaml_incremental.py``,
with damage in the middle from ``tests/support/random_edits.py``) compare every result with
a whole read.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from assembly.formats.detect import NATIVE
from assembly.model import Conversation, DocFormat
from assembly.rope import Text
from assembly.syntax import (
    MAX_TOP_ITEMS,
    MAX_YAML_NODES,
    Member,
    ParsedData,
    SNode,
    SyntaxIssue,
    compose_yaml,
    convert_yaml,
    gc_paused,
    iter_nodes,
    parse_yaml,
    yaml_issue,
    yaml_prefix_tree,
)
from assembly.text import RelRange, TextRange

# A line that may begin or end a document or hold a directive: outside one item.
_DOCUMENT_LINE = re.compile(r"^(?:---|\.\.\.|%)", re.MULTILINE)
# What may be an alias (``*name`` where a value starts): its anchor may lie outside.
_ALIAS = re.compile(r"(?:^|[\s\[{,])\*\S")
# What libyaml reads as a line break besides ``\n`` and ``\r\n`` (YAML 1.1).
_OTHER_BREAK = re.compile("\r(?!\n)|[\x85\u2028\u2029]")
# Key of the memo a half-typed result keeps (``Conversation._views``).
_BASE = "yaml-base"
# Key of the memo of a text's ``_count_marks``.
_MARKS = "yaml-marks"

Read = Callable[[ParsedData, DocFormat, int, Conversation], Conversation]
Replace = Callable[[Conversation, DocFormat, int, int, SNode, int, int], Conversation | None]
Splice = Callable[..., Conversation | None]


def parse_yaml_conversation(text: str) -> ParsedData:
    """``parse_yaml`` with the message list's items stored relative to their starts, and
    after a syntax error inside the message list, the items after it read again
    (``_recover``)."""
    parsed = parse_yaml(text, messages=True)
    if parsed.root is None:
        return parsed
    with gc_paused():  # a copy of the message list's nodes (no cyclic garbage), if need be
        root = _with_relative_messages(parsed.root)
        if parsed.errors:
            found = _recover(text, root, parsed.errors)
            if found is not None:
                return found
    return ParsedData(root, parsed.errors, tokens=parsed.tokens)


# Error recovery: pieces of the message list read after a syntax error, at most this many.
_MAX_PIECES = 16


@lru_cache(maxsize=8)
def _line_kinds(indent: int) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Two patterns matching a line break and the line after it: one an item's line (its
    ``-`` at ``indent``, as ``_is_dash_line``), the other a line that ends the message
    list (not blank, not a comment, indented no deeper than the ``-`` and not an item's:
    a top-level key, a document marker, a less indented line)."""
    dash = re.compile(rf"\n {{{indent}}}-(?=[ \r\n]|\Z)")
    if indent:
        out = (
            rf"\n(?: {{0,{indent}}}[^ \t\r\n#-]| {{0,{indent - 1}}}-"
            rf"| {{{indent}}}-(?![ \r\n]|\Z))"
        )
    else:
        out = r"\n(?:[^ \t\r\n#-]|-(?![ \r\n]|\Z))"
    return dash, re.compile(out)


def _next_piece(text: str, last: int, at: int, indent: int) -> int:
    """Where the message list is read again after an error at ``at``: the first item's
    line after the error's line, unless a line that ends the list comes first (from the
    line of the last item kept, ``last``, on); -1: nowhere."""
    dash, out = _line_kinds(indent)
    nl = text.find("\n", at)
    if nl < 0:
        return -1
    found = dash.search(text, nl)
    if found is None:
        return -1
    ends = out.search(text, last, found.start() + 1)
    return -1 if ends is not None else found.start() + 1


def _recover(text: str, root: SNode, errors: tuple[SyntaxIssue, ...]) -> ParsedData | None:
    """A whole read's error recovery: when libyaml stopped at a syntax error inside the
    message list (the root sequence, or ``messages`` as the root mapping's last member in
    the tree kept), the list goes on at the first item's line after the error's line (an
    item starts on a line made of its indentation and ``-``), unless a line that ends the
    list (``_line_kinds``) comes first: the text from there to its end is read alone as a
    block sequence. Its own error, if any, is reported and recovered from the same way
    (at most ``_MAX_PIECES`` pieces, while what was composed is at most four times the
    text's length), except at a line that ends the list: the list ends there, as whatever
    follows it is not read after an error. What lies between the tree kept and the next
    piece (the damaged items) is left out, reported by the error. None: nothing to
    recover (the tree kept is the whole read's).

    A text that may be near the value limit (``parse_yaml`` counts its values first) is
    not recovered. An edit reads the same pieces again: ``_recover_window``."""
    holder, depth = _message_list(root)
    if holder is None or holder.starts is None or not holder.items:
        return None
    if len(errors) != 1 or errors[0].code != "syntax-error":
        return None
    first = _line_start(text, holder.range.start)
    indent = holder.range.start - first
    if not _is_dash_line(text, first, indent) or len(holder.items) > MAX_TOP_ITEMS:
        return None
    if _count_marks(text) >= MAX_YAML_NODES // 4:
        return None
    import yaml

    items, starts = list(holder.items), list(holder.starts)
    found = list(errors)
    last, at, work = _line_start(text, starts[-1]), errors[0].range.start, 0
    for _ in range(_MAX_PIECES):
        q = _next_piece(text, last, at, indent) if work <= 4 * len(text) else -1
        if q < 0:
            break
        piece = text[q:]
        try:
            node = compose_yaml(piece)
        except yaml.MarkedYAMLError as exc:
            issue, offset = yaml_issue(piece, exc)
            tree, _ = yaml_prefix_tree(piece, offset, depth)
            work += 9 * offset  # composed up to the error, then up to 8 prefixes of it
            if tree is not None and tree.is_array and tree.range.start == indent and tree.items:
                starts += [q + item.range.start for item in tree.items]
                items += [_relative(item, item.range.start) for item in tree.items]
            line = _line_start(piece, offset)
            if line > 0 and _line_kinds(indent)[1].match(piece, line - 1):
                break  # the list ends there
            found.append(_moved(issue, q))
            last = _line_start(text, starts[-1]) if starts[-1] >= q else q
            at = q + issue.range.start
            continue
        except yaml.YAMLError:
            break
        work += len(piece)
        sub = convert_yaml(node, piece, depth) if node is not None else None
        seq = sub.root if sub is not None else None
        if sub is not None and seq is not None and seq.is_array and seq.range.start == indent:
            starts += [q + item.range.start for item in seq.items]
            items += [_relative(item, item.range.start) for item in seq.items]
            found += [_moved(e, q) for e in sub.errors]
        break
    if len(items) == len(holder.items):
        return None
    del items[MAX_TOP_ITEMS + 1 :], starts[MAX_TOP_ITEMS + 1 :]  # the reader reports it
    return ParsedData(_with_list(root, holder, items, starts), tuple(found))


def _count_marks(text: str) -> int:
    """What ``parse_yaml`` counts to tell whether a text may hold too many values."""
    return text.count("\n") + text.count(",")


def _marks_of(conv: Conversation, text: Text) -> int:
    """``_count_marks`` of ``conv``'s text (memo: kept through edits by ``reread_yaml``)."""
    hit = conv._views.get(_MARKS)
    if hit is None:
        hit = conv._views[_MARKS] = text.count("\n") + text.count(",")
    return int(hit)


def _message_list(root: SNode) -> tuple[SNode | None, int]:
    """The message list of a tree whose last value it is (the root sequence, or the root
    mapping's last member ``messages``) and its depth; None otherwise."""
    if root.is_array:
        return root, 0
    if root.is_object and root.members:
        last = root.members[-1]
        if last.key == "messages" and last.value.is_array:
            return last.value, 1
    return None, 0


def _with_list(root: SNode, holder: SNode, items: list[SNode], starts: list[int]) -> SNode:
    """``root`` with its message list (``holder``, its last value) holding ``items``."""
    end = starts[-1] + items[-1].range.end
    new_holder = SNode(
        "array", TextRange(holder.range.start, end), items=tuple(items), starts=tuple(starts)
    )
    if root is holder:
        return new_holder
    members = (*root.members[:-1], Member("messages", root.members[-1].key_range, new_holder))
    return SNode("object", TextRange(root.range.start, end), members=members)


def _with_relative_messages(root: SNode) -> SNode:
    """``root`` with its message list's items relative to their starts: as it is when a
    whole read made them so (``parse_yaml(messages=True)``), else a copy (a tree kept
    before a syntax error)."""
    if root.is_array:
        return root if root.starts is not None else _relative_list(root)
    holder = root.member("messages") if root.is_object else None
    if holder is None or not holder.value.is_array or holder.value.starts is not None:
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
            starts = tuple(map(delta.__add__, node.starts))
            return SNode("array", moved, items=node.items, starts=starts)
        return SNode("array", moved, items=tuple(_shifted(i, delta) for i in node.items))
    return SNode(node.kind, moved, node.value)


def _values(node: SNode) -> int:
    """How many values ``convert_yaml`` counted for ``node`` (``ParsedData.tokens``)."""
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


@dataclass(frozen=True, slots=True)
class _Base:
    """What a half-typed result is re-read from: the last whole parse (``conv`` of
    ``text``) and the span edited since (``text[start:old_end]`` became the current text's
    ``[start:new_end]``)."""

    text: Text
    conv: Conversation
    start: int
    old_end: int
    new_end: int


@dataclass(frozen=True, slots=True)
class _Piece:
    """A re-read: the new parse (or what makes it, when it may not be needed), the
    conversation whose reads it shares, and for a half-typed result the base it keeps."""

    made: ParsedData | Callable[[], ParsedData]
    shares: Conversation
    base: _Base | None = None
    # One item read again in place (its start and everything but its length kept): its
    # index, its node and the change in the value count (``incremental.replace_message``).
    one: tuple[int, SNode, int] | None = None
    # The items ``[k, r)`` of the message list read again (the others shared), and where
    # what follows them started in the previous text (``incremental._read_items``).
    items: tuple[int, int, int] | None = None
    # Top-level members other than ``messages`` read again (the messages kept).
    members: bool = False
    # The message list ended at item ``k`` (``_list_ended``): the items before it kept,
    # the document's fields read again.
    ended: int | None = None

    @property
    def parsed(self) -> ParsedData:
        made = self.made
        if callable(made):
            made = made()
            object.__setattr__(self, "made", made)
        return made


def reread_yaml(
    prev: Conversation,
    prev_text: Text,
    new_text: Text,
    span: tuple[int, int, int],
    read: Read,
    replace: Replace,
    splice: Splice,
) -> Conversation | None:
    """The conversation of ``new_text`` from that of ``prev_text`` (``prev``), read by
    ``read`` (``reading.read_parsed``) from a parse that shares the untouched items and
    members, or for an edit inside one message of a conversation without findings by
    ``replace`` (``incremental.replace_message``: that message alone read again, as JSON's
    are), or for items of the message list parsed again by ``splice``
    (``incremental._read_items``: those items read again, the others kept); all are given
    to avoid an import circle. None: parse it all.

    ``span``: ``prev_text[p:old_end]`` became ``new_text[p:new_end]``.
    """
    conv = _reread(prev, prev_text, new_text, span, read, replace, splice)
    marks = prev._views.get(_MARKS)
    if conv is not None and marks is not None:
        p, old_end, new_end = span
        old, new = prev_text[p:old_end], new_text[p:new_end]
        conv._views[_MARKS] = marks - _count_marks(old) + _count_marks(new)
    return conv


def _reread(
    prev: Conversation,
    prev_text: Text,
    new_text: Text,
    span: tuple[int, int, int],
    read: Read,
    replace: Replace,
    splice: Splice,
) -> Conversation | None:
    piece = reparse_yaml(prev, prev_text, new_text, span)
    if piece is None:
        return None
    if piece.one is not None and not piece.shares.issues:
        k, node, tokens = piece.one
        delta = len(new_text) - piece.shares.length
        res = replace(piece.shares, DocFormat.YAML, k, k, node, delta, tokens)
        if res is not None:
            return res
    conv = None
    if piece.items is not None:
        k, r, at = piece.items
        delta = len(new_text) - piece.shares.length
        old_root, new_root = piece.shares.tree, piece.parsed.root
        assert old_root is not None and new_root is not None
        conv = splice(
            piece.shares, piece.parsed, _holder(old_root), _holder(new_root), k, r, at, delta
        )
    elif piece.members and not piece.parsed.errors:
        conv = _splice_members(piece.shares, piece.parsed, len(new_text), splice)
    elif piece.ended is not None:
        conv = _splice_ended(piece.shares, piece.parsed, piece.ended, len(new_text), splice)
    if conv is None:
        conv = read(piece.parsed, DocFormat.YAML, len(new_text), piece.shares)
    if conv.source_format not in NATIVE:
        return None  # another provider's format is read whole
    if piece.base is not None:
        conv._views[_BASE] = piece.base
    return conv


def _splice_members(
    prev: Conversation, parsed: ParsedData, length: int, splice: Splice
) -> Conversation | None:
    """Top-level members other than ``messages`` parsed again: the document's fields read
    again from the new root, the messages kept (moved when the edit lies before them)."""
    old_root, new_root = prev.tree, parsed.root
    if old_root is None or new_root is None:
        return None
    old, new = old_root.get("messages"), new_root.get("messages")
    if old is None or new is None or not old.is_array or not new.is_array:
        return None
    k = len(old.items) if new is old else 0  # (moved: every start, by ``_shifted``)
    delta = length - prev.length
    return splice(prev, parsed, old, new, k, k, 0, delta, fields=new_root)


def _splice_ended(
    prev: Conversation, parsed: ParsedData, k: int, length: int, splice: Splice
) -> Conversation | None:
    """The message list ended at item ``k`` (``_list_ended``): the items from ``k`` on
    left out, the others kept, the document's fields read again from the new root (with
    what reading them finds: the key the list's end made is unknown)."""
    old_root, new_root = prev.tree, parsed.root
    if old_root is None or new_root is None:
        return None
    old, new = _holder(old_root), _holder(new_root)
    delta = length - prev.length
    n = len(old.items)
    return splice(
        prev, parsed, old, new, k, n, prev.length, delta, fields=new_root, field_findings=True
    )


def _holder(root: SNode) -> SNode:
    """The message list of a tree ``_reparse_items`` read again (the root or its
    ``messages``)."""
    if root.is_array:
        return root
    node = root.get("messages")
    assert node is not None
    return node


def reparse_yaml(
    prev: Conversation, prev_text: Text, new_text: Text, span: tuple[int, int, int]
) -> _Piece | None:
    """The parse of ``new_text`` (what ``parse_yaml_conversation`` gives) sharing the last
    whole parse's untouched items and members, or None (parse it all)."""
    span = _tight(prev_text, new_text, span)
    base = prev._views.get(_BASE)
    if isinstance(base, _Base):
        # Half typed: re-read from the last whole parse, over every span edited since.
        p, old_end = span[0], span[1]
        suffix = min(len(prev_text) - base.new_end, len(prev_text) - old_end)
        span = (min(base.start, p), len(base.text) - suffix, len(new_text) - suffix)
        prev, prev_text = base.conv, base.text
    if prev.syntax is None or prev.tree is None or prev.length != len(prev_text):
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
    top_lists = [root] if root.is_array else [m.value for m in root.members if m.value.is_array]
    if any(len(node.items) > MAX_TOP_ITEMS for node in top_lists):
        return None  # cut at the limit: the tree is not the whole text's
    parsed: ParsedData | None = None
    after = root.is_object and mi < len(root.members) - 1
    if (
        holder is not None
        and holder.items
        and holder.starts is not None
        and holder.range.start < span[0]
        and not (after and root.members[mi + 1].key_range.start <= span[0])
    ):
        ended = _list_ended(prev, prev_text, new_text, span, holder, mi)
        if ended is not None:
            made, k = ended
            return _Piece(made, prev, _Base(prev_text, prev, *span), ended=k)
        found = _reparse_items(prev, prev_text, new_text, span, holder, mi)
        if found is not None:
            made, one, items = found
            if callable(made):  # (one item read again: no finding)
                return _Piece(made, prev, one=one, items=items)
            if not made.errors:
                return _Piece(made, prev, items=items)
            return _Piece(made, prev, _Base(prev_text, prev, *span), items=items)
    elif root.is_object and root.members:
        parsed = _reparse_members(prev, prev_text, new_text, span, mi)
        if parsed is not None and not parsed.errors:
            return _Piece(parsed, prev, members=True)
    if parsed is None:
        return None
    if parsed.errors:
        return _Piece(parsed, prev, _Base(prev_text, prev, *span))
    return _Piece(parsed, prev)


def _tight(old: Text, new: Text, span: tuple[int, int, int]) -> tuple[int, int, int]:
    """``span`` without the text the two versions still share at its ends (an editor may
    replace ``reminder: r`` by ``reminder: rr``): the boundaries it touches are fewer."""
    p, old_end, new_end = span
    a, b = old[p:old_end], new[p:new_end]
    head = _shared(a, b)
    tail = _shared(a[head:][::-1], b[head:][::-1])
    return p + head, old_end - tail, new_end - tail


def _shared(a: str, b: str) -> int:
    """The length of the common prefix of ``a`` and ``b``."""
    n, i, step = min(len(a), len(b)), 0, 64
    while i < n:
        if a[i : i + step] == b[i : i + step]:
            i += step
        elif step > 1:
            step //= 2
        else:
            break
    return min(i, n)


def _reparse_items(
    prev: Conversation,
    prev_text: Text,
    new_text: Text,
    span: tuple[int, int, int],
    holder: SNode,
    mi: int,
) -> (
    tuple[
        ParsedData | Callable[[], ParsedData],
        tuple[int, SNode, int] | None,
        tuple[int, int, int] | None,
    ]
    | None
):
    """An edit after the first ``-`` of the message list: the items it touched are parsed
    again as one block sequence, the others kept. Also: the one item read again in place
    (``_Piece.one``; the parse is then what makes it) and the items replaced
    (``_Piece.items``)."""
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

    def end_of(j: int) -> int | None:
        """Where the window ending before item ``j`` ends in the previous text."""
        if j < n:
            return line_of(j)
        if root is holder or mi == len(root.members) - 1:
            return prev.length  # the end of the list: the text's end, or the next key's line
        at = root.members[mi + 1].key_range.start
        return at if at > 0 and prev_text[at - 1] == "\n" else None

    # The first item untouched: its line starts at or after the edit's end.
    j = max(bisect_left(starts, old_end), k0 + 1)
    while j < n and (line_of(j) or 0) < old_end:
        if line_of(j) is None:
            return None
        j += 1
    depth = 0 if root is holder else 1
    whole = root is holder or mi == len(root.members) - 1
    grow = 1
    while True:
        end = end_of(j)
        if end is None or end < old_end:
            return None
        we = end + delta
        at_end = we == len(new_text)
        if not at_end and (we <= ws or new_text[we - 1] != "\n"):
            if j < n and end == old_end:
                j += 1  # typed at the start of item ``j``'s line: its line is touched
                continue
            return None
        window = new_text[ws:we]
        if not _is_dash_line(window, 0, indent) or _DOCUMENT_LINE.search(window):
            return None
        if window.count("\n") + window.count(",") >= MAX_YAML_NODES // 4:
            return None  # the whole parse counts such a text's values before composing it
        tokens = prev.syntax[1] if prev.syntax else 0
        tokens -= sum(_values(items[k]) for k in range(k0, j))
        import yaml

        try:
            node = compose_yaml(window)
        except yaml.YAMLError as exc:
            if 2 * (tokens + len(window)) > MAX_YAML_NODES:
                return None
            to_end = at_end
            quote = None if at_end or not whole else _open_quote(window, exc)
            if quote is not None:
                # A quote left open at the window's end: libyaml reads the text after the
                # window (the previous text from ``end`` on) into the scalar up to where it
                # may end. Nowhere: the whole parse fails at the end of the text as this
                # window does at its end (the window is read as if it ended the text).
                # Else the window takes the items up to there at once.
                stop = _closer(prev, prev_text, quote, end)
                if stop >= 0:
                    j = min(n, max(j + 1, bisect_right(starts, stop) + 1))
                    continue
                to_end = True
            res = _half_typed(window, exc, depth, indent, to_end, ws, k0, holder, root, mi)
            if res is None or (res is _GROW and j >= n):
                return None
            if isinstance(res, ParsedData):
                # Half typed: the items from ``k0`` on are replaced by the prefix's and by
                # those the recovery reads (the members after the list, if any, are gone
                # too: no splice then).
                found = _NOTHING
                if res.root is not None:
                    found = _recover_window(
                        prev,
                        prev_text,
                        new_text,
                        res,
                        window,
                        ws,
                        j,
                        holder,
                        indent,
                        depth,
                        whole,
                        new_end,
                    )
                if found is None:
                    return None  # the whole read's recovery cannot be told from here
                r = n
                if isinstance(found, tuple):
                    res, r = found
                if not whole or res.root is None:
                    return res, None, None
                return res, None, (k0, r, prev.length if r == n else end_of(r) or 0)
            # The error may lie beyond the window (a quote left open): take more items.
            j, grow = min(n, j + grow), 2 * grow
            continue
        break
    if node is None:
        return None
    parsed = convert_yaml(node, window, depth)  # its findings are the whole parse's
    seq = parsed.root
    if (
        parsed.tokens <= 0
        or seq is None
        or not seq.is_array
        or seq.range.start != indent
        or not seq.items
    ):
        return None
    if j < n and indent and seq.items[-1].range.end > len(window.rstrip()):
        return None  # an empty value placed at the next token: the next ``-``, not the end
    if k0 + len(seq.items) + n - j > MAX_TOP_ITEMS:
        return None
    tokens += parsed.tokens - 1
    if 2 * tokens > MAX_YAML_NODES:
        return None
    new_starts = [ws + item.range.start for item in seq.items]
    new_items = [_relative(item, item.range.start) for item in seq.items]
    errors = tuple(_moved(e, ws) for e in parsed.errors)

    def spliced() -> ParsedData:
        """The previous tree with the window's items in place of items ``[k0, j)``."""
        hend = ws + seq.items[-1].range.end if j == n else holder.range.end + delta
        new_holder = SNode(
            "array",
            TextRange(holder.range.start, hend),
            items=(*items[:k0], *new_items, *items[j:]),
            starts=(*starts[:k0], *new_starts, *map(delta.__add__, starts[j:])),
        )
        if root is holder:
            return ParsedData(new_holder, errors, tokens=tokens)
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
        return ParsedData(new_root, errors, tokens=tokens)

    items_read = (k0, j, end)
    if j == k0 + 1 and len(new_items) == 1 and not errors and new_starts[0] == starts[k0]:
        old_item = items[k0]
        if (
            starts[k0] < p
            and old_end <= starts[k0] + old_item.range.end
            and new_items[0].range.end == old_item.range.end + delta
        ):
            # One item read again in place: its tree is made only if reading that item
            # alone cannot give the result (``replace_message`` makes its own).
            one = (k0, new_items[0], tokens - (prev.syntax[1] if prev.syntax else 0))
            return spliced, one, items_read
    return spliced(), None, items_read


def _list_ended(
    prev: Conversation,
    prev_text: Text,
    new_text: Text,
    span: tuple[int, int, int],
    holder: SNode,
    mi: int,
) -> tuple[ParsedData, int] | None:
    """An edit that makes an item's ``-`` line of a message list at column 0 (the root
    mapping's ``messages``) a line that ends the list (``-`` typed at its start makes it
    ``-- id: m5``, a top-level key): the whole parse's result read from a window, or None.

    From that line on the whole parse is in the state of a root mapping expecting a key at
    column 0 (the list before is unchanged and its last item ended there, as that line was
    an item's), and libyaml stops at the first error after it (a top-level key followed by
    the item's indented lines is one: ``mapping values are not allowed``); nothing is
    recovered after it (``_recover`` stops at a line that ends the list). So the window is
    the ``messages:`` line, the last item kept (``k - 1``: where the list ends is told from
    its text) and the text from the changed line up to an item's line past the error:
    composed alone it gives the whole parse's error, and the longest prefix that composes
    (``yaml_prefix_tree``) gives the members after the list. The tree is the previous
    one's members before the list, the list's first ``k`` items (kept) and those members;
    with ``k``.
    Declined: a window that composes (the whole parse has no error: the members after the
    list would be read), an error the scanner may have met at the window's end (the window
    then takes more items), an error at the end of the text (reported at what is left
    open), a prefix cut before the changed line, a key the root already has, an alias, a
    document marker, a line break other than ``\n`` (``\x85``, a lone ``\r``...), limits
    that might be reached.
    """
    root = prev.tree
    starts = holder.starts
    if root is None or not root.is_object or starts is None or mi < 0:
        return None
    n = len(starts)
    p, old_end, new_end = span
    ls = _line_start(new_text, p)
    first = _line_start(prev_text, holder.range.start)
    if holder.range.start != first or ls == 0:
        return None  # an indented list: its items' lines end it otherwise
    _, out = _line_kinds(0)
    if not out.match(str(new_text[ls - 1 : ls + 2])):
        return None  # the changed line does not end the list
    k = bisect_left(starts, ls)
    if k < 1 or k >= n or _line_start(prev_text, starts[k]) != ls:
        return None  # not an item's ``-`` line, or the first item's
    if not _is_dash_line(prev_text, ls, 0):
        return None
    key_at = root.members[mi].key_range.start
    if key_at > 0 and prev_text[key_at - 1] != "\n":
        return None
    key_end = prev_text.find("\n", key_at)
    prev_start = _line_start(prev_text, starts[k - 1])
    if key_end < 0 or key_end >= prev_start or not _is_dash_line(prev_text, prev_start, 0):
        return None
    delta = new_end - old_end
    marks = _marks_of(prev, prev_text) - _count_marks(prev_text[p:old_end])
    if marks + _count_marks(new_text[p:new_end]) >= MAX_YAML_NODES // 4:
        return None  # the whole parse counts such a text's values before composing it
    head = prev_text[key_at : key_end + 1] + prev_text[prev_start:ls]
    shift = ls - len(head)  # a window offset from the changed line on, in the new text
    import yaml

    j = max(bisect_left(starts, old_end), k + 1)
    grow = 1
    while True:
        at_end = j >= n
        we = len(new_text) if at_end else _line_start(prev_text, starts[j]) + delta
        if not at_end and (we <= ls or not _is_dash_line(new_text, we, 0)):
            return None
        window = head + new_text[ls:we]
        if _DOCUMENT_LINE.search(window) or _ALIAS.search(window):
            return None
        if _OTHER_BREAK.search(window):
            return None  # a line the lines told by ``\n`` do not show
        if window.count("\n") + window.count(",") >= MAX_YAML_NODES // 4:
            return None
        try:
            compose_yaml(window)
        except yaml.MarkedYAMLError as exc:
            if exc.problem_mark is None:
                return None
            at = exc.problem_mark.index
            if at < len(head):
                return None
            nl = window.find("\n", at)
            if not at_end and (nl < 0 or not window[nl:].strip()):
                j, grow = j + grow, 2 * grow  # the scanner may have met the window's end
                continue
            issue, offset = yaml_issue(window, exc)
            if offset != at or (at_end and not window[at:].strip()):
                return None  # reported at what is left open
            break
        except yaml.YAMLError:
            return None
        return None  # it composes: the whole parse reads on
    tree, cut = yaml_prefix_tree(window, offset)
    if tree is None or not tree.is_object or cut < len(head) - 1 or not tree.members:
        return None
    kept, *added = tree.members
    if kept.key != "messages" or not kept.value.is_array or len(kept.value.items) != 1:
        return None
    keys = {m.key for m in root.members[: mi + 1]}
    if any(m.key in keys for m in added):
        return None
    last = kept.value.items[0]
    if last.range.start + shift != starts[k - 1]:
        return None
    new_holder = SNode(
        "array",
        TextRange(holder.range.start, kept.value.range.end + shift),
        items=(*holder.items[: k - 1], _relative(last, last.range.start)),
        starts=starts[:k],
    )
    members = (
        *root.members[:mi],
        Member("messages", root.members[mi].key_range, new_holder),
        *(Member(m.key, m.key_range.shift(shift), _shifted(m.value, shift)) for m in added),
    )
    new_root = SNode("object", TextRange(root.range.start, tree.range.end + shift), members=members)
    return ParsedData(new_root, (_moved(issue, shift),)), k


def _open_quote(window: str, exc: Any) -> str | None:
    """The quote of the quoted scalar libyaml was scanning when ``window`` ended (``exc``:
    composing it failed at its end inside that scalar), else None."""
    import yaml

    if (
        not isinstance(exc, yaml.scanner.ScannerError)
        or exc.context != "while scanning a quoted scalar"
        or exc.problem != "found unexpected end of stream"
        or exc.context_mark is None
    ):
        return None
    quote = window[exc.context_mark.index : exc.context_mark.index + 1]
    return quote if quote in ("'", '"') else None


# Key of the memo of ``_closer`` (``Conversation._views`` of a whole parse).
_OPEN = "yaml-open"


def _closer(conv: Conversation, text: Text, quote: str, at: int) -> int:
    """The first offset at or after ``at`` (a line start) of ``text`` (``conv``'s, a whole
    parse without findings) where a quoted scalar opened with ``quote`` before it may end:
    a ``quote`` (single-quoted: its close, or a doubled one), a backslash in a
    double-quoted one (an escape: libyaml may stop at an unknown one), or ``...`` (libyaml
    stops at a document marker line; ``---`` cannot start one there: in a text composed as
    one document without error, a document marker line after the first value is at most
    the final ``...``); -1: none, libyaml reads the scalar to the end of the text (where
    it fails). Each of libyaml's errors inside such a scalar starts at one of these.

    Read in growing ranges (the end is usually near); memo in ``conv._views`` (the text
    after the window is scanned once per open quote, not once per keystroke: a half-typed
    text is re-read from the same whole parse)."""
    memo = conv._views.setdefault(_OPEN, {})
    hit = memo.get(quote)
    if hit is not None and hit[0] <= at and (hit[1] < 0 or hit[1] >= at):
        return int(hit[1])
    subs = (quote, "\\", "...") if quote == '"' else (quote, "...")
    lo, size, n, first = at, 4096, len(text), -1
    while lo < n and first < 0:
        hi = min(n, lo + size)
        found = [f for f in (text.find(sub, lo, hi + len(sub) - 1) for sub in subs) if f >= 0]
        first = min(found) if found else -1
        lo, size = hi, 2 * size
    memo[quote] = (at, first)
    return first


def _moved(issue: SyntaxIssue, delta: int) -> SyntaxIssue:
    return SyntaxIssue(issue.message, issue.range.shift(delta), issue.code, issue.severity)


_GROW = object()  # the window is too short to tell: take more items
_NOTHING = object()  # the whole read recovers nothing after the window's error


def _recover_window(
    prev: Conversation,
    prev_text: Text,
    new_text: Text,
    res: ParsedData,
    window: str,
    ws: int,
    j: int,
    holder: SNode,
    indent: int,
    depth: int,
    whole: bool,
    edited: int,
) -> tuple[ParsedData, int] | object | None:
    """What the whole read's recovery (``_recover``) reads after the error of the window
    ``new_text[ws:ws + len(window)]`` (``res``: the tree kept before it), told from the
    window and the previous parse (``prev``, whole, of ``prev_text``; its items from ``j``
    on untouched): ``_NOTHING``; or the parse with the piece read (the window's items from
    the first item's line after the error's, then the previous items from ``j`` on, kept)
    and the index of the first previous item kept (``len(holder.items)``: none); None:
    read it whole.

    The piece is the text from an item's line to the end (the message list is the last
    value): as a window, it starts in the state a whole parse has there, and the part in
    the window ends at the line of item ``j``, where the previous parse was in the same
    state; so the piece is the window part's items, then the previous items. When the
    edit ends before the piece (``edited``: its end in the new text), the piece is the
    previous text from an item's line on: its items are the previous ones, kept."""
    assert res.root is not None
    n = len(holder.items)
    we = ws + len(window)
    at_end = we == len(new_text)
    kept, _ = _message_list(res.root)
    if kept is None or kept.starts is None or not kept.items or len(kept.items) > MAX_TOP_ITEMS:
        return _NOTHING
    if len(res.errors) != 1 or res.errors[0].code != "syntax-error":
        return _NOTHING
    old_window = prev_text[ws : we - (len(new_text) - len(prev_text))]
    marks = _marks_of(prev, prev_text) - _count_marks(old_window) + _count_marks(window)
    if marks >= MAX_YAML_NODES // 4:
        return _NOTHING
    dash, out = _line_kinds(indent)
    nl = window.find("\n", res.errors[0].range.start - ws)
    if nl < 0:
        return _NOTHING
    found = dash.search(window, nl)
    q = ws + found.start() + 1 if found is not None else we if j < n else -1
    if q < 0:
        return _NOTHING
    last = _line_start(new_text, kept.starts[-1])
    if out.search(window, max(last - ws, 0), q - ws) is not None:
        return _NOTHING  # the list ends before the next item: nothing is recovered
    if last < ws and out.search(prev_text[last:ws]) is not None:
        return _NOTHING  # (in the lines of the last item kept, before the window)
    if not whole:
        return None
    delta = len(new_text) - len(prev_text)
    assert holder.starts is not None
    items, starts = list(kept.items), list(kept.starts)
    errors = [res.errors[0]]
    r = n if at_end else j
    if edited <= q < we:  # (the new text from ``q`` on is ``prev_text[q - delta:]``)
        k = bisect_left(holder.starts, q - delta)
        if k < n and _line_start(prev_text, holder.starts[k]) == q - delta:
            r, q = k, we  # item ``k``'s line: the previous items from ``k`` on are the piece's
    if q < we:
        piece = window[q - ws :]
        import yaml

        try:
            node = compose_yaml(piece)
        except yaml.YAMLError:
            return None
        if node is None:
            return None
        sub = convert_yaml(node, piece, depth)
        seq = sub.root
        if seq is None or not seq.is_array or seq.range.start != indent or not seq.items:
            return None
        if r < n and indent and seq.items[-1].range.end > len(piece.rstrip()):
            return None  # an empty value placed at the next token
        starts += [q + item.range.start for item in seq.items]
        items += [_relative(item, item.range.start) for item in seq.items]
        errors += [_moved(e, q) for e in sub.errors]
    starts += map(delta.__add__, holder.starts[r:])
    items += holder.items[r:]
    if len(items) > MAX_TOP_ITEMS:
        return None
    return ParsedData(_with_list(res.root, kept, items, starts), tuple(errors)), r


def _half_typed(
    window: str,
    exc: Any,
    depth: int,
    indent: int,
    at_end: bool,
    ws: int,
    k0: int,
    holder: SNode,
    root: SNode,
    mi: int,
) -> ParsedData | object | None:
    """The whole parse of a text whose message-list window does not compose: its error
    and the tree of the longest prefix before it that does; ``_GROW`` when the scanner may
    have reached the window's end (a longer window may tell); None when the window alone
    cannot tell (``parse_yaml`` reads it)."""
    import yaml

    if not isinstance(exc, yaml.MarkedYAMLError) or exc.problem_mark is None:
        return None  # a reader error (a control character) has no marks: read it whole
    if not isinstance(exc, yaml.scanner.ScannerError):
        if not isinstance(exc, yaml.parser.ParserError) or exc.context_mark is None:
            return None  # the composer's (an alias) or after the window's sequence ended
    marks = [m.index for m in (exc.problem_mark, exc.context_mark) if m is not None]
    if min(marks) <= indent:
        return None  # at the list's level: the window's own sequence is not the document's
    if not at_end:
        # The scanner reached no further than the line after the error's: not the end.
        nl = window.find("\n", exc.problem_mark.index)
        if nl < 0 or not window[nl:].strip():
            return _GROW
    if _ALIAS.search(window):
        return None  # a prefix's alias may name an anchor outside the window
    # Up to the line after the error's, every line lies inside an item (deeper than the
    # ``-``, or an item's ``-`` line): the sequence has not ended (in the document, what
    # follows it at its indentation is the next top-level key).
    stop = window.find("\n", exc.problem_mark.index)
    stop = window.find("\n", stop + 1) if stop >= 0 else -1
    for line in window[: len(window) if stop < 0 else stop].split("\n"):
        text = line.lstrip(" ")
        if text.strip() and not text.startswith("#") and len(line) - len(text) <= indent:
            if not _is_dash_line(line, 0, indent):
                return None
    issue, offset = yaml_issue(window, exc, more=not at_end)
    tree, cut = yaml_prefix_tree(window, offset, depth)
    shifted = _moved(issue, ws)
    if tree is None:
        return None if cut <= 0 else ParsedData(None, (shifted,))
    if not tree.is_array or tree.range.start != indent or not tree.items:
        return None
    if k0 + len(tree.items) > MAX_TOP_ITEMS:
        return None
    new_starts = [ws + item.range.start for item in tree.items]
    new_items = [_relative(item, item.range.start) for item in tree.items]
    new_holder = SNode(
        "array",
        TextRange(holder.range.start, new_starts[-1] + new_items[-1].range.end),
        items=(*holder.items[:k0], *new_items),
        starts=(*(holder.starts or ())[:k0], *new_starts),
    )
    if root is holder:
        return ParsedData(new_holder, (shifted,))
    members = (*root.members[:mi], Member("messages", root.members[mi].key_range, new_holder))
    new_root = SNode("object", TextRange(root.range.start, new_holder.range.end), members=members)
    return ParsedData(new_root, (shifted,))


def _members_deleted(prev: Conversation, i0: int, j: int, delta: int) -> ParsedData | None:
    """Top-level members ``[i0, j)`` deleted whole (their lines, from a key at column 0 to
    the next one), nothing in their place: the others kept, those after moved."""
    root = prev.tree
    assert root is not None and prev.syntax is not None
    members = root.members
    kept = (
        *members[:i0],
        *(Member(m.key, m.key_range.shift(delta), _shifted(m.value, delta)) for m in members[j:]),
    )
    if not kept:
        return None
    tokens = prev.syntax[1] - sum(_values(members[i].value) for i in range(i0, j))
    start = kept[0].key_range.start if i0 == 0 else root.range.start
    return ParsedData(
        SNode("object", TextRange(start, kept[-1].value.range.end), members=kept), (), tokens=tokens
    )


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
    i0 = max(0, bisect_left(keys, p) - 1)  # the last key starting before the edit
    j = max(bisect_left(keys, old_end), i0 + 1)  # the first key at or after its end
    if i0 <= mi < j:
        return None  # the message list is in the window: parse it all
    ws = keys[i0] if keys[i0] < p else 0  # an edit before the first key: from the start
    end = keys[j] if j < len(members) else prev.length
    for at in (ws, end):
        if at != prev.length and at > 0 and prev_text[at - 1] != "\n":
            return None  # not a key at column 0
    we = end + delta
    if we == ws and prev.syntax is not None and not prev.syntax[0]:
        return _members_deleted(prev, i0, j, delta)
    if we < len(new_text) and (we <= ws or new_text[we - 1] != "\n"):
        return None
    window = new_text[ws:we]
    if _DOCUMENT_LINE.search(window) or _OTHER_BREAK.search(window):
        return None
    if window.count("\n") + window.count(",") >= MAX_YAML_NODES // 4:
        return None
    import yaml

    try:
        node = compose_yaml(window)
    except yaml.YAMLError:
        return None
    if node is None:
        return None
    parsed = convert_yaml(node, window)
    top = parsed.root
    if (
        parsed.tokens <= 0
        or top is None
        or not top.is_object
        or not top.members
        or top.range.start != (top.range.start if ws == 0 else 0)  # a key at the start
        or window[top.range.start : top.range.start + 1] in ("{", "[")  # a block mapping
        or _line_start(window, top.range.start) != top.range.start
        or _line_start(window, top.members[0].key_range.start) != top.members[0].key_range.start
        or (i0 > 0 and "\n" in window[top.range.start : top.members[0].key_range.start])
    ):
        # (A tagged flow mapping: its first key is not at a line's start. A tag or an anchor
        # on a line of its own before a later key: alone, the window's mapping takes it;
        # in the document, the line ends the root mapping.)
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
    # The root starts where the window's mapping does when the window is the text's start
    # (a tag or an anchor before the first key), else where it did: the text before the
    # window is unchanged, and may hold the root's tag (before comments above the first key).
    start = top.range.start if ws == 0 else root.range.start
    new_root = SNode(
        "object", TextRange(start, new_members[-1].value.range.end), members=new_members
    )
    return ParsedData(new_root, tuple(_moved(e, ws) for e in parsed.errors), tokens=tokens)
