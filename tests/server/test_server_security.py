"""What the language server reads, and what a hostile client or document can make it do.

In-process (``tests.support.inprocess``) with the real analysis thread: workspace folders
(every one a root; ``file:///`` refused), ``promptls.assemble`` of files that are not open
(only regular files inside a workspace folder, off the message loop), malformed requests
(an error reply, never silence), invalid editor settings (shown), and the built-in file
watcher next to a symbolic link to ``/``.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp

from server.lsp.watch import Watcher, folders
from tests.support.inprocess import InProcessClient

CONV = """\
project_files:
  - {file_id: f1, filename: notes.md, path: %s}
messages:
  - {id: u1, role: user, content: "Summarise the notes."}
"""


async def started(
    folders: list[Path] | None = None,
    *,
    root_uri: str | None = None,
    options: dict[str, Any] | None = None,
) -> InProcessClient:
    client = InProcessClient()
    params = lsp.InitializeParams(
        capabilities=lsp.ClientCapabilities(),
        root_uri=root_uri,
        workspace_folders=[lsp.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in folders]
        if folders
        else None,
        initialization_options=options,
    )
    await client.request(lsp.INITIALIZE, params, lsp.InitializeResult)
    client.notify(lsp.INITIALIZED, lsp.InitializedParams())
    await asyncio.sleep(0.05)
    return client


@pytest.fixture
async def cleanup() -> AsyncIterator[list[InProcessClient]]:
    clients: list[InProcessClient] = []
    yield clients
    for c in clients:
        c.shutdown()


def codes(client: InProcessClient, uri: str) -> list[str]:
    snap = client.server.session.snapshots[uri]
    return sorted(d.code for d in snap.diagnostics)


def messages_shown(client: InProcessClient) -> list[str]:
    return [m["params"]["message"] for m in client.sent if m.get("method") == "window/showMessage"]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# Workspace folders ------------------------------------------------------------------------


async def test_every_workspace_folder_is_a_root(
    tmp_path: Path, cleanup: list[InProcessClient]
) -> None:
    first, second, third = (tmp_path / n for n in ("first", "second", "third"))
    for folder in (first, second, third):
        write(folder / "docs" / "notes.md", f"notes of {folder.name}\n")
    client = await started([first, second])
    cleanup.append(client)
    # A conversation in the second folder reads its own files (no path-outside-workspace).
    doc = write(second / "chat.conv.yaml", CONV % "docs/notes.md")
    await client.open(doc.as_uri(), doc.read_text())
    assert "path-outside-workspace" not in codes(client, doc.as_uri())
    layout = client.server.session.snapshots[doc.as_uri()].analysis.assembly.layout  # type: ignore[union-attr]
    assert any("notes of second" in e.message.text for e in layout)
    # ... and not the first folder's files through "..".
    other = write(second / "other.conv.yaml", CONV % "../first/docs/notes.md")
    await client.open(other.as_uri(), other.read_text())
    assert "path-outside-workspace" in codes(client, other.as_uri())
    # A folder added later is a root too; a removed one no longer is.
    client.notify(
        lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS,
        lsp.DidChangeWorkspaceFoldersParams(
            event=lsp.WorkspaceFoldersChangeEvent(
                added=[lsp.WorkspaceFolder(uri=third.as_uri(), name="third")],
                removed=[lsp.WorkspaceFolder(uri=first.as_uri(), name="first")],
            )
        ),
    )
    assert client.server.session.roots == [second, third]
    assert client.server.session.root_for(third / "a" / "b.conv.yaml") == third


async def test_nested_folders_the_innermost_is_the_root(
    tmp_path: Path, cleanup: list[InProcessClient]
) -> None:
    outer, inner = tmp_path / "outer", tmp_path / "outer" / "inner"
    inner.mkdir(parents=True)
    client = await started([outer, inner])
    cleanup.append(client)
    assert client.server.session.root_for(inner / "x.conv.yaml") == inner
    assert client.server.session.root_for(outer / "x.conv.yaml") == outer
    assert client.server.session.root_for(tmp_path / "x.conv.yaml") is None


async def test_the_file_system_root_is_refused_as_a_workspace_folder(
    tmp_path: Path, cleanup: list[InProcessClient]
) -> None:
    secret = write(tmp_path / "secret.md", "the secret\n")
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    client = await started(root_uri="file:///")
    cleanup.append(client)
    assert client.server.session.roots == []
    assert any("file system's root" in m for m in messages_shown(client))
    # A document reads only inside its own project (its .git folder), not the whole disk.
    doc = write(project / "chat.conv.yaml", CONV % str(secret))
    await client.open(doc.as_uri(), doc.read_text())
    assert "path-outside-workspace" in codes(client, doc.as_uri())
    text = str(client.server.session.snapshots[doc.as_uri()].analysis.assembly.layout)  # type: ignore[union-attr]
    assert "the secret" not in text


def test_a_document_outside_the_folders_reads_inside_its_project_never_the_whole_disk(
    tmp_path: Path,
) -> None:
    from server.lsp.session import Session

    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    s = Session()
    s.set_roots([tmp_path / "elsewhere"])
    assert s.document_root(project / "sub" / "chat.conv.yaml") == project
    # A document right under "/" reads nothing around it.
    assert s.document_root(Path("/chat.conv.yaml")) == Path("/chat.conv.yaml")


# promptls.assemble of files that are not open ---------------------------------------------


async def assemble(client: InProcessClient, uri: str) -> dict[str, Any]:
    params = {"command": "promptls.assemble", "arguments": [uri]}
    return await client.request_raw(lsp.WORKSPACE_EXECUTE_COMMAND, params)


async def test_assemble_reads_unopened_files_only_inside_the_workspace(
    tmp_path: Path, cleanup: list[InProcessClient]
) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    write(ws / "docs" / "notes.md", "inside notes\n")
    inside = write(ws / "chat.conv.yaml", CONV % "docs/notes.md")
    away = write(outside / "chat.conv.yaml", CONV % "notes.md")
    link = ws / "link.conv.yaml"
    link.symlink_to(away)
    client = await started([ws])
    cleanup.append(client)

    ok = await assemble(client, inside.as_uri())
    assert "result" in ok and "inside notes" in str(ok["result"])
    for uri in (away.as_uri(), link.as_uri(), "file:///etc/hostname.json"):
        res = await assemble(client, uri)
        assert res["error"]["code"] == -32602, res
        assert "workspace" in res["error"]["message"]


async def test_assemble_of_a_fifo_or_a_folder_answers_at_once(
    tmp_path: Path, cleanup: list[InProcessClient]
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    fifo = ws / "pipe.conv.json"
    os.mkfifo(fifo)
    (ws / "folder.conv.yaml").mkdir()
    client = await started([ws])
    cleanup.append(client)
    for path in (fifo, ws / "folder.conv.yaml"):
        start = time.monotonic()
        res = await assemble(client, path.as_uri())
        assert "regular file" in res["error"]["message"]
        assert time.monotonic() - start < 5
    # Meanwhile the server answers everything else.
    doc = write(ws / "chat.conv.yaml", CONV % "x.md")
    await client.open(doc.as_uri(), doc.read_text())


async def test_assemble_of_a_large_unopened_file_does_not_stall_requests(
    tmp_path: Path, cleanup: list[InProcessClient]
) -> None:
    ws = tmp_path / "ws"
    messages = "".join(
        f'  - {{id: m{i}, role: {"user" if i % 2 == 0 else "assistant"}, content: "take {i}"}}\n'
        for i in range(20_000)
    )
    big = write(ws / "big.conv.yaml", "messages:\n" + messages)
    client = await started([ws])
    cleanup.append(client)
    small = write(ws / "small.conv.yaml", CONV % "x.md")
    await client.open(small.as_uri(), small.read_text())
    task = asyncio.create_task(assemble(client, big.as_uri()))
    await asyncio.sleep(0.05)
    hover = lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=small.as_uri()),
        position=lsp.Position(3, 10),
    )
    await client.request(lsp.TEXT_DOCUMENT_HOVER, hover)
    answered_while_assembling = not task.done()
    res = await task
    assert "result" in res
    assert answered_while_assembling  # the hover did not wait for the assembly


# Malformed requests -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "position",
    [
        {"line": -1, "character": 0},
        {"line": 0, "character": -5},
        {"line": 2**31, "character": 0},
        {"line": 0, "character": 2**40},
        "3:4",
        None,
    ],
    ids=["negative-line", "negative-character", "line-2^31", "character-2^40", "string", "none"],
)
async def test_a_malformed_request_gets_an_error_reply(
    tmp_path: Path, cleanup: list[InProcessClient], position: Any
) -> None:
    client = await started([tmp_path])
    cleanup.append(client)
    doc = write(tmp_path / "chat.conv.yaml", CONV % "x.md")
    await client.open(doc.as_uri(), doc.read_text())
    params: dict[str, Any] = {"textDocument": {"uri": doc.as_uri()}}
    if position is not None:
        params["position"] = position
    for method in (lsp.TEXT_DOCUMENT_HOVER, lsp.TEXT_DOCUMENT_DEFINITION):
        res = await client.request_raw(method, params)
        assert res["error"]["code"] == -32602, res
        assert method in res["error"]["message"]
    # The server goes on answering.
    ok = {"textDocument": {"uri": doc.as_uri()}, "position": {"line": 3, "character": 10}}
    assert "result" in await client.request_raw(lsp.TEXT_DOCUMENT_HOVER, ok)


# Editor settings --------------------------------------------------------------------------


async def test_invalid_editor_settings_are_shown_once(
    tmp_path: Path, cleanup: list[InProcessClient]
) -> None:
    options = {"promptls": {"max_input_tokens": "lots", "no_such_setting": 1}}
    client = await started([tmp_path], options=options)
    cleanup.append(client)
    shown = [m for m in messages_shown(client) if "editor settings" in m]
    assert len(shown) == 1
    assert "max_input_tokens" in shown[0] and "no_such_setting" in shown[0]
    # The same settings again: not shown again. A fixed value: what is left is shown (the
    # unknown key came with initializationOptions, which later settings are merged over).
    for settings in (options["promptls"], {"max_input_tokens": 64000}):
        client.notify(
            lsp.WORKSPACE_DID_CHANGE_CONFIGURATION,
            lsp.DidChangeConfigurationParams(settings={"promptls": settings}),
        )
        await asyncio.sleep(0.05)
    shown = [m for m in messages_shown(client) if "editor settings" in m]
    assert len(shown) == 2
    assert "no_such_setting" in shown[1] and "max_input_tokens" not in shown[1]


# The built-in file watcher ----------------------------------------------------------------


def test_the_watcher_does_not_follow_a_symlink_to_the_root(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "to-root").symlink_to("/")
    (ws / "loop").symlink_to(ws)
    found = folders([ws], frozenset())
    assert sorted(found) == [ws, ws / "sub"]

    seen: list[Path] = []
    changed = threading.Event()

    def on_change(paths: list[Path]) -> None:
        seen.extend(paths)
        changed.set()

    watcher = Watcher([ws], on_change)
    watcher.start()
    try:
        deadline = time.monotonic() + 20
        target = ws / "sub" / "chat.conv.yaml"
        while not changed.is_set() and time.monotonic() < deadline:
            target.write_text(f"messages: []  # {time.monotonic()}\n", encoding="utf-8")
            changed.wait(0.5)
        assert target in seen
        # A folder made later is watched too.
        changed.clear()
        later = ws / "later"
        later.mkdir()
        deadline = time.monotonic() + 20
        while target.parent != later and time.monotonic() < deadline:
            (later / "x.conv.json").write_text(f'{{"t": {time.monotonic()}}}', encoding="utf-8")
            if changed.wait(0.5) and later / "x.conv.json" in seen:
                break
            changed.clear()
        assert later / "x.conv.json" in seen
    finally:
        watcher.stop()


def test_a_change_seen_after_the_message_loop_closed_is_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server that ended without a shutdown leaves its watcher behind: what it sees then
    # has no loop to go to, and must not make the watcher fail and start again forever.
    from server.lsp import session as session_module

    callbacks: list[Any] = []

    class Recorder:
        def __init__(self, roots: list[Path], on_change: Any, skip: frozenset[str]) -> None:
            callbacks.append(on_change)

        def start(self) -> None:
            pass

        def stop(self) -> None:
            pass

    monkeypatch.setattr(session_module, "Watcher", Recorder)
    s = session_module.Session()
    s.set_roots([tmp_path])
    loop = asyncio.new_event_loop()
    s.loop = loop
    seen: list[list[Path]] = []
    s.start_file_watcher(seen.append)
    (changed,) = callbacks
    changed([tmp_path / "a.conv.json"])
    loop.run_until_complete(asyncio.sleep(0))
    assert seen == [[tmp_path / "a.conv.json"]]
    loop.close()
    changed([tmp_path / "b.conv.json"])  # raised "Event loop is closed" before
    assert seen == [[tmp_path / "a.conv.json"]]
