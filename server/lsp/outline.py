"""The outline (``textDocument/documentSymbol``) in LSP's JSON, kept by message.

An editor asks for the outline after every change, and a 10 MB conversation's outline has
ten thousand messages: made, converted to LSP positions and serialized, about 800 ms a
version, while a keystroke changes one message. So each message's entry is kept as the
JSON pygls writes for its ``lsp.DocumentSymbol`` (``convert.document_symbol_json``). When
the message has moved to another line, the entry becomes a template (its line numbers ``%d``,
relative to the message's first line) that the next versions fill in: a keystroke above a
message that moves it down a line costs one ``bytes % tuple``, not its entry made again.
Where a kept message starts now (its line and column) is carried from the text of the
last outline, as ``TextMap.of`` carries positions (``convert.carrier``); it is converted
again only for the messages around the change, or when that text is gone.

An entry is kept by the message's stored syntax node (``SNode.starts`` of the message
list: shared only by the versions in which the message's text is the same) and its stored
``Message``, and used again only with the same name (a tool message's names the call it
answers, which is in another message), the same column of its first character (positions
on its first line count from the line's start) and the same position encoding. Everything
else in an entry is a function of the message's text. Entries are kept for the last
outline of each of a few documents, only for the messages of that version: about the size
of the outline sent, which a document's limits bound (20,000 messages, 1,000,000 JSON
tokens: `docs/limits.md`).

A view whose base analysis is of an older text (``View.span``) is converted as before,
every range carried into the current text: those answers are rare and not kept; so are
the conversations of other providers' formats, whose messages are not stored by where
the message list's items start (their ranges are absolute).
"""

from __future__ import annotations

import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from assembly.ide import symbols as ide_symbols
from assembly.model import Conversation, Message
from assembly.rope import Rope
from assembly.syntax import SNode
from server.lsp import convert
from server.lsp.convert import TextMap


class _Entry(NamedTuple):
    """One message's kept outline entry, and what it was made of."""

    node: SNode  # its stored syntax node (kept so the key's ``id`` stays its own)
    message: Message  # its stored message
    call: str | None  # the name of the call it answers (a tool message's name says it)
    start: int  # where it starts: offset,
    line: int  # line
    column: int  # and column in the encoding's units (the entry was made at that column)
    json: bytes  # the entry as sent, or (``lines`` set) with ``%d`` for each line number
    lines: tuple[int, ...] | None  # those line numbers, relative to ``line``


@dataclass(slots=True)
class _Kept:
    """The entries of a document's last outline, and the text and encoding it was of."""

    text: weakref.ref[Rope] | None  # (not kept alive for this: a rope the server let go)
    encoding: str
    entries: dict[int, _Entry]


KEPT_DOCUMENTS = 4  # documents whose last outline's entries are kept
_MEMOS: OrderedDict[str, _Kept] = OrderedDict()
_LOCK = threading.Lock()  # outlines are made on the executor's threads

# A position's line in the JSON (in a string, the quote before the colon is escaped).
_LINE = re.compile(rb'"line": (\d+)')


def conversation_outline(key: str, conv: Conversation, text_map: TextMap) -> Iterator[bytes]:
    """The JSON of each top-level entry of the outline of ``conv`` (whose text is that of
    ``text_map``), in document order; ``key`` names the document the entries are kept for."""
    with _LOCK:
        kept = _MEMOS.get(key)
    text, encoding = text_map.text, text_map.encoding
    entries: dict[int, _Entry] = {}
    carry: Callable[[int, int], tuple[int, int] | None] | None = None
    if kept is not None and kept.encoding == encoding:
        entries = kept.entries
        old = kept.text() if kept.text is not None else None
        if old is not None and isinstance(text, Rope):
            carry = convert.carrier(old, text)
    used: dict[int, _Entry] = {}
    nodes = _message_nodes(conv)
    if not nodes or conv.records:  # messages not stored by the list's starts (other
        # providers' formats), or a dataset (its records: a few hundred entries)
        for sym in ide_symbols.conversation_symbols(conv):
            yield convert.document_symbol_json(text_map, sym)
        return
    keys = ide_symbols.key_symbols(conv)
    k = 0
    calls = ide_symbols.call_names(conv)
    for i, (m, start) in enumerate(zip(conv.message_data, conv.starts, strict=True)):
        while k < len(keys) and keys[k].range.start < start:
            yield convert.document_symbol_json(text_map, keys[k])
            k += 1
        node = nodes.get(start)
        if node is None or node.range.end != m.range.end:  # (not the message: no entry)
            sym = ide_symbols.message_symbol(conv, i, calls)
            yield convert.document_symbol_json(text_map, sym)
            continue
        call = calls.get(m.tool_call_id) if m.tool_call_id is not None else None
        hit = entries.get(id(node))
        if hit is not None and (hit.node is not node or hit.message is not m or hit.call != call):
            hit = None
        if hit is not None:
            moved = carry(hit.start, hit.line) if carry is not None else None
            if moved is not None and moved[0] == start:
                line, column = moved[1], hit.column
            else:
                position = convert.to_lsp_position(text_map, start)
                line, column = position.line, position.character
            if column != hit.column:  # made at another column
                hit = None
            elif line != hit.line and hit.lines is None:  # moved: its lines become holes
                hit = _Entry(node, m, call, start, line, column, *_template(hit.json, hit.line))
            elif (start, line) != (hit.start, hit.line):
                hit = _Entry(node, m, call, start, line, column, hit.json, hit.lines)
        if hit is None:
            hit = _entry(conv, i, node, call, start, text_map, calls)
        used[id(node)] = hit
        if hit.lines is None:
            yield hit.json
        else:
            yield hit.json % tuple([hit.line + r for r in hit.lines])
    for s in keys[k:]:
        yield convert.document_symbol_json(text_map, s)
    ref = weakref.ref(text) if isinstance(text, Rope) else None
    with _LOCK:
        # This version's messages only: the replaced ones are let go.
        _MEMOS[key] = _Kept(ref, encoding, used)
        _MEMOS.move_to_end(key)
        while len(_MEMOS) > KEPT_DOCUMENTS:
            _MEMOS.popitem(last=False)


def _entry(
    conv: Conversation,
    i: int,
    node: SNode,
    call: str | None,
    start: int,
    text_map: TextMap,
    calls: dict[str, str],
) -> _Entry:
    """The entry of message ``i`` (starting at ``start``, its stored node ``node``) made:
    its JSON as is (it becomes a template once the message moves to another line)."""
    m = conv.message_data[i]
    sym = ide_symbols.message_symbol(conv, i, calls)
    span = convert.lsp_span(text_map, sym.range)
    if sym.range.start == start:  # (the message's range starts where it does)
        line, column = span[0], span[1]
    else:
        position = convert.to_lsp_position(text_map, start)
        line, column = position.line, position.character
    written = convert.document_symbol_json(text_map, sym, span)
    return _Entry(node, m, call, start, line, column, written, None)


def _template(json_: bytes, line: int) -> tuple[bytes, tuple[int, ...]]:
    """An entry's JSON (of a message on ``line``) with ``%d`` for each line number, and
    those line numbers relative to ``line``."""
    lines = tuple([int(n) - line for n in _LINE.findall(json_)])
    return _LINE.sub(b'"line": %d', json_.replace(b"%", b"%%")), lines


def kept(key: str) -> bool:
    """Whether entries are kept for a document (its next outline makes only what changed)."""
    with _LOCK:
        return key in _MEMOS


def forget(key: str) -> None:
    """Let the entries kept for a document go (it was closed)."""
    with _LOCK:
        _MEMOS.pop(key, None)


def _message_nodes(conv: Conversation) -> dict[int, SNode]:
    """The stored node of each message-list item, by where the item starts."""
    tree = conv.tree
    holder = tree if tree is None or tree.is_array else tree.get("messages")
    if holder is None or holder.starts is None:
        return {}
    return dict(zip(holder.starts, holder.items, strict=True))
