"""textDocument/foldingRange: messages, arrays, long strings; template sections and fences.

The logic is ``assembly.ide.folding``; folds are of the current version, found and
converted off the message loop (a 10 MB conversation has over ten thousand of them).
"""

from __future__ import annotations

import asyncio

from lsprotocol import types as lsp

from assembly.ide import folding as ide_folding
from server import convert
from server.app import PromptServer
from server.handlers.documents import current_snapshot
from server.session import Snapshot
from server.workspace import Analysis


async def folding_range(
    ls: PromptServer, params: lsp.FoldingRangeParams
) -> list[lsp.FoldingRange] | None:
    snap = await current_snapshot(ls, params.text_document.uri)
    if snap is None:
        return None
    return await asyncio.to_thread(_folds, snap) or None


def _folds(snap: Snapshot) -> list[lsp.FoldingRange]:
    a, index = snap.analysis, snap.text_map.index
    if isinstance(a, Analysis):
        res = ide_folding.conversation_folds(a.conversation, a.text, index=index)
    else:
        res = ide_folding.template_folds(a.template, index=index)
    return [convert.to_lsp_folding_range(snap.text_map, f) for f in res]
