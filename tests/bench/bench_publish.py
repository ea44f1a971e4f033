"""Benchmark: the server's share of a keystroke after the analysis, in process, per checkout.

``bench_lsp.py --kinds`` times a keystroke over stdio, from its ``didChange`` to the
``publishDiagnostics`` of its version, which on a loaded machine moves by a third between
runs. This one times, in CPU time of one process (steady under load), what the server does
with each analysis of the same edit kinds on the same generated document (``--corpus``,
``--size``, ``--format``): the analysis itself (``AnalysisHost``, as ``bench_rules_kinds``
runs it), then its publishing as a push client gets it: the version's ``TextMap`` made
from the last one's as the server makes it (where the checkout can), and the checkout's
own ``handlers.documents.publish`` (converting the findings to LSP, in ``--encoding``, and
serializing the notification) on a built server writing to nothing, given the last
snapshot where the checkout takes it. A JSON Lines document carries about 130 findings
spread over its text (the JSON one 3), so its publishing reads as many places of the rope.

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

PARTS = ("analysis", "publish")


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

    def cells(got: dict[str, Any]) -> list[str]:
        return [ms(statistics.median(got[p])) for p in PARTS]

    table = [head]
    for row in kind_rows(results, len(PARTS), cells):
        row.insert(1, str(results[0][1][row[0]]["findings"]))
        table.append(row)
    print()
    print_table(table)
    print("\nMedians of CPU per keystroke; publish: the map, converting and serializing.")
    return 0


def _worker(args: argparse.Namespace) -> int:
    doc, text = worker_document(args)
    from assembly.host import AnalysisHost, Edit
    from assembly.rope import Rope
    from server.lsp import convert
    from server.lsp.handlers import build_server, documents
    from server.lsp.state import Snapshot
    from tests.support.engine import analyze

    uri = doc.as_uri()
    server = build_server()
    server.protocol.set_writer(Sink(), include_headers=True)
    res: dict[str, dict[str, Any]] = {}

    def cpu(f: Any) -> tuple[float, Any]:
        c = time.process_time()
        out = f()
        return time.process_time() - c, out

    # As the server makes a version's map: from the last one where the checkout can; and
    # publishes it, given the last snapshot where the checkout takes it.
    carries = "previous" in inspect.signature(convert.TextMap.of).parameters
    follows = "previous" in inspect.signature(documents.publish).parameters
    last: list[Any] = []

    def publish(rope: Rope, a: Any) -> int:
        if carries and last:
            m = convert.TextMap.of(rope, args.encoding, previous=last[0].text_map)
        else:
            m = convert.TextMap.of(rope, args.encoding)
        snap = Snapshot(uri, 1, m, a, 0.0)
        if follows and last:
            documents.publish(server, snap, last[0])
        else:
            documents.publish(server, snap)
        last[:] = [snap]
        return len([d for d in a.diagnostics if d.path is None])

    def record(kind: str, rope: Rope, run: Any) -> None:
        spent, a = cpu(run)
        gc.freeze()  # as the server does after each analysis
        publishing, findings = cpu(lambda: publish(rope, a))
        got = res.setdefault(kind, {"findings": findings, **{p: [] for p in PARTS}})
        for part, t in zip(PARTS, (spent, publishing), strict=True):
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
