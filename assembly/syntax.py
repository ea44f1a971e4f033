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
message granularity by the caller: a message is a self-contained subtree.

YAML goes through libyaml's composer (PyYAML ``CSafeLoader``), whose marks are code-point
offsets; aliases are never expanded beyond a node budget, so alias bombs end in a
diagnostic rather than in memory exhaustion.
"""

from __future__ import annotations

import contextlib
import gc
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from json.decoder import scanstring as _scanstring  # type: ignore[attr-defined]
from typing import Any, Literal

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
# YAML tags that are read as they say; any other (``!!binary``, ``!foo``) is reported.
_KNOWN_YAML_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}"
    for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp")
)


@dataclass(frozen=True, slots=True, eq=False)
class Member:
    """One ``key: value`` pair of an object, with the key's own range."""

    key: str
    key_range: Span
    value: SNode


@dataclass(frozen=True, slots=True, eq=False)
class SNode:
    """A value of the source tree.

    ``value`` holds the Python value of a scalar (str, int, float, bool or None); containers
    keep their children in ``items`` (arrays) or ``members`` (objects, in source order).
    """

    kind: NodeKind
    range: Span
    value: Any = None
    items: tuple[SNode, ...] = ()
    members: tuple[Member, ...] = ()
    # The list of messages (the top-level array, the top-level object's ``messages``, the
    # lines of JSON Lines): each item's subtree is stored relative to the item's start
    # (``RelRange``s), and ``starts`` gives those starts in this version of the text, so an
    # item's subtree is shared by every version in which it did not change.
    starts: tuple[int, ...] | None = None
    # Of the message list: how many syntax errors the parse had found before each item
    # (an incremental re-parse keeps those and parses again from an item on).
    error_counts: tuple[int, ...] | None = None

    def get(self, key: str) -> SNode | None:
        """Return the value of ``key`` (the last one when a key repeats)."""
        res = None
        for m in self.members:
            if m.key == key:
                res = m.value
        return res

    def member(self, key: str) -> Member | None:
        res = None
        for m in self.members:
            if m.key == key:
                res = m
        return res

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
            items = tuple(absolute(n, s) for n, s in zip(node.items, node.starts, strict=True))
        else:
            items = tuple(absolute(n, base) for n in node.items)
        return SNode("array", r, node.value, items)
    if r is node.range:
        return node
    return SNode(node.kind, r, node.value)


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
    lex_errors: int = 0  # JSON: of ``errors``, how many the tokenizer found (they come first)


def parse_json(text: str, *, messages: bool = False) -> ParsedData:
    """Parse JSON text; never raises.

    With ``messages``, the items of the message list (the top-level array, or the
    top-level object's ``messages``) are read relative to their own starts (``SNode.starts``);
    otherwise every range is absolute.
    """
    with gc_paused():
        return _parse_json(text, messages)


def _parse_json(text: str, messages: bool) -> ParsedData:
    parser = JsonParser(text, 0, len(text), messages=messages)
    lex_errors = len(parser.errors)
    root = parser.parse_document()
    return ParsedData(root, tuple(parser.errors), tokens=len(parser.toks), lex_errors=lex_errors)


def parse_jsonl(text: str, *, messages: bool = False) -> ParsedData:
    """Parse JSON Lines: one value per non-blank line, each parsed on its own.

    The root is an array of the lines' values; a line that cannot be read at all is left
    out of the array and reported. A syntax error never spills into the next line. With
    ``messages``, each line is read relative to its start (``SNode.starts``).
    """
    with gc_paused():
        return _parse_jsonl(text, messages)


def _parse_jsonl(text: str, messages: bool) -> ParsedData:
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
    try_spanning = True
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
        if text[start:end].strip():
            parser = JsonParser(text, start, end, start if messages else None, scan)
            tokens += len(parser.toks)
            node = parser.parse_document(what="line")
            spanning: tuple[SNode, int] | None = None
            if parser.errors and try_spanning:
                spanning = _spanning_value(text, start, scan, messages)
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


def _spanning_value(text: str, start: int, scan: _Scan, messages: bool) -> tuple[SNode, int] | None:
    """The JSON value starting on the line at ``start`` and where it ends, when it is whole
    and valid only over several lines (its line alone does not parse), else None."""
    i = start
    while i < len(text) and text[i] in " \t\r":
        i += 1
    if i >= len(text) or text[i] not in "{[":
        return None
    parser = JsonParser(text, i, len(text), start if messages else None, scan)
    node = parser._value(0)
    if parser.errors or node is None:
        return None
    end = parser.toks[parser.i - 1][3]
    if "\n" not in text[i:end]:
        return None
    rest = text.find("\n", end)
    tail = text[end : rest if rest != -1 else len(text)]
    return (node, end) if not tail.strip() else None


def parse_yaml(text: str) -> ParsedData:
    """Parse one YAML document with libyaml's composer; never raises.

    On a syntax error, the longest prefix of whole lines before the error that parses is
    kept as the tree (so a half-typed document still shows what could be read), and the
    error is reported at libyaml's mark. ``tokens`` is the number of values read, 0 when
    an alias repeats one (such a text is only ever read whole).

    ``compose_yaml``, ``convert_yaml``, ``yaml_issue`` and ``yaml_prefix_tree`` are its
    steps; ``formats.yamldoc`` runs them on one piece of a document.
    """
    with gc_paused():
        return _parse_yaml(text)


def _parse_yaml(text: str) -> ParsedData:
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
        mark = getattr(exc, "position", 0) or 0
        issue = SyntaxIssue(f"invalid YAML: {exc}", _token_range(text, min(mark, len(text))))
        return ParsedData(None, (issue,))
    if node is None:
        return ParsedData(None)
    return convert_yaml(node, text)


def compose_yaml(text: str) -> Any:
    """libyaml's node graph of ``text`` (PyYAML's ``CSafeLoader``); raises ``yaml.YAMLError``."""
    import yaml

    return yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def convert_yaml(node: Any, text: str, depth: int = 0) -> ParsedData:
    """The source tree of a composed node graph of ``text`` (its root ``depth`` deep in the
    document), with the conversion's findings and the values read (0 after an alias)."""
    converter = _YamlConverter(text)
    root = converter.convert(node, depth)
    tokens = 0 if converter.aliased else MAX_YAML_NODES - converter.budget
    return ParsedData(root, tuple(converter.errors), tokens=tokens)


def yaml_issue(text: str, exc: Any, more: bool = False) -> tuple[SyntaxIssue, int]:
    """How libyaml's error ``exc`` in ``text`` is reported, and the offset before which
    ``yaml_prefix_tree`` looks; ``more``: the document goes on after ``text``."""
    mark = exc.problem_mark or exc.context_mark
    offset = min(mark.index, len(text)) if mark is not None else 0
    message = f"invalid YAML: {exc.problem or exc.context or 'syntax error'}"
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
_LOOSE_STRING = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')
_SCALAR = re.compile(
    r"(?:(?P<n>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)(?![0-9A-Za-z_.])"
    r"|(?P<l>true|false|null)(?![0-9A-Za-z_]))"
)
_UNTERMINATED = re.compile(r'"[^"\\\r\n]*(?:\\[^\r\n]?[^"\\\r\n]*)*')
_BAREWORD = re.compile(r"[^ \t\r\n{}\[\]:,\"]+")
_STRING, _PUNCT, _NUMBER, _LITERAL, EOF, _BAD = 1, 2, 3, 4, 5, 6
_LITERALS = {"true": True, "false": False, "null": None}


class JsonParser:
    """Recursive descent over regex tokens, with recovery.

    Recovery: an unexpected token is reported and skipped; a missing comma is reported and
    assumed; unclosed containers are closed at the end of the input (one error at the
    opening bracket, unless nesting was already too deep: one error says it all then, where
    a 10,000-bracket text would flood the editor); a member whose value is missing gets no
    value and is dropped, so consumers see only complete members.
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
    ) -> None:
        self.text = text
        # Ranges of nodes inside an item of the message list (the top-level array, or the
        # array that is the top-level object's ``messages``) are relative to that item's
        # start, ``base`` (``RelRange``s); None: outside such an item, ranges are absolute.
        # A parser given a base reads one item (a message, a JSON Lines line) on its own.
        self.base = base
        self.messages = messages  # read the message list's items relative to their starts
        self.window: int | None = None  # an incremental parse's window end (``_items``)
        self.shift = 0  # where ``text`` starts in the document (an incremental parse's window)
        self.holder_next = False  # the next array read is the top-level ``messages``
        self.too_deep = False
        self.errors: list[SyntaxIssue] = []
        self.toks = _tokenize(text, start, end, self.errors, scan or _Scan())
        # Cut short at the token limit: what is left open is not the author's mistake.
        self.too_deep = bool(self.errors) and self.errors[-1].code == "document-too-large"
        self.i = 0

    # Tokens: (kind, raw text, start, end, decoded value); a string's raw text is ""
    # (``text[start:end]`` when needed): slicing every string would copy the document.
    def _peek(self) -> tuple[int, str, int, int, Any]:
        return self.toks[self.i]

    def _next(self) -> tuple[int, str, int, int, Any]:
        tok = self.toks[self.i]
        if tok[0] != EOF:
            self.i += 1
        return tok

    def _range(self, start: int, end: int) -> Span:
        b = self.base
        if b is None:
            return TextRange(start + self.shift, end + self.shift)
        return RelRange(start - b, end - b)

    def _error(self, message: str, start: int, end: int) -> None:
        s = start + self.shift
        self.errors.append(SyntaxIssue(message, TextRange(s, max(s, end + self.shift))))

    def parse_document(self, what: str = "document") -> SNode | None:
        tok = self._peek()
        if tok[0] == EOF:
            if what == "document":
                self._error("empty document: expected a JSON object or array", tok[2], tok[2])
            return None
        node = self._value(0)
        self._trailing(what)
        return node

    def _trailing(self, what: str) -> None:
        tok = self._peek()
        while tok[0] != EOF:
            self._error(f"unexpected content after the end of the {what}", tok[2], tok[3])
            self._next()
            if tok[0] == _PUNCT and tok[1] in "{[":
                self._skip_container()
            tok = self._peek()

    def parse_messages_from(
        self, depth: int, keys: set[str] | None, list_start: int, doc_start: int
    ) -> tuple[SNode, SNode | None]:
        """Parse as if inside the message list (an array at ``depth``) at the start of an
        item, to the end of the text: the list (its range starts at 0, its items are
        those read here) and, when the list is the value of the top-level object's
        ``messages`` (``keys``: the keys before it), that object's members after it (its
        range too starts at 0). In a window, ``_Resync``/``_NoResync`` end it early."""
        holder = self._items(depth, list_start, [], [], [])
        rest = None
        if keys is not None:
            rest = self._members(0, doc_start, [], set(keys), after=holder)
        self._trailing("document")
        return holder, rest

    def _skip_to_close(self) -> None:
        """Skip the items left in the array being read, up to its closing bracket."""
        depth = 0
        while True:
            tok = self._peek()
            if tok[0] == EOF:
                return
            if tok[0] == _PUNCT:
                if tok[1] in "{[":
                    depth += 1
                elif tok[1] in "}]":
                    if depth == 0:
                        return
                    depth -= 1
            self.i += 1

    def _skip_container(self) -> None:
        """Skip to the bracket closing the one just read (any kind: this is recovery)."""
        self._skip_to_close()
        if self._peek()[0] != EOF:
            self.i += 1  # the closing bracket

    def _value(self, depth: int) -> SNode | None:
        tok = self._peek()
        kind, raw, start, end, decoded = tok
        if kind == _STRING:
            self.i += 1
            b = self.base
            if b is None:
                return SNode("string", TextRange(start + self.shift, end + self.shift), decoded)
            return SNode("string", RelRange(start - b, end - b), decoded)
        if kind == _NUMBER:
            self.i += 1
            if len(raw) > MAX_NUMBER_CHARS:
                msg = f"a number of {len(raw):,} characters; the limit is {MAX_NUMBER_CHARS}"
                self._error(msg, start, end)
                return None
            return SNode("number", self._range(start, end), _decode_number(raw))
        if kind == _LITERAL:
            self._next()
            value = _LITERALS[raw]
            return SNode("null" if value is None else "bool", self._range(start, end), value)
        if kind == _PUNCT and raw in "{[":
            if depth >= MAX_DEPTH:
                self._error(f"nesting deeper than {MAX_DEPTH} levels", start, end)
                self.too_deep = True
                self._next()
                self._skip_container()
                return None
            return self._object(depth) if raw == "{" else self._array(depth)
        if kind == _BAD:
            self._next()
            self._error(raw, start, end)
            return None
        if kind == EOF:
            if self.window is not None:
                raise _NoResync
            self._error("expected a value", start, start)
            return None
        self._error(f"expected a value, found `{raw}`", start, end)
        return None

    def _object(self, depth: int) -> SNode:
        open_tok = self._next()
        return self._members(depth, open_tok[2], [], set(), None)

    def _members(
        self,
        depth: int,
        start: int,
        members: list[Member],
        keys: set[str],
        after: SNode | None,
    ) -> SNode:
        """The members of an object from the current token on (``after``: the value of
        the last member in ``members`` was just read; resumes a parse there)."""
        if after is not None:
            self._after_value(after, "}")
        while True:
            tok = self._peek()
            kind, raw, s, e, decoded = tok
            if kind == _PUNCT and raw == "}":
                self._next()
                return SNode("object", self._range(start, e), members=tuple(members))
            if kind == EOF:
                if self.window is not None:
                    raise _NoResync
                if not self.too_deep:
                    self._error("unclosed object: expected `}`", start, start + 1)
                # It ends with the last token read, not with the whitespace before the EOF.
                return SNode(
                    "object", self._range(start, self.toks[self.i - 1][3]), members=tuple(members)
                )
            if kind == _PUNCT and raw == ",":
                self._next()
                self._error("unexpected `,`", s, e)
                continue
            if kind == _PUNCT and raw == "]":
                self._next()
                self._error("unexpected `]` in an object", s, e)
                continue
            if kind != _STRING:
                if kind == _BAD:
                    self._next()
                    self._error(raw, s, e)
                elif kind == _PUNCT and raw in "{[":
                    self._error("expected a property name in double quotes", s, e)
                    self._next()
                    self._skip_container()
                else:
                    self._next()
                    self._error(f"expected a property name in double quotes, found `{raw}`", s, e)
                continue
            self.i += 1
            key = decoded
            key_range = self._range(s, e)
            if key in keys:
                self.errors.append(_duplicate_key(key, TextRange(s + self.shift, e + self.shift)))
            else:
                keys.add(key)
            tok = self._peek()
            if tok[0] == _PUNCT and tok[1] == ":":
                self._next()
            else:
                self._error(f"expected `:` after property name {self.text[s:e]}", e, e)
                if tok[0] == _PUNCT and tok[1] in ",}":
                    if tok[1] == ",":
                        self._next()
                    continue
            self.holder_next = depth == 0 and key == "messages"
            value = self._value(depth + 1)
            self.holder_next = False
            if value is not None:
                members.append(Member(key, key_range, value))
            self._after_value(value, "}")

    def _after_value(self, value: SNode | None, close: str) -> None:
        """What may follow an object's member or an array's item: a comma (not trailing)
        or the container's ``close``; anything else is reported where the comma belongs."""
        tok = self._peek()
        if tok[0] == _PUNCT and tok[1] == ",":
            self._next()
            nxt = self._peek()
            if nxt[0] == _PUNCT and nxt[1] == close:
                self._error("trailing comma", tok[2], tok[3])
        elif (tok[0] == _PUNCT and tok[1] == close) or tok[0] == EOF:
            return
        else:
            # Where the comma belongs: right after the value, not over the whitespace.
            at = self.toks[self.i - 1][3] if value else tok[2]
            self._error(f"expected `,` or `{close}`", at, at)

    def _array(self, depth: int) -> SNode:
        open_tok = self._next()
        start = open_tok[2]
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
        """The items of an array from the current token on (resumes a parse there).

        For the message list, ``starts`` and ``counts`` (the number of errors before each
        item) grow with ``items``. In a window (``window``), reaching its end where the
        next item would start raises ``_Resync``; anywhere else, ``_NoResync``.
        """
        while True:
            tok = self._peek()
            kind, raw, s, e, _ = tok
            if kind == _PUNCT and raw == "]":
                self._next()
                return SNode(
                    "array",
                    self._range(start, e),
                    items=tuple(items),
                    starts=_tup(starts),
                    error_counts=_tup(counts),
                )
            if kind == EOF:
                if self.window is not None:
                    prev = self.toks[self.i - 1] if self.i else None
                    if starts is not None and prev is not None and prev[1] == ",":
                        raise _Resync(items, starts, counts or [])
                    raise _NoResync
                if not self.too_deep:
                    self._error("unclosed array: expected `]`", start, start + 1)
                return SNode(
                    "array",
                    self._range(start, self.toks[self.i - 1][3]),
                    items=tuple(items),
                    starts=_tup(starts),
                    error_counts=_tup(counts),
                )
            if kind == _PUNCT and raw in ",}:":
                self._next()
                self._error(f"unexpected `{raw}` in an array", s, e)
                continue
            if depth <= 1 and self.base is None and len(items) > MAX_TOP_ITEMS:
                # Past the message limit (reported by the reader): skip, build nothing.
                self._skip_to_close()
                continue
            if starts is not None:
                self.base = s
                n_errors = len(self.errors)
                value = self._value(depth + 1)
                self.base = None
                if value is not None:
                    starts.append(s + self.shift)
                    counts.append(n_errors)  # type: ignore[union-attr]
            else:
                value = self._value(depth + 1)
            if value is not None:
                items.append(value)
            self._after_value(value, "]")


class _Resync(Exception):
    """A windowed parse reached its window's end where the next message would start."""

    def __init__(self, items: list[SNode], starts: list[int], counts: list[int]) -> None:
        super().__init__()
        self.items, self.starts, self.counts = items, starts, counts


class _NoResync(Exception):
    """A windowed parse reached its window's end anywhere else."""


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
    if parser.errors:
        return None  # the tokenizer's findings come first in a whole parse: parse it all
    parser.shift = at
    parser.errors = [
        SyntaxIssue(e.message, e.range.shift(at), e.code, e.severity) for e in parser.errors
    ]
    list_start, doc_start = starts[0] - at, starts[1] - at
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
                len(parser.toks),
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
        len(parser.toks),
        False,
        holder,
        rest,
    )


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


def _tokenize(
    text: str, pos: int, end: int, errors: list[SyntaxIssue], scan: _Scan
) -> list[tuple[int, str, int, int, Any]]:
    """Split ``text[pos:end]`` into tokens; the last one is always ``EOF``.

    Strings are decoded by the C scanner of the ``json`` module; one that it rejects (an
    unterminated string, a raw control character) is re-read by the tolerant regexes.
    Problems inside a string (a raw control character, a lone surrogate escape) and the
    token limit go to ``errors``; after ``MAX_JSON_TOKENS`` tokens the rest is not read.
    """
    toks: list[tuple[int, str, int, int, Any]] = []
    append = toks.append
    ws = _WS.match
    scalar = _SCALAR.match
    limit = MAX_JSON_TOKENS
    while True:
        pos = ws(text, pos, end).end()
        if pos >= end:
            append((EOF, "", end, end, None))
            return toks
        if len(toks) >= limit:
            msg = f"more than {limit:,} JSON tokens: the rest of the text is not read"
            errors.append(SyntaxIssue(msg, TextRange(pos, pos), code="document-too-large"))
            append((EOF, "", pos, pos, None))
            return toks
        c = text[pos]
        if c == '"':
            stop = -1
            if scan.strict:
                try:
                    value, stop = _scanstring(text, pos + 1, True)
                except ValueError:
                    scan.strict = False
            if stop == -1 or stop > end:
                m = _LOOSE_STRING.match(text, pos, end)
                if m is not None:
                    stop = m.end()
                    raw = text[pos:stop]
                    value = _decode_string(raw)
                    ctrl = _CONTROL.search(raw)
                    if ctrl is not None:
                        errors.append(_control_character(raw, ctrl, pos))
                    bad = _bad_escape(raw)
                    if bad is not None:
                        at = pos + bad.start()
                        msg = f"invalid escape `{_clip(bad.group())}` in a string"
                        errors.append(SyntaxIssue(msg, TextRange(at, at + len(bad.group()))))
                    if _SURROGATE.search(value) is not None:
                        value = _replace_surrogates(raw, value, pos, errors)
                    append((_STRING, "", pos, stop, value))
                else:
                    m = _UNTERMINATED.match(text, pos, end)
                    assert m is not None
                    stop = m.end()
                    append((_BAD, "unterminated string", pos, stop, None))
            else:
                # No slice of the source per string: the value is what is read; the raw
                # text is sliced again only for a message about it (``_STRING``'s raw is "").
                if text.find("\\u", pos, stop) != -1 and _SURROGATE.search(value) is not None:
                    value = _replace_surrogates(text[pos:stop], value, pos, errors)
                append((_STRING, "", pos, stop, value))
            pos = stop
        elif c in "{}[]:,":
            append((_PUNCT, c, pos, pos + 1, None))
            pos += 1
        else:
            m = scalar(text, pos, end)
            if m is not None:
                kind = _NUMBER if m.lastindex == 1 else _LITERAL
                append((kind, m.group(m.lastindex or 0), pos, m.end(), None))
                pos = m.end()
            else:
                m = _BAREWORD.match(text, pos, end)
                stop = m.end() if m is not None else pos + 1
                append((_BAD, f"unexpected `{_clip(text[pos:stop])}`", pos, stop, None))
                pos = stop


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


class _YamlConverter:
    """Turns libyaml's composed node graph into ``SNode``s with a node budget."""

    def __init__(self, text: str) -> None:
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

    def convert(self, node: Any, depth: int) -> SNode | None:
        import yaml

        rng = TextRange(node.start_mark.index, max(node.start_mark.index, node.end_mark.index))
        if id(node) in self._open:
            if id(node) not in self._recursive:  # once per anchor, not once per path
                self._recursive.add(id(node))
                msg = "a YAML alias inside its own anchor (a value containing itself) is ignored"
                self.errors.append(SyntaxIssue(msg, rng))
            return None
        self.budget -= 1
        if id(node) in self._seen:
            self.alias_budget -= 1
            self.aliased = True
        else:
            self._seen.add(id(node))
        if self.budget < 0 or self.alias_budget < 0:
            if not self._over:
                self._over = True
                what = (
                    f"aliases expand to more than {MAX_YAML_ALIAS_NODES:,} repeated values"
                    if self.alias_budget < 0
                    else f"the document has more than {MAX_YAML_NODES:,} values"
                )
                self.errors.append(
                    SyntaxIssue(f"YAML {what}: the rest is ignored", rng, code="document-too-large")
                )
            return None
        if depth >= MAX_DEPTH:
            if not self._too_deep:  # one error says it all (as in JSON)
                self._too_deep = True
                self.errors.append(SyntaxIssue(f"nesting deeper than {MAX_DEPTH} levels", rng))
            return None
        if node.tag not in _KNOWN_YAML_TAGS:
            self._unknown_tag(node, rng)
        if isinstance(node, yaml.MappingNode):
            self._open.add(id(node))
            members: list[Member] = []
            keys: set[str] = set()
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
                if key is None:
                    self.errors.append(
                        SyntaxIssue("mapping keys must be plain strings", _yrange(key_node))
                    )
                    continue
                key = str(key)
                if key in keys:
                    self.errors.append(_duplicate_key(key, _yrange(key_node)))
                else:
                    keys.add(key)
                value = self.convert(value_node, depth + 1)
                if value is not None:
                    members.append(Member(key, _yrange(key_node), value))
            self._open.discard(id(node))
            if members and not node.flow_style:
                rng = TextRange(rng.start, members[-1].value.range.end)
            return SNode("object", rng, members=tuple(members))
        if isinstance(node, yaml.SequenceNode):
            self._open.add(id(node))
            children = node.value
            if depth <= 1 and len(children) > MAX_TOP_ITEMS + 1:
                children = children[: MAX_TOP_ITEMS + 1]  # the reader reports the limit
            items = [v for v in (self.convert(c, depth + 1) for c in children) if v is not None]
            self._open.discard(id(node))
            if items and not node.flow_style:
                rng = TextRange(rng.start, items[-1].range.end)
            return SNode("array", rng, items=tuple(items))
        if node.style in ("|", ">"):
            rng = _trim_block_scalar(self.text, rng)
        if len(node.value) > MAX_NUMBER_CHARS and node.tag.endswith((":int", ":float")):
            msg = f"a number of {len(node.value):,} characters; the limit is {MAX_NUMBER_CHARS}"
            self.errors.append(SyntaxIssue(msg, rng))
            return None
        return _yaml_scalar(node, rng)

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
