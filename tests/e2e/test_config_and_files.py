"""Configuration, watched files, edit sequences, errors, pull diagnostics, progress, exit.

Over stdio with pytest-lsp, parametrised over the recorded VS Code, Neovim 0.7 and Emacs
client capabilities. Each test builds its workspace in ``tmp_path`` (a ``.git`` folder makes
it the root) and talks to a fresh ``python -m server``. The test client answers
``workspace/configuration``, ``client/registerCapability`` and the refresh requests itself,
and keeps every ``publishDiagnostics`` it receives, so a test waits for the publish its
action causes.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

CLIENTS = ("visual-studio-code", "neovim@v0.7.0", "emacs")
TIMEOUT_S = 20  # for any one answer or publish; a hung server fails the test, never hangs it
T = TypeVar("T")

CONVERSATION = """\
system_prompt: prompts/ledger.prompt.md
messages:
  - {id: u1, role: user, content: "Reconcile the Q2 export.", token_count: 3000}
  - {id: a1, role: assistant, content: "They agree to the cent.", token_count: 3000}
  - {id: u2, role: user, content: "Draft the close memo."}
"""
TEMPLATE = "You are Ledger, the finance assistant. Today is {{CURRENT_DATETIME}}.\n"
# About 2,000 tokens: enough to push the history of CONVERSATION over an 8,000 window.
LONG_TEMPLATE = TEMPLATE + "Keep every figure traceable to its source export. " * 220 + "\n"


@dataclass
class Traffic:
    """What the server sent the test client, and what the client answers."""

    published: list[lsp.PublishDiagnosticsParams] = field(default_factory=list)
    configuration: Any = None  # the client's value of section `promptls`
    configuration_requests: int = 0
    registrations: list[str] = field(default_factory=list)
    shut_down: bool = False


def _make_client() -> LanguageClient:
    """pytest-lsp's client without its configuration and diagnostics handlers (ours below)."""
    client = LanguageClient(converter_factory=default_converter)
    ours = (lsp.WORKSPACE_CONFIGURATION, lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    register_lsp_features(
        client, {m: f for m, f in DEFAULT_CLIENT_FEATURES.items() if m not in ours}
    )
    return client


@pytest.fixture(params=CLIENTS)
def client_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def traffic() -> Traffic:
    return Traffic()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    (root / "prompts").mkdir()
    (root / "prompts" / "ledger.prompt.md").write_text(TEMPLATE, encoding="utf-8")
    return root


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[sys.executable, "-m", "server"], client_factory=_make_client
    )
)
async def client(lsp_client: LanguageClient, traffic: Traffic):  # type: ignore[no-untyped-def]
    @lsp_client.feature(lsp.WORKSPACE_CONFIGURATION)
    def configuration(params: lsp.ConfigurationParams) -> list[Any]:
        traffic.configuration_requests += 1
        return [traffic.configuration if i.section == "promptls" else None for i in params.items]

    @lsp_client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def publish_diagnostics(params: lsp.PublishDiagnosticsParams) -> None:
        lsp_client.diagnostics[params.uri] = params.diagnostics
        traffic.published.append(params)

    @lsp_client.feature(lsp.CLIENT_REGISTER_CAPABILITY)
    def register_capability(params: lsp.RegistrationParams) -> None:
        traffic.registrations += [r.method for r in params.registrations]

    # VS Code answers these refresh requests; pytest-lsp's client has no handlers for them.
    @lsp_client.feature(lsp.WORKSPACE_CODE_LENS_REFRESH)
    def code_lens_refresh(params: None) -> None:
        return None

    @lsp_client.feature(lsp.WORKSPACE_INLAY_HINT_REFRESH)
    def inlay_hint_refresh(params: None) -> None:
        return None

    yield
    if lsp_client.capabilities is not None and not traffic.shut_down:
        await bounded(lsp_client.shutdown_session())


# Helpers -----------------------------------------------------------------------------------


async def initialize(
    client: LanguageClient,
    name: str,
    root: Path,
    *,
    options: Any = None,
    capabilities: lsp.ClientCapabilities | None = None,
) -> str:
    """Initialize like client ``name``; returns the negotiated position encoding."""
    res = await bounded(
        client.initialize_session(
            lsp.InitializeParams(
                capabilities=capabilities or client_capabilities(name),
                root_uri=root.as_uri(),
                workspace_folders=[lsp.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
                initialization_options=options,
            )
        )
    )
    return str(res.capabilities.position_encoding or "utf-16")


def open_document(client: LanguageClient, path: Path, text: str | None = None) -> str:
    uri = path.as_uri()
    if text is None:
        text = path.read_text(encoding="utf-8")
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(
                uri=uri,
                language_id="markdown" if path.suffix == ".md" else "yaml",
                version=1,
                text=text,
            )
        )
    )
    return uri


async def published(
    traffic: Traffic,
    uri: str,
    *,
    since: int,
    where: Callable[[lsp.PublishDiagnosticsParams], bool] = lambda p: True,
) -> lsp.PublishDiagnosticsParams:
    """The first publish for ``uri`` after ``traffic.published[since]`` that matches."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        for p in traffic.published[since:]:
            if p.uri == uri and where(p):
                return p
        await asyncio.sleep(0.01)
    seen = [(p.uri, p.version, codes(p.diagnostics)) for p in traffic.published[since:]]
    pytest.fail(f"no matching publishDiagnostics for {uri} in {TIMEOUT_S} s; got {seen}")


async def bounded(request: Awaitable[T]) -> T:
    """Await a request to the server, failing instead of hanging if it never answers."""
    return await asyncio.wait_for(request, TIMEOUT_S)


async def shut_down_cleanly(client: LanguageClient, traffic: Traffic) -> None:
    """``shutdown`` is answered and ``exit`` ends the server with code 0."""
    traffic.shut_down = True
    await bounded(client.shutdown_session())
    server = client._server
    assert server is not None and server.returncode == 0


def codes(diagnostics: Sequence[lsp.Diagnostic]) -> list[str]:
    return sorted(str(d.code) for d in diagnostics)


async def assemble(client: LanguageClient, uri: str) -> dict[str, Any]:
    res = await bounded(
        client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command="promptls.assemble", arguments=[uri])
        )
    )
    assert isinstance(res, dict)
    return res


def position(text: str, offset: int, encoding: str) -> lsp.Position:
    """An LSP position, computed here independently of server/lsp/convert.py."""
    line = text.count("\n", 0, offset)
    prefix = text[text.rfind("\n", 0, offset) + 1 : offset]
    if encoding == "utf-8":
        return lsp.Position(line, len(prefix.encode("utf-8")))
    if encoding == "utf-16":
        return lsp.Position(line, len(prefix.encode("utf-16-le")) // 2)
    return lsp.Position(line, len(prefix))


# Configuration -----------------------------------------------------------------------------


async def test_initialization_options_set_the_budget(
    client: LanguageClient, traffic: Traffic, client_name: str, workspace: Path
) -> None:
    await initialize(
        client, client_name, workspace, options={"promptls": {"max_input_tokens": 5000}}
    )
    conv = workspace / "chat.conv.yaml"
    conv.write_text(CONVERSATION, encoding="utf-8")
    uri = open_document(client, conv)
    first = await published(traffic, uri, since=0)
    assert codes(first.diagnostics) == ["compression-due", "history-truncated"]
    res = await assemble(client, uri)
    assert res["budget"]["max_input_tokens"] == 5000
    assert res["dropped"], res["dropped"]


async def test_configuration_change_reruns_and_republishes(
    client: LanguageClient, traffic: Traffic, client_name: str, workspace: Path
) -> None:
    caps = client_capabilities(client_name)
    pulls = bool(caps.workspace and caps.workspace.configuration)
    await initialize(client, client_name, workspace)
    conv = workspace / "chat.conv.yaml"
    conv.write_text(CONVERSATION, encoding="utf-8")
    uri = open_document(client, conv)
    first = await published(traffic, uri, since=0)
    assert codes(first.diagnostics) == []
    assert (await assemble(client, uri))["budget"]["max_input_tokens"] == 128000

    since = len(traffic.published)
    if pulls:  # VS Code and Emacs: the server asks for section `promptls`
        asked = traffic.configuration_requests
        traffic.configuration = {"max_input_tokens": 8000}
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
    else:  # Neovim 0.7 has no workspace/configuration: the settings come with the change
        client.workspace_did_change_configuration(
            lsp.DidChangeConfigurationParams(settings={"promptls": {"max_input_tokens": 8000}})
        )
    second = await published(traffic, uri, since=since)
    assert codes(second.diagnostics) == ["compression-due"]
    assert second.version == first.version  # the same text, re-assembled
    assert (await assemble(client, uri))["budget"]["max_input_tokens"] == 8000
    if pulls:
        assert traffic.configuration_requests > asked


# Watched and open files ---------------------------------------------------------------------


async def test_template_changed_on_disk_reassembles(
    client: LanguageClient, traffic: Traffic, client_name: str, workspace: Path
) -> None:
    await initialize(
        client, client_name, workspace, options={"promptls": {"max_input_tokens": 8000}}
    )
    caps = client_capabilities(client_name)
    conv = workspace / "chat.conv.yaml"
    conv.write_text(CONVERSATION, encoding="utf-8")
    uri = open_document(client, conv)
    assert codes((await published(traffic, uri, since=0)).diagnostics) == ["compression-due"]
    system_before = (await assemble(client, uri))["budget"]["system"]
    if caps.workspace and caps.workspace.did_change_watched_files:
        assert lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES in traffic.registrations

    since = len(traffic.published)
    template = workspace / "prompts" / "ledger.prompt.md"
    template.write_text(LONG_TEMPLATE, encoding="utf-8")
    client.workspace_did_change_watched_files(
        lsp.DidChangeWatchedFilesParams(
            changes=[lsp.FileEvent(uri=template.as_uri(), type=lsp.FileChangeType.Changed)]
        )
    )
    after = await published(traffic, uri, since=since, where=lambda p: len(p.diagnostics) == 2)
    assert codes(after.diagnostics) == ["compression-due", "history-truncated"]
    assert (await assemble(client, uri))["budget"]["system"] > system_before + 1500


async def test_open_template_edits_reassemble_the_conversation(
    client: LanguageClient, traffic: Traffic, client_name: str, workspace: Path
) -> None:
    encoding = await initialize(
        client, client_name, workspace, options={"promptls": {"max_input_tokens": 8000}}
    )
    conv = workspace / "chat.conv.yaml"
    conv.write_text(CONVERSATION, encoding="utf-8")
    uri = open_document(client, conv)
    assert codes((await published(traffic, uri, since=0)).diagnostics) == ["compression-due"]
    template = workspace / "prompts" / "ledger.prompt.md"
    template_uri = open_document(client, template)
    await published(traffic, template_uri, since=0)

    # Type the long text at the end of the open (unsaved) template.
    since = len(traffic.published)
    end = position(TEMPLATE, len(TEMPLATE), encoding)
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=template_uri, version=2),
            content_changes=[
                lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(end, end), text=LONG_TEMPLATE[len(TEMPLATE) :]
                )
            ],
        )
    )
    after = await published(traffic, uri, since=since, where=lambda p: len(p.diagnostics) == 2)
    assert codes(after.diagnostics) == ["compression-due", "history-truncated"]
    assert template.read_text(encoding="utf-8") == TEMPLATE  # the buffer, not the disk


# Edit sequences -----------------------------------------------------------------------------

EDIT_START = """\
settings: {max_input_tokens: 5000}
reminder: 'Cite sources: {{CITATION}}.'
messages:
  - {id: u1, role: user, content: "Reconcile the Q2 export.", token_count: 3000}
  - {id: a1, role: assistant, content: "They agree.", token_count: 3000}
  - {id: u2, role: user, content: "Draft the memo."}
"""
# (old, new) replacements applied in order; each is one incremental change. Grouped into
# notifications: a list holds the changes of one didChange.
EDITS: list[list[tuple[str, str]]] = [
    [("'Cite sources:", "'😀 Cite sources:")],  # insert an emoji before a finding
    [("Reconcile the Q2", "Q2")],  # delete
    [  # multi-line insert, then an emoji inside it, in one notification
        (
            '"They agree.", token_count: 3000}\n',
            '"They agree.", token_count: 3000}\n'
            '  - {id: t9, role: tool, tool_call_id: call_9, content: "stray"}\n'
            '  - {id: u3, role: user, content: "And {{CURENT_DATETIME}}?"}\n',
        ),
        ('"And {{', '"And 🎉🎉 {{'),
    ],
    [("🎉🎉", "🎉")],  # delete one astral character (two UTF-16 units)
    [('memo."}\n', 'memo, 𝔘𝔫𝔦\n    and the 表."}\n')],  # replace across a line break
]


async def test_incremental_edits_match_opening_the_final_text(
    client: LanguageClient, traffic: Traffic, client_name: str, workspace: Path
) -> None:
    encoding = await initialize(client, client_name, workspace)
    path = workspace / "edits.conv.yaml"
    uri = open_document(client, path, EDIT_START)
    await published(traffic, uri, since=0)
    text, version = EDIT_START, 1
    for group in EDITS:
        changes = []
        for old, new in group:
            start = text.index(old)
            changes.append(
                lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(
                        position(text, start, encoding), position(text, start + len(old), encoding)
                    ),
                    text=new,
                )
            )
            text = text[:start] + new + text[start + len(old) :]
        version += 1
        client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=changes,
            )
        )
    edited = await published(traffic, uri, since=0, where=lambda p: p.version == version)

    client.text_document_did_close(
        lsp.DidCloseTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    )
    since = len(traffic.published)
    open_document(client, path, text)
    reopened = await published(traffic, uri, since=since, where=lambda p: p.version == 1)
    assert codes(edited.diagnostics) == [
        "compression-due",
        "history-truncated",
        "orphaned-tool-response",
        "unknown-placeholder",
    ]
    assert edited.diagnostics == reopened.diagnostics
    # The placeholder after the emoji is where the client's encoding says it is.
    [after_emoji] = [d for d in edited.diagnostics if "CITATION" in d.message]
    assert after_emoji.range.start == position(text, text.index("{{CITATION}}"), encoding)


# Errors -------------------------------------------------------------------------------------


async def test_a_failing_request_is_an_error_and_the_server_keeps_working_then_exits_cleanly(
    client: LanguageClient, traffic: Traffic, client_name: str, workspace: Path
) -> None:
    await initialize(client, client_name, workspace)
    conv = workspace / "chat.conv.yaml"
    conv.write_text(CONVERSATION, encoding="utf-8")
    uri = open_document(client, conv)
    await published(traffic, uri, since=0)
    with pytest.raises(JsonRpcException) as bad_argument:
        await bounded(
            client.workspace_execute_command_async(
                lsp.ExecuteCommandParams(command="promptls.assemble", arguments=[42])
            )
        )
    assert bad_argument.value.code == JsonRpcInvalidParams.CODE
    missing = workspace / "missing.conv.json"  # reading it raises inside the handler
    with pytest.raises(JsonRpcException) as no_file:
        await bounded(
            client.workspace_execute_command_async(
                lsp.ExecuteCommandParams(command="promptls.assemble", arguments=[missing.as_uri()])
            )
        )
    assert "missing.conv.json" in str(no_file.value)
    assert len(client.messages) <= 1  # window/showMessage at most once per session
    # Still answering, and still analysing edits.
    assert (await assemble(client, uri))["budget"]["max_input_tokens"] == 128000
    since = len(traffic.published)
    end = position(CONVERSATION, len(CONVERSATION), "utf-16")  # the text is ASCII
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(end, end), text="settings: {max_input_tokens: 5000}\n"
                )
            ],
        )
    )
    after = await published(traffic, uri, since=since, where=lambda p: p.version == 2)
    assert codes(after.diagnostics) == ["compression-due", "history-truncated"]
    # And the session ends cleanly: shutdown answered, exit code 0.
    await shut_down_cleanly(client, traffic)


# Pull diagnostics and progress --------------------------------------------------------------


def _pull_capabilities() -> lsp.ClientCapabilities:
    """VS Code's recorded capabilities plus pull diagnostics (VS Code ≥ 1.74 has them)."""
    caps = client_capabilities("visual-studio-code")
    assert caps.text_document is not None and caps.workspace is not None
    caps.text_document.diagnostic = lsp.DiagnosticClientCapabilities(
        dynamic_registration=False, related_document_support=True
    )
    caps.workspace.diagnostics = lsp.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    return caps


@pytest.mark.parametrize("client_name", ["visual-studio-code"], indirect=True)
async def test_pull_diagnostics(
    client: LanguageClient, traffic: Traffic, client_name: str, workspace: Path
) -> None:
    await initialize(client, client_name, workspace, capabilities=_pull_capabilities())
    conv = workspace / "chat.conv.yaml"
    conv.write_text(CONVERSATION, encoding="utf-8")
    uri = open_document(client, conv)
    doc = lsp.TextDocumentIdentifier(uri=uri)
    report = await bounded(client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(doc)))
    assert isinstance(report, lsp.RelatedFullDocumentDiagnosticReport)
    assert codes(report.items) == []
    again = await bounded(
        client.text_document_diagnostic_async(
            lsp.DocumentDiagnosticParams(doc, previous_result_id=report.result_id)
        )
    )
    assert isinstance(again, lsp.RelatedUnchangedDocumentDiagnosticReport)

    end = position(CONVERSATION, len(CONVERSATION), "utf-16")
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(end, end), text="settings: {max_input_tokens: 5000}\n"
                )
            ],
        )
    )
    changed = await bounded(
        client.text_document_diagnostic_async(
            lsp.DocumentDiagnosticParams(doc, previous_result_id=report.result_id)
        )
    )
    assert isinstance(changed, lsp.RelatedFullDocumentDiagnosticReport)
    assert codes(changed.items) == ["compression-due", "history-truncated"]
    assert traffic.published == []  # a pull client is never pushed to


@pytest.mark.parametrize("client_name", ["visual-studio-code"], indirect=True)
async def test_workspace_diagnostics_report_progress(
    client: LanguageClient, traffic: Traffic, client_name: str, workspace: Path
) -> None:
    await initialize(client, client_name, workspace, capabilities=_pull_capabilities())
    for name in ("a", "b"):
        conv = workspace / f"{name}.conv.yaml"
        conv.write_text(CONVERSATION, encoding="utf-8")
        open_document(client, conv)

    # Server-initiated: window/workDoneProgress/create, then begin … end.
    res = await bounded(
        client.workspace_diagnostic_async(lsp.WorkspaceDiagnosticParams(previous_result_ids=[]))
    )
    assert len(res.items) == 2
    [(_token, reports)] = client.progress_reports.items()
    kinds = [r.kind for r in reports]
    assert kinds[0] == "begin" and kinds[-1] == "end" and kinds.count("report") == 2, kinds
    assert reports[-2].percentage == 100

    # Client-initiated: the request's own token.
    client.progress_reports["wd-1"] = []
    await bounded(
        client.workspace_diagnostic_async(
            lsp.WorkspaceDiagnosticParams(previous_result_ids=[], work_done_token="wd-1")
        )
    )
    assert [r.kind for r in client.progress_reports["wd-1"]] == ["begin", "report", "report", "end"]
    assert len(client.progress_reports) == 2  # no new token was created
