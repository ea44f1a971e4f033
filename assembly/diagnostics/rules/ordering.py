"""Ordering and template rules: prompts and messages that do not land where the author meant.

A reminder written in the middle of the history, a custom agent prompt that repeats (or
silently replaces) the system prompt, a placeholder the pipeline does not know and leaves
literal, a summary node that the current branch never reaches: each reads fine on its own
and is only wrong given where the pipeline puts it. Inline prompts are strings inside the
conversation document; their offsets are mapped onto the document with
``assembly.sourcemap`` so findings point at the exact characters.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from assembly.diagnostics.core import (
    Diagnostic,
    Fix,
    Related,
    RuleContext,
    Severity,
    TextEdit,
    message_memo,
)
from assembly.diagnostics.inputs import (
    AllPrompts,
    Branch,
    MessageKinds,
    MessageShape,
    PromptContext,
    Summaries,
    SummaryReports,
    first_system_index,
)
from assembly.diagnostics.window import offset_map
from assembly.model import REMINDER_ROLE, SUMMARY_ROLE, Message, PromptRef, TextBlock
from assembly.prompts import checked_end
from assembly.sysprompt import KNOWN_PLACEHOLDERS, USER_PLACEHOLDER_KEYS
from assembly.text import TextRange

# The placeholder syntax of ``prompts.py`` (``user.x`` keys keep their dotted name).
_PLACEHOLDER = re.compile(r"\{\{[ \t]*([A-Za-z_][A-Za-z0-9_.]*)[ \t]*\}\}")
_USER_KEY = re.compile(r"user\.([A-Za-z_][A-Za-z0-9_]*)")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
SUGGESTION_CUTOFF = 0.8
_ID = operator.attrgetter("id")
MIN_DUPLICATE_WORDS = 6  # shorter paragraphs ("Be concise.") repeat by coincidence


# ------------------------------------------------------------------------------ rules


def reminder_not_last(b: Branch, k: MessageKinds) -> Iterator[Diagnostic]:
    """A reminder message is not the last message of the conversation.

    ## What it does
    Reports a message with role `reminder` in `messages` that has other messages of the
    current branch after it. Such a message is sent where it stands, wrapped in
    `<system-reminder>` tags, in the middle of the history. The related location is the
    message the branch really ends with.

    ## Why is this bad?
    Providers and Onyx treat the reminder as the last thing the model reads before it
    answers: that is what makes it work. In the middle of the history it is just another
    old message, and the turn goes out without it. The document's `reminder` key is
    always placed last.

    ## Example
    ```yaml
    messages:
      - {role: user, content: "Summarise the incident."}
      - {role: reminder, content: "Cite the runbook for every step."}
      - {role: assistant, content: "…"}
      - {role: user, content: "And the follow-ups?"}
    ```
    Use `reminder: "Cite the runbook for every step."` instead.
    """
    if not b.messages or not k.reminders:
        return
    if b.chain:
        order = {mid: i for i, mid in enumerate(b.chain)}
    else:
        order = {m.id: m.index for m in b.messages}
    by_id = {m.id: m for m in b.messages}
    branch = [by_id[mid] for mid in order if mid in by_id]
    # Messages sent from each position on (a summary node is moved to the front).
    sent_after = [0] * (len(branch) + 1)
    for i in range(len(branch) - 1, -1, -1):
        sent_after[i] = sent_after[i + 1] + (branch[i].role is not SUMMARY_ROLE)
    # The branch's last message.
    last = next((m for m in reversed(branch) if m.role is not SUMMARY_ROLE), None)
    if last is None:
        return
    position = {m.id: i for i, m in enumerate(branch)}
    for m in b.messages:
        pos = position.get(m.id)
        if m.role is not REMINDER_ROLE or pos is None or sent_after[pos + 1] == 0:
            continue
        after = sent_after[pos + 1]
        noun = "message follows" if after == 1 else "messages follow"
        yield Diagnostic(
            "reminder-not-last",
            Severity.WARNING,
            f"reminder `{m.id}` is not the last message: {after:,} {noun} it, so it is sent "
            "in the middle of the history instead of last (use the `reminder` key)",
            m.role_range or m.range,
            related=(Related(last.range, f"the conversation ends here: `{last.id}`"),),
        )


def custom_prompt_in_system(ctx: PromptContext) -> Iterator[Diagnostic]:
    """The custom agent prompt repeats or silently replaces the system prompt.

    ## What it does
    Reports text of `custom_agent_prompt` that also appears in the system prompt (a whole
    paragraph of at least six words, whitespace ignored), with the tokens paid twice; and
    a system prompt that is discarded because `replace_system_prompt` is on (the custom
    agent prompt is sent in its place, or nothing when there is none). The discarded
    prompt is tagged *unnecessary*.

    ## Why is this bad?
    The custom agent prompt is sent as its own message after the history, every turn: a
    paragraph it shares with the system prompt costs its tokens twice and weighs
    twice. With `replace_system_prompt` the base prompt (its tool guidance, its style
    rules) never reaches the model, however carefully it was written.

    ## Example
    ```yaml
    system_prompt: prompts/support.prompt.md   # contains "Always answer in English."
    custom_agent_prompt: |
      Always answer in English, even when the customer writes in another language.
    ```
    """
    conv = ctx.conversation
    if conv is None:
        return
    base = base_system_prompt(ctx)
    ca = conv.custom_agent_prompt
    if ctx.settings.replace_system_prompt:
        if base is not None and base.text[base.start :].strip():
            yield _discarded(ctx, base, ca)
        return
    if base is None or ca is None or not ca.content.strip():
        return
    yield from _duplicates(ctx, base, _inline(ca, "custom agent prompt"))


def unknown_placeholder(ctx: AllPrompts) -> Iterator[Diagnostic]:
    """A `{{NAME}}` placeholder that the pipeline does not fill and sends literally.

    ## What it does
    Checks every `{{…}}` in the system prompt (template or inline), the custom agent
    prompt and the reminder against the placeholders the pipeline fills:
    `{{CURRENT_DATETIME}}`, `{{CITATION_GUIDANCE}}`, `{{REMINDER_TAG_DESCRIPTION}}` and
    `{{user.<key>}}`. A `user.<key>` is unknown when the document's `user_info` lacks the
    key (without `user_info`: when the key is not one Onyx fills from the user's profile).
    The message suggests the closest known name; the fix puts it in.

    ## Why is this bad?
    Onyx substitutes placeholders by plain string replacement and leaves unknown ones as
    they are: the model reads a raw `{{CURRENT_DATE}}` instead of the date, and the
    instruction built around it makes no sense.

    ## Example
    ```markdown
    The current date is {{CURRENT_DATE}}.
    ```
    Use `{{CURRENT_DATETIME}}`.
    """
    conv = ctx.conversation
    user_info = conv.user_info if conv is not None else None
    suggestions: dict[str, str | None] = {}  # a name repeated is looked up once
    for prompt in _prompts(ctx):
        mapper = None
        end = checked_end(prompt.text, prompt.start)  # past it: `document-too-large`
        for m in _PLACEHOLDER.finditer(prompt.text, prompt.start, end):
            name = m.group(1)
            problem = _placeholder_problem(name, user_info, prompt.what)
            if problem is None:
                continue
            mapper = mapper or prompt.mapper(ctx)
            rng = mapper(m.start(), m.end())
            if name not in suggestions:
                suggestions[name] = _suggest(name, user_info)
            suggestion = suggestions[name]
            message = problem
            fix = None
            if suggestion is not None:
                message += f"; did you mean `{{{{{suggestion}}}}}`?"
                if rng is not None and prompt.source_text(ctx, rng) == m.group(0):
                    fix = Fix(
                        f"Replace with `{{{{{suggestion}}}}}`",
                        (TextEdit(rng, f"{{{{{suggestion}}}}}"),),
                    )
            yield Diagnostic(
                "unknown-placeholder",
                Severity.WARNING,
                message,
                rng if rng is not None else prompt.whole,
                path=prompt.path,
                fix=fix,
            )


def summary_on_other_branch(b: Summaries, reports: SummaryReports) -> Iterator[Diagnostic]:
    """A summary node is not applied: it belongs to another branch.

    ## What it does
    Reports a `summary` message whose `summarizes_through` is no message of the current
    branch (found by the pipeline, which ignores the summary), and a summary node that is
    not on the current branch at all: its `parent` chain does not lead to the branch tip
    (`settings.branch_tip`, default the last message). Both summaries are tagged
    *unnecessary*: neither is sent. A cut that is on the branch but after the summary is
    `summary-covers-kept-message`; one at or after the last user message is
    `summary-covers-this-turn`.

    ## Why is this bad?
    Onyx applies only the summary of the current branch; a summary written for another
    branch (or a `summarizes_through` that names the wrong message) leaves the history
    unsummarized, so the budget and what the model remembers are not what the fixture
    means to test.

    ## Example
    ```yaml
    settings: {branch_tip: u3}
    messages:
      - {id: u1, role: user, content: "…"}
      - {id: a1, role: assistant, content: "…", parent: u1}
      - {id: s1, role: summary, summarizes_through: a1, parent: a1, content: "…"}
      - {id: u3, role: user, content: "…", parent: a1}
    ```
    `s1` hangs off `a1` beside `u3`: the branch u1 → a1 → u3 does not contain it.
    """
    if not b.nodes and not reports.items:
        return
    nodes = [b.messages[i] for i in b.nodes]
    # The pipeline reports at `summarizes_through` (or the summary itself when it has none).
    summaries: dict[TextRange, MessageShape] = {}
    for m in nodes:
        summaries.setdefault(m.range, m)
        if m.summarizes_through_range is not None:
            summaries.setdefault(m.summarizes_through_range, m)
    reported: set[int] = set()
    for d in reports.items:
        node = summaries.get(d.range)
        if node is not None and node.summarizes_through is None:
            continue  # a schema error already says the summary lacks its cut
        related = d.related
        if node is not None:
            reported.add(node.index)
            related = (*related, Related(node.range, f"summary `{node.id}` is not sent"))
        yield dataclasses.replace(d, related=related, unnecessary=True)
    if not b.chained:
        return
    tip = b.messages[b.tip] if b.tip is not None else None
    for m, on_branch in zip(nodes, b.on_branch, strict=True):
        if on_branch or m.index in reported:
            continue
        tip_related = (
            (Related(tip.range, f"the current branch ends here: `{tip.id}`"),)
            if tip is not None
            else ()
        )
        yield Diagnostic(
            "summary-on-other-branch",
            Severity.WARNING,
            f"summary `{m.id}` is on another branch: its `parent` chain does not reach the "
            f"branch tip `{b.tip_id}`, so it is not applied",
            m.range,
            related=tip_related,
            unnecessary=True,
        )


def summary_covers_kept_message(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A summary node covers messages that come after it on the branch.

    ## What it does
    Reports a `summary` message whose `summarizes_through` names a message that comes
    *after* the summary on the current branch (found by the pipeline). The messages
    between the summary and its cut were sent to the model verbatim after the summary was
    written, so the summary cannot stand for them. The pipeline ignores such a summary and
    sends the history as written; the related locations point at the summary node and at
    the first message it claims to cover.

    ## Why is this bad?
    Onyx writes a summary after a turn, as a child of the last user message it saw, and it
    covers only older messages: what follows the summary is kept. A summary whose cut is
    later would, in Onyx, silently drop messages the summary never saw; in a fixture it
    almost always means `summarizes_through` names the wrong message or the summary sits
    in the wrong place (`summary-on-other-branch` covers cuts that are not on the branch).

    ## Example
    ```yaml
    messages:
      - {id: u1, role: user, content: "The nightly sync is late again."}
      - {id: s1, role: summary, summarizes_through: a1, content: "…"}
      - {id: a1, role: assistant, content: "It ran into the warehouse suspend."}
      - {id: u2, role: user, content: "Is there a fix?"}
    ```
    `s1` comes before `a1`: move the summary after `a1`, or cut it at `u1`.
    """
    return (d for d in ctx.reported if d.code == "summary-covers-kept-message")


def summary_covers_this_turn(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A summary node covers the last user message or this turn's calls and results.

    ## What it does
    Reports a `summary` message whose `summarizes_through` is the last user message of the
    branch or a message after it (an assistant tool call, a tool result of the turn being
    answered). The pipeline ignores such a summary and sends the history as written; the
    related locations point at the start of this turn and at the summary node.

    Compression itself cannot do this: the plan (`compression` in `promptls assemble
    --format json`) keeps the last user message and everything after it even when they
    exceed the share for recent messages, and never considers the fixed parts (system
    prompt, custom agent prompt, project files, reminder), which are not history. A
    property test over generated conversations holds the plan to that
    (`tests/assembly/test_invariants_property.py`); this rule covers the one way a
    document can still express the violation, a stored summary.

    ## Why is this bad?
    The model would answer a question it only sees paraphrased, and lose the exact
    arguments and results of the tool calls it is in the middle of. Onyx never stores such
    a summary: its compression keeps the recent turn verbatim.

    ## Example
    ```yaml
    messages:
      - {id: u1, role: user, content: "The nightly sync is late again."}
      - {id: a1, role: assistant, content: "It ran into the warehouse suspend."}
      - {id: u2, role: user, content: "Is there a fix?"}
      - {id: s1, role: summary, summarizes_through: u2, content: "…"}
    ```
    Cut the summary at `a1`: `u2` is the question being answered.
    """
    return (d for d in ctx.reported if d.code == "summary-covers-this-turn")


# ------------------------------------------------------------------------------ prompts


@dataclass(frozen=True, slots=True)
class _Prompt:
    """A prompt's text and how to turn offsets in it into ranges of a file.

    ``value_range`` set: an inline string of the document (offsets mapped through
    ``sourcemap``); else ``text`` is the text of the file ``path`` (None: the document).
    ``whole`` (in ``path``'s coordinates) is where to point when an offset cannot be
    mapped; ``given`` is where the document gives the prompt (a template's path value).
    """

    what: str
    text: str
    start: int
    path: str | None
    whole: TextRange
    given: TextRange
    value_range: TextRange | None = None

    def mapper(self, ctx: RuleContext) -> Callable[[int, int], TextRange | None]:
        """Map a span of ``text`` to a range of ``path`` (None: it cannot be mapped)."""
        vr = self.value_range
        if vr is None:
            return TextRange
        if vr.start >= len(ctx.text) or ctx.text[vr.start] in "[{":
            return lambda start, end: None  # content parts: no single string to map into
        return offset_map(ctx.text, vr, self.text).range

    def source_text(self, ctx: RuleContext, rng: TextRange) -> str:
        if self.path is None:
            return ctx.text[rng.start : rng.end]
        if ctx.template is not None and self.path == ctx.template_path:
            return ctx.template.text[rng.start : rng.end]
        return ""


def _inline(block: TextBlock, what: str) -> _Prompt:
    whole = block.content_range or block.range
    return _Prompt(what, block.content, 0, None, whole, block.range, block.content_range)


def base_system_prompt(ctx: RuleContext) -> _Prompt | None:
    """The base system prompt as written: the template, the inline text or a message."""
    conv, t = ctx.conversation, ctx.template
    if conv is None:
        if t is None:
            return None
        return _Prompt(
            "system prompt", t.text, t.body_range.start, None, t.body_range, t.body_range
        )
    src = conv.system_prompt
    if isinstance(src, PromptRef):
        if t is None:
            return None
        body = t.body_range
        return _Prompt("system prompt", t.text, body.start, ctx.template_path, body, src.range)
    if isinstance(src, TextBlock):
        return _inline(src, "system prompt")
    m = _first_system_message(ctx)
    if m is None:
        return None
    whole = m.content_range or m.range
    return _Prompt("system prompt", m.content, 0, None, whole, m.range, m.content_range)


def _first_system_message(ctx: RuleContext) -> Message | None:
    """The system message the pipeline takes as the system prompt: the first one of the
    branch (the pipeline takes it out of ``Assembly.chain``, so the branch is walked
    again here, by the pipeline's own ``walk_branch``: ``first_system_index``).

    Its index depends on the messages' shapes and the branch tip only: it is kept in the
    memo while they stay the same (typing in a message walks nothing)."""
    if isinstance(ctx, PromptContext):
        return ctx.system_message
    conv = ctx.conversation
    if conv is None:
        return None
    memo = message_memo(ctx)
    tip_id = ctx.settings.branch_tip
    i = memo.derived(
        "first-system-message",
        (memo.shapes, tip_id),
        lambda: first_system_index(conv.message_data, tip_id),
    )
    return conv.messages[i] if i is not None else None


def _prompts(ctx: RuleContext) -> Iterator[_Prompt]:
    base = base_system_prompt(ctx)
    if base is not None:
        yield base
    conv = ctx.conversation
    if conv is None:
        return
    if conv.custom_agent_prompt is not None:
        yield _inline(conv.custom_agent_prompt, "custom agent prompt")
    if conv.reminder is not None:
        yield _inline(conv.reminder, "reminder")


# ------------------------------------------------------------------------------ custom prompt


def _discarded(ctx: RuleContext, base: _Prompt, ca: TextBlock | None) -> Diagnostic:
    conv = ctx.conversation
    assert conv is not None
    related: list[Related] = []
    setting = conv.settings_ranges.get("replace_system_prompt")
    if setting is not None:
        related.append(Related(setting, "`replace_system_prompt` is turned on here"))
    if ca is not None and ca.content.strip():
        related.append(Related(ca.range, "the custom agent prompt is sent as the system prompt"))
        message = (
            "`replace_system_prompt` is on, so this system prompt is discarded: the custom "
            "agent prompt is sent in its place"
        )
    else:
        message = (
            "`replace_system_prompt` is on and there is no custom agent prompt: this system "
            "prompt is discarded and the turn has no system prompt at all"
        )
    # A template's own text is not faded (other conversations may use it): the reference is.
    return Diagnostic(
        "custom-prompt-in-system",
        Severity.WARNING,
        message,
        base.given,
        related=tuple(related),
        unnecessary=True,
    )


@functools.lru_cache(maxsize=4)
def _squeezed(text: str, start: int) -> str:
    """``text[start:]`` with each run of white space one space, remembered for the last few
    system prompts (the conversations of one agent share theirs)."""
    return " ".join(text[start:].split())


def _duplicates(ctx: RuleContext, base: _Prompt, ca: _Prompt) -> Iterator[Diagnostic]:
    """One finding per paragraph of the custom prompt found in the system prompt, or one
    for the whole custom prompt when all of it is."""
    haystack = _squeezed(base.text, base.start)
    found: list[tuple[int, int, re.Match[str]]] = []
    paragraphs = list(_paragraphs(ca.text))
    for start, end in paragraphs:
        words = ca.text[start:end].split()
        if len(words) < MIN_DUPLICATE_WORDS or " ".join(words) not in haystack:
            continue
        pattern = re.compile(r"\s+".join(re.escape(w) for w in words))
        hit = pattern.search(base.text, base.start)
        if hit is not None:
            found.append((start, end, hit))
    if not found:
        return
    ca_map, base_map = ca.mapper(ctx), base.mapper(ctx)
    if len(found) == len(paragraphs):
        tokens = ctx.tokenizer.count(ca.text)
        first = found[0][2]
        yield Diagnostic(
            "custom-prompt-in-system",
            Severity.WARNING,
            f"the whole custom agent prompt is already in the system prompt: its {tokens:,} "
            "tokens are sent twice",
            ca.whole,
            related=(_system_place(base, base_map, first, "the same text in the system prompt"),),
        )
        return
    for start, end, hit in found:
        tokens = ctx.tokenizer.count(ca.text[start:end])
        yield Diagnostic(
            "custom-prompt-in-system",
            Severity.WARNING,
            f"this paragraph of the custom agent prompt is also in the system prompt: "
            f"{tokens:,} tokens sent twice",
            ca_map(start, end) or ca.whole,
            related=(
                _system_place(base, base_map, hit, "the same paragraph in the system prompt"),
            ),
        )


def _system_place(
    base: _Prompt,
    base_map: Callable[[int, int], TextRange | None],
    hit: re.Match[str],
    message: str,
) -> Related:
    rng = base_map(hit.start(), hit.end()) or base.whole
    return Related(rng, message, base.path)


# A paragraph's text from its first non-space character to its last one.
_TRIMMED = re.compile(r"\S(?:.*\S)?", re.DOTALL)


def _paragraphs(text: str) -> Iterator[tuple[int, int]]:
    """Trimmed (start, end) of the non-blank paragraphs of ``text`` (from the start of
    the first word to the end of the last one: one match, not one per word as before)."""
    pos = 0
    for brk in (*_PARAGRAPH_BREAK.finditer(text), None):
        stop = brk.start() if brk is not None else len(text)
        trimmed = _TRIMMED.search(text, pos, stop)
        if trimmed is not None:
            yield trimmed.span()
        if brk is not None:
            pos = brk.end()


# ------------------------------------------------------------------------------ placeholders


def _placeholder_problem(name: str, user_info: Mapping[str, Any] | None, where: str) -> str | None:
    """Why ``{{name}}`` is not filled as written, or None when it is."""
    if name in KNOWN_PLACEHOLDERS:
        return None
    tag = f"`{{{{{name}}}}}` in the {where}"
    m = _USER_KEY.fullmatch(name)
    if m is None:
        return f"unknown placeholder {tag} is sent literally"
    key = m.group(1)
    if user_info is not None:
        if key in user_info:
            return None
        if key in USER_PLACEHOLDER_KEYS:
            return f"{tag} becomes an empty string: `user_info` has no `{key}`"
        return f"{tag} is sent literally: `user_info` has no `{key}`"
    if key in USER_PLACEHOLDER_KEYS:
        return None
    return f"{tag} is sent literally: `{key}` is not a user field Onyx fills"


def _suggest(name: str, user_info: Mapping[str, Any] | None) -> str | None:
    """The closest known placeholder name (case-insensitive), or None.

    Close means a `difflib` ratio of at least 0.8 (`CURRENT_DATE`, `user.nmae`), or, for
    the fixed names, a name that is the start or the end of one (`CITATION`, `DATETIME`);
    a looser match would offer a fix that changes the meaning (`user.team_name` is not
    `user.name`).
    """
    keys = set(user_info) if user_info is not None else set(USER_PLACEHOLDER_KEYS)
    candidates = [*KNOWN_PLACEHOLDERS, *(f"user.{k}" for k in sorted(keys))]
    folded = {c.lower(): c for c in candidates}
    want = name.lower()
    if want.startswith("user."):
        pool = [c for c in folded if c.startswith("user.")]
    else:
        pool = [c for c in folded if not c.startswith("user.")]
        if len(want) >= 4:
            pool_hit = [c for c in pool if c.startswith(want) or c.endswith(want)]
            if len(pool_hit) == 1 and folded[pool_hit[0]] != name:
                return folded[pool_hit[0]]
    import difflib  # (only for an unknown placeholder: 1.6 ms of every start-up otherwise)

    match = difflib.get_close_matches(want, pool, n=1, cutoff=SUGGESTION_CUTOFF)
    if not match or folded[match[0]] == name:
        return None
    return folded[match[0]]
