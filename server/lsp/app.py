"""Building the language server: the pygls server class that owns the ``Session``.

pygls keeps a copy of every open document and applies each ``didChange`` to it by
rebuilding a ``str``: time proportional to the document, on every keystroke. For the
documents the session analyses (``session.document_kind``), ``PromptProtocol`` skips that
copy and hands the notification straight to our handlers, which keep the text as a rope
(``handlers.documents``); pygls still keeps the documents we do not analyse.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import json
import logging
import sys
import threading
import weakref
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import (
    JsonRpcContentModified,
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
)
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from assembly.rope import Rope
from server import __version__, pages, precount
from server.lsp.session import Session, document_kind
from server.lsp.state import DocState
from server.lsp.stream import PLACEHOLDER
from server.precount import PendingCounts, widen_pipe

log = logging.getLogger(__name__)

VERSION = __version__  # the package's (no metadata lookup: see ``server/__init__.py``)


class PromptProtocol(LanguageServerProtocol):
    """pygls' protocol without its own copy of the documents the session keeps.

    Each override is pygls' built-in handler of the same name (a generator that yields
    the user's handler to run), minus the workspace bookkeeping for our documents.
    """

    _held: tuple[str, Rope] | None = None  # a didOpen's text read as a rope (``hold_text``)
    _counting: PendingCounts | None = None  # its counting child (``count_open``)
    # The document states requests arrived at, by their params (``arrival``).
    _arrivals: dict[int, tuple[weakref.ref[Any], DocState]]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._arrivals = {}
        self._initialize_seen = False  # an initialize was answered (``_handle_request``)

    def hold_text(self, placeholder: str, text: Rope | None) -> None:
        """Hold ``text``, the rope a ``didOpen`` was read into (``server.lsp.stream``),
        whose message carries ``placeholder`` as its text, while the message is handled;
        ``None``: let it go, and stop the counting child no handler took (``count_open``)."""
        self._held = None if text is None else (placeholder, text)
        if text is None:
            counting, self._counting = self._counting, None
            if counting is not None:
                counting.close()

    def count_open(self, body: bytes) -> None:
        """A large ``didOpen``'s bytes arrived (``server.lsp.stream``): fork the child that
        counts its document's texts now, before the message is decoded
        (``precount.start_open``); its handler takes it (``take_counting``). One such child
        at a time waits for its document's first analysis (each holds the text it decoded:
        documents opened together would add theirs up); the others' analyses fork theirs
        when they start, as before."""
        self.hold_text("", None)
        session = getattr(self._server, "session", None)
        if session is None or not session.counting_waits():
            self._counting = precount.start_open(body)

    def take_counting(self) -> PendingCounts | None:
        """The counting child of the ``didOpen`` being handled, if any (once)."""
        counting, self._counting = self._counting, None
        return counting

    def document_text(self, text: str) -> Rope:
        """The rope of an opened document's ``text``: the one its ``didOpen`` was read into
        when ``text`` is that message's placeholder, else made from ``text``."""
        held = self._held
        if held is not None and text == held[0]:
            self._held = None
            return held[1]
        if text == PLACEHOLDER:  # (never silently: the document would read as this)
            raise RuntimeError("a didOpen's text was let go before its handler ran")
        return Rope.from_str(text)

    @lsp_method(lsp.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: lsp.DidOpenTextDocumentParams) -> _Steps:
        if document_kind(params.text_document.uri) is None:
            # pygls keeps this one: its text as a ``str``.
            doc = params.text_document
            held = self._held
            if held is not None and doc.text == held[0]:
                self._held = None
                doc.text = str(held[1])
            return (yield from super().lsp_text_document__did_open(params))
        yield from self._user_handler(lsp.TEXT_DOCUMENT_DID_OPEN, params)
        return None

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: lsp.DidChangeTextDocumentParams) -> _Steps:
        if document_kind(params.text_document.uri) is None:
            return (yield from super().lsp_text_document__did_change(params))
        yield from self._user_handler(lsp.TEXT_DOCUMENT_DID_CHANGE, params)
        return None

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: lsp.DidCloseTextDocumentParams) -> _Steps:
        if document_kind(params.text_document.uri) is None:
            return (yield from super().lsp_text_document__did_close(params))
        yield from self._user_handler(lsp.TEXT_DOCUMENT_DID_CLOSE, params)
        return None

    def _execute_handler(
        self,
        msg_id: Any,
        handler: Any,
        callback: Any,
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        """pygls' execution of a handler, whose future is let go once it is done.

        pygls keeps the future of each handler it runs that does not return at once (its
        built-in ones, generators, and coroutines and threads) in ``_request_futures``, by
        message id, for ``$/cancelRequest``, and lets it go only when it answers a request.
        The future of a notification, and of each step of a built-in handler, it kept for
        the server's whole life under a fresh id: a future with its lock and callbacks,
        1.7 KB, for every ``didChange`` (30 MB in an hour of typing five keys a second;
        pygls 2.1.1, and its main branch as of 2026-12)."""
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        future = self._request_futures.get(msg_id)
        if future is not None:
            future.add_done_callback(functools.partial(_forget, self._request_futures, msg_id))

    def _handle_request(self, msg_id: Any, method_name: str, params: Any) -> None:
        """pygls' dispatch of a request, except that a second ``initialize`` is refused
        with an invalid-request error (LSP: it "may only be sent once"); pygls answered it
        again, rebuilding its workspace and the session's roots and settings under the
        open documents."""
        if method_name == lsp.INITIALIZE:
            if self._initialize_seen:
                log.warning("a second initialize refused (request %r)", msg_id)
                error = lsp.ResponseError(
                    code=lsp.ErrorCodes.InvalidRequest,
                    message="the server is already initialized: initialize may be sent once",
                )
                self._send_response(msg_id, error=error)
                return
            self._initialize_seen = True
        super()._handle_request(msg_id, method_name, params)

    def structure_message(self, data: dict[str, Any]) -> Any:
        """pygls' reading of a message, except that a request whose params do not fit its
        method (a negative or too large position, a missing or mistyped field) is answered
        with a JSON-RPC error instead of being dropped with only a log line, and such a
        notification is ignored with a one-line warning (not a traceback and an error
        shown to the user: the client's bug, not the server's). A file URI whose path holds
        a NUL character (``%00``) names no file (every system call refuses it): such a
        message is refused so too, before any handler turns the URI into a path."""
        if isinstance(data, dict) and "jsonrpc" in data and _nul_file_uri(data.get("params")):
            reason = "a file URI with a NUL character (%00) names no file"
            return self._refuse(data, JsonRpcInvalidParams(), reason)
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            cause = _first_line(exc.__cause__) if exc.__cause__ is not None else ""
            return self._refuse(data, exc, cause)

    def _refuse(self, data: Any, exc: JsonRpcException, cause: str) -> Any:
        """Answer a request whose params do not fit with ``exc``'s error, or ignore such a
        notification, with one warning line either way. A JSON-RPC object that is none of
        a request, a notification and a response (no ``method``, a ``method`` or ``id`` of
        the wrong type, a response with neither ``result`` nor ``error``) gets an
        invalid-request answer with a null id, as a message that is not JSON-RPC does."""
        msg_id = data.get("id") if isinstance(data, dict) else None
        method = data.get("method") if isinstance(data, dict) else None
        message = f"invalid params for {method}" + (f": {cause}" if cause else "")
        if isinstance(method, str) and "id" not in data:
            log.warning("%s (notification ignored)", message)
            return _ANSWERED
        if not isinstance(msg_id, int | str) or isinstance(msg_id, bool) or method is None:
            log.warning("ignored a JSON-RPC message of no known shape: %.80r", data)
            self.answer_malformed(
                lsp.ErrorCodes.InvalidRequest, "not a JSON-RPC request, notification or response"
            )
            return _ANSWERED
        log.warning("%s (request %r)", message, msg_id)
        self._send_response(msg_id, error=lsp.ResponseError(code=exc.code, message=message))
        return _ANSWERED

    def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        """A ``Prepared`` result is written as it is (serialized once for every request
        answered with it, off the message loop); anything else as pygls writes it."""
        if error is not None or not isinstance(result, Prepared):
            super()._send_response(msg_id, result, error)
            return
        self._result_types.pop(msg_id, None)
        if self.writer is None:
            log.error("no transport to answer request %r", msg_id)
            return
        head = f'{{"id": {json.dumps(msg_id)}, "jsonrpc": "2.0", "result": '.encode("ascii")
        self._write_prepared(head, result.json)

    def notify_prepared(self, method: str, params: bytes) -> None:
        """Send a notification whose params are already JSON (ASCII bytes), as they are."""
        if self.writer is None:
            log.error("no transport to send %s", method)
            return
        head = f'{{"method": {json.dumps(method)}, "jsonrpc": "2.0", "params": '.encode("ascii")
        self._write_prepared(head, params)

    def _write_prepared(self, head: bytes, body: bytes) -> None:
        """Write the message ``head + body + b"}"``. The body's bytes are written as they
        are, never copied into one message: an outline of 10,000 messages is 3 MB, and its
        str, the body, the framed body and their encoding were 13 MB at once, on every
        request it answers."""
        assert self.writer is not None
        if self._include_headers:  # a stream (stdio, TCP): the message in three writes
            n = len(head) + len(body) + 1
            header = (
                f"Content-Length: {n}\r\n"
                f"Content-Type: {self.CONTENT_TYPE}; charset={self.CHARSET}\r\n\r\n"
            )
            self.writer.write(header.encode("ascii") + head)
            self.writer.write(body)
            res = self.writer.write(b"}")
        else:  # a WebSocket: one message
            res = self.writer.write(b"".join((head, body, b"}")))
        if inspect.isawaitable(res):  # a WebSocket: keep the write alive until it is done
            task = asyncio.ensure_future(res)
            _WRITES.add(task)
            task.add_done_callback(_WRITES.discard)

    def handle_message(self, message: Any) -> None:
        if message is _ANSWERED:
            return
        if not hasattr(message, "jsonrpc"):  # JSON, but not a JSON-RPC message
            log.warning("ignored a message that is not a JSON-RPC object: %.80r", message)
            self.answer_malformed(lsp.ErrorCodes.InvalidRequest, "not a JSON-RPC message")
            return
        if getattr(message, "method", None) in _ASKED_AT_POSITIONS:
            self._note_arrival(getattr(message, "params", None))
        super().handle_message(message)

    def _note_arrival(self, params: Any) -> None:
        """Keep the state of the document a request is about as it is when the request
        arrives (``arrival``): its positions are in that text, and edits may arrive before
        its handler runs or while it waits for an analysis."""
        uri = getattr(getattr(params, "text_document", None), "uri", None)
        session = getattr(self._server, "session", None)
        state = session.documents.get(uri) if session is not None and isinstance(uri, str) else None
        if state is None:
            return
        if len(self._arrivals) >= _MAX_ARRIVALS:  # handlers that never asked: forget them
            self._arrivals = {k: v for k, v in self._arrivals.items() if v[0]() is not None}
        self._arrivals[id(params)] = (weakref.ref(params), state)

    def arrival(self, params: Any) -> DocState | None:
        """The document's state when the request with ``params`` arrived (once)."""
        entry = self._arrivals.pop(id(params), None)
        return entry[1] if entry is not None and entry[0]() is params else None

    def answer_malformed(self, code: int, message: str) -> None:
        """The JSON-RPC answer to a message that cannot be read (its id unknown: null)."""
        super()._send_response(None, error=lsp.ResponseError(code=code, message=message))

    def _user_handler(self, method: str, params: Any) -> _Steps:
        if (handler := self.fm.features.get(method)) is not None:
            yield handler, (params,), None


_Steps = Generator[Any, Any, None]  # what pygls' built-in handlers yield to its dispatcher


def _forget(futures: dict[Any, Any], msg_id: Any, future: Any) -> None:
    """Drop ``future`` from pygls' table of running handlers, if it is still there (a
    request id may be used again once answered)."""
    if futures.get(msg_id) is future:
        futures.pop(msg_id, None)


_ANSWERED = object()  # a malformed request, already answered with an error
_MAX_ARRIVALS = 256  # request arrivals kept before the dead ones are dropped
# The requests whose answer depends on where they were asked (their handlers take their
# arrival: ``handlers.documents.current_view``).
_ASKED_AT_POSITIONS = frozenset(
    (
        lsp.TEXT_DOCUMENT_HOVER,
        lsp.TEXT_DOCUMENT_DEFINITION,
        lsp.TEXT_DOCUMENT_REFERENCES,
        lsp.TEXT_DOCUMENT_COMPLETION,
    )
)


def _refusal(error: BaseException | None) -> bool:
    """``error`` is a JSON-RPC error a handler raised on purpose (invalid params, a
    refused request), not an unexpected exception (pygls wraps those as internal errors)."""
    return isinstance(error, JsonRpcException) and not isinstance(error, JsonRpcInternalError)


class _NoRefusalTracebacks(logging.Filter):
    """pygls logs a request a handler refused on purpose with its traceback, and the
    params it could not read with the validator's whole exception group; the server says
    each in one line of its own (``structure_message``, ``report_server_error``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == "Unable to deserialize message\n%s":
            return False
        exc = record.exc_info[1] if record.exc_info else None
        return not _refusal(exc)


logging.getLogger("pygls.protocol.json_rpc").addFilter(_NoRefusalTracebacks())
_WRITES: set[asyncio.Future[Any]] = set()  # writes under way (WebSocket transport)


@dataclass(frozen=True, slots=True)
class Prepared:
    """A request's result already serialized to JSON (ASCII bytes): an outline of ten
    thousand messages takes a third of a second to serialize, so requests answered with the
    same result share one serialization, done on a worker thread (``prepare_json``)."""

    json: bytes


def prepare_json(items: Iterable[bytes]) -> Prepared | None:
    """A list of ``items``, each one JSON value already serialized (ASCII), as pygls would
    write the list; None when empty.

    An iterator's items are taken one by one: an outline of ten thousand messages made
    whole first, as lsprotocol objects, then as dicts, then as JSON, all alive at once,
    weighed 30 MB at 10 MB. The items' JSON is written into one growing buffer, not kept as
    ten thousand small ``bytes`` until joined: freed together, those left the allocator's
    pages they had filled in use by whatever was made between them.
    """
    buf = bytearray(b"[")
    for item in items:
        if len(buf) > 1:
            buf += b", "
        buf += item
    if len(buf) == 1:
        return None
    buf += b"]"
    return Prepared(bytes(buf))  # the one copy of the whole


def _nul_file_uri(value: Any) -> bool:
    """Some ``file:`` URI string in ``value`` (params, walked) decodes to a path with a NUL."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if v[:5].lower() == "file:" and ("\x00" in v or "%00" in v):
                return True
        elif isinstance(v, dict):
            stack.extend(x for k, x in v.items() if k != "text")  # (a document's text)
        elif isinstance(v, list):
            stack.extend(v)
    return False


def _first_line(exc: BaseException) -> str:
    """A short, one-line cause (cattrs nests its errors: take the innermost)."""
    while getattr(exc, "exceptions", None):
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


class PromptServer(LanguageServer):
    """A pygls server with one ``Session``; errors are logged, never fatal."""

    def __init__(self) -> None:
        pages.one_malloc_arena()  # before the server's threads start (``server.pages``)
        super().__init__("promptls", VERSION, protocol_cls=PromptProtocol)
        self.session = Session()
        self._error_shown = False
        self.refused_roots: list[Path] = []  # workspace folders refused at initialize
        self.shown_setting_problems = ""  # the invalid editor settings last shown

    def _start_io_async(self, stdin: Any = None, stdout: Any = None) -> None:
        """pygls' stdio server, reading with ``server.lsp.stream`` (which keeps no message
        alive after handling it) instead of pygls' loop, and writing on a thread of its own
        (``server.lsp.writer``)."""
        from server.lsp.stream import StdinReader, serve_messages
        from server.lsp.writer import ThreadedWriter

        self._stop_event = stop = threading.Event()
        stdin, stdout = stdin or sys.stdin.buffer, stdout or sys.stdout.buffer
        # Pipes of a megabyte: the ``didOpen`` of a 10 MB document took 25-100 ms to come
        # through the default 64 KB (160 turns of the client writing and this reading).
        for stream in (stdin, stdout):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                widen_pipe(stream.fileno())
        reader = StdinReader(stdin, self.thread_pool)
        # Written off the loop: a large answer to a slow client does not hold it up.
        writer = ThreadedWriter(stdout, on_lost=lambda _: stop.set())
        self.protocol.set_writer(writer)
        try:
            asyncio.run(
                serve_messages(
                    self._stop_event, reader, self.protocol, log, self.report_server_error
                )
            )
        except BrokenPipeError:
            log.error("Connection to the client is lost! Shutting down the server.")
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()
            writer.close()  # what is queued is written (``exit`` closed it already)

    def report_server_error(self, error: Exception, source: Any) -> None:
        if isinstance(error, JsonRpcContentModified) or isinstance(
            getattr(error, "__cause__", None), JsonRpcContentModified
        ):
            return  # the intended answer to a request about an outdated version
        if _refusal(error):  # a handler's own answer (a bad argument): said, not a bug
            log.warning("request refused: %s", error)
            return
        log.error("error in %s", getattr(source, "__name__", source), exc_info=error)
        if self._error_shown:
            return
        self._error_shown = True
        super().report_server_error(error, source)
