"""Map offsets in a decoded string value back to the document text it was written in.

A string the parser hands over (a message's ``content``, a prompt given inline, a tool
call's ``arguments``) is the *decoded* value: JSON escapes resolved, YAML quotes, folding
and block indentation removed. Rules find things in that value (a sentence, a tool call
written as text) and need the range in the document. ``string_offset_map`` aligns the
decoded characters with their source once and answers offset queries in O(1) (a one-line
string: by bisection over its escapes, which are all it keeps).

Supported sources, chosen from the first character of ``value_range``:

- ``"…"``: a JSON string or a YAML double-quoted scalar. Every JSON escape (``\\n``,
  ``\\"``, ``\\/``, ``\\uXXXX``, a ``\\uD83D\\uDE00`` surrogate pair as one character) and the
  YAML extras (``\\x41``, ``\\U0001F600``, ``\\N``, ``\\_``, ``\\L``, ``\\P``, ``\\e``, ``\\0``,
  ``\\ ``, escaped line breaks) are decoded; folded line breaks map to the break.
- ``'…'``: a YAML single-quoted scalar (``''`` is one quote).
- ``|`` / ``>``: a YAML block scalar; its header line is skipped and so is the block
  indentation at the start of every line.
- anything else: a YAML plain scalar (or any text written as is).

The alignment is greedy: source characters that decode to nothing (quotes, indentation,
folded white space) are skipped, and a character that cannot be explained is assumed to be
written as itself, so a surprising source never raises and only blurs nearby offsets.

Invariants: offsets are code points (Python ``str`` indices); every mapped offset lies
inside ``value_range``; mapping is monotonic (a later value offset never maps earlier).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

from assembly.text import TextRange

__all__ = ["OffsetMap", "string_offset_map"]


class OffsetMap:
    """Maps offsets in a decoded value to document offsets.

    Calling it maps a *start* boundary: ``offset`` → where the character at ``offset``
    begins in the source (``len(value)`` → where the last character ends). ``end`` maps an
    *end* boundary: ``offset`` → where the character before ``offset`` ends, which differs
    from the start of the next one when source text that decodes to nothing (a YAML line's
    indentation, an escaped line break) lies between them. ``range`` maps a half-open span.
    Offsets outside ``0..len(value)`` are clamped.

    Three forms: the value written as itself from ``base`` on (``starts`` None); every
    character's source start and end (``starts``, ``ends``); or, for a one-line string
    whose literal runs map one to one, its escapes alone (``escaped``: ``OffsetMap.escapes``),
    looked up by bisection, so that a long prompt with a few hundred escapes costs a few
    hundred entries rather than two per character.
    """

    __slots__ = ("_at", "_base", "_ends", "_length", "_sizes", "_starts", "_stop")

    def __init__(
        self, starts: list[int] | None, ends: list[int] | None, stop: int, *, base: int = 0
    ) -> None:
        # ``starts``/``ends`` None: the value is written as itself from ``base`` on.
        self._starts = starts
        self._ends = ends
        self._stop = stop  # where the value's source ends (before a closing quote)
        self._base = base
        self._length = len(starts) if starts is not None else stop - base
        self._at: list[int] | None = None  # escapes' offsets in the value (``escapes``)
        self._sizes: list[int] = []

    @classmethod
    def escapes(
        cls, base: int, stop: int, length: int, at: list[int], starts: list[int], sizes: list[int]
    ) -> OffsetMap:
        """A value of ``length`` characters written from ``base`` to ``stop``, each
        character as itself but the escapes: the one at value offset ``at[k]`` is written
        at ``starts[k]`` in ``sizes[k]`` characters."""
        res = cls(starts, None, stop, base=base)
        res._at, res._sizes, res._length = at, sizes, length
        return res

    def __call__(self, offset: int) -> int:
        offset = max(0, offset)
        if self._at is not None:
            if offset < self._length:
                return self._escaped_start(offset)
            return self._escaped_end(self._length - 1) if self._length else self._stop
        if self._starts is None or self._ends is None:
            return self._base + min(offset, self._length)
        if offset >= self._length:
            return self._ends[-1] if self._length else self._stop
        return self._starts[offset]

    def end(self, offset: int) -> int:
        if offset <= 0:
            return self(0)
        if self._at is not None:
            return self._escaped_end(min(offset, self._length) - 1) if self._length else self._stop
        if self._ends is None:
            return self._base + min(offset, self._length)
        return self._ends[min(offset, self._length) - 1]

    def _escaped_end(self, c: int) -> int:
        """Where character ``c`` ends in the source (``escapes`` form)."""
        k = bisect_right(self._at, c) - 1  # type: ignore[arg-type]
        if k >= 0 and self._at[k] == c:  # type: ignore[index]
            return self._starts[k] + self._sizes[k]  # type: ignore[index]
        return self._escaped_start(c) + 1

    def _escaped_start(self, offset: int) -> int:
        at, starts = self._at, self._starts
        k = bisect_right(at, offset) - 1  # type: ignore[arg-type]
        if k < 0:
            return self._base + offset  # before the first escape
        if at[k] == offset:  # type: ignore[index]
            return starts[k]  # type: ignore[index]
        return starts[k] + self._sizes[k] + (offset - at[k] - 1)  # type: ignore[index]

    def range(self, start: int, end: int) -> TextRange:
        """Map the decoded span ``[start, end)``; an empty span maps to an empty range."""
        lo = self(start)
        if end <= start:
            return TextRange(lo, lo)
        return TextRange(lo, max(lo, self.end(end)))


def string_offset_map(text: str, value_range: TextRange, value: str) -> OffsetMap:
    """Align the decoded ``value`` with its source ``text[value_range]``.

    Args:
        text: the whole document text.
        value_range: the range of the string node in ``text`` (quotes included for quoted
            strings; from the ``|``/``>`` indicator for YAML block scalars).
        value: the decoded string the parser produced for that node.

    Returns:
        An ``OffsetMap``: a callable from an offset in ``value`` to an offset in ``text``.
    """
    start, end = value_range.start, min(value_range.end, len(text))
    first = text[start] if start < end else ""
    if first in ("'", '"'):
        inner_start = start + 1
        inner_end = end - 1 if end - start >= 2 and text[end - 1] == first else end
        if text.startswith(value, inner_start) and inner_start + len(value) == inner_end:
            return OffsetMap(None, None, inner_end, base=inner_start)  # nothing escaped
        if first == '"':
            fast = _single_line_escaped(text, inner_start, inner_end, value)
            if fast is not None:
                return fast
        escapes = _double_quoted_escape if first == '"' else _single_quoted_escape
        aligner = _Aligner(text, inner_start, inner_end, escapes=escapes)
    elif first in ("|", ">"):
        body = text.find("\n", start, end)
        body = end if body == -1 else body + 1
        indent = _block_indent(text, start, body, end)
        aligner = _Aligner(text, body, end, indent=indent, at_line_start=True)
    else:
        if text.startswith(value, start) and start + len(value) == end:
            return OffsetMap(None, None, end, base=start)  # written as itself
        aligner = _Aligner(text, start, end)
    return aligner.align(value)


# An escape reader: at ``text[p] == "\\"`` (or another escape start) return the readings
# ``(decoded text, source length)``, most likely first, or None when ``p`` starts no escape.
_EscapeReader = Callable[[str, int, int], tuple[tuple[str, int], ...] | None]

_SIMPLE_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    # YAML only.
    "0": "\0",
    "a": "\a",
    "v": "\v",
    "e": "\x1b",
    " ": " ",
    "\t": "\t",
    "N": "\x85",
    "_": "\xa0",
    "L": "\u2028",
    "P": "\u2029",
}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_LINE_BREAK = ""  # the decoded text of an escaped line break: nothing


def _double_quoted_escape(text: str, p: int, end: int) -> tuple[tuple[str, int], ...] | None:
    if text[p] != "\\" or p + 1 >= end:
        return None
    c = text[p + 1]
    if c in _SIMPLE_ESCAPES:
        return ((_SIMPLE_ESCAPES[c], 2),)
    if c in "\r\n":
        # An escaped line break: the break and the next line's indentation vanish.
        q = p + 2 if c == "\n" or text[p + 2 : p + 3] != "\n" else p + 3
        while q < end and text[q] in " \t":
            q += 1
        return ((_LINE_BREAK, q - p),)
    width = _HEX_ESCAPES.get(c)
    if width is None:
        return None
    digits = text[p + 2 : p + 2 + width]
    if len(digits) != width or any(d not in "0123456789abcdefABCDEF" for d in digits):
        return None
    code = int(digits, 16)
    if c == "u" and 0xD800 <= code < 0xDC00 and text[p + 6 : p + 8] == "\\u":
        low_digits = text[p + 8 : p + 12]
        if len(low_digits) == 4 and all(d in "0123456789abcdefABCDEF" for d in low_digits):
            low = int(low_digits, 16)
            if 0xDC00 <= low < 0xE000:
                pair = chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00))
                # The pair is one character; a decoder that kept the surrogates apart
                # matches the first escape alone.
                return ((pair, 12), (chr(code), 6))
    if code > 0x10FFFF:
        return None
    return ((chr(code), 2 + width),)


def _single_line_escaped(text: str, start: int, end: int, value: str) -> OffsetMap | None:
    """Map a one-line double-quoted string (every JSON string) by its escapes, or None.

    Literal runs between backslashes map one to one, each escape to one character; None
    when the source has a line break or does not decode to ``value`` this way.
    """
    if text.find("\n", start, end) != -1:
        return None
    at: list[int] = []
    starts: list[int] = []
    sizes: list[int] = []
    p, i = start, 0
    while True:
        q = text.find("\\", p, end)
        stop = end if q == -1 else q
        if not value.startswith(text[p:stop], i):
            return None
        i += stop - p
        if q == -1:
            break
        simple = _SIMPLE_ESCAPES.get(text[q + 1 : q + 2])
        if simple is not None and value.startswith(simple, i):
            length = 2  # (most escapes: ``\n``, ``\"``)
        else:
            escape = _double_quoted_escape(text, q, end)
            if escape is None:
                return None
            length = next((n for c, n in escape if c and value.startswith(c, i)), 0)
            if not length:
                return None
        at.append(i)
        starts.append(q)
        sizes.append(length)
        i += 1
        p = q + length
    return OffsetMap.escapes(start, end, i, at, starts, sizes) if i == len(value) else None


def _single_quoted_escape(text: str, p: int, end: int) -> tuple[tuple[str, int], ...] | None:
    if text[p] == "'" and p + 1 < end and text[p + 1] == "'":
        return (("'", 2),)
    return None


def _block_indent(text: str, indicator: int, body: int, end: int) -> int:
    """The indentation of a block scalar's content lines."""
    header = text[indicator:body]
    explicit = next((ch for ch in header[1:3] if ch in "123456789"), None)
    if explicit is not None:
        # The indicator is relative to the parent's indentation: the first non-blank,
        # non-"- " column of the header's line approximates it.
        line_start = text.rfind("\n", 0, indicator) + 1
        col = line_start
        while col < indicator and text[col] in " \t-":
            col += 1
        return (col - line_start) + int(explicit)
    p = body
    while p < end:
        q = p
        while q < end and text[q] == " ":
            q += 1
        if q < end and text[q] not in "\r\n":
            return q - p
        nl = text.find("\n", q, end)
        if nl == -1:
            return q - p
        p = nl + 1
    return 0


class _Aligner:
    """Walks the source once, giving each decoded character its source span."""

    __slots__ = ("at_line_start", "end", "escapes", "indent", "p", "text")

    def __init__(
        self,
        text: str,
        start: int,
        end: int,
        *,
        escapes: _EscapeReader | None = None,
        indent: int | None = None,
        at_line_start: bool = False,
    ) -> None:
        self.text = text
        self.p = start
        self.end = max(start, end)
        self.escapes = escapes
        self.indent = indent  # block scalars: skip this many spaces at a line start
        self.at_line_start = at_line_start

    def align(self, value: str) -> OffsetMap:
        starts: list[int] = []
        ends: list[int] = []
        for c in value:
            span = self._match(c)
            starts.append(span[0])
            ends.append(span[1])
        return OffsetMap(starts, ends, self.p)

    def _skip_indentation(self) -> None:
        text, end = self.text, self.end
        if self.indent is None:
            while self.p < end and text[self.p] in " \t":
                self.p += 1
        else:
            limit = min(end, self.p + self.indent)
            while self.p < limit and text[self.p] == " ":
                self.p += 1
        self.at_line_start = False

    def _match(self, c: str) -> tuple[int, int]:
        """Find ``c`` at the current position, skipping what decodes to nothing."""
        text, end = self.text, self.end
        resume = self.p
        while self.p < end:
            if self.at_line_start:
                self._skip_indentation()
                if self.p >= end:
                    break
            p = self.p
            ch = text[p]
            if self.escapes is not None:
                escape = self.escapes(text, p, end)
                if escape is not None:
                    length = next((n for decoded, n in escape if decoded == c), 0)
                    if length:
                        self.p = p + length
                        return p, p + length
                    if escape[0][0] == _LINE_BREAK:
                        self.p = p + escape[0][1]
                        continue
            if ch == c or (ch in "\r\n" and c in "\n "):
                length = 2 if ch == "\r" and text[p + 1 : p + 2] == "\n" else 1
                self.p = p + length
                if ch in "\r\n":
                    self.at_line_start = True
                return p, p + length
            if ch in " \t\r\n\"'":
                # Decodes to nothing here: indentation, folded white space, a quote.
                self.p = p + 1
                if ch == "\n" or (ch == "\r" and text[p + 1 : p + 2] != "\n"):
                    self.at_line_start = True
                continue
            break
        # Not explained by the source: assume the character is written as itself.
        self.p = resume
        self.at_line_start = False
        if self.p < end:
            self.p += 1
            return self.p - 1, self.p
        return end, end
