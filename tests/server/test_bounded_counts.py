"""``promptls lint`` finds what the counts would find while counting only what decides.

Lint reads only the findings, so it assembles each conversation with every text's most
possible tokens (``tokens.BoundTokenizer``: one a UTF-8 byte) and assembles it again with
the counts only when a decision compared counts with a threshold they did not clear
(``Assembly.decided_by_counts``) or a finding shows the assembly's counts (``Rule.counts``).
Every decision is monotone in the counts, so a bounded assembly that decided nothing by
them is the counted one but for its figures. These tests hold that claim to the findings:

- on every conversation of the test data (fixtures of every rule, the pipeline's cases,
  real logs, editor cases, foreign formats), the findings are the same either way;
- on the budget fixtures (the cut, the compression trigger, the overruns, the forgotten
  files' listing, project files), for windows from 1,000 to 260,000 tokens in steps of a
  quarter: a decision the pipeline did not report as one would differ at some step,
  since a bound is up to four times the count;
- the bounded path is the one taken where it can be, and the counted one where it must.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from assembly.assemble import Assembly
from assembly.diagnostics import COUNTED_CODES, RULES
from assembly.host import Analysis
from assembly.tokens import BoundTokenizer, CachedTokenizer, bound_tokenizer
from server.tokenizers import load_tokenizer
from server.workspace import analyze

DATA = Path(__file__).resolve().parents[1] / "data"
TODAY = dt.date(2026, 7, 15)
FOLDERS = ("diagnostics", "assembly", "real-logs", "ide", "parity", "foreign-formats", "generated")
CONVERSATION = re.compile(r"\.conv\.(json|jsonl|yaml|yml)$")
DOCS = sorted(
    p for f in FOLDERS for p in (DATA / f).rglob("*.conv.*") if CONVERSATION.search(p.name)
)
BUDGET_DOCS = sorted(
    p
    for code in (
        "history-truncated",
        "compression-due",
        "budget-overrun",
        "last-turn-over-budget",
        "file-id-not-in-read-file-list",
        "volatile-in-cached-prefix",
    )
    for p in (DATA / "diagnostics" / code).glob("*.conv.*")
    if CONVERSATION.search(p.name)
) + sorted(
    p
    for p in (DATA / "assembly").glob("*.conv.*")
    if CONVERSATION.search(p.name)
    and any(k in p.read_text(encoding="utf-8") for k in ("project_files", "files:", "summary"))
)
WINDOWS = sorted({int(1000 * 1.25**k) for k in range(26)})


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(DATA)) for p in paths]


def _both(path: Path, overrides: dict[str, int] | None = None) -> tuple[Analysis, Analysis]:
    counted = analyze(path, today=TODAY, overrides=overrides)
    bounded = analyze(path, today=TODAY, overrides=overrides, findings_only=True)
    return counted, bounded


def _decisions(a: Assembly | None) -> object:
    """What an assembly decided, without its figures: what is sent, in which segment,
    what the cut and the listing left out, what the compression would summarize."""
    if a is None:
        return None
    return (
        [(e.id, e.segment, e.cache) for e in a.layout],
        a.provider_messages,
        a.dropped,
        a.orphans_dropped,
        a.forgotten_files,
        (a.compression.triggered, a.compression.summarize, a.compression.keep),
        [(e.code, e.severity) for e in a.errors],
        a.images_dropped,
        a.cache_prefix_length,
    )


def _same(counted: Analysis, bounded: Analysis) -> bool:
    """The same findings; and an assembly kept with bounds decided as the counts do."""
    assert bounded.diagnostics == counted.diagnostics
    a = bounded.assembly
    if a is None or not a.counts_are_bounds:
        return False
    assert _decisions(a) == _decisions(counted.assembly)
    return True


def test_the_data_is_there() -> None:
    assert len(DOCS) > 350
    assert len(BUDGET_DOCS) > 25


@pytest.mark.parametrize("path", DOCS, ids=_ids(DOCS))
def test_same_findings_on_every_conversation(path: Path) -> None:
    _same(*_both(path))


@pytest.mark.parametrize("path", BUDGET_DOCS, ids=_ids(BUDGET_DOCS))
def test_same_findings_at_every_window(path: Path) -> None:
    bounded_alone = shows_counts = 0
    for window in WINDOWS:
        counted, bounded = _both(path, {"max_input_tokens": window})
        bounded_alone += _same(counted, bounded)
        shows_counts += any(d.code in COUNTED_CODES for d in counted.diagnostics)
    # The sweep crosses the edge: some windows are assembled with bounds alone, unless a
    # finding shows counts at every window (a date in a cached prompt, a last-N filter).
    assert bounded_alone or shows_counts == len(WINDOWS)


PROSE = "The quarterly review found costs down 3 % and revenue up in every region. "
CJK = "東京の新しい事務所は三月に開きます。ベルリンはその後です。🚀 "
READ_FILE = {
    "type": "function",
    "function": {
        "name": "read_file",
        "parameters": {"type": "object", "properties": {"file_id": {"type": "string"}}},
    },
}


def _project_document() -> dict[str, object]:
    """Project files whose texts overflow their share at some windows (the bound of the
    CJK file is about three times its count)."""
    files = [
        {"file_id": "f0", "filename": "review.md", "content": PROSE * 30},
        {"file_id": "f1", "filename": "offices.md", "content": CJK * 40},
    ]
    return {
        "project_files": files,
        "messages": [{"role": "user", "content": "Summarise the files."}],
    }


def _listing_document() -> dict[str, object]:
    """Twenty uploads that a summary covers: the files only it remembers are listed for
    ``read_file``, and the listing, charged to the history, is cut down at small windows."""
    messages: list[dict[str, object]] = []
    for i in range(20):
        messages.append(
            {
                "id": f"u{i}",
                "role": "user",
                "file_id": f"0000{i:04d}-aaaa-4bbb-8ccc-dddddddddddd",
                "filename": f"quarterly-report-{i}-{'final-' * (i % 4)}draft.txt",
                "content": (CJK if i % 2 else PROSE) * 8,
            }
        )
        messages.append({"id": f"a{i}", "role": "assistant", "content": CJK * (1 + i % 2)})
    messages.append(
        {"id": "s", "role": "summary", "summarizes_through": "a19", "content": PROSE * 3}
    )
    messages.append({"id": "q", "role": "user", "content": "Which report had the lowest costs?"})
    return {"tools": [READ_FILE], "messages": messages}


@pytest.mark.parametrize("make", [_project_document, _listing_document])
def test_same_decisions_across_the_edge(make: Callable[[], object], tmp_path: Path) -> None:
    """Without ``token_count`` overrides (most fixtures give counts, which bounds equal),
    bounds and counts part ways over a wide band of windows: in steps of a tenth, every
    window on either side of each edge."""
    path = tmp_path / f"{make.__name__}.conv.json"
    path.write_text(json.dumps(make(), ensure_ascii=False), encoding="utf-8")
    kept = 0
    for k in range(60):
        kept += _same(*_both(path, {"max_input_tokens": int(300 * 1.1**k)}))
    assert 0 < kept < 60


def _kind(path: Path) -> tuple[bool, bool]:
    a = analyze(path, today=TODAY, findings_only=True).assembly
    assert a is not None
    return a.counts_are_bounds, a.decided_by_counts


@pytest.mark.parametrize(
    ("fixture", "bounds_kept"),
    [
        ("history-truncated/fits.conv.yaml", True),
        ("compression-due/under-trigger.conv.yaml", True),
        ("history-truncated/dropped-span.conv.yaml", False),  # the cut left messages out
        ("compression-due/over-trigger.conv.yaml", False),  # the trigger passed
        ("budget-overrun/huge-system.conv.yaml", False),  # the assembly failed
        ("last-turn-over-budget/big-tool-result.conv.yaml", False),
        ("file-id-not-in-read-file-list/forgotten-file.conv.yaml", False),  # listed: cut
    ],
)
def test_which_path(fixture: str, bounds_kept: bool) -> None:
    bounds, decided = _kind(DATA / "diagnostics" / fixture)
    assert bounds is bounds_kept
    assert decided is not bounds_kept


def test_a_finding_that_shows_counts_is_made_from_counts() -> None:
    """``volatile-in-cached-prefix`` shows the cached prefix's tokens: with no decision by
    counts, the assembly is made again with them."""
    path = DATA / "diagnostics" / "volatile-in-cached-prefix" / "placeholder.conv.yaml"
    counted = analyze(path, today=TODAY)
    assert any(d.code == "volatile-in-cached-prefix" for d in counted.diagnostics)
    a = analyze(path, today=TODAY, findings_only=True).assembly
    assert a is not None and not a.decided_by_counts and not a.counts_are_bounds


def test_the_rules_that_show_counts_say_so() -> None:
    """These rules' findings show the assembly's figures (a message or a related note says
    "N tokens"); the other rules' findings on every conversation above are the same with
    bounds."""
    assert {r.code for r in RULES if r.counts} == {
        "history-truncated",
        "compression-due",
        "budget-overrun",
        "last-turn-over-budget",
        "volatile-in-cached-prefix",
        "tool-list-changes-prefix",
    }
    for code in COUNTED_CODES:
        found = [
            d
            for p in sorted((DATA / "diagnostics" / code).glob("*.conv.*"))
            if CONVERSATION.search(p.name)
            for d in analyze(p, today=TODAY).diagnostics
            if d.code == code
        ]
        said = [" ".join([d.message, *(r.message for r in d.related)]) for d in found]
        assert any(re.search(r"\d tokens", m) for m in said), (code, said)


def test_the_bound_is_the_tokenizers_own() -> None:
    exact = load_tokenizer("o200k_base").tokenizer
    bound = bound_tokenizer(exact)
    assert isinstance(bound, BoundTokenizer) and bound.encoding == "o200k_base"
    for text in ("plain", "東京 🚀 مرحبا", "\ud800 lone", "a" * 5000, ""):
        assert bound.count(text) == len(text.encode("utf-8", "surrogatepass"))
        assert bound.count(text) >= exact.count(text)
        assert exact.at_most(text) == exact.count(text)  # type: ignore[attr-defined]  # (counted)
    assert bound.count_many(["ab", "東"]) == [2, 3]
    # A counter that promises no bound gets no bounded twin.
    assert bound_tokenizer(CachedTokenizer(len, "chars")) is None


def test_the_bounded_path_counts_nothing_of_a_roomy_conversation(tmp_path: Path) -> None:
    """The point of it: a conversation far inside its window is not counted (the spy
    sees no text of it), and a cut one is."""
    exact = load_tokenizer("o200k_base").tokenizer
    assert isinstance(exact, CachedTokenizer)
    counter, batch = exact.counter, exact.batch
    asked: list[str] = []

    def spy(text: str) -> int:
        asked.append(text)
        return counter(text)

    def spy_batch(texts: list[str]) -> list[int]:
        asked.extend(texts)
        return list(map(counter, texts))

    doc = tmp_path / "roomy.conv.yaml"
    body = "Unique words of this roomy test, to miss the count cache, quokka-77 fennel."
    doc.write_text(f"messages:\n  - role: user\n    content: {body}\n", encoding="utf-8")
    exact.counter, exact.batch = spy, spy_batch if batch is not None else None
    try:
        roomy = analyze(doc, today=TODAY, findings_only=True)
        assert not roomy.diagnostics
        assert not any(body in t for t in asked)
        small = {"max_input_tokens": 40}  # too small for Onyx's own system prompt
        analyze(doc, today=TODAY, findings_only=True, overrides=small)
        assert any(body in t for t in asked)
    finally:
        exact.counter, exact.batch = counter, batch
