"""Incremental assembly: what ``assemble`` keeps of one document between two calls.

After an edit inside a message, the re-read conversation shares every other ``Message``
object with the previous one (``assembly/incremental.py``). Given an ``AssemblyCache``,
``assemble`` then converts only the messages whose identity changed, and redoes the budget
cut, the provider translation and the compression plan over per-position lists of the
converted history (prefix sums, bisection, slices and ``itertools`` passes that run in C)
instead of walking every message in Python. The result equals the uncached run field by
field (property-tested in ``tests/assembly/test_assemble_cache.py``).

The fast path needs the same inputs besides the messages (settings, tokenizer, prompts,
tools, project files, options: the context key), the same number of messages and, for each
message that changed, the same *signature*: everything about it that matters beyond its
own converted messages (id, role, place in the branch, file ids, tool-call ids and names,
image count). The sizes of uploaded files are not in it: what they decide is computed
again on every call (the file metadata of the forgotten-files listing from the converted
message, the reserved tokens and whether the project files still fit from the patched
history). Nor is the text of the system message taken as the system prompt, nor that of
the inline prompts (``system_prompt`` given inline, ``custom_agent_prompt``, ``reminder``:
only whether the system prompt is given inline or by a path is in the key, as it decides
whether a system message is taken): the fixed parts (prompts, reserved tokens, project
files, reminder) are built again from them before the budget cut, their memo keyed by
what they read (the prompts by the texts, the project messages by whether the texts
overflow their share). It also needs a run that went all the way through the budget cut without a
branch or summary problem, unique ids and no image-cap note. Anything else takes the full
pipeline and the state is rebuilt from that run.

Invariant: the state keeps no offsets. A reused message may have moved (anchored ranges),
so it keeps the live objects (``LlmMessage.source``, ``Image.range``) and every range in a
result is read from them, or computed, during the call that returns it.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from assembly.assemble import (
    _FORMATTING_MODELS,
    SEGMENTS,
    AssembleOptions,
    Assembly,
    AssemblyError,
    CompressionPlan,
    ForgottenFile,
    LayoutEntry,
    LlmMessage,
    PromptContext,
    Segment,
    _doc_span,
    _FileMeta,
    _Fixed,
    _for_summary,
    _ListingFit,
    _n_images,
    _newest_positions,
    _Pipeline,
    _replay_cost,
    _summarization_request_of,
    _with_cost,
    fit_listing,
    is_compression_candidate,
    mark_cache_prefix,
    stored_tokens,
    texts,
)
from assembly.model import (
    Conversation,
    FileAttachment,
    Message,
    PromptRef,
    PromptTemplate,
    TextBlock,
)
from assembly.settings import Settings
from assembly.text import TextRange
from assembly.tokens import Tokenizer

# Ids the pipeline gives the messages it creates; a history id among them would make the
# id-keyed bookkeeping of the full run differ from the positional one here.
_PIPELINE_IDS = frozenset(
    {
        "$system",
        "$custom_agent",
        "$project_files",
        "$project_file_list",
        "$forgotten_files",
        "$reminder",
        "$images_dropped",
        "$additional_context",
    }
)
# Patching a changed message costs about what a full run spends on two or three: beyond
# a third of the messages (and at least this many) the whole pipeline runs instead.
MIN_PATCHABLE = 64


class AssemblyCache:
    """The pipeline state of one document, kept by the caller between ``assemble`` calls.

    Pass the same cache for successive versions of the same document only; a cache is not
    shared between threads. It is rebuilt by itself when the inputs change.
    """

    __slots__ = ("_last_run", "_state", "fast_runs", "full_runs")

    def __init__(self) -> None:
        self._state: _State | None = None
        # The last full run, made into a state only when a next call comes (a one-off
        # run, such as the command line's, never pays for it).
        self._last_run: tuple[_Pipeline, tuple[Any, ...]] | None = None
        self.full_runs = 0  # calls answered by the whole pipeline
        self.fast_runs = 0  # calls answered incrementally

    def assemble(
        self, conv: Conversation, settings: Settings, tokenizer: Tokenizer, opts: AssembleOptions
    ) -> Assembly:
        """Return ``assemble(conv, settings, tokenizer, opts)``, reusing this cache."""
        key = _context_key(conv, settings, opts)
        state, self._state = self._state, None
        if self._last_run is not None:
            pipe, last_key = self._last_run
            self._last_run = None
            if last_key == key and pipe.tok is tokenizer:
                state = _build_state(pipe, key, tokenizer)
        if state is not None and state.tokenizer is tokenizer and state.key == key:
            res = _assemble_fast(state, conv, settings, tokenizer, opts)
            if res is not None:
                self._state = state
                self.fast_runs += 1
                return res
        pipe = _Pipeline(conv, settings, tokenizer, opts)
        res = pipe.run()
        self._last_run = (pipe, key)
        self.full_runs += 1
        return res


# ------------------------------------------------------------------------------ state


@dataclass(slots=True)
class _Memo:
    """Results of the fixed parts that depend on the context key only (or on little more)."""

    # By ``cite``: (the system message taken as the prompt, the inline prompts, the result).
    prompts: dict[bool, tuple[Message | None, tuple[Any, ...], Any]] = field(default_factory=dict)
    template: tuple[str, PromptTemplate] | None = None  # the base prompt's text, parsed
    project: _Pipeline._Project | None = None
    project_msgs: dict[bool, tuple[list[LlmMessage], bool]] = field(
        default_factory=dict
    )  # overflow
    tool_tokens: int | None = None
    orphans: tuple[int, list[int]] | None = None  # (cut, orphaned positions)
    forgotten: tuple[int, list[_FileMeta], LlmMessage | None] | None = None  # by cut


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
        p = filled.find(0, a, b)
        while p != -1:
            items[p] = make(p)
            filled[p] = 1
            p = filled.find(0, p + 1, b)


@dataclass(slots=True)
class _State:
    key: tuple[Any, ...]
    tokenizer: Tokenizer
    messages: tuple[Message, ...]  # the conversation's messages at the last call
    project_files: tuple[FileAttachment, ...]  # and its project files
    memo: _Memo
    # The structure (fixed while the state lives).
    chain_ids: tuple[str, ...]
    system_index: int | None  # the message taken as the system prompt
    summary_index: int | None  # the summary node applied
    where: dict[int, tuple[int, int, int]]  # message index -> (branch pos, history start, end)
    last_user_doc: int
    last_user_index: int  # the last user message's index in the conversation, -1 when none
    last_user_pos: int
    last_idx: int  # the last history position of kind "user"
    call_names: dict[str, str]
    metadata: dict[str, _FileMeta]
    # File id -> the first history position carrying it: the file metadata the run keeps
    # (``_convert_history``'s first one) comes from there; empty without read_file.
    meta_owner: dict[str, int]
    marker: int | None
    ids: list[str]
    kinds: list[str]
    fids: list[str | None]
    history_fids: set[str]
    tool_positions: list[int]
    call_pos: dict[int, int]  # tool position -> latest earlier assistant with its call, or -1
    image_positions: list[int]  # user positions with images (their replay cost differs)
    # Per position, patched after an edit.
    hist: list[LlmMessage]
    tokens: list[int]
    stored: list[int]  # what compression counts (``stored_tokens``)
    cost: list[int]
    prefix: list[int]  # prefix sums of ``cost``
    cand: list[bool]  # a compression candidate
    tokens_by_id: dict[str, int]
    entries: _Lazy  # LayoutEntry of the position in the "history" segment
    provider: _Lazy  # the provider message
    for_summary: _Lazy  # its summarization-request message, or None
    cand_pos: list[int] | None = None  # positions of the candidates (None: to recompute)
    cand_users: list[int] = field(default_factory=list)  # candidate indexes of user messages


def _context_key(conv: Conversation, settings: Settings, opts: AssembleOptions) -> tuple[Any, ...]:
    """Everything besides the messages and the inline prompts' texts that the pipeline
    reads, compared by value (the texts are read again on every call).

    Ranges are left out where they reach only errors, which the fast path never reports.
    """
    tools = None if conv.tools is None else tuple((t.name, t.schema) for t in conv.tools)
    return (
        settings,
        _system_source(conv.system_prompt),
        tools,
        conv.user_info,
        _block_key(conv.additional_context),
        tuple(_project_file_key(f) for f in conv.project_files),
        opts.today,
        # A template is a pure function of its text (``parse_prompt``).
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
    # Not the range: project images (which carry it) are handled in ``_assemble_fast``.
    return (f.file_id, f.filename, f.content, f.kind, f.token_count, f.approx_char_count)


def _signature(m: Message) -> tuple[Any, ...]:
    """What a message decides beyond its own converted messages and their counts.

    Not the sizes of its files (nor of an injected file message's text): they reach only
    the file metadata, which ``_assemble_fast`` reads again from the converted message.
    """
    return (
        m.id,
        m.role,
        m.parent,
        m.summarizes_through,
        m.file_id,
        m.filename,
        tuple((c.id, c.name) for c in m.tool_calls),
        m.tool_call_id,
        len(m.images),
        tuple((f.file_id, f.filename, f.kind, f.processing) for f in m.files),
    )


def _build_state(pipe: _Pipeline, key: tuple[Any, ...], tokenizer: Tokenizer) -> _State | None:
    """The state after a full run, or None when the fast path cannot follow it."""
    tr = pipe.trace
    if tr is None or tr.structure_errors or not tr.construct_ok:
        return None
    history = tr.history
    n = len(history)
    ids = [h.id for h in history]
    id_set = set(ids)
    if len(id_set) != n or not _PIPELINE_IDS.isdisjoint(id_set):
        return None
    if tr.system_msg is not None and (
        tr.system_msg.id in _PIPELINE_IDS or tr.system_msg.id in id_set
    ):
        return None
    cap = pipe._image_cap()
    if cap is not None and _n_images(history) > cap:
        return None
    if pipe.s.last_n_user_messages is not None:
        return None  # the last-N filter: the whole pipeline (``_Pipeline._construct``)
    conv = pipe.conv
    messages = conv.message_data
    branch_pos = {m.index: i for i, m in enumerate(tr.cut_chain)}
    where: dict[int, tuple[int, int, int]] = {}
    prev = -1
    for p, h in enumerate(history):
        src = h.source
        found = None if src is None else conv.index_of(src)
        if found is None or messages[found] is not src:
            return None
        k = found
        if k == prev:
            pos, a, _ = where[k]
            where[k] = (pos, a, p + 1)
            continue
        if k in where:
            return None
        where[k] = (branch_pos.get(k, -1), p, p + 1)
        prev = k
    kinds = [h.kind for h in history]
    fids = [h.file_id for h in history]
    marker = pipe._marker_cost(history)
    cost = [_replay_cost(h, marker) for h in history]
    tokens = [h.tokens for h in history]
    tool_positions: list[int] = []
    call_pos: dict[int, int] = {}
    seen: dict[str, int] = {}
    for p, h in enumerate(history):
        if h.kind == "assistant":
            for c in h.tool_calls:
                seen[c.id] = p
        elif h.kind == "tool":
            tool_positions.append(p)
            call_pos[p] = seen.get(h.tool_call_id, -1) if h.tool_call_id else -1
    last_idx = max(p for p, k in enumerate(kinds) if k == "user")
    summary = tr.summary
    return _State(
        key=key,
        tokenizer=tokenizer,
        messages=messages,
        project_files=pipe.conv.project_files,
        memo=_Memo(),
        chain_ids=tuple(m.id for m in tr.chain),
        system_index=tr.system_msg.index if tr.system_msg is not None else None,
        summary_index=summary.index if summary is not None else None,
        where=where,
        last_user_doc=tr.last_user_doc,
        last_user_index=tr.cut_chain[tr.last_user_doc].index if tr.last_user_doc >= 0 else -1,
        last_user_pos=tr.last_user_pos,
        last_idx=last_idx,
        call_names=tr.call_names,
        metadata=tr.metadata,
        marker=marker,
        ids=ids,
        kinds=kinds,
        fids=fids,
        meta_owner=_meta_owners(fids) if pipe.has_file_reader else {},
        history_fids={f for f in fids if f},
        tool_positions=tool_positions,
        call_pos=call_pos,
        image_positions=[
            p for p, h in enumerate(history) if marker is not None and h.kind == "user" and h.images
        ],
        hist=list(history),
        tokens=tokens,
        stored=[stored_tokens(h) for h in history],
        cost=cost,
        prefix=list(itertools.accumulate(cost, initial=0)),
        cand=[_is_candidate(h, summary) for h in history],
        tokens_by_id=dict(zip(ids, tokens, strict=True)),
        entries=_Lazy.empty(n),
        provider=_Lazy.empty(n),
        for_summary=_Lazy.empty(n),
    )


def _meta_owners(fids: list[str | None]) -> dict[str, int]:
    """The first position of each file id: the injected file messages (and the injected
    file message itself) carry their file's id, in the order the history is converted."""
    owners: dict[str, int] = {}
    for p, fid in enumerate(fids):
        if fid is not None:
            owners.setdefault(fid, p)
    return owners


def _is_candidate(h: LlmMessage, summary: Message | None) -> bool:
    """Whether the compression plan considers the message (``_compression_plan``)."""
    return is_compression_candidate(h, summary)


# ------------------------------------------------------------------------------ fast path


class _MemoPipeline(_Pipeline):
    """The pipeline's own steps, with the results that do not depend on the edit kept."""

    def __init__(
        self,
        conv: Conversation,
        settings: Settings,
        tokenizer: Tokenizer,
        opts: AssembleOptions,
        memo: _Memo,
    ) -> None:
        super().__init__(conv, settings, tokenizer, opts)
        self.memo = memo

    def _prompts(
        self, system_msg: Message | None, ctx: PromptContext
    ) -> tuple[LlmMessage | None, LlmMessage | None, str | None, str]:
        # Everything else the prompts read is in the context key. (A hit leaves
        # ``system_range`` unset: it reaches only the budget-overrun error, which the fast
        # path never reports.)
        inline = (_block_key(self.conv.system_prompt), _block_key(self.conv.custom_agent_prompt))
        hit = self.memo.prompts.get(ctx.cite)
        stored = system_msg.green if system_msg is not None else None
        if hit is not None and hit[0] is stored and hit[1] == inline:
            return hit[2]  # type: ignore[no-any-return]
        res = super()._prompts(system_msg, ctx)
        self.memo.prompts[ctx.cite] = (stored, inline, res)
        return res

    def _parse_prompt(self, text: str) -> PromptTemplate:
        # Typing in another prompt does not parse the base prompt again.
        hit = self.memo.template
        if hit is None or hit[0] != text:
            hit = self.memo.template = (text, super()._parse_prompt(text))
        return hit[1]

    def _project_files_prepare(self) -> _Pipeline._Project:
        if self.memo.project is None:
            self.memo.project = super()._project_files_prepare()
        return self.memo.project

    def _project_messages_of(
        self, project: _Pipeline._Project, overflow: bool
    ) -> tuple[list[LlmMessage], bool]:
        # Typing in a prompt moves ``reserved``, which decides only ``overflow``.
        hit = self.memo.project_msgs.get(overflow)
        if hit is None:
            hit = self.memo.project_msgs[overflow] = super()._project_messages_of(project, overflow)
        return hit

    def _tool_definition_tokens(self) -> int:
        if self.memo.tool_tokens is None:
            self.memo.tool_tokens = super()._tool_definition_tokens()
        return self.memo.tool_tokens


def _assemble_fast(
    st: _State,
    conv: Conversation,
    settings: Settings,
    tokenizer: Tokenizer,
    opts: AssembleOptions,
) -> Assembly | None:
    """The assembly from the state and the changed messages, or None (a full run is needed).

    The state is updated in place; after None it must be dropped.
    """
    new, old = conv.message_data, st.messages
    if len(new) != len(old):
        return None
    changed: list[int] = []
    if new is not old:
        changed = list(itertools.compress(itertools.count(), map(operator.is_not, old, new)))
    if len(changed) > max(MIN_PATCHABLE, len(new) // 3):
        return None
    for k in changed:
        if _signature(new[k]) != _signature(old[k]):
            return None
    if conv.project_files is not st.project_files:
        # Project images ride on the last user message with their ranges: convert it
        # again so that it holds the current objects.
        if st.last_user_doc >= 0 and any(f.kind == "image" for f in conv.project_files):
            if st.last_user_index not in changed:
                changed.append(st.last_user_index)
        st.project_files = conv.project_files
    pipe = _MemoPipeline(conv, settings, tokenizer, opts, st.memo)
    views = conv.messages
    summary = views[st.summary_index] if st.summary_index is not None else None
    for k in changed:
        loc = st.where.get(k)
        if loc is None:
            continue  # not in the history: the system prompt (read below) or off the branch
        branch_pos, a, b = loc
        out: list[LlmMessage] = []
        meta: dict[str, _FileMeta] = {}
        if k == st.summary_index:
            out.append(pipe._summary_message(views[k]))
        else:
            pipe._convert_message(views[k], branch_pos, st.last_user_doc, st.call_names, meta, out)
        assert len(out) == b - a, (new[k].id, len(out), b - a)
        for p, h in enumerate(out, start=a):
            _set_position(st, p, h, summary)
        _update_metadata(st, meta, a, b)
    st.messages = new
    if changed:
        st.prefix = list(itertools.accumulate(st.cost, initial=0))

    system_msg = views[st.system_index] if st.system_index is not None else None
    fixed = pipe._fixed_parts(system_msg, st.hist, st.last_user_pos)
    cut = _budget_cut(st, pipe, fixed)
    if cut is None:
        return None
    return _result(st, pipe, fixed, cut, summary)


def _update_metadata(st: _State, meta: dict[str, _FileMeta], a: int, b: int) -> None:
    """Take the file metadata of the message converted again at positions ``[a, b)``
    where the run keeps its entry (a file's size is typed in): the forgotten-files
    listing is then made again."""
    for fid, fm in meta.items():
        p = st.meta_owner.get(fid)
        if p is not None and a <= p < b and st.metadata[fid] != fm:
            st.metadata[fid] = fm  # same key: the order of the entries is kept
            st.memo.forgotten = None


def _set_position(st: _State, p: int, h: LlmMessage, summary: Message | None) -> None:
    st.hist[p] = h
    st.tokens[p] = h.tokens
    st.stored[p] = stored_tokens(h)
    st.cost[p] = _replay_cost(h, st.marker)
    st.tokens_by_id[h.id] = h.tokens
    cand = _is_candidate(h, summary)
    if cand != st.cand[p]:
        st.cand[p] = cand
        st.cand_pos = None
    st.entries.forget(p)
    st.provider.forget(p)
    st.for_summary.forget(p)


@dataclass(slots=True)
class _Cut:
    """The budget cut: history positions ``[start, last_idx)`` are kept (``_construct``)."""

    start: int
    history_budget: int
    orphans: list[int]  # orphaned tool responses at or after ``start``, ascending
    forgotten: list[_FileMeta]
    listing: LlmMessage | None
    errors: list[AssemblyError]


def _budget_cut(st: _State, pipe: _Pipeline, fixed: _Fixed) -> _Cut | None:
    """``_Pipeline._construct`` on prefix sums; None where it would return nothing."""
    available = fixed.available - fixed.tool_tokens
    pipe.tool_tokens = fixed.tool_tokens
    fixed_msgs = [m for m in (fixed.system, fixed.custom_agent, fixed.reminder) if m is not None]
    project_tokens = sum(m.tokens for m in fixed.project_msgs)
    history_budget = available - sum(m.tokens for m in fixed_msgs) - project_tokens
    if history_budget < 0:
        return None
    prefix, last, n = st.prefix, st.last_idx, len(st.hist)
    # No image-limit note: the state exists only when the images stay under the cap.
    required = prefix[n] - prefix[last]
    # Less the responses of this turn that nothing calls (``uncalled_responses``).
    for p in st.tool_positions[bisect.bisect_right(st.tool_positions, last) :]:
        if st.call_pos[p] == -1:
            required -= prefix[p + 1] - prefix[p]
    if required > history_budget:
        return None
    remaining = history_budget - required
    # Newest first, contiguous: the longest run before the last user message that fits.
    # Costs are never negative, so the prefix sums are sorted.
    start = bisect.bisect_left(prefix, prefix[last] - remaining, 0, last)

    memo = st.memo
    if memo.forgotten is None or memo.forgotten[0] != start:
        memo.forgotten = (start, *_forgotten_at(st, pipe, start))
    forgotten = list(memo.forgotten[1])
    listing = memo.forgotten[2]
    errors: list[AssemblyError] = []
    if forgotten:
        assert listing is not None
        metadata, fids = st.metadata, st.fids
        k0 = start
        start, forgotten, listing = fit_listing(
            _ListingFit(
                k0=k0,
                n=last,
                remaining=remaining,
                prefix=prefix,
                file_at=lambda q: fids[q] if fids[q] in metadata else None,
                metadata=metadata,
                forgotten=forgotten,
                newest=lambda: _newest_positions(fids[:k0]),
                listing=pipe._listing_msg,
                first_listing=listing,
            )
        )
        if listing is None:
            errors.append(
                AssemblyError(
                    "budget-overrun",
                    "the forgotten-files listing does not fit in the budget and is left out",
                    _doc_span(pipe.conv, st.hist[:start])
                    or _doc_span(pipe.conv, st.hist[:1])
                    or TextRange(0, 0),
                    severity="warning",
                )
            )
    if memo.orphans is None or memo.orphans[0] != start:
        memo.orphans = (start, _orphans_at(st, start))
    return _Cut(start, history_budget, memo.orphans[1], forgotten, listing, errors)


def _forgotten_at(
    st: _State, pipe: _Pipeline, start: int
) -> tuple[list[_FileMeta], LlmMessage | None]:
    """The files forgotten when the history before ``start`` is dropped, and their listing
    (before it is charged)."""
    metadata = st.metadata
    dropped_fids = list(filter(None, st.fids[:start]))
    for fid in metadata:
        if fid not in st.history_fids and fid not in dropped_fids:
            dropped_fids.append(fid)
    forgotten: list[_FileMeta] = []
    if dropped_fids and metadata:
        seen: set[str] = set()
        for fid in dropped_fids:
            if fid in metadata and fid not in seen:
                seen.add(fid)
                forgotten.append(metadata[fid])
    return forgotten, pipe._listing_msg(forgotten) if forgotten else None


def _orphans_at(st: _State, start: int) -> list[int]:
    """Tool responses at or after ``start`` whose call is not in ``[start, position)``."""
    tools = st.tool_positions
    call_pos = st.call_pos
    first = bisect.bisect_left(tools, start)
    return [p for p in tools[first:] if call_pos[p] < start]


def _without(items: list[Any], a: int, b: int, holes: list[int]) -> list[Any]:
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


def _result(
    st: _State, pipe: _Pipeline, fixed: _Fixed, cut: _Cut, summary: Message | None
) -> Assembly:
    """The ``Assembly`` of ``_Pipeline.run`` from the cut and the per-position lists."""
    s = pipe.s
    hist, cost, prefix, ids = st.hist, st.cost, st.prefix, st.ids
    start, last, n = cut.start, st.last_idx, len(hist)
    orphans = cut.orphans
    kept_orphans = [p for p in orphans if p < last]
    after_orphans = [p for p in orphans if p > last]

    def entry(p: int) -> LayoutEntry:
        h = hist[p]
        return LayoutEntry(_with_cost(h, {h.id: cost[p]}), "history", cost[p], True)

    def provider(p: int) -> dict[str, Any]:
        return pipe._provider_message(hist[p], None)

    st.entries.fill(start, last, entry)
    st.provider.fill(start, n, provider)

    def turn_entry(p: int, segment: str) -> LayoutEntry:
        h = hist[p]
        return LayoutEntry(_with_cost(h, {h.id: cost[p]}), segment, cost[p], False)

    head: list[LayoutEntry] = []
    if fixed.system is not None:
        head.append(LayoutEntry(fixed.system, "system", fixed.system.tokens, True))
    kept_entries = _without(st.entries.items, start, last, kept_orphans)
    middle: list[LayoutEntry] = []
    if fixed.custom_agent is not None:
        m = fixed.custom_agent
        middle.append(LayoutEntry(m, "custom_agent", m.tokens, False))
    middle.extend(LayoutEntry(m, "project_files", m.tokens, False) for m in fixed.project_msgs)
    if cut.listing is not None:
        middle.append(LayoutEntry(cut.listing, "forgotten_files", cut.listing.tokens, False))
    after_positions = _without(
        range(last + 1, n), 0, n - last - 1, [p - last - 1 for p in after_orphans]
    )
    turn = [turn_entry(last, "last_user")]
    turn.extend(turn_entry(p, "this_turn") for p in after_positions)
    tail: list[LayoutEntry] = []
    if fixed.reminder is not None:
        tail.append(LayoutEntry(fixed.reminder, "reminder", fixed.reminder.tokens, False))
    layout = (*head, *kept_entries, *middle, *turn, *tail)

    providers: list[dict[str, Any]] = [pipe._provider_message(e.message, None) for e in head]
    providers.extend(_without(st.provider.items, start, last, kept_orphans))
    providers.extend(pipe._provider_message(e.message, None) for e in middle)
    providers.append(st.provider.items[last])
    providers.extend(st.provider.items[p] for p in after_positions)
    providers.extend(pipe._provider_message(e.message, None) for e in tail)
    if _FORMATTING_MODELS.search(s.model.lower()):
        i = next((i for i, d in enumerate(providers) if d["role"] == "system"), None)
        if i is not None:
            # A copy: the cached message is shared with earlier results.
            d = providers[i]
            providers[i] = {**d, "content": texts.FORMATTING_REENABLED + d["content"]}

    cache_prefix = mark_cache_prefix(s, len(head) + len(kept_entries), providers)
    kept_tokens = prefix[last] - prefix[start] - sum(cost[p] for p in kept_orphans)
    sums = {
        "system": sum(e.tokens for e in head),
        "history": kept_tokens,
        "custom_agent": sum(e.tokens for e in middle if e.segment == "custom_agent"),
        "project_files": sum(e.tokens for e in middle if e.segment == "project_files"),
        "forgotten_files": sum(e.tokens for e in middle if e.segment == "forgotten_files"),
        "last_user": turn[0].tokens,
        "this_turn": sum(e.tokens for e in turn[1:]),
        "reminder": sum(e.tokens for e in tail),
    }
    seg_ids = {
        "system": tuple(e.id for e in head),
        "history": tuple(_without(ids, start, last, kept_orphans)),
        "custom_agent": tuple(e.id for e in middle if e.segment == "custom_agent"),
        "project_files": tuple(e.id for e in middle if e.segment == "project_files"),
        "forgotten_files": tuple(e.id for e in middle if e.segment == "forgotten_files"),
        "last_user": (turn[0].id,),
        "this_turn": tuple(e.id for e in turn[1:]),
        "reminder": tuple(e.id for e in tail),
    }
    segments = tuple(Segment(name, sums[name], seg_ids[name]) for name in SEGMENTS)
    budget = fixed.budget(s, cut.history_budget, sum(sums.values()))
    tokens_by_id = st.tokens_by_id.copy()
    orphan_set = set(orphans)
    for p in st.image_positions:
        if p >= start and p not in orphan_set:
            tokens_by_id[ids[p]] = cost[p]
    for e in (*head, *middle, *tail):
        tokens_by_id[e.id] = e.tokens
    return Assembly(
        settings=s,
        encoding=pipe.tok.encoding,
        budget=budget,
        layout=layout,
        segments=segments,
        provider_messages=tuple(providers),
        history=tuple(hist),
        dropped=tuple(ids[:start]),
        orphans_dropped=tuple(ids[p] for p in orphans),
        forgotten_files=tuple(
            ForgottenFile(f.file_id, f.filename, f.approx_char_count) for f in cut.forgotten
        )
        if cut.listing is not None
        else (),
        compression=_compression(st, pipe, fixed.reserved, summary),
        cache_prefix_length=cache_prefix,
        errors=tuple(cut.errors),
        system_text=fixed.system_text,
        reserved_tokens=fixed.reserved,
        chain=st.chain_ids,
        summary_id=summary.id if summary else None,
        images_dropped=0,
        tokens_by_id=tokens_by_id,
    )


def _compression(
    st: _State, pipe: _Pipeline, reserved: int, summary: Message | None
) -> CompressionPlan:
    """``_Pipeline._compression_plan`` on the candidates' prefix sums."""
    s = pipe.s
    total = sum(st.stored)
    threshold = int((s.max_input_tokens - reserved) * s.compression_trigger_ratio)
    triggered = total > threshold
    for_recent = int(total * s.recent_messages_ratio)
    if st.cand_pos is None:
        st.cand_pos = list(itertools.compress(itertools.count(), st.cand))
        kinds = st.kinds
        st.cand_users = [i for i, p in enumerate(st.cand_pos) if kinds[p] == "user"]
    cand_pos, users = st.cand_pos, st.cand_users
    k = len(cand_pos)
    cand_ids = list(itertools.compress(st.ids, st.cand))
    if k:
        sums = list(itertools.accumulate(itertools.compress(st.stored, st.cand), initial=0))
        # The longest suffix within the share (at least one message), from a user message.
        first = min(bisect.bisect_left(sums, sums[k] - for_recent, 0, k), k - 1)
        u = bisect.bisect_left(users, first)
        split = users[u] if u < len(users) else (users[-1] if users else 0)
    else:
        split = 0
    request: tuple[dict[str, Any], ...] = ()
    if triggered and split:
        hist = st.hist
        st.for_summary.fill(0, len(hist), lambda p: _summary_entry(hist[p]))
        per_candidate = list(itertools.compress(st.for_summary.items, st.cand))
        request = _summarization_request_of(
            filter(None, per_candidate[:split]), filter(None, per_candidate[split:]), summary
        )
    return CompressionPlan(
        triggered=triggered,
        threshold=threshold,
        history_tokens=total,
        reserved_tokens=reserved,
        tokens_for_recent=for_recent,
        summarize=tuple(cand_ids[:split]) if triggered else (),
        keep=tuple(cand_ids[split:]) if triggered else tuple(cand_ids),
        progressive=summary is not None,
        request=request,
    )


def _summary_entry(h: LlmMessage) -> dict[str, Any] | None:
    res = _for_summary([h])
    return res[0] if res else None
