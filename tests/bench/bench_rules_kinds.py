"""Benchmark: the rule check's share of each edit kind, in process, on one or more checkouts.

Opens the generated conversation (``--size`` MB, ``--format`` JSON, JSON Lines or YAML, in
``--corpus``, made by ``gen_conversation.py`` as ``bench_lsp.py`` makes it) with
``assembly.host.AnalysisHost``,
as the language server does (collector paused, the result frozen), then applies the edit
kinds of ``bench_lsp.py --kinds`` through ``apply_change`` with their edit spans, and
times each analysis and its rule check (``check``) in CPU time of the process (steady on a
loaded machine) and wall time. A fresh rule check of the opened document (a new
``RuleCache``) is timed ``--fresh`` times: the open's share. Each checkout (``--root``,
repeatable; default this one) runs in its own process with its own ``assembly``, in turn,
so a before/after comparison comes from one run:

    python tests/bench/bench_rules_kinds.py --root /path/to/main --root . [--per-kind 6]

Medians in milliseconds; ``rules`` is the part of ``analysis`` spent in ``check``.

With ``--top-rules N``, each kind's ``N`` costliest rules follow the table, in CPU ms per
edit (each rule's time includes the inputs it is the first to ask for, as the engine
computes an input when a rule first reads it), for each checkout.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from pathlib import Path
from typing import Any

from benchkit import (
    bench_lsp,
    kind_rows,
    kinds_document,
    kinds_options,
    ms,
    print_table,
    run_kinds,
    worker_document,
)


def main() -> int:
    ap = kinds_options(__doc__.splitlines()[0], "json", 6)
    ap.add_argument("--fresh", type=int, default=5)
    ap.add_argument("--top-rules", type=int, default=0, help="each kind's N costliest rules")
    args = ap.parse_args()
    if args.worker:
        return _worker(args)
    doc = kinds_document(args)
    print(f"{doc.name}: {doc.stat().st_size:,} bytes", flush=True)
    results = run_kinds(__file__, args, ["--fresh", str(args.fresh)])
    head = ["edit kind"]
    for root, _ in results:
        head += [f"analysis cpu ({Path(root).name})", "rules cpu", "rules wall"]
    parts = ("analysis", "rules", "rules_wall")
    table = [
        head,
        *kind_rows(results, 3, lambda got: [ms(statistics.median(got[p])) for p in parts]),
    ]
    print()
    print_table(table)
    print("\nMedians per edit; `open` is the opening analysis, `fresh check` a new RuleCache.")
    if args.top_rules:
        for root, res in results:
            print(f"\nCostliest rules, CPU ms per edit ({Path(root).name}):")
            for kind, got in res.items():
                spent = sorted(got["by_rule"].items(), key=lambda kv: -kv[1])[: args.top_rules]
                n = len(got["analysis"])
                print(f"  {kind}: " + ", ".join(f"{c} {1000 * t / n:.1f}" for c, t in spent))
    return 0


def _worker(args: argparse.Namespace) -> int:
    doc, text = worker_document(args)
    from assembly import host as host_module  # the checkout's
    from assembly.diagnostics import RuleCache, check
    from assembly.host import AnalysisHost, Edit
    from assembly.rope import Rope
    from tests.support.engine import analyze

    spent: list[tuple[float, float]] = []
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def timed(*a: Any, **kw: Any) -> Any:
        calls[:] = [(a, kw)]
        c, w = time.process_time(), time.perf_counter()
        res = check(*a, **kw)
        spent.append((time.process_time() - c, time.perf_counter() - w))
        return res

    host_module.check = timed  # type: ignore[attr-defined]
    res: dict[str, dict[str, Any]] = {}
    by_rule: dict[str, float] = {}  # the CPU of each rule in the analysis being timed
    try:
        from assembly.diagnostics.engine import _Run  # (where the engine runs one rule)
    except ImportError:  # a checkout without it: no rule is timed on its own
        _Run = None
    findings = getattr(_Run, "findings", None)
    if findings is not None:

        def rule_timed(self: Any, rule: Any) -> Any:
            c = time.process_time()
            try:
                return findings(self, rule)
            finally:
                by_rule[rule.code] = by_rule.get(rule.code, 0.0) + time.process_time() - c

        _Run.findings = rule_timed  # type: ignore[union-attr]

    def kind_of(kind: str) -> dict[str, Any]:
        empty = {"analysis": [], "rules": [], "rules_wall": [], "by_rule": {}}
        return res.setdefault(kind, empty)

    def add_rules(got: dict[str, Any]) -> None:
        for code, t in by_rule.items():
            got["by_rule"][code] = got["by_rule"].get(code, 0.0) + t

    def record(kinds: tuple[str, ...], run: Any) -> None:
        by_rule.clear()
        c = time.process_time()
        run()
        cpu = time.process_time() - c
        gc.freeze()  # as the server does after each analysis
        for kind in kinds:
            got = kind_of(kind)
            got["analysis"].append(cpu)
            got["rules"].append(spent[-1][0])
            got["rules_wall"].append(spent[-1][1])
            add_rules(got)

    gc.disable()
    host = AnalysisHost()
    rope = Rope.from_str(text)
    record(("open",), lambda: analyze(doc, text=rope, host=host))
    a, kw = calls[-1]
    for _ in range(args.fresh):
        fresh = dict(kw, cache=RuleCache())
        by_rule.clear()
        c, w = time.process_time(), time.perf_counter()
        check(*a, **fresh)
        got = kind_of("fresh check")
        add_rules(got)
        by_rule.clear()
        cpu = time.process_time() - c
        got["analysis"].append(cpu)
        got["rules"].append(cpu)
        got["rules_wall"].append(time.perf_counter() - w)
    for kind, make in bench_lsp()._KINDS:
        # A kind that alternates an edit and its undo also gets a row for each half (as
        # ``bench_lsp.py --kinds``): their median hides the edit.
        what, _, back = kind.rpartition(", ")
        halves = (
            (f"  {what}: the edit", f"  {what}: its {back}") if back in ("undo", "back") else ()
        )
        edits = [e for e in make(str(rope), args.format, args.per_kind) if e is not None]
        for j, (start, end, new) in enumerate(edits):
            rope = rope.edit(start, end, new)
            change = Edit.replace(start, end, new)
            kinds = (kind, halves[j % 2]) if halves else (kind,)
            record(kinds, lambda r=rope, e=change: analyze(doc, text=r, host=host, edit=e))
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
