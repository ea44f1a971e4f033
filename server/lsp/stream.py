"""Reading the client's messages from a byte stream (stdio or TCP) and handing them over.

The same framing and dispatch as pygls' own loop (``pygls.io_.run_async``): headers up to
an empty line, a body of ``Content-Length`` bytes, ``json.loads`` with the protocol's
``structure_message`` hook, then ``protocol.handle_message``. What differs is memory: pygls'
loop keeps the last body and message in its locals until the next message arrives, so the
``didOpen`` of a 10 MB conversation (10 MB of JSON bytes, and the text: 40 MB as a ``str``
with a few emoji) stays alive for the whole first analysis and after it, beside the rope
the session built from it. Here the body is let go once decoded and the message once
handled.

A large ``didOpen``'s bytes first start the child that counts its document's tokens
(``PromptProtocol.count_open``, ``server.precount.start_open``): it reads them on the other
core while this process decodes them. A large ``didOpen`` (``read_message``) is not decoded
whole at all: its text's JSON string is
decoded window by window straight into a ``Rope`` (``read_open``), and the rest of the
message, with a placeholder for the text, is read as any message is; the handler takes
the rope for the placeholder (``server.lsp.app.PromptProtocol.document_text``). The text
never exists as one ``str``: decoding the message as a whole made the body's ``str`` (10
MB for a 10 MB document), then ``json``'s growing copy of the text (40 MB with a few emoji,
briefly twice that), then the rope beside it: the largest peak of memory of the open, and
40-45 ms of CPU plus the rope's 14.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Executor
from json.decoder import scanstring
from typing import Any, BinaryIO, Protocol

from pygls.exceptions import JsonRpcException

from assembly.rope import Rope

_CONTENT_LENGTH = re.compile(rb"^Content-Length: (\d+)\r\n$")

DID_OPEN = "textDocument/didOpen"
OPEN_MIN_BYTES = 1 << 20  # a didOpen body this large has its text read into a rope (``read_open``)
# Bytes of the text's JSON string decoded at once (at 10 MB, 64 KB: 32 ms; 256 KB: 35; 1 MB: 46).
WINDOW_BYTES = 1 << 16
# Where a window of a JSON string may end: after a byte that is a whole character and
# ends no escape half-way (not ``\``, ``u`` or a hex digit, which ``\uXXXX`` and a
# surrogate pair ``\uD83D\uDE00`` are made of; not a byte of a multi-byte UTF-8 sequence).
_WINDOW_ENDS = frozenset(b"ghijklmnopqrstvwxyzGHIJKLMNOPQRSTUVWXYZ !#$%&'()*+,-./:;<=>?@[]^_`{|}~")
_WINDOW_END = re.compile(b"[" + re.escape(bytes(sorted(_WINDOW_ENDS))) + b"]")
_SEARCH_BACK = 4096  # bytes looked back for a window end (then forward)
_TEXT_KEY = re.compile(rb'"text"\s*:\s*"')
PARSE_ERROR = -32700  # JSON-RPC's code for a message that is not JSON
INVALID_REQUEST = -32600
# The largest message read: a ``didOpen`` of the largest document read (64 MiB,
# ``assembly.documents.MAX_DOCUMENT_CHARS``) with room for JSON's escapes. A larger
# ``Content-Length`` was read as it said: 10^14 was a MemoryError that stopped the server.
MAX_MESSAGE_BYTES = 4 * 64 * 1024 * 1024
_SKIP_BYTES = 1 << 20  # bytes skipped at once from a message over the limit
# The placeholder of a text read into a rope: unknown to clients (a random part), so a
# message cannot hold it by chance or on purpose. (``os.urandom`` is what ``secrets`` reads;
# importing ``secrets`` loads OpenSSL's libcrypto through ``hmac``: 3 MB resident.)
PLACEHOLDER = f"\x00promptls-text-{os.urandom(8).hex()}"


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
            length, content_length = content_length, 0
            if length > MAX_MESSAGE_BYTES:
                # Not read (a stdin read of that many bytes allocates them at once): skipped,
                # so the stream stays framed, and answered.
                logger.warning(
                    "skipped a message of %d bytes (the limit is %d)", length, MAX_MESSAGE_BYTES
                )
                if not await _skip(reader, length):
                    break
                answer = getattr(protocol, "answer_malformed", None)
                if answer is not None:
                    answer(INVALID_REQUEST, f"a message of {length:,} bytes is over the limit")
                continue
            try:
                body = await reader.readexactly(length)
            except asyncio.IncompleteReadError as exc:  # (a socket closed inside a message)
                body = exc.partial
            if len(body) < length:  # the stream ended inside the message: it is not one
                if body:
                    logger.warning(
                        "the stream ended %d bytes into a message of %d", len(body), length
                    )
                break
            text: Rope | None = None
            large = len(body) >= OPEN_MIN_BYTES and hasattr(protocol, "hold_text")
            try:
                message, text = read_message(body, protocol)
                del body
                if text is not None:
                    protocol.hold_text(PLACEHOLDER, text)
                protocol.handle_message(message)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # the client's bug
                logger.warning("ignored a message that is not JSON: %s", exc)
                answer = getattr(protocol, "answer_malformed", None)
                if answer is not None:
                    answer(PARSE_ERROR, f"Parse error: {exc}")
            except Exception as exc:
                logger.exception("Unable to handle message")
                if error_handler:
                    error_handler(exc, JsonRpcException)
            finally:
                if large:  # the text and the counting child: taken by now, or never will be
                    protocol.hold_text(PLACEHOLDER, None)
            message = body = text = None  # nothing of this message waits for the next one


async def _skip(reader: AsyncReader, n: int) -> bool:
    """Read and drop ``n`` bytes; False when the stream ended first."""
    while n > 0:
        step = min(n, _SKIP_BYTES)
        try:
            got = await reader.readexactly(step)
        except asyncio.IncompleteReadError:
            return False
        if len(got) < step:
            return False
        n -= step
    return True


def read_message(body: bytes, protocol: Any) -> tuple[Any, Rope | None]:
    """A message's body as ``json.loads`` with the protocol's ``structure_message`` reads
    it; and for a large ``didOpen`` (when the protocol can hold texts: ``hold_text``), the
    rope of its text, which the message then carries as ``PLACEHOLDER`` (``read_open``)."""
    if len(body) >= OPEN_MIN_BYTES and hasattr(protocol, "hold_text"):
        count_open = getattr(protocol, "count_open", None)
        if count_open is not None and DID_OPEN.encode() in body:
            # The document's counting child starts from these bytes, before they are
            # decoded here (``PromptProtocol.count_open``).
            count_open(body)
        opened = read_open(body, protocol.structure_message)
        if opened is not None:
            return opened
    # ``json.loads`` of bytes decodes them so, then reads the ``str``.
    data = body.decode(json.detect_encoding(body), "surrogatepass")
    del body
    return json.loads(data, object_hook=protocol.structure_message), None


def read_open(
    body: bytes, structure_message: Callable[[dict[str, Any]], Any]
) -> tuple[Any, Rope] | None:
    """A ``didOpen`` notification's body read with its text as a rope: the message (its
    ``text`` is ``PLACEHOLDER``) and the rope; None when ``body`` is anything else, or
    anything this does not read exactly as ``json.loads`` would (the caller reads it so).

    The ``"text"`` member's string is decoded window by window (``WINDOW_BYTES``, each cut
    after a byte that ends no escape or character) by ``json``'s own string scanner, and
    the windows are cut into rope chunks as they come (``Rope.from_parts``). The rest of
    the body, with the placeholder's string in place of the text's, is then read by
    ``json.loads``; only a ``didOpen`` (no ``id``) whose ``params.textDocument.text`` is the
    placeholder is taken, so the string decoded was that member's value and no other.
    """
    if DID_OPEN.encode() not in body or json.detect_encoding(body) != "utf-8":
        return None
    key = _TEXT_KEY.search(body)
    if key is None:
        return None
    start = key.end()  # just after the string's opening quote
    end: list[int] = []  # where the string ends (after its closing quote), once known
    try:
        text = Rope.from_parts(_string_windows(body, start, end))
    except ValueError:  # not a string json reads (a control character, a bad escape)
        return None
    if not end:
        return None
    rest = body[: start - 1] + json.dumps(PLACEHOLDER).encode() + body[end[0] :]
    try:
        plain = json.loads(rest)
        params = plain.get("params") if isinstance(plain, dict) else None
        doc = params.get("textDocument") if isinstance(params, dict) else None
        if (
            plain.get("method") != DID_OPEN
            or "id" in plain
            or not isinstance(doc, dict)
            or doc.get("text") != PLACEHOLDER
        ):
            return None
    except ValueError:
        return None
    return json.loads(rest, object_hook=structure_message), text


def _string_windows(body: bytes, start: int, end: list[int]) -> Iterator[str]:
    """The decoded pieces of the JSON string starting at ``body[start]`` (after its opening
    quote), in order; appends to ``end`` where it ends (after its closing quote) when it
    does. Raises ``ValueError`` where ``json`` would."""
    n = len(body)
    pos = start
    while pos < n:
        cut = min(pos + WINDOW_BYTES, n)
        if cut < n:
            low = max(pos, cut - _SEARCH_BACK)
            back = cut
            while back > low and body[back - 1] not in _WINDOW_ENDS:
                back -= 1
            if back > pos and body[back - 1] in _WINDOW_ENDS:
                cut = back
            else:  # none just before: the first one after (or the end)
                found = _WINDOW_END.search(body, cut)
                cut = found.end() if found is not None else n
        window = body[pos:cut].decode("utf-8", "surrogatepass")
        # A closing quote of our own ends the window: the string goes on past it when it is
        # the one ``scanstring`` stops after.
        value, stop = scanstring(window + '"', 0, True)
        if stop <= len(window):  # the string ended inside this window
            ended = window[:stop]
            end.append(
                pos + (stop if ended.isascii() else len(ended.encode("utf-8", "surrogatepass")))
            )
            yield value
            return
        yield value
        pos = cut
