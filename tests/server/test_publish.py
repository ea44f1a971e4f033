"""``publishDiagnostics`` after each keystroke: what a fresh conversion would send.

The server serializes each finding once per look (``handlers.documents.publish``): a
finding whose LSP positions, words and related places are those of one published for the
previous version reuses that serialization and only its ``data`` (its offsets) is written
again. Checked through the server's own path (in process: ``didChange`` with ranges in
UTF-16, the analysis, the publish) on a generated JSON Lines conversation with findings
spread over its lines, non-ASCII text before them, and edits that type within a line,
split a line, join two and undo: every notification equals the one pygls would have
written for ``convert.to_lsp_diagnostics`` on a fresh map of the version's text.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp

from server.lsp.convert import TextMap, to_lsp_diagnostics, to_lsp_position
from tests.bench.gen_conversation import conversation as generated
from tests.support.inprocess import TIMEOUT_S, WATCHING_CLIENT, InProcessClient


def _document() -> str:
    doc = generated(600, 200_000, 5)
    settings = {**doc["settings"], "max_input_tokens": 8_000}  # files dropped with history
    lines = [{"settings": settings}, *doc["messages"]]
    lines[3] = {**lines[3], "content": f"naïve 😀 {lines[3].get('content') or ''}"}
    return "\n".join(json.dumps(m, ensure_ascii=False) for m in lines) + "\n"


async def _published(client: InProcessClient, uri: str, version: int) -> dict[str, Any]:
    async with asyncio.timeout(TIMEOUT_S):
        while True:
            for m in reversed(client.sent):
                params = m.get("params") or {}
                if (
                    m.get("method") == lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS
                    and params.get("uri") == uri
                    and params.get("version") == version
                ):
                    return params  # type: ignore[no-any-return]
            await asyncio.sleep(0.005)


async def _opened(client: InProcessClient, tmp_path: Path) -> tuple[str, str]:
    """Initialize ``client`` and open the generated document in it: its URI and text."""
    await client.initialize(WATCHING_CLIENT)
    path = tmp_path / "gen.conv.jsonl"
    text = _document()
    path.write_text(text, encoding="utf-8")
    uri = path.as_uri()
    await client.open(uri, text, language_id="jsonl")
    return uri, text


def _changed(client: InProcessClient, uri: str, version: int, rng: lsp.Range, new: str) -> None:
    client.notify(
        lsp.TEXT_DOCUMENT_DID_CHANGE,
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[lsp.TextDocumentContentChangePartial(range=rng, text=new)],
        ),
    )


def _fresh(client: InProcessClient, uri: str, text: str, version: int) -> dict[str, Any]:
    snap = client.server.session.snapshots[uri]
    assert str(snap.text_map.text) == text
    items = to_lsp_diagnostics(
        TextMap.of(text, "utf-16"), snap.diagnostics, uri, other_texts=snap.other_texts
    )
    params = lsp.PublishDiagnosticsParams(uri=uri, diagnostics=items, version=version)
    return client.converter.unstructure(params)  # type: ignore[no-any-return]


def _edit(rnd: random.Random, text: str) -> tuple[int, int, str]:
    lines = [i + 1 for i, c in enumerate(text[:-1]) if c == "\n"]
    at = rnd.choice(lines)
    kind = rnd.randrange(4)
    if kind == 0:  # type within a line
        p = at + rnd.randrange(2, 40)
        return p, p, rnd.choice("xé😀")
    if kind == 1:  # split a line
        p = at + rnd.randrange(2, 40)
        return p, p, "\n"
    if kind == 2:  # join a line with the one before
        return at - 1, at, ""
    return at, at, '{"role": "user", "content": "new"}\n'  # a line pasted


async def test_each_publish_equals_a_fresh_conversion(tmp_path: Path) -> None:
    client = InProcessClient()
    try:
        uri, text = await _opened(client, tmp_path)
        got = await _published(client, uri, 1)
        assert len(got["diagnostics"]) > 8
        assert got == _fresh(client, uri, text, 1)
        rnd = random.Random(3)
        reused = 0
        undo = (0, 0, "")
        for version in range(2, 24):
            last = client.server.session.snapshots[uri]
            if version % 4 == 0:  # undo the last edit
                start, end, new = undo
            else:
                start, end, new = _edit(rnd, text)
            m = TextMap.of(text, "utf-16")
            rng = lsp.Range(to_lsp_position(m, start), to_lsp_position(m, end))
            undo = (start, start + len(new), text[start:end])
            text = text[:start] + new + text[end:]
            _changed(client, uri, version, rng, new)
            got = await _published(client, uri, version)
            assert got == _fresh(client, uri, text, version), (version, start, end, new)
            snap = client.server.session.snapshots[uri]
            reused += sum(v is last.published.get(k) for k, v in snap.published.items())
        assert reused > 100  # (most findings kept their lines and words)
    finally:
        client.shutdown()


async def test_a_pasted_line_moves_every_later_finding_without_serializing_it_again(
    tmp_path: Path,
) -> None:
    # A line pasted near the start moves every finding after it down a line: each one's
    # JSON around its ranges is the previous publish's, its ranges are the new ones.
    client = InProcessClient()
    try:
        uri, text = await _opened(client, tmp_path)
        first = await _published(client, uri, 1)
        last = client.server.session.snapshots[uri]
        at = text.index("\n", text.index("\n") + 1) + 1  # the start of the third line
        new = '{"role": "user", "content": "pasted"}\n'
        m = TextMap.of(text, "utf-16")
        pos = to_lsp_position(m, at)
        text = text[:at] + new + text[at:]
        _changed(client, uri, 2, lsp.Range(pos, pos), new)
        got = await _published(client, uri, 2)
        assert got == _fresh(client, uri, text, 2)
        moved = [
            (a, b)
            for a, b in zip(first["diagnostics"], got["diagnostics"], strict=False)
            if a["range"]["start"]["line"] + 1 == b["range"]["start"]["line"]
        ]
        assert len(moved) > 8
        snap = client.server.session.snapshots[uri]
        assert snap.published and all(v is last.published.get(k) for k, v in snap.published.items())
    finally:
        client.shutdown()
