"""textDocument/completion: placeholders, tool names, file ids, open tool call ids, roles.

The logic is ``assembly.ide.completion``; it answers on the version the request was sent
for (what was just typed), and reads what is being typed from the text, so a half-typed
document completes.
"""

from __future__ import annotations

from lsprotocol import types as lsp

from assembly.host import Analysis
from assembly.ide import completion as ide_completion
from assembly.ide import placed
from server.lsp import convert
from server.lsp.app import PromptServer
from server.lsp.handlers.documents import current_view

TRIGGER_CHARACTERS = ["{", '"', ":", " "]


async def completion(ls: PromptServer, params: lsp.CompletionParams) -> lsp.CompletionList | None:
    view = await current_view(ls, params.text_document.uri, asked=params)
    if view is None or view.base is None or view.base.analysis is None:
        return None
    offset = view.offset_of(params.position)
    a = view.base.analysis
    if isinstance(a, Analysis):
        r = a.at(offset)  # (in a dataset, the record under the cursor: ``offset - base`` in it)
        found = ide_completion.conversation_completions(r.conversation, r.text, offset - r.base)
        res = [placed(i, r.base) for i in found]
    else:
        res = ide_completion.template_completions(a.template, offset)
    if not res:
        return None
    markdown = ls.session.capabilities.markdown_completion_docs
    items = [
        convert.to_lsp_completion_item(view.text_map, view.carry(i), markdown=markdown) for i in res
    ]
    return lsp.CompletionList(is_incomplete=False, items=items)
