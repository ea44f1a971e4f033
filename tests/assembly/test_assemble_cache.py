"""The staged pipeline's memo (``AssemblyCache``): a memoised assembly equals a fresh one.

There is one implementation of the pipeline; ``assemble`` without a cache runs it with an
empty memo. These tests check the memo keys: for the conversations of
``tests/data/assembly``, ``examples/`` and a generated one, a seeded random sequence of
steps replaces messages with re-read copies (content, role, ids, tool calls, counts,
uploaded files), inserts, removes and moves messages, edits the inline prompts or changes
the settings; after each step ``assemble`` with the document's cache must give exactly
what it gives without one. Other tests check that typing converts only the edited message
and patches the per-position lists (so the equality is not that of a recomputation).
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import assembly.host
from assembly import texts
from assembly.assemble import AssembleOptions, Assembly, AssemblyCache, assemble
from assembly.host import AnalysisHost
from assembly.model import Conversation, FileAttachment, Message, Role, TextBlock, ToolCall
from assembly.settings import Settings
from assembly.text import TextRange
from assembly.tokens import CachedTokenizer, Tokenizer
from tests.support import engine

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted(
    p
    for folder in (ROOT / "tests" / "data" / "assembly", ROOT / "examples")
    for p in folder.iterdir()
    if ".conv." in p.name
)
# ``gen_conversation.py --messages 400 --target-bytes 300000`` of the benchmark corpus.
GENERATED = ROOT / "tests" / "data" / "generated" / "m400.conv.json"

Inputs = tuple[Conversation, Settings, Tokenizer, AssembleOptions]


def inputs_of(path: Path, monkeypatch: pytest.MonkeyPatch) -> Inputs:
    """What ``analyze`` passes to ``assemble`` for the document (settings, template, files)."""
    seen: list[Inputs] = []

    def spy(
        conv: Conversation, s: Settings, tok: Tokenizer, opts: AssembleOptions, **kw: Any
    ) -> Assembly:
        seen.append((conv, s, tok, opts))
        return assemble(conv, s, tok, opts)

    with monkeypatch.context() as m:
        m.setattr(assembly.host, "assemble", spy)
        engine.analyze(path)
    return seen[0]


def assert_same(cached: Assembly, fresh: Assembly) -> None:
    """Every field equal, dict key orders included (but ``tokens_by_id``'s: a lookup table,
    carried through a splice by removing and adding entries)."""
    for f in dataclasses.fields(Assembly):
        assert getattr(cached, f.name) == getattr(fresh, f.name), f.name
    assert json.dumps(cached.provider_messages) == json.dumps(fresh.provider_messages)
    assert json.dumps(cached.compression.request) == json.dumps(fresh.compression.request)


def check_sequence(
    inputs: Inputs,
    steps: int,
    seed: int,
    *,
    settings_every: int = 0,
    prompt_share: float = 0.2,
    structure_share: float = 0.15,
) -> AssemblyCache:
    """Apply random message edits, inline prompt edits (about ``prompt_share`` of the
    steps), messages inserted, removed, merged or moved (about ``structure_share``),
    settings changes (every ``settings_every`` steps) and undos (a tenth of the steps),
    comparing the cached and the fresh assembly after each."""
    conv, settings, tok, opts = inputs
    rng = random.Random(seed)
    cache = AssemblyCache()
    assert_same(
        assemble(conv, settings, tok, opts, cache=cache), assemble(conv, settings, tok, opts)
    )
    before = conv  # the version before the last step: an undo goes back to it
    for step in range(steps):
        undo = rng.random() < 0.1
        conv, before = (before if undo else conv), conv
        if undo:
            pass
        elif settings_every and step % settings_every == settings_every - 1:
            settings = change_settings(settings, rng)
        elif rng.random() < prompt_share:
            conv = edit_prompt(conv, rng)
        elif conv.messages and rng.random() < structure_share:
            conv = edit_structure(conv, rng)
        elif conv.messages:
            msgs = list(conv.message_data)
            k = rng.randrange(len(msgs))
            msgs[k] = rng.choice(EDITS)(msgs[k], rng)
            conv = dataclasses.replace(conv, message_data=tuple(msgs))
        cached = assemble(conv, settings, tok, opts, cache=cache)
        fresh_cache = AssemblyCache()
        assert_same(cached, assemble(conv, settings, tok, opts, cache=fresh_cache))
        assert_same_history(cache, fresh_cache)
    return cache


def assert_same_history(cache: AssemblyCache, fresh: AssemblyCache) -> None:
    """The per-position lists and the shape (the calls' positions, the users', the
    images') made from the last ones and a splice equal those made from nothing."""
    h, f = cache._history, fresh._history
    assert (h is None) == (f is None)
    if h is None or f is None:
        return
    for field in dataclasses.fields(h.shape):
        if field.name != "call_last":  # (None: not known, as after a splice)
            assert getattr(h.shape, field.name) == getattr(f.shape, field.name), field.name
    assert h.shape.call_last is None or h.shape.call_last == f.shape.call_last
    assert list(h.shape.call_pos) == list(f.shape.call_pos)
    for name in ("starts", "tokens", "stored", "cost", "prefix", "cand"):
        assert getattr(h, name) == getattr(f, name), name


# ---------------------------------------------------------------------------------------
# Edits: each returns a re-read copy of the stored message (a new object, same id).

_CHARS = ["x", " ", "\n", "é", "😀", "{", '"']


def edit_insert(m: Message, rng: random.Random) -> Message:
    i = rng.randrange(len(m.content) + 1)
    return dataclasses.replace(m, content=m.content[:i] + rng.choice(_CHARS) + m.content[i:])


def edit_delete(m: Message, rng: random.Random) -> Message:
    if not m.content:
        return dataclasses.replace(m)
    i = rng.randrange(len(m.content))
    return dataclasses.replace(m, content=m.content[:i] + m.content[i + 1 :])


def edit_replace(m: Message, rng: random.Random) -> Message:
    content = rng.choice(["", "  \n", "ok", texts.TOOL_FAILURE, "word " * rng.randrange(1, 3000)])
    return dataclasses.replace(m, content=content)


def edit_role(m: Message, rng: random.Random) -> Message:
    return dataclasses.replace(m, role=rng.choice([r for r in Role if r is not Role.SUMMARY]))


def edit_id(m: Message, rng: random.Random) -> Message:
    """A character typed in the id (ids stay unique, as the reader keeps them)."""
    return dataclasses.replace(m, id=f"{m.id}-z{rng.randrange(10**9)}")


def edit_token_count(m: Message, rng: random.Random) -> Message:
    return dataclasses.replace(m, token_count=rng.choice([None, 0, 7, 5000, 200_000]))


def edit_arguments(m: Message, rng: random.Random) -> Message:
    """New arguments for one tool call (its id and name kept)."""
    if not m.tool_calls:
        return edit_insert(m, rng)
    k = rng.randrange(len(m.tool_calls))
    args = {"query": "q" * rng.randrange(1, 400)}
    arguments: dict[str, Any] | None = args if rng.random() < 0.8 else None
    call = dataclasses.replace(
        m.tool_calls[k], arguments=arguments, arguments_text=json.dumps(args) + "x" * (not args)
    )
    return dataclasses.replace(m, tool_calls=_put(m.tool_calls, k, call))


def edit_call_identity(m: Message, rng: random.Random) -> Message:
    """Rename a tool call or change its id, or add one; or point a tool result elsewhere."""
    if m.role is Role.TOOL:
        typed = f"{m.tool_call_id or ''}q"
        return dataclasses.replace(
            m, tool_call_id=rng.choice([None, "nope", m.tool_call_id, typed])
        )
    if m.tool_calls and rng.random() < 0.7:
        k = rng.randrange(len(m.tool_calls))
        change = rng.choice([{"name": "generate_image"}, {"name": "web_search"}, {"id": "c-new"}])
        return dataclasses.replace(
            m, tool_calls=_put(m.tool_calls, k, dataclasses.replace(m.tool_calls[k], **change))
        )
    call = ToolCall("c-added", "read_file", {}, "{}", m.range, m.range, m.range, m.range)
    return dataclasses.replace(m, tool_calls=(*m.tool_calls, call))


def edit_files(m: Message, rng: random.Random) -> Message:
    """Edit an uploaded file's text, or upload one more."""
    if m.files and rng.random() < 0.6:
        k = rng.randrange(len(m.files))
        f = m.files[k]
        content = (f.content or "") + "more text"
        return dataclasses.replace(
            m, files=_put(m.files, k, dataclasses.replace(f, content=content))
        )
    f = FileAttachment(f"f-{rng.randrange(3)}", "notes.txt", "file text " * 20, m.range)
    return dataclasses.replace(m, files=(*m.files, f))


def edit_file_text(m: Message, rng: random.Random) -> Message:
    """Type in, cut or replace the text of an uploaded file (or of an injected file message)."""
    if not m.files:
        return edit_replace(m, rng) if m.file_id is not None else edit_insert(m, rng)
    k = rng.randrange(len(m.files))
    f = m.files[k]
    return dataclasses.replace(
        m, files=_put(m.files, k, dataclasses.replace(f, content=resized(f.content or "", rng)))
    )


def resized(text: str, rng: random.Random) -> str:
    """One character typed or deleted, or a text of another size (empty, blank, long)."""
    i = rng.randrange(len(text) + 1)
    return rng.choice(
        [
            text[:i] + rng.choice(_CHARS) + text[i:],
            text[: max(0, i - 1)] + text[i:],
            text[: rng.randrange(len(text) + 1)],
            text + "more words " * rng.randrange(1, 2000),
            "",
            " \n ",
        ]
    )


def _put(items: tuple[Any, ...], k: int, item: Any) -> tuple[Any, ...]:
    return (*items[:k], item, *items[k + 1 :])


# Inline prompt edits: the re-read conversation shares every message and has a new
# ``TextBlock`` for the edited field (what the incremental re-parse gives).

INLINE_PROMPTS = ("system_prompt", "custom_agent_prompt", "reminder")
_PROMPT_TEXTS = [
    "",
    " \n",
    "Be brief.",
    "# Tools\n\n## read_file\nPass the file_id.\n\n## web_search\nSearch the web.\n",
    "Today is {{CURRENT_DATETIME}}. {{CITATION_GUIDANCE}} {{REMINDER_TAG_DESCRIPTION}}",
    "Hello {{user.name}} of {{ user.department }}, {{user.nope}}.",
]


def edit_prompt(conv: Conversation, rng: random.Random) -> Conversation:
    """Type in, cut, empty, grow or replace one inline prompt; now and then give one where
    there was none, or take it away (the system prompt only when given inline: otherwise
    the branch's system message would stop, or start, being the prompt)."""
    name = rng.choice(INLINE_PROMPTS)
    block = getattr(conv, name)
    if not isinstance(block, TextBlock):
        if name == "system_prompt" and (block is not None or rng.random() < 0.8):
            name = rng.choice(INLINE_PROMPTS[1:])
            block = getattr(conv, name)
        if block is None:
            text = rng.choice(_PROMPT_TEXTS[2:])
            return dataclasses.replace(conv, **{name: TextBlock(text, TextRange(0, len(text)))})
    assert isinstance(block, TextBlock)
    r = rng.random()
    if r < 0.05 and name != "system_prompt":
        return dataclasses.replace(conv, **{name: None})
    if r < 0.15:
        new = dataclasses.replace(block, token_count=rng.choice([None, 0, 9, 3000, 200_000]))
    elif r < 0.3:
        new = dataclasses.replace(block, content=rng.choice(_PROMPT_TEXTS))
    elif r < 0.4:
        extra = rng.choice(_PROMPT_TEXTS[2:])
        new = dataclasses.replace(block, content=block.content + "\n" + extra)
    else:
        new = dataclasses.replace(block, content=resized(block.content, rng))
    return dataclasses.replace(conv, **{name: new})


EDITS: list[Callable[[Message, random.Random], Message]] = [
    edit_insert,
    edit_insert,
    edit_insert,
    edit_delete,
    edit_replace,
    edit_role,
    edit_id,
    edit_id,
    edit_token_count,
    edit_arguments,
    edit_call_identity,
    edit_files,
    edit_file_text,
]


def change_settings(s: Settings, rng: random.Random) -> Settings:
    field, values = rng.choice(
        [
            ("max_input_tokens", [300, 2000, 8000, 128_000, 1_000_000]),
            ("model", ["gpt-4o", "o1", "gpt-5", "llama3"]),
            ("provider", ["openai", "ollama", "azure"]),
            ("vision", [True, False]),
            ("image_cap", [False, True, 1, 3]),
            ("prompt_cache_chat_history", [True, False]),
            ("prompt_cache_marker", ["none", "anthropic"]),
            ("last_n_user_messages", [None, 1, 2]),
            ("keep_past_tool_results", [True, False]),
            ("reserved_tokens", ["auto", 0, 500]),
            ("last_cycle", [True, False]),
            ("safety_margin", [0.0, 0.1]),
            ("replace_system_prompt", [True, False]),
            ("datetime_aware", [True, False]),
        ]
    )
    return dataclasses.replace(s, **{field: rng.choice(values)})


def edit_structure(conv: Conversation, rng: random.Random) -> Conversation:
    """Insert a copy of a message under a new id, remove one or a run of them, join one
    with the next (a deletion across them), or move one elsewhere; the other stored
    messages are shared (as the re-read shares them), each keeping its start."""
    msgs = list(zip(conv.message_data, conv.starts, strict=True))
    k = rng.randrange(len(msgs))
    kinds = ["insert", "remove", "move", "merge", "remove-run"] if len(msgs) > 1 else ["insert"]
    kind = rng.choice(kinds)
    if kind == "insert":
        m, start = rng.choice(msgs)
        msgs.insert(k, (dataclasses.replace(m, id=f"new-{rng.randrange(10**6)}"), start))
    elif kind == "remove":
        del msgs[k]
    elif kind == "merge" and k + 1 < len(msgs):
        # A deletion from inside one message into the next: one message, its text joined.
        (m, start), (nxt, _) = msgs[k], msgs[k + 1]
        msgs[k : k + 2] = [(dataclasses.replace(m, content=m.content + nxt.content), start)]
    elif kind in ("merge", "remove-run"):
        del msgs[k : k + rng.randrange(1, 4)]
    else:
        moved = msgs.pop(k)
        msgs.insert(rng.randrange(len(msgs) + 1), moved)
    data = tuple(m for m, _ in msgs)
    return dataclasses.replace(conv, message_data=data, starts=tuple(s for _, s in msgs))


def synthetic(seed: int, budget: int) -> dict[str, Any]:
    """Turns of a user message (some with uploads, some injected files), a read_file call,
    its result (some orphaned) and an answer, with stated counts so the cut is controlled."""
    rng = random.Random(seed)
    msgs: list[dict[str, Any]] = []
    for t in range(24):
        user: dict[str, Any] = {"id": f"u{t}", "role": "user", "content": f"question {t}"}
        if t % 3 == 0:  # the same files again and again
            upload = {"file_id": f"up{t % 4}", "filename": f"up{t % 4}.txt", "content": "text"}
            user["files"] = [upload]
        if t % 5 == 1:
            user.update(file_id=f"inj{t}", filename=f"inj{t}.txt")
        call = {"id": f"c{t}", "type": "function"}
        call["function"] = {"name": "read_file", "arguments": json.dumps({"file_id": f"up{t}"})}
        result_for = f"c{t}" if t % 7 else "nowhere"
        msgs += [
            user,
            {"id": f"a{t}", "role": "assistant", "content": "", "tool_calls": [call]},
            {"id": f"r{t}", "role": "tool", "tool_call_id": result_for, "content": f"result {t}"},
            {"id": f"b{t}", "role": "assistant", "content": f"answer {t}"},
        ]
    for m in msgs:
        m["token_count"] = rng.randrange(1, 80)
    settings = {"max_input_tokens": budget, "safety_margin": 0, "reserved_tokens": 0}
    return {"settings": settings, "tools": ["read_file"], "messages": msgs[:-3]}


def grown_or_cut(text: str, rng: random.Random) -> str:
    """A character typed or deleted, words added or cut, a placeholder added, or emptied."""
    i = rng.randrange(len(text) + 1)
    return rng.choice(
        [
            text[:i] + rng.choice(_CHARS) + text[i:],
            text[:i] + rng.choice(_CHARS) + text[i:],
            text[: max(0, i - 1)] + text[i:],
            text + " word" * rng.randrange(1, 400),
            text[: max(0, len(text) - 5 * rng.randrange(1, 400))],
            text + " " + rng.choice(_PROMPT_TEXTS[3:]),
            "" if rng.random() < 0.3 else text,
        ]
    )


# ---------------------------------------------------------------------------------------
# Tests


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_random_edits_equal_fresh(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check_sequence(inputs_of(path, monkeypatch), steps=14, seed=len(path.name), settings_every=5)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A conversation of the benchmark corpus: tool calls, uploads, a summary, a reminder."""
    out = tmp_path_factory.mktemp("gen") / "gen.conv.json"
    out.write_bytes(GENERATED.read_bytes())
    return out


@pytest.mark.parametrize("budget", [8_000, 30_000, 1_000_000])
def test_generated_random_edits_equal_fresh(
    generated: Path, budget: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A budget that keeps part of the history (and forgets files), and one that keeps all."""
    conv, s, tok, opts = inputs_of(generated, monkeypatch)
    inputs = (conv, dataclasses.replace(s, max_input_tokens=budget), tok, opts)
    check_sequence(inputs, steps=20, seed=budget, settings_every=9)


@pytest.mark.parametrize("seed", range(3))
def test_moving_cut_equals_fresh(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counts changed one message at a time move the budget cut over uploads, injected
    files and orphaned results: what is dropped, forgotten and orphaned follows, with one
    message converted again each time."""
    rng = random.Random(seed)
    path = tmp_path / "doc.conv.json"
    path.write_text(json.dumps(synthetic(seed, [600, 1500, 2500][seed])))
    conv, s, tok, opts = inputs_of(path, monkeypatch)
    cache = AssemblyCache()
    assemble(conv, s, tok, opts, cache=cache)
    dropped = set()
    for _ in range(30):
        msgs = list(conv.message_data)
        k = rng.randrange(len(msgs))
        count = rng.choice([0, 1, 5, 40, 150, 400])
        msgs[k] = dataclasses.replace(msgs[k], token_count=count)
        conv = dataclasses.replace(conv, message_data=tuple(msgs))
        res = assemble(conv, s, tok, opts, cache=cache)
        assert_same(res, assemble(conv, s, tok, opts))
        assert (cache.converted, cache.rebuilt) == (1, False)
        dropped.add(res.dropped)
    assert len(dropped) > 1  # the cut moved


def _typed(m: Message, file: int | None = None) -> Message:
    """``m`` with one character typed in the middle of its content (or of a file's)."""
    if file is None:
        i = len(m.content) // 2
        return dataclasses.replace(m, content=m.content[:i] + "x" + m.content[i:])
    f = m.files[file]
    text = f.content or ""
    i = len(text) // 2
    f = dataclasses.replace(f, content=text[:i] + "x" + text[i:])
    return dataclasses.replace(m, files=_put(m.files, file, f))


@pytest.mark.parametrize("budget", [8_000, 1_000_000])
def test_typing_converts_only_the_edited_message(
    generated: Path, budget: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Typing in a message or in an uploaded file converts that message again and patches
    the per-position lists; typing in the system message taken as the prompt or in an
    inline prompt converts none; inserting a message converts it alone, the lists made
    again from the memoised conversions."""
    conv, s, tok, opts = inputs_of(generated, monkeypatch)
    s = dataclasses.replace(s, max_input_tokens=budget)
    assert conv.custom_agent_prompt is not None and conv.reminder is not None
    cache = AssemblyCache()
    first = assemble(conv, s, tok, opts, cache=cache)
    assert cache.converted > 100  # an empty memo: everything
    system = next(m.index for m in conv.messages if m.role is Role.SYSTEM)
    # The messages the history is converted from (not those the summary covers).
    sent = {conv.index_of(x.source) for x in first.history if x.source is not None}
    uploads = [m.index for m in conv.messages if m.files and m.index in sent]
    plain = sorted(sent)
    rng = random.Random(budget)

    def step(new: Conversation, expect: tuple[int, bool]) -> Conversation:
        res = assemble(new, s, tok, opts, cache=cache)
        assert_same(res, assemble(new, s, tok, opts))
        assert (cache.converted, cache.rebuilt) == expect
        return new

    for _ in range(4):
        msgs = list(conv.message_data)
        k = rng.choice(plain)
        msgs[k] = _typed(msgs[k])
        conv = step(dataclasses.replace(conv, message_data=tuple(msgs)), (1, False))
        msgs = list(conv.message_data)
        msgs[system] = _typed(msgs[system])
        conv = step(dataclasses.replace(conv, message_data=tuple(msgs)), (0, False))
        msgs = list(conv.message_data)
        k = rng.choice(uploads)
        msgs[k] = _typed(msgs[k], rng.randrange(len(msgs[k].files)))
        conv = step(dataclasses.replace(conv, message_data=tuple(msgs)), (1, False))
        for name in ("custom_agent_prompt", "reminder"):
            block = getattr(conv, name)
            new = dataclasses.replace(block, content=block.content + " x")
            conv = step(dataclasses.replace(conv, **{name: new}), (0, False))
    # A message typed at the end (the re-read gives the others as they were).
    last = conv.message_data[-1]
    added = dataclasses.replace(last, id="typed", role=Role.ASSISTANT, content="more", files=())
    added = dataclasses.replace(added, tool_calls=(), tool_call_id=None, file_id=None)
    data, starts = conv.message_data, conv.starts
    grown = dataclasses.replace(conv, message_data=(*data, added), starts=(*starts, conv.length))
    conv = step(grown, (1, True))
    # Deleted again: the memo of the version before the last (set aside when the message
    # came) is the nearer one, and is used as it is: nothing converted or rebuilt.
    conv = step(dataclasses.replace(conv, message_data=data, starts=starts), (0, False))


def test_emptied_and_filled_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every message removed, then messages typed again one by one."""
    path = tmp_path / "doc.conv.yaml"
    path.write_text(
        "messages:\n"
        '  - {id: u1, role: user, content: "Hello!"}\n'
        '  - {id: a1, role: assistant, content: "Hi."}\n'
    )
    conv, s, tok, opts = inputs_of(path, monkeypatch)
    full, starts = conv.message_data, conv.starts
    cache = AssemblyCache()
    for n in (2, 0, 1, 2, 1):
        conv = dataclasses.replace(conv, message_data=full[:n], starts=starts[:n])
        res = assemble(conv, s, tok, opts, cache=cache)
        assert_same(res, assemble(conv, s, tok, opts))
        assert len(res.history) == n


def test_formatting_prefix_on_a_history_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The formatting prefix goes on a system message of the history (no system prompt)
    and is added once per result, though that message is reused between results."""
    path = tmp_path / "doc.conv.yaml"
    path.write_text(
        'system_prompt: ""\nsettings: {model: o1}\nmessages:\n'
        '  - {id: s1, role: system, content: "Be brief."}\n'
        '  - {id: u1, role: user, content: "Hello!"}\n'
    )
    conv, s, tok, opts = inputs_of(path, monkeypatch)
    cache = AssemblyCache()
    for _ in range(4):
        cached = assemble(conv, s, tok, opts, cache=cache)
        assert_same(cached, assemble(conv, s, tok, opts))
        assert cached.provider_messages[0]["content"].startswith(texts.FORMATTING_REENABLED)
        u1 = dataclasses.replace(conv.message_data[1], content=conv.messages[1].content + "!")
        conv = dataclasses.replace(conv, message_data=(conv.message_data[0], u1))
    assert cache.converted == 1


def test_moved_project_images(monkeypatch: pytest.MonkeyPatch) -> None:
    """Project images ride on the last user message with their ranges: re-read copies
    that moved are what the result holds (the last user message is converted again)."""
    path = (
        ROOT
        / "tests/data/assembly/a11_attaches_project_images_to_last_user_message_only_once.conv.yaml"
    )
    conv, s, tok, opts = inputs_of(path, monkeypatch)
    assert any(f.kind == "image" for f in conv.project_files)
    cache = AssemblyCache()
    assemble(conv, s, tok, opts, cache=cache)
    for delta in (3, 10, 4):
        moved = tuple(
            dataclasses.replace(f, range=f.range.shift(delta)) for f in conv.project_files
        )
        conv = dataclasses.replace(conv, project_files=moved)
        assert_same(assemble(conv, s, tok, opts, cache=cache), assemble(conv, s, tok, opts))
        assert (cache.converted, cache.rebuilt) == (1, False)


@pytest.mark.parametrize(
    ("system_id", "first_id"),
    [
        ("s", "$custom_agent"),
        ("s", "$system"),
        ("s", "u1/files/0"),
        ("$custom_agent", "u0"),
        ("u1/files/0", "u0"),
        ("a0", "a0"),  # the same id twice
    ],
)
def test_ids_shared_with_the_pipeline(
    system_id: str, first_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message id that the pipeline also gives to a message it makes, or that another
    message has."""
    path = tmp_path / "doc.conv.json"
    doc = {
        "custom_agent_prompt": {"content": "Be kind.", "token_count": 4},
        "reminder": "Cite.",
        "tools": ["read_file"],
        "messages": [
            {"id": system_id, "role": "system", "content": "Be brief."},
            {"id": first_id, "role": "user", "content": "hi", "token_count": 30},
            {"id": "a0", "role": "assistant", "content": "hello", "token_count": 3},
            {"id": "u1", "role": "user", "content": "more", "files": [{"file_id": "f"}]},
        ],
    }
    path.write_text(json.dumps(doc))
    conv, s, tok, opts = inputs_of(path, monkeypatch)
    for budget in (10_000, 150):
        inputs = (conv, dataclasses.replace(s, max_input_tokens=budget), tok, opts)
        check_sequence(inputs, steps=6, seed=len(first_id))


def test_changed_inputs_empty_the_memo(generated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings, the date and the document's other parts start the memo again, but for the
    converted messages, which read none of them, and the stages whose own inputs they
    are not: only the messages whose conversion flags a change changes are converted again
    (keeping past tool results: the earlier turns' tool results), and the per-position
    lists are made again only when what they read changed (the provider, vision, a file
    reader). A new tokenizer or additional context converts every message."""
    conv, s, tok, opts = inputs_of(generated, monkeypatch)
    cache = AssemblyCache()
    assemble(conv, s, tok, opts, cache=cache)
    everything = cache.converted
    keep_past = dataclasses.replace(s, keep_past_tool_results=True)
    # The earlier turns' tool results (read under other flags when they are kept).
    last_user = max(m.index for m in conv.messages if m.role is Role.USER and not m.file_id)
    past_results = sum(1 for m in conv.messages[:last_user] if m.role is Role.TOOL)
    # Per change: the messages converted again (None: some, at most the earlier turns'
    # results), and whether the per-position lists are made again (None: either).
    variants: list[tuple[Inputs, int | None, bool | None]] = [
        ((conv, dataclasses.replace(s, max_input_tokens=20_000), tok, opts), 0, False),
        ((conv, dataclasses.replace(s, provider="ollama"), tok, opts), 0, True),
        ((conv, dataclasses.replace(s, vision=not s.vision), tok, opts), 0, True),
        ((conv, keep_past, tok, opts), None, True),
        ((conv, s, tok, dataclasses.replace(opts, today=opts.today.replace(year=2001))), 0, False),
        ((dataclasses.replace(conv, tools=()), s, tok, opts), 0, None),
        ((dataclasses.replace(conv, user_info={"name": "Ada"}), s, tok, opts), 0, False),
        (
            (conv, s, CachedTokenizer(tok.counter, tok.encoding), opts),  # type: ignore[attr-defined]
            everything,
            True,
        ),
    ]
    extra = TextBlock("more context", TextRange(0, 0))
    variants.append(
        ((dataclasses.replace(conv, additional_context=extra), s, tok, opts), everything, True)
    )
    for (c, s2, t, o), converted, rebuilt in variants:
        for args in ((c, s2, t, o), (conv, s, tok, opts)):  # the change, then back
            assert_same(assemble(*args, cache=cache), assemble(*args))
            if converted is None:
                assert 0 < cache.converted <= past_results
            else:
                assert cache.converted == converted, (s2, converted)
            assert rebuilt is None or cache.rebuilt == rebuilt, (s2, rebuilt)


@pytest.mark.parametrize("name", ["support-agent.conv.json", "support-agent.conv.jsonl"])
def test_analyze_with_previous_assembles_incrementally(name: str, tmp_path: Path) -> None:
    """Typing in the editor: the document's ``AnalysisHost`` re-reads one message and
    passes on the memo it kept; the assembly is the one a fresh analysis gives."""
    source = ROOT / "examples" / name
    path = tmp_path / source.name
    text = source.read_text()
    path.write_text(text)
    (tmp_path / ".git").mkdir()
    rng = random.Random(name)
    host = AnalysisHost()
    prev = engine.analyze(path, text=text, host=host)
    for _ in range(4):
        conv = prev.conversation
        strings = [
            m.content_range
            for m in conv.messages
            if m.content_range is not None and text[m.content_range.start] == '"'
        ]
        rng_ = rng.choice(strings)
        at = rng.randrange(rng_.start + 1, rng_.end)
        text = text[:at] + "x" + text[at:]
        res = engine.analyze(path, text=text, host=host)
        fresh = engine.analyze(path, text=text)
        assert_same(res.assembly, fresh.assembly)
        assert res.diagnostics == fresh.diagnostics
        cache = host.assemble_cache
        assert isinstance(cache, AssemblyCache)
        assert cache.converted <= 1 and not cache.rebuilt
        prev = res


@pytest.mark.parametrize("seed", range(2))
def test_inline_prompts_across_thresholds(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inline prompts growing and shrinking across what their size decides: the reserved
    tokens, the history cut and the forgotten-files listing; the base prompt emptied and
    given again. Each step equals a fresh run and converts no message."""
    rng = random.Random(seed)
    doc = synthetic(seed, 2500)
    doc["system_prompt"] = {"content": "You are the helpful assistant of the team."}
    doc["custom_agent_prompt"] = "Answer as the release assistant. " + "word " * 150
    doc["reminder"] = {"content": "Keep it short, {{user.name}}."}
    if seed % 2:
        doc["settings"]["replace_system_prompt"] = True
    path = tmp_path / "doc.conv.json"
    path.write_text(json.dumps(doc))
    conv, s, tok, opts = inputs_of(path, monkeypatch)
    cache = AssemblyCache()
    assemble(conv, s, tok, opts, cache=cache)
    dropped = set()
    for _ in range(30):
        name = rng.choice(INLINE_PROMPTS)
        block = getattr(conv, name)
        if rng.random() < 0.1:
            new = dataclasses.replace(block, token_count=rng.choice([None, None, 50, 400]))
        else:
            new = dataclasses.replace(block, content=grown_or_cut(block.content, rng)[:6_000])
        conv = dataclasses.replace(conv, **{name: new})
        res = assemble(conv, s, tok, opts, cache=cache)
        assert_same(res, assemble(conv, s, tok, opts))
        assert (cache.converted, cache.rebuilt) == (0, False)
        dropped.add(res.dropped)
    assert len(dropped) > 1


def test_kind_changes_patch_the_users_and_images(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message whose kind changes in place (a role typed), with images or without, and
    one that also takes another's id or a new one: the shape's user and image positions,
    whether the ids are unique and the tokens by id, patched at the changed positions,
    equal those made from nothing."""
    image = [{"type": "image_url", "image_url": {"url": "img"}}]
    messages: list[dict[str, Any]] = []
    for i in range(8):
        content: Any = f"question {i}"
        if i % 3 != 1:
            content = [{"type": "text", "text": content}, *image * (1 + i % 2)]
        messages.append({"id": f"u{i}", "role": "user", "content": content, "token_count": 9})
        messages.append({"id": f"a{i}", "role": "assistant", "content": f"answer {i}"})
    doc = {
        "settings": {"max_input_tokens": 2000, "provider": "azure", "image_cap": 3},
        "messages": messages,
    }
    path = tmp_path / "images.conv.json"
    path.write_text(json.dumps(doc))
    conv, s, tok, opts = inputs_of(path, monkeypatch)
    cache = AssemblyCache()
    assemble(conv, s, tok, opts, cache=cache)
    rng = random.Random(7)
    for step in range(40):
        msgs = list(conv.message_data)
        k = rng.randrange(len(msgs) - 1)  # (the last user message stays where it is)
        role = Role.ASSISTANT if msgs[k].role is Role.USER else Role.USER
        msgs[k] = dataclasses.replace(msgs[k], role=role)
        if step % 7 == 6:  # a new id as well (the ids unique until step 30)
            msgs[k] = dataclasses.replace(msgs[k], id=f"{msgs[k].id}-{step}")
        elif step >= 30 and step % 5 == 4:  # the id of another message as well
            msgs[k] = dataclasses.replace(msgs[k], id=msgs[rng.randrange(len(msgs))].id)
        conv = dataclasses.replace(conv, message_data=tuple(msgs))
        fresh_cache = AssemblyCache()
        assert_same(
            assemble(conv, s, tok, opts, cache=cache),
            assemble(conv, s, tok, opts, cache=fresh_cache),
        )
        assert_same_history(cache, fresh_cache)


@pytest.mark.parametrize("budget", [8_000, 1_000_000])
def test_a_message_whose_files_change_patches_stage_one(
    generated: Path, budget: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message that loses its uploaded files, or gets one, or whose file is renamed (a
    deletion from its text into a file's, a paste): when the message is kept after the
    summary, stage 1 is patched, not made again (it reads nothing else of the files);
    when the summary covers it, its files are in the summary's metadata and stage 1 is
    made again. Either way the assembly equals one made from nothing."""
    from assembly.assemble import _Pipeline

    conv, s, tok, opts = inputs_of(generated, monkeypatch)
    s = dataclasses.replace(s, max_input_tokens=budget)
    made: list[int] = []
    whole = _Pipeline._structure_of

    def counted(self: Any) -> Any:
        made.append(1)
        return whole(self)

    monkeypatch.setattr(_Pipeline, "_structure_of", counted)
    cache = AssemblyCache()
    assemble(conv, s, tok, opts, cache=cache)
    ids = [m.id for m in conv.message_data]
    cut = ids.index("m79")  # (the summary summarizes through it)
    with_files = [k for k, m in enumerate(conv.message_data) if m.files]
    kept, covered = [k for k in with_files if k > cut], [k for k in with_files if k <= cut]
    assert kept and covered
    rng = random.Random(budget)
    for step in range(16):
        k = rng.choice(kept if step % 4 else covered)
        msgs = list(conv.message_data)
        m = msgs[k]
        if m.files and step % 3 == 0:
            files: tuple[FileAttachment, ...] = ()
        elif m.files and step % 3 == 1:
            files = (dataclasses.replace(m.files[0], filename=f"renamed-{step}.md"),)
        else:
            extra = FileAttachment(f"fid-{step}", f"new-{step}.txt", "new text", m.range)
            files = (*m.files, extra)
        msgs[k] = dataclasses.replace(m, files=files)
        conv = dataclasses.replace(conv, message_data=tuple(msgs))
        made.clear()
        fresh = AssemblyCache()
        assert_same(
            assemble(conv, s, tok, opts, cache=cache), assemble(conv, s, tok, opts, cache=fresh)
        )
        assert_same_history(cache, fresh)
        assert len(made) == 1 + (step % 4 == 0), step  # (the fresh one, and a covered one's)
