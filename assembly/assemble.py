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

The pipeline is one chain of stages, each memoised in an ``AssemblyCache`` that the caller
carries from one version of a document to the next (``assemble`` without one runs the same
code with an empty memo; there is no second implementation):

1. structure (``_Pipeline._structure``): the branch, the system message taken as the
   prompt and the summary applied, as positions in ``Conversation.messages``; reused while
   the number of messages is the same, every stored message whose object changed keeps
   its ``_signature`` (id, role, parent, tool calls, files) and the last run found no error;
2. history (``_history``): each message converted to model messages, memoised per stored
   ``Message`` (``Conversation.message_data``, which the incremental re-read shares between
   versions even when an edit moves it) with the flags it is converted under (the last
   user message, a past tool result and its tool's name, the project images); after a
   change of structure the memo's conversions are found by identity (the common head and
   tail of the two message lists, a table for what lies between); the per-position lists
   the cut reads (costs and their prefix sums, stored tokens, compression candidates,
   provider messages, layout entries) are patched at the positions of the changed
   messages while they keep their ``_position_signature``, and otherwise made again in
   runs of slices of the memo's lists (``_Shape``, what the cut reads besides costs, stays
   the same object while nothing changed shape: the early cut-off of the stages after it);
3. fixed parts (``_fixed_parts``): prompts (by ``cite``, the system message's identity and
   the inline prompts' texts), the parsed base prompt (by its text), project files (by
   whether they overflow their share), tool definitions, reserved tokens, reminder;
4. budget cut (``_budget_cut``): bisection on the prefix sums; the forgotten files by
   (shape, metadata, last-N start, cut) and the orphans by (shape, cut);
5. the result (``_assembled``, ``_compression_plan``): slices of the memoised per-position
   lists around the fixed parts.

Stage 1 works on the stored messages and their places (no ``Located`` view is made for
the branch), so an edit that changes an id, a role or a tool-call id costs passes over
plain lists. Everything else the pipeline reads (settings, tools, user info, additional
context, project files, date, template, file contents, the tokenizer) is the context key:
when it changes the memo of stages 3–5 starts empty, but each earlier stage is kept while
its own inputs are the same: the structure by the settings it reads (``branch_tip``,
``keep_past_tool_results``, whether a system prompt is given), the converted messages by
what a conversion reads besides its message (the tokenizer, the additional context), the
per-position lists by ``_fill_key`` (provider, vision, a file reader offered). The memo
keeps no absolute offsets: a converted message holds its stored source (relative ranges),
and the ranges of a result's errors are resolved in the current version
(``Conversation.locate``).
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
import functools
import itertools
import json
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from assembly import seq, texts
from assembly.model import (
    ASSISTANT_ROLE,
    REMINDER_ROLE,
    SUMMARY_ROLE,
    SYSTEM_ROLE,
    TOOL_ROLE,
    USER_ROLE,
    Conversation,
    FileAttachment,
    Image,
    Message,
    PromptRef,
    PromptTemplate,
    TextBlock,
    quick_init,
)
from assembly.seq import common_ends, differing, nearer
from assembly.sysprompt import (
    PromptContext,
    build_custom_agent_prompt,
    build_replacement_system_prompt,
    build_system_prompt,
    parse_prompt_text,
    substitute_user_placeholders,
)
from assembly.text import Span, TextRange, plural
from assembly.tokens import Tokenizer

if TYPE_CHECKING:  # pydantic is imported when settings are first read
    from assembly.settings import Settings

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


@quick_init
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


@quick_init
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
    """One part of the assembled input (the system prompt, the history, …): its tokens and
    the layout ids of its messages."""

    name: str
    tokens: int
    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Budget:
    """How the input budget is spent: the window, Onyx's safety margin, what each fixed part
    reserves and what is left to the history."""

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
    """A file a summary cut out of the history, which Onyx lists for the model in its
    forgotten-files message."""

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
    summarize_tokens: int = 0  # the stored tokens of ``summarize``, as ``history_tokens``
    # The positions in ``Assembly.history`` of ``summarize`` and ``keep``.
    summarize_at: tuple[int, ...] = ()
    keep_at: tuple[int, ...] = ()
    # Makes ``request`` (None: there is none). Only ``promptls assemble --summary-request``
    # shows it: made for every version, its 10,000 messages at 10 MB took a megabyte.
    request_of: Callable[[], tuple[dict[str, Any], ...]] | None = field(
        default=None, compare=False, repr=False
    )

    @property
    def request(self) -> tuple[dict[str, Any], ...]:
        """The summarization request (OpenAI messages)."""
        return self.request_of() if self.request_of is not None else ()


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
    dropped: tuple[str, ...]  # the ids of the oldest messages of ``history``, which the cut drops
    orphans_dropped: tuple[str, ...]
    forgotten_files: tuple[ForgottenFile, ...]
    compression: CompressionPlan
    cache_prefix_length: int
    errors: tuple[AssemblyError, ...]
    system_text: str | None = None
    reserved_tokens: int = 0
    chain: tuple[str, ...] = ()  # ids of the document messages on the current branch
    chain_places: tuple[int, ...] = ()  # their places in ``Conversation.message_data``
    summary_id: str | None = None
    summary_place: int | None = None  # its place in ``Conversation.message_data``
    images_dropped: int = 0
    tokens_by_id: dict[str, int] = field(default_factory=dict)
    # Per message of ``history``: its id, its tokens, its upload's file id (None: none).
    history_ids: tuple[str, ...] = ()
    history_tokens: tuple[int, ...] = ()
    history_fids: tuple[str | None, ...] = ()
    # Whether a decision compared counts with a threshold that they did not clear: the
    # budget cut left out a message (not the last-N filter) or the listing a file, the
    # assembly failed, the compression trigger passed, the project files overflowed their
    # share. When it is False, any smaller counts make the same assembly
    # (``tokens.BoundTokenizer``).
    decided_by_counts: bool = True
    # The counts are bounds (``tokens.BoundTokenizer``), not counts: only the decisions
    # are true. None of promptls' outputs shows such an assembly.
    counts_are_bounds: bool = False

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
        cache: the stages' memo that the previous call for the same document kept; after
            an edit inside a few messages only those are converted again and every stage
            whose inputs are unchanged is reused. The result is the same without it (the
            pipeline then runs with an empty memo).

    Returns:
        The ``Assembly``; on an Onyx error its ``errors`` say why and ``layout`` is empty.
    """
    return _Pipeline(conv, settings, tokenizer, opts, cache or AssemblyCache()).run()


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
    return tokenizer.count(_tool_call_text(call.name, call.arguments))


def _tool_call_text(name: str, arguments: Any) -> str:
    return json.dumps({"function_name": name, "arguments": arguments})


# ------------------------------------------------------------------------------ pipeline


@dataclass(slots=True)
class _FileMeta:
    """What the forgotten-files listing says of a file: its id, its name and its size in
    characters."""

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
    overflow: bool = False  # the project files' texts overflowed their share

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


class AssemblyCache:
    """The memo of the pipeline's stages for one document, kept by the caller between
    ``assemble`` calls (``Analysis.caches["assemble"]``).

    Pass the same cache for successive versions of the same document only; a cache is not
    shared between threads. Everything in it is keyed by the inputs it was made from (by
    value, or by the identity of the immutable ``Message`` objects that the incremental
    re-read shares between versions), so a stale entry is never used: it is recomputed.
    ``converted`` and ``rebuilt`` say what the last call did (for tests and benchmarks).
    """

    __slots__ = (
        "_conversion_key",
        "_history",
        "_key",
        "_memo",
        "_older",
        "_structure",
        "calls",
        "converted",
        "rebuilt",
    )

    def __init__(self) -> None:
        self._key: tuple[Any, ...] | None = None  # the context key the memo was made under
        self._conversion_key: tuple[Any, ...] | None = None  # ... and the conversions
        # Stage 1's inputs (its settings, its messages) and result: kept across a change of
        # the context key, used while those inputs are the same.
        self._structure: tuple[tuple[Any, ...], tuple[Message, ...], _Structure] | None = None
        self._history: _History | None = None
        # Stages 1 and 2 of the version before the last when messages came or went since
        # (the same pair as ``_structure`` and ``_history``, set aside untouched): when
        # they come back (``-`` typed at a YAML item's line start ends the list, its
        # deletion brings the items back as the same objects) they are nearer.
        self._older: (
            tuple[tuple[tuple[Any, ...], tuple[Message, ...], _Structure], _History] | None
        ) = None
        self._memo = _Memo()
        self.calls = 0
        self.converted = 0  # messages converted by the last call
        self.rebuilt = False  # whether the last call rebuilt the per-position lists

    def _begin(self, key: tuple[Any, ...], conversion_key: tuple[Any, ...]) -> None:
        """Start a call under the context ``key``: a different key empties the memo, but
        for the converted messages, kept while what a conversion reads besides its
        message (``conversion_key``: the tokenizer, the additional context) is the same
        (a settings change then converts only the messages whose flags it changed)."""
        self.calls += 1
        self.converted = 0
        self.rebuilt = False
        if key != self._key:
            self._key = key
            self._memo = _Memo()
        if conversion_key != self._conversion_key:
            self._conversion_key = conversion_key
            self._history = None
            self._older = None


@dataclass(slots=True)
class _Memo:
    """Results of the fixed parts and of the cut, each with the inputs it was made from."""

    # By ``cite``: (the system message taken as the prompt, the inline prompts, the result).
    prompts: dict[bool, tuple[Message | None, tuple[Any, ...], Any]] = field(default_factory=dict)
    template: tuple[str, PromptTemplate] | None = None  # the base prompt's text, parsed
    project: _Project | None = None
    project_msgs: dict[bool, tuple[list[LlmMessage], bool]] = field(default_factory=dict)
    tool_tokens: int | None = None
    # (file ids, metadata, lo, start) -> the forgotten files and their listing
    forgotten: tuple[Any, ...] | None = None
    orphans: tuple[Any, ...] | None = None  # (calls' positions, start) -> orphaned positions
    history_fids: tuple[Any, ...] | None = None  # (file ids, lo) -> the file ids from lo on


@dataclass(frozen=True, slots=True, eq=False)
class _Structure:
    """Stage 1 (branch, system message, summary): positions in ``Conversation.messages``.

    Reused while every changed message keeps its ``_signature`` and no error was found.
    """

    chain_ids: tuple[str, ...]  # the branch without the system message taken as the prompt
    chain: tuple[int, ...]  # the same as places in ``Conversation.message_data``
    system_index: int | None
    summary_index: int | None
    cut: tuple[int, ...]  # the messages the history is converted from
    units: tuple[int, ...]  # what is converted: the summary node (if any), then ``cut``
    last_unit: int  # the unit of the last user message, -1 when none
    flags: tuple[tuple[Any, ...], ...]  # per unit: what its conversion reads besides it
    summarized_meta: dict[str, _FileMeta]
    errors: tuple[AssemblyError, ...]
    # What ``_structure_patched`` reads: whether no message has a ``parent`` (the branch
    # is then a run of places), the ids stage 1 looks up (the branch tip, what summaries
    # summarize through), the tool names by call id of ``cut``, and the units whose flags
    # name the tool a past tool result answers.
    linear: bool = False
    referenced: frozenset[str | None] = frozenset()
    call_names: dict[str, str] = field(default_factory=dict)
    tool_units: tuple[int, ...] = ()
    # Made by ``_structure_spliced``: (the units of the structure it was made from, the
    # first unit of the splice's run there, the first unit after it, the run's units here).
    spliced: tuple[tuple[int, ...], int, int, int] | None = None
    # message index -> its unit, made on first use (``unit_of``; a replaced structure
    # with other units starts without it).
    units_at: list[dict[int, int]] = field(default_factory=list)

    def unit_of(self, k: int) -> int | None:
        """The unit converted from message ``k`` (None: none)."""
        if not self.units_at:
            self.units_at.append(dict(zip(self.units, itertools.count(), strict=False)))
        return self.units_at[0].get(k)


@dataclass(slots=True, eq=False)
class _Shape:
    """What the budget cut reads of the history besides its costs: fixed while every
    converted message keeps its ``_position_signature``."""

    ids: list[str]
    kinds: list[str]
    fids: list[str | None]
    user_positions: list[int]
    tool_positions: list[int]
    call_pos: dict[int, int]  # tool position -> the latest earlier position calling it, or -1
    image_prefix: list[int]  # prefix sums of the images the cap counts (user messages)
    image_positions: list[int]  # user positions with images
    marker: int | None  # the per-image marker cost (images replayed as text)
    last_user_pos: int  # the last user message's own position, -1 when none
    unique_ids: bool
    # The position of each call id's call, when no id is called twice (None: some is, or
    # not known): an edit of the answers alone is patched from it (``_Pipeline._patch``).
    call_last: dict[str, int] | None = None


# A unit's flags (``_Structure.flags``): the summary node; a message before the last user
# message, that message, one after it (``_Pipeline._convert_message``'s arguments).
_SUMMARY: tuple[Any, ...] = ("summary",)
# Units to convert past which the memo set aside before is looked into (``_spared``).
_SPARED = 64
_BEFORE_LAST = (False, True, None)
_LAST = (True, False, None)
_AFTER_LAST = (False, False, None)
_EMPTY_SHAPE = _Shape([], [], [], [], [], {}, [0], [], None, -1, True)
_ID = operator.attrgetter("id")
_ROLE = operator.attrgetter("role")
_PARENT = operator.attrgetter("parent")
_TOOL_CALLS = operator.attrgetter("tool_calls")
_IMAGES = operator.attrgetter("images")
_TOOL_CALL_ID = operator.attrgetter("tool_call_id")


def _positions(seq: Sequence[str], value: str) -> list[int]:
    """The positions of ``value`` in ``seq`` (found by ``index``, at C speed)."""
    res: list[int] = []
    i = -1
    try:
        while True:
            i = seq.index(value, i + 1)
            res.append(i)
    except ValueError:
        return res


def _call_positions(
    hist: Sequence[LlmMessage], kinds: Sequence[str]
) -> tuple[list[int], dict[int, int], dict[str, int] | None]:
    """The positions of the tool messages of ``hist`` (``kinds``: its messages' kinds),
    and the position of the call each answers: the last assistant message before it
    making a call of its ``tool_call_id``; -1 when there is none (or it has no call id);
    and the position of each call id's call when no id is called twice (else None).

    Computed at C speed: the last call position of each id over the whole history answers
    every response after it; only responses whose id is called again later (a reused id,
    or a call after its response) look their call up among that id's call positions.
    """
    tool_positions = _positions(kinds, "tool")
    assistants = _positions(kinds, "assistant")
    calls = list(map(_TOOL_CALLS, seq.picked(hist, assistants)))
    makers = list(itertools.compress(assistants, calls))
    made = list(itertools.compress(calls, calls))
    call_ids = list(map(_ID, itertools.chain.from_iterable(made)))
    at = list(itertools.chain.from_iterable(map(itertools.repeat, makers, map(len, made))))
    last = dict(zip(call_ids, at, strict=True))
    unique = len(last) == len(call_ids)
    last.pop("", None)  # a response without a call id answers nothing
    answers = list(map(_TOOL_CALL_ID, seq.picked(hist, tool_positions)))
    found = list(map(last.get, answers, itertools.repeat(-1)))
    late = list(itertools.compress(range(len(found)), map(operator.gt, found, tool_positions)))
    if late:
        wanted = {answers[k] for k in late}
        by_id: dict[str, list[int]] = {}
        for c, p in itertools.compress(
            zip(call_ids, at, strict=True), map(wanted.__contains__, call_ids)
        ):
            by_id.setdefault(c, []).append(p)
        for k in late:
            where = by_id[answers[k]]
            j = bisect.bisect_left(where, tool_positions[k])
            found[k] = where[j - 1] if j else -1
    return tool_positions, dict(zip(tool_positions, found, strict=True)), last if unique else None


def _answered(call_last: dict[str, int], call_id: str | None, p: int) -> int:
    """``_call_positions``' answer of a tool message at ``p`` answering ``call_id`` when
    no call id is called twice (``call_last``: each one's position): its call, when it
    comes before it; else -1."""
    q = call_last.get(call_id, -1)  # type: ignore[arg-type]
    return q if q < p else -1


def _moved_calls(
    ps: _Shape, runs: Sequence[tuple[Any, ...]], old_hist: Sequence[LlmMessage]
) -> tuple[list[int], dict[int, int]] | None:
    """``_call_positions`` of a history made of ``runs`` (``_Pipeline._fill``'s: ``("old",
    a, b)`` the positions ``[a, b)`` of the history ``old_hist`` of shape ``ps``,
    ``("new", msgs)`` new messages), from ``ps``'s, when it only moves them: the kept
    runs in their old order, and no new or dropped message making or answering calls
    (``_talks``). The calls then are the same, in the same order: each keeps its answer,
    at positions moved by its run's shift (in C-level passes). None otherwise (or when
    too much came or went to look at).
    """
    if len(runs) > 8:
        return None
    cuts: list[int] = []  # where each kept run starts in the old history
    steps: list[int] = []  # the change of the shift there
    new_pos = shift = kept_to = 0
    looked = 0
    for run in runs:
        if run[0] == "new":
            looked += len(run[1])
            if looked > 256 or any(map(_talks, run[1])):
                return None
            new_pos += len(run[1])
            continue
        a, b = run[1], run[2]
        if a < kept_to:
            return None  # out of order
        gone = old_hist[kept_to:a]
        looked += len(gone)
        if looked > 256 or any(map(_talks, gone)):
            return None
        cuts.append(a)
        steps.append(new_pos - a - shift)
        shift = new_pos - a
        new_pos += b - a
        kept_to = b
    if looked + len(old_hist) - kept_to > 256 or any(map(_talks, old_hist[kept_to:])):
        return None
    was_tools = ps.tool_positions
    was_answered = list(ps.call_pos.values())  # (in the order of ``tool_positions``)
    tool_positions, answered = list(was_tools), was_answered
    for cut, step in zip(cuts, steps, strict=True):
        if step:  # old positions at or past ``cut`` move by ``step`` (-1, no call, stays)
            moves = map(step.__mul__, map(cut.__le__, was_tools))
            tool_positions = list(map(operator.add, tool_positions, moves))
            moves = map(step.__mul__, map(cut.__le__, was_answered))
            answered = list(map(operator.add, answered, moves))
    return tool_positions, dict(zip(tool_positions, answered, strict=True))


def _kept_units(reuse: Sequence[int]) -> list[tuple[int, int, int]]:
    """The runs of units a history keeps from the previous one, where its unit ``u`` is the
    previous one's unit ``reuse[u]`` (-1: converted again): ``(v0, v1, u0)``, its units
    ``[v0, v1)`` are the previous ``[u0, u0 + v1 - v0)``. The units between two new ones
    that are reused in order (most often all of them) are one run, told by one C-level
    comparison; others are split where the order breaks."""
    kept: list[tuple[int, int, int]] = []
    todo = list(itertools.compress(itertools.count(), map((-1).__eq__, reuse)))
    a = 0
    for b in (*todo, len(reuse)):
        if a < b:  # units [a, b) are reused
            first = reuse[a]
            if reuse[a:b] == list(range(first, first + b - a)):
                kept.append((a, b, first))
            else:
                steps = map(operator.sub, reuse[a + 1 : b], reuse[a : b - 1])
                cuts = itertools.compress(itertools.count(a + 1), map((1).__ne__, steps))
                kept.extend((c0, c1, reuse[c0]) for c0, c1 in itertools.pairwise((a, *cuts, b)))
        a = b + 1
    return kept


def _unit_runs(kept: Sequence[tuple[int, int, int]], n: int) -> list[tuple[str, int, int]]:
    """The kept runs of units (``_kept_units``) and the new units between them, in order,
    of a history of ``n`` units: ``("old", u0, u1)`` the previous units ``[u0, u1)``,
    ``("new", v0, v1)`` its own units ``[v0, v1)``, converted again."""
    runs: list[tuple[str, int, int]] = []
    v = 0
    for v0, v1, u0 in kept:
        if v < v0:
            runs.append(("new", v, v0))
        runs.append(("old", u0, u0 + v1 - v0))
        v = v1
    if v < n:
        runs.append(("new", v, n))
    return runs


def _carried_positions(
    old: Sequence[int] | None,
    runs: Sequence[tuple[Any, ...]],
    hist: Sequence[LlmMessage],
    found: Callable[[int, Sequence[LlmMessage]], Iterable[int]],
) -> list[int]:
    """The positions, in order, of the messages of a kind in the history ``hist``, made
    of ``runs`` (``_Pipeline._fill``'s), where ``old`` are those of the history the kept
    runs copy (None: not known): a kept run's are moved by its shift (a C-level pass
    over them); in the other runs ``found(at, msgs)`` finds them (``msgs`` from position
    ``at``). The kind is one of a message alone (a kept message is one)."""
    res: list[int] = []
    at = 0
    for run in runs:
        if run[0] == "old":
            a, b = run[1], run[2]
            if old is not None:
                lo, hi = bisect.bisect_left(old, a), bisect.bisect_left(old, b)
                res.extend(map((at - a).__add__, old[lo:hi]))
            else:
                res.extend(found(at, hist[at : at + b - a]))
            at += b - a
        else:
            res.extend(found(at, run[1]))
            at += len(run[1])
    return res


def _users_in(at: int, msgs: Sequence[LlmMessage]) -> Iterable[int]:
    """The positions of the user messages ``msgs`` (from position ``at``), at C speed."""
    return itertools.compress(itertools.count(at), map("user".__eq__, map(_KIND, msgs)))


def _images_in(at: int, msgs: Sequence[LlmMessage]) -> Iterable[int]:
    """The positions of the user messages with images among ``msgs`` (from ``at``)."""
    users = list(_users_in(0, msgs))
    with_images = map(operator.truth, map(_IMAGES, map(msgs.__getitem__, users)))
    return map(at.__add__, itertools.compress(users, with_images))


def _note_patched(h: _History, history: tuple[LlmMessage, ...]) -> None:
    """Tell ``seq`` where ``history`` differs from the last assembly's, when only patched
    positions can (found among them): the rules compare the two; then ``history`` is the
    last."""
    last, n = h.last_history, len(history)
    if last is not None and h.patched is not None and len(last) == n:
        lo, hi = h.patched
        differs = list(
            itertools.compress(range(lo, hi), map(operator.is_not, last[lo:hi], history[lo:hi]))
        )
        if differs:
            seq.note(last, history, differs[0], n - 1 - differs[-1])
        else:
            seq.note(last, history, n, 0)
    h.last_history, h.patched = history, (n, 0)


def _patched_users(
    ps: _Shape, patched: Sequence[tuple[int, tuple[LlmMessage, ...]]]
) -> tuple[list[int], list[int]]:
    """The positions of the user messages and of those with images (``_users_in``,
    ``_images_in``) of a history whose shape was ``ps``, after the positions of each
    ``(start, messages)`` of ``patched`` were replaced by as many messages: the old lists
    with each run's positions found again."""
    users, images = list(ps.user_positions), list(ps.image_positions)
    for a, out in patched:
        run_users = list(_users_in(a, out))
        run_images = [p for p in run_users if out[p - a].images]
        e = a + len(out)
        for found, run in ((users, run_users), (images, run_images)):
            found[bisect.bisect_left(found, a) : bisect.bisect_left(found, e)] = run
    return users, images


def _carried_table(
    table: dict[str, int],
    old_ids: Sequence[str],
    runs: Sequence[tuple[Any, ...]],
    n_old: int,
    ids: Sequence[str],
    tokens: Sequence[int],
) -> dict[str, int] | None:
    """``dict(zip(ids, tokens))`` (as a mapping) for a history made of ``runs`` from one
    whose ids ``old_ids`` (``n_old`` positions) are unique and mapped by ``table``: its
    copy without the positions no run keeps, with the new runs' positions. None when
    much came or went (then it is made from nothing) or when the ids now repeat."""
    kept = sorted((r[1], r[2]) for r in runs if r[0] == "old")
    gone: list[tuple[int, int]] = []
    at = 0
    for a, b in (*kept, (n_old, n_old)):
        if at < a:
            gone.append((at, a))
        at = max(at, b)
    n_gone = sum(b - a for a, b in gone)
    n_new = len(ids) - (n_old - n_gone)
    if n_gone + n_new > 256:
        return None
    res = table.copy()
    for a, b in gone:
        for i in old_ids[a:b]:
            del res[i]
    p = 0
    for run in runs:
        if run[0] == "old":
            p += run[2] - run[1]
            continue
        for q in range(p, p + len(run[1])):
            res[ids[q]] = tokens[q]
        p += len(run[1])
    return res if len(res) == len(ids) else None


def _metas_in(at: int, metas: Sequence[dict[str, _FileMeta] | None]) -> Iterable[int]:
    """The units among ``metas`` (from unit ``at``) that inject files."""
    return itertools.compress(itertools.count(at), map(operator.truth, metas))


_KIND = operator.attrgetter("kind")
_FILES_AND_FILE_ID = operator.attrgetter("files", "file_id")
_SUMMARIZES_THROUGH = operator.attrgetter("summarizes_through")


def _index(items: list[Any], value: Any, start: int, end: int) -> int | None:
    """Where ``value`` first is in ``items[start:end]`` (a C-level scan), or None."""
    try:
        return items.index(value, start, end)
    except ValueError:
        return None


@dataclass(slots=True)
class _History:
    """Stage 2, the converted history: per unit and per position, patched in place by the
    next call when the units keep their shape (an edit inside messages)."""

    structure: _Structure
    units: list[Message]
    turn_images: tuple[Any, ...]  # the project images riding on the last user message
    outs: list[tuple[LlmMessage, ...]]
    metas: list[dict[str, _FileMeta] | None]  # per unit, its injected files (None: none)
    starts: list[int]  # per unit its first position, then the end
    hist: list[LlmMessage]
    tokens: list[int]
    stored: list[int]  # what compression counts (``stored_tokens``)
    cost: list[int]  # the replay cost
    prefix: list[int]  # prefix sums of ``cost``
    cand: list[bool]  # a compression candidate
    shape: _Shape
    metadata: dict[str, _FileMeta]
    meta_units: list[int]  # the units that inject files (their metadata)
    tokens_by_id: dict[str, int]
    entries: _Lazy  # the LayoutEntry of a position kept in the "history" segment
    provider: _Lazy  # the provider message (all its images kept)
    cand_pos: list[int] | None = None  # positions of the candidates (None: to recompute)
    cand_ids: list[str] = field(default_factory=list)  # the candidates' ids
    # What the per-position lists read besides the converted messages (``_fill_key``:
    # settings and tools; the conversions outlive a change of them).
    fill_key: tuple[Any, ...] = ()
    # The history the last assembly made from these lists holds, and the positions
    # ``[lo, hi)`` patched since (None: made again since), for ``seq.note``.
    last_history: tuple[LlmMessage, ...] | None = None
    patched: tuple[int, int] | None = None
    # The compression plan's positions and ids, summarized and kept, made from ``cand_pos``
    # (while it is the same list, so are the candidates' ids) and the split and trigger.
    plan_parts: tuple[list[int], tuple[int, bool], tuple[tuple[Any, ...], ...]] | None = None


@dataclass(slots=True)
class _Lazy:
    """A per-position list whose items are made on first use (``filled[p]`` says which)."""

    items: list[Any]
    filled: bytearray

    @staticmethod
    def empty(n: int) -> _Lazy:
        return _Lazy([None] * n, bytearray(n))

    def forget(self, p: int) -> None:
        self.filled[p] = 0

    def fill(self, a: int, b: int, make: Callable[[int], Any]) -> None:
        filled, items = self.filled, self.items
        if a < b and filled.find(1, a, b) == -1:  # none made yet (an open): in one pass
            items[a:b] = map(make, range(a, b))
            filled[a:b] = b"\x01" * (b - a)
            return
        p = filled.find(0, a, b)
        while p != -1:
            items[p] = make(p)
            filled[p] = 1
            p = filled.find(0, p + 1, b)


@dataclass(slots=True)
class _Cut:
    """Stage 4, the budget cut: positions ``[start, last)`` are kept (``lo``: the first
    after the last-N filter); ``ok`` is False when nothing is assembled (an error)."""

    ok: bool
    history_budget: int
    lo: int = 0
    start: int = 0
    last: int = -1
    orphans: list[int] = field(default_factory=list)
    forgotten: list[_FileMeta] = field(default_factory=list)
    listing: LlmMessage | None = None
    trimmed: bool = False  # the listing left out forgotten files (or itself) to fit


@dataclass(slots=True)
class _Project:
    """The project files by kind: text read (counted when asked), tabular, images;
    ``all_overrides``: every text file's count is given."""

    # file, content, tokens (None: not counted yet; ``counted`` counts what is asked for)
    loaded_texts: list[tuple[FileAttachment, str, int | None]]
    tabular: list[tuple[FileAttachment, str]]
    images: list[FileAttachment]
    all_overrides: bool

    def counted(self, count: Callable[[str], int]) -> list[tuple[FileAttachment, str, int]]:
        """``loaded_texts`` with every count made (and kept for the next look)."""
        loaded = self.loaded_texts
        for i, (f, content, tokens) in enumerate(loaded):
            if tokens is None:
                loaded[i] = (f, content, count(content))
        return loaded  # type: ignore[return-value]


def _context_key(conv: Conversation, settings: Settings, opts: AssembleOptions) -> tuple[Any, ...]:
    """Everything besides the messages and the inline prompts' texts that the pipeline
    reads, compared by value: when it differs, the memo starts empty."""
    tools = None if conv.tools is None else tuple((t.name, t.schema) for t in conv.tools)
    return (
        settings,
        _system_source(conv.system_prompt),
        tools,
        conv.user_info,
        _block_key(conv.additional_context),
        tuple(_project_file_key(f) for f in conv.project_files),
        opts.today,
        # A template is a pure function of its text (``parse_prompt_text``).
        None if opts.system_template is None else opts.system_template.text,
        dict(opts.file_contents),
    )


def _system_source(block: TextBlock | PromptRef | None) -> tuple[Any, ...] | None:
    """How the system prompt is given, not its inline text: whether a system message is
    taken as the prompt (none is when one is given) and which template it names."""
    if block is None:
        return None
    if isinstance(block, PromptRef):
        return ("ref", block.path)
    return ("text",)


def _block_key(block: TextBlock | PromptRef | None) -> tuple[Any, ...] | None:
    if block is None:
        return None
    if isinstance(block, PromptRef):
        return ("ref", block.path)
    return ("text", block.content, block.token_count)


def _project_file_key(f: FileAttachment) -> tuple[Any, ...]:
    # Not the range: project images (which carry it) are read again on every call.
    return (f.file_id, f.filename, f.content, f.kind, f.token_count, f.approx_char_count)


def _signature(m: Message) -> tuple[Any, ...]:
    """What stage 1 reads of a message (and what decides its conversion's flags)."""
    return (
        m.id,
        m.role,
        m.parent,
        m.summarizes_through,
        m.file_id,
        m.filename,
        _calls_signature(m),
        m.tool_call_id,
        len(m.images),
        _files_signature(m),
    )


def _position_signature(h: LlmMessage) -> tuple[Any, ...]:
    """What ``_Shape`` reads of a converted message."""
    return (
        h.id,
        h.kind,
        h.file_id,
        tuple((c.id, c.name) for c in h.tool_calls),
        h.tool_call_id,
        len(h.images),
        h.source is None,
    )


class _Pipeline:
    """One call of the pipeline: the stages in Onyx's order, each reading and updating
    its entry of the memo (``AssemblyCache``)."""

    def __init__(
        self,
        conv: Conversation,
        settings: Settings,
        tokenizer: Tokenizer,
        opts: AssembleOptions,
        cache: AssemblyCache,
    ) -> None:
        self.conv = conv
        self.s = settings
        self.tok = tokenizer
        self.opts = opts
        self.cache = cache
        self.memo = cache._memo
        self.errors: list[AssemblyError] = []
        self.tool_names = [t.name for t in conv.tools or ()]
        self.has_file_reader = any(n in FILE_READER_TOOLS for n in self.tool_names)
        self.tool_tokens = 0  # the tool definitions offered this turn
        self.system_range: TextRange | None = None  # where the document gives the system prompt
        self.spare: _History | None = None  # the memo set aside before, dropped by this call

    def count(self, text: str) -> int:
        return self.tok.count(text)

    def error(self, code: str, message: str, rng: TextRange, **kw: Any) -> None:
        self.errors.append(AssemblyError(code, message, rng, **kw))

    # The whole pipeline, in Onyx's order.
    def run(self) -> Assembly:
        cache = self.cache
        cache._begin(
            (*_context_key(self.conv, self.s, self.opts), self.tok),
            (self.tok, _block_key(self.conv.additional_context)),
        )
        try:
            return self._run()
        except BaseException:
            cache._key = cache._conversion_key = None  # a half-updated memo is never used again
            raise

    def _run(self) -> Assembly:
        self.memo = self.cache._memo
        structure, changed = self._structure()
        h = self._history(structure, changed)
        msgs = self.conv.messages
        system_msg = msgs[structure.system_index] if structure.system_index is not None else None
        summary = msgs[structure.summary_index] if structure.summary_index is not None else None
        fixed = self._fixed_parts(system_msg, h.hist, h.shape.last_user_pos)
        cut = self._budget_cut(h, fixed)
        return self._assembled(structure, h, fixed, cut, summary)

    # -------------------------------------------------------------- stage 1: structure

    def _structure(self) -> tuple[_Structure, list[int] | None]:
        """The branch, the system message taken as the prompt and the summary applied;
        with the messages changed since the memo's (None when it was not reused)."""
        msgs = self.conv.message_data  # the stored messages: the re-read shares them
        # What stage 1 reads besides the messages (the rest of the context key does not
        # concern it).
        key = (self.s.branch_tip, self.s.keep_past_tool_results, self.conv.system_prompt is None)
        hit = self.cache._structure
        if hit is not None and len(hit[1]) != len(msgs):
            hit = self._generation(key, hit, msgs)
        if hit is not None and hit[0] == key and not hit[2].errors and len(hit[1]) != len(msgs):
            spliced = self._structure_spliced(hit[2], hit[1])
            if spliced is not None:
                self.cache._structure = (key, msgs, spliced)
                return spliced, None
        elif hit is not None and hit[0] == key and not hit[2].errors:
            _, old, structure = hit
            changed: list[int] = []
            if old is not msgs:
                changed = differing(old, msgs)
            differ = [k for k in changed if _signature(msgs[k]) != _signature(old[k])]
            found = self._structure_patched(structure, old, differ) if differ else structure
            if found is not None:
                self.cache._structure = (key, msgs, found)
                return found, changed
        structure = self._structure_of()
        self.cache._structure = (key, msgs, structure)
        return structure, None

    def _generation(
        self,
        key: tuple[Any, ...],
        hit: tuple[tuple[Any, ...], tuple[Message, ...], _Structure],
        msgs: tuple[Message, ...],
    ) -> tuple[tuple[Any, ...], tuple[Message, ...], _Structure]:
        """Messages came or went since the memo's version (``hit``): the memo of stages 1
        and 2 it holds becomes the one set aside, and the one set aside before becomes
        the memo when it is nearer to ``msgs`` (``seq.nearer``): messages that left in the
        last edit came back, or a list ended in the edit before ends one item away. The
        stages then run on it as on any memo; a memo is only the inputs it was made from
        and what they gave."""
        cache = self.cache
        current = cache._history
        older = cache._older
        cache._older = None
        if current is not None and current.structure is hit[2]:
            cache._older = (hit, current)
        if older is None:
            return hit
        if older[0][0] == key and nearer(older[0][1], hit[1], msgs):
            cache._structure, cache._history = older
            return older[0]
        self.spare = older[1]  # dropped: its conversions serve this call (``_spared``)
        return hit

    def _structure_of(self) -> _Structure:
        """Stage 1 over the stored messages and their places (no view is made: an edit that
        changes a message's id or role costs passes over plain lists, not 10,000 views)."""
        data = self.conv.message_data
        chain = self._resolve_branch()
        system_index, chain = self._take_system_message(chain)
        summary_index, cut_chain, summarized_meta = self._apply_summary(chain)
        last_user_doc, call_names = _chain_facts(data, cut_chain)
        # Per message of the cut chain: (the last user message, before it, the tool an
        # earlier turn's result answers when it is replaced).
        n, last = len(cut_chain), last_user_doc
        flags: list[tuple[Any, ...]] = [_BEFORE_LAST] * max(0, last)
        if last >= 0:
            flags.append(_LAST)
        flags.extend([_AFTER_LAST] * (n - len(flags)))
        tool_before: list[int] = []
        if not self.s.keep_past_tool_results and last > 0:
            before = list(map(data.__getitem__, cut_chain[:last]))
            tools = map(operator.is_, map(_ROLE, before), itertools.repeat(TOOL_ROLE))
            tool_before = list(itertools.compress(itertools.count(), tools))
            for i in tool_before:
                flags[i] = _past_tool_flag(before[i], call_names)
        cut = tuple(cut_chain)
        units = cut
        if summary_index is not None:
            units = (summary_index, *cut)
            flags.insert(0, _SUMMARY)
        offset = len(units) - n
        referenced = set(map(_SUMMARIZES_THROUGH, data))
        referenced.add(self.s.branch_tip)
        return _Structure(
            chain_ids=tuple(map(_ID, map(data.__getitem__, chain))),
            chain=tuple(chain),
            system_index=system_index,
            summary_index=summary_index,
            cut=cut,
            units=units,
            last_unit=last + offset if last >= 0 else -1,
            flags=tuple(flags),
            summarized_meta=summarized_meta,
            errors=tuple(self.errors),
            linear=list(map(_PARENT, data)).count(None) == len(data),
            referenced=frozenset(referenced),
            call_names=call_names,
            tool_units=tuple(i + offset for i in tool_before),
        )

    def _structure_spliced(self, s: _Structure, old: Sequence[Message]) -> _Structure | None:
        """Stage 1 after an edit that removed, added or replaced a run of messages (the
        messages before and after it are the same objects, ``old`` the previous
        version's), made from ``s`` when the run moves none of its decisions: the run's
        places are replaced and the later ones shifted. Else None (``_structure_of``).

        The decisions stay (as in ``_structure_patched``) when the branch is a run of
        places up to the last message (no ``parent`` before or after, no branch tip),
        and the run, before and after the edit: lies after the summary's cut and before
        the last user message (one that is no injected file), or after it and holds no
        user message, sent in full (all in the cut), holds no summary and no system
        message (unless a system prompt is given) and summarizes through nothing, and its
        ids are none stage 1 looks up.
        """
        if not s.linear or self.s.branch_tip is not None:
            return None
        data = self.conv.message_data
        n, n_new = len(old), len(data)
        head, tail = common_ends(old, data)
        was, now = old[head : n - tail], data[head : n_new - tail]
        d = n_new - n
        last_k = s.units[s.last_unit] if s.last_unit >= 0 else -1
        after = 0 <= last_k < head  # the run lies after the last user message
        if (not after and last_k < n - tail) or old[last_k].file_id is not None:
            return None  # the run lies neither before nor after the last user message
        cut = s.cut
        a = bisect.bisect_left(cut, head)
        b = bisect.bisect_left(cut, n - tail)
        if b - a != len(was):
            return None  # not all in the cut
        if a == 0 and s.summary_index is not None:
            return None  # not surely after the summary's cut
        takes_system = self.conv.system_prompt is None
        for m in itertools.chain(was, now):
            if (
                m.parent is not None
                or m.summarizes_through is not None
                or m.role is SUMMARY_ROLE
                or (m.role is SYSTEM_ROLE and takes_system)
                or (after and m.role is USER_ROLE)
                or m.id in s.referenced
            ):
                return None
        sys_i = s.system_index
        if sys_i is not None and sys_i >= head:
            sys_i += d  # after the run (it is not in it)
        summary_index = s.summary_index
        if summary_index is not None and summary_index >= head:
            summary_index += d
        shift = d.__add__
        new_cut = (*cut[:a], *range(head, n_new - tail), *map(shift, cut[b:]))
        first = 1 if summary_index is not None else 0
        units = new_cut if summary_index is None else (summary_index, *new_cut)
        at = head - (sys_i is not None and sys_i < head)  # the run's place in the branch
        # The branch is every place but the system message's (not in the run): the run's
        # places replaced, the later ones shifted.
        chain = (*s.chain[:at], *range(head, n_new - tail), *map(shift, s.chain[at + len(was) :]))
        chain_ids = (*s.chain_ids[:at], *map(_ID, now), *s.chain_ids[at + len(was) :])
        call_names = s.call_names
        if any(map(_TOOL_CALLS, itertools.chain(was, now))):
            call_names = _call_names(data, new_cut)
        last_unit = s.last_unit if after else s.last_unit + d
        ua, ub = a + first, b + first
        flags = list(s.flags)
        past = s.tool_units  # (ascending)
        tool_units = list(past[: bisect.bisect_left(past, ua)])
        flags[ua:ub] = [_AFTER_LAST if after else _BEFORE_LAST] * len(now)
        keep = self.s.keep_past_tool_results
        if not keep and not after and last_unit > first:
            tools = map(operator.is_, map(_ROLE, now), itertools.repeat(TOOL_ROLE))
            for j in itertools.compress(itertools.count(), tools):
                flags[ua + j] = _past_tool_flag(now[j], call_names)
                tool_units.append(ua + j)
        tool_units.extend(map(shift, past[bisect.bisect_left(past, ub) :]))
        if call_names != s.call_names:
            for u in tool_units:
                flag = _past_tool_flag(data[units[u]], call_names)
                if flag != flags[u]:
                    flags[u] = flag
        return dataclasses.replace(
            s,
            chain_ids=chain_ids,
            chain=chain,
            system_index=sys_i,
            summary_index=summary_index,
            cut=new_cut,
            units=units,
            units_at=[],
            spliced=(s.units, ua, ub, len(now)),
            last_unit=last_unit,
            flags=tuple(flags),
            call_names=call_names,
            tool_units=tuple(tool_units),
        )

    def _structure_patched(
        self, s: _Structure, old: Sequence[Message], differ: list[int]
    ) -> _Structure | None:
        """Stage 1 after an edit that changed what it reads of the messages ``differ``
        (same places, ``old`` the previous version's), made from ``s`` when the edit moves
        none of its decisions: the branch, the system message, the summary and its cut,
        the last user message. Then only the ids on the branch and the units' flags (a
        past tool result's tool) can differ, and they are made again for those messages;
        else None (``_structure_of`` runs).

        The decisions stay when the branch is a run of places (no ``parent`` before or
        after), every changed message keeps its ``summarizes_through`` and images (and its
        files, when it is summarized: stage 1 reads nothing else of them),
        an id that changes is none stage 1 looks up (``referenced``), a role that changes
        is not a summary, is a system message only after the one taken (or none is
        taken), and is a user message only before the last user message (one that is no
        injected file). Ids are unique in ``message_data`` (the reader renames or leaves
        out a repeated one), so a new id matches no other message.
        """
        if not s.linear:
            return None
        data = self.conv.message_data
        sys_i = s.system_index
        end = len(s.chain) + (sys_i is not None)  # the branch is places [0, end)
        takes_system = self.conv.system_prompt is None
        last_k = s.units[s.last_unit] if s.last_unit >= 0 else -1
        last_plain = last_k >= 0 and data[last_k].file_id is None
        chain_ids: list[str] | None = None
        calls_changed = False
        reflag: list[int] = []
        for k in differ:
            a, b = old[k], data[k]
            if (
                b.parent is not None
                or a.summarizes_through != b.summarizes_through
                or a.file_id != b.file_id
                or a.filename != b.filename
                or len(a.images) != len(b.images)
            ):
                return None
            if (
                s.summary_index is not None
                and s.unit_of(k) is None
                and _files_signature(a) != _files_signature(b)
            ):
                return None  # (a summarized message's files are in the summary's metadata)
            on_branch = k < end and k != sys_i
            if a.id != b.id:
                if a.id in s.referenced or b.id in s.referenced:
                    return None
                if on_branch:
                    if chain_ids is None:
                        chain_ids = list(s.chain_ids)
                    chain_ids[k - (sys_i is not None and sys_i < k)] = b.id
            u = s.unit_of(k)
            if a.role is not b.role:
                roles = (a.role, b.role)
                if SUMMARY_ROLE in roles:
                    return None
                if (
                    SYSTEM_ROLE in roles
                    and takes_system
                    and k < end
                    and (sys_i is None or k <= sys_i)
                ):
                    return None
                if USER_ROLE in roles and k < end and not (last_plain and k < last_k):
                    return None
                if u is not None:
                    reflag.append(u)
            elif a.tool_call_id != b.tool_call_id and u is not None:
                reflag.append(u)
            if (
                u is not None
                and k != s.summary_index
                and _calls_signature(a) != _calls_signature(b)
            ):
                calls_changed = True
        call_names = s.call_names
        tool_units = s.tool_units
        if calls_changed:
            call_names = _call_names(data, s.cut)
            if call_names != s.call_names:
                reflag.extend(tool_units)
        flags = s.flags
        first = 1 if s.summary_index is not None else 0  # the first unit of ``cut``
        if reflag and not self.s.keep_past_tool_results and s.last_unit > first:
            flags_l = list(flags)
            tools = set(tool_units)
            for u in reflag:
                if not first <= u < s.last_unit:
                    continue
                m = data[s.units[u]]
                if m.role is TOOL_ROLE:
                    flag = _past_tool_flag(m, call_names)
                    if flag != flags_l[u]:  # an equal flag stays the same object
                        flags_l[u] = flag
                    tools.add(u)
                else:
                    flags_l[u] = _BEFORE_LAST
                    tools.discard(u)
            flags = tuple(flags_l)
            tool_units = tuple(sorted(tools))
        return dataclasses.replace(
            s,
            chain_ids=s.chain_ids if chain_ids is None else tuple(chain_ids),
            flags=flags,
            call_names=call_names,
            tool_units=tool_units,
            spliced=None,
        )

    # -------------------------------------------------------------- stage 2: history

    def _turn_images(self) -> tuple[Image, ...]:
        """The project images, which ride on the last user message."""
        return tuple(
            Image(f.file_id, f.range, f.token_count)
            for f in self.conv.project_files
            if f.kind == "image"
        )

    def _summary(self, structure: _Structure) -> Message | None:
        i = structure.summary_index
        return self.conv.messages[i] if i is not None else None

    def _convert_unit(
        self, m: Message, flags: tuple[Any, ...], turn_images: tuple[Image, ...]
    ) -> tuple[tuple[LlmMessage, ...], dict[str, _FileMeta] | None]:
        """One unit's model messages and the metadata of the files it injects."""
        self.cache.converted += 1
        if flags == _SUMMARY:
            return (self._summary_message(m),), None
        out: list[LlmMessage] = []
        meta: dict[str, _FileMeta] = {}
        self._convert_message(m, flags[0], flags[1], flags[2], turn_images, meta, out)
        return tuple(out), meta or None

    def _history(self, structure: _Structure, changed: list[int] | None) -> _History:
        """The converted history: the memo's, with the changed messages converted again."""
        turn_images = self._turn_images()
        h = self.cache._history
        same_fill = h is not None and h.fill_key == self._fill_key()
        if (
            h is not None
            and changed is not None
            and h.structure.units is structure.units  # the same, or patched (same units)
            and same_fill
        ):
            units_changed = set(map(structure.unit_of, changed))
            units_changed.discard(None)
            if h.structure.flags is not structure.flags:  # a patched structure's
                differs = map(operator.is_not, h.structure.flags, structure.flags)
                units_changed.update(itertools.compress(itertools.count(), differs))
            h.structure = structure
            if turn_images != h.turn_images and structure.last_unit >= 0:
                units_changed.add(structure.last_unit)
            h.turn_images = turn_images
            done = sorted(units_changed)
            if self._patch(h, done):
                return h
            self.cache.rebuilt = True
            kept: list[tuple[int, int, int]] = []
            a = 0
            for u in (*done, len(h.units)):
                if a < u:
                    kept.append((a, u, a))
                a = u + 1
            self._fill(h, self._summary(structure), h, kept)
            return h
        # A new structure: convert the messages the memo does not hold under the same
        # flags. After a splice of stage 1 the units before and after its run are the
        # memo's (``_Structure.spliced``); else the memo's units are matched by identity:
        # the common head and tail in C-level passes, what lies between through a table.
        data = self.conv.message_data
        flags = structure.flags
        if h is not None and not h.units:
            h = None  # nothing to reuse
        kept = []
        units: list[Message] | None = None
        sp = structure.spliced
        if h is not None and sp is not None and sp[0] is h.structure.units:
            _, ua, ub, k = sp
            old_flags, n_new = h.structure.flags, len(structure.units)
            if (
                old_flags[:ua] == flags[:ua]
                and old_flags[ub:] == flags[ua + k :]
                and h.turn_images == turn_images
            ):
                between = map(data.__getitem__, structure.units[ua : ua + k])
                units = [*h.units[:ua], *between, *h.units[ub:]]
                kept = [r for r in ((0, ua, 0), (ua + k, n_new, ub)) if r[0] < r[1]]
        if units is None:
            units = list(map(data.__getitem__, structure.units))  # stored: identity-stable
            if h is not None:
                kept = _kept_units(self._reused(h, units, flags, turn_images, structure))
        n_units = len(units)
        outs: list[tuple[LlmMessage, ...]] = [()] * n_units
        metas: list[dict[str, _FileMeta] | None] = [None] * n_units
        if h is not None:
            for v0, v1, u0 in kept:
                outs[v0:v1] = h.outs[u0 : u0 + v1 - v0]
                metas[v0:v1] = h.metas[u0 : u0 + v1 - v0]
        todo = [u for r in _unit_runs(kept, n_units) if r[0] == "new" for u in range(r[1], r[2])]
        if self.spare is not None and len(todo) > _SPARED:
            todo = self._spared(units, flags, turn_images, structure.last_unit, todo, outs, metas)
        self._precount([units[u] for u in todo])
        for u in todo:
            outs[u], metas[u] = self._convert_unit(units[u], flags[u], turn_images)
        self.cache.rebuilt = True
        prev = h
        h = _History(
            structure=structure,
            units=units,
            turn_images=turn_images,
            outs=outs,
            metas=metas,
            starts=[],
            hist=[],
            tokens=[],
            stored=[],
            cost=[],
            prefix=[],
            cand=[],
            shape=_EMPTY_SHAPE,
            metadata={},
            meta_units=[],
            tokens_by_id={},
            entries=_Lazy.empty(0),
            provider=_Lazy.empty(0),
        )
        self._fill(h, self._summary(structure), prev, kept)
        self.cache._history = h
        return h

    def _spared(
        self,
        units: list[Message],
        flags: tuple[tuple[Any, ...], ...],
        turn_images: tuple[Image, ...],
        last: int,
        todo: list[int],
        outs: list[tuple[LlmMessage, ...]],
        metas: list[dict[str, _FileMeta] | None],
    ) -> list[int]:
        """Of the units ``todo`` (not in the memo), those the memo dropped by this call
        (``spare``) converted as the same message under the same flags: their conversions
        put in ``outs`` and ``metas``; the others, to convert. (The items after a list
        ended twice in a row leave a summary's cut twice: their conversions are the
        first time's.)"""
        spare = self.spare
        assert spare is not None
        where = dict(zip(map(id, spare.units), itertools.count()))
        old_flags = spare.structure.flags
        left: list[int] = []
        for u in todo:
            m, f = units[u], flags[u]
            j = where.get(id(m))
            if (
                j is None
                or spare.units[j] is not m
                or f == _SUMMARY
                or old_flags[j] != f
                or (u == last and spare.turn_images != turn_images)
            ):
                left.append(u)
                continue
            outs[u], metas[u] = spare.outs[j], spare.metas[j]
        return left

    def _reused(
        self,
        h: _History,
        units: list[Message],
        flags: tuple[tuple[Any, ...], ...],
        turn_images: tuple[Image, ...],
        structure: _Structure,
    ) -> list[int]:
        """Per unit of a new structure, the unit of the memo ``h`` it is (same message,
        same flags), or -1: the common head and tail in C-level passes, what lies
        between through a table."""
        reuse = [-1] * len(units)
        old_units, old_flags = h.units, h.structure.flags
        n_old, n_new = len(old_units), len(units)
        head, tail = common_ends(old_units, units)
        reuse[:head] = range(head)
        reuse[n_new - tail :] = range(n_old - tail, n_old)
        if head + tail < n_new:
            # Moved messages.
            where = {id(u): j for j, u in enumerate(old_units[head : n_old - tail], head)}
            for u in range(head, n_new - tail):
                j = where.get(id(units[u]), -1)
                reuse[u] = j if j >= 0 and old_units[j] is units[u] else -1
        # The same message under other flags (the last user message moved): again.
        # (Flags are mostly the same objects: compared by value only where not; the
        # common ends at once, by a C-level comparison of slices, when they agree.)
        looked = range(n_new)
        if old_flags[:head] == flags[:head] and (
            old_flags[n_old - tail :] == flags[n_new - tail :]
        ):
            looked = range(head, n_new - tail)
        olds = map(old_flags.__getitem__, map(reuse.__getitem__, looked))
        same = map(operator.is_, olds, map(flags.__getitem__, looked))
        for u in itertools.compress(looked, map(operator.not_, same)):
            if old_flags[reuse[u]] != flags[u]:
                reuse[u] = -1
        last = structure.last_unit
        if last >= 0 and reuse[last] >= 0 and h.turn_images != turn_images:
            reuse[last] = -1
        return reuse

    def _patch(self, h: _History, units_changed: list[int]) -> bool:
        """Convert the changed units again and patch their positions; False when one of
        them changed shape (the per-position lists are then made again from ``h.outs``)."""
        msgs = self.conv.message_data
        structure = h.structure
        self._precount([msgs[structure.units[u]] for u in units_changed])
        summary = self._summary(structure)
        same_shape = True
        meta_changed = False
        patched: list[tuple[int, tuple[LlmMessage, ...]]] = []
        for u in units_changed:
            m = msgs[structure.units[u]]
            out, meta = self._convert_unit(m, structure.flags[u], h.turn_images)
            old_out = h.outs[u]
            h.units[u] = m
            if meta != h.metas[u]:
                meta_changed = True
            h.outs[u], h.metas[u] = out, meta
            if len(out) != len(old_out) or any(
                _position_signature(a) != _position_signature(b)
                for a, b in zip(out, old_out, strict=True)
            ):
                same_shape = False
            patched.append((h.starts[u], out))
        same_ids = same_shape  # (then ``tokens_by_id`` is patched by id)
        if not same_shape:
            # The same positions, another shape (an id, a kind, a call changed): the
            # shape is made again from the patched positions, unless it moves the
            # costs (the image marker); the per-position lists are then made again.
            if any(
                len(out) != h.starts[u + 1] - h.starts[u]
                for u, out in zip(units_changed, (o for _, o in patched), strict=True)
            ):
                return False
            hist = list(h.hist)
            ps = h.shape
            ids, kinds, fids = list(ps.ids), list(ps.kinds), list(ps.fids)
            only_ids = True  # what the shape reads besides the ids is the same
            only_calls = True  # what it reads besides the calls and the answers is
            same_calls = True  # the calls are (the answers may differ)
            quiet = True  # neither before nor after a message that makes or answers calls
            ids_kept = True  # every patched position keeps its id
            for a, out in patched:
                for p, x in enumerate(out, start=a):
                    was = hist[p]
                    ids_kept = ids_kept and x.id == was.id
                    now, then = _position_signature(x), _position_signature(was)
                    if only_ids:
                        only_ids = now[1:] == then[1:]
                    if only_calls:
                        only_calls = (now[:3], now[5:]) == (then[:3], then[5:])
                        same_calls = same_calls and now[3] == then[3]
                    if quiet:
                        quiet = not (_talks(x) or _talks(was))
                    hist[p], ids[p], kinds[p], fids[p] = x, x.id, x.kind, x.file_id
            if only_ids:
                shape = dataclasses.replace(ps, ids=ids, unique_ids=len(set(ids)) == len(ids))
            elif only_calls and same_calls and ps.call_last is not None:
                # Only answers changed, no call id is called twice: each patched tool
                # message answers the one call of its id, when it comes before it.
                call_pos = dict(ps.call_pos)
                for a, out in patched:
                    for p, x in enumerate(out, start=a):
                        if p in call_pos:
                            call_pos[p] = _answered(ps.call_last, x.tool_call_id, p)
                shape = dataclasses.replace(ps, call_pos=call_pos)
                same_ids = True
            elif only_calls:  # the same ids, kinds and images: the calls' positions again
                tool_positions, call_pos, last = _call_positions(hist, kinds)
                shape = dataclasses.replace(
                    ps, tool_positions=tool_positions, call_pos=call_pos, call_last=last
                )
                same_ids = True
            else:
                talk = (ps.tool_positions, ps.call_pos) if quiet else None
                unique = ps.unique_ids if ids_kept else None
                users = _patched_users(ps, patched)
                shape = self._shape_of(
                    hist, ids, kinds, fids, ps.last_user_pos, talk, unique, users
                )
                same_ids = ids_kept  # (then ``tokens_by_id`` is patched by id)
            if shape.marker != ps.marker:
                return False
            h.hist, h.shape = hist, shape
            if not only_calls:
                h.cand_pos = None  # the candidates' ids and kinds
        marker = h.shape.marker
        if h.patched is not None and patched:
            lo, hi = h.patched
            h.patched = (
                min(lo, *(a for a, _ in patched)),
                max(hi, *(a + len(out) for a, out in patched)),
            )
        for a, out in patched:
            for p, x in enumerate(out, start=a):
                h.hist[p] = x
                h.tokens[p] = x.tokens
                h.stored[p] = stored_tokens(x)
                h.cost[p] = _replay_cost(x, marker)
                if h.shape.unique_ids:
                    h.tokens_by_id[x.id] = x.tokens
                cand = is_compression_candidate(x, summary)
                if cand != h.cand[p]:
                    h.cand[p] = cand
                    h.cand_pos = None
                h.entries.forget(p)
                h.provider.forget(p)
        if patched:
            h.prefix = list(itertools.accumulate(h.cost, initial=0))
            if not h.shape.unique_ids or not same_ids:
                h.tokens_by_id = dict(zip(h.shape.ids, h.tokens, strict=True))
        if meta_changed:
            h.metadata = self._metadata(h)
        return True

    def _fill(
        self,
        h: _History,
        summary: Message | None,
        prev: _History | None = None,
        kept: Sequence[tuple[int, int, int]] = (),
    ) -> None:
        """Make the per-position lists and the shape from the units' converted messages.

        ``kept``: the runs of units that are ``prev``'s (``_kept_units``: same messages,
        same conversions; the others were converted again): the values of their positions
        that depend on the converted message alone are copied from ``prev`` in slices,
        not made again.
        """
        outs = h.outs
        old_hist = prev.hist if prev is not None else []  # (``prev`` may be ``h``)
        old_starts = prev.starts if prev is not None else [0]
        unit_runs = _unit_runs(kept if prev is not None else (), len(outs))
        # Runs: ("old", a, b) copies prev's positions [a, b); ("new", msgs) makes them.
        runs: list[tuple[Any, ...]] = []
        hist: list[LlmMessage] = []
        starts: list[int] = []
        for run in unit_runs:
            at = len(hist)
            if run[0] == "old":
                a, b = old_starts[run[1]], old_starts[run[2]]
                runs.append(("old", a, b))
                hist.extend(old_hist[a:b])
                kept_starts = old_starts[run[1] : run[2]]
                starts.extend(map((at - a).__add__, kept_starts) if at != a else kept_starts)
            else:
                new_outs = outs[run[1] : run[2]]
                made = list(itertools.chain.from_iterable(new_outs))
                runs.append(("new", made))
                hist.extend(made)
                starts.extend(itertools.accumulate(map(len, new_outs[:-1]), initial=at))
        starts.append(len(hist))
        n = len(hist)
        # The values kept beside the lists (positions of a kind, the table of ids) are
        # moved through the runs from ``prev``'s: when ``prev`` is ``h`` being made again
        # in place (its changed units converted, its lists and shape still the old ones),
        # too. Only its file metadata is not compared with its own (``h.metas`` already
        # holds the changed units' files).
        apart = prev is not None and prev is not h

        def gather(old: Sequence[Any] | None, make: Callable[[LlmMessage], Any]) -> list[Any]:
            res: list[Any] = []
            for run in runs:
                if run[0] == "old" and old is not None:
                    res.extend(old[run[1] : run[2]])
                elif run[0] == "old":
                    res.extend(map(make, old_hist[run[1] : run[2]]))
                else:
                    res.extend(map(make, run[1]))
            return res

        def lazy(old: _Lazy | None) -> _Lazy:
            if old is None:
                return _Lazy.empty(n)
            items: list[Any] = []
            filled = bytearray()
            for run in runs:
                if run[0] == "old":
                    items.extend(old.items[run[1] : run[2]])
                    filled += old.filled[run[1] : run[2]]
                else:
                    items.extend([None] * len(run[1]))
                    filled += bytes(len(run[1]))
            return _Lazy(items, filled)

        last_unit = h.structure.last_unit
        last_user_pos = starts[last_unit + 1] - 1 if last_unit >= 0 else -1
        ps = prev.shape if prev is not None else None
        ids = gather(ps.ids if ps else None, operator.attrgetter("id"))
        kinds = gather(ps.kinds if ps else None, operator.attrgetter("kind"))
        fids = gather(ps.fids if ps else None, operator.attrgetter("file_id"))
        h.tokens = gather(prev.tokens if prev else None, operator.attrgetter("tokens"))
        table = None
        if ps is not None and ps.unique_ids:
            table = _carried_table(prev.tokens_by_id, ps.ids, runs, len(old_hist), ids, h.tokens)  # type: ignore[union-attr]
        h.tokens_by_id = table if table is not None else dict(zip(ids, h.tokens, strict=True))
        unique = len(h.tokens_by_id) == len(ids)  # (the table tells whether ids repeat)
        calls = _moved_calls(ps, runs, old_hist) if ps is not None else None
        users = _carried_positions(ps.user_positions if ps else None, runs, hist, _users_in)
        images = _carried_positions(ps.image_positions if ps else None, runs, hist, _images_in)
        h.shape = self._shape_of(
            hist, ids, kinds, fids, last_user_pos, calls, unique=unique, users=(users, images)
        )
        marker = h.shape.marker
        same_cost = prev is not None and ps is not None and ps.marker == marker
        h.starts = starts
        h.hist = hist
        h.patched = None
        h.stored = gather(prev.stored if prev else None, stored_tokens)
        h.cost = gather(
            prev.cost if prev and same_cost else None,
            _LLM_TOKENS if marker is None else lambda x: _replay_cost(x, marker),
        )
        h.prefix = list(itertools.accumulate(h.cost, initial=0))
        # A reused unit is not the summary node unless the summary is the same object.
        h.cand = gather(prev.cand if prev else None, lambda x: is_compression_candidate(x, summary))
        h.cand_pos = None
        h.entries = lazy(prev.entries if prev and same_cost else None)
        fill_key = self._fill_key()
        same_provider = prev is not None and prev.fill_key == fill_key
        h.provider = lazy(prev.provider if prev and same_provider else None)
        h.fill_key = fill_key
        meta_runs = [r if r[0] == "old" else ("new", h.metas[r[1] : r[2]]) for r in unit_runs]
        meta_units = _carried_positions(
            prev.meta_units if prev else None, meta_runs, h.metas, _metas_in
        )
        if (
            apart
            and prev is not None
            and prev.fill_key == fill_key
            and prev.structure.summarized_meta is h.structure.summarized_meta
            and len(meta_units) == len(prev.meta_units)
            and all(
                map(
                    operator.is_,
                    map(h.metas.__getitem__, meta_units),
                    map(prev.metas.__getitem__, prev.meta_units),
                )
            )
        ):
            metadata = prev.metadata  # the same files, in the same order
        else:
            h.meta_units = meta_units
            metadata = self._metadata(h)
        h.meta_units = meta_units
        h.metadata = metadata

    def _shape_of(
        self,
        hist: list[LlmMessage],
        ids: list[str],
        kinds: list[str],
        fids: list[str | None],
        last_user_pos: int,
        calls: tuple[list[int], dict[int, int]] | None = None,
        unique: bool | None = None,
        users: tuple[list[int], list[int]] | None = None,
    ) -> _Shape:
        """The shape of the converted history ``hist`` (its ids, kinds and file ids
        given); the calls' positions (``_call_positions``) are ``calls`` when given (the
        messages that make or answer calls are the same, in the same order: their
        positions known); ``unique``: whether no id repeats, when known; ``users``: the
        positions of the user messages and of those with images, when known."""
        n = len(hist)
        if users is not None:
            user_positions, image_positions = users
        else:
            user_positions = list(_users_in(0, hist))
            image_positions = list(_images_in(0, hist))
        tool_positions: list[int] = []
        call_pos: dict[int, int] = {}
        call_last: dict[str, int] | None = None
        if calls is not None:
            tool_positions, call_pos = calls
        else:
            tool_positions, call_pos, call_last = _call_positions(hist, kinds)
        image_prefix = [0] * (n + 1)
        if image_positions:
            for p in image_positions:
                image_prefix[p + 1] = len(hist[p].images)
            image_prefix = list(itertools.accumulate(image_prefix))
        marker = None  # the per-image marker cost when images are replayed as text markers
        if not self.s.vision and image_positions:
            marker = self.count(texts.IMAGE_NOT_SUPPORTED.format(id=_NON_VISION_MARKER_ID))
        return _Shape(
            ids=ids,
            kinds=kinds,
            fids=fids,
            user_positions=user_positions,
            tool_positions=tool_positions,
            call_pos=call_pos,
            image_prefix=image_prefix,
            image_positions=image_positions,
            marker=marker,
            last_user_pos=last_user_pos,
            unique_ids=len(set(ids)) == n if unique is None else unique,
            call_last=call_last,
        )

    def _fill_key(self) -> tuple[Any, ...]:
        """What ``_fill`` reads besides the converted messages: the provider and whether
        it sees images (provider messages, the image marker), whether a file reader is
        offered (the files the listing can name)."""
        return (self.s.provider, self.s.vision, self.has_file_reader)

    def _metadata(self, h: _History) -> dict[str, _FileMeta]:
        """The files the forgotten-files listing can name: those the history injects
        (with read_file offered), then those only the summary remembers."""
        metadata: dict[str, _FileMeta] = {}
        if self.has_file_reader:
            for u in h.meta_units:
                for fid, fm in (h.metas[u] or {}).items():
                    metadata.setdefault(fid, fm)
        for fid, fm in h.structure.summarized_meta.items():
            metadata.setdefault(fid, fm)
        return metadata

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
            bool(project.loaded_texts) and not still_loaded,
        )

    def _tool_definition_tokens(self) -> int:
        memo = self.memo
        if memo.tool_tokens is None:
            memo.tool_tokens = sum(self.count(json.dumps(t.schema)) for t in self.conv.tools or ())
        return memo.tool_tokens

    # -------------------------------------------------------------- branch and summary

    def _at(self, i: int, rng: Span) -> TextRange:
        """A range of stored message ``i`` in this version of the text."""
        return self.conv.absolute(i, rng)

    def _resolve_branch(self) -> list[int]:
        """Return the messages of the current branch, root first (SPEC §2.1), as places in
        ``Conversation.message_data`` (``walk_branch``), and report what the walk met."""
        data = self.conv.message_data
        walk = walk_branch(data, self.s.branch_tip)
        if walk.unknown_tip:
            rng = self.conv.settings_ranges.get("branch_tip", TextRange(0, 0))
            self.error(
                "invalid-setting",
                f"`branch_tip` names no message: `{self.s.branch_tip}`; the last message is used",
                rng,
            )
        # Where the walk stopped: at the message reached again, or the one whose parent
        # names no message (found at its `parent` key).
        for at, what in (
            (walk.cycle, "links form a cycle through"),
            (walk.orphan, "names no message:"),
        ):
            if at is not None:
                m = data[at]
                name = m.id if at == walk.cycle else m.parent
                self.error(
                    "schema-error",
                    f"`parent` {what} `{name}`",
                    self._at(at, m.parent_range or m.range),
                )
        return _hang_side_summaries(data, walk.chain)

    def _take_system_message(self, chain: list[int]) -> tuple[int | None, list[int]]:
        """Take the first system message as the system prompt unless one is given."""
        if self.conv.system_prompt is not None:
            return None, chain
        i = first_system(self.conv.message_data, chain)
        if i is None:
            return None, chain
        return chain[i], chain[:i] + chain[i + 1 :]

    def _apply_summary(
        self, chain: list[int]
    ) -> tuple[int | None, list[int], dict[str, _FileMeta]]:
        """Apply the newest summary node of the branch (reference §3 step 2, §9.8)."""
        data = self.conv.message_data
        msgs = list(map(data.__getitem__, chain))
        roles = list(map(_ROLE, msgs))
        if SUMMARY_ROLE not in roles:
            return None, chain, {}
        count = itertools.count
        summaries = list(
            itertools.compress(count(), map(operator.is_, roles, itertools.repeat(SUMMARY_ROLE)))
        )
        plain = list(
            itertools.compress(chain, map(operator.is_not, roles, itertools.repeat(SUMMARY_ROLE)))
        )
        ids = list(map(_ID, msgs))
        summary: int | None = None
        cut = -1
        backwards = range(len(roles) - 1, -1, -1)
        last_user = next(
            itertools.compress(
                backwards, map(operator.is_, reversed(roles), itertools.repeat(USER_ROLE))
            ),
            None,
        )
        for i in reversed(summaries):
            k = chain[i]
            node = data[k]
            pos = _index(ids, node.summarizes_through, 0, i)
            later = _index(ids, node.summarizes_through, i + 1, len(ids))
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
                    self._at(k, node.summarizes_through_range or node.range),
                    severity="warning",
                )
                continue
            summary = k
            cut = pos
            break
        if summary is None:
            return None, plain, {}
        meta: dict[str, _FileMeta] = {}
        summarized = list(
            itertools.compress(
                msgs[: cut + 1], map(operator.is_not, roles, itertools.repeat(SUMMARY_ROLE))
            )
        )
        with_files = map(any, map(_FILES_AND_FILE_ID, summarized))  # C-level passes
        for m in itertools.compress(summarized, with_files):
            for f in m.files:
                meta.setdefault(f.file_id, _FileMeta(f.file_id, f.filename or "unknown", 0))
            if m.file_id:
                meta.setdefault(m.file_id, _FileMeta(m.file_id, m.filename or "unknown", 0))
        kept_ids = set(map(_ID, summarized))
        plain_ids = map(_ID, map(data.__getitem__, plain))
        rest = list(
            itertools.compress(plain, map(operator.not_, map(kept_ids.__contains__, plain_ids)))
        )
        return summary, rest, meta

    def _summary_covers_kept(self, chain: list[int], i: int, cut: int) -> None:
        """Report a summary whose cut comes after it on the branch: the messages between
        the summary and its cut were sent verbatim after it was written."""
        data = self.conv.message_data
        k = chain[i]
        node = data[k]
        after = [j for j in chain[i + 1 : cut + 1] if data[j].role is not SUMMARY_ROLE]
        first = after[0] if after else chain[cut]
        n = plural(len(after), "message")
        rng = self._at(k, node.summarizes_through_range or node.range)
        self.error(
            "summary-covers-kept-message",
            f"summary `{node.id}` summarizes through `{node.summarizes_through}`, which comes "
            f"after the summary on the branch: it would cover {n} "
            f"sent verbatim after it was written, from `{data[first].id}`; it is ignored",
            rng,
            related=(
                (self._at(k, node.range), f"summary `{node.id}` is here and is not sent"),
                (
                    self._at(first, data[first].range),
                    f"`{data[first].id}` follows the summary and is sent verbatim",
                ),
            ),
        )

    def _summary_covers_this_turn(self, chain: list[int], i: int, cut: int, last_user: int) -> None:
        """Report a summary whose cut is the last user message or a message after it."""
        data = self.conv.message_data
        k = chain[i]
        node, target, user = data[k], data[chain[cut]], data[chain[last_user]]
        what = (
            "the last user message"
            if cut == last_user
            else f"a message of this turn (after the last user message `{user.id}`)"
        )
        related: tuple[tuple[TextRange, str], ...] = (
            (self._at(k, node.range), f"summary `{node.id}` is not sent"),
        )
        if cut != last_user:
            related = (
                (self._at(chain[last_user], user.range), f"this turn starts here: `{user.id}`"),
                *related,
            )
        self.error(
            "summary-covers-this-turn",
            f"summary `{node.id}` summarizes through `{target.id}`, {what}: a summary never "
            "covers the question being answered nor this turn's tool calls and results; "
            "it is ignored",
            self._at(k, node.summarizes_through_range or node.range),
            related=related,
        )

    # -------------------------------------------------------------- history conversion

    def _precount(self, chain: Sequence[Message]) -> None:
        """Count every text of the branch in one batch, where the tokenizer counts a batch
        at once (a counting process asked once); another counts each text where it is
        converted, as a batch would one by one (at the open of 10 MB, gathering and
        looking up the 8,000 texts twice cost 5 ms)."""
        if getattr(self.tok, "batch", None) is None:
            return
        batch: list[str] = []
        for m in chain:
            if m.token_count is None:
                batch.append(m.content)
            for f in m.files:
                if f.content and f.token_count is None:
                    batch.append(texts.file_block(f.filename, f.content))
            if m.tool_calls and (
                m.token_count is None or any(c.token_count is not None for c in m.tool_calls)
            ):  # the calls ``_convert_message`` counts (their texts are made again there)
                batch.extend(
                    _tool_call_text(
                        c.name, c.arguments_text if c.arguments is None else c.arguments
                    )
                    for c in m.tool_calls
                    if c.token_count is None
                )
        self.tok.count_many(batch)

    def _summary_message(self, summary: Message) -> LlmMessage:
        return LlmMessage(
            summary.id,
            "assistant",
            summary.content,
            self._own_tokens(summary),
            source=summary,
        )

    def _convert_message(
        self,
        m: Message,
        is_last_user: bool,
        past: bool,
        call_name: str | None,
        turn_images: tuple[Image, ...],
        meta: dict[str, _FileMeta],
        out: list[LlmMessage],
    ) -> None:
        """Append the model messages of ``m``: ``is_last_user`` when it is the last user
        message of the branch, ``past`` when it comes before it, ``call_name`` the tool an
        earlier turn's tool result answers (None unless it is replaced), ``turn_images``
        the project images riding on the last user message."""
        if m.role is USER_ROLE:
            if m.files:
                out.extend(self._injected_files(m, meta))
            extra = self.conv.additional_context
            if is_last_user and extra is not None and extra.content:
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
            images = m.images
            if m.files:
                images += tuple(
                    Image(f.file_id, f.range, f.token_count) for f in m.files if f.kind == "image"
                )
            image_tokens = sum(img.token_count or 0 for img in images) if images else 0
            if is_last_user:
                # Project images ride on the last user message, after its own images;
                # their tokens are not counted here (reference §4 step 4).
                images += turn_images
            tokens = (
                m.token_count if m.token_count is not None else self.count(m.content) + image_tokens
            )
            out.append(
                LlmMessage(
                    m.id,
                    "user",
                    m.content,
                    tokens,
                    source=m,
                    file_id=m.file_id,
                    images=images,
                    image_tokens=image_tokens,
                )
            )
        elif m.role is ASSISTANT_ROLE and not m.tool_calls:  # (most messages: no calls)
            tokens = m.token_count if m.token_count is not None else self.tok.count(m.content)
            out.append(LlmMessage(m.id, "assistant", m.content, tokens, source=m))
        elif m.role is ASSISTANT_ROLE:
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
            out.append(LlmMessage(m.id, "assistant", m.content, tokens, source=m, tool_calls=calls))
        elif m.role is TOOL_ROLE:
            if call_name is not None:
                text = _past_tool_result(call_name, m.content)
                out.append(
                    LlmMessage(
                        m.id,
                        "tool",
                        text,
                        self.count(text),
                        source=m,
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
                        source=m,
                        tool_call_id=m.tool_call_id,
                    )
                )
        elif m.role is REMINDER_ROLE:
            out.append(LlmMessage(m.id, "reminder", m.content, self._own_tokens(m), source=m))
        elif m.role is SYSTEM_ROLE:
            out.append(LlmMessage(m.id, "system", m.content, self._own_tokens(m), source=m))

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
                text = texts.file_block(f.filename, content)
                tokens = f.token_count if f.token_count is not None else self.count(text)
            approx = f.approx_char_count if f.approx_char_count is not None else len(content)
            meta.setdefault(f.file_id, _FileMeta(f.file_id, f.filename, approx))
            out.append(
                LlmMessage(f"{m.id}/files/{k}", "user", text, tokens, source=m, file_id=f.file_id)
            )
        return out

    # -------------------------------------------------------------- prompts

    def _prompts(
        self, system_msg: Message | None, ctx: PromptContext
    ) -> tuple[LlmMessage | None, LlmMessage | None, str | None, str]:
        """``_prompts_made``, memoised by ``cite``, the system message taken as the prompt
        and the inline prompts (the rest of what it reads is in the context key)."""
        conv = self.conv
        inline = (_block_key(conv.system_prompt), _block_key(conv.custom_agent_prompt))
        hit = self.memo.prompts.get(ctx.cite)
        stored = system_msg.green if system_msg is not None else None
        if hit is None or hit[0] is not stored or hit[1] != inline:
            self.system_range = None
            res = self._prompts_made(system_msg, ctx)
            hit = (stored, inline, (res, self._system_range_tag()))
            self.memo.prompts[ctx.cite] = hit
        res, tag = hit[2]
        self.system_range = self._system_range_of(tag, system_msg)
        return res  # type: ignore[no-any-return]

    def _system_range_tag(self) -> str | None:
        """Which part of the document ``_prompts_made`` found the system prompt in."""
        rng, conv = self.system_range, self.conv
        if rng is None:
            return None
        if conv.custom_agent_prompt is not None and rng is conv.custom_agent_prompt.range:
            return "custom_agent"
        if conv.system_prompt is not None and rng is conv.system_prompt.range:
            return "system_prompt"
        return "message"

    def _system_range_of(self, tag: str | None, system_msg: Message | None) -> TextRange | None:
        """The range ``_system_range_tag`` names, in this version of the document."""
        conv = self.conv
        if tag == "custom_agent" and conv.custom_agent_prompt is not None:
            return conv.custom_agent_prompt.range
        if tag == "system_prompt" and conv.system_prompt is not None:
            return conv.system_prompt.range
        if tag == "message" and system_msg is not None:
            return system_msg.range
        return None

    def _prompts_made(
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
        """The base prompt's text parsed as a template (memoised by the text)."""
        hit = self.memo.template
        if hit is None or hit[0] != text:
            hit = self.memo.template = (text, parse_prompt_text(text))
        return hit[1]

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

    def _project_files_prepare(self) -> _Project:
        if self.memo.project is None:
            self.memo.project = self._project_files_of()
        return self.memo.project

    def _project_files_of(self) -> _Project:
        """The project files by kind; a loaded text is counted only when its count is
        needed (``_project_overflows``: most documents' files fit their share whatever
        their counts, and the documents message that holds them is counted anyway)."""
        loaded: list[tuple[FileAttachment, str, int | None]] = []
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
            loaded.append((f, content, f.token_count))
        return _Project(loaded, tabular, images, all_overrides)

    def _project_messages(self, project: _Project, reserved: int) -> tuple[list[LlmMessage], bool]:
        """The documents message and the file listing (reference §6.5, §7.1), and whether
        the files' texts are still loaded (False when they overflowed into the listing)."""
        overflow = _project_overflows(project, self.s, reserved, self.tok)
        return self._project_messages_of(project, overflow)

    def _project_messages_of(
        self, project: _Project, overflow: bool
    ) -> tuple[list[LlmMessage], bool]:
        """``_project_messages`` once it is known whether the texts overflow their share
        (all that ``reserved`` decides; memoised by it)."""
        hit = self.memo.project_msgs.get(overflow)
        if hit is None:
            hit = self.memo.project_msgs[overflow] = self._project_messages_made(project, overflow)
        return hit

    def _project_messages_made(
        self, project: _Project, overflow: bool
    ) -> tuple[list[LlmMessage], bool]:
        listing: list[_FileMeta] = []
        msgs: list[LlmMessage] = []
        still_loaded = bool(project.loaded_texts)
        if overflow:
            # Overflow (the DISABLE_VECTOR_DB path): nothing loaded, every file listed.
            for f, _, tokens in project.counted(self.count):
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
                sum(t for _, _, t in project.counted(self.count)) + image_tokens
                if project.all_overrides  # (every count is the file's ``token_count``)
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

    # -------------------------------------------------------------- stage 4: budget cut (§6.2)

    def _budget_cut(self, h: _History, fixed: _Fixed) -> _Cut:
        """Onyx's ``construct_message_history`` on the history's prefix sums, with the
        budget re-charged on every rebuild: newest-first contiguous fill before the last
        user message, the last-N filter, the image-limit note, the forgotten-files listing
        and the orphan pass."""
        s = self.s
        available = fixed.available - fixed.tool_tokens
        fixed_msgs = [m for m in (fixed.system, fixed.custom_agent, fixed.reminder) if m]
        project_tokens = sum(m.tokens for m in fixed.project_msgs)
        history_budget = available - sum(m.tokens for m in fixed_msgs) - project_tokens
        if history_budget < 0:
            self._budget_overrun(
                available, fixed.system, fixed.custom_agent, project_tokens, fixed.reminder
            )
            return _Cut(False, history_budget)
        hist, sh, prefix, cost = h.hist, h.shape, h.prefix, h.cost
        n = len(hist)
        if not n:
            return _Cut(True, history_budget)
        users = sh.user_positions
        lo = 0
        if s.last_n_user_messages is not None and len(users) > s.last_n_user_messages:
            # Onyx's last-N filter: the history from the N-th last user-type message on
            # (injected files count); what it removes is simply not sent
            # (llm_loop.py:456-473).
            lo = users[-s.last_n_user_messages]
        if not users:
            first = hist[lo].source
            self.error(
                "no-user-message",
                "the conversation has no user message: there is no turn to assemble",
                self.conv.locate(first).range if first else TextRange(0, 0),
            )
            return _Cut(False, history_budget)
        last = users[-1]
        # Onyx appends the image-limit note uncharged; it is charged here, from the first
        # message that takes the images over the cap, so the total stays within the budget.
        cap, images = self._image_cap(), sh.image_prefix
        in_window = images[n] - images[lo]
        note_tokens = 0
        if cap is not None and in_window > cap:
            note_tokens = self.count(texts.IMAGES_DROPPED.format(n=in_window - cap))
        # A response of this turn that no message from ``lo`` on calls is dropped by the
        # orphan pass whatever the cut: it does not count against the turn (Onyx counts it).
        tools = sh.tool_positions
        doomed = [p for p in tools[bisect.bisect_right(tools, last) :] if sh.call_pos[p] < lo]
        required = prefix[n] - prefix[last] - sum(cost[p] for p in doomed)
        if cap is not None and images[n] - images[last] > cap:
            required += note_tokens
        if required > history_budget:
            src = hist[last].source
            self.error(
                "last-turn-over-budget",
                f"the last user message and what follows need {required:,} tokens but only "
                f"{history_budget:,} are left for history (over by {required - history_budget:,})",
                self.conv.locate(src).range if src else TextRange(0, 0),
                related=_largest_of_turn(
                    self.conv, [(hist[p], cost[p]) for p in range(last + 1, n)]
                ),
            )
            return _Cut(False, history_budget)
        remaining = history_budget - required

        # Newest first, contiguous: the longest run before the last user message that fits
        # (costs are never negative, so the prefix sums are sorted). With the image cap,
        # the message that takes the images over it is charged the note too.
        start = bisect.bisect_left(prefix, prefix[last] - remaining, lo, last)
        note_in_kept = 0
        if note_tokens:
            q = bisect.bisect_left(images, images[n] - cap, lo, last + 1) - 1  # type: ignore[operator]
            if lo <= q < last and start <= q:
                fit = bisect.bisect_left(prefix, prefix[last] - remaining + note_tokens, lo, q + 1)
                start, note_in_kept = (fit, note_tokens) if fit <= q else (q + 1, 0)

        forgotten, listing = self._forgotten(h, lo, start)
        trimmed = False
        if forgotten:
            n_forgotten = len(forgotten)
            # With the image cap the cut above charged the note; the listing's eviction
            # does not.
            metadata, fids, k0 = h.metadata, sh.fids, start
            start, forgotten, listing = fit_listing(
                _ListingFit(
                    k0=k0,
                    n=last,
                    remaining=remaining - note_in_kept,
                    prefix=prefix,
                    file_at=lambda q: fids[q] if fids[q] in metadata else None,
                    metadata=metadata,
                    forgotten=forgotten,
                    newest=lambda: _newest_positions(fids[:k0]),
                    listing=self._listing_msg,
                    first_listing=listing,
                )
            )
            trimmed = listing is None or len(forgotten) < n_forgotten
            if listing is None:
                self.error(
                    "budget-overrun",
                    "the forgotten-files listing does not fit in the budget and is left out",
                    _doc_span(self.conv, hist[lo:start])
                    or _doc_span(self.conv, hist[lo : lo + 1])
                    or TextRange(0, 0),
                    severity="warning",
                )
        memo = self.memo
        hit = memo.orphans  # made from the calls' positions (one object with ``tools``)
        if hit is None or hit[0] is not sh.call_pos or hit[1] != start:
            # Orphan pass: tool responses whose call is not earlier in what is sent.
            first = bisect.bisect_left(tools, start)
            memo.orphans = (
                sh.call_pos,
                start,
                [p for p in tools[first:] if sh.call_pos[p] < start],
            )
        return _Cut(
            True,
            history_budget,
            lo,
            start,
            last,
            memo.orphans[2],
            forgotten if listing is not None else [],
            listing,
            trimmed,
        )

    def _forgotten(
        self, h: _History, lo: int, start: int
    ) -> tuple[list[_FileMeta], LlmMessage | None]:
        """The files forgotten when the history before ``start`` is dropped, and their
        listing (before it is charged): the dropped messages' files, then the other files
        the history does not carry from ``lo`` on."""
        memo, fids, metadata = self.memo, h.shape.fids, h.metadata
        key = (fids, metadata, lo, start)
        if memo.forgotten is not None and all(
            a is b or a == b for a, b in zip(memo.forgotten[:4], key, strict=True)
        ):
            return list(memo.forgotten[4]), memo.forgotten[5]
        hit = memo.history_fids
        if hit is None or hit[1] != lo or not (hit[0] is fids or hit[0] == fids):
            memo.history_fids = (fids, lo, set(filter(None, fids[lo:])))
        history_fids = memo.history_fids[2]
        dropped_fids = list(filter(None, fids[lo:start]))
        for fid in metadata:
            if fid not in history_fids and fid not in dropped_fids:
                dropped_fids.append(fid)
        forgotten: list[_FileMeta] = []
        if dropped_fids and metadata:
            forgotten = _dedupe([metadata[f] for f in dropped_fids if f in metadata])
        listing = self._listing_msg(forgotten) if forgotten else None
        memo.forgotten = (*key, forgotten, listing)
        return list(forgotten), listing

    # -------------------------------------------------------------- stages 5-6: the result

    def _assembled(
        self,
        structure: _Structure,
        h: _History,
        fixed: _Fixed,
        cut: _Cut,
        summary: Message | None,
    ) -> Assembly:
        """The ``Assembly``: the layout, the provider translation (§8), the segments, the
        budget line and the compression plan (§9)."""
        s = self.s
        hist, cost, ids = h.hist, h.cost, h.shape.ids
        head: list[LayoutEntry] = []
        middle: list[LayoutEntry] = []
        tail: list[LayoutEntry] = []
        if cut.ok:
            if fixed.system is not None:
                head.append(LayoutEntry(fixed.system, "system", fixed.system.tokens, True))
            if fixed.custom_agent is not None:
                m = fixed.custom_agent
                middle.append(LayoutEntry(m, "custom_agent", m.tokens, False))
            middle.extend(
                LayoutEntry(m, "project_files", m.tokens, False) for m in fixed.project_msgs
            )
            if cut.listing is not None:
                m = cut.listing
                middle.append(LayoutEntry(m, "forgotten_files", m.tokens, False))
            if fixed.reminder is not None:
                tail.append(LayoutEntry(fixed.reminder, "reminder", fixed.reminder.tokens, False))
        # What is sent of the history: positions [start, last) in the "history" segment,
        # then the last user message and the rest of the turn, less the orphans.
        start, last, n = cut.start, cut.last, len(hist)
        sent = cut.ok and last >= 0
        kept_orphans = [p for p in cut.orphans if p < last] if sent else []
        turn_positions: list[int] = []
        if sent:
            turn_positions = _without(range(n), last, n, cut.orphans)

            def entry(p: int) -> LayoutEntry:
                x = hist[p]
                return LayoutEntry(_with_cost(x, cost[p]), "history", cost[p], True)

            h.entries.fill(start, last, entry)
            h.provider.fill(start, n, lambda p: self._provider_message(hist[p], None))
        history_entries = _without(h.entries.items, start, last, kept_orphans) if sent else []
        turn = [
            LayoutEntry(
                _with_cost(hist[p], cost[p]),
                "last_user" if p == last else "this_turn",
                cost[p],
                False,
            )
            for p in turn_positions
        ]

        # Translation (§8): the provider's messages; with the image cap the newest images
        # are kept (in each message its first ones) and a note says how many were dropped.
        cap = self._image_cap()
        keep: dict[int, int] = {}  # position -> its images kept, where not all are
        images_dropped = 0
        if cap is not None and sent:
            left = cap
            total = 0
            for p in reversed(h.shape.image_positions):
                if p < start:
                    break
                k = len(hist[p].images)
                total += k
                if left < k:
                    keep[p] = left
                left = max(0, left - k)
            images_dropped = max(0, total - cap)
        items = h.provider.items
        history_providers = _without(items, start, last, kept_orphans) if sent else []
        for p, k in keep.items():
            if p < last:
                at = p - start - bisect.bisect_left(kept_orphans, p)
                history_providers[at] = self._provider_message(hist[p], k)
        providers: list[dict[str, Any]] = [self._provider_message(e.message, None) for e in head]
        providers.extend(history_providers)
        providers.extend(self._provider_message(e.message, None) for e in middle)
        providers.extend(
            items[p] if p not in keep else self._provider_message(hist[p], keep[p])
            for p in turn_positions
        )
        providers.extend(self._provider_message(e.message, None) for e in tail)
        if images_dropped:
            text = texts.IMAGES_DROPPED.format(n=images_dropped)
            note = LlmMessage("$images_dropped", "user", text, self.count(text))
            tail.append(LayoutEntry(note, "reminder", note.tokens, False))
            providers.append({"role": "user", "content": text})
        if _FORMATTING_MODELS.search(s.model.lower()):
            i = next((i for i, d in enumerate(providers) if d["role"] == "system"), None)
            if i is not None:
                # A copy: the memo's message is shared with earlier results.
                d = providers[i]
                providers[i] = {**d, "content": texts.FORMATTING_REENABLED + d["content"]}
        layout = (*head, *history_entries, *middle, *turn, *tail)
        cache_prefix = mark_cache_prefix(s, len(head) + len(history_entries), providers)

        history_tokens = 0
        if sent:
            kept_cost = h.prefix[last] - h.prefix[start]
            history_tokens = kept_cost - sum(cost[p] for p in kept_orphans)
        by_segment: dict[str, list[LayoutEntry]] = {name: [] for name in SEGMENTS}
        for e in (*head, *middle, *turn, *tail):
            by_segment[e.segment].append(e)
        history_ids = _without(ids, start, last, kept_orphans) if sent else []
        segments = tuple(
            Segment(name, history_tokens, tuple(history_ids))
            if name == "history"
            else Segment(
                name,
                sum(e.tokens for e in by_segment[name]),
                tuple(e.id for e in by_segment[name]),
            )
            for name in SEGMENTS
        )
        used = history_tokens + sum(e.tokens for e in (*head, *middle, *turn, *tail))
        budget = fixed.budget(s, cut.history_budget, used)
        tokens_by_id = h.tokens_by_id.copy()
        if sent:
            orphans = set(cut.orphans)
            for p in h.shape.image_positions:
                if p >= start and p not in orphans:
                    tokens_by_id[ids[p]] = cost[p]
        for e in (*head, *middle, *tail):
            tokens_by_id[e.id] = e.tokens
        history = tuple(hist)
        _note_patched(h, history)
        compression = self._compression_plan(h, history, summary, fixed.reserved)
        return Assembly(
            settings=s,
            encoding=self.tok.encoding,
            budget=budget,
            layout=layout,
            segments=segments,
            provider_messages=tuple(providers),
            history=history,
            dropped=tuple(ids[:start]) if sent else (),
            orphans_dropped=tuple(ids[p] for p in cut.orphans),
            forgotten_files=tuple(
                ForgottenFile(f.file_id, f.filename, f.approx_char_count) for f in cut.forgotten
            ),
            compression=compression,
            cache_prefix_length=cache_prefix,
            errors=tuple(self.errors),
            system_text=fixed.system_text,
            reserved_tokens=fixed.reserved,
            chain=structure.chain_ids,
            chain_places=structure.chain,
            summary_id=summary.id if summary else None,
            summary_place=structure.summary_index if summary else None,
            images_dropped=images_dropped,
            tokens_by_id=tokens_by_id,
            history_ids=tuple(ids),
            history_tokens=tuple(h.tokens),
            history_fids=tuple(h.shape.fids),
            decided_by_counts=(
                not cut.ok
                or cut.start > cut.lo
                or cut.trimmed
                or fixed.overflow
                or compression.triggered
            ),
            counts_are_bounds=getattr(self.tok, "bounds", False),
        )

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

    def _listing_msg(self, files: list[_FileMeta]) -> LlmMessage:
        text = _listing_text(files)
        return LlmMessage("$forgotten_files", "user", text, self.count(text))

    # -------------------------------------------------------------- translation (§8)

    def _provider_message(self, m: LlmMessage, kept_images: int | None) -> dict[str, Any]:
        """One message as the provider receives it (before the formatting prefix), with
        only its first ``kept_images`` images (None: all)."""
        ollama = self.s.provider == "ollama"
        if m.kind == "system":
            return {"role": "system", "content": m.text}
        if m.kind == "reminder":
            return {"role": "user", "content": texts.REMINDER_WRAPPER.format(text=m.text)}
        if m.kind == "user":
            return self._user_message(m, kept_images)
        if m.kind == "assistant":
            return _assistant_message(m, ollama=ollama)
        assert m.kind == "tool", m.kind
        if ollama:
            return {"role": "user", "content": f"[Tool Result] id={m.tool_call_id}\n{m.text}"}
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.text}

    def _user_message(self, m: LlmMessage, kept_images: int | None) -> dict[str, Any]:
        if not m.images:
            return {"role": "user", "content": m.text}
        parts: list[dict[str, Any]] = [{"type": "text", "text": m.text}]
        for k, img in enumerate(m.images):
            if kept_images is not None and k >= kept_images:
                break
            label_id = _image_label_id(img.ref)
            if not self.s.vision:
                parts.append(
                    {"type": "text", "text": texts.IMAGE_NOT_SUPPORTED.format(id=label_id)}
                )
                continue
            parts.append({"type": "text", "text": texts.IMAGE_LABEL.format(id=label_id)})
            parts.append({"type": "image_url", "image_url": {"url": img.ref}})
        return {"role": "user", "content": parts}

    # -------------------------------------------------------------- compression (§9)

    def _compression_plan(
        self,
        h: _History,
        history: tuple[LlmMessage, ...],
        summary: Message | None,
        reserved: int,
    ) -> CompressionPlan:
        """What Onyx's post-turn compression would do: over the candidates' stored tokens,
        the newest that fit the recent share (at least one), from a user message on.
        ``history``: ``h.hist`` as the assembly holds it (``h`` is patched by the next run)."""
        s = self.s
        total = sum(h.stored)
        threshold = int((s.max_input_tokens - reserved) * s.compression_trigger_ratio)
        triggered = total > threshold
        for_recent = int(total * s.recent_messages_ratio)
        if h.cand_pos is None:
            h.cand_pos = list(itertools.compress(itertools.count(), h.cand))
            h.cand_ids = list(itertools.compress(h.shape.ids, h.cand))
        cand_pos, cand_ids, stored, kinds = h.cand_pos, h.cand_ids, h.stored, h.shape.kinds
        k = len(cand_pos)
        # The longest suffix of candidates within the recent share (at least one message),
        # summed from the newest back at C speed (the recent share is the short end); then
        # the cut moved to the first user message from there on (else the last before it).
        newest = itertools.accumulate(map(stored.__getitem__, reversed(cand_pos)))
        first = k - max(1, len(list(itertools.takewhile(for_recent.__ge__, newest))))
        split = 0
        if k:
            users = (j for j in range(first, k) if kinds[cand_pos[j]] == "user")
            before = (j for j in range(first - 1, -1, -1) if kinds[cand_pos[j]] == "user")
            split = next(users, None) or next(before, 0)
        made = h.plan_parts
        if made is not None and made[0] is cand_pos and made[1] == (split, triggered):
            summarize_at, keep_at, summarize, keep = made[2]  # (the same candidates and cut)
        else:
            summarize_at = tuple(cand_pos[:split]) if triggered else ()
            keep_at = tuple(cand_pos[split:]) if triggered else tuple(cand_pos)
            summarize = tuple(cand_ids[:split]) if triggered else ()
            keep = tuple(cand_ids[split:]) if triggered else tuple(cand_ids)
            h.plan_parts = (cand_pos, (split, triggered), (summarize_at, keep_at, summarize, keep))
        summarize_tokens = 0
        if triggered:  # the candidates' tokens less the kept ones' (the short end)
            kept = sum(map(stored.__getitem__, keep_at))
            summarize_tokens = sum(itertools.compress(stored, h.cand)) - kept
        request: Callable[[], tuple[dict[str, Any], ...]] | None = None
        if triggered and split:
            # Made when asked for (``--summary-request``), of this run's candidates.
            request = functools.partial(_summary_request, history, summarize_at, keep_at, summary)
        return CompressionPlan(
            triggered=triggered,
            threshold=threshold,
            history_tokens=total,
            reserved_tokens=reserved,
            tokens_for_recent=for_recent,
            summarize=summarize,
            keep=keep,
            progressive=summary is not None,
            request_of=request,
            summarize_tokens=summarize_tokens,
            summarize_at=summarize_at,
            keep_at=keep_at,
        )


# ------------------------------------------------------------------------------ helpers


def _project_overflows(project: _Project, s: Settings, reserved: int, tok: Tokenizer) -> bool:
    """Whether the project files' texts exceed their share of the window left after
    ``reserved``: they are then listed instead of loaded (reference §6.5).

    The texts not counted yet are counted only when their most possible tokens
    (``CachedTokenizer.at_most``: one a byte) could reach the share: a sum of bounds
    below it says what the sum of the counts would."""
    if not project.loaded_texts:
        return False
    share = (s.max_input_tokens - reserved) * PROJECT_FILE_SHARE
    at_most = getattr(tok, "at_most", None)
    if at_most is not None:
        bound = 0
        for _, content, tokens in project.loaded_texts:
            most = tokens if tokens is not None else at_most(content)
            if most is None:
                break
            bound += most
        else:
            if bound < share:
                return False
    return sum(t for _, _, t in project.counted(tok.count)) >= share


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
    plain = [m for m in srcs if m.role is not SUMMARY_ROLE] or srcs
    if not plain:
        return None
    return TextRange(min(m.range.start for m in plain), max(m.range.end for m in plain))


def _largest_of_turn(
    conv: Conversation, after: Sequence[tuple[LlmMessage, int]]
) -> tuple[tuple[TextRange, str], ...]:
    """The largest message after the last user message (with its cost), as a related
    location."""
    located = [(m, c) for m, c in after if m.source is not None]
    if not located:
        return ()
    big, cost = max(located, key=lambda mc: mc[1])
    assert big.source is not None
    return (
        (
            conv.locate(big.source).range,
            f"the largest message of this turn: `{big.id}`, {cost:,} tokens",
        ),
    )


@dataclass(frozen=True, slots=True)
class BranchWalk:
    """The branch as ``walk_branch`` finds it: its places, root first, and what the walk
    met on the way (the place of the message where it stopped, for the last two)."""

    chain: list[int]
    unknown_tip: bool = False  # `branch_tip` names no message: the walk starts at the last
    cycle: int | None = None  # a message reached again through `parent` links
    orphan: int | None = None  # a message whose `parent` names no message


def walk_branch(data: Sequence[Message], tip_id: str | None) -> BranchWalk:
    """The current branch of ``data`` (SPEC §2.1), as places in it: from the tip (the
    message ``tip_id`` names, else the last) back through the ``parent`` links to the
    root; a message without ``parent`` hangs on the message before it. The walk stops at a
    message reached twice (a cycle) or one whose ``parent`` names no message (kept).
    Reads only the messages' ids and parents, ids unique (as the reader makes them)."""
    n = len(data)
    if not n:
        return BranchWalk([])
    parents = list(map(_PARENT, data))
    if tip_id is None and parents.count(None) == n:
        return BranchWalk(list(range(n)))  # no parent links, no tip: every message, in order
    by_id = dict(zip(map(_ID, data), range(n), strict=True))
    unknown = tip_id is not None and tip_id not in by_id
    tip = by_id[tip_id] if tip_id is not None and not unknown else n - 1
    if parents.count(None) == n:
        return BranchWalk(list(range(tip + 1)), unknown)
    cur: int | None = tip
    chain: list[int] = []
    seen: set[str] = set()
    cycle = orphan = None
    while cur is not None:
        m = data[cur]
        if m.id in seen:
            cycle = cur
            break
        seen.add(m.id)
        chain.append(cur)
        if m.parent is None:
            cur = cur - 1 if cur > 0 else None
        elif m.parent in by_id:
            cur = by_id[m.parent]
        else:
            orphan, cur = cur, None
    chain.reverse()
    return BranchWalk(chain, unknown, cycle, orphan)


def first_system(data: Sequence[Message], chain: Sequence[int]) -> int | None:
    """The position in ``chain`` (places in ``data``) of its first system message: the
    one the pipeline takes as the system prompt when none is given; None: none."""
    roles = map(_ROLE, map(data.__getitem__, chain))
    return next(
        itertools.compress(
            itertools.count(), map(operator.is_, roles, itertools.repeat(SYSTEM_ROLE))
        ),
        None,
    )


def _hang_side_summaries(data: Sequence[Message], chain: list[int]) -> list[int]:
    """Add the summary nodes that hang off the branch without being on it (places in
    ``data``).

    Onyx stores a summary as a child of the last user message it saw, beside the answers
    given after it, and applies it to every branch through that parent; such a summary
    joins the chain right after its parent.
    """
    summaries = list(
        itertools.compress(
            itertools.count(), map(operator.is_, map(_ROLE, data), itertools.repeat(SUMMARY_ROLE))
        )
    )
    if not summaries:
        return chain
    on_chain = {data[k].id for k in chain}
    side: dict[str, list[int]] = {}
    for k in summaries:
        m = data[k]
        if m.id in on_chain:
            continue
        parent = m.parent if m.parent is not None else (data[k - 1].id if k else None)
        if parent in on_chain:
            side.setdefault(parent, []).append(k)
    if not side:
        return chain
    res: list[int] = []
    for k in chain:
        res.append(k)
        res.extend(side.get(data[k].id, ()))
    return res


def _talks(m: LlmMessage) -> bool:
    """Whether a converted message can make or answer calls (``_Pipeline._shape_of``)."""
    return bool(m.tool_calls) or m.kind == "tool"


def _past_tool_flag(m: Message, call_names: Mapping[str, str]) -> tuple[Any, ...]:
    """The flags of a tool result before the last user message: it names the tool its
    call id answers (its text is replaced unless past tool results are kept)."""
    return (False, True, call_names.get(m.tool_call_id or "", ""))


def _call_names(data: Sequence[Message], chain: Sequence[int]) -> dict[str, str]:
    """The tool names by call id of the messages ``chain`` (the last call wins)."""
    calls = itertools.chain.from_iterable(map(_TOOL_CALLS, map(data.__getitem__, chain)))
    return {c.id: c.name for c in calls}


def _calls_signature(m: Message) -> tuple[Any, ...]:
    return tuple((c.id, c.name) for c in m.tool_calls)


def _files_signature(m: Message) -> tuple[Any, ...]:
    return tuple((f.file_id, f.filename, f.kind, f.processing) for f in m.files)


def _chain_facts(data: Sequence[Message], chain: Sequence[int]) -> tuple[int, dict[str, str]]:
    """The position in ``chain`` of the last user message of the branch (not an injected
    file when there is another one; -1 when none) and the tool names by call id."""
    msgs = list(map(data.__getitem__, chain))
    backwards = range(len(msgs) - 1, -1, -1)
    last_user_doc = next(
        (i for i in backwards if msgs[i].role is USER_ROLE and msgs[i].file_id is None),
        None,
    )
    if last_user_doc is None:
        last_user_doc = next((i for i in backwards if msgs[i].role is USER_ROLE), -1)
    return last_user_doc, _call_names(data, chain)


def _last_cycle(after: Sequence[LlmMessage]) -> Sequence[LlmMessage]:
    """This turn's last tool cycle: its last assistant tool-call message and what follows."""
    for i in range(len(after) - 1, -1, -1):
        if after[i].kind == "assistant" and after[i].tool_calls:
            return after[i:]
    return ()


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
    except (ValueError, RecursionError):  # (a tool's output nested too deep to read)
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
    except (ValueError, RecursionError):  # (nested too deep to read)
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


def _image_label_id(ref: str) -> str:
    """The id an image's label names: its file id or URL, but for an inline image (a
    ``data:`` URL, as logs carry them) a stand-in made from its data, ``data-<crc32>``.
    Onyx's label names the image's file id (36 characters, never the image), and neither
    Onyx nor this pipeline counts the label; a log's inline image has no file id, and
    naming its data put the whole base64 text, uncounted, beside the image."""
    if ref[:5].lower() != "data:":
        return ref
    import zlib

    return f"data-{zlib.crc32(ref.encode('utf-8', 'surrogatepass')):08x}"


_LLM_TOKENS = operator.attrgetter("tokens")  # ``_replay_cost`` without a marker, at C speed


def _replay_cost(m: LlmMessage, marker: int | None) -> int:
    if marker is None or m.kind != "user" or not m.images:
        return m.tokens
    return max(0, m.tokens - m.image_tokens) + len(m.images) * marker


def _with_cost(m: LlmMessage, c: int) -> LlmMessage:
    """``m`` charged ``c`` tokens (its replay cost)."""
    if c == m.tokens:
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
    implementation, for ``_Pipeline._budget_cut``).

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


def _without(items: Sequence[Any], a: int, b: int, holes: Sequence[int]) -> list[Any]:
    """``items[a:b]`` without the positions in ``holes`` (ascending, may lie outside)."""
    res: list[Any] = []
    for h in holes:
        if h < a:
            continue
        if h >= b:
            break
        res.extend(items[a:h])
        a = h + 1
    res.extend(items[a:b])
    return res


def _summary_entry(m: LlmMessage) -> dict[str, Any] | None:
    """A history message as the summarization request shows it, or None."""
    if not m.text:  # only empty text is skipped (compression.py:276)
        return None
    if m.kind == "assistant" and m.tool_calls:
        names = ", ".join(c.name for c in m.tool_calls)
        return {"role": "assistant", "content": f"[Used tools: {names}]"}
    if m.kind == "assistant":
        return {"role": "assistant", "content": m.text}
    if m.kind == "user":
        return {"role": "user", "content": m.text}
    return None


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


def _summary_request(
    history: tuple[LlmMessage, ...],
    older: tuple[int, ...],
    recent: tuple[int, ...],
    summary: Message | None,
) -> tuple[dict[str, Any], ...]:
    """The summarization request of the compression candidates: the ``older`` positions of
    ``history`` summarized, the ``recent`` ones kept."""
    entries = [_summary_entry(history[p]) for p in (*older, *recent)]
    return _summarization_request_of(
        filter(None, entries[: len(older)]), filter(None, entries[len(older) :]), summary
    )


def _summarization_request_of(
    older: Iterable[dict[str, Any]], recent: Iterable[dict[str, Any]], summary: Message | None
) -> tuple[dict[str, Any], ...]:
    """The summarization request around the older and recent messages' entries
    (``_summary_entry``)."""
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
