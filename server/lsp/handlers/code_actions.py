"""textDocument/codeAction: a quick fix for every fixable finding here, and "fix all".

Fixes are offered only from the analysis of the version the request was sent for: an edit
computed for another text would land in the wrong place. When that analysis is not there
in time (or failed), there is no fix to offer yet: the answer is empty, never an error.
"""

from __future__ import annotations

from lsprotocol import types as lsp

from assembly.ide import fixes as ide_fixes
from server.lsp import convert
from server.lsp.app import PromptServer
from server.lsp.handlers.documents import current_view

KINDS: list[lsp.CodeActionKind | str] = [lsp.CodeActionKind.QuickFix, convert.FIX_ALL_KIND]


async def code_action(
    ls: PromptServer, params: lsp.CodeActionParams
) -> list[lsp.CodeAction] | None:
    uri = params.text_document.uri
    view = await current_view(ls, uri)
    if view is None or uri not in ls.session.documents or not view.fresh or view.mapped:
        return None
    m, diags = view.text_map, view.snap.diagnostics
    named = [k for d in params.context.diagnostics if (k := convert.from_lsp_finding(m, d))]
    fixes = ide_fixes.quick_fixes(diags, convert.from_lsp_range(m, params.range), named)
    only = params.context.only
    res = convert.to_lsp_code_actions(m, uri, fixes, ide_fixes.fix_all(diags), only=only)
    return res or None
