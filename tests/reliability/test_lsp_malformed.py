"""What the language server does with messages a buggy client sends, over real stdio.

A body that is not JSON is answered with JSON-RPC's parse error and one that is JSON but not
a JSON-RPC object with an invalid-request error (both with a null id); a notification whose
params do not fit its method (a negative position in a ``didChange``) is ignored; a request
a handler refuses (a command's bad argument) is answered with its error. Each is one
warning line in the log: never a traceback, never an error shown to the user, and the
server answers the next request.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

REPO = Path(__file__).resolve().parents[2]


def _frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _read(stream: BinaryIO, into: list[dict[str, Any]]) -> None:
    while True:
        length = 0
        while (line := stream.readline()).strip():
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        if not line or not length:
            return
        into.append(json.loads(stream.read(length)))


def _wait(msgs: list[dict[str, Any]], pred: Any, seconds: float = 60.0) -> dict[str, Any]:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for m in list(msgs):
            if pred(m):
                return m
        time.sleep(0.02)
    raise AssertionError(f"no such message among {msgs}")


class _Server:
    """``promptls serve`` over real stdio: what is sent, the messages it writes back
    (``msgs``, gathered on a thread) and, once closed, its log."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "serve"],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.msgs: list[dict[str, Any]] = []
        self._reader = threading.Thread(
            target=_read, args=(self.proc.stdout, self.msgs), daemon=True
        )
        self._reader.start()
        self.log = ""

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, obj: Any) -> None:
        self.write(_frame(json.dumps(obj).encode()))

    def initialize(self, root: Path) -> dict[str, Any]:
        """The answer to ``initialize`` (id 1) at ``root``, ``initialized`` sent after it."""
        params = {"processId": None, "rootUri": root.as_uri(), "capabilities": {}}
        self.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
        answer = _wait(self.msgs, lambda m: m.get("id") == 1)
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        return answer

    def shut_down(self, request_id: int) -> None:
        """``shutdown`` then ``exit``: the server must end with status 0."""
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "shutdown", "params": None})
        _wait(self.msgs, lambda m: m.get("id") == request_id)
        self.send({"jsonrpc": "2.0", "method": "exit", "params": None})
        assert self.proc.wait(30) == 0

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(5)
        assert self.proc.stderr is not None
        self.log = self.proc.stderr.read().decode("utf-8")

    def shown(self) -> list[dict[str, Any]]:
        """The ``window/showMessage`` notifications (errors shown to the user)."""
        return [m for m in self.msgs if m.get("method") == "window/showMessage"]


@contextmanager
def _serve() -> Iterator[_Server]:
    server = _Server()
    try:
        yield server
    finally:
        server.close()


def test_malformed_messages_are_answered_and_logged_in_one_line(tmp_path: Path) -> None:
    doc = tmp_path / "a.conv.json"
    text = '{"messages": [{"role": "user", "content": "hi"}]}'
    doc.write_text(text, encoding="utf-8")
    uri = doc.as_uri()
    with _serve() as server:
        server.initialize(tmp_path)
        item = {"uri": uri, "languageId": "json", "version": 1, "text": text}
        server.send(
            {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": item}}
        )
        # Not JSON; JSON but not a JSON-RPC object (twice).
        for body in (b"{{{{", b"[]", b"null"):
            server.write(_frame(body))
        # A change with a negative position; a command refused for its argument.
        bad = {"start": {"line": 0, "character": -3}, "end": {"line": 0, "character": 1}}
        change = {
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{"range": bad, "text": "x"}],
        }
        server.send({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": change})
        command = {"command": "promptls.assemble", "arguments": [5]}
        server.send(
            {"jsonrpc": "2.0", "id": 2, "method": "workspace/executeCommand", "params": command}
        )
        hover = {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 2}}
        server.send({"jsonrpc": "2.0", "id": 3, "method": "textDocument/hover", "params": hover})

        refused = _wait(server.msgs, lambda m: m.get("id") == 2)
        assert refused["error"]["code"] == -32602
        answered = _wait(server.msgs, lambda m: m.get("id") == 3)
        assert "promptls" in answered["result"]["contents"]["value"]  # the text is unchanged
        errors = [m["error"]["code"] for m in server.msgs if m.get("id") is None and "error" in m]
        assert errors == [-32700, -32600, -32600]
        server.shut_down(4)
    log = server.log
    assert server.shown() == [], server.shown()
    assert "Traceback" not in log, log
    assert "invalid params for textDocument/didChange" in log
    assert "request refused: promptls.assemble takes one argument" in log
    assert "not JSON" in log and "not a JSON-RPC object" in log


def test_a_file_uri_with_a_nul_names_no_file_and_is_refused(tmp_path: Path) -> None:
    """``%00`` in a file URI decodes to a NUL in the path, which every system call refuses:
    opening such a document, asking about it, reporting it changed on disk, adding it as
    a workspace folder or assembling it raised ``ValueError: embedded null byte`` in the
    handlers (a traceback and an error pop-up each). Each message is now refused as
    invalid params, and the server goes on."""
    good = tmp_path / "a.conv.json"
    text = '[{"role": "user", "content": "hi"}]'
    good.write_text(text, encoding="utf-8")
    nul = tmp_path.as_uri() + "/x%00y.conv.json"
    with _serve() as server:
        server.initialize(tmp_path)
        for uri, lang in ((nul, "json"), (nul.replace(".conv.json", ".prompt.md"), "markdown")):
            item = {"uri": uri, "languageId": lang, "version": 1, "text": "[]"}
            server.send(
                {
                    "jsonrpc": "2.0",
                    "method": "textDocument/didOpen",
                    "params": {"textDocument": item},
                }
            )
        watched = {"changes": [{"uri": tmp_path.as_uri() + "/promptls%00.toml", "type": 2}]}
        server.send(
            {"jsonrpc": "2.0", "method": "workspace/didChangeWatchedFiles", "params": watched}
        )
        folder = {"uri": tmp_path.as_uri() + "/sub%00", "name": "sub"}
        folders = {"event": {"added": [folder], "removed": []}}
        server.send(
            {"jsonrpc": "2.0", "method": "workspace/didChangeWorkspaceFolders", "params": folders}
        )
        lens = {"textDocument": {"uri": nul.replace(".conv.json", ".prompt.md")}}
        server.send({"jsonrpc": "2.0", "id": 2, "method": "textDocument/codeLens", "params": lens})
        command = {"command": "promptls.assemble", "arguments": [nul]}
        server.send(
            {"jsonrpc": "2.0", "id": 3, "method": "workspace/executeCommand", "params": command}
        )
        item = {"uri": good.as_uri(), "languageId": "json", "version": 1, "text": text}
        server.send(
            {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": item}}
        )
        hover = {"textDocument": {"uri": good.as_uri()}, "position": {"line": 0, "character": 2}}
        server.send({"jsonrpc": "2.0", "id": 4, "method": "textDocument/hover", "params": hover})
        for k in (2, 3):
            assert _wait(server.msgs, lambda m, k=k: m.get("id") == k)["error"]["code"] == -32602
        answered = _wait(server.msgs, lambda m: m.get("id") == 4)
        assert answered["result"]["contents"]["value"].startswith("**message `0`**")
        server.shut_down(5)
    log = server.log
    assert server.shown() == [], server.shown()
    assert "Traceback" not in log and "embedded null byte" not in log, log
    assert log.count("a file URI with a NUL character (%00) names no file") == 6, log


def test_json_rpc_objects_of_no_known_shape_are_invalid_requests(tmp_path: Path) -> None:
    """A JSON-RPC object with no ``method`` (nor result), a ``method`` that is not a
    string or an ``id`` that is an object raised a TypeError in pygls' reading of it: a
    traceback each and an error pop-up. Each gets an invalid-request answer with a null
    id; and a stream that ends inside a message (its ``Content-Length`` not reached) ends
    the session without handling the cut message."""
    bodies = [
        b'{"jsonrpc": "2.0"}',
        b'{"jsonrpc": "2.0", "id": 1}',
        b'{"jsonrpc": "2.0", "method": 5}',
        b'{"jsonrpc": "2.0", "id": {}, "method": "textDocument/hover", "params": {}}',
    ]
    init = {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}}
    data = _frame(
        json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}).encode()
    )
    data += b"".join(_frame(b) for b in bodies)
    data += _frame(b'{"jsonrpc": "2.0", "id": 9, "method": "shutdown"}')
    data += b'Content-Length: 500\r\n\r\n{"jsonrpc": "2.0", "method": "exit"}'  # cut
    res = subprocess.run(
        [sys.executable, "-m", "server.cli", "serve"],
        cwd=REPO,
        input=data,
        capture_output=True,
        timeout=60,
    )
    msgs: list[dict[str, Any]] = []
    _read(io.BytesIO(res.stdout), msgs)
    errors = [m["error"] for m in msgs if "error" in m]
    assert [(e["code"], m.get("id")) for e, m in zip(errors, msgs[1:], strict=False)] == [
        (-32600, None)
    ] * 4
    assert [m.get("id") for m in msgs if "result" in m] == [0, 9]
    assert not [m for m in msgs if m.get("method") == "window/showMessage"]
    log = res.stderr.decode("utf-8")
    assert "Traceback" not in log and log.count("of no known shape") == 4, log
    assert "the stream ended" in log


def test_a_second_initialize_is_refused_and_the_first_settings_stay(tmp_path: Path) -> None:
    """LSP: "the initialize request may only be sent once". A second one was answered
    as the first, replacing the workspace folders and settings under the open document;
    it is refused with an invalid-request error, and the server goes on as initialized."""
    doc = tmp_path / "a.conv.json"
    text = '{"messages": [{"role": "user", "content": "hi"}]}'
    doc.write_text(text, encoding="utf-8")
    uri = doc.as_uri()
    with _serve() as server:
        assert "capabilities" in server.initialize(tmp_path)["result"]
        other = {"processId": None, "rootUri": (tmp_path / "x").as_uri(), "capabilities": {}}
        server.send({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": other})
        refused = _wait(server.msgs, lambda m: m.get("id") == 2)
        assert refused["error"]["code"] == -32600
        assert "result" not in refused
        item = {"uri": uri, "languageId": "json", "version": 1, "text": text}
        server.send(
            {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": item}}
        )
        hover = {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 2}}
        server.send({"jsonrpc": "2.0", "id": 3, "method": "textDocument/hover", "params": hover})
        answered = _wait(server.msgs, lambda m: m.get("id") == 3)
        assert "promptls" in answered["result"]["contents"]["value"]
        server.shut_down(4)
    log = server.log
    assert "Traceback" not in log, log
    assert "a second initialize refused" in log
    assert server.shown() == []
