"""Editor features over analysed documents: pure functions in editor words, no LSP.

Each module answers one editor question about a conversation or a prompt template that
``server.workspace`` has analysed: ``hover`` (what the model receives, at the cursor),
``inlay`` (each message's tokens), ``lens`` (the assembled total), ``navigation``,
``completion``. Inputs are the parsed document, its ``Assembly`` and settings, and
code-point offsets; outputs are small frozen dataclasses (offsets, ranges, labels,
Markdown). Only ``server/lsp/convert.py`` turns them into LSP values.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from assembly.text import TextRange

_T = TypeVar("_T")


def placed(item: _T, base: int) -> _T:
    """An answer about a dataset's record (its ranges relative to the record's text, as
    all of its analysis is) placed in the document, where that text starts at ``base``:
    its ``range``, ``focus_range`` and ``offset`` moved (a ``TextRange``, itself)."""
    if not base:
        return item
    if isinstance(item, TextRange):
        return item.shift(base)  # type: ignore[return-value]
    changes: dict[str, Any] = {}
    for name in ("range", "focus_range"):
        if hasattr(item, name):
            changes[name] = getattr(item, name).shift(base)
    if hasattr(item, "offset"):
        changes["offset"] = item.offset + base  # type: ignore[attr-defined]
    return dataclasses.replace(item, **changes)  # type: ignore[type-var]
