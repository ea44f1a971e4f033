"""Benchmark: coding agents' session files at size (run on demand).

For each agent whose sessions promptls reads (Codex CLI, Claude Code, Copilot CLI, Gemini
CLI, pi) it builds a session of about ``--mb`` MB from the real one committed in
``tests/data/real-logs/<agent>/``: the session's lines after its first, repeated with every
id made new on each repetition (so calls still pair with their results, and no record
replaces another; a Claude Code session's branch then runs through its last repetition
only, the others hanging off parents not in the file), and measures in one run, medians
over ``--repeat``:

- ``read``: ``parse_conversation`` of the text, in this process, the cyclic collector
  paused as the language server pauses it for an analysis (what every edit of such a
  document costs in the editor before the pipeline: it is read whole on every change);
- ``lint``: a cold ``promptls lint FILE`` in a fresh process (wall time), and its peak
  memory (the process's resident set, ``ru_maxrss``; not its counting child's).

    python tests/bench/bench_sessions.py [--mb 10] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "data" / "real-logs"
SOURCES = {
    "codex": "codex/codex_vibecodingtracker_rollout.conv.jsonl",
    "claude-code": "claude-code/claude-code_dkv-orchestrator-sidechain.conv.jsonl",
    "copilot": "copilot/copilot_vibecodingtracker_session.conv.jsonl",
    "gemini-cli": "gemini-cli/gemini-cli_vibecodingtracker_session.conv.jsonl",
    "pi": "pi/pi_pi-mono_before-compaction.conv.jsonl",
}
# The values made new on each repetition: ids of events, records, messages and calls.
_ID_KEYS = re.compile(
    r'"(id|uuid|parentUuid|parentId|toolCallId|tool_use_id|call_id|upToEventId)":"([^"]*)"'
)


def build(path: Path, target: int) -> str:
    """A session of about ``target`` characters: the first line, then the rest repeated,
    each repetition's ids suffixed with its number."""
    lines = [
        json.dumps(json.loads(x), ensure_ascii=False, separators=(",", ":"))
        for x in path.read_text(encoding="utf-8").splitlines()
        if x.strip()
    ]
    out, size, k = [lines[0]], len(lines[0]), 0
    while size < target:
        k += 1
        for line in lines[1:]:
            made = _ID_KEYS.sub(lambda m, k=k: f'"{m[1]}":"{m[2]}-{k}"', line)
            out.append(made)
            size += len(made) + 1
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from assembly.model import DocFormat
    from assembly.reading import parse_conversation

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    print(f"{'agent':>12} {'bytes':>12} {'messages':>9} {'read':>8} {'lint':>8} {'peak':>8}")
    with tempfile.TemporaryDirectory(prefix="promptls-sessions-") as tmp:
        for agent, rel in SOURCES.items():
            text = build(REAL / rel, int(args.mb * 1_000_000))
            doc = Path(tmp) / f"{agent}.jsonl"
            doc.write_text(text, encoding="utf-8")
            reads, lints, peaks = [], [], []
            n = 0
            for _ in range(args.repeat):
                gc.disable()
                t0 = time.perf_counter()
                conv = parse_conversation(text, DocFormat.JSONL)
                reads.append(time.perf_counter() - t0)
                n = len(conv.messages)
                del conv
                gc.enable()
                t0 = time.perf_counter()
                proc = subprocess.Popen(
                    [sys.executable, "-m", "server.cli", "lint", str(doc)],
                    cwd=tmp,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                _, status, usage = os.wait4(proc.pid, 0)
                lints.append(time.perf_counter() - t0)
                peaks.append(usage.ru_maxrss / 1024)
                assert os.waitstatus_to_exitcode(status) in (0, 1)
            print(
                f"{agent:>12} {len(text.encode()):>12,} {n:>9,} "
                f"{statistics.median(reads) * 1000:>6.0f}ms {statistics.median(lints):>7.2f}s "
                f"{statistics.median(peaks):>6.0f}MB"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
