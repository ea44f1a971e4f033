"""A seeded fuzz run in CI: a few hundred random edits with interleaved requests against
``promptls serve`` over stdio (``tests/support/fuzz.py``).

Checked at every checkpoint (on opening, and after the last edit of each document): the server
publishes the current version (within a minute; in practice one analysis time), and what
it publishes equals ``promptls lint`` of the same text, and its outline and folds ones made
afresh.
Also: every request answered without an error, versions published in order and each
once. The longer run is ``python tests/fuzz/fuzz_lsp.py``.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.fuzz import Fuzzer, workspace_from_examples

SEED = 20261201
EDITS_PER_DOCUMENT = 60  # five documents: 300 edits


async def test_random_edits_with_interleaved_requests_end_on_the_lint_result(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    paths = workspace_from_examples(ws)
    fuzzer = Fuzzer(ws, seed=SEED, log_file=tmp_path / "server.log")
    await fuzzer.start()
    try:
        report = await fuzzer.run(paths, edits_per_document=EDITS_PER_DOCUMENT, checkpoints=2)
    finally:
        await fuzzer.stop()
    print(report.summary())
    assert report.edits == EDITS_PER_DOCUMENT * len(paths)
    assert report.checkpoints == 3 * len(paths)  # on opening, and two
    assert report.requests > report.edits // 2
    assert report.ok(), report
    log = (tmp_path / "server.log").read_text(encoding="utf-8")
    assert "Traceback" not in log, log[-3000:]
    assert "starting one" not in log  # no request ever had to start an analysis
