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
