"""The long fuzz run, on demand: ``python tests/fuzz/fuzz_lsp.py [--edits N] [--seed S]``.

The same run as the CI test (``tests/support/fuzz.py``) with many more edits (10,000 by
default, spread over the example conversations in JSON, JSON Lines and YAML and a prompt
template) and a checkpoint every 100 edits. Prints the report; exits 1 on any stale or
missing publish, request error, out-of-order or repeated publish, or traceback in the
server's log.

``--docs DIR`` (repeatable) fuzzes instead the conversations and prompt templates found
under each folder (copied whole, so the files they name come along): real logs and
prompts, e.g. ``--docs tests/data/real-logs --docs tests/data/prompts-real``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.fuzz import Fuzzer, workspace_from_examples, workspace_from_folders


async def main(edits: int, seed: int, only: str | None, keep: Path | None, docs: list[Path]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        found = workspace_from_folders(ws, docs) if docs else workspace_from_examples(ws)
        paths = [p for p in found if only is None or p.name == only]
        if not paths:
            print("no document to fuzz", file=sys.stderr)
            return 2
        per_document = max(1, edits // len(paths))
        log = Path(tmp) / "server.log"
        fuzzer = Fuzzer(ws, seed=seed, log_file=log)
        start = time.monotonic()
        await fuzzer.start()
        try:
            report = await fuzzer.run(
                paths, edits_per_document=per_document, checkpoints=max(1, per_document // 100)
            )
        finally:
            await fuzzer.stop()
        print(f"seed {seed}, {len(paths)} documents, {time.monotonic() - start:.0f} s")
        print(report.summary())
        for problem in (
            report.stale
            + report.outlines
            + report.folds
            + report.missing
            + report.request_errors[:10]
        ):
            print("  ", problem)
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            for name, text in report.stale_texts.items():
                (keep / name.replace(" ", "-")).write_bytes(text.encode("utf-8", "surrogatepass"))
            for name, trail in report.stale_trails.items():
                dump = json.dumps({"base": trail[0], "edits": trail[1]}, ensure_ascii=True)
                (keep / (name.replace(" ", "-") + ".trail.json")).write_text(dump)
        tracebacks = log.read_text(encoding="utf-8").count("Traceback")
        print(f"tracebacks in the server log: {tracebacks}")
        return 0 if report.ok() and not tracebacks else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", help="fuzz only the document of this name")
    parser.add_argument(
        "--docs", type=Path, action="append", default=[], help="fuzz the documents under DIR"
    )
    parser.add_argument("--keep", type=Path, help="write the texts of stale checkpoints here")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.edits, args.seed, args.only, args.keep, args.docs)))
