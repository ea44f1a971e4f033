"""The pure library driven as the server drives it, without the server: for tests/assembly.

``analyze`` and ``analyze_prompt`` gather an analysis' inputs the simple way a test can
(the document's text, the ``promptls.toml`` of its folder or above, the files it names
read from disk beside it) and call ``assembly.host``; ``host=`` keeps a document's
analyses going (``AnalysisHost.apply_change``). Reference resolution inside a workspace,
size limits, overlays and invalid bytes are the IO layer's, tested in tests/server.

The real tokenizer is the one thing the pure tests take from the IO layer: loading the
bundled encodings is IO, and the library takes a tokenizer as an input (``tokenizer``).
This module is the only place tests/assembly reach ``server`` (tests/test_invariants.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assembly.config import parse_config
from assembly.host import (
    Analysis,
    AnalysisHost,
    Edit,
    FileText,
    Inputs,
    LoadedTokenizer,
    PromptAnalysis,
)
from assembly.host import analyze_prompt as _analyze_prompt
from assembly.model import Conversation
from assembly.rope import Rope
from assembly.settings import SettingsLayer
from assembly.tokens import Tokenizer
from server.tokenizers import load_tokenizer

DEFAULT_TODAY = dt.date(2026, 7, 15)
CONFIG_FILES = ("promptls.toml", "pyproject.toml")


def tokenizer(encoding: str | None = None, *, model: str | None = None) -> Tokenizer:
    """The real tokenizer for ``encoding`` (or the model's), as the server loads it."""
    return load_tokenizer(encoding, model=model).tokenizer


def loaded(encoding: str | None = None, *, model: str | None = None) -> LoadedTokenizer:
    """``tokenizer`` with what the server says about it (the encoding asked, a warning)."""
    return load_tokenizer(encoding, model=model)


@dataclass(frozen=True, slots=True)
class DiskSources:
    """``assembly.host.Sources`` for a test: a named file is read beside the document."""

    path: Path

    def read(self, ref: str) -> FileText:
        target = (self.path.parent / ref).resolve()
        if not target.is_file():
            return FileText(None, code="file-not-found", problem=f"file not found: `{ref}`")
        return FileText(target, target.read_text(encoding="utf-8"))

    def tokenizer(self, encoding: str | None, model: str | None) -> LoadedTokenizer:
        return loaded(encoding, model=model)

    def counting(self, conversation: Conversation, tokenizer: Tokenizer) -> None:
        pass


def settings_layers(path: Path, root: Path | None) -> tuple[list[SettingsLayer], dict[str, str]]:
    """The settings file nearest above ``path`` (not above ``root``) as a layer."""
    cur = path.parent
    while True:
        for name in CONFIG_FILES:
            candidate = cur / name
            if candidate.is_file():
                text = candidate.read_text(encoding="utf-8")
                parsed = parse_config(str(candidate), name, text)
                if parsed is not None and parsed.layer is not None:
                    return [parsed.layer], {str(candidate): text}
        if cur == root or cur.parent == cur:
            return [], {}
        cur = cur.parent


def inputs(
    path: Path,
    *,
    root: Path | None = None,
    today: dt.date | None = None,
    overrides: Mapping[str, Any] | None = None,
    select: Collection[str] | None = None,
    ignore: Collection[str] = (),
) -> Inputs:
    """What an analysis of ``path`` reads besides its text and the files it names."""
    layers, others = settings_layers(path, root)
    return Inputs(
        path=path,
        today=today or DEFAULT_TODAY,
        layers=tuple(layers),
        overrides=overrides,
        select=select,
        ignore=ignore,
        other_texts=others,
        dependencies=tuple(Path(p) for p in others),
    )


def analyze(
    path: Path,
    *,
    text: str | Rope | None = None,
    root: Path | None = None,
    today: dt.date | None = None,
    overrides: Mapping[str, Any] | None = None,
    select: Collection[str] | None = None,
    ignore: Collection[str] = (),
    host: AnalysisHost | None = None,
    edit: Edit | None = None,
) -> Analysis:
    """Analyse the conversation at ``path`` (``text``: its text, else the file's).

    ``host``: go on from the host's previous analysis (``apply_change``); else afresh.
    """
    if text is None:
        text = path.read_text(encoding="utf-8")
    got = inputs(path, root=root, today=today, overrides=overrides, select=select, ignore=ignore)
    if host is None:
        return AnalysisHost().analyze(text, got, DiskSources(path))
    return host.apply_change(text, edit, got, DiskSources(path))


def analyze_prompt(
    path: Path,
    *,
    text: str | None = None,
    root: Path | None = None,
    select: Collection[str] | None = None,
    ignore: Collection[str] = (),
    user_tools: Collection[str] | None = None,
) -> PromptAnalysis:
    """Check the template at ``path`` on its own (``text``: its text, else the file's)."""
    if text is None:
        text = path.read_text(encoding="utf-8")
    got = inputs(path, root=root, select=select, ignore=ignore)
    return _analyze_prompt(text, got, DiskSources(path), user_tools=user_tools)
