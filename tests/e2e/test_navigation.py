"""Outline, go to definition, completion and an applied quick fix over stdio, per client.

One server per recorded client (VS Code, Neovim 0.7, Emacs; Emacs negotiates UTF-32). The
quick fix is applied the way an editor does it: the client asks for code actions at the
diagnostic, applies the returned ``WorkspaceEdit`` to its buffer, sends the edit as an
incremental ``didChange``, and the next ``publishDiagnostics`` no longer has the finding.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from server.lsp.convert import TextMap, to_lsp_position
from server.lsp.handlers.hover import STALE_NOTE
from tests.support.edits import apply_lsp_edits, workspace_edits
from tests.support.lsp_session import initialize

REPO = Path(__file__).resolve().parents[2]
SUPPORT = REPO / "examples" / "support-agent.conv.json"
FIXABLE = REPO / "tests/data/diagnostics/filename-instead-of-file-id/string-arguments.conv.json"
SCRATCH_TEMPLATE = REPO / "tests" / "data" / "ide" / "unsaved.prompt.md"  # never written
CLIENTS = ["visual-studio-code", "neovim@v0.7.0", "emacs"]
TIMEOUT_S = 20

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=[sys.executable, "-m", "server"]),
    params=CLIENTS,
)
async def client(request: pytest.FixtureRequest, lsp_client: LanguageClient):  # type: ignore[no-untyped-def]
    await initialize(lsp_client, request.param, REPO)
    yield
    await lsp_client.shutdown_session()


def _open(client: LanguageClient, path: Path, text: str, language_id: str = "json") -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(
                uri=uri, language_id=language_id, version=1, text=text
            )
        )
    )
    return uri


def _position(client: LanguageClient, text: str, offset: int) -> lsp.Position:
    return to_lsp_position(TextMap.of(text, str(client.encoding)), offset)


async def test_outline_of_the_example(client: LanguageClient) -> None:
    uri = _open(client, SUPPORT, SUPPORT.read_text(encoding="utf-8"))
    symbols = await client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    )
    assert symbols is not None
    names = [s.name for s in symbols]
    assert names[:6] == [
        "settings",
        "system_prompt",
        "custom_agent_prompt",
        "project_files",
        "tools",
        "reminder",
    ]
    assert len(names) == 6 + 24
    read = next(
        s for s in symbols if isinstance(s, lsp.DocumentSymbol) and s.name.startswith("m11")
    )
    assert read.name == "m11 · assistant → read_file"
    assert [(c.name, c.detail) for c in read.children or ()] == [("read_file", "call_7Qd2Lx04")]


async def test_definition_from_a_tool_response_to_its_call(client: LanguageClient) -> None:
    text = SUPPORT.read_text(encoding="utf-8")
    uri = _open(client, SUPPORT, text)
    response = text.index('"tool_call_id": "call_7Qd2Lx04"') + len('"tool_call_id": "') + 4
    call = text.index('"id": "call_7Qd2Lx04"') + len('"id": "')
    defs = await client.text_document_definition_async(
        lsp.DefinitionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            position=_position(client, text, response),
        )
    )
    assert isinstance(defs, list) and len(defs) == 1
    target = defs[0]
    assert isinstance(target, lsp.Location) and target.uri == uri
    assert target.range == lsp.Range(
        _position(client, text, call), _position(client, text, call + len("call_7Qd2Lx04"))
    )


async def test_completion_of_placeholders_in_a_prompt(client: LanguageClient) -> None:
    text = "# Role\nYou are Ledger. Today is {{"
    uri = _open(client, SCRATCH_TEMPLATE, text, language_id="markdown")
    res = await client.text_document_completion_async(
        lsp.CompletionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            position=_position(client, text, len(text)),
            context=lsp.CompletionContext(
                trigger_kind=lsp.CompletionTriggerKind.TriggerCharacter, trigger_character="{"
            ),
        )
    )
    assert isinstance(res, lsp.CompletionList)
    labels = [i.label for i in res.items]
    assert labels[:3] == ["CURRENT_DATETIME", "CITATION_GUIDANCE", "REMINDER_TAG_DESCRIPTION"]
    item = res.items[0]
    assert isinstance(item.text_edit, lsp.TextEdit)
    assert apply_lsp_edits(text, [item.text_edit], str(client.encoding)).endswith(
        "Today is {{CURRENT_DATETIME}}"
    )


async def test_quick_fix_applied_clears_the_diagnostic(client: LanguageClient) -> None:
    code = "filename-instead-of-file-id"
    text = FIXABLE.read_text(encoding="utf-8")
    uri = _open(client, FIXABLE, text)
    await _diagnostics_until(client, uri, lambda codes: code in codes)
    diagnostic = next(d for d in client.diagnostics[uri] if d.code == code)
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=diagnostic.range,
            context=lsp.CodeActionContext(diagnostics=[diagnostic]),
        )
    )
    assert actions is not None
    fix = next(a for a in actions if isinstance(a, lsp.CodeAction) and a.kind == "quickfix")
    assert fix.is_preferred and fix.title.startswith("Pass the file_id")
    edits = workspace_edits(fix.edit, uri)
    fixed = apply_lsp_edits(text, edits, str(client.encoding))
    assert '\\"file_id\\": \\"5f0c2a9e-7d41-4b8e-9a3c-2e6f1d8b4c70\\"' in fixed
    # Send the edits as the editor does: incremental changes, the last one first.
    changes = [
        lsp.TextDocumentContentChangePartial(range=e.range, text=e.new_text)
        for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character))
    ]
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=list(reversed(changes)),
        )
    )
    await _diagnostics_until(client, uri, lambda codes: code not in codes)


async def _diagnostics_until(client: LanguageClient, uri: str, done) -> None:  # type: ignore[no-untyped-def]
    """Wait for a ``publishDiagnostics`` of ``uri`` whose codes satisfy ``done``."""

    async def wait() -> None:
        while True:
            await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
            if uri in client.diagnostics and done({d.code for d in client.diagnostics[uri]}):
                return

    if uri in client.diagnostics and done({d.code for d in client.diagnostics[uri]}):
        return
    await asyncio.wait_for(wait(), TIMEOUT_S)


async def test_a_request_answers_where_it_was_asked_when_the_user_types_meanwhile(
    client: LanguageClient,
) -> None:
    """A request's positions are in the text it was sent about. Asked right after the
    open, a definition and a hover wait for the first analysis; the user types a line
    break above meanwhile: the answers are about the place asked (in the current text),
    not about the place the same line and column now name (the definition was none, and
    the hover was of the line above)."""
    path = REPO / "tests" / "data" / "ide" / "typed-while-asking.conv.json"  # never written
    # The example with 30,000 more messages after it: its first analysis takes long enough
    # (about a second; with 3,000 it took tens of ms and sometimes ended before the server had read
    # the edit, whose answer is then rightly about the text before it) for the edit to
    # arrive while both requests wait for it.
    doc_json = json.loads(SUPPORT.read_text(encoding="utf-8"))
    doc_json["messages"] += [
        {"role": "user" if k % 2 else "assistant", "content": f"note {k} of the day"}
        for k in range(30000)
    ]
    text = json.dumps(doc_json, indent=1, ensure_ascii=False)
    uri = _open(client, path, text)
    asked = text.index('"tool_call_id": "call_7Qd2Lx04"') + len('"tool_call_id": "') + 4
    doc = lsp.TextDocumentIdentifier(uri=uri)
    at = _position(client, text, asked)
    definition = asyncio.ensure_future(
        client.text_document_definition_async(lsp.DefinitionParams(text_document=doc, position=at))
    )
    hover = asyncio.ensure_future(
        client.text_document_hover_async(lsp.HoverParams(text_document=doc, position=at))
    )
    await asyncio.sleep(0)  # (both sent, before the edit)
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(lsp.Position(0, 1), lsp.Position(0, 1)), text="\n"
                )
            ],
        )
    )
    new = text[:1] + "\n" + text[1:]
    call = new.index('"id": "call_7Qd2Lx04"') + len('"id": "')
    defs = await asyncio.wait_for(definition, TIMEOUT_S)
    assert defs == [
        lsp.Location(
            uri=uri,
            range=lsp.Range(
                _position(client, new, call), _position(client, new, call + len("call_7Qd2Lx04"))
            ),
        )
    ]
    # The same hover as one asked at that place after the edit (but for the note that
    # it answers from the analysis of version 1, when that is the one it had).
    got = await asyncio.wait_for(hover, TIMEOUT_S)
    again = await client.text_document_hover_async(
        lsp.HoverParams(text_document=doc, position=_position(client, new, asked + 1))
    )
    assert isinstance(got, lsp.Hover) and isinstance(again, lsp.Hover)
    assert isinstance(got.contents, lsp.MarkupContent)
    assert isinstance(again.contents, lsp.MarkupContent)
    assert got.range == again.range
    assert got.contents.value.split(STALE_NOTE[:8])[0] == again.contents.value
    assert "response to `call_7Qd2Lx04`" in again.contents.value
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(text_document=doc))
