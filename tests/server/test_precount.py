"""Counting in a forked child gives exactly the counts of counting in place."""

from __future__ import annotations

import json

from assembly.documents import parse_conversation
from assembly.model import DocFormat
from server import precount
from server.tokenizers import load_tokenizer


def test_forked_counts_equal_counting_in_place(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(precount, "MIN_DOCUMENT_CHARS", 0)
    long = [f"message {i}: " + "the quick brown fox 🦊 jumps 跳 " * (20 + i) for i in range(30)]
    doc = {"messages": [{"role": "user", "content": t} for t in long]}
    text = json.dumps(doc, ensure_ascii=False)
    tokenizer = load_tokenizer().tokenizer
    reference = [len(tokenizer.encode(t)) for t in long]
    fresh = type(tokenizer)(tokenizer._enc, tokenizer.encoding)  # an empty cache
    pending = precount.start(text, DocFormat.JSON, fresh)
    assert pending is not None
    conv = parse_conversation(text, DocFormat.JSON)
    assert pending.seed(conv) == len(long)
    assert fresh.cache_size() == len(long)
    assert fresh.count_many(long) == reference


def test_a_warm_cache_sends_only_the_edited_strings(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # Re-analysing after an edit: the child inherits the counts made so far and counts
    # only the message the edit changed, so nothing else is waited for or sent back.
    monkeypatch.setattr(precount, "MIN_DOCUMENT_CHARS", 0)
    long = [f"message {i}: " + "the quick brown fox 🦊 jumps 跳 " * (20 + i) for i in range(30)]
    tokenizer = load_tokenizer().tokenizer
    warm = type(tokenizer)(tokenizer._enc, tokenizer.encoding)
    warm.count_many(long)
    edited = [*long[:7], long[7] + "x", *long[8:]]
    text = json.dumps({"messages": [{"role": "user", "content": t} for t in edited]})
    pending = precount.start(text, DocFormat.JSON, warm)
    assert pending is not None
    assert pending.seed(parse_conversation(text, DocFormat.JSON)) == 1
    assert warm.cached(edited[7]) == len(tokenizer.encode(edited[7]))
