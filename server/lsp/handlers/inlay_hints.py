"""textDocument/inlayHint: each message's tokens (each section's, in a prompt template).

The logic is ``assembly.ide.inlay``; answers come from the latest finished analysis, its
hints moved into the current text when it is of an older one (those inside what changed
since are left out), and the client is asked to refresh when a newer one finishes
(``documents._finished``).
"""

from __future__ import annotations

from lsprotocol import types as lsp

from assembly.host import Analysis
from assembly.ide import inlay, placed
from assembly.text import TextRange
from server.lsp import convert
from server.lsp.app import PromptServer
from server.lsp.handlers.documents import latest_view
from server.tokenizers import load_tokenizer


async def inlay_hint(ls: PromptServer, params: lsp.InlayHintParams) -> list[lsp.InlayHint] | None:
    view = await latest_view(ls, params.text_document.uri)
    if view is None or view.base is None or view.base.analysis is None:
        return None
    rng = view.range_of(params.range)
    a = view.base.analysis
    if isinstance(a, Analysis):
        hints = [
            placed(h, r.base)  # (a dataset's records: each of its own text)
            for r in a.records or (a,)
            if r.base <= rng.end and rng.start <= r.base + len(r.text)
            for h in inlay.conversation_inlay_hints(
                r, TextRange(max(0, rng.start - r.base), rng.end - r.base)
            )
        ]
    else:
        tokenizer = load_tokenizer(a.settings.encoding, model=a.settings.model).tokenizer
        hints = inlay.prompt_inlay_hints(a, rng, tokenizer=tokenizer)
    # A hint inside what changed since its analysis has no place yet (the refresh brings it).
    hints = [h for h in hints if view.unchanged(h.offset)]
    return [convert.to_lsp_inlay_hint(view.text_map, view.carry(h)) for h in hints] or None
