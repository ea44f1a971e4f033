"""Where each document message went in the assembly, and why: the facts hover, inlay
hints and the code lens show.

A document message is *kept* (sent, in one of the eight segments), *dropped* by the budget
cut, dropped as an *orphan* tool response, *summarized* (replaced by a summary node),
an *unused summary*, on *another branch*, or *not assembled* (the conversation cannot be
assembled at all). Figures are the assembly's own; nothing here counts tokens.

Cumulative figures start with the tool definitions (sent with every request, before the
messages) so that the last message's cumulative total is the lens's assembled total.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, Protocol

from assembly.assemble import Assembly, AssemblyError, LayoutEntry, LlmMessage
from assembly.model import Conversation, Message, Role
from assembly.rope import Text
from assembly.settings import Settings

Status = Literal[
    "kept", "dropped", "orphan", "summarized", "summary_unused", "other_branch", "not_assembled"
]


class ConversationDoc(Protocol):
    """An analysed conversation (``server.workspace.Analysis`` has these fields)."""

    @property
    def text(self) -> Text: ...
    @property
    def conversation(self) -> Conversation: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def assembly(self) -> Assembly: ...
    @property
    def encoding_requested(self) -> str: ...
    @property
    def encoding_warning(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class FilePart:
    """An uploaded file injected as its own user message right before its message."""

    id: str  # e.g. ``m10/files/0``
    file_id: str | None
    tokens: int
    kept: bool
    segment: str | None


@dataclass(frozen=True, slots=True)
class Placement:
    """What happened to one document message."""

    message: Message
    status: Status
    tokens: int | None  # what the budget charges for it (None: never counted)
    segment: str | None = None  # where it is sent (kept messages)
    index: int | None = None  # its position among the sent messages (0-based)
    cumulative: int | None = None  # tool definitions + every message sent up to it
    cached: bool = False  # inside the prompt-cache prefix
    replaced: bool = False  # an earlier turn's tool result sent as the placeholder sentence
    files: tuple[FilePart, ...] = ()

    @property
    def sent(self) -> bool:
        return self.status == "kept"


@dataclass(frozen=True, slots=True)
class Totals:
    """The assembled total as the lens and the head hover show it."""

    used: int  # tool definitions + messages sent
    available: int  # floor(max_input_tokens × (1 − safety_margin))
    dropped: int  # messages dropped by the budget cut or as orphans
    forgotten: int  # files in the forgotten-files listing
    error: AssemblyError | None  # the first error that stopped the assembly


class Placements:
    """Placements of a conversation's messages, computed on demand.

    Indexes are built the first time they are needed, so a hover on a kept message of a
    10 MB conversation touches the layout (the messages sent), not every message written.
    """

    def __init__(self, conversation: Conversation, assembly: Assembly) -> None:
        self.conversation = conversation
        self.assembly = assembly
        self._looks = 0  # messages placed (``of``) so far
        self._tables: dict[str, Any] = {}  # ``_has`` and ``_own``'s, made on a second look

    # The indexes are built at C speed (``map``, ``zip``, ``dict``): a hover's first look
    # at an analysis of a 10 MB conversation builds them over thousands of entries.
    @cached_property
    def _layout_index(self) -> dict[str, int]:
        """Each id's first place in the layout."""
        ids = list(map(_LAYOUT_ID, self.assembly.layout))
        # (from the last place to the first: a repeated id keeps its first place)
        return dict(zip(reversed(ids), range(len(ids) - 1, -1, -1), strict=True))

    @cached_property
    def _cumulative(self) -> list[int]:
        return list(
            itertools.accumulate(
                map(_TOKENS, self.assembly.layout), initial=self.assembly.budget.tools
            )
        )[1:]

    # The id look-ups of ``of``. A hover places one message of an analysis, and the next
    # keystroke makes a new one: the first look-up scans the assembly's id tuples at C speed
    # (a few tenths of a millisecond for a 10 MB conversation's 8,000 history messages),
    # where tables of them took 1.5-2 ms to build (memory-bound: one string object each).
    # From the second message placed on (hovers over one analysis), the tables are made
    # once and kept. Both answer alike: a scan finds what the table holds.

    def _has(self, name: str, message_id: str) -> bool:
        """Whether ``message_id`` is in the assembly's id tuple ``name``."""
        ids: tuple[str, ...] = getattr(self.assembly, name)
        if self._looks < 2:
            return message_id in ids
        table = self._tables.get(name)
        if table is None:
            table = self._tables[name] = frozenset(ids)
        return message_id in table

    def _own(self, message_id: str) -> LlmMessage | None:
        """The history's message of this id (a repeated id: its last)."""
        a = self.assembly
        if self._looks < 2:
            at = -1
            with contextlib.suppress(ValueError):
                while True:
                    at = a.history_ids.index(message_id, at + 1)
            return a.history[at] if at != -1 else None
        table = self._tables.get("history")
        if table is None:
            table = self._tables["history"] = dict(zip(a.history_ids, a.history, strict=True))
        return table.get(message_id)

    @cached_property
    def file_ids(self) -> frozenset[str]:
        """Every file id the document names: project files, uploads, injected files."""
        conv = self.conversation
        ids = {f.file_id for f in conv.project_files}
        # The stored messages, read at C speed: no message view is made (a hover on the
        # head of a 10 MB conversation would otherwise make 10,000 of them).
        data = conv.message_data
        for files in filter(None, map(_FILES, data)):
            ids.update(f.file_id for f in files)
        ids.update(filter(_NOT_NONE, map(_FILE_ID, data)))
        return frozenset(ids)

    @cached_property
    def dropped_tokens(self) -> int:
        """What the messages dropped by the budget cut would have cost."""
        a = self.assembly
        return sum(map(a.tokens_by_id.get, a.dropped, itertools.repeat(0)))

    @cached_property
    def _system_id(self) -> str | None:
        if self.conversation.system_prompt is not None:
            return None
        return next((m.id for m in self.conversation.messages if m.role is Role.SYSTEM), None)

    def of(self, m: Message) -> Placement:
        """Return where ``m`` went."""
        a = self.assembly
        self._looks += 1
        files = self._files(m)
        pos = self._layout_index.get(m.id)
        if pos is not None and a.layout[pos].message.source is m.green:
            e = a.layout[pos]
            return Placement(
                m,
                "kept",
                e.tokens,
                e.segment,
                pos,
                self._cumulative[pos],
                pos < a.cache_prefix_length,
                e.message.replaced,
                files,
            )
        own = self._own(m.id)
        tokens = own.tokens if own is not None else m.token_count
        replaced = own.replaced if own is not None else False
        if self._has("dropped", m.id):
            return Placement(m, "dropped", tokens, replaced=replaced, files=files)
        if self._has("orphans_dropped", m.id):
            return Placement(m, "orphan", tokens, replaced=replaced, files=files)
        if not a.layout and error_of(a) is not None:
            if own is not None or self._has("chain", m.id) or m.id == self._system_id:
                return Placement(m, "not_assembled", tokens, files=files)
        if self._has("chain", m.id):
            if m.role is Role.SUMMARY:
                return Placement(m, "summary_unused", m.token_count)
            return Placement(m, "summarized", m.token_count, files=files)
        return Placement(m, "other_branch", m.token_count, files=files)

    def summary(self) -> Message | None:
        """The summary message the assembly applied (``Assembly.summary_id``), or None:
        found by its place, so no other message is seen."""
        place = self.assembly.summary_place
        return self.conversation.messages[place] if place is not None else None

    def cut_at(self) -> str | None:
        """The newest message dropped by the budget cut (where the fill stopped)."""
        return self.assembly.dropped[-1] if self.assembly.dropped else None

    def totals(self) -> Totals:
        a = self.assembly
        return Totals(
            used=a.budget.tools + a.budget.used,
            available=a.budget.available_tokens,
            dropped=len(a.dropped) + len(a.orphans_dropped),
            forgotten=len(a.forgotten_files),
            error=error_of(a),
        )

    def tip(self) -> str | None:
        """The id of the message the current branch ends at."""
        return self.assembly.chain[-1] if self.assembly.chain else None

    def _files(self, m: Message) -> tuple[FilePart, ...]:
        if m.role is not Role.USER or not m.files:
            return ()
        res = []
        prefix = f"{m.id}/files/"
        for k in range(len(m.files)):
            fid = f"{prefix}{k}"
            own = self._own(fid)
            if own is None:
                continue  # images ride on the message itself
            pos = self._layout_index.get(fid)
            entry: LayoutEntry | None = self.assembly.layout[pos] if pos is not None else None
            res.append(
                FilePart(
                    fid,
                    own.file_id,
                    entry.tokens if entry is not None else own.tokens,
                    entry is not None,
                    entry.segment if entry is not None else None,
                )
            )
        return tuple(res)


def placements(conv: Conversation, assembly: Assembly) -> Placements:
    """Where the messages of ``conv`` went in ``assembly`` (indexed lazily).

    The last one is kept, so successive hovers and hints on one analysis index it once
    (its indexes are by id, never by offset: a later edit cannot make them wrong).
    """
    last = _last
    if last and last[0].conversation is conv and last[0].assembly is assembly:
        return last[0]
    res = Placements(conv, assembly)
    _last[:] = [res]
    return res


_last: list[Placements] = []
_FILES = operator.attrgetter("files")
_LAYOUT_ID = operator.attrgetter("message.id")
_TOKENS = operator.attrgetter("tokens")
_FILE_ID = operator.attrgetter("file_id")
_NOT_NONE = functools.partial(operator.is_not, None)


def error_of(a: Assembly) -> AssemblyError | None:
    """The first error that stopped the assembly (a warning never does)."""
    return next((e for e in a.errors if e.severity == "error"), None)


def short_error(e: AssemblyError, *, limit: int = 120) -> str:
    """``code: message`` cut to one short line (parenthesised details go first)."""
    message = e.message.split(" (", 1)[0]
    res = f"{e.code}: {message}"
    return res if len(res) <= limit else res[: limit - 1] + "…"


def fmt_tokens(n: int) -> str:
    return f"{n:,}"


def percent(part: int, whole: int) -> str:
    if whole <= 0:
        return "–"
    share = 100 * part / whole
    if 0 < share < 0.1:
        return "<0.1%"
    return f"{share:.1f}%"


def first_lines(text: str, n: int, *, width: int = 120) -> tuple[list[str], int]:
    """The first ``n`` lines of ``text`` (each clipped) and how many lines were left out."""
    lines = text.splitlines()
    shown = [line if len(line) <= width else line[: width - 1] + "…" for line in lines[:n]]
    return shown, max(0, len(lines) - n)


def ids(values: Sequence[str]) -> str:
    """``a``, ``b`` … ``z`` for a long list."""
    if len(values) <= 4:
        return ", ".join(f"`{v}`" for v in values)
    return f"`{values[0]}`, `{values[1]}` … `{values[-1]}`"
