"""The method -> handler table: every LSP feature the server offers, on one screen."""

from __future__ import annotations

from lsprotocol import types as lsp

from server.app import PromptServer
from server.ext import COMMANDS
from server.handlers import commands, diagnostics, documents, lifecycle


def register(server: PromptServer) -> None:
    f = server.feature
    # Lifecycle and configuration.
    f(lsp.INITIALIZE)(lifecycle.initialize)
    f(lsp.INITIALIZED)(lifecycle.initialized)
    f(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)(lifecycle.did_change_configuration)
    f(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)(lifecycle.did_change_watched_files)
    f(lsp.SHUTDOWN)(lifecycle.shutdown)
    # Documents.
    f(lsp.TEXT_DOCUMENT_DID_OPEN)(documents.did_open)
    f(lsp.TEXT_DOCUMENT_DID_CHANGE)(documents.did_change)
    f(lsp.TEXT_DOCUMENT_DID_SAVE)(documents.did_save)
    f(lsp.TEXT_DOCUMENT_DID_CLOSE)(documents.did_close)
    # Diagnostics (pull; push is sent when an analysis finishes).
    f(
        lsp.TEXT_DOCUMENT_DIAGNOSTIC,
        lsp.DiagnosticOptions(
            identifier="promptls", inter_file_dependencies=True, workspace_diagnostics=True
        ),
    )(diagnostics.document_diagnostic)
    f(lsp.WORKSPACE_DIAGNOSTIC)(diagnostics.workspace_diagnostic)
    # Commands.
    for name in COMMANDS:
        server.command(name)(commands.HANDLERS[name])
