"""A process-wide memo of what is made from a prompt's text, bounded in entries and in text.

The conversations of one project or of one agent's logs share their prompts: ``promptls
lint`` analyses them one after the other, and the language server the open ones. What is
a pure function of a prompt's text (its parse, the tool names it shows, its word index for
a set of tools) is made once and kept in a ``TextMemo``: the least recently used entry
goes first, and the texts the entries are made from are at most ``chars`` characters in
all (what is made from a text grows with it; typing in a prompt makes a new text with
every version). A text longer than ``chars`` is not kept. Entries are added and dropped
under a lock (the server's analysis and view threads share the memos); a value is made
outside it, so two threads may both make one, and either is kept.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TextMemo(Generic[K, V]):
    """At most ``entries`` values by key, made from at most ``chars`` characters of text in
    all (``size(key)``: the characters of the key's text; the key itself by default)."""

    def __init__(self, entries: int, chars: int, size: Callable[[K], int] = len) -> None:  # type: ignore[assignment]
        self.entries = entries
        self.chars = chars
        self._size = size
        self._kept: dict[K, V] = {}
        self._lock = threading.Lock()

    def get(self, key: K, make: Callable[[], V]) -> V:
        """The value kept for ``key``, else ``make()``, kept from now on."""
        with self._lock:
            value = self._kept.pop(key, None)
            if value is not None:
                self._kept[key] = value  # (the most recently used last)
                return value
        value = make()
        size = self._size(key)
        if size > self.chars:
            return value
        with self._lock:
            kept = size + sum(map(self._size, self._kept))
            while self._kept and (len(self._kept) >= self.entries or kept > self.chars):
                first = next(iter(self._kept))
                kept -= self._size(first)
                del self._kept[first]
            self._kept[key] = value
        return value

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()

    def __len__(self) -> int:
        return len(self._kept)

    def __contains__(self, key: object) -> bool:
        return key in self._kept

    def __iter__(self) -> Iterator[K]:
        """The keys, the least recently used first."""
        return iter(list(self._kept))
