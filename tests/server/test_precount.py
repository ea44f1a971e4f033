"""Counting in a forked child gives exactly the counts of counting in place."""

from __future__ import annotations

import json
import marshal
import os
import time
from pathlib import Path

import pytest

from assembly.model import DocFormat
from assembly.reading import parse_conversation
from server import precount
from server.tokenizers import load_tokenizer


@pytest.fixture(autouse=True)
def _own_tokenizers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's encodings are its own: a test's ``start_early`` registers a counting
    child for an encoding not loaded yet (``tokenizers.count_elsewhere``), which, left in
    place, a later test (and every child it forks, sharing its pipes) would count with."""
    from server import tokenizers

    monkeypatch.setattr(tokenizers, "_LOADED", dict(tokenizers._LOADED))


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
    _finished(pending)  # ``seed`` takes what was sent so far: here, everything
    assert pending.seed(conv, fresh) == len(long)
    assert fresh.cache_size() == len(long)
    assert fresh.count_many(long) == reference


def test_the_child_counts_an_uploaded_file_as_the_pipeline_does(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # The pipeline counts an uploaded file inside its block, never its bare content: the
    # child counts the block (and not the content), the parent seeds it, and the analysis
    # that takes those counts equals one that counted everything itself.
    from assembly import texts
    from server.workspace import analyze

    monkeypatch.setattr(precount, "MIN_DOCUMENT_CHARS", 0)
    files = [
        {"file_id": f"f{i}", "filename": f"notes_{i}.md", "content": "file words 🦊 跳 " * (9 + i)}
        for i in range(3)
    ]
    files.append({"file_id": "f9", "content": "a file without a name, " * 4})  # "unknown"
    doc = {
        "messages": [
            {"role": "user", "content": "Read these files and sum them up.", "files": files},
            {"role": "assistant", "content": "They say the same thing three times over."},
        ]
    }
    text = json.dumps(doc, ensure_ascii=False)
    blocks = [texts.file_block(f.get("filename", "unknown"), f["content"]) for f in files]
    tokenizer = load_tokenizer().tokenizer
    fresh = type(tokenizer)(tokenizer.counter, tokenizer.encoding)  # an empty cache
    pending = precount.start(text, DocFormat.JSON, fresh)
    assert pending is not None
    conv = parse_conversation(text, DocFormat.JSON)
    _finished(pending)
    pending.seed(conv, fresh)
    assert [fresh.cached(b) for b in blocks] == [tokenizer.counter(b) for b in blocks]
    assert [fresh.cached(f["content"]) for f in files] == [None] * len(files)

    path = tmp_path / "c.conv.json"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setattr(precount, "MIN_DOCUMENT_CHARS", 10**9)  # in place: no child
    counted_here = analyze(path, text=text, root=tmp_path)
    counted_here_json = _analysis_json(counted_here)
    monkeypatch.setattr(precount, "MIN_DOCUMENT_CHARS", 0)
    from server import tokenizers

    monkeypatch.setattr(tokenizers, "_LOADED", {})  # an empty cache: every count is the child's
    child = precount.start(text, DocFormat.JSON, load_tokenizer().tokenizer)
    assert child is not None
    _finished(child)
    with_child = analyze(path, text=text, root=tmp_path, pending=child)
    assert _analysis_json(with_child) == counted_here_json


def _analysis_json(result: object) -> str:
    """An analysis' assembly and findings, as a value to compare."""
    a = result.assembly  # type: ignore[attr-defined]
    diags = [(d.code, d.message, str(d.range)) for d in result.diagnostics]  # type: ignore[attr-defined]
    msgs = [(m.id, m.kind, m.tokens) for m in a.history]
    return json.dumps([repr(a.budget), msgs, a.tokens_by_id, diags], default=str)


def _finished(pending: precount.PendingCounts) -> None:
    """Wait until the counting child has sent everything and ended."""
    os.waitpid(pending.pid, 0)


def test_the_server_takes_the_counts_sent_so_far_and_the_rest_as_they_come(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The child counts the newest messages first and sends each batch as it goes; the
    # analysis does not wait for the rest (the oldest, which the budget may never read):
    # it seeds what was sent, and counts a text not seeded in place, with the same count,
    # unless the child, still counting, has sent it meanwhile (the pipeline converts the
    # oldest first: the two meet in the middle). The analysis' end stops the child.
    monkeypatch.setattr(precount, "MIN_DOCUMENT_CHARS", 0)
    monkeypatch.setattr(precount, "BATCH_CHARS", 1)  # a batch per text
    long = [f"message {i}: " + "the quick brown fox 🦊 jumps 跳 " * (20 + i) for i in range(30)]
    text = json.dumps({"messages": [{"role": "user", "content": t} for t in long]})
    tokenizer = load_tokenizer().tokenizer
    reference = [tokenizer.counter(t) for t in long]
    reached_r, reached_w = os.pipe()
    go_r, go_w = os.pipe()

    def counter(t: str) -> int:
        if t in (long[1], long[0]):  # the oldest two: the child's last texts
            os.write(reached_w, b"x")
            os.read(go_r, 1)  # each waits until the test lets it go on
        return tokenizer.counter(t)

    slow = type(tokenizer)(counter, tokenizer.encoding)
    pending = precount.start(text, DocFormat.JSON, slow)
    assert pending is not None and pending.drain
    here: list[str] = []

    def counted_here(t: str) -> int:
        here.append(t)
        return tokenizer.counter(t)

    fresh = type(tokenizer)(counted_here, tokenizer.encoding)
    try:
        assert os.read(reached_r, 1) == b"x"  # every newer message's batch is sent by now
        started = time.monotonic()
        assert pending.seed(parse_conversation(text, DocFormat.JSON), fresh) == len(long) - 2
        assert time.monotonic() - started < precount.TIMEOUT_S / 2
        assert not pending.closed and fresh.elsewhere == pending.late  # still counting
        assert fresh.count(long[2]) == reference[2] and here == []  # seeded
        assert fresh.count(long[1]) == reference[1] and here == [long[1]]  # not sent yet
        os.write(go_w, b"x")  # the child counts long[1] and waits at long[0]
        assert os.read(reached_r, 1) == b"x"
        os.write(go_w, b"x")  # and sends it: its last batch
        _finished(pending)
        time.sleep(2 * precount.POLL_S)
        assert fresh.count(long[0]) == reference[0] and here == [long[1]]  # from the child
        pending.close()
        assert fresh.elsewhere is None  # no longer asked
        assert fresh.count_many(long) == reference
        # A child still counting when the analysis ends is stopped, and reaped elsewhere.
        stuck = precount.start(text, DocFormat.JSON, slow)
        assert stuck is not None
        assert os.read(reached_r, 1) == b"x"
        other = type(tokenizer)(tokenizer.counter, tokenizer.encoding)
        assert stuck.seed(parse_conversation(text, DocFormat.JSON), other) == len(long) - 2
        assert other.elsewhere == stuck.late
        stuck.close()
        assert other.elsewhere is None
        _reaped_elsewhere(stuck.pid)
    finally:
        pending.close()
        for fd in (reached_r, reached_w, go_r, go_w):
            os.close(fd)


def _reaped_elsewhere(pid: int) -> None:
    """Wait until a killed child is reaped by the thread ``PendingCounts.close`` started
    (this process does not reap it: its entry in ``/proc`` goes when that thread has)."""
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists():
        assert time.monotonic() < deadline, f"child {pid} never reaped"
        time.sleep(0.01)


def test_a_batch_cut_short_is_left_out_and_the_whole_ones_are_kept() -> None:
    whole = marshal.dumps(("o200k_base", [(1, 40, 9), (2, 50, 11)]))
    second = marshal.dumps(("o200k_base", [(3, 60, 13)]))
    data = len(whole).to_bytes(8, "little") + whole + len(second).to_bytes(8, "little")
    assert list(precount._batches(data + second)) == [
        ("o200k_base", [(1, 40, 9), (2, 50, 11)], 8 + len(whole)),
        ("o200k_base", [(3, 60, 13)], 16 + len(whole) + len(second)),
    ]
    assert list(precount._batches(data + second[:-1])) == [
        ("o200k_base", [(1, 40, 9), (2, 50, 11)], 8 + len(whole))
    ]


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
    _finished(pending)
    assert pending.seed(parse_conversation(text, DocFormat.JSON), warm) == 1
    assert warm.cached(edited[7]) == tokenizer.counter(edited[7])


def test_early_start_counts_before_the_engine_and_other_encodings_are_ignored(
    tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(precount, "MIN_EARLY_CHARS", 0)
    monkeypatch.setattr(precount, "MIN_SHAPED_CHARS", 0)  # treated as a large one
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
    monkeypatch.setattr(precount, "MIN_SHAPED_CHARS", 0)  # treated as a large one
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
    monkeypatch.setattr(precount, "MIN_SHAPED_CHARS", 0)  # treated as a large one
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
    monkeypatch.setattr(precount, "MIN_SHAPED_CHARS", 0)  # treated as a large one
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


# Texts the served counts are checked on: a lone surrogate, a special token's text, CJK,
# emoji sequences, and one larger than a pipe's buffer (the request is written in parts).
HOSTILE = [
    "plain words, and more words",
    "\ud800 a lone surrogate \udfff",
    "<|endoftext|> is text here",
    "你好，世界 🦊👨‍👩‍👧 🇫🇷",
    "x" * 5 + " " * 70_000 + "y",
    "File: a.md\n" + "lorem ipsum 🦊 " * 20_000,
]


def _reference(texts: list[str], encoding: str = "o200k_base") -> list[int]:
    from server.tokenizers import reference_encoding

    enc = reference_encoding(encoding)[0]  # tiktoken, the reference
    return [len(enc.encode_ordinary(t)) for t in texts]


def _early_doc(tmp_path, settings: dict | None = None):  # type: ignore[no-untyped-def]
    long = [f"served {i}: " + "lorem ipsum dolor 🦊 " * (30 + i) for i in range(6)]
    doc = {"messages": [{"role": "user", "content": t} for t in long]}
    if settings is not None:
        doc = {"settings": settings, **doc}
    path = tmp_path / "c.conv.json"
    path.write_text(json.dumps(doc))
    return path, long


def test_the_early_child_counts_the_pipelines_texts_so_this_process_loads_nothing(
    tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    from server import tokenizers

    reference = _reference(HOSTILE)
    monkeypatch.setattr(precount, "MIN_EARLY_CHARS", 0)
    monkeypatch.setattr(precount, "MIN_SHAPED_CHARS", 0)  # treated as a large one
    monkeypatch.setattr(tokenizers, "_LOADED", {})

    parent = os.getpid()
    loads = []

    def no_local_load(name: str, load=tokenizers.fast_counter):  # type: ignore[no-untyped-def]
        if os.getpid() == parent:  # the child (a fork) loads it
            loads.append(name)
        return load(name)

    monkeypatch.setattr(tokenizers, "fast_counter", no_local_load)
    path, long = _early_doc(tmp_path)
    early = precount.start_early(path)
    assert early is not None and early.pending is not None
    served = tokenizers.load_tokenizer(model="gpt-4o")
    assert (served.requested, served.warning) == ("o200k_base", None)
    tok = served.tokenizer
    # Its document counts first, then texts on request, after ``seed`` too.
    conv = parse_conversation(early.text, DocFormat.JSON)
    assert early.pending.seed(conv, tok) == len(long)
    assert tok.count_many(HOSTILE) == reference  # one request for all of them
    assert [tok.count(t + " more") for t in HOSTILE[:3]] == _reference(
        [t + " more" for t in HOSTILE[:3]]
    )
    assert tok.count("") == 0
    early.pending.close()
    assert early.pending.count(["late"]) is None
    assert loads == []  # this process never loaded the encoding


@pytest.mark.parametrize("how", ["killed", "fails to count"])
def test_a_child_that_stops_answering_is_replaced_by_a_local_load(
    tmp_path, monkeypatch, how: str
) -> None:  # type: ignore[no-untyped-def]
    import signal

    from assembly.tokens import CachedTokenizer
    from server import tokenizers

    monkeypatch.setattr(precount, "MIN_EARLY_CHARS", 0)
    monkeypatch.setattr(precount, "MIN_SHAPED_CHARS", 0)  # treated as a large one
    monkeypatch.setattr(tokenizers, "_LOADED", {})
    texts = list(HOSTILE)
    if how == "fails to count":
        # The child (a fork of this process) fails on one text: it answers -1.
        count = CachedTokenizer.count

        def failing(self, text: str, count=count) -> int:  # type: ignore[no-untyped-def]
            if text == "boom":
                raise RuntimeError("boom")
            return count(self, text)

        monkeypatch.setattr(CachedTokenizer, "count", failing)
        texts.insert(0, "boom")
    path, _ = _early_doc(tmp_path)
    early = precount.start_early(path)
    assert early is not None and early.pending is not None
    tok = tokenizers.load_tokenizer(model="gpt-4o").tokenizer
    if how == "killed":
        os.kill(early.pending.pid, signal.SIGKILL)
    assert tok.count_many(texts) == _reference(texts)
    assert early.pending.closed  # stopped and reaped
    more = [t + "!" for t in HOSTILE]
    assert tok.count_many(more) == _reference(more)


def test_an_on_demand_child_is_not_waited_for_and_stops_counting_when_asked(
    tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    # ``promptls assemble``'s child: ``seed`` does not wait (its tokenizer counts through
    # the child); ``count`` looks texts up in the batches sent so far and asks the child
    # for the rest at once; the request stops the child's own counting (the oldest texts
    # are never counted there).
    import threading

    from assembly.tokens import CachedTokenizer
    from server import tokenizers

    monkeypatch.setattr(precount, "MIN_EARLY_CHARS", 0)
    monkeypatch.setattr(precount, "MIN_SHAPED_CHARS", 0)  # treated as a large one
    monkeypatch.setattr(precount, "BATCH_CHARS", 1)  # a batch per text
    monkeypatch.setattr(tokenizers, "_LOADED", {})
    long = [f"message {i}: " + "the quick brown fox 🦊 jumps 跳 " * (20 + i) for i in range(12)]
    path = tmp_path / "c.conv.json"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": t} for t in long]}))
    reference = _reference(long)
    reached_r, reached_w = os.pipe()
    go_r, go_w = os.pipe()
    count = CachedTokenizer.count
    once: list[bool] = []

    def held(self, text: str, count=count) -> int:  # type: ignore[no-untyped-def]
        if text == long[6] and not once:  # in the child, newest first: its 7th text
            once.append(True)
            os.write(reached_w, b"x")
            os.read(go_r, 1)
        return count(self, text)

    monkeypatch.setattr(CachedTokenizer, "count", held)
    early = precount.start_early(path, on_demand=True)
    try:
        assert early is not None and early.pending is not None and early.pending.on_demand
        pending = early.pending
        tok = tokenizers.load_tokenizer(model="gpt-4o").tokenizer
        assert os.read(reached_r, 1) == b"x"  # the 5 newest texts are sent by now
        started = time.monotonic()
        assert pending.seed(parse_conversation(early.text, DocFormat.JSON), tok) == 0
        assert time.monotonic() - started < precount.TIMEOUT_S / 2
        assert not pending.closed  # still there, to count on request
        assert pending.count(long[7:]) == reference[7:]  # those sent: no request
        assert not pending.closed and len(pending._sent[1]) == 5
        # The request is written, then the held text is let go: the child sends its
        # batch, sees the request and stops counting the older texts.
        threading.Timer(0.3, os.write, (go_w, b"x")).start()
        monkeypatch.setattr(CachedTokenizer, "count", count)
        assert tok.count_many(long) == reference
        pending._read(time.monotonic() + precount.TIMEOUT_S)
        assert pending._ended
        sent = pending._sent[1]
        assert [hash(t) in sent for t in long] == [False] * 6 + [True] * 6
        assert tok.count("one more text to count") == _reference(["one more text to count"])[0]
    finally:
        if early is not None and early.pending is not None:
            early.pending.close()
        for fd in (reached_r, reached_w, go_r, go_w):
            os.close(fd)


def test_an_on_demand_childs_dataset_waits_for_every_count(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # A dataset's records are assembled the first first; the child counts the last first:
    # ``seed`` waits for all its counts, so no record's request stops it half-way.
    from server import tokenizers

    monkeypatch.setattr(precount, "MIN_EARLY_CHARS", 0)
    monkeypatch.setattr(precount, "MIN_SHAPED_CHARS", 0)  # treated as a large one
    monkeypatch.setattr(tokenizers, "_LOADED", {})
    long = [f"record {i}: " + "lorem ipsum dolor 🦊 " * (30 + i) for i in range(6)]
    path = tmp_path / "d.conv.jsonl"
    lines = (json.dumps({"messages": [{"role": "user", "content": t}]}) for t in long)
    path.write_text("\n".join(lines) + "\n")
    early = precount.start_early(path, on_demand=True)
    assert early is not None and early.pending is not None
    try:
        tok = tokenizers.load_tokenizer(model="gpt-4o").tokenizer
        conv = parse_conversation(early.text, DocFormat.JSONL)
        assert len(conv.records) == len(long)
        assert early.pending.seed(conv, tok) == len(long)
        assert [tok.cached(t) for t in long] == _reference(long)
    finally:
        early.pending.close()


def test_an_encoding_that_is_not_bundled_is_loaded_before_the_fork(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from server import tokenizers

    monkeypatch.setattr(precount, "MIN_EARLY_CHARS", 0)
    monkeypatch.setattr(precount, "MIN_SHAPED_CHARS", 0)  # treated as a large one
    monkeypatch.setattr(tokenizers, "_LOADED", {})
    monkeypatch.setattr(tokenizers, "BUNDLED_ENCODINGS", frozenset({"o200k_harmony"}))
    path, long = _early_doc(tmp_path, {"model": "gpt-4"})
    early = precount.start_early(path)
    assert early is not None and early.pending is not None
    assert early.pending.requests is None  # no serving child: the counts only
    tok = tokenizers._LOADED["cl100k_base"]
    assert tok.batch is None  # counted here
    conv = parse_conversation(early.text, DocFormat.JSON)
    assert early.pending.seed(conv, tok) == len(long) and early.pending.closed


def test_closing_without_reaping_kills_the_child_and_leaves_it_to_be_reaped(
    tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    # A process about to end (``promptls assemble`` under ``run``) does not wait while the
    # system frees the child's memory; the child is stopped all the same.
    import signal

    monkeypatch.setattr(precount, "MIN_EARLY_CHARS", 0)
    monkeypatch.setattr(precount, "MIN_SHAPED_CHARS", 0)  # treated as a large one
    path, _ = _early_doc(tmp_path)
    early = precount.start_early(path)
    assert early is not None and early.pending is not None
    pid = early.pending.pid
    early.pending.close(reap=False)
    assert early.pending.closed
    reaped, status = os.waitpid(pid, 0)  # here, the test reaps it
    assert reaped == pid
    assert os.WIFEXITED(status) or os.WTERMSIG(status) == signal.SIGKILL


def test_the_command_line_forks_the_child_for_the_file_it_names_before_parsing(
    tmp_path, monkeypatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    # ``promptls assemble`` forks before its command line is parsed; ``_assemble`` takes
    # that child when FILE is the file it was forked for, and any child not taken (a usage
    # error) is stopped.
    from server.cli import main as cli

    monkeypatch.setattr(precount, "MIN_EARLY_CHARS", 0)
    monkeypatch.setattr(precount, "MIN_SHAPED_CHARS", 0)  # treated as a large one
    started: list[tuple[str, precount.EarlyStart | None]] = []

    order: list[str] = []

    def start_early(path, start=precount.start_early, **options):  # type: ignore[no-untyped-def]
        early = start(path, **options)
        assert options == {"on_demand": True}  # the command's child is not waited for
        started.append((str(path), early))
        order.append("fork")
        return early

    def parser(*args, build=cli._parser):  # type: ignore[no-untyped-def]
        order.append("parse")
        return build(*args)

    monkeypatch.setattr(precount, "start_early", start_early)
    monkeypatch.setattr(cli, "_parser", parser)
    path, _ = _early_doc(tmp_path)
    other = tmp_path / "other.conv.json"
    other.write_text(path.read_text())
    for argv, file in (
        (["assemble", str(path), "--format", "json"], str(path)),
        (["assemble", "--format", "json", "--today", "2026-01-01", str(path)], str(path)),
        (["assemble", "--form=json", "--root", str(tmp_path), str(path)], str(path)),
        (["assemble", "--summary-request", "--format", "json", "--", str(path)], str(path)),
    ):
        started.clear()
        order.clear()
        assert cli.main(argv) == 0
        assert [name for name, _ in started] == [file]
        assert order == ["fork", "parse"]  # forked once, before parsing
        early = started[0][1]
        assert early is not None and early.pending is not None and early.pending.closed
        assert json.loads(capsys.readouterr().out)["messages"]
    # A usage error after the fork: the child is stopped.
    started.clear()
    assert cli.main(["assemble", str(path), "--root", str(tmp_path / "nowhere")]) == 2
    assert [name for name, _ in started] == [str(path)]
    assert started[0][1] is not None and started[0][1].pending.closed
    assert cli._EARLY == {}
    capsys.readouterr()


def test_the_child_counts_the_newest_messages_first() -> None:
    # The history's budget reads messages from the newest back: those are the counts a
    # parent that does not wait for the child needs first.
    texts = [f"message {i}: " + "words to count " * 4 for i in range(5)]
    doc = {"settings": {"model": "gpt-4o"}, "messages": [{"content": t} for t in texts]}
    got = list(precount._document_strings(list(precount._values(json.dumps(doc), "json"))))
    assert got == texts[::-1]
    lines = "\n".join(json.dumps({"role": "user", "content": t}) for t in texts)
    got = list(precount._document_strings(list(precount._values(lines, "jsonl"))))
    assert got == texts[::-1]


def test_the_child_counts_an_earlier_turns_tool_results_last() -> None:
    # The pipeline counts a placeholder for a tool result before the last user message:
    # the child counts those results after every other text (still counts them).
    result = [f"result {i}: " + "a tool's output " * 4 for i in range(3)]
    said = [f"message {i}: " + "words to count " * 4 for i in range(4)]
    messages = [
        {"role": "user", "content": said[0]},
        {"role": "tool", "tool_call_id": "c1", "content": result[0]},
        {"role": "user", "content": said[1]},
        {"role": "tool", "tool_call_id": "c2", "content": result[1]},
        {"role": "assistant", "content": said[2]},
        {"role": "user", "content": said[3]},
        {"role": "tool", "tool_call_id": "c3", "content": result[2]},  # this turn's
    ]
    expect = [result[2], said[3], said[2], said[1], said[0], result[1], result[0]]
    doc = json.dumps({"messages": messages})
    assert list(precount._document_strings(list(precount._values(doc, "json")))) == expect
    lines = "\n".join(map(json.dumps, messages))
    assert list(precount._document_strings(list(precount._values(lines, "jsonl")))) == expect


@pytest.mark.parametrize("helper", ["counts", "fails"])
def test_a_large_request_is_shared_with_a_helper_and_the_counts_are_the_same(
    monkeypatch: pytest.MonkeyPatch, helper: str
) -> None:
    # The parent waits for the answer, so the serving child shares a large request with a
    # helper it forks; a helper that fails leaves its half to the child.
    from server import tokenizers

    monkeypatch.setattr(precount, "SPLIT_CHARS", 1)
    monkeypatch.setattr(tokenizers, "_LOADED", {})  # counted here, by no earlier test's child
    texts = [*HOSTILE, *(f"text {i} 🦊 " * (i + 1) for i in range(40))]
    count = load_tokenizer(model="gpt-4o").tokenizer.counter  # the reference's o200k_base
    parent = os.getpid()
    if helper == "fails":
        write_all = precount._write_all

        def failing(fd: int, data: bytes) -> None:
            if os.getpid() != parent:  # the helper dies before it answers
                os._exit(3)
            write_all(fd, data)

        monkeypatch.setattr(precount, "_write_all", failing)
    counts, pid = precount._count_all(count, texts)
    assert counts == _reference(texts)
    assert pid is not None and pid != parent
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == (0 if helper == "counts" else 3)
    # Below the threshold, or a single text: no helper.
    monkeypatch.setattr(precount, "SPLIT_CHARS", 10**9)
    assert precount._count_all(count, texts) == (_reference(texts), None)
    monkeypatch.setattr(precount, "SPLIT_CHARS", 1)
    assert precount._count_all(count, texts[:1]) == (_reference(texts[:1]), None)


def test_the_childs_reader_hands_out_exact_lengths_across_reads() -> None:
    import threading

    r, w = os.pipe()
    sizes = [0, 1, 7, 70_000, 3, 200_000, 5]
    chunks = [bytes([i % 251]) * n for i, n in enumerate(sizes)]

    def write() -> None:  # more than a pipe's buffer, in pieces of its own sizes
        for chunk in chunks:
            precount._write_all(w, chunk)
        os.close(w)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        reader = precount._Reader(r)
        assert [reader.exactly(len(c)) for c in chunks] == chunks
        assert reader.exactly(1) is None  # the pipe's end
    finally:
        writer.join()
        os.close(r)


def test_the_command_line_forks_before_importing_argparse(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Only the parent parses the command line, after the fork: ``argparse`` (with
    # ``gettext``, and ``shutil``… once a parser is built) is not on the child's path.
    import subprocess
    import sys

    path, _ = _early_doc(tmp_path)
    probe = (
        "import sys\n"
        "from server import precount\n"
        "from server.cli import main as cli\n"
        "start = precount.start_early\n"
        "seen = []\n"
        "def early(path, **options):\n"
        "    seen.append(sorted({'argparse', 'gettext', 'shutil'} & set(sys.modules)))\n"
        "    return start(path, **options)\n"
        "precount.start_early = early\n"
        "precount.MIN_EARLY_CHARS = precount.MIN_SHAPED_CHARS = 0\n"
        "code = cli.main(['assemble', sys.argv[1], '--format', 'json'])\n"
        "print(seen, code, 'argparse' in sys.modules, file=sys.stderr)\n"
    )
    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.run(
        [sys.executable, "-c", probe, str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": root},
        timeout=120,
        check=False,
    )
    assert proc.stderr.strip().splitlines()[-1] == "[[]] 0 True", proc.stderr
    assert json.loads(proc.stdout)["messages"]


def test_the_serving_child_shares_a_large_request_and_answers_the_next_ones(
    tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    from server import tokenizers

    monkeypatch.setattr(precount, "MIN_EARLY_CHARS", 0)
    monkeypatch.setattr(precount, "MIN_SHAPED_CHARS", 0)  # treated as a large one
    monkeypatch.setattr(precount, "SPLIT_CHARS", 1)  # every request of two texts or more
    monkeypatch.setattr(tokenizers, "_LOADED", {})
    path, long = _early_doc(tmp_path)
    early = precount.start_early(path, on_demand=True)
    assert early is not None and early.pending is not None
    try:
        tok = tokenizers.load_tokenizer(model="gpt-4o").tokenizer
        texts = [*long, *HOSTILE, *(f"asked {i}: " + "mots 🦊 " * i for i in range(50))]
        assert tok.count_many(texts) == _reference(texts)
        more = [t + " again" for t in texts]
        assert tok.count_many(more) == _reference(more)  # the helper's end held nothing up
        assert tok.count("one") == 1 and not early.pending.closed
    finally:
        early.pending.close()


def _did_open_body(text: str, uri: str = "file:///w/c.conv.json") -> bytes:
    doc = {"uri": uri, "languageId": "json", "version": 1, "text": text}
    message = {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": doc}}
    return json.dumps(message, ensure_ascii=False).encode()


def test_a_did_opens_child_counts_from_its_bytes_once_told_how(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # Forked from the message's bytes (before anything decodes them here), the child reads
    # the document and waits; told the format and the tokenizer, it counts exactly as
    # counting in place does.
    monkeypatch.setattr(precount, "MIN_DOCUMENT_CHARS", 0)
    long = [f"open {i}: " + "the quick brown fox 🦊 jumps 跳 " * (20 + i) for i in range(30)]
    text = json.dumps({"messages": [{"role": "user", "content": t} for t in long]})
    pending = precount.start_open(_did_open_body(text))
    assert pending is not None and pending.awaiting and pending.drain
    pending.count_with(DocFormat.JSON, None, "gpt-4o")
    assert not pending.awaiting
    _finished(pending)
    tokenizer = load_tokenizer(model="gpt-4o").tokenizer
    fresh = type(tokenizer)(tokenizer.counter, tokenizer.encoding)
    assert pending.seed(parse_conversation(text, DocFormat.JSON), fresh) == len(long)
    assert fresh.count_many(long) == [tokenizer.counter(t) for t in long]
    # A name that says no format: the values are read in the one the parent names.
    unnamed = precount.start_open(_did_open_body(text, uri="untitled:Untitled-1"))
    assert unnamed is not None
    unnamed.count_with(DocFormat.JSON, None, "gpt-4o")
    _finished(unnamed)
    fresh = type(tokenizer)(tokenizer.counter, tokenizer.encoding)
    assert unnamed.seed(parse_conversation(text, DocFormat.JSON), fresh) == len(long)
    # Told another encoding, it counts with that one, which this tokenizer does not take.
    again = precount.start_open(_did_open_body(text))
    assert again is not None
    again.count_with(DocFormat.JSON, "cl100k_base", None)
    _finished(again)
    other = type(tokenizer)(tokenizer.counter, tokenizer.encoding)
    assert again.seed(parse_conversation(text, DocFormat.JSON), other) == 0


def test_a_did_opens_child_never_told_or_sent_anything_else_ends_without_counts(
    monkeypatch,
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(precount, "MIN_DOCUMENT_CHARS", 0)
    text = json.dumps({"messages": [{"role": "user", "content": "x" * 100}]})
    tokenizer = load_tokenizer().tokenizer
    conv = parse_conversation(text, DocFormat.JSON)
    stopped = precount.start_open(_did_open_body(text))
    assert stopped is not None
    stopped.close()  # not a document the server counts: the child is stopped
    assert stopped.closed and not stopped.awaiting
    _reaped_elsewhere(stopped.pid)
    for body in (b'{"method": "textDocument/didOpen", "params": 3}', b"\xff not json"):
        odd = precount.start_open(body)
        assert odd is not None
        odd.count_with(DocFormat.JSON, None, None)
        _, status = os.waitpid(odd.pid, 0)
        assert os.WEXITSTATUS(status) == 1  # it failed, alone
        fresh = type(tokenizer)(tokenizer.counter, tokenizer.encoding)
        assert odd.seed(conv, fresh) == 0


def test_a_small_body_forks_nothing() -> None:
    assert precount.start_open(_did_open_body("x" * 100)) is None


def test_a_child_forked_while_another_thread_loads_an_encoding_can_load_one() -> None:
    # The server's warm-up loads the editor's encoding on a thread of its own while a
    # didOpen's child may be forked: the lock that thread held is free in the child.
    import threading

    from server import tokenizers

    held, release = threading.Event(), threading.Event()

    def loading() -> None:
        with tokenizers._LOCK:
            held.set()
            release.wait(30)

    thread = threading.Thread(target=loading)
    thread.start()
    try:
        assert held.wait(30)
        pid = os.fork()
        if pid == 0:  # the child: the load must not wait for a thread it does not have
            code = 0 if tokenizers._LOCK.acquire(timeout=5) else 3
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0
    finally:
        release.set()
        thread.join()


def test_an_analysis_stops_the_child_it_drains_when_it_ends(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # The server's analysis goes on taking a drained child's counts while it runs
    # (``late``), and no longer: at its end the child is stopped and not asked again.
    from server.workspace import analyze

    monkeypatch.setattr(precount, "MIN_DOCUMENT_CHARS", 0)
    long = [f"message {i}: " + "lorem ipsum dolor 🦊 " * (30 + i) for i in range(20)]
    text = json.dumps({"messages": [{"role": "user", "content": t} for t in long]})
    path = tmp_path / "c.conv.json"
    path.write_text(text)
    tokenizer = load_tokenizer().tokenizer
    reached_r, reached_w = os.pipe()
    never_r, never_w = os.pipe()

    def counter(t: str) -> int:
        if t == long[0]:  # the oldest message: the child's last text; it never ends
            os.write(reached_w, b"x")
            os.read(never_r, 1)
        return tokenizer.counter(t)

    pending = precount.start(text, DocFormat.JSON, type(tokenizer)(counter, tokenizer.encoding))
    assert pending is not None
    asked: list[bool] = []
    late = precount.PendingCounts.late

    def asking(self: precount.PendingCounts, t: str) -> int | None:
        asked.append(True)
        return late(self, t)

    monkeypatch.setattr(precount.PendingCounts, "late", asking)
    try:
        assert os.read(reached_r, 1) == b"x"
        result = analyze(path, text=text, root=tmp_path, pending=pending)
        assert len(result.conversation.messages) == len(long)
        assert asked  # the oldest text was asked of the child before it was counted here
        assert pending.closed and load_tokenizer().tokenizer.elsewhere is None
        _reaped_elsewhere(pending.pid)
    finally:
        pending.close()
        for fd in (reached_r, reached_w, never_r, never_w):
            os.close(fd)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("settings:\n  encoding: cl100k_base\nmessages: []\n", {"encoding": "cl100k_base"}),
        (
            '# a comment\nsettings:   # the window\n\n  model: "claude-sonnet-4"  # approx.\n'
            "  encoding: 'o200k_base'\n  max_input_tokens: 4096\nmessages: []\n",
            {"model": "claude-sonnet-4", "encoding": "o200k_base"},
        ),
        # Only the block's own keys: not a nested mapping's, not after the block ends.
        (
            "settings:\n  tools:\n    model: gpt-4\n  model: gpt-4o-mini\nmessages:\n"
            "  - role: user\n    encoding: p50k_base\n",
            {"model": "gpt-4o-mini"},
        ),
        # A one-line flow mapping of plain values (the fixtures' style).
        (
            "settings: {max_input_tokens: 1000, model: 'claude-sonnet-4', safety_margin: 0}\n",
            {"model": "claude-sonnet-4"},
        ),
        ("settings: {tools: {model: gpt-4}}\n", {}),  # nested: left to the parse
        ("messages:\n  - settings:\n      model: gpt-4\n", {}),  # not at the top level
        ("messages: []\n", {}),
    ],
)
def test_a_yaml_documents_settings_are_peeked_without_pyyaml(
    text: str, expected: dict[str, str]
) -> None:
    peeked = precount._peek_settings(text, "yaml")
    assert peeked.get("settings", {}) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # An API log: the request body's model (after its messages, keys sorted).
        ('{"max_tokens": 1, "messages": [], "model": "claude-sonnet-4-0"}', "cl100k_base"),
        ('{"model": "gpt-4o", "messages": []}', "o200k_base"),
        # ``settings.model`` wins over it, as in the reader; so does ``settings.encoding``.
        ('{"settings": {"model": "gpt-4"}, "model": "gpt-4o"}', "cl100k_base"),
        ('{"settings": {"encoding": "cl100k_base"}, "model": "gpt-4o"}', "cl100k_base"),
        ('{"settings": {"max_input_tokens": 5}, "model": "gpt-4"}', "cl100k_base"),
        ('{"messages": []}', "o200k_base"),  # the default model's
    ],
)
def test_a_json_documents_encoding_is_guessed_as_the_reader_takes_it(
    text: str, expected: str
) -> None:
    assert precount._likely_encoding(text, "json") == expected
    # And the reader agrees.
    from assembly.host import DOCUMENT_SOURCE
    from assembly.settings import SettingsLayer, resolve_settings
    from assembly.tokens import resolve_encoding

    conv = parse_conversation(text, DocFormat.JSON)
    layer = SettingsLayer(DOCUMENT_SOURCE, conv.settings, conv.settings_ranges)
    settings = resolve_settings([layer])[0]
    assert resolve_encoding(settings.encoding, settings.model).encoding == expected


def test_the_yaml_peek_reads_what_pyyaml_reads() -> None:
    # A guess, yet on the settings blocks PyYAML itself writes (block style, plain or quoted
    # scalars, any order, other keys around), it reads the values PyYAML reads back: each
    # one, but a double-quoted one with escapes, which it leaves to the parse.
    import yaml
    from hypothesis import given, settings
    from hypothesis import strategies as st

    name = st.text(
        st.characters(whitelist_categories=("Ll", "Lu", "Nd"), whitelist_characters="-._:/ #'\""),
        min_size=1,
        max_size=24,
    )
    other = st.dictionaries(st.sampled_from(["max_input_tokens", "rules", "x"]), st.integers())

    @settings(max_examples=300, deadline=None)
    @given(model=st.none() | name, encoding=st.none() | name, extra=other)
    def check(model: str | None, encoding: str | None, extra: dict[str, int]) -> None:
        block: dict[str, object] = dict(extra)
        if model is not None:
            block["model"] = model
        if encoding is not None:
            block["encoding"] = encoding
        text = yaml.safe_dump(
            {"settings": block, "messages": []}, sort_keys=False, width=10**6, allow_unicode=True
        )
        loaded = yaml.safe_load(text)["settings"]
        got = precount._peek_settings(text, "yaml").get("settings", {})
        for key in ("model", "encoding"):
            if key in got:  # never another value than PyYAML's
                assert got[key] == loaded.get(key)
            elif key in loaded:  # and every value written plain or single-quoted
                line = next(x for x in text.splitlines() if x.startswith(f"  {key}:"))
                assert '"' in line.split(":", 1)[1][:2], line

    check()


def test_a_forked_process_never_counts_through_the_parents_child(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # ``lint``'s early child counts for the process that forked it, over pipes: a process
    # forked from that one (a lint worker, a document's own counting child) must not write
    # to them. Here the "child" answers 999 for every text, so whose counts are used shows.
    from server import tokenizers

    monkeypatch.setattr(tokenizers, "_LOADED", {})
    asked: list[list[str]] = []

    def counts(texts: list[str]) -> list[int]:
        asked.append(texts)
        return [999] * len(texts)

    assert tokenizers.count_elsewhere("o200k_base", counts)
    tokenizer = load_tokenizer("o200k_base").tokenizer
    assert tokenizers.counts_elsewhere(tokenizer)
    assert tokenizer.count("hello there") == 999 and asked == [["hello there"]]
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the forked process: counts with the encoding itself
        try:
            os.write(write_fd, str(tokenizer.count("general kenobi")).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    os.waitpid(pid, 0)
    forked = int(os.read(read_fd, 64))
    os.close(read_fd)
    reference = tokenizers.reference_encoding("o200k_base")[0]
    assert forked == len(reference.encode_ordinary("general kenobi"))
    assert asked == [["hello there"]]  # nothing more was asked of the child
    # Nor does a large document's analysis fork a counting child of its own with it.
    monkeypatch.setattr(precount, "MIN_DOCUMENT_CHARS", 0)
    text = json.dumps({"messages": [{"role": "user", "content": "lorem ipsum " * 400}]})
    assert precount.start(text, DocFormat.JSON, tokenizer) is None
    other = precount.start(text, DocFormat.JSON, load_tokenizer("cl100k_base").tokenizer)
    assert other is not None  # (a tokenizer counting here: as before)
    other.close()
