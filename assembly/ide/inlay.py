"""Inlay hints: each message's tokens, where the eye reads its role.

A conversation gets one hint per message, right after its ``role`` value (after the comma
that may follow it), or at the end of the message's first line when it has no role: the
tokens the budget charges for it, prefixed by ``dropped``, ``summarized`` … when it is not
sent. A ``*.prompt.md`` gets one hint per section heading: the section's tokens.

Only hints whose offset lies inside the requested range are returned, so a client asking
for the visible lines of a 10 MB conversation gets a handful. Offsets are code points.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from assembly.ide.hover import PromptDoc, front_matter_tools, section_tool
from assembly.ide.placement import (
    ConversationDoc,
    Placement,
    Placements,
    fmt_tokens,
    percent,
    placements,
    short_error,
)
from assembly.model import Message
from assembly.text import TextRange
from assembly.tokens import Tokenizer


@dataclass(frozen=True, slots=True)
class InlayHint:
    """A label shown at ``offset``; ``tooltip`` says more (plain text)."""

    offset: int
    label: str
    tooltip: str


def conversation_inlay_hints(doc: ConversationDoc, rng: TextRange) -> list[InlayHint]:
    """Return the token hints of the messages whose hint falls inside ``rng``."""
    conv = doc.conversation
    msgs = conv.messages
    if not msgs:
        return []
    pl = placements(conv, doc.assembly)
    i = max(0, bisect.bisect_right(msgs, rng.start, key=lambda m: m.range.start) - 1)
    res: list[InlayHint] = []
    for k in range(i, len(msgs)):  # (a slice would make a view of every later message)
        m = msgs[k]
        if m.range.start > rng.end:
            break
        offset = _anchor(doc.text, m)
        if rng.start <= offset <= rng.end:
            p = pl.of(m)
            res.append(InlayHint(offset, _label(p), _tooltip(pl, p)))
    return res


def prompt_inlay_hints(doc: PromptDoc, rng: TextRange, *, tokenizer: Tokenizer) -> list[InlayHint]:
    """Return one hint per section heading inside ``rng``: the section's tokens."""
    t = doc.template
    sections = [
        (i, s) for i, s in enumerate(t.sections) if rng.start <= s.heading_range.end <= rng.end
    ]
    if not sections:
        return []
    n_prompt = tokenizer.count(t.text[t.body_range.start : t.body_range.end])
    offered = front_matter_tools(t)
    res = []
    for i, s in sections:
        n = tokenizer.count(t.text[s.range.start : s.range.end])
        tooltip = f"{fmt_tokens(n)} tokens, {percent(n, n_prompt)} of the prompt"
        tool = section_tool(t, i)
        if tool is not None:
            sent = offered is not None and tool in {o.lower() for o in offered}
            tooltip += f"; guidance for {tool}: " + (
                "offered by the front matter" if sent else "sent only when it is offered"
            )
        res.append(InlayHint(s.heading_range.end, f" {fmt_tokens(n)} tok", tooltip))
    return res


def _anchor(text: str, m: Message) -> int:
    """Where a message's hint goes: after its role value (and a comma right after it)."""
    if m.role_range is not None:
        end = m.role_range.end
        return end + 1 if text.startswith(",", end) else end
    line_end = text.find("\n", m.range.start, m.range.end)
    if line_end == -1:
        return m.range.end
    return line_end - 1 if line_end > m.range.start and text[line_end - 1] == "\r" else line_end


def _label(p: Placement) -> str:
    n = f"{fmt_tokens(p.tokens)} tok" if p.tokens is not None else ""
    prefix = {
        "kept": "",
        "dropped": "dropped",
        "orphan": "dropped",
        "summarized": "summarized",
        "summary_unused": "unused summary",
        "other_branch": "other branch",
        "not_assembled": "not assembled",
    }[p.status]
    return " " + " · ".join(part for part in (prefix, n) if part)


def _tooltip(pl: Placements, p: Placement) -> str:
    a = pl.assembly
    if p.status == "kept":
        assert p.cumulative is not None
        total = pl.totals()
        parts = [
            f"kept in {p.segment}",
            f"cumulative {fmt_tokens(p.cumulative)} / {fmt_tokens(total.available)} "
            f"({percent(p.cumulative, total.available)})",
        ]
        if p.cached:
            parts.append("in the cacheable prefix")
        if p.replaced:
            parts.append("sent as the placeholder sentence")
        res = " · ".join(parts)
    elif p.status == "dropped":
        res = f"dropped: budget cut (history is filled newest-first; the cut is at {pl.cut_at()})"
    elif p.status == "orphan":
        call = p.message.tool_call_id
        res = f"dropped: orphaned tool response (its call {call} is not sent before it)"
    elif p.status == "summarized":
        res = f"summarized: replaced by the summary {a.summary_id}"
    elif p.status == "summary_unused":
        res = "not applied: " + (
            f"the newer summary {a.summary_id} applies"
            if a.summary_id
            else "it summarizes through a message that is not on this branch"
        )
    elif p.status == "other_branch":
        res = f"not sent: not on the current branch (it ends at {pl.tip()})"
    else:
        err = pl.totals().error
        res = "not assembled" + (f": {short_error(err)}" if err is not None else "")
    for f in p.files:
        state = f"sent in {f.segment}" if f.kept else "not sent"
        res += f"\n+ uploaded file {f.id}: {fmt_tokens(f.tokens)} tok, {state}"
    return res
