"""A settings file's text (``promptls.toml`` or ``pyproject.toml``) as a ``SettingsLayer``.

Pure: the IO half finds and reads the file (``server.config``). TOML is read with the
standard library; the place of each key is found by scanning the file's lines, so an
invalid value is reported where it is written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from assembly.settings import SettingsLayer
from assembly.text import LineIndex, TextRange

if TYPE_CHECKING:
    import tomllib


@dataclass(frozen=True, slots=True)
class ConfigText:
    """What a settings file says: its layer, or the problem that kept it from one."""

    layer: SettingsLayer | None
    error: str | None = None
    error_range: TextRange | None = None


def parse_config(source: str, name: str, text: str) -> ConfigText | None:
    """Read the settings in ``text``, a file called ``name`` (``source`` names it in the
    layer); None for a ``pyproject.toml`` without ``[tool.promptls]``."""
    is_pyproject = name == "pyproject.toml"
    if is_pyproject and "promptls" not in text:
        return None
    import tomllib  # only where a settings file is found (10-20 ms to import)

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return ConfigText(None, f"invalid TOML: {exc}", _toml_error_range(text, exc))
    except RecursionError:  # tomllib reads nested arrays and tables by recursion
        where = _too_deep(text)
        msg = f"invalid TOML: arrays or inline tables nested more than {_DEEP} deep"
        return ConfigText(None, msg, TextRange(where, where))
    if is_pyproject:
        table = data.get("tool", {}).get("promptls")
        if table is None:
            return None
        section = "tool.promptls"
    else:
        table = data.get("tool", {}).get("promptls", data)
        section = "tool.promptls" if "tool" in data else None
    if not isinstance(table, dict):
        return ConfigText(None, "`tool.promptls` must be a table", TextRange(0, 0))
    return ConfigText(SettingsLayer(source, table, _key_ranges(text, section, table)))


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


_DEEP = 100  # the nesting said to be too deep (tomllib fails a few hundred deeper)


def _too_deep(text: str) -> int:
    """Where arrays and inline tables first nest more than ``_DEEP`` deep (brackets
    counted outside quoted strings and comments, roughly), else 0."""
    depth, quote, comment = 0, "", False
    for k, ch in enumerate(text):
        if comment:
            comment = ch != "\n"
        elif quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            comment = True
        elif ch in "[{":
            depth += 1
            if depth > _DEEP:
                return k
        elif ch in "]}":
            depth = max(0, depth - 1)
    return 0


def _toml_error_range(text: str, exc: tomllib.TOMLDecodeError) -> TextRange:
    m = re.search(r"line (\d+), column (\d+)", str(exc))
    if not m:
        return TextRange(0, 0)
    index = LineIndex(text)
    offset = index.offset(int(m.group(1)) - 1, int(m.group(2)) - 1)
    return TextRange(offset, offset)
