"""textDocument/definition and textDocument/references between tool calls, responses and files.

The logic is ``assembly.ide.navigation``: from a response's ``tool_call_id`` to the call,
from a file id to where the file is injected, from ``parent`` to the message; references
list every place naming the same id. Templates have no such links.
"""

from __future__ import annotations

from lsprotocol import types as lsp

from assembly.host import Analysis
from assembly.ide import navigation as ide_navigation
from assembly.ide import placed
from server.lsp import convert
from server.lsp.app import PromptServer
from server.lsp.handlers.documents import current_view


async def definition(ls: PromptServer, params: lsp.DefinitionParams) -> list[lsp.Location] | None:
    uri = params.text_document.uri
    view = await current_view(ls, uri, asked=params)
    if view is None or view.base is None or not isinstance(view.base.analysis, Analysis):
        return None
    offset = view.offset_of(params.position)
    a = view.base.analysis.at(offset)  # (a dataset's record: ``offset - a.base`` in it)
    res = ide_navigation.definition(a.conversation, a.text, offset - a.base)
    m = view.text_map
    if not res:
        return None
    return [convert.to_lsp_location(m, uri, view.carry(placed(t, a.base))) for t in res]


async def references(ls: PromptServer, params: lsp.ReferenceParams) -> list[lsp.Location] | None:
    uri = params.text_document.uri
    view = await current_view(ls, uri, asked=params)
    if view is None or view.base is None or not isinstance(view.base.analysis, Analysis):
        return None
    offset = view.offset_of(params.position)
    a, with_declaration = view.base.analysis.at(offset), params.context.include_declaration
    res = ide_navigation.references(
        a.conversation, a.text, offset - a.base, include_declaration=with_declaration
    )
    m = view.text_map
    if not res:
        return None
    return [
        lsp.Location(uri=uri, range=convert.to_lsp_range(m, view.range_to_new(placed(r, a.base))))
        for r in res
    ]
