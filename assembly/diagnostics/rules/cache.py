"""Prompt-cache rules: what makes the cacheable prefix change from one request to the next.

Providers reuse a request's cached leading bytes (the tool definitions, the system prompt and
the kept history, ``assembly.cache``) only while they stay byte-identical. These rules report
the parts of that prefix that cannot: a date in the system prompt, and tool definitions that
differ between the turns of one conversation. They read ``ctx.assembly`` and the document.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from assembly.assemble import sanitize_tool_name
from assembly.cache import cached_tokens
from assembly.diagnostics.core import Diagnostic, Related, RuleContext, Severity
from assembly.diagnostics.rules.ordering import base_system_prompt
from assembly.model import ASSISTANT_ROLE
from assembly.text import TextRange

_DATETIME = re.compile(r"\{\{\s*CURRENT_DATETIME\s*\}\}")


def volatile_in_cached_prefix(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A value that changes between requests sits inside the cached prefix.

    ## What it does
    Reports a `{{CURRENT_DATETIME}}` placeholder in the system prompt (template, inline or
    system message) when the system prompt is part of the cacheable prefix (Onyx has one
    with `prompt_cache_chat_history` on). A related note
    at the place the conversation gives the prompt says how many tokens its prefix holds:
    the tool definitions, the system prompt and the kept history.

    A prompt without the placeholder is not reported, although Onyx appends "Additional
    Information: The current date is …" to it when `datetime_aware` is on (the default) and
    the cost is the same: that is every Onyx conversation, and the hover on the cache
    boundary says it. Turning `datetime_aware` off removes the appended date.

    ## Why is this bad?
    Providers cache a request by its exact leading bytes and bill cached input tokens at a
    fraction of the price (OpenAI and Anthropic: a tenth to a half). The system prompt is
    the first message, so when its date changes at midnight every byte after it changes
    too: the first request of each day, in every conversation that uses the prompt, pays
    the full price for the whole prefix again, and a long agent conversation that crosses
    midnight loses its cache in the middle of a task.

    ## Example
    ```markdown
    You are Lumi, the support agent of Lumen Analytics. Today is {{CURRENT_DATETIME}}.
    ```
    Give the date in the reminder, which Onyx sends after the cached prefix, and turn
    `datetime_aware` off so that Onyx does not append it instead; or accept the daily
    re-billing.
    """
    a = ctx.assembly
    if a is None or not a.cache_prefix_length or not a.layout or not a.layout[0].cache:
        return
    if a.layout[0].segment != "system" or a.system_text is None:
        return
    base = base_system_prompt(ctx)
    src = a.layout[0].message.source
    conv = ctx.conversation
    given = (
        base.given
        if base is not None
        else conv.locate(src).range
        if src is not None and conv is not None
        else None
    )
    if given is None:
        return
    cost = (
        "it changes every day, so the first request of each day, in every conversation that "
        "uses this prompt, pays the uncached price for the whole cached prefix"
    )
    # The figures are this conversation's: a related note at the place the document gives
    # the prompt (a template's finding then reads the same for every conversation using it).
    figures = Related(
        given,
        f"this conversation's cached prefix: {cached_tokens(a):,} tokens (tool definitions, "
        f"system prompt, {a.cache_prefix_length - 1:,} history message(s))",
    )
    if base is not None:
        m = _DATETIME.search(base.text, base.start)
        if m is not None:
            rng = base.mapper(ctx)(m.start(), m.end()) or base.whole
            yield Diagnostic(
                "volatile-in-cached-prefix",
                Severity.INFO,
                f"`{{{{CURRENT_DATETIME}}}}` puts today's date in the system prompt, the start "
                f"of the cached prefix: {cost}",
                rng,
                path=base.path,
                related=(figures,),
            )
            return


def tool_list_changes_prefix(ctx: RuleContext) -> Iterator[Diagnostic]:
    """The tool definitions differ between the turns of the conversation.

    ## What it does
    A conversation document gives one list of tools: the tools offered this turn. Earlier
    turns' tool calls show which tools were offered then: a call in the kept history to a
    tool that is not in this turn's list means the list changed between turns. Reported
    once per missing tool, at its first call, with the other calls related; only when the
    document gives a tools list (directly or through its template).

    ## Why is this bad?
    The tool definitions are the first bytes of every request, before the system prompt:
    when they change, nothing of the cached prefix is reused and the whole prompt is billed
    at the uncached price on that turn. Onyx also rewrites the system prompt's Tools section
    to the tools offered, so the cached system prompt changes with them. And the model reads
    calls to a tool it can no longer call.

    ## Example
    Turn 1 offered `web_search` and the assistant called it; this turn offers only
    `internal_search`. Keep the tool list stable across the turns of a conversation (offer
    the tool and let the prompt say when not to use it).
    """
    conv, a = ctx.conversation, ctx.assembly
    if conv is None or a is None or conv.tools is None:
        return
    offered = {sanitize_tool_name(t.name) for t in conv.tools} | {t.name for t in conv.tools}
    calls: dict[str, list[tuple[str, TextRange]]] = {}
    for e in a.layout[: a.cache_prefix_length]:
        stored = e.message.source
        if stored is None or stored.role is not ASSISTANT_ROLE:
            continue
        src = conv.locate(stored)
        for c in src.tool_calls:
            if c.name and c.name not in offered and sanitize_tool_name(c.name) not in offered:
                calls.setdefault(c.name, []).append((src.id, c.name_range))
    for name, places in calls.items():
        first_id, rng = places[0]
        related = tuple(Related(r, f"also called in `{mid}`") for mid, r in places[1:6])
        yield Diagnostic(
            "tool-list-changes-prefix",
            Severity.WARNING,
            f"`{name}` is called in `{first_id}` but is not among this turn's tools: the tool "
            "definitions changed between turns, and they are the first bytes of the request, "
            f"so the cached prefix ({cached_tokens(a):,} tokens) was not reused on the turn "
            "they changed",
            rng,
            related=related,
        )
