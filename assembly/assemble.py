"""The context assembly pipeline (SPEC §4, reference §3–§8): what the model receives.

``assemble`` is a pure function of the parsed conversation, its effective settings, a
tokenizer and the caller's inputs (the referenced template, project file contents read
from disk, today's date). It follows Onyx's semantics step by step — branch and summary,
history conversion, prompts, project files, budget, newest-first contiguous fill, dropped
and orphaned files, the forgotten-files listing, the orphan pass, the eight segments,
provider translation and the compression plan — with the deliberate improvements listed in
the README (chiefly: the forgotten-files listing is re-charged on every rebuild, so the
assembled total never exceeds the available budget).

A document that cannot be assembled (Onyx would raise) yields an ``Assembly`` with no
messages and an ``AssemblyError`` saying why; nothing here raises on user input.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from assembly import texts
from assembly.model import (
    Conversation,
    FileAttachment,
    Image,
    Message,
    PromptRef,
    PromptTemplate,
    Role,
    TextBlock,
)
from assembly.settings import Settings
from assembly.sysprompt import (
    PromptContext,
    build_custom_agent_prompt,
    build_replacement_system_prompt,
    build_system_prompt,
    parse_prompt_text,
    substitute_user_placeholders,
)
from assembly.text import TextRange
from assembly.tokens import Tokenizer

if TYPE_CHECKING:
    from assembly.assemble_cache import AssemblyCache

MsgKind = Literal["system", "user", "assistant", "tool", "reminder"]
SEGMENTS = (
    "system",
    "history",
    "custom_agent",
    "project_files",
    "forgotten_files",
    "last_user",
    "this_turn",
    "reminder",
)
PROJECT_FILE_SHARE = 0.6  # Onyx's max_llm_context_percentage for project files
APPROX_CHARS_PER_TOKEN = 4
TOOL_FAILURE_TOKENS = 50  # Onyx's fixed count for its tool-failure reply
AZURE_IMAGE_CAP = 50
FILE_READER_TOOLS = frozenset({"read_file"})
CITEABLE_TOOLS = frozenset({"internal_search", "web_search", "open_url"})
# Onyx measures the marker on an all-zero 36-character id (llm_loop.py:403-409).
_NON_VISION_MARKER_ID = "0" * 36
_FORMATTING_MODELS = re.compile(r"(?<![A-Za-z0-9.])(gpt-5\.1|gpt-5|o3|o1)(?![A-Za-z0-9])")
_TOOL_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


# ------------------------------------------------------------------------------ results


@dataclass(frozen=True, slots=True)
class CallOut:
    """A tool call as it is sent: id, name and arguments (text when not a JSON object)."""

    id: str
    name: str
    arguments: dict[str, Any] | str


@dataclass(frozen=True, slots=True)
class LlmMessage:
    """One message of the model's input (Onyx's ``ChatMessageSimple``).

    ``tokens`` is what the budget charges for it (its replay cost). ``source`` is the
    stored document message it came from (None for messages the pipeline creates): a
    ``Message`` as ``Conversation.message_data`` holds it, position-independent, so a
    converted message stays true in every version that shares its source; see it at its
    place with ``conv.locate(source)``. Its ``images`` have the source's ranges (relative
    to the message; a project image's are absolute).
    """

    id: str
    kind: MsgKind
    text: str
    tokens: int
    source: Message | None = None
    tool_calls: tuple[CallOut, ...] = ()
    tool_call_id: str | None = None
    file_id: str | None = None
    images: tuple[Image, ...] = ()
    image_tokens: int = 0
    replaced: bool = False  # an earlier turn's tool result replaced by the placeholder


@dataclass(frozen=True, slots=True)
class LayoutEntry:
    """One assembled message: which segment it is in and what it costs."""

    message: LlmMessage
    segment: str
    tokens: int
    cache: bool

    @property
    def id(self) -> str:
        return self.message.id


@dataclass(frozen=True, slots=True)
class Segment:
    name: str
    tokens: int
    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Budget:
    max_input_tokens: int
    safety_margin: float
    available_tokens: int
    tools: int
    system: int
    custom_agent: int
    project_files: int
    reminder: int
    history_budget: int
    used: int


@dataclass(frozen=True, slots=True)
class ForgottenFile:
    file_id: str
    filename: str
    approx_char_count: int


@dataclass(frozen=True, slots=True)
class CompressionPlan:
    """What Onyx's post-turn compression would do with this conversation (reference §9)."""

    triggered: bool
    threshold: int
    history_tokens: int
    reserved_tokens: int
    tokens_for_recent: int
    summarize: tuple[str, ...]
    keep: tuple[str, ...]
    progressive: bool
    request: tuple[dict[str, Any], ...]  # the summarization request (OpenAI messages)


@dataclass(frozen=True, slots=True)
class AssemblyError:
    """Why the conversation cannot be assembled (Onyx raises here), or a pipeline warning."""

    code: str
    message: str
    range: TextRange
    severity: str = "error"
    related: tuple[tuple[TextRange, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Assembly:
    """The assembled context and everything about how it was reached."""

    settings: Settings
    encoding: str
    budget: Budget
    layout: tuple[LayoutEntry, ...]
    segments: tuple[Segment, ...]
    provider_messages: tuple[dict[str, Any], ...]
    history: tuple[LlmMessage, ...]  # the converted history, before the budget cut
    dropped: tuple[str, ...]
    orphans_dropped: tuple[str, ...]
    forgotten_files: tuple[ForgottenFile, ...]
    compression: CompressionPlan
    cache_prefix_length: int
    errors: tuple[AssemblyError, ...]
    system_text: str | None = None
    reserved_tokens: int = 0
    chain: tuple[str, ...] = ()  # ids of the document messages on the current branch
    summary_id: str | None = None
    images_dropped: int = 0
    tokens_by_id: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(e.severity == "error" for e in self.errors)


@dataclass(frozen=True, slots=True)
class AssembleOptions:
    """The caller's inputs besides the conversation.

    ``system_template`` is the parsed ``*.prompt.md`` that ``system_prompt`` points to (the
    caller reads it); ``file_contents`` maps a project file's ``file_id`` to the text read
    from its ``path``; ``today`` feeds ``{{CURRENT_DATETIME}}``.
    """

    today: dt.date
    system_template: PromptTemplate | None = None
    file_contents: Mapping[str, str] = field(default_factory=dict)


def assemble(
    conv: Conversation,
    settings: Settings,
    tokenizer: Tokenizer,
    opts: AssembleOptions,
    cache: AssemblyCache | None = None,
) -> Assembly:
    """Assemble the model's input for the conversation's current turn.

    Args:
        conv: the parsed conversation.
        settings: its effective settings (all sources merged).
        tokenizer: counts tokens; its ``encoding`` is reported.
        opts: the referenced template, project file contents and the date.
        cache: what the previous call for the same document kept
            (``assembly.assemble_cache.AssemblyCache``); after an edit inside a few
            messages only those are converted again. The result is the same without it.

    Returns:
        The ``Assembly``; on an Onyx error its ``errors`` say why and ``layout`` is empty.
    """
    if cache is not None:
        return cache.assemble(conv, settings, tokenizer, opts)
    return _Pipeline(conv, settings, tokenizer, opts).run()


def image_cap_of(s: Settings) -> int | None:
    """Most images per request, or None: Onyx caps only Azure, at its documented limit, and
    only with ENABLE_AZURE_IMAGE_CAP on (``app_configs.py:1688``, ``llm_step.py:801-851``);
    a number caps any provider. Markers for non-vision models are never capped."""
    cap = s.image_cap
    if not s.vision or cap is False:
        return None
    if cap is True:
        return AZURE_IMAGE_CAP if s.provider == "azure" else None
    return cap


def mark_cache_prefix(s: Settings, n_cached: int, provider: list[dict[str, Any]]) -> int:
    """The cacheable prefix's length, marking its last message in ``provider`` as the
    settings ask.

    ``n_cached`` leading messages carry Onyx's ``should_cache`` (the system prompt and the
    kept earlier history); they form the prefix only with PROMPT_CACHE_CHAT_HISTORY on
    (``llm_step.py:865-869,912-923``). Anthropic's adapter puts
    ``cache_control: {"type": "ephemeral"}`` on the prefix's last message
    (``prompt_cache/providers/anthropic.py:15-31``); OpenAI's caching is implicit.
    """
    if not s.prompt_cache_chat_history:
        return 0
    if n_cached and s.prompt_cache_marker == "anthropic":
        provider[n_cached - 1] = {**provider[n_cached - 1], "cache_control": {"type": "ephemeral"}}
    return n_cached


def sanitize_tool_name(name: str) -> str:
    """Replace every character outside ``[A-Za-z0-9_-]`` with ``_`` (as Onyx does)."""
    return _TOOL_NAME_UNSAFE.sub("_", name)


def tool_call_tokens(tokenizer: Tokenizer, call: CallOut) -> int:
    """Onyx's cost of a tool call: the JSON of ``{"function_name", "arguments"}``."""
    return tokenizer.count(json.dumps({"function_name": call.name, "arguments": call.arguments}))


# ------------------------------------------------------------------------------ pipeline


@dataclass(slots=True)
class _FileMeta:
    file_id: str
    filename: str
    approx_char_count: int


@dataclass(slots=True)
class _Fixed:
    """The parts of the model's input around the history (``_Pipeline._fixed_parts``)."""

    system: LlmMessage | None
    custom_agent: LlmMessage | None
    system_text: str | None
    reserved: int
    project_msgs: list[LlmMessage]
    reminder: LlmMessage | None
    available: int  # the window less the safety margin
    tool_tokens: int

    def budget(self, s: Settings, history_budget: int, used: int) -> Budget:
        """The budget line of an assembly built around these parts."""
        return Budget(
            max_input_tokens=s.max_input_tokens,
            safety_margin=s.safety_margin,
            available_tokens=self.available,
            tools=self.tool_tokens,
            system=self.system.tokens if self.system else 0,
            custom_agent=self.custom_agent.tokens if self.custom_agent else 0,
            project_files=sum(m.tokens for m in self.project_msgs),
            reminder=self.reminder.tokens if self.reminder else 0,
            history_budget=history_budget,
            used=used,
        )


@dataclass(slots=True)
class _Trace:
    """What a full run found before the budget cut, for ``assemble_cache`` to build on."""

    chain: list[Message]  # the branch without the system message taken as the prompt
    system_msg: Message | None
    summary: Message | None
    cut_chain: list[Message]  # what the history is converted from
    history: list[LlmMessage]
    metadata: dict[str, _FileMeta]
    last_user_doc: int  # position in cut_chain of the last user message, -1 when none
    last_user_pos: int  # its position in history
    call_names: dict[str, str]
    structure_errors: int  # errors of the branch and summary steps
    construct_ok: bool = False  # the budget cut ran to its end (no empty result)


class _Pipeline:
    def __init__(
        self, conv: Conversation, settings: Settings, tokenizer: Tokenizer, opts: AssembleOptions
    ) -> None:
        self.conv = conv
        self.s = settings
        self.tok = tokenizer
        self.opts = opts
        self.errors: list[AssemblyError] = []
        self.tool_names = [t.name for t in conv.tools or ()]
        self.has_file_reader = any(n in FILE_READER_TOOLS for n in self.tool_names)
        self.tool_tokens = 0  # the tool definitions offered this turn
        self.system_range: TextRange | None = None  # where the document gives the system prompt
        self.trace: _Trace | None = None  # set by run()

    def count(self, text: str) -> int:
        return self.tok.count(text)

    def error(self, code: str, message: str, rng: TextRange, **kw: Any) -> None:
        self.errors.append(AssemblyError(code, message, rng, **kw))

    # The whole pipeline, in Onyx's order.
    def run(self) -> Assembly:
        s = self.s
        chain = self._resolve_branch()
        system_msg, chain = self._take_system_message(chain)
        summary, cut_chain, summarized_meta = self._apply_summary(chain)
        structure_errors = len(self.errors)
        self._precount(cut_chain)
        last_user_doc, call_names = _chain_facts(cut_chain)
        history, converter_meta, last_user_pos = self._convert_history(
            cut_chain, summary, last_user_doc, call_names
        )
        metadata: dict[str, _FileMeta] = dict(converter_meta) if self.has_file_reader else {}
        for fid, meta in summarized_meta.items():
            metadata.setdefault(fid, meta)
        self.trace = _Trace(
            chain,
            system_msg,
            summary,
            cut_chain,
            history,
            metadata,
            last_user_doc,
            last_user_pos,
            call_names,
            structure_errors,
        )

        fixed = self._fixed_parts(system_msg, history, last_user_pos)
        system, custom_agent, reminder = fixed.system, fixed.custom_agent, fixed.reminder
        project_msgs, reserved, tool_tokens = fixed.project_msgs, fixed.reserved, fixed.tool_tokens
        system_text, available = fixed.system_text, fixed.available
        budget_in = available - tool_tokens

        result = self._construct(
            system, custom_agent, history, reminder, project_msgs, budget_in, metadata
        )
        layout_msgs, cached_ids, dropped, orphans, forgotten, history_budget = result

        layout = tuple(LayoutEntry(m, seg, m.tokens, m.id in cached_ids) for m, seg in layout_msgs)
        provider, images_dropped = self._translate([e.message for e in layout])
        if images_dropped:
            note = LlmMessage(
                "$images_dropped",
                "user",
                texts.IMAGES_DROPPED.format(n=images_dropped),
                self.count(texts.IMAGES_DROPPED.format(n=images_dropped)),
            )
            layout += (LayoutEntry(note, "reminder", note.tokens, False),)
        cache_prefix = 0
        for e in layout:
            if not e.cache:
                break
            cache_prefix += 1
        cache_prefix = mark_cache_prefix(s, cache_prefix, provider)
        segments = tuple(
            Segment(
                name,
                sum(e.tokens for e in layout if e.segment == name),
                tuple(e.id for e in layout if e.segment == name),
            )
            for name in SEGMENTS
        )
        budget = fixed.budget(s, history_budget, sum(e.tokens for e in layout))
        compression = self._compression_plan(history, summary, reserved)
        tokens_by_id = {m.id: m.tokens for m in history}
        for e in layout:
            tokens_by_id[e.id] = e.tokens
        return Assembly(
            settings=s,
            encoding=self.tok.encoding,
            budget=budget,
            layout=layout,
            segments=segments,
            provider_messages=tuple(provider),
            history=tuple(history),
            dropped=tuple(dropped),
            orphans_dropped=tuple(orphans),
            forgotten_files=tuple(
                ForgottenFile(f.file_id, f.filename, f.approx_char_count) for f in forgotten
            ),
            compression=compression,
            cache_prefix_length=cache_prefix,
            errors=tuple(self.errors),
            system_text=system_text,
            reserved_tokens=reserved,
            chain=tuple(m.id for m in chain),
            summary_id=summary.id if summary else None,
            images_dropped=images_dropped,
            tokens_by_id=tokens_by_id,
        )

    def _fixed_parts(
        self, system_msg: Message | None, history: list[LlmMessage], last_user_pos: int
    ) -> _Fixed:
        """Everything besides the history: prompts, project files, reminder, tools."""
        conv, s = self.conv, self.s
        after_last_user = history[last_user_pos + 1 :] if last_user_pos >= 0 else []
        ran_tools = _tools_called(after_last_user)
        turn = _TurnFacts(
            ran_tools,
            _web_search_found(_last_cycle(after_last_user)),
            _python_generated_files(after_last_user),
        )
        project = self._project_files_prepare()
        cite = bool(project.loaded_texts) or bool(ran_tools & CITEABLE_TOOLS)
        ctx = PromptContext(
            today=self.opts.today,
            tools=self.tool_names,
            cite=cite,
            datetime_aware=s.datetime_aware,
            user_info=conv.user_info,
        )
        system, custom_agent, system_text, worst_system = self._prompts(system_msg, ctx)
        reserved = self._reserved_tokens(worst_system, history, last_user_pos)
        project_msgs, still_loaded = self._project_messages(project, reserved)
        if cite and not still_loaded and not ran_tools & CITEABLE_TOOLS:
            # The project files overflowed into the read_file listing: nothing is cited
            # after all (Onyx decides citing after loading them).
            cite = False
            ctx = dataclasses.replace(ctx, cite=False)
            system, custom_agent, system_text, _ = self._prompts(system_msg, ctx)
        reminder = self._reminder(turn, cite)

        available = int(s.max_input_tokens * (1 - s.safety_margin))
        tool_tokens = 0
        # No tools are offered on the last cycle nor after an image was generated (§6.1).
        if not s.last_cycle and "generate_image" not in ran_tools:
            tool_tokens = self._tool_definition_tokens()
        # Not clamped: tool definitions alone over the window are a budget overrun.
        self.tool_tokens = tool_tokens
        return _Fixed(
            system,
            custom_agent,
            system_text,
            reserved,
            project_msgs,
            reminder,
            available,
            tool_tokens,
        )

    def _tool_definition_tokens(self) -> int:
        return sum(self.count(json.dumps(t.schema)) for t in self.conv.tools or ())

    # -------------------------------------------------------------- branch and summary

    def _resolve_branch(self) -> list[Message]:
        """Return the messages of the current branch, root first (SPEC §2.1)."""
        msgs = self.conv.messages
        if not msgs:
            return []
        by_id = {m.id: m for m in msgs}
        tip_id = self.s.branch_tip
        if tip_id is not None and tip_id not in by_id:
            rng = self.conv.settings_ranges.get("branch_tip", TextRange(0, 0))
            self.error(
                "invalid-setting",
                f"`branch_tip` names no message: `{tip_id}`; the last message is used",
                rng,
            )
            tip_id = None
        if not any(m.parent is not None for m in msgs):
            end = by_id[tip_id].index + 1 if tip_id is not None else len(msgs)
            return list(msgs[:end])
        # A tree: a message without `parent` hangs on the message before it.
        tip = by_id[tip_id] if tip_id is not None else msgs[-1]
        chain: list[Message] = []
        seen: set[str] = set()
        cur: Message | None = tip
        while cur is not None:
            if cur.id in seen:
                self.error(
                    "schema-error",
                    f"`parent` links form a cycle through `{cur.id}`",
                    cur.parent_range or cur.range,
                )
                break
            seen.add(cur.id)
            chain.append(cur)
            if cur.parent is None:
                cur = msgs[cur.index - 1] if cur.index > 0 else None
            elif cur.parent in by_id:
                cur = by_id[cur.parent]
            else:
                self.error(
                    "schema-error",
                    f"`parent` names no message: `{cur.parent}`",
                    cur.parent_range or cur.range,
                )
                cur = None
        chain.reverse()
        return _hang_side_summaries(chain, msgs)

    def _take_system_message(self, chain: list[Message]) -> tuple[Message | None, list[Message]]:
        """Take the first system message as the system prompt unless one is given."""
        if self.conv.system_prompt is not None:
            return None, chain
        for i, m in enumerate(chain):
            if m.role is Role.SYSTEM:
                return m, chain[:i] + chain[i + 1 :]
        return None, chain

    def _apply_summary(
        self, chain: list[Message]
    ) -> tuple[Message | None, list[Message], dict[str, _FileMeta]]:
        """Apply the newest summary node of the branch (reference §3 step 2, §9.8)."""
        summaries = [i for i, m in enumerate(chain) if m.role is Role.SUMMARY]
        plain = [m for m in chain if m.role is not Role.SUMMARY]
        if not summaries:
            return None, plain, {}
        summary: Message | None = None
        cut = -1
        users = [j for j, m in enumerate(chain) if m.role is Role.USER]
        last_user = users[-1] if users else None
        for i in reversed(summaries):
            node = chain[i]
            pos = next((j for j in range(i) if chain[j].id == node.summarizes_through), None)
            later = next(
                (j for j in range(i + 1, len(chain)) if chain[j].id == node.summarizes_through),
                None,
            )
            if pos is None and later is not None and node.summarizes_through is not None:
                self._summary_covers_kept(chain, i, later)
                continue
            if pos is not None and last_user is not None and pos >= last_user:
                self._summary_covers_this_turn(chain, i, pos, last_user)
                continue
            if pos is None:
                self.error(
                    "summary-on-other-branch",
                    f"summary `{node.id}` summarizes through `{node.summarizes_through}`, "
                    "which is not a message of this branch; it is ignored",
                    node.summarizes_through_range or node.range,
                    severity="warning",
                )
                continue
            summary = node
            cut = pos
            break
        if summary is None:
            return None, plain, {}
        meta: dict[str, _FileMeta] = {}
        summarized = [m for m in chain[: cut + 1] if m.role is not Role.SUMMARY]
        for m in summarized:
            for f in m.files:
                meta.setdefault(f.file_id, _FileMeta(f.file_id, f.filename or "unknown", 0))
            if m.file_id:
                meta.setdefault(m.file_id, _FileMeta(m.file_id, m.filename or "unknown", 0))
        kept_ids = {m.id for m in summarized}
        rest = [m for m in plain if m.id not in kept_ids]
        return summary, rest, meta

    def _summary_covers_kept(self, chain: list[Message], i: int, cut: int) -> None:
        """Report a summary whose cut comes after it on the branch: the messages between
        the summary and its cut were sent verbatim after it was written."""
        node = chain[i]
        after = [m for m in chain[i + 1 : cut + 1] if m.role is not Role.SUMMARY]
        first = after[0] if after else chain[cut]
        n = f"{len(after)} message{'s' if len(after) != 1 else ''}"
        rng = node.summarizes_through_range or node.range
        self.error(
            "summary-covers-kept-message",
            f"summary `{node.id}` summarizes through `{node.summarizes_through}`, which comes "
            f"after the summary on the branch: it would cover {n} "
            f"sent verbatim after it was written, from `{first.id}`; it is ignored",
            rng,
            related=(
                (node.range, f"summary `{node.id}` is here and is not sent"),
                (first.range, f"`{first.id}` follows the summary and is sent verbatim"),
            ),
        )

    def _summary_covers_this_turn(
        self, chain: list[Message], i: int, cut: int, last_user: int
    ) -> None:
        """Report a summary whose cut is the last user message or a message after it."""
        node = chain[i]
        target, user = chain[cut], chain[last_user]
        what = (
            "the last user message"
            if cut == last_user
            else f"a message of this turn (after the last user message `{user.id}`)"
        )
        related: tuple[tuple[TextRange, str], ...] = (
            (node.range, f"summary `{node.id}` is not sent"),
        )
        if cut != last_user:
            related = ((user.range, f"this turn starts here: `{user.id}`"), *related)
        self.error(
            "summary-covers-this-turn",
            f"summary `{node.id}` summarizes through `{target.id}`, {what}: a summary never "
            "covers the question being answered nor this turn's tool calls and results; "
            "it is ignored",
            node.summarizes_through_range or node.range,
            related=related,
        )

    # -------------------------------------------------------------- history conversion

    def _precount(self, chain: Sequence[Message]) -> None:
        """Count every text of the branch in one batch (parallel on a cold cache)."""
        batch: list[str] = []
        for m in chain:
            if m.token_count is None:
                batch.append(m.content)
            for f in m.files:
                if f.content and f.token_count is None:
                    batch.append(texts.FILE_TEMPLATE.format(name=f.filename, content=f.content))
        self.tok.count_many(batch)

    def _convert_history(
        self,
        chain: list[Message],
        summary: Message | None,
        last_user_doc: int,
        call_names: Mapping[str, str],
    ) -> tuple[list[LlmMessage], dict[str, _FileMeta], int]:
        """Turn the branch into model messages (reference §4); return them, the injected
        files' metadata and the position of the last user message (-1 when none).

        ``last_user_doc`` and ``call_names`` are the branch's ``_chain_facts``.
        """
        meta: dict[str, _FileMeta] = {}
        out: list[LlmMessage] = []
        if summary is not None:
            out.append(self._summary_message(summary))
        last_user_pos = -1
        for i, m in enumerate(chain):
            self._convert_message(m, i, last_user_doc, call_names, meta, out)
            if i == last_user_doc:
                last_user_pos = len(out) - 1
        return out, meta, last_user_pos

    def _summary_message(self, summary: Message) -> LlmMessage:
        return LlmMessage(
            summary.id,
            "assistant",
            summary.content,
            self._own_tokens(summary),
            source=summary.green,
        )

    def _convert_message(
        self,
        m: Message,
        i: int,
        last_user_doc: int,
        call_names: Mapping[str, str],
        meta: dict[str, _FileMeta],
        out: list[LlmMessage],
    ) -> None:
        """Append the model messages of ``m``, the ``i``-th message of the branch."""
        if m.role is Role.USER:
            out.extend(self._injected_files(m, meta))
            extra = self.conv.additional_context
            if i == last_user_doc and extra is not None and extra.content:
                # Onyx's additional context: a user message after the current message's
                # files, right before it (chat_utils.py:801-812). Charged what it costs
                # (Onyx counts only the inner text).
                text = texts.ADDITIONAL_CONTEXT.format(text=extra.content)
                tokens = extra.token_count if extra.token_count is not None else self.count(text)
                out.append(LlmMessage("$additional_context", "user", text, tokens))
            if m.file_id is not None:
                meta.setdefault(
                    m.file_id,
                    _FileMeta(m.file_id, m.filename or "unknown", len(m.content)),
                )
            stored = m.green
            images = stored.images + tuple(
                Image(f.file_id, f.range, f.token_count) for f in stored.files if f.kind == "image"
            )
            image_tokens = sum(img.token_count or 0 for img in images)
            if i == last_user_doc:
                # Project images ride on the last user message, after its own images;
                # their tokens are not counted here (reference §4 step 4).
                images += tuple(
                    Image(f.file_id, f.range, f.token_count)
                    for f in self.conv.project_files
                    if f.kind == "image"
                )
            tokens = (
                m.token_count if m.token_count is not None else self.count(m.content) + image_tokens
            )
            out.append(
                LlmMessage(
                    m.id,
                    "user",
                    m.content,
                    tokens,
                    source=m.green,
                    file_id=m.file_id,
                    images=images,
                    image_tokens=image_tokens,
                )
            )
        elif m.role is Role.ASSISTANT:
            calls = tuple(
                CallOut(c.id, c.name, c.arguments if c.arguments is not None else c.arguments_text)
                for c in m.tool_calls
            )
            if m.token_count is not None and any(c.token_count is not None for c in m.tool_calls):
                # As Onyx's row (compression.py:69-85): the message's own count is its
                # text's, and every call adds its tool-call tokens (pinned or measured).
                tokens = m.token_count + sum(
                    c.token_count if c.token_count is not None else tool_call_tokens(self.tok, co)
                    for c, co in zip(m.tool_calls, calls, strict=True)
                )
            elif m.token_count is not None:
                tokens = m.token_count  # covers its calls
            else:
                tokens = self.count(m.content) + sum(
                    c.token_count if c.token_count is not None else tool_call_tokens(self.tok, co)
                    for c, co in zip(m.tool_calls, calls, strict=True)
                )
            out.append(
                LlmMessage(m.id, "assistant", m.content, tokens, source=m.green, tool_calls=calls)
            )
        elif m.role is Role.TOOL:
            past = i < last_user_doc
            if past and not self.s.keep_past_tool_results:
                name = call_names.get(m.tool_call_id or "", "")
                text = _past_tool_result(name, m.content)
                out.append(
                    LlmMessage(
                        m.id,
                        "tool",
                        text,
                        self.count(text),
                        source=m.green,
                        tool_call_id=m.tool_call_id,
                        replaced=text != m.content,
                    )
                )
            else:
                out.append(
                    LlmMessage(
                        m.id,
                        "tool",
                        m.content,
                        self._tool_result_tokens(m),
                        source=m.green,
                        tool_call_id=m.tool_call_id,
                    )
                )
        elif m.role is Role.REMINDER:
            out.append(LlmMessage(m.id, "reminder", m.content, self._own_tokens(m), source=m.green))
        elif m.role is Role.SYSTEM:
            out.append(LlmMessage(m.id, "system", m.content, self._own_tokens(m), source=m.green))

    def _own_tokens(self, m: Message) -> int:
        return m.token_count if m.token_count is not None else self.count(m.content)

    def _tool_result_tokens(self, m: Message) -> int:
        """A tool result's cost; Onyx charges its tool-failure reply a fixed 50 (§6.9)."""
        if m.token_count is None and m.content == texts.TOOL_FAILURE:
            return TOOL_FAILURE_TOKENS
        return self._own_tokens(m)

    def _injected_files(self, m: Message, meta: dict[str, _FileMeta]) -> list[LlmMessage]:
        """Uploaded files become their own user messages right before their message."""
        out = []
        for k, f in enumerate(m.files):
            if f.kind == "image":
                continue
            content = f.content or ""
            if f.kind == "tabular":
                text = texts.FILE_METADATA_ONLY.format(name=f.filename, id=f.file_id)
                tokens = f.token_count if f.token_count is not None else max(1, len(text) // 4)
            elif not content.strip():
                # Onyx's notice for a file still being processed, else for one without
                # extractable text (chat_utils.py:124-137).
                template = texts.FILE_PROCESSING if f.processing else texts.FILE_NO_TEXT
                text = template.format(name=f.filename)
                tokens = f.token_count if f.token_count is not None else max(1, len(text) // 4)
            else:
                text = texts.FILE_TEMPLATE.format(name=f.filename, content=content)
                tokens = f.token_count if f.token_count is not None else self.count(text)
            approx = f.approx_char_count if f.approx_char_count is not None else len(content)
            meta.setdefault(f.file_id, _FileMeta(f.file_id, f.filename, approx))
            out.append(
                LlmMessage(
                    f"{m.id}/files/{k}", "user", text, tokens, source=m.green, file_id=f.file_id
                )
            )
        return out

    # -------------------------------------------------------------- prompts

    def _prompts(
        self, system_msg: Message | None, ctx: PromptContext
    ) -> tuple[LlmMessage | None, LlmMessage | None, str | None, str]:
        """Build S and CA (reference §5.1); return them, S's text and the worst-case S text."""
        conv, s = self.conv, self.s
        ca_block = conv.custom_agent_prompt
        source = conv.system_prompt
        template: PromptTemplate | None = None
        override: int | None = None
        sys_id = "$system"
        if isinstance(source, PromptRef):
            template = self.opts.system_template
        elif isinstance(source, TextBlock):
            template = self._parse_prompt(source.content)
            override = source.token_count
        elif system_msg is not None:
            template = self._parse_prompt(system_msg.content)
            override = system_msg.token_count
            sys_id = system_msg.id
        base_text = template.text[template.body_range.start :] if template else ""

        if s.replace_system_prompt:
            # Branch 1: the custom prompt replaces the base prompt; no CA message.
            text = ca_block.content if ca_block else ""
            if not text.strip():
                return None, None, None, ""
            built = build_replacement_system_prompt(text, ctx)
            self.system_range = ca_block.range if ca_block else None
            tokens = ca_block.token_count if ca_block and ca_block.token_count is not None else None
            return self._system_msg("$system", built, tokens), None, built, built
        if template is None or not base_text.strip():
            # Branch 3: an empty base prompt; the custom prompt (if any) becomes the system.
            if ca_block is None or not ca_block.content.strip():
                return None, None, None, ""
            built = build_replacement_system_prompt(ca_block.content, ctx)
            self.system_range = ca_block.range
            return self._system_msg("$system", built, ca_block.token_count), None, built, built
        # Branch 2: normal.
        built = build_system_prompt(template, ctx)
        worst = build_system_prompt(
            template,
            PromptContext(ctx.today, ctx.tools, True, True, ctx.user_info),
            all_guidance=True,
        )
        system = self._system_msg(
            sys_id, built, override, source=system_msg.green if system_msg else None
        )
        if isinstance(source, PromptRef | TextBlock):
            self.system_range = source.range
        elif system_msg is not None:
            self.system_range = system_msg.range
        custom_agent = None
        if ca_block is not None and ca_block.content.strip():
            ca_text = build_custom_agent_prompt(ca_block.content, ctx)
            tokens = (
                ca_block.token_count if ca_block.token_count is not None else self.count(ca_text)
            )
            custom_agent = LlmMessage("$custom_agent", "user", ca_text, tokens)
        return system, custom_agent, built, worst

    def _parse_prompt(self, text: str) -> PromptTemplate:
        """The base prompt's text parsed as a template (a hook for ``assemble_cache``)."""
        return parse_prompt_text(text)

    def _system_msg(
        self, msg_id: str, text: str, override: int | None, source: Message | None = None
    ) -> LlmMessage:
        tokens = override if override is not None else self.count(text)
        return LlmMessage(msg_id, "system", text, tokens, source=source)

    def _reserved_tokens(
        self, worst_system: str, history: list[LlmMessage], last_user_pos: int
    ) -> int:
        """Onyx's reserved tokens (reference §5.3), or the configured number."""
        if isinstance(self.s.reserved_tokens, int):
            return self.s.reserved_tokens
        ca = self.conv.custom_agent_prompt
        persona_text = ca.content if ca is not None else ""
        reserved = self.count(persona_text + " " + worst_system)
        if last_user_pos >= 0:
            last = history[last_user_pos]
            # The current message's uploaded files: the injected messages right before it.
            j = last_user_pos - 1
            if j >= 0 and history[j].id == "$additional_context":
                j -= 1  # not reserved (prompt_utils.py:60-124)
            while j >= 0 and history[j].id.startswith(f"{last.id}/files/"):
                reserved += history[j].tokens
                j -= 1
        return reserved

    # -------------------------------------------------------------- project files

    @dataclass(slots=True)
    class _Project:
        loaded_texts: list[tuple[FileAttachment, str, int]]  # file, content, tokens
        tabular: list[tuple[FileAttachment, str]]
        images: list[FileAttachment]
        all_overrides: bool

    def _project_files_prepare(self) -> _Pipeline._Project:
        loaded: list[tuple[FileAttachment, str, int]] = []
        tabular: list[tuple[FileAttachment, str]] = []
        images: list[FileAttachment] = []
        all_overrides = True
        for f in self.conv.project_files:
            content = f.content if f.content is not None else self.opts.file_contents.get(f.file_id)
            if f.kind == "image":
                images.append(f)
                continue
            if content is None:
                continue  # the caller reported the unreadable path
            if f.kind == "tabular":
                tabular.append((f, content))
                continue
            if f.token_count is None:
                all_overrides = False
            tokens = f.token_count if f.token_count is not None else self.count(content)
            loaded.append((f, content, tokens))
        return _Pipeline._Project(loaded, tabular, images, all_overrides)

    def _project_messages(self, project: _Project, reserved: int) -> tuple[list[LlmMessage], bool]:
        """The documents message and the file listing (reference §6.5, §7.1), and whether
        the files' texts are still loaded (False when they overflowed into the listing)."""
        return self._project_messages_of(project, _project_overflows(project, self.s, reserved))

    def _project_messages_of(
        self, project: _Project, overflow: bool
    ) -> tuple[list[LlmMessage], bool]:
        """``_project_messages`` once it is known whether the texts overflow their share
        (all that ``reserved`` decides)."""
        aggregate = sum(t for _, _, t in project.loaded_texts)
        listing: list[_FileMeta] = []
        msgs: list[LlmMessage] = []
        still_loaded = bool(project.loaded_texts)
        if overflow:
            # Overflow (the DISABLE_VECTOR_DB path): nothing loaded, every file listed.
            for f, _, tokens in project.loaded_texts:
                listing.append(_FileMeta(f.file_id, f.filename, tokens * APPROX_CHARS_PER_TOKEN))
            still_loaded = False
        elif project.loaded_texts:
            docs = [
                {"document": i, **({"title": f.filename} if f.filename else {}), "contents": c}
                for i, (f, c, _) in enumerate(project.loaded_texts, start=1)
            ]
            text = texts.PROJECT_DOCUMENTS_HEADER + json.dumps({"documents": docs}, indent=2)
            image_tokens = sum(f.token_count or 0 for f in project.images)
            tokens = (
                aggregate + image_tokens
                if project.all_overrides
                else self.count(text) + image_tokens
            )
            msgs.append(LlmMessage("$project_files", "user", text, tokens))
        for f, content in project.tabular:
            approx = f.approx_char_count if f.approx_char_count is not None else len(content)
            listing.append(_FileMeta(f.file_id, f.filename, approx))
        if listing:
            text = _listing_text(listing)
            msgs.append(LlmMessage("$project_file_list", "user", text, self.count(text)))
        return msgs, still_loaded

    # -------------------------------------------------------------- reminder

    def _reminder(self, turn: _TurnFacts, cite: bool) -> LlmMessage | None:
        """The reminder priority chain (reference §5.4, ``llm_loop.py:714-740``).

        ``turn.called``: the tools called at any cycle of this turn (Onyx sets its
        image-generation and citing flags from the calls made, ``llm_loop.py:1375-1386``);
        ``turn.web_search_found``: a web search of the previous cycle returned results (the
        open-url nudge, ``llm_loop.py:1194-1195``); ``turn.files_generated``: a
        ``run_python`` response of this turn generated files (``llm_loop.py:1153-1163``).
        """
        block = self.conv.reminder
        if "generate_image" in turn.called:
            text = texts.IMAGE_REMINDER
            return LlmMessage("$reminder", "reminder", text, self.count(text))
        if turn.web_search_found and "open_url" in self.tool_names and not self.s.last_cycle:
            text = texts.OPEN_URL_REMINDER
            return LlmMessage("$reminder", "reminder", text, self.count(text))
        base = ""
        if block is not None:
            base = substitute_user_placeholders(block.content.strip(), self.conv.user_info)
        text = base
        if self.s.last_cycle:
            text += "\n\n" + texts.LAST_CYCLE_REMINDER
        if cite:
            text += "\n\n" + texts.CITATION_REMINDER
        if turn.files_generated:
            text += "\n\n" + texts.FILE_LINK_REMINDER
        text = text.strip()
        if not text:
            return None
        if block is not None and block.token_count is not None and text == block.content.strip():
            tokens = block.token_count
        else:
            tokens = self.count(text)
        return LlmMessage("$reminder", "reminder", text, tokens)

    # -------------------------------------------------------------- construct (§6.2)

    def _construct(
        self,
        system: LlmMessage | None,
        custom_agent: LlmMessage | None,
        history: list[LlmMessage],
        reminder: LlmMessage | None,
        project_msgs: list[LlmMessage],
        available: int,
        metadata: dict[str, _FileMeta],
    ) -> tuple[list[tuple[LlmMessage, str]], set[str], list[str], list[str], list[_FileMeta], int]:
        """Onyx's ``construct_message_history`` with the budget re-charged on every rebuild.

        Returns the assembled (message, segment) list, the ids marked for caching, the
        dropped ids, the orphaned tool responses dropped, the forgotten files and the
        history budget.
        """
        fixed = [m for m in (system, custom_agent, reminder) if m is not None]
        project_tokens = sum(m.tokens for m in project_msgs)
        history_budget = available - sum(m.tokens for m in fixed) - project_tokens
        empty: tuple[
            list[tuple[LlmMessage, str]], set[str], list[str], list[str], list[_FileMeta], int
        ]
        empty = ([], set(), [], [], [], history_budget)
        if history_budget < 0:
            self._budget_overrun(available, system, custom_agent, project_tokens, reminder)
            return empty
        head: list[tuple[LlmMessage, str]] = []
        if system is not None:
            head.append((system, "system"))
        tail_fixed: list[tuple[LlmMessage, str]] = []
        if custom_agent is not None:
            tail_fixed.append((custom_agent, "custom_agent"))
        tail_fixed.extend((m, "project_files") for m in project_msgs)
        cached = {system.id} if system is not None else set()
        if not history:
            out = head + tail_fixed + ([(reminder, "reminder")] if reminder else [])
            return out, cached, [], [], [], history_budget

        marker = self._marker_cost(history)
        cost = {m.id: _replay_cost(m, marker) for m in history}
        sliced: list[LlmMessage] = []
        if self.s.last_n_user_messages is not None:
            # Onyx's last-N filter: the history from the N-th last user-type message on
            # (injected files count); what it removes is simply not sent
            # (llm_loop.py:456-473).
            users = [i for i, m in enumerate(history) if m.kind == "user"]
            if len(users) > self.s.last_n_user_messages:
                cut_at = users[-self.s.last_n_user_messages]
                sliced, history = history[:cut_at], history[cut_at:]
        last_idx = max((i for i, m in enumerate(history) if m.kind == "user"), default=-1)
        if last_idx < 0:
            first = history[0].source
            self.error(
                "no-user-message",
                "the conversation has no user message: there is no turn to assemble",
                self.conv.locate(first).range if first else TextRange(0, 0),
            )
            return empty
        before, last, after = history[:last_idx], history[last_idx], history[last_idx + 1 :]
        # Onyx appends the image-limit note uncharged; it is charged here, from the first
        # message that takes the images over the cap, so the total stays within the budget.
        cap, note_tokens = self._image_cap(), self._image_note_tokens(history)
        n_images = _n_images([last, *after])
        # A response of this turn that no earlier message calls is dropped by the orphan
        # pass whatever the cut: it does not count against the turn (Onyx counts it).
        doomed = set(uncalled_responses(history, last_idx + 1))
        required = cost[last.id] + sum(cost[m.id] for m in after if m.id not in doomed)
        if cap is not None and n_images > cap:
            required += note_tokens
        if required > history_budget:
            src = last.source
            self.error(
                "last-turn-over-budget",
                f"the last user message and what follows need {required:,} tokens but only "
                f"{history_budget:,} are left for history (over by {required - history_budget:,})",
                self.conv.locate(src).range if src else TextRange(0, 0),
                related=_largest_of_turn(self.conv, after, cost),
            )
            return empty
        remaining = history_budget - required

        kept: list[LlmMessage] = []
        kept_cost = 0
        for m in reversed(before):
            c = cost[m.id]
            if cap is not None and n_images <= cap < n_images + _n_images([m]):
                c += note_tokens
            if kept_cost + c > remaining:
                break
            kept.append(m)
            kept_cost += c
            n_images += _n_images([m])
        kept.reverse()
        n_dropped = len(before) - len(kept)
        dropped_msgs = before[:n_dropped]
        dropped_fids = [m.file_id for m in dropped_msgs if m.file_id]
        history_fids = {m.file_id for m in history if m.file_id}
        for fid in metadata:
            if fid not in history_fids and fid not in dropped_fids:
                dropped_fids.append(fid)

        forgotten: list[_FileMeta] = []
        fg: LlmMessage | None = None
        if dropped_fids and metadata:
            forgotten = [metadata[f] for f in dropped_fids if f in metadata]
            forgotten = _dedupe(forgotten)
        if forgotten:
            # With the image cap the cut above charged the note; the listing's eviction
            # does not (the cache never runs with the note, and neither re-charges it).
            prefix = [0]
            for m in before:
                prefix.append(prefix[-1] + cost[m.id])
            first_kept = n_dropped
            k, forgotten, fg = fit_listing(
                _ListingFit(
                    k0=first_kept,
                    n=len(before),
                    remaining=remaining - (kept_cost - (prefix[-1] - prefix[first_kept])),
                    prefix=prefix,
                    file_at=lambda q: before[q].file_id if before[q].file_id in metadata else None,
                    metadata=metadata,
                    forgotten=forgotten,
                    newest=lambda: _newest_positions(
                        [m.file_id for m in [*sliced, *before[:first_kept]]]
                    ),
                    listing=self._listing_msg,
                )
            )
            kept = before[k:]
            if fg is None:
                self.error(
                    "budget-overrun",
                    "the forgotten-files listing does not fit in the budget and is left out",
                    _doc_span(self.conv, before[: len(before) - len(kept)])
                    or _doc_span(self.conv, history[:1])
                    or TextRange(0, 0),
                    severity="warning",
                )
        n_dropped = len(before) - len(kept)
        dropped = [m.id for m in [*sliced, *before[:n_dropped]]]
        cached |= {m.id for m in kept}

        out: list[tuple[LlmMessage, str]] = list(head)
        out.extend((m, "history") for m in kept)
        out.extend(tail_fixed)
        if fg is not None:
            out.append((fg, "forgotten_files"))
        out.append((last, "last_user"))
        out.extend((m, "this_turn") for m in after)
        if reminder is not None:
            out.append((reminder, "reminder"))

        # Orphan pass: drop tool responses whose call is not earlier in the list.
        seen_calls: set[str] = set()
        final: list[tuple[LlmMessage, str]] = []
        orphans: list[str] = []
        for m, seg in out:
            if m.kind == "assistant":
                seen_calls.update(c.id for c in m.tool_calls)
            if m.kind == "tool" and (not m.tool_call_id or m.tool_call_id not in seen_calls):
                orphans.append(m.id)
                continue
            final.append((m, seg))
        final = [(_with_cost(m, cost), seg) for m, seg in final]
        if self.trace is not None:
            self.trace.construct_ok = True
        return final, cached, dropped, orphans, forgotten if fg else [], history_budget

    def _budget_overrun(
        self,
        available: int,
        system: LlmMessage | None,
        custom_agent: LlmMessage | None,
        project_tokens: int,
        reminder: LlmMessage | None,
    ) -> None:
        parts = [
            ("system prompt", system.tokens if system else 0),
            ("custom agent prompt", custom_agent.tokens if custom_agent else 0),
            ("project files", project_tokens),
            ("reminder", reminder.tokens if reminder else 0),
        ]
        room = available
        where = " after the tool definitions"
        if room < 0:
            parts.insert(0, ("tool definitions", self.tool_tokens))
            room += self.tool_tokens
            where = ""
        total = sum(n for _, n in parts)
        detail = ", ".join(f"{name} {n:,}" for name, n in parts if n)
        # Point at the largest part the document gives, the others are related.
        places = self._fixed_part_ranges(where == "")
        located = sorted(
            ((n, name, places[name]) for name, n in parts if n and name in places),
            key=lambda p: -p[0],
        )
        self.error(
            "budget-overrun",
            f"the fixed parts need {total:,} tokens but only {room:,} are available{where} "
            f"(over by {total - room:,}: {detail})",
            located[0][2] if located else TextRange(0, 0),
            related=tuple((rng, f"{name}: {n:,} tokens") for n, name, rng in located[1:]),
        )

    def _fixed_part_ranges(self, with_tools: bool) -> dict[str, TextRange]:
        """Where the document gives each fixed part (the largest project file, tool)."""
        conv = self.conv
        res: dict[str, TextRange] = {}
        if self.system_range is not None:
            res["system prompt"] = self.system_range
        if conv.custom_agent_prompt is not None and not self.s.replace_system_prompt:
            res["custom agent prompt"] = conv.custom_agent_prompt.range
        if conv.project_files:

            def size(f: FileAttachment) -> int:
                if f.token_count is not None:
                    return f.token_count
                content = (
                    f.content if f.content is not None else self.opts.file_contents.get(f.file_id)
                )
                return self.count(content) if content else 0

            res["project files"] = max(conv.project_files, key=size).range
        if conv.reminder is not None:
            res["reminder"] = conv.reminder.range
        if with_tools and conv.tools:
            res["tool definitions"] = max(
                conv.tools, key=lambda t: self.count(json.dumps(t.schema))
            ).range
        return res

    def _image_cap(self) -> int | None:
        """Most images per request, or None (markers for non-vision models are never capped)."""
        return image_cap_of(self.s)

    def _image_note_tokens(self, history: list[LlmMessage]) -> int:
        """The image-limit note's cost (at its largest count), or 0 when it cannot occur."""
        cap = self._image_cap()
        total = _n_images(history)
        if cap is None or total <= cap:
            return 0
        return self.count(texts.IMAGES_DROPPED.format(n=total - cap))

    def _marker_cost(self, history: list[LlmMessage]) -> int | None:
        """Per-image marker cost when images are replayed as text markers, else None."""
        if self.s.vision or not any(m.kind == "user" and m.images for m in history):
            return None
        return self.count(texts.IMAGE_NOT_SUPPORTED.format(id=_NON_VISION_MARKER_ID))

    def _listing_msg(self, files: list[_FileMeta]) -> LlmMessage:
        text = _listing_text(files)
        return LlmMessage("$forgotten_files", "user", text, self.count(text))

    # -------------------------------------------------------------- translation (§8)

    def _translate(self, msgs: list[LlmMessage]) -> tuple[list[dict[str, Any]], int]:
        s = self.s
        cap = self._image_cap()
        keep_images: set[tuple[str, int]] | None = None
        images_dropped = 0
        if cap is not None:
            keep_images = set()
            total = 0
            for m in reversed(msgs):
                if m.kind != "user":
                    continue
                for k, _img in enumerate(m.images):
                    total += 1
                    if len(keep_images) < cap:
                        keep_images.add((m.id, k))
            images_dropped = max(0, total - cap)
        out = [self._provider_message(m, keep_images) for m in msgs]
        if images_dropped:
            out.append({"role": "user", "content": texts.IMAGES_DROPPED.format(n=images_dropped)})
        if _FORMATTING_MODELS.search(s.model.lower()):
            for msg in out:
                if msg["role"] == "system":
                    msg["content"] = texts.FORMATTING_REENABLED + msg["content"]
                    break
        return out, images_dropped

    def _provider_message(
        self, m: LlmMessage, keep_images: set[tuple[str, int]] | None
    ) -> dict[str, Any]:
        """One message as the provider receives it (before the formatting prefix)."""
        ollama = self.s.provider == "ollama"
        if m.kind == "system":
            return {"role": "system", "content": m.text}
        if m.kind == "reminder":
            return {"role": "user", "content": texts.REMINDER_WRAPPER.format(text=m.text)}
        if m.kind == "user":
            return self._user_message(m, keep_images)
        if m.kind == "assistant":
            return _assistant_message(m, ollama=ollama)
        assert m.kind == "tool", m.kind
        if ollama:
            return {"role": "user", "content": f"[Tool Result] id={m.tool_call_id}\n{m.text}"}
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.text}

    def _user_message(
        self, m: LlmMessage, keep_images: set[tuple[str, int]] | None
    ) -> dict[str, Any]:
        if not m.images:
            return {"role": "user", "content": m.text}
        parts: list[dict[str, Any]] = [{"type": "text", "text": m.text}]
        for k, img in enumerate(m.images):
            if keep_images is not None and (m.id, k) not in keep_images:
                continue
            if not self.s.vision:
                parts.append({"type": "text", "text": texts.IMAGE_NOT_SUPPORTED.format(id=img.ref)})
                continue
            parts.append({"type": "text", "text": texts.IMAGE_LABEL.format(id=img.ref)})
            parts.append({"type": "image_url", "image_url": {"url": img.ref}})
        return {"role": "user", "content": parts}

    # -------------------------------------------------------------- compression (§9)

    def _compression_plan(
        self, history: list[LlmMessage], summary: Message | None, reserved: int
    ) -> CompressionPlan:
        s = self.s
        total = sum(map(stored_tokens, history))
        threshold = int((s.max_input_tokens - reserved) * s.compression_trigger_ratio)
        triggered = total > threshold
        for_recent = int(total * s.recent_messages_ratio)
        candidates = [m for m in history if is_compression_candidate(m, summary)]
        recent: list[LlmMessage] = []
        used = 0
        for m in reversed(candidates):
            c = stored_tokens(m)
            if used + c > for_recent and recent:
                break
            recent.append(m)
            used += c
        recent.reverse()
        while recent and recent[0].kind != "user":
            recent.pop(0)
        if not recent:
            users = [i for i, m in enumerate(candidates) if m.kind == "user"]
            recent = candidates[users[-1] :] if users else list(candidates)
            older: list[LlmMessage] = [] if not users else candidates[: users[-1]]
        else:
            recent_ids = {m.id for m in recent}
            older = [m for m in candidates if m.id not in recent_ids]
        request: tuple[dict[str, Any], ...] = ()
        if triggered and older:
            request = _summarization_request(older, recent, summary)
        return CompressionPlan(
            triggered=triggered,
            threshold=threshold,
            history_tokens=total,
            reserved_tokens=reserved,
            tokens_for_recent=for_recent,
            summarize=tuple(m.id for m in older) if triggered else (),
            keep=tuple(m.id for m in recent) if triggered else tuple(m.id for m in candidates),
            progressive=summary is not None,
            request=request,
        )


# ------------------------------------------------------------------------------ helpers


def _project_overflows(project: _Pipeline._Project, s: Settings, reserved: int) -> bool:
    """Whether the project files' texts exceed their share of the window left after
    ``reserved``: they are then listed instead of loaded (reference §6.5)."""
    if not project.loaded_texts:
        return False
    aggregate = sum(t for _, _, t in project.loaded_texts)
    return aggregate >= (s.max_input_tokens - reserved) * PROJECT_FILE_SHARE


def stored_tokens(m: LlmMessage) -> int:
    """What Onyx's compression counts for a history message: the stored message's text
    plus its tool calls (``compression.py:69-85``), not the files uploaded with it nor its
    images (0 for an injected file and for what the pipeline creates)."""
    if m.source is None or m.file_id is not None:
        return 0
    if m.kind == "user":
        return max(0, m.tokens - m.image_tokens)
    return m.tokens


def is_compression_candidate(m: LlmMessage, summary: Message | None) -> bool:
    """Whether the compression plan considers the message: a stored message (not the
    summary, an injected file or what the pipeline creates) with text; Onyx drops only
    empty text, whitespace is text (``compression.py:211``). ``summary`` is the summary
    as the conversation shows it (a ``Located`` message), or None."""
    return (
        m.source is not None
        and (summary is None or m.source is not summary.green)
        and m.file_id is None
        and m.kind in ("user", "assistant", "tool")
        and m.text != ""
    )


def _doc_span(conv: Conversation, msgs: Sequence[LlmMessage]) -> TextRange | None:
    """The document span of ``msgs``' sources (a summary node, placed anywhere in the
    document, only when it is alone), or None."""
    srcs = [conv.locate(m.source) for m in msgs if m.source is not None]
    plain = [m for m in srcs if m.role is not Role.SUMMARY] or srcs
    if not plain:
        return None
    return TextRange(min(m.range.start for m in plain), max(m.range.end for m in plain))


def _largest_of_turn(
    conv: Conversation, after: Sequence[LlmMessage], cost: Mapping[str, int]
) -> tuple[tuple[TextRange, str], ...]:
    """The largest message after the last user message, as a related location."""
    located = [m for m in after if m.source is not None]
    if not located:
        return ()
    big = max(located, key=lambda m: cost[m.id])
    assert big.source is not None
    return (
        (
            conv.locate(big.source).range,
            f"the largest message of this turn: `{big.id}`, {cost[big.id]:,} tokens",
        ),
    )


def _hang_side_summaries(chain: list[Message], msgs: Sequence[Message]) -> list[Message]:
    """Add the summary nodes that hang off the branch without being on it.

    Onyx stores a summary as a child of the last user message it saw, beside the answers
    given after it, and applies it to every branch through that parent; such a summary
    joins the chain right after its parent.
    """
    on_chain = {m.id for m in chain}
    side: dict[str, list[Message]] = {}
    for m in msgs:
        if m.role is not Role.SUMMARY or m.id in on_chain:
            continue
        parent = m.parent if m.parent is not None else (msgs[m.index - 1].id if m.index else None)
        if parent in on_chain:
            side.setdefault(parent, []).append(m)
    if not side:
        return chain
    res: list[Message] = []
    for m in chain:
        res.append(m)
        res.extend(side.get(m.id, ()))
    return res


def _chain_facts(chain: Sequence[Message]) -> tuple[int, dict[str, str]]:
    """The position of the last user message of the branch (not an injected file when
    there is another one; -1 when none) and the tool names by call id."""
    last_user_doc = max(
        (i for i, m in enumerate(chain) if m.role is Role.USER and m.file_id is None),
        default=max((i for i, m in enumerate(chain) if m.role is Role.USER), default=-1),
    )
    return last_user_doc, {c.id: c.name for m in chain for c in m.tool_calls}


def _last_cycle(after: Sequence[LlmMessage]) -> Sequence[LlmMessage]:
    """This turn's last tool cycle: its last assistant tool-call message and what follows."""
    for i in range(len(after) - 1, -1, -1):
        if after[i].kind == "assistant" and after[i].tool_calls:
            return after[i:]
    return ()


def _n_images(msgs: Sequence[LlmMessage]) -> int:
    """Images the provider translation counts against the cap (user messages only)."""
    return sum(len(m.images) for m in msgs if m.kind == "user")


@dataclass(frozen=True, slots=True)
class _TurnFacts:
    """What this turn's tool cycles decide about the reminder (``_Pipeline._reminder``)."""

    called: set[str]
    web_search_found: bool
    files_generated: bool


def _tools_called(after: Sequence[LlmMessage]) -> set[str]:
    """Names of the tools called in this turn, answered or not (Onyx keys its flags on the
    calls a cycle made, ``llm_loop.py:1375-1386``; there every call is answered)."""
    return {c.name for m in after if m.kind == "assistant" for c in m.tool_calls}


def _answers(msgs: Sequence[LlmMessage], tool: str) -> list[LlmMessage]:
    """The tool responses in ``msgs`` that answer a call of ``tool`` made in ``msgs``."""
    ids = {c.id for m in msgs for c in m.tool_calls if c.name == tool}
    return [m for m in msgs if m.kind == "tool" and m.tool_call_id in ids]


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _web_search_found(cycle: Sequence[LlmMessage]) -> bool:
    """Whether a ``web_search`` of ``cycle`` returned results: Onyx nudges towards open_url
    only then (``llm_loop.py:1194-1195``). A response with no text, or Onyx's own form of
    an empty search (a JSON object whose ``results`` is an empty list,
    ``web_search_tool.py:335-341``), returned nothing; any other text counts as results."""
    for m in _answers(cycle, "web_search"):
        if not m.text.strip():
            continue
        data = _json_object(m.text)
        if data is not None and data.get("results") == []:
            continue
        return True
    return False


def _python_generated_files(after: Sequence[LlmMessage]) -> bool:
    """Whether a ``run_python`` response of this turn lists generated files: a JSON object
    with a non-empty ``generated_files``, Onyx's test (``llm_loop.py:1153-1163``)."""
    for m in _answers(after, "run_python"):
        data = _json_object(m.text)
        if data is not None and data.get("generated_files"):
            return True
    return False


def _past_tool_result(tool_name: str, content: str) -> str:
    """Onyx's replacement for an earlier turn's tool result (reference §4)."""
    if tool_name != "generate_image":
        return texts.TOOL_RESULT_PLACEHOLDER
    try:
        data = json.loads(content)
    except ValueError:
        data = None
    images = []
    if isinstance(data, list):
        for item in data:
            if isinstance(item, dict) and isinstance(item.get("file_id"), str):
                prompt = item.get("revised_prompt")
                images.append(
                    {
                        "file_id": item["file_id"],
                        "revised_prompt": prompt if isinstance(prompt, str) else "",
                    }
                )
    if images:
        return json.dumps(images)
    return content if content else texts.TOOL_RESULT_PLACEHOLDER


def _replay_cost(m: LlmMessage, marker: int | None) -> int:
    if marker is None or m.kind != "user" or not m.images:
        return m.tokens
    return max(0, m.tokens - m.image_tokens) + len(m.images) * marker


def _with_cost(m: LlmMessage, cost: Mapping[str, int]) -> LlmMessage:
    c = cost.get(m.id)
    if c is None or c == m.tokens:
        return m
    return LlmMessage(
        m.id,
        m.kind,
        m.text,
        c,
        m.source,
        m.tool_calls,
        m.tool_call_id,
        m.file_id,
        m.images,
        m.image_tokens,
        m.replaced,
    )


@dataclass(frozen=True, slots=True)
class _ListingFit:
    """What ``fit_listing`` decides from: the history before the last user message as
    prefix sums of its replay costs (``prefix[i]`` = the cost of its first ``i`` messages),
    where Onyx's newest-first fill starts keeping (``k0``), the room left for the kept
    history and the listing together, the forgotten files in Onyx's order, and how to
    find a message's listable file, the cut files' positions and a listing's cost."""

    k0: int
    n: int
    remaining: int
    prefix: Sequence[int]
    file_at: Callable[[int], str | None]
    metadata: Mapping[str, _FileMeta]
    forgotten: list[_FileMeta]
    newest: Callable[[], dict[str, int]]
    listing: Callable[[list[_FileMeta]], LlmMessage]
    first_listing: LlmMessage | None = None  # the listing of ``forgotten``, when known


def fit_listing(f: _ListingFit) -> tuple[int, list[_FileMeta], LlmMessage | None]:
    """Where the kept history starts, the files listed and the listing (the one
    implementation, for ``_Pipeline._construct`` and ``assemble_cache``).

    The policy (README, ``docs/onyx-differences.md``): a message evicted to make room for
    the listing is listed too, and the listing is charged every time it grows (Onyx's
    convergent eviction, ``llm_loop.py:553-585``, re-charged). When even the whole
    history cannot make room for every forgotten file, the listing keeps the longest run
    of them by rank — files of messages cut from the history, newest first, then files
    only a summary remembers, newest first — and the history keeps every message that
    still fits beside it. Among the layouts this allows, the one chosen lists the most
    files by rank and then keeps the most history (brute-force tested over all subsets).
    """
    full = _fit_with(f, f.forgotten, f.first_listing)
    if full is not None:
        return full
    order = {m.file_id: i for i, m in enumerate(f.forgotten)}
    ranked = _ranked(f.forgotten, f.newest())
    lo, hi = 0, len(ranked) - 1  # no lines always fits: Onyx's own cut
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _fit_with(f, sorted(ranked[:mid], key=lambda m: order[m.file_id])) is not None:
            lo = mid
        else:
            hi = mid - 1
    res = _fit_with(f, sorted(ranked[:lo], key=lambda m: order[m.file_id]))
    assert res is not None
    return res


def _fit_with(
    f: _ListingFit, base: list[_FileMeta], msg: LlmMessage | None = None
) -> tuple[int, list[_FileMeta], LlmMessage | None] | None:
    """The least eviction that lists ``base`` and every file it evicts, or None
    (``msg``: the listing of ``base`` when known)."""
    files = list(base)
    listed = {m.file_id for m in files}
    if msg is None and files:
        msg = f.listing(files)
    k, prefix, last = f.k0, f.prefix, f.n
    while True:
        need = f.remaining - (msg.tokens if msg is not None else 0)
        if need < 0:
            return None
        # The first start whose kept history fits beside this listing (costs are never
        # negative, so the prefix sums are sorted).
        stop = bisect.bisect_left(prefix, prefix[last] - need, k, last)
        carried = None
        for q in range(k, stop):
            fid = f.file_at(q)
            if fid is not None and fid not in listed:
                carried = q
                break
        if carried is None:
            return stop, files, msg
        fid = f.file_at(carried)
        assert fid is not None
        files.append(f.metadata[fid])
        listed.add(fid)
        msg = f.listing(files)
        k = carried + 1


def _ranked(forgotten: list[_FileMeta], newest: Mapping[str, int]) -> list[_FileMeta]:
    """The listing's lines by rank: files of cut messages (``newest``: their last
    position), newest first, then the others (only a summary remembers them), newest
    first (they come in the order Onyx gathered them)."""
    cut = sorted((m for m in forgotten if m.file_id in newest), key=lambda m: -newest[m.file_id])
    rest = [m for m in reversed(forgotten) if m.file_id not in newest]
    return cut + rest


def _newest_positions(fids: Sequence[str | None]) -> dict[str, int]:
    """Each file id's last position in ``fids``."""
    return {fid: i for i, fid in enumerate(fids) if fid is not None}


def _listing_text(files: Sequence[_FileMeta]) -> str:
    lines = [texts.FILE_LISTING_HEADER]
    lines.extend(
        f'- file_id="{f.file_id}" filename="{f.filename}" (~{f.approx_char_count:,} chars)'
        for f in files
    )
    return "\n".join(lines)


def _dedupe(files: list[_FileMeta]) -> list[_FileMeta]:
    seen: set[str] = set()
    res = []
    for f in files:
        if f.file_id not in seen:
            seen.add(f.file_id)
            res.append(f)
    return res


def uncalled_responses(history: Sequence[LlmMessage], start: int) -> list[str]:
    """Ids of the tool responses at or after ``start`` that no earlier message of
    ``history`` calls: the orphan pass drops them wherever the budget cuts."""
    seen: set[str] = set()
    res = []
    for p, m in enumerate(history):
        if m.kind == "assistant":
            seen.update(c.id for c in m.tool_calls)
        elif m.kind == "tool" and p >= start and (not m.tool_call_id or m.tool_call_id not in seen):
            res.append(m.id)
    return res


def _assistant_message(m: LlmMessage, *, ollama: bool) -> dict[str, Any]:
    if not m.tool_calls:
        # Never `"content": null` without calls: OpenAI refuses it; "" is valid everywhere.
        return {"role": "assistant", "content": m.text}
    if ollama:
        lines = [
            f"[Tool Call] name={c.name} id={c.id} args={_args_json(c.arguments)}"
            for c in m.tool_calls
        ]
        prefix = m.text + "\n" if m.text else ""
        return {"role": "assistant", "content": prefix + "\n".join(lines)}
    return {
        "role": "assistant",
        "content": m.text or None,
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {
                    "name": sanitize_tool_name(c.name),
                    "arguments": _args_json(c.arguments),
                },
            }
            for c in m.tool_calls
        ],
    }


def _args_json(args: dict[str, Any] | str) -> str:
    return args if isinstance(args, str) else json.dumps(args)


def _summarization_request(
    older: list[LlmMessage], recent: list[LlmMessage], summary: Message | None
) -> tuple[dict[str, Any], ...]:
    return _summarization_request_of(_for_summary(older), _for_summary(recent), summary)


def _summarization_request_of(
    older: Iterable[dict[str, Any]], recent: Iterable[dict[str, Any]], summary: Message | None
) -> tuple[dict[str, Any], ...]:
    """The summarization request around the older and recent messages' ``_for_summary``."""
    system = texts.SUMMARIZATION_PROMPT
    if summary is not None:
        system += texts.EXISTING_SUMMARY.format(summary=summary.content)
    out: list[dict[str, Any]] = [{"role": "system", "content": system}]
    out.extend(older)
    out.append({"role": "user", "content": texts.CONTEXT_CUTOFF})
    out.extend(recent)
    final = (
        texts.SUMMARY_REMINDER_PROGRESSIVE if summary is not None else texts.SUMMARY_REMINDER_FIRST
    )
    out.append({"role": "user", "content": final})
    return tuple(out)


def _for_summary(msgs: list[LlmMessage]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in msgs:
        if not m.text:  # only empty text is skipped (compression.py:276)
            continue
        if m.kind == "assistant" and m.tool_calls:
            names = ", ".join(c.name for c in m.tool_calls)
            out.append({"role": "assistant", "content": f"[Used tools: {names}]"})
        elif m.kind == "assistant":
            out.append({"role": "assistant", "content": m.text})
        elif m.kind == "user":
            out.append({"role": "user", "content": m.text})
    return out
