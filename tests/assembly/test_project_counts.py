"""Project files are counted one by one only when their counts can decide something.

A loaded project file's own count only decides whether the files overflow their share of
the window (reference §6.5); the documents message that holds them is counted anyway. With
a byte-level encoding a text has at most as many tokens as UTF-8 bytes
(``CachedTokenizer.at_most``), so files whose bytes fit the share are not counted: the
assembly is the one the counts would have made, at the share's edge too.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from assembly.assemble import PROJECT_FILE_SHARE, AssembleOptions, Assembly, assemble
from assembly.model import DocFormat
from assembly.reading import parse_conversation
from assembly.settings import SettingsLayer, resolve_settings
from assembly.tokens import CachedTokenizer
from tests.support import engine

FILES = (
    "Quarterly revenue grew in every region; costs fell by 3 %.\n" * 6,
    "Roadmap: 東京 office opens in March, then the Berlin one. 🚀\n" * 5,
)


def _document(max_input_tokens: int) -> str:
    files = ",".join(
        f'{{"file_id": "f{i}", "filename": "f{i}.md", "content": {json.dumps(c)}}}'
        for i, c in enumerate(FILES)
    )
    return (
        f'{{"settings": {{"max_input_tokens": {max_input_tokens}, "reserved_tokens": 0}},'
        f'"project_files": [{files}],'
        '"messages": [{"role": "user", "content": "Summarise the files."}]}'
    )


def _assemble(max_input_tokens: int, *, byte_level: bool) -> tuple[Assembly, list[str]]:
    conv = parse_conversation(_document(max_input_tokens), DocFormat.JSON)
    settings, issues = resolve_settings([SettingsLayer("document", conv.settings)])
    assert not issues
    real = engine.tokenizer("o200k_base").counter  # type: ignore[attr-defined]
    asked: list[str] = []

    def spy(text: str) -> int:
        asked.append(text)
        return int(real(text))

    tok = CachedTokenizer(spy, "o200k_base", byte_level=byte_level)
    res = assemble(conv, settings, tok, AssembleOptions(today=dt.date(2026, 1, 1)))
    return res, asked


def _share_edge() -> tuple[int, int]:
    """The files' tokens and UTF-8 bytes (the bound)."""
    real = engine.tokenizer("o200k_base").counter  # type: ignore[attr-defined]
    return sum(real(c) for c in FILES), sum(len(c.encode()) for c in FILES)


def test_files_whose_bytes_fit_their_share_are_not_counted_one_by_one() -> None:
    fast, asked = _assemble(128_000, byte_level=True)
    exact, asked_exact = _assemble(128_000, byte_level=False)
    assert not any(c in asked for c in FILES)
    assert all(c in asked_exact for c in FILES)  # without the bound: counted, as before
    assert fast == exact
    assert any(e.id == "$project_files" for e in fast.layout)


@pytest.mark.parametrize("side", ["below", "at", "above"])
def test_at_the_share_edge_the_files_are_counted_and_decide_as_before(side: str) -> None:
    tokens, size = _share_edge()
    assert tokens < size  # the bound alone cannot decide between the two
    # A window whose share lies between the files' tokens and their bytes: counted, and
    # loaded as the counts say; one whose share the counts reach: listed instead.
    window = {
        "below": int(size / PROJECT_FILE_SHARE) - 1,
        "at": int(tokens / PROJECT_FILE_SHARE),
        "above": int(tokens / PROJECT_FILE_SHARE) - 5,
    }[side]
    fast, asked = _assemble(window, byte_level=True)
    exact, _ = _assemble(window, byte_level=False)
    assert fast == exact
    assert all(c in asked for c in FILES)
    loaded = any(e.id == "$project_files" for e in fast.layout)
    assert loaded == (tokens < window * PROJECT_FILE_SHARE)
    assert loaded == (side == "below")
