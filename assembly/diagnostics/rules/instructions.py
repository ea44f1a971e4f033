"""Instruction rules: where the instructions of a prompt sit, and which tools they ask for.

Prompt text comes from three places:

- a ``*.prompt.md`` checked on its own (``ctx.template``, ``ctx.template_path`` None):
  ranges are offsets into the document, and only these findings carry fixes;
- the template a conversation's ``system_prompt`` points to: findings carry its path;
- prompts written inline in a conversation (``system_prompt`` content, else the first
  ``system`` message, ``custom_agent_prompt``, ``reminder``): parsed as Markdown and mapped
  back to document offsets with ``sourcemap.string_offset_map``.

An *instruction* is a prose sentence that directs the model: an imperative (it starts
with a verb in the base form, possibly after a leading adverb or a conditional clause) or a
modal directive ("you must", "never", "make sure", …). The section it is *about* is the
section of a tool it names, else the section whose vocabulary (heading words, the
``section_topics`` setting, salient words of the section's own prose) it matches with a
clear margin over every other section, while its own section has no claim on it.

Everything is a linear pass over the sentences with precompiled regexes and inverted
indexes; tokens are counted only for the few candidates far enough away to matter, from
per-section counts that the tokenizer caches, so a 200 KB prompt costs one encode at most.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import chain
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
from assembly.diagnostics.inputs import PromptContext, called_names
from assembly.diagnostics.window import TextLike, offset_map
from assembly.documents import read_tools
from assembly.memo import TextMemo
from assembly.model import (
    SUMMARY_ROLE,
    SYSTEM_ROLE,
    Conversation,
    Message,
    PromptTemplate,
    Section,
    Sentence,
    TextBlock,
)
from assembly.prompts import checked_text
from assembly.sourcemap import OffsetMap
from assembly.syntax import SNode
from assembly.sysprompt import guidance_sections, parse_prompt_text
from assembly.text import TextRange, plural
from assembly.tokens import Tokenizer

# Onyx's built-in tools: a sentence naming one of these names a tool even when the prompt
# has no guidance for it.
KNOWN_TOOLS = frozenset(
    {
        "internal_search",
        "web_search",
        "open_url",
        "read_file",
        "run_python",
        "generate_image",
        "add_memory",
        "file_reader",
    }
)
READ_FILE = "read_file"


def instruction_far_from_section(ctx: PromptContext) -> Iterator[Diagnostic]:
    """An instruction sits far from the section it is about.

    ## What it does
    Finds the instructions of a prompt (imperatives such as "Cite the source of every
    figure", and directives with "you must", "never", "always", "make sure", "if you need
    more information, call …") and decides which section each is about:

    Sections are Markdown headings (setext ones as CommonMark reads them), XML-style
    blocks (`<tool_calling>` … `</tool_calling>`, nested; a `kebab-case` or `snake_case`
    name gives its words), `====` blocks with a title line, bold title lines and ALL-CAPS
    title lines (numbered over a bulleted list too: `1. WEB SEARCH`); a line of
    template tags (`{% include "role" %}`) is no prose.
    Tools are those of the conversation (for a template checked on its own: of the open
    conversations that use it), the tools its messages call (for a template: that its
    conversations call), the front matter `tools`, the `tools` setting, the
    prompt's tool sections (`## web_search`, `GUIDE FOR THE "sequential_thinking" TOOL`,
    `3. FORMATTING RESEARCH RESPONSE` for a known `format_research_response`)
    and the names it calls tools or asks to call (``the `task` tool``, `the "finish"
    tool`, `the TodoWrite tool`, `call write_todos`, ``call the `done` action``). "This
    tool" names the tool of the section it sits in (or the prompt's only tool section's).

    - the section of a tool it names: a section titled with the tool's name (`## web_search`,
      `<codebase_search>`, `**run_sql**`, ``### 1. `search_docs` - Documentation
      Search``, `<done_usage>` for a known tool `done`), else the section that owns the tool (the
      innermost one holding more than half of the sentences naming it, two at least,
      its bold labels and nested blocks included, a sentence listing tools counted only
      for a tool nothing else names; before that, the one section that
      defines it: `- **web_search**: searches the web`, "The crawl_page tool reads …"),
      else the tools section (`# Tools`,
      `TOOL USE`, `<tool_calling>`), also for several tools at once;
    - the tools section, for an instruction about tools in general ("Prefer tools over
      your own knowledge", "use another tool", "Functions must be used to …") at the
      opening of the prompt (the placement Onyx measured), unless half of the opening's
      sentences speak of tools or another section directs tools in general more than
      the tools section does (two instructions at least); inside a section it is a step
      of that section's work;
    - else the section whose heading it matches: a heading word that no other heading has
      and that the prompt uses mostly there (more than a third of its uses), or two
      heading words, or one with support from the section's prose (a heading of three or
      more topic words needs half of them, two at most, except at the prompt's opening,
      where one no other heading has and half of whose uses lie there is enough, or one
      backed by two more of its words in the section's prose (round 24), and
      need not be used mostly there when the section's prose repeats it: the opening
      holds no topic of its own; a bold title line, which labels
      the paragraph under it, needs two), or the section's *topic word*: a heading word
      no other heading has that the section's own prose uses twice more and that holds
      half of the prompt's uses (a third under a bold label), whatever the title's
      length (`**Section Headers**` for "Keep headers short"). Words are stemmed (an
      adjective in -al or -ic with its noun: `<operational-principles>` for "operation",
      round 23); `snake_case` and dotted names (`AGENTS.md`) are one word, and a capitals name in
      prose (`TASK_TRACKING`) gives its parts too; a heading word shared by a section and
      one inside it counts once. A one-word bold label (`**Monospace**`) is matched by
      its word. Words in an aside (a parenthesis, "e.g. …", a trailing "when/unless …"
      clause) are not what the instruction is about: they match no heading and name no
      tool (a tool named in passing). The
      `section_topics` setting adds topic words to headings (built in: Tools, Citations,
      User Information). It must beat every unrelated section by a clear margin (a
      rival counts its heading words only when its own prose uses them); one that fits
      two bold labels of one section alike is about that section.

    Not reported: an instruction inside that section or one around it, or in the intro
    of a section around it (the intro under the prompt's title is its opening, and is
    judged); one whose own section names the same topic or tool (the same tool, for an
    instruction sent by the tool it names), or shares enough of its words (a
    restatement); one in a recap (`Important reminders`, `What not to do
    (recap)`, `<critical_reminders>`); one that points elsewhere on purpose ("see Step 5",
    "follow the Source Context section", "the functions defined above", a section named
    by its title as written: "using the Analysis Framework"); one matched to a section
    of examples (`# Sample Phrases` and its parts: they show what to say) or to a
    heading that is code (a JSON line a `---` under it makes a heading: its words name
    no topic); tool guidance that mentions another topic;
    one under a bold label matched to a sibling bold label of the same heading; a
    workflow overview (a list whose items point at later sections in the order they come,
    or a section a third of whose sentences name two or more other sections; never the
    opening, nor the intro under the title that opens the prompt, nor its first section
    after at most two sentences, `<ROLE>`); an instruction (not about a tool) in a
    numbered step matched to another numbered step of the same procedure (`### Step 7`
    and `### Step 6`), or one that names two or more other sections ("Handle the complete
    flow: test > build > deploy > …"), or a plain statement of work in the prompt's
    mission, role or capabilities section (`## Core Mission`, `<role>`: no code, no "never",
    "only", "always" …; any sentence of the paragraph that opens "You are …" there), or a
    bare task in a list (`- Find knowledge boundaries`: no modal,
    no emphasis, no "only", "every", "not" …, no condition) matched by one heading word
    (workflow phases and sibling checklists share their words); a bare step of a
    procedure, whatever it names, a tool included (an item of a numbered list, or of a
    list whose items each open with a bold label, three items or more: "2. Use the
    list_clusters tool to discover available clusters" under `## Getting Started`,
    "- **Inform**: Gather relevant information using appropriate tools" in the working
    loop at the opening; a rule in such a list, "You must call …", is judged; a modal
    in a clause about another subject, "Recommend which agents should handle …", makes
    no rule, round 25). The text
    before the first heading is on
    an instruction's topic only when two more of its sentences use the topic word and
    it uses it as often as the section titled by it does (an opening names the prompt's
    theme: "You are a citations agent" does not make it the place for citation rules);
    an instruction on the line just before its section (under 15 tokens away) unless it
    names a tool; the prompt's last sentence, after its last block, ending with a colon
    (it leads in to what is sent after the prompt); at the opening, a sentence that sends
    the reader to another tool instead ("For exact values, use `querychat_query` instead":
    what the prompt's own subject is not for), unless the prompt documents that tool in a
    section titled by its name (round 23). A name the prompt writes `@name` points at one
    of its blocks (`@critical_context_requirement`): it is no tool's name. Hover an
    instruction to see the section it was matched to and why (the
    words, the scores, and the best unrelated section).

    Reported by default: an instruction that names one tool whose section is titled by the
    tool's name (`## web_search`, `<done_usage>`, `3. FORMATTING RESEARCH RESPONSE`), the
    tool being known from more than that title (offered, called, set, named as a tool or
    called in the prose, or titling a part of the tools section), and an instruction at the
    opening that directs the use of tools in general ("If you need more information, keep
    calling tools"), sent to the tools section: the placement Onyx measured; and, at the
    opening too, one that names one known tool, sent to the section that describes the tool
    (`tool-home`) or to the tools section when the tool has no section of its own (`tools`);
    and, at the opening again, a sentence matched by heading words that reads as a stray
    there: backed by that section (a word of it besides the heading's is used in the
    section's text, it shares two of the heading's words, or one the section holds half of
    the prompt's uses of, round 21) and apart from the opening (no
    such word is used by the opening's other sentences or its title, or one only when two
    more are the section's; rounds 16, 17 and 19), and not a sentence that says who the
    agent is ("Your role … is", round 18) nor one sent to the section that does (`## Your
    Role`, round 22). On the real prompts seen while tuning these were
    right but once, the others mostly wrong, so, as ruff does with rules not yet precise
    enough, the other kinds are reported only with `instruction_preview = true`, their
    message ending in "(preview: …)": a sentence matched by heading words (`topic`), by
    heading words and a phrase the section's own text uses too, two words in a row
    (`phrase`), elsewhere or when its words are the opening's own too, a `tool-home` or
    `tools` match away from the opening, or a match by a name only a title calls a tool
    (`tool-title`). At the opening, a tool's titled section is judged by the tool alone;
    elsewhere it must beat every unrelated section, as the tools section must for tools in
    general (other matches: twice); the section describing a known tool (defining it, or
    naming it twice or more) is the place of its rule at the opening whatever heading words
    another shares. A tools section (`TOOLS USAGE GUIDE`) is a part of the prompt however
    much of it it holds. A line of a list of tools (`- fetch_url — fetch a public URL`)
    defines its tool and is no rule. The hover says which kind a match is.

    Otherwise the finding says where the instruction sits and how many tokens from its
    section: a warning at the top of the prompt, at its end (after its last block), or in
    another part of it, information in a
    neighbouring section. `instruction_distance` (default 0) mutes findings nearer than
    that many tokens. Templates, inline system prompts and custom agent prompts are
    checked; in a `*.prompt.md` the quick fix moves the sentence to the end of its
    section, or deletes it when the section already says the same. A
    deliberate repetition (a closing recap of the rules) is kept with
    `<!-- promptls: ignore[instruction-far-from-section] -->` on the line before it.
    Each instruction is weighed against every section: a prompt with more instructions
    times sections than 100,000 (3.5 times the largest real prompt of the evaluation
    corpora) is not checked, and one information finding at its first heading says so.

    ## Why is this bad?
    Models follow an instruction far more reliably when it sits next to what it
    constrains. Onyx measured it: "if you need more information, keep calling tools" was
    followed by every model inside the Tools section and ignored most of the time (90% →
    30%) at the top of the system prompt, only a paragraph away.

    ## Example
    ```markdown
    You are a research assistant. If you need more information, call web_search again.

    # Response Style
    …1,200 tokens…

    # Tools
    ## web_search
    Searches the public web.
    ```
    `instruction about `web_search` sits 1,214 tokens before `## web_search``: move the
    sentence into the `## web_search` section.
    """
    limit = ctx.settings.instruction_distance
    # The tools from outside the prompt's words: those offered (the conversation's, the
    # front matter's), the `tools` setting (for a template, the tools of the conversations
    # that use it join it), and the tools the messages actually call.
    tool_names = (
        (_offered_names(ctx) or set()) | setting_tool_names(ctx.settings.tools) | _called_tools(ctx)
    )
    for source in _sources(ctx, with_reminder=False):
        yield from _far_instructions(ctx, source, tool_names, limit)


def guidance_for_unavailable_tool(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A prompt asks for a tool that is not offered this turn.

    ## What it does
    Knows the tools offered this turn (the conversation's `tools`; for a `*.prompt.md` on
    its own, the `tools` of its front matter; without either the rule does not run) and
    reports:

    - an instruction in the system prompt, the custom agent prompt or the reminder that
      asks the model to use a tool that is not offered (warning);
    - a `read_file` listing (forgotten files, or project files given by file id) sent
      while no `read_file` tool is offered (warning);
    - a `## <tool>` guidance section under `# Tools` for a tool the prompt never offers: a
      tool missing from the front matter `tools` of a template, or, in a system prompt
      written inline in a conversation, from the conversation's `tools` (info, faded: the
      pipeline leaves that section out, so it is never sent). A template file without
      front matter `tools` is shared by conversations that offer different tools, so its
      guidance for a tool that only other turns offer is expected and not reported.

    Sentences inside guidance the pipeline leaves out this turn are not reported.

    ## Why is this bad?
    The model tries to call a tool it was told about and gets an error, or gives up on the
    instruction; either way the turn is wasted. Onyx gates its own `open_url` reminder on
    the tool being available for exactly this reason.

    ## Example
    ```yaml
    reminder: Open the two best web_search results with open_url before you answer.
    tools:
      - {type: function, function: {name: web_search, parameters: {type: object}}}
    ```
    `instruction asks for `open_url`, which is not offered this turn`
    """
    offered = _offered_names(ctx)
    if offered is None:
        return
    where = _tools_location(ctx)
    called = _called_tools(ctx)
    for source in _sources(ctx, with_reminder=True):
        yield from _unavailable_in_prompt(ctx, source, offered, called, where)
    yield from _read_file_listing(ctx, offered, where)


# --------------------------------------------------------------------------------------
# Prompt sources


@dataclass(frozen=True, slots=True)
class _Source:
    """One prompt text, parsed, and how its offsets reach the file a finding is in."""

    template: PromptTemplate
    path: str | None  # the file findings are in (None: the document)
    to_doc: Callable[[TextRange], TextRange]  # template range -> range in that file
    kind: str  # template | system | custom agent prompt | reminder
    fixable: bool = False  # a *.prompt.md checked on its own
    shared: bool = False  # a template file a conversation references

    def range(self, rng: TextRange) -> TextRange:
        return self.to_doc(rng)


def _sources(ctx: RuleContext, *, with_reminder: bool) -> list[_Source]:
    """The prompt texts of the context, in the order they are sent."""
    conv = ctx.conversation
    if conv is None:
        if ctx.template is None:
            return []
        return [_Source(ctx.template, None, _identity, "template", fixable=True)]
    res: list[_Source] = []
    if ctx.template is not None and ctx.template_path is not None:
        res.append(_Source(ctx.template, ctx.template_path, _identity, "template", shared=True))
    system_block = conv.system_prompt if isinstance(conv.system_prompt, TextBlock) else None
    if system_block is not None:
        res.extend(_inline(ctx, system_block.content, system_block.content_range, "system"))
    elif conv.system_prompt is None:
        message = _system_message(ctx, conv)
        if message is not None:
            res.extend(_inline(ctx, message.content, message.content_range, "system"))
    ca = conv.custom_agent_prompt
    if ca is not None:
        res.extend(_inline(ctx, ca.content, ca.content_range, "custom agent prompt"))
    if with_reminder and conv.reminder is not None:
        r = conv.reminder
        res.extend(_inline(ctx, r.content, r.content_range, "reminder"))
    return res


def _inline(ctx: RuleContext, content: str, rng: TextRange | None, kind: str) -> list[_Source]:
    text = ctx.text
    if rng is None or not content.strip() or not _is_scalar(text, rng):
        return []
    # Parsed once while the text stays the same (offsets into ``content`` only).
    template = message_memo(ctx).derived(
        f"prompt: {kind}", content, lambda: parse_prompt_text(content)
    )
    # The offset map is made for the first finding that needs it: most prompts have none
    # (a list, not ``functools.cache``: making a cache took longer than most prompts' check).
    made: list[OffsetMap] = []

    def to_doc(r: TextRange) -> TextRange:
        if not made:
            made.append(offset_map(text, rng, content))
        return made[0].range(r.start, r.end)

    return [_Source(template, None, to_doc, kind)]


def _is_scalar(text: TextLike, rng: TextRange) -> bool:
    """Whether the value at ``rng`` is a string (content parts cannot be mapped back)."""
    head = text[rng.start : rng.start + 2]
    return bool(head) and head[0] not in "[{" and not (head[0] == "-" and head[1:] in _BLANKS)


_BLANKS = (" ", "\t", "\r", "\n")  # after a `-`: a YAML list item, not a string


def _system_message(ctx: RuleContext, conv: Conversation) -> Message | None:
    """The system message the pipeline took as the system prompt (else the first one)."""
    if ctx.assembly is not None:
        for entry in ctx.assembly.layout:
            src = entry.message.source
            if entry.segment == "system" and src is not None:
                data = conv.message_data
                if data and data[0] is src:  # most often: placed without a table of all
                    return conv.messages[0]  # type: ignore[return-value]
                return conv.locate(src)  # type: ignore[return-value]
    return next((m for m in conv.messages if m.role is SYSTEM_ROLE), None)


def _identity(rng: TextRange) -> TextRange:
    return rng


# --------------------------------------------------------------------------------------
# instruction-far-from-section


@dataclass(frozen=True, slots=True)
class _Target:
    """The section an instruction is about, and why: what matched it, its score against its
    own and the best unrelated section's."""

    section: int
    label: str  # what the instruction is about: "`web_search`", "citations", …
    words: tuple[str, ...] = ()  # the heading words (stems) the instruction shares
    tool: str | None = None  # the tool it names, when that decided it
    score: float = 0.0  # the section's score
    own: float = 0.0  # the score of its own section
    runner_up: float = 0.0  # the best unrelated section's score
    rival: int | None = None  # that section
    general: bool = False  # it directs the use of tools in general (the tools section)
    kind: str = "topic"  # which of ``KINDS`` decided it (``DEFAULT_KINDS`` are on by default)


# The kinds of finding, by what sent the instruction to its section, and how each is
# described (the diagnostic of a preview kind and the hover say which it is). ``tool`` and
# ``general`` are reported by default: on the seen corpora ``tool`` was right every time,
# and ``general`` is the placement Onyx measured (tool guidance at the top of the prompt,
# 2 of 3 right); the others were mostly wrong (docs/instructions.md, "Default and preview
# findings") and are reported with the `instruction_preview` setting, as ruff reports its
# preview rules.
KINDS = {
    "tool": "it names a tool whose section is titled by the tool's name",
    "tool-title": "it names what that section's title names, which the prompt never calls a tool",
    "tool-home": "it names a tool that section describes",
    "tools": "it names a tool that has no section of its own: the tools section",
    "general": "it directs the use of tools in general: the tools section",
    "topic": "it shares words with that section's heading",
    "phrase": "it shares words with that section's heading, and a phrase with its text",
}
DEFAULT_KINDS = frozenset({"tool", "general"})
# Kinds reported by default at the prompt's opening only (round 12): a known tool's rule
# at the top of the prompt, sent to the section that describes the tool or to the tools
# section, is the placement Onyx measured (tool guidance moved out of the Tools section to
# the top). Elsewhere these kinds stay in preview.
OPENING_KINDS = frozenset({"tool-home", "tools"})
# Kinds reported by default at the opening when the sentence reads as a stray there
# (rounds 16 to 19, ``_Topics.not_stray``): its words are the section's, not the
# opening's. Elsewhere, and at the opening otherwise, they stay in preview.
STRAY_KINDS = frozenset({"topic", "phrase"})
# What a preview finding's message adds: how it was matched.
_KIND_NOTE = {
    "tool-title": "matched by a name only a title calls a tool",
    "tool-home": "matched by a tool that section describes",
    "tools": "matched by a tool without a section of its own",
    "general": "about tools in general",
    "topic": "matched by heading words",
    "phrase": "matched by heading words and a phrase",
}


# Instructions times sections that the rule weighs in one prompt: each instruction is
# scored against every section (``_Topics.target``), so the work grows with their product.
# The largest real prompt of the evaluation corpora has 28,282 (roo-code's issue fixer,
# 60 ms); a 20 KB prompt of 250 sections whose headings share a few words has 125,500
# (0.2 s), and 400 KB of them took `lint` 56 s.
MAX_PLACEMENT_PAIRS = 100_000


def _over_pairs(template: PromptTemplate) -> int:
    """The number of the prompt's instructions when they times its sections are more than
    ``MAX_PLACEMENT_PAIRS`` (the prompt is then not checked), else 0."""
    sections = len(template.sections)
    if len(template.sentences) * sections <= MAX_PLACEMENT_PAIRS:
        return 0  # (without asking which sentences are instructions)
    n = sum(1 for s in template.sentences if is_instruction(s.text))
    return n if n * sections > MAX_PLACEMENT_PAIRS else 0


def _far_instructions(
    ctx: RuleContext, source: _Source, tool_names: Collection[str], limit: int
) -> Iterator[Diagnostic]:
    template = source.template
    sections = template.sections
    if not sections or not template.sentences:
        return
    n = _over_pairs(template)
    if n:
        yield Diagnostic(
            "instruction-far-from-section",
            Severity.INFO,
            f"{n:,} instructions in {len(sections):,} sections: more than this rule weighs "
            f"({MAX_PLACEMENT_PAIRS:,} pairs), so where they sit is not checked",
            source.range(sections[0].heading_range),
            path=source.path,
        )
        return
    topics = _topics(template, tool_names, ctx.settings.section_topics)
    gaps: _Gaps | None = None
    text = template.text
    sentences = template.sentences
    preview = ctx.settings.instruction_preview
    # The overview test counts every sentence a section sends elsewhere, preview or not:
    # what a section is does not change with the setting. By default only the sections
    # of the instructions reported by default are tested (``_overviews`` weighs each
    # section by its own instructions).
    if preview:
        pairs = topics.instruction_targets()
        previews = _overviews(template, [(sentences[k], t) for k, t in pairs])
    else:
        pairs = topics.default_targets()
        owns = dict.fromkeys(sentences[k].section for k, _ in pairs)
        previews = {own for own in owns if own in _overviews(template, topics.section_targets(own))}
    found = [(k, sentences[k], target) for k, target in pairs]
    for k, sentence, target in found:
        by_default = topics.by_default(k, target)
        if not preview and not by_default:
            continue
        if sentence.section in previews or topics.kept(k, target) is not None:
            continue
        section = template.sections[target.section]
        end = _content_end(text, section.range)
        if sentence.range.end <= section.range.start:
            a, b, side = sentence.range.end, section.range.start, "before"
        elif sentence.range.start >= end:
            a, b, side = end, sentence.range.start, "after"
        else:
            continue  # it overlaps the section: a sentence cut by a heading
        if (b - a) * 4 <= limit:  # a code point is at most 4 bytes, and a token 1 byte or more
            continue
        if gaps is None:
            gaps = _Gaps(template, ctx.tokenizer)
        distance = gaps.tokens(a, b)
        if distance <= (limit if target.tool else max(limit, _TOUCHING)):
            continue
        heading = _heading(section)
        about = f" about {target.label}" if target.label else ""
        where, severity = _placement(template, sentence, target.section)
        kind = "" if by_default else f" (preview: {_KIND_NOTE[target.kind]})"
        yield Diagnostic(
            "instruction-far-from-section",
            severity,
            f"instruction{about} sits {where}, {plural(distance, 'token')} "
            f"{side} `{_clip(heading)}`{kind}",
            source.range(sentence.range),
            path=source.path,
            related=(
                Related(
                    source.range(section.heading_range),
                    "the section this instruction is about",
                    source.path,
                ),
            ),
            fix=_fix(template, sentence, target.section, heading) if source.fixable else None,
        )


@dataclass(frozen=True, slots=True)
class InstructionMatch:
    """What ``instruction-far-from-section`` made of one instruction (for the hover)."""

    range: TextRange  # the sentence
    section: int | None  # the section it was matched to, if any
    heading_words: tuple[str, ...]  # words of that heading it shares, as written there
    topic_words: tuple[str, ...]  # its words that are ``section_topics`` words of that section
    tool: str | None  # the tool it names, when that decided the match
    score: float  # the matched section's score
    own: float  # the score of the section it sits in
    runner_up: float  # the best unrelated section's score
    reported: bool  # whether the rule reports it
    reason: str  # why it is, or is not, reported
    tool_home: bool = False  # the section describes ``tool`` without being titled by it
    rival: int | None = None  # the best unrelated section (``runner_up`` is its score)
    general: bool = False  # it directs the use of tools in general: no tool named
    kind: str = "topic"  # which of ``KINDS`` matched it (``DEFAULT_KINDS`` are on by default)
    # Whether that kind is reported without `instruction_preview` here (``DEFAULT_KINDS``;
    # ``OPENING_KINDS`` for a known tool at the prompt's opening).
    default: bool = False


def explain_instruction(
    template: PromptTemplate,
    offset: int,
    tool_names: Collection[str] = (),
    section_topics: Mapping[str, list[str]] | None = None,
    preview: bool = False,
) -> InstructionMatch | None:
    """What the rule decided about the instruction at ``offset``, or None when no
    instruction is there. The decision is the rule's own (``_Topics.target``); only the
    distance filters (``instruction_distance``, a sentence touching its section) are not
    applied here; the overview test over all findings is, over the sentence's section.
    ``preview``: the `instruction_preview` setting (a match of a preview kind is reported
    only with it)."""
    k = next(
        (i for i, s in enumerate(template.sentences) if s.range.start <= offset < s.range.end),
        None,
    )
    if k is None or not template.sections or not is_instruction(template.sentences[k].text):
        return None
    rng = template.sentences[k].range
    if _over_pairs(template):
        why = (
            "the prompt has more instructions times sections than the rule weighs "
            f"({MAX_PLACEMENT_PAIRS:,}): it is not checked"
        )
        return InstructionMatch(rng, None, (), (), None, 0.0, 0.0, 0.0, False, why)
    topics = _topics(template, tool_names, section_topics or {})
    found = topics.target(k)
    match = found or topics.matched
    rejected = topics.rejected
    if found is not None and _in_overview(template, topics, k):
        found, rejected = None, _OVERVIEW
    elif found is not None and (why := topics.kept(k, found)) is not None:
        found, rejected = None, why
    elif found is not None and not preview and not topics.by_default(k, found):
        found, rejected = None, _PREVIEW_ONLY
        if match.kind in STRAY_KINDS and topics.opening(k):
            rejected += f"; at the opening, {topics.not_stray(k, match.section)}"
    if match is None:
        return InstructionMatch(rng, None, (), (), None, 0.0, 0.0, 0.0, False, topics.rejected)
    title = template.sections[match.section].title
    written = tuple(w for w in _WORDS.findall(title) if stem(w.lower()) in set(match.words))
    in_title = {stem(w.lower()) for w in written}
    reason = rejected or "it sits outside the section it is about"
    return InstructionMatch(
        rng,
        match.section,
        written,
        tuple(
            dict.fromkeys(
                w
                for w in _WORDS.findall(template.sentences[k].text)
                if stem(w.lower()) in set(match.words) - in_title
            )
        ),
        match.tool,
        match.score,
        match.own,
        match.runner_up,
        found is not None,
        reason,
        match.tool is not None and topics.tool_homes.get(match.tool) == match.section,
        match.rival,
        match.general,
        match.kind,
        topics.by_default(k, match),
    )


_PREVIEW_ONLY = (
    "a preview finding (matched this way, the rule was mostly wrong on real prompts): "
    "reported with `instruction_preview = true`"
)


# The word indexes of the last prompts, by what they are made of: a template shared by
# the conversations of a project is indexed once in a process (``promptls lint``, an editor
# checking them one after the other), for each set of tool names its conversations give
# (an agent's logs each call some of its tools: tau-bench's 300 airline runs give 15 sets
# of one prompt). An index holds about 5 bytes a character of its prompt, more once hovers
# have asked it, and typing in a prompt makes one for every version: the prompts kept are
# at most 524,288 characters in all (a 100 kB template typed in: 5 kept).
_TOPICS: TextMemo[tuple[str, frozenset[str], tuple[object, ...]], _Topics] = TextMemo(
    64, 1 << 19, size=lambda key: len(key[0])
)


def _topics(
    template: PromptTemplate, tool_names: Collection[str], section_topics: Mapping[str, list[str]]
) -> _Topics:
    """``_Topics(template, tool_names, section_topics)``, remembered for the last few
    (a pure function of the template's text, the tool names and the section topics)."""
    key = (
        template.text,
        frozenset(tool_names),
        tuple((k, tuple(v)) for k, v in section_topics.items()),
    )
    return _TOPICS.get(key, lambda: _Topics(template, tool_names, section_topics))


class _Topics:
    """Decides which section each sentence of a template is about.

    Sections are scored against a sentence's content words (stemmed, stop words out):
    ``STRONG`` per heading or ``section_topics`` word, ``BODY`` per word of the section's
    own prose (the sentence itself left out), both times the word's inverse section
    frequency, and ``TOOL`` for a tool the sentence names. Only words whose inverse
    frequency reaches ``MIN_IDF`` count: a word found in most sections says nothing. The
    winner needs a heading, topic or tool match, two pieces of evidence (one word is a
    coincidence: "Format your answers in Markdown" is not about `## Code Block
    Formatting`), a clear margin over unrelated sections, and no claim from the
    sentence's own section.

    Tool sections are the subsections of a section titled like `Tools`, `Available
    tools` or `Functions` whose heading is a tool name (`## web_search`, `### Shell`,
    `### control_browser Tool Guidelines`); tool guidance refers to other tools all the
    time, so a sentence anywhere under such a section is never sent elsewhere in it.
    """

    STRONG = 3.0
    BODY = 1.0
    TOOL = 8.0
    MIN_IDF = 0.45
    MIN_SCORE = 2.5  # about one heading word found in two sections, or one tool name
    MIN_EVIDENCE = 2  # distinct matching words (a tool name counts twice)
    MARGIN = 2.0  # the winner must score twice any unrelated section
    # … except the section titled by the one tool the sentence names: it must only beat
    # them (on the seen corpora that kind was right every time; executive-ai-assistant's
    # "call the MeetingAssistant" moved to the top scored 22.5 against 16.8 of a section
    # sharing its words)
    TITLED_MARGIN = 1.0
    CONCENTRATION = 0.34  # more than a third of a heading word's uses must lie in its section
    CHAIN_SHARE = 0.15  # the sentence's own section keeps it with this share of the winner
    TOPIC_USES = 2  # a heading's topic word: uses in the section's own prose
    TOPIC_SHARE = 0.5  # and the share of the prompt's uses of it there

    def __init__(
        self,
        template: PromptTemplate,
        tool_names: Collection[str],
        section_topics: Mapping[str, list[str]],
    ) -> None:
        self.template = template
        self.matched: _Target | None = None  # the best section of the last ``target`` call
        self._instruction_targets: list[tuple[int, _Target]] | None = None
        self._default_targets: list[tuple[int, _Target]] | None = None
        self._targets: dict[int, _Target | None] = {}  # ``_target_of``
        self.rejected = ""  # why the last ``target`` call returned None
        sections = template.sections
        # The subtree of each section: [index, end index) in document order.
        self.subtree_end = _subtree_ends(sections)
        self.tool_roots = [
            i for i, s in enumerate(sections) if _TOOLS_TITLE.search(s.title.replace("_", " "))
        ]
        self.in_tools = [False] * len(sections)
        for root in self.tool_roots:
            for i in range(root, self.subtree_end[root]):
                self.in_tools[i] = True
        self.tools_section = _tools_section(template)
        if self.tools_section is None and len(self.tool_roots) == 1:
            self.tools_section = self.tool_roots[0]
        declared = {n.lower() for n in tool_names} | text_tool_names(template)
        # Sections inside `<![CDATA[ … ]]>`: character data, not markup. Roo Code writes
        # its examples of tool calls there (`<apply_diff>` over `<path>` and `<diff>`):
        # a call of a tool, not the section about it, and no place for a rule.
        self.literal = _literal_sections(template)
        self.tool_sections = _tool_sections(template, self.tool_roots, declared, self.literal)
        # Section -> the first tool titling it (a look-up per section and per target, not a
        # scan of every tool: a prompt naming thousands of tools stayed quadratic).
        self.titled_by: dict[int, str] = {}
        for name, i in self.tool_sections.items():
            self.titled_by.setdefault(i, name)
        # Tools known from more than a title: offered, called, set, named as tools or
        # called in the prose, Onyx's own, or titling a section under the tools section.
        # A title alone (`### Self-Contained`, an identifier-like word) makes no tool the
        # default findings can rest on.
        self.known_tools = (
            declared
            | KNOWN_TOOLS
            | {t for t, i in self.tool_sections.items() if sections[i].parent in self.tool_roots}
        )
        self.tool_names = set(self.tool_sections) | declared
        # The sections titled by a known tool: each documents its tool (``target``).
        self.tool_docs = {i for t, i in self.tool_sections.items() if t in self.known_tools}
        self.tool_finders = _tool_finders(
            self.tool_names, _camel_case(template.text, self.tool_names)
        )
        # The tools section, for an instruction about tools in general ("Prefer tools over
        # your own knowledge", "Functions must be used to …"): "functions" counts only where
        # the prompt calls its tools that (`# Available functions`).
        self.general = self.tools_section
        self.functions = (
            self.general is not None and "function" in sections[self.general].title.lower()
        )
        self._section_topics = section_topics
        self.sentence_tools = self._sentence_tools()
        # ``described``: the tools whose home defines them or names them twice or more
        self.described: set[str] = set()
        self.tool_homes = self._tool_homes()
        # Which other sections each sentence names by a heading word no other heading
        # has: a section whose sentences name two or more others previews them.
        self.by_section: dict[int | None, list[int]] = defaultdict(list)
        for j, s in enumerate(template.sentences):
            self.by_section[s.section].append(j)
        self._names: dict[int, frozenset[int]] = {}  # ``names``, for the sentences asked
        # ``_general_guidance_elsewhere``: section -> sentences of its subtree directing
        # tools in general, counted when first asked
        self._guidance: Counter[int] | None = None
        # ``_shared_phrase``: the phrases of each section's subtree, for the sections asked
        self._section_phrases: dict[int, Counter[tuple[str, str]]] = {}
        # The prompt's first heading, when nothing but blank lines comes before it: the
        # text under it is the prompt's opening as much as text before any heading is.
        self.title_intro = (
            0
            if sections
            and not template.text[template.body_range.start : sections[0].range.start].strip()
            else None
        )

        # The prompt's first section, when at most two sentences come before it
        # (`<ROLE>`, `<intro>` after "You are …"): it introduces the prompt, as the
        # opening does, and previews the later sections in passing.
        self.first_intro = 0 if sections and len(self.by_section[None]) <= 2 else None

    # The word index, made by ``_index`` when one of these is first read (``__getattr__``):
    # an instruction's target is weighed with it, and a prompt whose instructions a default
    # run weighs are all settled by the tool they name (``settled_by_tool``) never needs it.
    sentence_words: list[frozenset[str]]
    title_size: list[int]
    topic_words: list[set[str]]
    heading_uses: Counter[str]
    title_df: Counter[str]
    strong: list[set[str]]
    wrappers: set[int]
    examples: set[int]
    preamble: Counter[str]
    body: list[Counter[str]]
    total: Counter[str]
    idf: dict[str, float]
    title_idf: dict[str, float]
    strong_index: dict[str, list[int]]
    body_index: dict[str, list[tuple[int, int]]]
    _INDEX = frozenset(
        {
            "sentence_words",
            "title_size",
            "topic_words",
            "heading_uses",
            "title_df",
            "strong",
            "wrappers",
            "examples",
            "preamble",
            "body",
            "total",
            "idf",
            "title_idf",
            "strong_index",
            "body_index",
        }
    )

    def __getattr__(self, name: str) -> Any:
        if name in _Topics._INDEX:
            self._index()
            return self.__dict__[name]
        raise AttributeError(name)

    def _index(self) -> None:
        """The sentences' content words and the sections' heading and prose words, with
        their inverse frequencies (what ``target`` scores with): made whole, then set at
        once (a hover and an analysis on two threads may share the prompt's index)."""
        template = self.template
        sections = template.sections
        section_topics = self._section_topics
        sentence_words = [_content_words(s.text) for s in template.sentences]
        titles = [
            _title_words(
                s,
                split=s.kind in ("xml", "caps", "rule") and i not in self.titled_by,
            )
            for i, s in enumerate(sections)
        ]
        title_size = [len(t) for t in titles]
        topic_words = [_topic_words(s, section_topics) for s in sections]
        strong = [t | topics for t, topics in zip(titles, topic_words, strict=True)]
        body: list[Counter[str]] = [Counter() for _ in sections]
        preamble: Counter[str] = Counter()
        for s, words in zip(template.sentences, sentence_words, strict=True):
            (preamble if s.section is None else body[s.section]).update(words)
        n_units = len(sections) + (1 if preamble else 0)
        df: Counter[str] = Counter(preamble.keys())
        for i in range(len(sections)):
            df.update(strong[i] | body[i].keys())
        inverse = {
            w: idf
            for w, n in df.items()
            if (idf := math.log((n_units + 1) / (n + 0.5))) >= self.MIN_IDF
        }
        # A heading word stays salient while few headings have it, however many bodies
        # use it: in a short prompt the topic of a section is mentioned everywhere.
        # Headings of one family count once: `## HOW TO READ A ROLLOUT` inside `# Phase 1
        # (Rollout Extraction)` is part of the one place the prompt speaks of rollouts.
        heading_uses: Counter[str] = Counter()
        for words in strong:
            heading_uses.update(words)
        title_df = Counter(heading_uses)
        for i, sec in enumerate(sections):
            if sec.parent is None:
                continue
            for w in strong[i]:
                if heading_uses[w] > 1 and any(w in strong[a] for a in self._chain(sec.parent)):
                    title_df[w] -= 1
        # Sections that hold (nearly) the whole prompt name no topic of a part of it: a
        # title over everything, the first of its level. A later heading that holds most
        # of the prompt by a quirk of its levels (`# AGENTS.md spec` after `# How you
        # work`, over every `##` that follows) still names its own topic.
        body_len = max(1, len(template.text) - template.body_range.start)
        wrappers = {
            i
            for i, sec in enumerate(sections)
            if (sec.range.end - sec.range.start) * 10 >= body_len * 9
            and not any(o.parent == sec.parent for o in sections[:i])
            and i not in self.tool_roots
        }
        # Sections of examples (`# Sample Phrases` > `## Deflecting a Prohibited Topic`,
        # `<examples>`): they show what to say, they are no place for a rule.
        examples: set[int] = set(self.literal)
        for i, sec in enumerate(sections):
            if _EXAMPLES_TITLE.search(sec.title.replace("_", " ")) or (
                sec.parent is not None and sec.parent in examples
            ):
                examples.add(i)
        total: Counter[str] = Counter(preamble)
        for counts in body:
            total.update(counts)
        # A heading word weighs by how few headings have it, however many bodies use it.
        title_idf = {w: 1.0 + math.log(len(sections) / n) for w, n in title_df.items()}
        for w, n in title_df.items():
            if w not in inverse and n * 3 <= len(sections):
                inverse[w] = max(math.log((len(sections) + 1) / (n + 0.5)) / 2, self.MIN_IDF)
        strong_index: dict[str, list[int]] = defaultdict(list)
        body_index: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for i in range(len(sections)):
            for w in strong[i]:
                strong_index[w].append(i)
            for w, n in body[i].items():
                if w in inverse and w not in strong[i]:
                    body_index[w].append((i, n))
        self.__dict__.update(
            sentence_words=sentence_words,
            title_size=title_size,
            topic_words=topic_words,
            heading_uses=heading_uses,
            title_df=title_df,
            strong=strong,
            wrappers=wrappers,
            examples=examples,
            preamble=preamble,
            body=body,
            total=total,
            idf=inverse,
            title_idf=title_idf,
            strong_index=strong_index,
            body_index=body_index,
        )

    def names(self, j: int) -> frozenset[int]:
        """The sections sentence ``j`` names by a heading word no other heading has (not
        its own, nor one around or inside it); worked out when first asked."""
        named = self._names.get(j)
        if named is None:
            own = self.template.sentences[j].section
            named = frozenset(
                i
                for w in self.sentence_words[j]
                if self.title_df[w] == 1 and len(w) >= 4
                for i in self.strong_index.get(w, ())[:1]  # the outermost of the family
                if own is None or not self._related(i, own)
            )
            self._names[j] = named
        return named

    def instruction_targets(self) -> list[tuple[int, _Target]]:
        """``(k, target(k))`` for each instruction ``k`` of the prompt that has a target
        (made once: an index shared by the conversations of a template, ``_topics``)."""
        if self._instruction_targets is None:
            self._instruction_targets = [
                (k, t)
                for k, s in enumerate(self.template.sentences)
                if is_instruction(s.text) and (t := self._target_of(k)) is not None
            ]
        return self._instruction_targets

    def default_targets(self) -> list[tuple[int, _Target]]:
        """The pairs of ``instruction_targets`` whose target is reported by default
        (``by_default``), in the same order, weighing only the instructions that can have
        such a target: a default kind names a tool, or sits at the prompt's opening (the
        kinds of tools in general, and of a known tool there). The others are weighed
        only for the overview test of these ones' sections (``section_targets``)."""
        if self._default_targets is not None:
            return self._default_targets
        if self._instruction_targets is not None:
            res = [(k, t) for k, t in self._instruction_targets if self.by_default(k, t)]
            self._default_targets = res
            return res
        res = []
        for k, s in enumerate(self.template.sentences):
            if (
                (self.sentence_tools[k] or self._opening(k))
                and is_instruction(s.text)
                and not self.settled_by_tool(k)
            ):
                t = self._target_of(k)
                if t is not None and self.by_default(k, t):
                    res.append((k, t))
        self._default_targets = res
        return res

    def section_targets(self, own: int | None) -> list[tuple[Sentence, _Target]]:
        """``(sentence, target)`` for each instruction with a target that sits directly in
        section ``own`` (None: the opening): what ``_overviews`` reads of that section."""
        sentences = self.template.sentences
        return [
            (sentences[j], t)
            for j in self.by_section[own]
            if is_instruction(sentences[j].text) and (t := self._target_of(j)) is not None
        ]

    def _named_tools(self, k: int) -> set[str]:
        """The tools sentence ``k`` names, but those it names only in an aside: a tool
        named there is mentioned in passing ("Write the answer in plain text (the
        web_search results stay hidden)"), not what the instruction directs."""
        tools = set(self.sentence_tools[k])
        text = self.template.sentences[k].text
        if tools and _has_aside(text):
            core_text = _without_asides(text)
            tools = {t for t in tools if t in core_text}
        return tools

    def settled_by_tool(self, k: int) -> bool:
        """Whether sentence ``k`` has no target (``target``) for a reason its tool alone
        gives: it names one known tool, whose titled section holds it (or both lie in tool
        guidance). ``target`` sends such a sentence to that section whatever the scores,
        and finds it there; this tells so without the word index."""
        tools = self._named_tools(k)
        if len(tools) != 1:
            return False
        (tool,) = tools
        home = self.tool_sections.get(tool)
        if home is None or tool not in self.known_tools:
            return False
        own = self.template.sentences[k].section
        return home in self._chain(own) or self._both_in_tools(home, own)

    def _target_of(self, k: int) -> _Target | None:
        """``target(k)``, made once per sentence (a call answered from the cache leaves
        ``matched`` and ``rejected`` as they are)."""
        if k not in self._targets:
            self._targets[k] = self.target(k)
        return self._targets[k]

    def target(self, k: int) -> _Target | None:
        """The section sentence ``k`` is about when it clearly lies outside it, else None.

        Every section is scored against the sentence: ``TOOL`` for the tool it names,
        ``STRONG`` times the title inverse frequency per heading (or ``section_topics``)
        word, ``BODY`` times the inverse section frequency per word the section's own
        prose uses. Only a section with a heading or tool match can win. The winner must
        not be the sentence's own section or one around or inside it; a heading word
        shared by another heading of the prompt needs a second piece of evidence; a bold
        label or a long title needs two of its words, or its topic word
        (``_topic_word``: one its own prose repeats and mostly holds); the
        winner must beat every unrelated section by ``MARGIN``; and the sentence's own
        sections must not claim it (a heading match, or a body score of ``CHAIN_SHARE``
        of the winner's: a restatement inside an on-topic section).
        """
        sentence = self.template.sentences[k]
        all_words = self.sentence_words[k]
        self.matched = None
        self.rejected = ""
        tools = self._named_tools(k)
        # Tools in general are judged at the opening only, the placement Onyx measured
        # (90 % in the tools section, 30 % at the top): inside a section, "Use tools for
        # actions" or "**Assess Available Tools**" is a step of that section's own work.
        general = not tools and self._opening(k) and self._general(k)
        if not tools and not general and self.strong_index.keys().isdisjoint(all_words):
            return self._no("it names no tool and shares no heading word with any section")
        if tools and (m := _DEFINITION_LINE.match(sentence.text)) and m.group(1).lower() in tools:
            # `- fetch_url — fetch a public URL …`: a line of a list of tools says what the
            # tool does; it is the tool's description, not a rule placed away from it (five
            # of Data Formulator's false findings, its tool list at the top).
            return self._no("it defines the tool it names: a description, not a rule about it")
        if (
            sentence.section is None
            and k == len(self.template.sentences) - 1
            and k > 0
            and self.template.sentences[k - 1].section is not None
            and sentence.text.rstrip().endswith(":")
        ):
            # Round 14: the prompt's last sentence, after its last block and ending with a
            # colon, leads in to what is sent after the prompt ("Call the FollowUpQuery Tool
            # to generate a reflection for this request:" after `<Task>`,
            # local-deep-researcher, labelled in place): it sits where it must.
            return self._no("it ends the prompt, leading in to what follows it")
        if not tools and sentence.section is not None and self.in_tools[sentence.section]:
            return self._no("it sits in tool guidance, which may speak of any topic")
        score: dict[int, float] = defaultdict(float)
        evidence: dict[int, list[str]] = defaultdict(list)
        strong_hit: set[int] = set()
        title_words: dict[int, list[str]] = defaultdict(list)
        # The score the word "tools" itself gives a section, for an instruction about tools
        # in general: whether its own section is about tools is ``_tools_elsewhere``'s call.
        passing: dict[int, float] = defaultdict(float)
        # A heading word inside a parenthesis is an example, not the instruction's object
        # ("NEVER execute destructive commands (delete, format, rm -rf)" is not about
        # formatting): it counts as a word of the prose only.
        core = (
            _core_words(sentence.text)
            if not self.strong_index.keys().isdisjoint(all_words) and _has_aside(sentence.text)
            else all_words
        )
        heading_part: dict[int, float] = defaultdict(float)
        # In a fixed order: the scores are sums of floats, and a set's order changes with
        # the process's hash seed (round 10: holmesgpt's "If logs commands have limits …",
        # moved to the top, went to `## Logs` or `# Datadog Logs Toolset` by the seed).
        for w in sorted(all_words):
            for i in self.strong_index.get(w, ()) if w in core else ():
                score[i] += self.STRONG * self.title_idf[w]
                heading_part[i] += self.STRONG * self.title_idf[w]
                title_words[i].append(w)
                if self.title_df[w] == 1 and w not in self.topic_words[i]:
                    strong_hit.add(i)  # a heading word no other heading has
            idf = self.idf.get(w)
            if idf is None:
                continue
            for i, n in self.body_index.get(w, ()):
                if i == sentence.section:
                    n -= 1  # leave the sentence itself out
                if n > 0:
                    score[i] += self.BODY * idf
                    evidence[i].append(w)
                    if general and w in _GENERAL_STEMS:
                        passing[i] += self.BODY * idf
        # A heading word that other headings share needs a second one, or body evidence.
        for i, ws in title_words.items():
            if len(ws) >= 2 or (ws and evidence.get(i)):
                strong_hit.add(i)
        tool_target = self.general if general else self._tool_section(tools)
        if tool_target is not None:
            score[tool_target] += self.TOOL
            strong_hit.add(tool_target)
        strong_hit -= self.wrappers
        strong_hit -= self.examples
        # A bold title line labels the paragraph or list under it: one shared word with a
        # label is a coincidence ("Stop when you can answer" is not about **Stop
        # Immediately When**); it takes two, the tool it is titled by, or the label's
        # topic word (one its paragraph repeats: **Section Headers** over "Keep headers
        # short", "Always start headers with …").
        strong_hit -= {
            i
            for i in strong_hit
            if self.template.sections[i].kind == "bold"
            and i != tool_target
            and len(title_words.get(i, ())) < 2
            and not self._whole_label(i, title_words.get(i, ()), k)
            and self._topic_word(i, title_words.get(i, ()), k) is None
        }
        if not strong_hit:
            return self._no("no heading or tool points at one section")
        best = max(strong_hit, key=lambda i: (score[i], -i))
        # One tool named, whose section is titled by its name: that section is what the
        # instruction is about, whatever words it shares with others (aworld's "image_server
        # can ONLY do basic OCR …, CANNOT do analysis or reasoning" is not about
        # `<reason-guide>`), and no rival's words make it a close call.
        titled = (
            tool_target is not None
            and len(tools) == 1
            and self.tool_sections.get(next(iter(tools))) == tool_target
            and next(iter(tools)) in self.known_tools
        )
        # Round 14: at the opening, the section that describes the one known tool named
        # (defines it, or names it twice or more) is its section too, whatever heading
        # words another shares (holmesgpt's "Your FIRST tool call MUST be TodoWrite …",
        # moved to the top, went to `Tool/function calls`). Named there once, the tool is
        # only used there (perplexica's speed researcher: "Call done when you have
        # gathered enough …" in `<response_protocol>`, where "When you are finished, you
        # must call the `done` tool" at the top is labelled in place).
        homed = (
            not titled
            and tool_target is not None
            and len(tools) == 1
            and self._opening(k)
            and next(iter(tools)) in self.known_tools
            and next(iter(tools)) in self.described
            and self.tool_homes.get(next(iter(tools))) == tool_target
        )
        if titled or homed:
            best = tool_target  # type: ignore[assignment]
        best_score = score[best]
        general_target = general and best == tool_target
        first_tool = next(iter(sorted(tools)), None) if best == tool_target else None
        self.matched = _Target(
            best,
            self._label(best),
            tuple(sorted(set(title_words.get(best, ())))),
            first_tool,
            best_score,
            general=general_target,
            kind=self._kind(best, first_tool, general_target, k),
        )
        if best_score < self.MIN_SCORE:
            return self._no("the match is too weak")
        chain = self._chain(sentence.section)
        if best in chain or self._both_in_tools(best, sentence.section):
            return self._no("it sits in the section it is about")
        if best in self.tool_docs and any(c in self.tool_docs for c in chain):
            # A section titled by a known tool documents that tool, and tool guidance
            # compares tools all the time (round 10: avante's `# write_to_file` >
            # `## Important Considerations`, "If you only need to make small changes …,
            # consider using str_replace instead", a false default finding of
            # `prompts-heldout11`: it says when not to write the whole file).
            return self._no("it sits in another tool's section, which compares the tools")
        if self._sibling_labels(best, sentence.section):
            return self._no("it sits under another bold label of the same section")
        if (
            best != tool_target
            and len(title_words[best]) < 2
            and not evidence.get(best)
            and not any(
                self.title_df[w] == 1 and w not in self.topic_words[best] for w in title_words[best]
            )
        ):
            return self._no(
                "it shares one heading word that other headings share too, and nothing else"
            )
        if (
            tool_target != best
            and 2 * len(title_words[best]) < min(self.title_size[best], 4)
            and self._topic_word(best, title_words[best], k) is None
            # At the opening one heading word no other heading has, half of whose uses
            # lie in the section, is enough: the opening has no topic of its own.
            and not (
                self._opening(k)
                and any(
                    self.title_df[w] == 1 and self._concentrated(w, best, k, 0.5)
                    for w in title_words[best]
                )
            )
            # Round 24: nor does one heading word the section's prose backs with two more
            # of the sentence's words ("Read each file from glob results" at the opening,
            # `### Step 0: Expand File Patterns (Subagent-specific)`, whose steps say "glob"
            # and "read").
            and not (self._opening(k) and len(set(evidence.get(best, ()))) >= 2)
        ):
            return self._no("it shares too few of that section's heading words")
        if tool_target != best and not any(
            self._concentrated(w, best, k)
            or (
                self._opening(k)
                and self.title_df[w] == 1
                and sum(self.body[j][w] for j in range(best, self.subtree_end[best])) >= 2
            )
            for w in title_words[best]
        ):
            return self._no(
                "the prompt uses that heading word throughout, not only in that section"
            )
        if sentence.section is not None and _RECAP.search(
            self.template.sections[sentence.section].title.replace("_", " ")
        ):
            return self._no("it sits in a recap, which repeats the rules on purpose")
        if _CROSS_REFERENCE.search(sentence.text) or (
            best != tool_target
            and best not in self.titled_by
            and self._names_title(sentence.text, best)
        ):
            return self._no("it points at another part of the prompt on purpose")
        if (
            sentence.section is not None
            and sentence.section != self.title_intro
            and self._inside(best, sentence.section)
        ):
            # The intro of a section speaks for its parts ("For longer tasks, give brief
            # progress updates" under `# Core Behavior`, over `## Doing Tasks`); the
            # intro under the prompt's title is its opening, and is judged.
            return self._no("it sits in the intro of a section around the one it is about")
        if best == tool_target and self._tool_elsewhere(k, tools):
            return self._no("its own section speaks of that tool too")
        if general and best == tool_target and self._tools_elsewhere(k):
            return self._no("its own section speaks of tools too")
        if general and best == tool_target and self._general_guidance_elsewhere(best):
            return self._no("the prompt directs tools in general in another section")
        own = 0.0
        for c in chain:
            if self._inside(best, c):
                continue  # a section around both (the prompt's title) takes no side
            if c in strong_hit or title_words.get(c):
                return self._no("its own heading names what it is about")
            own = max(own, score.get(c, 0.0) - passing.get(c, 0.0))
            if self.in_tools[c] and evidence.get(c):
                return self._no("it is tool guidance about the tool's own output")
        if sentence.section is None:
            # The topic word itself was weighed above (``_on_topic``): the opening names
            # most topics in passing.
            own = sum(
                self.idf.get(w, 0.0)
                for w in sorted(all_words)
                if self.preamble[w] > 1 and w not in title_words[best]
            )
        # An instruction sent to a section by the one tool it names is judged by that tool
        # (``_tool_elsewhere``), not by the words of that section's title or topics: a
        # `# Notes` list that says "search" twice is no place for `crawl_tool`'s rule.
        by_tool = len(tools) == 1 and best == tool_target
        if self._previews(k, best):
            return self._no("its section is an overview that previews later sections")
        mine = self.preamble if sentence.section is None else self.body[sentence.section]
        # An instruction that names a tool at the opening (the placement Onyx measured) is
        # judged by the tool (``_tool_elsewhere``), not by the opening's use of a word of
        # the tool's heading ("search" for "1. `search_docs` - Documentation Search").
        if not (
            best == tool_target
            and (
                general
                or (tools and (self._opening(k) or sentence.section == self.first_intro))
                or by_tool
            )
        ) and any(self._on_topic(mine, w, best, sentence.section) for w in title_words[best]):
            return self._no("its own section speaks of that topic throughout")

        # A rival's heading words count only when it could win on them: the prompt uses one
        # of them mostly there, or its prose backs them ("… unless the package manager
        # can't handle the change" is no claim of `## Error Handling`, which never says
        # "handle"); else only its prose's score counts.
        def best_rival(candidates: Iterable[int]) -> tuple[int | None, float]:
            """The best of ``candidates`` by their rival score, from the highest full
            score down: each credibility test only while one could still win."""
            top, value = None, 0.0
            for i in sorted(candidates, key=lambda i: (-score[i], i)):
                if top is not None and score[i] < value:
                    break
                credible = self._credible(i, title_words, evidence, tool_target, k)
                v = score[i] if credible else score[i] - heading_part[i]
                if top is None or (v, -i) > (value, -top):
                    top, value = i, v
            return top, value

        unrelated = [i for i in score if i not in chain and not self._related(i, best)]
        rival, runner_up = best_rival(unrelated)
        self.matched = replace(self.matched, own=own, runner_up=runner_up, rival=rival)
        # A known tool's titled section is judged by the tool alone (``_tool_elsewhere``):
        # the words its own section shares with the instruction say nothing of where
        # the tool's rule belongs (round 10: avante's "Don't just provide code
        # suggestions, use the `str_replace` tool …" in `RULES`, labelled misplaced in
        # `prompts-heldout11`, was kept by "code" and "users"; round 9 did so at the
        # opening only).
        if own >= self.CHAIN_SHARE * best_score and not titled:
            return self._no("its own section shares enough of its words")
        # At the opening (the placement Onyx measured) a tool's titled section is judged by
        # the tool alone; elsewhere it must beat the unrelated sections (perplexica's "Call
        # done only after …" in `<response_protocol>` is outscored by an example of it).
        margin = self.MARGIN
        if titled:
            margin = 0.0 if self._opening(k) else self.TITLED_MARGIN
        elif homed:
            margin = 0.0
        elif (
            by_tool
            and self._opening(k)
            and next(iter(tools)) in self.known_tools
            and self.tool_homes.get(next(iter(tools))) == best
        ):
            # Round 12: a known tool's rule at the opening, sent to the section that
            # describes the tool, must beat the others, not twice, as for a tool's titled
            # section elsewhere.
            margin = self.TITLED_MARGIN
        elif general_target:
            # Tools in general, judged at the opening only: the tools section must beat the
            # others, not twice (round 11: deepagents' "… make all tool calls in a single
            # response", moved to the top, scored 33.0 for `## Tool Usage` against 20.9 for
            # `### Human-in-the-Loop Tool Approval`, which says "tool call" too; no finding
            # on any seen set's originals changed).
            margin = self.TITLED_MARGIN
        if best_score < margin * runner_up:
            # Two labels of one section (`**Pattern for codebase exploration**`, `**When to
            # paginate**` under `## File Reading Best Practices`) fit it alike: it is about
            # the section that holds both, when that section is a part of the prompt, not
            # most of it, and no section outside it comes close.
            parent = self.template.sections[best].parent
            if (
                rival is None
                or parent is None
                or self.template.sections[rival].parent != parent
                or not self._sibling_labels(best, rival)
                or parent in chain
                or not self._part(parent)
            ):
                return self._no("another section fits it about as well")
            _, outside = best_rival(i for i in unrelated if not self._inside(i, parent))
            if best_score < self.MARGIN * outside:
                return self._no("another section fits it about as well")
            best = parent
        why = sorted(set(title_words.get(best, ())))
        tool = next((t for t in sorted(tools) if self.tool_sections.get(t) == best), None)
        if tool is None and best == tool_target and tools:
            tool = sorted(tools)[0]
        label = self._label(best)
        if tool is not None and self.tool_homes.get(tool) == best:
            label = f"`{tool}`"  # the section describes the tool without naming it
        return _Target(
            best,
            label,
            tuple(why),
            tool,
            best_score,
            own,
            runner_up,
            rival,
            general_target,
            self._kind(best, tool, general_target, k),
        )

    def by_default(self, k: int, target: _Target) -> bool:
        """Whether the rule reports instruction ``k``'s ``target`` without
        `instruction_preview`: a kind of ``DEFAULT_KINDS``; of ``OPENING_KINDS`` for a
        known tool at the prompt's opening; or, at the opening too, a heading-word match
        (``topic``, ``phrase``) that reads as a stray (``not_stray``)."""
        if target.kind in DEFAULT_KINDS:
            return True
        if not self._opening(k):
            return False
        if target.kind in OPENING_KINDS:
            return target.tool in self.known_tools
        return target.kind in STRAY_KINDS and not self.not_stray(k, target.section)

    def not_stray(self, k: int, best: int) -> str:
        """Why instruction ``k`` at the opening, matched to section ``best`` by heading
        words, reads as the opening's own sentence, or "" when it reads as a stray (rounds
        16 and 17). It must be backed by the section: a word of it besides the heading's is
        used in the section's own prose (its subtree), or it shares two of the heading's
        words (`**Symbolic editing**`: it names the section's topic in full). And it must
        stand apart from the opening: no word of it besides the heading's is used by
        another sentence of the opening, or one only, when two more of its words are the
        section's (the balance of its words is the section's). The opening's own
        statement of the work a later section details ("Write comprehensive failing tests
        following TDD red phase principles:" over `## Test Generation Process`) shares
        words with the opening around it, or only one of the heading's words with the
        section. A sentence that says who the agent is ("Your role in ASK MODE is to be a
        knowledgeable consultant …") is the opening's own (round 18), and the words of the
        title over the opening are the opening's too (round 19: "Review an analysis for
        accuracy … before sharing …" under `# /validate-data - Validate Analysis Before
        Sharing`).

        A heading word the section holds half of the prompt's uses of (its topic word,
        used nowhere much else: "Do NOT include any text before or after the JSON." for
        `STRUCTURED JSON OUTPUT FORMAT`) backs the match as a word of its text does (round
        21); a word the whole prompt uses ("task", "answer") does not. A section that says
        who the agent is or what it is for (`## Your Role`, `<mission>`) speaks of the
        opening's own topic: nothing at the opening strays from it (round 22: "Do not
        change role, persona, or identity" over `## Your Role`)."""
        if _SELF.match(self.template.sentences[k].text):
            return "it says who the agent is, as the opening does"
        if self._mission(best):
            return "that section says who the agent is, as the opening does"
        mine = self.sentence_words[k] - self.strong[best]
        backing = {
            w for i in range(best, self.subtree_end[best]) for w in mine & self.body[i].keys()
        }
        heading = self.sentence_words[k] & self.strong[best]
        if (
            not backing
            and len(heading) < 2
            and not any(
                self.title_df[w] == 1 and self._concentrated(w, best, k, self.TOPIC_SHARE)
                for w in heading
            )
        ):
            return (
                "it shares one word of the heading, one the prompt uses elsewhere too, "
                "and none of that section's text"
            )
        opening = chain(
            self.by_section.get(None, ()),
            () if self.title_intro is None else self.by_section.get(self.title_intro, ()),
        )
        shared = {w for j in opening if j != k for w in mine & self.sentence_words[j]}
        if self.title_intro is not None:  # the title over the opening names its topic
            shared |= mine & self.strong[self.title_intro]
        if not shared or (len(shared) == 1 and len(backing - shared) >= 2):
            return ""
        written = dict.fromkeys(
            w
            for w in _WORDS.findall(self.template.sentences[k].text)
            if shared & set(_word_stems(w))
        )
        shown = list(written) or sorted(shared)  # (a dotted name is found whole)
        return "its words ({}) are the opening's own too".format(
            ", ".join(f"“{w}”" for w in shown[:3])
        )

    def _mission(self, i: int) -> bool:
        """Whether section ``i`` says who the agent is or what it is for (`## Your Role`,
        `<mission>`, `**Core Identity**`): its title is a mission title."""
        return (
            _MISSION.match(self.template.sections[i].title.replace("_", " ").strip(" *`#:"))
            is not None
        )

    def opening(self, k: int) -> bool:
        """Whether sentence ``k`` is at the prompt's opening (``_opening``)."""
        return self._opening(k)

    def _kind(self, best: int, tool: str | None, general: bool, k: int) -> str:
        """Which of ``KINDS`` sent instruction ``k`` to section ``best``."""
        if general:
            return "general"
        if tool is None:
            return "phrase" if self._shared_phrase(k, best) else "topic"
        if self.tool_sections.get(tool) == best:
            return "tool" if tool in self.known_tools else "tool-title"
        return "tool-home" if self.tool_homes.get(tool) == best else "tools"

    def _shared_phrase(self, k: int, best: int) -> bool:
        """Whether instruction ``k`` shares a phrase with section ``best``'s prose: two
        content words in a row, in one clause (``_phrases``), that another sentence of its
        subtree also has in a row, not both words of its heading (round 11: evidence beyond
        heading words, "Cite the source URL" and "… the source URL of each claim"; a
        preview kind, ``phrase``)."""
        mine = _phrases(self.template.sentences[k].text)
        if not mine:
            return False
        theirs = self._section_phrases.get(best)
        if theirs is None:
            # How many sentences of the subtree have each phrase: counted once per section
            # (the instruction's own is taken off below when it sits there).
            theirs = Counter()
            for i in range(best, self.subtree_end[best]):
                for j in self.by_section.get(i, ()):
                    theirs.update(_phrases(self.template.sentences[j].text))
            self._section_phrases[best] = theirs
        own = self.template.sentences[k].section
        inside = own is not None and best <= own < self.subtree_end[best]
        # Not a phrase of its heading's words alone (as written, `snake_case` parts apart):
        # that is what the heading says already ("Organize Orphaned Images" under `###
        # Orphaned Image Organization`, "running shell commands" and
        # `<running_shell_commands_info>`, 4 of round 11's first 11 such findings, all wrong).
        heading = self.template.sections[best].title
        title = self.strong[best] | _content_words(re.sub(r"[_\-]", " ", heading))
        return any(theirs[p] > inside and not (p[0] in title and p[1] in title) for p in mine)

    def kept(self, k: int, target: _Target) -> str | None:
        """Why sentence ``k``, sent to ``target`` by ``target``, is still not reported, or
        None: a numbered step of one procedure that speaks of a sibling step, a sentence that
        previews several sections, or a plain statement of work in the prompt's mission
        or role section ("You also have to generate a standalone follow-up question" in
        `<role>`; not a rule: no code, no "never", "only", "always" …). Tool
        instructions are judged, the placement Onyx measured, unless they are a bare step
        of a procedure (``_procedure_step``: a step that uses a tool is in place). Asked
        after the overview test, which counts every sentence ``target`` sends
        elsewhere."""
        own = self.template.sentences[k].section
        text = self.template.sentences[k].text
        start = self.template.sentences[k].range.start
        if (
            _statement_of_work(text)
            and not _ONLY.search(text)
            and _procedure_step(self.template.text, start)
        ):
            # Round 15: a bare step of a procedure (an item of a numbered list, or of a
            # list whose items each open with a bold label, three items or more) is where
            # the procedure does its work, a tool's use included: "2. Use the list_clusters
            # tool to discover available Redshift instances." under `## Getting Started`
            # (awslabs' Redshift server) and "- **Inform**: Gather relevant information
            # using appropriate tools." in the working loop at code-assistant's opening,
            # the three default findings of `prompts-heldout16`, all wrong. A rule in such
            # a list ("You must use …", "Always …", "When …, use …", "Only use …") is
            # still judged.
            return "it is a step of a procedure, which uses the tool where the step comes"
        if self._opening(k) and target.kind != "tool" and _REDIRECT.search(text) is not None:
            # Round 23: "For single-value answers …, use `querychat_query` instead" at the
            # opening of a tool's description says what the prompt's own subject is not
            # for: the opening's topic, not a rule strayed from the other tool's section.
            # Where the prompt documents that tool in a section titled by its name ("Do
            # not use this tool …; use `batch_get_documents` instead" at the top of a prompt
            # with a `batch_get_documents` section), choosing between the two is the
            # tools' sections' business.
            return (
                "it sends the reader to another tool instead: the limits of the prompt's "
                "own subject"
            )
        if target.tool is not None or target.general:
            return None  # a tool's instruction is the placement Onyx measured
        if self._sibling_steps(target.section, self.template.sentences[k].section):
            return "it sits in a sibling step of the same procedure"
        if self._previews_several(k, target.section):
            return "it names several other sections: it previews them"
        if (
            own is not None
            and len(target.words) <= 1
            and _statement_of_work(text)
            and _list_item(self.template.text, start)
        ):
            # A bare task ("Find knowledge boundaries") in a list of the section's work,
            # sharing one word with a heading: workflow phases and sibling checklists
            # share their vocabulary; it is no evidence the task belongs there.
            return "it is a task in a list of tasks that shares one heading word with that section"
        if own is not None and self._mission(own) and _in_identity(self.template, k):
            # `<role>` "You are a Senior Research Analyst … You must use the search
            # tools": in the role section, the paragraph that says who the agent is names
            # the prompt's themes, rules words and all.
            return "it continues the paragraph of the role that says who the agent is"
        if (
            own is not None
            and "`" not in text
            and not _RULE_WORDS.search(text)
            and self._mission(own)
        ):
            return "it sits in the prompt's mission, which states the work later sections detail"
        return None

    def _no(self, why: str) -> None:
        self.rejected = why  # why the last sentence was not sent elsewhere (for the hover)

    def _credible(
        self,
        i: int,
        title_words: Mapping[int, list[str]],
        evidence: Mapping[int, list[str]],
        tool_target: int | None,
        k: int,
    ) -> bool:
        """Whether section ``i``'s heading match could stand as a rival: it is the tools'
        section, its prose backs the heading words, two of them match, or one is used in
        its own prose too and mostly there (``_concentrated``, as the winner's must be).
        A heading word its prose never uses is a coincidence (`## Error Handling` for
        "unless the package manager can't handle it")."""
        ws = title_words.get(i, ())
        sentence = self.template.sentences[k]
        return (
            i == tool_target
            or bool(evidence.get(i))
            or len(ws) >= 2
            or any(
                sum(self.body[j][w] for j in range(i, self.subtree_end[i]))
                - (sentence.section is not None and self._inside(sentence.section, i))
                > 0
                and self._concentrated(w, i, k)
                for w in ws
            )
        )

    def _part(self, i: int) -> bool:
        """Whether section ``i`` is a part of the prompt: under half of its text."""
        rng = self.template.sections[i].range
        body_len = len(self.template.text) - self.template.body_range.start
        return (rng.end - rng.start) * 2 < body_len

    def _whole_label(self, i: int, words: list[str], k: int) -> bool:
        """Whether the sentence shares the whole of bold label ``i``'s one-word title
        (`**Monospace**`, "Never mix monospace and bold markers"), a word no other heading
        has and that the prompt uses mostly there: a one-word label cannot share two."""
        return (
            len(words) == 1
            and len(_WORDS.findall(self.template.sections[i].title)) == 1
            and self.title_df[words[0]] == 1
            and self._concentrated(words[0], i, k, self.TOPIC_SHARE)
        )

    def _topic_word(self, i: int, words: Iterable[str], k: int) -> str | None:
        """The first of heading words ``words`` that names section ``i``'s topic for
        sentence ``k``: no other heading has it, the section's own prose (the sentences
        inside it, sentence ``k`` left out) uses it ``TOPIC_USES`` times or more, and
        holds ``TOPIC_SHARE`` of the prompt's uses of it (``CONCENTRATION`` for a bold
        label, whose paragraph is short). One such word is enough, however long the
        title: the prose under it confirms what the heading says."""
        sentence = self.template.sentences[k]
        share = self.CONCENTRATION if self.template.sections[i].kind == "bold" else self.TOPIC_SHARE
        for w in words:
            if self.title_df[w] != 1:
                continue
            uses = sum(self.body[j][w] for j in range(i, self.subtree_end[i]))
            if sentence.section is not None and self._inside(sentence.section, i):
                uses -= 1
            if uses >= self.TOPIC_USES and self._concentrated(w, i, k, share):
                return w
        return None

    def _concentrated(self, w: str, best: int, k: int, share: float = CONCENTRATION) -> bool:
        """Whether at least ``share`` of the uses of word ``w`` (the sentence left out)
        are in section ``best`` and the sections inside it."""
        inside = sum(
            self.body[i][w] + (w in self.strong[i]) for i in range(best, self.subtree_end[best])
        )
        total = self.total[w] + self.heading_uses[w]
        sentence = self.template.sentences[k]
        if sentence.section is not None and self._inside(sentence.section, best):
            inside -= 1
        total -= 1
        return inside >= share * max(total, 1)

    def _previews(self, k: int, best: int) -> bool:
        """Whether the other sentences of sentence ``k``'s section name two sections other
        than ``best`` (by a heading word no other heading has), a third of them or more:
        an overview that previews them (the text before the first heading is never one: it
        is where a misplaced instruction most often lands; nor is the intro under a title
        that opens the prompt, `# Deep Agents Code` over "You help with coding, debugging
        …", which is the same place, nor the prompt's first section after at most two
        sentences, `<ROLE>` or `<intro>`)."""
        own = self.template.sentences[k].section
        if own is None or own in (self.title_intro, self.first_intro):
            return False
        others = [j for j in self.by_section[own] if j != k]
        naming = [{i for i in self.names(j) if not self._related(i, best)} for j in others]
        named = set().union(*naming) if naming else set()
        # A long section names others in passing; an overview does it in a third of its
        # sentences or more.
        return len(named) >= 2 and 3 * sum(1 for n in naming if n) >= len(others)

    def _on_topic(self, mine: Counter[str], w: str, best: int, own: int | None) -> bool:
        """Whether the sentence's own section speaks of heading word ``w`` itself (twice,
        the sentence included). The opening of a prompt introduces every topic in passing,
        and names the prompt's theme more than once ("You are a citations agent …"): it is
        on that topic only when it uses the word in two more sentences and at least as
        often as section ``best`` and the sections inside it do (the section titled by the
        word, which speaks of it more, is its home)."""
        if mine[w] <= 1:
            return False
        if own is not None:
            return True
        there = sum(self.body[i][w] for i in range(best, self.subtree_end[best]))
        return mine[w] - 1 >= max(2, there)

    def _tool_elsewhere(self, k: int, tools: set[str]) -> bool:
        """Whether another sentence of sentence ``k``'s own section names one of ``tools``."""
        own = self.template.sentences[k].section
        return any(j != k and self.sentence_tools[j] & tools for j in self.by_section[own])

    def _general(self, k: int) -> bool:
        """Whether sentence ``k`` directs the use of tools in general (no tool named):
        tools are what it asks to use, prefer, call or avoid ("Prefer tools over your own
        knowledge", "use another tool", "Functions must be used to …", "tool calls")."""
        if self.general is None:
            return False
        return _about_tools(self.template.sentences[k].text, self.functions)

    def _general_guidance_elsewhere(self, tools: int) -> bool:
        """Whether the prompt directs tools in general in a section outside the tools
        section ``tools`` (its subtree, or one around it) and not in that section: two
        instructions or more of one section's subtree do, more than the tools section's
        (statements do not: "Some tool calls require user approval"). Round
        14: aworld's xbench coding agent declares its one tool in `<tools>` (a name and a
        description) and says "Do not use any tools outside the provided tool list" and
        "try another method or use different tools" under `## Working Guidelines`; "You
        should break down the task and use different tools step by step", at the top, is
        no rule taken out of `<tools>` (the one false default finding on the seen sets)."""
        if self._guidance is None:
            counts: Counter[int] = Counter()
            for j, s in enumerate(self.template.sentences):
                if s.section is not None and self._general(j) and is_instruction(s.text):
                    for c in self._chain(s.section):
                        counts[c] += 1
            self._guidance = counts
        home = self._guidance[tools]
        return any(
            n >= 2 and n > home and not self._related(i, tools) for i, n in self._guidance.items()
        )

    def _names_title(self, text: str, i: int) -> bool:
        """Whether ``text`` names section ``i`` by its title as written, capitals included,
        a title of two words or more ("Break down the information using the Analysis
        Framework" defers to `## Analysis Framework` by name): a cross-reference. Not
        asked of a tool's section, whose title is the tool's name, nor where the title is
        what the sentence calls ("Call Web Search again …")."""
        title = _NUMBERING.sub("", self.template.sections[i].title.strip(" *_`#:"))
        title = title.rstrip(" :")
        return (
            len(title.split()) >= 2
            and any(c.isupper() for c in title)
            and any(
                not _CALLING.search(text, 0, m.start())
                for m in re.finditer(rf"(?<!\w){re.escape(title)}(?!\w)", text)
            )
        )

    def _opening(self, k: int) -> bool:
        """Whether sentence ``k`` opens the prompt: before its first section, or in the
        intro under the title that opens it (the same place)."""
        own = self.template.sentences[k].section
        return own is None or own == self.title_intro

    def _tools_elsewhere(self, k: int) -> bool:
        """Whether sentence ``k``'s own section is about tools: half of its other
        sentences or more speak of tools (the opening: two more, as it introduces most
        topics in passing). A `# Notes` list with one more sentence on tools is not."""
        own = self.template.sentences[k].section
        others = [j for j in self.by_section[own] if j != k]
        n = sum(1 for j in others if self.sentence_tools[j] or self._general(j))
        return n >= 2 if own is None else n > 0 and 2 * n >= len(others)

    def _sentence_tools(self) -> list[frozenset[str]]:
        """The tools each sentence names: every finder runs once over the whole text, and
        each match goes to the sentence that holds it. A sentence that names none but says
        "this tool" or "the tool" names the tool of the section it sits in (a section
        titled by a tool's name, or one inside it); "this tool" outside any, the prompt's
        only tool section's ("Use this tool as much as you need" moved away from
        `GUIDE FOR HOW TO USE "sequential_thinking" TOOL`)."""
        sentences = self.template.sentences
        found: list[set[str]] = [set() for _ in sentences]
        starts = [s.range.start for s in sentences]
        text = _lowered(checked_text(self.template))
        body = self.template.body_range.start
        for finder in self.tool_finders:
            for m in finder.finditer(text, body):
                j = bisect.bisect_right(starts, m.start()) - 1
                if j >= 0 and m.end() <= sentences[j].range.end:
                    found[j].add((m.group(1) or m.group(2)).lower())
        titled: dict[int, str] = {}
        for name, i in sorted(self.tool_sections.items()):
            titled.setdefault(i, name)
        only = next(iter(titled.values())) if len(titled) == 1 else None
        for at, end, this in _this_tool(text, body) if titled else ():
            j = bisect.bisect_right(starts, at) - 1
            if j < 0 or end > sentences[j].range.end or found[j]:
                continue
            tool = next((titled[c] for c in self._chain(sentences[j].section) if c in titled), None)
            if tool is None and this:
                tool = only
            if tool is not None:
                found[j].add(tool)
        return [frozenset(f) for f in found]

    def _tool_homes(self) -> dict[str, int]:
        """Tool name -> the section that describes it, for a tool without a section titled
        by its name: the innermost section whose subtree holds more than half of the
        sentences of the body that name it (two at least, or one for a known tool): a
        heading whose bold labels or nested XML blocks each say it once owns it as much as
        one paragraph saying it twice. Not a section that holds (nearly) the whole prompt."""
        mentions: dict[str, Counter[int | None]] = defaultdict(Counter)
        # Sentences that list tools (``_TOOL_LIST``) count only for a tool no other
        # sentence of the body names (Kimi CLI's "If the `Shell`, `TaskList`,
        # `TaskOutput`, and `TaskStop` tools are available, …" introduces them).
        listed: dict[str, Counter[int | None]] = defaultdict(Counter)
        defined: dict[str, set[int | None]] = defaultdict(set)
        for s, named in zip(self.template.sentences, self.sentence_tools, strict=True):
            if s.section is None:
                # Round 12: the opening names tools in passing, and a tool's rule moved
                # there is what the rule reports: where the tool is described is the
                # body's call.
                continue
            in_list = _listed_tools(s.text, named)
            for t in named:
                if t not in self.tool_sections:
                    (listed if t in in_list else mentions)[t][s.section] += 1
            if (
                named
                and (m := _DEFINITION.match(s.text) or _INTRODUCED.match(s.text))
                and m.group(1).lower() in named
            ):
                defined[m.group(1).lower()].add(s.section)
        body_len = max(1, len(self.template.text) - self.template.body_range.start)
        sections = self.template.sections
        homes = {}
        for t, by_section in {**listed, **mentions}.items():
            where = defined.get(t, set())
            if len(where) == 1 and (home := next(iter(where))) is not None:
                # Where the prompt defines the tool (`- `web_search`: searches the web`),
                # not where it mentions it most (a workflow that calls it at every step).
                if (sections[home].range.end - sections[home].range.start) * 10 < body_len * 9:
                    homes[t] = home
                    self.described.add(t)
                    continue
            total = sum(by_section.values())
            under: Counter[int] = Counter()
            for sec, n in by_section.items():
                for c in self._chain(sec):
                    under[c] += n
            owners = [
                i
                for i, n in under.items()
                # A known tool (called a tool, asked to be called, declared) that the body
                # names once is described where it does so (round 12: "Do not use
                # apply_patch for changes that are auto-generated", moved from
                # `<editing_constraints>` to the top, left one mention there); a name
                # only repeated is a tool where two sentences or more use it.
                if (n >= 2 or t in self.known_tools)
                and n * 2 > total
                # A heading made of code (a JSON example line over `---`) names no place.
                and not _CODE_TITLE.search(sections[i].title)
                and (
                    (sections[i].range.end - sections[i].range.start) * 10 < body_len * 9
                    # A tools section is a part however much it holds (round 14).
                    or i in self.tool_roots
                )
            ]
            if owners:
                homes[t] = max(owners)  # the innermost: a subsection comes after its parent
                if under[homes[t]] >= 2:
                    self.described.add(t)
        return homes

    def _tool_section(self, tools: set[str]) -> int | None:
        """The section a sentence naming ``tools`` is about: one tool's section (titled by
        its name, else the one that describes it), or Tools."""
        if not tools:
            return None
        guided = {self.tool_sections[t] for t in tools if t in self.tool_sections}
        if len(guided) == 1 and len(tools) == 1:
            return guided.pop()
        homes = {self.tool_homes[t] for t in tools if t in self.tool_homes}
        if not guided and len(homes) == 1 and len(tools) == 1:
            return homes.pop()
        # Several tools (or one without guidance): the innermost tools section holding them.
        roots = [r for r in self.tool_roots if all(self._inside(g, r) for g in guided)]
        if roots:
            return max(roots)
        return self.tools_section

    def _chain(self, section: int | None) -> list[int]:
        res = []
        while section is not None:
            res.append(section)
            section = self.template.sections[section].parent
        return res

    def _sibling_labels(self, i: int, j: int | None) -> bool:
        """Whether sections ``i`` and ``j`` are bold title lines under the same heading:
        labels of paragraphs of one section, not sections of their own to place text in.
        Bold titles with no heading above them are the prompt's own parts (Claude Code
        Action's security reviewer, Kimi CLI's agent tool): a stray between them counts."""
        if j is None:
            return False
        a, b = self.template.sections[i], self.template.sections[j]
        return a.kind == b.kind == "bold" and a.parent == b.parent and a.parent is not None

    def _sibling_steps(self, i: int, j: int | None) -> bool:
        """Whether sections ``i`` and ``j`` are numbered steps of one procedure: numbered
        siblings under one parent section (`### Step 6: Assess Confidence`, `### Step 7:
        Report Findings`; `### 1. Account Analysis`, `### 3. Growth Excellence`). Steps of
        one procedure share their words on purpose: "Recommend additional investigation
        if confidence is low" in step 7 is step 7's work, not a stray from step 6.
        Unnumbered neighbours are not steps: a stray in the next section is reported."""
        if j is None:
            return False
        a, b = self.template.sections[i], self.template.sections[j]
        return (
            a.parent == b.parent
            and a.parent is not None
            and all(_NUMBERING.match(s.title.strip(" *_`#")) for s in (a, b))
        )

    def _previews_several(self, k: int, best: int) -> bool:
        """Whether sentence ``k`` names two sections besides ``best`` and those around or
        inside it (each by a heading word no other heading has): a preview of a flow
        ("Handle the complete flow: test > build > deploy > verify-live > update state
        doc."), not an instruction about one of its steps."""
        return sum(1 for i in self.names(k) if not self._related(i, best)) >= 2

    def _inside(self, i: int, outer: int) -> bool:
        return outer <= i < self.subtree_end[outer]

    def _related(self, i: int, j: int) -> bool:
        return self._inside(i, j) or self._inside(j, i)

    def _both_in_tools(self, best: int, section: int | None) -> bool:
        """Tool guidance refers to other tools all the time: anywhere in Tools is fine."""
        return section is not None and self.in_tools[best] and self.in_tools[section]

    def _label(self, i: int) -> str:
        section = self.template.sections[i]
        name = self.titled_by.get(i)
        if name is not None:
            shown = _JOINED_TAIL.sub("", _tool_display_name(section.title) or name)
            return f"`{shown if shown.lower() == name else name}`"
        if i in self.tool_roots:
            return "tool use"
        title = _NUMBERING.sub("", section.title.strip().strip("#*_` ")).rstrip(":")
        words = title.split()
        if len(words) > 4:
            return ""
        return " ".join(w if w.isupper() and len(w) > 1 else w.lower() for w in words)


# A sentence that defines a tool: its name first, then a colon or a dash
# (`- `web_search`: searches the web`, `**read_file(path)** — reads a file`), or a verb
# that says what it does, the tool being the subject ("The `task_tracker` tool lets you
# …", "`grep_search` finds exact text").
_DEFINITION = re.compile(
    r"(?:you\s+have\s+access\s+to\s+)?(?:the\s+|a\s+)?"
    r"[*_`\"']*([A-Za-z_][\w.-]*)[*_`\"']*(?:\([^)\n]{0,80}\))?[*_`\"']*"
    r"(?:[ \t]*(?::|[-—–][ \t])|(?:\s+(?:tool|function))?\s+(?:is|can|will|lets|allows|"
    r"enables|helps|returns|gives|provides|finds|searches|reads|writes|runs|executes|"
    r"creates|fetches|opens|lists|sends|takes|accepts|performs)\b)",
    re.I,
)
# Round 13: "You have access to the `task_tracker` tool to help you …" (OpenHands'
# `TASK_MANAGEMENT`) introduces the tool where the prompt describes it, whatever follows.
# Round 14: a sentence that names this many tools or more lists them, and so does a list
# of code spans, three or more in a row separated by commas, for the tools inside it
# ("**Safe to chain:** `input`, `scroll`, `find_text`, `extract`, `search_page`,
# `find_elements` …", browser-use's `<efficiency_guidelines>`, where only the last two are
# known tools): it describes none of them, and does not count toward where each is
# described (``_tool_homes``) when another sentence names the tool.
_TOOL_LIST = 3
_CODE_LIST = re.compile(r"`[^`\n]{1,60}`(?:\s*,\s*(?:and\s+|or\s+)?`[^`\n]{1,60}`){2,}")


def _listed_tools(text: str, named: Collection[str]) -> Collection[str]:
    """Of the tools ``named`` by a sentence, those it lists (``_TOOL_LIST``)."""
    if len(named) >= _TOOL_LIST:
        return named
    if not named or "`" not in text:
        return ()
    spans = [m.group(0).lower() for m in _CODE_LIST.finditer(text)]
    return [t for t in named if any(f"`{t}`" in span for span in spans)]


_INTRODUCED = re.compile(
    r"you\s+have\s+access\s+to\s+(?:the\s+|an?\s+)?[*_`\"']*([A-Za-z_][\w.-]*)[*_`\"']*"
    r"\s+(?:tool|function)\b",
    re.I,
)
# The definition form alone: the tool's name first, then a colon or a dash (not "The crawl
# tool can only be used to …", a rule labelled misplaced in DeerFlow's researcher).
_DEFINITION_LINE = re.compile(
    r"[*_`\"']*([A-Za-z_][\w.-]*)[*_`\"']*(?:\([^)\n]{0,80}\))?[*_`\"']*[ \t]*(?::|[-—–][ \t])"
)
_EXAMPLES_TITLE = re.compile(r"\b(?:examples?|samples?)\b", re.I)
# A title that names tools as a category ("Tools", "Available tools", "TOOL USE",
# `<tool_calling>`), not a heading that merely contains the word ("## Plan tool").
_TOOLS_TITLE = re.compile(
    r"^\W*(?:[0-9ivx]+[.):]?\s+)?(?:(?:available|your|the|using|use\s+of|about|on|"
    r"working\s+with|calling)[\s_]+)?(?:tools?|functions|function[\s_]+calling)"
    r"(?:[\s_]+(?:use|usage|calling|call|guidelines?|guides?|guidance|instructions?|available|"
    r"reference|overview|policy|policies|rules|access|definitions?|list|notes)){0,2}\W*$",
    re.I,
)
# An instruction about tools in general: tools are its object ("use tools", "prefer tools
# over …", "another tool", "the right tool", "tools must be used", "tool calls"); not a
# mention in passing ("you cannot do calculations without using tools").
_GENERAL = (
    r"(?:(?<!without\s)\b(?:use|using|call|calling|invoke|prefer|try|rely\s+on|choose|pick)\s+"
    r"(?:(?:the|a|an|your|another|other|different|right|appropriate|available|relevant|"
    r"multiple|several|any|all|more|one|each|same|provided|those|these|its)\s+){{0,3}}"
    r"|\b(?:another|different|right|appropriate|available|same)\s+"
    # "use conversation context/state or tools": tools as one of the things to use
    r"|(?<!without\s)\b(?:use|using|prefer)\s+[\w/'’ -]{{1,40}}?\s(?:or|and)\s+(?:the\s+)?)"
    r"{w}s?\b"
    r"|\b{w}s?\s+(?:must|should|shall|need\s+to|have\s+to|are\s+to)\b"
    r"|\b{w}[\s-]+calls?\b"
)
_THIS_TOOL = re.compile(r"(?:^|\W)(this|the)\s+\Z")
_NOT_THE_TOOL = re.compile(r"\s*(?:call|output|result)s?\b")


def _this_tool(text: str, pos: int) -> Iterator[tuple[int, int, bool]]:
    """The "this tool" / "the tool" of a lower-case text from ``pos`` (not "the tool
    call/output"): (start, end, whether it says "this"). Found from "tool", which
    ``str.find`` skips to, not word by word."""
    i = text.find("tool", pos)
    while i != -1:
        end = i + 4
        if (end == len(text) or not text[end].isalnum()) and not _NOT_THE_TOOL.match(text, end):
            m = _THIS_TOOL.search(text, max(pos, i - 8), i)
            if m is not None:
                yield m.start(1), end, m.group(1) == "this"
        i = text.find("tool", end)


_GENERAL_STEMS = frozenset({"tool", "function"})
_GENERAL_TOOLS = re.compile(_GENERAL.format(w="tool"), re.I)
_GENERAL_TOOLS_AND_FUNCTIONS = re.compile(_GENERAL.format(w="(?:tool|function)"), re.I)
_NUMBERING = re.compile(r"^(?:(?:step|phase|part|section)\s+)?[0-9ivx]+[.):]?\s+", re.I)
# Tokens between an instruction and its section's heading under which it touches the
# section: the last line before the heading (on the real corpus, every finding this close
# was judged wrong: a step that leads into the next one). Not for an instruction that
# names a tool: Onyx measured the loss for tool guidance only a paragraph away.
_TOUCHING = 15
# A sentence that points at another part of the prompt on purpose.
# A verb of calling just before a name: "call Web Search", "run the Linter".
_CALLING = re.compile(r"\b(?:call|invoke|run|execute|trigger)\s+(?:the\s+)?\Z", re.I)
_CROSS_REFERENCE = re.compile(
    r"\b(?:see|refer\s+to|(?:described|defined|listed|explained)\s+(?:in|below|above)|(?:sections?|steps?|rules?)\s+"
    r"(?:below|above)|as\s+(?:described|explained|listed|shown)|covered\s+(?:in|below)"
    # "Follow the Source Context section for …": it names the part of the prompt it defers to.
    r"|(?:follow(?:ing)?|per|under|in|from)\s+the\s+(?:[\w`'\"-]+\s+){1,4}section)\b",
    re.I,
)
# A section that repeats the rules on purpose: "Important Reminders", "What not to do (recap)".
# The title of a section that states the prompt's whole job (`## Core Mission`, `<role>`,
# `# Role and Objective`): its sentences name the work later sections detail.
_MISSION = re.compile(
    r"(?:(?:your|core|expert|agent|primary|main)\s+)?"
    r"(?:role|mission|overview|purpose|objectives?|goals?|identity|capabilities)"
    r"(?:\s+and\s+(?:role|mission|overview|purpose|objectives?|goals?|identity))?$",
    re.I,
)
# Words of a rule rather than a statement of work: a prohibition, a condition, an
# exclusive choice ("Never stop background processes by name …" in `<role>` is a rule of
# a later section, placed in the mission).
_RULE_WORDS = re.compile(
    r"\b(?:never|not|no|avoid|always|only|unless|except|instead|must|should)\b|n't\b", re.I
)
_RECAP = re.compile(
    r"\b(?:recap|reminders?|summary|summari[sz]ed|checklist|tl;?dr|cheat\s*sheet|key\s+points)\b",
    re.I,
)
# Words that may follow a tool's name in its heading: "control_browser Tool Guidelines".
_TOOL_HEADING_TAIL = re.compile(
    r"(?:(?:\s+|\s*[-—:(]\s*)(?:tool|function|usage|guidelines?|instructions?|guide|"
    r"notes?)\b\)?|\s*\(tool\))*\s*\Z",
    re.I,
)
# A heading that starts with a name in code and then says what it does after a dash or
# colon ("`search_docs` - Official Documentation Search").
_CODE_NAME_FIRST = re.compile(
    r"[*_]*`([A-Za-z][A-Za-z0-9_.-]*)(?:\([^)`]*\))?`[*_]*\s*(?:[-—–:]|\Z)"
)
_JOINED_TAIL = re.compile(
    r"(?:[_-](?:tool|function|usage|guidelines?|instructions?|guide|notes?|rules?|calling))+\Z",
    re.I,
)
_TOOL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*\Z")
_EXAMPLE_NAME = re.compile(r"(?:^|[_.-])(?:examples?|samples?)(?:$|[_.-])", re.I)


_OVERVIEW = "its section is a list that previews later sections in order"


def _in_overview(template: PromptTemplate, topics: _Topics, k: int) -> bool:
    """Whether sentence ``k``'s section is an overview by ``_overviews`` (over the
    instructions of that section only)."""
    own = template.sentences[k].section
    return own in _overviews(template, topics.section_targets(own))


def _overviews(template: PromptTemplate, found: list[tuple[Sentence, _Target]]) -> set[int | None]:
    """Sections that preview others: a workflow overview ("1. Understand the problem …
    2. Investigate …"), a list whose items each point at a later section, in the order
    those sections come. A section whose instructions are about two or more other
    sections (three for the text before the first section) that way restates them on
    purpose; one that holds a cross-reference and one stray instruction (two sections,
    one of them earlier, or out of order) is no overview."""
    about: dict[int | None, list[tuple[Sentence, int]]] = defaultdict(list)
    for sentence, target in found:
        about[sentence.section].append((sentence, target.section))
    ends = _subtree_ends(template.sections)
    overviews: set[int | None] = set()
    for own, items in about.items():
        targets = [t for _, t in sorted(items, key=lambda it: it[0].range.start)]
        if len(set(targets)) < (3 if own is None else 2):
            continue
        later = 0 if own is None else ends[own]
        if (
            all(t >= later for t in targets)
            and targets == sorted(targets)
            and all(
                _LIST_ITEM.match(template.text, _line_start(template.text, s.range.start))
                for s, _ in items
            )
        ):
            overviews.add(own)
    return overviews


_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+•]|\d{1,3}[.)])[ \t]")


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


# Words that give a bare imperative force or scope ("only", "every", "NOT", "ALL").
_FORCE = re.compile(
    r"\b(?:only|every|any|no|not|exactly|[Aa]void|[Rr]efrain|ALL|NOT|NEVER|ALWAYS|MUST|ONLY)\b"
)
_CAPITALS_WORD = re.compile(r"\b[A-Z]{2,}\b")


_IDENTITY = re.compile(r"[\s*_>#]*(?:you\s+are|you['’]re)\b", re.I)
# A sentence that says who the agent is or what it is for ("You are …", "Your role in ASK
# MODE is to be a knowledgeable consultant …"): the opening's own, never a stray there.
# "use `querychat_query` instead", "use query_weave_traces_tool instead" (not "use links
# instead of …", nor a file: "use `CHANGELOG` instead"): a tool's name, `snake_case` or
# `camelCase`, in code or not, the alternative to what the prompt covers.
_REDIRECT = re.compile(
    r"\buse\s+(?:the\s+)?`?(?:[A-Za-z]\w*_\w+|[a-z]+[A-Z]\w*)`?(?:\s+(?:tool|function))?"
    r"\s+instead\b(?!\s+of)"
)
_SELF = re.compile(
    r"[\s*_>#]*(?:you\s+are|you['’]re|your\s+(?:role|job|task|goal|purpose|mission)\b"
    r"[^.!?\n]{0,60}?\bis)\b",
    re.I,
)


def _in_identity(template: PromptTemplate, k: int) -> bool:
    """Sentence ``k`` follows a "You are …" sentence in the same paragraph of its section."""
    sentence = template.sentences[k]
    if sentence.section is None:
        return False
    text = template.text
    start = sentence.range.start
    floor = template.sections[sentence.section].heading_range.end
    blank = text.rfind("\n\n", floor, start)
    para = floor if blank == -1 else blank + 2
    return para < start and _IDENTITY.match(text, para, start) is not None


# A modal in a clause that says which one ("Recommend which agents should handle specific
# tasks"): it speaks of another subject, not to the model (round 25).
_RELATIVE_MODAL = re.compile(
    r"\b(?:which|who|whom|whose)\b(?:\s+[\w'’-]+){0,3}?\s+(?:should|must|shall|need\s+to|needs\s+to)\b",
    re.I,
)


def _statement_of_work(text: str) -> bool:
    """A bare imperative: no modal, no prohibition ("avoid"), no emphasis (capitals), no
    scope word, no condition ("Remove unnecessary dependencies", "Find knowledge
    boundaries")."""
    if (
        _DIRECTIVE.search(_RELATIVE_MODAL.sub(" ", text))
        or _SHOUT.match(text)
        or _FORCE.search(text)
    ):
        return False
    words = _WORDS.findall(text, 0, 400)
    if len(_CAPITALS_WORD.findall(text, 0, 400)) * 2 > len(words):
        return False  # "FOLLOW TEST DRIVEN DEVELOPMENT …": written in capitals, emphasis
    return bool(words) and words[0].lower() not in _CONDITIONAL


def _list_item(text: str, pos: int) -> bool:
    """The sentence at ``pos`` opens a list item (`- `, `* `, `1. `)."""
    line = text[_line_start(text, pos) : pos].lstrip()
    return bool(re.match(r"(?:[-*+]|\d+[.)])\s", line))


# "Only" scopes a rule, capitalised too ("Only use the search tool for …").
_ONLY = re.compile(r"\bonly\b", re.I)
_ITEM_LINE = re.compile(r"([ \t]*)(?:[-*+•]|(\d{1,3})[.)])[ \t]+(\*\*[^*\n]{1,60}\*\*)?")
_PROCEDURE_ITEMS = 3
_PROCEDURE_LINES = 40
_COMMENT_LINE = re.compile(r"<!--.*?-->")


def _procedure_step(text: str, pos: int) -> bool:
    """Whether the sentence at ``pos`` sits on the line of an item of a procedure: a list of
    ``_PROCEDURE_ITEMS`` items or more at one indentation, numbered (`1.`, `2)`) or each
    opening with a bold label (`- **Plan**: …`, `- **Inform**: …`). Items may be split by
    blank lines or comment lines and continued by lines indented further (a nested list
    included). A bulleted list of plain items is a list of rules or facts, not of steps.
    Bounded: the ``_PROCEDURE_LINES`` lines around it each way."""
    first = _line_start(text, pos)
    m = _ITEM_LINE.match(text, first)
    if m is None:
        return False  # not on the line of a list item
    indent, numbered = m.group(1), m.group(2) is not None
    if not numbered and m.group(3) is None:
        return False
    items = 1
    for forward in (False, True):
        line = first
        for _ in range(_PROCEDURE_LINES):
            if forward:
                nl = text.find("\n", line)
                if nl == -1:
                    break
                line = nl + 1
            else:
                if line == 0:
                    break
                line = text.rfind("\n", 0, line - 1) + 1
            end = text.find("\n", line)
            body = text[line : len(text) if end == -1 else end]
            if not body.strip() or _COMMENT_LINE.fullmatch(body.strip()):
                continue  # a blank line, or a comment (`<!-- … -->`), which shows nothing
            if len(body) - len(body.lstrip()) > len(indent):
                continue  # a line of an item: its continuation, or a nested list
            im = _ITEM_LINE.match(body)
            if im is None or im.group(1) != indent or (im.group(2) is not None) != numbered:
                break  # the text around the list, or another list
            if not numbered and im.group(3) is None:
                return False  # a bulleted list whose items are not all labelled
            items += 1
            if numbered and items >= _PROCEDURE_ITEMS:
                return True
    return items >= _PROCEDURE_ITEMS


def _top(template: PromptTemplate, i: int | None) -> int | None:
    """The top-level section holding section ``i``."""
    while i is not None and template.sections[i].parent is not None:
        i = template.sections[i].parent
    return i


def _placement(template: PromptTemplate, sentence: Sentence, target: int) -> tuple[str, Severity]:
    """Where an instruction sits, in words, and the severity that distance earns.

    Onyx measured the drop at the top of the prompt (90 % -> 30 %); an instruction in
    another top-level part is as far in structure, one in a neighbouring part of the
    same top-level section is nearer and reported as information.
    """
    own = sentence.section
    if own is None:
        if template.sections and sentence.range.start >= template.sections[0].range.start:
            # Text after a closed block that no section holds (round 14: claude-cookbooks'
            # research subagent ends with a paragraph after `<maximum_tool_call_limit>`,
            # which the message called the top of the prompt).
            return "at the end of the prompt, after its sections", Severity.WARNING
        return "at the top of the prompt", Severity.WARNING
    own_top, target_top = _top(template, own), _top(template, target)
    where = f"in `{_clip(_heading(template.sections[own]), 40)}`"
    if own_top is None or target_top is None:
        return where, Severity.WARNING
    if own_top == target_top:
        # Siblings next to each other are neighbours; the intro of an enclosing section
        # (a title over the whole prompt) is as far as the top of the prompt.
        own_parent, target_parent = template.sections[own].parent, template.sections[target].parent
        siblings = [i for i, s in enumerate(template.sections) if s.parent == own_parent]
        if own_parent == target_parent and abs(siblings.index(own) - siblings.index(target)) == 1:
            return f"{where}, a neighbouring section", Severity.INFO
        return where, Severity.WARNING
    tops = [i for i, s in enumerate(template.sections) if s.parent is None]
    if abs(tops.index(own_top) - tops.index(target_top)) > 1:
        return where, Severity.WARNING
    return f"{where}, a neighbouring section", Severity.INFO


def setting_tool_names(tools: Iterable[object] | None) -> set[str]:
    """Lower-case tool names of the `tools` setting: names, or OpenAI tool schemas."""
    res: set[str] = set()
    for t in tools or ():
        if isinstance(t, str):
            res.add(t.lower())
        elif isinstance(t, dict):
            fn = t.get("function") if isinstance(t.get("function"), dict) else t
            name = fn.get("name") if isinstance(fn, dict) else None
            if isinstance(name, str) and name:
                res.add(name.lower())
    return res


# The characters outside ASCII that the regex engine, ignoring case, takes for an ASCII
# letter (tests/assembly/test_regex_starts.py finds them among every code point).
_ASCII_CASE_KIN = "\u0130\u0131\u017f\u212a"  # İ ı ſ K (Kelvin)


def _word_at_start(words: Sequence[str], *, ignore_case: bool = False) -> str:
    """A regex for one of ``words`` (tried in this order) starting a word, as
    ``\\b(?:word|…)`` is, written to begin with a class of their first letters.

    The regex engine skips from character to character to where a match can start only
    when a pattern begins with a character or a class of them (or with alternatives that
    each begin with one character); a lookahead or ``\\b`` first makes it try a whole
    match at every character. The word boundary is checked once the first letter is read
    (``(?<!\\w\\w)``: not two word characters in a row), then which word it is.

    With ``ignore_case`` the class holds every character that ``(?i:…)`` takes for a first
    letter (an ASCII letter: its other case, and ``İ``, ``ı``, ``ſ`` or ``K``, which the
    regex engine folds to ``i``, ``s`` or ``k``)."""
    firsts = {w[0] for w in words}
    if ignore_case:
        if not all(c.isascii() for c in firsts):
            raise ValueError("ignore_case needs words that start with an ASCII character")
        folds = [re.compile(f"(?i:{re.escape(c)})") for c in firsts]
        firsts |= {c.swapcase() for c in firsts}
        firsts |= {k for k in _ASCII_CASE_KIN if any(f.fullmatch(k) for f in folds)}
    alts = "|".join(f"(?<={re.escape(w[0])}){re.escape(w[1:])}" for w in words)
    flags = "i" if ignore_case else ""
    return f"[{''.join(sorted(firsts))}](?<!\\w\\w)(?{flags}:{alts})"


# Where a prompt names its tools: "the `task` tool", 'the "finish" tool', "call write_todos",
# "use read_file(…)", "the web_search tool". Each pattern starts with a character the regex
# engine can skip to (a quote, or c/u/i/r: ``_word_at_start``); bare snake_case names come
# from ``_snake_case``.
_NAMED_AS_TOOL = re.compile(
    r"[`\"“']([A-Za-z_][\w.-]{1,40})(?:\(\))?[`\"”']\s+(?i:tool|function)s?\b"
)
# The verb in either case: "Call lookUpOrder with …" opens a sentence (round 11).
_CALLING_VERB = _word_at_start(
    ("call", "use", "invoke", "run", "using", "calling"), ignore_case=True
)
_CALLED = re.compile(
    _CALLING_VERB + r"\s+(?:the\s+)?`?([A-Za-z_][\w.]*_[\w.]+|[a-z]+[A-Z]\w*)(?:\([^)]{0,40}\))?`?",
)
_TOOL_AFTER = re.compile(r"\s+(?:tool|function)s?\b")
# Round 12: a Pascal case name in backticks after a verb of calling ("Use `TaskList` to …",
# Kimi CLI); unquoted, "use TypeScript" would be a tool.
_CALLED_PASCAL = re.compile(
    _CALLING_VERB + r"\s+(?:the\s+)?`([A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*)(?:\([^)`]{0,40}\))?`"
)
# Round 14: a Pascal case name before "tool" in lower case ("You MUST use the TodoWrite
# tool", holmesgpt) is a tool's name; before "Tool" it is part of a name in title case
# ("Call the FollowUpQuery Tool to generate a reflection", local-deep-researcher: round 12
# took it for a tool and made a false default finding).
# Round 14: a plain word in backticks after "call" or "invoke" ("You must call the `done`
# action", browser-use) is a tool; after "use" or "run" it may be a type, a library or a
# command ("use `str`", "run `pytest`").
# Both are found from what follows the name ("tool", a backticked word), which the regex
# engine finds by its literal text, then the name or the verb just before it.
_TOOL_WORD = re.compile(r"tools?\b")
_PASCAL_BEFORE = re.compile(r"\b([A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*)\s+\Z")
_TICKED_WORD = re.compile(r"`([a-z][a-z0-9]{1,30})`")
_CALL_BEFORE = re.compile(r"\b(?i:call|calling|invoke|invoking)\s+(?:the\s+)?\Z")


def _pascal_tools(text: str, pos: int) -> Iterator[str]:
    """The Pascal case names before "tool" in lower case (round 14) from ``pos``."""
    for m in _TOOL_WORD.finditer(text, pos):
        if (before := _PASCAL_BEFORE.search(text, max(pos, m.start() - 64), m.start())) is not None:
            yield before.group(1)


def _called_ticked(text: str, pos: int) -> Iterator[str]:
    """The plain words in backticks after "call" or "invoke" (round 14)."""
    for m in _TICKED_WORD.finditer(text, pos):
        if _CALL_BEFORE.search(text, max(pos, m.start() - 24), m.start()) is not None:
            yield m.group(1)


# A backticked identifier (files are left out later).
_TICKED_IDENT = re.compile(r"`([A-Za-z_][\w.]{2,40})(?:\([^)`]{0,40}\))?`")
_SNAKE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _snake_case(text: str, pos: int) -> Iterator[tuple[int, int]]:
    """The spans of the bare ``snake_case`` words of ``text`` from ``pos`` (a whole word,
    lower case): found from their underscores, which are rare, not word by word."""
    i = text.find("_", pos)
    n = len(text)
    while i != -1:
        a = i
        while a > 0 and text[a - 1] in _WORD_CHARS:
            a -= 1
        b = i
        while b < n and text[b] in _WORD_CHARS:
            b += 1
        if a >= pos and _SNAKE.fullmatch(text, a, b):
            yield a, b
        i = text.find("_", b)


_FILE_LIKE = re.compile(
    r"\.(?:py|md|json|ya?ml|txt|js|ts|tsx|toml|cfg|ini|sh|html|css|lock)\Z", re.I
)


def text_tool_names(template: PromptTemplate) -> frozenset[str]:
    """Tool names a prompt itself shows: named as tools, or identifiers it repeats.

    A name counts when the prompt calls it a tool or asks to call/use it, and it is an
    identifier (`write_todos`, `read_file`, `AwaitShell`) or written in backticks; a bare
    identifier found three times or more in the prose counts too. Remembered for the last
    few prompts (a pure function of the text, which ``_topics`` reads for every set of
    tool names).
    """
    return _TEXT_TOOLS.get(template.text, lambda: frozenset(_text_tool_names(template)))


_TEXT_TOOLS: TextMemo[str, frozenset[str]] = TextMemo(8, 1 << 19)


def _text_tool_names(template: PromptTemplate) -> set[str]:
    text = checked_text(template)
    body = template.body_range.start
    snakes = list(_snake_case(text, body))
    named = [m.group(1) for m in _NAMED_AS_TOOL.finditer(text, body)]
    named += [m.group(1) for m in _CALLED.finditer(text, body)]
    named += [text[a:b] for a, b in snakes if _TOOL_AFTER.match(text, b)]
    named += [m.group(1) for m in _CALLED_PASCAL.finditer(text, body)]
    named += _pascal_tools(text, body)
    named += _called_ticked(text, body)
    res = {n.lower() for n in named if not _FILE_LIKE.search(n)}
    # Identifiers of the prose (headings and code left out), each use counted once.
    sentences = template.sentences
    starts = [s.range.start for s in sentences]
    uses: dict[int, str] = {}
    ticked: list[tuple[int, int]] = []
    for m in _TICKED_IDENT.finditer(text, body):
        uses[m.start()] = m.group(1)
        ticked.append((m.start(), m.end()))
    for a, b in snakes:
        k = bisect.bisect_right(ticked, (a, len(text))) - 1
        if k < 0 or ticked[k][1] <= a:  # not inside a backticked name
            uses[a] = text[a:b]
    counts: Counter[str] = Counter()
    for at, name in uses.items():
        j = bisect.bisect_right(starts, at) - 1
        if j < 0 or at + len(name) > sentences[j].range.end:
            continue  # outside the prose: headings, code
        if at > starts[j] and text[at - 1] in "</@":
            # `<reasoning_rules>` names a block of the prompt, not a tool; so does
            # `@critical_context_requirement` (round 23: OpenAgents points at its blocks so)
            continue
        name = name.lower()
        if _is_identifier(name) and "_" in name and not _FILE_LIKE.search(name):
            counts[name] += 1
    res.update(n for n, c in counts.items() if c >= 3)
    return res


def _tool_display_name(title: str) -> str | None:
    """The tool a heading names (`web_search`, `Shell`, `control_browser Tool Guidelines`,
    "1. `search_docs` - Documentation Search": a name in code, numbered, then what it
    does)."""
    title = _NUMBERING.sub("", title.strip())
    if (code := _CODE_NAME_FIRST.match(title)) is not None:
        return code.group(1)
    title = title.replace("`", "").strip("*_ ")
    title = title[: _TOOL_HEADING_TAIL.search(title).start()]  # type: ignore[union-attr]
    return title if _TOOL_NAME.match(title) else None


def _tool_sections(
    template: PromptTemplate,
    roots: list[int],
    known: Collection[str] = (),
    literal: Collection[int] = (),
) -> dict[str, int]:
    """Map tool name (lower case) -> its section: the tool-named subsections of ``roots``.
    ``literal``: sections written inside a CDATA block, which are examples (a call of
    the tool, `<apply_diff><path>…</path>…`), not a section about it."""
    res: dict[str, int] = dict(guidance_sections(template))
    root_set = set(roots)
    for i, s in enumerate(template.sections):
        if i in literal:
            continue
        name = _tool_display_name(s.title)
        if name is None:
            # A title that names a tool as one: `GUIDE FOR HOW TO USE "sequential_thinking"
            # TOOL`, "Using the `task` tool".
            quoted = _NAMED_AS_TOOL.search(s.title)
            if quoted is None or _FILE_LIKE.search(quoted.group(1)):
                continue
            res.setdefault(quoted.group(1).lower(), i)
            continue
        # Under a tools section any name; elsewhere an identifier or a known tool. An XML
        # block is named like an identifier (`<reasoning_rules>`) whatever it holds: it
        # is a tool's only when the name is known as one. An example is no tool
        # (`<good-example>`, `### Examples` under `## Tool Usage`).
        if _EXAMPLE_NAME.search(name) and name.lower() not in known:
            continue
        # `<done_usage>`, `<search_tool_rules>`: a known tool's name with a tail joined
        # by `_` or `-` titles that tool's section as "`done` usage" would.
        if name.lower() not in known and (bare := _JOINED_TAIL.sub("", name)).lower() in known:
            res.setdefault(bare.lower(), i)
            continue
        if (
            s.parent in root_set
            or (_is_identifier(name) and s.kind != "xml")
            or name.lower() in known
        ):
            res.setdefault(name.lower(), i)
    # A known tool's name written out as the words of a title (`3. FORMATTING RESEARCH
    # RESPONSE` for `format_research_response`, `READ FILE` for `read_file`): the one
    # section so titled is that tool's.
    spelled: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for name in known:
        parts = tuple(stem(p) for p in name.split("_") if p)
        if len(parts) >= 2 and name not in res:
            spelled[parts].append(name)
    if spelled:
        titled: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for i, s in enumerate(template.sections):
            title = _NUMBERING.sub("", s.title.strip().strip("*_`#").strip()).rstrip(":")
            words = tuple(stem(w.lower()) for w in _WORDS.findall(title))
            if words in spelled:
                titled[words].append(i)
        for words, where in titled.items():
            if len(where) == 1 and len(spelled[words]) == 1:
                res.setdefault(spelled[words][0], where[0])
    return res


_CDATA = re.compile(r"<!\[CDATA\[.*?(?:\]\]>|\Z)", re.S)


def _literal_sections(template: PromptTemplate) -> frozenset[int]:
    """The sections whose heading lies inside a `<![CDATA[ … ]]>` block (character data:
    tags there are text, an example, not the prompt's structure)."""
    text = template.text
    if "<![CDATA[" not in text:
        return frozenset()
    spans = [(m.start(), m.end()) for m in _CDATA.finditer(text)]
    return frozenset(
        i for i, s in enumerate(template.sections) if any(a <= s.range.start < b for a, b in spans)
    )


def _is_identifier(name: str) -> bool:
    """A name that cannot be an ordinary word: `web_search`, `get-logs`, `AwaitShell`."""
    if any(c in name for c in "_-.0123456789"):
        return not name.replace("_", "").isupper() or len(name) <= 12
    return any(c.isupper() for c in name[1:]) and not name.isupper()


def _camel_case(text: str, names: Iterable[str]) -> frozenset[str]:
    """The names (lower case, no `_` or digits) that ``text`` writes in camel case, a capital
    inside (`getNextResponseFromSupervisor`, `todoWrite`): identifiers, not ordinary words,
    though their lower case looks like one. Round 11: openai-realtime-agents' "Always
    defer to getNextResponseFromSupervisor() …", moved to the top, named no tool, as the
    name was found only after a verb of calling or before "tool". Each name is looked up
    with ``str.find``, at most a few uses each."""
    low = _lowered(text)
    res = set()
    for name in names:
        if _is_identifier(name) or len(name) < 4:
            continue
        at = low.find(name)
        for _ in range(8):
            if at < 0:
                break
            written = text[at : at + len(name)]
            if any(c.isupper() for c in written[1:]) and not written.isupper():
                res.add(name)
                break
            at = low.find(name, at + len(name))
    return frozenset(res)


def _tool_finders(names: Iterable[str], camel: Collection[str] = ()) -> list[re.Pattern[str]]:
    """Regexes that find tool names in prose (group 1 or 2 is the name), to run on the
    text as ``_lowered`` gives it. Each starts with the characters a match can start
    with, so the regex engine skips to them (``_word_at_start``, ``_names_at_start``).

    Identifier-like names are found anywhere as whole words (those of ``camel`` too: the
    prompt writes them in camel case); a name that is an ordinary word (`Shell`, `python`,
    `lookup`) only in backticks, right before "tool" or right after a verb of calling
    ("call lookup").
    """
    names = sorted({n.lower() for n in names if n}, key=len, reverse=True)
    identifiers = [n for n in names if _is_identifier(n) or n in camel]
    words = [n for n in names if not (_is_identifier(n) or n in camel)]
    res = []
    if identifiers:
        alt = _names_at_start(identifiers)
        res.append(re.compile(rf"({alt})(?![a-z0-9_]|-\w)"))
    if words:
        res.append(re.compile(rf"`({_alternation(words)})`"))
        res.append(re.compile(rf"({_names_at_start(words)})(?=[\"”']?\s+tool\b)()"))
        # "call lookup", "use the search tool": the name right after a verb of calling.
        verb = _word_at_start(
            ("call", "calls", "calling", "use", "using", "invoke", "invoking", "run")
        )
        res.append(re.compile(rf"{verb}\s+(?:the\s+)?({_alternation(words)})(?![a-z0-9_])()"))
    return res


def _names_at_start(names: list[str]) -> str:
    """A regex for one of ``names`` (lower case) not preceded by a letter, digit, ``_`` or
    ``-``, as ``(?<![a-z0-9_-])(?:name|…)`` is: one alternative per first character, which
    checks what comes before once that character is read (so the regex engine can skip
    to the first characters, ``_word_at_start``), then the rest of the name
    (``_alternation``)."""
    rests: dict[str, list[str]] = {}
    for n in names:
        rests.setdefault(n[0], []).append(n[1:])
    return "|".join(
        f"{re.escape(c)}(?<![a-z0-9_-].)(?:{_alternation(tails)})" for c, tails in rests.items()
    )


def _alternation(names: list[str]) -> str:
    """A regex matching any of ``names``, the longest first where several match at one
    place (as ``"|".join`` of them sorted longest first), written as a trie: one branch
    per distinct next character, so a prompt naming thousands of tools costs the regex
    engine a step per character at a place, not a try per name. Names whose trie nests
    deeper than ``_TRIE_DEPTH`` groups (``a``, ``aa``, ``aaa`` …) are joined plainly,
    which the regex compiler's recursion can take; so are a few names (up to
    ``_TRIE_MIN``), where building the trie costs more than it saves."""
    if len(names) <= _TRIE_MIN:
        return "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    trie: dict[str, Any] = {}
    for name in names:
        node = trie
        for c in name:
            node = node.setdefault(c, {})
        node[""] = {}

    def depth(node: dict[str, Any]) -> int:
        deepest, stack = 0, [(node, 0)]
        while stack:
            node, d = stack.pop()
            d += len(node) > 1 or "" in node
            deepest = max(deepest, d)
            stack.extend((child, d) for c, child in node.items() if c)
        return deepest

    if depth(trie) > _TRIE_DEPTH:
        return "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))

    def written(node: dict[str, Any]) -> str:
        # A chain with one way on is written as its characters; at a fork every longer
        # way comes first and ending here ("") last, so backtracking tries shorter names
        # only after the longer ones failed.
        out = []
        while len(node) == 1 and "" not in node:
            ((c, node),) = node.items()
            out.append(re.escape(c))
        if not node or list(node) == [""]:
            return "".join(out)
        ways = [re.escape(c) + written(child) for c, child in sorted(node.items()) if c]
        if "" in node:
            ways.append("")
        return "".join(out) + "(?:" + "|".join(ways) + ")"

    return written(trie)


_TRIE_DEPTH = 200
_TRIE_MIN = 64


def _lowered(text: str) -> str:
    """``text`` in lower case for ``_tool_finders``, offsets kept (a character whose lower
    case is longer, as `İ`, stays as it is)."""
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


@functools.lru_cache(maxsize=32)
def _cached_tool_finders(names: frozenset[str]) -> tuple[list[re.Pattern[str]], re.Pattern[str]]:
    """``_tool_finders``, kept for the names a document's next version asks for again, and
    a regex that finds any of the names as it is written: every finder's match holds one,
    so a text it does not find in has no match of theirs."""
    lower = sorted({n.lower() for n in names if n}, key=len, reverse=True)
    return _tool_finders(names), re.compile(_alternation(lower) if lower else "(?!)")


class _Gaps:
    """Token counts of the text between two offsets of a template, from cached pieces.

    The template is cut at every heading; each piece is counted once (the tokenizer caches
    counts by content, so an edit recounts only the pieces it touched). A gap is its two
    partial pieces plus the whole pieces between them. BPE merges never cross the line
    break before a heading, so this is the count of the gap itself, give or take a token.
    """

    EXACT_BELOW = 8_000  # count a gap shorter than this (in code points) directly

    def __init__(self, template: PromptTemplate, tokenizer: Tokenizer) -> None:
        self.text = template.text
        self.tokenizer = tokenizer
        cuts = {template.body_range.start, len(self.text)}
        cuts.update(s.range.start for s in template.sections)
        self.cuts = sorted(cuts)
        self._prefix: list[int] | None = None

    def tokens(self, a: int, b: int) -> int:
        count = self.tokenizer.count
        if b - a < self.EXACT_BELOW:
            return count(self.text[a:b])
        i = bisect.bisect_left(self.cuts, a)
        j = bisect.bisect_right(self.cuts, b) - 1
        if i >= j:
            return count(self.text[a:b])
        prefix = self._prefixes()
        return (
            count(self.text[a : self.cuts[i]])
            + prefix[j]
            - prefix[i]
            + count(self.text[self.cuts[j] : b])
        )

    def _prefixes(self) -> list[int]:
        if self._prefix is None:
            pieces = [self.text[x:y] for x, y in zip(self.cuts, self.cuts[1:], strict=False)]
            prefix = [0]
            for n in self.tokenizer.count_many(pieces):
                prefix.append(prefix[-1] + n)
            self._prefix = prefix
        return self._prefix


def _fix(template: PromptTemplate, sentence: Sentence, target: int, heading: str) -> Fix:
    """Move the sentence into its section, or delete it when the section already says it."""
    copy = _same_instruction(template, sentence, target)
    if copy is not None:
        return Fix(
            f"Delete the stray copy: `{_clip(heading)}` already says this",
            (TextEdit(_deletion(template.text, sentence.range), ""),),
        )
    return _move_fix(template, sentence, target, heading)


def _same_instruction(template: PromptTemplate, sentence: Sentence, target: int) -> int | None:
    """A sentence of section ``target`` that gives the same instruction (the same content
    words, give or take a fifth), else None."""
    words = _content_words(sentence.text)
    if not words:
        return None
    body = template.sections[target].range
    for k, other in enumerate(template.sentences):
        if other is sentence or not body.start <= other.range.start < body.end:
            continue
        theirs = _content_words(other.text)
        if theirs and len(words & theirs) >= 0.8 * len(words | theirs):
            return k
    return None


def _move_fix(template: PromptTemplate, sentence: Sentence, target: int, heading: str) -> Fix:
    """Delete the sentence where it is and append it, as a paragraph, to its section."""
    text = template.text
    section = template.sections[target]
    children = [s.range.start for s in template.sections if s.parent == target]
    own_end = min(children, default=section.range.end)
    insert_at = max(_content_end(text, TextRange(section.body_range.start, own_end)), 0)
    if insert_at <= section.body_range.start:
        insert_at = section.heading_range.end
    moved = " ".join(sentence.text.split())
    return Fix(
        f"Move the instruction to the end of `{heading}`",
        (
            TextEdit(_deletion(text, sentence.range), ""),
            TextEdit(TextRange.empty(insert_at), "\n\n" + moved),
        ),
    )


_LINE_PREFIX = re.compile(r"[ \t]*(?:>[ \t]?)*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)?\Z")


def _deletion(text: str, rng: TextRange) -> TextRange:
    """The sentence's range, plus its whole line when it is alone there, else one space."""
    line_start = text.rfind("\n", 0, rng.start) + 1
    line_end = text.find("\n", rng.end)
    line_end = len(text) if line_end == -1 else line_end
    alone = _LINE_PREFIX.match(text, line_start, rng.start) and not text[rng.end : line_end].strip()
    if alone:
        if line_end < len(text):
            return TextRange(line_start, line_end + 1)
        return TextRange(max(line_start - 1, 0), line_end)
    if text[rng.end : rng.end + 1] in (" ", "\t"):
        return TextRange(rng.start, rng.end + 1)
    if rng.start > 0 and text[rng.start - 1] in (" ", "\t"):
        return TextRange(rng.start - 1, rng.end)
    return rng


def _content_end(text: str, rng: TextRange) -> int:
    """The end of ``rng`` without the whitespace (blank lines) it ends with."""
    return rng.start + len(text[rng.start : rng.end].rstrip())


def _heading(section: Section) -> str:
    return section.label


def _clip(heading: str, n: int = 60) -> str:
    return heading if len(heading) <= n else heading[: n - 1].rstrip() + "…"


def _subtree_ends(sections: tuple[Section, ...]) -> list[int]:
    """For each section, the index after its last descendant (sections are in order)."""
    ends = list(range(1, len(sections) + 1))
    for i in range(len(sections) - 1, -1, -1):
        parent = sections[i].parent
        if parent is not None:
            ends[parent] = max(ends[parent], ends[i])
    return ends


def _tools_section(template: PromptTemplate) -> int | None:
    for i, s in enumerate(template.sections):
        if s.title.strip().strip("`*_ ").lower() == "tools":
            return i
    return None


# --------------------------------------------------------------------------------------
# Instruction detection


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Base-form verbs that open an imperative in prompts. Words that are more often nouns at
# the start of a sentence ("Search results …", "Answers …") are told apart by the word
# after them (see ``_imperative_at``).
VERBS = _wordset(
    """
    abide acknowledge act add address adhere adjust aim alert allow analyse analyze answer
    apologise apologize append apply approach ask assess assign assume attach attribute avoid
    base be begin break bring browse build calculate call cap cite check choose clarify
    classify close collect combine compare compile compose compute confirm consider consult
    continue convert copy correct count create cross-check decide decline default defer
    define delegate delete describe determine disclose display do document double-check
    draft echo emit emphasise emphasize employ enable encourage end ensure escalate estimate
    evaluate exclude execute expand explain express fall favor favour fetch fill filter find
    finish fix flag focus follow format forward gather generate get give greet ground group
    guide handle help highlight hold identify ignore include indicate infer inform insert
    inspect interpret invoke issue keep label lead leave let limit link list load log look
    make map mark match mention merge minimise minimize mirror note notify obey offer omit
    open order organise organize output paraphrase pass pause pay pick place plan point
    present preserve prefer prepare prioritise prioritize proceed produce prompt protect
    provide pull push put query quote raise rank re-read re-run read rebuild recommend
    record redact reason refer reference refine reflect refrain refuse reject rely remain render
    remember remind remove rephrase reply report request require rerun research resolve
    respect respond restate retrieve retry return reuse review revise rewrite round route
    run save say scan search select send separate set share show sign simplify skip sort
    specify split start state stay steer stick stop store structure suggest summarise
    summarize supply support surface switch tag take tailor talk tell test thank think
    track transfer translate treat trigger trust try turn understand update upload use
    validate verify wait warn watch weigh word wrap write
    """
)
# Words that may come before the verb of an imperative.
_LEADING = _wordset(
    """
    always never only also then just please first finally next instead briefly politely
    carefully simply now still again immediately strictly kindly gently quickly usually
    generally preferably ideally additionally otherwise secondly thirdly lastly strongly
    proactively actively
    """
)
# A clause before the comma: "If X, call Y", "When the user asks, answer …".
_CONDITIONAL = _wordset(
    """
    if when whenever before after once unless while until for in where as on during with
    without to given since because whether regardless depending
    """
)
_NOT_AFTER_VERB = _wordset(
    "is are was were has have had can could will would may might should must does did"
)
_OBJECT_WORDS = _wordset(
    """
    the a an it them this that these those what which your their its each every all any
    only one no some his her our my him us me who whom whoever whatever whichever
    """
)
_DIRECTIVE = re.compile(
    r"\b(?:must|should|shall|never|always|make\s+sure|be\s+sure|remember\s+to|do\s+not|"
    r"don['’]t|dont|need\s+to|needs\s+to|have\s+to|has\s+to|ought\s+to|may\s+not|"
    r"may\s+only|can\s+only|cannot|can['’]t|(?:is|are)\s+(?:not\s+)?(?:required|expected|"
    r"encouraged|allowed|permitted|supposed|to\s+be)\b|it\s+is\s+(?:important|essential|"
    r"critical|crucial)|important:|you\s+(?:can|may|could)\s+(?:also\s+)?(?:use|call|invoke|"
    r"run|try)\b)",
    re.IGNORECASE,
)
_LABEL = re.compile(r"[\s*_>`\"'“(\[]*[A-Za-z][\w -]{0,30}?[*_`]*:[*_`]*\s")
_SHOUT = re.compile(
    r"[\s*_>`]*(?:CRITICAL|IMPORTANT|NOTE|WARNING|REMEMBER|RULE)[*_`]*\s*[-–—:!]+[*_`]*\s*"
)
_WORDS = re.compile(r"[A-Za-z][A-Za-z0-9_]*(?:[-'’][A-Za-z]+)*")
_CLAUSE = re.compile(r"[;:—]\s+|\s+-\s+")


@functools.lru_cache(maxsize=1 << 14)
def is_instruction(text: str) -> bool:
    """Whether a sentence directs the model (an imperative or a modal directive).

    Cached by text: both instruction rules ask it of every sentence, and an edit changes
    few sentences."""
    stripped = text.rstrip(" \t\n*_`\"'”’)")
    if not stripped or stripped.endswith("?") or stripped.startswith(("{{", "|", "<", '"', "“")):
        return False
    words = [w.lower().replace("’", "'") for w in _WORDS.findall(text, 0, 400)]
    if len(words) < 2:
        return False
    if stripped.endswith(":") and len(words) <= 5:
        return False  # a label: "**Format Illustration:**"
    if _directive(text):
        return True
    shout = _SHOUT.match(text)
    if shout is not None:
        # "CRITICAL - use …", "IMPORTANT: never …": the label, then an instruction.
        words = [w.lower() for w in _WORDS.findall(text, shout.end(), shout.end() + 400)]
        if not words:
            return False
    label = _LABEL.match(text) if shout is None else None
    if label is not None:
        # "Note: this is …" is a remark; "**Output:** Render as …" an instruction.
        words = [w.lower() for w in _WORDS.findall(text, label.end(), label.end() + 400)]
        if not words:
            return False
    if _imperative_at(words, 0):
        return True
    for clause in _CLAUSE.finditer(text, 0, 400):
        # "Users judge apps by their look; ensure they feel polished."
        if _imperative_at(
            [w.lower() for w in _WORDS.findall(text, clause.end(), clause.end() + 80)], 0
        ):
            return True
    if words[0] in _CONDITIONAL:
        comma = _clause_end(text)
        if comma != -1:
            rest = [w.lower() for w in _WORDS.findall(text, comma, comma + 200)]
            return _imperative_at(rest, 0)
    return False


# "what needs to be done", "who has to understand it": a noun clause, not a directive.
_RELATIVE_NEED = re.compile(r"\b(?:what|which|whatever|who)\s+$", re.IGNORECASE)


def _directive(text: str) -> bool:
    """A modal directive ("must", "never", "need to" …) that is not inside a noun clause
    ("Your reasoning about what needs to be done")."""
    for m in _DIRECTIVE.finditer(text):
        word = m.group().lower()
        if word.startswith(("need", "has", "have")) and _RELATIVE_NEED.search(
            text, max(0, m.start() - 12), m.start()
        ):
            continue
        return True
    return False


def _imperative_at(words: list[str], i: int) -> bool:
    while i < len(words) and (words[i] in _LEADING or _adverb(words[i])):
        i += 1
    if i >= len(words) or words[i] not in VERBS:
        return False
    following = words[i + 1 : i + 3]
    if not following:
        return True
    if following[0] in _OBJECT_WORDS:
        return True
    return not any(w in _NOT_AFTER_VERB for w in following)


def _adverb(word: str) -> bool:
    """A manner adverb that may open an imperative ("Continuously review …")."""
    return len(word) > 5 and word.endswith("ly") and word not in VERBS


def _clause_end(text: str) -> int:
    """The offset after the comma (or "then") that ends a leading conditional clause."""
    m = re.search(r",|\bthen\b", text[:300])
    return -1 if m is None else m.end()


# --------------------------------------------------------------------------------------
# Vocabulary

STOP_WORDS = _wordset(
    """
    a about above after again against all also am an and any are aren't as at be because
    been before being below between both but by can can't cannot could couldn't did didn't
    do does doesn't doing don't down during each few for from further had hadn't has hasn't
    have haven't having he her here hers herself him himself his how however i if in into is
    isn't it it's its itself just let's me more most mustn't my myself no nor not now of off
    on once only or other ought our ours ourselves out over own same shan't she should
    shouldn't so some such than that that's the their theirs them themselves then there
    there's these they this those through to too under until up upon very was wasn't we
    were weren't what when where which while who whom why will with won't would wouldn't you
    your yours yourself yourselves via per e g i.e eg ie etc vs
    must shall may might never always please make sure need needs use using used also
    instead first then else every each one two three unless whether whenever
    """
)
# Heading words that name no topic.
GENERIC_HEADING_WORDS = _wordset(
    """
    section part chapter overview introduction intro general guidelines guideline guidance
    rules rule instructions instruction notes note important details detail other misc
    miscellaneous additional information info context background summary appendix step
    steps and the of for your you our a an to in on how what key core main basic basics
    tool tools usage available
    """
)
_SUFFIXES = (
    ("ations", ""),
    ("ation", ""),
    ("ating", ""),
    ("ated", ""),
    ("ates", ""),
    ("ate", ""),
    ("ities", ""),
    ("ity", ""),
    ("ably", ""),
    ("able", ""),
    ("ances", ""),
    ("ance", ""),
    ("ings", ""),
    ("ing", ""),
    ("ies", "y"),
    ("ied", "y"),
    ("ed", ""),
    ("ers", ""),
    ("er", ""),
    ("ches", "ch"),
    ("shes", "sh"),
    ("sses", "ss"),
    ("xes", "x"),
    ("s", ""),
)
_KEEP_S = ("ss", "us", "is", "ous")
# Adjectives in -al whose noun is another word (a terminal is no termination).
_ADJECTIVE_KEEP = frozenset(
    {"general", "functional", "terminal", "journal", "original", "interval"}
)
# Stems of one word family that suffix stripping does not join.
_SAME_STEM = {"respons": "respond", "analys": "analyz", "summar": "summariz", "verific": "verify"}


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A light suffix-stripping stem: cite/cites/cited/citing/citation(s) -> ``cit``.

    Identifiers (with ``_`` or digits) are kept whole: they are tool and field names.
    """
    w = word.lower()
    if not w.isalpha():
        return w
    if w not in _ADJECTIVE_KEEP:
        if w.endswith("ical"):
            w = w[:-2]  # logical -> logic
        if w.endswith("ic") and len(w) >= 7:
            w = w[:-2]  # symbolic -> symbol
        elif w.endswith("al") and len(w) >= 7:
            w = w[:-2]  # operational -> operation, retrieval -> retriev(e)
    for suffix, repl in _SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            if suffix == "s" and w.endswith(_KEEP_S):
                break
            w = w[: -len(suffix)] + repl
            if (
                suffix in ("ing", "ed", "ings")
                and len(w) > 3
                and w[-1] == w[-2]
                and w[-1] not in "lsz"
            ):
                w = w[:-1]  # formatting -> format
            break
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    return _SAME_STEM.get(w, w)


@functools.lru_cache(maxsize=1 << 14)
def _content_words(text: str) -> frozenset[str]:
    """The stems of a text's words that carry content (stop words and short words out);
    cached by text, like ``is_instruction``."""
    res = set(chain.from_iterable(map(_word_stems, _WORDS.findall(text))))
    if _DOT_LETTER.search(text) is not None:
        res.update(w.lower() for w in _DOTTED.findall(text))
    return frozenset(res)


@functools.lru_cache(maxsize=1 << 16)
def _word_stems(w: str) -> tuple[str, ...]:
    """What one word (a ``_WORDS`` match) gives ``_content_words``: its stem, and the
    stems of its parts for a capitals name; none for a stop word or a short one. Cached
    by word: a prompt's words repeat (a lint file's sentences made a tenth of this rule's
    work word by word)."""
    lw = w.lower().replace("’", "'")
    if lw.endswith("'s"):
        lw = lw[:-2]
    if len(lw) < 3 or lw in STOP_WORDS:
        return ()
    if "_" in w and w.isupper():
        # `TASK_TRACKING` names a part of the prompt (as a `<task_tracking>` or
        # `TASK_TRACKING:` title does), not a tool: its words count too.
        parts = (stem(p) for p in lw.split("_") if len(p) > 2 and p not in STOP_WORDS)
        return (stem(lw), *parts)
    return (stem(lw),)


@functools.lru_cache(maxsize=1 << 14)
def _phrases(text: str) -> frozenset[tuple[str, str]]:
    """The pairs of content words (stems, ``_content_words``' test) that follow each other
    in one clause of a text, no other word between them ("section headers" in "Keep each
    section header short"): a phrase, more telling of a topic than one word."""
    res = set()
    for clause in _PHRASE_BREAK.split(text):
        prev = None
        for w in _WORDS.findall(clause):
            stems = _word_stems(w)
            if not stems:
                prev = None
                continue
            cur = stems[0]
            if prev is not None and prev != cur:
                res.add((prev, cur))
            prev = cur
    return frozenset(res)


_PHRASE_BREAK = re.compile(r"[,;:.!?()\[\]—\n\"]|\s-\s")


# Asides and examples: a parenthesis, or "e.g. …" / "for example …" / "such as …" to the
# end of its clause.
_PARENS = re.compile(r"\([^()]{0,200}\)")
_EXAMPLE = re.compile(r"\b(?:e\.g\.|for\s+(?:example|instance)|such\s+as)[^;:,.!?—]{0,200}", re.I)
# A condition after the main clause ("Avoid long explanations … when a question would move
# the task forward"): when, not what, the instruction directs ("… only when …" is what it
# directs: "Call it only when the user asks to recreate the sandbox").
_CONDITIONS = ("when", "whenever", "unless", "until", "because", "so that")
_CLAUSE_STOP = re.compile(r"[,;:.!?—]")
# "Only … when": the condition is the point, not an aside. Round 13: "only" anywhere
# earlier in the clause ("You should only end the task when all the requirements are met
# by calling the 'submit_and_exit' tool", Cline), not only right before the cue.
_ONLY_BEFORE = re.compile(r"\bonly\b[^,;:.!?—]*\Z")


def _strip_asides(text: str) -> str:
    """A sentence with its asides blanked out: parentheses, examples ("e.g. …", "for
    example …", "such as …") and trailing conditions, each to the end of its clause. Each
    kind is looked for only when its cue is in the sentence (no regex scan of every
    sentence)."""
    if "(" in text:
        text = _PARENS.sub(" ", text)
    low = text.lower()
    if "e.g." in low or "example" in low or "instance" in low or "such as" in low:
        text = _EXAMPLE.sub(" ", text)
        low = text.lower()
    cuts: list[tuple[int, int]] = []
    for cue in _CONDITIONS:
        i = low.find(cue)
        while i != -1:
            j = i + len(cue)
            if (
                i >= 2
                and low[i - 1].isspace()
                and (low[i - 2].isalnum() or low[i - 2] == "_")
                and j < len(low)
                and low[j].isspace()
                and not _ONLY_BEFORE.search(low, 0, i)
            ):
                stop = _CLAUSE_STOP.search(low, j, j + 301)
                cuts.append((i - 1, stop.start() if stop else min(len(low), j + 301)))
            i = low.find(cue, j)
    for a, b in sorted(cuts, reverse=True):
        text = text[:a] + " " + text[b:]
    return text


@functools.lru_cache(maxsize=1 << 12)
def _about_tools(text: str, functions: bool) -> bool:
    """Whether an instruction is about tools in general (``_GENERAL``); cached by text,
    and the regex runs only on a sentence that says "tool" (or "function")."""
    low = text.lower()
    if "tool" not in low and not (functions and "function" in low):
        return False
    return (_GENERAL_TOOLS_AND_FUNCTIONS if functions else _GENERAL_TOOLS).search(text) is not None


@functools.lru_cache(maxsize=1 << 12)
def _without_asides(text: str) -> str:
    """A sentence without its asides, lower case (where a tool it names is directed)."""
    return _strip_asides(text).lower()


_ASIDE_CUES = ("(", "e.g", "example", "instance", "such", "when", "unless", "until", "because")


@functools.lru_cache(maxsize=1 << 12)
def _has_aside(text: str) -> bool:
    """Whether a sentence may hold an aside (``_strip_asides``): a cheap test by substrings, so
    the aside regex runs only where it can match."""
    low = text.lower()
    return any(cue in low for cue in _ASIDE_CUES) or "so that" in low


@functools.lru_cache(maxsize=1 << 12)
def _core_words(text: str) -> frozenset[str]:
    """The content words of a sentence outside its asides (parentheses, "e.g. …"): what it
    is about, not its examples (the words of an aside that is the whole sentence stay)."""
    core = _strip_asides(text)
    return _content_words(core) if core.strip() else _content_words(text)


# A dotted name (`AGENTS.md`, `os.path`, `config.yaml`) is one word: its parts say less
# ("md" is too short to count, "agents" is said everywhere). Not "e.g." nor "v1.2".
_DOTTED = re.compile(
    r"(?<![\w.])[A-Za-z_][\w-]+(?:\.[A-Za-z_][\w-]*)*\.[A-Za-z_][\w-]+(?![\w-]|\.\w)"
)
# What every dotted name holds: a text without it has none (most sentences end in a dot
# and hold no other; ``_DOTTED`` is tried at each letter, this skips to each dot).
_DOT_LETTER = re.compile(r"\.[A-Za-z_]")


# A title that is code: a JSON line (`{"name": "final_answer", …}`) that a `---` under it
# makes a setext heading, as CommonMark reads it. Its words name no topic of the prompt.
# Placeholders (`{{ tool }}`) are no code.
_CODE_TITLE = re.compile(r"(?<!\{)\{(?!\{)|(?<!\})\}(?!\})|\"\s*:")


def _title_words(section: Section, split: bool = False) -> set[str]:
    """The stems of a heading's words that name a topic. With ``split``, a ``snake_case``
    or ``kebab-case`` title (`<reasoning_rules>`, `TECHNICAL_PHILOSOPHY`, `<intent-mining>`:
    XML names join words with either) gives its parts too: prose says
    "reasoning", not "reasoning_rules" (not for a tool's section: `## run_tests` is not
    about running). The whole name counts as a word as well, so a two-part title takes
    two of its three words: one shared part is a coincidence."""
    title = section.title.strip().strip("`*_ ")
    if _CODE_TITLE.search(title):
        return set()
    words = [x.lower() for x in _WORDS.findall(title)]
    words += [x.lower() for x in _DOTTED.findall(title)]
    if split:
        words += [
            p for w in words if "_" in w or "-" in w for p in re.split(r"[-_]", w) if len(p) > 2
        ]
    return {
        stem(w)
        for w in words
        if w not in GENERIC_HEADING_WORDS and w not in STOP_WORDS and len(w) > 1
    }


def _topic_words(section: Section, section_topics: Mapping[str, list[str]]) -> set[str]:
    """The ``section_topics`` words of a heading: those of every key all of whose words
    are in the heading ("Tools" matches `# Tools` and `## Tool use`)."""
    title_stems = {stem(w.lower()) for w in _WORDS.findall(section.title)}
    res: set[str] = set()
    for key, topic_words in section_topics.items():
        key_stems = {stem(w.lower()) for w in _WORDS.findall(key)}
        if key_stems and key_stems <= title_stems:
            res.update(stem(w.strip().lower()) for w in topic_words if w.strip())
    return res


# --------------------------------------------------------------------------------------
# guidance-for-unavailable-tool


@dataclass(frozen=True, slots=True)
class _ToolsWhere:
    """Where the offered tools are declared (the other end of a finding)."""

    range: TextRange
    path: str | None
    what: str  # how to name them: "the tools offered this turn", …


_NOT_DECLARED = "not among the template's `tools`"
_NEGATED = re.compile(
    r"\b(?:never|not|don['’]t|no|without|avoid|instead\s+of|rather\s+than)\b[^.;:,]*$",
    re.IGNORECASE,
)
_AVAILABILITY = re.compile(
    r"\b(?:you\s+(?:can|may|have\s+access\s+to|are\s+able\s+to)|available|access\s+to)\b",
    re.IGNORECASE,
)
# A name before "tool": in backticks, or a bare snake_case one. Two patterns, each
# starting with what the regex engine can skip to (``_word_at_start``); their matches
# never overlap (a snake_case name and "tool" hold no backtick).
_NAMED_TOOL = (
    re.compile(r"`([A-Za-z][A-Za-z0-9_-]*)`\s+tool\b"),
    re.compile(r"([a-z](?<!\w\w)[a-z0-9]*_[a-z0-9_]+)\s+tool\b"),
)


def _named_as_tools(template: PromptTemplate) -> frozenset[str]:
    """The names the prompt calls tools (``_NAMED_TOOL``), in lower case; remembered for the
    last few prompts (a scan of the whole text, the same for every conversation)."""

    def scan() -> frozenset[str]:
        text, start = checked_text(template), template.body_range.start
        return frozenset(
            m.group(1).lower() for pattern in _NAMED_TOOL for m in pattern.finditer(text, start)
        )

    return _NAMED_AS_TOOLS.get(template.text, scan)


_NAMED_AS_TOOLS: TextMemo[str, frozenset[str]] = TextMemo(8, 1 << 19)


def _offered_names(ctx: RuleContext) -> set[str] | None:
    """Lower-case names of the tools offered this turn; None when nobody says."""
    if ctx.conversation is not None:
        tools = ctx.conversation.tools
        return None if tools is None else {t.name.lower() for t in tools}
    node = _front_matter_tools(ctx.template)
    if node is None:
        return None
    return {t.name.lower() for t in read_tools(node)[0]}


def _front_matter_tools(template: PromptTemplate | None) -> SNode | None:
    if template is None or template.front_matter_root is None:
        return None
    return template.front_matter_root.get("tools")


def _tools_location(ctx: RuleContext) -> _ToolsWhere | None:
    conv = ctx.conversation
    if conv is not None and conv.root is not None:
        member = conv.root.member("tools") if conv.root.is_object else None
        if member is not None:
            return _ToolsWhere(member.key_range, None, "the tools offered this turn")
    template = ctx.template
    if template is not None and template.front_matter_root is not None:
        member = template.front_matter_root.member("tools")
        if member is not None:
            path = ctx.template_path if conv is not None else None
            return _ToolsWhere(member.key_range, path, "the template's tools")
    return None


def _called_tools(ctx: RuleContext) -> frozenset[str]:
    """The tools the messages call (kept in the memo while the messages' shapes are)."""
    if isinstance(ctx, PromptContext):
        return ctx.called_tools
    conv = ctx.conversation
    if conv is None:
        return frozenset()
    memo = message_memo(ctx)
    return memo.derived(
        "called-tools",
        memo.shapes,
        lambda: called_names(conv.message_data if memo.callers is None else memo.callers),
    )


def _unavailable_in_prompt(
    ctx: RuleContext,
    source: _Source,
    offered: set[str],
    called: frozenset[str],
    where: _ToolsWhere | None,
) -> Iterator[Diagnostic]:
    template = source.template
    guidance = guidance_sections(template)
    tools_idx = _tools_section(template)
    # Guidance the pipeline leaves out this turn: not sent, so not asking for anything.
    dropped: list[TextRange] = []
    if tools_idx is not None and not offered:
        dropped.append(template.sections[tools_idx].range)
    else:
        dropped.extend(template.sections[i].range for t, i in guidance.items() if t not in offered)
    yield from _unsent_guidance(ctx, source, guidance, offered, where)

    known = set(guidance) | offered | KNOWN_TOOLS | called | _named_as_tools(template)
    finders, any_name = _cached_tool_finders(frozenset(known - offered))
    if not finders:
        return
    related = _tools_related(where, offered)
    for sentence in template.sentences:
        if any(r.start <= sentence.range.start < r.end for r in dropped):
            continue
        text = sentence.text
        lowered = _lowered(text)
        if any_name.search(lowered) is None:
            continue  # (most sentences: one search, not one per finder)
        names: list[str] = []
        for finder in finders:
            for m in finder.finditer(lowered):
                name = (m.group(1) or m.group(2)).lower()
                if name not in names and not _NEGATED.search(text, 0, m.start()):
                    names.append(name)
        if not names:
            continue
        if not (is_instruction(text) or _AVAILABILITY.search(text)):
            continue
        listed = ", ".join(f"`{n}`" for n in names)
        which = "which is" if len(names) == 1 else "which are"
        place = "" if source.kind in ("template", "system") else f" in the {source.kind}"
        missing = "not offered this turn" if ctx.conversation is not None else _NOT_DECLARED
        yield Diagnostic(
            "guidance-for-unavailable-tool",
            Severity.WARNING,
            f"instruction{place} asks for {listed}, {which} {missing}",
            source.range(sentence.range),
            path=source.path,
            related=related,
        )


def _unsent_guidance(
    ctx: RuleContext,
    source: _Source,
    guidance: Mapping[str, int],
    offered: set[str],
    where: _ToolsWhere | None,
) -> Iterator[Diagnostic]:
    """Guidance sections for tools the prompt itself never offers."""
    if source.kind not in ("template", "system"):
        return
    template = source.template
    declared = offered
    why = (
        f"it is {_NOT_DECLARED}"
        if ctx.conversation is None
        else "the tool is not offered this turn"
    )
    if source.shared:
        root = template.front_matter_root
        member = root.member("tools") if root is not None else None
        if member is None:
            return  # a shared template: other turns may offer the tool
        declared = {t.name.lower() for t in read_tools(member.value)[0]}
        where = _ToolsWhere(member.key_range, source.path, "the template's tools")
        why = f"it is {_NOT_DECLARED}"
    for tool, i in guidance.items():
        if tool in declared or tool in offered:
            continue
        section = template.sections[i]
        rng = TextRange(section.range.start, _content_end(template.text, section.range))
        yield Diagnostic(
            "guidance-for-unavailable-tool",
            Severity.INFO,
            f"guidance for `{tool}` is not sent: {why}",
            source.range(rng),
            path=source.path,
            related=_tools_related(where, declared),
            unnecessary=True,
        )


def _read_file_listing(
    ctx: RuleContext, offered: set[str], where: _ToolsWhere | None
) -> Iterator[Diagnostic]:
    a, conv = ctx.assembly, ctx.conversation
    if a is None or conv is None or READ_FILE in offered:
        return
    related = _tools_related(where, offered)
    for entry in a.layout:
        if entry.id == "$forgotten_files":
            n = len(a.forgotten_files)
            rng = _forgotten_file_range(conv, [f.file_id for f in a.forgotten_files])
            what = plural(n, "forgotten file")
        elif entry.id == "$project_file_list":
            n = entry.message.text.count('\n- file_id="')
            rng = _member_key(conv, "project_files")
            what = plural(n, "project file")
        else:
            continue
        yield Diagnostic(
            "guidance-for-unavailable-tool",
            Severity.WARNING,
            f"a read_file listing of {what} is sent, but no `read_file` tool is offered this turn",
            rng,
            related=related,
        )


def _forgotten_file_range(conv: Conversation, file_ids: list[str]) -> TextRange:
    wanted = set(file_ids)
    for m in conv.messages:
        if m.file_id in wanted:
            return m.range
        for f in m.files:
            if f.file_id in wanted:
                return f.range
    for m in conv.messages:
        if m.role is SUMMARY_ROLE:
            return m.role_range or m.range
    return TextRange(0, 0)


def _member_key(conv: Conversation, key: str) -> TextRange:
    if conv.root is not None and conv.root.is_object:
        member = conv.root.member(key)
        if member is not None:
            return member.key_range
    return TextRange(0, 0)


def _tools_related(where: _ToolsWhere | None, tools: Collection[str]) -> tuple[Related, ...]:
    """Point at where the tools are declared, naming them."""
    if where is None:
        return ()
    names = ", ".join(f"`{t}`" for t in sorted(tools)) or "none"
    return (Related(where.range, f"{where.what}: {names}", where.path),)
