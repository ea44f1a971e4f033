"""What the server holds while it reads and answers: the message loop
(``server.lsp.stream``: pygls' framing and dispatch, and no message kept alive while it
waits for the next one, such as the text of a large ``didOpen``), and results serialized
item by item (``server.lsp.app.prepare_json``)."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import sys
import threading
import weakref
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.lsp.stream import serve_messages


class _Message:
    """A structured message a test can hold a weak reference to."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data


class _Protocol:
    def __init__(self) -> None:
        self.handled: list[weakref.ref[_Message]] = []
        self.methods: list[str] = []
        self.alive_after: list[bool] = []  # at each message: was the previous one still alive?

    def structure_message(self, data: dict[str, Any]) -> Any:
        return _Message(data) if "method" in data else data

    def handle_message(self, message: _Message) -> None:
        if message.data["method"] == "boom":
            raise ValueError("a handler that fails")
        gc.collect()
        self.alive_after.append(bool(self.handled) and self.handled[-1]() is not None)
        self.handled.append(weakref.ref(message))
        self.methods.append(message.data["method"])


def _frame(payload: dict[str, Any]) -> bytes:
    body = json.dumps(payload).encode()
    return (
        b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc\r\n\r\n" % len(body) + body
    )


def test_messages_are_handled_in_order_and_not_kept_while_waiting() -> None:
    protocol = _Protocol()
    errors: list[Exception] = []

    async def main() -> None:
        reader = asyncio.StreamReader()
        stop = threading.Event()
        task = asyncio.ensure_future(
            serve_messages(
                stop, reader, protocol, logging.getLogger("t"), lambda e, _: errors.append(e)
            )
        )
        big = "😀" * 100_000  # a didOpen text
        reader.feed_data(_frame({"jsonrpc": "2.0", "method": "open", "params": {"text": big}}))
        del big
        for _ in range(20):  # let the loop read and handle it, then wait for more
            await asyncio.sleep(0)
        gc.collect()
        assert protocol.methods == ["open"]
        # The loop now waits for the next header: the message it handled is gone.
        assert protocol.handled[0]() is None
        reader.feed_data(_frame({"jsonrpc": "2.0", "method": "boom"}))
        reader.feed_data(_frame({"jsonrpc": "2.0", "method": "change", "params": {}}))
        reader.feed_eof()
        await asyncio.wait_for(task, 5)

    asyncio.run(main())
    assert protocol.methods == ["open", "change"]
    assert protocol.alive_after == [False, False]
    assert [str(e) for e in errors] == ["a handler that fails"]  # logged, the loop goes on


def test_a_set_stop_event_ends_the_loop_before_reading() -> None:
    protocol = _Protocol()

    async def main() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data(_frame({"jsonrpc": "2.0", "method": "open"}))
        stop = threading.Event()
        stop.set()
        await asyncio.wait_for(serve_messages(stop, reader, protocol, logging.getLogger("t")), 5)

    asyncio.run(main())
    assert protocol.methods == []


def test_an_oversized_message_is_skipped_and_a_cut_one_ends_the_stream(
    monkeypatch: Any, caplog: Any
) -> None:
    """A ``Content-Length`` is the client's word: 10^14 was read as it said (a MemoryError
    that stopped the server); a socket closed inside a message raised
    ``IncompleteReadError`` (a traceback), and stdin's short read at its end was handled
    as a whole message. A message over the limit is skipped, byte by byte of it, and
    answered; a cut one is not a message and ends the stream."""
    from server.lsp import stream

    monkeypatch.setattr(stream, "MAX_MESSAGE_BYTES", 100)
    monkeypatch.setattr(stream, "_SKIP_BYTES", 7)

    class Answering(_Protocol):
        def __init__(self) -> None:
            super().__init__()
            self.answers: list[tuple[int, str]] = []

        def answer_malformed(self, code: int, message: str) -> None:
            self.answers.append((code, message))

    async def run(*chunks: bytes) -> Answering:
        protocol = Answering()
        reader = asyncio.StreamReader()
        for chunk in chunks:
            reader.feed_data(chunk)
        reader.feed_eof()
        await asyncio.wait_for(
            serve_messages(threading.Event(), reader, protocol, logging.getLogger("t")), 5
        )
        return protocol

    big = _frame({"jsonrpc": "2.0", "method": "big", "params": {"x": "y" * 200}})
    after = _frame({"jsonrpc": "2.0", "method": "after"})
    protocol = asyncio.run(run(big, after))
    assert protocol.methods == ["after"]  # the big one skipped whole: the stream stays framed
    assert protocol.answers == [
        (-32600, f"a message of {len(big) - big.index(b'{'):,} bytes is over the limit")
    ]
    assert asyncio.run(run(b"Content-Length: 99999999999999\r\n\r\n" + after)).methods == []
    cut = _frame({"jsonrpc": "2.0", "method": "cut"})
    protocol = asyncio.run(run(after, cut[:-5]))
    assert protocol.methods == ["after"] and protocol.answers == []
    n = len(cut) - cut.index(b"{")
    assert f"the stream ended {n - 5} bytes into a message of {n}" in caplog.text


def test_prepared_results_are_pygls_json_made_item_by_item() -> None:
    # ``prepare_json`` writes an outline item by item, from an iterator made one at a time
    # (as ``handlers.symbols`` hands it), into the bytes pygls' own serialization gives.
    from lsprotocol import types as lsp

    from server.lsp.app import PromptServer, prepare_json

    ls = PromptServer()
    unstructure = ls.protocol._converter.unstructure
    made: list[int] = []

    def symbols() -> Any:
        for i in range(3):
            made.append(i)
            span = lsp.Range(lsp.Position(i, 0), lsp.Position(i, 5))
            child = lsp.DocumentSymbol(f"c{i}", lsp.SymbolKind.Field, span, span)
            yield lsp.DocumentSymbol(
                f"m\u00e9{i} 😀", lsp.SymbolKind.Object, span, span, children=[child]
            )

    items = list(symbols())
    expected = json.dumps(unstructure(items))
    made.clear()
    lazy = (json.dumps(unstructure(s)).encode("ascii") for s in symbols())
    result = prepare_json(lazy)
    assert result is not None and result.json == expected.encode("ascii")
    assert json.loads(result.json)[2]["name"] == "m\u00e92 😀"
    assert made == [0, 1, 2]
    assert prepare_json(iter(())) is None and prepare_json([]) is None


def test_stdin_bodies_are_held_by_the_loop_only() -> None:
    """Read from a pipe as stdin is: each body is handled as pygls reads it (a UTF-8 BOM
    skipped, invalid UTF-8 answered as not JSON) and the bytes are referenced by
    no future once read (the cyclic collector is paused during an analysis)."""
    import os
    import sys
    from concurrent.futures import ThreadPoolExecutor

    from server.lsp.stream import StdinReader

    protocol = _Protocol()
    errors: list[Exception] = []
    refs: list[int] = []
    r, w = os.pipe()
    big = _frame({"jsonrpc": "2.0", "method": "open", "params": {"text": "é😀" * 50_000}})
    bom = json.dumps({"jsonrpc": "2.0", "method": "saved"}).encode("utf-8-sig")
    frames = [
        big,
        b"Content-Length: 3\r\n\r\n\xff\xfe\x00",  # not UTF-8: reported, the loop goes on
        _frame({"jsonrpc": "2.0", "method": "change"}),
        b"Content-Length: %d\r\n\r\n" % len(bom) + bom,
    ]

    def client() -> None:  # writes while the server reads (a pipe holds 64 KB)
        with os.fdopen(w, "wb") as out:
            out.write(big)
            out.write(b"".join(frames))

    async def main() -> None:
        with ThreadPoolExecutor(1) as pool, os.fdopen(r, "rb") as stdin:
            writer = threading.Thread(target=client)
            writer.start()
            reader = StdinReader(stdin, pool)
            while (await reader.readline()).strip():  # the headers of the first frame
                pass
            body = await reader.readexactly(len(big) - big.index(b"\r\n\r\n") - 4)
            gc.disable()  # as during an analysis: only references count
            try:
                refs.append(sys.getrefcount(body) - 1)  # (less the argument's own)
            finally:
                gc.enable()
            del body
            stop = threading.Event()
            handler = lambda e, _: errors.append(e)  # noqa: E731
            await asyncio.wait_for(
                serve_messages(stop, reader, protocol, logging.getLogger("t"), handler), 10
            )
            writer.join()

    asyncio.run(main())
    assert refs == [1]
    assert protocol.methods == ["open", "change", "saved"]
    assert errors == []  # not UTF-8: a warning and a parse error (test_lsp_malformed.py)


@pytest.mark.skipif(sys.platform != "linux", reason="pipe sizes are Linux's (fcntl)")
def test_the_stdio_server_reads_and_writes_through_pipes_of_a_megabyte() -> None:
    """``promptls serve`` on stdio grows both pipes to ``PIPE_BYTES``: a 10 MB ``didOpen``
    came through the default 64 KB in 160 turns of client and server (30-100 ms)."""
    import fcntl
    import subprocess

    from server.precount import PIPE_BYTES

    get_size = 1032  # F_GETPIPE_SZ
    proc = subprocess.Popen(
        [sys.executable, "-m", "server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        before = fcntl.fcntl(proc.stdin.fileno(), get_size)
        proc.stdin.write(
            _frame(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"processId": None, "rootUri": None, "capabilities": {}},
                }
            )
        )
        proc.stdin.flush()
        while proc.stdout.readline().strip():  # the answer's headers: the server is up
            pass
        assert before < PIPE_BYTES
        assert fcntl.fcntl(proc.stdin.fileno(), get_size) == PIPE_BYTES
        assert fcntl.fcntl(proc.stdout.fileno(), get_size) == PIPE_BYTES
    finally:
        proc.kill()
        proc.wait()


def test_a_pipe_is_widened_and_anything_else_is_left_alone(tmp_path: Any) -> None:
    from server.precount import widen_pipe

    r, w = os.pipe()
    try:
        assert widen_pipe(w) is (sys.platform == "linux")
    finally:
        os.close(r)
        os.close(w)
    with open(tmp_path / "f", "wb") as f:
        assert widen_pipe(f.fileno()) is False


# ------------------------------------------------------------- a didOpen read into a rope


def _did_open(text: str, *, uri: str = "file:///w/c.json", **extra: Any) -> dict[str, Any]:
    doc = {"uri": uri, "languageId": "json", "version": 1, "text": text, **extra}
    return {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": doc}}


def _read(body: bytes, monkeypatch: Any, window: int) -> tuple[Any, Any]:
    from server.lsp import stream

    monkeypatch.setattr(stream, "WINDOW_BYTES", window)
    return stream.read_open(body, lambda d: d) or (None, None)


def _expect_read(body: bytes, text: str, monkeypatch: Any, window: int) -> None:
    """``read_open`` gives ``json.loads``'s message, the text as the placeholder, and the
    text's rope."""
    from server.lsp.stream import PLACEHOLDER

    message, rope = _read(body, monkeypatch, window)
    assert rope is not None, "read as a whole message"
    assert str(rope) == text and len(rope) == len(text)
    expected = json.loads(body)
    expected["params"]["textDocument"]["text"] = PLACEHOLDER
    assert message == expected


# Characters that a JSON string escapes, escapes in parts (``\\u`` and hex digits), a pair
# of surrogates, a lone one, multi-byte UTF-8 and line ends: each at every window boundary.
_PIECES = ("a", " ", "u", "0", "f", "\\", '"', "/", "\n", "\r\n", "\t", "é", "中", "😀")
_PIECES += ("\ud800", "\\u", "x0", "text", '"text": "')


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_PIECES), max_size=60).map("".join),
    st.booleans(),
    st.sampled_from([1, 2, 3, 5, 8, 13, 64, 1 << 18]),
)
def test_a_did_open_is_read_as_json_reads_it(text: str, ascii: bool, window: int) -> None:
    with pytest.MonkeyPatch.context() as mp:
        body = json.dumps(_did_open(text), ensure_ascii=ascii).encode("utf-8", "surrogatepass")
        from server.lsp import stream

        mp.setattr(stream, "_SEARCH_BACK", 4)
        _expect_read(body, text, mp, window)


def test_did_open_members_in_any_order_and_text_keys_elsewhere(monkeypatch: Any) -> None:
    text = 'a "text": "b" \\"text\\": 😀\n' * 50
    for body in (
        json.dumps(_did_open(text)).encode(),
        # The text before the uri, on lines of its own, as some clients write it.
        json.dumps(_did_open(text), indent=2, sort_keys=True).encode(),
        # A "text" member elsewhere first: its string is not the text (read whole).
        json.dumps({**_did_open(text), "extra": {"text": "other"}}).encode(),
        # A key ending in an escaped quote and "text" before the text's member.
        b'{"jsonrpc": "2.0", "a\\"text": "x", ' + json.dumps(_did_open(text))[1:].encode(),
    ):
        _, rope = _read(body, monkeypatch, 16)
        if rope is None:  # read as a whole: the caller's json.loads says what it is
            assert b'"extra"' in body or b'a\\"text' in body
            continue
        _expect_read(body, text, monkeypatch, 16)


def test_what_is_not_read_into_a_rope(monkeypatch: Any) -> None:
    from server.lsp import stream

    text = "x" * 100
    cases = [
        json.dumps({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {}}),
        # A request named didOpen (it has an id): answered as any request.
        json.dumps({**_did_open(text), "id": 1}),
        json.dumps(_did_open(text)).replace('"text": "', '"text": 5, "x": "'),  # no string
        json.dumps(_did_open(text)).replace("xxx", "x\x01x", 1),  # a control character
        json.dumps(_did_open(text)).replace("xxx", "x\\qx", 1),  # a bad escape
        json.dumps(_did_open(text))[:-3],  # cut short
        json.dumps(_did_open(text)).replace('"text"', '"text2"'),  # no text member
        # The text twice: json keeps the last one, so the first is not the text.
        json.dumps(_did_open(text))[:-3] + ', "text": "y"}}}',
    ]
    for body in cases:
        assert _read(body.encode(), monkeypatch, 8) == (None, None), body[-60:]
    # A BOM or another encoding than UTF-8: read whole, as pygls reads it.
    assert _read(json.dumps(_did_open(text)).encode("utf-8-sig"), monkeypatch, 8)[1] is None
    assert _read(json.dumps(_did_open(text)).encode("utf-16"), monkeypatch, 8)[1] is None
    # A string with no place to cut a window for a while (hex digits): a longer window.
    monkeypatch.setattr(stream, "_SEARCH_BACK", 16)
    hexes = "0123456789abcdef" * 20 + " end"
    _expect_read(json.dumps(_did_open(hexes)).encode(), hexes, monkeypatch, 32)


def test_a_large_did_open_reaches_the_session_as_a_rope_and_pygls_as_a_str(
    tmp_path: Any,
) -> None:
    """Over the message loop of a real server: the conversation's text is the rope its
    message was read into (never a ``str`` of the whole), and it is analysed; a document
    the session does not analyse reaches pygls' workspace with its text."""

    from assembly.rope import Rope
    from server.lsp import stream
    from tests.support.inprocess import InProcessClient

    client = InProcessClient()
    ls = client.server
    lines = "".join(
        f'    {{"role": "user", "content": "hi 😀 {i}: a few words\\n"}},\n' for i in range(19_999)
    )
    text = '{"messages": [\n' + lines + '    {"role": "user", "content": "last"}\n]}\n'
    conv, notes = (tmp_path / "c.conv.json").as_uri(), (tmp_path / "notes.json").as_uri()
    assert len(json.dumps(_did_open(text)).encode()) >= stream.OPEN_MIN_BYTES
    seen: list[Any] = []
    handle = ls.protocol.handle_message

    def spy(message: Any) -> None:
        seen.append(getattr(getattr(message.params, "text_document", None), "text", None))
        handle(message)

    try:
        asyncio.run(_open_both(client, tmp_path, text, conv, notes, spy))
        assert seen == [stream.PLACEHOLDER, stream.PLACEHOLDER]
        rope = ls.session.documents[conv].text
        assert isinstance(rope, Rope) and rope == text
        snap = ls.session.snapshot(conv)
        assert snap is not None and snap.analysis is not None
        assert len(snap.analysis.conversation.messages) == 20_000
        assert ls.workspace.get_text_document(notes).source == text
        assert ls.protocol._held is None  # nothing held after the message
    finally:
        client.shutdown()


def test_a_placeholder_without_its_rope_is_an_error_not_a_text() -> None:
    from server.lsp.app import PromptServer
    from server.lsp.stream import PLACEHOLDER

    ls = PromptServer()
    ls.protocol.hold_text(PLACEHOLDER, None)
    with pytest.raises(RuntimeError, match="let go"):
        ls.protocol.document_text(PLACEHOLDER)
    assert ls.protocol.document_text("plain") == "plain"  # any other text: its rope


def test_a_large_did_opens_counting_child_starts_before_its_message_is_decoded(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """Over the message loop of a real server: the child counting a large conversation is
    forked from the ``didOpen``'s bytes before they are decoded here, its first analysis
    tells it how to count and seeds every long text from it; the child of a document the
    session does not analyse (if one is forked) is stopped without being told anything."""

    from server import precount
    from server.lsp import stream
    from tests.support.inprocess import InProcessClient

    monkeypatch.setattr(stream, "OPEN_MIN_BYTES", 1 << 14)
    monkeypatch.setattr(precount, "MIN_DOCUMENT_CHARS", 1 << 14)
    events: list[str] = []
    children: list[precount.PendingCounts] = []
    told: list[precount.PendingCounts] = []
    seeded: list[int] = []
    start_open, read_open = precount.start_open, stream.read_open
    count_with, seed = precount.PendingCounts.count_with, precount.PendingCounts.seed

    def forking(body: bytes) -> precount.PendingCounts | None:
        events.append("fork")
        pending = start_open(body)
        assert pending is not None
        children.append(pending)
        return pending

    def decoding(*args: Any) -> Any:
        events.append("decode")
        return read_open(*args)

    def telling(self: precount.PendingCounts, *args: Any) -> None:
        told.append(self)
        count_with(self, *args)

    def seeding(self: precount.PendingCounts, *args: Any) -> int:
        os.waitpid(self.pid, 0)  # (here: every count is sent before it is taken)
        seeded.append(seed(self, *args))
        return seeded[-1]

    monkeypatch.setattr(precount, "start_open", forking)
    monkeypatch.setattr(stream, "read_open", decoding)
    monkeypatch.setattr(precount.PendingCounts, "count_with", telling)
    monkeypatch.setattr(precount.PendingCounts, "seed", seeding)
    client = InProcessClient()
    ls = client.server
    contents = [f"message {i}: " + "words that count 🦊 " * (3 + i % 5) for i in range(400)]
    text = json.dumps({"messages": [{"role": "user", "content": c} for c in contents]})
    conv, notes = (tmp_path / "c.conv.json").as_uri(), (tmp_path / "notes.json").as_uri()

    try:
        asyncio.run(_open_both(client, tmp_path, text, conv, notes))
        # (The second one forks a child unless the first one still waits for its analysis.)
        assert events in (["fork", "decode", "fork", "decode"], ["fork", "decode", "decode"])
        assert len(children) == events.count("fork") and told == children[:1]
        assert seeded == [len(set(contents))]  # every message's text, counted by the child
        assert all(c.closed and not c.awaiting for c in children)
        assert ls.protocol.take_counting() is None  # nothing held after the messages
    finally:
        client.shutdown()


def test_one_did_open_counting_child_waits_for_its_analysis_at_a_time(monkeypatch: Any) -> None:
    # Each waiting child holds the document it decoded: documents opened together fork
    # one, and the others' analyses fork theirs when they start.
    from assembly.rope import Rope
    from server import precount
    from server.lsp.app import PromptServer

    monkeypatch.setattr(precount, "MIN_DOCUMENT_CHARS", 0)
    ls = PromptServer()
    text = json.dumps({"messages": [{"role": "user", "content": "x" * 100}]})
    body = json.dumps(_did_open(text)).encode()
    ls.protocol.count_open(body)
    first = ls.protocol.take_counting()
    assert first is not None and first.awaiting
    uri = "file:///w/c.conv.json"
    assert ls.session.open(uri, 1, Rope.from_str(text), first) is not None
    ls.protocol.count_open(body)
    assert ls.protocol.take_counting() is None  # the first one still waits
    ls.session.close(uri)
    assert first.closed
    third = precount.start_open(body)
    assert ls.session.open(uri, 1, Rope.from_str(text), third) is not None and third
    ls.session.shutdown()  # stops a child still waiting, too
    assert third.closed
    ls.session.open(uri, 1, Rope.from_str(text))  # (reopened: nothing waits)
    assert not ls.session.counting_waits()
    ls.protocol.count_open(body)
    second = ls.protocol._counting
    assert second is not None and second.awaiting
    ls.protocol.hold_text("", None)  # the message is handled: no handler took it
    assert second.closed and ls.protocol.take_counting() is None


async def _open_both(
    client: Any, tmp_path: Any, text: str, conv: str, notes: str, handle: Any = None
) -> None:
    """Initialize ``client``'s server, then feed its message loop a ``didOpen`` of ``text``
    as ``conv`` and as ``notes`` (optionally through ``handle``) and wait for the first
    analysis of ``conv``."""
    from lsprotocol import types as lsp

    ls = client.server
    await client.initialize(lsp.ClientCapabilities(), root_uri=tmp_path.as_uri())
    if handle is not None:
        ls.protocol.handle_message = handle
    reader = asyncio.StreamReader()
    reader.feed_data(_frame(_did_open(text, uri=conv)))
    reader.feed_data(_frame(_did_open(text, uri=notes)))
    reader.feed_eof()
    await asyncio.wait_for(
        serve_messages(threading.Event(), reader, ls.protocol, logging.getLogger("t")), 30
    )
    await client.analysed(conv, 1)
