"""Serving the language server over TCP or a WebSocket: loopback only, one client.

What these expose is everything the server can read (the workspace folders its client
names), so (``docs/security.md``):

- both listen on a loopback address only (``127.0.0.1``, ``::1`` or ``localhost``);
  any other host is refused before anything listens;
- a WebSocket handshake from a browser carries an ``Origin`` header: it is refused unless
  that origin was allowed with ``--allow-origin`` (clients that are not browsers send no
  ``Origin`` and are accepted), so a web page cannot talk to the server;
- one client is served; when it disconnects or sends ``exit`` the server stops, with the
  exit code LSP asks for (0 after ``shutdown``, else 1) and no traceback;
- a WebSocket's messages are read by the same loop as stdio's and TCP's
  (``server.lsp.stream.serve_messages``, through ``WebSocketReader``): a message that is
  not JSON gets a parse-error answer, a large ``didOpen`` has its text read into a rope,
  and a message may be as large as on stdio (``stream.MAX_MESSAGE_BYTES``; the
  ``websockets`` default, 1 MiB, closed the connection on the open of a 1 MB log).
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from server.lsp.app import PromptServer

# The address and origin checks import nothing heavy: ``promptls serve`` refuses a host
# that is not loopback before it imports the server (pygls, the engine). The serving
# functions import what they need.

log = logging.getLogger(__name__)

LOOPBACK_NAMES = ("localhost",)


class TransportError(Exception):
    """A usage error (a host that is not loopback, a malformed origin)."""


def parse_address(value: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``PORT`` (host ``127.0.0.1``); the host must be a loopback one."""
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", value
    host = host.strip("[]")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise TransportError(f"expected HOST:PORT, e.g. 127.0.0.1:2087 (got {value!r})")
    if not is_loopback(host):
        raise TransportError(
            f"refusing to listen on {host!r}: only a loopback address (127.0.0.1, ::1, "
            "localhost) is allowed, since a client can read the workspace's files"
        )
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_origins(origins: Sequence[str]) -> list[str]:
    """The ``--allow-origin`` values, as browsers send them (``scheme://host[:port]``): the
    scheme and host in lower case, without a default port (80, 443) or a trailing ``/``,
    since the handshake's ``Origin`` is compared as it is sent."""
    from urllib.parse import urlsplit

    res = []
    for origin in origins:
        bad = TransportError(
            f"--allow-origin takes an origin such as http://localhost:3000 (got {origin!r})"
        )
        try:
            parts = urlsplit(origin)
            port = parts.port
        except ValueError:
            raise bad from None
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.path not in ("", "/")
            or parts.query
            or parts.fragment
            or parts.username is not None
        ):
            raise bad
        host = parts.hostname
        if ":" in host:  # IPv6, bracketed in an origin
            host = f"[{host}]"
        default = {"http": 80, "https": 443}[parts.scheme]
        res.append(f"{parts.scheme}://{host}" + (f":{port}" if port not in (None, default) else ""))
    return res


def serve_tcp(server: PromptServer, host: str, port: int) -> int:
    """Listen on ``host:port``, serve one client, return the exit code."""
    import asyncio

    from server.lsp.stream import serve_messages

    stop = threading.Event()
    server._stop_event = stop
    code = [0]

    async def main() -> None:
        done = asyncio.Event()
        served = False

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal served
            if served:  # one client per server, as with stdio
                writer.close()
                return
            served = True
            server.protocol.set_writer(writer)  # type: ignore[arg-type]
            try:
                await serve_messages(stop, reader, server.protocol, log, server.report_server_error)
            except SystemExit as e:  # ``exit``: pygls calls ``sys.exit``
                code[0] = _code(e)
            finally:
                done.set()

        listener = await asyncio.start_server(connection, host, port)
        log.info("listening on %s", [s.getsockname() for s in listener.sockets])
        async with listener:
            await done.wait()

    return _run(server, main, code)


def serve_ws(server: PromptServer, host: str, port: int, allow_origins: Sequence[str]) -> int:
    """Listen for a WebSocket on ``host:port``, serve one client, return the exit code.

    Handshakes with an ``Origin`` header not in ``allow_origins`` get 403 Forbidden.
    """
    import asyncio

    from pygls.io_ import WebSocketWriter
    from websockets.asyncio.server import ServerConnection, serve

    from server.lsp.stream import MAX_MESSAGE_BYTES, serve_messages

    stop = threading.Event()
    server._stop_event = stop
    code = [0]
    origins: list[str | None] = [None, *allow_origins]  # None: no Origin (not a browser)

    async def main() -> None:
        done = asyncio.Event()
        served = False

        async def connection(websocket: ServerConnection) -> None:
            nonlocal served
            if served:
                await websocket.close(1013, "promptls serves one client")
                return
            served = True
            server.protocol.set_writer(WebSocketWriter(websocket), include_headers=False)
            try:
                await serve_messages(
                    stop,
                    WebSocketReader(websocket),
                    server.protocol,
                    log,
                    server.report_server_error,
                )
            except SystemExit as e:
                code[0] = _code(e)
            finally:
                await websocket.close()
                done.set()

        async with serve(
            connection,
            host,
            port,
            origins=origins,  # type: ignore[arg-type]
            max_size=MAX_MESSAGE_BYTES,
        ) as listener:
            log.info("listening on %s", [s.getsockname() for s in listener.sockets])
            await done.wait()

    return _run(server, main, code)


def _run(
    server: PromptServer, main: Callable[[], Coroutine[Any, Any, None]], code: list[int]
) -> int:
    """Run the server's loop; ``exit`` (pygls raises ``SystemExit``) ends it quietly."""
    import asyncio

    try:
        asyncio.run(main())
        return code[0]
    except SystemExit as e:
        return _code(e)
    except KeyboardInterrupt:
        return 130
    finally:
        server.session.shutdown()


def _code(e: SystemExit) -> int:
    return e.code if isinstance(e.code, int) else 0


class WebSocketReader:
    """A WebSocket's messages as the framed byte stream ``serve_messages`` reads: each
    message is a ``Content-Length`` header, an empty line and the message's bytes. The
    stream ends when the connection closes. Empty messages are skipped (a body of 0 bytes
    has no frame)."""

    def __init__(self, websocket: Any) -> None:
        self.websocket = websocket
        self.body: bytes | None = None  # the message whose header was read, if any
        self.header_sent = False

    async def readline(self) -> bytes:
        from websockets.exceptions import ConnectionClosed

        if self.body is not None and self.header_sent:
            self.header_sent = False
            return b"\r\n"
        while self.body is None:
            try:
                data = await self.websocket.recv(decode=False)
            except ConnectionClosed:
                return b""
            if data:
                self.body = data if isinstance(data, bytes) else bytes(data)
        self.header_sent = True
        return b"Content-Length: %d\r\n" % len(self.body)

    async def readexactly(self, n: int) -> bytes:
        body, self.body = self.body or b"", None
        return body
