"""Pull diagnostics: textDocument/diagnostic and workspace/diagnostic.

Push clients get ``publishDiagnostics`` from ``documents`` when an analysis finishes; pull
clients ask here, and the answer is the analysis of the version they have.
"""

from __future__ import annotations

from lsprotocol import types as lsp

from server import convert
from server.app import PromptServer
from server.handlers.documents import current_snapshot


async def document_diagnostic(
    ls: PromptServer, params: lsp.DocumentDiagnosticParams
) -> lsp.DocumentDiagnosticReport:
    uri = params.text_document.uri
    snap = await current_snapshot(ls, uri)
    if snap is None:
        return lsp.RelatedFullDocumentDiagnosticReport(items=[])
    result_id = f"{uri}@{snap.version}:{id(snap)}"
    if params.previous_result_id == result_id:
        return lsp.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
    items = [
        convert.to_lsp_diagnostic(snap.text_map, d, uri)
        for d in snap.analysis.diagnostics
        if d.path is None
    ]
    return lsp.RelatedFullDocumentDiagnosticReport(items=items, result_id=result_id)


async def workspace_diagnostic(
    ls: PromptServer, params: lsp.WorkspaceDiagnosticParams
) -> lsp.WorkspaceDiagnosticReport:
    reports: list[lsp.WorkspaceDocumentDiagnosticReport] = []
    for uri in list(ls.session.documents):
        snap = await current_snapshot(ls, uri)
        if snap is None:
            continue
        items = [
            convert.to_lsp_diagnostic(snap.text_map, d, uri)
            for d in snap.analysis.diagnostics
            if d.path is None
        ]
        reports.append(
            lsp.WorkspaceFullDocumentDiagnosticReport(uri=uri, version=snap.version, items=items)
        )
    return lsp.WorkspaceDiagnosticReport(items=reports)
