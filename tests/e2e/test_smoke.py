"""The server over stdio with recorded real-client capabilities: open, diagnose, assemble."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.support.lsp_session import initialize

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "overflow.conv.yaml"
SEGMENTS = [
    "system",
    "history",
    "custom_agent",
    "project_files",
    "forgotten_files",
    "last_user",
    "this_turn",
    "reminder",
]


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "server"]),
    params=["visual-studio-code", "neovim@v0.7.0", "emacs"],
)
async def client(request: pytest.FixtureRequest, lsp_client: LanguageClient):  # type: ignore[no-untyped-def]
    await initialize(lsp_client, request.param, REPO)
    yield
    await lsp_client.shutdown_session()


async def test_open_publishes_diagnostics_and_assembles(client: LanguageClient) -> None:
    uri = EXAMPLE.as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(
                uri=uri, language_id="yaml", version=1, text=EXAMPLE.read_text(encoding="utf-8")
            )
        )
    )
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    codes = sorted(str(d.code) for d in client.diagnostics[uri])
    assert codes == ["compression-due", "history-truncated", "orphaned-tool-response"]
    truncated = next(d for d in client.diagnostics[uri] if d.code == "history-truncated")
    assert truncated.range.start.line == 121
    assert list(truncated.tags or ()) == [lsp.DiagnosticTag.Unnecessary]
    res = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="promptls.assemble", arguments=[uri])
    )
    assert res["orphans_dropped"] == ["m11"]
    assert [s["name"] for s in res["segments"]] == SEGMENTS
