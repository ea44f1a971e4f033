"""The benchmarks run from a clone: the corpus generator is in the repository, byte for byte
the shared one, and no bench script reads a file outside the repository.

The benchmarks themselves are run on demand (docs/benchmarks.md); here each one is started
with ``--help`` (it must import and parse its arguments without a traceback) and its source is
checked for paths that leave the repository.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from server.workspace import analyze

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "tests" / "bench"
GEN = BENCH / "gen_conversation.py"
# The shared generator beside a checkout of the project (the one the issues' targets name).
SHARED_GEN = REPO.parent / "shared" / "bench" / "gen_conversation.py"
# sha256 of the shared generator this copy reproduces.
GEN_SHA256 = "0dfa273045de4a4b5b6a89e15cdf89b2a443505ef7f23fd84fb3214a563ddd2c"
# The timing benchmarks and the two evaluations of `instruction-far-from-section`.
SCRIPTS = sorted(
    [
        *BENCH.glob("bench_*.py"),
        BENCH / "eval_instructions.py",
        BENCH / "separability_instructions.py",
    ]
)


def test_the_generator_is_the_shared_one_byte_for_byte() -> None:
    data = GEN.read_bytes()
    assert hashlib.sha256(data).hexdigest() == GEN_SHA256
    if SHARED_GEN.is_file():  # beside the development checkout: compare with it directly
        assert data == SHARED_GEN.read_bytes(), f"{GEN} differs from {SHARED_GEN}"


def test_there_are_bench_scripts() -> None:
    names = {p.name for p in SCRIPTS}
    assert {"bench_assemble.py", "bench_lint.py", "bench_lsp.py", "bench_textsync.py"} <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_bench_script_reads_nothing_outside_the_repository(script: Path) -> None:
    source = script.read_text(encoding="utf-8")
    assert "shared" not in source, "use tests/bench/gen_conversation.py"
    assert not re.search(r"""["']/tmp/""", source), "generate into tempfile.mkdtemp()"
    assert not re.search(r"ROOT\.parent|parents\[[3-9]\]", source)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_bench_script_starts(script: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(script), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "usage:" in proc.stdout


def test_the_generator_writes_a_conversation_promptls_reads(tmp_path: Path) -> None:
    out = tmp_path / "small.conv.json"
    args = ["--messages", "30", "--target-bytes", "30000", "--out", str(out)]
    subprocess.run([sys.executable, str(GEN), *args], check=True, timeout=60)
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert len(doc["messages"]) >= 30
    analysis = analyze(out)
    assert analysis.assembly.ok
    assert not [d for d in analysis.diagnostics if d.code == "schema-error"]
