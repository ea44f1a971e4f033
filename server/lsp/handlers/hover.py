"""textDocument/hover: what the model receives, told where the cursor is.

The logic is ``assembly.ide.hover``; this answers from the latest finished analysis, so a
hover never waits for a re-analysis under way (only the very first one is awaited). When
that analysis is of an older text, the cursor and the answer's range are mapped between
the two texts, and the hover says so.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from lsprotocol import types as lsp

from assembly.host import Analysis
from assembly.ide import hover as ide_hover
from assembly.ide import placed
from server.lsp import convert
from server.lsp.app import PromptServer
from server.lsp.handlers.documents import latest_view
from server.tokenizers import load_tokenizer

STALE_NOTE = "\n\n---\n*From the analysis of version {version}: the document has changed since.*"


async def hover(ls: PromptServer, params: lsp.HoverParams) -> lsp.Hover | None:
    view = await latest_view(ls, params.text_document.uri, asked=params)
    if view is None or view.base is None or view.base.analysis is None:
        return None
    offset = view.offset_of(params.position)
    a, today = view.base.analysis, dt.date.today()
    if isinstance(a, Analysis):
        # In a dataset, the record whose line the cursor is on (``offset - base`` in it).
        r = a.at(offset)
        res = ide_hover.conversation_hover(r, offset - r.base, today=today)
        res = placed(res, r.base) if res is not None else None
    else:
        tokenizer = load_tokenizer(a.settings.encoding, model=a.settings.model).tokenizer
        res = ide_hover.prompt_hover(a, offset, tokenizer=tokenizer, today=today)
    if res is None:
        return None
    res = view.carry(res)
    if not view.fresh:
        note = STALE_NOTE.format(version=view.base.version)
        res = dataclasses.replace(res, markdown=res.markdown + note)
    markdown = ls.session.capabilities.markdown_hover
    return convert.to_lsp_hover(view.text_map, res, markdown=markdown)
