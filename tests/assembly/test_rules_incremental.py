"""Incremental rules: ``check(ctx, cache=…)`` gives exactly what a fresh ``check`` gives.

Random edit sequences on the rule fixtures, the examples and a generated conversation
are analysed twice: through ``server.workspace.analyze`` with the previous analysis (the
incremental re-read and the rule cache, as the language server does), and afresh. The
diagnostics must be equal, ranges, related locations and fixes included; and the cache
must really have been used, so the test cannot pass on the fallback alone. Typing in a
system message and in an attached file's content must re-run only the rules that read
them (``Rule.reads``): the system-prompt rules, and none.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import random
import re
from pathlib import Path

import pytest

from assembly.assemble import AssembleOptions, assemble
from assembly.diagnostics import (
    RULES,
    Diagnostic,
    Related,
    RuleCache,
    RuleContext,
    Severity,
    check,
    from_issues,
)
from assembly.diagnostics.incremental import CONTENT_FACTS, FILE_CONTENTS, SYSTEM_TEXT
from assembly.diagnostics.rules.tool_calls import MessageNodes
from assembly.documents import parse_conversation
from assembly.incremental import reparse_conversation
from assembly.model import Conversation, DocFormat, Role
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
# The rules that read the system prompt: typing in a system message re-runs these only.
SYSTEM_RULES = frozenset(
    {
        "custom-prompt-in-system",
        "unknown-placeholder",
        "instruction-far-from-section",
        "guidance-for-unavailable-tool",
    }
)


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


# ------------------------------------------------------------------ typing in a system
# message and in an attached file


def _typing_places(conv: Conversation) -> dict[str, list[TextRange]]:
    """Where one types: the content of the system messages, of the files attached to
    messages (their ``content`` string nodes), of the other messages."""
    nodes = MessageNodes(conv)
    places: dict[str, list[TextRange]] = {"system": [], "file": [], "message": []}
    for m in conv.messages:
        if m.content_range is not None:
            places["system" if m.role is Role.SYSTEM else "message"].append(m.content_range)
        node = nodes.node(m)
        files = node.get("files") if node is not None else None
        for item in files.items if files is not None and files.is_array else ():
            content = item.get("content") if item.is_object else None
            if content is not None and content.is_string:
                places["file"].append(content.range)
    return places


def _type(text: str, rnd: random.Random, conv: Conversation, kind: str) -> tuple[str, int]:
    """One keystroke in a place of ``kind`` (else in any message), and where: mostly plain
    typing, sometimes a character that changes the document's structure."""
    places = _typing_places(conv)
    candidates = [r for r in places[kind] if len(r) > 2] or [
        r for rs in places.values() for r in rs if len(r) > 2
    ]
    if not candidates:
        return text + " ", len(text)
    rng = rnd.choice(candidates)
    pos = rnd.randrange(rng.start + 1, rng.end - 1)
    ch = rnd.choice("abxy ") if rnd.random() < 0.8 else rnd.choice(_ALPHABET)
    op = rnd.random()
    if op < 0.6:
        return text[:pos] + ch + text[pos:], pos
    if op < 0.85:
        return text[:pos] + ch + text[pos + 1 :], pos
    return text[:pos] + text[pos + 1 :], pos


def _pointing_inside(an: Analysis, pos: int) -> set[str]:
    """The codes of the findings with a place strictly inside the message at ``pos``: a
    cache must run those rules again (where in the message they point may have changed)."""
    conv = an.conversation
    m = next((m for m in conv.messages if m.range.start < pos < m.range.end), None)
    if m is None:
        return set()
    res = set()
    for d in an.diagnostics:
        ranges = [] if d.path is not None else [d.range]
        ranges.extend(r.range for r in d.related if r.path is None)
        if d.fix is not None and d.path is None:
            ranges.extend(e.range for e in d.fix.edits)
        offsets = [x for r in ranges for x in (r.start, r.end)]
        if any(m.range.start < x < m.range.end for x in offsets):
            res.add(d.code)
    return res


# What a run that reused findings saw: the content facts that changed, the rules run
# again, whether the budget cut moved, the rules with findings inside the edited message.
_Fast = tuple[frozenset[str], tuple[str, ...], bool, set[str]]


def _run_typing(
    path: Path, text: str, *, seed: int, n_edits: int, kinds: tuple[str, ...]
) -> dict[str, list[_Fast]]:
    """Analyse ``n_edits`` keystrokes of the ``kinds`` incrementally and afresh: equal
    diagnostics. A keystroke that breaks the document is undone by the next edit (as in an
    editor, and so that the rest of the sequence types in a readable document again).
    Return, by kind, what each run that reused findings saw: the content facts that
    changed, the rules run again, whether the budget cut moved."""
    rnd = random.Random(seed)
    prev = analyze(path, text=text, today=TODAY, cold_cache=False)
    fast: dict[str, list[_Fast]] = {k: [] for k in kinds}
    undo: str | None = None
    for _ in range(n_edits):
        kind = rnd.choice(kinds)
        if undo is not None:
            text, undo, kind, pos = undo, None, "undo", -1
        else:
            before = text
            text, pos = _type(text, rnd, prev.conversation, kind)
        got = analyze(path, text=text, today=TODAY, cold_cache=False, previous=prev)
        want = analyze(path, text=text, today=TODAY, cold_cache=False)
        assert _key(got) == _key(want), (path.name, seed, kind)
        cache = got.caches["rules"]
        assert isinstance(cache, RuleCache)
        if len(got.conversation.issues) > len(prev.conversation.issues):
            undo = before
        if cache.reused and kind in fast:
            moved = (
                got.assembly is None
                or prev.assembly is None
                or got.assembly.dropped != prev.assembly.dropped
            )
            fast[kind].append((cache.changed, cache.recomputed, moved, _pointing_inside(prev, pos)))
        prev = got
    return fast


# The documents with a system message or attached files.
_TYPING_DOCS = [
    p
    for p in _DOCS
    if re.search(r"""role"?:\s*"?system|"?files"?:""", p.read_text(encoding="utf-8"))
]


@pytest.mark.parametrize("path", _TYPING_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_typing_in_system_messages_and_files_on_fixtures(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    seed = sum(map(ord, path.name)) + 1
    _run_typing(path, text, seed=seed, n_edits=8, kinds=("system", "file", "message"))


def _rich_conversation(tmp_path: Path, *, budget: int, read_file: bool) -> Path:
    """A generated conversation (``m400``, committed) whose system message the
    system-prompt rules report on (an unknown placeholder, the custom agent prompt
    repeated, a tool not offered), with attached files (forgotten ones under a tight
    ``budget``)."""
    doc = json.loads((ROOT / "tests" / "data" / "generated" / "m400.conv.json").read_text("utf-8"))
    doc["settings"]["max_input_tokens"] = budget
    if not read_file:
        doc["tools"] = [t for t in doc["tools"] if t["function"]["name"] != "read_file"]
    system = doc["messages"][0]
    assert system["role"] == "system"
    system["content"] = (
        system["content"].replace("{{CURRENT_DATETIME}}", "{{CURRENT_DATE}}")
        + "\n\nAlways generate_image a diagram before you answer.\n\n"
        + doc["custom_agent_prompt"]
        + "\n\n## run_shell\nRuns a shell command.\n"
    )
    out = tmp_path / f"rich-{budget}-{read_file}.conv.json"
    out.write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")
    return out


@pytest.mark.parametrize(("budget", "read_file"), [(128000, True), (9000, True), (9000, False)])
def test_typing_in_a_system_message_or_a_file_reruns_only_the_rules_that_read_it(
    tmp_path: Path, budget: int, read_file: bool
) -> None:
    path = _rich_conversation(tmp_path, budget=budget, read_file=read_file)
    text = path.read_text(encoding="utf-8")
    first = analyze(path, text=text, today=TODAY, cold_cache=False)
    codes = {d.code for d in first.diagnostics}
    assert codes >= {"unknown-placeholder", "custom-prompt-in-system"}
    assert "guidance-for-unavailable-tool" in codes
    if budget < 128000 and read_file:
        assert first.assembly is not None and first.assembly.forgotten_files
    fast = _run_typing(path, text, seed=budget + read_file, n_edits=40, kinds=("system", "file"))
    # Typing in the system prompt: only the rules that read it ran again, and those with
    # a finding inside the edited message (all of them when the budget cut moved with the
    # system prompt's tokens).
    system = [f for f in fast["system"] if f[0] == {SYSTEM_TEXT}]
    assert len(system) >= 10
    assert all(set(ran) <= SYSTEM_RULES | inside for _, ran, moved, inside in system if not moved)
    assert sum(set(ran) == SYSTEM_RULES for _, ran, _, _ in system) >= len(system) // 2
    # Typing in an attached file (forgotten or not): only the rules with a finding inside
    # the edited message ran again (without read_file, every file is named by a finding).
    files = [f for f in fast["file"] if f[0] == {FILE_CONTENTS}]
    assert len(files) >= 10
    assert all(set(ran) <= inside for _, ran, moved, inside in files if not moved)
    if read_file:
        assert sum(ran == () for _, ran, _, _ in files) >= len(files) // 2


def _edit_pair(text: str, new_text: str) -> tuple[Analysis, Analysis]:
    """The analysis of ``new_text`` after one of ``text`` (incremental), and afresh."""
    path, root = Path("/virtual/doc.conv.json"), Path("/virtual")
    prev = analyze(path, text=text, today=TODAY, cold_cache=False, root=root)
    got = analyze(path, text=new_text, today=TODAY, cold_cache=False, previous=prev, root=root)
    return got, analyze(path, text=new_text, today=TODAY, cold_cache=False, root=root)


def test_fixing_a_placeholder_in_a_system_message_reruns_the_system_prompt_rules() -> None:
    text = (
        '{"messages": [\n'
        '  {"id": "s", "role": "system", "content": "The date is {{CURRENT_DATE}}."},\n'
        '  {"id": "u1", "role": "user", "content": "hello"},\n'
        '  {"id": "u2", "role": "user", "content": "bye"}\n'
        "]}"
    )
    got, want = _edit_pair(text, text.replace("CURRENT_DATE}}", "CURRENT_DATETIME}}"))
    cache = got.caches["rules"]
    assert isinstance(cache, RuleCache)
    assert cache.reused and cache.changed == {SYSTEM_TEXT}
    assert set(cache.recomputed) == SYSTEM_RULES
    assert _key(got) == _key(want)
    assert "unknown-placeholder" not in {d.code for d in got.diagnostics}


def test_a_rule_that_hid_what_it_reads_would_be_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Emptying a system prompt that ``replace_system_prompt`` discards: the finding on the
    whole message goes. Had the rule not declared that it reads the system prompt, its
    stale finding would be reused (moved with the message)."""
    text = (
        '{"settings": {"replace_system_prompt": true}, "custom_agent_prompt": "Be brief.",\n'
        ' "messages": [\n'
        '  {"id": "s", "role": "system", "content": "x"},\n'
        '  {"id": "u1", "role": "user", "content": "hello"},\n'
        '  {"id": "u2", "role": "user", "content": "bye"}\n'
        "]}"
    )
    new_text = text.replace('"content": "x"', '"content": ""')
    got, want = _edit_pair(text, new_text)
    assert "custom-prompt-in-system" not in {d.code for d in got.diagnostics}
    assert _key(got) == _key(want)
    cache = got.caches["rules"]
    assert isinstance(cache, RuleCache) and cache.reused
    hidden = tuple(
        dataclasses.replace(r, reads=frozenset()) if r.code == "custom-prompt-in-system" else r
        for r in RULES
    )
    monkeypatch.setattr("assembly.diagnostics.RULES", hidden)
    got, want = _edit_pair(text, new_text)
    assert "custom-prompt-in-system" in {d.code for d in got.diagnostics}
    assert _key(got) != _key(want)


def test_every_reused_rule_says_what_it_reads() -> None:
    for rule in RULES:
        if rule.inputs is not None:
            assert rule.reads is not None and rule.reads <= CONTENT_FACTS, rule.code
