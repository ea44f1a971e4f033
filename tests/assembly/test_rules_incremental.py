"""Incremental rules: ``check(ctx, cache=…)`` gives exactly what a fresh ``check`` gives.

Random edit sequences on the rule fixtures, the examples and a generated conversation
are analysed twice: through an ``AnalysisHost`` that keeps the previous analysis (the
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
from assembly.diagnostics.incremental import (
    CONTENT_FACTS,
    CUSTOM_AGENT_TEXT,
    FILE_CONTENTS,
    FILE_REFS,
    REMINDER_TEXT,
    SYSTEM_TEXT,
)
from assembly.diagnostics.rules.tool_calls import MessageNodes
from assembly.documents import format_for_path, parse_conversation
from assembly.host import Analysis, AnalysisHost
from assembly.incremental import reparse_conversation
from assembly.model import Conversation, DocFormat, Role, TextBlock
from assembly.rope import Rope
from assembly.settings import SettingsLayer, resolve_settings
from assembly.syntax import Member, SNode
from assembly.text import TextRange
from assembly.tokens import Tokenizer
from tests.support.engine import analyze, loaded

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
    host = AnalysisHost()
    prev = analyze(path, text=text, today=TODAY, host=host)
    for _ in range(n_edits):
        text = _edit(text, rnd, prev.conversation)
        got = analyze(path, text=text, today=TODAY, host=host)
        want = analyze(path, text=text, today=TODAY)
        assert _key(got) == _key(want), (path.name, seed)
        assert isinstance(host.rule_cache, RuleCache)
        prev = got


def _run_shared(path: Path, text: str, *, seed: int, n_edits: int) -> int:
    """Same-length edits inside message contents, with the re-read message spliced into
    the previous messages (what the re-read gives once ranges are anchored): check with
    the cache equals check without. Return how many runs reused findings."""
    an = analyze(path, text=text, today=TODAY)
    conv = an.parsed
    assert conv is not None
    tokenizer = loaded(an.settings.encoding).tokenizer
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
        _, rng = rnd.choice(candidates)
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
        conv = re_read
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
    settings_tokenizer: Tokenizer = loaded("cl100k_base").tokenizer
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
    messages = (re_read.message_data[0], *fresh.message_data[1:])
    conv2 = dataclasses.replace(fresh, message_data=messages)
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
    conv3 = dataclasses.replace(
        re_read, message_data=(*conv2.message_data[:-1], re_read.message_data[-1])
    )
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
    host = AnalysisHost()
    prev = analyze(path, text=text, today=TODAY, host=host)
    fast: dict[str, list[_Fast]] = {k: [] for k in kinds}
    undo: str | None = None
    for _ in range(n_edits):
        kind = rnd.choice(kinds)
        if undo is not None:
            text, undo, kind, pos = undo, None, "undo", -1
        else:
            before = text
            text, pos = _type(text, rnd, prev.conversation, kind)
        got = analyze(path, text=text, today=TODAY, host=host)
        want = analyze(path, text=text, today=TODAY)
        assert _key(got) == _key(want), (path.name, seed, kind)
        cache = host.rule_cache
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
    first = analyze(path, text=text, today=TODAY)
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


def _edit_pair(text: str, new_text: str) -> tuple[Analysis, Analysis, AnalysisHost]:
    """The analysis of ``new_text`` after one of ``text`` (incremental), afresh, and the
    host of the first (whose caches the incremental one used)."""
    path, root = Path("/virtual/doc.conv.json"), Path("/virtual")
    host = AnalysisHost()
    analyze(path, text=text, today=TODAY, root=root, host=host)
    got = analyze(path, text=new_text, today=TODAY, root=root, host=host)
    return got, analyze(path, text=new_text, today=TODAY, root=root), host


def test_fixing_a_placeholder_in_a_system_message_reruns_the_system_prompt_rules() -> None:
    text = (
        '{"messages": [\n'
        '  {"id": "s", "role": "system", "content": "The date is {{CURRENT_DATE}}."},\n'
        '  {"id": "u1", "role": "user", "content": "hello"},\n'
        '  {"id": "u2", "role": "user", "content": "bye"}\n'
        "]}"
    )
    got, want, host = _edit_pair(text, text.replace("CURRENT_DATE}}", "CURRENT_DATETIME}}"))
    cache = host.rule_cache
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
    got, want, host = _edit_pair(text, new_text)
    assert "custom-prompt-in-system" not in {d.code for d in got.diagnostics}
    assert _key(got) == _key(want)
    cache = host.rule_cache
    assert isinstance(cache, RuleCache) and cache.reused
    hidden = tuple(
        dataclasses.replace(r, reads=frozenset()) if r.code == "custom-prompt-in-system" else r
        for r in RULES
    )
    monkeypatch.setattr("assembly.diagnostics.RULES", hidden)
    got, want, host = _edit_pair(text, new_text)
    assert "custom-prompt-in-system" in {d.code for d in got.diagnostics}
    assert _key(got) != _key(want)


def test_every_reused_rule_says_what_it_reads() -> None:
    for rule in RULES:
        if rule.inputs is not None:
            assert rule.reads is not None and rule.reads <= CONTENT_FACTS, rule.code


# ------------------------------------------------------------------ typing in an inline
# prompt (``system_prompt``, ``custom_agent_prompt``, ``reminder``)

# The rules that read each inline prompt: typing in it re-runs these only (and those with
# a finding inside its string, and all when the budget cut moves).
PROMPT_READERS = {
    "system_prompt": SYSTEM_RULES,
    "custom_agent_prompt": SYSTEM_RULES | {"file-id-not-in-read-file-list"},
    "reminder": frozenset({"unknown-placeholder", "guidance-for-unavailable-tool"}),
}
_PROMPT_KINDS = {
    "system_prompt": SYSTEM_TEXT,
    "custom_agent_prompt": CUSTOM_AGENT_TEXT,
    "reminder": REMINDER_TEXT,
}


def _inline_prompts(conv: Conversation) -> list[str]:
    """The inline prompts of ``conv`` one can type in (a string of three characters or
    more)."""
    return [
        attr
        for attr in PROMPT_READERS
        if isinstance(block := getattr(conv, attr), TextBlock)
        and block.content_range is not None
        and len(block.content_range) > 2
    ]


def _reread_prompt_edit(
    conv: Conversation, fresh: Conversation, attr: str, at: int, delta: int
) -> Conversation | None:
    """What the incremental re-read of an edit at ``at`` inside the string of the prompt
    ``attr`` gives (``fresh`` is the parse of the new text): every ``Message`` object of
    ``conv`` and, anchored, its node, moved by its anchor when after the edit; the edited
    prompt's ``TextBlock`` and everything else as parsed. None when the re-read could not
    give it (the edit changed more than the prompt's text, or the messages are not
    anchored and would have to move)."""
    if fresh.issues or conv.issues or len(fresh.messages) != len(conv.messages):
        return None
    for other in PROMPT_READERS:
        if other != attr and _strip_block(getattr(fresh, other)) != _strip_block(
            getattr(conv, other)
        ):
            return None
    old, new = getattr(conv, attr), getattr(fresh, attr)
    if not isinstance(new, TextBlock) or new.content == old.content:
        return None
    if conv.message_data != fresh.message_data:
        return None  # YAML: absolute ranges, changed by the move
    root = fresh.tree
    if conv.tree is not None and root is not None:
        # The message nodes of ``conv`` (the same objects), at the new tree's starts.
        old_items = _holder(conv.tree)
        new_items = _holder(root)
        if old_items is None or new_items is None or new_items.starts is None:
            return None
        n = len(conv.messages)
        items = (*new_items.items[: len(new_items.items) - n], *old_items.items[-n:])
        kept = SNode("array", new_items.range, items=items, starts=new_items.starts)
        if root is new_items:
            root = kept
        else:
            members = tuple(
                Member(m.key, m.key_range, kept) if m.value is new_items else m
                for m in root.members
            )
            root = SNode("object", root.range, members=members)
    return dataclasses.replace(
        fresh,
        message_data=conv.message_data,
        tree=root,
    )


def _holder(root: SNode) -> SNode | None:
    """The stored array of the messages."""
    if root.is_array:
        return root
    found = root.get("messages") if root.is_object else None
    return found if found is not None and found.is_array else None


def _strip_block(block: object) -> object:
    return block.content if isinstance(block, TextBlock) else block


def _type_in_prompt(
    text: str, rnd: random.Random, conv: Conversation, attr: str
) -> tuple[str, int, int]:
    """One keystroke strictly inside the string of the prompt ``attr``: the new text,
    where, and the length change."""
    block = getattr(conv, attr)
    rng = block.content_range
    pos = rnd.randrange(rng.start + 1, rng.end - 1)
    ch = rnd.choice("abxy {}_") if rnd.random() < 0.85 else rnd.choice(_ALPHABET)
    op = rnd.random()
    if op < 0.5:
        return text[:pos] + ch + text[pos:], pos, 1
    if op < 0.8:
        return text[:pos] + ch + text[pos + 1 :], pos, 0
    return text[:pos] + text[pos + 1 :], pos, -1


# What a run on a prompt edit saw: the prompt, the rules run again, whether the cut moved,
# the rules with a finding inside the prompt's string.
_PromptRun = tuple[str, frozenset[str], tuple[str, ...], bool, set[str]]


def _run_prompt_typing(
    path: Path, text: str, *, seed: int, n_edits: int, rope: bool
) -> tuple[list[_PromptRun], int]:
    """Random keystrokes in the inline prompts and in the messages' contents, re-read as
    the incremental re-read does (the messages shared): ``check`` with the cache equals
    ``check`` without, on the text as a ``str`` or a ``Rope``. Return what each prompt
    edit that reused findings saw, and how many runs there were."""
    an = analyze(path, text=text, today=TODAY)
    conv = an.parsed
    assert conv is not None
    fmt = conv.format
    tokenizer = loaded(an.settings.encoding).tokenizer

    def ctx_of(c: Conversation, t: str) -> RuleContext:
        ctx = _context(c, t, tokenizer)
        return dataclasses.replace(ctx, text=Rope.from_str(t)) if rope else ctx

    cache = RuleCache()
    ctx = ctx_of(conv, text)
    prev_diags = check(ctx, cache=cache)
    rnd = random.Random(seed)
    seen: list[_PromptRun] = []
    runs = 0
    undo: str | None = None
    for _ in range(n_edits):
        prompts = _inline_prompts(conv)
        if undo is not None:
            # A keystroke that broke the document is undone (a full parse).
            attr, new_text, undo = "", undo, None
            new_conv = parse_conversation(new_text, fmt)
        elif prompts and rnd.random() < 0.75:
            attr = rnd.choice(prompts)
            new_text, pos, delta = _type_in_prompt(text, rnd, conv, attr)
            fresh = parse_conversation(new_text, fmt)
            before = (conv.custom_agent_prompt, conv.reminder, conv.system_prompt)
            new_conv = _reread_prompt_edit(conv, fresh, attr, pos, delta)
            if new_conv is None:
                # A full parse (no message shared), as the re-read would give.
                assert (conv.custom_agent_prompt, conv.reminder, conv.system_prompt) == before
                new_conv, attr = fresh, ""
        else:
            attr = ""
            new_text, _ = _type(text, rnd, conv, "message")
            re_read = reparse_conversation(conv, text, new_text, fmt)
            new_conv = re_read if re_read is not None else parse_conversation(new_text, fmt)
        new_ctx = ctx_of(new_conv, new_text)
        got = check(new_ctx, cache=cache)
        assert got == check(new_ctx), (path.name, seed, attr)
        runs += 1
        if len(new_conv.issues) > len(conv.issues):
            undo = text
        if attr and cache.reused:
            dropped = ctx.assembly.dropped if ctx.assembly is not None else None
            moved = new_ctx.assembly is None or new_ctx.assembly.dropped != dropped
            block = getattr(conv, attr)
            inside = {
                d.code
                for d in prev_diags
                if d.path is None
                and any(
                    block.content_range.start < x < block.content_range.end
                    for r in (d.range, *(r.range for r in d.related if r.path is None))
                    for x in (r.start, r.end)
                )
            }
            seen.append((attr, cache.changed, cache.recomputed, moved, inside))
        conv, text, ctx, prev_diags = new_conv, new_text, new_ctx, got
    return seen, runs


def _has_inline_prompt(path: Path) -> bool:
    fmt = format_for_path(str(path))
    if fmt is None:
        return False
    return bool(_inline_prompts(parse_conversation(path.read_text(encoding="utf-8"), fmt)))


# The documents with an inline prompt.
_PROMPT_DOCS = [p for p in _DOCS if _has_inline_prompt(p)]


def test_the_prompt_fixtures_are_found() -> None:
    names = {p.name for p in _PROMPT_DOCS}
    assert {"support-agent.conv.json", "support-agent.conv.jsonl", "inline.conv.yaml"} <= names
    assert len(_PROMPT_DOCS) >= 15


@pytest.mark.parametrize("path", _PROMPT_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_typing_in_inline_prompts_on_fixtures(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    seed = sum(map(ord, path.name)) + 2
    seen, runs = _run_prompt_typing(path, text, seed=seed, n_edits=12, rope=seed % 2 == 0)
    assert runs == 12
    if path.suffix == ".json" or path.suffix == ".jsonl":
        assert seen  # the fast path is taken on the documents whose messages are anchored
    for attr, changed, ran, moved, inside in seen:
        assert _PROMPT_KINDS[attr] in changed
        if not moved:
            assert set(ran) <= PROMPT_READERS[attr] | inside, (attr, ran)


def _prompted_conversation(tmp_path: Path, *, budget: int) -> Path:
    """The generated ``m400`` conversation with the three inline prompts before the
    messages, written so that the rules report in them (unknown placeholders, a tool that
    is not offered, a file id of no file, the custom agent prompt repeated in the system
    prompt), and a message's content mentioning ``promptls:``."""
    doc = json.loads((ROOT / "tests" / "data" / "generated" / "m400.conv.json").read_text("utf-8"))
    doc["settings"]["max_input_tokens"] = budget
    system = doc["messages"][0]
    assert system["role"] == "system"
    agent = doc.pop("custom_agent_prompt")
    prompts = {
        "system_prompt": system["content"].replace("{{CURRENT_DATETIME}}", "{{CURRENT_DATE}}")
        + "\n\nAlways generate_image a diagram before you answer.\n\n"
        + agent
        + "\n\n## run_shell\nRuns a shell command.\n",
        "custom_agent_prompt": agent + '\n\nRead file_id="nope-1" first. Hello {{user.nickname}}.',
        "reminder": "Open the best result with open_url. Answer by {{DEADLINE}}.",
    }
    doc.pop("reminder", None)
    doc = {**prompts, **doc}
    out = tmp_path / f"prompted-{budget}.conv.json"
    out.write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")
    return out


@pytest.mark.parametrize("budget", [128000, 9000])
def test_typing_in_an_inline_prompt_reruns_only_the_rules_that_read_it(
    tmp_path: Path, budget: int
) -> None:
    path = _prompted_conversation(tmp_path, budget=budget)
    text = path.read_text(encoding="utf-8")
    first = analyze(path, text=text, today=TODAY)
    codes = {d.code for d in first.diagnostics}
    assert {"unknown-placeholder", "custom-prompt-in-system"} <= codes
    assert {"guidance-for-unavailable-tool", "file-id-not-in-read-file-list"} <= codes
    for rope in (False, True):
        seen, _ = _run_prompt_typing(path, text, seed=budget + rope, n_edits=45, rope=rope)
        for attr in PROMPT_READERS:
            mine = [s for s in seen if s[0] == attr]
            assert len(mine) >= 5, attr
            for _, changed, ran, moved, inside in mine:
                assert _PROMPT_KINDS[attr] in changed
                if not moved:
                    assert set(ran) <= PROMPT_READERS[attr] | inside, (attr, ran)
            # Most runs ran exactly the rules that read the prompt again.
            exact = sum(set(ran) == PROMPT_READERS[attr] for _, _, ran, _, _ in mine)
            assert exact >= len(mine) // 2, (attr, [s[2] for s in mine])


def _prompt_pair(text: str, new_text: str, attr: str) -> tuple[RuleCache, RuleContext]:
    """A cache after ``text``, and the context of ``new_text`` as re-read after an edit
    inside the prompt ``attr``."""
    tokenizer: Tokenizer = loaded("cl100k_base").tokenizer
    conv = parse_conversation(text, DocFormat.JSON)
    cache = RuleCache()
    check(_context(conv, text, tokenizer), cache=cache)
    old = getattr(conv, attr).content_range
    at = next(i for i, (a, b) in enumerate(zip(text, new_text, strict=False)) if a != b)
    assert old.start < at < old.end
    fresh = parse_conversation(new_text, DocFormat.JSON)
    new_conv = _reread_prompt_edit(conv, fresh, attr, at, len(new_text) - len(text))
    assert new_conv is not None
    return cache, _context(new_conv, new_text, tokenizer)


_SMALL = (
    '{"custom_agent_prompt": "Read file_id=\\"f-1\\" and file_id=\\"zz\\".",\n'
    ' "reminder": "Answer by {{DEADLINE}}.",\n'
    ' "messages": [\n'
    '  {"id": "u1", "role": "user", "content": "hello",'
    ' "files": [{"file_id": "f-1", "filename": "a.md", "content": "x"}]},\n'
    '  {"id": "t9", "role": "tool", "tool_call_id": "c9", "content": "x"},\n'
    '  {"id": "u2", "role": "user", "content": "bye"}\n'
    "]}"
)


def test_fixing_a_file_id_in_the_custom_agent_prompt() -> None:
    """The finding inside the prompt goes; the others are moved, not run again."""
    new_text = _SMALL.replace('\\"zz\\"', '\\"f-1\\" (yes)')
    cache, ctx = _prompt_pair(_SMALL, new_text, "custom_agent_prompt")
    got = check(ctx, cache=cache)
    assert got == check(ctx)
    # Without a system prompt the custom agent prompt is sent as the system prompt: what
    # is sent as the system prompt changed too.
    assert cache.reused and cache.changed == {CUSTOM_AGENT_TEXT, SYSTEM_TEXT}
    assert set(cache.recomputed) == PROMPT_READERS["custom_agent_prompt"]
    assert "file-id-not-in-read-file-list" not in {d.code for d in got}
    orphan = next(d for d in got if d.code == "orphaned-tool-response")
    assert orphan.range.start == new_text.index('{"id": "t9"')  # moved by the length change
    assert orphan.fix is not None
    assert orphan.fix.edits[0].range.start == new_text.index('{"id": "t9"')


def test_a_rule_that_hid_that_it_reads_the_custom_agent_prompt_would_be_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Typing a file id of no file in the custom agent prompt: the new finding appears.
    Had the rule not declared that it reads the prompt, it would not have run again (no
    finding of it lay inside the string) and the finding would be missing."""
    text = _SMALL.replace('\\"zz\\"', '\\"f-1\\"')
    new_text = text.replace('\\"f-1\\".', '\\"f-2\\".')
    cache, ctx = _prompt_pair(text, new_text, "custom_agent_prompt")
    assert "file-id-not-in-read-file-list" in {d.code for d in check(ctx, cache=cache)}
    hidden = tuple(
        dataclasses.replace(r, reads=frozenset({FILE_REFS}))
        if r.code == "file-id-not-in-read-file-list"
        else r
        for r in RULES
    )
    monkeypatch.setattr("assembly.diagnostics.RULES", hidden)
    cache, ctx = _prompt_pair(text, new_text, "custom_agent_prompt")
    got = check(ctx, cache=cache)
    assert cache.reused
    assert "file-id-not-in-read-file-list" not in {d.code for d in got}  # stale
    assert got != check(ctx)


def test_typing_a_suppression_comment_in_a_prompt() -> None:
    """The ``promptls:`` comments are counted again in the edited string (and around it)."""
    text = _SMALL.replace("{{DEADLINE}}.", "{{DEADLINE}}. promptls")
    new_text = text.replace("promptls", "promptls: ignore[unknown-placeholder]")
    cache, ctx = _prompt_pair(text, new_text, "reminder")
    got = check(ctx, cache=cache)
    assert cache.reused and got == check(ctx)
    assert "unknown-placeholder" not in {d.code for d in got}
    # And back: the comment's colon deleted.
    cache, ctx = _prompt_pair(new_text, new_text.replace("promptls:", "promptls"), "reminder")
    got = check(ctx, cache=cache)
    assert cache.reused and got == check(ctx)
    assert "unknown-placeholder" in {d.code for d in got}
    # Other rules' findings were kept: the comment counts come from the cache.
    assert "unknown-placeholder" in cache.recomputed
    assert "orphaned-tool-response" not in cache.recomputed


def test_what_is_not_one_edit_inside_one_prompt_is_not_reused() -> None:
    from assembly.diagnostics.incremental import _Move, _Prompt

    def facts(**texts: tuple[str, tuple[int, int]] | None) -> dict[str, _Prompt]:
        res = {}
        for attr, kind in _PROMPT_KINDS.items():
            given = texts.get(attr)
            res[kind] = _Prompt(None, None, ()) if given is None else _Prompt(*given, ())
        return res

    prev = facts(custom_agent_prompt=("abc", (10, 15)), reminder=("x", (20, 23)))
    old, new = "-" * 30, "-" * 31
    same = RuleCache._prompt_edit
    one = facts(custom_agent_prompt=("abcd", (10, 16)), reminder=("x", (21, 24)))
    texts = [CUSTOM_AGENT_TEXT]
    assert same(old, new, prev, one, texts, frozenset())[0] == _Move(10, 15, 16)
    # Two prompts' texts differ.
    two = facts(custom_agent_prompt=("abcd", (10, 16)), reminder=("y", (21, 24)))
    assert same(old, new, prev, two, [CUSTOM_AGENT_TEXT, REMINDER_TEXT], frozenset())[0] is None
    # The string starts elsewhere, or the document grew by another length.
    moved = facts(custom_agent_prompt=("abcd", (11, 17)))
    assert same(old, new, prev, moved, texts, frozenset())[0] is None
    assert same(old, "-" * 32, prev, one, texts, frozenset())[0] is None
    # A prompt that appears.
    appears = facts(
        custom_agent_prompt=("abc", (10, 15)), reminder=("x", (20, 23)), system_prompt=("s", (0, 3))
    )
    assert same(old, new, prev, appears, [SYSTEM_TEXT], frozenset())[0] is None
    # On ropes, the changed span must lie strictly inside the string.
    r_old = Rope.from_str("0123456789" + '"abc"' + "-" * 15)
    inside = Rope.from_str("0123456789" + '"abcd"' + "-" * 15)
    outside = Rope.from_str("0123456789" + '"abc"' + "--" + "-" * 14)
    assert same(r_old, inside, prev, one, texts, frozenset())[0] == _Move(10, 15, 16)
    assert same(r_old, outside, prev, one, texts, frozenset())[0] is None
    # Nothing changed but the length: an edit the prompts do not explain.
    assert same(old, new, prev, prev, [], frozenset())[0] is None
    assert same(old, old, prev, prev, [], frozenset())[0] == _Move(0, 0, 0)


def test_the_reread_of_a_prompt_edit_takes_the_fast_path_through_analyze() -> None:
    """``analyze`` with the previous analysis (the incremental re-read of a top-level
    value, then the rule cache): typing in each inline prompt re-runs only its readers."""
    text = _SMALL.replace(
        '"custom_agent_prompt"', '"system_prompt": "Be {{TONE}}.",\n "custom_agent_prompt"'
    )
    for attr, needle in (
        ("system_prompt", "Be "),
        ("custom_agent_prompt", "Read "),
        ("reminder", "Answer "),
    ):
        at = text.index(needle) + 2
        new_text = text[:at] + "x" + text[at:]
        got, want, host = _edit_pair(text, new_text)
        cache = host.rule_cache
        assert isinstance(cache, RuleCache)
        assert cache.reused and _PROMPT_KINDS[attr] in cache.changed, attr
        assert set(cache.recomputed) == PROMPT_READERS[attr], attr
        assert _key(got) == _key(want)
        text = new_text
