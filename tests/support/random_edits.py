"""Random text edits of the kinds an editor makes, shared by the randomized tests that
compare a format's incremental re-read with a whole read (JSON Lines, YAML). Pure: no
``server`` import, so the pure library's tests can use it."""

from __future__ import annotations

import random

# The kinds ``line_edit`` makes, as numbered in each format's ``random_edit``.
LINE_KINDS = range(2, 6)


def line_starts(text: str) -> list[int]:
    """The offset of every line's first character."""
    return [0, *(i + 1 for i, ch in enumerate(text) if ch == "\n")]


def line_edit(
    rnd: random.Random, text: str, lines: list[int], kind: int, across: int
) -> tuple[int, int, str]:
    """One format-neutral edit ``(start, end, new)`` of ``kind`` (in ``LINE_KINDS``): 2
    delete a short span, 3 delete across lines (up to ``across`` characters), 4 paste a
    copy of some lines at a line start, 5 cut whole lines."""
    n = len(text)
    if kind == 2:
        at = rnd.randint(0, n)
        return at, min(n, at + rnd.randint(1, 8)), ""
    if kind == 3:
        a = rnd.randint(0, n)
        return a, min(n, a + rnd.randint(10, across)), ""
    a, b = sorted(rnd.sample(lines, 2)) if len(lines) > 1 else (0, n)
    if kind == 4:
        at = rnd.choice(lines)
        return at, at, text[a:b]
    return a, b, ""


# What breaks a line's syntax in every format read here (a string or a bracket left open,
# a key where a value goes, a tab).
BREAKS = ("'", '"', "[", "{", ": x: ", "\t", "]", "}")


def break_edit(rnd: random.Random, text: str, lines: list[int]) -> tuple[int, int, str]:
    """An edit that damages the middle of a document and leaves what follows intact: a
    character of ``BREAKS`` typed inside a line, or a span deleted from inside one line
    into one of the next six (two items merged), both away from the first and last
    tenth of the text (so that items follow the damage)."""
    inner = [at for at in lines if len(text) // 10 <= at <= len(text) - len(text) // 10]
    if len(inner) < 2:
        inner = lines
    k = rnd.randrange(len(inner))
    at = inner[k]
    end = text.find("\n", at)
    end = len(text) if end < 0 else end
    a = rnd.randint(at, end)
    if rnd.random() < 0.5 or k + 1 >= len(inner):
        return a, a, rnd.choice(BREAKS)
    nxt = inner[min(len(inner) - 1, k + rnd.randint(1, 6))]
    stop = text.find("\n", nxt)
    return a, rnd.randint(nxt, len(text) if stop < 0 else stop), ""
