"""`promptls serve --tcp` and `--ws` answer a real initialize on loopback."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"processId": None, "rootUri": None, "capabilities": {}},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(flag: str, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "server", flag, f"127.0.0.1:{port}"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    pytest.fail("server did not listen")


def _connect(port: int, proc: subprocess.Popen[bytes]) -> socket.socket:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=20)
        except OSError:
            time.sleep(0.1)
    pytest.fail("server did not listen")


def test_websocket_initialize() -> None:
    import websockets

    port = _free_port()
    proc = _serve("--ws", port)

    async def talk() -> dict:  # type: ignore[type-arg]
        async with websockets.connect(f"ws://127.0.0.1:{port}") as ws:
            await ws.send(json.dumps(INITIALIZE))
            return json.loads(await asyncio.wait_for(ws.recv(), 20))  # type: ignore[no-any-return]

    try:
        _wait_listening(port, proc)
        reply = asyncio.run(talk())
        assert reply["result"]["serverInfo"]["name"] == "promptls"
    finally:
        proc.kill()
        proc.wait(10)


def _frame(message: dict) -> bytes:  # type: ignore[type-arg]
    body = json.dumps(message).encode()
    return f"Content-Length: {len(body)}\r\n\r\n".encode() + body


NOT_LOOPBACK = ["0.0.0.0", "192.0.2.1", "example.com", "[::]"]


@pytest.mark.parametrize("flag", ["--tcp", "--ws"])
@pytest.mark.parametrize("host", NOT_LOOPBACK)
def test_only_loopback_addresses_are_served(
    flag: str, host: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # In-process: the command's entry point; the subprocess test below runs the command.
    from server.cli.main import main

    capsys.readouterr()
    rc = main(["serve", flag, f"{host}:{_free_port()}"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "loopback" in err and "Traceback" not in err


@pytest.mark.parametrize(("flag", "host"), [("--tcp", NOT_LOOPBACK[0]), ("--ws", NOT_LOOPBACK[-1])])
def test_the_command_refuses_a_non_loopback_address(flag: str, host: str) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "server", flag, f"{host}:{_free_port()}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2
    assert "loopback" in res.stderr and "Traceback" not in res.stderr


def test_tcp_initialize_then_exit_promptly_and_quietly() -> None:
    port = _free_port()
    proc = _serve("--tcp", port)
    try:
        # pygls serves one TCP connection: connect once (retrying until it listens).
        with _connect(port, proc) as s:
            s.sendall(_frame(INITIALIZE))
            data = b""
            while b"serverInfo" not in data or not data.rstrip().endswith(b"}"):
                chunk = s.recv(65536)
                assert chunk, "connection closed"
                data += chunk
            reply = json.loads(data.split(b"\r\n\r\n", 1)[1])
            assert reply["result"]["serverInfo"]["name"] == "promptls"
            assert reply["result"]["capabilities"]["hoverProvider"]
            s.sendall(_frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
            s.sendall(_frame({"jsonrpc": "2.0", "method": "exit"}))
            proc.wait(15)
        assert proc.returncode == 0
        stderr = proc.stderr.read().decode() if proc.stderr else ""
        assert "Traceback" not in stderr and "SystemExit" not in stderr, stderr
    finally:
        proc.kill()
        proc.wait(10)


def test_tcp_stops_when_its_client_disconnects() -> None:
    port = _free_port()
    proc = _serve("--tcp", port)
    try:
        with _connect(port, proc) as s:
            s.sendall(_frame(INITIALIZE))
        proc.wait(15)
        stderr = proc.stderr.read().decode() if proc.stderr else ""
        assert "Traceback" not in stderr, stderr
    finally:
        proc.kill()
        proc.wait(10)


def test_websocket_refuses_browser_origins_unless_allowed() -> None:
    import websockets
    from websockets.exceptions import InvalidStatus

    port = _free_port()
    allowed = "http://localhost:3000"
    proc = subprocess.Popen(
        [sys.executable, "-m", "server", "--ws", f"127.0.0.1:{port}", "--allow-origin", allowed],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )

    async def talk(origin: str | None) -> dict:  # type: ignore[type-arg]
        async with websockets.connect(f"ws://127.0.0.1:{port}", origin=origin) as ws:  # type: ignore[arg-type]
            await ws.send(json.dumps(INITIALIZE))
            return json.loads(await asyncio.wait_for(ws.recv(), 20))  # type: ignore[no-any-return]

    try:
        _wait_listening(port, proc)
        for origin in ("https://evil.example", "http://localhost:3001", "null"):
            with pytest.raises(InvalidStatus) as refused:
                asyncio.run(talk(origin))
            assert refused.value.response.status_code == 403
        reply = asyncio.run(talk(allowed))
        assert reply["result"]["serverInfo"]["name"] == "promptls"
    finally:
        proc.kill()
        proc.wait(10)


def test_websocket_reads_messages_as_stdio_does(tmp_path: Path) -> None:
    """A WebSocket message that is not JSON gets a parse-error answer (it was a traceback
    and an error pop-up), an empty one is skipped, and the ``didOpen`` of a 2 MB log gets
    its diagnostics (the connection was closed: websockets' default limit is 1 MiB)."""
    import websockets

    port = _free_port()
    proc = _serve("--ws", port)
    doc = tmp_path / "big.conv.json"
    text = json.dumps([{"role": "user", "content": "x" * 1000} for _ in range(2000)])
    assert len(text) > 2_000_000
    opened = {
        "jsonrpc": "2.0",
        "method": "textDocument/didOpen",
        "params": {
            "textDocument": {"uri": doc.as_uri(), "languageId": "json", "version": 1, "text": text}
        },
    }

    async def talk() -> list[dict]:  # type: ignore[type-arg]
        got = []
        async with websockets.connect(f"ws://127.0.0.1:{port}", max_size=None) as ws:
            await ws.send(json.dumps(INITIALIZE))
            got.append(json.loads(await asyncio.wait_for(ws.recv(), 20)))
            await ws.send(json.dumps({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
            await ws.send("this is not json")
            await ws.send("")
            await ws.send(json.dumps(opened))
            while not any(m.get("method") == "textDocument/publishDiagnostics" for m in got):
                got.append(json.loads(await asyncio.wait_for(ws.recv(), 60)))
        return got

    try:
        _wait_listening(port, proc)
        got = asyncio.run(talk())
    finally:
        proc.kill()
        proc.wait(10)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    errors = [m["error"] for m in got if "error" in m]
    assert [e["code"] for e in errors] == [-32700], got
    assert not [m for m in got if m.get("method") == "window/showMessage"], got
    published = [m for m in got if m.get("method") == "textDocument/publishDiagnostics"]
    assert published[0]["params"]["uri"] == doc.as_uri()
    assert "Traceback" not in stderr, stderr


def test_allowed_origins_are_written_as_browsers_send_them() -> None:
    """A browser's ``Origin`` is lower case with no default port and no ``/``; the
    handshake compares it as sent, so ``--allow-origin HTTP://LocalHost:3000/`` was refused
    as malformed, and ``https://app.example:443`` never matched."""
    from server.lsp.transport import TransportError, check_origins

    assert check_origins(
        ["HTTP://LocalHost:3000/", "https://app.example:443", "http://[::1]:8080", "http://a:80"]
    ) == ["http://localhost:3000", "https://app.example", "http://[::1]:8080", "http://a"]
    for bad in ["localhost:3000", "ws://a", "http://a/path", "http://", "http://a:99999", "null"]:
        with pytest.raises(TransportError):
            check_origins([bad])
