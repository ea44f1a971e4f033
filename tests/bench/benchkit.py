"""What the benchmark scripts share: loading this checkout's ``bench_lsp.py`` (its edit
kinds and corpus generator), the options and document of a script that times the edit kinds
once per checkout, running it as a worker per checkout and tabling the results, a writer
that drops what it is given, the one table printer, and becoming the reaper of what the
timed commands leave (their CPU then counted)."""

from __future__ import annotations

import argparse
import atexit
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def bench_lsp() -> Any:
    """This checkout's ``bench_lsp`` module (its edit kinds and its corpus generator)."""
    spec = importlib.util.spec_from_file_location("bench_lsp_shared", HERE / "bench_lsp.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def kinds_options(description: str, fmt: str, per_kind: int) -> argparse.ArgumentParser:
    """The options every edit-kind benchmark takes: checkouts, the document (folder, size,
    format), edits per kind, and the hidden ``--worker``."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--root", action="append", type=Path, help="a checkout (repeatable)")
    ap.add_argument("--corpus", type=Path, help="reuse or create the document in this folder")
    ap.add_argument("--size", type=int, default=10, choices=(1, 10))
    ap.add_argument("--format", default=fmt, choices=("json", "jsonl", "yaml"))
    ap.add_argument("--per-kind", type=int, default=per_kind)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return ap


def kinds_document(args: argparse.Namespace) -> Path:
    """The benchmark document of ``args`` (generated in ``--corpus``, or in a folder removed
    at exit); ``args.corpus`` is set to its folder."""
    if args.corpus is None:
        args.corpus = Path(tempfile.mkdtemp(prefix="promptls-bench-"))
        atexit.register(shutil.rmtree, args.corpus, ignore_errors=True)
    args.corpus.mkdir(parents=True, exist_ok=True)
    return bench_lsp()._generate(args.corpus, args.size, args.format)


def run_worker(script: str, root: Path, argv: Sequence[str]) -> Any:
    """Run ``script --worker --root ROOT *argv`` in checkout ``root`` (its code imported from
    there) and return the JSON value its last output line holds."""
    cmd = [sys.executable, str(Path(script).resolve()), "--worker", "--root", str(root.resolve())]
    out = subprocess.run([*cmd, *argv], cwd=root, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.splitlines()[-1])


def worker_document(args: argparse.Namespace) -> tuple[Path, str]:
    """In a worker (``run_worker``): its checkout's code put first on the import path, and
    the benchmark document of ``args`` with its text."""
    sys.path.insert(0, str(args.root[0]))
    doc = bench_lsp()._generate(args.corpus, args.size, args.format)
    return doc, doc.read_text(encoding="utf-8")


def run_kinds(script: str, args: argparse.Namespace, extra: Sequence[str]) -> list[tuple[str, Any]]:
    """Run an edit-kind benchmark ``script`` as a worker in each checkout of ``args`` (this
    one when none is given) on the document of ``args`` (``kinds_document``), with its own
    ``extra`` options: each checkout's path and its worker's result."""
    roots = args.root or [HERE.parents[1]]
    argv = ["--corpus", str(args.corpus), "--size", str(args.size), "--format", args.format]
    argv += ["--per-kind", str(args.per_kind), *extra]
    return [(str(root), run_worker(script, root, argv)) for root in roots]


def kind_rows(
    results: Sequence[tuple[str, dict[str, Any]]], width: int, cells: Callable[[Any], list[str]]
) -> list[list[str]]:
    """One row per edit kind of the first checkout's ``results`` (``run_kinds``): the kind,
    then for each checkout the ``cells`` of its result for that kind, or ``width`` dashes
    where it has none."""
    rows = []
    for kind in results[0][1]:
        row = [kind]
        for _, res in results:
            got = res.get(kind)
            row += ["-"] * width if got is None else cells(got)
        rows.append(row)
    return rows


def ms(seconds: float) -> str:
    """``seconds`` as a table cell in milliseconds."""
    return f"{1000 * seconds:.1f} ms"


class Sink:
    """A writer for a language server's protocol that drops what it is given (a benchmark
    times making the messages, not writing them)."""

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass


def adopt_orphans() -> bool:
    """Become the subreaper of the processes our commands leave behind (Linux only)."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def reap_orphans() -> None:
    """Wait for every process left to this one (their CPU then counts in RUSAGE_CHILDREN)."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def print_table(rows: Sequence[Sequence[str]], left: int = 1) -> None:
    """Print ``rows`` (the first is the head) as columns padded to their widest cell, the
    first ``left`` aligned left and the rest right, with a rule under the head."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for k, row in enumerate(rows):
        print(
            "  ".join(
                c.ljust(w) if i < left else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if k == 0:
            print("  ".join("-" * w for w in widths))
