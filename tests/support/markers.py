"""Cursor markers in fixtures: ``$0`` marks an offset (rust-analyzer's convention).

One ``$0`` is a cursor; two mark a range (start, end). The markers are removed and their
offsets (code points into the cleaned text) returned.
"""

from __future__ import annotations

MARKER = "$0"


def cursor(text: str) -> tuple[str, int]:
    """Return the text without its one ``$0`` and the marker's offset."""
    clean, offsets = markers(text)
    assert len(offsets) == 1, f"expected one {MARKER}, found {len(offsets)}"
    return clean, offsets[0]


def markers(text: str) -> tuple[str, list[int]]:
    """Return the text without its ``$0`` markers and their offsets, in order."""
    parts = text.split(MARKER)
    offsets = []
    pos = 0
    for part in parts[:-1]:
        pos += len(part)
        offsets.append(pos)
    return "".join(parts), offsets
