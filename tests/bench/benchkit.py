"""What the benchmark scripts share: loading this checkout's ``bench_lsp.py`` (its edit
kinds and corpus generator), running a script once per checkout as a worker, and the one
table printer."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Sequence
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


def run_worker(script: str, root: Path, argv: Sequence[str]) -> Any:
    """Run ``script --worker --root ROOT *argv`` in checkout ``root`` (its code imported from
    there) and return the JSON value its last output line holds."""
    cmd = [sys.executable, str(Path(script).resolve()), "--worker", "--root", str(root.resolve())]
    out = subprocess.run([*cmd, *argv], cwd=root, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.splitlines()[-1])


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
