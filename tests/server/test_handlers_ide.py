"""Outline, folding, navigation, completion and code action handlers, in-process.

Each test drives a real ``PromptServer`` through ``tests.support.inprocess`` (pygls' own
dispatch and (de)serialisation, no subprocess). What is checked here is what the
``assembly.ide`` tests cannot see: registration and options, positions in the negotiated
encoding (an emoji before the cursor on the same line), that answers come from the
document's current version, and that applied fixes remove their findings.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from tests.support.edits import apply_lsp_edits, workspace_edits
from tests.support.inprocess import InProcessClient

CALLS = """\
messages:
  - {id: u1, role: user, content: "Find the outage 😀"}
  - id: a1
    role: assistant
    content: null
    tool_calls:
      - {id: call_1, type: function, function: {name: web_search, arguments: "{}"}}
  - {id: t1, role: tool, content: "😀 found", tool_call_id: call_1}
"""
# The same with its tool call over three lines: a fold inside a fold inside the list's.
NESTED = CALLS.replace(
    '      - {id: call_1, type: function, function: {name: web_search, arguments: "{}"}}\n',
    "      - id: call_1\n        type: function\n"
    '        function: {name: web_search, arguments: "{}"}\n',
)
FIXABLE = """\
reminder: 'Today 😀 is {{CURENT_DATETIME}}, cite with {{CITATION}}.'
messages:
  - {id: u1, role: user, content: "Draft the memo."}
"""
TEMPLATE = """\
---
tools: [read_file]
---
# Role
You are Ledger 😀. Today is {{

# Tools
## read_file
Pass the file_id.
"""


def _caps(encoding: str) -> lsp.ClientCapabilities:
    return lsp.ClientCapabilities(
        general=lsp.GeneralClientCapabilities(
            position_encodings=[lsp.PositionEncodingKind(encoding)]
        ),
        text_document=lsp.TextDocumentClientCapabilities(
            document_symbol=lsp.DocumentSymbolClientCapabilities(
                hierarchical_document_symbol_support=True
            ),
        ),
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


@pytest.fixture(params=["utf-16", "utf-32"])
async def client(request: pytest.FixtureRequest, root: Path) -> AsyncIterator[InProcessClient]:
    c = InProcessClient()
    res = await c.initialize(_caps(request.param), root_uri=root.as_uri())
    assert res.capabilities.position_encoding == request.param
    c.encoding = request.param  # type: ignore[attr-defined]
    yield c
    c.shutdown()


def _pos(text: str, needle: str, encoding: str, *, delta: int = 0) -> lsp.Position:
    """The position of ``needle`` (plus ``delta`` code points) in the client's units."""
    offset = text.index(needle) + delta
    line = text.count("\n", 0, offset)
    prefix = text[text.rfind("\n", 0, offset) + 1 : offset]
    units = len(prefix.encode("utf-16-le")) // 2 if encoding == "utf-16" else len(prefix)
    return lsp.Position(line, units)


async def test_capabilities_are_offered(root: Path) -> None:
    c = InProcessClient()
    res = await c.initialize(_caps("utf-16"), root_uri=root.as_uri())
    c.shutdown()
    caps = res.capabilities
    assert caps.document_symbol_provider and caps.folding_range_provider
    assert caps.definition_provider and caps.references_provider
    assert caps.completion_provider is not None
    assert set(caps.completion_provider.trigger_characters or ()) == {"{", '"', ":", " "}
    assert isinstance(caps.code_action_provider, lsp.CodeActionOptions)
    kinds = caps.code_action_provider.code_action_kinds
    assert list(kinds or ()) == [lsp.CodeActionKind.QuickFix, "source.fixAll.promptls"]


async def test_outline_of_a_conversation(client: InProcessClient, root: Path) -> None:
    uri = (root / "calls.conv.yaml").as_uri()
    await client.open(uri, CALLS)
    res = await client.request(
        lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL,
        lsp.DocumentSymbolParams(text_document=lsp.TextDocumentIdentifier(uri=uri)),
        list[lsp.DocumentSymbol],
    )
    assert [(s.name, s.kind) for s in res] == [
        ("u1 · user: Find the outage 😀", lsp.SymbolKind.Event),
        ("a1 · assistant → web_search", lsp.SymbolKind.Method),
        ("t1 · tool ← web_search", lsp.SymbolKind.Field),
    ]
    call = res[1].children[0]
    assert (call.name, call.detail, call.kind) == ("web_search", "call_1", lsp.SymbolKind.Function)
    assert call.selection_range.start == _pos(CALLS, "web_search", client.encoding)  # type: ignore[attr-defined]


async def test_definition_and_references_after_an_emoji(
    client: InProcessClient, root: Path
) -> None:
    uri = (root / "calls.conv.yaml").as_uri()
    await client.open(uri, CALLS)
    enc = client.encoding  # type: ignore[attr-defined]
    at_response = _pos(CALLS, "call_1}", enc, delta=3)
    doc = lsp.TextDocumentIdentifier(uri=uri)
    defs = await client.request(
        lsp.TEXT_DOCUMENT_DEFINITION,
        lsp.DefinitionParams(text_document=doc, position=at_response),
        list[lsp.Location],
    )
    call_start = _pos(CALLS, "call_1,", enc)
    assert [d.range for d in defs] == [
        lsp.Range(call_start, lsp.Position(call_start.line, call_start.character + 6))
    ]
    refs = await client.request(
        lsp.TEXT_DOCUMENT_REFERENCES,
        lsp.ReferenceParams(
            text_document=doc,
            position=call_start,
            context=lsp.ReferenceContext(include_declaration=False),
        ),
        list[lsp.Location],
    )
    assert [r.range.start for r in refs] == [_pos(CALLS, "call_1}", enc)]
    nothing = await client.request(
        lsp.TEXT_DOCUMENT_DEFINITION,
        lsp.DefinitionParams(text_document=doc, position=_pos(CALLS, "outage", enc)),
    )
    assert nothing is None


async def test_placeholder_completion_and_folding_in_a_template(
    client: InProcessClient, root: Path
) -> None:
    uri = (root / "ledger.prompt.md").as_uri()
    await client.open(uri, TEMPLATE, language_id="markdown")
    enc = client.encoding  # type: ignore[attr-defined]
    doc = lsp.TextDocumentIdentifier(uri=uri)
    after_braces = _pos(TEMPLATE, "{{", enc, delta=2)
    res = await client.request(
        lsp.TEXT_DOCUMENT_COMPLETION,
        lsp.CompletionParams(text_document=doc, position=after_braces),
        lsp.CompletionList,
    )
    item = next(i for i in res.items if i.label == "CURRENT_DATETIME")
    assert item.text_edit == lsp.TextEdit(
        range=lsp.Range(after_braces, after_braces), new_text="CURRENT_DATETIME}}"
    )
    assert item.kind == lsp.CompletionItemKind.Variable
    # This client does not say it renders Markdown in completion documentation.
    assert isinstance(item.documentation, str) and "`" not in item.documentation
    folds = await client.request(
        lsp.TEXT_DOCUMENT_FOLDING_RANGE,
        lsp.FoldingRangeParams(text_document=doc),
        list[lsp.FoldingRange],
    )
    assert [(f.start_line, f.end_line) for f in folds] == [(0, 2), (3, 4), (6, 8), (7, 8)]


async def _code_actions(
    client: InProcessClient, uri: str, rng: lsp.Range, only: list[str] | None = None
) -> list[lsp.CodeAction]:
    res = await client.request(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=rng,
            context=lsp.CodeActionContext(diagnostics=[], only=only),
        ),
        list[lsp.CodeAction],
    )
    return res or []


async def test_quick_fix_applied_removes_its_finding(client: InProcessClient, root: Path) -> None:
    uri = (root / "memo.conv.yaml").as_uri()
    await client.open(uri, FIXABLE)
    enc = client.encoding  # type: ignore[attr-defined]
    at = _pos(FIXABLE, "CURENT", enc)
    actions = await _code_actions(client, uri, lsp.Range(at, at))
    assert [(a.title, a.kind, a.is_preferred) for a in actions] == [
        ("Replace with `{{CURRENT_DATETIME}}`", lsp.CodeActionKind.QuickFix, True),
        ("Apply every promptls fix", "source.fixAll.promptls", None),
    ]
    assert actions[0].diagnostics and actions[0].diagnostics[0].code == "unknown-placeholder"
    fixed = apply_lsp_edits(FIXABLE, workspace_edits(actions[0].edit, uri), enc)
    assert "{{CURRENT_DATETIME}}, cite with {{CITATION}}" in fixed
    client.change(uri, 2, fixed)
    await client.analysed(uri, 2)
    findings = client.server.session.snapshots[uri].analysis.diagnostics
    assert ["CITATION" in d.message for d in findings if d.code == "unknown-placeholder"] == [True]


async def test_fix_all_and_the_only_filter(client: InProcessClient, root: Path) -> None:
    uri = (root / "memo.conv.yaml").as_uri()
    await client.open(uri, FIXABLE)
    whole = lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
    quick = await _code_actions(client, uri, whole, only=["quickfix"])
    assert quick == []  # nothing fixable at the very start
    (fix_all,) = await _code_actions(client, uri, whole, only=["source.fixAll"])
    enc = client.encoding  # type: ignore[attr-defined]
    fixed = apply_lsp_edits(FIXABLE, workspace_edits(fix_all.edit, uri), enc)
    assert "'Today 😀 is {{CURRENT_DATETIME}}, cite with {{CITATION_GUIDANCE}}.'" in fixed


async def test_fixes_are_those_of_the_current_version(client: InProcessClient, root: Path) -> None:
    uri = (root / "memo.conv.yaml").as_uri()
    await client.open(uri, "messages:\n  - {id: u1, role: user, content: Hi}\n")
    # Hold the analysis worker: the edit below is not analysed yet when fixes are asked for.
    release = threading.Event()
    client.server.session.executor.submit(release.wait)
    client.change(uri, 2, FIXABLE)
    asyncio.get_running_loop().call_later(0.2, release.set)
    enc = client.encoding  # type: ignore[attr-defined]
    at = _pos(FIXABLE, "CITATION", enc)
    actions = await _code_actions(client, uri, lsp.Range(at, at), only=["quickfix"])
    assert [a.title for a in actions] == ["Replace with `{{CITATION_GUIDANCE}}`"]
    assert client.server.session.snapshots[uri].version == 2


async def test_folds_honour_the_client_range_limit(root: Path) -> None:
    """A client that wants at most two folds (VS Code asks for 5,000) gets the two
    outermost: the message list and the first message, not the tool call inside it."""
    caps = _caps("utf-16")
    assert caps.text_document is not None
    caps.text_document.folding_range = lsp.FoldingRangeClientCapabilities(range_limit=2)
    c = InProcessClient()
    await c.initialize(caps, root_uri=root.as_uri())
    try:
        uri = (root / "calls.conv.yaml").as_uri()
        await c.open(uri, NESTED, language_id="yaml")
        doc = lsp.TextDocumentIdentifier(uri=uri)
        params = lsp.FoldingRangeParams(text_document=doc)
        folds = await c.request(lsp.TEXT_DOCUMENT_FOLDING_RANGE, params, list[lsp.FoldingRange])
    finally:
        c.shutdown()
    assert [(f.start_line, f.end_line) for f in folds] == [(0, 9), (2, 8)]


async def test_closing_a_document_lets_the_folds_kept_of_it_go(root: Path) -> None:
    """The folds kept between versions hold the messages' stored nodes (tens of MB for a
    large conversation): closing the document lets them go."""
    from assembly.ide import folding

    c = InProcessClient()
    await c.initialize(_caps("utf-16"), root_uri=root.as_uri())
    try:
        uri = (root / "calls.conv.yaml").as_uri()
        await c.open(uri, NESTED, language_id="yaml")
        doc = lsp.TextDocumentIdentifier(uri=uri)
        params = lsp.FoldingRangeParams(text_document=doc)
        assert await c.request(lsp.TEXT_DOCUMENT_FOLDING_RANGE, params, list[lsp.FoldingRange])
        assert folding._MEMO  # its message's folds, kept
        c.notify(lsp.TEXT_DOCUMENT_DID_CLOSE, lsp.DidCloseTextDocumentParams(text_document=doc))
        await asyncio.sleep(0)
        assert not folding._MEMO
    finally:
        c.shutdown()
