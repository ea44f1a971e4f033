"""Benchmark: ``promptls lint`` throughput on a folder of 1,000 documents (run on demand).

The corpus comes from ``tests/bench/gen_conversation.py`` (run as is): conversations of
varied sizes and seeds in the three formats (JSON, JSON Lines, YAML) plus some prompt
templates. Each measurement is the wall time of a fresh ``promptls lint --format json``
process over the folder, as CI runs it: sequential (``--jobs 1``) and parallel (the
default, one worker per core). Prints files/s and MB/s (MB = 10^6 bytes of documents), the
median of ``--repeat`` runs (interleaved), with the CPU time the run used (user + system,
all processes; wall time depends on what else the machine is doing, CPU time much less),
and checks that both modes print the same findings (and says whether the baseline's do).
Each checkout first lints one file untimed, with its compiled bytecode kept in a scratch
folder (``PYTHONPYCACHEPREFIX``, even where ``PYTHONDONTWRITEBYTECODE`` is set), as an
installed promptls has its ``.pyc`` files.

With ``--project``, the corpus is instead one project's: four prompt templates and
conversations that each point to one of them (``system_prompt``), smaller than the
default corpus's, so a template's own work (parsing it, indexing it for the instruction
rule) is most of a conversation's: it measures the work the files of a project have in common.
With ``--logs``, the corpus is an agent's logged conversations: one 17 KB system prompt,
inline in each conversation (as an API log has it), and tools that vary from one
conversation to the next (each offers some of the agent's twelve), as tau-bench's runs do.

With ``--instructions N`` (needs valgrind), each checkout also lints N files spread evenly
over the corpus sequentially under callgrind, and once one file alone: the instructions per
file, the difference over N - 1, are deterministic, so two checkouts compare on a loaded machine
(start-up is the run of one file; it is printed too). Each checkout lints the sample once
untimed first, so that nothing is compiled while counting (the first checkout counted 13 %
more when only the timed runs had warmed the bytecode cache, and none ran), and the counted
runs fix ``PYTHONHASHSEED``. ``--repeat 0`` counts instructions only (no timing).

With ``--timeline`` (Linux), each checkout's parallel run is also run once with its processes
sampled every 2 ms from ``/proc`` (``schedstat``: time on a core and time runnable but
waiting for one): how long the parent works alone before the first worker exists (imports,
discovery, loading the encoding), each worker's CPU and its wait for a core (the machine's
other load), how long the run lasts after the last worker has gone, and how busy the cores
were over the whole run (CPU of every process over cores × wall).

    python tests/bench/bench_lint.py [--files 1000] [--repeat 3] [--corpus DIR]
        [--baseline DIR [--baseline-python PYTHON]] [--instructions N] [--project | --logs]
        [--timeline]

The issue's "today" (202 files/s parallel, 2026-11-30) is commit ``edc2069``, whose
encodings come from a tiktoken plugin it installs: time it in its own environment,
``python3 -m venv /tmp/v && /tmp/v/bin/pip install -e <edc2069 checkout>``, then
``--baseline <checkout> --baseline-python /tmp/v/bin/python``.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GEN = Path(__file__).resolve().parent / "gen_conversation.py"
FORMATS = ("json", "jsonl", "yaml")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--corpus", type=Path, help="reuse or create the corpus in this folder")
    ap.add_argument("--baseline", type=Path, help="another promptls checkout to time too")
    ap.add_argument(
        "--baseline-python",
        help="the interpreter that runs the baseline (default: this one); an old checkout "
        "may need its own environment (its own installed plugins and dependencies)",
    )
    ap.add_argument(
        "--instructions",
        type=int,
        metavar="N",
        help="also count instructions (callgrind) linting N of the files, sequentially",
    )
    ap.add_argument(
        "--project",
        action="store_true",
        help="a project's corpus: conversations sharing four prompt templates",
    )
    ap.add_argument(
        "--logs",
        action="store_true",
        help="an agent's logs: conversations sharing one inline system prompt, tools varying",
    )
    ap.add_argument(
        "--timeline",
        action="store_true",
        help="also sample each checkout's parallel run from /proc: head, workers, tail",
    )
    args = ap.parse_args()
    if args.baseline and args.baseline_python:
        _INTERPRETER[args.baseline] = args.baseline_python
    if not GEN.is_file():
        print(f"generator not found: {GEN}", file=sys.stderr)
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="promptls-lint-bench-"))
    atexit.register(shutil.rmtree, scratch, True)  # the generated files go
    corpus = args.corpus or scratch
    corpus.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    generate = _generate_project if args.project else _generate_logs if args.logs else _generate
    generate(corpus, args.files)
    files = sorted(p for p in corpus.rglob("*") if p.is_file())
    n_bytes = sum(p.stat().st_size for p in files)
    print(
        f"corpus: {len(files):,} files, {n_bytes / 1e6:.1f} MB in {corpus} "
        f"(ready in {time.perf_counter() - started:.1f} s); {os.cpu_count()} cores"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    outputs = {}
    runs = [("sequential", ["--jobs", "1"], ROOT), ("parallel", [], ROOT)]
    if args.baseline:
        runs += [("baseline sequential", ["--jobs", "1"], args.baseline)]
        runs += [("baseline parallel", [], args.baseline)]
    for _, _, checkout in runs:  # untimed: fills the bytecode cache
        subprocess.run(
            [_python(checkout), "-m", "server.cli", "lint", "--format", "json", str(files[0])],
            cwd=corpus,
            capture_output=True,
            env={**env, "PYTHONPATH": str(checkout)},
        )
    times: dict[str, list[float]] = {label: [] for label, _, _ in runs}
    cpu: dict[str, list[float]] = {label: [] for label, _, _ in runs}
    notes: dict[str, str] = {}
    for _ in range(args.repeat):  # interleaved, so that the machine's load hits every row
        for label, jobs, checkout in runs:
            t0 = time.perf_counter()
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            proc = subprocess.run(
                [_python(checkout), "-m", "server.cli", "lint", "--format", "json", *jobs, "."],
                cwd=corpus,
                capture_output=True,
                text=True,
                env={**env, "PYTHONPATH": str(checkout)},
            )
            times[label].append(time.perf_counter() - t0)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[label].append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
            if proc.returncode not in (0, 1):
                print(proc.stderr, file=sys.stderr)
                return 1
            outputs[label] = proc.stdout
            notes[label] = proc.stderr.strip()
    for label, _, _ in runs if args.repeat > 0 else ():
        t = statistics.median(times[label])
        print(
            f"{label:>19}: {t:6.2f} s  {len(files) / t:7.1f} files/s  {n_bytes / 1e6 / t:6.2f} MB/s"
            f"  (CPU {statistics.median(cpu[label]):.2f} s; {notes[label]})"
        )
    checkouts = [("this", ROOT)] + ([("baseline", args.baseline)] if args.baseline else [])
    if args.instructions:
        if not _instructions(checkouts, files, args.instructions, corpus, env):
            return 1
    if args.timeline:
        for label, checkout in checkouts:
            print(f"{label:>19}: {_timeline(checkout, corpus, env)}")
    if args.repeat <= 0:
        return 0
    same = outputs["sequential"] == outputs["parallel"]
    print(f"parallel output {'equals' if same else 'DIFFERS FROM'} sequential output")
    if args.baseline:  # a rule change may change the findings: said, not failed
        base = outputs["baseline parallel"] == outputs["parallel"]
        print(f"output {'equals' if base else 'differs from'} the baseline's")
    return 0 if same else 1


# The interpreter of a checkout other than sys.executable (``--baseline-python``).
_INTERPRETER: dict[Path, str] = {}


def _python(checkout: Path) -> str:
    return _INTERPRETER.get(checkout, sys.executable)


def _instructions(
    checkouts: list[tuple[str, Path]], files: list[Path], n: int, corpus: Path, env: dict[str, str]
) -> bool:
    """Print each checkout's instructions per file (callgrind); False: no valgrind."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("--instructions: valgrind is not installed", file=sys.stderr)
        return False
    n = max(2, min(n, len(files)))
    # Spread evenly over the sorted corpus; a fixed stride (every 33rd of 1,000) fell on
    # one format only, since the generated names take the three formats in turn.
    sample = [str(files[i * len(files) // n].resolve()) for i in range(n)]
    callgrind = [valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    lint = ["--format", "json", "--jobs", "1"]
    print(
        f"instructions (callgrind), `lint --jobs 1` of {len(sample)} files spread over "
        f"the corpus, less a run of 1 file:"
    )
    first = None
    for label, checkout in checkouts:
        # Untimed, the sample once: every module it imports is compiled before the count
        # (the first file alone leaves some out: PyYAML's, the template rules'...; under
        # ``PYTHONPYCACHEPREFIX`` the standard library's too, which both checkouts use).
        subprocess.run(
            [_python(checkout), "-m", "server.cli", "lint", *lint, *sample],
            cwd=corpus,
            capture_output=True,
            env={**env, "PYTHONPATH": str(checkout), "PYTHONHASHSEED": "0"},
        )
        counts = []
        for paths in (sample, sample[:1]):
            proc = subprocess.run(
                [*callgrind, _python(checkout), "-m", "server.cli", "lint", *lint, *paths],
                cwd=corpus,
                capture_output=True,
                text=True,
                env={**env, "PYTHONPATH": str(checkout), "PYTHONHASHSEED": "0"},
            )
            found = re.search(r"Collected : (\d+)", proc.stderr)
            if found is None:
                print(proc.stderr[-2000:], file=sys.stderr)
                return False
            counts.append(int(found[1]))
        per_file = (counts[0] - counts[1]) / (len(sample) - 1)
        first = first or per_file
        print(
            f"{label:>19}: {per_file / 1e6:8.2f} M instructions a file "
            f"({per_file / first - 1:+.1%}); start-up and one file {counts[1] / 1e6:,.0f} M"
        )
    return True


def _timeline(checkout: Path, corpus: Path, env: dict[str, str]) -> str:
    """One parallel run of ``checkout`` with its processes sampled from ``/proc``, in words."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [_python(checkout), "-m", "server.cli", "lint", "--format", "json", "."],
        cwd=corpus,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**env, "PYTHONPATH": str(checkout)},
    )
    seen: dict[int, list[float]] = {}  # pid: first seen, last seen, CPU s, waited s
    while proc.poll() is None:
        now = time.perf_counter() - t0
        for pid in _family(proc.pid):
            try:
                on_cpu, waited = Path(f"/proc/{pid}/schedstat").read_text().split()[:2]
            except (OSError, ValueError):
                continue
            rec = seen.setdefault(pid, [now, now, 0.0, 0.0])
            rec[1:] = [now, int(on_cpu) / 1e9, int(waited) / 1e9]
        time.sleep(0.002)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    parent = seen.pop(proc.pid, [0.0, 0.0, 0.0, 0.0])
    if not seen:
        return f"wall {wall:.2f} s, no worker process seen (CPU {cpu:.2f} s)"
    start = min(w[0] for w in seen.values())
    end = max(w[1] for w in seen.values())
    workers = sorted(seen.values())
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    return (
        f"wall {wall:.2f} s; the parent alone {start:.2f} s (its CPU in all {parent[2]:.2f} s); "
        f"{len(workers)} workers {start:.2f}-{end:.2f} s, CPU "
        + ", ".join(f"{w[2]:.2f}" for w in workers)
        + " s, waiting for a core "
        + ", ".join(f"{w[3]:.2f}" for w in workers)
        + f" s; after the last worker {wall - end:.2f} s; "
        f"cores busy {cpu / (cores * wall):.0%} (CPU {cpu:.2f} s of {cores} x {wall:.2f} s)"
    )


def _family(pid: int) -> list[int]:
    """``pid`` and its descendants (``/proc/PID/task/TID/children``)."""
    res, todo = [], [pid]
    while todo:
        p = todo.pop()
        res.append(p)
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tasks:
            with contextlib.suppress(OSError):
                todo.extend(map(int, Path(f"/proc/{p}/task/{tid}/children").read_text().split()))
    return res


def _generate(corpus: Path, n_files: int) -> None:
    """Write the corpus (skipping files already there): sizes 2-60 KB, varied seeds."""
    jobs = []
    for i in range(n_files):
        seed = 1000 + i
        if i % 20 == 19:
            out = corpus / f"prompts/p{i:04}.prompt.md"
            cmd = ["--prompt", "--target-bytes", str(4000 + (i * 7919) % 30000)]
        else:
            fmt = FORMATS[i % len(FORMATS)]
            out = corpus / f"d{i % 10}/c{i:04}.conv.{fmt}"
            messages = 10 + (i * 37) % 90
            target = 2000 + (i * 7919) % 30000
            cmd = ["--messages", str(messages), "--target-bytes", str(target), "--format", fmt]
        if not out.exists():
            jobs.append([*cmd, "--seed", str(seed), "--out", str(out)])
    for d in {Path(j[-1]).parent for j in jobs}:
        d.mkdir(parents=True, exist_ok=True)
    _run_generator(jobs)


def _run_generator(jobs: list[list[str]]) -> None:
    """Run the generator once for each job's arguments, on every core."""

    def run(cmd: list[str]) -> None:
        subprocess.run([sys.executable, str(GEN), *cmd], check=True)

    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        list(pool.map(run, jobs))


def _small_conversation(out: Path, i: int, seed: int) -> list[str]:
    """The generator's arguments for the ``i``-th conversation of a project or of an
    agent's logs: 2-10 KB of JSON."""
    messages, target = 6 + (i * 37) % 15, 2000 + (i * 7919) % 8000
    size = ["--messages", str(messages), "--target-bytes", str(target)]
    return [*size, "--format", "json", "--seed", str(seed), "--out", str(out)]


TEMPLATES = 4


def _generate_project(corpus: Path, n_files: int) -> None:
    """Write a project (skipping files already there): ``TEMPLATES`` prompt templates of
    8-30 KB and conversations of 2-10 KB in JSON, each pointing to one template."""
    prompts = corpus / "prompts"
    prompts.mkdir(parents=True, exist_ok=True)
    (corpus / ".git").mkdir(exist_ok=True)  # the project's root
    jobs = []
    for k in range(TEMPLATES):
        out = prompts / f"agent{k}.prompt.md"
        if not out.exists():
            size = 8000 + k * 7000
            jobs.append(
                ["--prompt", "--target-bytes", str(size), "--seed", str(k), "--out", str(out)]
            )
    convs = []
    for i in range(n_files - TEMPLATES):
        out = corpus / f"c{i % 10}/c{i:04}.conv.json"
        if not out.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            jobs.append(_small_conversation(out, i, 5000 + i))
            convs.append((out, i % TEMPLATES))
    _run_generator(jobs)
    for out, k in convs:  # the template replaces the conversation's own system message
        doc = json.loads(out.read_text(encoding="utf-8"))
        doc["system_prompt"] = f"../prompts/agent{k}.prompt.md"
        doc["messages"] = [m for m in doc["messages"] if m.get("role") != "system"]
        out.write_text(json.dumps(doc, ensure_ascii=False, indent=1), encoding="utf-8")


LOG_TOOLS = 12


def _generate_logs(corpus: Path, n_files: int) -> None:
    """Write an agent's logs (skipping files already there): its 17 KB prompt template
    (``agent.prompt.md``, as the agent's repository holds it) and conversations of 2-10 KB
    in JSON whose system message is that prompt, each offering some of ``LOG_TOOLS`` tools
    (15 sets in turn)."""
    prompt_file = corpus / "agent.prompt.md"
    if not prompt_file.exists():
        corpus.mkdir(parents=True, exist_ok=True)
        cmd = ["--prompt", "--target-bytes", "17000", "--seed", "7", "--out", str(prompt_file)]
        subprocess.run([sys.executable, str(GEN), *cmd], check=True)
    prompt = prompt_file.read_text(encoding="utf-8")
    jobs, convs = [], []
    for i in range(n_files - 1):
        out = corpus / f"runs{i % 10}/run{i:04}.conv.json"
        if not out.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            jobs.append(_small_conversation(out, i, 9000 + i))
            convs.append((out, i))
    _run_generator(jobs)
    for out, i in convs:  # the agent's prompt and some of its tools
        doc = json.loads(out.read_text(encoding="utf-8"))
        doc.pop("system_prompt", None)
        doc["messages"] = [
            {"role": "system", "content": prompt},
            *(m for m in doc["messages"] if m.get("role") != "system"),
        ]
        mask = i % 15 + 1  # of the four groups of three tools, those this run offers
        names = [f"agent_tool_{k}" for k in range(LOG_TOOLS) if mask >> (k % 4) & 1]
        doc["tools"] = [
            {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
            for n in [*names, "read_file"]
        ]
        out.write_text(json.dumps(doc, ensure_ascii=False, indent=1), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
