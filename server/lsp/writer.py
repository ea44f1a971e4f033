"""Writing the server's messages to stdout on a thread of their own.

pygls' ``StdoutWriter`` writes and flushes on the message loop: a pipe holds 64 KB, so an
answer larger than that (the outline of a 10 MB conversation is 3.2 MB) blocks the loop
until the client has read all of it, 0.3–0.6 s for a client that reads slowly, during
which no hover, change or cancel is handled. ``ThreadedWriter`` hands each message's bytes
to a writer thread instead, in order, and returns at once; the thread flushes when it has
nothing more to write (the three writes of one framed answer go out in one flush).

``close`` (the ``exit`` notification, the end of the server) writes what is queued before
it closes the stream, so the answer to ``shutdown`` is never lost. When the client is gone
(a broken pipe), what is queued and what comes later is dropped and ``on_lost`` is told
once (the server then stops, as it did when the loop's own write failed).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from typing import BinaryIO

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 10.0  # how long ``close`` waits for the queued messages to be written


class ThreadedWriter:
    """pygls' writer interface (``write``, ``close``) over a binary stream, written on a
    thread of its own."""

    def __init__(
        self, stream: BinaryIO, on_lost: Callable[[BaseException], None] | None = None
    ) -> None:
        self._stream = stream
        self._on_lost = on_lost
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._lost: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="promptls-writer", daemon=True)
        self._thread.start()

    @property
    def lost(self) -> BaseException | None:
        """Why the client could not be written to (None: it could so far)."""
        return self._lost

    def write(self, data: bytes) -> None:
        """Queue ``data``; it is written after everything queued before it."""
        if self._lost is None and not self._closed:
            self._queue.put(data)

    def close(self) -> None:
        """Write what is queued (waiting at most ``CLOSE_TIMEOUT_S``), then close."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join(CLOSE_TIMEOUT_S)
        with contextlib.suppress(OSError, ValueError):  # already gone
            self._stream.close()

    def _run(self) -> None:
        stream, pending = self._stream, self._queue
        while True:
            data = pending.get()
            try:
                if data is None:
                    stream.flush()
                    return
                stream.write(data)
                if pending.empty():
                    stream.flush()
            except (OSError, ValueError) as exc:  # the client closed its end
                self._lost = exc
                log.error("Connection to the client is lost! Shutting down the server.")
                if self._on_lost is not None:
                    self._on_lost(exc)
                return
