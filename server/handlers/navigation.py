"""textDocument/definition and textDocument/references between tool calls, responses and files.

The logic is ``assembly.ide.navigation``: from a response's ``tool_call_id`` to the call,
from a file id to where the file is injected, from ``parent`` to the message; references
list every place naming the same id. Templates have no such links.
"""

from __future__ import annotations

from lsprotocol import types as lsp

from assembly.ide import navigation as ide_navigation
from server import convert
from server.app import PromptServer
from server.handlers.documents import current_snapshot
from server.workspace import Analysis


async def definition(ls: PromptServer, params: lsp.DefinitionParams) -> list[lsp.Location] | None:
    uri = params.text_document.uri
    snap = await current_snapshot(ls, uri)
    if snap is None or not isinstance(snap.analysis, Analysis):
        return None
    offset = convert.from_lsp_position(snap.text_map, params.position)
    a = snap.analysis.at(offset)
    res = ide_navigation.definition(a.conversation, a.text, offset)
    return [convert.to_lsp_location(snap.text_map, uri, t) for t in res] if res else None


async def references(ls: PromptServer, params: lsp.ReferenceParams) -> list[lsp.Location] | None:
    uri = params.text_document.uri
    snap = await current_snapshot(ls, uri)
    if snap is None or not isinstance(snap.analysis, Analysis):
        return None
    offset = convert.from_lsp_position(snap.text_map, params.position)
    a, with_declaration = snap.analysis.at(offset), params.context.include_declaration
    res = ide_navigation.references(
        a.conversation, a.text, offset, include_declaration=with_declaration
    )
    m = snap.text_map
    return [lsp.Location(uri=uri, range=convert.to_lsp_range(m, r)) for r in res] if res else None
