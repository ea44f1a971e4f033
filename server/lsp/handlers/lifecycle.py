"""initialize / initialized / shutdown, configuration, workspace folders and watched files.

Every workspace folder is a root (``workspaceFolders``, kept up to date by
``didChangeWorkspaceFolders``; ``rootUri`` only when the client sends no folders). A
folder that is the file system's root is refused with a message: it would let any
document read any file. Editor settings that are invalid are shown with
``window/showMessage`` once per distinct set of problems (their findings belong to no
document, so no document shows them).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.uris import to_fs_path

from assembly.settings import resolve_settings
from server.config import editor_layer
from server.lsp.app import PromptServer
from server.lsp.capabilities import ResolvedCapabilities
from server.lsp.handlers.documents import schedule_all, schedule_paths

log = logging.getLogger(__name__)
SECTION = "promptls"
WATCH_GLOBS = ("**/pyproject.toml", "**/promptls.toml", "**/*.prompt.md", "**/*.md")


def initialize(ls: PromptServer, params: lsp.InitializeParams) -> None:
    s = ls.session
    encoding = ls.workspace.position_encoding or lsp.PositionEncodingKind.Utf16
    s.initialize(
        ResolvedCapabilities.of(params.capabilities),
        str(getattr(encoding, "value", encoding)),
        asyncio.get_running_loop(),
    )
    ls.refused_roots = s.set_roots(_roots(params))
    options = params.initialization_options
    if isinstance(options, dict):
        s.initial_settings_for(options.get(SECTION, options))


async def initialized(ls: PromptServer, params: lsp.InitializedParams) -> None:
    s = ls.session
    _refused(ls, ls.refused_roots)
    if s.capabilities.configuration:
        await _pull_configuration(ls)
    show_setting_problems(ls)
    # The tokenizer, before the first document needs it (an analysis that comes first
    # waits for that load rather than loading it twice).
    threading.Thread(target=s.warm_up, name="promptls-warm-up", daemon=True).start()
    if s.capabilities.watched_files_dynamic:
        watchers = [lsp.FileSystemWatcher(glob_pattern=g) for g in WATCH_GLOBS]
        registration = lsp.Registration(
            id="promptls-watch",
            method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=lsp.DidChangeWatchedFilesRegistrationOptions(watchers=watchers),
        )
        try:
            await ls.client_register_capability_async(
                lsp.RegistrationParams(registrations=[registration])
            )
            return
        except Exception:  # the client offered it but refused: watch ourselves
            log.warning("client/registerCapability failed; watching with watchfiles")
    if s.roots:
        s.start_file_watcher(lambda paths: schedule_paths(ls, paths))


async def did_change_configuration(
    ls: PromptServer, params: lsp.DidChangeConfigurationParams
) -> None:
    settings = params.settings
    if isinstance(settings, dict) and SECTION in settings:
        ls.session.settings_for(settings[SECTION])
    elif ls.session.capabilities.configuration:
        await _pull_configuration(ls)
    show_setting_problems(ls)
    schedule_all(ls)


def did_change_workspace_folders(
    ls: PromptServer, params: lsp.DidChangeWorkspaceFoldersParams
) -> None:
    s = ls.session
    removed = {p for f in params.event.removed if (p := _folder_path(f.uri)) is not None}
    added = [p for f in params.event.added if (p := _folder_path(f.uri)) is not None]
    roots = [r for r in s.roots if r not in removed]
    roots += [a for a in added if a not in roots]
    _refused(ls, s.set_roots(roots))
    schedule_all(ls)  # a document's root (and so what it may read) may have changed


def show_setting_problems(ls: PromptServer) -> None:
    """Tell the user about invalid editor settings (once per distinct set of problems)."""
    _, issues = resolve_settings([editor_layer(ls.session.settings)])
    text = "; ".join(i.message for i in issues)
    if text == ls.shown_setting_problems:
        return
    ls.shown_setting_problems = text
    if text:
        ls.window_show_message(
            lsp.ShowMessageParams(
                type=lsp.MessageType.Warning,
                message=f"promptls: editor settings ignored: {text}",
            )
        )


def _refused(ls: PromptServer, roots: list[Path]) -> None:
    for r in roots:
        ls.window_show_message(
            lsp.ShowMessageParams(
                type=lsp.MessageType.Warning,
                message=f"promptls: the workspace folder {r} is the file system's root; "
                "it is not used as a root (a document reads files only next to it)",
            )
        )


def did_change_watched_files(ls: PromptServer, params: lsp.DidChangeWatchedFilesParams) -> None:
    schedule_paths(ls, [Path(to_fs_path(c.uri) or c.uri) for c in params.changes])


def shutdown(ls: PromptServer, params: Any) -> None:
    ls.session.shutdown()


async def _pull_configuration(ls: PromptServer) -> None:
    try:
        res = await ls.workspace_configuration_async(
            lsp.ConfigurationParams(items=[lsp.ConfigurationItem(section=SECTION)])
        )
    except Exception:
        log.warning("workspace/configuration failed", exc_info=True)
        return
    value = res[0] if res else None
    if isinstance(value, dict):
        ls.session.settings_for(value)


def _roots(params: lsp.InitializeParams) -> list[Path]:
    if params.workspace_folders:
        return [p for f in params.workspace_folders if (p := _folder_path(f.uri)) is not None]
    if params.root_uri:
        path = _folder_path(params.root_uri)
        return [path] if path is not None else []
    if params.root_path:
        return [Path(params.root_path)]
    return []


def _folder_path(uri: str) -> Path | None:
    path = to_fs_path(uri) if uri.startswith("file:") else None
    return Path(path) if path else None
