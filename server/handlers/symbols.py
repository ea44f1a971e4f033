"""textDocument/documentSymbol: the outline of messages, document keys and sections.

The logic is ``assembly.ide.symbols``; the outline is of the current version. It is built
and converted off the message loop: a 10 MB conversation has ten thousand messages, and
their outline takes a few hundred milliseconds, during which hovers must still answer.
"""

from __future__ import annotations

import asyncio

from lsprotocol import types as lsp

from assembly.ide import symbols as ide_symbols
from server import convert
from server.app import PromptServer
from server.handlers.documents import current_snapshot
from server.session import Snapshot
from server.workspace import Analysis


async def document_symbol(
    ls: PromptServer, params: lsp.DocumentSymbolParams
) -> list[lsp.DocumentSymbol] | None:
    snap = await current_snapshot(ls, params.text_document.uri)
    if snap is None:
        return None
    return await asyncio.to_thread(_outline, snap) or None


def _outline(snap: Snapshot) -> list[lsp.DocumentSymbol]:
    a = snap.analysis
    if isinstance(a, Analysis):
        res = ide_symbols.conversation_symbols(a.conversation)
    else:
        res = ide_symbols.template_symbols(a.template)
    return [convert.to_lsp_document_symbol(snap.text_map, s) for s in res]
