"""Benchmark: where the wall clock of opening a large conversation goes, per stage, in both
processes (the language server and its counting child), over stdio (on demand).

Each checkout's server (``--root``, repeatable; this checkout by default) runs under a
small wrapper that timestamps the stages of the open as they start and end (the server's
and the counting child's functions, looked up by name: a stage a checkout does not have is
left out) and counts the texts the server counts itself. A client (``bench_lsp``'s) sends
``initialize``, then the ``didOpen`` of the 10 MB benchmark conversation, and waits for its
first ``publishDiagnostics``. The checkouts take turns, ``--runs`` times each; the table
gives each stage's median end (of ``didOpen read``: the message's bytes have all come
through the pipe), in ms after the ``didOpen`` was sent, the server's CPU time
over the open (user + system, from ``getrusage``, its child's not; the figure to compare on
a loaded machine) and by the end of each of its stages, its page faults and the texts it
counted itself.

    python tests/bench/bench_open.py --corpus DIR [--root CHECKOUT]... [--runs 5] [--dataset]

``--dataset`` opens the 10 MB dataset of ``bench_lsp.py --formats dataset`` instead.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from benchkit import bench_lsp, print_table

ROOT = Path(__file__).resolve().parents[2]

WRAPPER = textwrap.dedent(
    '''
    """``promptls serve`` with the open's stages timestamped into $BENCH_OPEN_LOG."""
    import functools, os, resource, sys, time

    LOG = os.open(os.environ["BENCH_OPEN_LOG"], os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    def mark(label):
        r = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (r.ru_utime + r.ru_stime) * 1000
        line = f"{os.getpid()} {time.perf_counter():.6f} {cpu:.1f} {r.ru_minflt} {label}\\n"
        os.write(LOG, line.encode())

    def wrap(owner, name, label):
        f = getattr(owner, name, None)
        if f is None:
            return
        @functools.wraps(f)
        def timed(*args, **kwargs):
            mark(label + " >")
            try:
                return f(*args, **kwargs)
            finally:
                mark(label + " <")
        setattr(owner, name, timed)

    from server.cli.main import main
    from server import precount
    from server.lsp import session, stream
    from server.lsp.handlers import documents
    from assembly import host, tokens

    wrap(stream, "read_message", "decode")
    wrap(session.Session, "analyze_now", "analysis")
    wrap(host, "parse_conversation", "parse+read")
    wrap(precount.PendingCounts, "seed", "seed")
    wrap(host, "assemble", "assemble")
    wrap(host, "check", "rules")
    wrap(documents, "publish", "publish")
    for name in ("start", "start_open"):
        wrap(precount, name, "fork")
    values = precount._values
    def loaded(*args):
        mark("child: document loaded >")
        done = list(values(*args))
        mark("child: document loaded <")
        return iter(done)
    precount._values = loaded
    send = precount._send_batch
    def sent(*args):
        send(*args)
        mark("child: batch sent")
    precount._send_batch = sent
    COUNTED = [0, 0]
    init = tokens.CachedTokenizer.__init__
    def counting(self, count, *args, **kwargs):
        def counted(text):
            if os.getpid() == PARENT:
                COUNTED[0] += 1
                COUNTED[1] += len(text)
            return count(text)
        init(self, counted, *args, **kwargs)
    tokens.CachedTokenizer.__init__ = counting
    publish = documents.publish
    def published(*args, **kwargs):
        mark(f"counted {COUNTED[0]} {COUNTED[1]}")
        return publish(*args, **kwargs)
    documents.publish = published
    PARENT = os.getpid()
    sys.exit(main(["serve"]))
    '''
)

# The stages shown, in order: (label in the log, name in the table).
STAGES = [
    ("decode >", "didOpen read"),
    ("fork <", "counting child forked"),
    ("decode <", "didOpen decoded"),
    ("analysis >", "analysis started"),
    ("parse+read <", "parsed and read"),
    ("seed <", "counts seeded"),
    ("assemble <", "assembled"),
    ("rules <", "rules checked"),
    ("publish <", "published"),
    ("child: document loaded <", "child: document loaded"),
    ("child: batch sent", "child: last batch sent"),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, action="append", help="a checkout whose server runs")
    ap.add_argument("--runs", type=int, default=5, help="opens per checkout (taking turns)")
    ap.add_argument("--corpus", type=Path, help="reuse or create the document in this folder")
    ap.add_argument(
        "--dataset",
        action="store_true",
        help="open the 10 MB dataset (JSON Lines, a conversation per line) instead",
    )
    args = ap.parse_args()
    roots = [r.resolve() for r in (args.root or [ROOT])]
    lsp = bench_lsp()
    work = Path(tempfile.mkdtemp(prefix="promptls-open-bench-"))
    atexit.register(shutil.rmtree, work, True)
    corpus = args.corpus or work
    corpus.mkdir(parents=True, exist_ok=True)
    doc = lsp._generate(corpus, 10, "dataset" if args.dataset else "json")
    text = doc.read_text(encoding="utf-8")
    wrapper = work / "timed_server.py"
    wrapper.write_text(WRAPPER, encoding="utf-8")
    print(f"{os.cpu_count()} cores; {doc.name}: {doc.stat().st_size:,} bytes")
    runs: dict[Path, list[dict[str, float]]] = {r: [] for r in roots}
    for _ in range(args.runs):
        for root in roots:
            runs[root].append(_open(lsp, root, wrapper, work / "stages.log", doc, text))
            print(f"  {root.name}: {runs[root][-1]['wall']:.0f} ms", flush=True)
    head = ["stage (ms after didOpen, median)", *(r.name for r in roots)]
    rows = [head]
    for key, name in [*((s[1], s[1]) for s in STAGES), ("wall", "open -> first diagnostics")]:
        rows.append([name, *(_median(runs[r], key) for r in roots)])
    for key, name in [
        ("cpu", "server CPU over the open (ms)"),
        *((f"cpu {s[1]}", f"  CPU by {s[1]}") for s in STAGES[2:9]),
        ("faults", "server page faults"),
        ("texts", "texts the server counted itself"),
        ("chars", "characters it counted itself"),
    ]:
        rows.append([name, *(_median(runs[r], key) for r in roots)])
    print()
    print_table(rows)
    print(f"\n{args.runs} opens per checkout; {os.getloadavg()[0]:.1f} load at the end.")
    return 0


def _open(
    lsp: object, root: Path, wrapper: Path, log: Path, doc: Path, text: str
) -> dict[str, float]:
    """One open: each stage's end (ms after the didOpen was sent), the server's CPU and
    page faults over the open, and what it counted itself."""
    log.unlink(missing_ok=True)
    env = {"BENCH_OPEN_LOG": str(log), "PYTHONPATH": str(root)}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # (the client starts the server with this environment)
    try:
        rpc = lsp.Rpc([sys.executable, str(wrapper)], root, log.with_suffix(".stderr"))  # type: ignore[attr-defined]
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        request_id, _ = rpc.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": doc.parent.as_uri(),
                "capabilities": lsp.CAPABILITIES,  # type: ignore[attr-defined]
                "workspaceFolders": [{"uri": doc.parent.as_uri(), "name": "bench"}],
            },
        )
        rpc.response(request_id)
        rpc.notify("initialized", {})
        time.sleep(0.5)  # the server's warm-up (loading the encoding) is done by now
        uri = doc.as_uri()
        language = "jsonl" if doc.suffix == ".jsonl" else "json"
        params = {"uri": uri, "languageId": language, "version": 1, "text": text}
        sent = rpc.notify("textDocument/didOpen", {"textDocument": params})
        got, _ = rpc.wait(lsp._diagnostics_of(uri, 1))  # type: ignore[attr-defined]
    finally:
        rpc.close()
    out: dict[str, float] = {"wall": 1000 * (got - sent)}
    server = str(rpc.proc.pid)
    first: tuple[float, float] | None = None
    for line in log.read_text().splitlines():
        pid, t, cpu, faults, label = line.split(" ", 4)
        at = 1000 * (float(t) - sent)
        if pid == server and at >= 0:
            if first is None:
                first = (float(cpu), float(faults))
            out["cpu"], out["faults"] = float(cpu) - first[0], float(faults) - first[1]
        if label.startswith("counted ") and pid == server:
            out["texts"], out["chars"] = map(float, label.split()[1:])
        for key, name in STAGES:
            if label == key and at >= 0 and (name not in out or key == "child: batch sent"):
                out[name] = at  # the first one (the didOpen's), of a child's batches the last
                if pid == server and first is not None:
                    out["cpu " + name] = float(cpu) - first[0]
    return out


def _median(rows: list[dict[str, float]], key: str) -> str:
    values = [r[key] for r in rows if key in r]
    return f"{statistics.median(values):,.0f}" if values else "-"


if __name__ == "__main__":
    sys.exit(main())
