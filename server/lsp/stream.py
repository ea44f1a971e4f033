"""Reading the client's messages from a byte stream (stdio or TCP) and handing them over.

The same framing and dispatch as pygls' own loop (``pygls.io_.run_async``): headers up to
an empty line, a body of ``Content-Length`` bytes, ``json.loads`` with the protocol's
``structure_message`` hook, then ``protocol.handle_message``. What differs is memory: pygls'
loop keeps the last body and message in its locals until the next message arrives, so the
``didOpen`` of a 10 MB conversation (10 MB of JSON bytes, and the text: 40 MB as a ``str``
with a few emoji) stays alive for the whole first analysis and after it, beside the rope
the session built from it. Here the body is let go once decoded and the message once
handled: the text then lives only as long as the rope hands it to the first parse
(``assembly.rope.Rope.__str__``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any, BinaryIO, Protocol

from pygls.exceptions import JsonRpcException

_CONTENT_LENGTH = re.compile(rb"^Content-Length: (\d+)\r\n$")


class AsyncReader(Protocol):
    def readline(self) -> Awaitable[bytes]: ...

    def readexactly(self, n: int) -> Awaitable[bytes]: ...


class StdinReader:
    """Reading stdin on a worker thread, as pygls' ``StdinAsyncReader`` does, except that a
    body is not the result of the future that carried it: an ``asyncio`` future read
    through ``run_in_executor`` stays alive after it is awaited (held by the callbacks
    that chain it to the executor's future) until the cyclic collector runs, which the
    analysis pauses and then freezes what is alive: the bytes of a 10 MB ``didOpen`` stayed
    for the whole first analysis and after it."""

    def __init__(self, stdin: BinaryIO, executor: Executor | None = None) -> None:
        self.stdin = stdin
        self.executor = executor

    async def readline(self) -> bytes:
        return await self._read(self.stdin.readline)

    async def readexactly(self, n: int) -> bytes:
        return await self._read(lambda: self.stdin.read(n))

    async def _read(self, read: Callable[[], bytes]) -> bytes:
        box: list[bytes] = []
        await asyncio.get_running_loop().run_in_executor(self.executor, lambda: box.append(read()))
        return box.pop()


async def serve_messages(
    stop_event: threading.Event,
    reader: AsyncReader,
    protocol: Any,
    logger: logging.Logger,
    error_handler: Callable[[Exception, type[JsonRpcException]], Any] | None = None,
) -> None:
    """Read and handle messages until the stream ends or ``stop_event`` is set."""
    content_length = 0
    while not stop_event.is_set():
        header = await reader.readline()
        if not header:
            break
        if not content_length:
            match = _CONTENT_LENGTH.fullmatch(header)
            if match:
                content_length = int(match.group(1))
        if content_length and not header.strip():
            body = await reader.readexactly(content_length)
            content_length = 0
            if not body:
                break
            try:
                # ``json.loads`` of bytes decodes them so, then reads the ``str``; decoded
                # here, the bytes go before the ``str`` is read (10 MB less at the peak of
                # a 10 MB ``didOpen``, whose text is then alive twice: the body and itself).
                data = body.decode(json.detect_encoding(body), "surrogatepass")
                del body
                message = json.loads(data, object_hook=protocol.structure_message)
                del data
                protocol.handle_message(message)
            except Exception as exc:
                logger.exception("Unable to handle message")
                if error_handler:
                    error_handler(exc, JsonRpcException)
            message = body = data = None  # nothing of this message waits for the next one
