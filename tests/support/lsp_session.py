"""Starting a pytest-lsp client session the way the end-to-end tests need it."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient, client_capabilities


async def initialize(client: LanguageClient, name: str, root: Path) -> lsp.InitializeResult:
    """Answer the server's requests to the client, then initialize with ``name``'s
    recorded capabilities; ``client.refreshes`` counts the refresh requests received."""
    refreshes: dict[str, int] = {}
    client.refreshes = refreshes  # type: ignore[attr-defined]

    @client.feature(lsp.CLIENT_REGISTER_CAPABILITY)
    def register_capability(params: lsp.RegistrationParams) -> None:
        return None

    @client.feature(lsp.WORKSPACE_CODE_LENS_REFRESH)
    def code_lens_refresh(params: None) -> None:
        refreshes["codeLens"] = refreshes.get("codeLens", 0) + 1

    @client.feature(lsp.WORKSPACE_INLAY_HINT_REFRESH)
    def inlay_hint_refresh(params: None) -> None:
        refreshes["inlayHint"] = refreshes.get("inlayHint", 0) + 1

    result = await client.initialize_session(
        lsp.InitializeParams(capabilities=client_capabilities(name), root_uri=root.as_uri())
    )
    client.encoding = result.capabilities.position_encoding or "utf-16"
    return result
