"""Benchmark: go to definition, references and hover on ids, in process, on one or more checkouts.

Opens the generated conversation (``--size`` MB, JSON, in ``--corpus``, made by
``gen_conversation.py`` as ``bench_lsp.py`` makes it) with ``assembly.host.AnalysisHost`` and,
each on a freshly opened analysis, asks for: the definition from a tool response's
``tool_call_id``, the references of a tool call id, the definition of a file id, and the
hover on each of the three, at the first of each past the middle of the document. For each:
the wall time of the first answer (what a version computes once is in it) and of the same
request again, and the message views it made (``Conversation.messages``: a view is kept by
the version and carried to the next ones, whose every edit compares the views it carries).
Then the CPU time of a one-character edit inside a message (median of ten, after two)
with no view made and once every message's view exists. Each checkout (``--root``,
repeatable; default this one) runs in its own process, in turn, ``--runs`` times:

    python tests/bench/bench_navigation.py --root /path/to/main --root . [--runs 2]
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import statistics
import time
from pathlib import Path
from typing import Any

from benchkit import kinds_document, ms, print_table, run_worker, worker_document

HERE = Path(__file__).resolve()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", action="append", type=Path, help="a checkout (repeatable)")
    ap.add_argument("--corpus", type=Path, help="reuse or create the document in this folder")
    ap.add_argument("--size", type=int, default=10, choices=(1, 10))
    ap.add_argument("--runs", type=int, default=2, help="runs per checkout (taking turns)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.format = "json"
    if args.worker:
        return _worker(args)
    doc = kinds_document(args)  # (in a folder removed at exit when no --corpus is given)
    print(f"{doc.name}: {doc.stat().st_size:,} bytes", flush=True)
    roots = args.root or [HERE.parents[2]]
    argv = ["--corpus", str(args.corpus), "--size", str(args.size)]
    runs: dict[Path, list[dict[str, Any]]] = {r: [] for r in roots}
    for _ in range(args.runs):
        for root in roots:
            runs[root].append(run_worker(__file__, root, argv))
    head = ["request", *(f"{r.name}: first, again, views" for r in roots)]
    rows = [head]
    for name in runs[roots[0]][0]["requests"]:
        row = [name]
        for r in roots:
            got = [run["requests"][name] for run in runs[r]]
            first = ", ".join(ms(g["first"]) for g in got)
            again = ", ".join(ms(g["again"]) for g in got)
            row.append(f"{first}; {again}; {got[0]['views']:,}")
        rows.append(row)
    for key, label in (("edit", "edit, no view made (CPU)"), ("edit_views", "edit, every view")):
        rows.append([label, *(", ".join(ms(run[key]) for run in runs[r]) for r in roots)])
    print()
    print_table(rows)
    return 0


def _worker(args: argparse.Namespace) -> int:
    doc, text = worker_document(args)
    from assembly.host import AnalysisHost, Edit
    from assembly.ide import hover, navigation
    from assembly.rope import Rope
    from tests.support.engine import analyze

    gc.disable()
    today = dt.date(2026, 1, 1)
    mid = len(text) // 2

    def after(key: str, start: int) -> int:
        return text.index(key, start) + len(key) + 2

    response = after('"tool_call_id": "', mid)
    call = after('"id": "', text.index('"tool_calls": [', mid))
    file_id = after('"file_id": "', mid)
    requests = {
        "definition from a response's id": lambda a: navigation.definition(
            a.conversation, text, response
        ),
        "references of a call id": lambda a: navigation.references(
            a.conversation, text, call, include_declaration=True
        ),
        "definition of a file id": lambda a: navigation.definition(a.conversation, text, file_id),
        "hover on a response's id": lambda a: hover.conversation_hover(a, response, today=today),
        "hover on a call id": lambda a: hover.conversation_hover(a, call, today=today),
        "hover on a file id": lambda a: hover.conversation_hover(a, file_id, today=today),
    }

    def opened() -> tuple[Any, AnalysisHost, Rope]:
        host, rope = AnalysisHost(), Rope.from_str(text)
        a = analyze(doc, text=rope, host=host)
        gc.freeze()
        return a, host, rope

    res: dict[str, Any] = {"requests": {}}
    for name, ask in requests.items():
        a = opened()[0]
        views = a.conversation.messages
        before = len(views.made())  # (the analysis made a few)
        t = time.perf_counter()
        assert ask(a)
        first = time.perf_counter() - t
        made = len(views.made()) - before
        t = time.perf_counter()
        ask(a)
        res["requests"][name] = {"first": first, "again": time.perf_counter() - t, "views": made}
    at = after('"content": "', len(text) // 3) + 20
    for key, every_view in (("edit", False), ("edit_views", True)):
        a, host, rope = opened()
        if every_view:
            list(a.conversation.messages)
        spent = []
        for k in range(12):
            rope = rope.edit(at + k, at + k, "x")
            c = time.process_time()
            analyze(doc, text=rope, host=host, edit=Edit.replace(at + k, at + k, "x"))
            spent.append(time.process_time() - c)
            gc.freeze()
        res[key] = statistics.median(spent[2:])
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
