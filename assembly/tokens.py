"""Token counting: the ``Tokenizer`` protocol, the tiktoken adapter and a count cache.

The tokenizer is built once by the caller (``server/tokenizers.py`` loads tiktoken offline)
and passed down: ``assembly`` never loads encodings, reads files or touches the network.
Counts are memoised by content, so an edit recounts only what changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

DEFAULT_ENCODING = "cl100k_base"

# Model name prefixes -> encoding, as tiktoken's model table has them (longest prefix wins).
_MODEL_ENCODINGS: tuple[tuple[str, str], ...] = (
    ("gpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("text-embedding-3", "cl100k_base"),
    ("text-embedding-ada-002", "cl100k_base"),
)


class Tokenizer(Protocol):
    """Counts tokens of text; ``encoding`` names what it counts with."""

    encoding: str

    def count(self, text: str) -> int: ...

    def count_many(self, texts: Sequence[str]) -> list[int]: ...


def encoding_for_model(model: str) -> str:
    """Return the encoding a model uses, ``cl100k_base`` for unknown models."""
    name = model.lower().rsplit("/", 1)[-1]
    for prefix, encoding in _MODEL_ENCODINGS:
        if name.startswith(prefix):
            return encoding
    return DEFAULT_ENCODING


class TiktokenTokenizer:
    """A tiktoken encoding with a content-keyed count cache.

    The cache is what makes an edit cheap: only texts never seen before are encoded.
    ``seed`` lets a caller that counted texts elsewhere (another process, a stored count)
    fill the cache; results are the same as counting one by one.
    """

    def __init__(self, encoding: object, name: str) -> None:
        self._enc = encoding
        self.encoding = name
        self._cache: dict[str, int] = {}

    def count(self, text: str) -> int:
        if not text:
            return 0
        n = self._cache.get(text)
        if n is None:
            n = len(self._enc.encode_ordinary(text))  # type: ignore[attr-defined]
            self._cache[text] = n
        return n

    def count_many(self, texts: Sequence[str]) -> list[int]:
        cache = self._cache
        encode = self._enc.encode_ordinary  # type: ignore[attr-defined]
        for t in texts:
            if t and t not in cache:
                cache[t] = len(encode(t))
        return [cache[t] if t else 0 for t in texts]

    def cached(self, text: str) -> int | None:
        """Return the count of ``text`` if it was counted or seeded before, else None."""
        return self._cache.get(text) if text else 0

    def seed(self, counts: Mapping[str, int]) -> None:
        """Add counts made elsewhere with this same encoding."""
        self._cache.update(counts)

    def encode(self, text: str) -> list[int]:
        """Return the token ids of ``text`` (special tokens are counted as text)."""
        return self._enc.encode_ordinary(text)  # type: ignore[attr-defined,no-any-return]

    def cache_size(self) -> int:
        return len(self._cache)
