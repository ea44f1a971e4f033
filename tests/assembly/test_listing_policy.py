"""The forgotten-files listing's policy, checked by brute force over every layout.

Onyx's eviction for the listing (``backend/onyx/chat/llm_loop.py:553-585``) is re-charged
here every time the listing grows, and when even the whole history cannot make room for
every forgotten file the listing is trimmed. ``fit_listing`` documents the policy; this
test generates small tight cases (uploads cut from the history, files only a summary
remembers, pinned costs, a budget near the listing's size), assembles them with the real
tokenizer, and compares the chosen layout with every layout the policy allows, found by
enumerating all subsets of the older history and all subsets of the forgotten files:

- a layout keeps a contiguous newest run of the older history, no longer than Onyx's own
  newest-first fill (``llm_loop.py:514-526``), lists every file of a message it evicted
  beyond that fill, lists of the files the fill already lost a longest run by rank (files
  of cut messages newest first, then files only the summary remembers, newest first), and
  fits: kept history + listing (as measured) ≤ what the last turn leaves;
- the chosen layout is one of them, and none lists more files by rank nor, listing as
  many, keeps more history (so no history message is left out that would still fit, and
  a file that was cut is listed before files that are merely older).
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import random
from typing import Any

import pytest

from assembly.assemble import (
    AssembleOptions,
    Assembly,
    LlmMessage,
    _FileMeta,
    _listing_text,
    assemble,
)
from assembly.model import DocFormat
from assembly.reading import parse_conversation
from assembly.settings import SettingsLayer, resolve_settings
from tests.support.engine import loaded

TOKENIZER = loaded().tokenizer
TODAY = dt.date(2026, 7, 15)
CASES = 150


def _case(rng: random.Random) -> dict[str, Any]:
    """A conversation whose older history carries uploads, maybe after a summary."""
    messages: list[dict[str, Any]] = []
    n_file = 0

    def upload() -> dict[str, Any]:
        nonlocal n_file
        n_file += 1
        return {
            "file_id": f"f{n_file}-{'x' * rng.randrange(0, 30)}",
            "filename": f"report-{n_file}.txt",
            "content": "text",
            "token_count": rng.randrange(1, 60),
            "approx_char_count": rng.randrange(0, 5000),
        }

    if rng.random() < 0.5:
        messages.append(
            {"id": "s0", "role": "user", "content": "old", "files": [upload(), upload()]}
        )
        messages.append({"id": "s1", "role": "assistant", "content": "ok"})
        messages.append(
            {
                "id": "sum",
                "role": "summary",
                "summarizes_through": "s1",
                "content": "earlier",
                "token_count": rng.randrange(1, 30),
            }
        )
    for i in range(rng.randrange(1, 5)):
        user: dict[str, Any] = {
            "id": f"u{i}",
            "role": "user",
            "content": "q",
            "token_count": rng.randrange(1, 40),
        }
        if rng.random() < 0.6:
            user["files"] = [upload() for _ in range(rng.randrange(1, 3))]
        messages.append(user)
        if rng.random() < 0.6:
            messages.append(
                {
                    "id": f"a{i}",
                    "role": "assistant",
                    "content": "a",
                    "token_count": rng.randrange(1, 40),
                }
            )
    messages.append({"id": "last", "role": "user", "content": "now", "token_count": 3})
    return {
        "settings": {
            "max_input_tokens": rng.randrange(40, 260),
            "safety_margin": 0,
            "reserved_tokens": 0,
            "encoding": "cl100k_base",
        },
        "tools": ["read_file"],
        "messages": messages,
    }


def _assemble(doc: dict[str, Any]) -> Assembly:
    conv = parse_conversation(json.dumps(doc), DocFormat.JSON)
    settings, issues = resolve_settings([SettingsLayer("doc", doc["settings"])])
    assert not issues
    return assemble(conv, settings, TOKENIZER, AssembleOptions(today=TODAY))


def _listing_tokens(files: list[_FileMeta]) -> int:
    return TOKENIZER.count(_listing_text(files)) if files else 0


def _layouts(a: Assembly, doc: dict[str, Any]) -> tuple[list[Any], Any]:
    """Every layout the policy allows (``(lines by rank, kept, listed ids)``) and the
    chosen one's, from all subsets of the older history and of the forgotten files."""
    history = list(a.history)
    last = max(i for i, m in enumerate(history) if m.kind == "user")
    before = history[:last]
    required = sum(m.tokens for m in history[last:])
    remaining = a.budget.history_budget - required
    # Onyx's newest-first fill.
    k0, used = len(before), 0
    while k0 > 0 and used + before[k0 - 1].tokens <= remaining:
        k0 -= 1
        used += before[k0].tokens
    files_of: dict[int, str] = {i: m.file_id for i, m in enumerate(before) if m.file_id}
    meta = _metadata(doc, history)
    carried = set(files_of.values())
    cut = [files_of[i] for i in range(k0) if i in files_of]
    orphans = [fid for fid in meta if fid not in {m.file_id for m in history if m.file_id}]
    forgotten = cut + [f for f in orphans if f not in cut]  # Onyx's order
    newest = {fid: i for i, fid in files_of.items() if i < k0}
    rank = sorted(cut, key=lambda f: -newest[f]) + list(reversed(orphans))
    allowed = []
    candidates = forgotten + [files_of[i] for i in range(k0, len(before)) if i in files_of]
    for kept in _subsets(range(len(before))):
        if kept and (kept != list(range(kept[0], len(before))) or kept[0] < k0):
            continue
        k = kept[0] if kept else len(before)
        evicted = [files_of[i] for i in range(k0, k) if i in files_of]
        for listed in _subsets(candidates):
            chosen = set(listed)
            if not set(evicted) <= chosen or chosen - set(forgotten) - set(evicted):
                continue
            run = [f for f in rank if f in chosen]
            if run != rank[: len(run)]:
                continue
            shown = [meta[f] for f in forgotten if f in chosen] + [meta[f] for f in evicted]
            cost = sum(before[i].tokens for i in kept) + _listing_tokens(shown)
            if cost <= remaining:
                allowed.append((len(run), len(kept), [m.file_id for m in shown]))
    kept_ids = {e.id for e in a.layout if e.segment == "history"}
    n_kept = sum(1 for m in before if m.id in kept_ids)
    listed_ids = [f.file_id for f in a.forgotten_files]
    n_run = sum(1 for f in listed_ids if f in set(forgotten))
    assert carried >= set(cut)
    return allowed, (n_run, n_kept, listed_ids)


def _metadata(doc: dict[str, Any], history: list[LlmMessage]) -> dict[str, _FileMeta]:
    """The files the pipeline gathers for ``read_file``: the uploads converted into the
    history, then those only the summary remembers (``~0 chars``)."""
    meta: dict[str, _FileMeta] = {}
    uploads = {f["file_id"]: f for m in doc["messages"] for f in m.get("files", ())}
    for m in history:
        if m.file_id is not None:
            f = uploads[m.file_id]
            meta[m.file_id] = _FileMeta(m.file_id, f["filename"], f["approx_char_count"])
    for m in doc["messages"]:
        if m["id"] == "s0":
            for f in m["files"]:
                meta.setdefault(f["file_id"], _FileMeta(f["file_id"], f["filename"], 0))
    return meta


def _subsets(items: Any) -> list[list[Any]]:
    items = list(items)
    return [list(c) for r in range(len(items) + 1) for c in itertools.combinations(items, r)]


@pytest.mark.parametrize("seed", range(CASES))
def test_the_chosen_layout_is_the_best_the_policy_allows(seed: int) -> None:
    doc = _case(random.Random(seed))
    a = _assemble(doc)
    if not a.ok:
        return  # the last turn itself does not fit: there is no layout to choose
    allowed, chosen = _layouts(a, doc)
    assert chosen in allowed
    best = max(allowed, key=lambda t: (t[0], t[1]))
    assert (chosen[0], chosen[1]) == (best[0], best[1])


def test_the_generated_cases_reach_the_trimmed_listing() -> None:
    """The cases above are tight enough to exercise every branch of the policy."""
    full = trimmed = evicted = 0
    for seed in range(CASES):
        doc = _case(random.Random(seed))
        a = _assemble(doc)
        if not a.ok:
            continue
        allowed, chosen = _layouts(a, doc)
        most = max(t[0] for t in allowed)
        forgotten_all = {f for t in allowed for f in t[2]}
        full += bool(chosen[2]) and chosen[0] == most
        trimmed += 0 < len(chosen[2]) < len(forgotten_all)
        evicted += any(t[1] < chosen[1] for t in allowed)
    assert full > 10 and trimmed > 5 and evicted > 5, (full, trimmed, evicted)
