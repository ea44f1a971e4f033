"""What the client can do, resolved once at initialize into plain values.

Handlers read these fields; nobody else digs through ``ClientCapabilities``.
"""

from __future__ import annotations

from dataclasses import dataclass

from lsprotocol import types as lsp


@dataclass(frozen=True, slots=True)
class ResolvedCapabilities:
    pull_diagnostics: bool = False  # textDocument/diagnostic instead of publishDiagnostics
    diagnostic_refresh: bool = False  # workspace/diagnostic/refresh
    markdown_hover: bool = True
    snippet_support: bool = False
    markdown_completion_docs: bool = False  # completion item documentation as Markdown
    watched_files_dynamic: bool = False  # can register workspace/didChangeWatchedFiles
    configuration: bool = False  # workspace/configuration
    work_done_progress: bool = False  # window/workDoneProgress/create
    inlay_hint_refresh: bool = False
    code_lens_refresh: bool = False
    related_information: bool = True
    folding_range_limit: int | None = None  # the most folds the client wants (VS Code: 5,000)

    @staticmethod
    def of(caps: lsp.ClientCapabilities) -> ResolvedCapabilities:
        td = caps.text_document
        ws = caps.workspace
        win = caps.window
        hover_formats = td.hover.content_format if td and td.hover else None
        completion = td.completion.completion_item if td and td.completion else None
        publish = td.publish_diagnostics if td else None
        return ResolvedCapabilities(
            pull_diagnostics=bool(td and td.diagnostic),
            diagnostic_refresh=bool(ws and ws.diagnostics and ws.diagnostics.refresh_support),
            markdown_hover=hover_formats is None or lsp.MarkupKind.Markdown in hover_formats,
            snippet_support=bool(completion and completion.snippet_support),
            markdown_completion_docs=bool(
                completion
                and completion.documentation_format
                and lsp.MarkupKind.Markdown in completion.documentation_format
            ),
            watched_files_dynamic=bool(
                ws
                and ws.did_change_watched_files
                and ws.did_change_watched_files.dynamic_registration
            ),
            configuration=bool(ws and ws.configuration),
            work_done_progress=bool(win and win.work_done_progress),
            inlay_hint_refresh=bool(ws and ws.inlay_hint and ws.inlay_hint.refresh_support),
            code_lens_refresh=bool(ws and ws.code_lens and ws.code_lens.refresh_support),
            related_information=bool(publish is None or publish.related_information is not False),
            folding_range_limit=_folding_range_limit(td),
        )


def _folding_range_limit(td: lsp.TextDocumentClientCapabilities | None) -> int | None:
    limit = td.folding_range.range_limit if td and td.folding_range else None
    return max(0, limit) if isinstance(limit, int) else None
