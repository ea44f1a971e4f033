"""Benchmark: the language server's memory over a long edit session (run on demand).

Opens one document in ``promptls serve`` over stdio (a benchmark conversation from
``tests/bench/gen_conversation.py`` of ``--size`` MB in ``--format`` JSON, JSON Lines or
YAML, or with ``--format prompt`` a prompt template of ``--size`` × 100 kB), then types a
character and deletes it at ``--places`` places in message texts (prose lines of a
template) in turn, ``--pairs`` times, waiting for each version's diagnostics as an editor
shows them; it asks a hover every fifth pair and the outline and the folding ranges every
tenth. The server's resident memory (``VmRSS`` from ``/proc``, Linux) is read after the
open and every ``--every`` pairs. A server that keeps something of every edit grows
without end; one whose caches are bounded levels off once they are full (the count cache
and the re-read memos, ``docs/architecture.md``). One row per checkout (``--root``,
repeatable; this one by default), each run in its own server.

``--open-close N`` soaks the other way documents come and go: N copies of the document,
each opened (and analysed), edited once and closed in turn, the memory read every
``--every`` documents: a server that keeps a closed document's state grows with each.

    python tests/bench/bench_soak.py [--size 1] [--format json] [--pairs 10000] [--every 1000]
    python tests/bench/bench_soak.py --open-close 500 --every 50
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchkit import bench_lsp, print_table

ROOT = Path(__file__).resolve().parents[2]
GEN = Path(__file__).resolve().parent / "gen_conversation.py"


def _document(folder: Path, size: int, fmt: str) -> Path:
    if fmt != "prompt":
        return bench_lsp()._generate(folder, size, fmt)  # type: ignore[no-any-return]
    out = folder / f"soak-{size}.prompt.md"
    if not out.is_file():
        cmd = [sys.executable, str(GEN), "--prompt", "--target-bytes", str(size * 100_000)]
        subprocess.run([*cmd, "--out", str(out)], check=True)
    return out


def _places(text: str, fmt: str, n: int) -> list[int]:
    """``n`` offsets spread over the document, a few characters into a message's text (a
    prose line's, in a template or a YAML block)."""
    found: list[int] = []
    if fmt in ("json", "jsonl"):
        key = '"content": "'
        i = text.find(key)
        while i != -1:
            at = i + len(key) + 3
            if not any(c in text[i + len(key) : at + 1] for c in '\\"'):
                found.append(at)
            i = text.find(key, i + 1)
    else:
        offset = 0
        for line in text.splitlines(keepends=True):
            body = line.lstrip(" ")
            if len(body) > 20 and body[:4].isalpha():
                found.append(offset + len(line) - len(body) + 3)
            offset += len(line)
    step = max(1, len(found) // n)
    return found[::step][:n]


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@contextlib.contextmanager
def _server(root: Path, doc: Path, fmt: str, name: str) -> Iterator[tuple[Any, Any, str, str]]:
    """``promptls serve`` of checkout ``root`` with ``doc`` opened: this checkout's
    ``bench_lsp`` module, the connection, the text and its language id; shut down after."""
    bl = bench_lsp()
    text = doc.read_text(encoding="utf-8")
    log = doc.parent / f"{name}-{root.name}.stderr.log"
    rpc = bl.Rpc([sys.executable, "-m", "server.cli", "serve"], cwd=root, stderr=log)
    language = "markdown" if fmt == "prompt" else fmt
    try:
        bl._start(rpc, doc, text, language)
        yield bl, rpc, text, language
    finally:
        rpc.close()


def _soak(root: Path, doc: Path, fmt: str, args: argparse.Namespace) -> list[float]:
    uri = doc.as_uri()
    with _server(root, doc, fmt, "soak") as (bl, rpc, text, _):
        rss = [_rss_mb(rpc.proc.pid)]
        places = _places(text, fmt, args.places)
        version = 1
        for pair in range(1, args.pairs + 1):
            at = places[pair % len(places)]
            line, col = _position(text, at)
            for change in (
                {"range": _range(line, col, line, col), "text": "x"},
                {"range": _range(line, col, line, col + 1), "text": ""},
            ):
                version += 1
                bl._did_change(rpc, uri, version, change)
                rpc.wait(bl._diagnostics_of(uri, version))
                rpc.drop(bl._diagnostics_of(uri, None))
            doc_id = {"textDocument": {"uri": uri}}
            if pair % 5 == 0:
                request_id, _ = rpc.request(
                    "textDocument/hover", {**doc_id, "position": {"line": line, "character": col}}
                )
                rpc.response(request_id)
            if pair % 10 == 0:
                for method in ("textDocument/documentSymbol", "textDocument/foldingRange"):
                    request_id, _ = rpc.request(method, doc_id)
                    rpc.response(request_id)
            if pair % args.every == 0:
                rss.append(_rss_mb(rpc.proc.pid))
    return rss


def _open_close(root: Path, doc: Path, fmt: str, args: argparse.Namespace) -> list[float]:
    with _server(root, doc, fmt, "soak-open-close") as (bl, rpc, text, language):
        rss = [_rss_mb(rpc.proc.pid)]
        line, col = _position(text, _places(text, fmt, 1)[0])
        for k in range(1, args.open_close + 1):
            copy = doc.with_name(f"copy{k}-{doc.name}")
            copy.write_text(text, encoding="utf-8")
            uri = copy.as_uri()
            item = {"uri": uri, "languageId": language, "version": 1, "text": text}
            rpc.notify("textDocument/didOpen", {"textDocument": item})
            rpc.wait(bl._diagnostics_of(uri, 1))
            bl._did_change(rpc, uri, 2, {"range": _range(line, col, line, col), "text": "x"})
            rpc.wait(bl._diagnostics_of(uri, 2))
            rpc.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
            copy.unlink()
            rpc.drop(lambda m: m.get("method") == "textDocument/publishDiagnostics")
            if k % args.every == 0:
                rss.append(_rss_mb(rpc.proc.pid))
    return rss


def _position(text: str, offset: int) -> tuple[int, int]:
    """LSP line and UTF-16 character of ``offset``."""
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    return line, len(text[start:offset].encode("utf-16-le")) // 2


def _range(l0: int, c0: int, l1: int, c1: int) -> dict[str, Any]:
    return {"start": {"line": l0, "character": c0}, "end": {"line": l1, "character": c1}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", action="append", type=Path, help="a checkout (repeatable)")
    ap.add_argument("--size", type=int, default=1, choices=(1, 10))
    ap.add_argument("--format", default="json", choices=("json", "jsonl", "yaml", "prompt"))
    ap.add_argument("--pairs", type=int, default=10_000)
    ap.add_argument("--every", type=int, default=1_000)
    ap.add_argument("--places", type=int, default=200)
    ap.add_argument("--corpus", type=Path, help="reuse or create the document in this folder")
    ap.add_argument("--open-close", type=int, default=0, metavar="N", help="see above")
    args = ap.parse_args()
    if args.corpus is None:
        args.corpus = Path(tempfile.mkdtemp(prefix="promptls-soak-"))
        atexit.register(shutil.rmtree, args.corpus, ignore_errors=True)
    args.corpus.mkdir(parents=True, exist_ok=True)
    doc = _document(args.corpus, args.size, args.format)
    roots = args.root or [ROOT]
    rows = []
    for root in roots:
        soak = _open_close if args.open_close else _soak
        rss = soak(root.resolve(), doc, args.format, args)
        rows.append([str(root), *(f"{mb:.0f}" for mb in rss)])
    marks = [f"{k * args.every:,}" for k in range(len(rows[0]) - 1)]
    what = "documents opened, edited and closed" if args.open_close else "pairs"
    print(f"VmRSS (MB) after the open and every {args.every:,} {what}, {doc.name}:")
    print_table([["checkout", *marks], *rows])
    return 0


if __name__ == "__main__":
    sys.exit(main())
