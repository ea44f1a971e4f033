"""Hover: what the model receives, told at the place the cursor is.

In a conversation, from the most specific target to the least: a ``{{PLACEHOLDER}}`` (its
expansion), a file id (which file, where it was injected, whether the model still sees or
can read it), a tool call id (its response) or a response's ``tool_call_id`` (its call), a
message (segment, tokens, kept or dropped and why, cumulative position, cache prefix), and
anywhere else the document head: the per-segment token table and the budget line.

In a ``*.prompt.md`` on its own: a placeholder, a section heading (its tokens and share
of the prompt; for ``## <tool>`` guidance, which tools the front matter offers), or an
instruction that ``instruction-far-from-section`` matched to a section (which one, why,
the scores, and whether it is reported).

Results are Markdown; ``plain_text`` turns them into readable plain text for clients that
cannot render Markdown. Offsets are code points; nothing here knows about LSP.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from assembly import cache, texts
from assembly.assemble import CITEABLE_TOOLS, FILE_READER_TOOLS, SEGMENTS, Assembly
from assembly.diagnostics.rules.instructions import (
    KINDS,
    InstructionMatch,
    explain_instruction,
    setting_tool_names,
)
from assembly.documents import read_tools
from assembly.formats.detect import SourceFormat
from assembly.ide.placement import (
    ConversationDoc,
    Placement,
    Placements,
    error_of,
    first_lines,
    fmt_tokens,
    ids,
    percent,
    placements,
    short_error,
)
from assembly.model import Conversation, Message, PromptTemplate, Role, Section
from assembly.pairs import conversation_pairs
from assembly.rope import Text
from assembly.settings import Settings
from assembly.sysprompt import (
    KNOWN_PLACEHOLDERS,
    USER_PLACEHOLDER_KEYS,
    format_datetime,
    guidance_sections,
)
from assembly.text import TextRange, plural
from assembly.tokens import Tokenizer, resolve_encoding

Where = Literal["system", "custom_agent", "reminder", "message", "template"]

_PLACEHOLDER = re.compile(r"\{\{[ \t]*([A-Za-z_][A-Za-z0-9_.]*)[ \t]*\}\}")
_ID_CHARS = re.compile(r"[A-Za-z0-9_.\-]+")
_RESPONSE_LINES = 6
_ARGUMENT_LINES = 12


@dataclass(frozen=True, slots=True)
class HoverResult:
    """Markdown to show for ``range`` (the thing under the cursor)."""

    range: TextRange
    markdown: str


class PromptDoc(Protocol):
    """An analysed ``*.prompt.md`` (``server.workspace.PromptAnalysis`` has these fields)."""

    @property
    def text(self) -> str: ...
    @property
    def template(self) -> PromptTemplate: ...
    @property
    def settings(self) -> Settings: ...


def conversation_hover(doc: ConversationDoc, offset: int, *, today: dt.date) -> HoverResult:
    """Return the hover at ``offset`` of an analysed conversation.

    ``today`` is the date ``{{CURRENT_DATETIME}}`` expands to (the caller's clock).
    """
    conv, text = doc.conversation, doc.text
    pl = placements(conv, doc.assembly)
    res = _conversation_placeholder(doc, pl, offset, today)
    if res is not None:
        return res
    res = _file_hover(doc, pl, offset)
    if res is not None:
        return res
    ca = conv.custom_agent_prompt
    if ca is not None and ca.range.contains(offset):
        return HoverResult(ca.range, _custom_agent_markdown(doc))
    m = conv.message_at(offset)
    if m is not None:
        res = _tool_call_hover(pl, m, offset)
        if res is not None:
            return res
        return HoverResult(m.range, _message_markdown(doc, pl, pl.of(m)))
    return HoverResult(_line_at(text, offset), head_markdown(doc, pl))


def prompt_hover(
    doc: PromptDoc, offset: int, *, tokenizer: Tokenizer, today: dt.date
) -> HoverResult | None:
    """Return the hover at ``offset`` of a prompt template checked on its own, or None."""
    t = doc.template
    for p in t.placeholders:
        if p.range.contains(offset):
            return HoverResult(p.range, _placeholder_markdown(p.name, "template", _Fill(today)))
    for i, s in enumerate(t.sections):
        if s.heading_range.contains(offset):
            return HoverResult(s.heading_range, _section_markdown(doc, i, tokenizer))
    tools = setting_tool_names(doc.settings.tools) | {
        n.lower() for n in front_matter_tools(t) or ()
    }
    match = explain_instruction(
        t, offset, tools, doc.settings.section_topics, doc.settings.instruction_preview
    )
    if match is not None and match.section is not None:
        return HoverResult(match.range, _instruction_markdown(t, match))
    return None


def _instruction_markdown(t: PromptTemplate, m: InstructionMatch) -> str:
    """Which section an instruction was matched to and why, so a finding can be trusted
    or suppressed."""
    assert m.section is not None
    s = t.sections[m.section]
    heading = _escape(s.title)
    lines = [f"**Instruction** · about **{heading}**", ""]
    evidence = []
    if m.tool:
        described = ", which that section describes" if m.tool_home else ""
        evidence.append(f"names the tool `{m.tool}`{described}")
    if m.general:
        evidence.append("directs the use of tools in general (what the tools section is about)")
    if m.heading_words:
        words = [w for w in m.heading_words if w.lower() != (m.tool or "")]
        if words:
            evidence.append("shares the heading words " + ", ".join(f"“{w}”" for w in words))
    if m.topic_words:
        evidence.append(
            "uses the section's topic words (`section_topics`) "
            + ", ".join(f"“{w}”" for w in m.topic_words)
        )
    if evidence:
        lines.append(f"- matched because it {' and '.join(evidence)}")
    # Which kind of finding it is, and whether it is reported by default where it sits.
    on = "on by default" if m.default else "preview: `instruction_preview = true`"
    lines.append(f"- kind: `{m.kind}` ({KINDS[m.kind]}; {on})")
    if m.reported or m.rival is not None:  # the scores the decision weighed
        rival = f" (“{_escape(t.sections[m.rival].title)}”)" if m.rival is not None else ""
        lines.append(
            f"- scores: that section {m.score:.1f}, the section it sits in {m.own:.1f}, "
            f"the best unrelated section {m.runner_up:.1f}{rival}"
        )
    if m.reported:
        lines.append(f"- reported by `instruction-far-from-section`: {m.reason}")
        lines.append(
            "- to keep it where it is, put "
            "`<!-- promptls: ignore[instruction-far-from-section] -->` on the line before it"
        )
    else:
        lines.append(f"- not reported: {m.reason}")
    return "\n".join(lines)


def head_markdown(doc: ConversationDoc, pl: Placements | None = None) -> str:
    """The document head: the per-segment token table and the budget line."""
    a = doc.assembly
    pl = pl or placements(doc.conversation, a)
    b = a.budget
    totals = pl.totals()
    approx = resolve_encoding(a.settings.encoding, a.settings.model)
    out = [
        f"**promptls** · `{a.settings.model}` · {'≈ ' if approx.approximate else ''}"
        f"{fmt_tokens(totals.used)} / "
        f"{fmt_tokens(totals.available)} tokens ({percent(totals.used, totals.available)})",
        "",
        _format_line(doc.conversation),
        "",
    ]
    if totals.error is not None:
        out += [f"**Cannot be assembled** — {_escape(short_error(totals.error, limit=200))}", ""]
    out += [
        "| segment | messages | tokens | share of budget |",
        "|:--|--:|--:|--:|",
    ]
    by_name = {s.name: s for s in a.segments}
    n_msgs = 0
    for name in SEGMENTS:
        seg = by_name.get(name)
        n, tokens = (len(seg.ids), seg.tokens) if seg else (0, 0)
        n_msgs += n
        out.append(
            f"| {name} | {n:,} | {fmt_tokens(tokens)} | {percent(tokens, b.available_tokens)} |"
        )
    out.append(
        f"| **all messages** | **{n_msgs:,}** | **{fmt_tokens(b.used)}** | "
        f"**{percent(b.used, b.available_tokens)}** |"
    )
    n_tools = len(doc.conversation.tools or ())
    tools = (
        f"tool definitions {fmt_tokens(b.tools)} ({plural(n_tools, 'tool')}) + "
        if b.tools
        else "no tool definitions; "
    )
    out += [
        "",
        f"**Budget** {fmt_tokens(b.available_tokens)} tokens = max_input_tokens "
        f"{fmt_tokens(b.max_input_tokens)} × (1 − safety margin {b.safety_margin:g}); "
        f"{tools}messages {fmt_tokens(b.used)} = **{fmt_tokens(totals.used)}** used, "
        f"{fmt_tokens(max(0, b.available_tokens - totals.used))} free.",
    ]
    out.append("")
    out.append(
        f"Fixed parts: system {fmt_tokens(b.system)} · custom agent {fmt_tokens(b.custom_agent)}"
        f" · project files {fmt_tokens(b.project_files)} · reminder {fmt_tokens(b.reminder)}"
        f" → history budget {fmt_tokens(b.history_budget)}."
    )
    out.extend(_head_notes(doc, pl))
    out += ["", _encoding_line(a.encoding, doc.encoding_requested, doc.encoding_warning)]
    if approx.approximate and approx.note:
        out[-1] += f" **Approximate counts**: {_escape(approx.note)}."
    return "\n".join(out)


def _format_line(conv: Conversation) -> str:
    """The format the document was read as, and why: a wrong guess is seen at once."""
    fmt = SourceFormat(conv.source_format)
    why = _escape(conv.source_format_why)
    return f"Read as **{fmt.title}** (`{fmt.value}`), by its shape: {why}."


def plain_text(markdown: str) -> str:
    """Turn the Markdown of these hovers into readable plain text.

    Tables become aligned columns, code fences their content, and emphasis, inline code
    markers and escapes go.
    """
    out: list[str] = []
    table: list[list[str]] = []
    in_fence = False
    for line in markdown.split("\n"):
        if line.startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            out.append("    " + line)
            continue
        if line.startswith("|"):
            cells = [_inline_plain(c.strip()) for c in _split_row(line)]
            if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                table.append(cells)
            continue
        if table:
            out.extend(_columns(table))
            table = []
        out.append(_inline_plain(line))
    if table:
        out.extend(_columns(table))
    return "\n".join(out).strip("\n")


# ------------------------------------------------------------------------------ head


def _head_notes(doc: ConversationDoc, pl: Placements) -> Iterator[str]:
    a = doc.assembly
    notes: list[str] = []
    if a.dropped:
        notes.append(
            f"Dropped by the budget cut: {plural(len(a.dropped), 'message')} "
            f"({ids(a.dropped)}, {fmt_tokens(pl.dropped_tokens)}"
            " tokens)."
        )
    if a.orphans_dropped:
        notes.append(f"Dropped as orphaned tool responses: {ids(a.orphans_dropped)}.")
    if a.summary_id is not None:
        summary = pl.summary()
        through = summary.summarizes_through if summary is not None else None
        notes.append(f"Summary `{a.summary_id}` replaces the messages through `{through}`.")
    if a.forgotten_files:
        names = ", ".join(f"`{f.filename}`" for f in a.forgotten_files)
        notes.append(f"Files forgotten (listed for read_file): {len(a.forgotten_files)} — {names}.")
    if a.cache_prefix_length:
        cached = sum(e.tokens for e in a.layout[: a.cache_prefix_length])
        first = _first(a.cache_prefix_length)
        b = cache.boundary(a)
        note = f"Cacheable prefix: {first} ({fmt_tokens(cached)} tokens)."
        if b.first_id is not None:
            note += f" It ends before `{b.first_id}`: {b.reason}."
        notes.append(" ".join([note, *b.caveats]))
    c = a.compression
    if error_of(a) is not None:
        pass  # the plan's figures mean nothing for a context that cannot be assembled
    elif c.triggered:
        notes.append(
            f"Compression due: history {fmt_tokens(c.history_tokens)} > trigger "
            f"{fmt_tokens(c.threshold)}; would summarize {plural(len(c.summarize), 'message')}."
        )
    else:
        notes.append(
            f"Compression not due: history {fmt_tokens(c.history_tokens)} ≤ trigger "
            f"{fmt_tokens(c.threshold)}."
        )
    if notes:
        yield ""
        yield from (f"- {n}" for n in notes)


def _encoding_line(used: str, requested: str, warning: str | None) -> str:
    if requested == used:
        return f"Encoding: `{used}`."
    if warning:
        return f"Encoding: `{used}` — **fell back**: {_escape(warning)}."
    return f"Encoding: `{used}` — **fell back** from `{requested}`."


# ------------------------------------------------------------------------------ messages


def _custom_agent_markdown(doc: ConversationDoc) -> str:
    """Where the custom agent prompt goes: Onyx's three branches (llm_loop.py:915-991)."""
    a = doc.assembly
    title = "**custom agent prompt**"
    ca = next((e for e in a.layout if e.id == "$custom_agent"), None)
    system = next((e for e in a.layout if e.segment == "system"), None)
    if doc.settings.replace_system_prompt:
        where = (
            "sent as **the system prompt** (`replace_system_prompt`: it replaces the base "
            "prompt, with the date appended when datetime-aware)"
        )
    elif ca is not None:
        where = (
            "sent as **a user message** (`$custom_agent`) after the earlier history, right "
            "before the project files and the last user message"
        )
    elif system is not None and system.id == "$system":
        where = (
            "sent as **the system prompt**: the document has no system prompt, and with an "
            "empty base prompt Onyx makes the custom agent prompt the system message (the date "
            "appended when datetime-aware) and sends no custom-agent user message, even "
            "without `replace_system_prompt`"
        )
    else:
        where = "not sent (it is empty, or the conversation cannot be assembled)"
    bullets = [where]
    tokens = ca.tokens if ca is not None else (system.tokens if system is not None else None)
    if tokens is not None and (ca is not None or system is not None):
        bullets.append(f"tokens: {fmt_tokens(tokens)}")
    return "\n".join([title, "", *(f"- {b}" for b in bullets)])


def _message_markdown(doc: ConversationDoc, pl: Placements, p: Placement) -> str:
    m = p.message
    a = doc.assembly
    title = f"**message `{m.id}`** · {m.role.value} · {_status_words(pl, p)}"
    bullets: list[str] = []
    if p.tokens is not None:
        line = f"tokens: {fmt_tokens(p.tokens)}"
        if p.replaced:
            line += " (as the placeholder sentence that replaces an earlier turn's result)"
        bullets.append(line)
    else:
        bullets.append("tokens: not counted (not part of the assembled history)")
    for f in p.files:
        state = f"sent in `{f.segment}`" if f.kept else "not sent"
        bullets.append(
            f"uploaded file `{f.id}`: {fmt_tokens(f.tokens)} tokens, injected right before "
            f"this message, {state}"
        )
    bullets.extend(_why(doc, pl, p))
    if p.sent:
        assert p.index is not None and p.cumulative is not None
        total = pl.totals()
        bullets.append(
            f"position: message {p.index + 1:,} of {len(a.layout):,}; "
            f"{fmt_tokens(p.cumulative)} / {fmt_tokens(total.available)} tokens sent up to and "
            f"including it ({percent(p.cumulative, total.available)}, tool definitions first)"
        )
        prefix = a.cache_prefix_length
        if prefix and p.index in (prefix - 1, prefix):
            # The cache boundary: what is cached, and why the prefix ends here.
            bullets.append(f"cache boundary: {cache.boundary(a).markdown()}")
        elif p.cached:
            bullets.append(f"cache: in the cacheable prefix ({_first(prefix)})")
        else:
            if prefix:
                bullets.append(f"cache: after the cacheable prefix ({plural(prefix, 'message')})")
            elif not a.settings.prompt_cache_chat_history:
                bullets.append(
                    "cache: no cacheable prefix (`prompt_cache_chat_history` is off, as by "
                    "default in Onyx)"
                )
            else:
                bullets.append("cache: no cacheable prefix")
    return "\n".join([title, "", *(f"- {b}" for b in bullets)])


def _status_words(pl: Placements, p: Placement) -> str:
    if p.status == "kept":
        return f"**kept** in `{p.segment}`"
    if p.status == "dropped":
        return "**dropped**: budget cut"
    if p.status == "orphan":
        return "**dropped**: orphaned tool response"
    if p.status == "summarized":
        return f"**summarized** by `{pl.assembly.summary_id}`"
    if p.status == "summary_unused":
        return "**not applied** (summary)"
    if p.status == "other_branch":
        return "**not sent**: other branch"
    return "**not assembled**"


def _why(doc: ConversationDoc, pl: Placements, p: Placement) -> Iterator[str]:
    m, a = p.message, doc.assembly
    if p.status == "kept":
        if p.segment == "system":
            yield (
                "why: it is the system prompt (placeholders filled, tool guidance only for the "
                "tools offered this turn)"
            )
        elif p.segment in ("last_user", "this_turn"):
            yield (
                "why: the last user message and everything after it are always sent (they "
                "must fit, or the turn cannot be assembled)"
            )
        else:
            yield (
                f"why: it fits the history budget of {fmt_tokens(a.budget.history_budget)} "
                "tokens, filled newest-first"
            )
        if p.replaced:
            yield (
                "an earlier turn's tool result: sent as the placeholder sentence "
                "(`keep_past_tool_results` is off)"
            )
        if m.role is Role.SUMMARY:
            yield f"it stands for the branch through `{m.summarizes_through}`"
    elif p.status == "dropped":
        cut = pl.cut_at()
        if cut == m.id:
            yield (
                "why: history is filled newest-first (history budget "
                f"{fmt_tokens(a.budget.history_budget)} tokens) and stops at the first message "
                "that does not fit: this one, so it and everything older are left out"
            )
        else:
            yield (
                f"why: history is filled newest-first and stopped at `{cut}`, which did not "
                "fit; everything older is left out"
            )
        forgotten = {f.file_id for f in a.forgotten_files}
        for f in m.files:
            if f.file_id in forgotten:
                yield f"its upload `{f.filename}` moves to the forgotten-files listing"
    elif p.status == "orphan":
        yield _orphan_reason(pl, m)
    elif p.status == "summarized":
        summary = pl.summary()
        through = summary.summarizes_through if summary is not None else "?"
        yield f"why: summary `{a.summary_id}` summarizes the branch through `{through}`"
    elif p.status == "summary_unused":
        if a.summary_id is not None:
            yield f"why: the newer summary `{a.summary_id}` applies"
        else:
            yield (
                f"why: it summarizes through `{m.summarizes_through}`, which is not an "
                "earlier message of this branch"
            )
    elif p.status == "other_branch":
        tip = f"`{pl.tip()}`" + (" (`branch_tip`)" if doc.settings.branch_tip else "")
        yield f"why: the current branch ends at {tip} and does not pass through it"
    else:
        err = error_of(a)
        if err is not None:
            why = _escape(short_error(err, limit=200))
            yield f"why: the conversation cannot be assembled — {why}"


def _orphan_reason(pl: Placements, m: Message) -> str:
    call_id = m.tool_call_id
    if not call_id:
        return "why: it has no `tool_call_id`, so it answers no call"
    conv = pl.conversation
    ref = conversation_pairs(conv).call_of.get(m.id)
    if ref is None:
        rejected = _rejected_call(conv, call_id)
        if rejected is not None:
            return f"why: its call `{call_id}` is malformed and left out ({rejected})"
        return f"why: no earlier message makes the call `{call_id}`"
    caller = conv.locate(ref.owner)
    cp = pl.of(caller)
    if cp.status == "kept":
        return f"why: its call `{call_id}` (in `{caller.id}`) is not sent before it"
    words = {
        "dropped": "was dropped by the budget cut",
        "summarized": "was summarized",
        "other_branch": "is on another branch",
        "orphan": "was dropped",
    }.get(cp.status, "is not sent")
    return f"why: its call `{call_id}` is in `{caller.id}`, which {words}"


# ------------------------------------------------------------------------------ tool calls


def _rejected_call(conv: Conversation, call_id: str) -> str | None:
    for r in conv.rejected_calls:
        if r.id == call_id:
            return r.reason
    return None


def _tool_call_hover(pl: Placements, m: Message, offset: int) -> HoverResult | None:
    for k, c in enumerate(m.tool_calls):
        if c.id_range.contains(offset):
            lines = [f"**tool call `{c.id}`** → `{c.name}` (in `{m.id}`)", ""]
            if c.synthesized_id:
                lines += ["(its id is made up: the document gives it none)", ""]
            conv = pl.conversation
            responses = conversation_pairs(conv).responses(m, k)
            if not responses:
                lines.append("No response: no tool message answers this call.")
            for r in responses:
                rp = pl.of(conv.locate(r))
                tokens = (
                    f"{fmt_tokens(rp.tokens)} tokens" if rp.tokens is not None else "not counted"
                )
                lines.append(f"Answered by `{r.id}` · {tokens} · {_status_words(pl, rp)}")
                if rp.replaced:
                    lines.append("(sent as the placeholder sentence: an earlier turn's result)")
                shown, more = first_lines(r.content, _RESPONSE_LINES)
                lines += ["", *_fence(shown)]
                if more:
                    lines.append(f"… {plural(more, 'more line')}")
            return HoverResult(c.id_range, "\n".join(lines))
    if m.tool_call_id_range is not None and m.tool_call_id_range.contains(offset):
        call_id = m.tool_call_id or ""
        ref = conversation_pairs(pl.conversation).call_of.get(m.id)
        if ref is not None:
            x, c = pl.conversation.locate(ref.owner), ref.call
            args = (
                json.dumps(c.arguments, indent=2, ensure_ascii=False)
                if c.arguments is not None
                else c.arguments_text
            )
            shown, more = first_lines(args, _ARGUMENT_LINES)
            lines = [
                f"**response to `{call_id}`** ← `{c.name}` called in `{x.id}` · "
                f"{_status_words(pl, pl.of(x))}",
                "",
                *_fence(shown, "json" if c.arguments is not None else ""),
            ]
            if more:
                lines.append(f"… {plural(more, 'more line')}")
            return HoverResult(m.tool_call_id_range, "\n".join(lines))
        return HoverResult(
            m.tool_call_id_range,
            f"**response to `{call_id}`**\n\nNo earlier message makes this call.",
        )
    return None


# ------------------------------------------------------------------------------ files


@dataclass(frozen=True, slots=True)
class _FileRef:
    file_id: str
    filename: str
    kind: str
    where: str  # how the document gives it
    carrier: Message | None = None  # the message it was uploaded with (or that is it)
    part: str | None = None  # the id of its injected message


def _file_hover(doc: ConversationDoc, pl: Placements, offset: int) -> HoverResult | None:
    word = _id_at(doc.text, offset)
    if word is None:
        return None
    rng, value = word
    if value not in pl.file_ids:
        return None
    ref = _find_file(doc.conversation, value)
    if ref is None:
        return None
    a = doc.assembly
    lines = [f"**file `{ref.filename}`** · {ref.kind} · `{ref.file_id}`", "", f"- {ref.where}"]
    seen = _seen_inline(a, ref)
    listed = _listed(a, ref.file_id)
    reader = _offers_reader(doc)
    lines.extend(f"- {s}" for s in _file_state(pl, ref, seen))
    if listed:
        lines.append(f"- listed for `read_file` in `{listed}`")
    lines.append("")
    if seen == "content":
        lines.append("The model **sees its content** inline.")
    elif seen == "image":
        lines.append("The model **sees the image** (attached to the last user message).")
    elif listed and reader:
        lines.append("The model **can read it** with `read_file` (its file_id is listed).")
    elif seen == "metadata" and reader:
        lines.append("The model sees its id and name and **can read it** with `read_file`.")
    elif listed or seen == "metadata":
        lines.append(
            "The model is told about it but **cannot read it**: `read_file` is not offered "
            "this turn."
        )
    else:
        lines.append("The model can **neither see nor read** it.")
    return HoverResult(rng, "\n".join(lines))


def _find_file(conv: Conversation, file_id: str) -> _FileRef | None:
    for f in conv.project_files:
        if f.file_id == file_id:
            where = "a project file: it follows the conversation's tail every turn"
            return _FileRef(f.file_id, f.filename, f.kind, where)
    for i, stored in enumerate(conv.message_data):  # (a view is made of the one found)
        for k, f in enumerate(stored.files):
            if f.file_id == file_id:
                m = conv.messages[i]
                where = f"uploaded with `{m.id}`: " + (
                    "its image rides on that message"
                    if f.kind == "image"
                    else f"injected as `{m.id}/files/{k}` right before it"
                )
                part = None if f.kind == "image" else f"{m.id}/files/{k}"
                return _FileRef(f.file_id, f.filename, f.kind, where, m, part)
        if stored.file_id == file_id:
            m = conv.messages[i]
            where = f"the injected file message `{m.id}`"
            return _FileRef(file_id, m.filename or "unknown", "text", where, m, m.id)
    return None


def _file_state(pl: Placements, ref: _FileRef, seen: str | None) -> Iterator[str]:
    if ref.carrier is None:
        listed = _listed(pl.assembly, ref.file_id)
        if seen == "content":
            yield "its content is sent in `$project_files` (segment `project_files`)"
        elif ref.kind == "tabular":
            yield "tabular: only its id and name are listed, never its content"
        elif listed:
            yield "not loaded inline: the project files overflow their share of the budget"
        elif ref.kind != "image":
            yield "not sent: " + (
                "the conversation cannot be assembled"
                if not pl.assembly.layout
                else "its content could not be loaded"
            )
        return
    p = pl.of(ref.carrier)
    if ref.part == ref.carrier.id:
        yield f"that message is {_status_words(pl, p)}"
        return
    part = next((f for f in p.files if f.id == ref.part), None)
    if part is not None and part.kept:
        yield f"`{part.id}` is sent in `{part.segment}`"
    elif part is not None:
        yield f"`{part.id}` is not sent ({_status_words(pl, p)})"
    else:
        yield f"`{ref.carrier.id}` is {_status_words(pl, p)}"


def _seen_inline(a: Assembly, ref: _FileRef) -> str | None:
    """How the model sees the file inline: "content", "metadata", "image" or None."""
    if ref.carrier is None:
        if ref.kind == "image":
            return "image" if a.layout and a.settings.vision else None
        if ref.kind == "tabular":
            return None
        project = next((e for e in a.layout if e.id == "$project_files"), None)
        return "content" if project is not None and not _listed(a, ref.file_id) else None
    if ref.kind == "image":
        kept = any(e.message.source is ref.carrier.green for e in a.layout)
        return "image" if kept and a.settings.vision else None
    for e in a.layout:
        if e.id == ref.part:
            return "metadata" if ref.kind == "tabular" else "content"
    return None


def _listed(a: Assembly, file_id: str) -> str | None:
    """The listing message that offers ``file_id`` to read_file, or None."""
    if any(f.file_id == file_id for f in a.forgotten_files):
        return "$forgotten_files"
    needle = f'file_id="{file_id}"'
    for e in a.layout:
        if e.id == "$project_file_list" and needle in e.message.text:
            return e.id
    return None


def _offers_reader(doc: ConversationDoc) -> bool:
    if doc.settings.last_cycle:
        return False
    return any(t.name in FILE_READER_TOOLS for t in doc.conversation.tools or ())


def _id_at(text: Text, offset: int) -> tuple[TextRange, str] | None:
    """The id-like word at ``offset`` if it stands where a value does (quoted or after
    ``:``/``=``)."""
    # An id never spans lines: look only at the cursor's line.
    rng = _line_at(text, offset)
    if not rng.start <= offset <= rng.end:
        return None  # past the end, or between the "\r" and the "\n" of a line break
    line, offset = text[rng.start : rng.end], offset - rng.start
    start = offset
    while start > 0 and _ID_CHARS.fullmatch(line[start - 1]):
        start -= 1
    m = _ID_CHARS.match(line, start)
    if m is None or m.end() < offset:
        return None
    before = line[max(0, start - 12) : start]
    if not before.endswith(('"', "'", "=", ": ", ":")):
        return None
    return TextRange(rng.start + start, rng.start + m.end()), m.group(0)


# ------------------------------------------------------------------------------ placeholders


@dataclass(frozen=True, slots=True)
class _Fill:
    """What a placeholder expands to: the date, whether the turn cites, the user fields.

    ``cite`` and ``user_info`` are None for a template on its own (no conversation).
    """

    today: dt.date
    cite: bool | None = None
    user_info: dict[str, object] | None = None
    datetime_aware: bool = True


def _conversation_placeholder(
    doc: ConversationDoc, pl: Placements, offset: int, today: dt.date
) -> HoverResult | None:
    found = _placeholder_at(doc.text, offset)
    if found is None:
        return None
    rng, name = found
    conv, a = doc.conversation, doc.assembly
    where: Where = "message"
    blocks = (
        ("system", conv.system_prompt),
        ("custom_agent", conv.custom_agent_prompt),
        ("reminder", conv.reminder),
    )
    for kind, block in blocks:
        if block is not None and block.range.contains(offset) and hasattr(block, "content"):
            where = kind  # type: ignore[assignment]
    m = conv.message_at(offset)
    if m is not None and pl.of(m).segment == "system" and m.role is Role.SYSTEM:
        where = "system"
    fill = _Fill(today, _cites(a), dict(conv.user_info or {}), doc.settings.datetime_aware)
    return HoverResult(rng, _placeholder_markdown(name, where, fill))


def _placeholder_at(text: Text, offset: int) -> tuple[TextRange, str] | None:
    line = _line_at(text, offset)
    for m in _PLACEHOLDER.finditer(text[line.start : line.end]):
        start, end = line.start + m.start(), line.start + m.end()
        if start <= offset <= end:
            return TextRange(start, end), m.group(1)
    return None


def _cites(a: Assembly) -> bool:
    """Whether this turn cites (the pipeline put the citation texts in)."""
    if texts.CITATION_GUIDANCE in (a.system_text or ""):
        return True
    for e in a.layout:
        if e.id == "$custom_agent" and texts.CITATION_GUIDANCE in e.message.text:
            return True
        if e.id == "$reminder" and texts.CITATION_REMINDER in e.message.text:
            return True
    return False


def _placeholder_markdown(name: str, where: Where, fill: _Fill) -> str:
    title = f"**placeholder `{{{{{name}}}}}`**"
    if where == "message":
        return (
            f"{title}\n\nNot filled here: placeholders are filled only in the system prompt, "
            "the custom agent prompt and (`{{user.…}}` fields) the reminder. The model reads "
            "this text as written."
        )
    if where == "reminder" and not name.startswith("user."):
        return (
            f"{title}\n\nNot filled in the reminder, which fills only `{{{{user.…}}}}` fields: "
            "the model reads it as written."
        )
    body = _expansion(name, where, fill)
    return f"{title}\n\n{body}"


def _expansion(name: str, where: Where, fill: _Fill) -> str:
    if name == "CURRENT_DATETIME":
        return f"Expands to the date: **{format_datetime(fill.today)}**."
    if name == "REMINDER_TAG_DESCRIPTION":
        return "Expands to the reminder-tag block:\n\n" + "\n".join(
            _fence(texts.REMINDER_TAG_DESCRIPTION.splitlines(), "markdown")
        )
    if name == "CITATION_GUIDANCE":
        block = "\n".join(_fence(texts.CITATION_GUIDANCE.strip().splitlines(), "markdown"))
        citeable = ", ".join(f"`{t}`" for t in sorted(CITEABLE_TOOLS))
        if fill.cite is None:
            return (
                "Expands to the citation block when the turn cites (a project file is loaded, "
                f"or {citeable} was called this turn), and to nothing otherwise:\n\n{block}"
            )
        if fill.cite:
            return f"Expands to the citation block (this turn cites):\n\n{block}"
        return (
            "Expands to **nothing**: this turn cites nothing (no project file is loaded and "
            f"none of {citeable} was called this turn)."
        )
    if name.startswith("user."):
        key = name[len("user.") :]
        if fill.user_info is None:
            if key in USER_PLACEHOLDER_KEYS:
                return f"Expands to the conversation's `user_info.{key}` (empty when it has none)."
            return (
                f"Expands to the conversation's `user_info.{key}`; left as is when it has none "
                f"(`{key}` is not one of the user fields always filled)."
            )
        if key in fill.user_info:
            value = fill.user_info[key]
            shown = "" if value is None else str(value)
            return f"Expands to `user_info.{key}`: **{_escape(shown) or '(empty)'}**."
        if key in USER_PLACEHOLDER_KEYS:
            return f"Expands to **nothing**: `user_info` has no `{key}`."
        return (
            f"**Left as is**: `user_info` has no `{key}`, and it is not one of the user fields "
            "always filled."
        )
    known = ", ".join(f"`{{{{{k}}}}}`" for k in KNOWN_PLACEHOLDERS)
    return f"**Left as is**: not a placeholder the pipeline fills ({known}, `{{{{user.<key>}}}}`)."


# ------------------------------------------------------------------------------ prompt sections


def _section_markdown(doc: PromptDoc, index: int, tokenizer: Tokenizer) -> str:
    t = doc.template
    s = t.sections[index]
    body = t.text[t.body_range.start : t.body_range.end]
    n_prompt = tokenizer.count(body)
    n = tokenizer.count(t.text[s.range.start : s.range.end])
    title = (
        f"**{'#' * s.level} {_escape(s.title)}** · {fmt_tokens(n)} tokens · "
        f"{percent(n, n_prompt)} of the prompt ({fmt_tokens(n_prompt)} tokens)"
    )
    bullets: list[str] = []
    children = [c for c in t.sections if c.parent == index]
    if children:
        own = tokenizer.count(t.text[s.range.start : children[0].range.start])
        parts = ", ".join(
            f"{_escape(c.title)} {fmt_tokens(tokenizer.count(t.text[c.range.start : c.range.end]))}"
            for c in children
        )
        bullets.append(f"own text {fmt_tokens(own)} tokens; subsections: {parts}")
    bullets.extend(_tool_note(t, index, s))
    bullets.append(_counted_with(doc.settings, tokenizer))
    return "\n".join([title, "", *(f"- {b}" for b in bullets)])


def section_tool(t: PromptTemplate, index: int) -> str | None:
    """The tool a ``## <tool>`` guidance section is about, or None."""
    for tool, i in guidance_sections(t).items():
        if i == index:
            return tool
    return None


def front_matter_tools(t: PromptTemplate) -> list[str] | None:
    """The tool names the front matter offers, or None when it does not say."""
    root = t.front_matter_root
    node = root.get("tools") if root is not None and root.is_object else None
    if node is None:
        return None
    tools, _ = read_tools(node)
    return [d.name for d in tools]


def _tool_note(t: PromptTemplate, index: int, s: Section) -> Iterator[str]:
    offered = front_matter_tools(t)
    shown = ", ".join(f"`{n}`" for n in offered) if offered else ""
    offer = (
        f"the front matter offers {shown}"
        if offered
        else (
            "the front matter offers no tools"
            if offered is not None
            else "the front matter does not say which tools are offered"
        )
    )
    tool = section_tool(t, index)
    if tool is not None:
        if offered is not None and tool in {o.lower() for o in offered}:
            yield f"guidance for `{tool}`: sent when `{tool}` is offered this turn ({offer})"
        else:
            yield (
                f"guidance for `{tool}`: sent only when the conversation offers `{tool}` "
                f"this turn, left out otherwise ({offer})"
            )
        return
    if s.title.strip().lower() == "tools" and any(c.parent == index for c in t.sections):
        yield (
            "sent when at least one tool is offered this turn; each `## <tool>` guidance only "
            f"when its tool is ({offer})"
        )


def _counted_with(settings: Settings, tokenizer: Tokenizer) -> str:
    choice = resolve_encoding(settings.encoding, settings.model)
    approx = " (an approximation of the model's tokenizer)" if choice.approximate else ""
    if choice.encoding == tokenizer.encoding:
        return f"counted with `{tokenizer.encoding}`{approx}, as written (placeholders not filled)"
    return (
        f"counted with `{tokenizer.encoding}` (**fell back** from `{choice.encoding}`), as "
        "written (placeholders not filled)"
    )


# ------------------------------------------------------------------------------ helpers


def _line_at(text: Text, offset: int) -> TextRange:
    offset = max(0, min(offset, len(text)))
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    if end == -1:
        end = len(text)
    if end > start and text[end - 1] == "\r":
        end -= 1
    return TextRange(start, max(start, end))


def _first(n: int) -> str:
    return "the first message" if n == 1 else f"the first {n:,} messages"


def _fence(lines: Sequence[str], lang: str = "") -> list[str]:
    ticks = "```"
    while any(ticks in line for line in lines):
        ticks += "`"
    return [ticks + lang, *lines, ticks]


def _escape(s: str) -> str:
    """Escape what Markdown would read as emphasis, tables or links in free text."""
    return re.sub(r"([\\*|\[\]<>])", r"\\\1", s)


def _split_row(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip())
    if cells and cells[0] == "":
        cells = cells[1:]
    if cells and cells[-1] == "":
        cells = cells[:-1]
    return cells


def _inline_plain(s: str) -> str:
    s = re.sub(r"\*\*(.+?)\*\*", r"\1", s)
    s = re.sub(r"(`+)(.+?)\1", r"\2", s)
    return re.sub(r"\\([\\`*_|\[\]<>{}])", r"\1", s)


def _columns(rows: list[list[str]]) -> list[str]:
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(width)]
    return [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in rows
    ]
