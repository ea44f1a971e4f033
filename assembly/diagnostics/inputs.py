"""The inputs of the rules: typed summaries of an analysis, and the queries that make them.

A rule reads exactly its parameters (``engine``); the types here are what it may ask for.
Each is an immutable value made by one ``@query`` from the version being checked
(``Source``) and compared with the last version's by ``==``: a rule none of whose inputs
changed keeps its findings. Equality never looks at positions (``shape_key``): where
findings lie is the engine's business. The messages are given without their contents
(``MessageShape``); what a rule needs of a content, it gets as a summary made per message
object (``Source.per_message``), so typing in a message only makes that message's again.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import operator
import typing
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Self, TypeVar

from assembly import seq
from assembly.assemble import LayoutEntry, first_system, walk_branch
from assembly.diagnostics.core import RuleContext
from assembly.diagnostics.engine import (
    ROLES,
    MessageSource,
    Source,
    message_start,
    query,
)
from assembly.diagnostics.window import TextLike, Windows, line_start
from assembly.model import (
    ASSISTANT_ROLE,
    REMINDER_ROLE,
    SUMMARY_ROLE,
    SYSTEM_ROLE,
    TOOL_ROLE,
    Conversation,
    DocFormat,
    FileAttachment,
    Image,
    Located,
    Message,
    RejectedCall,
    Role,
    TextBlock,
    ToolCall,
    ToolDef,
)
from assembly.syntax import Member, SNode
from assembly.text import RelRange, TextRange

__all__ = [
    "AllPrompts",
    "Branch",
    "CallIds",
    "Cut",
    "MessageKinds",
    "MessageShape",
    "OnBranch",
    "OrphanCut",
    "PromptContext",
    "Summaries",
    "SummaryReports",
    "ToolTraffic",
    "Tools",
    "first_system_index",
    "message_source",
    "same_messages",
    "same_shape",
    "shape_key",
]


# ------------------------------------------------------------------------------ equality


def shape_key(value: Any) -> Any:
    """``value`` as inputs compare it: every range replaced by a marker."""
    if value is None or isinstance(value, (str, int, float)):
        return value
    if isinstance(value, (TextRange, RelRange)):
        return ...
    if isinstance(value, Located):
        return shape_key(value.green)
    if isinstance(value, tuple):
        return tuple(shape_key(v) for v in value)
    if isinstance(value, MessageShape):
        return value.key
    if isinstance(value, SNode):  # (plain classes, not dataclasses: their fields here)
        return ("SNode", *(shape_key(getattr(value, n)) for n in _SNODE_FIELDS))
    if isinstance(value, Member):
        return ("Member", *(shape_key(getattr(value, n)) for n in ("key", "key_range", "value")))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (
            type(value).__name__,
            *(
                shape_key(getattr(value, f.name))
                for f in dataclasses.fields(value)
                if f.compare and f.name not in _POSITIONS
            ),
        )
    if isinstance(value, dict):
        return ("dict", *((k, shape_key(v)) for k, v in value.items()))
    return value  # lists of plain values (settings, schemas, arguments)


def same_shape(a: Any, b: Any) -> bool:
    """``shape_key(a) == shape_key(b)``, without making the keys of the parts that are the
    same objects (a kept tool list, the same messages): tuples and dataclasses are compared
    part by part, each part the same object or of the same key."""
    if a is b:
        return True
    t = type(a)
    if t is not type(b):
        return shape_key(a) == shape_key(b)
    if t is tuple:
        return len(a) == len(b) and all(map(same_shape, a, b))
    if (
        dataclasses.is_dataclass(a)
        and not isinstance(a, (str, int, float, TextRange, RelRange, Located, MessageShape))
        and not isinstance(a, type)
    ):
        return all(
            same_shape(getattr(a, f.name), getattr(b, f.name))
            for f in dataclasses.fields(a)
            if f.compare and f.name not in _POSITIONS
        )
    return shape_key(a) == shape_key(b)


_POSITIONS = frozenset({"starts"})  # a conversation's table of message starts
# A source node's fields as compared (its table of item starts is positions too).
_SNODE_FIELDS = ("kind", "range", "value", "items", "members", "error_counts")
_MESSAGE_FIELDS = tuple(
    f.name for f in dataclasses.fields(Message) if f.name not in ("content", "files")
)


_COPIED = ("id", "index", "role", "parent", "tool_call_id")


class MessageShape:
    """A message of one version (a view) without its contents: every field of ``Message``
    but ``content`` (which it does not have), with its attached files' contents left out,
    and ``index``. Equal (``key``) when all but the ranges are equal.

    Made from a view, or from a stored message, where it starts and its index (the view
    is then made only when a range is read: a walk of the branch reads plain fields)."""

    # The fields every walk of the branch reads are copied; the others are read through.
    __slots__ = ("_base", "_calls", "_files", "_g", "_images", "_key", "_view", *_COPIED)

    def __init__(self, m: Message, base: int | None = None, index: int | None = None) -> None:
        if base is None:  # a view
            self._view: Message | None = m
            g = getattr(m, "green", m)
            self._base = getattr(m, "base", 0)
            index = m.index
        else:
            self._view = None
            g = m
            self._base = base
        self._g = g
        self.index = index
        self.id, self.role, self.parent, self.tool_call_id = g.id, g.role, g.parent, g.tool_call_id
        self._key: tuple[Any, ...] | None = None
        self._files: tuple[FileAttachment, ...] | None = None
        self._calls: tuple[ToolCall, ...] | None = None
        self._images: tuple[Image, ...] | None = None

    @property
    def _m(self) -> Message:
        """The message seen in its version (made when first read)."""
        v = self._view
        if v is None:
            v = self._view = Located(self._g, self._base, self.index)  # type: ignore[assignment]
        return v  # type: ignore[return-value]

    @property
    def key(self) -> tuple[Any, ...]:
        if self._key is None:
            self._key = (self.index, *shape_key_of(self._g))
        return self._key

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        calls = self._calls
        if calls is None:
            calls = self._calls = self._m.tool_calls if self._g.tool_calls else ()
        return calls

    @property
    def images(self) -> tuple[Image, ...]:
        images = self._images
        if images is None:
            images = self._images = self._m.images if self._g.images else ()
        return images

    @property
    def files(self) -> tuple[FileAttachment, ...]:
        if self._files is None:
            fs = self._m.files if self._g.files else ()
            self._files = tuple(map(_without_content, fs)) if fs else ()
        return self._files

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageShape):
            return NotImplemented
        if self._g is other._g and self.index == other.index:
            return True
        return self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"MessageShape({self.id!r}, {self.role})"


def _without_content(f: Any) -> FileAttachment:
    values = (
        f.values()
        if isinstance(f, Located)
        else {n.name: getattr(f, n.name) for n in dataclasses.fields(f)}
    )
    return FileAttachment(**{**values, "content": "" if f.content is not None else None})


def shape_key_of(m: Message) -> tuple[Any, ...]:
    """A stored message's shape as compared: all but its ranges, its content and its
    files' contents (whether a file has one is shape)."""
    files = tuple(
        (f.content is None, *(shape_key(getattr(f, n)) for n in _FILE_FIELDS)) for f in m.files
    )
    return (*(shape_key(getattr(m, n)) for n in _MESSAGE_FIELDS), files)


_FILE_FIELDS = tuple(f.name for f in dataclasses.fields(FileAttachment) if f.name != "content")


def _read_through(name: str) -> property:
    """A field of the shape: a range (or values holding ranges) through the view, a plain
    value from the stored message."""
    kind = str(next(f.type for f in dataclasses.fields(Message) if f.name == name))
    return property(operator.attrgetter(f"_m.{name}" if "Span" in kind else f"_g.{name}"))


for _name in _MESSAGE_FIELDS:
    if _name not in _COPIED and _name not in ("tool_calls", "images"):
        setattr(MessageShape, _name, _read_through(_name))
del _name


def same_messages(a: tuple[Message, ...], b: tuple[Message, ...]) -> bool:
    """Equal shapes of stored messages, comparing only the objects that are not the same
    (``seq.differing``)."""
    if a is b:
        return True  # (a value kept from the last run, seen in this version)
    if len(a) != len(b):
        return False
    return all(shape_key_of(a[i]) == shape_key_of(b[i]) for i in seq.differing(a, b))


# ------------------------------------------------------------------------------ the branch


@dataclass(frozen=True, slots=True, eq=False)
class Branch:
    """The messages (without contents) and the current branch through them.

    ``chain`` is the branch's message ids in order (the assembly's; empty without one:
    then every message is on it). ``record`` is a dataset record's place, ``branch_tip``
    the setting, ``rejected_calls`` the calls left out as malformed.
    """

    messages: Sequence[MessageShape]  # seen in this version, made when first read
    chain: tuple[str, ...]
    format: DocFormat | None
    record: int | None
    branch_tip: str | None
    rejected_calls: tuple[RejectedCall, ...]
    project_files: tuple[FileAttachment, ...]
    stored: tuple[Message, ...] = ()  # what is compared (position-free)
    places: tuple[
        int, ...
    ] = ()  # the indexes of ``chain``'s messages, when the assembly gives them

    def _memo(self, kind: str, make: Callable[[], _V]) -> _V:
        """A value made from this input once (kept for the last input read only)."""
        hit = _BRANCHES.get(id(self))
        if hit is None or hit[0] is not self:
            _BRANCHES.clear()  # the last one only
            hit = _BRANCHES[id(self)] = (self, {})
        values = hit[1]
        if kind not in values:
            values[kind] = make()
        return values[kind]  # type: ignore[no-any-return]

    @property
    def data(self) -> Sequence[Message]:
        """The stored messages (position-free, without index): ``data[i]`` is the stored
        message of ``messages[i]``. A walk that reads no range reads these: it costs no
        shape (the shape of a message with a finding is ``messages[i]``)."""
        return self.stored if len(self.stored) == len(self.messages) else self.messages

    def order(self) -> list[int]:
        """The indexes of the messages of the current branch, in order (all of them
        without a chain)."""
        return list(self._memo("order", self._order))

    def _order(self) -> list[int]:
        data = self.data
        if not self.chain:
            return list(range(len(data)))
        places = self.places
        if len(places) == len(self.chain) and places[-1] < len(data):
            if data[places[-1]].id == self.chain[-1]:  # of this conversation
                return list(places)  # the pipeline's walk of the branch found them
        by_id = dict(zip(map(_ID, data), range(len(data)), strict=True))
        found = list(map(by_id.get, self.chain))
        return list(itertools.compress(found, map(operator.is_not, found, _NONES)))  # type: ignore[arg-type]

    def branch_data(self) -> list[Message]:
        """The stored messages of the current branch, in order (``data`` at ``order``)."""
        return list(
            self._memo("branch data", lambda: list(map(self.data.__getitem__, self.order())))
        )

    def branch(self) -> list[MessageShape]:
        """The messages of the current branch, in order (all of them without a chain)."""
        at = self.messages.__getitem__
        return list(self._memo("branch", lambda: list(map(at, self.order()))))

    def roles(self) -> frozenset[Role]:
        """The roles of the messages (of every branch)."""
        return self._memo("roles", lambda: frozenset(map(_ROLE, self.data)))

    def index_of(self, m: Message) -> int:
        """The index of a stored message of ``data``, by identity."""
        where = self._memo(
            "where", lambda: dict(zip(map(id, self.data), range(len(self.data)), strict=True))
        )
        return where[id(m)]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Branch):
            return NotImplemented
        return (
            self.chain == other.chain
            and self.format == other.format
            and self.record == other.record
            and self.branch_tip == other.branch_tip
            and same_shape(self.rejected_calls, other.rejected_calls)
            and same_shape(self.project_files, other.project_files)
            and same_messages(self.stored, other.stored)
        )

    __hash__ = None  # type: ignore[assignment]


_BRANCHES: dict[int, tuple[Branch, dict[str, Any]]] = {}
_NONES = itertools.repeat(None)
_V = TypeVar("_V")
_ROLE = operator.attrgetter("role")


@query
def branch_of(src: Source) -> Branch:
    ctx = src.ctx
    conv = ctx.conversation
    shapes = _Shapes(src.messages, conv.starts if conv is not None else ())
    a = ctx.assembly
    chain = tuple(a.chain) if a is not None and a.chain else ()
    if conv is None:
        return Branch(shapes, chain, None, None, ctx.settings.branch_tip, (), (), ())
    project = tuple(map(_without_content, conv.project_files))
    places = a.chain_places if a is not None and a.chain else ()
    return Branch(
        shapes,
        chain,
        conv.format,
        conv.record,
        ctx.settings.branch_tip,
        conv.rejected_calls,
        project,
        src.messages,
        places,
    )


class _Shapes(Sequence[MessageShape]):
    """The messages of one version without contents (from the stored messages and where
    they start), each made when first read."""

    __slots__ = ("_made", "_starts", "_stored")

    def __init__(self, stored: Sequence[Message], starts: Sequence[int]) -> None:
        self._stored = stored
        self._starts = starts
        self._made: list[MessageShape | None] = [None] * len(stored)

    def __len__(self) -> int:
        return len(self._stored)

    def _at(self, i: int) -> MessageShape:
        shape = self._made[i]
        if shape is None:
            shape = self._made[i] = MessageShape(self._stored[i], self._starts[i], i)
        return shape

    @typing.overload
    def __getitem__(self, i: int) -> MessageShape: ...

    @typing.overload
    def __getitem__(self, i: slice) -> Sequence[MessageShape]: ...

    def __getitem__(self, i: int | slice) -> MessageShape | Sequence[MessageShape]:
        if isinstance(i, slice):
            return [self._at(k) for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._at(i)

    def __iter__(self) -> Iterator[MessageShape]:
        at = self._at
        for i, shape in enumerate(self._made):
            yield shape if shape is not None else at(i)


@dataclass(frozen=True, slots=True)
class MessageKinds:
    """The indexes (in document order) of the stored messages of each kind the narrow
    inputs look for: that make tool calls, tool messages, summary nodes, system messages,
    reminders, with a ``parent`` link, that inject a file (``files``, an upload, images).

    Made every run from the last run's and the messages new since (``Source.indexes``):
    an edit costs the messages it replaced, not a pass over the document, and a narrow
    input finds its messages among a few indexes."""

    callers: tuple[int, ...]
    tools: tuple[int, ...]
    summaries: tuple[int, ...]
    systems: tuple[int, ...]
    reminders: tuple[int, ...]
    parented: tuple[int, ...]
    carriers: tuple[int, ...]


@query
def message_kinds(src: Source) -> MessageKinds:
    msgs = src.messages

    def picked(idx: Iterable[int]) -> Iterable[Message]:
        if isinstance(idx, range) and len(idx) == len(msgs):
            return msgs  # every message (the first run)
        return map(msgs.__getitem__, idx)

    def role(r: Role) -> Callable[[Iterable[int]], Iterable[bool]]:
        return lambda idx: map(operator.is_, map(_ROLE, picked(idx)), itertools.repeat(r))

    def has(get: Callable[[Message], Any]) -> Callable[[Iterable[int]], Iterable[object]]:
        return lambda idx: map(get, picked(idx))

    return MessageKinds(
        src.indexes("kinds: callers", has(_TOOL_CALLS)),
        src.indexes("kinds: tools", role(TOOL_ROLE)),
        src.indexes("kinds: summaries", role(SUMMARY_ROLE)),
        src.indexes("kinds: systems", role(SYSTEM_ROLE)),
        src.indexes("kinds: reminders", role(REMINDER_ROLE)),
        src.indexes("kinds: parented", has(_PARENT)),
        src.indexes("kinds: carriers", has(_carries)),
    )


def _carries(m: Message) -> bool:
    """Whether ``m`` injects a file: attached ``files``, an upload's ``file_id``, images."""
    return bool(m.files) or m.file_id is not None or bool(m.images)


@dataclass(frozen=True, slots=True)
class OnBranch:
    """The indexes of the messages on the current branch (what per-message rules see)."""

    indexes: frozenset[int]


@query
def on_branch(branch: Branch) -> OnBranch:
    return OnBranch(frozenset(branch.order()))


@dataclass(frozen=True, slots=True, eq=False)
class BranchPart:
    """A narrow input: some of the branch's messages, read like a ``Branch`` for a
    finding's place (``messages``, ``data``: the whole branch's). A value kept from an
    earlier version with equal inputs is seen in the current one by ``placed``."""

    branch: Branch

    @property
    def messages(self) -> Sequence[MessageShape]:
        return self.branch.messages

    @property
    def data(self) -> Sequence[Message]:
        return self.branch.data

    def placed(self, current: Callable[[type], Any]) -> Self:
        """This value, kept from an earlier version with an equal ``Branch``, seen in the
        current version (``current``: an input's value in it): the same messages at the
        same indexes, where they stand now."""
        b = current(Branch)
        return self if b is self.branch else dataclasses.replace(self, branch=b)


@dataclass(frozen=True, slots=True, eq=False)
class ToolTraffic(BranchPart):
    """The messages that make or answer tool calls, the only ones the tool-call rules
    read: ``order()`` / ``branch_data()`` are the branch's (in branch order), ``callers``
    the indexes of every message of the document that makes calls (in document order).

    Read like a ``Branch`` restricted to those messages (``messages``, ``data`` and
    ``index_of`` are the whole branch's, for a finding's place). Equal when those
    messages are (by shape, in order), whatever the other messages are or where any of
    them stands: editing, adding or deleting a message without calls keeps the value, and
    a rule reading it keeps its findings (they move with their messages).
    ``answer``: the branch's last message is an assistant message of a dataset record
    (its calls are the example's answer), and it is among these.
    """

    on_branch: tuple[int, ...]
    callers: tuple[int, ...]
    answer: bool
    _stored: tuple[Message, ...]  # at ``on_branch``, then at ``callers`` (what is compared)

    @property
    def rejected_calls(self) -> tuple[RejectedCall, ...]:
        return self.branch.rejected_calls

    def order(self) -> list[int]:
        return list(self.on_branch)

    def branch_data(self) -> list[Message]:
        return list(self._stored[: len(self.on_branch)])

    def callers_data(self) -> tuple[Message, ...]:
        """The stored messages at ``callers`` (every message of the document that makes
        calls, in document order)."""
        return self._stored[len(self.on_branch) :]

    def index_of(self, m: Message) -> int:
        return self.branch.index_of(m)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolTraffic):
            return NotImplemented
        return (
            len(self.on_branch) == len(other.on_branch)
            and self.answer == other.answer
            and same_messages(self._stored, other._stored)
            and same_shape(self.rejected_calls, other.rejected_calls)
        )

    __hash__ = None  # type: ignore[assignment]


@query
def tool_traffic(src: Source, b: Branch, k: MessageKinds) -> ToolTraffic:
    memo = src.cache.memo
    made: _Made = memo.carried("tool-traffic", lambda last: _tool_traffic(src, b, k, last))
    return made[0]


# ``tool_traffic``'s value, and the kinds, the branch order and the messages it was made from.
_Made = tuple[ToolTraffic, MessageKinds, list[int], tuple[Message, ...]]


def _tool_traffic(
    src: Source,
    b: Branch,
    k: MessageKinds,
    last: _Made | None,
) -> _Made:
    """``tool_traffic``'s value, with the kinds, the branch order and the messages it was
    made from.

    Kept from ``last`` (made in the last run, seen in this version's ``Branch``) when only
    messages that neither make nor answer calls were replaced in place, before and after
    (the same index tuples of both kinds: ``Source.indexes`` keeps them), and the branch
    goes through the same places: the same messages are then read, at the same indexes."""
    order = b.order()
    cache = src.cache
    on: Sequence[int] | None = None
    if last is not None and src.changed is not None and not cache._moved:
        t, was, was_order, was_msgs = last
        if (
            was_msgs is cache._messages  # (``changed`` is since then)
            and was.callers is k.callers
            and was.tools is k.tools
            and was_order == order
        ):
            if t.branch.record == b.record and not any(map(_talks(k), src.changed)):
                kept = t if t.branch is b else dataclasses.replace(t, branch=b)
                return kept, k, order, src.messages
            on = t.on_branch  # the same messages make or answer calls, on the same branch
    # The messages that make or answer calls, found among a few indexes; then those of
    # the branch (in its order, a pass at C speed).
    data = b.data
    if on is None:
        talk = set(k.callers).union(k.tools)
        on = list(filter(talk.__contains__, order))
    callers = k.callers
    answer = (
        b.record and bool(on) and on[-1] == order[-1] and data[order[-1]].role is ASSISTANT_ROLE
    )
    stored = (*map(data.__getitem__, on), *map(data.__getitem__, callers))
    return ToolTraffic(b, tuple(on), tuple(callers), answer, stored), k, order, src.messages


def _talks(k: MessageKinds) -> Callable[[int], bool]:
    """Whether the message at an index makes or answers calls (``k``'s sorted indexes)."""

    def talks(i: int) -> bool:
        for found in (k.callers, k.tools):
            j = bisect.bisect_left(found, i)
            if j < len(found) and found[j] == i:
                return True
        return False

    return talks


_TOOL_CALLS = operator.attrgetter("tool_calls")


@dataclass(frozen=True, slots=True, eq=False)
class Summaries(BranchPart):
    """The summary nodes of the document (every branch, in document order), whether each
    is on the current branch, and the branch's tip (its id, and its index: None when no
    message has it); ``chained``: the assembly gave a branch. Read like a ``Branch`` for a
    finding's place (``messages``). Equal when those messages are (by shape) and what is
    said of them is: an edit to any other message keeps the value."""

    nodes: tuple[int, ...]
    on_branch: tuple[bool, ...]
    chained: bool
    tip_id: str | None
    tip: int | None
    _stored: tuple[Message, ...]  # at ``nodes``, then the tip

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Summaries):
            return NotImplemented
        return (self.on_branch, self.chained, self.tip_id, self.tip is None) == (
            other.on_branch,
            other.chained,
            other.tip_id,
            other.tip is None,
        ) and same_messages(self._stored, other._stored)

    __hash__ = None  # type: ignore[assignment]


@query
def summaries(b: Branch, k: MessageKinds, branch: OnBranch) -> Summaries:
    data = b.data
    nodes = list(k.summaries)
    chained = bool(b.chain)
    tip: int | None = None
    on: list[bool] = []
    if chained:
        order = b.order()
        on = list(map(branch.indexes.__contains__, nodes))
        tip = order[-1] if order and data[order[-1]].id == b.chain[-1] else None
    tail = (data[tip],) if tip is not None else ()
    return Summaries(
        b,
        tuple(nodes),
        tuple(on),
        chained,
        b.chain[-1] if chained else None,
        tip,
        (*map(data.__getitem__, nodes), *tail),
    )


@dataclass(frozen=True, slots=True)
class CallIds:
    """Every tool call id written in the document (a new id must be none of them)."""

    ids: frozenset[str]


@query
def call_ids(t: ToolTraffic) -> CallIds:
    calls = itertools.chain.from_iterable(map(_TOOL_CALLS, t.callers_data()))
    return CallIds(frozenset(map(_ID, calls)))  # (at C speed)


# ------------------------------------------------------------------------------ the cut


@dataclass(frozen=True, slots=True)
class Cut:
    """What the pipeline decided about the branch: whether it assembled, what the budget
    dropped, the orphans it left out, the summary it applied, what each history entry is,
    the files it lists for ``read_file``."""

    assembled: bool  # the pipeline ran to the end and sent something
    dropped: tuple[str, ...]
    orphans_dropped: tuple[str, ...]
    summary_id: str | None
    history: tuple[str, ...]  # the ids of the history entries, in order
    forgotten: tuple[tuple[str, str], ...]  # (file id, filename) listed as forgotten
    project_listed: tuple[str, ...]  # the file ids of the project-file listing


@query
def cut_of(src: Source) -> Cut:
    import re

    a = src.ctx.assembly
    if a is None:
        return Cut(False, (), (), None, (), (), ())
    listed: list[str] = []
    # The listing's entries: how many the segments name (they name every entry of the
    # layout), then found from the end of the layout (the listing is in its last part).
    want = "$project_file_list"
    n = sum(seg.ids.count(want) for seg in a.segments)
    entries: list[LayoutEntry] = []
    for e in reversed(a.layout) if n else ():
        if e.message.id == want:
            entries.append(e)
            if len(entries) == n:
                break
    for e in reversed(entries):
        listed.extend(
            m[2] for m in re.finditer(r"""\bfile_id\s*=\s*(["'])([^"'\n]+)\1""", e.message.text)
        )
    return Cut(
        a.ok and bool(a.layout),
        tuple(a.dropped),
        tuple(a.orphans_dropped),
        a.summary_id,
        a.history_ids,
        tuple((f.file_id, f.filename) for f in a.forgotten_files),
        tuple(listed),
    )


_ID = operator.attrgetter("id")


@dataclass(frozen=True, slots=True)
class OrphanCut:
    """What the budget cut says of the tool calls: the tool responses it leaves out as
    orphans (their ids) and, when there are some, which messages making calls it drops."""

    orphans_dropped: tuple[str, ...]
    dropped_callers: frozenset[str]


@query
def orphan_cut(cut: Cut, t: ToolTraffic) -> OrphanCut:
    if not cut.orphans_dropped:
        return OrphanCut((), frozenset())
    held = t.callers_data()
    last = _LAST_ORPHANS[0] if _LAST_ORPHANS else None
    same = last is not None and len(last[0]) == len(held) and all(map(operator.is_, last[0], held))
    if same and last[1] == cut.dropped:  # type: ignore[index]
        return OrphanCut(cut.orphans_dropped, last[3])  # type: ignore[index]
    # (The same messages make calls under the same ids: only the cut changed.)
    ids = last[2] if same else set(map(_ID, held))  # type: ignore[index]
    dropped = frozenset(ids.intersection(cut.dropped))
    _LAST_ORPHANS[:] = [(held, cut.dropped, ids, dropped)]
    return OrphanCut(cut.orphans_dropped, dropped)


# The last ``orphan_cut``'s messages that make calls, the ids the cut dropped, the callers'
# ids and those of them dropped.
_LAST_ORPHANS: list[tuple[tuple[Message, ...], tuple[str, ...], set[str], frozenset[str]]] = []


# ------------------------------------------------------------------------------ tools


@dataclass(frozen=True, slots=True)
class Tools:
    """The tools offered this turn: ``declared`` False when the conversation declares
    none (or says nothing); ``definitions`` as OpenAI function definitions."""

    declared: bool
    definitions: tuple[dict[str, Any], ...]


@query
def tools_of(src: Source) -> Tools:
    conv = src.ctx.conversation
    if conv is None or not conv.tools:
        return Tools(False, ())
    return Tools(True, tuple(tool_definitions(conv.tools)))


def tool_definitions(tools: tuple[ToolDef, ...]) -> list[dict[str, Any]]:
    """The offered tools as OpenAI function definitions (shorthand forms normalized)."""
    res: list[dict[str, Any]] = []
    for tool in tools:
        function = tool.schema.get("function")
        if not isinstance(function, dict):
            function = tool.schema
        res.append({"type": "function", "function": {**function, "name": tool.name}})
    return res


# ------------------------------------------------------------------------------ reports


@dataclass(frozen=True, slots=True, eq=False)
class SummaryReports:
    """What the pipeline reported as ``summary-on-other-branch``."""

    items: tuple[Any, ...]  # Diagnostic

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SummaryReports):
            return NotImplemented
        return same_shape(self.items, other.items)

    __hash__ = None  # type: ignore[assignment]


@query
def summary_reports(src: Source) -> SummaryReports:
    return SummaryReports(tuple(d for d in src.ctx.reported if d.code == "summary-on-other-branch"))


# ------------------------------------------------------------------------------ prompts


def _window(text: TextLike, rng: TextRange | None) -> tuple[int, str] | None:
    """The text of a value, from the start of its line (a YAML block scalar's indentation
    is relative to it) to two characters after it."""
    if rng is None:
        return None
    lo = line_start(text, min(rng.start, len(text)))
    hi = min(len(text), rng.end + 2)
    return lo, text[lo:hi]


@dataclass(frozen=True, slots=True, eq=False)
class PromptContext(RuleContext):
    """The prompts as the prompt rules read them, in the shape of a ``RuleContext``.

    ``conversation`` holds only what concerns the prompts (the inline prompts, the tools,
    ``user_info``, the settings' places, the ``tools`` key of the document and the system
    message taken as the system prompt, in ``system_message``); ``assembly`` is None;
    ``text`` reads only the prompts' strings. ``called_tools`` are the (lower-case) names
    of the tools the messages call.
    """

    called_tools: frozenset[str] = frozenset()
    system_message: Message | None = None
    # The texts as compared: the system message's relative to where the message starts
    # (positions are the engine's business; the inline prompts' are compared as they are).
    texts: tuple[tuple[int, str], ...] = ()

    def _key(self) -> tuple[Any, ...]:
        """What is compared besides the conversation (``same_shape``)."""
        return (
            self.texts,
            self.settings,
            getattr(self.tokenizer, "encoding", id(self.tokenizer)),
            self.template,
            self.template_path,
            self.called_tools,
        )

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._key() == other._key() and same_shape(  # type: ignore[attr-defined]
            self.conversation,
            other.conversation,  # type: ignore[attr-defined]
        )

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class SystemChoice:
    """The system message the pipeline takes as the system prompt (the first one of the
    branch, by index), and the (lower-case) names of the tools the messages call."""

    index: int | None
    called: frozenset[str]


@dataclass(frozen=True, slots=True)
class CalledTools:
    """The (lower-case) names of the tools the messages call."""

    names: frozenset[str]


@query
def called_tools(t: ToolTraffic) -> CalledTools:
    callers = t.callers_data()
    last = _LAST_CALLED[0] if _LAST_CALLED else None
    same = last is not None and len(last[0]) == len(callers)
    if last is not None and same and all(map(operator.is_, last[0], callers)):
        return CalledTools(last[1])  # the same messages make the calls (answers changed)
    names = called_names(callers)
    _LAST_CALLED[:] = [(callers, names)]
    return CalledTools(names)


# The callers read last and their names: an edit of answers alone keeps the callers.
_LAST_CALLED: list[tuple[tuple[Message, ...], frozenset[str]]] = []


def called_names(msgs: Iterable[Message]) -> frozenset[str]:
    """The lower-case names of the tools the messages ``msgs`` call (found at C speed)."""
    names = set(map(_NAME, itertools.chain.from_iterable(map(_TOOL_CALLS, msgs))))
    names.discard("")
    return frozenset(map(str.lower, names))


_NAME = operator.attrgetter("name")


@query
def system_choice(branch: Branch, called: CalledTools, k: MessageKinds) -> SystemChoice:
    return SystemChoice(first_system_index(branch.data, branch.branch_tip, k), called.names)


def first_system_index(
    msgs: Sequence[Message], tip_id: str | None, kinds: MessageKinds | None = None
) -> int | None:
    """The index of the system message the pipeline takes as the system prompt: the first
    one of the branch (the pipeline's own ``walk_branch`` and ``first_system``).

    ``msgs`` are the messages in document order (stored or seen: only their ids, roles
    and parents are read; the index is the place in ``msgs``), their ids unique (as the
    reader makes them: it renames or leaves out a repeated one). ``kinds``: the indexes
    of ``msgs``' system messages and of those with a parent, when known: without a system
    message, or without a parent and a tip (the branch is every message), no walk.
    """
    if kinds is not None:
        if not kinds.systems:
            return None
        if not kinds.parented and tip_id is None:
            return kinds.systems[0]
    chain = walk_branch(msgs, tip_id).chain
    at = first_system(msgs, chain)
    return chain[at] if at is not None else None


_PARENT = operator.attrgetter("parent")


@dataclass(frozen=True, slots=True)
class Ignoring:
    """The indexes of the messages with an ignore key (for the suppressions)."""

    indexes: tuple[int, ...]


@query
def ignoring(src: Source) -> Ignoring:
    msgs = src.messages
    return Ignoring(src.indexes("ignores", lambda idx: map(_IGNORES, map(msgs.__getitem__, idx))))


_IGNORES = operator.attrgetter("ignore")


@dataclass(frozen=True, slots=True, eq=False)
class AllPrompts(PromptContext):
    """``PromptContext`` with the reminder (``PromptContext`` leaves it out)."""


@query
def prompt_context(src: Source, choice: SystemChoice) -> PromptContext:
    return _prompts(src, choice, PromptContext)


@query
def all_prompts(src: Source, choice: SystemChoice) -> AllPrompts:
    return _prompts(src, choice, AllPrompts)


_P = TypeVar("_P", bound=PromptContext)


def _prompts(src: Source, choice: SystemChoice, kind: type[_P]) -> _P:
    ctx = src.ctx
    conv = ctx.conversation
    restricted: Conversation | None = None
    system: Message | None = None
    called: frozenset[str] = frozenset()
    pieces: list[tuple[int, str]] = []
    texts: list[tuple[int, str]] = []
    if conv is not None:
        i = choice.index
        system = src.views[i] if i is not None and i < len(src.views) else None
        called = choice.called
        reminder = conv.reminder if kind is AllPrompts else None
        for block in (conv.system_prompt, conv.custom_agent_prompt, reminder):
            if isinstance(block, TextBlock):
                w = _window(ctx.text, block.content_range)
                if w is not None:
                    pieces.append(w)
        texts = list(pieces)
        if system is not None:
            w = _window(ctx.text, system.content_range)
            if w is not None:
                pieces.append(w)
                texts.append((w[0] - message_start(system), w[1]))
        green = getattr(system, "green", system)
        root = conv.root
        members: tuple[Member, ...] = ()
        if root is not None and root.is_object:
            tools = root.member("tools")
            if tools is not None:  # where the tools are declared (not what: ``tools``)
                members = (Member(tools.key, tools.key_range, SNode("null", tools.key_range)),)
        restricted = Conversation(
            format=conv.format,
            message_data=(green,) if system is not None else (),
            starts=(getattr(system, "base", 0),) if system is not None else (),
            settings_ranges=conv.settings_ranges,
            system_prompt=conv.system_prompt,
            custom_agent_prompt=conv.custom_agent_prompt,
            tools=conv.tools,
            reminder=reminder,
            user_info=conv.user_info,
            tree=SNode("object", TextRange(0, 0), members=members),
        )
    elif ctx.template is not None and ctx.template_path is None:
        pieces.append((0, ctx.text[0 : len(ctx.text)]))  # a template checked on its own
        texts = pieces
    return kind(
        text=Windows(tuple(pieces)),  # type: ignore[arg-type]
        settings=ctx.settings,
        tokenizer=ctx.tokenizer,
        conversation=restricted,
        assembly=None,
        template=ctx.template,
        template_path=ctx.template_path,
        memo=src.cache.memo,
        called_tools=called,
        system_message=system,
        texts=tuple(texts),
    )


ROLES.update(messages=Branch, branch=OnBranch, suppressions=Ignoring, kinds=MessageKinds)


# ------------------------------------------------------------------------------ a message


def message_source(ctx: RuleContext, m: Message) -> MessageSource:
    """``m`` with its source tree node and its text (from the start of its first line)."""
    return MessageSource(m, ctx)
