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
from collections.abc import Callable
from typing import Any, TypeVar

from assembly.text import TextRange

_T = TypeVar("_T")


def relocated(item: _T, rng: Callable[[TextRange], TextRange], offset: Callable[[int], int]) -> _T:
    """An answer (a value of these modules, or a ``TextRange``) with every place in it
    moved: its ``range`` and ``focus_range`` by ``rng``, its ``offset`` by ``offset``, its
    ``children`` alike; its ``lines`` (of the text it was made on) dropped."""
    if isinstance(item, TextRange):
        return rng(item)  # type: ignore[return-value]
    changes: dict[str, Any] = {}
    for name in ("range", "focus_range"):
        if hasattr(item, name):
            changes[name] = rng(getattr(item, name))
    if hasattr(item, "offset"):
        changes["offset"] = offset(item.offset)  # type: ignore[attr-defined]
    if getattr(item, "children", None):
        changes["children"] = tuple(relocated(c, rng, offset) for c in item.children)  # type: ignore[attr-defined]
    if getattr(item, "lines", None) is not None:
        changes["lines"] = None
    return dataclasses.replace(item, **changes)  # type: ignore[type-var]


def placed(item: _T, base: int) -> _T:
    """An answer about a dataset's record (its ranges relative to the record's text, as
    all of its analysis is) placed in the document, where that text starts at ``base``."""
    if not base:
        return item
    return relocated(item, lambda r: r.shift(base), base.__add__)
