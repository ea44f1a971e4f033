"""An immutable document text made of chunks, edited in time proportional to the edit.

A language server receives one small edit after another to a document that may be many
megabytes long. Splicing a ``str`` copies all of it (tens of milliseconds at 10 MB), and so
does re-indexing its lines. A ``Rope`` keeps the text as a tuple of chunks of whole lines
(about ``CHUNK_SIZE`` to ``2 * CHUNK_SIZE`` code points each; a single line longer than
that is cut where it must be), with prefix sums of the chunk lengths and of their line
breaks. ``edit`` rebuilds only the chunks the edit touches and shares every other chunk
with the rope it came from, so ``changed_span`` finds what changed by chunk identity.
A chunk is stored as its UTF-8 bytes when those are smaller than the ``str`` (a chunk with
one emoji is a ``str`` of four bytes a character), and decoded when read: a slice of it
decodes only about the slice once the chunk's byte marks are known (``_Chunk.sub``), so
reading a line or a few characters of a 10 MB document (a position for the editor, a
finding's text) costs what the line costs, not a 16 K chunk.

Invariants: offsets are code points (Python ``str`` indices); a line ends after ``\\n``,
``\\r\\n`` or a lone ``\\r``, exactly LSP's line ends (U+2028 and friends are ordinary
characters, as in LSP); no chunk ends with the ``\\r`` of a ``\\r\\n`` (so each chunk
counts its line breaks alone); a rope is never mutated (the only state set after construction is
a cache of values derived from the content); no chunk is empty unless the text is.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import re
import sys
from array import array
from collections.abc import Iterable, Iterator
from typing import overload

from assembly.text import LineCol, skipped

__all__ = ["CHUNK_SIZE", "Rope", "Text"]

CHUNK_SIZE = 16 * 1024  # target chunk length in code points; chunks grow to twice this
_BREAK = re.compile(r"\r\n?|\n")  # LSP's line ends


class _Chunk:
    """A piece of the text, with its line breaks found once (chunks are shared by ropes).

    The text is kept as a ``str`` or as its UTF-8 bytes, whichever is smaller
    (``_packed``): Python stores a ``str`` with one emoji at 4 bytes a character, and
    nearly every chunk of a conversation holds one (a 10 MB document: 38 MB of ``str``
    chunks, 10 MB packed). ``text`` decodes a packed chunk when read, through a small
    memo of the chunks read last (``_decoded``); its length and line breaks are known
    without decoding it. ``sub`` reads a slice: of a packed chunk, through its byte marks
    (``_marks``: the UTF-8 offset of every ``_mark_step``-th code point, at most
    ``_MARKS`` of them, made on the second read that missed the memo: a parse reads each
    chunk once), it decodes only the bytes between the marks around the slice.
    """

    __slots__ = ("_breaks", "_marks", "data", "n", "n_breaks")

    def __init__(self, text: str) -> None:
        self.n = len(text)
        n = text.count("\n")
        if "\r" in text:
            n += text.count("\r") - text.count("\r\n")
        self.n_breaks = n
        self.data = _packed(text)  # the text, or its UTF-8 (see the class)
        self._breaks: array[int] | None = None
        self._marks: array[int] | None = None

    @property
    def text(self) -> str:
        data = self.data
        return data if type(data) is str else _decoded(self, data)

    def sub(self, a: int, b: int) -> str:
        """``text[a:b]`` for ``0 <= a <= b <= n``; a packed chunk is decoded whole only
        on the first two reads that miss the memo (the second makes its byte marks)."""
        data = self.data
        if type(data) is str:
            return data[a:b]
        if a >= b:
            return ""
        hit = _DECODED.get(id(self))
        if hit is not None and hit[0] is self:
            return hit[1][a:b]
        marks = self._marks
        if marks is None or marks is _READ_ONCE:
            # The first read only decodes (a parse reads each chunk once, in order); the
            # marks are made when the chunk is read again after leaving the memo.
            text = _decoded(self, data)  # type: ignore[arg-type]
            self._marks = _READ_ONCE if marks is None else _marks_of(text)
            return text[a:b]
        step = _mark_step(self.n)
        i, j = a // step, -(-b // step)
        lo = marks[i]
        hi = marks[j] if j < len(marks) else len(data)
        skip = a - i * step
        return data[lo:hi].decode("utf-8", "surrogatepass")[skip : skip + b - a]  # type: ignore[union-attr]

    def breaks(self) -> array[int]:
        """The offsets in the chunk just after each line end (the starts of the lines),
        made on the first look-up and kept: as an array of 4-byte numbers, not a list of
        ``int`` objects (a 10 MB document's lines: 0.3 MB instead of 2.5, and no
        hundred thousand small objects left among the ones that come and go)."""
        res = self._breaks
        if res is None:
            text = self.text
            if "\r" in text:
                res = array("I", [m.end() for m in _BREAK.finditer(text)])
            else:
                # ``split`` and ``accumulate`` run in C: a few microseconds for a chunk.
                pieces = text.split("\n")
                res = array("I", itertools.accumulate(len(p) + 1 for p in pieces[:-1]))
            self._breaks = res
        return res

    def ends_with_cr(self) -> bool:
        data = self.data
        return data.endswith("\r" if type(data) is str else b"\r")  # type: ignore[arg-type]

    def starts_with_lf(self) -> bool:
        data = self.data
        return data.startswith("\n" if type(data) is str else b"\n")  # type: ignore[arg-type]

    def find(self, sub: str, sub_b: bytes, start: int, end: int) -> int:
        """``text.find(sub, start, end)``; a packed chunk whose bytes lack ``sub_b``
        (``sub``'s UTF-8) is not decoded: UTF-8 holds a text's UTF-8 just where the text
        holds it."""
        data = self.data
        if type(data) is bytes and sub_b not in data:
            return -1
        return self.text.find(sub, start, end)

    def rfind(self, sub: str, sub_b: bytes, start: int, end: int) -> int:
        data = self.data
        if type(data) is bytes and sub_b not in data:
            return -1
        return self.text.rfind(sub, start, end)

    def edge(self, m: int) -> bytes:
        """The UTF-8 of the chunk's last ``m`` code points (its first ``-m``) or more."""
        data = self.data
        if type(data) is str:
            data = (data[-m:] if m > 0 else data[:-m]).encode("utf-8", "surrogatepass")
            return data
        return data[-4 * m :] if m > 0 else data[: -4 * m]

    def count(self, sub: str, start: int, end: int) -> int:
        """``text.count(sub, start, end)``; an ASCII ``sub`` in the whole of a packed
        chunk is counted in its bytes (no UTF-8 sequence holds an ASCII byte)."""
        data = self.data
        if type(data) is bytes and start == 0 and end >= self.n and sub.isascii():
            return data.count(sub.encode("ascii"))
        return self.text.count(sub, start, end)


def _packed(text: str) -> str | bytes:
    """``text``, or its UTF-8 bytes when they take less memory (lone surrogates, which a
    JSON ``\\ud800`` escape can give, pass through as themselves)."""
    if text.isascii():
        return text
    data = text.encode("utf-8", "surrogatepass")
    return data if sys.getsizeof(data) < sys.getsizeof(text) else text


# ``_Chunk._marks`` of a packed chunk decoded once, whose marks are not made yet.
_READ_ONCE: array[int] = array("I")
_MARKS = 64  # byte marks of a packed chunk at most (a 16 K chunk: one every 256 code points)


def _mark_step(n: int) -> int:
    """Code points between two byte marks of a chunk of ``n`` code points."""
    return max(1, -(-n // _MARKS))


def _marks_of(text: str) -> array[int]:
    """The UTF-8 offset of every ``_mark_step``-th code point of ``text``, from 0."""
    step = _mark_step(len(text))
    sizes = (
        len(text[i : i + step].encode("utf-8", "surrogatepass"))
        for i in range(0, len(text) - step, step)
    )
    return array("I", itertools.accumulate(sizes, initial=0))


# The packed chunks decoded last, by identity (a walk over a document's lines or offsets
# reads the same chunk many times in a row). Shared by every rope, on any thread: a miss
# only decodes again.
_DECODED: dict[int, tuple[_Chunk, str]] = {}
_DECODED_MAX = 8


def _may_cross(a: _Chunk, b: _Chunk, sub_b: bytes, m: int) -> bool:
    """Whether a text of ``m`` code points (``sub_b``, its UTF-8) may start in ``a`` and
    end in the next chunk ``b``; False only when it cannot (neither is decoded)."""
    if m == 1:
        return False
    if a.n < m or b.n < m:  # it might reach a third chunk: look
        return True
    return sub_b in a.edge(m - 1) + b.edge(1 - m)


def _plain(chunk: _Chunk) -> str:
    """A chunk's text for a read of many chunks (not kept in the memo)."""
    data = chunk.data
    return data if type(data) is str else data.decode("utf-8", "surrogatepass")


def _utf8(chunk: _Chunk) -> bytes:
    data = chunk.data
    return data if type(data) is bytes else data.encode("utf-8", "surrogatepass")  # type: ignore[union-attr]


def _decoded(chunk: _Chunk, data: bytes) -> str:
    hit = _DECODED.get(id(chunk))
    if hit is not None and hit[0] is chunk:
        return hit[1]
    text = data.decode("utf-8", "surrogatepass")
    if len(_DECODED) >= _DECODED_MAX:
        with contextlib.suppress(StopIteration, KeyError, RuntimeError):
            del _DECODED[next(iter(_DECODED))]  # the oldest
    _DECODED[id(chunk)] = (chunk, text)
    return text


class Rope:
    """An immutable text, indexable and sliceable like a ``str``, with a line index.

    Build one with ``Rope.from_str``, or ``Rope.from_parts`` from a text's pieces as they
    come (a ``didOpen`` decoded window by window: the whole text never exists); ``edit``
    returns a new rope. ``str(rope)`` joins the chunks each time and does not keep the
    result (a 10 MB document with a few emoji is a 40 MB ``str``, which an open document
    would otherwise hold twice): call it once per use, and avoid it where the work should
    be proportional to an edit. The first ``str`` of a rope built by ``from_str`` is the
    string it was built from, handed over (not kept): a text that is alive anyway is not
    joined into a second copy.
    """

    __slots__ = ("__weakref__", "_chunk_size", "_chunks", "_len", "_lines", "_source", "_starts")

    def __init__(self, chunks: tuple[_Chunk, ...], chunk_size: int) -> None:
        assert chunks, "a rope has at least one chunk"
        self._chunks = chunks
        self._chunk_size = chunk_size
        # ``_starts[i]`` is where chunk ``i`` starts; the last entry is the length.
        self._starts = [0, *itertools.accumulate(c.n for c in chunks)]
        # ``_lines[i]`` is how many line breaks come before chunk ``i``.
        self._lines = [0, *itertools.accumulate(c.n_breaks for c in chunks)]
        self._len = self._starts[-1]
        self._source: str | None = None

    @staticmethod
    def from_str(text: str, *, chunk_size: int = CHUNK_SIZE) -> Rope:
        """The rope of ``text``; ``chunk_size`` (code points) exists for tests."""
        assert chunk_size >= 1
        rope = Rope(tuple(_Chunk(t) for t in _split((text,), chunk_size)), chunk_size)
        if len(rope._chunks) > 1 and type(text) is str:
            rope._source = text
        return rope

    @staticmethod
    def from_parts(parts: Iterable[str], *, chunk_size: int = CHUNK_SIZE) -> Rope:
        """The rope of the text ``"".join(parts)`` (the same chunks as ``from_str``'s),
        made as the parts come: each chunk is packed as soon as it is cut, so the joined
        text never exists (a text decoded piece by piece, e.g. a ``didOpen`` read from
        its message's bytes by ``server.lsp.stream``, is never a whole ``str``)."""
        assert chunk_size >= 1
        return Rope(tuple(_Chunk(t) for t in _split(parts, chunk_size)), chunk_size)

    # ------------------------------------------------------------------ str-like reading

    def __len__(self) -> int:
        return self._len

    def __str__(self) -> str:
        source = self._source
        if source is not None:
            self._source = None
            return source
        chunks = self._chunks
        if all(type(c.data) is str for c in chunks):
            return "".join([c.data for c in chunks])  # type: ignore[misc]
        # Joined as UTF-8 and decoded once: the decoded chunks joined would all be alive
        # beside the result (a text with a few emoji: 4 bytes a character, twice over).
        return b"".join([_utf8(c) for c in chunks]).decode("utf-8", "surrogatepass")

    def __repr__(self) -> str:
        return f"Rope(len={self._len}, chunks={len(self._chunks)})"

    @overload
    def __getitem__(self, key: int) -> str: ...
    @overload
    def __getitem__(self, key: slice) -> str: ...
    def __getitem__(self, key: int | slice) -> str:
        if isinstance(key, slice):
            start, stop, step = key.indices(self._len)
            if step != 1:
                return str(self)[start:stop:step]
            return self._slice(start, stop)
        i = key.__index__()
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError("rope index out of range")
        k = bisect.bisect_right(self._starts, i) - 1
        local = i - self._starts[k]
        return self._chunks[k].sub(local, local + 1)

    def __iter__(self) -> Iterator[str]:
        for c in self._chunks:
            yield from _plain(c)

    def __contains__(self, sub: str) -> bool:
        return self.find(sub) != -1

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Rope):
            return self._len == other._len and self.changed_span(other)[0] == self._len
        if isinstance(other, str):
            return len(other) == self._len and all(
                other.startswith(_plain(c), s)
                for c, s in zip(self._chunks, self._starts, strict=False)
            )
        return NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))  # equal to a ``str`` with the same text, so hash as one

    def find(self, sub: str, start: int | None = 0, end: int | None = None) -> int:
        """Like ``str.find``: the lowest offset of ``sub`` in ``[start, end)``, or -1."""
        start, end = _adjust(start, end, self._len)
        m = len(sub)
        if end - start < m:
            return -1
        if m == 0:
            return start
        starts, chunks = self._starts, self._chunks
        k = bisect.bisect_right(starts, start) - 1
        sub_b = sub.encode("utf-8", "surrogatepass")
        while True:
            s, boundary = starts[k], starts[k + 1]
            c = chunks[k]
            res = c.find(sub, sub_b, start - s if start > s else 0, min(end, boundary) - s)
            if res != -1:
                return s + res
            if boundary >= end:
                return -1
            # A match that starts in this chunk and ends in a later one.
            if _may_cross(c, chunks[k + 1], sub_b, m):
                lo = max(start, boundary - m + 1)
                res = self._slice(lo, min(end, boundary + m - 1)).find(sub)
                if res != -1:
                    return lo + res
            k += 1

    def count(self, sub: str, start: int | None = 0, end: int | None = None) -> int:
        """Like ``str.count``: non-overlapping occurrences of ``sub`` in ``[start, end)``,
        without joining the text."""
        start, end = _adjust(start, end, self._len)
        m = len(sub)
        if m == 0:
            return end - start + 1 if start <= end else 0
        if m == 1:  # no match crosses a chunk boundary: count chunk by chunk
            if start >= end:
                return 0
            starts, chunks = self._starts, self._chunks
            i = bisect.bisect_right(starts, start) - 1
            j = bisect.bisect_left(starts, end) - 1
            return sum(
                chunks[k].count(sub, max(start - starts[k], 0), end - starts[k])
                for k in range(i, j + 1)
            )
        n = 0
        at = self.find(sub, start, end)
        while at != -1:
            n += 1
            at = self.find(sub, at + m, end)
        return n

    def rfind(self, sub: str, start: int | None = 0, end: int | None = None) -> int:
        """Like ``str.rfind``: the highest offset of ``sub`` in ``[start, end)``, or -1."""
        start, end = _adjust(start, end, self._len)
        m = len(sub)
        if end - start < m:
            return -1
        if m == 0:
            return end
        starts, chunks = self._starts, self._chunks
        k = bisect.bisect_right(starts, end - 1) - 1
        sub_b = sub.encode("utf-8", "surrogatepass")
        while True:
            s = starts[k]
            c = chunks[k]
            res = c.rfind(sub, sub_b, start - s if start > s else 0, end - s)
            if res != -1:
                return s + res
            if s <= start:
                return -1
            # A match that starts in an earlier chunk and ends in this one.
            if _may_cross(chunks[k - 1], c, sub_b, m):
                lo = max(start, s - m + 1)
                res = self._slice(lo, min(end, s + m - 1)).rfind(sub)
                if res != -1:
                    return lo + res
            k -= 1

    def startswith(self, prefix: str, start: int | None = 0, end: int | None = None) -> bool:
        """Like ``str.startswith`` with one prefix."""
        start, end = _adjust(start, end, self._len)
        if end - start < len(prefix):
            return False
        return self._slice(start, start + len(prefix)) == prefix

    def endswith(self, suffix: str, start: int | None = 0, end: int | None = None) -> bool:
        """Like ``str.endswith`` with one suffix."""
        start, end = _adjust(start, end, self._len)
        if end - start < len(suffix):
            return False
        return self._slice(end - len(suffix), end) == suffix

    # ------------------------------------------------------------------------- editing

    def edit(self, start: int, end: int, new: str) -> Rope:
        """The text with ``[start, end)`` replaced by ``new`` (offsets clamped to the text).

        Only the chunks the edit touches are rebuilt (merged with a neighbour when they
        become small, split when they grow large); every other chunk is shared.
        """
        n = self._len
        start = max(0, min(start, n))
        end = max(start, min(end, n))
        chunks, starts = self._chunks, self._starts
        last = len(chunks) - 1
        i = min(bisect.bisect_right(starts, start) - 1, last)
        j = max(i, min(bisect.bisect_left(starts, end) - 1, last))
        piece = chunks[i].text[: start - starts[i]] + new + chunks[j].text[end - starts[j] :]
        lo, hi = i, j + 1
        small = self._chunk_size // 2
        if len(piece) < small and lo > 0:
            lo -= 1
            piece = chunks[lo].text + piece
        if len(piece) < small and hi <= last:
            piece += chunks[hi].text
            hi += 1
        # Never leave a "\r\n" cut between two chunks: the piece's own ends, or, when the
        # edit leaves no piece, the two chunks it brings together ("\r" | "\n").
        while (
            lo > 0
            and chunks[lo - 1].ends_with_cr()
            and (piece.startswith("\n") if piece else hi <= last and chunks[hi].starts_with_lf())
        ):
            lo -= 1
            piece = chunks[lo].text + piece
        while hi <= last and piece.endswith("\r") and chunks[hi].starts_with_lf():
            piece += chunks[hi].text
            hi += 1
        middle = tuple(_Chunk(t) for t in _split((piece,), self._chunk_size) if t)
        res = chunks[:lo] + middle + chunks[hi:]
        return Rope(res or (_Chunk(""),), self._chunk_size)

    def with_text(self, text: str) -> Rope:
        """The rope of ``text``, sharing the chunks of this rope outside what differs.

        For a client that sends the whole document on every change: the result is
        ``Rope.from_str(text)`` in content, and ``changed_span`` against this rope stays
        cheap.
        """
        limit = min(self._len, len(text))
        p = _common_prefix(self, 0, text, 0, limit)
        s = _common_suffix(self, self._len, text, len(text), limit - p)
        return self.edit(p, self._len - s, text[p : len(text) - s])

    def changed_span(self, old: Rope) -> tuple[int, int, int]:
        """Where this rope differs from ``old``: ``(p, old_end, new_end)``.

        ``old[:p] == self[:p]`` and ``old[old_end:] == self[new_end:]``, with ``p`` as
        large as possible and then the common suffix as long as possible without
        overlapping it. Chunks shared with ``old`` (or equal to its chunks at the same
        place) are skipped without reading them.
        """
        oc, nc = old._chunks, self._chunks
        m = min(len(oc), len(nc))
        i = 0
        while i < m and _same(oc[i], nc[i]):
            i += 1
        j = 0
        while j < m - i and _same(oc[-1 - j], nc[-1 - j]):
            j += 1
        p0 = old._starts[i]  # the same in both: the chunks before are the same
        old_stop, new_stop = old._starts[len(oc) - j], self._starts[len(nc) - j]
        limit = min(old._len, self._len)
        p = p0 + _common_prefix(old, p0, self, p0, limit - p0)
        shared = old._len - old_stop  # the chunks after are the same
        if shared >= limit - p:
            s = limit - p
        else:
            s = shared + _common_suffix(old, old_stop, self, new_stop, limit - p - shared)
        return p, old._len - s, self._len - s

    # ------------------------------------------------------------------------ line index

    @property
    def line_count(self) -> int:
        return self._lines[-1] + 1

    def line_start(self, line: int) -> int:
        """The offset where a 0-based line starts (the line is clamped to the text)."""
        line = max(0, min(line, self._lines[-1]))
        if line == 0:
            return 0
        # The chunk holding the ``line``-th line break (1-based).
        k = bisect.bisect_left(self._lines, line) - 1
        return self._starts[k] + self._chunks[k].breaks()[line - self._lines[k] - 1]

    def line_of(self, offset: int) -> int:
        """The 0-based line of an offset (clamped to the text): ``line_col(offset).line``
        without finding where the line starts."""
        offset = max(0, min(offset, self._len))
        k = min(bisect.bisect_right(self._starts, offset) - 1, len(self._chunks) - 1)
        breaks = self._chunks[k].breaks()
        return self._lines[k] + bisect.bisect_right(breaks, offset - self._starts[k])

    def line_col(self, offset: int) -> LineCol:
        """The 0-based line and code-point column of an offset (clamped to the text)."""
        offset = max(0, min(offset, self._len))
        k = min(bisect.bisect_right(self._starts, offset) - 1, len(self._chunks) - 1)
        local = offset - self._starts[k]
        breaks = self._chunks[k].breaks()
        n = bisect.bisect_right(breaks, local)
        line = self._lines[k] + n
        start = self._starts[k] + breaks[n - 1] if n else self.line_start(line)
        return LineCol(line, offset - start)

    def line_head(self, offset: int, stop: int, step: int = 0) -> tuple[int, int, int, str]:
        """The 0-based line and code-point column of ``offset``, and the text from that
        line's start to ``stop`` (``0 <= offset <= stop <= len``): ``line_col`` and a slice
        in one look-up (what a position's column is counted in, in code units). With
        ``step``, a column longer than it leaves out of the text the line's first ``skip``
        code points, the largest multiple of ``step`` below the column: returns ``(line,
        column, skip, text)``."""
        k = min(bisect.bisect_right(self._starts, offset) - 1, len(self._chunks) - 1)
        at = self._starts[k]
        chunk = self._chunks[k]
        breaks = chunk.breaks()
        n = bisect.bisect_right(breaks, offset - at)
        line = self._lines[k] + n
        if n:
            first = breaks[n - 1]
            column = offset - at - first
            skip = skipped(column, step)
            if stop - at <= chunk.n:  # (all in this chunk: most often)
                return line, column, skip, chunk.sub(first + skip, stop - at)
            start = at + first
        else:
            start = self.line_start(line)
        column = offset - start
        skip = skipped(column, step)
        return line, column, skip, self._slice(start + skip, stop)

    def offset_at(self, line: int, column: int) -> int:
        """The offset of a 0-based line and column, clamped to the line's end (before its
        ``\\n`` or lone ``\\r``; a column may point before the ``\\r`` of a ``\\r\\n`` or
        after it)."""
        if line < 0:
            return 0
        if line > self._lines[-1]:
            return self._len
        start = self.line_start(line)
        end = self.line_start(line + 1) - 1 if line < self._lines[-1] else self._len
        return start + max(0, min(column, end - start))

    # ``LineIndex`` spells it so: a rope can stand where a ``LineIndex`` is expected.
    offset = offset_at

    def line_text(self, line: int) -> str:
        """The text of a 0-based line without its line break (``\\n`` or ``\\r\\n``); the
        empty string for a line past the end."""
        if line < 0 or line > self._lines[-1]:
            return ""
        start = self.line_start(line)
        if line == self._lines[-1]:
            return self._slice(start, self._len)
        res = self._slice(start, self.line_start(line + 1) - 1)
        return res[:-1] if res.endswith("\r") else res

    # -------------------------------------------------------------------------- private

    def _slice(self, start: int, stop: int) -> str:
        """``text[start:stop]`` for ``0 <= start``, ``stop <= len``."""
        if stop <= start:
            return ""
        starts, chunks = self._starts, self._chunks
        i = bisect.bisect_right(starts, start) - 1
        s = starts[i]
        first = chunks[i]
        if stop <= starts[i + 1]:
            return first.sub(start - s, stop - s)
        j = bisect.bisect_left(starts, stop) - 1
        parts = [first.sub(start - s, first.n)]
        parts.extend(_plain(c) for c in chunks[i + 1 : j])
        parts.append(chunks[j].sub(0, stop - starts[j]))
        return "".join(parts)


Text = str | Rope  # what code reading a document's text accepts


def _split(parts: Iterable[str], size: int) -> Iterator[str]:
    """Cut the text ``"".join(parts)`` into pieces of ``size`` to ``2 * size`` code points
    after a ``\\n`` where there is one (the last piece may be shorter), never inside a
    ``\\r\\n``; the pieces do not depend on where the parts meet.

    One piece at a time: each is packed (``_Chunk``) and let go before the next is cut,
    instead of a copy of the whole text as ``str`` pieces alive at once; of the parts, only
    what is not cut yet (at most ``2 * size`` code points) is kept between two parts.
    """
    text = ""
    for part in parts:
        text = text + part if text else part
        n = len(text)
        if n <= 2 * size:
            continue
        pos = 0
        while n - pos > 2 * size:
            # Each cut looks at most ``2 * size`` code points on: the same cuts as in the
            # whole text.
            cut = text.find("\n", pos + size - 1, pos + 2 * size - 1)
            if cut == -1:
                cut = text.rfind("\n", pos + size // 2, pos + size - 1)
            if cut == -1:
                cut = pos + size - 1  # a line longer than a chunk: cut it
                if text[cut] == "\r" and text[cut + 1 : cut + 2] == "\n":
                    cut += 1
            yield text[pos : cut + 1]
            pos = cut + 1
        text = text[pos:]
    yield text


def _same(a: _Chunk, b: _Chunk) -> bool:
    return a is b or a.data == b.data  # (the same text is always packed the same way)


def _adjust(start: int | None, end: int | None, n: int) -> tuple[int, int]:
    """Normalise ``str.find``-style bounds (negative counts from the end), as CPython does."""
    start = 0 if start is None else start
    end = n if end is None else end
    if end > n:
        end = n
    elif end < 0:
        end = max(end + n, 0)
    if start < 0:
        start = max(start + n, 0)
    return start, end


def _common_prefix(a: Text, ia: int, b: Text, ib: int, limit: int) -> int:
    """The length of the common prefix of ``a[ia:]`` and ``b[ib:]``, at most ``limit``.

    Compares slices of doubling length, then bisects the first one that differs: a few
    C-speed comparisons, and slices no longer than twice the answer.
    """
    lo, step = 0, 64
    while lo < limit:
        hi = min(limit, lo + step)
        if a[ia + lo : ia + hi] != b[ib + lo : ib + hi]:
            while hi - lo > 1:  # ``[lo, hi)`` holds the first difference
                mid = (lo + hi) // 2
                if a[ia + lo : ia + mid] == b[ib + lo : ib + mid]:
                    lo = mid
                else:
                    hi = mid
            return lo
        lo, step = hi, step * 2
    return limit


def _common_suffix(a: Text, ea: int, b: Text, eb: int, limit: int) -> int:
    """The length of the common suffix of ``a[:ea]`` and ``b[:eb]``, at most ``limit``."""
    lo, step = 0, 64
    while lo < limit:
        hi = min(limit, lo + step)
        if a[ea - hi : ea - lo] != b[eb - hi : eb - lo]:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if a[ea - mid : ea - lo] == b[eb - mid : eb - lo]:
                    lo = mid
                else:
                    hi = mid
            return lo
        lo, step = hi, step * 2
    return limit
