"""Finding and reading settings files (SPEC §3) into ``assembly.settings.SettingsLayer``s.

Sources, later wins: built-in defaults < ``[tool.promptls]`` of the nearest
``pyproject.toml`` or a ``promptls.toml`` (the nearest directory that has either; in one
directory ``promptls.toml`` wins) < editor settings < the document's own ``settings``.
TOML is read with the standard library; the place of each key is found by scanning the
file's lines, so an invalid value is reported where it is written.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assembly.settings import SettingsLayer
from assembly.text import LineIndex, TextRange
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


def find_config(start: Path, root: Path | None = None) -> ConfigFile | None:
    """Return the nearest settings file at or above ``start`` (not above ``root``)."""
    cur = start if start.is_dir() else start.parent
    while True:
        for name in CONFIG_FILES:
            candidate = cur / name
            if candidate.is_file():
                loaded = read_config(candidate)
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
    is_pyproject = path.name == "pyproject.toml"
    if is_pyproject and "promptls" not in text:
        return None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        rng = _toml_error_range(text, exc)
        return ConfigFile(path, None, f"invalid TOML: {exc}", rng, text)
    if is_pyproject:
        table = data.get("tool", {}).get("promptls")
        if table is None:
            return None
        section = "tool.promptls"
    else:
        table = data.get("tool", {}).get("promptls", data)
        section = "tool.promptls" if "tool" in data else None
    if not isinstance(table, dict):
        return ConfigFile(path, None, "`tool.promptls` must be a table", TextRange(0, 0), text=text)
    ranges = _key_ranges(text, section, table)
    return ConfigFile(path, SettingsLayer(str(path), table, ranges), text=text)


def editor_layer(
    values: Mapping[str, Any] | None, source: str = "editor settings"
) -> SettingsLayer:
    """Settings sent by the editor (``workspace/configuration`` or initializationOptions)."""
    return SettingsLayer(source, dict(values or {}))


def _key_ranges(text: str, section: str | None, table: Mapping[str, Any]) -> dict[str, TextRange]:
    """Locate ``key = value`` lines of ``table`` in its section (by a line scan)."""
    res: dict[str, TextRange] = {}
    in_section = section is None
    header = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]\s*(#.*)?$")
    offset = 0
    for line in text.splitlines(keepends=True):
        m = header.match(line)
        if m:
            in_section = section is not None and m.group(1).replace(" ", "") == section
        elif in_section:
            km = re.match(r"^\s*\"?([A-Za-z0-9_-]+)\"?\s*=\s*", line)
            if km and km.group(1) in table and km.group(1) not in res:
                start = offset + km.end()
                end = offset + len(line.rstrip("\r\n"))
                res[km.group(1)] = TextRange(start, max(start, end))
        offset += len(line)
    return res


def _toml_error_range(text: str, exc: tomllib.TOMLDecodeError) -> TextRange:
    m = re.search(r"line (\d+), column (\d+)", str(exc))
    if not m:
        return TextRange(0, 0)
    index = LineIndex(text)
    offset = index.offset(int(m.group(1)) - 1, int(m.group(2)) - 1)
    return TextRange(offset, offset)
