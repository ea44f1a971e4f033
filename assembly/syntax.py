"""Position-exact, error-tolerant parsing of JSON, JSONL and YAML into a source tree.

Every value becomes an ``SNode`` that knows its exact range (code-point offsets) in the
text, and every object member knows the range of its key. Parsing never raises on user
input: a half-typed document yields the tree of what could be read plus ``SyntaxIssue``s
with ranges. The conversation model (``documents.py``) is built on this tree, for all three
formats alike.

Why not tree-sitter-json here: on the 10 MB benchmark conversation its full parse alone
takes about 0.6 s and its offsets are UTF-8 bytes that must be converted per node, while
the regex-driven recursive descent below scans the same file in about 0.3 s, yields
code-point offsets directly, and lets us choose the recovery (close what is open at the
end, skip a stray token, keep the members read so far). Incremental reparse is done at
message granularity by the caller: a message is a self-contained subtree. An item of the
message list (a JSON Lines line) that ``json``'s C scanner reads whole is built from the
values it gives instead, and the ranges inside it are found when first asked for
(``scanned``, ``LazyRange``, ``Positions``): readers keep ranges, and seldom read them.

YAML goes through libyaml's composer (PyYAML ``CSafeLoader``), whose marks are code-point
offsets; aliases are never expanded beyond a node budget, so alias bombs end in a
diagnostic rather than in memory exhaustion.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import re
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from json.decoder import JSONDecodeError
from json.decoder import scanstring as _scanstring  # type: ignore[attr-defined]
from json.scanner import make_scanner as _make_scanner  # type: ignore[attr-defined]
from sys import intern as _intern
from typing import Any, Literal, Protocol

from assembly.text import RelRange, Span, TextRange, resolve

NodeKind = Literal["object", "array", "string", "number", "bool", "null"]

MAX_DEPTH = 256
MAX_YAML_NODES = 1_000_000  # the 10 MB benchmark conversation in YAML has 92,000
MAX_YAML_ALIAS_NODES = 100_000  # values reached again through aliases
# JSON tokens (strings, numbers, punctuation) read from one text; the 10 MB benchmark
# conversation has about 185,000. Past it the rest is ignored (``document-too-large``).
MAX_JSON_TOKENS = 1_000_000
# Items of a top-level list (the messages) read into the tree; ``documents`` reports the
# message limit, so one more than it is kept and the rest are skipped unread.
MAX_TOP_ITEMS = 20_000
# A number literal longer than this is refused (Python's int() refuses more than 4,300
# digits, and no count or setting needs a hundred).
MAX_NUMBER_CHARS = 100
# Object keys this short are interned: a conversation repeats a dozen key names (``role``,
# ``content``…) tens of thousands of times, which would otherwise be as many objects
# (2 MB at 10 MB); a lookup by a literal key then matches by identity.
MAX_SHARED_KEY_CHARS = 64
# ``parse_json_windows``: the characters of a rope read at once, and how few may be left in
# a window before the next item of the message list is read from a new one (an item
# longer than that may reach the window's end and be read again). A window's ``str`` is
# at most 256 KB, below the server's mmap threshold (``server.pages``): each one reuses
# the heap block the last one freed instead of faulting in fresh pages (4 MB windows,
# mapped on their own, cost the 10 MB open 11,000 more page faults).
WINDOW_CHARS = 1 << 16
WINDOW_SLACK = 1 << 15
# YAML tags that are read as they say; any other (``!!binary``, ``!foo``) is reported.
_KNOWN_YAML_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}"
    for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp")
)


class Member:
    """One ``key: value`` pair of an object, with the key's own range.

    Immutable by convention (a plain class with slots: a parse makes tens of thousands,
    and a frozen dataclass takes twice as long to build); compared by identity.
    """

    __slots__ = ("key", "key_range", "value")

    def __init__(self, key: str, key_range: Span, value: SNode) -> None:
        self.key = key
        self.key_range = key_range
        self.value = value

    def __repr__(self) -> str:
        return f"Member(key={self.key!r}, key_range={self.key_range!r}, value={self.value!r})"


class SNode:
    """A value of the source tree.

    ``value`` holds the Python value of a scalar (str, int, float, bool or None); containers
    keep their children in ``items`` (arrays) or ``members`` (objects, in source order).
    Immutable by convention, like ``Member`` (the only state set later is the table of an
    object's keys, made on its first look-up: a reader looks up a dozen keys per message);
    compared by identity.
    """

    __slots__ = ("_keys", "error_counts", "items", "kind", "members", "range", "starts", "value")

    def __init__(
        self,
        kind: NodeKind,
        range: Span,
        value: Any = None,
        items: tuple[SNode, ...] = (),
        members: tuple[Member, ...] = (),
        starts: tuple[int, ...] | None = None,
        error_counts: tuple[int, ...] | None = None,
    ) -> None:
        self.kind = kind
        self.range = range
        self.value = value
        self.items = items
        self.members = members
        # The list of messages (the top-level array, the top-level object's ``messages``,
        # the lines of JSON Lines): each item's subtree is stored relative to the item's
        # start (``RelRange``s), and ``starts`` gives those starts in this version of the
        # text, so an item's subtree is shared by every version in which it did not change.
        self.starts = starts
        # Of the message list: how many syntax errors the parse had found before each item
        # (an incremental re-parse keeps those and parses again from an item on).
        self.error_counts = error_counts
        self._keys: dict[str, SNode] | None = None

    def __repr__(self) -> str:
        return (
            f"SNode(kind={self.kind!r}, range={self.range!r}, value={self.value!r}, "
            f"items={self.items!r}, members={self.members!r})"
        )

    def get(self, key: str) -> SNode | None:
        """Return the value of ``key`` (the last one when a key repeats)."""
        keys = self._keys
        if keys is None:
            if not self.members:
                return None
            keys = self.fields()
        return keys.get(key)

    def fields(self) -> dict[str, SNode]:
        """An object's values by key (the last one when a key repeats), made on the first
        look-up and kept: a reader that looks up a dozen keys of one node takes them from
        this table (not to be changed)."""
        keys = self._keys
        if keys is None:
            keys = self._keys = {m.key: m.value for m in self.members}
        return keys

    def release_fields(self) -> None:
        """Let go of the table ``fields`` made (a reader done with the node: 10,000 small
        tables, 2 MB, in the 10 MB benchmark); a later look-up makes it again."""
        self._keys = None

    def member(self, key: str) -> Member | None:
        """The member of ``key`` (the last one when a key repeats)."""
        for m in reversed(self.members):
            if m.key == key:
                return m
        return None

    @property
    def is_object(self) -> bool:
        return self.kind == "object"

    @property
    def is_array(self) -> bool:
        return self.kind == "array"

    @property
    def is_string(self) -> bool:
        return self.kind == "string"

    def to_python(self) -> Any:
        """Return the plain Python value (dicts, lists, scalars)."""
        if self.kind == "object":
            return {m.key: m.value.to_python() for m in self.members}
        if self.kind == "array":
            return [item.to_python() for item in self.items]
        return self.value


def located(node: SNode, base: int = 0) -> SNode:
    """``node`` (stored relative to ``base`` when inside a message) with absolute ranges.

    A view, not a copy: its children are views made when asked for, so walking part of a
    10 MB tree costs that part. Only a tree whose ranges are all absolute is returned as is.
    """
    if node.starts is None and type(node.range) is TextRange and base == 0:
        return NodeAt(node, 0) if _has_relative(node) else node
    return NodeAt(node, base)


def item_at(array: SNode, offset: int) -> SNode | None:
    """The first item of ``array`` that starts at or after ``offset`` (None: none), found
    by bisection; a view of the message list makes only that item's view, not one of each
    of its 10,000 items (``NodeAt.items``)."""
    if isinstance(array, NodeAt) and array._items is None and array.green.starts is not None:
        g = array.green
        k = bisect.bisect_left(g.starts, offset)  # type: ignore[arg-type]
        if k == len(g.items):
            return None
        item = NodeAt(g.items[k], g.starts[k])  # type: ignore[index]
        if item.range.start == g.starts[k]:  # type: ignore[index]
            return item  # (an item starts where its subtree's ranges are relative to)
    items = array.items
    k = bisect.bisect_left(items, offset, key=_item_start)
    return items[k] if k < len(items) else None


def _item_start(node: SNode) -> int:
    return node.range.start


def _has_relative(node: SNode) -> bool:
    """Whether the message list is somewhere in the top two levels of ``node``."""
    if node.starts is not None:
        return True
    return any(m.value.starts is not None for m in node.members)


class NodeAt:
    """A node of a stored tree seen at its place in one version of the text (rowan's red
    node): the same interface as ``SNode``, every range absolute.

    ``base`` is where the message the node belongs to starts (0 outside the messages).
    """

    __slots__ = ("_items", "_members", "base", "green")

    def __init__(self, green: SNode, base: int) -> None:
        self.green = green
        self.base = base
        self._items: tuple[SNode, ...] | None = None  # made on first read, then kept
        self._members: tuple[Member, ...] | None = None

    def __repr__(self) -> str:
        return f"NodeAt({self.green.kind}, {self.range})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NodeAt):
            return NotImplemented
        return self.green is other.green and self.base == other.base

    def __hash__(self) -> int:
        return hash((id(self.green), self.base))

    @property
    def kind(self) -> NodeKind:
        return self.green.kind

    @property
    def value(self) -> Any:
        return self.green.value

    @property
    def starts(self) -> None:
        return None

    @property
    def range(self) -> TextRange:
        return resolve(self.green.range, self.base)

    @property
    def items(self) -> tuple[SNode, ...]:
        if self._items is None:
            g, b = self.green, self.base
            if g.starts is not None:
                self._items = tuple(NodeAt(n, s) for n, s in zip(g.items, g.starts, strict=True))  # type: ignore[misc]
            else:
                self._items = tuple(NodeAt(n, b) for n in g.items)  # type: ignore[misc]
        return self._items

    @property
    def members(self) -> tuple[Member, ...]:
        if self._members is None:
            b = self.base
            self._members = tuple(
                Member(m.key, resolve(m.key_range, b), NodeAt(m.value, b))  # type: ignore[arg-type]
                for m in self.green.members
            )
        return self._members

    def get(self, key: str) -> SNode | None:
        found = self.green.get(key)
        return None if found is None else NodeAt(found, self.base)  # type: ignore[return-value]

    def fields(self) -> dict[str, SNode]:
        b = self.base
        return {k: NodeAt(v, b) for k, v in self.green.fields().items()}  # type: ignore[misc]

    def member(self, key: str) -> Member | None:
        m = self.green.member(key)
        if m is None:
            return None
        b = self.base
        return Member(m.key, resolve(m.key_range, b), NodeAt(m.value, b))  # type: ignore[arg-type]

    @property
    def is_object(self) -> bool:
        return self.green.kind == "object"

    @property
    def is_array(self) -> bool:
        return self.green.kind == "array"

    @property
    def is_string(self) -> bool:
        return self.green.kind == "string"

    def to_python(self) -> Any:
        return self.green.to_python()


def absolute(node: SNode, base: int = 0) -> SNode:
    """A copy of ``node`` with every range absolute (for the readers that read a whole
    document again on every change: other providers' formats, datasets, header lines)."""
    r = resolve(node.range, base)
    if node.kind == "object":
        return SNode(
            "object",
            r,
            node.value,
            (),
            tuple(
                Member(m.key, resolve(m.key_range, base), absolute(m.value, base))
                for m in node.members
            ),
        )
    if node.kind == "array":
        if node.starts is not None:
            items = tuple(
                _absolute_item(n, s) for n, s in zip(node.items, node.starts, strict=True)
            )
        else:
            items = tuple(absolute(n, base) for n in node.items)
        return SNode("array", r, node.value, items)
    if r is node.range:
        return node
    return SNode(node.kind, r, node.value)


def _absolute_item(node: SNode, base: int) -> SNode:
    """``absolute`` of an item of the message list starting at ``base``: one the C scanner
    read is copied with its table's offsets, taken in the order it numbers its nodes
    (``Positions``), not through each lazy range."""
    first = node.members[0].value.range if node.members else None
    if isinstance(first, LazyRange):
        return _placed_copy(node, first.place()[0].offsets(), base, 0)[0]
    return absolute(node, base)


def _placed_copy(node: SNode, offsets: array[int], base: int, at: int) -> tuple[SNode, int]:
    """``absolute`` of the node numbered ``at`` in ``offsets`` (a scanned message's
    ``Positions``: each node, then each member's key and value), with the next number."""
    rng = TextRange(offsets[2 * at] + base, offsets[2 * at + 1] + base)
    k = at + 1
    if node.kind == "object":
        members = []
        for m in node.members:
            key = TextRange(offsets[2 * k] + base, offsets[2 * k + 1] + base)
            value, k = _placed_copy(m.value, offsets, base, k + 1)
            members.append(Member(m.key, key, value))
        return SNode("object", rng, node.value, (), tuple(members)), k
    if node.kind == "array":
        items = []
        for item in node.items:
            value, k = _placed_copy(item, offsets, base, k)
            items.append(value)
        return SNode("array", rng, node.value, tuple(items)), k
    return SNode(node.kind, rng, node.value), k


@dataclass(frozen=True, slots=True)
class SyntaxIssue:
    """A syntax error (or a refusal such as too deep nesting) at an exact range."""

    message: str
    range: TextRange
    code: str = "syntax-error"
    severity: str = "error"


@dataclass(frozen=True, slots=True)
class ParsedData:
    """The result of parsing one JSON/JSONL/YAML text."""

    root: SNode | None
    errors: tuple[SyntaxIssue, ...] = ()
    # For JSONL: the range of each non-blank line, aligned with ``root.items``.
    lines: tuple[TextRange, ...] = field(default=())
    tokens: int = 0  # JSON: the tokens read (at most ``MAX_JSON_TOKENS``); YAML: ``parse_yaml``


def parse_json(
    text: str, *, messages: bool = False, unscanned: frozenset[str] = frozenset()
) -> ParsedData:
    """Parse JSON text; never raises.

    With ``messages``, the items of the message list (the top-level array, or the
    top-level object's ``messages``) are read relative to their own starts (``SNode.starts``);
    otherwise every range is absolute. ``unscanned``: top-level keys that, written before
    ``messages``, say the list is not read by the C scanner (``JsonParser._scanned``):
    those of formats whose readers ask for every range at once.
    """
    with gc_paused():
        return _parse_json(text, messages, unscanned)


def _parse_json(text: str, messages: bool, unscanned: frozenset[str] = frozenset()) -> ParsedData:
    parser = JsonParser(text, 0, len(text), messages=messages, unscanned=unscanned)
    root = parser.parse_document(bom=True)
    return ParsedData(root, tuple(parser.errors), tokens=parser.tokens)


class Sliced(Protocol):
    """A text read by slices (``assembly.rope.Rope``, or a ``str``)."""

    def __len__(self) -> int: ...
    def __getitem__(self, key: slice, /) -> str: ...


def parse_json_windows(
    text: Sliced,
    *,
    messages: bool = False,
    window: int = WINDOW_CHARS,
    unscanned: frozenset[str] = frozenset(),
) -> ParsedData:
    """``parse_json(str(text), messages=, unscanned=)``, reading ``text`` a window at a time.

    An editor's rope is never joined into one ``str`` (at 10 MB with a few emoji, 37 MB
    beside the tree being built): the parser reads a slice of about ``window`` characters
    and moves on to the next between two items of the message list
    (``JsonParser.source``). An item that reaches its window's end is read again from a
    window that holds it; a document whose parts outside the list reach the first window's
    end is read again from a larger first window (the whole text at the last). The same
    parser reads either way: the result is equal to ``parse_json``'s.
    """
    n = len(text)
    size = max(window, 1)
    with gc_paused():
        while True:
            first = text[0 : min(n, size)]
            parser = JsonParser(first, 0, len(first), messages=messages, unscanned=unscanned)
            if len(first) < n:
                parser.source, parser.doc_len, parser.window_chars = text, n, size
                parser.origin = text
            root = parser.parse_document(bom=True)
            if parser.final():
                return ParsedData(root, tuple(parser.errors), tokens=parser.tokens)
            size *= 4  # the text outside the message list reached the first window's end


def parse_jsonl(
    text: str,
    *,
    messages: bool = False,
    spanning: bool = True,
    bom: bool = True,
    origin: Sliced | None = None,
) -> ParsedData:
    """Parse JSON Lines: one value per non-blank line, each parsed on its own.

    The root is an array of the lines' values; a line that cannot be read at all is left
    out of the array and reported. A syntax error never spills into the next line. With
    ``messages``, each line is read relative to its start (``SNode.starts``).
    ``spanning=False``: no broken line is tried as a record over several lines (as after
    a failed attempt; for lines re-read after one, ``incremental._reparse_lines``).
    ``bom``: ``text`` starts the document, so a U+FEFF first is its byte order mark, read
    as whitespace (False: lines from inside a document, where it is a character).
    ``origin``: the editor's rope ``text`` was joined from (``scanned``).
    """
    with gc_paused():
        return _parse_jsonl(text, messages, spanning, bom, origin)


def _parse_jsonl(
    text: str,
    messages: bool,
    spanning: bool = True,
    bom: bool = True,
    origin: Sliced | None = None,
) -> ParsedData:
    items: list[SNode] = []
    starts: list[int] = []
    lines: list[TextRange] = []
    errors: list[SyntaxIssue] = []
    start = 0
    n = len(text)
    tokens = 0  # the token limit holds for the whole text, not for each line
    scan = _Scan()  # shared by the lines: once the C scanner failed, it is not used again
    # A broken line may start a record written over several lines; after one such attempt
    # fails, no other line is tried (each attempt reads up to the end of the text, so
    # trying every broken line of a hostile file would be quadratic).
    try_spanning = spanning
    while start < n:
        end = text.find("\n", start)
        if end == -1:
            end = n
        if len(items) > MAX_TOP_ITEMS:
            break  # past the message limit (reported by the reader): the rest is not read
        if tokens >= MAX_JSON_TOKENS:
            msg = f"more than {MAX_JSON_TOKENS:,} JSON tokens: the rest of the text is not read"
            errors.append(SyntaxIssue(msg, TextRange(start, start), code="document-too-large"))
            break
        line = text[start:end]
        if line.strip():
            # A line that is one object the C scanner reads is not parsed here (a
            # dataset's record too: its reader asks for every range at once, ``absolute``,
            # which copies it with its table's offsets). The scanner is given the line
            # alone: from the text, a line left open (`{"content": `) read the lines after
            # it as its value, to the end of the text or an error, and a file of such lines
            # took quadratic time (100,000 of them: 17 s).
            got = (
                scanned(line, 0, len(line), 0, origin, start)
                if messages and line.startswith("{")
                else None
            )
            if got is not None:
                got = (got[0], start + got[1], got[2])
            if got is not None and (
                _WS.match(text, got[1], end).end() != end  # (something after it)
                or tokens + got[2] + 1 >= MAX_JSON_TOKENS
            ):
                got = None
            if got is not None:
                items.append(got[0])
                starts.append(start)
                lines.append(TextRange(start, end))
                tokens += got[2] + 1  # (the line's end counts as one, as ``parser.tokens``)
                start = end + 1
                continue
            parser = JsonParser(text, start, end, start if messages else None, scan)
            node = parser.parse_document(what="line", bom=bom)
            tokens += parser.tokens
            spanning: tuple[SNode, int] | None = None
            if parser.errors and try_spanning:
                spanning = _spanning_value(text, start, scan, messages, bom)
                try_spanning = spanning is not None
            if spanning is not None:
                # One value written over several lines (pretty-printed records): read it,
                # and say once that this is not JSON Lines.
                node, end = spanning
                first = text.find("\n", start)
                last = text.count("\n", start, end)
                errors.append(
                    SyntaxIssue(
                        f"a record spans {last + 1} lines: JSON Lines holds one JSON value per "
                        "line (read anyway)",
                        TextRange(start, first if first != -1 else end),
                    )
                )
            else:
                errors.extend(parser.errors)
            if node is not None:
                items.append(node)
                starts.append(start)
                lines.append(TextRange(start, end))
        start = end + 1
    root = SNode("array", TextRange(0, n), items=tuple(items), starts=tuple(starts))
    return ParsedData(root, tuple(errors), tuple(lines), tokens=tokens)


def _spanning_value(
    text: str, start: int, scan: _Scan, messages: bool, bom: bool
) -> tuple[SNode, int] | None:
    """The JSON value starting on the line at ``start`` and where it ends, when it is whole
    and valid only over several lines (its line alone does not parse), else None."""
    i = start + (bom and start == 0 and text.startswith(BOM))
    while i < len(text) and text[i] in " \t\r":
        i += 1
    if i >= len(text) or text[i] not in "{[":
        return None
    parser = JsonParser(text, i, len(text), start if messages else None, scan)
    node = parser._value(0)
    if parser.errors or node is None:
        return None
    end = parser.last_end
    if "\n" not in text[i:end]:
        return None
    rest = text.find("\n", end)
    tail = text[end : rest if rest != -1 else len(text)]
    return (node, end) if not tail.strip() else None


def parse_yaml(text: str, *, messages: bool = False) -> ParsedData:
    """Parse one YAML document with libyaml's composer; never raises.

    On a syntax error, the longest prefix of whole lines before the error that parses is
    kept as the tree (so a half-typed document still shows what could be read), and the
    error is reported at libyaml's mark. ``tokens`` is the number of values read, 0 when
    an alias repeats one (such a text is only ever read whole).

    With ``messages``, a whole read (no syntax error) reads the items of the message list
    (the root sequence, or the root mapping's last ``messages`` member) relative to their
    own starts (``SNode.starts``), as ``parse_json`` does, in the one conversion;
    otherwise every range is absolute.

    ``compose_yaml``, ``convert_yaml``, ``yaml_issue`` and ``yaml_prefix_tree`` are its
    steps; ``formats.yamldoc`` runs them on one piece of a document.
    """
    with gc_paused():
        return _parse_yaml(text, messages)


def _parse_yaml(text: str, messages: bool = False) -> ParsedData:
    import yaml

    loader_cls = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    too_many = _yaml_too_many_values(text, loader_cls)
    if isinstance(too_many, SyntaxIssue):
        return ParsedData(None, (too_many,))
    try:
        # Past the message limit only the messages the reader keeps are composed (it
        # reports the limit); offsets in the prefix are those of the whole text.
        node = compose_yaml(text if too_many is None else text[:too_many])
    except yaml.MarkedYAMLError as exc:
        issue, offset = yaml_issue(text, exc)
        return ParsedData(yaml_prefix_tree(text, offset)[0], (issue,))
    except yaml.YAMLError as exc:  # reader errors (e.g. control characters)
        return ParsedData(None, (_yaml_reader_issue(text, exc),))
    if node is None:
        return ParsedData(None)
    return convert_yaml(node, text, messages=messages)


def _yaml_reader_issue(text: str, exc: Any) -> SyntaxIssue:
    """A reader error (a character YAML does not allow) at that character. libyaml's
    ``position`` counts UTF-8 bytes, not characters, so the character is found again with
    the reader's own pattern; its message names it as the JSON reader does."""
    from yaml.reader import Reader

    found = Reader.NON_PRINTABLE.search(text)
    if found is None:  # not a character error: no place better than the start
        return SyntaxIssue(f"invalid YAML: {getattr(exc, 'reason', exc)}", TextRange(0, 0))
    at = found.start()
    char = text[at]
    name = f" ({_CONTROL_NAMES[ord(char)]})" if ord(char) in _CONTROL_NAMES else ""
    message = f"invalid YAML: character U+{ord(char):04X}{name} is not allowed in YAML"
    return SyntaxIssue(message, TextRange(at, at + 1))


def compose_yaml(text: str) -> Any:
    """libyaml's node graph of ``text`` (PyYAML's ``CSafeLoader``); raises ``yaml.YAMLError``."""
    import yaml

    return yaml.compose(text, Loader=yaml_loader())


_LOADER: list[Any] = []


def yaml_loader() -> Any:
    """PyYAML's ``CSafeLoader`` (``SafeLoader`` without libyaml), its resolver's per-node
    steps made cheaper (a YAML lint file spent a sixth of its composing there).

    The composer asks the resolver for every node's tag and tells it each step down and
    up the tree, for path resolvers. The safe loader has none, so those steps do nothing,
    and a plain scalar's tag comes from the implicit resolvers for its first character,
    tried in PyYAML's order: here each character's list is joined with the wildcard
    resolvers once, not on every scalar; any other scalar's (quoted, block) is the string
    tag, as PyYAML's resolver answers without path resolvers. A loader with path resolvers
    is used as it is.
    ``tests/assembly/test_yaml_resolver.py`` compares the two on every case.
    """
    if _LOADER:
        return _LOADER[0]
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = base
    if not base.yaml_path_resolvers:
        implicit = base.yaml_implicit_resolvers
        wildcard = tuple(implicit.get(None, ()))
        by_first = {c: (*pairs, *wildcard) for c, pairs in implicit.items() if c is not None}
        scalar, default = yaml.ScalarNode, base.DEFAULT_SCALAR_TAG

        class Loader(base):  # type: ignore[valid-type, misc]
            def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
                if kind is scalar:
                    if implicit[0]:  # plain: the implicit resolvers decide
                        for tag, regexp in by_first.get(value[:1], wildcard):
                            if regexp.match(value):
                                return tag
                    return default  # (quoted or block: a string, with no path resolvers)
                return base.resolve(self, kind, value, implicit)

            def descend_resolver(self, current_node: Any, current_index: Any) -> None:
                return None

            def ascend_resolver(self) -> None:
                return None

        loader = Loader
    _LOADER.append(loader)
    return loader


def convert_yaml(node: Any, text: str, depth: int = 0, *, messages: bool = False) -> ParsedData:
    """The source tree of a composed node graph of ``text`` (its root ``depth`` deep in the
    document), with the conversion's findings and the values read (0 after an alias).
    ``messages``: the message list's items relative to their starts (``parse_yaml``)."""
    converter = _YamlConverter(text)
    root = converter.convert(node, depth, messages and depth == 0)
    tokens = 0 if converter.aliased else MAX_YAML_NODES - converter.budget
    return ParsedData(root, tuple(converter.errors), tokens=tokens)


def yaml_issue(text: str, exc: Any, more: bool = False) -> tuple[SyntaxIssue, int]:
    """How libyaml's error ``exc`` in ``text`` is reported, and the offset before which
    ``yaml_prefix_tree`` looks; ``more``: the document goes on after ``text``."""
    mark = exc.problem_mark or exc.context_mark
    offset = min(mark.index, len(text)) if mark is not None else 0
    message = f"invalid YAML: {exc.problem or exc.context or 'syntax error'}"
    if exc.problem == "but found another document":  # libyaml's composer, in two halves
        message = "invalid YAML: a second document: a conversation file holds one"
    elif exc.problem == "second occurrence" and exc.context_mark is not None:
        line = exc.context_mark.line + 1
        message = f"invalid YAML: this anchor is already defined (line {line})"
    rng = _token_range(text, offset)
    if exc.context_mark is not None and not more and not text[offset:].strip():
        # Cut short (half typed): point at what is left open, not at the end of the text.
        offset = min(exc.context_mark.index, len(text))
        message = f"invalid YAML: {exc.problem} {exc.context}"
        rng = _open_range(text, offset)
    return SyntaxIssue(message, rng), offset


def yaml_prefix_tree(text: str, error_offset: int, depth: int = 0) -> tuple[SNode | None, int]:
    """The tree of the longest prefix of whole lines before ``error_offset`` that is valid
    YAML (eight tries), and where the last try cut the text (0 or less: at its start)."""
    import yaml

    cut = text.rfind("\n", 0, error_offset)
    for _ in range(8):
        if cut <= 0:
            return None, cut
        try:
            node = compose_yaml(text[:cut])
        except yaml.YAMLError:
            cut = text.rfind("\n", 0, cut)
            continue
        if node is None:
            return None, cut
        return _YamlConverter(text).convert(node, depth), cut
    return None, cut


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a parse builds its tree.

    A parse creates millions of objects and no cyclic garbage, and each full collection
    walks every live object: with it running, composing 100,000 small YAML mappings took
    13.6 s instead of 2.9 s, and converting them as long again.
    """
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _yaml_too_many_values(text: str, loader_cls: Any) -> SyntaxIssue | int | None:
    """Refuse, before composing it, a YAML text of more than ``MAX_YAML_NODES`` values.

    libyaml's composer builds every node of the text at once (a 20 MB list of tiny
    mappings is gigabytes), so a text that may hold that many (by its line breaks and
    commas) is first counted as a stream of parser events, which holds one at a time.
    Returns the refusal, or where to cut the text: at the line of the first message
    past the limit (a block list item, so what comes before is whole YAML), or None.
    """
    import yaml

    if text.count("\n") + text.count(",") < MAX_YAML_NODES // 4:
        return None
    n = 0
    # Per open collection: [is a sequence, items so far] (the top two levels: messages).
    stack: list[list[Any]] = []
    try:
        for event in yaml.parse(text, Loader=loader_cls):
            if isinstance(event, yaml.CollectionEndEvent):
                stack.pop()
                continue
            if not isinstance(event, yaml.NodeEvent):
                continue
            n += 1
            at = event.start_mark.index if event.start_mark is not None else 0
            if n > MAX_YAML_NODES:
                msg = f"YAML of more than {MAX_YAML_NODES:,} values: it is not read"
                return SyntaxIssue(msg, TextRange(at, at), code="document-too-large")
            if stack and len(stack) <= 2 and stack[-1][0]:
                stack[-1][1] += 1
                if stack[-1][1] > MAX_TOP_ITEMS + 1:
                    line = text.rfind("\n", 0, at) + 1
                    if text[line:at].strip() == "-":
                        return line
            if isinstance(event, yaml.CollectionStartEvent):
                stack.append([isinstance(event, yaml.SequenceStartEvent), 0])
    except yaml.YAMLError:
        return None  # composing reports it, with the prefix that parses
    return None


def iter_nodes(node: SNode) -> Iterator[SNode]:
    """Yield ``node`` and all its descendants, depth first."""
    stack = [node]
    while stack:
        cur = stack.pop()
        yield cur
        if cur.kind == "object":
            stack.extend(m.value for m in reversed(cur.members))
        elif cur.kind == "array":
            stack.extend(reversed(cur.items))


# --------------------------------------------------------------------------------------
# JSON

_WS = re.compile(r"[ \t\r\n]*")
_WS_CHARS = " \t\r\n"
BOM = "\ufeff"  # a byte order mark, read as whitespace at a document's start only
_LOOSE_STRING = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')
_SCALAR = re.compile(
    r"(?:(?P<n>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)(?![0-9A-Za-z_.])"
    r"|(?P<l>true|false|null)(?![0-9A-Za-z_]))"
)
_UNTERMINATED = re.compile(r'"[^"\\\r\n]*(?:\\[^\r\n]?[^"\\\r\n]*)*')
_BAREWORD = re.compile(r"[^ \t\r\n{}\[\]:,\"]+")
_STRING, _PUNCT, _NUMBER, _LITERAL, EOF, _BAD = 1, 2, 3, 4, 5, 6
_LITERALS = {"true": True, "false": False, "null": None}
_OPEN = "{["
_ROLE = _intern("role")  # a message's role value is interned (``JsonParser._members``)


class JsonParser:
    """Recursive descent straight over the text, with recovery.

    There is no token list: the parser looks at the next character after the whitespace
    (``_skip``), handles punctuation itself and asks ``_lex`` for the other tokens (strings
    go to the C string scanner of the ``json`` module, numbers and literals to one regex),
    each read exactly once, when it is consumed. A token is one string, number, literal,
    punctuation character or unreadable run; past ``MAX_JSON_TOKENS`` of them the rest of
    the text is not read (``document-too-large``) and the parse ends there as at the end.

    Recovery: an unexpected token is reported and skipped; a missing comma is reported and
    assumed; unclosed containers are closed at the end of the input (one error at the
    opening bracket, unless nesting was already too deep: one error says it all then, where
    a 10,000-bracket text would flood the editor); a member whose value is missing gets no
    value and is dropped, so consumers see only complete members. Errors are in text order,
    those found inside tokens (a string's control character, escape or lone surrogate, and
    the token limit) among the grammar's.
    """

    def __init__(
        self,
        text: str,
        start: int,
        end: int,
        base: int | None = None,
        scan: _Scan | None = None,
        *,
        messages: bool = False,
        unscanned: frozenset[str] = frozenset(),
    ) -> None:
        self.text = text
        self.pos = start  # where the next token (or the whitespace before it) starts
        self.end = end  # the end of the text read (moved back to the token limit's place)
        # Ranges of nodes inside an item of the message list (the top-level array, or the
        # array that is the top-level object's ``messages``) are relative to that item's
        # start, ``base`` (``RelRange``s); None: outside such an item, ranges are absolute.
        # A parser given a base reads one item (a message, a JSON Lines line) on its own.
        self.base = base
        self.messages = messages  # read the message list's items relative to their starts
        self.window: int | None = None  # an incremental parse's window end (``_items``)
        self.shift = 0  # where ``text`` starts in the document (an incremental parse's window)
        self.holder_next = False  # the next array read is the top-level ``messages``
        # The message list's items are tried with the C scanner (``_scanned``), unless one
        # of ``unscanned`` is a top-level key before it.
        self.scanning = True
        self.unscanned = unscanned
        # Cut short (too deep, or at the token limit): what is left open is not the
        # author's mistake.
        self.too_deep = False
        self.errors: list[SyntaxIssue] = []
        self.scan = scan or _Scan()
        self.rels: dict[int, RelRange] = {}  # ``_rel``'s ranges of this parse
        self.count = 0  # tokens consumed
        self.last_end = start  # where the last consumed token ends
        self.last_raw = ""  # its character when it was punctuation
        # ``parse_json_windows``: the whole text, read a window at a time (``text`` is the
        # window, which starts at ``shift`` in it); None: ``text`` is all there is.
        self.source: Sliced | None = None
        # The text the scanned messages' ``Positions`` may keep and read their places in
        # (``text`` starts at ``shift`` in it): the document a whole parse reads. None: each
        # keeps a copy of its own text (``scanned``), as the messages an edit reads again
        # do: an edit's version of the document kept by the messages it read would keep
        # every chunk of that version that later edits replace, one version an edit.
        self.origin: Sliced | None = None
        self.doc_len = 0
        self.window_chars = WINDOW_CHARS
        # What follows the message list is read from one window of this many characters
        # (0: to the document's end); a parse that reaches its end is not ``final``.
        self.rest_chars = 0
        # A parse that would move past this place in the document (None: anywhere) stops
        # (``_TooFar``): a caller with a cheaper way to read so far asked it to.
        self.reach: int | None = None

    @property
    def tokens(self) -> int:
        """The tokens read, the end of the text counting as one (as ``ParsedData.tokens``)."""
        return self.count + 1

    def at_end(self) -> bool:
        """Whether nothing but whitespace is left."""
        return self._skip() >= self.end

    # ------------------------------------------------------------------ the lexer

    def _skip(self) -> int:
        """Skip whitespace: where the next token starts, or ``end`` when none is left (the
        token limit reached there ends the text)."""
        p = self.pos
        end = self.end
        if p < end and self.text[p] in _WS_CHARS:
            p = self.pos = _WS.match(self.text, p, end).end()
        if p < end and self.count >= MAX_JSON_TOKENS:
            msg = f"more than {MAX_JSON_TOKENS:,} JSON tokens: the rest of the text is not read"
            self._lex_error(SyntaxIssue(msg, TextRange(p, p), code="document-too-large"))
            self.end = p
            self.too_deep = True
        return p

    def _punct(self, p: int) -> None:
        """Consume the punctuation character at ``p``."""
        self.pos = self.last_end = p + 1
        self.count += 1
        self.last_raw = self.text[p]

    def _take(self, tok: tuple[int, str, int, int, Any]) -> None:
        """Consume a token ``_lex`` read."""
        self.pos = self.last_end = tok[3]
        self.count += 1
        self.last_raw = tok[1] if tok[0] == _PUNCT else ""

    def _lex(self, p: int) -> tuple[int, str, int, int, Any]:
        """The token at ``p`` (after ``_skip``, before ``end``): (kind, raw text, start,
        end, decoded value); a string's raw text is "" (slicing every string would copy the
        document). Problems inside a string are reported here: consume what this returns."""
        text = self.text
        c = text[p]
        if c == '"':
            return self._string(p)
        if c in "{}[]:,":
            return (_PUNCT, c, p, p + 1, None)
        m = _SCALAR.match(text, p, self.end)
        if m is not None:
            kind = _NUMBER if m.lastindex == 1 else _LITERAL
            return (kind, m.group(m.lastindex or 0), p, m.end(), None)
        m = _BAREWORD.match(text, p, self.end)
        stop = m.end() if m is not None else p + 1
        return (_BAD, f"unexpected `{_clip(text[p:stop])}`", p, stop, None)

    def _string(self, pos: int) -> tuple[int, str, int, int, Any]:
        """The string token at ``pos``, decoded by the C scanner of the ``json`` module; one
        that it rejects (an unterminated string, a raw control character) is re-read by the
        tolerant regexes."""
        text, end = self.text, self.end
        stop = -1
        if self.scan.strict:
            try:
                value, stop = _scanstring(text, pos + 1, True)
            except ValueError:
                self.scan.strict = False
        if stop != -1 and stop <= end:
            # No slice of the source per string: the value is what is read; the raw text is
            # sliced again only for a message about it.
            if (
                not value.isascii()  # (known without reading it; surrogates are not ASCII)
                and text.find("\\u", pos, stop) != -1
                and _SURROGATE.search(value) is not None
            ):
                value = self._surrogates(text[pos:stop], value, pos)
            return (_STRING, "", pos, stop, value)
        m = _LOOSE_STRING.match(text, pos, end)
        if m is None:
            m = _UNTERMINATED.match(text, pos, end)
            assert m is not None
            return (_BAD, "unterminated string", pos, m.end(), None)
        stop = m.end()
        raw = text[pos:stop]
        value = _decode_string(raw)
        ctrl = _CONTROL.search(raw)
        if ctrl is not None:
            self._lex_error(_control_character(raw, ctrl, pos))
        bad = _bad_escape(raw)
        if bad is not None:
            at = pos + bad.start()
            msg = f"invalid escape `{_clip(bad.group())}` in a string"
            self._lex_error(SyntaxIssue(msg, TextRange(at, at + len(bad.group()))))
        if _SURROGATE.search(value) is not None:
            value = self._surrogates(raw, value, pos)
        return (_STRING, "", pos, stop, value)

    def _surrogates(self, raw: str, value: str, pos: int) -> str:
        found: list[SyntaxIssue] = []
        value = _replace_surrogates(raw, value, pos, found)
        for issue in found:
            self._lex_error(issue)
        return value

    # ------------------------------------------------------- windows (``source``)

    def final(self) -> bool:
        """Whether the end of ``text`` is the end of what is read: the document's end, or
        where the token limit ended it (always, without a ``source``)."""
        return (
            self.source is None
            or self.end < len(self.text)
            or self.shift + len(self.text) >= self.doc_len
        )

    def _move(self, p: int, size: int) -> int:
        """Read from a new window starting at ``p`` (of ``size`` characters, or to the
        document's end when ``size`` is 0); returns how far positions in ``text`` moved
        (``p``: the old ``p`` is 0 in the new window)."""
        assert self.source is not None
        at = self.shift + p
        stop = self.doc_len if size <= 0 else min(self.doc_len, at + size)
        # What this window holds of the new one is kept; only the rest is read.
        held = self.shift + len(self.text)
        if stop <= held:
            self.text = self.text[p : stop - self.shift]
        else:
            self.text = self.text[p:] + self.source[held:stop]
        self.shift = at
        self.end = len(self.text)
        self.pos -= p
        self.last_end -= p
        return p

    def _refill(self, p: int, rest: bool = False) -> int:
        """Before an item of the message list at ``p`` (``rest``: past the list's items),
        move on to a new window when fewer than ``WINDOW_SLACK`` characters are left in
        this one (``rest``: to the document's end); returns how far positions moved."""
        if self.final():
            return 0
        if rest:
            return self._move(p, self.rest_chars)
        if self.end - p < min(WINDOW_SLACK, self.window_chars // 2):
            if self.reach is not None and self.shift + p > self.reach:
                raise _TooFar
            return self._move(p, self.window_chars)
        return 0

    def _saved(self) -> tuple[Any, ...]:
        """What reading an item changes, to read it again (``_retry``); positions in the
        document's coordinates."""
        return (
            self.pos + self.shift,
            self.count,
            self.last_end + self.shift,
            self.last_raw,
            len(self.errors),
            self.scan.strict,
            self.too_deep,
        )

    def _retry(self, saved: tuple[Any, ...], p: int) -> int:
        """Undo reading the item at ``p``, which reached the window's end, and read from a
        window twice as large starting at it; returns how far positions moved."""
        pos, self.count, last_end, self.last_raw, n, strict, deep = saved
        self.pos, self.last_end = pos - self.shift, last_end - self.shift
        self.scan.strict, self.too_deep = strict, deep
        del self.errors[n:]
        self.end = len(self.text)
        return self._move(p, max(self.window_chars, 2 * (len(self.text) - p)))

    def _lex_error(self, issue: SyntaxIssue) -> None:
        if self.shift:
            rng = issue.range.shift(self.shift)
            issue = SyntaxIssue(issue.message, rng, issue.code, issue.severity)
        self.errors.append(issue)

    # ----------------------------------------------------------------- the parser

    def _range(self, start: int, end: int) -> Span:
        b = self.base
        if b is None:
            return TextRange(start + self.shift, end + self.shift)
        return _rel(self.rels, start - b, end - b)

    def _error(self, message: str, start: int, end: int) -> None:
        s = start + self.shift
        self.errors.append(SyntaxIssue(message, TextRange(s, max(s, end + self.shift))))

    def parse_document(self, what: str = "document", bom: bool = False) -> SNode | None:
        """The value of the text (``what``: a document or a JSON Lines line), errors
        reported; with ``bom``, a U+FEFF at the document's start (``text`` starts it) is
        its byte order mark and read as whitespace (RFC 8259 lets a parser ignore it; an
        editor may send it, a file read from disk has it dropped)."""
        if bom and self.pos == 0 and self.shift == 0 and self.text.startswith(BOM):
            self.pos = 1
        p = self._skip()
        if p >= self.end:
            if what == "document":
                self._error("empty document: expected a JSON object or array", p, p)
            return None
        node = self._value(0)
        self._trailing(what)
        return node

    def _trailing(self, what: str) -> None:
        """After the value of the document (or of a JSON Lines line): the first token left
        is reported, and the rest of the text is not read, as a JSON reader stops at
        "extra data": one finding, however much follows (a message list closed early by
        an edit leaves the rest of a 10 MB conversation behind it, whose every value was
        lexed and reported before)."""
        start = self.pos
        p = self._skip()
        if p >= self.end:
            return
        tok = self._lex(p)
        self._take(tok)
        message = f"unexpected content after the end of the {what}"
        if what == "line" and "\r" in self.text[start:p]:
            # A file saved with classic Mac line ends: one line to JSON Lines.
            message += "; a lone carriage return (CR) does not end a JSON Lines line"
        self._error(message, p, tok[3])
        # The text after it is not read; a token that reached a window's end leaves
        # ``final`` false, and the document is read again from a larger window.
        self.end = self.pos

    def parse_messages_from(
        self, depth: int, keys: set[str] | None, list_start: int, doc_start: int
    ) -> tuple[SNode, SNode | None]:
        """Parse as if inside the message list (an array at ``depth``) at the start of an
        item, to the end of the text: the list (its range starts at 0, its items are
        those read here) and, when the list is the value of the top-level object's
        ``messages`` (``keys``: the keys before it), that object's members after it (its
        range too starts at 0). In a window, ``_Resync``/``_NoResync`` end it early."""
        shift = self.shift
        holder = self._items(depth, list_start, [], [], [])
        rest = None
        if keys is not None:  # (the list may have been read window by window)
            rest = self._members(0, doc_start - (self.shift - shift), [], set(keys), after=holder)
        self._trailing("document")
        return holder, rest

    def _skip_to_close(self) -> None:
        """Skip the items left in the array being read, up to its closing bracket."""
        depth = 0
        text = self.text
        while True:
            p = self._skip()
            if p >= self.end:
                return
            c = text[p]
            if c in "{[":
                depth += 1
            elif c in "}]":
                if depth == 0:
                    return
                depth -= 1
            elif c not in ",:":
                self._take(self._lex(p))
                continue
            self._punct(p)

    def _skip_container(self) -> None:
        """Skip to the bracket closing the one just read (any kind: this is recovery)."""
        self._skip_to_close()
        p = self._skip()
        if p < self.end:
            self._punct(p)  # the closing bracket

    def _value(self, depth: int) -> SNode | None:
        text = self.text
        p = self.pos
        if p < self.end and text[p] in _WS_CHARS:
            p = self.pos = _WS.match(text, p, self.end).end()
        if p >= self.end or self.count >= MAX_JSON_TOKENS:
            p = self._skip()  # the end, or the token limit (which ends the text there)
            if p >= self.end:
                if self.window is not None:
                    raise _NoResync
                self._error("expected a value", p, p)
                return None
        c = text[p]
        if c == '"':
            kind, raw, _, e, decoded = self._string(p)
            self.pos = self.last_end = e
            self.count += 1
            self.last_raw = ""
            if kind == _STRING:
                b = self.base
                if b is None:
                    return SNode("string", TextRange(p + self.shift, e + self.shift), decoded)
                return SNode("string", _rel(self.rels, p - b, e - b), decoded)
            self._error(raw, p, e)
            return None
        if c in _OPEN:
            if depth >= MAX_DEPTH:
                self._error(f"nesting deeper than {MAX_DEPTH} levels", p, p + 1)
                self.too_deep = True
                self._punct(p)
                self._skip_container()
                return None
            self.pos = self.last_end = p + 1  # (``_punct``)
            self.count += 1
            self.last_raw = c
            if c == "{":
                return self._members(depth, p, [], set(), None)
            return self._array(depth, p)
        tok = self._lex(p)
        kind, raw, start, end, _ = tok
        if kind == _PUNCT:  # a closing bracket, a colon or a comma: left to the container
            self._error(f"expected a value, found `{raw}`", start, end)
            return None
        self._take(tok)
        if kind == _NUMBER:
            if len(raw) > MAX_NUMBER_CHARS:
                msg = f"a number of {len(raw):,} characters; the limit is {MAX_NUMBER_CHARS}"
                self._error(msg, start, end)
                return None
            return SNode("number", self._range(start, end), _decode_number(raw))
        if kind == _LITERAL:
            value = _LITERALS[raw]
            return SNode("null" if value is None else "bool", self._range(start, end), value)
        self._error(raw, start, end)  # _BAD
        return None

    def _members(
        self,
        depth: int,
        start: int,
        members: list[Member],
        keys: set[str],
        after: SNode | None,
    ) -> SNode:
        """The members of an object after its opening brace (at ``start``) from the current
        position on (``after``: the value of the last member in ``members`` was just read;
        resumes a parse there).

        The common steps (a key the C scanner reads, its colon, a string value, the comma
        or brace after it) are taken here without a call each; anything else goes through
        ``_value``, ``_string`` and ``_after_value``, which read the same grammar.
        """
        if after is not None:
            self._after_value(after, "}")
        text = self.text
        ws = _WS.match
        scan = self.scan
        shift = self.shift
        rels = self.rels
        comma = -1  # where the comma just read after a member is
        while True:
            p = self.pos
            end = self.end
            if p < end and text[p] in _WS_CHARS:
                p = self.pos = ws(text, p, end).end()
            if p >= end or self.count >= MAX_JSON_TOKENS:
                p = self._skip()  # the end, or the token limit (which ends the text there)
                if p >= self.end:
                    if self.window is not None:
                        raise _NoResync
                    if not self.too_deep:
                        self._error("unclosed object: expected `}`", start, start + 1)
                    # It ends with the last token read, not with the whitespace before the end.
                    return SNode(
                        "object", self._range(start, self.last_end), members=tuple(members)
                    )
            c = text[p]
            if c == "}":
                if comma != -1:
                    self._error("trailing comma", comma, comma + 1)
                self.pos = self.last_end = p + 1  # (``_punct`` and ``_range``, inline)
                self.count += 1
                self.last_raw = c
                b = self.base
                rng = (
                    TextRange(start + shift, p + 1 + shift)
                    if b is None
                    else _rel(rels, start - b, p + 1 - b)
                )
                return SNode("object", rng, None, (), tuple(members))
            comma = -1
            if c == '"':
                e = -1
                if scan.strict:
                    try:
                        key, e = _scanstring(text, p + 1, True)
                    except ValueError:
                        scan.strict = False  # (``_string`` reads it with the regexes)
                if e == -1 or e > end or (not key.isascii() and text.find("\\u", p, e) != -1):
                    kind, raw, _, e, key = self._string(p)
                    if kind != _STRING:
                        self._take((kind, raw, p, e, None))
                        self._error(raw, p, e)
                        continue
                if len(key) <= MAX_SHARED_KEY_CHARS:
                    key = _intern(key)  # one object for each key name, not one a member
                self.pos = self.last_end = e
                self.count += 1
                self.last_raw = ""
                b = self.base
                if b is None:
                    key_range: Span = TextRange(p + shift, e + shift)
                else:  # (``_rel``, without a call)
                    k = (p - b) << 32 | (e - b)
                    key_range = rels.get(k)  # type: ignore[assignment]
                    if key_range is None:
                        key_range = rels[k] = RelRange(p - b, e - b)
                if key in keys:
                    self.errors.append(_duplicate_key(key, TextRange(p + shift, e + shift)))
                else:
                    keys.add(key)
                q = e
                if q < end and text[q] in _WS_CHARS:
                    q = self.pos = ws(text, q, end).end()
                if q < end and text[q] == ":" and self.count < MAX_JSON_TOKENS:
                    self.pos = self.last_end = q + 1
                    self.count += 1
                    self.last_raw = ":"
                else:
                    q = self._skip()
                    self._error(f"expected `:` after property name {text[p:e]}", e, e)
                    if q < self.end and text[q] in ",}":
                        if text[q] == ",":
                            self._punct(q)
                        continue
                # The value: a string here, anything else through ``_value``.
                q = self.pos
                end = self.end
                if q < end and text[q] in _WS_CHARS:
                    if text[q] == " " and q + 1 < end and text[q + 1] not in _WS_CHARS:
                        q = self.pos = q + 1  # (the one space after a colon: no regex call)
                    else:
                        q = self.pos = ws(text, q, end).end()
                e = -1
                if q < end and text[q] == '"' and self.count < MAX_JSON_TOKENS and scan.strict:
                    try:
                        decoded, e = _scanstring(text, q + 1, True)
                    except ValueError:
                        scan.strict = False  # (``_value`` reads it with the regexes)
                    if e > end or (
                        e != -1 and not decoded.isascii() and text.find("\\u", q, e) != -1
                    ):
                        e = -1
                value: SNode | None
                if e != -1:
                    self.pos = self.last_end = e
                    self.count += 1
                    self.last_raw = ""
                    if key is _ROLE:  # (one object for each role name)
                        decoded = _intern(decoded)
                    if b is None:
                        value = SNode("string", TextRange(q + shift, e + shift), decoded)
                    else:
                        k = (q - b) << 32 | (e - b)
                        rel = rels.get(k)
                        if rel is None:
                            rel = rels[k] = RelRange(q - b, e - b)
                        value = SNode("string", rel, decoded)
                else:
                    self.holder_next = depth == 0 and key == "messages"
                    if self.holder_next and not self.unscanned.isdisjoint(keys):
                        self.scanning = False
                    value = self._value(depth + 1)
                    self.holder_next = False
                    if self.text is not text:  # the message list was read window by window
                        start -= self.shift - shift
                        text, shift = self.text, self.shift
                if value is not None:
                    members.append(Member(key, key_range, value))
                # What follows: a comma or the closing brace here, anything else in
                # ``_after_value``.
                q = self.pos
                end = self.end
                if q < end and text[q] in _WS_CHARS:
                    q = self.pos = ws(text, q, end).end()
                if q < end and text[q] == "," and self.count < MAX_JSON_TOKENS:
                    self.pos = self.last_end = q + 1
                    self.count += 1
                    self.last_raw = ","
                    comma = q
                elif q >= end or text[q] != "}" or self.count >= MAX_JSON_TOKENS:
                    self._after_value(value, "}")
                continue
            if c == ",":
                self._punct(p)
                self._error("unexpected `,`", p, p + 1)
                continue
            if c == "]":
                self._punct(p)
                self._error("unexpected `]` in an object", p, p + 1)
                continue
            if c in _OPEN:
                self._error("expected a property name in double quotes", p, p + 1)
                self._punct(p)
                self._skip_container()
                continue
            tok = self._lex(p)
            self._take(tok)
            kind, raw, s, e, _ = tok
            if kind == _BAD:
                self._error(raw, s, e)
            else:
                self._error(f"expected a property name in double quotes, found `{raw}`", s, e)

    def _after_value(self, value: SNode | None, close: str) -> None:
        """What may follow an object's member or an array's item: a comma (not trailing)
        or the container's ``close``; anything else is reported where the comma belongs."""
        text = self.text
        p = self.pos
        if p < self.end and text[p] in _WS_CHARS:
            p = self.pos = _WS.match(text, p, self.end).end()
        if p >= self.end or self.count >= MAX_JSON_TOKENS:
            p = self._skip()
            if p >= self.end:
                return
        c = text[p]
        if c == ",":
            # (``_punct`` and ``_skip``, without a call each: once an item or member)
            self.pos = self.last_end = q = p + 1
            self.count += 1
            self.last_raw = ","
            end = self.end
            if q < end and text[q] in _WS_CHARS:
                q = self.pos = _WS.match(text, q, end).end()
            if q < end and self.count >= MAX_JSON_TOKENS:
                q = self._skip()
            if q < self.end and text[q] == close:
                self._error("trailing comma", p, p + 1)
        elif c != close:
            # Where the comma belongs: right after the value, not over the whitespace.
            at = self.last_end if value else p
            self._error(f"expected `,` or `{close}`", at, at)

    def _scanned(self, p: int, depth: int) -> SNode | None:
        """The object at ``p``, an item of the message list (``depth`` deep), read by the C
        scanner (``scanned``); else None (and nothing consumed): the parser reads it.
        Raises ``WindowCut`` when the object runs on past a window that is not the last."""
        got = scanned(
            self.text, p, self.end, depth, self.origin, p + self.shift, cut=not self.final()
        )
        if got is None:
            return None
        node, e, tokens = got
        if self.count + tokens + 1 >= MAX_JSON_TOKENS:
            return None  # (the parser says where the limit is)
        self.pos = self.last_end = e
        self.count += tokens
        self.last_raw = "}"
        return node

    def _array(self, depth: int, start: int) -> SNode:
        # The message list: each item is read relative to its own start (see ``SNode.starts``).
        holder = self.messages and (depth == 0 or self.holder_next) and self.base is None
        self.holder_next = False
        if holder:
            return self._items(depth, start, [], [], [])
        return self._items(depth, start, [], None, None)

    def _items(
        self,
        depth: int,
        start: int,
        items: list[SNode],
        starts: list[int] | None,
        counts: list[int] | None,
    ) -> SNode:
        """The items of an array after its opening bracket (at ``start``) from the current
        position on (resumes a parse there).

        For the message list, ``starts`` and ``counts`` (the number of errors before each
        item) grow with ``items``. In a window (``window``), reaching its end where the
        next item would start raises ``_Resync``; anywhere else, ``_NoResync``.
        """
        text = self.text
        windowed = starts is not None and self.source is not None
        slack = min(WINDOW_SLACK, self.window_chars // 2)  # (``_refill``'s, checked here first)
        while True:
            p = self._skip()
            while windowed and self.end - p < slack:
                moved = self._refill(p)
                if not moved:
                    break
                start -= moved
                text = self.text
                p = self._skip()  # (the new window may start with whitespace)
            if p >= self.end:
                if self.window is not None:
                    if starts is not None and self.count and self.last_raw == ",":
                        raise _Resync(items, starts, counts or [])
                    raise _NoResync
                if not self.too_deep:
                    self._error("unclosed array: expected `]`", start, start + 1)
                return SNode(
                    "array",
                    self._range(start, self.last_end),
                    items=tuple(items),
                    starts=_tup(starts),
                    error_counts=_tup(counts),
                )
            c = text[p]
            if c == "]":
                if windowed:  # the rest of the document is read from one window
                    moved = self._refill(p, rest=True)
                    p -= moved
                    start -= moved
                self._punct(p)
                return SNode(
                    "array",
                    self._range(start, p + 1),
                    items=tuple(items),
                    starts=_tup(starts),
                    error_counts=_tup(counts),
                )
            if c in ",}:":
                self._punct(p)
                self._error(f"unexpected `{c}` in an array", p, p + 1)
                continue
            if depth <= 1 and self.base is None and len(items) > MAX_TOP_ITEMS:
                # Past the message limit (reported by the reader): skip, build nothing.
                if windowed:
                    moved = self._refill(p, rest=True)
                    p -= moved
                    start -= moved
                    text = self.text
                self._skip_to_close()
                continue
            if windowed:
                # The item and what follows it, read again from a larger window when they
                # reached this one's end (then what the parse saw there may not be the text).
                saved = self._saved()
                while True:
                    self.base = p
                    n_errors = len(self.errors)
                    try:
                        value = (
                            self._scanned(p, depth + 1)
                            if self.scanning and text[p] == "{"
                            else None
                        )
                    except WindowCut:  # read again from a window that holds it, not parsed
                        self.base = None
                        moved = self._retry(saved, p)
                        p -= moved
                        start -= moved
                        text = self.text
                        continue
                    if value is None:
                        value = self._value(depth + 1)
                    self.base = None
                    self._after_value(value, "]")
                    if self.pos < self.end or self.final():
                        break
                    moved = self._retry(saved, p)
                    p -= moved
                    start -= moved
                    text = self.text
                if value is not None:
                    starts.append(p + self.shift)  # type: ignore[union-attr]
                    counts.append(n_errors)  # type: ignore[union-attr]
                    items.append(value)
                continue
            if starts is not None:
                self.base = p
                n_errors = len(self.errors)
                value = self._scanned(p, depth + 1) if self.scanning and c == "{" else None
                if value is None:
                    value = self._value(depth + 1)
                self.base = None
                if value is not None:
                    starts.append(p + self.shift)
                    counts.append(n_errors)  # type: ignore[union-attr]
            else:
                value = self._value(depth + 1)
            if value is not None:
                items.append(value)
            self._after_value(value, "]")


class _Pairs(list):  # type: ignore[type-arg]
    """An object's (key, value) pairs as the C scanner gives them (``_scan_item``): told
    apart from an array, which it gives as a ``list``."""

    __slots__ = ()


class _Refused(ValueError):
    """A value left to the parser (by ``_Build``, or the scanner's hooks: a ``ValueError``
    as the scanner's own refusals are)."""


def _refuse(raw: str) -> Any:
    raise _Refused


def _number(parse: Any) -> Any:
    def checked(raw: str) -> Any:
        if len(raw) > MAX_NUMBER_CHARS:
            raise _Refused
        return parse(raw)

    return checked


class _ScanContext:
    """What ``json.scanner.make_scanner`` reads its settings from (a ``JSONDecoder``'s)."""

    strict = True
    object_hook = None
    object_pairs_hook = _Pairs  # (a type: called from C without a Python frame)
    parse_float = staticmethod(_number(float))
    parse_int = staticmethod(_number(int))
    parse_constant = staticmethod(_refuse)  # NaN, Infinity, -Infinity: not JSON

    def __init__(self) -> None:
        self.memo: dict[str, str] = {}  # (the pure-Python scanner's; the C one has its own)


_scan_item = _make_scanner(_ScanContext())
# A ``\u`` escape of a surrogate (a lone one is reported by the parser).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class LazyRange(RelRange):
    """A range inside a message read by the C scanner (``JsonParser._scanned``): where it
    is, relative to the message's start, is found when first asked for (``Positions``).
    Equal, hashed and ordered as the ``RelRange`` it stands for, and pickled as one.

    It keeps its table and its number in the two slots of ``RelRange`` (through their
    descriptors, ``_TABLE`` and ``_AT``), which it reads as properties: a message's
    nodes have one each, 42,000 at 10 MB, and two more slots would be 0.7 MB."""

    __slots__ = ()

    def __init__(self, table: Positions, at: int) -> None:  # (no ``RelRange.__init__``)
        _TABLE.__set__(self, table)
        _AT.__set__(self, at)

    @property  # type: ignore[override]
    def start(self) -> int:
        return _TABLE.__get__(self).offsets()[2 * _AT.__get__(self)]  # type: ignore[no-any-return]

    @property  # type: ignore[override]
    def end(self) -> int:
        return _TABLE.__get__(self).offsets()[2 * _AT.__get__(self) + 1]  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"LazyRange(start={self.start}, end={self.end})"

    def __reduce__(self) -> tuple[type[RelRange], tuple[int, int]]:
        return (RelRange, (self.start, self.end))

    def place(self) -> tuple[Positions, int]:
        """Its table and its number there."""
        return _TABLE.__get__(self), _AT.__get__(self)


# ``RelRange``'s slots, as ``LazyRange`` uses them.
_TABLE: Any = RelRange.__dict__["start"]
_AT: Any = RelRange.__dict__["end"]


class _ScannedMember(Member):
    """A member of an object the C scanner read: its key's range is found from its value's
    (the place before it in ``Positions``' order), so no range object is kept for it."""

    __slots__ = ()

    def __init__(self, key: str, value: SNode) -> None:  # (no ``key_range`` to set)
        self.key = key
        self.value = value

    @property  # type: ignore[override]
    def key_range(self) -> Span:
        v: LazyRange = self.value.range  # type: ignore[assignment]
        table, at = v.place()
        return LazyRange(table, at - 1)


class _ScannedObject(SNode):
    """An object the C scanner read: its table of values by key (``fields``, never let go)
    is all it keeps of its members, which ``members`` makes when asked for, in source order
    (``scanned`` refuses a duplicate key, so the table has each member). For a message of
    four keys the table is smaller than the tuple of members it replaces (184 bytes against
    72 and four members of 56) and four objects fewer are made."""

    __slots__ = ()

    def __init__(self, range: LazyRange, keys: dict[str, SNode]) -> None:
        self.kind = "object"
        self.range = range
        self.value = self.starts = self.error_counts = None
        self.items = ()
        self._keys = keys

    @property  # type: ignore[override]
    def members(self) -> tuple[Member, ...]:
        return tuple([_ScannedMember(k, v) for k, v in self._keys.items()])  # type: ignore[union-attr]

    def fields(self) -> dict[str, SNode]:
        return self._keys  # type: ignore[return-value]

    def release_fields(self) -> None:
        pass  # (the table is the members)


class Positions:
    """Where the nodes of one message read by the C scanner are, relative to its start, in
    the order ``_Build`` numbers them (each node, then each member's key and value): found
    in the ``length`` characters at ``start`` in ``source`` (the text of the version it was
    read in, which never changes) the first time one is asked for (``_offsets``), and kept
    as two numbers a node; the text is then let go."""

    __slots__ = ("_offsets", "length", "source", "start")

    def __init__(self, source: Sliced, start: int, length: int) -> None:
        self.source: Sliced | None = source
        self.start = start
        self.length = length
        self._offsets: array[int] | None = None

    def offsets(self) -> array[int]:
        """The start and the end of each node, in order."""
        found = self._offsets
        if found is None:
            # (Threads may ask at once: each finds the same numbers; the text is let go
            # only after they are kept, so one that finds it gone finds them.)
            source = self.source
            if source is None:
                return self._offsets  # type: ignore[return-value]
            found = _offsets(source[self.start : self.start + self.length])
            self._offsets = found
            self.source = None  # (the text is let go)
        return found


def _offsets(text: str) -> array[int]:
    """The start and end of each value and key of ``text``, one JSON value the C scanner
    read whole (so no check is needed), in ``Positions``' order: a walk over the text that
    finds the end of each string with the C scanner and makes nothing but the numbers."""
    out: list[int] = []
    add = out.append
    ws = _WS.match
    scan = _scanstring
    scalar = _SCALAR.match
    blank = _WS_CHARS

    def value(p: int) -> int:
        i = len(out)
        add(p)
        add(0)
        c = text[p]
        if c == '"':
            e: int = scan(text, p + 1, True)[1]
        elif c == "{" or c == "[":
            close = "}" if c == "{" else "]"
            q = p + 1
            if text[q] in blank:
                q = ws(text, q).end()
            while text[q] != close:
                if c == "{":
                    k = scan(text, q + 1, True)[1]
                    add(q)
                    add(k)
                    if text[k] in blank:
                        k = ws(text, k).end()
                    q = k + 1  # (past the colon)
                    if text[q] in blank:
                        q = (
                            q + 1
                            if text[q] == " " and text[q + 1] not in blank
                            else ws(text, q).end()
                        )
                q = value(q)
                if text[q] in blank:
                    q = ws(text, q).end()
                if text[q] == ",":
                    q += 1
                    if text[q] in blank:
                        q = ws(text, q).end()
            e = q + 1
        else:
            m = scalar(text, p)
            assert m is not None
            e = m.end()
        out[i + 1] = e
        return e

    end = value(0)
    assert end == len(text), (end, len(text))
    # Kept as 4-byte numbers (a message is shorter than 2**32 characters): a list's would be
    # a pointer and, past 256, an ``int`` object each (the first outline of the 10 MB
    # benchmark conversation finds 185,000 of them, 70,000 of them past 256).
    return array("I", out)


class _Build:
    """The source tree of a value the C scanner read (``JsonParser._scanned``): its nodes
    numbered as ``Positions`` finds their ranges, and the tokens the parser would count."""

    __slots__ = ("lone", "next", "table", "tokens")

    def __init__(self, table: Positions, lone: bool = False) -> None:
        self.table = table
        self.next = 0
        self.tokens = 0
        self.lone = lone  # a surrogate in a string (a key's or a value) is refused

    def _string(self, s: str) -> None:
        if self.lone and not s.isascii() and _SURROGATE.search(s) is not None:
            raise _Refused

    def node(self, v: Any, depth: int) -> SNode:
        at = self.next
        self.next = at + 1
        table = self.table
        t = type(v)
        if t is str:
            self._string(v)
            self.tokens += 1
            return SNode("string", LazyRange(table, at), v)
        if t is _Pairs:
            if depth >= MAX_DEPTH:
                raise _Refused
            n = len(v)
            # braces, keys, colons, the commas between members, and the string values
            tokens = 2 + 2 * n + max(n - 1, 0)
            # The object's table of values by key (``SNode.fields``), which is all it
            # keeps of its members (``_ScannedObject``).
            keys: dict[str, SNode] = {}
            snode, intern, role = SNode, _intern, _ROLE
            new, set_table, set_at = object.__new__, _TABLE.__set__, _AT.__set__
            k = at + 1  # the next number
            lone = self.lone
            for key, x in v:
                if len(key) <= MAX_SHARED_KEY_CHARS:
                    key = intern(key)
                if lone:
                    self._string(key)
                if type(x) is str:  # (most values: without a call)
                    if lone:
                        self._string(x)
                    if key is role:
                        x = intern(x)
                    # ``LazyRange(table, k + 1)`` without its ``__init__``'s frame
                    rng = new(LazyRange)
                    set_table(rng, table)
                    set_at(rng, k + 1)
                    keys[key] = snode("string", rng, x)
                    tokens += 1
                    k += 2
                else:
                    self.next = k + 1
                    keys[key] = self.node(x, depth + 1)
                    k = self.next
            if len(keys) != n:
                raise _Refused  # a duplicate key
            self.next = k
            self.tokens += tokens
            return _ScannedObject(LazyRange(table, at), keys)
        if t is list:
            if depth >= MAX_DEPTH:
                raise _Refused
            n = len(v)
            self.tokens += 2 + max(n - 1, 0)
            items = tuple([self.node(x, depth + 1) for x in v])
            return SNode("array", LazyRange(table, at), None, items)
        self.tokens += 1
        if v is None:
            return SNode("null", LazyRange(table, at), None)
        if t is bool:
            return SNode("bool", LazyRange(table, at), v)
        return SNode("number", LazyRange(table, at), v)


def scanned(
    text: str,
    p: int,
    end: int,
    depth: int,
    origin: Sliced | None = None,
    at: int = 0,
    *,
    cut: bool = False,
) -> tuple[SNode, int, int] | None:
    """The object at ``p`` in ``text`` (``depth`` deep) read by the C scanner of the
    ``json`` module, when it reads it whole before ``end`` and as ``JsonParser`` would read
    it without a finding: its node, where it ends and the tokens the parser would count;
    else None, for the parser to read it. ``origin``: the editor's rope of this version,
    where it starts at ``at`` (its ``Positions`` read it there when asked); without one,
    they keep a copy of the object's text, never the whole ``text`` (a joined document or
    the rest of one after an edit: kept alive by its unread messages, 40 MB at 10 MB).

    The nodes' ranges are not found now (``LazyRange``): the readers keep them, and only
    the few that a finding or a view places are ever asked for (at 10 MB, 60 of 92,000),
    when a walk over the message's text finds them all (``Positions``). Refused here, for the
    parser to report: a duplicate key, a lone surrogate's escape, a number longer than
    ``MAX_NUMBER_CHARS``, ``NaN`` and its kind, nesting past ``MAX_DEPTH``; anything
    ``json`` rejects (a control character in a string, a missing comma…) and an object
    that reaches ``end``. (The caller checks the token limit.)

    ``cut``: ``text`` is a window of a longer document, which goes on after ``end``: an
    object the scanner reads on past ``end``, or to the end of ``text`` (a string left
    open there, or nothing more where the object goes on), raises ``WindowCut``, for the
    caller to try again with a window that holds it, instead of None: the parser would
    read it to the window's end only to be read again.
    """
    try:
        value, e = _scan_item(text, p)
    except JSONDecodeError as exc:
        if cut and (exc.pos >= len(text) or exc.msg.startswith("Unterminated string")):
            raise WindowCut from None
        return None
    except StopIteration as exc:  # (no value where one must start)
        if cut and exc.value >= len(text):
            raise WindowCut from None
        return None
    except (ValueError, RecursionError):
        return None
    if e > end:
        if cut:
            raise WindowCut
        return None
    # A ``\u`` escape of a surrogate: a pair reads the same both ways; a lone one the
    # parser reports (the scanner gives it as is), so the values are then looked at. (The
    # pattern's literal head is searched for as fast as ``str.find`` of it, which a text
    # holding emoji made twice as slow.)
    lone = _SURROGATE_ESCAPE.search(text, p, e) is not None
    length = e - p  # (one ``int`` for the table and the message's range)
    table = Positions(origin, at, length) if origin is not None else Positions(text[p:e], 0, length)
    build = _Build(table, lone)
    try:
        node = build.node(value, depth)
    except _Refused:
        return None
    node.range = RelRange(0, length)  # (the message's own range is known)
    return node, e, build.tokens


class WindowCut(Exception):
    """The C scanner read an object on to the end of its window (``scanned``'s ``cut``)."""


class _Resync(Exception):
    """A windowed parse reached its window's end where the next message would start."""

    def __init__(self, items: list[SNode], starts: list[int], counts: list[int]) -> None:
        super().__init__()
        self.items, self.starts, self.counts = items, starts, counts


class _NoResync(Exception):
    """A windowed parse reached its window's end anywhere else."""


class _TooFar(Exception):
    """A parse was about to read past its ``reach``."""


@dataclass(frozen=True, slots=True)
class MessagesParse:
    """What ``parse_messages`` read, in the coordinates of the text it was given."""

    items: tuple[SNode, ...]
    starts: tuple[int, ...]
    counts: tuple[int, ...]  # errors (of ``errors``) before each item
    errors: tuple[SyntaxIssue, ...]
    tokens: int
    # Resynchronised: the text ended where the next (unchanged) item starts. Otherwise the
    # parse ran to the end of the document: the list and the top-level object's members
    # after it.
    resynced: bool
    holder: SNode | None = None
    rest: SNode | None = None


def parse_messages(
    text: str,
    at: int,
    depth: int,
    keys: set[str] | None,
    starts: tuple[int, int],
    *,
    window: bool,
) -> MessagesParse | None:
    """Parse ``text``, which starts at ``at`` in the document, as the message list's
    items from the start of one item on (the incremental re-read); every range and start
    it returns is the document's. ``depth`` is the list's, ``starts`` where the list and
    the document start, ``keys`` the top-level keys before ``messages`` (None: the list
    is the document). With ``window``, ``text`` must end exactly where an unchanged item
    starts (else None); without, it runs to the end of the document."""
    parser = JsonParser(text, 0, len(text), messages=True)
    parser.shift = at
    return _messages_parsed(parser, at, depth, keys, starts, window)


def parse_messages_to_end(
    source: Sliced,
    at: int,
    depth: int,
    keys: set[str] | None,
    starts: tuple[int, int],
    *,
    reach: int | None = None,
) -> MessagesParse | None:
    """``parse_messages(source[at:], …, window=False)``, reading ``source`` a window at a
    time (``parse_json_windows``' way): a list ended early by an edit leaves the rest of a
    large document after it, of which a parse reads one token (``_trailing``), so what
    follows the list is read from one window first, and from there to the end only when
    the parse reaches that window's end (the whole rest at once, as ``parse_messages``).
    ``reach``: None instead of reading the list's items in windows that start past that
    place, or the whole rest."""
    n = len(source)
    first = source[at : min(n, at + WINDOW_CHARS)]
    parser = JsonParser(first, 0, len(first), messages=True)
    parser.shift = at
    parser.source, parser.doc_len, parser.rest_chars = source, n, WINDOW_CHARS
    parser.reach = reach
    try:
        res = _messages_parsed(parser, at, depth, keys, starts, False)
    except _TooFar:
        return None
    if parser.final():
        return res
    if reach is not None:
        return None
    return parse_messages(source[at:n], at, depth, keys, starts, window=False)


def _messages_parsed(
    parser: JsonParser,
    at: int,
    depth: int,
    keys: set[str] | None,
    starts: tuple[int, int],
    window: bool,
) -> MessagesParse | None:
    """``parse_messages``' parse, by ``parser`` (at ``at``)."""
    list_start, doc_start = starts[0] - at, starts[1] - at
    text = parser.text
    if window:
        parser.window = len(text)
        try:
            parser.parse_messages_from(depth, keys, list_start, doc_start)
        except _Resync as done:
            return MessagesParse(
                tuple(done.items),
                tuple(done.starts),
                tuple(done.counts),
                tuple(parser.errors),
                parser.tokens,
                True,
            )
        except _NoResync:
            return None
        return None
    holder, rest = parser.parse_messages_from(depth, keys, list_start, doc_start)
    return MessagesParse(
        holder.items,
        holder.starts or (),
        holder.error_counts or (),
        tuple(parser.errors),
        parser.tokens,
        False,
        holder,
        rest,
    )


def _rel(rels: dict[int, RelRange], start: int, end: int) -> RelRange:
    """The range ``[start, end)`` relative to a message's start, one object for each
    (``rels``: of one parse). The messages of a conversation repeat the same few places:
    ``"role"`` at 8-14 in every message of the 10 MB benchmark, whose 92,000 ranges inside
    messages are 11,000 different ones (a range and its numbers: up to 100 bytes each).
    A ``RelRange`` is a value, never changed: sharing one is as making it again."""
    k = start << 32 | end
    rel = rels.get(k)
    if rel is None:
        rel = rels[k] = RelRange(start, end)
    return rel


def _tup(starts: list[int] | None) -> tuple[int, ...] | None:
    return None if starts is None else tuple(starts)


class _Scan:
    """Whether the C string scanner may still be used on a text.

    When it rejects a string, its exception counts the lines of the whole text before it
    (``JSONDecodeError.lineno``): a text with many bad strings would cost quadratic time.
    After the first rejection the tolerant regexes read every string of that text.
    """

    __slots__ = ("strict",)

    def __init__(self) -> None:
        self.strict = True


def _decode_string(raw: str) -> str:
    if "\\" not in raw:
        return raw[1:-1]
    try:
        return _scanstring(raw, 1, False)[0]  # type: ignore[no-any-return]
    except ValueError:
        # An invalid escape: keep the text as written rather than losing the value.
        return raw[1:-1]


_CONTROL = re.compile(r"[\x00-\x1f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)
_CONTROL_NAMES = {0: "NUL", 9: "TAB", 10: "LF", 13: "CR", 27: "ESC"}


def _bad_escape(raw: str) -> re.Match[str] | None:
    for m in _ESCAPE.finditer(raw):
        if m.group(1) is None and m.group()[1:] not in _SIMPLE_ESCAPES:
            return m
    return None


_SIMPLE_ESCAPES = frozenset('"\\/bfnrt')


def _control_character(raw: str, first: re.Match[str], pos: int) -> SyntaxIssue:
    """A raw control character in a JSON string (JSON requires an escape), at the first."""
    code = ord(first.group())
    name = _CONTROL_NAMES.get(code)
    what = f"U+{code:04X}" + (f" ({name})" if name else "")
    more = len(_CONTROL.findall(raw)) - 1
    tail = f" (and {more:,} more in this string)" if more else ""
    escape = {9: "\\t", 10: "\\n", 13: "\\r"}.get(code, f"\\u{code:04x}")
    at = pos + first.start()
    msg = f"raw control character {what} in a string: write it as `{escape}`{tail}"
    return SyntaxIssue(msg, TextRange(at, at + 1))


def _replace_surrogates(raw: str, value: str, pos: int, errors: list[SyntaxIssue]) -> str:
    """Replace the lone surrogates of a decoded string by U+FFFD, each reported at its
    ``\\uXXXX`` escape: they are not characters, and no UTF-8 output can hold them."""
    pending: re.Match[str] | None = None  # a high surrogate escape waiting for its low half
    lone: list[re.Match[str]] = []
    for m in _ESCAPE.finditer(raw):
        unit = int(m.group(1), 16) if m.group(1) else -1
        if pending is not None and m.start() == pending.end() and 0xDC00 <= unit <= 0xDFFF:
            pending = None
            continue
        if pending is not None:
            lone.append(pending)
            pending = None
        if 0xD800 <= unit <= 0xDBFF:
            pending = m
        elif 0xDC00 <= unit <= 0xDFFF:
            lone.append(m)
    if pending is not None:
        lone.append(pending)
    for m in lone[:1]:
        more = f" (and {len(lone) - 1:,} more in this string)" if len(lone) > 1 else ""
        errors.append(
            SyntaxIssue(
                f"lone surrogate `{m.group()}` is not a character: read as U+FFFD{more}",
                TextRange(pos + m.start(), pos + m.end()),
            )
        )
    return _SURROGATE.sub("\ufffd", value)


def _duplicate_key(key: str, rng: TextRange) -> SyntaxIssue:
    return SyntaxIssue(
        f"duplicate key `{_clip(key)}`: only its last value is read", rng, code="schema-error"
    )


def _decode_number(raw: str) -> int | float:
    if "." in raw or "e" in raw or "E" in raw:
        return float(raw)
    return int(raw)


def _clip(s: str, n: int = 30) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _open_range(text: str, offset: int) -> TextRange:
    """An unterminated quoted scalar up to the end of its line, else the opening bracket."""
    if text[offset : offset + 1] in ("'", '"'):
        stop = len(text)
        for brk in ("\r", "\n"):
            at = text.find(brk, offset)
            if at != -1:
                stop = min(stop, at)
        return TextRange(offset, stop)
    return TextRange(offset, min(len(text), offset + 1))


def _token_range(text: str, offset: int) -> TextRange:
    end = offset
    while end < len(text) and not text[end].isspace():
        end += 1
    return TextRange(offset, end)


# --------------------------------------------------------------------------------------
# YAML


_YAML_MERGE_TAG = "tag:yaml.org,2002:merge"  # a plain `<<` key (YAML 1.1's merge key)
_YAML_STR_TAG = "tag:yaml.org,2002:str"
_BLOCK_STYLES = ("|", ">")  # a literal or folded block scalar (its range is trimmed)


class _YamlConverter:
    """Turns libyaml's composed node graph into ``SNode``s with a node budget.

    Inside an item of the message list (``convert``'s ``messages``) ranges are relative to
    the item's start, ``base``; findings are always at absolute ranges. A node reached
    again through an alias may give the same ``SNode`` in both places (``_again``)."""

    SHARE = True  # (off: every alias converted node by node; the tests compare the two)

    def __init__(self, text: str) -> None:
        import yaml

        self.text = text
        self.errors: list[SyntaxIssue] = []
        self.budget = MAX_YAML_NODES
        self.alias_budget = MAX_YAML_ALIAS_NODES
        self._seen: set[int] = set()
        self.aliased = False  # an alias was read (a node reached twice)
        self._over = False
        self._too_deep = False
        # The collections being converted (the path from the root): an alias to one of
        # them is a value that contains itself.
        self._open: set[int] = set()
        self._recursive: set[int] = set()
        # The trees of nodes reached again through aliases, with the values each counted
        # (``_again``), by node, the start its ranges are relative to, and depth.
        self._shared: dict[tuple[int, int | None, int], tuple[SNode | None, int]] = {}
        self.base: int | None = None  # the start of the message list's item being read
        self.rels: dict[int, RelRange] = {}  # ``_rel``'s ranges of this conversion
        self._mapping = yaml.MappingNode
        self._sequence = yaml.SequenceNode
        self._scalar = yaml.ScalarNode

    def _merged(self, node: Any, depth: int) -> list[Member]:
        """The members a merge key (``<<: *base`` or ``<<: [*a, *b]``) brings into its
        mapping, as PyYAML's loaders merge them: a mapping's members, or those of a list of
        mappings, an earlier mapping's key winning over a later one's."""
        sources = node.value if isinstance(node, self._sequence) else [node]
        res: list[Member] = []
        seen: set[str] = set()
        for source in sources:
            if not isinstance(source, self._mapping):
                msg = "a merge key `<<` takes a mapping or a list of mappings: this is ignored"
                self.errors.append(SyntaxIssue(msg, _yrange(source)))
                continue
            tree = self.convert(source, depth + 1)
            for m in tree.members if tree is not None else ():
                if m.key not in seen:
                    seen.add(m.key)
                    res.append(m)
        return res

    def _range(self, start: int, end: int) -> Span:
        b = self.base
        if b is None:
            return TextRange(start, end)
        # (``_rel``, without a call: a YAML message's every value comes here)
        k = (start - b) << 32 | (end - b)
        rel = self.rels.get(k)
        if rel is None:
            rel = self.rels[k] = RelRange(start - b, end - b)
        return rel

    def convert(
        self, node: Any, depth: int, messages: bool = False, again: bool = False
    ) -> SNode | None:
        """``node``'s tree; ``messages``: ``node`` is the root, and the items of its message
        list (itself if a sequence, else its last ``messages`` member's sequence) are read
        relative to their starts. ``again``: ``node`` was reached before and is converted
        node by node (``_again``)."""
        start = node.start_mark.index
        end = node.end_mark.index
        if end < start:
            end = start
        key = id(node)
        if key in self._open:
            if key not in self._recursive:  # once per anchor, not once per path
                self._recursive.add(key)
                msg = "a YAML alias inside its own anchor (a value containing itself) is ignored"
                self.errors.append(SyntaxIssue(msg, TextRange(start, end)))
            return None
        if not again and key in self._seen and self.SHARE:
            return self._again(node, depth)
        self.budget -= 1
        if key in self._seen:
            self.alias_budget -= 1
            self.aliased = True
        else:
            self._seen.add(key)
        if self.budget < 0 or self.alias_budget < 0:
            if not self._over:
                self._over = True
                what = (
                    f"aliases expand to more than {MAX_YAML_ALIAS_NODES:,} repeated values"
                    if self.alias_budget < 0
                    else f"the document has more than {MAX_YAML_NODES:,} values"
                )
                self.errors.append(
                    SyntaxIssue(
                        f"YAML {what}: the rest is ignored",
                        TextRange(start, end),
                        code="document-too-large",
                    )
                )
            return None
        if depth >= MAX_DEPTH:
            if not self._too_deep:  # one error says it all (as in JSON)
                self._too_deep = True
                msg = f"nesting deeper than {MAX_DEPTH} levels"
                self.errors.append(SyntaxIssue(msg, TextRange(start, end)))
            return None
        if node.tag not in _KNOWN_YAML_TAGS:
            self._unknown_tag(node, TextRange(start, end))
        cls = type(node)
        if cls is self._mapping or (cls is not self._scalar and isinstance(node, self._mapping)):
            self._open.add(key)
            members: list[Member] = []
            keys: set[str] = set()
            pairs = node.value
            holder = -1  # the root's last ``messages``, when its value is a sequence
            if messages:
                for i in range(len(pairs) - 1, -1, -1):
                    k = pairs[i][0]
                    if isinstance(k, self._scalar) and str(k.value) == "messages":
                        if isinstance(pairs[i][1], self._sequence):
                            holder = i
                        break
            merged: list[Member] = []
            scalar, seen, b = self._scalar, self._seen, self.base
            for i, (key_node, value_node) in enumerate(pairs):
                name = key_node.value if isinstance(key_node, scalar) else None
                if name is not None and key_node.tag == _YAML_MERGE_TAG:
                    merged += self._merged(value_node, depth)
                    continue
                if name is None:
                    self.errors.append(
                        SyntaxIssue("mapping keys must be plain strings", _yrange(key_node))
                    )
                    continue
                name = str(name)
                ks = key_node.start_mark.index
                ke = key_node.end_mark.index
                if ke < ks:
                    ke = ks
                if name in keys:
                    self.errors.append(_duplicate_key(name, TextRange(ks, ke)))
                else:
                    keys.add(name)
                vid = id(value_node)
                if (
                    type(value_node) is scalar
                    and value_node.tag == _YAML_STR_TAG
                    and value_node.style not in _BLOCK_STYLES
                    and self.budget > 0
                    and vid not in seen
                    and depth + 1 < MAX_DEPTH
                ):
                    # (Most values: a string scalar read here as ``convert`` reads it, without
                    # its call and the checks that cannot apply to it.)
                    self.budget -= 1
                    seen.add(vid)
                    vs = value_node.start_mark.index
                    ve = value_node.end_mark.index
                    if ve < vs:
                        ve = vs
                    value = SNode(
                        "string",
                        TextRange(vs, ve) if b is None else self._range(vs, ve),
                        value_node.value,
                    )
                else:
                    value = self.convert(value_node, depth + 1, i == holder)
                if value is not None:
                    members.append(
                        Member(name, TextRange(ks, ke) if b is None else self._range(ks, ke), value)
                    )
            for m in merged:  # the keys written here win, then the first merged mapping's
                if m.key not in keys:
                    keys.add(m.key)
                    members.append(m)
            self._open.discard(key)
            if members and not node.flow_style:
                end = _block_end(start, end, members[-1].value.range.end + (self.base or 0))
            return SNode("object", self._range(start, end), members=tuple(members))
        if cls is self._sequence or (cls is not self._scalar and isinstance(node, self._sequence)):
            self._open.add(key)
            children = node.value
            if depth <= 1 and len(children) > MAX_TOP_ITEMS + 1:
                children = children[: MAX_TOP_ITEMS + 1]  # the reader reports the limit
            items: list[SNode] = []
            starts: tuple[int, ...] | None = None
            if messages and self.base is None:
                # The message list: each item relative to its start (libyaml's mark).
                at: list[int] = []
                for c in children:
                    self.base = c.start_mark.index
                    try:
                        v = self.convert(c, depth + 1)
                    finally:
                        self.base = None
                    if v is not None:
                        items.append(v)
                        at.append(c.start_mark.index)
                starts = tuple(at)
                if items and not node.flow_style:
                    end = _block_end(start, end, at[-1] + items[-1].range.end)
            else:
                for c in children:
                    v = self.convert(c, depth + 1)
                    if v is not None:
                        items.append(v)
                if items and not node.flow_style:
                    end = _block_end(start, end, items[-1].range.end + (self.base or 0))
            self._open.discard(key)
            return SNode("array", self._range(start, end), items=tuple(items), starts=starts)
        if node.style in _BLOCK_STYLES:
            end = _trim_block_scalar(self.text, TextRange(start, end)).end
        if len(node.value) > MAX_NUMBER_CHARS and node.tag.endswith((":int", ":float")):
            msg = f"a number of {len(node.value):,} characters; the limit is {MAX_NUMBER_CHARS}"
            self.errors.append(SyntaxIssue(msg, TextRange(start, end)))
            return None
        return _yaml_scalar(node, self._range(start, end))

    def _again(self, node: Any, depth: int) -> SNode | None:
        """A node reached again through an alias: its tree is the one made when it was
        first reached again at this depth and from this item of the message list (ranges
        relative to the same start), when that conversion found nothing to report (a limit
        passed included), and the budgets cover the whole of it now. A conversion of it node
        by node would spend the same budgets, report nothing and make an equal tree; only
        where a limit is passed is it converted node by node (the values before it kept,
        the finding at the value past it). An alias bomb's values are then counted without
        being converted one by one each time (9 aliases of 9 aliases ...: 100,000 values, the
        limit, converted in 320 ms)."""
        shared = self._shared
        at = (id(node), self.base, depth)
        hit = shared.get(at)
        if hit is not None:
            tree, size = hit
            if self.budget >= size and self.alias_budget >= size:
                self.budget -= size
                self.alias_budget -= size  # (every node of it was reached before)
                return tree
            return self.convert(node, depth, again=True)
        budget, n_errors = self.budget, len(self.errors)
        tree = self.convert(node, depth, again=True)
        if len(self.errors) == n_errors:  # (passing a limit is reported too)
            shared[at] = (tree, budget - self.budget)
        return tree

    def _unknown_tag(self, node: Any, rng: TextRange) -> None:
        import yaml

        tag = str(node.tag)
        shown = "!!" + tag.removeprefix("tag:yaml.org,2002:") if tag.startswith("tag:") else tag
        kind = (
            "a plain mapping"
            if isinstance(node, yaml.MappingNode)
            else "a plain list"
            if isinstance(node, yaml.SequenceNode)
            else "a plain string"
        )
        at = (
            TextRange(rng.start, rng.start + len(shown))
            if self.text.startswith(shown, rng.start)
            else rng
        )
        msg = f"YAML tag `{_clip(shown)}` is not supported: the value is read as {kind}"
        self.errors.append(SyntaxIssue(msg, at, code="schema-error", severity="warning"))


# libyaml ends a block collection or a block scalar where the next token starts, after the
# line breaks, blank lines and comments that follow it; ranges end at the last value instead.


def _block_end(start: int, end: int, last: int) -> int:
    """Where a block collection from ``start`` to libyaml's ``end`` ends: where its last
    value ends, unless that value is an alias's (it lies at its anchor, elsewhere)."""
    return last if start <= last <= end else end


_TRAILING_BREAKS = re.compile(r"(?:\r?\n[ \t]*)+$")


def _trim_block_scalar(text: str, rng: TextRange) -> TextRange:
    m = _TRAILING_BREAKS.search(text, rng.start, rng.end)
    return TextRange(rng.start, m.start()) if m is not None else rng


def _yrange(node: Any) -> TextRange:
    return TextRange(node.start_mark.index, max(node.start_mark.index, node.end_mark.index))


_YAML_BOOL = {"true": True, "false": False, "yes": True, "no": False, "on": True, "off": False}


def _yaml_scalar(node: Any, rng: TextRange) -> SNode:
    tag: str = node.tag or ""
    value: str = node.value
    if tag == _YAML_STR_TAG:  # (most scalars: the tests below would all fail)
        return SNode("string", rng, value)
    if tag.endswith(":null"):
        return SNode("null", rng, None)
    if tag.endswith(":bool"):
        return SNode("bool", rng, _YAML_BOOL.get(value.lower(), False))
    if tag.endswith(":int"):
        try:
            return SNode("number", rng, int(value.replace("_", ""), 0))
        except ValueError:
            return SNode("string", rng, value)
    if tag.endswith(":float"):
        try:
            return SNode("number", rng, float(value.replace("_", "")))
        except ValueError:
            return SNode("string", rng, value)
    return SNode("string", rng, value)
