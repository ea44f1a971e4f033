"""Benchmark: the server's share of a keystroke after the analysis, in process, per checkout.

``bench_lsp.py --kinds`` times a keystroke over stdio, from its ``didChange`` to the
``publishDiagnostics`` of its version, which on a loaded machine moves by a third between
runs. This one times, in CPU time of one process (steady under load), what the server does
with each analysis of the same edit kinds on the same generated document (``--corpus``,
``--size``, ``--format``): the analysis itself (``AnalysisHost``, as ``bench_rules_kinds``
runs it), converting its findings to LSP (``convert.to_lsp_diagnostics`` on the rope, in
``--encoding``, with the version's ``TextMap`` made from the last one's as the server makes
it, where the checkout can), and serializing the notification as the server writes it
(``text_document_publish_diagnostics`` on a built server writing to nothing). A JSON Lines
document carries about 130 findings spread over its text (the JSON one 3), so its
conversion reads as many places of the rope.

Each checkout (``--root``, repeatable; default this one) runs in its own process with its
own ``assembly`` and ``server``, in turn, so a before/after comparison comes from one run:

    python tests/bench/bench_publish.py --root /path/to/before --root . --format jsonl

Medians in milliseconds of CPU per keystroke.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import statistics
import time
from pathlib import Path
from typing import Any

from benchkit import (
    Sink,
    bench_lsp,
    kind_rows,
    kinds_document,
    kinds_options,
    ms,
    print_table,
    run_kinds,
    worker_document,
)

PARTS = ("analysis", "convert", "serialize")


def main() -> int:
    ap = kinds_options(__doc__.splitlines()[0], "jsonl", 8)
    ap.add_argument("--encoding", default="utf-16", choices=("utf-16", "utf-8", "utf-32"))
    args = ap.parse_args()
    if args.worker:
        return _worker(args)
    doc = kinds_document(args)
    print(f"{doc.name}: {doc.stat().st_size:,} bytes, positions in {args.encoding}", flush=True)
    results = run_kinds(__file__, args, ["--encoding", args.encoding])
    head = ["edit kind", "findings"]
    for root, _ in results:
        head += [f"{p} ({Path(root).name})" if p == PARTS[0] else p for p in PARTS]
        head.append("publish")

    def cells(got: dict[str, Any]) -> list[str]:
        publish = [c + s for c, s in zip(got["convert"], got["serialize"], strict=True)]
        return [ms(statistics.median(v)) for v in (*(got[p] for p in PARTS), publish)]

    table = [head]
    for row in kind_rows(results, len(PARTS) + 1, cells):
        row.insert(1, str(results[0][1][row[0]]["findings"]))
        table.append(row)
    print()
    print_table(table)
    print("\nMedians of CPU per keystroke; publish = convert + serialize.")
    return 0


def _worker(args: argparse.Namespace) -> int:
    doc, text = worker_document(args)
    from lsprotocol import types as lsp

    from assembly.host import AnalysisHost, Edit
    from assembly.rope import Rope
    from server.lsp import convert
    from server.lsp.handlers import build_server
    from tests.support.engine import analyze

    uri = doc.as_uri()
    server = build_server()
    server.protocol.set_writer(Sink(), include_headers=True)
    res: dict[str, dict[str, Any]] = {}

    def cpu(f: Any) -> tuple[float, Any]:
        c = time.process_time()
        out = f()
        return time.process_time() - c, out

    # As the server makes a version's map: from the last one where the checkout can.
    carries = "previous" in inspect.signature(convert.TextMap.of).parameters
    last: list[Any] = []

    def record(kind: str, rope: Rope, run: Any) -> None:
        spent, a = cpu(run)
        gc.freeze()  # as the server does after each analysis
        c = time.process_time()
        if carries and last:
            m = convert.TextMap.of(rope, args.encoding, previous=last[0])
        else:
            m = convert.TextMap.of(rope, args.encoding)
        mapping = time.process_time() - c
        last[:] = [m]
        converting, items = cpu(
            lambda: convert.to_lsp_diagnostics(m, a.diagnostics, uri, other_texts=a.other_texts)
        )
        converting += mapping
        params = lsp.PublishDiagnosticsParams(uri=uri, diagnostics=items, version=1)
        serializing, _ = cpu(lambda: server.text_document_publish_diagnostics(params))
        got = res.setdefault(kind, {"findings": len(items), **{p: [] for p in PARTS}})
        for part, t in zip(PARTS, (spent, converting, serializing), strict=True):
            got[part].append(t)

    gc.disable()
    host = AnalysisHost()
    rope = Rope.from_str(text)
    record("open", rope, lambda: analyze(doc, text=rope, host=host))
    for kind, make in bench_lsp()._KINDS:
        for edit in make(str(rope), args.format, args.per_kind):
            if edit is None:
                continue
            start, end, new = edit
            rope = rope.edit(start, end, new)
            change = Edit.replace(start, end, new)
            record(kind, rope, lambda r=rope, e=change: analyze(doc, text=r, host=host, edit=e))
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
