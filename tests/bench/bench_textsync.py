"""Benchmark: the server's text sync of one-character edits to a large conversation.

Feeds one-character ``didChange`` notifications (incremental, UTF-16 positions) to a
``PromptServer``'s protocol in-process, exactly as its stdio reader would, with analyses
switched off, and times per edit: the whole notification (pygls dispatch + our
``did_change``), applying the change to the rope alone (``convert.apply_lsp_changes``),
building the ``TextMap``, and converting 100 diagnostics' ranges to LSP. For comparison it
times what pygls' own text sync costs on the same edits (``TextDocument.apply_change``)
and what ``TextMap.of(str)`` (a full ``LineIndex``) cost before.

    python tests/bench/bench_textsync.py [--doc FILE] [--edits 200]

Without ``--doc`` it generates the 10 MB conversation with ``gen_conversation.py`` (next to
this file) in a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchkit import Sink
from lsprotocol import converters
from lsprotocol import types as lsp
from pygls.workspace import TextDocument

from assembly.diagnostics import Diagnostic, Severity
from assembly.rope import Rope
from assembly.text import TextRange
from server.lsp import convert
from server.lsp.handlers import build_server

GEN = Path(__file__).resolve().parent / "gen_conversation.py"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--doc", type=Path, help="a conversation (default: a generated 10 MB one)")
    ap.add_argument("--edits", type=int, default=200)
    args = ap.parse_args()
    if args.doc is not None:
        if not args.doc.is_file():
            print(f"no such file: {args.doc}", file=sys.stderr)
            return 2
        return asyncio.run(_main(args))
    work = Path(tempfile.mkdtemp(prefix="promptls-bench-"))
    try:
        args.doc = work / "bench10.conv.json"
        size = ["--messages", "10000", "--target-bytes", "10000000"]
        subprocess.run([sys.executable, str(GEN), *size, "--out", str(args.doc)], check=True)
        return asyncio.run(_main(args))
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def _main(args: argparse.Namespace) -> int:
    text = args.doc.read_text(encoding="utf-8")
    print(f"{args.doc}: {len(text):,} code points, {text.count(chr(10)):,} lines")
    rng = random.Random(4)
    offsets = sorted(rng.randrange(len(text)) for _ in range(args.edits))
    rng.shuffle(offsets)

    server = build_server()
    server.protocol.set_writer(Sink(), include_headers=False)
    initialize = lsp.InitializeParams(capabilities=lsp.ClientCapabilities())
    _feed(server, _message(lsp.INITIALIZE, initialize, 1))
    session = server.session
    session.loop = None  # no analyses: only the text sync is measured
    uri = args.doc.resolve().as_uri()
    start = time.perf_counter()
    item = lsp.TextDocumentItem(uri=uri, language_id="json", version=1, text=text)
    _feed(server, _message(lsp.TEXT_DOCUMENT_DID_OPEN, lsp.DidOpenTextDocumentParams(item)))
    print(f"didOpen (Rope.from_str): {(time.perf_counter() - start) * 1000:.1f} ms")

    notification, apply, text_map, ranges = [], [], [], []
    diagnostics = _diagnostics(len(text), rng)
    for version, offset in enumerate(offsets, 2):
        rope = session.documents[uri].text
        m = convert.TextMap.of(rope, session.encoding)
        change = _one_char_change(m, offset)
        params = lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[change],
        )
        apply.append(_time(convert.apply_lsp_changes, rope, [change], session.encoding))
        message = _message(lsp.TEXT_DOCUMENT_DID_CHANGE, params)  # JSON, as read from stdin
        notification.append(_time(_feed, server, message))
        new = session.documents[uri].text
        text_map.append(_time(convert.TextMap.of, new, session.encoding))
        m = convert.TextMap.of(new, session.encoding)
        ranges.append(_time(_to_lsp, m, diagnostics))
    print("per edit (median / p95, ms):")
    _row("didChange notification (dispatch + did_change)", notification)
    _row("  of which applying the change to the rope", apply)
    _row("TextMap.of(rope)", text_map)
    _row("100 diagnostic ranges -> LSP (to_lsp_range)", ranges)

    # Before: pygls' text sync and a full line index per version.
    doc = TextDocument(uri, text)
    pygls_edit = []
    for offset in offsets[:30]:
        line_col = convert.TextMap.of(Rope.from_str(doc.source), "utf-16").index.line_col(offset)
        change = lsp.TextDocumentContentChangePartial(
            range=lsp.Range(lsp.Position(line_col.line, 0), lsp.Position(line_col.line, 0)),
            text="x",
        )
        pygls_edit.append(_time(doc.apply_change, change))
    _row("before: pygls TextDocument.apply_change", pygls_edit)
    source = doc.source
    index = [_time(convert.TextMap.of, source, "utf-16") for _ in range(10)]
    _row("before: TextMap.of(str) (LineIndex)", index)
    m = convert.TextMap.of(source, "utf-16")
    _row(
        "before: 100 diagnostic ranges -> LSP on a str",
        [_time(_to_lsp, m, diagnostics) for _ in range(30)],
    )
    assert str(session.documents[uri].text).count("x") == text.count("x") + len(offsets)
    return 0


_CONVERTER = converters.get_converter()


def _message(method: str, params: Any, msg_id: int | None = None) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    message["params"] = _CONVERTER.unstructure(params)
    if msg_id is not None:
        message["id"] = msg_id
    return json.dumps(message)


def _feed(server: Any, message: str) -> None:
    """What pygls' reader does with a message: parse, structure, dispatch."""
    protocol = server.protocol
    protocol.handle_message(protocol.structure_message(json.loads(message)))


def _one_char_change(m: convert.TextMap, offset: int) -> lsp.TextDocumentContentChangePartial:
    position = convert.to_lsp_position(m, offset)
    return lsp.TextDocumentContentChangePartial(range=lsp.Range(position, position), text="x")


def _diagnostics(n: int, rng: random.Random) -> list[Diagnostic]:
    res = []
    for _ in range(100):
        start = rng.randrange(n - 200)
        rng_ = TextRange(start, start + rng.randrange(200))
        res.append(Diagnostic("x", Severity.INFO, "m", rng_))
    return res


def _to_lsp(m: convert.TextMap, diagnostics: list[Diagnostic]) -> None:
    for d in diagnostics:
        convert.to_lsp_range(m, d.range)


def _time(f: Callable[..., object], *args: Any) -> float:
    start = time.perf_counter()
    f(*args)
    return time.perf_counter() - start


def _row(label: str, samples: list[float]) -> None:
    ms = sorted(s * 1000 for s in samples)
    p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
    print(f"  {label:<50} {statistics.median(ms):8.3f} {p95:8.3f}")


if __name__ == "__main__":
    raise SystemExit(main())
