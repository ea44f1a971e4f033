"""``server/lsp/session.py`` and its scheduling (``server/lsp/scheduler.py``), in-process, threaded.

A real ``PromptServer`` on the test's asyncio loop (``tests.support.inprocess``: pygls'
own dispatch, no subprocess), with the session's real worker thread. The worker can be held
busy with a gate, so "an edit arrives while an analysis runs" happens on purpose rather
than by luck. Checked here: an analysis of an old version is never published over a newer
one, edits during an analysis coalesce into one analysis of the latest version, open
conversations are re-analysed when a file they read changes, and an open (unsaved) template
wins over its file on disk.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from assembly.host import Analysis
from assembly.rope import Rope
from server.lsp import convert
from server.lsp.convert import TextMap
from server.lsp.session import THAW_EVERY
from server.lsp.state import DocState, Snapshot
from server.workspace import analyze
from tests.support.inprocess import WATCHING_CLIENT, InProcessClient

TIMEOUT_S = 20
TEMPLATE = "You are Ledger, the finance assistant.\n"
CONVERSATION = """\
system_prompt: prompts/ledger.prompt.md
project_files:
  - {file_id: f1, filename: policy.md, path: docs/policy.md}
messages:
  - {id: u1, role: user, content: "Reconcile the Q2 export."}
"""
# Version v of a document: even versions have a finding, odd ones none, so each publish
# can be matched to the text it was computed from.
FINDING = "reminder: 'Today is {{CURENT_DATETIME}}.'\n"
PLAIN = 'messages:\n  - {id: u1, role: user, content: "Draft the memo, take %d."}\n'


def text_of(version: int) -> str:
    return (FINDING if version % 2 == 0 else "") + PLAIN % version


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    (root / "prompts").mkdir()
    (root / "docs").mkdir()
    (root / "prompts" / "ledger.prompt.md").write_text(TEMPLATE, encoding="utf-8")
    (root / "docs" / "policy.md").write_text("Refunds within 30 days.\n", encoding="utf-8")
    return root


@pytest.fixture
async def client(workspace: Path) -> AsyncIterator[InProcessClient]:
    res = InProcessClient()
    await res.initialize(WATCHING_CLIENT, root_uri=workspace.as_uri())
    yield res
    res.shutdown()


def published(client: InProcessClient, uri: str) -> list[lsp.PublishDiagnosticsParams]:
    return [
        client.converter.structure(m["params"], lsp.PublishDiagnosticsParams)
        for m in client.sent
        if m.get("method") == lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS and m["params"]["uri"] == uri
    ]


async def settled(client: InProcessClient) -> None:
    """Wait until no analysis is running or due."""
    s = client.server.session
    async with asyncio.timeout(TIMEOUT_S):
        while s.scheduler.busy():
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.01)  # the loop callbacks of the last analysis


async def until(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(TIMEOUT_S):
        while not predicate():
            await asyncio.sleep(0.005)


def codes(params: lsp.PublishDiagnosticsParams) -> list[str]:
    return sorted(str(d.code) for d in params.diagnostics)


def hold_worker(client: InProcessClient) -> threading.Event:
    """Keep the analysis worker busy until the returned gate is set."""
    gate = threading.Event()
    client.server.session.executor.submit(gate.wait, TIMEOUT_S)
    return gate


def open_doc(client: InProcessClient, uri: str, text: str, version: int = 1) -> None:
    client.notify(
        lsp.TEXT_DOCUMENT_DID_OPEN,
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(
                uri=uri, language_id="yaml", version=version, text=text
            )
        ),
    )


# Versions ---------------------------------------------------------------------------------


async def test_edits_during_an_analysis_publish_only_the_latest_version(
    client: InProcessClient, workspace: Path
) -> None:
    uri = (workspace / "chat.conv.yaml").as_uri()
    gate = hold_worker(client)
    open_doc(client, uri, text_of(1))  # its analysis waits behind the gate
    for version in range(2, 7):
        client.change(uri, version, text_of(version))
    assert client.server.session.scheduler.busy()
    gate.set()
    await until(lambda: bool(published(client, uri)))
    await settled(client)
    # Version 1 was analysed (it was queued) but the document had moved on: it is kept as
    # the latest model for hovers, never published. Versions 2-5 were never analysed.
    res = published(client, uri)
    assert [p.version for p in res] == [6]
    assert codes(res[0]) == ["unknown-placeholder"]
    assert client.server.session.snapshots[uri].version == 6


async def test_rapid_edits_publish_in_order_and_end_on_the_latest(
    client: InProcessClient, workspace: Path
) -> None:
    uri = (workspace / "chat.conv.yaml").as_uri()
    open_doc(client, uri, text_of(1))
    last = 40
    for version in range(2, last + 1):
        client.change(uri, version, text_of(version))
        await asyncio.sleep(0.001 * (version % 4))  # bursts and pauses
    await until(lambda: any(p.version == last for p in published(client, uri)))
    await settled(client)
    res = published(client, uri)
    versions = [p.version for p in res]
    assert versions == sorted(set(versions)), versions  # never an older one after a newer
    assert versions[-1] == last
    for p in res:  # each publish is the analysis of its own version's text
        assert p.version is not None
        assert codes(p) == (["unknown-placeholder"] if p.version % 2 == 0 else []), p.version


# Dependencies -----------------------------------------------------------------------------


async def open_conversation(client: InProcessClient, workspace: Path) -> str:
    uri = (workspace / "chat.conv.yaml").as_uri()
    open_doc(client, uri, CONVERSATION)
    await client.analysed(uri, 1)
    await settled(client)
    return uri


def system_text(client: InProcessClient, uri: str) -> str:
    return client.server.session.snapshots[uri].analysis.assembly.system_text  # type: ignore[union-attr]


def project_file_text(client: InProcessClient, uri: str) -> str:
    layout = client.server.session.snapshots[uri].analysis.assembly.layout  # type: ignore[union-attr]
    return "\n".join(e.message.text for e in layout if e.segment == "project_files")


def watched(client: InProcessClient, *paths: Path) -> None:
    client.notify(
        lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
        lsp.DidChangeWatchedFilesParams(
            changes=[lsp.FileEvent(uri=p.as_uri(), type=lsp.FileChangeType.Changed) for p in paths]
        ),
    )


async def reanalysed(client: InProcessClient, uri: str, before: Snapshot) -> None:
    await until(lambda: client.server.session.snapshots[uri] is not before)
    await settled(client)


async def test_dependents_are_reanalysed_when_a_file_they_read_changes(
    client: InProcessClient, workspace: Path
) -> None:
    uri = await open_conversation(client, workspace)
    s = client.server.session
    assert "You are Ledger" in system_text(client, uri)
    assert "Refunds within 30 days" in project_file_text(client, uri)
    n_published = len(published(client, uri))

    # The template changes on disk: the conversation is analysed again (same version).
    before = s.snapshots[uri]
    (workspace / "prompts" / "ledger.prompt.md").write_text("You are Ada.\n", encoding="utf-8")
    watched(client, workspace / "prompts" / "ledger.prompt.md")
    await reanalysed(client, uri, before)
    assert "You are Ada" in system_text(client, uri)
    assert s.snapshots[uri].version == 1
    assert len(published(client, uri)) == n_published + 1  # republished for the same version

    # So does a project file it reads.
    before = s.snapshots[uri]
    (workspace / "docs" / "policy.md").write_text("Refunds within 14 days.\n", encoding="utf-8")
    watched(client, workspace / "docs" / "policy.md")
    await reanalysed(client, uri, before)
    assert "Refunds within 14 days" in project_file_text(client, uri)

    # A file it does not read schedules nothing.
    before = s.snapshots[uri]
    (workspace / "docs" / "other.md").write_text("unrelated\n", encoding="utf-8")
    watched(client, workspace / "docs" / "other.md")
    assert not s.scheduler.busy()
    assert s.snapshots[uri] is before


async def test_a_missing_file_the_document_names_is_read_once_it_is_created(
    client: InProcessClient, workspace: Path
) -> None:
    """A template or project file that is not there was no dependency of the analysis:
    creating it (or restoring it after a delete) left `file-not-found` on the document
    until its next edit."""
    template = workspace / "prompts" / "ledger.prompt.md"
    policy = workspace / "docs" / "policy.md"
    saved = template.read_text(encoding="utf-8"), policy.read_text(encoding="utf-8")
    template.unlink()
    policy.unlink()
    uri = await open_conversation(client, workspace)
    s = client.server.session
    codes = [d.code for d in s.snapshots[uri].diagnostics]
    assert codes.count("file-not-found") == 2, codes
    for path, text in zip((template, policy), saved, strict=True):
        before = s.snapshots[uri]
        path.write_text(text, encoding="utf-8")
        watched(client, path)
        await reanalysed(client, uri, before)
    assert "file-not-found" not in [d.code for d in s.snapshots[uri].diagnostics]
    assert "You are Ledger" in system_text(client, uri)
    assert "Refunds within 30 days" in project_file_text(client, uri)
    assert s.snapshots[uri].version == 1


async def test_an_open_template_wins_over_the_disk(
    client: InProcessClient, workspace: Path
) -> None:
    uri = await open_conversation(client, workspace)
    s = client.server.session
    template = workspace / "prompts" / "ledger.prompt.md"

    # Opening the template with unsaved text re-analyses the conversation with that text.
    before = s.snapshots[uri]
    open_doc(client, template.as_uri(), "You are Grace, unsaved.\n")
    await reanalysed(client, uri, before)
    assert "You are Grace, unsaved" in system_text(client, uri)
    assert template.read_text(encoding="utf-8") == TEMPLATE
    assert s.overlay()[template] == "You are Grace, unsaved.\n"

    # Typing in it does too.
    before = s.snapshots[uri]
    client.change(template.as_uri(), 2, "You are Grace, still unsaved.\n")
    await reanalysed(client, uri, before)
    assert "You are Grace, still unsaved" in system_text(client, uri)

    # Closing it without saving: the file on disk is read again.
    before = s.snapshots[uri]
    client.notify(
        lsp.TEXT_DOCUMENT_DID_CLOSE,
        lsp.DidCloseTextDocumentParams(
            text_document=lsp.TextDocumentIdentifier(uri=template.as_uri())
        ),
    )
    await reanalysed(client, uri, before)
    assert "You are Ledger" in system_text(client, uri)
    assert template not in s.overlay()


async def test_an_open_template_wins_through_a_symlinked_workspace(
    client: InProcessClient, workspace: Path
) -> None:
    # The editor opened the workspace through a symbolic link: its URIs name the link,
    # while references resolve to the real files. The overlay still applies.
    link = workspace.parent / "link"
    link.symlink_to(workspace, target_is_directory=True)
    uri = (link / "chat.conv.yaml").as_uri()
    open_doc(client, uri, CONVERSATION)
    await client.analysed(uri, 1)
    await settled(client)
    before = client.server.session.snapshots[uri]
    open_doc(client, (link / "prompts" / "ledger.prompt.md").as_uri(), "You are Grace.\n")
    await reanalysed(client, uri, before)
    assert "You are Grace" in system_text(client, uri)


# Garbage collection -----------------------------------------------------------------------


async def test_an_analysis_leaves_the_collector_on_and_its_result_frozen(
    client: InProcessClient, workspace: Path
) -> None:
    s = client.server.session
    path = workspace / "chat.conv.yaml"
    assert gc.isenabled()
    s.analyze_now(DocState(path.as_uri(), path, 1, Rope.from_str(text_of(2)), "conversation"))
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0
    # Every THAW_EVERY analyses the frozen objects go back to the collector.
    s.n_analyses = THAW_EVERY - 1
    s.analyze_now(DocState(path.as_uri(), path, 2, Rope.from_str(text_of(2)), "conversation"))
    assert gc.get_freeze_count() == 0
    # A caller that turned the collector off keeps it off.
    gc.disable()
    try:
        s.analyze_now(DocState(path.as_uri(), path, 3, Rope.from_str(text_of(3)), "conversation"))
        assert not gc.isenabled()
    finally:
        gc.enable()


# Tools of the conversations that use a template --------------------------------------------

TOOL_TEMPLATE = (
    "Always call lookup before you answer a question about a product.\n\n"
    "# Style\nAnswer briefly and plainly.\nGive one answer.\n\n"
    "# Lookup\nLookup finds a product of the catalogue by its name.\n"
)
TOOL_CONVERSATION = """\
system_prompt: prompts/ledger.prompt.md
tools:
  - type: function
    function:
      name: %s
      description: Look a product up.
      parameters: {type: object, properties: {}}
messages:
  - {id: u1, role: user, content: "Which plan fits a team of five?"}
"""
# No tools declared, but the messages call one (a logged conversation).
CALLING_CONVERSATION = """\
system_prompt: prompts/ledger.prompt.md
messages:
  - {id: u1, role: user, content: "Which plan fits a team of five?"}
  - role: assistant
    content: null
    tool_calls: [{id: c1, type: function, function: {name: %s, arguments: '{}'}}]
  - {role: tool, tool_call_id: c1, content: "Team plan"}
"""


def far_findings(client: InProcessClient, uri: str) -> list[str]:
    diags = client.server.session.snapshots[uri].analysis.diagnostics
    return [d.message for d in diags if d.code == "instruction-far-from-section"]


async def test_a_template_knows_the_tools_of_the_conversations_that_use_it(
    client: InProcessClient, workspace: Path
) -> None:
    template = workspace / "prompts" / "ledger.prompt.md"
    t_uri = template.as_uri()
    open_doc(client, t_uri, TOOL_TEMPLATE)
    await client.analysed(t_uri, 1)
    await settled(client)
    # On its own, `lookup` is a word like any other, and `# Lookup` a topic.
    assert far_findings(client, t_uri) == []

    # A conversation that sends the template with a `lookup` tool: the template is
    # re-checked with that tool; `# Lookup` is its section, and the instruction about it
    # sits far from it (a finding of the kind on by default).
    c_uri = (workspace / "chat.conv.yaml").as_uri()
    before = client.server.session.snapshots[t_uri]
    open_doc(client, c_uri, TOOL_CONVERSATION % "lookup")
    await reanalysed(client, t_uri, before)
    (message,) = far_findings(client, t_uri)
    assert "`lookup`" in message.lower() and "# Lookup" in message and "preview" not in message

    # The conversation's tools change: the template follows.
    before = client.server.session.snapshots[t_uri]
    client.change(c_uri, 2, TOOL_CONVERSATION % "search_orders")
    await reanalysed(client, t_uri, before)
    assert far_findings(client, t_uri) == []

    # It declares no tools but its messages call `lookup`: a tool the model called is a
    # tool of the template too.
    before = client.server.session.snapshots[t_uri]
    client.change(c_uri, 3, CALLING_CONVERSATION % "lookup")
    await reanalysed(client, t_uri, before)
    (message,) = far_findings(client, t_uri)
    assert "`lookup`" in message.lower() and "# Lookup" in message


async def test_keystrokes_reach_the_host_as_the_edits_they_are(
    client: InProcessClient, workspace: Path
) -> None:
    """``didChange``'s ranges, composed by the session, are the edit the document's host
    gets: typing in one message re-reads that message only (the others are the same
    objects) and the analysis equals a fresh one, for single keystrokes and for a burst of
    several changes analysed at once."""
    doc = workspace / "chat.conv.json"
    messages = [f'  {{"id": "u{k}", "role": "user", "content": "take {k}"}}' for k in range(6)]
    text = '{"messages": [\n' + ",\n".join(messages) + "\n]}\n"
    doc.write_text(text, encoding="utf-8")
    uri = doc.as_uri()
    await client.open(uri, text, language_id="json")
    await client.analysed(uri, 1)
    s = client.server.session
    for version, burst in ((2, 1), (3, 1), (5, 2), (8, 3)):
        before = s.snapshots[uri].analysis
        changes = []
        for _ in range(burst):
            at = text.index('"content": "', text.index('"u3"')) + len('"content": "')
            m = TextMap.of(text, s.encoding)
            pos = convert.to_lsp_position(m, at)
            changes.append(
                lsp.TextDocumentContentChangePartial(range=lsp.Range(pos, pos), text="x")
            )
            text = text[:at] + "x" + text[at:]
        # One notification with several changes, each in the text the previous one left.
        client.notify(
            lsp.TEXT_DOCUMENT_DID_CHANGE,
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=changes,
            ),
        )
        await client.analysed(uri, version)
        after = s.snapshots[uri].analysis
        assert isinstance(before, Analysis) and isinstance(after, Analysis)
        assert before.parsed is not None and after.parsed is not None
        stored = zip(after.parsed.message_data, before.parsed.message_data, strict=True)
        kept = [a is b for a, b in stored]
        assert kept == [True, True, True, False, True, True], (version, kept)
        fresh = analyze(doc, text=text, root=workspace)
        assert after.diagnostics == fresh.diagnostics
        assert after.assembly == fresh.assembly


async def test_initialized_loads_the_editor_settings_tokenizer_before_any_document(
    monkeypatch: pytest.MonkeyPatch, workspace: Path
) -> None:
    """The first open need not wait for the encoding to load (0.25 s for ``o200k_base``)."""
    from server.lsp import session as session_module

    asked: list[tuple[str | None, str | None]] = []
    loaded = threading.Event()

    def record(encoding: str | None = None, *, model: str | None = None) -> None:
        asked.append((encoding, model))
        loaded.set()

    monkeypatch.setattr(session_module, "load_tokenizer", record)
    client = InProcessClient()
    try:
        params = lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(),
            root_uri=workspace.as_uri(),
            initialization_options={"promptls": {"model": "gpt-4"}},
        )
        await client.request(lsp.INITIALIZE, params, lsp.InitializeResult)
        assert not asked  # not before ``initialized``: the settings may still change
        client.notify(lsp.INITIALIZED, lsp.InitializedParams())
        for _ in range(TIMEOUT_S * 20):
            if loaded.is_set():
                break
            await asyncio.sleep(0.05)
        assert [model for _, model in asked] == ["gpt-4"]
        assert not client.server.session.documents  # no document was needed for it
    finally:
        client.shutdown()
