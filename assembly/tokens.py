"""Token counting: the ``Tokenizer`` protocol, the tiktoken adapter and a count cache.

The tokenizer is built once by the caller (``server/tokenizers.py`` loads tiktoken offline)
and passed down: ``assembly`` never loads encodings, reads files or touches the network.
Counts are memoised by content, so an edit recounts only what changed.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
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


PREFETCH_MIN_CHARS = 128


class TiktokenTokenizer:
    """A tiktoken encoding with a content-keyed count cache.

    With ``threads > 1``, ``count_many`` counts uncached texts in parallel and ``prefetch``
    counts texts in a background thread while the caller goes on (tiktoken releases the GIL
    while it encodes): a parser hands every long string to ``prefetch`` as it reads it, so
    counting a cold 10 MB conversation overlaps with parsing it. Results are the same as
    counting one by one; only the time differs.
    """

    def __init__(self, encoding: object, name: str, *, threads: int = 1) -> None:
        self._enc = encoding
        self.encoding = name
        self._cache: dict[str, int] = {}
        self._threads = threads
        self._queue: queue.Queue[str] | None = None

    def prefetch(self, text: str) -> None:
        """Start counting ``text`` in the background; a hint that never changes results."""
        if self._threads <= 1 or len(text) < PREFETCH_MIN_CHARS or text in self._cache:
            return
        if self._queue is None:
            self._queue = queue.Queue()
            for _ in range(self._threads - 1):
                threading.Thread(target=self._prefetch_worker, daemon=True).start()
        self._queue.put(text)

    def count(self, text: str) -> int:
        if not text:
            return 0
        if self._queue is not None:
            self._queue.join()
        n = self._cache.get(text)
        if n is None:
            n = len(self._enc.encode_ordinary(text))  # type: ignore[attr-defined]
            self._cache[text] = n
        return n

    def count_many(self, texts: Sequence[str]) -> list[int]:
        if self._queue is not None:
            self._queue.join()
        cache = self._cache
        missing = list({t for t in texts if t and t not in cache})
        if missing:
            encode = self._enc.encode_ordinary  # type: ignore[attr-defined]
            big = sum(len(t) for t in missing)
            if self._threads > 1 and big > 200_000:
                # Longest first so the threads finish together.
                missing.sort(key=len, reverse=True)
                with ThreadPoolExecutor(self._threads) as pool:
                    counts = list(pool.map(lambda t: len(encode(t)), missing, chunksize=16))
            else:
                counts = [len(encode(t)) for t in missing]
            cache.update(zip(missing, counts, strict=True))
        return [cache[t] if t else 0 for t in texts]

    def cache_size(self) -> int:
        if self._queue is not None:
            self._queue.join()
        return len(self._cache)

    def _prefetch_worker(self) -> None:
        assert self._queue is not None
        encode = self._enc.encode_ordinary  # type: ignore[attr-defined]
        while True:
            text = self._queue.get()
            try:
                if text not in self._cache:
                    self._cache[text] = len(encode(text))
            finally:
                self._queue.task_done()
