"""What the server holds while it reads and answers: the message loop
(``server.lsp.stream``: pygls' framing and dispatch, and no message kept alive while it
waits for the next one, such as the text of a large ``didOpen``), and results serialized
item by item (``server.lsp.app.prepare``)."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import threading
import weakref
from typing import Any

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


def test_prepared_results_are_pygls_json_made_item_by_item() -> None:
    # ``prepare`` serializes an outline item by item, from an iterator made one at a time
    # (as ``handlers.symbols`` hands it), into the bytes pygls' own serialization gives.
    from lsprotocol import types as lsp

    from server.lsp.app import PromptServer, prepare

    ls = PromptServer()
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
    expected = json.dumps(ls.protocol._converter.unstructure(items))
    made.clear()
    lazy = symbols()
    result = prepare(ls, lazy)
    assert result is not None and result.json == expected.encode("ascii")
    assert json.loads(result.json)[2]["name"] == "m\u00e92 😀"
    assert made == [0, 1, 2]
    assert prepare(ls, iter(())) is None and prepare(ls, []) is None


def test_stdin_bodies_are_held_by_the_loop_only() -> None:
    """Read from a pipe as stdin is: each body is handled as pygls reads it (a UTF-8 BOM
    skipped, invalid UTF-8 reported to the error handler) and the bytes are referenced by
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
    assert len(errors) == 1 and isinstance(errors[0], UnicodeDecodeError)
