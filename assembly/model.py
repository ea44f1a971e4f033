"""The document model: conversations and prompt templates as frozen dataclasses.

Every message, field and sentence carries its exact source range. Values are plain Python.
These types are built by ``documents.py`` (conversations) and ``prompts.py`` (templates) and
never hold anything protocol-specific.

Value snapshots (rowan's relative offsets): a ``Message`` read from JSON, JSON Lines or YAML
does not know where it stands. Its ranges (and those of its tool calls, images and files) are
``RelRange``s relative to the message's start, and it has no index, so the incremental
re-read shares every unchanged ``Message`` object between versions (caches key on their
identity) however far an edit moves it. Each version of a conversation has its own table
of message starts, ``Conversation.starts``; ``Conversation.messages`` sees the stored
messages through it (``Located`` views: the same fields, every range an absolute
``TextRange``, plus ``index``), and ``Conversation.absolute(i, r)`` resolves one range. No
range is ever moved in place: an analysis stays true of its own text forever. (The formats
read whole, other providers' request bodies and datasets, store absolute ``TextRange``s; a
view returns those as they are.)
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, TypeVar, overload

from assembly.syntax import SNode, located
from assembly.text import RelRange, Span, TextRange, resolve

_C = TypeVar("_C")
_T = TypeVar("_T")


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    REMINDER = "reminder"
    SUMMARY = "summary"


# The members as plain module globals, for code that compares roles once a message:
# ``Role.TOOL`` goes through ``EnumType.__getattr__``'s lookup hook (about 220 ns, ten
# times a global's).
SYSTEM_ROLE, USER_ROLE, ASSISTANT_ROLE = Role.SYSTEM, Role.USER, Role.ASSISTANT
TOOL_ROLE, REMINDER_ROLE, SUMMARY_ROLE = Role.TOOL, Role.REMINDER, Role.SUMMARY


class DocFormat(StrEnum):
    JSON = "json"
    JSONL = "jsonl"
    YAML = "yaml"


def quick_init(cls: type[_C]) -> type[_C]:
    """Give a frozen slotted dataclass an ``__init__`` (the same parameters and defaults)
    that sets each slot through its descriptor. The generated one calls
    ``object.__setattr__`` by name for each field: 2.8 µs for ``LlmMessage``'s eleven
    against 1.7, at the open of 10 MB 10,000 messages. Assigning stays refused."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    assert all(f.default_factory is dataclasses.MISSING and f.init for f in fields)
    assert not hasattr(cls, "__post_init__")
    ns: dict[str, Any] = {}
    params = []
    for f in fields:
        ns[f"_set_{f.name}"] = getattr(cls, f.name).__set__
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            ns[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
    body = "".join(f"\n    _set_{f.name}(self, {f.name})" for f in fields)
    exec(f"def __init__(self, {', '.join(params)}):{body}", ns)  # as ``dataclasses`` does
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init  # type: ignore[misc]
    return cls


# Findings of one code listed per document: a hostile document can hold a finding per key
# (250,000 unknown keys fit in the JSON token limit) or per placeholder (2,000,000 in a
# 41 MB template), each costing a diagnostic in every output and every publish. Reading
# findings are capped while reading (and the syntax findings the same way; an unknown
# message key past the cap is not even placed), the rules' findings after suppression
# (``assembly.diagnostics.check``, ``diagnostics.core.from_issues``).
MAX_ISSUES_PER_CODE = 1_000


@dataclass(frozen=True, slots=True)
class Issue:
    """A problem found while reading a document, before any rule runs.

    ``code`` is a rule code of the catalogue (``syntax-error``, ``schema-error``, …);
    ``path`` names the file when the problem is in another file than the document.
    """

    code: str
    message: str
    range: TextRange
    severity: str = "error"
    path: str | None = None


@dataclass(frozen=True, slots=True)
class Image:
    """An image content part or an uploaded image file."""

    ref: str  # file id, or the URL / data URL of an image_url part
    range: Span
    token_count: int | None = None  # stored image cost; None = not counted (as Onyx)


@quick_init
@dataclass(frozen=True, slots=True)
class ToolCall:
    """An OpenAI-style tool call of an assistant message."""

    id: str
    name: str
    arguments: dict[str, Any] | None  # None when the arguments text is not a JSON object
    arguments_text: str
    range: Span
    id_range: Span
    name_range: Span
    arguments_range: Span
    token_count: int | None = None
    # The call had no usable id (``"id": ""`` from Gemini's OpenAI-compatible endpoint, or a
    # legacy ``function_call``): ``id`` was made up from the message's id and position.
    synthesized_id: bool = False


@dataclass(frozen=True, slots=True)
class RejectedCall:
    """A tool call with an id that could not be read (no ``function``, no name…): it is not
    sent, and the responses to it are orphans that should point at it."""

    id: str
    range: TextRange
    reason: str


@dataclass(frozen=True, slots=True)
class FileAttachment:
    """A file uploaded with a user message (``files``) or a project file."""

    file_id: str
    filename: str
    content: str | None  # None: not loaded (a path that could not be read, or an image)
    range: Span
    kind: str = "text"  # text | tabular | image
    token_count: int | None = None
    approx_char_count: int | None = None
    path: str | None = None  # as written in the document (project files may use a path)
    path_range: Span | None = None
    processing: bool = False  # still being processed: Onyx sends its notice, not the text


@dataclass(slots=True, unsafe_hash=True)
class Message:
    """One message of the conversation as written in the document, wherever it stands.

    Stored once and shared by the versions in which it did not change: its ranges are
    relative to its start (``RelRange``; absolute ``TextRange``s in other providers'
    formats), and its place is not in it. Read it through
    ``Conversation.messages`` (a ``Located`` view) for absolute ranges and its index.

    Immutable by convention, like the source tree's nodes (``dataclasses.replace`` makes a
    changed copy); equal and hashed by value as a frozen dataclass would be. It is not
    frozen because an open makes one per message and a frozen dataclass's ``__init__``
    sets each of its 22 fields through ``object.__setattr__``: about nine times as long,
    some 20 ms of reading the 10 MB benchmark conversation.
    """

    id: str  # as written, else its position in the document
    role: Role
    content: str  # text parts joined with "\n"; "" for null content
    range: Span
    content_range: Span | None = None
    id_range: Span | None = None
    role_range: Span | None = None
    parent: str | None = None
    parent_range: Span | None = None
    images: tuple[Image, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_call_id_range: Span | None = None
    name: str | None = None
    file_id: str | None = None  # an injected file message
    filename: str | None = None
    files: tuple[FileAttachment, ...] = ()
    token_count: int | None = None
    summarizes_through: str | None = None
    summarizes_through_range: Span | None = None
    ignore: tuple[str, ...] = ()  # rule codes suppressed on this message
    # The role as the document spells it when it is read as another one (``developer`` is
    # read as ``system``, the legacy ``function`` as ``tool``); None when it is ``role``.
    written_role: str | None = None


@dataclass(frozen=True, slots=True)
class TextBlock:
    """A prompt given inline (``{"content": …}`` or a plain string) in a conversation."""

    content: str
    range: TextRange
    content_range: TextRange | None = None
    token_count: int | None = None


@dataclass(frozen=True, slots=True)
class PromptRef:
    """``system_prompt`` given as a path to a ``*.prompt.md`` template."""

    path: str
    range: TextRange


@dataclass(frozen=True, slots=True)
class ToolDef:
    """A tool offered this turn (OpenAI tool schema)."""

    name: str
    schema: dict[str, Any]
    range: TextRange
    name_range: TextRange


@dataclass(frozen=True, slots=True)
class Conversation:
    """A parsed conversation document (any of the three formats)."""

    format: DocFormat
    # The stored messages (relative ranges; shared between versions: caches key on them)
    # and where each starts in this version of the text; read ``messages`` for views.
    message_data: tuple[Message, ...]
    starts: tuple[int, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)
    settings_ranges: dict[str, TextRange] = field(default_factory=dict)
    system_prompt: TextBlock | PromptRef | None = None
    custom_agent_prompt: TextBlock | None = None
    project_files: tuple[FileAttachment, ...] = ()
    tools: tuple[ToolDef, ...] | None = None  # None: the document does not say
    reminder: TextBlock | None = None
    additional_context: TextBlock | None = None  # sent before the last user message
    user_info: dict[str, Any] | None = None
    issues: tuple[Issue, ...] = ()
    # The source tree as stored: the message list's items relative to their starts
    # (``SNode.starts``); read ``root`` for a view with absolute ranges.
    tree: SNode | None = None
    length: int = 0  # length of the document text
    # The format the document was read as (``formats.detect.SourceFormat``) and the marks
    # of its shape that decided it, which every output names.
    source_format: str = "promptls"
    source_format_why: str = ""
    rejected_calls: tuple[RejectedCall, ...] = ()
    # A dataset (JSON Lines with one conversation per line, ``{"messages": […], …}``): each
    # line's conversation, read on its own as a JSON document of its line's text: its
    # ranges are relative to where its line starts (``record_starts``), so a record the
    # next version does not touch is the same object there, wherever it moved. ``messages``
    # is then empty and ``issues`` holds what is wrong with the lines themselves.
    records: tuple[Conversation, ...] = ()
    record_starts: tuple[int, ...] = ()
    record: bool = False  # a dataset's record (its place: ``host.Analysis.record_number``)
    # JSON read incrementally (``assembly/incremental.py``): the parse's syntax errors and
    # a bound on its token count, the base of the next re-read.
    syntax: tuple[tuple[Any, ...], int] | None = field(default=None, compare=False, repr=False)
    _views: dict[str, Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.starts) != len(self.message_data):
            assert not self.starts, "one start per message"
            object.__setattr__(self, "starts", (0,) * len(self.message_data))

    @property
    def messages(self) -> MessageViews:
        """The messages of this version, each seen at its place (absolute ranges, index);
        a sequence whose views are made when first read."""
        views = self._views.get("messages")
        if views is None:
            prior = self._views.pop("prior_views", None)  # the version this one was made from
            views = MessageViews(self.message_data, self.starts, prior)
            self._views["messages"] = views
        return views  # type: ignore[no-any-return]

    @property
    def root(self) -> SNode | None:
        """The source tree seen in this version (absolute ranges; a view made on demand)."""
        root = self._views.get("root")
        if root is None:
            tree = self.tree
            if tree is None:
                return None
            root = self._views["root"] = located(tree)
        return root  # type: ignore[no-any-return]

    def index_of(self, message: Message) -> int | None:
        """The place of a stored ``Message`` in this version (None: not in it)."""
        i = self._where().get(id(message))
        return i if i is not None and self.message_data[i] is message else None

    def places_of(self, messages: Iterable[Message | None]) -> list[int | None]:
        """``index_of`` of each of ``messages`` (alive, so no other object has their
        ``id``), in one pass at C speed."""
        return list(map(self._where().get, map(id, messages)))

    def _where(self) -> dict[int, int]:
        where = self._views.get("where")
        if where is None:
            data = self.message_data
            where = self._views["where"] = dict(zip(map(id, data), range(len(data)), strict=True))
        return where  # type: ignore[no-any-return]

    def locate(self, message: Message) -> Located:
        """A stored ``Message`` of this version seen at its place (``KeyError`` if it is
        not one of this version's)."""
        i = self.index_of(message)
        if i is None:
            raise KeyError(message.id)
        views = self._views.get("messages")
        return (views if views is not None else self.messages)._at(i)  # type: ignore[no-any-return]

    def message_at(self, offset: int) -> Located | None:
        """The message whose range holds ``offset`` (a view), or None; a binary search over
        the messages, which lie in document order: views of a few of them are made."""
        msgs = self.messages
        i = bisect.bisect_right(msgs, offset, key=lambda m: m.range.start) - 1
        if i >= 0 and msgs[i].range.contains(offset):
            return msgs[i]
        return None

    def derived(self, kind: str, make: Callable[[Conversation], _T]) -> _T:
        """``make(self)``, made once for this version and kept with it: a value derived from
        its stored messages (a version never changes, so neither does the value)."""
        hit = self._views.get(kind)
        if hit is None:
            hit = self._views[kind] = make(self)
        return hit  # type: ignore[no-any-return]

    def message_start(self, i: int) -> int:
        """Where message ``i``'s relative ranges start in this version of the text."""
        return self.starts[i]

    def absolute(self, i: int, rng: Span) -> TextRange:
        """A range of message ``i`` (relative or absolute) as an offset into this version."""
        return resolve(rng, self.starts[i])


class MessageViews(Sequence["Located"]):
    """``Conversation.messages``: the stored messages seen through one version's starts.

    Each view is made on first access and kept, so ``conv.messages[i] is conv.messages[i]``;
    reading a few messages of a 10 MB conversation costs those few. A view is a value (the
    stored message, its start, its index): ``prior``, the views of the version this one was
    re-read from, gives the views it made of the messages that stand at the same place with
    the same start (the head of the list before an edit, and its tail when no message was
    added or removed and nothing moved), so an edit costs the views of what it moved. Only
    the places ``prior`` made a view of are looked at (``_made_at``; a few hundred of ten
    thousand after a keystroke), in passes at C speed.
    """

    __slots__ = ("_made", "_made_at", "_starts", "_stored")

    def __init__(
        self,
        stored: tuple[Message, ...],
        starts: tuple[int, ...],
        prior: MessageViews | None = None,
    ) -> None:
        self._stored = stored
        self._starts = starts
        n = len(stored)
        made: list[Located | None] = [None] * n
        made_at: list[int] = []
        if prior is not None and prior._made_at:
            old_stored, old_starts, old_made = prior._stored, prior._starts, prior._made
            lim = min(n, len(old_stored))
            at = [i for i in prior._made_at if i < lim] if lim < len(old_stored) else prior._made_at
            same = map(
                operator.and_,
                map(operator.is_, map(stored.__getitem__, at), map(old_stored.__getitem__, at)),
                map(operator.eq, map(starts.__getitem__, at), map(old_starts.__getitem__, at)),
            )
            # (``dict.fromkeys``: two threads reading one view at once may both note it.)
            made_at = list(dict.fromkeys(itertools.compress(at, same)))
            for i in made_at:
                made[i] = old_made[i]
        self._made = made
        self._made_at = made_at

    def __len__(self) -> int:
        return len(self._stored)

    @property
    def stored(self) -> tuple[Message, ...]:
        """The stored messages (``Conversation.message_data``)."""
        return self._stored

    def made(self) -> list[Located]:
        """The views made so far."""
        return [v for v in self._made if v is not None]

    def _at(self, i: int) -> Located:
        view = self._made[i]
        if view is None:
            stored = self._stored[i]
            view = self._made[i] = _VIEW_MAKERS[type(stored)](stored, self._starts[i], i)
            self._made_at.append(i)
        return view  # type: ignore[no-any-return]

    @overload
    def __getitem__(self, i: int) -> Located: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[Located, ...]: ...

    def __getitem__(self, i: int | slice) -> Located | tuple[Located, ...]:
        if isinstance(i, slice):
            return tuple(self._at(k) for k in range(*i.indices(len(self._stored))))
        if i < 0:
            i += len(self._stored)
        if not 0 <= i < len(self._stored):
            raise IndexError(i)
        return self._at(i)

    def __iter__(self) -> Iterator[Located]:
        made, at = self._made, self._at
        for i, view in enumerate(made):
            yield view if view is not None else at(i)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MessageViews | tuple | list):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._starts))

    def __repr__(self) -> str:
        return f"MessageViews({len(self)} messages)"


class Located:
    """A stored value (a ``Message``, ``ToolCall``, ``Image`` or ``FileAttachment``) seen at
    its place in one version of the document (rowan's red node).

    It has the stored value's fields, with every range resolved to an absolute
    ``TextRange`` against ``base`` (where its message starts) and the nested stored values
    seen the same way; ``index`` is the message's place in ``Conversation.messages``
    (None for the values inside a message); ``green`` is the stored value, whose identity
    caches key on. Equal when the stored values are equal and stand at the same place.
    ``Located(value, base, index)`` makes the view class of the value's type.
    """

    __slots__ = ("base", "green", "index")

    def __new__(cls, green: Any, base: int, index: int | None = None) -> Located:
        return _VIEW_MAKERS[type(green)](green, base, index)  # type: ignore[no-any-return]

    def __init__(self, green: Any, base: int, index: int | None = None) -> None:
        pass  # set by ``__new__``

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Located):
            return NotImplemented
        return self.base == other.base and self.index == other.index and self.green == other.green

    def __hash__(self) -> int:
        return hash((self.base, self.index, type(self.green)))

    def __repr__(self) -> str:
        return f"Located({self.green!r}, base={self.base}, index={self.index})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Located, (self.green, self.base, self.index))

    def values(self) -> dict[str, Any]:
        """The fields as ``{name: value}`` (ranges absolute)."""
        return {f.name: getattr(self, f.name) for f in fields(self.green)}


def _range_field(name: str) -> property:
    def get(self: Located) -> TextRange | None:
        r = getattr(self.green, name)
        if isinstance(r, RelRange):
            return TextRange(r.start + self.base, r.end + self.base)
        return r  # type: ignore[no-any-return]

    return property(get)


def _nested_field(name: str) -> property:
    def get(self: Located) -> tuple[Located, ...]:
        stored = getattr(self.green, name)
        if not stored:  # most messages: no call, image or file (read on every view)
            return ()
        b = self.base
        return tuple([_VIEW_MAKERS[type(v)](v, b, None) for v in stored])

    return property(get)


def _plain_field(name: str) -> property:
    def get(self: Located) -> Any:
        return getattr(self.green, name)

    return property(get)


def _view_class(stored: type) -> tuple[type[Located], Any]:
    """The view class of a stored type and the function that makes one: the plain fields
    are copied into slots when the view is made (read at slot speed), the ranges and the
    nested values resolved when read."""
    ns: dict[str, Any] = {}
    plain: list[str] = []
    for f in fields(stored):
        kind = str(f.type)
        if "Span" in kind:
            ns[f.name] = _range_field(f.name)
        elif f.name in ("tool_calls", "images", "files"):
            ns[f.name] = _nested_field(f.name)
        else:
            plain.append(f.name)
    ns["__slots__"] = tuple(plain)
    for name in dir(stored):  # properties and methods of the stored type, on the view
        if not name.startswith("_") and name not in ns and name not in ("index",):
            attr = getattr(stored, name)
            if isinstance(attr, property):
                ns[name] = _plain_field(name)
    cls = type(f"Located{stored.__name__}", (Located,), ns)
    lines = [
        "def make(green, base, index):",
        "    v = new(cls)",
        "    v.green = green",
        "    v.base = base",
        "    v.index = index",
        *(f"    v.{name} = green.{name}" for name in plain),
        "    return v",
    ]
    scope: dict[str, Any] = {"new": object.__new__, "cls": cls}
    exec("\n".join(lines), scope)  # one assignment per field, no loop at run time
    return cls, scope["make"]


_VIEW_MAKERS: dict[type, Any] = {
    t: _view_class(t)[1] for t in (Message, ToolCall, Image, FileAttachment)
}

# ------------------------------------------------------------------------------------
# Prompt templates


@quick_init
@dataclass(frozen=True, slots=True)
class Section:
    """A heading and everything up to the next heading of the same or a higher level."""

    title: str
    level: int  # 1 for "#", 2 for "##", …
    heading_range: TextRange  # the heading line, without its line break
    range: TextRange  # heading line through the end of the section (nested ones included)
    body_range: TextRange  # after the heading line through the end of the section
    parent: int | None  # index of the enclosing section in ``PromptTemplate.sections``
    # How the section is written: "heading" (Markdown ATX or setext), "xml" (a block
    # `<name>` … `</name>`, its title the tag name), "rule" (a title line after a `====`
    # line), "bold" (a line that is only `**Title**`), "caps" (an ALL-CAPS title line).
    kind: str = "heading"

    @property
    def label(self) -> str:
        """How messages name the section: `## Tools`, `<tool_calling>`, `TOOL USE`."""
        if self.kind == "heading":
            return f"{'#' * self.level} {self.title}"
        if self.kind == "xml":
            return f"<{self.title}>"
        if self.kind == "bold":
            return f"**{self.title}**"
        return self.title


@dataclass(frozen=True, slots=True)
class Placeholder:
    """A ``{{NAME}}`` occurrence (``user.x`` keys keep their dotted name)."""

    name: str
    range: TextRange


@quick_init
@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence of prose (code blocks, front matter and headings excluded)."""

    text: str
    range: TextRange
    section: int | None  # index of the innermost enclosing section


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """A parsed ``*.prompt.md`` template (or any prompt text parsed as Markdown)."""

    text: str
    body_range: TextRange  # the text after the front matter
    front_matter: dict[str, Any] = field(default_factory=dict)
    front_matter_range: TextRange | None = None
    front_matter_root: SNode | None = None  # offsets into ``text``
    sections: tuple[Section, ...] = ()
    placeholders: tuple[Placeholder, ...] = ()
    sentences: tuple[Sentence, ...] = ()
    issues: tuple[Issue, ...] = ()

    def section_named(self, title: str, *, parent: int | None = None) -> int | None:
        """Return the index of the first section titled ``title`` (case-insensitive)."""
        want = title.strip().lower()
        for i, s in enumerate(self.sections):
            if s.title.strip().lower() == want and (parent is None or s.parent == parent):
                return i
        return None
