"""The text rendering of a lint result: one finding a line, with a source excerpt."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from pathlib import Path

from assembly.diagnostics import Severity
from assembly.text import plural
from server.cli.lint.model import Finding, LintResult, shown_path, summary
from server.terminal import visible

MAX_EXCERPT_WIDTH = 120


def render_text(res: LintResult, *, cwd: Path, color: bool = False) -> str:
    """Findings like ruff: ``path:line:col: severity[code] message``, excerpt, summary."""
    paint = _painter(color)
    lines: list[str] = []
    for f in res.findings:
        o = f.obj
        s = o["range"]["start"]
        sev = f.severity
        where = paint(visible(f"{shown_path(f.file, cwd)}:{s['line']}:{s['column']}:"), "1")
        label = paint(f"{sev.value}[{o['code']}]", _SEVERITY_COLORS[sev])
        lines.append(f"{where} {label} {visible(o['message'])}")
        lines.extend(_excerpt(f, paint, _SEVERITY_COLORS[sev]))
        for r in o["related"]:
            rs = r["range"]["start"]
            rel = f"{shown_path(r['file'], cwd)}:{rs['line']}:{rs['column']}"
            lines.append(f"  {paint('=', '34')} related: {visible(f'{rel}: ' + r['message'])}")
        if o["fix"] is not None:
            lines.append(f"  {paint('=', '34')} fix available: {visible(o['fix']['title'])}")
        lines.append("")
    lines.append(summary(res))
    return "\n".join(lines) + "\n"


_SEVERITY_COLORS = {
    Severity.ERROR: "1;31",
    Severity.WARNING: "1;33",
    Severity.INFO: "1;34",
    Severity.HINT: "1;36",
}


def _painter(color: bool) -> Callable[[str, str], str]:
    if not color:
        return lambda text, _code: text
    return lambda text, code: f"\x1b[{code}m{text}\x1b[0m"


def _excerpt(f: Finding, paint: Callable[[str, str], str], caret_color: str) -> list[str]:
    """The covered source lines with carets under the range, ruff style."""
    if not f.source:
        return []
    start, end = f.obj["range"]["start"], f.obj["range"]["end"]
    first = start["line"]
    last = first + f.n_lines - 1
    shown_last = first + len(f.source) - 1
    width = len(str(shown_last))
    bar = paint(" " * width + " |", "34")
    res = [bar]
    for i, text in enumerate(f.source):
        n = first + i
        a = start["column"] - 1 if i == 0 else _indent(text)
        b = end["column"] - 1 if n == last else len(text)
        # Clip before mapping: a line may be megabytes long and carry thousands of findings.
        shown, a, b = _window(text, a, max(b, a + 1))
        shown = visible(shown.replace("\t", " "))
        marks = max(1, _cells(shown[a:b]))
        res.append(f"{paint(f'{n:>{width}} |', '34')} {shown}".rstrip())
        res.append(f"{bar} {' ' * _cells(shown[:a])}{paint('^' * marks, caret_color)}")
    if last > shown_last:
        more = last - shown_last
        res.append(f"{bar} … {plural(more, 'more line')}")
    res.append(bar)
    return res


def _indent(text: str) -> int:
    """The leading blanks of a continuation line, as ``visible`` prints them.

    A control character that ``str.isspace`` counts (VT, FF, FS…) prints as a picture, so it
    ends the indentation; only the leading whitespace run is looked at.
    """
    n = len(text) - len(text.lstrip())
    return n - len(visible(text[:n].replace("\t", " ")).lstrip())


def _window(text: str, a: int, b: int) -> tuple[str, int, int]:
    """Clip a long line to MAX_EXCERPT_WIDTH code points around the range's start."""
    if len(text) <= MAX_EXCERPT_WIDTH:
        return text, a, b
    lo = max(0, min(a - 40, len(text) - MAX_EXCERPT_WIDTH))
    hi = lo + MAX_EXCERPT_WIDTH
    prefix = "…" if lo > 0 else ""
    suffix = "…" if hi < len(text) else ""
    shift = len(prefix) - lo
    return prefix + text[lo:hi] + suffix, a + shift, min(b, hi) + shift


def _cells(text: str) -> int:
    """Terminal columns ``text`` takes: wide East Asian characters count two."""
    if text.isascii():
        return len(text)
    n = 0
    for ch in text:
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            continue
        n += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return n
