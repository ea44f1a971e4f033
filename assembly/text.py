"""Text ranges and line indexes.

Offsets here are code points (Python ``str`` indices) into the document text exactly as it
was given (CRLF kept). Lines and columns are 0-based here; the command line prints them
1-based and LSP units are handled only in ``server/convert.py``.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class TextRange:
    """A half-open span ``[start, end)`` of code-point offsets."""

    start: int
    end: int

    def __post_init__(self) -> None:
        assert 0 <= self.start <= self.end, (self.start, self.end)

    @staticmethod
    def empty(offset: int) -> TextRange:
        return TextRange(offset, offset)

    def __len__(self) -> int:
        return self.end - self.start

    def contains(self, offset: int) -> bool:
        return self.start <= offset <= self.end

    def cover(self, other: TextRange) -> TextRange:
        return TextRange(min(self.start, other.start), max(self.end, other.end))

    def shift(self, delta: int) -> TextRange:
        return TextRange(self.start + delta, self.end + delta)


@dataclass(frozen=True, slots=True)
class LineCol:
    """A 0-based line and a 0-based column counted in code points."""

    line: int
    column: int


class LineIndex:
    """Maps code-point offsets to (line, column) and back.

    A line ends after ``\\n``; a ``\\r`` before it belongs to the line break, so the column
    of a position never counts it. Offsets past the end are clamped.
    """

    __slots__ = ("_len", "_starts")

    def __init__(self, text: str) -> None:
        starts = [0]
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
