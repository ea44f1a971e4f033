"""Counting a large document's tokens in a forked process while this one parses it.

tiktoken holds the GIL for much of its work, so threads do not overlap counting with our
(pure Python) parsing; a forked child does. The child reads the document's values with the
standard library's C parsers (no positions needed), counts every string of at least
``MIN_CHARS`` with the same tokenizer, and sends back ``(hash, length, count)`` triples
(a forked child shares this process's string hashes). ``PendingCounts.seed`` then fills
the tokenizer's cache for the strings of the parsed conversation, so the pipeline finds
them counted. It only ever saves time: if anything fails, nothing is seeded and the
pipeline counts as usual.
"""

from __future__ import annotations

import json
import os
import pickle
import select
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from assembly.model import Conversation, DocFormat
from assembly.tokens import TiktokenTokenizer, Tokenizer

MIN_DOCUMENT_CHARS = 2_000_000  # below this, forking costs more than it saves
MIN_CHARS = 256  # strings shorter than this are cheap to count in place
TIMEOUT_S = 60.0


@dataclass(slots=True)
class PendingCounts:
    """A child process counting; ``seed`` waits for it and fills the tokenizer's cache."""

    pid: int
    fd: int
    tokenizer: TiktokenTokenizer

    def seed(self, conv: Conversation) -> int:
        """Seed the counts of the conversation's strings; return how many were seeded."""
        try:
            counts = self._receive()
        finally:
            os.close(self.fd)
            os.waitpid(self.pid, 0)
        if not counts:
            return 0
        found = {}
        lengths = {n for _, n in counts}  # hashing a long string costs; comparing lengths not
        for text in _strings(conv):
            if len(text) not in lengths:
                continue
            n = counts.get((hash(text), len(text)))
            if n is not None:
                found[text] = n
        self.tokenizer.seed(found)
        return len(found)

    def _receive(self) -> dict[tuple[int, int], int]:
        chunks = []
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return {}
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        try:
            triples = pickle.loads(b"".join(chunks))
        except Exception:  # a child that died mid-write: count in place instead
            return {}
        return {(h, n): c for h, n, c in triples}


def start(text: str, fmt: DocFormat, tokenizer: Tokenizer) -> PendingCounts | None:
    """Fork a child counting ``text``'s long strings, when that can pay off."""
    if (
        len(text) < MIN_DOCUMENT_CHARS
        or (os.cpu_count() or 1) < 2
        or not hasattr(os, "fork")
        or not isinstance(tokenizer, TiktokenTokenizer)
    ):
        return None
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: count, write, exit without running any cleanup
        status = 0
        try:
            os.close(read_fd)
            # This child inherited the cache: when the document was analysed before, only
            # the strings an edit changed are counted and sent (the parent has the rest).
            cached = tokenizer.cached
            triples = [
                (hash(s), len(s), len(tokenizer.encode(s)))
                for s in _document_strings(text, fmt)
                if cached(s) is None
            ]
            data = pickle.dumps(triples, protocol=pickle.HIGHEST_PROTOCOL)
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view) :]
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write_fd)
    return PendingCounts(pid, read_fd, tokenizer)


def _document_strings(text: str, fmt: DocFormat) -> Iterator[str]:
    seen: set[str] = set()
    for value in _values(text, fmt):
        for s in _walk_strings(value):
            if len(s) >= MIN_CHARS and s not in seen:
                seen.add(s)
                yield s


def _values(text: str, fmt: DocFormat) -> Iterator[Any]:
    if fmt is DocFormat.JSON:
        yield json.loads(text)
    elif fmt is DocFormat.JSONL:
        for line in text.splitlines():
            if line.strip():
                try:
                    yield json.loads(line)
                except ValueError:
                    continue
    else:
        import yaml

        yield yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _walk_strings(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            yield v
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def _strings(conv: Conversation) -> Iterable[str]:
    for m in conv.messages:
        if len(m.content) >= MIN_CHARS:
            yield m.content
        for f in m.files:
            if f.content is not None and len(f.content) >= MIN_CHARS:
                yield f.content
    for f in conv.project_files:
        if f.content is not None and len(f.content) >= MIN_CHARS:
            yield f.content
