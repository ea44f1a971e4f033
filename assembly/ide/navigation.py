"""Go to definition and find references in a conversation.

Three kinds of ids link places of a conversation:

- a tool call id: defined by the call's ``id`` in an assistant message, named by the
  ``tool_call_id`` of its responses (and anywhere a string value mentions it);
- a file id: defined where the file is injected (a ``project_files`` entry, an entry of a
  user message's ``files``, a file message's ``file_id``), named by ``read_file``
  arguments, listings and any other string value that mentions it;
- a message id: defined by a message's ``id``, named by ``parent`` and
  ``summarizes_through``.

Definition from a name goes to the definitions; from a definition it is the definition
itself (references go the other way). Offsets are code points into the document text.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from assembly.ide._tree import Mention, inner_range, mentions, mentions_in, path_at
from assembly.model import Conversation
from assembly.pairs import CallRef, call_at, conversation_pairs, seen
from assembly.sourcemap import string_offset_map
from assembly.text import TextRange, resolve


class IdKind(StrEnum):
    TOOL_CALL = "tool call"
    FILE = "file"
    MESSAGE = "message"


@dataclass(frozen=True, slots=True)
class IdAt:
    """The id under the cursor."""

    kind: IdKind
    id: str
    range: TextRange  # where the cursor's mention of it is


@dataclass(frozen=True, slots=True)
class Target:
    """A place to go to: the whole thing, and the part to put the cursor on."""

    range: TextRange  # e.g. the whole tool call object
    focus_range: TextRange  # e.g. its ``id`` value


def id_at(conv: Conversation, text: str, offset: int) -> IdAt | None:
    """Return the tool call, file or message id the cursor is on, or None."""
    path = path_at(conv.root, offset)
    if not path or path[-1].node.kind not in ("string", "number"):
        return None
    node = path[-1].node
    value = str(node.value)
    links = _Links.of(conv)
    kind = links.by_value_range.get(node.range)
    if kind is not None:
        rng = inner_range(text, node)
        return IdAt(kind, value, rng) if rng.contains(offset) else None
    if node.kind != "string":
        return None
    if path[-1].key == "file_id":
        rng = inner_range(text, node)
        return IdAt(IdKind.FILE, value, rng) if rng.contains(offset) else None
    # A mention inside a longer string: arguments, a listing, a tool result.
    for kind, ids in ((IdKind.TOOL_CALL, links.call_ids), (IdKind.FILE, links.file_ids)):
        for candidate in ids:
            if candidate not in value:
                continue
            for mention in mentions_in(text, node, candidate):
                if mention.range.contains(offset):
                    return IdAt(kind, candidate, mention.range)
    return None


def definition(conv: Conversation, text: str, offset: int) -> list[Target] | None:
    """Where the id under the cursor is defined (the tool call, the injected file, the message)."""
    at = id_at(conv, text, offset)
    if at is None:
        return None
    res = _definitions(conv, text, at)
    return res or None


def references(
    conv: Conversation, text: str, offset: int, *, include_declaration: bool
) -> list[TextRange] | None:
    """Every place naming the id under the cursor, in document order."""
    at = id_at(conv, text, offset)
    if at is None:
        return None
    if at.kind is IdKind.MESSAGE:
        places = list(_message_places(conv, text, at.id))
    else:
        places = [m.range for m in mentions(conv.root, text, at.id)]
        if at.kind is IdKind.TOOL_CALL:
            places = _same_use(conv, at, places)
    if not include_declaration:
        declared = {t.focus_range for t in _definitions(conv, text, at)}
        places = [p for p in places if p not in declared]
    places = sorted(set(places))
    return places or None


# ------------------------------------------------------------------------------ private


@dataclass(frozen=True, slots=True)
class _Links:
    """The ids a conversation defines, and which value ranges hold an id of which kind."""

    call_ids: tuple[str, ...]
    file_ids: tuple[str, ...]
    by_value_range: dict[TextRange, IdKind]

    @staticmethod
    def of(conv: Conversation) -> _Links:
        """The links of ``conv``'s version: made once per version (from the stored
        messages and where they start: no view of a message is made) and kept with it."""
        return conv.derived("links", _Links._make)

    @staticmethod
    def _make(conv: Conversation) -> _Links:
        calls: dict[str, None] = {}
        by_range: dict[TextRange, IdKind] = {}
        files = dict.fromkeys(f.file_id for f in conv.project_files)
        for m, base in zip(conv.message_data, conv.starts, strict=True):
            for c in m.tool_calls:
                calls.setdefault(c.id)
                by_range[resolve(c.id_range, base)] = IdKind.TOOL_CALL
            if m.tool_call_id is not None and m.tool_call_id_range is not None:
                by_range[resolve(m.tool_call_id_range, base)] = IdKind.TOOL_CALL
            for rng in (m.id_range, m.parent_range, m.summarizes_through_range):
                if rng is not None:
                    by_range[resolve(rng, base)] = IdKind.MESSAGE
            for f in m.files:
                files.setdefault(f.file_id)
            if m.file_id is not None:
                files.setdefault(m.file_id)
        for m in conv.message_data:
            for c in m.tool_calls:
                named = c.arguments.get("file_id") if c.arguments else None
                if isinstance(named, str) and named:
                    files.setdefault(named)
        return _Links(tuple(calls), tuple(files), by_range)


def _injections(conv: Conversation, file_id: str) -> Iterable[TextRange]:
    """Each place that injects the file ``file_id``: a project file entry, an entry of a
    message's ``files``, a file message (views made of those messages only)."""
    for f in conv.project_files:
        if f.file_id == file_id:
            yield f.range
    for i, m in enumerate(conv.message_data):
        for k, f in enumerate(m.files):
            if f.file_id == file_id:
                yield conv.messages[i].files[k].range
        if m.file_id == file_id:
            yield conv.messages[i].range


def _definitions(conv: Conversation, text: str, at: IdAt) -> list[Target]:
    if at.kind is IdKind.TOOL_CALL:
        ref = _call_meant(conv, at)
        if ref is None:
            return []
        return [Target(ref.call.range, _inner(text, ref.call.id_range, ref.call.id))]
    if at.kind is IdKind.MESSAGE:
        return [
            Target(m.range, _inner(text, m.id_range, m.id) if m.id_range else m.range)
            for m in map(conv.messages.__getitem__, _with_id(conv, at.id))
        ]
    found = mentions(conv.root, text, at.id)
    return [Target(rng, _first_exact(found, rng) or rng) for rng in _injections(conv, at.id)]


def _with_id(conv: Conversation, message_id: str) -> list[int]:
    """The places of the messages with id ``message_id`` (at C speed)."""
    ids = map(operator.attrgetter("id"), conv.message_data)
    return list(itertools.compress(itertools.count(), map(message_id.__eq__, ids)))


def _call_meant(conv: Conversation, at: IdAt) -> CallRef | None:
    """The call a tool call id under the cursor names, in conversation order: a response's
    `tool_call_id` names the call it answers; a call's own id that call; a mention elsewhere
    the latest call with that id before it."""
    m = conv.message_at(at.range.start)
    if m is not None:
        for k, c in enumerate(m.tool_calls):
            if c.id_range.contains(at.range.start):
                return CallRef(m, c, k)
        if m.tool_call_id_range is not None and m.tool_call_id_range.contains(at.range.start):
            ref = conversation_pairs(conv).call_of.get(m.id)
            return seen(conv, ref) if ref is not None else None
    ref = call_at(conv, at.id, at.range.start)
    return seen(conv, ref) if ref is not None else None


def _same_use(conv: Conversation, at: IdAt, places: list[TextRange]) -> list[TextRange]:
    """When an id is used again after its call was answered, the places of the one use the
    cursor is on: from its call up to the next call with the same id."""
    starts = sorted(
        resolve(c.range, base).start
        for m, base in zip(conv.message_data, conv.starts, strict=True)
        for c in m.tool_calls
        if c.id == at.id
    )
    if len(starts) < 2:
        return places
    ref = _call_meant(conv, at)
    if ref is None:
        return places
    begin = ref.call.range.start
    end = next((s for s in starts if s > begin), None)
    if ref.owner.range.start <= begin:
        begin = ref.owner.range.start
    return [p for p in places if begin <= p.start and (end is None or p.start < end)]


def _first_exact(found: list[Mention], within: TextRange) -> TextRange | None:
    for m in found:
        if m.exact and within.start <= m.range.start and m.range.end <= within.end:
            return m.range
    return None


def _message_places(conv: Conversation, text: str, message_id: str) -> Iterable[TextRange]:
    for m, base in zip(conv.message_data, conv.starts, strict=True):
        if m.id == message_id and m.id_range is not None:
            yield _inner(text, resolve(m.id_range, base), m.id)
        if m.parent == message_id and m.parent_range is not None:
            yield _inner(text, resolve(m.parent_range, base), message_id)
        if m.summarizes_through == message_id and m.summarizes_through_range is not None:
            yield _inner(text, resolve(m.summarizes_through_range, base), message_id)


def _inner(text: str, rng: TextRange, value: str) -> TextRange:
    """The range of a scalar's own characters, given the scalar's range and value."""
    return string_offset_map(text, rng, value).range(0, len(value))
