"""The rule engine: a rule reads exactly its parameters, so its findings cannot go stale.

The construction is tested directly: every rule's parameters are typed inputs (or the
whole analysis, for the rules that run every time); no input holds the conversation, the
assembly or the text beyond what it summarises; a message shape has no content; the texts
an input holds refuse reads elsewhere. Then what the construction promises: typing in a
message re-runs no document rule and the per-message rules on that message only; typing in
an inline prompt re-runs the prompt rules only; findings after an edit are placed in the
new version. And a moderate random-edit comparison, through the language server's path
(an ``AnalysisHost``, the incremental re-read), of the cached run with a fresh one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import json
import random
import re
import typing
from pathlib import Path

import pytest
import yaml

from assembly.diagnostics import RULES, RuleCache
from assembly.diagnostics.core import RuleContext
from assembly.diagnostics.engine import QUERIES, MessageSource, rule_kind
from assembly.diagnostics.inputs import (
    Branch,
    MessageKinds,
    MessageShape,
    OnBranch,
    PromptContext,
    Summaries,
    SystemChoice,
    ToolTraffic,
    message_source,
)
from assembly.diagnostics.rules.budget import Compression, Truncation
from assembly.diagnostics.rules.files import FileTraffic
from assembly.host import Analysis, AnalysisHost
from assembly.model import Conversation, FileAttachment, Located, Message, Role
from assembly.text import RelRange, TextRange
from tests.support.engine import analyze

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
_GENERATED = ROOT / "tests" / "data" / "generated" / "m80-seed3.conv.json"
# The rules that read the prompts (``PromptContext``).
PROMPT_RULES = frozenset(
    {"custom-prompt-in-system", "unknown-placeholder", "instruction-far-from-section"}
)


# ------------------------------------------------------------------------------ construction


def test_every_rule_reads_typed_inputs_or_the_whole_analysis() -> None:
    kinds = {}
    for rule in RULES:
        kind, params = rule_kind(rule)  # raises for a parameter no query makes
        kinds[rule.code] = kind
        if kind == "whole":
            assert params == (RuleContext,)
        else:
            rest = params[1:] if kind == "message" else params
            assert rest and all(p in QUERIES for p in rest), rule.code
            assert RuleContext not in params
    # The rules that today's cache reused, but `guidance-for-unavailable-tool` (it reads
    # the assembly's listings), read inputs; the per-message ones are per-message.
    assert kinds["tool-call-in-text"] == kinds["tool-call-markup-in-text"] == "message"
    for code in (
        "reminder-not-last",
        "custom-prompt-in-system",
        "unknown-placeholder",
        "summary-on-other-branch",
        "instruction-far-from-section",
        "orphaned-tool-response",
        "unanswered-tool-call",
        "duplicate-tool-call-id",
        "file-id-not-in-read-file-list",
        "filename-instead-of-file-id",
        "history-truncated",
        "compression-due",
    ):
        assert kinds[code] == "document", code


def _holds(hint: object, forbidden: tuple[type, ...]) -> bool:
    if hint in forbidden:
        return True
    return any(_holds(a, forbidden) for a in typing.get_args(hint))


def test_no_input_holds_the_analysis() -> None:
    """An input is a summary: no field is the conversation, the assembly or the context
    (``PromptContext`` and ``AllPrompts`` are the context's shape around a conversation
    restricted to the prompts: tested below)."""
    from assembly.assemble import Assembly

    forbidden = (Conversation, Assembly, RuleContext)
    for t in QUERIES:
        if issubclass(t, PromptContext):
            continue
        assert dataclasses.is_dataclass(t), t
        hints = typing.get_type_hints(t)
        for name, hint in hints.items():
            assert not _holds(hint, forbidden), (t.__name__, name)
            assert hint is not Message, (t.__name__, name)  # messages come as shapes


def test_a_message_shape_has_no_content() -> None:
    f = FileAttachment("f1", "a.txt", "secret", RelRange(5, 9))
    m = Message("m1", Role.USER, "hello", RelRange(0, 20), files=(f,))
    shape = MessageShape(Located(m, 100, 3))
    with pytest.raises(AttributeError):
        shape.content  # noqa: B018
    assert shape.id == "m1" and shape.index == 3 and shape.range == TextRange(100, 120)
    assert shape.files[0].content == "" and shape.files[0].range == TextRange(105, 109)
    # Equal when all but the contents and the ranges are equal, wherever it stands.
    typed = dataclasses.replace(m, content="hello!", range=RelRange(0, 21))
    assert MessageShape(Located(typed, 7, 3)) == shape
    assert MessageShape(Located(dataclasses.replace(m, role=Role.ASSISTANT), 100, 3)) != shape
    assert MessageShape(Located(m, 100, 4)) != shape  # another place in the list


def _analysis(path: Path, text: str, host: AnalysisHost | None = None) -> Analysis:
    return analyze(path, text=text, today=TODAY, host=host)


def _cache(host: AnalysisHost) -> RuleCache:
    cache = host.rule_cache
    assert isinstance(cache, RuleCache)
    return cache


def test_prompt_rules_read_only_the_prompts(tmp_path: Path) -> None:
    path = _prompted(tmp_path)
    host = AnalysisHost()
    an = _analysis(path, path.read_text(encoding="utf-8"), host)
    p = _cache(host).input(PromptContext)
    conv = p.conversation
    assert conv is not None and p.assembly is None
    assert [m.role for m in conv.messages] == [Role.SYSTEM]  # the system prompt's message
    assert p.system_message is not None and p.system_message.green is conv.message_data[0]
    assert conv.root is not None and {m.key for m in conv.root.members} <= {"tools"}
    block = conv.system_prompt
    assert block is not None and block.content_range is not None  # type: ignore[union-attr]
    inside = block.content_range  # type: ignore[union-attr]
    assert p.text[inside.start : inside.end]
    first = an.conversation.messages[1] if an.conversation is not None else None
    assert first is not None
    with pytest.raises(IndexError):
        p.text[first.range.start : first.range.end]  # a message is not the prompts' text


def test_a_per_message_rule_reads_only_its_message(tmp_path: Path) -> None:
    path = tmp_path / "gen.conv.json"
    text = _GENERATED.read_text(encoding="utf-8")
    an = _analysis(path, text)
    conv = an.conversation
    assert conv is not None
    ctx = RuleContext(text=text, settings=an.settings, tokenizer=None, conversation=conv)  # type: ignore[arg-type]
    m = conv.messages[3]
    src = message_source(ctx, m)
    assert isinstance(src, MessageSource) and src.node is not None
    assert src.node.range == m.range
    assert src.text[m.range.start : m.range.end] == text[m.range.start : m.range.end]
    other = conv.messages[5]
    with pytest.raises(IndexError):
        src.text[other.range.start : other.range.end]


# ------------------------------------------------------------------------------ what it buys


def _type_in(text: str, rng: TextRange, rnd: random.Random) -> str:
    """One letter typed strictly inside ``rng``, next to no escape."""
    while True:
        at = rnd.randrange(rng.start + 1, rng.end - 1)
        if text[at - 1] != "\\" and text[at] != "\\":
            return text[:at] + rnd.choice("abxy") + text[at:]


def test_typing_in_a_message_reruns_no_document_rule(tmp_path: Path) -> None:
    path = tmp_path / "gen.conv.json"
    text = _GENERATED.read_text(encoding="utf-8")
    host = AnalysisHost()
    prev = _analysis(path, text, host)
    rnd = random.Random(5)
    typed = 0
    for _ in range(12):
        conv = prev.conversation
        assert conv is not None
        m = rnd.choice([m for m in conv.messages if m.role is Role.USER and m.content_range])
        assert m.content_range is not None
        text = _type_in(text, m.content_range, rnd)
        got = _analysis(path, text, host)
        want = _analysis(path, text)
        assert got.diagnostics == want.diagnostics
        cache = _cache(host)
        new = got.conversation
        if new is not None and new.message_data[m.index] is not conv.message_data[m.index]:
            shared = sum(a is b for a, b in zip(conv.message_data, new.message_data, strict=True))
            if shared == len(conv.message_data) - 1:  # the re-read kept the others
                typed += 1
                assert cache.ran == (), cache.ran
                assert cache.message_runs <= 2  # the per-message rules, on that message
        prev = got
    assert typed >= 8


def _prompted(tmp_path: Path) -> Path:
    """The generated conversation with the three inline prompts before the messages,
    written so that the prompt rules report in them."""
    doc = json.loads(_GENERATED.read_text(encoding="utf-8"))
    system = next(m for m in doc["messages"] if m["role"] == "system")
    prompts = {
        "system_prompt": system["content"] + "\n\nThe date is {{CURRENT_DATE}}.",
        "custom_agent_prompt": 'Read file_id="nope-1" first. Hello {{user.nickname}}.',
        "reminder": "Answer by {{DEADLINE}}.",
    }
    doc = {**prompts, **{k: v for k, v in doc.items() if k not in prompts}}
    out = tmp_path / "prompted.conv.json"
    out.write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")
    return out


def test_typing_in_an_inline_prompt_reruns_the_prompt_rules_only(tmp_path: Path) -> None:
    path = _prompted(tmp_path)
    text = path.read_text(encoding="utf-8")
    host = AnalysisHost()
    prev = _analysis(path, text, host)
    assert {"unknown-placeholder", "file-id-not-in-read-file-list"} <= {
        d.code for d in prev.diagnostics
    }
    rnd = random.Random(3)
    for attr in ("system_prompt", "custom_agent_prompt", "reminder") * 2:
        conv = prev.conversation
        assert conv is not None
        block = getattr(conv, attr)
        text = _type_in(text, block.content_range, rnd)
        got = _analysis(path, text, host)
        assert got.diagnostics == _analysis(path, text).diagnostics
        ran = set(_cache(host).ran)
        # Every message moved (the prompts come first); only the rules that read the
        # prompts ran again (the reminder: only the placeholder rule reads it), and the
        # file rule, which reads where the custom agent prompt's file ids are, when the
        # edit is at or before that prompt (outside the messages, places are compared as
        # they are).
        allowed = (PROMPT_RULES if attr != "reminder" else {"unknown-placeholder"}) | (
            {"file-id-not-in-read-file-list"} if attr != "reminder" else set()
        )
        assert ran <= allowed, (attr, ran)
        assert _cache(host).message_runs == 0
        prev = got


def test_findings_are_placed_in_the_new_version() -> None:
    """A finding after the edited message is reused, not run again, and lands where the
    fresh run puts it; one inside the edited message makes its rule run again."""
    text = (
        '{"messages": [\n'
        '  {"id": "u1", "role": "user", "content": "hello there"},\n'
        '  {"id": "a1", "role": "assistant", "content": null, "tool_calls": [{"id": "c1",'
        ' "type": "function", "function": {"name": "f", "arguments": "{}"}}]},\n'
        '  {"id": "t9", "role": "tool", "tool_call_id": "c9", "content": "x"},\n'
        '  {"id": "u2", "role": "user", "content": "bye"}\n'
        "]}"
    )
    path = Path("/nonexistent/moves.conv.json")
    host = AnalysisHost()
    prev = _analysis(path, text, host)
    assert {d.code for d in prev.diagnostics} >= {"orphaned-tool-response", "unanswered-tool-call"}
    text = text.replace("hello there", "hello over there")
    got = _analysis(path, text, host)
    assert got.diagnostics == _analysis(path, text).diagnostics
    assert "orphaned-tool-response" not in _cache(host).ran
    orphan = next(d for d in got.diagnostics if d.code == "orphaned-tool-response")
    assert text[orphan.range.start :].startswith('{"id": "t9"')
    assert orphan.fix is not None  # made for this version's text
    edit = orphan.fix.edits[0]
    assert '"t9"' in text[edit.range.start : edit.range.end]
    # An edit inside the orphan itself: its finding lies in the new message object.
    text = text.replace('"content": "x"', '"content": "xy"')
    newer = _analysis(path, text, host)
    assert newer.diagnostics == _analysis(path, text).diagnostics
    assert "orphaned-tool-response" in _cache(host).ran


def test_a_suppression_comment_typed_in_a_message_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "c.conv.yaml"
    text = (
        "messages:\n"
        "  - {role: user, content: hello}\n"
        "  - {role: tool, tool_call_id: nope, content: result}\n"
        "  - {role: user, content: bye}\n"
    )
    host = AnalysisHost()
    prev = _analysis(path, text, host)
    assert "orphaned-tool-response" in {d.code for d in prev.diagnostics}
    text = text.replace("result}", "result}  # promptls: ignore[orphaned-tool-response]")
    got = _analysis(path, text, host)
    assert "orphaned-tool-response" not in {d.code for d in got.diagnostics}
    assert got.diagnostics == _analysis(path, text).diagnostics


# ------------------------------------------------------------------------------ random edits


_ALPHABET = 'ab {}[]":,\n\\é😀x_'


def _edit(text: str, rnd: random.Random, conv: Conversation | None) -> str:
    """One random edit: mostly inside a message's content, sometimes anywhere."""
    inside = [m.content_range for m in conv.messages if m.content_range] if conv else []
    if inside and rnd.random() < 0.8:
        rng = rnd.choice(inside)
        assert rng is not None
        pos = rnd.randrange(rng.start, max(rng.start + 1, rng.end))
    else:
        pos = rnd.randrange(len(text) + 1)
    kind = rnd.random()
    if kind < 0.4 and pos < len(text):
        return text[:pos] + rnd.choice("abcxyz") + text[pos + 1 :]
    if kind < 0.8:
        return text[:pos] + rnd.choice(_ALPHABET) + text[pos:]
    return text[:pos] + text[pos + 1 :]


def _run(path: Path, text: str, *, seed: int, n_edits: int) -> None:
    rnd = random.Random(seed)
    host = AnalysisHost()
    prev = _analysis(path, text, host)
    for _ in range(n_edits):
        text = _edit(text, rnd, prev.conversation)
        got = _analysis(path, text, host)
        want = _analysis(path, text)
        assert [(d, d.range.start, d.range.end) for d in got.diagnostics] == [
            (d, d.range.start, d.range.end) for d in want.diagnostics
        ], (path.name, seed)
        prev = got


@pytest.mark.parametrize("path", _DOCS[::2], ids=lambda p: str(p.relative_to(ROOT)))
def test_cached_rules_equal_fresh_rules_on_fixtures(path: Path) -> None:
    _run(path, path.read_text(encoding="utf-8"), seed=sum(map(ord, path.name)), n_edits=4)


def test_cached_rules_equal_fresh_rules_on_a_generated_conversation(tmp_path: Path) -> None:
    out = tmp_path / "gen.conv.json"
    text = _GENERATED.read_text(encoding="utf-8")
    _run(out, text, seed=7, n_edits=10)
    # A budget that cuts the history in the middle: edits move the cut.
    tight = text.replace('"max_input_tokens": 128000', '"max_input_tokens": 9000', 1)
    assert tight != text
    _run(out, tight, seed=11, n_edits=10)


def test_branch_equality_ignores_positions_only() -> None:
    a = Message("a", Role.USER, "x", RelRange(0, 5))
    b = Message("b", Role.ASSISTANT, "y", RelRange(0, 3))

    def branch(*stored: Message, chain: tuple[str, ...] = ("a", "b")) -> Branch:
        return Branch((), chain, None, None, None, (), (), stored)

    one = branch(a, b)
    assert branch(dataclasses.replace(a, content="xx", range=RelRange(0, 6)), b) == one
    assert branch(a, b, chain=("a",)) != one
    assert branch(a, dataclasses.replace(b, id="c")) != one


# ------------------------------------------------------------------------------ edit kinds


def _after(text: str, needle: str, k: int = 0, start: int | None = None) -> int:
    """The offset after the k-th ``needle`` from a third of the text on."""
    i = text.index(needle, len(text) // 3 if start is None else start)
    for _ in range(k):
        i = text.index(needle, i + 1)
    return i + len(needle)


def _id(text: str) -> list[tuple[int, int, str]]:
    at = _after(text, '"id": "m')
    return [(at + k, at + k, "z") for k in range(3)]


def _role(text: str) -> list[tuple[int, int, str]]:
    at = _after(text, '"role": "user"') - 5
    return [(at, at + 4, "system"), (at, at + 6, "assistant"), (at, at + 9, "user")]


def _tool_call_id(text: str) -> list[tuple[int, int, str]]:
    at = _after(text, '"tool_call_id": "') + 2
    return [(at, at, "q"), (at + 1, at + 1, "q")]


def _call_id(text: str) -> list[tuple[int, int, str]]:
    at = _after(text, '"id": "call_', 1) + 2
    return [(at, at, "w"), (at, at + 1, "")]


def _delete_across(text: str) -> list[tuple[int, int, str]]:
    a = _after(text, '"content": "', 4) + 2
    b = _after(text, '"content": "', 0, a) + 2
    return [(a, b, ""), (a, a, text[a:b])]


def _insert(text: str) -> list[tuple[int, int, str]]:
    at = text.index("\n    {", len(text) // 2) + 1
    new = '    {"id": "pasted", "role": "tool", "tool_call_id": "nope", "content": "x"},\n'
    return [(at, at, new), (at, at + len(new), "")]


def _delete_message(text: str) -> list[tuple[int, int, str]]:
    at = text.index("\n    {", len(text) // 2) + 1
    end = text.index("\n    {", at) + 1
    return [(at, end, ""), (at, at, text[at:end])]


def _paste_with_file(text: str) -> list[tuple[int, int, str]]:
    at = text.index("\n    {", len(text) // 3) + 1
    new = (
        '    {"id": "up", "role": "user", "content": "read file_id=\\"f9\\"",'
        ' "files": [{"file_id": "f9", "filename": "a.md", "content": "x"}]},\n'
    )
    return [(at, at, new), (at, at + len(new), "")]


def _drop_files(text: str) -> list[tuple[int, int, str]]:
    """A message's uploads deleted (its `files` member), the list keeping its length (a
    deletion from a message's text into its file's), then put back."""
    at = text.index('"files": [')
    start = text.rindex(",", 0, at)  # (the comma that ends the member before)
    _, end = json.JSONDecoder().raw_decode(text, at + len('"files": '))
    return [(start, end, ""), (start, start, text[start:end])]


def _settings(text: str) -> list[tuple[int, int, str]]:
    at = _after(text, '"model": "gpt-4o', 0, 0)
    return [(at, at, "-mini"), (at, at + 5, "")]


def _new_message(text: str) -> list[tuple[int, int, str]]:
    at = text.rindex("}", 0, text.rindex("]")) + 1
    typed = ',\n    {"id": "new", "role": "user", "content": "and then?"}'
    cuts = [*range(0, len(typed), 6), len(typed)]
    return [(at + a, at + a, typed[a:b]) for a, b in itertools.pairwise(cuts)]


def _parent(text: str) -> list[tuple[int, int, str]]:
    """A `parent` typed in a late message, naming an early one (the messages between
    leave the branch), then removed."""
    ids = re.findall(r'"id": "(m\d+)"', text)
    at = text.index(f'"id": "{ids[len(ids) * 3 // 4]}"')
    typed = f'"parent": "{ids[3]}", '
    return [(at, at, typed), (at, at + len(typed), "")]


def _token_count(text: str) -> list[tuple[int, int, str]]:
    """A large `token_count` typed in a late message (the budget cut moves past the
    messages before it, the history's ids unchanged), then removed."""
    ids = re.findall(r'"id": "(m\d+)"', text)
    at = text.index(f'"id": "{ids[len(ids) * 9 // 10]}"')
    typed = '"token_count": 6000, '
    return [(at, at, typed), (at, at + len(typed), "")]


# Each structural edit kind the language server answers, as the speed benchmark types
# them: ``[start, end)`` replacements applied in turn, found in the text they apply to.
_EDIT_KINDS = {
    "type in a message id": _id,
    "change a role and back": _role,
    "type in a tool-call id": _tool_call_id,
    "type in a call's id": _call_id,
    "delete across messages, undo": _delete_across,
    "insert a message, delete it": _insert,
    "delete a whole message, undo": _delete_message,
    "paste a message with a file, delete it": _paste_with_file,
    "delete a message's uploads, undo": _drop_files,
    "type in the settings": _settings,
    "type a new message at the end": _new_message,
    "type a parent, delete it": _parent,
    "type a token count, delete it": _token_count,
}


@pytest.mark.parametrize("budget", [128000, 9000])
def test_cached_rules_equal_fresh_rules_after_each_structural_edit(
    tmp_path: Path, budget: int
) -> None:
    """The edits that change a message's shape (its id, role, tool-call ids), the message
    list or the settings: after each, the findings of the host that keeps its rule cache
    equal a fresh analysis' (a tight budget cuts the history in the middle)."""
    path = tmp_path / "gen.conv.json"
    text = _GENERATED.read_text(encoding="utf-8")
    text = text.replace('"max_input_tokens": 128000', f'"max_input_tokens": {budget}', 1)
    host = AnalysisHost()
    _analysis(path, text, host)
    seen: set[str] = set()
    for kind, make in _EDIT_KINDS.items():
        for start, end, new in make(text):
            text = text[:start] + new + text[end:]
            got = _analysis(path, text, host)
            want = _analysis(path, text)
            assert [(d, d.range.start, d.range.end) for d in got.diagnostics] == [
                (d, d.range.start, d.range.end) for d in want.diagnostics
            ], (kind, budget)
            seen.update(d.code for d in got.diagnostics)
    # The edits reach the document rules and (the tight budget) the budget rules.
    assert "orphaned-tool-response" in seen, seen
    assert budget > 9000 or {"history-truncated", "compression-due"} <= seen, seen


def test_a_message_that_loses_its_uploads_keeps_the_budget_places(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message's uploads deleted and put back in place: the budget rules find the places
    of the history's model messages again only for that message (the others keep theirs),
    and the findings equal a fresh analysis'."""
    path = tmp_path / "gen.conv.json"
    text = _GENERATED.read_text(encoding="utf-8")
    text = text.replace('"max_input_tokens": 128000', '"max_input_tokens": 9000', 1)
    host = AnalysisHost()
    _analysis(path, text, host)
    found: list[int] = []
    whole = Conversation.places_of

    def counted(self: Conversation, sources: typing.Iterable[object]) -> list[int | None]:
        found.append(1)
        return whole(self, sources)

    monkeypatch.setattr(Conversation, "places_of", counted)
    for start, end, new in _drop_files(text):
        text = text[:start] + new + text[end:]
        found.clear()
        got = _analysis(path, text, host)
        assert found == []  # (the host's run, before the fresh one below)
        want = _analysis(path, text)
        assert [(d, d.range.start, d.range.end) for d in got.diagnostics] == [
            (d, d.range.start, d.range.end) for d in want.diagnostics
        ]


def test_the_file_rules_read_one_walk_of_the_files_again_alike(tmp_path: Path) -> None:
    """The two file rules share what they know of the files (made once a run); walked
    again (a rule run again on the same traffic), it says what it said the first time:
    a call that names a file before the upload the cut drops is "injected later", not
    "dropped" (what the end of the first walk knew)."""
    from assembly.diagnostics.rules.files import (
        PromptFileIds,
        file_id_not_in_read_file_list,
        filename_instead_of_file_id,
    )

    fid = "c0ffee00-1111-4222-8333-444455556666"
    call = {"name": "read_file", "arguments": json.dumps({"file_id": fid})}
    doc = {
        "settings": {"max_input_tokens": 400},
        "messages": [
            {"id": "a0", "role": "assistant", "content": None, "token_count": 5,
             "tool_calls": [{"id": "c0", "type": "function", "function": call}]},
            {"id": "t0", "role": "tool", "tool_call_id": "c0", "content": "?", "token_count": 5},
            {"id": "u1", "role": "user", "content": "Here.", "token_count": 500,
             "files": [{"file_id": fid, "filename": "a.txt", "content": "x", "token_count": 20}]},
            {"id": "a1", "role": "assistant", "content": "Got it.", "token_count": 5},
            {"id": "u2", "role": "user", "content": "And?", "token_count": 20},
        ],
    }  # fmt: skip
    host = AnalysisHost()
    got = _analysis(tmp_path / "doc.conv.json", json.dumps(doc), host)
    words = [d.message for d in got.diagnostics if d.code == "file-id-not-in-read-file-list"]
    assert len(words) == 1 and "only injected later" in words[0], words
    traffic, ids = _cache(host).input(FileTraffic), _cache(host).input(PromptFileIds)
    first = [d.message for d in file_id_not_in_read_file_list(traffic, ids)]
    list(filename_instead_of_file_id(traffic))
    assert [d.message for d in file_id_not_in_read_file_list(traffic, ids)] == first == words


def test_the_orphans_follow_the_cut_over_the_same_calls(tmp_path: Path) -> None:
    """A token count typed moves the budget cut from one call to the next (the messages
    that make calls are the same objects): the response the cut now orphans says its
    call is cut by the budget, as a fresh analysis says, not that a summary replaced it
    (what the cut dropped before would say)."""

    def calling(k: str) -> list[dict[str, object]]:
        call = {"id": f"call_{k}", "type": "function",
                "function": {"name": "lookup", "arguments": "{}"}}  # fmt: skip
        return [
            {"id": f"a{k}", "role": "assistant", "content": None, "tool_calls": [call],
             "token_count": 100},
            {"id": f"t{k}", "role": "tool", "tool_call_id": f"call_{k}", "content": "x",
             "token_count": 100},
        ]  # fmt: skip

    def text(count: int) -> str:
        messages = [
            {"id": "u0", "role": "user", "content": "a", "token_count": 100},
            *calling("A"),
            {"id": "u1", "role": "user", "content": "b", "token_count": 100},
            *calling("B"),
            {"id": "a2", "role": "assistant", "content": "ok", "token_count": count},
            {"id": "u2", "role": "user", "content": "c", "token_count": 10},
        ]
        tool = {"type": "function", "function": {"name": "lookup", "parameters": {}}}
        doc = {"settings": {"max_input_tokens": 1000}, "tools": [tool], "messages": messages}
        return json.dumps(doc)

    path = tmp_path / "calls.conv.json"
    host = AnalysisHost()
    counts = (600, 850, 600)  # (the cut drops `aA`, then `aB` too)
    got = [_analysis(path, text(c), host).diagnostics for c in counts]  # (in turn)
    want = [_analysis(path, text(c)).diagnostics for c in counts]
    assert got == want
    orphans = [[d.message for d in ds if d.code == "orphaned-tool-response"] for ds in got]
    assert len(orphans[0]) == 1 and "`aA` is cut by the token budget" in orphans[0][0]
    assert "`aB` is cut by the token budget" in orphans[1][-1], orphans


def test_the_file_rules_follow_the_cut_over_an_upload(tmp_path: Path) -> None:
    """The budget cut moves over a message with an upload, the history's ids unchanged (a
    token count typed): the upload leaves and re-enters the context, and the file rules'
    findings follow it as a fresh analysis' do."""
    fixture = ROOT / "tests/data/diagnostics/file-id-not-in-read-file-list/dropped-unlisted"
    doc = yaml.safe_load(fixture.with_name(fixture.name + ".conv.yaml").read_text("utf-8"))
    doc["messages"][0]["token_count"] = 30  # the upload's message kept
    path = tmp_path / "doc.conv.json"
    texts = []
    for count in (5, 290, 5):  # the next message's count: the cut moves past the upload
        doc["messages"][1]["token_count"] = count
        texts.append(json.dumps(doc, indent=2))  # (re-read in place: the rest is kept)
    host = AnalysisHost()
    got = [_analysis(path, t, host).diagnostics for t in texts]  # (one document in turn)
    assert got == [_analysis(path, t).diagnostics for t in texts]
    codes = [sorted(d.code for d in ds) for ds in got]
    assert codes[0] == codes[2] != codes[1]  # (the finding on the dropped upload comes and goes)


def test_a_per_message_finding_moves_with_its_message(tmp_path: Path) -> None:
    """Messages inserted and deleted before a message with a per-message finding: the
    finding (and its fix) follows the message, and the rule runs on the new messages only."""
    path = tmp_path / "c.conv.json"
    msgs: list[dict[str, object]] = [
        {"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"}
        for i in range(12)
    ]
    msgs[9]["content"] = 'Let me look. {"name": "web_search", "arguments": {"query": "Oslo"}}'
    tool = {"type": "object", "properties": {"query": {"type": "string"}}}
    doc = {
        "tools": [{"type": "function", "function": {"name": "web_search", "parameters": tool}}],
        "messages": msgs,
    }
    text = json.dumps(doc, indent=2)
    host = AnalysisHost()
    first = _analysis(path, text, host)
    assert "tool-call-in-text" in {d.code for d in first.diagnostics}

    def item(mid: str) -> int:
        return text.index('{\n      "id": "' + mid + '"')

    pasted = '{"id": "new", "role": "user", "content": "pasted"},\n    '
    for edit in ("insert", "delete"):
        if edit == "insert":
            text = text[: item("m3")] + pasted + text[item("m3") :]
        else:
            text = text[: text.index(pasted)] + text[item("m5") :]  # `new`, m3 and m4
        got = _analysis(path, text, host)
        want = _analysis(path, text)
        assert [(d, d.range.start, d.range.end, d.fix) for d in got.diagnostics] == [
            (d, d.range.start, d.range.end, d.fix) for d in want.diagnostics
        ], edit
        found = [d for d in got.diagnostics if d.code == "tool-call-in-text"]
        assert len(found) == 1 and found[0].fix is not None
        assert text[found[0].range.start : found[0].range.end].startswith('{\\"name\\"')
        # The messages after the edit were not checked again: the two per-message rules
        # ran on the new message and on the one the re-read made again beside it at most.
        assert _cache(host).message_runs <= 2 * 2, edit


def test_a_new_call_id_changes_only_the_findings_it_words(tmp_path: Path) -> None:
    """``tool-call-in-text`` reads the document's call ids only for its fix's fresh id
    (``REFINES``): deleting a message that makes calls, and so frees an id, checks again
    only the messages with findings, not every assistant message, and the fix then takes
    the freed id, as a fresh analysis does; taking the id again renames the fix's."""
    path = tmp_path / "c.conv.json"
    tool = {"type": "object", "properties": {"query": {"type": "string"}}}
    written = {"name": "web_search", "arguments": {"query": "Oslo"}}
    msgs: list[dict[str, object]] = [
        {"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"}
        for i in range(40)
    ]
    msgs[31]["content"] = "Let me look. " + json.dumps(written)
    doc = {
        "tools": [{"type": "function", "function": {"name": "web_search", "parameters": tool}}],
        "messages": msgs,
    }
    host = AnalysisHost()
    first = _analysis(path, json.dumps(doc, indent=2), host)
    (d,) = [d for d in first.diagnostics if d.code == "tool-call-in-text"]
    assert d.fix is not None
    fresh_id = d.fix.edits[-1].new_text.split('"tool_calls": [{"id": "')[1].split('"')[0]
    calling = {"id": "m5", "role": "assistant", "content": "", "tool_calls": [
        {"id": fresh_id, "type": "function",
         "function": {"name": "web_search", "arguments": "{}"}}]}  # fmt: skip
    answer = {"id": "m5r", "role": "tool", "tool_call_id": fresh_id, "content": "ok"}
    fixes = []
    for step in ("take", "free", "take"):
        msgs[5:7] = [calling, answer] if step == "take" else [dict(msgs[5]), dict(msgs[6])]
        if step == "free":
            msgs[5:7] = [{"id": "m5", "role": "assistant", "content": "turn 5"}]
            msgs.insert(6, {"id": "m6", "role": "user", "content": "turn 6"})
        text = json.dumps(doc, indent=2)
        got = _analysis(path, text, host)
        want = _analysis(path, text)
        assert [(d, d.range.start, d.range.end, d.fix) for d in got.diagnostics] == [
            (d, d.range.start, d.range.end, d.fix) for d in want.diagnostics
        ], step
        (d,) = [d for d in got.diagnostics if d.code == "tool-call-in-text"]
        assert d.fix is not None
        fixes.append(d.fix.edits[-1].new_text)
        # The two per-message rules ran on the (at most three) messages the re-read made
        # again and the one with a finding; not on the 20 assistant messages.
        assert _cache(host).message_runs <= 2 * 3 + 1, step
    assert f'"id": "{fresh_id}_2"' in fixes[0] and f'"id": "{fresh_id}"' in fixes[1]
    assert fixes[2] == fixes[0]


def test_document_findings_move_with_their_messages(tmp_path: Path) -> None:
    """Messages without calls or files inserted and deleted before the findings of the
    tool-call and file rules: those rules keep their findings (their inputs, the messages
    that make, answer or name calls and files, are equal), which follow their messages
    with their fixes; a message with a call, or a changed call id, runs them again."""
    path = tmp_path / "c.conv.json"
    msgs: list[dict[str, object]] = [
        {"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"}
        for i in range(10)
    ]
    call = {"type": "function", "function": {"name": "read_file", "arguments": '{"file_id": "x"}'}}
    msgs[5]["tool_calls"] = [{"id": "c1", **call}, {"id": "c1", **call}]  # a duplicate
    msgs[7] = {"id": "t1", "role": "tool", "tool_call_id": "nope", "content": "orphan"}
    doc = {"messages": [*msgs, {"id": "last", "role": "user", "content": "and?"}]}
    text = json.dumps(doc, indent=2)
    host = AnalysisHost()
    first = _analysis(path, text, host)
    codes = {d.code for d in first.diagnostics}
    kept = {"orphaned-tool-response", "duplicate-tool-call-id", "unanswered-tool-call"}
    assert kept | {"file-id-not-in-read-file-list"} <= codes, codes

    def item(mid: str) -> int:
        return text.index('{\n      "id": "' + mid + '"')

    pasted = '{"id": "new", "role": "user", "content": "pasted"},\n    '
    with_call = (
        '{"id": "new2", "role": "assistant", "tool_calls": [{"id": "c9", "type": "function",'
        ' "function": {"name": "web_search", "arguments": "{}"}}]},\n    '
    )
    steps = [
        ("insert", lambda t: t[: item("m1")] + pasted + t[item("m1") :], True),
        ("delete", lambda t: t[: t.index(pasted)] + t[item("m3") :], True),  # new, m1, m2
        ("a call", lambda t: t[: item("m3")] + with_call + t[item("m3") :], False),
        ("a call id", lambda t: t.replace('"id": "c9"', '"id": "c8"'), False),
    ]
    for name, edit, keeps in steps:
        text = edit(text)
        got = _analysis(path, text, host)
        want = _analysis(path, text)
        assert [(d, d.range.start, d.range.end, d.fix) for d in got.diagnostics] == [
            (d, d.range.start, d.range.end, d.fix) for d in want.diagnostics
        ], name
        ran = set(_cache(host).ran)
        if keeps:
            assert not ran & (kept | {"file-id-not-in-read-file-list"}), (name, ran)
        else:
            assert kept <= ran, (name, ran)
    orphan = next(d for d in got.diagnostics if d.code == "orphaned-tool-response")
    assert text[orphan.range.start : orphan.range.end].startswith('{\n      "id": "t1"')
    assert orphan.fix is not None  # the removal, made for this version


@pytest.mark.parametrize(
    ("roles", "parents", "tip", "want"),
    [
        ("usua", None, None, 1),
        ("uaua", None, None, None),
        ("usus", None, "m0", None),  # the tip is before the system message
        ("usus", None, "m2", 1),
        ("susu", [None, "m0", "m0", "m2"], "m3", 0),
        ("usss", [None, "m0", "m0", "m0"], "m3", 3),  # m1 and m2 are on other branches
        ("ssuu", [None, None, "m3", "m2"], "m3", None),  # a cycle: m3 → m2 → m3
    ],
)
def test_first_system_index_walks_the_branch(
    roles: str, parents: list[str | None] | None, tip: str | None, want: int | None
) -> None:
    from assembly.diagnostics.inputs import first_system_index

    role = {"u": Role.USER, "a": Role.ASSISTANT, "s": Role.SYSTEM}
    msgs = [
        Message(f"m{i}", role[r], "x", RelRange(0, 1), parent=parents[i] if parents else None)
        for i, r in enumerate(roles)
    ]
    assert first_system_index(msgs, tip) == want


@pytest.mark.parametrize(
    ("parents", "tip", "chain", "stop"),
    [
        (None, None, [0, 1, 2, 3], {}),
        (None, "m1", [0, 1], {}),
        (None, "zz", [0, 1, 2, 3], {"unknown_tip": True}),
        ([None, "m0", "m0", "m2"], "m3", [0, 2, 3], {}),
        ([None, None, "m3", "m2"], "m3", [2, 3], {"cycle": 3}),  # m3 → m2 → m3
        ([None, "zz", None, None], "m1", [1], {"orphan": 1}),
        ([None, "zz", None, None], None, [1, 2, 3], {"orphan": 1}),  # no parent: the one before
    ],
)
def test_walk_branch_finds_the_branch_and_where_it_stopped(
    parents: list[str | None] | None, tip: str | None, chain: list[int], stop: dict[str, object]
) -> None:
    from assembly.assemble import BranchWalk, walk_branch

    msgs = [
        Message(f"m{i}", Role.USER, "x", RelRange(0, 1), parent=parents[i] if parents else None)
        for i in range(4)
    ]
    assert walk_branch(msgs, tip) == BranchWalk(chain, **stop)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("messages", "tip", "finding"),
    [
        (
            [{"id": "a", "parent": "b"}, {"id": "b", "parent": "a"}],
            None,
            ("schema-error", "`parent` links form a cycle through `b`", '"a"'),
        ),
        (
            [{"id": "a"}, {"id": "b", "parent": "zz"}],
            None,
            ("schema-error", "`parent` names no message: `zz`", '"zz"'),
        ),
        (
            [{"id": "a"}, {"id": "b", "parent": "a"}],
            "nope",
            (
                "invalid-setting",
                "`branch_tip` names no message: `nope`; the last message is used",
                '"nope"',
            ),
        ),
    ],
)
def test_the_pipeline_reports_where_the_walk_of_the_branch_stopped(
    messages: list[dict[str, str]], tip: str | None, finding: tuple[str, str, str]
) -> None:
    doc: dict[str, object] = {"messages": [{**m, "role": "user", "content": "x"} for m in messages]}
    if tip is not None:
        doc["settings"] = {"branch_tip": tip}
    text = json.dumps(doc)
    got = analyze(Path("branch.conv.json"), text=text)
    code, message, at = finding
    (d,) = [d for d in got.diagnostics if d.code == code]
    assert (d.message, text[d.range.start : d.range.end]) == (message, at)


def _random_message(rnd: random.Random, k: int) -> dict[str, object]:
    """A message of any kind the tool-call, file and summary rules read (or none of them)."""
    call_id = f"c{rnd.randrange(6)}"
    kind = rnd.randrange(6)
    if kind == 0:
        name = rnd.choice(["read_file", "web_search"])
        args = json.dumps({"file_id": f"f{rnd.randrange(3)}"} if name == "read_file" else {})
        calls = [{"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}]
        return {"id": f"r{k}", "role": "assistant", "tool_calls": calls}
    if kind == 1:
        return {"id": f"r{k}", "role": "tool", "tool_call_id": call_id, "content": "ok"}
    if kind == 2:
        files = [{"file_id": f"f{rnd.randrange(3)}", "filename": "a.md", "content": "x"}]
        return {"id": f"r{k}", "role": "user", "content": "see", "files": files}
    if kind == 3:
        return {"id": f"r{k}", "role": "user", "content": f'read file_id="f{rnd.randrange(3)}"'}
    return {"id": f"r{k}", "role": rnd.choice(["user", "assistant"]), "content": f"turn {k}"}


@pytest.mark.parametrize(
    ("seed", "budget"), [(1, None), (2, None), (3, None), (4, 600), (5, 600), (6, 600), (7, 600)]
)
def test_cached_rules_equal_fresh_rules_after_random_structural_edits(
    tmp_path: Path, seed: int, budget: int | None
) -> None:
    """Random structural edits (a message inserted, deleted, its role, id or call id
    changed) on a conversation of tool calls, responses, files and file references: after
    each, the host's findings (kept by the narrow summaries and moved with their messages)
    equal a fresh analysis', fixes included. With a tight budget the history is cut and
    compressed in the middle, and the edits also rename an attached file and type in a
    message: the budget rules' spans, kept while the history's model messages keep their
    places (``budget._same_places``), follow."""
    rnd = random.Random(seed)
    path = tmp_path / "r.conv.json"
    n = 24 if budget is None else 40
    msgs = [_random_message(rnd, k) for k in range(n)]
    settings: dict[str, object] = {}
    if budget is not None:
        settings = {"settings": {"max_input_tokens": budget}}
        for m in msgs:  # long enough for the cut to fall in the middle
            if m["role"] != "tool" and "content" in m:
                m["content"] = f"{m['content']}{' word' * rnd.randrange(30)}"
    host = AnalysisHost()
    _analysis(path, json.dumps({**settings, "messages": msgs}, indent=2), host)
    seen: set[str] = set()
    for step in range(30):
        op = rnd.randrange(5 if budget is None else 7)
        i = rnd.randrange(len(msgs))
        if op == 5:  # an attached file renamed or given another id: the layout changes
            with_files = [j for j, m in enumerate(msgs) if m.get("files")]
            i = rnd.choice(with_files) if with_files else i
            files = msgs[i].get("files")
            if isinstance(files, list) and files:
                key = rnd.choice(["file_id", "filename"])
                msgs[i] = {**msgs[i], "files": [{**files[0], key: f"g{step}"}]}
                op = -1
            else:
                op = 4
        elif op == 6:  # typing in a message: its tokens move the cut
            content = msgs[i].get("content")
            if isinstance(content, str) and msgs[i]["role"] != "tool":
                msgs[i] = {**msgs[i], "content": content + " more" * rnd.randrange(1, 40)}
                op = -1
            else:
                op = 4
        if op == -1:
            pass
        elif op == 0 or len(msgs) < 6:
            msgs.insert(i, _random_message(rnd, 100 + step))
        elif op == 1:
            del msgs[i]
        elif op == 2:
            roles = ["user", "assistant", "tool", "system", "reminder"]
            msgs[i] = {**msgs[i], "role": rnd.choice(roles)}
            if msgs[i]["role"] == "tool":
                msgs[i].setdefault("tool_call_id", "c0")
        elif op == 3:  # another id, one that names an upload, or one already taken
            ids = [f"x{step}", f"x{step}/files/0", str(msgs[rnd.randrange(len(msgs))]["id"])]
            msgs[i] = {**msgs[i], "id": rnd.choice(ids)}
        elif "tool_calls" in msgs[i] or "tool_call_id" in msgs[i]:
            fresh = f"c{rnd.randrange(6)}"
            if "tool_call_id" in msgs[i]:
                msgs[i] = {**msgs[i], "tool_call_id": fresh}
            else:
                calls = msgs[i]["tool_calls"]
                assert isinstance(calls, list)
                msgs[i] = {**msgs[i], "tool_calls": [{**calls[0], "id": fresh}]}
        text = json.dumps(
            {**settings, "messages": [*msgs, {"id": "end", "role": "user", "content": "?"}]},
            indent=2,
        )
        got = _analysis(path, text, host)
        anew = AnalysisHost()
        want = _analysis(path, text, anew)
        _assert_same_inputs(host, anew)
        assert [(d, d.range.start, d.range.end, d.fix) for d in got.diagnostics] == [
            (d, d.range.start, d.range.end, d.fix) for d in want.diagnostics
        ], (seed, step)
        seen.update(d.code for d in got.diagnostics)
    # The edits reach the tool-call and file rules.
    document_rules = {
        "orphaned-tool-response",
        "unanswered-tool-call",
        "duplicate-tool-call-id",
        "file-id-not-in-read-file-list",
    }
    assert len(seen & document_rules) >= 3, seen
    if budget is not None:
        assert {"history-truncated", "compression-due"} <= seen, seen


def _budgeted(first_id: str, budget: int, role: str) -> str:
    """A conversation whose first message (with a file) is summarized and, at a tighter
    budget, cut."""
    files = [{"file_id": "f1", "filename": "a.md", "content": "x"}]
    msgs: list[dict[str, object]] = [
        {"id": first_id, "role": role, "content": "see" + " word" * 40, "files": files}
    ]
    msgs += [
        {"id": f"m{k}", "role": "user" if k % 2 else "assistant", "content": "t" + " w" * 40}
        for k in range(12)
    ]
    msgs.append({"id": "end", "role": "user", "content": "?"})
    return json.dumps({"settings": {"max_input_tokens": budget}, "messages": msgs}, indent=2)


@pytest.mark.parametrize("role", ["user", "assistant"])
@pytest.mark.parametrize("budget", [600, 450])
def test_budget_spans_follow_an_id_that_names_an_upload(
    tmp_path: Path, budget: int, role: str
) -> None:
    """The budget rules' spans are kept while the history's model messages keep their
    places; an id edit keeps them, unless the new id reads as an injected upload's
    (``<id>/files/<k>``: an assistant message's files are not injected, but its own id
    then names one), which the spans do not count as a message."""
    path = tmp_path / "b.conv.json"
    host = AnalysisHost()
    before = _analysis(path, _budgeted("a", budget, role), host)
    spans = {"history-truncated", "compression-due"}
    assert spans & {d.code for d in before.diagnostics}
    for first_id in ("b", "a/files/0", "c"):
        text = _budgeted(first_id, budget, role)
        got = _analysis(path, text, host)
        want = _analysis(path, text)
        assert [(d, d.message) for d in got.diagnostics] == [
            (d, d.message) for d in want.diagnostics
        ]
        counts = {d.message for d in got.diagnostics if d.code in spans}
        if first_id == "a/files/0":  # one message fewer among those summarized or cut
            assert counts != {d.message for d in before.diagnostics if d.code in spans}


def _assert_same_inputs(host: AnalysisHost, fresh: AnalysisHost) -> None:
    """The inputs the narrow summaries are made from, and those summaries, as the host
    keeps them equal a fresh analysis' (positions included, where they hold any)."""
    kept, made = _cache(host), _cache(fresh)
    kinds = (MessageKinds, OnBranch, ToolTraffic, FileTraffic, Summaries, SystemChoice)
    for t in (*kinds, Truncation, Compression):
        assert kept.input(t) == made.input(t), t.__name__
    for t in (MessageKinds, OnBranch):
        assert kept.input(t) == made.input(t)
    for t in (ToolTraffic, FileTraffic, Summaries):
        a, b = kept.input(t), made.input(t)
        assert (a.on_branch if not isinstance(a, Summaries) else a.nodes) == (
            b.on_branch if not isinstance(b, Summaries) else b.nodes
        ), t.__name__


def _talking_message(rnd: random.Random, k: int, ids: list[str]) -> dict[str, object]:
    """A message for the per-message rules: an assistant message writing a call as text
    (or markup), or another, sometimes answering an earlier message (a branch)."""
    kind = rnd.randrange(4)
    if kind == 0:
        content = json.dumps({"name": "web_search", "arguments": {"query": f"q{k}"}})
        m: dict[str, object] = {"id": f"r{k}", "role": "assistant", "content": content}
    elif kind == 1:
        call = "<tool_call>" + json.dumps({"name": f"x{k}", "arguments": {}}) + "</tool_call>"
        m = {"id": f"r{k}", "role": "assistant", "content": call}
    else:
        m = {"id": f"r{k}", "role": rnd.choice(["user", "assistant"]), "content": f"turn {k}"}
    if ids and rnd.random() < 0.3:
        m["parent"] = rnd.choice(ids)
    return m


@pytest.mark.parametrize(("seed", "tools"), [(1, True), (2, True), (3, False), (4, True)])
def test_per_message_rules_follow_messages_that_come_and_go(
    tmp_path: Path, seed: int, tools: bool
) -> None:
    """Messages inserted, deleted or moved to another branch among assistant messages
    that write calls as text: the per-message rules run on the new messages and on the
    kept ones that come onto the branch, their findings move with their messages (by
    object), and equal a fresh analysis' after each edit."""
    rnd = random.Random(seed)
    path = tmp_path / "p.conv.json"
    declared = [{"type": "function", "function": {"name": "web_search", "parameters": {}}}]
    msgs: list[dict[str, object]] = []
    for k in range(16):
        msgs.append(_talking_message(rnd, k, [str(m["id"]) for m in msgs]))

    def text() -> str:
        body: dict[str, object] = {"messages": [*msgs, {"id": "end", "role": "user"}]}
        if tools:
            body = {"tools": declared, **body}
        return json.dumps(body, indent=2)

    host = AnalysisHost()
    _analysis(path, text(), host)
    seen: set[str] = set()
    for step in range(24):
        op = rnd.randrange(3)
        i = rnd.randrange(len(msgs))
        if op == 0 or len(msgs) < 4:
            earlier = [str(m["id"]) for m in msgs[:i]]
            msgs.insert(i, _talking_message(rnd, 100 + step, earlier))
        elif op == 1:
            gone = msgs.pop(i)["id"]
            for m in msgs:  # no answer to a message that is gone
                if m.get("parent") == gone:
                    del m["parent"]
        else:  # another branch: answer an earlier message, or none
            earlier = [str(m["id"]) for m in msgs[:i]]
            msgs[i] = {k: v for k, v in msgs[i].items() if k != "parent"}
            if earlier and rnd.random() < 0.7:
                msgs[i]["parent"] = rnd.choice(earlier)
        got = _analysis(path, text(), host)
        anew = AnalysisHost()
        want = _analysis(path, text(), anew)
        _assert_same_inputs(host, anew)
        assert [(d, d.range.start, d.range.end, d.fix) for d in got.diagnostics] == [
            (d, d.range.start, d.range.end, d.fix) for d in want.diagnostics
        ], (seed, step)
        seen.update(d.code for d in got.diagnostics)
    assert ("tool-call-in-text" if tools else "tool-call-markup-in-text") in seen, seen


@pytest.mark.parametrize("seed", range(4))
def test_message_references_from_the_last_equal_from_nothing(seed: int) -> None:
    """The references a message's removal fix checks (``parent``, ``summarizes_through``,
    messages named by their index), made from the last version's and the messages that
    changed, equal those made from nothing, over random splices of shared messages."""
    from assembly.diagnostics.rules.tool_calls import _references

    rnd = random.Random(seed)

    def message(k: int) -> Message:
        named = [None, None, f"m{rnd.randrange(6)}"]
        return Message(
            f"m{k}",
            Role.USER,
            "x",
            RelRange(0, 1),
            id_range=None if rnd.random() < 0.2 else RelRange(0, 1),
            parent=rnd.choice(named),
            summarizes_through=rnd.choice(named),
        )

    msgs = [message(k) for k in range(rnd.randrange(0, 12))]
    last = _references(tuple(msgs), None)
    for step in range(60):
        kind = rnd.randrange(4)
        at = rnd.randrange(len(msgs) + 1)
        if kind == 0:
            msgs[at:at] = [message(100 + step * 10 + j) for j in range(rnd.randrange(1, 4))]
        elif kind == 1:
            del msgs[at : at + rnd.randrange(1, 4)]
        elif kind == 2 and at < len(msgs):
            msgs[at] = message(at)  # replaced in place (a new object)
        elif msgs:
            msgs.insert(rnd.randrange(len(msgs)), msgs.pop(rnd.randrange(len(msgs))))
        fresh = _references(tuple(msgs), None)
        last = _references(tuple(msgs), last if rnd.random() < 0.9 else None)
        assert last == fresh, (seed, step)
        referenced = {m.parent for m in msgs} | {m.summarizes_through for m in msgs}
        assert set(last.counts) == referenced - {None}
        assert all(n > 0 for n in last.counts.values())
        want = max((i for i, m in enumerate(msgs) if m.id_range is None), default=-1)
        assert last.implicit.rfind(1) == want


def test_findings_whose_messages_did_not_move_are_placed_once(tmp_path: Path) -> None:
    """A kept finding is placed again only when one of its messages starts elsewhere: typing
    in a message of a JSON Lines conversation with findings spread over it (the generated
    one's ``file-id-not-in-read-file-list`` under a tight budget) gives the very objects of
    the last version for the findings of a rule not run again that lie before the edit,
    and new ones, where a fresh run puts them, after it."""
    from tests.bench.gen_conversation import conversation as generated

    path = tmp_path / "gen.conv.jsonl"
    doc = generated(600, 200_000, 5)
    settings = {**doc["settings"], "max_input_tokens": 8_000}  # files dropped with history
    lines = [{"settings": settings}, *doc["messages"]]  # as gen_conversation writes
    text = "\n".join(json.dumps(m, ensure_ascii=False) for m in lines) + "\n"
    host = AnalysisHost()
    prev = _analysis(path, text, host)
    code = "file-id-not-in-read-file-list"
    assert sum(d.code == code for d in prev.diagnostics) > 10
    rnd = random.Random(5)
    reused = 0
    for _ in range(8):
        conv = prev.conversation
        assert conv is not None
        inside = [m.content_range for m in conv.messages if m.content_range]
        rng = rnd.choice(inside[len(inside) // 4 :])
        assert rng is not None
        at = rnd.randrange(rng.start + 1, max(rng.start + 2, rng.end))
        text = text[:at] + "x" + text[at:]
        got = _analysis(path, text, host)
        want = _analysis(path, text)
        assert [(d, d.range.start, d.range.end) for d in got.diagnostics] == [
            (d, d.range.start, d.range.end) for d in want.diagnostics
        ]
        last = {id(d) for d in prev.diagnostics}
        if code not in _cache(host).ran:
            mine = [d for d in got.diagnostics if d.code == code]
            assert all(id(d) in last for d in mine if d.range.end < rng.start)
            assert not any(id(d) in last for d in mine if d.range.start > at)
            reused += sum(id(d) in last for d in mine)
        prev = got
    assert reused > 10


def test_findings_after_a_splice_are_moved_not_found_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A JSON Lines message pasted, then deleted, above the findings of a rule whose inputs
    stay equal (the generated conversation's ``file-id-not-in-read-file-list``): every
    later message moves to another index and start, and each finding is its last placing
    moved by the splice's shift (its argument's place inside its message is not found
    again), equal to what a fresh run gives."""
    from assembly.diagnostics import engine
    from tests.bench.gen_conversation import conversation as generated

    path = tmp_path / "gen.conv.jsonl"
    doc = generated(600, 200_000, 5)
    settings = {**doc["settings"], "max_input_tokens": 8_000}  # files dropped with history
    lines = [{"settings": settings}, *doc["messages"]]
    text = "\n".join(json.dumps(m, ensure_ascii=False) for m in lines) + "\n"
    host = AnalysisHost()
    code = "file-id-not-in-read-file-list"
    first = _analysis(path, text, host)
    n = sum(d.code == code for d in first.diagnostics)
    assert n > 10
    located: list[int] = []
    real = engine._Run._locate

    def counted(self: typing.Any, r: typing.Any) -> TextRange:
        located.append(r.message)
        return real(self, r)

    monkeypatch.setattr(engine._Run, "_locate", counted)
    at = text.index("\n", text.index("\n") + 1) + 1  # the third line
    pasted = '{"role": "user", "content": "pasted"}\n'
    for new_text in (text[:at] + pasted + text[at:], text):
        located.clear()
        got = _analysis(path, new_text, host)
        moved_again = len(located)
        want = _analysis(path, new_text)
        assert [(d, d.range.start, d.range.end) for d in got.diagnostics] == [
            (d, d.range.start, d.range.end) for d in want.diagnostics
        ]
        assert code not in _cache(host).ran
        assert sum(d.code == code for d in got.diagnostics) == n
        assert moved_again < n // 2, moved_again


def _with_tools(declared: bool) -> str:
    """Six assistant turns, one of which writes a call in Hermes markup, with or without
    the conversation's ``tools``."""
    messages: list[dict[str, object]] = [{"id": "u0", "role": "user", "content": "Go."}]
    for k in range(6):
        text = f"Step {k}."
        if k == 3:
            text = '<tool_call>{"name": "lookup", "arguments": {"q": "x"}}</tool_call>'
        messages.append({"id": f"a{k}", "role": "assistant", "content": text})
        messages.append({"id": f"u{k + 1}", "role": "user", "content": "And?"})
    doc: dict[str, object] = {"messages": messages}
    if declared:
        tool = {"name": "lookup", "parameters": {"type": "object"}}
        doc = {"tools": [{"type": "function", "function": tool}], **doc}
    return json.dumps(doc, indent=2)


def test_a_per_message_rule_that_does_not_apply_visits_no_message(tmp_path: Path) -> None:
    """`tool-call-markup-in-text` looks only when no tools are declared, and
    `tool-call-in-text` only when some are (``When``): the other one visits no message, and
    when the tools come or go it checks every message, as a fresh run does."""
    path = tmp_path / "gate.conv.json"
    host = AnalysisHost()
    for declared in (True, False, True, False):
        text = _with_tools(declared)
        got = _analysis(path, text, host)
        assert got.diagnostics == _analysis(path, text).diagnostics
        codes = {d.code for d in got.diagnostics}
        assert ("tool-call-markup-in-text" in codes) is not declared, codes
        conv = got.conversation
        assert conv is not None and len(conv.message_data) == 13
        assert bool(conv.tools) is declared
        assert ("tool-call-in-text" in codes) is declared, codes
        fresh = AnalysisHost()
        _analysis(path, text, fresh)
        # Each per-message rule visits the branch's messages it reads (its source's role,
        # then its ``admits``: the text of one message only), but for the one that does
        # not apply to this document.
        off = "tool-call-in-text" if not declared else "tool-call-markup-in-text"
        visits = 0
        for rule in RULES:
            kind, params = rule_kind(rule)
            if kind != "message" or rule.code == off:
                continue
            source: type[MessageSource] = params[0]  # type: ignore[assignment]
            role, admits = source.role, source.admits
            visits += sum(
                1
                for m in conv.message_data
                if (role is None or m.role is role) and (admits is None or admits(m))
            )
        assert visits == 1
        assert _cache(fresh).message_runs == visits
