"""Apply LSP text edits to a text, as a client does (positions in the negotiated encoding)."""

from __future__ import annotations

from collections.abc import Iterable

from lsprotocol import types as lsp

from server.lsp.convert import TextMap, from_lsp_range


def apply_lsp_edits(text: str, edits: Iterable[lsp.TextEdit], encoding: str) -> str:
    """Apply non-overlapping edits; every range refers to the text before any edit."""
    m = TextMap.of(text, encoding)
    ranges = [(from_lsp_range(m, e.range), e.new_text) for e in edits]
    for rng, new in sorted(ranges, key=lambda r: (r[0].start, r[0].end), reverse=True):
        text = text[: rng.start] + new + text[rng.end :]
    return text


def workspace_edits(edit: lsp.WorkspaceEdit | None, uri: str) -> list[lsp.TextEdit]:
    """The text edits a workspace edit makes to ``uri`` (``changes`` or ``documentChanges``)."""
    if edit is None:
        return []
    res: list[lsp.TextEdit] = list((edit.changes or {}).get(uri, []))
    for change in edit.document_changes or ():
        if isinstance(change, lsp.TextDocumentEdit) and change.text_document.uri == uri:
            res.extend(e for e in change.edits if isinstance(e, lsp.TextEdit))
    return res
