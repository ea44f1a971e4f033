"""textDocument/completion: placeholders, tool names, file ids, open tool call ids, roles.

The logic is ``assembly.ide.completion``; it answers on the current version (what was just
typed), and reads what is being typed from the text, so a half-typed document completes.
"""

from __future__ import annotations

from lsprotocol import types as lsp

from assembly.ide import completion as ide_completion
from server import convert
from server.app import PromptServer
from server.handlers.documents import current_snapshot
from server.workspace import Analysis

TRIGGER_CHARACTERS = ["{", '"', ":", " "]


async def completion(ls: PromptServer, params: lsp.CompletionParams) -> lsp.CompletionList | None:
    snap = await current_snapshot(ls, params.text_document.uri)
    if snap is None:
        return None
    offset = convert.from_lsp_position(snap.text_map, params.position)
    a = snap.analysis
    if isinstance(a, Analysis):
        res = ide_completion.conversation_completions(a.conversation, a.text, offset)
    else:
        res = ide_completion.template_completions(a.template, offset)
    if not res:
        return None
    markdown = ls.session.capabilities.markdown_completion_docs
    items = [convert.to_lsp_completion_item(snap.text_map, i, markdown=markdown) for i in res]
    return lsp.CompletionList(is_incomplete=False, items=items)
