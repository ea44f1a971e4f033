"""Finding and reading settings files (SPEC §3) into ``assembly.settings.SettingsLayer``s.

Sources, later wins: built-in defaults < ``[tool.promptls]`` of the nearest
``pyproject.toml`` or a ``promptls.toml`` (the nearest directory that has either; in one
directory ``promptls.toml`` wins) < editor settings < the document's own ``settings``.
A settings file that cannot be read (invalid TOML, not a regular file) is an error at it,
and the next readable settings file above applies meanwhile (``ConfigFile.fallback``), as
in ruff's language server; the command line stops at such a file, as ruff's does.
The text is read here and understood by ``assembly.config.parse_config``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from assembly.config import parse_config
from assembly.settings import SettingsLayer
from assembly.text import TextRange
from server import files

CONFIG_FILES = ("promptls.toml", "pyproject.toml")
MAX_CONFIG_BYTES = 8 * 1024 * 1024  # checked before reading (``server.files``)


@dataclass(frozen=True, slots=True)
class ConfigFile:
    """A settings file that was found, its layer and a problem reading it (if any)."""

    path: Path
    layer: SettingsLayer | None
    error: str | None = None
    error_range: TextRange | None = None
    text: str = ""
    # For a file that cannot be read: the nearest settings file above it (itself maybe
    # unreadable, with its own fallback), whose settings apply meanwhile.
    fallback: ConfigFile | None = None

    def chain(self) -> list[ConfigFile]:
        """This file and, while one cannot be read, the files above it in turn."""
        res: list[ConfigFile] = [self]
        while res[-1].layer is None and res[-1].fallback is not None:
            res.append(res[-1].fallback)
        return res


def find_config(start: Path, root: Path | None = None) -> ConfigFile | None:
    """Return the nearest settings file at or above ``start`` (not above ``root``).

    Any entry with a settings file's name counts, not only a regular file: a
    ``promptls.toml`` that is a folder, a FIFO or a link to ``/dev/zero`` is a settings
    file that cannot be read (an error at it, found by ``read_config`` without reading
    it), not silently skipped.
    """
    cur = start if start.is_dir() else start.parent
    while True:
        for name in CONFIG_FILES:
            candidate = cur / name
            if os.path.lexists(candidate):
                loaded = read_config(candidate)
                if loaded is not None and loaded.layer is None:
                    above = None if cur == root or cur.parent == cur else cur.parent
                    if above is not None:
                        loaded = replace(loaded, fallback=find_config(above, root))
                if loaded is not None:
                    return loaded
        if root is not None and cur == root:
            return None
        if cur.parent == cur:
            return None
        cur = cur.parent


def read_config(path: Path) -> ConfigFile | None:
    """Read one settings file; None for a ``pyproject.toml`` without ``[tool.promptls]``."""
    try:
        text = files.read_bytes(path, limit=MAX_CONFIG_BYTES).decode("utf-8")
    except (files.FileProblem, UnicodeDecodeError) as exc:
        return ConfigFile(path, None, f"cannot read {path.name}: {exc}", TextRange(0, 0))
    parsed = parse_config(str(path), path.name, text)
    if parsed is None:
        return None
    return ConfigFile(path, parsed.layer, parsed.error, parsed.error_range, text)


def editor_layer(
    values: Mapping[str, Any] | None, source: str = "editor settings"
) -> SettingsLayer:
    """Settings sent by the editor (``workspace/configuration`` or initializationOptions)."""
    return SettingsLayer(source, dict(values or {}))
