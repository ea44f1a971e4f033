"""Benchmark: edits only JSON Lines and YAML re-read their own way, in process, per checkout.

``bench_lsp.py --kinds`` times the edit kinds every format shares. This one times, in CPU
time of the analysing process, the edits whose cost is the format's reader's alone, on the
generated 10 MB (or 1 MB) conversation that ``bench_lsp.py`` makes (``--corpus``):

- JSON Lines: a message typed character by character in the middle of the document after
  pressing Enter at the end of a line (through its broken states), and the same typed at
  the start of a line; typing in a message below a line broken a third of the way in, in
  the line right after it, and a message typed (through its broken states) below it;
  typing in a record of the same document written one record over several lines; a
  message typed in the middle of a log whose last line was cut off;
- YAML: a quote opened at the start of a message's content and typed on (when nothing
  after it closes the quote, libyaml reads the rest of the text into the scalar: the
  document is then one whose values are all plain scalars),
  and a message typed after pressing Enter at the end of an item.

The quote's document is made here (as many messages of plain words), not read.

Each checkout (``--root``, repeatable; default this one) runs in its own process with its
own ``assembly``, in turn, so a before/after comparison comes from one run:

    python tests/bench/bench_format_edits.py --root /path/to/before --root . [--size 10]

Medians in milliseconds of CPU per keystroke, and how many keystrokes parsed the whole text.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchkit import bench_lsp, print_table, run_worker

HERE = Path(__file__).resolve().parent

Edit = tuple[int, int, str]


def _typed(at: int, typed: str) -> list[Edit]:
    return [(at + k, at + k, ch) for k, ch in enumerate(typed)]


def _jsonl_kinds(text: str, size: int) -> dict[str, tuple[str, list[Edit]]]:
    mid = text.index("\n{", len(text) // 2)
    new = '{"id": "new", "role": "user", "content": "typed in the middle"}'
    third = text.index('"content": "', len(text) // 3) + 3
    below = text.index('"content": "', len(text) // 2) + 15
    broken = text[:third] + '"' + text[third:]
    next_line = broken.index('"content": "', broken.index("\n", third)) + 15
    records = _records(text)
    in_record = records.index('"content": "', len(records) // 2) + len('"content": "') + 3
    return {
        "a message typed after Enter, mid-text": (text, _typed(mid, "\n" + new)),
        "a message typed at a line's start": (text, _typed(mid + 1, new + "\n")),
        "typing below a broken line": (broken, _typed(below + 1, "abcdefgh")),
        "typing in the line below a broken line": (broken, _typed(next_line, "abcdefgh")),
        "a message typed below a broken line": (broken, _typed(mid + 1, "\n" + new)),
        "typing in a record over several lines": (records, _typed(in_record, "abcdefgh")),
        "a message typed above a cut-off last line": (
            text + '{"role": "user", "content": "cut off',
            _typed(mid, "\n" + new),
        ),
    }


def _records(text: str) -> str:
    """The document with each record written over several lines (pretty-printed)."""
    return "".join(
        json.dumps(json.loads(line), ensure_ascii=False, indent=2) + "\n"
        for line in text.splitlines()
    )


def _plain_yaml(size: int) -> str:
    """A conversation of as many bytes as the generated one whose contents are plain
    scalars (no quote, backslash or document marker anywhere)."""
    words = ("the", "model", "reads", "a", "context", "window", "then", "answers", "with")
    body = " ".join(words[k % len(words)] for k in range(150))
    head = "settings:\n  model: gpt-4o\n  max_input_tokens: 128000\nmessages:\n"
    n = size * 1_000_000 // (len(body) + 40)
    roles = ("user", "assistant")
    return head + "".join(
        f"- id: m{i}\n  role: {roles[i % 2]}\n  content: {body}\n" for i in range(n)
    )


def _yaml_kinds(text: str, size: int) -> dict[str, tuple[str, list[Edit]]]:
    plain = _plain_yaml(size)
    mid = plain.index("\n  content: ", len(plain) // 2) + len("\n  content: ")
    enter = text.index("\n- ", len(text) // 2)
    new = "\n- id: new\n  role: user\n  content: typed in the middle"
    return {
        "a quote left open, typed on": (plain, _typed(mid, '"abcdefg')),
        "a message typed after Enter, mid-text": (text, _typed(enter, new)),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", action="append", type=Path, help="a checkout (repeatable)")
    ap.add_argument("--corpus", type=Path, required=True, help="the documents' folder")
    ap.add_argument("--size", type=int, default=10, choices=(1, 10))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return _worker(args)
    roots = args.root or [HERE.parents[1]]
    args.corpus.mkdir(parents=True, exist_ok=True)
    for fmt in ("jsonl", "yaml"):
        bench_lsp()._generate(args.corpus, args.size, fmt)
    results = []
    for root in roots:
        argv = ["--corpus", str(args.corpus), "--size", str(args.size)]
        results.append((root.resolve().name, run_worker(__file__, root, argv)))
    head = ["format", "edit"] + [f"{name} cpu (whole)" for name, _ in results]
    rows = [head]
    for key in results[0][1]:
        fmt, kind = key.split(":", 1)
        row = [fmt, kind]
        for _, res in results:
            times, wholes = res[key]
            row.append(f"{1000 * statistics.median(times):.1f} ms ({wholes}/{len(times)})")
        rows.append(row)
    print_table(rows, left=2)
    print("\nMedian CPU per keystroke; (n/m): keystrokes that parsed the whole text.")
    return 0


def _worker(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(args.root[0]))
    import assembly.host as host_module
    from assembly.host import AnalysisHost, Edit
    from assembly.rope import Rope
    from tests.support.engine import analyze

    wholes: list[int] = []
    real = host_module.parse_conversation

    def counted(*a: Any, **kw: Any) -> Any:
        wholes.append(1)
        return real(*a, **kw)

    host_module.parse_conversation = counted  # type: ignore[assignment]
    res: dict[str, tuple[list[float], int]] = {}
    for fmt, kinds in (("jsonl", _jsonl_kinds), ("yaml", _yaml_kinds)):
        doc = args.corpus / f"bench-{args.size}mb.conv.{fmt}"
        for kind, (text, edits) in kinds(doc.read_text(encoding="utf-8"), args.size).items():
            gc.collect()
            gc.disable()
            host, rope = AnalysisHost(), Rope.from_str(text)
            analyze(doc, text=rope, host=host)
            times, before = [], len(wholes)
            for start, end, new in edits:
                rope = rope.edit(start, end, new)
                c = time.process_time()
                analyze(doc, text=rope, host=host, edit=Edit.replace(start, end, new))
                times.append(time.process_time() - c)
                gc.freeze()  # as the server does after each analysis
            gc.unfreeze()
            gc.enable()
            res[f"{fmt}:{kind}"] = (times, len(wholes) - before)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
