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

from tests.support.fuzz import (
    Fuzzer,
    client_position,
    line_split_points,
    workspace_from_examples,
    workspace_from_folders,
)

SEED = 20261201
EDITS_PER_DOCUMENT = 60  # six documents: 360 edits
REAL_LOGS = Path(__file__).resolve().parents[1] / "data" / "real-logs"


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


async def test_random_edits_of_real_logs_end_on_the_lint_result(tmp_path: Path) -> None:
    """The same on logs nobody here wrote (``tests/data/real-logs``: OpenAI chat, Anthropic
    Messages and Responses requests from public test suites, Codex CLI rollouts, Claude Code
    transcripts, Copilot CLI, Gemini CLI and pi sessions), a third of them and one of each folder, a
    few edits each: the other providers' formats and the agents' sessions are re-read whole,
    an OpenAI log by its messages.
    ``python tests/fuzz/fuzz_lsp.py --docs tests/data/real-logs`` is the longer run."""
    docs = workspace_from_folders(tmp_path / "ws", [REAL_LOGS])
    picked = docs[::3]
    # (and the first of a folder the stride missed: every format is edited)
    picked += [
        next(p for p in docs if p.parent.name == folder)
        for folder in sorted({p.parent.name for p in docs} - {p.parent.name for p in picked})
    ]
    assert {p.parent.name for p in picked} == {
        "anthropic",
        "claude-code",
        "codex",
        "copilot",
        "gemini-cli",
        "openai",
        "pi",
        "responses",
    }
    fuzzer = Fuzzer(tmp_path / "ws", seed=SEED, log_file=tmp_path / "server.log")
    await fuzzer.start()
    try:
        report = await fuzzer.run(picked, edits_per_document=5, checkpoints=1)
    finally:
        await fuzzer.stop()
    print(report.summary())
    assert report.edits == 5 * len(picked)
    assert report.checkpoints == 2 * len(picked)
    assert report.ok(), report
    log = (tmp_path / "server.log").read_text(encoding="utf-8")
    assert "Traceback" not in log, log[-3000:]


def test_the_line_added_and_removed_at_a_checkpoint_is_expressible() -> None:
    """The checkpoint's line (a "\\n" added at a line start, then removed) is never put
    after a lone "\\r": removing it would take a position inside a "\\r\\n" (seed 1919's one
    stale checkpoint of ``fuzz_lsp.py`` was the server's text parting from the client's
    there, not a stale analysis)."""
    text = 'a\rb\r\nc\nd\r{"x": 1}\n'
    points = line_split_points(text)
    assert [text[p - 1] for p in points] == ["\n", "\n", "\n"]
    for at in points:
        added = text[:at] + "\n" + text[at:]
        # The "\n" added stands alone after a line end: removing it takes positions at
        # line starts, (n, 0) and (n + 1, 0), never one inside a "\r\n".
        assert added[at - 1 : at + 1] != "\r\n"
        assert client_position(added, at).character == 0
