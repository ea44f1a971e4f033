"""The method -> handler table: every LSP feature the server offers, on one screen;
``build_server`` makes a server with them."""

from __future__ import annotations

from lsprotocol import types as lsp

from server.lsp.app import PromptServer
from server.lsp.ext import COMMANDS
from server.lsp.handlers import (
    code_actions,
    code_lens,
    commands,
    completion,
    diagnostics,
    documents,
    folding,
    hover,
    inlay_hints,
    lifecycle,
    navigation,
    symbols,
)


def register(server: PromptServer) -> None:
    documents.install(server)
    f = server.feature
    # Lifecycle and configuration.
    f(lsp.INITIALIZE)(lifecycle.initialize)
    f(lsp.INITIALIZED)(lifecycle.initialized)
    f(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)(lifecycle.did_change_configuration)
    f(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)(lifecycle.did_change_watched_files)
    f(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)(lifecycle.did_change_workspace_folders)
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
    # What the model receives, shown in the editor.
    f(lsp.TEXT_DOCUMENT_HOVER)(hover.hover)
    f(lsp.TEXT_DOCUMENT_INLAY_HINT, lsp.InlayHintOptions(resolve_provider=False))(
        inlay_hints.inlay_hint
    )
    f(lsp.TEXT_DOCUMENT_CODE_LENS, lsp.CodeLensOptions(resolve_provider=False))(code_lens.code_lens)
    # Outline, folding, navigation, completion, fixes.
    f(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)(symbols.document_symbol)
    f(lsp.TEXT_DOCUMENT_FOLDING_RANGE)(folding.folding_range)
    f(lsp.TEXT_DOCUMENT_DEFINITION)(navigation.definition)
    f(lsp.TEXT_DOCUMENT_REFERENCES)(navigation.references)
    trigger = completion.TRIGGER_CHARACTERS
    f(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=trigger))(
        completion.completion
    )
    f(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(code_action_kinds=code_actions.KINDS))(
        code_actions.code_action
    )
    # Commands.
    for name in COMMANDS:
        server.command(name)(commands.HANDLERS[name])


def build_server() -> PromptServer:
    """A language server with every handler registered."""
    server = PromptServer()
    register(server)
    return server
