"""Counting in a forked child gives exactly the counts of counting in place."""

from __future__ import annotations

import json

from assembly.model import DocFormat
from assembly.reading import parse_conversation
from server import precount
from server.tokenizers import load_tokenizer


def test_forked_counts_equal_counting_in_place(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(precount, "MIN_DOCUMENT_CHARS", 0)
    long = [f"message {i}: " + "the quick brown fox 🦊 jumps 跳 " * (20 + i) for i in range(30)]
    doc = {"messages": [{"role": "user", "content": t} for t in long]}
    text = json.dumps(doc, ensure_ascii=False)
    tokenizer = load_tokenizer().tokenizer
    reference = [tokenizer.counter(t) for t in long]
    fresh = type(tokenizer)(tokenizer.counter, tokenizer.encoding)  # an empty cache
    pending = precount.start(text, DocFormat.JSON, fresh)
    assert pending is not None
    conv = parse_conversation(text, DocFormat.JSON)
    assert pending.seed(conv, fresh) == len(long)
    assert fresh.cache_size() == len(long)
    assert fresh.count_many(long) == reference


def test_a_warm_cache_sends_only_the_edited_strings(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # Re-analysing after an edit: the child inherits the counts made so far and counts
    # only the message the edit changed, so nothing else is waited for or sent back.
    monkeypatch.setattr(precount, "MIN_DOCUMENT_CHARS", 0)
    long = [f"message {i}: " + "the quick brown fox 🦊 jumps 跳 " * (20 + i) for i in range(30)]
    tokenizer = load_tokenizer().tokenizer
    warm = type(tokenizer)(tokenizer.counter, tokenizer.encoding)
    warm.count_many(long)
    edited = [*long[:7], long[7] + "x", *long[8:]]
    text = json.dumps({"messages": [{"role": "user", "content": t} for t in edited]})
    pending = precount.start(text, DocFormat.JSON, warm)
    assert pending is not None
    assert pending.seed(parse_conversation(text, DocFormat.JSON), warm) == 1
    assert warm.cached(edited[7]) == tokenizer.counter(edited[7])


def test_early_start_counts_before_the_engine_and_other_encodings_are_ignored(
    tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(precount, "MIN_EARLY_CHARS", 0)
    long = [f"early {i}: " + "lorem ipsum dolor 🦊 " * (30 + i) for i in range(10)]
    path = tmp_path / "c.conv.json"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": t} for t in long]}))
    early = precount.start_early(path)
    assert early is not None and early.pending is not None
    assert early.text == path.read_text()
    conv = parse_conversation(early.text, DocFormat.JSON)
    # No settings in the document: the child counts with the default model's encoding.
    tokenizer = load_tokenizer(model="gpt-4o").tokenizer
    assert tokenizer.encoding == "o200k_base"
    fresh = type(tokenizer)(tokenizer.counter, tokenizer.encoding)
    assert early.pending.seed(conv, fresh) == len(long)
    assert fresh.count_many(long) == [tokenizer.counter(t) for t in long]
    # Counts of another encoding are never used.
    cl100k = load_tokenizer("cl100k_base").tokenizer
    other = type(cl100k)(cl100k.counter, cl100k.encoding)
    again = precount.start_early(path)
    assert again is not None and again.pending is not None
    assert again.pending.seed(conv, other) == 0
    assert other.cache_size() == 0


def test_early_start_counts_with_the_encoding_the_document_asks_for(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(precount, "MIN_EARLY_CHARS", 0)
    long = [f"early {i}: " + "你好 lorem ipsum 🦊 " * (30 + i) for i in range(6)]
    for settings, encoding in (
        ({"model": "claude-sonnet-4-5"}, "cl100k_base"),
        ({"model": "gpt-4"}, "cl100k_base"),
        ({"model": "gpt-4", "encoding": "o200k_base"}, "o200k_base"),
    ):
        doc = {"settings": settings, "messages": [{"role": "user", "content": t} for t in long]}
        path = tmp_path / "c.conv.json"
        path.write_text(json.dumps(doc))
        early = precount.start_early(path)
        assert early is not None and early.pending is not None
        conv = parse_conversation(early.text, DocFormat.JSON)
        loaded = load_tokenizer(encoding).tokenizer
        fresh = type(loaded)(loaded.counter, loaded.encoding)
        assert early.pending.seed(conv, fresh) == len(long)
        assert fresh.count_many(long) == [loaded.counter(t) for t in long]


def test_early_start_loads_the_likely_encoding_once_for_both_processes(
    tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """The encoding the document's settings ask for is loaded before the fork: the child
    inherits it and the pipeline finds it loaded (one load instead of two)."""
    from server import tokenizers

    monkeypatch.setattr(precount, "MIN_EARLY_CHARS", 0)
    long = [f"shared {i}: " + "lorem ipsum 🦊 " * (30 + i) for i in range(4)]
    messages = [{"role": "user", "content": t} for t in long]
    for doc, encoding in (
        ({"settings": {"model": "claude-sonnet-4-5"}, "messages": messages}, "cl100k_base"),
        ({"settings": {"encoding": "o200k_base"}, "messages": messages}, "o200k_base"),
        ({"messages": messages}, "o200k_base"),  # the default model's
        # Settings after the first PEEK_CHARS are not looked for: the default's guess.
        ({"messages": messages, "settings": {"model": "gpt-4"}}, "o200k_base"),
    ):
        monkeypatch.setattr(precount, "PEEK_CHARS", 200)
        monkeypatch.setattr(tokenizers, "_LOADED", {})
        path = tmp_path / "c.conv.json"
        path.write_text(json.dumps(doc))
        early = precount.start_early(path)
        assert early is not None and early.pending is not None
        assert list(tokenizers._LOADED) == [encoding]
        loaded = tokenizers._LOADED[encoding]
        # The child still counts with the encoding the document asks for.
        asked = doc.get("settings", {})
        want = tokenizers.load_tokenizer(
            asked.get("encoding"), model=asked.get("model") or "gpt-4o"
        )
        conv = parse_conversation(early.text, DocFormat.JSON)
        fresh = type(loaded)(want.tokenizer.counter, want.tokenizer.encoding)
        assert early.pending.seed(conv, fresh) == len(long)
        assert fresh.count_many(long) == [want.tokenizer.counter(t) for t in long]


def test_early_start_survives_hostile_settings(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The settings looked at before the fork may be anything: nested 100,000 deep (the C
    parser's recursion limit), unterminated, not an object; the guess is the default."""
    from server import tokenizers

    monkeypatch.setattr(precount, "MIN_EARLY_CHARS", 0)
    path = tmp_path / "c.conv.json"
    for head in (
        '{"settings": ' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + ", ",
        '{"settings": {"model": "claude-sonnet-4-5" ',  # no comma: not JSON there
        '{"settings": {"model": 7}, ',
    ):
        monkeypatch.setattr(tokenizers, "_LOADED", {})
        # Long enough a string that the document is worth a child (``_worth_forking``).
        content = "lorem " * 450_000
        path.write_text(head + '"messages": [{"role": "user", "content": "' + content + '"}]}')
        early = precount.start_early(path)
        assert early is not None and early.text == path.read_text()
        assert early.pending is not None
        assert list(tokenizers._LOADED) == ["o200k_base"]
        early.pending.close()
