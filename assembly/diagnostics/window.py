"""Reading the document text through small windows: what rules may do with ``ctx.text``.

``RuleContext.text`` may be a ``Rope`` in the language server: an immutable text that
supports ``len``, ``[i]``, ``[a:b]`` and ``str()``, where ``str()`` of a 10 MB document
costs tens of milliseconds. Rules therefore only index and slice it; the helpers here do
what they used to do with ``str`` methods over the whole text (``find``, ``rfind``,
``in``, ``sourcemap.string_offset_map``) on slices around the place they look at, so a
lookup costs what it reads, not the size of the document. They accept a plain ``str`` too
and answer exactly what the ``str`` methods answer.
"""

from __future__ import annotations

from typing import Protocol

from assembly.sourcemap import OffsetMap, string_offset_map
from assembly.text import TextRange

_FIRST_CHUNK = 256
_SCAN_CHUNK = 1 << 20


class TextLike(Protocol):
    """The part of ``str`` a rule may use on the document text."""

    def __len__(self) -> int: ...

    def __getitem__(self, key: int | slice, /) -> str: ...

    def count(self, sub: str, /) -> int: ...


def line_start(text: TextLike, offset: int) -> int:
    """The start of the line holding ``offset``: ``text.rfind("\\n", 0, offset) + 1``."""
    pos = max(0, min(offset, len(text)))
    # A text that holds only some lines (``inputs``) says where the line it holds starts.
    floor = getattr(text, "line_floor", None)
    floor = floor(pos) if floor is not None else 0
    size = _FIRST_CHUNK
    while pos > floor:
        lo = max(floor, pos - size)
        i = text[lo:pos].rfind("\n")
        if i != -1:
            return lo + i + 1
        pos, size = lo, size * 2
    return floor


def find_newline(text: TextLike, offset: int) -> int:
    """The first line break at or after ``offset``: ``text.find("\\n", offset)``."""
    n = len(text)
    pos = max(0, offset)
    size = _FIRST_CHUNK
    while pos < n:
        hi = min(n, pos + size)
        i = text[pos:hi].find("\n")
        if i != -1:
            return pos + i
        pos, size = hi, size * 2
    return -1


def contains(text: TextLike, needle: str) -> bool:
    """Whether ``needle`` occurs in ``text`` (read in large slices when it is not a str)."""
    if isinstance(text, str):
        return needle in text
    n, overlap = len(text), max(0, len(needle) - 1)
    pos = 0
    while pos < n:
        hi = min(n, pos + _SCAN_CHUNK)
        if needle in text[max(0, pos - overlap) : hi]:
            return True
        pos = hi
    return False


def offset_map(text: TextLike, value_range: TextRange, value: str) -> OffsetMap:
    """``sourcemap.string_offset_map`` over the slice of ``text`` the value is written in.

    The slice is the value's range, from the start of its line for a YAML block scalar
    (whose indentation indicator is relative to the line).
    """
    start = min(value_range.start, len(text))
    lo = start
    if text[start : start + 1] in ("|", ">"):
        lo = line_start(text, start)
    window = text[lo : value_range.end]
    inner = string_offset_map(window, TextRange(start - lo, value_range.end - lo), value)
    return _ShiftedMap(inner, lo) if lo else inner


class Windows:
    """The document text, readable only in a few windows (``TextLike``); reading
    elsewhere is an error, so a rule reads no text its input does not hold."""

    __slots__ = ("_len", "pieces")

    def __init__(self, pieces: tuple[tuple[int, str], ...]) -> None:
        self._len = max((lo + len(s) for lo, s in pieces), default=0)  # where they end
        self.pieces = pieces

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, key: int | slice, /) -> str:
        if isinstance(key, int):
            i = key + self._len if key < 0 else key
            return self._window(i, i + 1)
        if key.start is not None and key.start > self._len:
            raise IndexError(f"[{key.start}:] is outside the text this input holds")
        start, stop, step = key.indices(self._len)
        if step != 1:
            raise ValueError("windows are read in steps of 1")
        return self._window(start, max(start, stop))

    def line_floor(self, offset: int) -> int:
        """The start of the window holding ``offset`` (each window starts a line)."""
        for lo, s in self.pieces:
            if lo <= offset <= lo + len(s):
                return lo
        return 0

    def _window(self, start: int, stop: int) -> str:
        for lo, s in self.pieces:
            if lo <= start and stop <= lo + len(s):
                return s[start - lo : stop - lo]
        raise IndexError(f"[{start}:{stop}] is outside the text this input holds")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Windows):
            return NotImplemented
        return self.pieces == other.pieces

    __hash__ = None  # type: ignore[assignment]


class _ShiftedMap(OffsetMap):
    """An ``OffsetMap`` of a window of the text, answering in document offsets."""

    __slots__ = ("_inner", "_shift")

    def __init__(self, inner: OffsetMap, shift: int) -> None:
        self._inner = inner
        self._shift = shift

    def __call__(self, offset: int) -> int:
        return self._inner(offset) + self._shift

    def end(self, offset: int) -> int:
        return self._inner.end(offset) + self._shift

    def range(self, start: int, end: int) -> TextRange:
        lo = self(start)
        if end <= start:
            return TextRange(lo, lo)
        return TextRange(lo, max(lo, self.end(end)))
