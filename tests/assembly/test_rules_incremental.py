"""Incremental rules: ``check(ctx, cache=…)`` gives exactly what a fresh ``check`` gives.

Random edit sequences on the rule fixtures, the examples and a generated conversation
are analysed twice: through ``server.workspace.analyze`` with the previous analysis (the
incremental re-read and the rule cache, as the language server does), and afresh. The
diagnostics must be equal, ranges, related locations and fixes included; and the cache
must really have been used, so the test cannot pass on the fallback alone.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from pathlib import Path

import pytest

from assembly.assemble import AssembleOptions, assemble
from assembly.diagnostics import (
    Diagnostic,
    Related,
    RuleCache,
    RuleContext,
    Severity,
    check,
    from_issues,
)
from assembly.documents import parse_conversation
from assembly.incremental import reparse_conversation
from assembly.model import Conversation, DocFormat
from assembly.settings import SettingsLayer, resolve_settings
from assembly.text import TextRange
from assembly.tokens import Tokenizer
from server.tokenizers import load_tokenizer
from server.workspace import Analysis, analyze

ROOT = Path(__file__).resolve().parents[2]
TODAY = dt.date(2025, 1, 1)
_DOCS = sorted(
    p
    for p in [
        *(ROOT / "tests" / "data" / "diagnostics").rglob("*.conv.*"),
        *(ROOT / "examples").glob("*.conv.*"),
    ]
    if not p.name.endswith(".expected")
)
_ALPHABET = 'ab {}[]":,\n\\é😀x_'


def _edit(text: str, rnd: random.Random, conv: Conversation) -> str:
    """One random edit: mostly inside a message's content (what the cache reuses after),
    sometimes anywhere (what it must notice)."""
    inside = [m.content_range for m in conv.messages if m.content_range is not None]
    if inside and rnd.random() < 0.8:
        rng = rnd.choice(inside)
        pos = rnd.randrange(rng.start, max(rng.start + 1, rng.end))
    else:
        pos = rnd.randrange(len(text) + 1)
    kind = rnd.random()
    if kind < 0.5 and pos < len(text):  # same length: nothing after the edit moves
        ch = rnd.choice("abcxyz")
        return text[:pos] + ch + text[pos + 1 :]
    if kind < 0.8:
        return text[:pos] + rnd.choice(_ALPHABET) + text[pos:]
    return text[:pos] + text[pos + 1 :]


def _key(an: Analysis) -> list[object]:
    return [(d, d.range.start, d.range.end) for d in an.diagnostics]


def _run(path: Path, text: str, *, seed: int, n_edits: int) -> None:
    """Analyse ``n_edits`` random edits incrementally and afresh: equal diagnostics."""
    rnd = random.Random(seed)
    prev = analyze(path, text=text, today=TODAY, cold_cache=False)
    for _ in range(n_edits):
        text = _edit(text, rnd, prev.conversation)
        got = analyze(path, text=text, today=TODAY, cold_cache=False, previous=prev)
        want = analyze(path, text=text, today=TODAY, cold_cache=False)
        assert _key(got) == _key(want), (path.name, seed)
        assert isinstance(got.caches["rules"], RuleCache)
        prev = got


def _run_shared(path: Path, text: str, *, seed: int, n_edits: int) -> int:
    """Same-length edits inside message contents, with the re-read message spliced into
    the previous messages (what the re-read gives once ranges are anchored): check with
    the cache equals check without. Return how many runs reused findings."""
    an = analyze(path, text=text, today=TODAY, cold_cache=False)
    conv = an.parsed
    assert conv is not None
    tokenizer = load_tokenizer(an.settings.encoding).tokenizer
    cache = RuleCache()
    check(_context(conv, text, tokenizer), cache=cache)
    rnd = random.Random(seed)
    reused = 0
    for _ in range(n_edits):
        candidates = [
            (i, m.content_range)
            for i, m in enumerate(conv.messages)
            if m.content_range is not None and len(m.content_range) > 2
        ]
        if not candidates:
            return reused
        i, rng = rnd.choice(candidates)
        pos = rnd.randrange(rng.start + 1, rng.end - 1)
        if not text[pos].isalpha() or text[pos - 1] == "\\":
            continue
        # A few characters, so the token counts (and with them the budget cut) change.
        n = min(rnd.choice((1, 6)), rng.end - 1 - pos)
        if not all(c.isalnum() or c == " " for c in text[pos : pos + n]):
            n = 1
        new_text = text[:pos] + "".join(rnd.choice("ab xy,") for _ in range(n)) + text[pos + n :]
        re_read = reparse_conversation(conv, text, new_text, conv.format)
        if re_read is None:
            if conv.format is DocFormat.YAML:
                return reused  # always parsed again: nothing is shared
            continue  # the edit broke the message (`null` → `nxll`)
        messages = (*conv.messages[:i], re_read.messages[i], *conv.messages[i + 1 :])
        conv = dataclasses.replace(re_read, messages=messages)
        text = new_text
        ctx = _context(conv, text, tokenizer)
        assert check(ctx, cache=cache) == check(ctx), (path.name, seed)
        reused += cache.reused
    return reused


@pytest.mark.parametrize("path", _DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_cached_rules_equal_fresh_rules_on_fixtures(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    _run(path, text, seed=sum(map(ord, path.name)), n_edits=6)
    _run_shared(path, text, seed=sum(map(ord, path.name)), n_edits=6)


def test_cached_rules_equal_fresh_rules_on_a_generated_conversation(tmp_path: Path) -> None:
    # ``gen_conversation.py --messages 80 --seed 3`` of the benchmark corpus (committed).
    out = tmp_path / "gen.conv.json"
    out.write_bytes((ROOT / "tests" / "data" / "generated" / "m80-seed3.conv.json").read_bytes())
    text = out.read_text(encoding="utf-8")
    _run(out, text, seed=7, n_edits=15)
    reused = _run_shared(out, text, seed=7, n_edits=40)
    assert reused >= 20  # the sequence exercises the reuse, not only the fallback
    # A budget that cuts the history in the middle: edits move the cut.
    tight = text.replace('"max_input_tokens": 128000', '"max_input_tokens": 9000', 1)
    assert tight != text
    out.write_text(tight, encoding="utf-8")
    assert _run_shared(out, tight, seed=11, n_edits=60) >= 20


def test_reuse_moves_findings_after_the_edited_message() -> None:
    """A length-changing edit in a message before findings: they are reused, moved."""
    text = (
        '{"messages": [\n'
        '  {"id": "u1", "role": "user", "content": "hello there"},\n'
        '  {"id": "a1", "role": "assistant", "content": null, "tool_calls": [{"id": "c1",'
        ' "type": "function", "function": {"name": "f", "arguments": "{}"}}]},\n'
        '  {"id": "t9", "role": "tool", "tool_call_id": "c9", "content": "x"},\n'
        '  {"id": "u2", "role": "user", "content": "bye"}\n'
        "]}"
    )
    fmt = DocFormat.JSON
    conv = parse_conversation(text, fmt)
    settings_tokenizer: Tokenizer = load_tokenizer("cl100k_base").tokenizer
    cache = RuleCache()
    ctx = _context(conv, text, settings_tokenizer)
    first = check(ctx, cache=cache)
    assert {d.code for d in first} >= {"orphaned-tool-response", "unanswered-tool-call"}
    new_text = text.replace("hello there", "hello over there")
    # What the re-read after this edit gives once later messages keep their objects: the
    # edited message is new, the others are shared (here: moved copies are not needed to
    # check the rules, so the later messages are taken from a full parse of the new text).
    fresh = parse_conversation(new_text, fmt)
    re_read = reparse_conversation(conv, text, new_text, fmt)
    assert re_read is not None
    messages = (*conv.messages[:0], re_read.messages[0], *fresh.messages[1:])
    conv2 = dataclasses.replace(fresh, messages=messages)
    # Nothing shared before the edit: the identity check must refuse to reuse.
    assert check(_context(conv2, new_text, settings_tokenizer), cache=cache) == check(
        _context(conv2, new_text, settings_tokenizer)
    )
    assert not cache.reused
    # Now an edit in the last message: every other message is shared and nothing moves
    # before it; the findings are reused as they are.
    newer = new_text.replace('"bye"', '"bye now"')
    re_read = reparse_conversation(conv2, new_text, newer, fmt)
    assert re_read is not None
    conv3 = dataclasses.replace(re_read, messages=(*conv2.messages[:-1], re_read.messages[-1]))
    got = check(_context(conv3, newer, settings_tokenizer), cache=cache)
    assert cache.reused
    assert got == check(_context(conv3, newer, settings_tokenizer))


def _context(conv: Conversation, text: str, tokenizer: Tokenizer) -> RuleContext:
    """The context ``analyze`` builds, for a document without files of its own."""
    settings = resolve_settings([SettingsLayer("<document>", conv.settings)])[0]
    opts = AssembleOptions(today=TODAY, system_template=None, file_contents={})
    a = assemble(conv, settings, tokenizer, opts)
    reported = [*from_issues(conv.issues)]
    reported.extend(
        Diagnostic(
            e.code,
            Severity(e.severity),
            e.message,
            e.range,
            related=tuple(Related(r, m) for r, m in e.related),
        )
        for e in a.errors
    )
    return RuleContext(
        text=text,
        settings=settings,
        tokenizer=tokenizer,
        conversation=conv,
        assembly=a,
        reported=tuple(reported),
    )


def test_moving_findings_keeps_offsets_before_shifts_after_and_refuses_inside() -> None:
    from assembly.diagnostics.incremental import _Move, _move_all

    def diag(start: int, end: int, related: tuple[int, int] | None = None) -> Diagnostic:
        rel = (Related(TextRange(*related), "there"),) if related is not None else ()
        return Diagnostic("x", Severity.WARNING, "m", TextRange(start, end), related=rel)

    move = _Move(at=10, old_end=20, new_end=23)  # a message [10, 20) grew by 3
    moved = _move_all([diag(0, 10), diag(10, 20), diag(25, 30, (2, 20))], move)
    assert moved is not None
    assert [(d.range.start, d.range.end) for d in moved] == [(0, 10), (10, 23), (28, 33)]
    assert moved[2].related[0].range == TextRange(2, 23)
    assert _move_all([diag(12, 14)], move) is None  # inside the edited message
    assert _move_all([diag(0, 5, (11, 12))], move) is None
    assert _move_all([diag(5, 15)], _Move(10, 20, 20)) is None
