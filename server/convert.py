"""THE conversion between ``assembly`` values and LSP values.

``assembly`` speaks code-point offsets; LSP speaks (line, character) in the position
encoding negotiated at initialize (UTF-16 by default, UTF-8 or UTF-32 when the client
offers them). Nothing else in the server builds an ``lsp.Position`` from numbers. Out of
range positions are clamped, never an error. A ``\\r\\n`` line break belongs to its line's
end: a column never counts the ``\\r``.
"""

from __future__ import annotations

from dataclasses import dataclass

from lsprotocol import types as lsp

from assembly.diagnostics import Diagnostic, Severity
from assembly.text import LineIndex, TextRange
from server.links import rule_doc_url

_SEVERITY = {
    Severity.ERROR: lsp.DiagnosticSeverity.Error,
    Severity.WARNING: lsp.DiagnosticSeverity.Warning,
    Severity.INFO: lsp.DiagnosticSeverity.Information,
    Severity.HINT: lsp.DiagnosticSeverity.Hint,
}


@dataclass(frozen=True, slots=True)
class TextMap:
    """A text, its line index and the negotiated encoding: what conversions need."""

    text: str
    index: LineIndex
    encoding: str  # "utf-16" | "utf-8" | "utf-32"

    @staticmethod
    def of(text: str, encoding: str) -> TextMap:
        return TextMap(text, LineIndex(text), encoding)


def to_lsp_position(m: TextMap, offset: int) -> lsp.Position:
    """Convert a code-point offset to an LSP position in the negotiated encoding."""
    lc = m.index.line_col(offset)
    if m.encoding == "utf-32":
        return lsp.Position(lc.line, lc.column)
    start = m.index.line_start(lc.line)
    prefix = m.text[start : start + lc.column]
    return lsp.Position(lc.line, _units(prefix, m.encoding))


def to_lsp_range(m: TextMap, rng: TextRange) -> lsp.Range:
    return lsp.Range(to_lsp_position(m, rng.start), to_lsp_position(m, rng.end))


def from_lsp_position(m: TextMap, position: lsp.Position) -> int:
    """Convert an LSP position to a code-point offset, clamped to the text."""
    if position.line < 0:
        return 0
    if position.line >= m.index.line_count:
        return len(m.text)
    start = m.index.line_start(position.line)
    end = m.index.offset(position.line, 1 << 62)  # the line's end (before \r\n or \n)
    line = m.text[start:end]
    if line.endswith("\r"):
        line = line[:-1]
    if m.encoding == "utf-32":
        return start + min(max(position.character, 0), len(line))
    return start + _column_of_units(line, max(position.character, 0), m.encoding)


def from_lsp_range(m: TextMap, rng: lsp.Range) -> TextRange:
    start = from_lsp_position(m, rng.start)
    end = from_lsp_position(m, rng.end)
    return TextRange(min(start, end), max(start, end))


def to_lsp_diagnostic(m: TextMap, d: Diagnostic, uri: str) -> lsp.Diagnostic:
    """Convert a finding in this document; related places in other files keep their path."""
    related = [
        lsp.DiagnosticRelatedInformation(
            location=lsp.Location(uri=uri, range=to_lsp_range(m, r.range)), message=r.message
        )
        for r in d.related
        if r.path is None
    ]
    tags = [lsp.DiagnosticTag.Unnecessary] if d.unnecessary else None
    return lsp.Diagnostic(
        range=to_lsp_range(m, d.range),
        message=d.message,
        severity=_SEVERITY[d.severity],
        code=d.code,
        code_description=lsp.CodeDescription(href=rule_doc_url(d.code)),
        source="promptls",
        related_information=related or None,
        tags=tags,
        data={"code": d.code, "start": d.range.start, "end": d.range.end},
    )


def to_lsp_text_edits(m: TextMap, edits: list[tuple[TextRange, str]]) -> list[lsp.TextEdit]:
    return [lsp.TextEdit(range=to_lsp_range(m, r), new_text=t) for r, t in edits]


def _units(s: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(s.encode("utf-8", "surrogatepass"))
    if s.isascii():
        return len(s)
    return len(s) + sum(1 for ch in s if ord(ch) > 0xFFFF)


def _column_of_units(line: str, units: int, encoding: str) -> int:
    """The code-point column that ``units`` code units into ``line`` falls on (clamped)."""
    if line.isascii():
        return min(units, len(line))
    used = 0
    for i, ch in enumerate(line):
        width = (
            len(ch.encode("utf-8", "surrogatepass"))
            if encoding == "utf-8"
            else (2 if ord(ch) > 0xFFFF else 1)
        )
        if used + width > units:
            return i
        used += width
    return len(line)
