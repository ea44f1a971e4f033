"""Budget and history rules: what the token budget leaves out of the assembled context.

The pipeline has already decided what is sent; these rules turn its decisions into
findings at the place in the document they concern: one finding over the contiguous span
of older messages the budget cut off, and one over the span the post-turn compression
would summarize. They read ``ctx.assembly`` only and walk each list once, so a
10,000-message log costs a linear pass and never floods the editor.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass

from assembly.assemble import Assembly, LlmMessage, stored_tokens
from assembly.diagnostics.core import (
    Diagnostic,
    MessageMemo,
    Related,
    RuleContext,
    Severity,
    message_memo,
)
from assembly.model import Conversation, Message, Role
from assembly.text import TextRange

MAX_RELATED_FILES = 5
SENT_SEGMENTS = frozenset({"history", "last_user", "this_turn"})
_ID = operator.attrgetter("id")
_TOKENS = operator.attrgetter("tokens")
_FILE_ID = operator.attrgetter("file_id")
_SOURCE = operator.attrgetter("source")


def history_truncated(ctx: RuleContext) -> Iterator[Diagnostic]:
    """Older messages will not be sent: the history budget is full.

    ## What it does
    Reports the messages the budget cuts off, as one finding over the whole dropped span
    (the cut is contiguous: the pipeline fills the history newest-first and stops at the
    first message that does not fit), with how many messages and tokens are left out and
    the budget they did not fit in. Uploaded files injected in the span are named: they
    go with their messages and reach the model only as entries of the forgotten-files
    listing (when a `read_file` tool is offered). The span is tagged *unnecessary*, so
    editors fade it; the related location is the oldest message still sent.

    ## Why is this bad?
    It is not a mistake (truncation is what the pipeline is for), but the model does not
    see what was said there: an answer that relies on it will be wrong. Move what must
    survive into the system prompt or a project file, or let compression summarize it.

    ## Example
    ```yaml
    settings: {max_input_tokens: 4096}
    messages:   # 300 messages of analysis
      - {id: m1, role: user, content: "…"}
    ```
    `312 older messages (48,210 tokens) will not be sent: the history budget of 119,248
    tokens is full`
    """
    a = ctx.assembly
    if a is None or not a.dropped or not a.ok:
        return
    memo = message_memo(ctx)
    by_id = _history_by_id(a, memo)
    dropped = [m for m in map(by_id.get, a.dropped) if m is not None]
    conv = ctx.conversation
    first_kept = _first_sent(conv, a, a.dropped)
    # The places depend on the messages' shapes, not on their contents: typing in a
    # message keeps them (``rebased`` swaps in the message re-read after the edit).
    key = (
        memo.shapes,
        a.dropped,
        a.summary_id,
        history_ids(a, memo),
        tuple(map(_FILE_ID, dropped)),
        first_kept.index if first_kept is not None else None,
    )
    cut = memo.derived("history-truncated", key, lambda: _Cut.of(conv, a, dropped, first_kept))
    cut = cut.rebased(ctx)
    span = cut.span()
    if span is None:
        return
    summary = cut.summary
    tokens = sum(map(_TOKENS, dropped))
    n = cut.n
    forgotten = {f.file_id for f in a.forgotten_files}
    uploads = [(fid, name, _own(src, k)) for fid, name, src, k in cut.uploads]
    names = ", ".join(f"`{name}`" for _, name, _ in uploads[:MAX_RELATED_FILES])
    if len(uploads) > MAX_RELATED_FILES:
        names += f" and {len(uploads) - MAX_RELATED_FILES:,} more"
    the_uploads = f"the upload{'' if len(uploads) == 1 else 's'} {names}"
    why = f"the history budget of {a.budget.history_budget:,} tokens is full"
    last_n = a.settings.last_n_user_messages
    if last_n is not None:
        why = (
            f"`last_n_user_messages: {last_n}` keeps the history from the last {last_n:,} "
            f"user-type messages on, within a history budget of {a.budget.history_budget:,} "
            "tokens"
        )
    if summary is not None:
        n -= 1  # counted apart: it is not written where the history starts
    subjects = [f"{n:,} older {'message' if n == 1 else 'messages'}"] if n else []
    if summary is not None:
        subjects.append(f"the summary `{summary.id}`")
    if subjects:
        message = f"{' and '.join(subjects)} ({tokens:,} tokens) will not be sent: {why}"
        if uploads:
            verb = "goes" if len(uploads) == 1 else "go"
            them = "it" if n + (summary is not None) == 1 else "them"
            message += f"; {the_uploads} {verb} with {them}"
    else:  # only uploads injected before a message that is still sent
        message = f"{the_uploads} ({tokens:,} tokens) will not be sent: {why}"
    listed = sum(1 for fid, _, _ in uploads if fid in forgotten)
    if uploads and listed == len(uploads):
        message += " (listed for `read_file` among the forgotten files)"
    elif listed:
        message += f" ({listed:,} listed for `read_file` among the forgotten files)"
    related: list[Related] = []
    if first_kept is not None:
        related.append(Related(first_kept.range, f"the oldest message sent: `{first_kept.id}`"))
    if summary is not None and summary.range != span:
        related.append(Related(summary.range, f"the summary `{summary.id}` is not sent either"))
    for fid, name, rng in uploads[:MAX_RELATED_FILES]:
        if rng == span:
            continue
        state = "listed as a forgotten file" if fid in forgotten else "not offered again"
        related.append(Related(rng, f"`{name}` was injected here; {state}"))
    yield Diagnostic(
        "history-truncated",
        Severity.INFO,
        message,
        span,
        related=tuple(related),
        unnecessary=True,
    )


def compression_due(ctx: RuleContext) -> Iterator[Diagnostic]:
    """The history passes the compression trigger: older messages would be summarized.

    ## What it does
    Reports when the history's tokens pass Onyx's compression threshold
    (⌊(max_input_tokens − reserved) × compression_trigger_ratio⌋), with both figures and
    what the post-turn compression would summarize: the finding spans those messages (the
    cut moved back to a user message); the related location is the first message kept
    verbatim.

    ## Why is this bad?
    After this turn Onyx replaces the older messages by a summary written by the model:
    details in them (ids, figures, exact wording) survive only as far as the summary keeps
    them. Conversation fixtures usually mean to test one side of that line.

    ## Example
    ```yaml
    settings: {max_input_tokens: 8000}
    messages:   # 7,000 tokens of history
      - {id: m1, role: user, content: "…"}
    ```
    `history of 7,000 tokens passes the compression trigger of 5,250: 14 messages (m1 … m14)
    would be summarized, 3 kept`
    """
    a = ctx.assembly
    if a is None or not a.compression.triggered or not a.ok:
        return
    plan = a.compression
    memo = message_memo(ctx)
    by_id = _history_by_id(a, memo)
    older = [m for m in map(by_id.get, plan.summarize) if m is not None]
    s = a.settings
    head = (
        f"history of {plan.history_tokens:,} tokens passes the compression trigger of "
        f"{plan.threshold:,} ({s.compression_trigger_ratio * 100:g}% of {s.max_input_tokens:,}"
        f" − {plan.reserved_tokens:,} reserved)"
    )
    key = (memo.shapes, plan.summarize, plan.keep, history_ids(a, memo))
    cut = memo.derived(
        "compression-due", key, lambda: _Compression.of(ctx.conversation, older, plan.keep, by_id)
    )
    cut = cut.rebased(ctx)
    span = cut.older.span()
    related: list[Related] = []
    first_recent = cut.first_recent
    if span is None:
        last = first_recent or _last_message(ctx)
        if last is None:
            return
        yield Diagnostic(
            "compression-due",
            Severity.INFO,
            f"{head}, but nothing before the last user message can be summarized",
            last.range,
        )
        return
    n = cut.older.n
    tokens = sum(map(stored_tokens, older))  # as the compression total counts them
    ids = f"`{older[0].id}`" if n == 1 else f"`{older[0].id}` … `{older[-1].id}`"
    message = (
        f"{head}: {n:,} {'message' if n == 1 else 'messages'} ({ids}, {tokens:,} tokens) "
        f"would be summarized, {cut.n_recent:,} kept"
    )
    if plan.progressive:
        message += " (building on the existing summary)"
    if first_recent is not None:
        related.append(Related(first_recent.range, f"kept verbatim from here: `{first_recent.id}`"))
    yield Diagnostic("compression-due", Severity.INFO, message, span, related=tuple(related))


# ------------------------------------------------------------------------------ helpers


_Place = tuple[Message, int | None]  # a message, or the entry of its ``files`` (index)


@dataclass(frozen=True, slots=True)
class _Cut:
    """Where a list of history messages is written, as message objects (they may move).

    ``first``/``last`` are the places that start and end the document span of the
    messages (the summary node, placed anywhere, apart); ``n`` counts the document
    messages among them and ``uploads`` the files they inject (file id, name, place).
    """

    first: _Place | None
    last: _Place | None
    summary: Message | None
    n: int
    uploads: tuple[tuple[str, str, Message, int | None], ...] = ()
    others: tuple[Message | None, ...] = ()  # further messages the findings point at

    @staticmethod
    def of(
        conv: Conversation | None,
        a: Assembly | None,
        msgs: Sequence[LlmMessage],
        first_kept: Message | None = None,
    ) -> _Cut:
        summary_id = a.summary_id if a is not None else None
        first, last, summary = _span_places(conv, msgs, summary_id)
        uploads = tuple(_uploads(conv, msgs)) if a is not None else ()
        return _Cut(first, last, summary, _n_messages(msgs), uploads, (first_kept,))

    def span(self) -> TextRange | None:
        if self.first is None or self.last is None:
            return self.summary.range if self.summary is not None else None
        return TextRange(_own(*self.first).start, _own(*self.last).end)

    def current(self, ctx: RuleContext) -> bool:
        """Whether every message it names is still in the document (not re-read)."""
        conv = ctx.conversation
        msgs = conv.messages if conv is not None else ()
        places = [self.summary, *self.others, *(u[2] for u in self.uploads)]
        places.extend(p[0] for p in (self.first, self.last) if p is not None)
        return all(m is None or (m.index < len(msgs) and msgs[m.index] is m) for m in places)

    def rebased(self, ctx: RuleContext) -> _Cut:
        """The same places in the document's messages, which have the shapes of those the
        cut was found in (``MessageMemo.shapes``): a message re-read after an edit inside
        it takes the place of its old object."""
        if self.current(ctx):
            return self
        conv = ctx.conversation
        assert conv is not None
        msgs = conv.messages

        def at(m: Message | None) -> Message | None:
            return msgs[m.index] if m is not None else None

        def place(p: _Place | None) -> _Place | None:
            return (msgs[p[0].index], p[1]) if p is not None else None

        return _Cut(
            place(self.first),
            place(self.last),
            at(self.summary),
            self.n,
            tuple((fid, name, msgs[src.index], k) for fid, name, src, k in self.uploads),
            tuple(map(at, self.others)),
        )


@dataclass(frozen=True, slots=True)
class _Compression:
    older: _Cut
    n_recent: int
    first_recent: Message | None

    @staticmethod
    def of(
        conv: Conversation | None,
        older: Sequence[LlmMessage],
        keep: Sequence[str],
        by_id: dict[str, LlmMessage],
    ) -> _Compression:
        recent = [m for m in map(by_id.get, keep) if m is not None]
        first_recent = next((_located(conv, m) for m in recent if m.source is not None), None)
        return _Compression(_Cut.of(conv, None, older), _n_messages(recent), first_recent)

    def rebased(self, ctx: RuleContext) -> _Compression:
        """The same places in the document's messages (``_Cut.rebased``)."""
        both = dataclasses.replace(self.older, others=(self.first_recent,))
        if both.current(ctx):
            return self
        rebased = both.rebased(ctx)
        older = dataclasses.replace(rebased, others=self.older.others)
        return _Compression(older, self.n_recent, rebased.others[0])


def _located(conv: Conversation | None, m: LlmMessage) -> Message | None:
    """The document message ``m`` comes from, seen at its place in ``conv``."""
    src = m.source
    if src is None or conv is None:
        return None
    return conv.locate(src)  # type: ignore[return-value]


def _span_places(
    conv: Conversation | None, msgs: Sequence[LlmMessage], summary_id: str | None
) -> tuple[_Place | None, _Place | None, Message | None]:
    """The places where the document span of ``msgs``' sources starts and ends, and the
    summary node among them (placed anywhere in the document, so it is kept out of the
    span).

    The messages lie in the document in the order of their indexes, each one's files
    inside it in order: the span starts at the lowest index (the message itself, else its
    first file among ``msgs``) and ends at the highest (the message, else its last file).
    A pass over the indexes at C speed, then a look at the two ends' entries.
    """
    if conv is None or not msgs:
        return None, None, None
    where = _indexes(conv, msgs)
    summary: Message | None = None
    skip = -1
    if summary_id is not None:
        data = conv.message_data
        for i in {i for i in where if i is not None}:
            src = data[i]
            if src.id == summary_id and src.role is Role.SUMMARY:
                skip = i  # one message per id: the reader reports duplicates
                summary = conv.messages[i]
    kept = [i for i in where if i is not None and i != skip]
    if not kept:
        return None, None, summary
    lo, hi = min(kept), max(kept)
    return (
        _end_place(conv, msgs, where, lo, first=True),
        _end_place(conv, msgs, where, hi, first=False),
        summary,
    )


def _end_place(
    conv: Conversation, msgs: Sequence[LlmMessage], where: list[int | None], i: int, first: bool
) -> _Place:
    """The first (else last) place of message ``i`` among ``msgs``: the message itself
    when it is among them, else its first (last) file."""
    src = conv.messages[i]
    ks = [_file_index(m, src) for m, at in zip(msgs, where, strict=True) if at == i]
    if None in ks:
        return src, None
    files = [k for k in ks if k is not None]
    return src, (min(files) if first else max(files))


def _indexes(conv: Conversation, msgs: Sequence[LlmMessage]) -> list[int | None]:
    """The index in ``conv`` of each message's source (None: none, or not in ``conv``).

    By object identity (``Conversation.index_of``): the sources are alive, so no other
    live object has their ``id``.
    """
    data = conv.message_data
    where = dict(zip(map(id, data), range(len(data)), strict=True))
    return list(map(where.get, map(id, map(_SOURCE, msgs))))


def _own(src: Message, k: int | None) -> TextRange:
    """Where a message is written: the message, or the entry ``k`` of its ``files``."""
    return src.range if k is None else src.files[k].range


def history_ids(a: Assembly, memo: MessageMemo) -> tuple[str, ...]:
    """The ids of ``a.history``, computed once per run (the rules' inputs read them too)."""
    return memo.of_run("history-ids", a, lambda: tuple(map(_ID, a.history)))


def _history_by_id(a: Assembly, memo: MessageMemo) -> dict[str, LlmMessage]:
    """``{m.id: m for m in a.history}`` (the last one wins), built at C speed."""
    ids = history_ids(a, memo)
    return memo.of_run("history-by-id", a, lambda: dict(zip(ids, a.history, strict=True)))


def _file_index(m: LlmMessage, src: Message) -> int | None:
    """The index in ``src.files`` of an injected upload (id ``<message id>/files/<i>``)."""
    _, sep, tail = m.id.rpartition("/files/")
    if sep and tail.isdigit() and int(tail) < len(src.files):
        return int(tail)
    return None


def _n_messages(msgs: Iterable[LlmMessage]) -> int:
    """Document messages among ``msgs`` (an upload injected before its message is not one)."""
    msgs = list(msgs)
    seen = {m.source.id for m in msgs if m.source is not None and "/files/" not in m.id}
    for m in msgs:  # the few injected uploads: those whose id names a file of the source
        if "/files/" in m.id and m.source is not None and _file_index(m, m.source) is None:
            seen.add(m.source.id)
    return len(seen)


def _uploads(
    conv: Conversation | None, msgs: Iterable[LlmMessage]
) -> Iterator[tuple[str, str, Message, int | None]]:
    """(file id, filename, message, index in its ``files``) of the files ``msgs`` inject."""
    for m in msgs:
        if m.file_id is None:
            continue
        src = _located(conv, m)
        if src is None:
            continue
        k = _file_index(m, src)
        if k is not None:
            f = src.files[k]
            yield f.file_id, f.filename, src, k
        else:
            yield m.file_id, src.filename or m.file_id, src, None


def _first_sent(conv: Conversation | None, a: Assembly, dropped: Collection[str]) -> Message | None:
    for e in a.layout:
        src = e.message.source
        if e.segment in SENT_SEGMENTS and src is not None and e.id not in dropped:
            return _located(conv, e.message)
    return None


def _last_message(ctx: RuleContext) -> Message | None:
    conv, a = ctx.conversation, ctx.assembly
    if conv is None or not conv.messages:
        return None
    if a is not None and a.chain:
        tip = a.chain[-1]
        return next((m for m in reversed(conv.messages) if m.id == tip), conv.messages[-1])
    return conv.messages[-1]
