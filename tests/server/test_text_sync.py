"""Text sync: ``didOpen``/``didChange``/``didClose`` keep our documents as ropes, not pygls.

A real ``PromptServer`` in-process (``tests.support.inprocess``). Edits are made the way a
client makes them: a random offset range of the client's own ``str`` is turned into an LSP
range with the ``str`` path of ``server.lsp.convert`` (a ``LineIndex``) in the negotiated
encoding, sent as an incremental change, and the client's ``str`` is spliced. The server's
rope, edited through the rope's own line index, must equal the client's text after every
notification, and pygls must hold no copy of the document.
"""

from __future__ import annotations

import asyncio
import random
import re
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types as lsp

from assembly.rope import Rope
from assembly.text import TextRange
from server.lsp.convert import TextMap, from_lsp_position, to_lsp_position, to_lsp_range
from tests.support.inprocess import InProcessClient

ENCODINGS = ("utf-8", "utf-16", "utf-32")
START = (
    "messages:\r\n"
    '  - {id: u1, role: user, content: "Summarise 数据 for Q3 🙂"}\r\n'
    "  - {id: a1, role: assistant, content: 'line\u2028separator stays on one line'}\n"
    "  - {id: u2, role: user, content: |\n      naïve 👨‍💻 text\n      more}\n"
)
INSERTS = ("", "x", "\n", "\r\n", "é", "😀", "\u2028", "数据", "  - {id: u9, role: user}\n")


async def started(encoding: str) -> InProcessClient:
    client = InProcessClient()
    general = lsp.GeneralClientCapabilities(position_encodings=[encoding])
    res = await client.initialize(lsp.ClientCapabilities(general=general))
    assert res.capabilities.position_encoding == encoding
    return client


@pytest.fixture(params=ENCODINGS)
async def client(request: pytest.FixtureRequest) -> AsyncIterator[InProcessClient]:
    res = await started(request.param)
    yield res
    res.shutdown()


def check_server_text(client: InProcessClient, uri: str, text: str) -> None:
    doc = client.server.session.documents[uri]
    assert str(doc.text) == text
    assert doc.text.line_count == len(re.split(r"\r\n|\r|\n", text))
    assert uri not in client.server.workspace.text_documents  # pygls keeps no copy


def change(
    client: InProcessClient,
    uri: str,
    version: int,
    changes: list[lsp.TextDocumentContentChangeEvent],
) -> None:
    client.notify(
        lsp.TEXT_DOCUMENT_DID_CHANGE,
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=changes,
        ),
    )


def random_change(
    rng: random.Random, text: str, encoding: str
) -> tuple[lsp.TextDocumentContentChangePartial, str]:
    """A change as a client sends it, and the client's text after it."""
    start = rng.randint(0, len(text))
    end = min(len(text), start + rng.choice([0, 0, 1, 2, 7, 40]))
    # A client never places a position inside a "\r\n" or a surrogate pair: LSP has no
    # position there (the conversion puts it at the line's end), so neither do we.
    start, end = (
        o - 1 if 0 < o < len(text) and text[o - 1 : o + 1] == "\r\n" else o for o in (start, end)
    )
    new = rng.choice(INSERTS)
    rng_lsp = to_lsp_range(TextMap.of(text, encoding), TextRange(start, end))
    res = lsp.TextDocumentContentChangePartial(range=rng_lsp, text=new)
    return res, text[:start] + new + text[end:]


async def test_incremental_changes_edit_the_servers_rope(
    client: InProcessClient, tmp_path: Path
) -> None:
    uri = (tmp_path / "chat.conv.yaml").as_uri()
    encoding = client.server.session.encoding
    await client.open(uri, START)
    check_server_text(client, uri, START)
    rng = random.Random(encoding)
    text = START
    for version in range(2, 60):
        changes: list[lsp.TextDocumentContentChangeEvent] = []
        for _ in range(rng.randint(1, 3)):  # each change is relative to the one before
            c, text = random_change(rng, text, encoding)
            changes.append(c)
        change(client, uri, version, changes)
        check_server_text(client, uri, text)
    await client.analysed(uri, 59)
    change(client, uri, 60, [lsp.TextDocumentContentChangeWholeDocument(text=START)])
    check_server_text(client, uri, START)


async def test_a_line_separator_is_not_a_line_break(
    client: InProcessClient, tmp_path: Path
) -> None:
    """pygls splits lines at U+2028 (``str.splitlines``); LSP and this server do not."""
    uri = (tmp_path / "sep.conv.yaml").as_uri()
    await client.open(uri, "a\u2028b\nc\u2029d\r\ne")
    insert = lsp.Range(lsp.Position(1, 0), lsp.Position(1, 0))
    change(client, uri, 2, [lsp.TextDocumentContentChangePartial(range=insert, text="X")])
    check_server_text(client, uri, "a\u2028b\nXc\u2029d\r\ne")
    past_end = lsp.Range(lsp.Position(1, 99), lsp.Position(2, 0))  # clamped: the "\r\n"
    change(client, uri, 3, [lsp.TextDocumentContentChangePartial(range=past_end, text="|")])
    check_server_text(client, uri, "a\u2028b\nXc\u2029d|e")


async def test_a_change_makes_no_system_call_for_the_path(
    client: InProcessClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The document's resolved path is made when it opens; a keystroke's handling (on the
    message loop's thread) does not resolve it again."""
    uri = (tmp_path / "c.conv.yaml").as_uri()
    await client.open(uri, START)
    resolved = client.server.session.documents[uri].real_path
    assert resolved == (tmp_path / "c.conv.yaml").resolve()
    here = threading.get_ident()
    calls: list[Path] = []
    resolve = Path.resolve

    def counted(self: Path, strict: bool = False) -> Path:
        if threading.get_ident() == here:
            calls.append(self)
        return resolve(self, strict)

    monkeypatch.setattr(Path, "resolve", counted)
    insert = lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
    for version in range(2, 7):
        change(client, uri, version, [lsp.TextDocumentContentChangePartial(range=insert, text="#")])
    assert calls == []
    assert client.server.session.documents[uri].real_path is resolved
    await client.analysed(uri, 6)


async def test_close_forgets_the_document(client: InProcessClient, tmp_path: Path) -> None:
    uri = (tmp_path / "c.conv.yaml").as_uri()
    await client.open(uri, START)
    client.notify(
        lsp.TEXT_DOCUMENT_DID_CLOSE,
        lsp.DidCloseTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri)),
    )
    assert uri not in client.server.session.documents
    assert uri not in client.server.workspace.text_documents


async def test_other_documents_stay_with_pygls(client: InProcessClient, tmp_path: Path) -> None:
    uri = (tmp_path / "notes.md").as_uri()
    client.notify(
        lsp.TEXT_DOCUMENT_DID_OPEN,
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(
                uri=uri, language_id="markdown", version=1, text="ab"
            )
        ),
    )
    insert = lsp.Range(lsp.Position(0, 1), lsp.Position(0, 1))
    change(client, uri, 2, [lsp.TextDocumentContentChangePartial(range=insert, text="X")])
    assert client.server.workspace.get_text_document(uri).source == "aXb"
    assert uri not in client.server.session.documents


PIECES = ("a", "é", " ", "\n", "\r\n", "\r", "中文", "😀", "\u2028", "x" * 30)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join), st.data())
def test_a_rope_converts_as_its_str(text: str, data: st.DataObject) -> None:
    """Positions and ranges in every encoding agree between a rope's map and a str's."""
    for encoding in ENCODINGS:
        on_str = TextMap.of(text, encoding)
        on_rope = TextMap.of(Rope.from_str(text, chunk_size=3), encoding)
        for offset in range(len(text) + 2):
            position = to_lsp_position(on_str, offset)
            assert to_lsp_position(on_rope, offset) == position
            assert from_lsp_position(on_rope, position) == from_lsp_position(on_str, position)
        for _ in range(10):
            start = data.draw(st.integers(0, len(text) + 1))
            end = data.draw(st.integers(start, len(text) + 1))
            expected = lsp.Range(to_lsp_position(on_str, start), to_lsp_position(on_str, end))
            assert to_lsp_range(on_rope, TextRange(start, end)) == expected
            assert to_lsp_range(on_str, TextRange(start, end)) == expected
            line = data.draw(st.integers(0, text.count("\n") + 1))
            position = lsp.Position(line, data.draw(st.integers(0, 40)))
            assert from_lsp_position(on_rope, position) == from_lsp_position(on_str, position)


def client_position(text: str, offset: int, encoding: str) -> lsp.Position:
    """An LSP position as a client computes it, written independently of ``convert``:
    lines end at "\\n", "\\r\\n" and a lone "\\r" (LSP 3.17, "Text Documents")."""
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    line = max(i for i, s in enumerate(starts) if s <= offset)
    before = text[starts[line] : offset]
    if encoding == "utf-32":
        units = len(before)
    else:
        units = len(before.encode("utf-16-le" if encoding == "utf-16" else "utf-8"))
        units //= 2 if encoding == "utf-16" else 1
    return lsp.Position(line, units)


async def test_lone_carriage_returns_end_lines_as_the_client_counts_them(
    client: InProcessClient, tmp_path: Path
) -> None:
    uri = (tmp_path / "cr.conv.yaml").as_uri()
    encoding = client.server.session.encoding
    text = 'messages:\r  - {id: u1, role: user, content: "old mac 😀"}\r\r  - {id: a1}\n'
    await client.open(uri, text)
    rng = random.Random(11)
    for version in range(2, 120):
        start = rng.randint(0, len(text))
        end = min(len(text), start + rng.choice([0, 1, 3]))
        # A client never places a position inside a "\r\n" or a surrogate pair.
        start, end = (o - 1 if text[o - 1 : o + 1] == "\r\n" else o for o in (start, end))
        new = rng.choice(["\r", "\n", "\r\n", "x", "😀", "\u2028", ""])
        a, b = client_position(text, start, encoding), client_position(text, end, encoding)
        edit = lsp.TextDocumentContentChangePartial(range=lsp.Range(a, b), text=new)
        change(client, uri, version, [edit])
        text = text[:start] + new + text[end:]
        check_server_text(client, uri, text)


@pytest.mark.parametrize("name", ["chat.conv.json", "chat.conv.jsonl"])
async def test_a_byte_order_mark_the_editor_sends_hides_no_message(
    client: InProcessClient, tmp_path: Path, name: str
) -> None:
    """A text opened and edited with its file's BOM (U+FEFF first, which some editors
    send in ``didOpen``) reads every message, as the file read from disk does: the
    unanswered call is found, and stays found after an edit in the first line."""
    call = (
        '{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": '
        '"function", "function": {"name": "f", "arguments": "{}"}}]}'
    )
    user = '{"role": "user", "content": "hi"}'
    body = f"[{user},\n{call}]\n" if name.endswith(".json") else f"{user}\n{call}\n"
    uri = (tmp_path / name).as_uri()
    await client.open(uri, "\ufeff" + body, language_id="json")
    for version in (1, 2):
        snap = client.server.session.snapshots[uri]
        assert snap.analysis is not None
        assert len(snap.analysis.conversation.messages) == 2
        codes = [d.code for d in snap.analysis.diagnostics]
        assert "unanswered-tool-call" in codes and "syntax-error" not in codes, codes
        if version == 1:
            text = "\ufeff" + body
            at = text.index('hi"') + 2
            edit = to_lsp_range(TextMap.of(text, client.server.session.encoding), TextRange(at, at))
            change(client, uri, 2, [lsp.TextDocumentContentChangePartial(range=edit, text="!")])
            await client.analysed(uri, 2)
    assert str(client.server.session.documents[uri].text).startswith("\ufeff")
    assert client.server.session.snapshots[uri].analysis.conversation.messages[0].content == "hi!"


async def test_the_server_keeps_nothing_of_a_notification_once_handled(
    client: InProcessClient, tmp_path: Path
) -> None:
    """pygls keeps the future of every handler it runs for ``$/cancelRequest``, and drops
    only a request's: every ``didChange`` (and each step of its built-in handler) left one
    behind for the server's whole life. Now each goes once done, as do requests'."""
    uri = (tmp_path / "c.conv.yaml").as_uri()
    await client.open(uri, START)
    futures = client.server.protocol._request_futures
    text = START
    for version in range(2, 62):
        text = text.replace("Q3", "Q4" if version % 2 else "Q3")
        client.change(uri, version, text)
        await client.request(
            lsp.TEXT_DOCUMENT_HOVER,
            lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(1, 6)),
        )
    await client.analysed(uri, 61)
    await asyncio.sleep(0.05)  # (a done callback of an asyncio future runs on the loop)
    assert len(futures) <= 2, list(futures.values())[:3]
