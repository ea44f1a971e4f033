"""textDocument/hover: what the model receives, told where the cursor is.

The logic is ``assembly.ide.hover``; this answers from the latest finished analysis, so a
hover never waits for a re-analysis under way (only the very first one is awaited).
"""

from __future__ import annotations

import datetime as dt

from lsprotocol import types as lsp

from assembly.ide import hover as ide_hover
from server import convert
from server.app import PromptServer
from server.handlers.documents import current_snapshot, latest_snapshot
from server.tokenizers import load_tokenizer
from server.workspace import Analysis


async def hover(ls: PromptServer, params: lsp.HoverParams) -> lsp.Hover | None:
    uri = params.text_document.uri
    snap = latest_snapshot(ls, uri) or await current_snapshot(ls, uri)
    if snap is None:
        return None
    offset = convert.from_lsp_position(snap.text_map, params.position)
    a, today = snap.analysis, dt.date.today()
    if isinstance(a, Analysis):
        # In a dataset, the record whose line the cursor is on.
        res = ide_hover.conversation_hover(a.at(offset), offset, today=today)
    else:
        tokenizer = load_tokenizer(a.settings.encoding, model=a.settings.model).tokenizer
        res = ide_hover.prompt_hover(a, offset, tokenizer=tokenizer, today=today)
    if res is None:
        return None
    return convert.to_lsp_hover(snap.text_map, res, markdown=ls.session.capabilities.markdown_hover)
