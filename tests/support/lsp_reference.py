"""What the server's hand-written JSON must equal: lsprotocol objects made the plain way.

The server writes some answers' JSON itself, without lsprotocol objects (an outline of ten
thousand messages: ``convert.document_symbol_json``). The objects built here are the
reference: pygls would serialize exactly them, so the tests compare the two.
"""

from __future__ import annotations

from lsprotocol import types as lsp

from assembly.ide.symbols import Symbol
from server.lsp import convert
from server.lsp.convert import TextMap


def document_symbol(m: TextMap, s: Symbol) -> lsp.DocumentSymbol:
    """The ``lsp.DocumentSymbol`` of ``s``, its children included."""
    return lsp.DocumentSymbol(
        name=s.name,
        kind=convert._SYMBOL_KINDS[s.kind],
        range=convert.to_lsp_range(m, s.range),
        selection_range=convert.to_lsp_range(m, s.focus_range),
        detail=s.detail,
        children=[document_symbol(m, c) for c in s.children] or None,
    )
