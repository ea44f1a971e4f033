"""Property tests of the assembly pipeline's invariants (SPEC §4 steps 5–7, §7).

Random conversations are generated as plain Python dicts (user, assistant and tool messages;
tool calls with matching, mismatched and missing responses; uploaded ``files``; injected
file messages; a summary node; the optional prompts, project files and tools; ``token_count``
overrides), written as JSON (or, for some properties, YAML/JSONL), parsed and assembled with
the real offline cl100k tokenizer under a random budget. ``run_case`` is the only code that
calls the API; each property checks one invariant of its result.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass
from functools import cache
from typing import Any

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from assembly.assemble import SEGMENTS, AssembleOptions, Assembly, assemble
from assembly.model import Conversation, DocFormat
from assembly.reading import parse_conversation
from assembly.settings import SettingsLayer, resolve_settings
from tests.support.engine import loaded

TOKENIZER = loaded().tokenizer
TODAY = dt.date(2025, 1, 15)
FATAL = frozenset({"budget-overrun", "last-turn-over-budget", "no-user-message"})
# ``PROMPTLS_PROPERTY_EXAMPLES=2000 pytest …`` hunts deeper than the fast default.
PROPERTY = settings(
    max_examples=int(os.environ.get("PROMPTLS_PROPERTY_EXAMPLES", "80")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

WORDS: tuple[str, ...] = ("the", "report", "budget", "quarter", "revenue", "café", "naïve", "数据")
WORDS += ("🙂", "file", "search", "results", "please", "summarize", "Q3", "2024", "{", "}", "\n")
# Large windows first: hypothesis favours the first elements, and tiny windows only overrun.
WINDOWS = (800, 1500, 3000, 500, 300, 150, 60, 20, 1)
TOOL_NAMES = ("read_file", "internal_search", "web_search", "open_url", "generate_image", "calc")


# ------------------------------------------------------------------------------ strategies


# Each strategy is made once (``cache``): made in the composite on every draw, hypothesis
# validated it again each time, half of these tests' time.
@cache
def _text(max_words: int = 25) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(WORDS), max_size=max_words).map(" ".join)


@cache
def _token_count() -> st.SearchStrategy[int | None]:
    return st.one_of(st.none(), st.none(), st.integers(0, 400))


def _tool_schema(name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }


@st.composite
def conversations(draw: st.DrawFn) -> dict[str, Any]:
    """A random conversation document as a Python dict (the object form)."""
    ids = iter(range(10_000))
    calls = iter(range(10_000))
    file_ids = iter(range(10_000))
    messages: list[dict[str, Any]] = []

    def add(msg: dict[str, Any]) -> None:
        msg = {"id": f"m{next(ids)}", **msg}
        tc = draw(_token_count())
        if tc is not None:
            msg["token_count"] = tc
        messages.append(msg)

    def new_file() -> dict[str, Any]:
        f: dict[str, Any] = {
            "file_id": f"f-{next(file_ids)}",
            "filename": draw(st.sampled_from(["a.txt", "q3.csv", "notes.md", "pic.png"])),
            "content": draw(_text(40)),
        }
        if f["filename"].endswith(".csv") and draw(st.booleans()):
            f["type"] = "tabular"
        if f["filename"].endswith(".png") and draw(st.booleans()):
            f["type"] = "image"
            f["content"] = None
            f["token_count"] = draw(st.integers(0, 100))
        elif draw(st.booleans()):
            f["token_count"] = draw(st.integers(0, 300))
        if f.get("type") != "image" and draw(st.integers(0, 5)) == 0:
            f["processing"] = True
            f["content"] = None
        return f

    if draw(st.booleans()):
        add({"role": "system", "content": draw(_text(30))})
    n_turns = draw(st.integers(0, 6))
    for _ in range(n_turns):
        if draw(st.integers(0, 4)) == 0:
            f = new_file()
            add(
                {
                    "role": "user",
                    "file_id": f["file_id"],
                    "filename": f["filename"],
                    "content": f["content"] or "",
                }
            )
        if draw(st.integers(0, 6)) > 0:
            user: dict[str, Any] = {"role": "user", "content": draw(_text())}
            if draw(st.integers(0, 3)) == 0:
                user["files"] = [new_file() for _ in range(draw(st.integers(1, 2)))]
            if draw(st.integers(0, 3)) == 0:
                image = {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}}
                if draw(st.booleans()):
                    image["token_count"] = draw(st.integers(0, 100))
                n_images = draw(st.integers(1, 3))
                user["content"] = [{"type": "text", "text": user["content"]}] + [image] * n_images
            add(user)
        for _ in range(draw(st.integers(0, 2))):
            kind = draw(st.sampled_from(["text", "calls", "calls", "orphan"]))
            if kind == "text":
                add({"role": "assistant", "content": draw(_text())})
            elif kind == "orphan":
                add({"role": "tool", "tool_call_id": f"call-x{next(calls)}", "content": "stale"})
            else:
                made = []
                for _ in range(draw(st.integers(1, 2))):
                    call_id = f"call-{next(calls)}"
                    name = draw(st.sampled_from(TOOL_NAMES))
                    args = {"file_id": "f-0"} if name == "read_file" else {"q": draw(_text(4))}
                    made.append(
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)},
                        }
                    )
                add({"role": "assistant", "content": draw(_text(8)), "tool_calls": made})
                for call in made:
                    answer = draw(st.sampled_from(["match", "match", "match", "other", "none"]))
                    if answer == "none":
                        continue
                    tcid = call["id"] if answer == "match" else f"call-y{next(calls)}"
                    add({"role": "tool", "tool_call_id": tcid, "content": draw(_text(30))})
    if messages and draw(st.integers(0, 3)) == 0:
        # A summary node: everything up to a message is replaced by it.
        through = draw(st.integers(0, len(messages) - 1))
        at = draw(st.integers(through + 1, len(messages)))
        summary = {
            "id": "sum",
            "role": "summary",
            "summarizes_through": messages[through]["id"],
            "content": draw(_text(30)),
        }
        messages.insert(at, summary)

    tools = draw(st.lists(st.sampled_from(TOOL_NAMES), unique=True, max_size=4))
    doc: dict[str, Any] = {
        "settings": {
            # Log-spread windows (``st.integers`` alone favours tiny values).
            "max_input_tokens": draw(st.sampled_from(WINDOWS)) + draw(st.integers(0, 60)),
            "safety_margin": draw(
                st.one_of(
                    st.sampled_from([0, 0.05, 0.1, 0.3]),
                    st.sampled_from([0.05, 0.99]),
                    st.floats(0, 0.5, allow_nan=False),
                )
            ),
            "keep_past_tool_results": draw(st.booleans()),
            "provider": draw(st.sampled_from(["openai", "ollama", "azure"])),
            "last_cycle": draw(st.integers(0, 5)) == 0,
        },
        "messages": messages,
    }
    if draw(st.integers(0, 2)) == 0:
        doc["settings"]["image_cap"] = draw(st.sampled_from([1, 2, True]))
    if draw(st.integers(0, 3)) == 0:
        doc["settings"]["last_n_user_messages"] = draw(st.integers(1, 3))
    if draw(st.integers(0, 3)) == 0:
        doc["settings"]["prompt_cache_chat_history"] = True
        doc["settings"]["prompt_cache_marker"] = draw(st.sampled_from(["none", "anthropic"]))
    if draw(st.integers(0, 4)) == 0:
        doc["additional_context"] = _block(draw(_text(20)), draw(_token_count()))
    if draw(st.integers(0, 4)) == 0:
        doc["settings"]["vision"] = False
    if tools:
        doc["tools"] = [_tool_schema(n) for n in tools]
    if draw(st.booleans()):
        doc["system_prompt"] = _block(draw(_text(40)), draw(_token_count()))
    if draw(st.integers(0, 2)) == 0:
        doc["custom_agent_prompt"] = _block(draw(_text(20)), draw(_token_count()))
    if draw(st.integers(0, 2)) == 0:
        doc["reminder"] = _block(draw(_text(10)), draw(_token_count()))
    if draw(st.integers(0, 2)) == 0:
        doc["project_files"] = [
            {
                "file_id": f"p-{k}",
                "filename": f"doc{k}.md",
                "content": draw(_text(40)),
                **({"token_count": tc} if (tc := draw(_token_count())) is not None else {}),
            }
            for k in range(draw(st.integers(1, 3)))
        ]
    return doc


def _block(content: str, token_count: int | None) -> dict[str, Any]:
    return (
        {"content": content}
        if token_count is None
        else {"content": content, "token_count": token_count}
    )


def dump(doc: dict[str, Any], fmt: DocFormat) -> str:
    """Write a document dict in one of the three formats."""
    if fmt is DocFormat.JSON:
        return json.dumps(doc, ensure_ascii=False, indent=1)
    if fmt is DocFormat.YAML:
        return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)
    header = {k: v for k, v in doc.items() if k != "messages"}
    lines = [json.dumps(header, ensure_ascii=False)]
    lines.extend(json.dumps(m, ensure_ascii=False) for m in doc["messages"])
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ helper


@dataclass(frozen=True)
class Case:
    doc: dict[str, Any]
    text: str
    conv: Conversation
    assembly: Assembly

    @property
    def fatal(self) -> list[str]:
        return [e.code for e in self.assembly.errors if e.severity == "error" and e.code in FATAL]


def run_case(doc: dict[str, Any], fmt: DocFormat = DocFormat.JSON) -> Case:
    """Write, parse and assemble ``doc``: the only code here that calls the API."""
    text = dump(doc, fmt)
    conv = parse_conversation(text, fmt)
    assert not [i for i in conv.issues if i.severity == "error"], conv.issues
    layer = SettingsLayer("<document>", conv.settings, conv.settings_ranges)
    effective, problems = resolve_settings([layer])
    assert not problems, problems
    res = assemble(conv, effective, TOKENIZER, AssembleOptions(today=TODAY))
    return Case(doc, text, conv, res)


def expected_last_user(doc: dict[str, Any]) -> str | None:
    """The id of the last user message of the turn, derived from the document alone."""
    chain = list(doc["messages"])
    if "system_prompt" not in doc:
        first_system = next((m for m in chain if m["role"] == "system"), None)
        if first_system is not None:
            chain.remove(first_system)
    summary = next((m for m in chain if m["role"] == "summary"), None)
    if summary is not None:
        at = chain.index(summary)
        before = [m["id"] for m in chain[:at]]
        users_at = [i for i, m in enumerate(chain) if m["role"] == "user"]
        # Applied when its cut is an earlier message before the last user message (a cut at
        # or after it is `summary-covers-this-turn`, ignored).
        if summary["summarizes_through"] in before and (
            not users_at or before.index(summary["summarizes_through"]) < users_at[-1]
        ):
            chain = chain[before.index(summary["summarizes_through"]) + 1 :]
        chain = [m for m in chain if m is not summary]
    users = [m["id"] for m in chain if m["role"] == "user"]
    return users[-1] if users else None


# ------------------------------------------------------------------------------ properties


_IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}}


@PROPERTY
@given(conversations())
# Tool definitions alone exceed the window: an overrun, not a negative budget used silently.
@example(
    {
        "settings": {"max_input_tokens": 800, "safety_margin": 0.99},
        "tools": [_tool_schema("read_file")],
        "messages": [{"role": "user", "content": ""}],
    }
)
# The image-cap note is part of the layout, so it is charged like every other message.
@example(
    {
        "settings": {"max_input_tokens": 12, "safety_margin": 0, "image_cap": 1},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a"}, _IMAGE, _IMAGE]},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": [{"type": "text", "text": "c"}, _IMAGE]},
        ],
    }
)
def test_used_tokens_fit_the_budget(doc: dict[str, Any]) -> None:
    case = run_case(doc)
    b = case.assembly.budget
    assert b.used == sum(e.tokens for e in case.assembly.layout)
    if not case.fatal:
        assert b.used <= b.available_tokens - b.tools, (b, case.assembly.errors)


@PROPERTY
@given(conversations())
def test_no_tool_response_without_an_earlier_call(doc: dict[str, Any]) -> None:
    case = run_case(doc)
    called: set[str] = set()
    for e in case.assembly.layout:
        m = e.message
        if m.kind == "assistant":
            called.update(c.id for c in m.tool_calls)
        if m.kind == "tool":
            assert m.tool_call_id in called, (e.id, m.tool_call_id)
    # The provider messages agree (OpenAI: every tool message answers an earlier call).
    sent: set[str] = set()
    for p in case.assembly.provider_messages:
        sent.update(c["id"] for c in p.get("tool_calls") or ())
        if p["role"] == "tool":
            assert p["tool_call_id"] in sent


@PROPERTY
@given(conversations())
def test_last_user_message_kept_or_one_fatal_error(doc: dict[str, Any]) -> None:
    case = run_case(doc)
    a = case.assembly
    last = expected_last_user(doc)
    if case.fatal:
        assert len(case.fatal) == 1, a.errors
        assert a.layout == ()
        assert a.provider_messages == ()
        if case.fatal == ["no-user-message"]:
            assert last is None and a.history
        if case.fatal == ["last-turn-over-budget"]:
            assert last is not None
        return
    assert [e.id for e in a.layout if e.segment == "last_user"] == ([last] if last else [])
    if last is None:
        assert a.history == ()


@PROPERTY
@given(conversations())
def test_dropped_is_a_contiguous_prefix_of_the_older_history(doc: dict[str, Any]) -> None:
    case = run_case(doc)
    a = case.assembly
    last = expected_last_user(doc)
    if case.fatal or last is None:
        assert a.dropped == ()
        return
    history_ids = [m.id for m in a.history]
    older = history_ids[: history_ids.index(last)]
    n = len(a.dropped)
    assert list(a.dropped) == older[:n]
    # What is not dropped is sent, in order, unless it is an orphaned tool response.
    kept = [e.id for e in a.layout if e.segment == "history"]
    assert kept == [i for i in older[n:] if i not in a.orphans_dropped]


@PROPERTY
@given(conversations())
def test_segments_are_in_order(doc: dict[str, Any]) -> None:
    case = run_case(doc)
    a = case.assembly
    order = [SEGMENTS.index(e.segment) for e in a.layout]
    assert order == sorted(order)
    assert [s.name for s in a.segments] == list(SEGMENTS)
    for s in a.segments:
        assert s.ids == tuple(e.id for e in a.layout if e.segment == s.name)
        assert s.tokens == sum(e.tokens for e in a.layout if e.segment == s.name)
    reminders = [e.id for e in a.layout if e.segment == "reminder"]
    if "$reminder" in reminders:
        assert a.layout[len(a.layout) - len(reminders)].id == "$reminder"


@PROPERTY
@given(conversations(), st.sampled_from(list(DocFormat)))
def test_the_three_formats_assemble_alike(doc: dict[str, Any], fmt: DocFormat) -> None:
    reference = run_case(doc).assembly
    other = run_case(doc, fmt).assembly
    assert [(e.id, e.segment, e.tokens) for e in other.layout] == [
        (e.id, e.segment, e.tokens) for e in reference.layout
    ]
    assert other.provider_messages == reference.provider_messages
    assert other.dropped == reference.dropped
    assert [e.code for e in other.errors] == [e.code for e in reference.errors]


@PROPERTY
@given(
    conversations(),
    st.sampled_from(list(DocFormat)),
    st.integers(0, 10_000),
    st.sampled_from(["", "{", "]", '"', ",", "\n", "- ", ": ", "\ud7ff"]),
)
def test_assembly_never_raises_on_edited_text(
    doc: dict[str, Any], fmt: DocFormat, at: int, insert: str
) -> None:
    # A half-typed or corrupted document: cut it short, or insert a stray token.
    text = dump(doc, fmt)
    at = at % (len(text) + 1)
    for edited in (text[:at], text[:at] + insert + text[at:]):
        conv = parse_conversation(edited, fmt)
        layer = SettingsLayer("<document>", conv.settings, conv.settings_ranges)
        effective, _ = resolve_settings([layer])
        res = assemble(conv, effective, TOKENIZER, AssembleOptions(today=TODAY))
        for issue in conv.issues:
            assert 0 <= issue.range.start <= issue.range.end <= len(edited)
        assert res.budget.used == sum(e.tokens for e in res.layout)


@PROPERTY
@given(conversations())
def test_compression_never_summarizes_this_turn_or_fixed_parts(doc: dict[str, Any]) -> None:
    """The compaction invariants: the plan never summarizes away the last user message,
    this turn's calls and results after it, or the fixed parts (system prompt, custom agent
    prompt, project files, reminder); and what it keeps follows what it summarizes (no
    summarized message after a kept one)."""
    case = run_case(doc)
    a = case.assembly
    c = a.compression
    order = [m.id for m in a.history]
    users = [i for i, m in enumerate(a.history) if m.kind == "user" and "/files/" not in m.id]
    this_turn = set(order[users[-1] :]) if users else set()
    summarized = set(c.summarize)
    assert not summarized & this_turn, (c.summarize, sorted(this_turn))
    assert not [i for i in summarized if i.startswith("$")]
    assert not summarized & set(c.keep)
    positions = [order.index(i) for i in c.summarize]
    kept_positions = [order.index(i) for i in c.keep if i in order]
    if positions and kept_positions:
        assert max(positions) < min(kept_positions)
