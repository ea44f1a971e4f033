"""textDocument/codeAction: a quick fix for every fixable finding here, and "fix all".

Fixes are offered only from the analysis of the document's current version: an edit
computed for another version would land in the wrong place.
"""

from __future__ import annotations

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcContentModified

from assembly.ide import fixes as ide_fixes
from server import convert
from server.app import PromptServer
from server.handlers.documents import current_snapshot

KINDS: list[lsp.CodeActionKind | str] = [lsp.CodeActionKind.QuickFix, convert.FIX_ALL_KIND]


async def code_action(
    ls: PromptServer, params: lsp.CodeActionParams
) -> list[lsp.CodeAction] | None:
    uri = params.text_document.uri
    snap = await current_snapshot(ls, uri)
    if snap is None or uri not in ls.session.documents:
        return None
    if not ls.session.is_current(snap):
        raise JsonRpcContentModified(f"{uri} changed while its fixes were computed")
    m, diags = snap.text_map, snap.analysis.diagnostics
    named = [k for d in params.context.diagnostics if (k := convert.from_lsp_finding(m, d))]
    fixes = ide_fixes.quick_fixes(diags, convert.from_lsp_range(m, params.range), named)
    only = params.context.only
    res = convert.to_lsp_code_actions(m, uri, fixes, ide_fixes.fix_all(diags), only=only)
    return res or None
