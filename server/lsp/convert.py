"""THE conversion between ``assembly`` values and LSP values.

``assembly`` speaks code-point offsets; LSP speaks (line, character) in the position
encoding negotiated at initialize (UTF-16 by default, UTF-8 or UTF-32 when the client
offers them). Nothing else in the server builds an ``lsp.Position`` from numbers. Out of
range positions are clamped, never an error. A line ends at ``\\n``, ``\\r\\n`` or a lone
``\\r`` (LSP's line ends; U+2028 and the like are ordinary characters); the ``\\r`` of a
``\\r\\n`` belongs to the line break, so a column never counts it.

Work is proportional to the length of the lines involved, never to the document: a
``TextMap`` (text + line index) is built once per analysed version and shared by every
conversion of that version. An open document's text is a ``Rope``, which is its own line
index, so its ``TextMap`` costs nothing to build; other texts (files that related places
point into) are plain ``str`` indexed with a ``LineIndex``. ``apply_lsp_changes`` turns a
``didChange``'s content changes into edits of the rope.

A ``TextMap`` keeps the positions it converted (``positions``, by offset, bounded), and
the next version's map starts from those its edit left where they were
(``TextMap.of(previous=)``): a position before the edit is the same, one after it on a
line the edit did not touch moves by the offsets and lines the edit added. Publishing a
document's findings after a keystroke then converts only the findings the edit moved
within their line (a JSON Lines document of 10 MB has some 130 findings and as many
related places, each on a line of about a thousand characters).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from lsprotocol import types as lsp

from assembly.diagnostics import Diagnostic, Related, Severity, TextEdit
from assembly.host import Edit
from assembly.ide.completion import CompletionItem, CompletionKind
from assembly.ide.fixes import FindingKey, QuickFix
from assembly.ide.folding import Fold, FoldKind
from assembly.ide.hover import HoverResult, plain_text
from assembly.ide.inlay import InlayHint
from assembly.ide.lens import Lens
from assembly.ide.navigation import Target
from assembly.ide.symbols import Symbol, SymbolKind
from assembly.rope import Rope, Text
from assembly.text import LineIndex, TextRange, skipped
from server.links import rule_doc_url

_SEVERITY = {
    Severity.ERROR: lsp.DiagnosticSeverity.Error,
    Severity.WARNING: lsp.DiagnosticSeverity.Warning,
    Severity.INFO: lsp.DiagnosticSeverity.Information,
    Severity.HINT: lsp.DiagnosticSeverity.Hint,
}
_ENCODINGS = ("utf-8", "utf-16", "utf-32")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
_SAME_LINE_SPAN = 4096  # a longer range is converted end by end (it may span many lines)
_KEPT_POSITIONS = 4096  # positions a ``TextMap`` keeps at most (an outline converts 40,000)


@dataclass(frozen=True, slots=True)
class TextMap:
    """A text, its line index and the negotiated encoding: what conversions need.

    ``positions`` holds the positions converted in this text so far, by offset (at most
    ``_KEPT_POSITIONS``; the ``lsp.Position`` objects are shared, never changed). Threads
    may add to it at once: each entry is a pure function of the text.
    """

    text: Text
    index: LineIndex | Rope  # a rope is its own line index
    encoding: str  # "utf-16" | "utf-8" | "utf-32"
    positions: dict[int, lsp.Position] = field(default_factory=dict, compare=False, repr=False)
    # By the start of a line longer than ``_STEP``: the code units of its first 0, 1, 2 …
    # ``_STEP`` code points (``_units_before``).
    steps: dict[int, list[int]] = field(default_factory=dict, compare=False, repr=False)

    @staticmethod
    def of(text: Text, encoding: str, *, previous: TextMap | None = None) -> TextMap:
        """Index ``text`` (a rope at no cost, a ``str`` in one pass over it); an encoding
        LSP does not define counts as UTF-16 (its default). ``previous``: the map of an
        earlier version of the same document, whose positions outside what changed since
        are carried over (both texts ropes, in one encoding; see the module)."""
        encoding = str(getattr(encoding, "value", encoding)).lower()
        index = text if isinstance(text, Rope) else LineIndex(text)
        res = TextMap(text, index, encoding if encoding in _ENCODINGS else "utf-16")
        if (
            previous is not None
            and previous.positions
            and previous.encoding == res.encoding
            and isinstance(text, Rope)
            and isinstance(previous.text, Rope)
        ):
            _carry(previous.text, previous.positions.copy(), text, res.positions)
        return res


def _carry(
    old: Rope, positions: dict[int, lsp.Position], new: Rope, into: dict[int, lsp.Position]
) -> None:
    """The positions of ``old`` that stay true in ``new``, at their offsets in ``new``
    (``carrier``)."""
    move = carrier(old, new)
    for offset, position in positions.items():
        got = move(offset, position.line)
        if got is not None:
            at, line = got
            into[at] = position if line == position.line else lsp.Position(line, position.character)


def carrier(old: Rope, new: Rope) -> Callable[[int, int], tuple[int, int] | None]:
    """Where a position of ``old`` (its offset and line) is in ``new`` with the same column:
    ``move(offset, line) -> (offset, line)``, or None when it may have changed.

    With ``old[:p] == new[:p]`` and ``old[old_end:] == new[new_end:]``: a position before
    ``p`` reads only text before ``p`` (its line, and the character at it for a ``\r\n``);
    one at or after ``old_end`` whose line starts after ``old_end`` (so the line break
    before it is unchanged too) keeps its column, on a line moved by the lines the edit
    added. Anything else is converted again.
    """
    p, old_end, new_end = new.changed_span(old)
    delta = new_end - old_end
    lines = new.line_count - old.line_count
    # A line starts after ``old_end`` when it comes after the line holding ``old_end``.
    last = old.line_col(old_end).line

    def move(offset: int, line: int) -> tuple[int, int] | None:
        if offset < p:
            return offset, line
        if offset >= old_end and line > last:
            return offset + delta, line + lines
        return None

    return move


def _keep(m: TextMap, offset: int, position: lsp.Position) -> None:
    if len(m.positions) < _KEPT_POSITIONS:
        m.positions[offset] = position


def apply_lsp_changes(
    text: Rope, changes: Iterable[lsp.TextDocumentContentChangeEvent], encoding: str
) -> tuple[Rope, Edit]:
    """Apply a ``didChange``'s content changes in order; each range is in the text the
    previous change left, in the negotiated encoding (clamped like every position).
    Returns the new text and the one ``Edit`` covering every change (in code points)."""
    edit = Edit.none(len(text))
    for change in changes:
        if isinstance(change, lsp.TextDocumentContentChangePartial):
            rng = from_lsp_range(TextMap.of(text, encoding), change.range)
            step = Edit.replace(rng.start, rng.end, change.text)
            text = text.edit(rng.start, rng.end, change.text)
        else:
            step = Edit(0, len(text), len(change.text))
            text = text.with_text(change.text)
        edit = edit.then(step)
    return text, edit


def to_lsp_position(m: TextMap, offset: int) -> lsp.Position:
    """Convert a code-point offset to an LSP position in the negotiated encoding."""
    offset = max(0, min(offset, len(m.text)))
    res = m.positions.get(offset)
    if res is None:
        line, character = _point(m, offset)
        res = lsp.Position(line, character)
        _keep(m, offset, res)
    return res


def _kept_point(m: TextMap, offset: int) -> tuple[int, int]:
    """``to_lsp_position`` as (line, character), for an offset in the text; no
    ``lsp.Position`` is made once ``m`` keeps all it may (an outline converts 40,000)."""
    res = m.positions.get(offset)
    if res is not None:
        return res.line, res.character
    line, character = _point(m, offset)
    if len(m.positions) < _KEPT_POSITIONS:
        m.positions[offset] = lsp.Position(line, character)
    return line, character


def _point(m: TextMap, offset: int) -> tuple[int, int]:
    """The line and character of an offset in the text."""
    # The line up to the offset, and one more character: one slice (of one chunk, mostly).
    line_no, column, skip, line = _line_head(m, offset, min(offset + 1, len(m.text)))
    if not column:
        return line_no, 0
    # An offset between the "\r" and the "\n" of a line break is the line's end.
    c = column - skip  # (the column in ``line``)
    if line[c - 1] == "\r" and line[c:] == "\n":
        column -= 1
        c -= 1
    if m.encoding == "utf-32":
        return line_no, column
    return line_no, _units_before(m, offset - column, skip) + _units(line[:c], m.encoding)


def _line_head(m: TextMap, offset: int, stop: int) -> tuple[int, int, int, str]:
    """The line and code-point column of ``offset``, how many code points of the line's
    start are left out (a multiple of ``_STEP``, on a line longer than it), and the text
    from there to ``stop`` (a rope finds them in one look-up: ``Rope.line_head``)."""
    index = m.index
    if type(index) is Rope:
        return index.line_head(offset, stop, _STEP)
    lc = index.line_col(offset)
    column = lc.column
    skip = skipped(column, _STEP)
    return lc.line, column, skip, m.text[offset - column + skip : stop]


# A minified document is one line: every position on it would count its column in code
# units from the line's start (a megabyte each, an outline of 20,000 entries took 78 s).
# Such a line is counted once in pieces of ``_STEP`` code points, kept in its ``TextMap``.
_STEP = 4096
_NO_STEPS = [0]


def _units_before(m: TextMap, line_start: int, skip: int) -> int:
    """The code units of the first ``skip`` code points (a multiple of ``_STEP``) of the
    line at ``line_start``, from the pieces counted so far (``TextMap.steps``)."""
    if not skip:
        return 0
    k = skip // _STEP
    steps = m.steps.get(line_start, _NO_STEPS)
    if len(steps) <= k:
        # (Threads may ask at once: each keeps a whole list, never one being extended.)
        steps = list(steps)
        text, encoding = m.text, m.encoding
        while len(steps) <= k:
            a = line_start + (len(steps) - 1) * _STEP
            steps.append(steps[-1] + _units(text[a : a + _STEP], encoding))
        m.steps[line_start] = steps
    return steps[k]


def to_lsp_range(m: TextMap, rng: TextRange) -> lsp.Range:
    """Convert a range (``lsp_span``)."""
    a, b, c, d = lsp_span(m, rng)
    return lsp.Range(lsp.Position(a, b), lsp.Position(c, d))


def lsp_span(m: TextMap, rng: TextRange) -> tuple[int, int, int, int]:
    """Where ``rng`` is in LSP's terms: start line and character, end line and character.
    A range on a single line reads that line once, for both ends; the positions of an
    earlier version carried into ``m`` make it a look-up."""
    n = len(m.text)
    start, end = max(0, min(rng.start, n)), max(0, min(rng.end, n))
    if end <= start:
        return _kept_point(m, start) * 2
    kept = m.positions
    if end - start <= _SAME_LINE_SPAN and (start not in kept or end not in kept):
        res = _one_line(m, start, end)
        if res is not None:
            if len(kept) < _KEPT_POSITIONS:
                _keep(m, start, lsp.Position(res[0], res[1]))
                _keep(m, end, lsp.Position(res[2], res[3]))
            return res
    return _kept_point(m, start) + _kept_point(m, end)


def _one_line(m: TextMap, start: int, end: int) -> tuple[int, int, int, int] | None:
    """``lsp_span`` of ``[start, end)`` (``start < end``) when both ends are on one line
    and the start is not inside a "\r\n"; else None."""
    # The line up to the end, and one more character.
    line_no, column, skip, line = _line_head(m, start, min(end + 1, len(m.text)))
    a = column - skip  # (columns in ``line``)
    b = end - start + a
    # A line end inside, except the "\r" of a "\r\n" the range ends in: two lines.
    crosses = line.find("\n", a, b) != -1 or line.find("\r", a, b - 1) != -1
    crosses = crosses or (line[b - 1] == "\r" and line[b:] != "\n")
    if crosses or (a and line[a - 1] == "\r" and line[a] == "\n"):
        return None
    # Both ends on one line, the start not inside a "\r\n"; the end may be.
    b_column = b - 1 if line[b - 1] == "\r" and line[b:] == "\n" else b
    if m.encoding == "utf-32":
        return line_no, column, line_no, b_column + skip
    a_units = _units_before(m, start - column, skip) + _units(line[:a], m.encoding)
    return line_no, a_units, line_no, a_units + _units(line[a:b_column], m.encoding)


def from_lsp_position(m: TextMap, position: lsp.Position) -> int:
    """Convert an LSP position to a code-point offset, clamped to the text.

    A line past the last one is the end of the text; a character past the end of its line
    is the line's end (before its ``\\r\\n``); negative values count as 0. A character in
    the middle of a code point (half a surrogate pair, part of a UTF-8 sequence) rounds
    down to the start of that code point.
    """
    if position.line < 0:
        return 0
    if position.line >= m.index.line_count:
        return len(m.text)
    start = m.index.line_start(position.line)
    end = m.index.offset(position.line, len(m.text))  # the line's end, before its "\n"
    if end > start and m.text[end - 1] == "\r" and m.text[end : end + 1] == "\n":
        end -= 1
    units = max(position.character, 0)
    # A code point is at least one unit in every encoding: only ``units`` can be needed.
    line = m.text[start : min(end, start + units)]
    if m.encoding == "utf-32":
        return start + len(line)
    return start + _column_of_units(line, units, m.encoding)


def from_lsp_range(m: TextMap, rng: lsp.Range) -> TextRange:
    start = from_lsp_position(m, rng.start)
    end = from_lsp_position(m, rng.end)
    return TextRange(min(start, end), max(start, end))


def to_lsp_diagnostic(
    m: TextMap, d: Diagnostic, uri: str, *, others: Mapping[str, TextMap] | None = None
) -> lsp.Diagnostic:
    """Convert a finding in this document.

    Related places in this document are always kept; a related place in another file is
    kept when ``others`` has that file's ``TextMap`` (by path), else left out, since its
    offsets cannot be placed without the file's text.
    """
    related = [
        info
        for r in d.related
        if (info := _related_information(m, r, uri, others or {})) is not None
    ]
    return lsp.Diagnostic(
        range=to_lsp_range(m, d.range),
        message=d.message,
        severity=_SEVERITY[d.severity],
        code=d.code,
        code_description=lsp.CodeDescription(href=rule_doc_url(d.code)),
        source="promptls",
        related_information=related or None,
        tags=[lsp.DiagnosticTag.Unnecessary] if d.unnecessary else None,
        data=diagnostic_data(d),
    )


def diagnostic_data(d: Diagnostic) -> dict[str, object]:
    """The ``data`` of a finding's LSP diagnostic: its code and offsets, by which a code
    action request names the finding (``FindingKey``)."""
    return {"code": d.code, "start": d.range.start, "end": d.range.end}


def to_lsp_diagnostics(
    m: TextMap,
    diagnostics: Iterable[Diagnostic],
    uri: str,
    *,
    other_texts: Mapping[str, str] | None = None,
) -> list[lsp.Diagnostic]:
    """Convert the findings in this document (those in other files are skipped).

    ``other_texts`` holds the texts of other files by path (``Analysis.other_texts``);
    each file that related places point into is indexed once for the whole list.
    """
    mine = [d for d in diagnostics if d.path is None]
    texts = other_texts or {}
    paths = {r.path for d in mine for r in d.related if r.path is not None and r.path in texts}
    others = {p: TextMap.of(texts[p], m.encoding) for p in paths}
    return [to_lsp_diagnostic(m, d, uri, others=others) for d in mine]


def to_lsp_text_edits(m: TextMap, edits: list[tuple[TextRange, str]]) -> list[lsp.TextEdit]:
    return [lsp.TextEdit(range=to_lsp_range(m, r), new_text=t) for r, t in edits]


def to_lsp_hover(m: TextMap, res: HoverResult, *, markdown: bool) -> lsp.Hover:
    """Markdown, or readable plain text for clients that cannot render Markdown."""
    contents = (
        lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=res.markdown)
        if markdown
        else lsp.MarkupContent(kind=lsp.MarkupKind.PlainText, value=plain_text(res.markdown))
    )
    return lsp.Hover(contents=contents, range=to_lsp_range(m, res.range))


def to_lsp_inlay_hint(m: TextMap, hint: InlayHint) -> lsp.InlayHint:
    return lsp.InlayHint(
        position=to_lsp_position(m, hint.offset), label=hint.label, tooltip=hint.tooltip or None
    )


def to_lsp_code_lens(m: TextMap, lens: Lens) -> lsp.CodeLens:
    command = lsp.Command(title=lens.title, command=lens.command, arguments=list(lens.arguments))
    return lsp.CodeLens(range=to_lsp_range(m, lens.range), command=command)


# ------------------------------------------------------------------------------ outline,
# folding, navigation, completion, code actions

_SYMBOL_KINDS = {
    SymbolKind.SETTINGS: lsp.SymbolKind.Namespace,
    SymbolKind.SETTING: lsp.SymbolKind.Property,
    SymbolKind.PROMPT: lsp.SymbolKind.String,
    SymbolKind.FILES: lsp.SymbolKind.Array,
    SymbolKind.FILE: lsp.SymbolKind.File,
    SymbolKind.TOOLS: lsp.SymbolKind.Array,
    SymbolKind.TOOL: lsp.SymbolKind.Function,
    SymbolKind.TOOL_CALL: lsp.SymbolKind.Function,
    SymbolKind.OBJECT: lsp.SymbolKind.Object,
    SymbolKind.FRONT_MATTER: lsp.SymbolKind.Namespace,
    SymbolKind.SECTION: lsp.SymbolKind.String,  # as Markdown outlines show headings
    SymbolKind.SYSTEM_MESSAGE: lsp.SymbolKind.Constant,
    SymbolKind.USER_MESSAGE: lsp.SymbolKind.Event,
    SymbolKind.ASSISTANT_MESSAGE: lsp.SymbolKind.Method,
    SymbolKind.TOOL_MESSAGE: lsp.SymbolKind.Field,
    SymbolKind.REMINDER_MESSAGE: lsp.SymbolKind.Constant,
    SymbolKind.SUMMARY_MESSAGE: lsp.SymbolKind.Namespace,
    SymbolKind.RECORD: lsp.SymbolKind.Object,
}
_COMPLETION_KINDS = {
    CompletionKind.PLACEHOLDER: lsp.CompletionItemKind.Variable,
    CompletionKind.TOOL: lsp.CompletionItemKind.Function,
    CompletionKind.FILE: lsp.CompletionItemKind.File,
    CompletionKind.TOOL_CALL: lsp.CompletionItemKind.Reference,
    CompletionKind.ROLE: lsp.CompletionItemKind.EnumMember,
}
_FOLD_KINDS = {
    FoldKind.REGION: lsp.FoldingRangeKind.Region,
    FoldKind.COMMENT: lsp.FoldingRangeKind.Comment,
}
FIX_ALL_KIND = f"{lsp.CodeActionKind.SourceFixAll.value}.promptls"


# An LSP range as ``json.dumps`` writes pygls's unstructured ``lsp.Range``.
RANGE_JSON = b'{"start": {"line": %d, "character": %d}, "end": {"line": %d, "character": %d}}'


def document_symbol_json(
    m: TextMap, s: Symbol, span: tuple[int, int, int, int] | None = None
) -> bytes:
    """An outline entry as pygls writes the ``lsp.DocumentSymbol`` of ``s`` (its JSON,
    ASCII), without making one: a large conversation's outline has ten thousand entries,
    and the objects, their unstructured dicts and ``json.dumps`` of those took half of
    its time. ``span``: ``lsp_span`` of its range, when the caller has it."""
    out = b'{"name": %s, "kind": %d, "range": %s, "selectionRange": %s' % (
        json.dumps(s.name).encode("ascii"),
        _SYMBOL_KINDS[s.kind].value,
        RANGE_JSON % (span or lsp_span(m, s.range)),
        RANGE_JSON % lsp_span(m, s.focus_range),
    )
    if s.detail is not None:
        out += b', "detail": %s' % json.dumps(s.detail).encode("ascii")
    if s.children:
        out += b', "children": [%s]' % b", ".join([document_symbol_json(m, c) for c in s.children])
    return out + b"}"


def folding_range_json(m: TextMap, fold: Fold) -> bytes:
    """A fold as whole lines (every client supports line folding), as pygls writes an
    ``lsp.FoldingRange`` (its JSON, ASCII), without making one: a large conversation has
    5,000 folds to send after every keystroke. Its ``lines`` when it has them (of the
    text of ``m``), else the lines of its range's ends."""
    first, last = _fold_lines(m, fold)
    if fold.kind is None:
        return b'{"startLine": %d, "endLine": %d}' % (first, last)
    return b'{"startLine": %d, "endLine": %d, "kind": "%s"}' % (
        first,
        last,
        _FOLD_KINDS[fold.kind].value.encode("ascii"),
    )


def _fold_lines(m: TextMap, fold: Fold) -> tuple[int, int]:
    if fold.lines is not None:
        return fold.lines
    return m.index.line_of(fold.range.start), m.index.line_of(fold.range.end)


def to_lsp_location(m: TextMap, uri: str, target: Target) -> lsp.Location:
    return lsp.Location(uri=uri, range=to_lsp_range(m, target.focus_range))


def to_lsp_completion_item(
    m: TextMap, item: CompletionItem, *, markdown: bool
) -> lsp.CompletionItem:
    """Documentation in Markdown, or a plain string for clients that do not render it."""
    doc = item.documentation
    documentation: lsp.MarkupContent | str | None = None
    if doc and markdown:
        documentation = lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=doc)
    elif doc:
        documentation = plain_text(doc)
    return lsp.CompletionItem(
        label=item.label,
        kind=_COMPLETION_KINDS[item.kind],
        detail=item.detail,
        documentation=documentation,
        sort_text=item.sort_text,
        text_edit=lsp.TextEdit(range=to_lsp_range(m, item.range), new_text=item.new_text),
    )


def from_lsp_finding(m: TextMap, d: lsp.Diagnostic) -> FindingKey | None:
    """The finding an editor's diagnostic stands for: by its ``data``, else by its range."""
    data = d.data if isinstance(d.data, dict) else {}
    code, start, end = data.get("code"), data.get("start"), data.get("end")
    if isinstance(code, str) and isinstance(start, int) and isinstance(end, int):
        if 0 <= start <= end:
            return FindingKey(code, TextRange(start, end))
    if d.code is None:
        return None
    return FindingKey(str(d.code), from_lsp_range(m, d.range))


def to_lsp_code_actions(
    m: TextMap,
    uri: str,
    fixes: Iterable[QuickFix],
    fix_all: list[TextEdit],
    *,
    only: Iterable[str] | None,
) -> list[lsp.CodeAction]:
    """Quick fixes (each with the diagnostic it fixes), then "fix all" when there is one.

    ``only`` is the client's filter of code action kinds (a kind matches its sub-kinds).
    """
    wanted = [str(getattr(k, "value", k)) for k in only] if only is not None else None

    def allowed(kind: str) -> bool:
        return wanted is None or any(kind == w or kind.startswith(w + ".") for w in wanted)

    res = []
    if allowed(lsp.CodeActionKind.QuickFix.value):
        for f in fixes:
            edits = to_lsp_text_edits(m, [(e.range, e.new_text) for e in f.fix.edits])
            res.append(
                lsp.CodeAction(
                    title=f.fix.title,
                    kind=lsp.CodeActionKind.QuickFix,
                    diagnostics=[to_lsp_diagnostic(m, f.diagnostic, uri)],
                    is_preferred=f.preferred or None,
                    edit=lsp.WorkspaceEdit(changes={uri: edits}),
                )
            )
    if fix_all and allowed(FIX_ALL_KIND):
        edits = to_lsp_text_edits(m, [(e.range, e.new_text) for e in fix_all])
        res.append(
            lsp.CodeAction(
                title="Apply every promptls fix",
                kind=FIX_ALL_KIND,
                edit=lsp.WorkspaceEdit(changes={uri: edits}),
            )
        )
    return res


def _related_information(
    m: TextMap, r: Related, uri: str, others: Mapping[str, TextMap]
) -> lsp.DiagnosticRelatedInformation | None:
    if r.path is None:
        location = lsp.Location(uri=uri, range=to_lsp_range(m, r.range))
    elif (other := others.get(r.path)) is not None:
        location = lsp.Location(uri=Path(r.path).as_uri(), range=to_lsp_range(other, r.range))
    else:
        return None
    return lsp.DiagnosticRelatedInformation(location=location, message=r.message)


def _units(s: str, encoding: str) -> int:
    """The length of ``s`` in code units (lone surrogates count as one code point)."""
    if encoding == "utf-32" or s.isascii():
        return len(s)
    if encoding == "utf-8":
        return len(s.encode("utf-8", "surrogatepass"))
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def _column_of_units(line: str, units: int, encoding: str) -> int:
    """The code-point column that ``units`` code units into ``line`` fall on (clamped).

    ASCII runs are skipped at once and a non-ASCII run is bisected, so a long line costs
    a few encodes, not a Python loop over its code points.
    """
    if line.isascii():
        return min(units, len(line))
    col = used = 0
    for run in _NON_ASCII.finditer(line):
        n_ascii = run.start() - col
        if used + n_ascii >= units:
            return col + (units - used)
        used += n_ascii
        col = run.start()
        text = run.group()
        width = _units(text, encoding)
        if used + width > units:
            return col + _fit(text, units - used, encoding)
        used += width
        col = run.end()
    return min(col + (units - used), len(line))


def _fit(s: str, units: int, encoding: str) -> int:
    """The longest prefix of ``s`` (in code points) that is at most ``units`` long."""
    lo, hi = 0, min(len(s), units)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _units(s[:mid], encoding) <= units:
            lo = mid
        else:
            hi = mid - 1
    return lo
