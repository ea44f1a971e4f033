"""Render places of a document (ranges) as ``line:col | source line`` plus carets."""

from __future__ import annotations

from assembly.text import LineIndex, TextRange


def place(text: str, rng: TextRange, *, indent: str = "  ", width: int = 140) -> str:
    """Two lines: the 1-based position and its source line, then carets under the range."""
    index = LineIndex(text)
    start, end = index.line_col(rng.start), index.line_col(rng.end)
    line_start = index.line_start(start.line)
    line = text[line_start:].split("\n", 1)[0].rstrip("\r")
    stop = end.column if end.line == start.line else len(line)
    head = f"{start.line + 1}:{start.column + 1}"
    more = f" (to {end.line + 1}:{end.column + 1})" if end.line != start.line else ""
    carets = "^" * max(1, stop - start.column)
    shown = line if len(line) <= width else line[: width - 1] + "…"
    pad = " " * (len(head) + 3 + start.column)
    return f"{indent}{head} | {shown}\n{indent}{pad}{carets}{more}"


def position(text: str, offset: int) -> str:
    """The 1-based ``line:col`` of an offset."""
    lc = LineIndex(text).line_col(offset)
    return f"{lc.line + 1}:{lc.column + 1}"
