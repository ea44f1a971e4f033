"""``AssemblyCache``: an assembly made incrementally equals a fresh one, field by field.

For every conversation of ``tests/data/assembly``, ``examples/`` and a generated one, a
seeded random sequence of steps replaces messages with re-read copies (same id and index:
content, role, tool calls, counts, uploaded files), edits the inline prompts (system
prompt, custom agent prompt, reminder: typed in, emptied, grown, placeholders added) or
changes the settings (budget, model, provider, …); after each step ``assemble`` with the
document's cache must give exactly what it gives without one. Other tests check that edits
inside a message or an inline prompt are answered without the whole pipeline (so the
equality is not only that of the fallback), and that changed inputs are noticed.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import assembly.host
from assembly import texts
from assembly.assemble import AssembleOptions, Assembly, assemble, image_cap_of
from assembly.assemble_cache import AssemblyCache
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
    """Every field equal, dict key orders included."""
    for f in dataclasses.fields(Assembly):
        assert getattr(cached, f.name) == getattr(fresh, f.name), f.name
    assert list(cached.tokens_by_id) == list(fresh.tokens_by_id)
    assert json.dumps(cached.provider_messages) == json.dumps(fresh.provider_messages)
    assert json.dumps(cached.compression.request) == json.dumps(fresh.compression.request)


def check_sequence(
    inputs: Inputs, steps: int, seed: int, *, settings_every: int = 0, prompt_share: float = 0.25
) -> AssemblyCache:
    """Apply random message edits, inline prompt edits (about ``prompt_share`` of the
    steps) and settings changes (every ``settings_every`` steps), comparing the cached and
    the fresh assembly after each."""
    conv, settings, tok, opts = inputs
    rng = random.Random(seed)
    cache = AssemblyCache()
    assert_same(
        assemble(conv, settings, tok, opts, cache=cache), assemble(conv, settings, tok, opts)
    )
    for step in range(steps):
        if settings_every and step % settings_every == settings_every - 1:
            settings = change_settings(settings, rng)
        elif rng.random() < prompt_share:
            conv = edit_prompt(conv, rng)
        elif conv.messages:
            msgs = list(conv.message_data)
            k = rng.randrange(len(msgs))
            msgs[k] = rng.choice(EDITS)(msgs[k], rng)
            conv = dataclasses.replace(conv, message_data=tuple(msgs))
        cached = assemble(conv, settings, tok, opts, cache=cache)
        assert_same(cached, assemble(conv, settings, tok, opts))
    return cache


# ---------------------------------------------------------------------------------------
# Edits: each returns a re-read copy of the message (a new object, same id and index).

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
        return dataclasses.replace(m, tool_call_id=rng.choice([None, "nope", m.tool_call_id]))
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
    return s.model_copy(update={field: rng.choice(values)})


# ---------------------------------------------------------------------------------------
# Tests


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_random_edits_equal_fresh(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check_sequence(inputs_of(path, monkeypatch), steps=30, seed=len(path.name), settings_every=7)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_typing_is_incremental(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Typing in a message (an injected file's text included) is answered without the whole
    pipeline, except after a result with an error (the budget cut gave nothing)."""
    conv, s, tok, opts = inputs_of(path, monkeypatch)
    rng = random.Random(len(path.name))
    cache = AssemblyCache()
    prev = assemble(conv, s, tok, opts, cache=cache)
    whole = _image_note_possible(prev, s)
    for _ in range(12 if conv.messages else 0):
        msgs = list(conv.message_data)
        k = rng.randrange(len(msgs))
        msgs[k] = edit_insert(msgs[k], rng)
        conv = dataclasses.replace(conv, message_data=tuple(msgs))
        fast_runs = cache.fast_runs
        res = assemble(conv, s, tok, opts, cache=cache)
        assert_same(res, assemble(conv, s, tok, opts))
        # The last-N filter and the additional context take the whole pipeline.
        routed = s.last_n_user_messages is not None or conv.additional_context is not None
        expect_fast = not whole and not routed and not prev.errors and not res.errors
        assert (cache.fast_runs > fast_runs) == expect_fast
        prev = res


def _image_note_possible(a: Assembly, s: Settings) -> bool:
    """More images than the cap: the whole pipeline handles the image-limit note."""
    cap = image_cap_of(s)
    n = sum(len(m.images) for m in a.history if m.kind == "user")
    return cap is not None and n > cap


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
    assert cache.fast_runs == 3


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


@pytest.mark.parametrize("seed", range(6))
def test_moving_cut_equals_fresh(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counts changed one message at a time move the budget cut over uploads, injected
    files and orphaned results: what is dropped, forgotten and orphaned follows."""
    rng = random.Random(seed)
    path = tmp_path / "doc.conv.json"
    path.write_text(json.dumps(synthetic(seed, rng.choice([400, 900, 1500, 2500]))))
    conv, s, tok, opts = inputs_of(path, monkeypatch)
    cache = AssemblyCache()
    assemble(conv, s, tok, opts, cache=cache)
    for _ in range(60):
        msgs = list(conv.message_data)
        k = rng.randrange(len(msgs))
        count = rng.choice([0, 1, 5, 40, 150, 400])
        msgs[k] = dataclasses.replace(msgs[k], token_count=count)
        conv = dataclasses.replace(conv, message_data=tuple(msgs))
        assert_same(assemble(conv, s, tok, opts, cache=cache), assemble(conv, s, tok, opts))
    assert cache.fast_runs > 30


def test_moved_project_images(monkeypatch: pytest.MonkeyPatch) -> None:
    """Project images ride on the last user message with their ranges: re-read copies
    that moved are what the result holds."""
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
    assert cache.fast_runs == 3


@pytest.mark.parametrize(
    ("system_id", "first_id"),
    [
        ("s", "$custom_agent"),
        ("s", "$reminder"),
        ("s", "$system"),
        ("s", "$forgotten_files"),
        ("s", "u1/files/0"),
        ("$custom_agent", "u0"),
        ("u1/files/0", "u0"),
    ],
)
def test_ids_shared_with_the_pipeline(
    system_id: str, first_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message id that the pipeline also gives to a message it makes."""
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
        inputs = (conv, s.model_copy(update={"max_input_tokens": budget}), tok, opts)
        check_sequence(inputs, steps=6, seed=len(first_id))


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A conversation of the benchmark corpus: tool calls, uploads, a summary, a reminder."""
    out = tmp_path_factory.mktemp("gen") / "gen.conv.json"
    out.write_bytes(GENERATED.read_bytes())
    return out


@pytest.mark.parametrize("seed", range(4))
def test_generated_random_edits_equal_fresh(
    generated: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    conv, s, tok, opts = inputs_of(generated, monkeypatch)
    # A budget that keeps part of the history (and forgets files), and one that keeps all.
    budget = [8_000, 30_000, 128_000, 1_000_000][seed]
    inputs = (conv, s.model_copy(update={"max_input_tokens": budget}), tok, opts)
    check_sequence(inputs, steps=40, seed=seed, settings_every=13)


@pytest.mark.parametrize("budget", [8_000, 30_000, 1_000_000])
def test_edits_inside_messages_are_incremental(
    generated: Path, budget: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Typing in any message, tool-call arguments and counts never run the whole pipeline."""
    conv, s, tok, opts = inputs_of(generated, monkeypatch)
    s = s.model_copy(update={"max_input_tokens": budget})
    rng = random.Random(budget)
    cache = AssemblyCache()
    assemble(conv, s, tok, opts, cache=cache)
    for _ in range(25):
        msgs = list(conv.message_data)
        k = rng.randrange(len(msgs))
        edit = rng.choice([edit_insert, edit_delete, edit_arguments, edit_token_count])
        msgs[k] = edit(msgs[k], rng)
        conv = dataclasses.replace(conv, message_data=tuple(msgs))
        assert_same(assemble(conv, s, tok, opts, cache=cache), assemble(conv, s, tok, opts))
    assert (cache.full_runs, cache.fast_runs) == (1, 25)


def test_changed_inputs_are_noticed(generated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings, the tokenizer, the date and the document's other parts reset the cache."""
    conv, s, tok, opts = inputs_of(generated, monkeypatch)
    cache = AssemblyCache()
    assemble(conv, s, tok, opts, cache=cache)
    variants: list[Inputs] = [
        (conv, s.model_copy(update={"max_input_tokens": 20_000}), tok, opts),
        (conv, s.model_copy(update={"model": "gpt-5"}), tok, opts),
        (conv, s.model_copy(update={"provider": "ollama"}), tok, opts),
        (conv, s, tok, dataclasses.replace(opts, today=opts.today.replace(year=2001))),
        (dataclasses.replace(conv, tools=()), s, tok, opts),
        (dataclasses.replace(conv, system_prompt=TextBlock("Be.", TextRange(0, 3))), s, tok, opts),
        (dataclasses.replace(conv, user_info={"name": "Ada"}), s, tok, opts),
        (dataclasses.replace(conv, project_files=conv.project_files[:1]), s, tok, opts),
        (conv, s, CachedTokenizer(tok.counter, tok.encoding), opts),  # type: ignore[attr-defined]
    ]
    for c, s2, t, o in variants:
        for args in ((c, s2, t, o), (conv, s, tok, opts)):  # the change, then back
            full_runs = cache.full_runs
            assert_same(assemble(*args, cache=cache), assemble(*args))
            assert cache.full_runs == full_runs + 1


@pytest.mark.parametrize("name", ["support-agent.conv.json", "support-agent.conv.jsonl", "gen"])
def test_analyze_with_previous_assembles_incrementally(
    name: str, generated: Path, tmp_path: Path
) -> None:
    """Typing in the editor: ``analyze`` re-reads one message and reuses the cache it kept
    in the previous analysis; the assembly is the one a fresh analysis gives."""
    source = generated if name == "gen" else ROOT / "examples" / name
    path = tmp_path / source.name
    text = source.read_text()
    path.write_text(text)
    (tmp_path / ".git").mkdir()
    for extra in ("docs", "prompts"):
        if (source.parent / extra).is_dir():
            shutil.copytree(source.parent / extra, tmp_path / extra)
    rng = random.Random(name)
    host = AnalysisHost()
    prev = engine.analyze(path, text=text, host=host)
    for _ in range(6):
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
        prev = res
    cache = host.assemble_cache
    assert isinstance(cache, AssemblyCache)
    if name == "gen":
        # Until re-reading keeps the messages after an edit, an edit early in a long
        # document changes too many of them for patching.
        assert cache.fast_runs >= 3
    else:
        assert (cache.full_runs, cache.fast_runs) == (1, 6)


@pytest.mark.parametrize("budget", [8_000, 30_000, 1_000_000])
def test_system_and_file_typing_is_incremental(
    generated: Path, budget: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Typing in the system message taken as the system prompt, or in the text of a file
    uploaded with a user message, never runs the whole pipeline."""
    conv, s, tok, opts = inputs_of(generated, monkeypatch)
    s = s.model_copy(update={"max_input_tokens": budget})
    system = next(m.index for m in conv.messages if m.role is Role.SYSTEM)
    uploads = [m.index for m in conv.messages if m.files]
    assert conv.system_prompt is None and uploads
    rng = random.Random(budget)
    cache = AssemblyCache()
    first = assemble(conv, s, tok, opts, cache=cache)
    assert first.layout[0].message.source is conv.message_data[system]
    for step in range(30):
        msgs = list(conv.message_data)
        if step % 3 == 0:
            edit = rng.choice([edit_insert, edit_delete])
            msgs[system] = edit(msgs[system], rng)
        else:
            k = rng.choice(uploads)
            j = rng.randrange(len(msgs[k].files))
            f = msgs[k].files[j]
            text = f.content or ""
            i = rng.randrange(len(text) + 1)
            text = text[:i] + "x" + text[i:] if step % 2 else text[: max(0, i - 1)] + text[i:]
            msgs[k] = dataclasses.replace(
                msgs[k], files=_put(msgs[k].files, j, dataclasses.replace(f, content=text))
            )
        conv = dataclasses.replace(conv, message_data=tuple(msgs))
        res = assemble(conv, s, tok, opts, cache=cache)
        assert_same(res, assemble(conv, s, tok, opts))
        assert res.system_text is not None and msgs[system].content[:20] in res.system_text
    assert (cache.full_runs, cache.fast_runs) == (1, 30)


def thresholds_doc(upload_words: int) -> dict[str, Any]:
    """A system message, turns with uploads (the same file ids again, a tabular file, an
    injected file message) and a last user message whose upload is counted in the reserved
    tokens: at about 9,930 words the project file no longer fits its share of the window
    and is listed instead of loaded (and not cited)."""
    msgs: list[dict[str, Any]] = [
        {"id": "s", "role": "system", "content": "You are the helpful assistant of the team."}
    ]
    for t in range(6):
        upload = {"file_id": f"f{t % 3}", "filename": f"f{t % 3}.txt", "content": "old " * 600}
        user: dict[str, Any] = {"id": f"u{t}", "role": "user", "content": f"q{t}"}
        user["files"] = [upload]
        if t == 2:
            user["files"].append(
                {"file_id": "tab", "filename": "t.csv", "type": "tabular", "content": "a,b\n1,2"}
            )
        msgs.append(user)
        if t == 3:
            msgs.append(
                {"id": "inj", "role": "user", "file_id": "inj", "content": "injected " * 100}
            )
        msgs.append({"id": f"a{t}", "role": "assistant", "content": "answer " * 400})
    upload = {"file_id": "big", "filename": "big.txt", "content": "word " * upload_words}
    msgs.append({"id": "last", "role": "user", "content": "now this", "files": [upload]})
    project = {"file_id": "p1", "filename": "p1.md", "content": "text", "token_count": 6000}
    return {
        "settings": {"max_input_tokens": 20_000, "safety_margin": 0},
        "tools": ["read_file"],
        "project_files": [project],
        "messages": msgs,
    }


def resize_near(text: str, rng: random.Random) -> str:
    """A character typed or deleted, some words added or cut, or emptied."""
    i = rng.randrange(len(text) + 1)
    return rng.choice(
        [
            text[:i] + rng.choice(_CHARS) + text[i:],
            text[: max(0, i - 1)] + text[i:],
            text + "word " * rng.randrange(1, 120),
            text[: max(0, len(text) - 5 * rng.randrange(1, 120))],
            "" if rng.random() < 0.2 else text,
            " \n" if rng.random() < 0.2 else text,
        ]
    )


@pytest.mark.parametrize("seed", range(4))
def test_sizes_across_thresholds(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files growing and shrinking across what their size decides: the project file loaded
    or listed (the last upload is reserved), the history cut, the forgotten-files listing
    with its sizes, an empty file; and the system message growing, shrinking and emptied.
    Each step equals a fresh run and is answered incrementally."""
    rng = random.Random(seed)
    path = tmp_path / "doc.conv.json"
    path.write_text(json.dumps(thresholds_doc(9_900 + 10 * seed)))
    conv, s, tok, opts = inputs_of(path, monkeypatch)
    index = {m.id: m.index for m in conv.messages}
    cache = AssemblyCache()
    assemble(conv, s, tok, opts, cache=cache)
    project_parts, listed, systems = set(), set(), set()
    steps = 80
    for _ in range(steps):
        msgs = list(conv.message_data)
        k = index[rng.choice(["s", "inj", "last", "last", "last", "u0", "u2", "u3", "u4"])]
        m = msgs[k]
        if m.files:
            j = rng.randrange(len(m.files))
            f = m.files[j]
            if m.id == "last" and rng.random() < 0.3:
                text = "word " * rng.randrange(9_700, 10_200)  # about the threshold
            else:
                text = resize_near(f.content or "", rng)
            msgs[k] = dataclasses.replace(
                m, files=_put(m.files, j, dataclasses.replace(f, content=text))
            )
        else:
            text = resize_near(m.content, rng)
            if m.id == "s" and rng.random() < 0.4:
                text = rng.choice(["", " ", "Be brief. " * rng.randrange(1, 200)])
            msgs[k] = dataclasses.replace(m, content=text)
        conv = dataclasses.replace(conv, message_data=tuple(msgs))
        res = assemble(conv, s, tok, opts, cache=cache)
        assert_same(res, assemble(conv, s, tok, opts))
        assert res.ok
        project_parts.add(tuple(i for i in res.segments[3].ids))
        listed.add(res.forgotten_files)
        systems.add(res.system_text is not None)
    assert (cache.full_runs, cache.fast_runs) == (1, steps)
    assert project_parts == {("$project_files",), ("$project_file_list",)}
    assert len(listed) > 3 and systems == {True, False}


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


@pytest.mark.parametrize("inline_system", [False, True])
@pytest.mark.parametrize("budget", [8_000, 30_000, 1_000_000])
def test_inline_prompt_typing_is_incremental(
    generated: Path, budget: int, inline_system: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Typing in the custom agent prompt, the reminder and a system prompt given inline,
    emptying them and growing them so that the history cut moves, never runs the whole
    pipeline; each result equals a fresh run."""
    conv, s, tok, opts = inputs_of(generated, monkeypatch)
    assert conv.custom_agent_prompt is not None and conv.reminder is not None
    s = s.model_copy(update={"max_input_tokens": budget})
    names = ["custom_agent_prompt", "reminder"]
    if inline_system:
        system = next(m for m in conv.messages if m.role is Role.SYSTEM)
        conv = dataclasses.replace(conv, system_prompt=TextBlock(system.content, system.range))
        names.append("system_prompt")
    rng = random.Random(budget + inline_system)
    cache = AssemblyCache()
    assemble(conv, s, tok, opts, cache=cache)
    dropped, prompts, reminders = set(), set(), set()
    steps = 36
    for step in range(steps):
        name = names[step % len(names)]
        block = getattr(conv, name)
        content = grown_or_cut(block.content, rng)[:12_000]
        conv = dataclasses.replace(conv, **{name: dataclasses.replace(block, content=content)})
        res = assemble(conv, s, tok, opts, cache=cache)
        assert_same(res, assemble(conv, s, tok, opts))
        assert res.ok
        dropped.add(len(res.dropped))
        prompts.add(tuple(e.message.text for e in res.layout if e.segment != "history"))
        reminders.add(res.segments[-1].tokens)
    assert (cache.full_runs, cache.fast_runs) == (1, steps)
    assert len(prompts) > 3 and len(reminders) > 3
    if budget < 1_000_000:
        assert len(dropped) > 1  # the cut moved


@pytest.mark.parametrize("seed", range(4))
def test_inline_prompts_across_thresholds(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inline prompts growing and shrinking across what their size decides: the reserved
    tokens (the project file loaded, or listed and not cited), the history cut and the
    forgotten-files listing; the base prompt emptied (the custom agent prompt becomes the
    system prompt) and given again; token counts stated. Each step equals a fresh run and
    is answered incrementally."""
    rng = random.Random(seed)
    doc = thresholds_doc(9_600 + 10 * seed)
    doc["messages"] = doc["messages"][1:]  # the system prompt is given inline instead
    for m in doc["messages"]:
        if m["role"] == "assistant":
            m["content"] = "answer " * 120  # a finer cut
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
    project_parts, listed, dropped, agents = set(), set(), set(), set()
    steps = 80
    for _ in range(steps):
        name = rng.choice(INLINE_PROMPTS)
        block = getattr(conv, name)
        if rng.random() < 0.1:
            new = dataclasses.replace(block, token_count=rng.choice([None, None, 50, 400]))
        else:
            new = dataclasses.replace(block, content=grown_or_cut(block.content, rng)[:6_000])
        conv = dataclasses.replace(conv, **{name: new})
        res = assemble(conv, s, tok, opts, cache=cache)
        assert_same(res, assemble(conv, s, tok, opts))
        assert res.ok
        project_parts.add(tuple(res.segments[3].ids))
        listed.add(res.forgotten_files)
        dropped.add(res.dropped)
        agents.add(res.segments[2].ids)
    assert (cache.full_runs, cache.fast_runs) == (1, steps)
    assert project_parts == {("$project_files",), ("$project_file_list",)}
    assert len(listed) > 1 and len(dropped) > 1
    # The custom agent prompt a user message, or the system prompt (the base one blank).
    assert agents == ({()} if seed % 2 else {(), ("$custom_agent",)})
