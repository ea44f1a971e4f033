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


def test_tcp_initialize() -> None:
    port = _free_port()
    proc = _serve("--tcp", port)
    try:
        # pygls serves one TCP connection: connect once (retrying until it listens).
        body = json.dumps(INITIALIZE).encode()
        with _connect(port, proc) as s:
            s.sendall(f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            data = b""
            while b"serverInfo" not in data or not data.rstrip().endswith(b"}"):
                chunk = s.recv(65536)
                assert chunk, "connection closed"
                data += chunk
        reply = json.loads(data.split(b"\r\n\r\n", 1)[1])
        assert reply["result"]["serverInfo"]["name"] == "promptls"
        assert reply["result"]["capabilities"]["hoverProvider"]
    finally:
        proc.kill()
        proc.wait(10)


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
