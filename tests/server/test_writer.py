"""Writing to stdout off the message loop (``server.lsp.writer``): a write returns before a
client that reads slowly has read it, the bytes arrive whole and in order, ``close`` writes
what is queued, and a client that is gone stops the server once, without an exception."""

from __future__ import annotations

import os
import threading

from server.lsp.writer import ThreadedWriter

BIG = 3_200_000  # an outline of a 10 MB conversation


def _messages() -> list[bytes]:
    big = b"[" + b"x" * (BIG - 2) + b"]"
    return [b"first", big, *(f"message {k}".encode() for k in range(200)), b"last"]


def _read_all(fd: int, into: bytearray) -> None:
    while chunk := os.read(fd, 1 << 16):
        into += chunk


def test_a_write_does_not_wait_for_the_client_to_read() -> None:
    r, w = os.pipe()
    writer = ThreadedWriter(os.fdopen(w, "wb"))
    sent = _messages()
    done = threading.Event()

    def write_all() -> None:
        for data in sent:
            writer.write(data)
        done.set()

    t = threading.Thread(target=write_all, daemon=True)
    t.start()
    # Nothing has read the pipe (64 KB) yet: the 3.2 MB are queued, not written.
    assert done.wait(30), "write blocked until the client read"
    got = bytearray()
    reader = threading.Thread(target=_read_all, args=(r, got), daemon=True)
    reader.start()
    writer.close()  # writes the rest, then closes: the reader sees the end
    reader.join(30)
    assert not reader.is_alive()
    assert bytes(got) == b"".join(sent)
    assert writer.lost is None
    os.close(r)


def test_close_writes_what_is_queued_and_later_writes_are_dropped() -> None:
    r, w = os.pipe()
    writer = ThreadedWriter(os.fdopen(w, "wb"))
    got = bytearray()
    reader = threading.Thread(target=_read_all, args=(r, got), daemon=True)
    for k in range(1000):
        writer.write(b"%d," % k)
    reader.start()
    writer.close()
    writer.write(b"after close")
    writer.close()  # twice: nothing more
    reader.join(30)
    assert bytes(got) == b"".join(b"%d," % k for k in range(1000))
    os.close(r)


def test_a_client_that_is_gone_is_reported_once() -> None:
    r, w = os.pipe()
    os.close(r)
    lost: list[BaseException] = []
    called = threading.Event()

    def on_lost(exc: BaseException) -> None:
        lost.append(exc)
        called.set()

    writer = ThreadedWriter(os.fdopen(w, "wb"), on_lost=on_lost)
    writer.write(b"x" * 100_000)  # more than the stream's buffer: written through, and fails
    assert called.wait(30)
    writer.write(b"dropped")
    writer.close()
    assert len(lost) == 1 and isinstance(lost[0], BrokenPipeError)
    assert writer.lost is lost[0]
