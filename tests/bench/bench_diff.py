"""Benchmark: ``promptls diff`` of two revisions of the 1 MB conversation (run on demand).

It generates the 1 MB conversation with ``tests/bench/gen_conversation.py`` into a throwaway
git repository, commits it (``A``), edits the last user message and commits again (``B``),
then measures cold processes, medians over ``--repeat`` runs: ``promptls assemble --format
json`` of each revision's file (the two runs a reviewer would otherwise make) and
``promptls diff A B --format json``. The target (issue 16): the diff takes at most twice
the two assembles together.

    python tests/bench/bench_diff.py [--repeat 5]
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
TARGET_RATIO = 2.0


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@example.com",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@example.com",
    }
    proc = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, check=True)
    return proc.stdout.decode().strip()


def promptls(cwd: Path, *args: str) -> float:
    """Wall time of one cold ``promptls`` process; its output must be JSON."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "server.cli", *args],
        cwd=cwd,
        capture_output=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    elapsed = time.perf_counter() - t0
    assert proc.returncode in (0, 1), proc.stderr.decode()
    json.loads(proc.stdout)
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="promptls-bench-"))
    atexit.register(shutil.rmtree, scratch, True)
    repo = scratch / "repo"
    repo.mkdir()
    doc = repo / "bench.conv.json"
    gen = [sys.executable, str(GEN), "--messages", "1000", "--target-bytes", "1000000"]
    subprocess.run([*gen, "--out", str(doc)], check=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "A")
    text = doc.read_text(encoding="utf-8")
    obj = json.loads(text)
    last_user = next(m for m in reversed(obj["messages"]) if m.get("role") == "user")
    last_user["content"] = str(last_user.get("content", "")) + " Also check the retry policy."
    doc.write_text(json.dumps(obj, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    git(repo, "commit", "-q", "-am", "B")
    old_copy = scratch / "old.conv.json"
    old_copy.write_text(text, encoding="utf-8")
    assembles, diffs = [], []
    for _ in range(args.repeat):
        a = promptls(repo, "assemble", str(old_copy), "--format", "json", "--root", str(scratch))
        b = promptls(repo, "assemble", str(doc), "--format", "json")
        assembles.append(a + b)
        diffs.append(promptls(repo, "diff", "HEAD~1", "HEAD", "--format", "json"))
    two, d = statistics.median(assembles), statistics.median(diffs)
    size = len(text.encode())
    print(f"{'size':>12} {'2 × assemble':>13} {'diff A B':>9} {'ratio':>6} {'target':>7}")
    ratio = d / two
    row = f"{size:>12,} {two * 1000:>10.0f} ms {d * 1000:>6.0f} ms"
    print(f"{row} {ratio:>6.2f} {TARGET_RATIO:>7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
