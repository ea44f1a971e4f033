"""Text ranges and line indexes.

Offsets here are code points (Python ``str`` indices) into the document text exactly as it
was given (CRLF kept). Lines and columns are 0-based here; the command line prints them
1-based and LSP units are handled only in ``server/lsp/convert.py``.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

_LINE_END = re.compile(r"\r\n?|\n")  # LSP's line ends


class TextRange:
    """A half-open span ``[start, end)`` of code-point offsets.

    Immutable by convention; equal, hashed and ordered by value, whatever the subclass.
    """

    __slots__ = ("end", "start")
    __match_args__ = ("start", "end")

    def __init__(self, start: int, end: int) -> None:
        assert 0 <= start <= end, (start, end)
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"TextRange(start={self.start}, end={self.end})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TextRange):
            return NotImplemented
        return self.start == other.start and self.end == other.end

    def __hash__(self) -> int:
        return hash((self.start, self.end))

    def __lt__(self, other: TextRange) -> bool:
        return (self.start, self.end) < (other.start, other.end)

    def __le__(self, other: TextRange) -> bool:
        return (self.start, self.end) <= (other.start, other.end)

    def __gt__(self, other: TextRange) -> bool:
        return (self.start, self.end) > (other.start, other.end)

    def __ge__(self, other: TextRange) -> bool:
        return (self.start, self.end) >= (other.start, other.end)

    def __reduce__(self) -> tuple[type[TextRange], tuple[int, int]]:
        return (TextRange, (self.start, self.end))  # pickled by value, anchored or not

    @staticmethod
    def empty(offset: int) -> TextRange:
        return TextRange(offset, offset)

    def __len__(self) -> int:
        return self.end - self.start

    def contains(self, offset: int) -> bool:
        return self.start <= offset <= self.end

    def cover(self, other: TextRange) -> TextRange:
        return span(
            self if self.start <= other.start else other,
            self if self.end >= other.end else other,
        )

    def shift(self, delta: int) -> TextRange:
        return TextRange(self.start + delta, self.end + delta)

    def absolute(self) -> TextRange:
        """This range as a plain ``TextRange`` that no later edit moves."""
        return TextRange(self.start, self.end)


class Anchor:
    """The current offset of a message (or another item) in its document.

    Ranges inside the item are ``AnchoredRange``s relative to it, so when an edit before
    the item changes the length of the text, moving the item is one assignment to
    ``offset`` instead of a copy of every range in it. Only the re-parse of an edit moves
    anchors (``assembly/incremental.py``).
    """

    __slots__ = ("offset",)

    def __init__(self, offset: int) -> None:
        self.offset = offset

    def __repr__(self) -> str:
        return f"Anchor({self.offset})"


class AnchoredRange(TextRange):
    """A range stored relative to an ``Anchor``; ``start`` and ``end`` follow the anchor."""

    __slots__ = ("anchor", "rel_end", "rel_start")

    def __init__(self, anchor: Anchor, rel_start: int, rel_end: int) -> None:
        self.anchor = anchor
        self.rel_start = rel_start
        self.rel_end = rel_end

    @property  # type: ignore[override]
    def start(self) -> int:
        return self.anchor.offset + self.rel_start

    @property  # type: ignore[override]
    def end(self) -> int:
        return self.anchor.offset + self.rel_end

    def __len__(self) -> int:
        return self.rel_end - self.rel_start

    def shift(self, delta: int) -> TextRange:
        return AnchoredRange(self.anchor, self.rel_start + delta, self.rel_end + delta)


def span(first: TextRange, last: TextRange) -> TextRange:
    """The range from the start of ``first`` to the end of ``last``.

    Anchored when both are anchored to the same item, so the result moves with it.
    """
    if (
        isinstance(first, AnchoredRange)
        and isinstance(last, AnchoredRange)
        and first.anchor is last.anchor
    ):
        return AnchoredRange(first.anchor, first.rel_start, last.rel_end)
    return TextRange(first.start, last.end)


def sub_range(rng: TextRange, start: int, end: int) -> TextRange:
    """The range ``[start, end)`` (absolute offsets) anchored like ``rng``."""
    if isinstance(rng, AnchoredRange):
        base = rng.anchor.offset
        return AnchoredRange(rng.anchor, start - base, end - base)
    return TextRange(start, end)


@dataclass(frozen=True, slots=True)
class LineCol:
    """A 0-based line and a 0-based column counted in code points."""

    line: int
    column: int


class LineIndex:
    """Maps code-point offsets to (line, column) and back.

    A line ends after ``\\n``, ``\\r\\n`` or a lone ``\\r`` (LSP's line ends; U+2028 is an
    ordinary character); the ``\\r`` of a ``\\r\\n`` belongs to the line break, so the
    column of a position never counts it. Offsets past the end are clamped.
    """

    __slots__ = ("_len", "_starts")

    def __init__(self, text: str) -> None:
        starts = [0]
        if "\r" in text:
            starts.extend(m.end() for m in _LINE_END.finditer(text))
        else:
            find = text.find
            i = find("\n")
            while i != -1:
                starts.append(i + 1)
                i = find("\n", i + 1)
        self._starts = starts
        self._len = len(text)

    @property
    def line_count(self) -> int:
        return len(self._starts)

    def line_col(self, offset: int) -> LineCol:
        offset = max(0, min(offset, self._len))
        line = bisect.bisect_right(self._starts, offset) - 1
        return LineCol(line, offset - self._starts[line])

    def offset(self, line: int, column: int) -> int:
        """Return the offset of a 0-based line and column, clamped to the line's end."""
        if line < 0:
            return 0
        if line >= len(self._starts):
            return self._len
        start = self._starts[line]
        end = self._starts[line + 1] - 1 if line + 1 < len(self._starts) else self._len
        return start + max(0, min(column, end - start))

    def line_start(self, line: int) -> int:
        return self._starts[max(0, min(line, len(self._starts) - 1))]
