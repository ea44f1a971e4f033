"""initialize / initialized / shutdown, configuration and watched files."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.uris import to_fs_path

from server.app import PromptServer
from server.capabilities import ResolvedCapabilities
from server.handlers.documents import schedule_all, schedule_paths

log = logging.getLogger(__name__)
SECTION = "promptls"
WATCH_GLOBS = ("**/pyproject.toml", "**/promptls.toml", "**/*.prompt.md", "**/*.md")


def initialize(ls: PromptServer, params: lsp.InitializeParams) -> None:
    s = ls.session
    s.capabilities = ResolvedCapabilities.of(params.capabilities)
    encoding = ls.workspace.position_encoding or lsp.PositionEncodingKind.Utf16
    s.encoding = str(getattr(encoding, "value", encoding))
    s.root = _root(params)
    options = params.initialization_options
    if isinstance(options, dict):
        s.initial_settings_for(options.get(SECTION, options))
    s.loop = asyncio.get_running_loop()


async def initialized(ls: PromptServer, params: lsp.InitializedParams) -> None:
    s = ls.session
    if s.capabilities.configuration:
        await _pull_configuration(ls)
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
    if s.root is not None:
        s.start_file_watcher(lambda paths: schedule_paths(ls, paths))


async def did_change_configuration(
    ls: PromptServer, params: lsp.DidChangeConfigurationParams
) -> None:
    settings = params.settings
    if isinstance(settings, dict) and SECTION in settings:
        ls.session.settings_for(settings[SECTION])
    elif ls.session.capabilities.configuration:
        await _pull_configuration(ls)
    schedule_all(ls)


def did_change_watched_files(ls: PromptServer, params: lsp.DidChangeWatchedFilesParams) -> None:
    schedule_paths(ls, [Path(to_fs_path(c.uri) or c.uri) for c in params.changes])


def shutdown(ls: PromptServer, params: Any) -> None:
    ls.session.close()


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


def _root(params: lsp.InitializeParams) -> Path | None:
    if params.workspace_folders:
        path = to_fs_path(params.workspace_folders[0].uri)
        return Path(path) if path else None
    if params.root_uri:
        path = to_fs_path(params.root_uri)
        return Path(path) if path else None
    if params.root_path:
        return Path(params.root_path)
    return None
