"""Pull diagnostics: textDocument/diagnostic and workspace/diagnostic.

Push clients get ``publishDiagnostics`` from ``documents`` when an analysis finishes; pull
clients ask here, and the answer is the analysis of the version they have. A workspace-wide
pull reports ``$/progress`` on the request's token, or on one the server creates when the
client supports ``window/workDoneProgress/create``.
"""

from __future__ import annotations

import logging
import uuid

from lsprotocol import types as lsp

from server.lsp import convert
from server.lsp.app import PromptServer
from server.lsp.handlers.documents import current_view

log = logging.getLogger(__name__)


async def document_diagnostic(
    ls: PromptServer, params: lsp.DocumentDiagnosticParams
) -> lsp.DocumentDiagnosticReport:
    uri = params.text_document.uri
    view = await current_view(ls, uri)
    if view is None:
        return lsp.RelatedFullDocumentDiagnosticReport(items=[])
    snap = view.snap
    result_id = f"{uri}@{snap.version}:{id(snap)}"
    if params.previous_result_id == result_id:
        return lsp.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
    items = convert.to_lsp_diagnostics(
        snap.text_map, snap.diagnostics, uri, other_texts=snap.other_texts
    )
    return lsp.RelatedFullDocumentDiagnosticReport(items=items, result_id=result_id)


async def workspace_diagnostic(
    ls: PromptServer, params: lsp.WorkspaceDiagnosticParams
) -> lsp.WorkspaceDiagnosticReport:
    reports: list[lsp.WorkspaceDocumentDiagnosticReport] = []
    uris = list(ls.session.documents)
    token = await _begin_progress(ls, params.work_done_token, "promptls: diagnostics")
    try:
        for done, uri in enumerate(uris, 1):
            view = await current_view(ls, uri)
            if view is not None:
                snap = view.snap
                items = convert.to_lsp_diagnostics(
                    snap.text_map, snap.diagnostics, uri, other_texts=snap.other_texts
                )
                reports.append(
                    lsp.WorkspaceFullDocumentDiagnosticReport(
                        uri=uri, version=snap.version, items=items
                    )
                )
            if token is not None:
                ls.work_done_progress.report(
                    token,
                    lsp.WorkDoneProgressReport(
                        message=f"{done}/{len(uris)} documents", percentage=done * 100 // len(uris)
                    ),
                )
    finally:
        if token is not None:
            ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd())
            ls.work_done_progress.tokens.pop(token, None)
    return lsp.WorkspaceDiagnosticReport(items=reports)


async def _begin_progress(
    ls: PromptServer, token: lsp.ProgressToken | None, title: str
) -> lsp.ProgressToken | None:
    """Begin work-done progress on the client's token, or on a new one if the client allows."""
    if token is None:
        if not ls.session.capabilities.work_done_progress:
            return None
        token = f"promptls/diagnostics/{uuid.uuid4().hex}"
        try:
            await ls.work_done_progress.create_async(token)
        except Exception:  # the client refused: the work goes on without a progress bar
            log.warning("window/workDoneProgress/create failed", exc_info=True)
            return None
    ls.work_done_progress.begin(token, lsp.WorkDoneProgressBegin(title=title, percentage=0))
    return token
