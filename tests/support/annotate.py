"""Render diagnostics as annotated source excerpts (the way ruff's snapshots read)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from assembly.diagnostics import Diagnostic
from assembly.text import LineIndex, TextRange


def annotate(
    diags: Iterable[Diagnostic], text: str, name: str, others: Mapping[str, str] | None = None
) -> str:
    """Return one block per diagnostic: header, location, the source line and carets."""
    blocks = []
    for d in diags:
        file_text = text if d.path is None else (others or {}).get(d.path, "")
        file_name = name if d.path is None else _short(d.path)
        lines = [f"{d.severity.value}[{d.code}]: {d.message}"]
        lines.extend(_excerpt(file_text, file_name, d.range))
        if d.unnecessary:
            lines.append("   = tag: unnecessary")
        for r in d.related:
            r_text = text if r.path is None else (others or {}).get(r.path, "")
            r_name = name if r.path is None else _short(r.path)
            lines.append(f"   = related: {_where(r_text, r_name, r.range)}: {r.message}")
        if d.fix is not None:
            lines.append(f"   = fix: {d.fix.title}")
            for e in d.fix.edits:
                lines.append(f"     {_where(text, name, e.range)} -> {e.new_text!r}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + ("\n" if blocks else "")


def apply_edits(text: str, edits: Iterable[tuple[TextRange, str]]) -> str:
    """Apply non-overlapping edits (code-point ranges) to ``text``."""
    out = text
    for rng, new in sorted(edits, key=lambda e: e[0].start, reverse=True):
        out = out[: rng.start] + new + out[rng.end :]
    return out


def _excerpt(text: str, name: str, rng: TextRange) -> list[str]:
    if not text:
        return [f" --> {name}"]
    index = LineIndex(text)
    start, end = index.line_col(rng.start), index.line_col(rng.end)
    src = text[index.line_start(start.line) :].split("\n", 1)[0].rstrip("\r")
    width = len(str(start.line + 1))
    stop = end.column if end.line == start.line else len(src)
    carets = "^" * max(1, stop - start.column)
    more = f" (to {end.line + 1}:{end.column + 1})" if end.line != start.line else ""
    return [
        f" --> {name}:{start.line + 1}:{start.column + 1}",
        f"{' ' * width} |",
        f"{start.line + 1} | {_clip(src)}",
        f"{' ' * width} | {' ' * start.column}{carets[:120]}{more}",
    ]


def _where(text: str, name: str, rng: TextRange) -> str:
    if not text:
        return name
    pos = LineIndex(text).line_col(rng.start)
    return f"{name}:{pos.line + 1}:{pos.column + 1}"


def _short(path: str) -> str:
    marker = "/tests/data/"
    return path.split(marker, 1)[1] if marker in path else path.rsplit("/", 1)[-1]


def _clip(line: str, n: int = 160) -> str:
    return line if len(line) <= n else line[: n - 1] + "…"
