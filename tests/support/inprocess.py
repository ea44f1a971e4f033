"""Drive a real ``PromptServer`` in-process: JSON-RPC messages in, JSON-RPC messages out.

``InProcessClient`` feeds messages to the server's pygls protocol exactly as its stdio
reader would (JSON in, structured by pygls, dispatched through the registration table) and
collects what the server writes. No subprocess and no pipes, so a handler test costs
milliseconds and sees the server's ``Session`` directly; requests the server sends the
client (``workspace/inlayHint/refresh`` …) are recorded and answered with ``null``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from lsprotocol import converters
from lsprotocol import types as lsp

from server.lsp.app import PromptServer
from server.lsp.handlers import build_server

TIMEOUT_S = 20

# A client that takes versioned diagnostics and watches files itself, so the server starts
# no watcher of its own: every re-analysis in a test using it is caused by the test.
WATCHING_CLIENT = lsp.ClientCapabilities(
    text_document=lsp.TextDocumentClientCapabilities(
        publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities(version_support=True)
    ),
    workspace=lsp.WorkspaceClientCapabilities(
        did_change_watched_files=lsp.DidChangeWatchedFilesClientCapabilities(
            dynamic_registration=True
        )
    ),
)


class InProcessClient:
    """A test client wired straight into one server's protocol."""

    def __init__(self) -> None:
        self.server: PromptServer = build_server()
        self.converter = converters.get_converter()
        self.sent: list[dict[str, Any]] = []  # every message the server wrote, in order
        self._ids = itertools.count(1)
        self._responses: dict[int, dict[str, Any]] = {}
        self.server.protocol.set_writer(self, include_headers=False)

    # The writer interface pygls calls.
    def write(self, data: bytes) -> None:
        message = json.loads(data)
        self.sent.append(message)
        if "method" in message and "id" in message:  # a request to the client
            answer = {"jsonrpc": "2.0", "id": message["id"], "result": None}
            asyncio.get_running_loop().call_soon(self._feed, answer)
        elif "id" in message:
            self._responses[message["id"]] = message

    def close(self) -> None:
        pass

    async def request(self, method: str, params: Any, result_type: Any = None) -> Any:
        """Send a request, wait for its response, return the result (structured)."""
        msg_id = next(self._ids)
        self._feed(
            {
                "jsonrpc": "2.0",
                "id": msg_id,
                "method": method,
                "params": self.converter.unstructure(params),
            }
        )
        async with asyncio.timeout(TIMEOUT_S):
            while msg_id not in self._responses:
                await asyncio.sleep(0.005)
        response = self._responses.pop(msg_id)
        if "error" in response:
            raise AssertionError(f"{method} failed: {response['error']}")
        result = response.get("result")
        if result_type is None or result is None:
            return result
        return self.converter.structure(result, result_type)

    async def request_raw(self, method: str, params: Any) -> dict[str, Any]:
        """Send a request with ``params`` as given (JSON, possibly malformed); return the
        whole response message (``result`` or ``error``)."""
        msg_id = next(self._ids)
        self._feed({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        async with asyncio.timeout(TIMEOUT_S):
            while msg_id not in self._responses:
                await asyncio.sleep(0.005)
        return self._responses.pop(msg_id)

    def notify(self, method: str, params: Any) -> None:
        self._feed(
            {"jsonrpc": "2.0", "method": method, "params": self.converter.unstructure(params)}
        )

    async def initialize(
        self, capabilities: lsp.ClientCapabilities, *, root_uri: str | None = None
    ) -> lsp.InitializeResult:
        params = lsp.InitializeParams(capabilities=capabilities, root_uri=root_uri)
        res = await self.request(lsp.INITIALIZE, params, lsp.InitializeResult)
        self.notify(lsp.INITIALIZED, lsp.InitializedParams())
        return res  # type: ignore[no-any-return]

    async def open(self, uri: str, text: str, *, language_id: str = "yaml") -> None:
        """Open a document and wait for its first analysis."""
        self.notify(
            lsp.TEXT_DOCUMENT_DID_OPEN,
            lsp.DidOpenTextDocumentParams(
                text_document=lsp.TextDocumentItem(
                    uri=uri, language_id=language_id, version=1, text=text
                )
            ),
        )
        await self.analysed(uri, 1)

    def change(self, uri: str, version: int, text: str) -> None:
        """Replace the whole text (the analysis is debounced: it has not run on return)."""
        self.notify(
            lsp.TEXT_DOCUMENT_DID_CHANGE,
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
            ),
        )

    async def analysed(self, uri: str, version: int) -> None:
        """Wait until the server holds the analysis of ``version``."""
        snapshots = self.server.session.snapshots
        async with asyncio.timeout(TIMEOUT_S):
            while (snap := snapshots.get(uri)) is None or snap.version != version:
                await asyncio.sleep(0.005)

    def requests_sent(self, method: str) -> int:
        return sum(1 for m in self.sent if m.get("method") == method and "id" in m)

    def shutdown(self) -> None:
        self.server.session.shutdown()

    def _feed(self, message: dict[str, Any]) -> None:
        protocol = self.server.protocol
        protocol.handle_message(protocol.structure_message(json.loads(json.dumps(message))))
