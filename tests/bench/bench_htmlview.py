"""Benchmark: drawing the assembled view (``server/htmlview.py``) of a large conversation.

The webview asks for a fresh page after each pause in typing, and ``assemble --format html``
draws the same page once; this times ``render_html`` on an analysis of the 1 MB and 10 MB
conversations of ``tests/bench/gen_conversation.py`` (generated into a temporary folder),
with the document text as a ``str`` (the command line) and as a ``Rope`` (the editor).

    python tests/bench/bench_htmlview.py [--sizes 1,10] [--repeat 9]
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import datetime as dt
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from assembly.rope import Rope
from server.htmlview import render_html, view_model
from server.workspace import analyze

GEN = Path(__file__).resolve().parent / "gen_conversation.py"
SIZES = {1: (1000, 1_000_000), 10: (10000, 10_000_000)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,10", help="MB sizes among 1 and 10")
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="promptls-bench-"))
    atexit.register(shutil.rmtree, scratch, True)  # the generated files go
    print("size  text  render median (max)   page bytes   rows  sent  dropped")
    for mb in (int(s) for s in args.sizes.split(",")):
        messages, target = SIZES[mb]
        doc = scratch / f"bench{mb}.conv.json"
        size = ["--messages", str(messages), "--target-bytes", str(target)]
        subprocess.run([sys.executable, str(GEN), *size, "--out", str(doc)], check=True)
        analysis = analyze(doc, today=dt.date(2026, 1, 1))
        roped = dataclasses.replace(analysis, text=Rope.from_str(str(analysis.text)))
        for label, a in (("str", analysis), ("rope", roped)):
            times = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                page = render_html(a, display_path=doc.name, webview=True, nonce="n0nce")
                times.append((time.perf_counter() - start) * 1000)
            m = view_model(a, display_path=doc.name)
            print(
                f"{mb:>2} MB  {label:4}  {statistics.median(times):7.1f} ms ({max(times):6.1f})"
                f"   {len(page):>10,}  {len(m['rows']):>5}  {len(a.assembly.layout):>4}"
                f"  {len(a.assembly.dropped):>7,}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
