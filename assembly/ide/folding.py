"""Folding ranges: what an editor can collapse.

In a conversation: every object, array and string value that spans several lines (each
message, the ``messages`` array, ``project_files``, ``tools``, a tool schema, a YAML block
scalar …). In a template: the front matter, every section (nested by level), fenced code
blocks and multi-line HTML comments.

A ``Fold`` covers the lines from the line of ``range.start`` through the line of
``range.end`` (``lines``). A member's fold starts at its key (a YAML ``messages:`` line);
the line holding a closing ``}`` or ``]`` alone stays visible, as in editors' own JSON
folding. The document itself (the root value) is not folded. Folds span at least two
lines, and no two start on the same line (the outer one is kept). Offsets are code points
into the text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from assembly.model import Conversation, PromptTemplate
from assembly.syntax import NodeAt, SNode
from assembly.text import LineIndex, TextRange


class FoldKind(StrEnum):
    REGION = "region"
    COMMENT = "comment"


@dataclass(frozen=True, slots=True)
class Fold:
    range: TextRange
    kind: FoldKind | None = None
    # Its first and last line in the text it was found in (the functions here set it: they
    # know them, and a client wants lines); None when unknown, e.g. once moved elsewhere.
    lines: tuple[int, int] | None = None


def conversation_folds(
    conv: Conversation,
    text: str,
    *,
    index: LineIndex | None = None,
    limit: int | None = None,
    check: Callable[[], object] | None = None,
) -> list[Fold]:
    """Folds of a conversation document, in document order (at most ``limit``: see
    ``limit_folds``; only those are made). ``check`` is called every ``CHECK_EVERY``
    messages: the caller's checkpoint, which raises to stop the walk (a language server's
    request cancelled meanwhile).

    The stored tree is walked as is (each message in its own text, where its ranges are
    offsets), not through ``NodeAt`` views: those keep the children they made, so a walk
    over every message would leave a copy of the whole tree's shape (10 MB at 10,000
    messages) on each version's conversation.

    The folds of the last conversation folded are kept by message (``_messages``): an
    editor asks for the folds after every keystroke, and a keystroke changes one message
    of ten thousand (10 MB benchmark, in process: 640 ms the first time, 66 ms after).
    """
    if conv.root is None:
        return []
    index = index or LineIndex(text)
    spans: list[_Span] = []
    used: _Memo = {}
    # The root (the whole document; in JSONL, the list of lines) is not folded. Outside
    # the message list the stored tree's ranges are the document's (``syntax.located``).
    root = conv.root
    green = root.green if isinstance(root, NodeAt) else root
    stack = [(m.key_range.start, m.value) for m in reversed(green.members)]
    if green.starts is not None:  # the root is the message list
        _messages(green, text, index, spans, used, check)
    else:
        stack[:0] = [(n.range.start, n) for n in reversed(green.items)]
    _walk(stack, text, index, spans, used, check)
    # Only this version's messages are kept: the messages an edit replaced are let go (a
    # stored node holds its strings), and so is another document's fold.
    _MEMO.clear()
    _MEMO.update(used)
    return _folds(spans, limit)


# A fold found: its first and last lines, its start and end offsets, its kind. (A
# ``Fold`` is made only for each fold kept: a large conversation has 20,000, of which an
# editor takes 5,000.)
_Span = tuple[int, int, int, int, "FoldKind | None"]
# Of the last conversation folded, by a message's stored node (its ``id``, the node kept
# so the id stays its own): the folds inside it, relative to its start and to its first
# line. A stored node is shared only by versions in which the message's text is the same,
# and its folds depend on nothing else.
_Memo = dict[int, tuple[SNode, tuple[tuple[int, int, int, int], ...]]]
_MEMO: _Memo = {}
CHECK_EVERY = 256  # messages (or nodes outside the message list) between two checks


def forget() -> None:
    """Let the folds kept of the last conversation folded go (``_MEMO``: they hold its
    messages' stored nodes, tens of MB for a large one), when a document is closed."""
    _MEMO.clear()


def _walk(
    stack: list[tuple[int, SNode]],
    text: str,
    index: LineIndex,
    spans: list[_Span],
    used: _Memo,
    check: Callable[[], object] | None = None,
) -> None:
    """Fold the nodes of ``stack`` (where each fold starts, the node; the next on top) and
    everything in them, depth first. Their ranges are offsets into ``text``: the
    document's, or a message's own text (``_messages``)."""
    find = text.find
    walked = 0
    while stack:
        walked += 1
        if check is not None and not walked % CHECK_EVERY:
            check()
        start, node = stack.pop()
        r = node.range
        if find("\n", r.start, r.end) == -1:
            continue  # one line: nothing inside spans lines either
        end = _visible_end(text, node.kind, r.start, r.end)
        spans.append((index.line_of(start), index.line_of(end), start, end, None))
        if node.kind == "object":
            stack.extend((m.key_range.start, m.value) for m in reversed(node.members))
        elif node.kind == "array":
            if node.starts is not None:
                _messages(node, text, index, spans, used, check)
            else:
                stack.extend((n.range.start, n) for n in reversed(node.items))


def _messages(
    holder: SNode,
    text: str,
    index: LineIndex,
    spans: list[_Span],
    used: _Memo,
    check: Callable[[], object] | None = None,
) -> None:
    """The folds of the items of the message list ``holder``, each message's taken from
    ``_MEMO`` when its stored node was folded before (moved to where it starts now);
    ``check()`` every ``CHECK_EVERY`` messages.

    A message is folded in its own text (one slice of the document; its nodes' ranges are
    relative to its start), with its own line index: what ``_MEMO`` keeps, and much
    faster than looking into a large document's rope for each node."""
    for i, (node, base) in enumerate(zip(holder.items, holder.starts or (), strict=True)):
        if check is not None and not i % CHECK_EVERY:
            check()
        line = index.line_of(base)
        hit = _MEMO.get(id(node))
        if hit is None or hit[0] is not node:
            rng = node.range  # (relative to the message's start: ``SNode.starts``)
            local = text[base : base + rng.end]
            own: list[_Span] = []
            _walk([(rng.start, node)], local, LineIndex(local), own, used)
            hit = _MEMO[id(node)] = (node, tuple((s, e, a, b) for a, b, s, e, _ in own))
        used[id(node)] = hit
        spans += [(line + a, line + b, base + s, base + e, None) for s, e, a, b in hit[1]]


def template_folds(
    template: PromptTemplate, *, index: LineIndex | None = None, limit: int | None = None
) -> list[Fold]:
    """Folds of a ``*.prompt.md`` template, in document order (at most ``limit``)."""
    text = template.text
    res: list[Fold] = []
    if template.front_matter_range is not None:
        res.append(Fold(template.front_matter_range))
    for s in template.sections:
        end = s.range.end
        while end > s.range.start and text[end - 1].isspace():
            end -= 1  # blank lines before the next heading stay unfolded
        res.append(Fold(TextRange(s.range.start, end)))
    body = template.body_range
    res.extend(Fold(r) for r in _fences(text, body.start))
    res.extend(
        Fold(TextRange(m.start(), m.end()), FoldKind.COMMENT)
        for m in _COMMENT.finditer(text, body.start)
    )
    index = index or LineIndex(text)
    line = index.line_of
    return _folds(
        [(line(f.range.start), line(f.range.end), f.range.start, f.range.end, f.kind) for f in res],
        limit,
    )


# ------------------------------------------------------------------------------ private

_T = TypeVar("_T")

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[^\n]*$", re.MULTILINE)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def _visible_end(text: str, kind: str, start: int, end: int) -> int:
    """Where the fold of a node (``start``-``end``) ends: before a closing bracket that is
    alone on its line."""
    if kind not in ("object", "array") or text[end - 1 : end] not in ("}", "]"):
        return end
    newline = text.rfind("\n", start, end - 1)
    if newline != -1 and not text[newline + 1 : end - 1].strip():
        return newline - 1 if newline > 0 and text[newline - 1] == "\r" else newline
    return end


def _fences(text: str, start: int) -> list[TextRange]:
    """Fenced code blocks, from the opening fence through the closing one (or the end)."""
    res = []
    opening: re.Match[str] | None = None
    for m in _FENCE.finditer(text, start):
        fence = m.group(1)
        if opening is None:
            if fence[0] != "`" or "`" not in m.group(0)[m.end(1) - m.start() :]:
                opening = m
            continue
        wanted = opening.group(1)
        rest = m.group(0)[m.end(1) - m.start() :]
        if fence[0] == wanted[0] and len(fence) >= len(wanted) and not rest.strip():
            res.append(TextRange(opening.start(), m.end()))
            opening = None
    if opening is not None:
        end = len(text)
        while end > opening.end() and text[end - 1].isspace():
            end -= 1
        res.append(TextRange(opening.start(), end))
    return res


def limit_folds(folds: list[Fold], limit: int) -> list[Fold]:
    """At most ``limit`` of ``folds`` (made here, in order): the outermost first, as VS
    Code keeps its 5,000 (the folds nested up to the deepest level that fits whole, then
    those of the next level in document order), in document order. Editors say how many
    they want (``foldingRange.rangeLimit``); folding only the messages of a large
    conversation, and not each tool call inside them, is what a limit leaves."""
    return _limited([(*(f.lines or (0, 0)), f) for f in folds], limit)


def _limited(items: list[tuple[int, int, _T]], limit: int) -> list[_T]:
    """``limit_folds`` of folds given as (first line, last line, the fold)."""
    if len(items) <= limit:
        return [f for _, _, f in items]
    depths: list[int] = []
    open_ends: list[int] = []  # the last lines of the folds the current one is inside
    for first, last, _ in items:
        while open_ends and open_ends[-1] <= first:  # (one starting on its last line
            open_ends.pop()  # goes on past it: a fold spans two lines at least)
        depths.append(len(open_ends))
        open_ends.append(last)
    per_depth = Counter(depths)
    whole, room = -1, max(0, limit)
    for d in sorted(per_depth):
        if per_depth[d] > room:
            break
        whole, room = d, room - per_depth[d]
    # Every fold of the levels that fit whole, and the first ``room`` of the next (it has
    # more: the levels are 0, 1, 2 … and they do not all fit).
    nxt = whole + 1
    stop = [i for i, d in enumerate(depths) if d == nxt][room - 1] if room else -1
    return [
        f
        for i, ((_, _, f), d) in enumerate(zip(items, depths, strict=True))
        if d <= whole or (d == nxt and i <= stop)
    ]


def _folds(spans: list[_Span], limit: int | None) -> list[Fold]:
    """The folds of ``spans``: of two lines or more, one per start line (the longest), in
    order, at most ``limit`` (``limit_folds``)."""
    by_line: dict[int, _Span] = {}
    for span in spans:
        first, last = span[0], span[1]
        if last <= first:
            continue
        kept = by_line.get(first)
        if kept is None or last > kept[1]:
            by_line[first] = span
    kept_spans = [by_line[first] for first in sorted(by_line)]
    if limit is not None:
        kept_spans = _limited([(s[0], s[1], s) for s in kept_spans], limit)
    return [Fold(TextRange(s, e), k, (a, b)) for a, b, s, e, k in kept_spans]
