"""Text ranges and line indexes, and ``plural``: a count with its noun, as every message
writes one.

Offsets here are code points (Python ``str`` indices) into the document text exactly as it
was given (CRLF kept). Lines and columns are 0-based here; the command line prints them
1-based and LSP units are handled only in ``server/lsp/convert.py``.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any

_LINE_END = re.compile(r"\r\n?|\n")  # LSP's line ends


class TextRange:
    """A half-open span ``[start, end)`` of code-point offsets.

    Immutable by convention; equal, hashed and ordered by value.
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
        return (TextRange, (self.start, self.end))

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


class RelRange:
    """A half-open span ``[start, end)`` relative to the start of the message it is in.

    The ranges inside a message read from JSON or JSON Lines are stored this way (rowan's
    relative offsets), so a ``Message`` does not depend on where its message stands in the
    text and one object serves every version in which that message did not change. It is
    not a ``TextRange`` (nor equal to one): it becomes an offset into a document only
    through that document's table of message starts, ``Conversation.absolute(i, r)`` (or a
    ``Located`` message, which resolves its fields that way).
    """

    __slots__ = ("end", "start")

    def __init__(self, start: int, end: int) -> None:
        assert start <= end, (start, end)
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"RelRange(start={self.start}, end={self.end})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RelRange):
            return NotImplemented
        return self.start == other.start and self.end == other.end

    def __hash__(self) -> int:
        return hash(("rel", self.start, self.end))

    def __lt__(self, other: RelRange) -> bool:
        return (self.start, self.end) < (other.start, other.end)

    def __len__(self) -> int:
        return self.end - self.start

    def contains(self, offset: int) -> bool:
        return self.start <= offset <= self.end

    def cover(self, other: RelRange) -> RelRange:
        return RelRange(min(self.start, other.start), max(self.end, other.end))

    def shift(self, delta: int) -> RelRange:
        return RelRange(self.start + delta, self.end + delta)

    def at(self, base: int) -> TextRange:
        """This range in a document where its message starts at ``base``."""
        return TextRange(self.start + base, self.end + base)


# A range as the readers produce it: absolute, or relative to its message.
Span = TextRange | RelRange


def resolve(rng: Span, base: int) -> TextRange:
    """``rng`` as an offset into the document, its message starting at ``base``."""
    if isinstance(rng, RelRange):  # (or a subclass: ``syntax.LazyRange``)
        return TextRange(rng.start + base, rng.end + base)
    assert isinstance(rng, TextRange), rng
    return rng


def span(first: Span, last: Span) -> Span:
    """The range from the start of ``first`` to the end of ``last`` (same kind of range)."""
    return (RelRange if isinstance(first, RelRange) else TextRange)(first.start, last.end)


def sub_range(rng: Span, start: int, end: int) -> Span:
    """The range ``[start, end)``, in the same coordinates (and kind) as ``rng``."""
    return (RelRange if isinstance(rng, RelRange) else TextRange)(start, end)


@dataclass(frozen=True, slots=True)
class LineCol:
    """A 0-based line and a 0-based column counted in code points."""

    line: int
    column: int


def skipped(column: int, step: int) -> int:
    """How much of a line's start a column longer than ``step`` leaves out when it is
    counted from a multiple of ``step`` (0: from the line's start): the largest multiple
    below the column, so the code point before it is always counted."""
    return (column - 1) // step * step if step and column > step else 0


class LineIndex:
    """Maps code-point offsets to (line, column) and back.

    A line ends after ``\\n``, ``\\r\\n`` or a lone ``\\r`` (LSP's line ends; U+2028 is an
    ordinary character); the ``\\r`` of a ``\\r\\n`` belongs to the line break, so the
    column of a position never counts it. Offsets past the end are clamped.

    ``few=True``: only a few positions will be asked for (a command's findings in a large
    document). A text without ``\\r`` is then not indexed up front (10 ms at 10 MB): a
    position's line is the number of ``\\n`` between it and the nearest position asked
    before (and that one's line), so the work is the distance between the two, in C.
    ``offset``, ``line_start`` and ``line_count`` index the whole text.
    """

    __slots__ = ("_few", "_len", "_starts", "_text")

    def __init__(self, text: str, *, few: bool = False) -> None:
        self._len = len(text)
        # The positions asked so far, in order, with their lines and their lines' starts
        # (``few``; at first the text's start).
        self._few: list[tuple[int, int, int]] | None = None
        self._text = ""  # kept only while not indexed (``few``)
        self._starts: list[int] = []
        if few and "\r" not in text:
            self._few, self._text = [(0, 0, 0)], text
        else:
            self._index(text)

    def _index(self, text: str | None = None) -> list[int]:
        if text is None:
            text = self._text
        starts = [0]
        if "\r" in text:
            starts.extend(m.end() for m in _LINE_END.finditer(text))
        else:
            find = text.find
            i = find("\n")
            while i != -1:
                starts.append(i + 1)
                i = find("\n", i + 1)
        self._few, self._text = None, ""
        self._starts = starts
        return starts

    @property
    def line_count(self) -> int:
        return len(self._starts if self._few is None else self._index())

    def line_of(self, offset: int) -> int:
        """``line_col(offset).line``."""
        if self._few is not None:
            return self.line_col(offset).line
        return bisect.bisect_right(self._starts, max(0, min(offset, self._len))) - 1

    def line_col(self, offset: int) -> LineCol:
        offset = max(0, min(offset, self._len))
        few = self._few
        if few is not None:
            at = bisect.bisect_right(few, (offset, self._len, self._len)) - 1
            before, line, start = few[at]
            breaks = self._text.count("\n", before, offset)
            if breaks:
                line += breaks
                start = self._text.rfind("\n", before, offset) + 1
            if before != offset:
                few.insert(at + 1, (offset, line, start))
            return LineCol(line, offset - start)
        line = bisect.bisect_right(self._starts, offset) - 1
        return LineCol(line, offset - self._starts[line])

    def offset(self, line: int, column: int) -> int:
        """Return the offset of a 0-based line and column, clamped to the line's end."""
        if self._few is not None:
            self._index()
        if line < 0:
            return 0
        if line >= len(self._starts):
            return self._len
        start = self._starts[line]
        end = self._starts[line + 1] - 1 if line + 1 < len(self._starts) else self._len
        return start + max(0, min(column, end - start))

    def line_start(self, line: int) -> int:
        if self._few is not None:
            self._index()
        return self._starts[max(0, min(line, len(self._starts) - 1))]


class PlacedIndex:
    """``line_col`` of offsets into a text that is part of a larger one, from ``base`` on
    (a dataset's record, in its document): the larger text's lines and columns."""

    __slots__ = ("base", "index")

    def __init__(self, index: LineIndex | Any, base: int) -> None:
        self.index = index  # the larger text's (a ``LineIndex``, or a rope)
        self.base = base

    def line_col(self, offset: int) -> LineCol:
        return self.index.line_col(offset + self.base)  # type: ignore[no-any-return]


def plural(n: int, one: str, many: str | None = None) -> str:
    """``n`` (thousands separated) and its noun, plural unless one: ``1 token``,
    ``1,024 tokens``; ``many``: a plural that is not ``one`` + ``s``."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"
