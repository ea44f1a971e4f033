"""Benchmark: cold start of the commands run on a few small files (run on demand).

What a pre-commit hook, an editor's on-save command or a quick look waits for: a fresh
``promptls`` process on the bundled examples (a few kB to tens of kB each), where start-up
is nearly all of the time. Each command runs in a fresh process, its wall time as a shell
sees it and its CPU time (user + system, its counting child's included: this script makes
itself the "subreaper" of what a command leaves, as ``bench_assemble.py`` does). Medians
and first quartiles over ``--repeat`` runs, interleaved with ``--baseline DIR`` (another
checkout of promptls, run with this interpreter) so that load on the machine hits every
row. Each checkout runs each command once untimed first, with its compiled bytecode and
code cache kept in a scratch folder (``PYTHONPYCACHEPREFIX``), as an installed promptls has
them. The examples are copied to a scratch folder first (no settings file of this
repository applies to them), and every command runs there: ``python -m`` puts the working
folder first on ``sys.path``, so a run from inside a checkout would import that checkout.

    python tests/bench/bench_cold.py [--repeat 15] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import atexit
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit import adopt_orphans, reap_orphans

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "prompts/support-agent.prompt.md"
COMMANDS: list[tuple[str, list[str]]] = [
    ("--version", ["--version"]),
    ("lint, one prompt template", ["lint", PROMPT]),
    ("lint, one JSON conversation", ["lint", "support-agent.conv.json"]),
    ("lint, one YAML conversation", ["lint", "support-agent.conv.yaml"]),
    (
        "lint, three files (one asks for cl100k_base)",
        ["lint", PROMPT, "support-agent.conv.json", "overflow.conv.yaml"],
    ),
    ("lint, the examples' folder (6 documents)", ["lint", "."]),
    ("assemble, JSON conversation", ["assemble", "support-agent.conv.json"]),
    ("assemble, JSON Lines conversation", ["assemble", "support-agent.conv.jsonl"]),
    ("assemble, YAML conversation", ["assemble", "support-agent.conv.yaml"]),
    ("assemble, YAML asking for cl100k_base", ["assemble", "overflow.conv.yaml"]),
]


def _run(argv: list[str], checkout: Path, cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """One cold run: (wall, CPU) in seconds."""
    t0 = time.perf_counter()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [sys.executable, "-m", "server.cli", *argv],
        cwd=cwd,
        capture_output=True,
        check=False,
        env={**env, "PYTHONPATH": str(checkout)},
    )
    wall = time.perf_counter() - t0
    reap_orphans()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} in {checkout}: {proc.stderr.decode()}")
    return wall, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--baseline", type=Path, help="another promptls checkout to time too")
    args = ap.parse_args()
    if not adopt_orphans():
        print("note: a counting child left by a command is not in the CPU columns", file=sys.stderr)
    checkouts = [("this", ROOT)]
    if args.baseline:
        checkouts.append(("baseline", args.baseline.resolve()))
    scratch = Path(tempfile.mkdtemp(prefix="promptls-bench-"))
    atexit.register(shutil.rmtree, scratch, True)
    examples = scratch / "examples"
    shutil.copytree(ROOT / "examples", examples)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    for _, argv in COMMANDS:  # untimed: fills the bytecode and code caches
        for _, checkout in checkouts:
            _run(argv, checkout, examples, env)
    wall: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.repeat):
        for name, argv in COMMANDS:
            for label, checkout in checkouts:
                w, c = _run(argv, checkout, examples, env)
                wall.setdefault((name, label), []).append(w)
                cpu.setdefault((name, label), []).append(c)

    def ms(values: list[float], q: float) -> str:
        v = sorted(values)
        return f"{1000 * (statistics.median(v) if q == 0.5 else v[int(len(v) * q)]):.0f}"

    head = "| command | " + " | ".join(
        f"{label}: wall median (q1) | {label}: CPU median" for label, _ in checkouts
    )
    print(head + " |")
    print("|---" * (1 + 2 * len(checkouts)) + "|")
    for name, _ in COMMANDS:
        cells = [
            f"{ms(wall[name, label], 0.5)} ms ({ms(wall[name, label], 0.25)}) | "
            f"{ms(cpu[name, label], 0.5)} ms"
            for label, _ in checkouts
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
