"""Benchmark: cold ``promptls assemble`` against the tokenizer floor (run on demand).

For each size it generates the conversation with ``tests/bench/gen_conversation.py`` (as
is), then measures in one run: (a) the time tiktoken alone needs to encode the document's
text once (``encode_ordinary`` of the whole file, single call, encoder already loaded), and
(b) the cold ``promptls assemble --format json`` wall time in a fresh process. The floor is
taken with the encoding the output names (the document's model's, ``o200k_base`` for the
default ``gpt-4o``), loaded offline; ``--baseline DIR`` also times another checkout of
promptls (e.g. a checkout of ``main``) in the same run, against the floor of the encoding it used.
Medians over ``--repeat`` runs, interleaved so that load on the machine hits every row.
Each checkout runs once untimed first, with its compiled bytecode kept in a scratch folder
(``PYTHONPYCACHEPREFIX``, even where ``PYTHONDONTWRITEBYTECODE`` is set): an installed
promptls has its ``.pyc`` files, and compiling 40 modules from source would add 80 ms to
every cold run.
On a busy machine wall times swell with other people's work; the CPU columns (the
command's user + system time, its counting child's included, against the floor's process
time) are the steadier comparison, and on an idle machine the wall ratio is at most the
CPU one (the child counts in parallel). A command may end without waiting for its
counting child (it is killed and left to the system): this script makes itself the
"subreaper" of what its commands leave (Linux), reaps it after each timed run, and so
counts its CPU too; the wall time ends when the command does, as a user's shell sees it.

The ``least`` columns time, in the same run, the least work any implementation does in a
fresh process: start the interpreter, load the encoding from bpe-openai's compiled module
(as promptls does, without its package ``__init__``) and count the texts of the messages
the assembly sends (taken beforehand from promptls's own output; not the document's
parsing, the pipeline or the output). Where that alone is over a target, the target is
out of reach of a command that starts cold.

    python tests/bench/bench_assemble.py [--repeat 5] [--sizes 1,10] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import atexit
import json
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
GEN = Path(__file__).resolve().parent / "gen_conversation.py"
SIZES = {1: (1000, 1_000_000), 10: (10000, 10_000_000)}

# The least a cold command does: interpreter, encoding, counting what is sent (argv: the
# encoding, a JSON list of the texts).
LEAST = """
import json, sys
from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader
from importlib.util import find_spec, module_from_spec, spec_from_file_location
from pathlib import Path
folder = Path(next(iter(find_spec("bpe_openai").submodule_search_locations)))
path = next(p for p in (folder / f"_bindings{s}" for s in EXTENSION_SUFFIXES) if p.is_file())
loader = ExtensionFileLoader("bpe_openai._bindings", str(path))
module = module_from_spec(spec_from_file_location("bpe_openai._bindings", path, loader=loader))
loader.exec_module(module)
count = module.tokenizer_for_encoding(sys.argv[1]).count
with open(sys.argv[2], encoding="utf-8") as f:
    print(sum(count(t) for t in json.load(f)))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sizes", default="1,10", help="MB sizes among 1 and 10")
    ap.add_argument("--baseline", type=Path, help="another promptls checkout to time too")
    args = ap.parse_args()
    if not GEN.is_file():
        print(f"generator not found: {GEN}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    from server.tokenizers import reference_encoding

    if not adopt_orphans():
        print("note: a counting child left by a command is not in the CPU columns", file=sys.stderr)

    checkouts = [("this", ROOT)] + ([("baseline", args.baseline)] if args.baseline else [])
    scratch = Path(tempfile.mkdtemp(prefix="promptls-bench-"))
    atexit.register(shutil.rmtree, scratch, True)  # the generated files go
    out_dir = scratch
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
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
        floors: dict[str, list[float]] = {}
        cold: dict[str, list[float]] = {label: [] for label, _ in checkouts}
        cold_cpu: dict[str, list[float]] = {label: [] for label, _ in checkouts}
        floors_cpu: dict[str, list[float]] = {}
        used: dict[str, str] = {}
        least: list[float] = []
        for label, checkout in checkouts:  # untimed: fills the bytecode cache
            first = subprocess.run(
                [sys.executable, "-m", "server.cli", "assemble", str(doc), "--format", "json"],
                cwd=checkout,
                capture_output=True,
                check=False,
                env={**env, "PYTHONPATH": str(checkout)},
            )
            reap_orphans()  # not counted in the first timed run
            if label == "this":
                sent = json.loads(first.stdout)
                texts = out_dir / f"sent{mb}.json"
                texts.write_text(
                    json.dumps(
                        [
                            m["content"]
                            for m in sent["messages"]
                            if isinstance(m.get("content"), str)
                        ]
                    ),
                    encoding="utf-8",
                )
                least_cmd = [sys.executable, "-c", LEAST, sent["encoding"], str(texts)]
                subprocess.run(least_cmd, capture_output=True, check=True, env=env, cwd=scratch)
        for _ in range(args.repeat):
            for label, checkout in checkouts:
                t0 = time.perf_counter()
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                proc = subprocess.run(
                    [sys.executable, "-m", "server.cli", "assemble", str(doc), "--format", "json"],
                    cwd=checkout,
                    capture_output=True,
                    check=False,
                    env={**env, "PYTHONPATH": str(checkout)},
                )
                cold[label].append(time.perf_counter() - t0)
                reap_orphans()
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                cold_cpu[label].append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
                assert proc.returncode == 0, proc.stderr.decode()
                used[label] = json.loads(proc.stdout)["encoding"]
            t0 = time.perf_counter()
            subprocess.run(least_cmd, capture_output=True, check=True, env=env, cwd=scratch)
            least.append(time.perf_counter() - t0)
            for name in sorted(set(used.values())):
                enc = reference_encoding(name)[0]
                t0, p0 = time.perf_counter(), time.process_time()
                enc.encode_ordinary(text)
                floors.setdefault(name, []).append(time.perf_counter() - t0)
                floors_cpu.setdefault(name, []).append(time.process_time() - p0)
        for label, _ in checkouts:
            f = statistics.median(floors[used[label]])
            c = statistics.median(cold[label])
            fc = statistics.median(floors_cpu[used[label]])
            cc = statistics.median(cold_cpu[label])
            lw = statistics.median(least)
            rows.append((label, mb, len(text.encode()), used[label], f, c, fc, cc, lw))
    print(
        f"{'promptls':>8} {'size':>6} {'bytes':>12} {'encoding':>12} {'floor wall':>11}"
        f" {'cold wall':>10} {'ratio':>6} {'floor CPU':>10} {'cold CPU':>9} {'ratio':>6}"
        f" {'least wall':>11} {'ratio':>6}"
    )
    for label, mb, n, name, f, c, fc, cc, lw in rows:
        print(
            f"{label:>8} {mb:>4}MB {n:>12,} {name:>12} {f * 1000:>8.0f} ms {c * 1000:>7.0f} ms"
            f" {c / f:>6.2f} {fc * 1000:>7.0f} ms {cc * 1000:>6.0f} ms {cc / fc:>6.2f}"
            f" {lw * 1000:>8.0f} ms {lw / f:>6.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
