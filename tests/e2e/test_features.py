"""Open, hover, inlay hints, code lens and the assembled view over stdio, as real clients ask.

One server per recorded client (VS Code, Neovim 0.7, Emacs; Emacs negotiates UTF-32) with
two example conversations open. The first test is the smoke test: the diagnostics the open
published and the assembly of the overflow example, before any edit. The server runs with
an empty tiktoken cache: the examples' gpt-4o counts with the bundled o200k_base all the
same, and the figures are fixed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.support.lsp_session import initialize
from tests.test_examples import SEGMENT_ORDER  # the assembly's segments, in order

REPO = Path(__file__).resolve().parents[2]
SUPPORT = REPO / "examples" / "support-agent.conv.json"
OVERFLOW = REPO / "examples" / "overflow.conv.yaml"
CLIENTS = ["visual-studio-code", "neovim@v0.7.0", "emacs"]
TIMEOUT_S = 20
# No tiktoken cache (an empty TIKTOKEN_CACHE_DIR turns it off): only the bundled
# encodings can be loaded.
ENV = {**os.environ, "TIKTOKEN_CACHE_DIR": ""}

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=[sys.executable, "-m", "server"], server_env=ENV),
    params=CLIENTS,
)
async def client(request: pytest.FixtureRequest, lsp_client: LanguageClient):  # type: ignore[no-untyped-def]
    result = await initialize(lsp_client, request.param, REPO)
    assert result.capabilities.hover_provider
    assert result.capabilities.inlay_hint_provider
    assert result.capabilities.code_lens_provider == lsp.CodeLensOptions(resolve_provider=False)
    for path in (SUPPORT, OVERFLOW):
        lsp_client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                text_document=lsp.TextDocumentItem(
                    uri=path.as_uri(),
                    language_id=path.suffix.lstrip("."),  # json, yaml: as editors send them
                    version=1,
                    text=_text(path),
                )
            )
        )
    await _published(lsp_client, SUPPORT.as_uri(), OVERFLOW.as_uri())
    yield
    await lsp_client.shutdown_session()


async def test_open_publishes_diagnostics_and_assembles(client: LanguageClient) -> None:
    # The fixture opened the overflow example and waited for its diagnostics (first test:
    # before any edit).
    uri = OVERFLOW.as_uri()
    codes = sorted(str(d.code) for d in client.diagnostics[uri])
    assert codes == ["compression-due", "history-truncated", "orphaned-tool-response"]
    truncated = next(d for d in client.diagnostics[uri] if d.code == "history-truncated")
    assert truncated.range.start.line == 121
    assert list(truncated.tags or ()) == [lsp.DiagnosticTag.Unnecessary]
    res = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="promptls.assemble", arguments=[uri])
    )
    assert res["orphans_dropped"] == ["m11"]
    assert [s["name"] for s in res["segments"]] == SEGMENT_ORDER


async def test_hover_on_the_head_shows_the_segment_table(client: LanguageClient) -> None:
    hover = await _hover(client, SUPPORT, "{")
    text = hover.contents.value
    assert hover.contents.kind == lsp.MarkupKind.Markdown
    assert text.startswith("**promptls** · `gpt-4o` · 5,079 / 121,600 tokens (4.2%)")
    assert "| segment | messages | tokens | share of budget |" in text
    for row in (
        "| system | 1 | 1,104 | 0.9% |",
        "| history | 12 | 856 | 0.7% |",
        "| this_turn | 3 | 1,271 | 1.0% |",
        "| **all messages** | **21** | **4,615** | **3.8%** |",
    ):
        assert row in text
    assert (
        "**Budget** 121,600 tokens = max_input_tokens 128,000 × (1 − safety margin 0.05); "
        "tool definitions 464 (4 tools) + messages 4,615 = **5,079** used" in text
    )
    assert "Encoding: `o200k_base`." in text
    assert hover.range == _line_range(SUPPORT, 0)


async def test_hover_on_a_message(client: LanguageClient) -> None:
    hover = await _hover(client, SUPPORT, '"id": "m21"')
    lines = hover.contents.value.splitlines()
    assert lines[0] == "**message `m21`** · user · **kept** in `last_user`"
    assert "- tokens: 84" in lines
    assert (
        "- position: message 17 of 21; 3,734 / 121,600 tokens sent up to and including it "
        "(3.1%, tool definitions first)" in lines
    )
    assert (
        "- cache: no cacheable prefix (`prompt_cache_chat_history` is off, as by default in Onyx)"
        in lines
    )
    dropped = await _hover(client, OVERFLOW, "id: m10")
    assert dropped.contents.value.splitlines()[0] == (
        "**message `m10`** · assistant · **dropped**: budget cut"
    )


async def test_inlay_hints_in_a_range(client: LanguageClient) -> None:
    uri = SUPPORT.as_uri()
    first, last = _line_of(SUPPORT, '"id": "m21"'), _line_of(SUPPORT, '"id": "m24"') + 2
    hints = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=lsp.Range(lsp.Position(first, 0), lsp.Position(last, 0)),
        )
    )
    assert hints is not None
    lines = _text(SUPPORT).splitlines()
    got = [(h.position.line, h.position.character, h.label) for h in hints]
    # At the end of each `"role": "…",` line (ASCII: the same column in every encoding).
    roles = [(i, len(lines[i])) for i in range(first, last) if '"role": "' in lines[i]]
    assert [(g[0], g[1]) for g in got] == roles
    assert [g[2] for g in got] == [" 84 tok", " 83 tok", " 918 tok", " 270 tok"]
    assert all(isinstance(h.tooltip, str) and h.tooltip.startswith("kept in ") for h in hints)
    overflow = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            text_document=lsp.TextDocumentIdentifier(uri=OVERFLOW.as_uri()),
            range=lsp.Range(lsp.Position(0, 0), lsp.Position(_line_of(OVERFLOW, "id: m12"), 0)),
        )
    )
    assert overflow is not None
    assert [h.label for h in overflow][-2:] == [" dropped · 928 tok", " dropped · 12 tok"]


async def test_code_lens_and_the_assembled_view(client: LanguageClient) -> None:
    lenses = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=SUPPORT.as_uri()))
    )
    assert lenses is not None and len(lenses) == 1
    [lens] = lenses
    assert lens.range.start == lsp.Position(0, 0)
    assert lens.command is not None
    assert lens.command.title == "5,079 / 121,600 tokens · 1 file forgotten"
    assert lens.command.command == "promptls.showAssembled"
    assert list(lens.command.arguments or ()) == [SUPPORT.as_uri()]
    view = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command=lens.command.command, arguments=lens.command.arguments)
    )
    assert view["budget"]["used"] + view["budget"]["tools"] == 5079
    assert [e["id"] for e in view["layout"]][-1] == "$reminder"
    assert view["forgotten_files"][0]["filename"] == "sync-r_0708.log"
    overflow = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=OVERFLOW.as_uri()))
    )
    assert overflow is not None and overflow[0].command is not None
    assert overflow[0].command.title == "3,218 / 3,891 tokens · 12 dropped · 1 file forgotten"


async def test_the_assembled_view_page_is_drawn_by_the_server(client: LanguageClient) -> None:
    args = [OVERFLOW.as_uri(), {"nonce": "n0nce"}]
    page = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="promptls.assembledHtml", arguments=args)
    )
    html = page["html"]
    assert "script-src 'nonce-n0nce'" in html and '<script nonce="n0nce">' in html
    assert "3,218 / 3,891 tokens" in html
    assert 'data-key="m19"' in html
    with pytest.raises(Exception, match="nonce"):
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(
                command="promptls.assembledHtml", arguments=[OVERFLOW.as_uri(), {"nonce": "'x"}]
            )
        )


async def test_an_edit_updates_hover_and_lens(client: LanguageClient) -> None:
    uri = OVERFLOW.as_uri()
    line = _line_of(OVERFLOW, "max_input_tokens:")
    old = _text(OVERFLOW).splitlines()[line]
    col = old.index(":") + 2
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(lsp.Position(line, col), lsp.Position(line, len(old))),
                    text="128000",
                )
            ],
        )
    )
    # Answers come from the latest finished analysis: ask until the edit's has finished.
    title = await _lens_title_until(client, uri, lambda t: "dropped" not in t)
    assert title.endswith(" / 121,600 tokens")  # nothing dropped any more
    hover = await _hover(client, OVERFLOW, "id: m10")
    assert hover.contents.value.splitlines()[0] == (
        "**message `m10`** · assistant · **kept** in `history`"
    )
    refreshes: dict[str, int] = client.refreshes  # type: ignore[attr-defined]
    if client.capabilities.workspace and client.capabilities.workspace.code_lens:
        assert refreshes.get("codeLens", 0) >= 1
    else:
        assert "codeLens" not in refreshes


# ------------------------------------------------------------------------------ helpers


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(_text(path).splitlines()) if needle in line)


def _line_range(path: Path, line: int) -> lsp.Range:
    """The range of line ``line`` (an ASCII line: the same in every encoding)."""
    text = _text(path).splitlines()[line]
    assert text.isascii()
    return lsp.Range(lsp.Position(line, 0), lsp.Position(line, len(text)))


async def _hover(client: LanguageClient, path: Path, needle: str) -> lsp.Hover:
    line = _line_of(path, needle)
    column = _text(path).splitlines()[line].index(needle) + 1
    hover = await client.text_document_hover_async(
        lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=path.as_uri()),
            position=lsp.Position(line, column),
        )
    )
    assert hover is not None and isinstance(hover.contents, lsp.MarkupContent)
    return hover


async def _published(client: LanguageClient, *uris: str) -> None:
    """Wait until each of ``uris`` has had its diagnostics published."""

    async def wait() -> None:
        while not all(u in client.diagnostics for u in uris):
            await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)

    await asyncio.wait_for(wait(), TIMEOUT_S)


async def _lens_title_until(client: LanguageClient, uri: str, done: Callable[[str], bool]) -> str:
    """Ask for the code lens until its title satisfies ``done`` (or time runs out)."""
    deadline = asyncio.get_running_loop().time() + TIMEOUT_S
    while True:
        lenses = await client.text_document_code_lens_async(
            lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
        )
        assert lenses is not None and lenses[0].command is not None
        title = lenses[0].command.title
        if done(title) or asyncio.get_running_loop().time() > deadline:
            return title
        await asyncio.sleep(0.05)
