"""textDocument/inlayHint: each message's tokens (each section's, in a prompt template).

The logic is ``assembly.ide.inlay``; answers come from the latest finished analysis, and
the client is asked to refresh when a newer one finishes (``documents._finished``).
"""

from __future__ import annotations

from lsprotocol import types as lsp

from assembly.ide import inlay
from server import convert
from server.app import PromptServer
from server.handlers.documents import current_snapshot, latest_snapshot
from server.tokenizers import load_tokenizer
from server.workspace import Analysis


async def inlay_hint(ls: PromptServer, params: lsp.InlayHintParams) -> list[lsp.InlayHint] | None:
    uri = params.text_document.uri
    snap = latest_snapshot(ls, uri) or await current_snapshot(ls, uri)
    if snap is None:
        return None
    rng = convert.from_lsp_range(snap.text_map, params.range)
    a = snap.analysis
    if isinstance(a, Analysis):
        hints = [h for r in a.records or (a,) for h in inlay.conversation_inlay_hints(r, rng)]
    else:
        tokenizer = load_tokenizer(a.settings.encoding, model=a.settings.model).tokenizer
        hints = inlay.prompt_inlay_hints(a, rng, tokenizer=tokenizer)
    return [convert.to_lsp_inlay_hint(snap.text_map, h) for h in hints] or None
