"""textDocument/codeLens: the assembled total at the top of a conversation.

The logic is ``assembly.ide.lens``; clicking the lens runs ``promptls.showAssembled`` with
the document URI (and, on each record of a dataset, the record's 1-based number), which the
server answers with the ``promptls.assemble`` object. Lenses
come from the latest finished analysis, moved into the current text when it is older.
"""

from __future__ import annotations

from lsprotocol import types as lsp

from assembly.ide import lens
from server import convert
from server.app import PromptServer
from server.ext import SHOW_ASSEMBLED_COMMAND
from server.handlers.documents import latest_view
from server.workspace import Analysis


async def code_lens(ls: PromptServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens] | None:
    uri = params.text_document.uri
    view = await latest_view(ls, uri)
    if view is None or view.base is None or not isinstance(view.base.analysis, Analysis):
        return None
    a = view.base.analysis
    if a.records:  # a dataset: a lens on each record's line
        lenses = [
            x
            for k, r in enumerate(a.records, 1)
            for x in lens.conversation_lenses(
                r,
                command=SHOW_ASSEMBLED_COMMAND,
                arguments=(uri, k),
                at=r.conversation.root.range.start if r.conversation.root else 0,
            )
        ]
    else:
        lenses = lens.conversation_lenses(a, command=SHOW_ASSEMBLED_COMMAND, arguments=(uri,))
    return [convert.to_lsp_code_lens(view.text_map, view.carry(x)) for x in lenses]
