"""Budget and history rules: what the token budget leaves out of the assembled context.

The pipeline has already decided what is sent; these rules turn its decisions into
findings at the place in the document they concern: one finding over the contiguous span
of older messages the budget cut off, and one over the span the post-turn compression
would summarize. Each reads a typed summary of the pipeline's decision (``Truncation``,
``Compression``: figures, and places as message indexes, no offsets) and the branch (the
messages' ranges in this version), so it runs again only when one of them differs; the
summaries walk each list once at C speed, so a 10,000-message log never floods the editor.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from assembly.assemble import Assembly, LlmMessage
from assembly.diagnostics.core import (
    Diagnostic,
    Related,
    Severity,
)
from assembly.diagnostics.engine import Source, query
from assembly.diagnostics.inputs import Branch, MessageKinds
from assembly.model import Conversation, Message
from assembly.seq import common_ends, differing, picked
from assembly.text import TextRange, plural

MAX_RELATED_FILES = 5
SENT_SEGMENTS = frozenset({"history", "last_user", "this_turn"})
_SOURCE = operator.attrgetter("source")


def history_truncated(t: Truncation, b: Branch) -> Iterator[Diagnostic]:
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
    cut = t.span
    span = cut.range(b) if cut is not None else None
    if cut is None or span is None:
        return
    summary = b.messages[cut.summary] if cut.summary is not None else None
    tokens = t.tokens
    n = cut.n
    forgotten = t.forgotten
    uploads = t.uploads  # where each is written: only the related ones are looked up
    names = ", ".join(f"`{name}`" for _, name, _, _ in uploads[:MAX_RELATED_FILES])
    if len(uploads) > MAX_RELATED_FILES:
        names += f" and {len(uploads) - MAX_RELATED_FILES:,} more"
    the_uploads = f"the upload{'' if len(uploads) == 1 else 's'} {names}"
    why = f"the history budget of {t.history_budget:,} tokens is full"
    last_n = t.last_n
    if last_n is not None:
        why = (
            f"`last_n_user_messages: {last_n}` keeps the history from the last {last_n:,} "
            f"user-type messages on, within a history budget of {t.history_budget:,} "
            "tokens"
        )
    if summary is not None:
        n -= 1  # counted apart: it is not written where the history starts
    subjects = [plural(n, "older message")] if n else []
    cost = plural(tokens, "token")
    if summary is not None:
        subjects.append(f"the summary `{summary.id}`")
    if subjects:
        message = f"{' and '.join(subjects)} ({cost}) will not be sent: {why}"
        if uploads:
            verb = "goes" if len(uploads) == 1 else "go"
            them = "it" if n + (summary is not None) == 1 else "them"
            message += f"; {the_uploads} {verb} with {them}"
    else:  # only uploads injected before a message that is still sent
        message = f"{the_uploads} ({cost}) will not be sent: {why}"
    listed = sum(1 for fid, _, _, _ in uploads if fid in forgotten)
    if uploads and listed == len(uploads):
        message += " (listed for `read_file` among the forgotten files)"
    elif listed:
        message += f" ({listed:,} listed for `read_file` among the forgotten files)"
    related: list[Related] = []
    if t.first_kept is not None:
        first_kept = b.messages[t.first_kept]
        related.append(Related(first_kept.range, f"the oldest message sent: `{first_kept.id}`"))
    if summary is not None and summary.range != span:
        related.append(Related(summary.range, f"the summary `{summary.id}` is not sent either"))
    for fid, name, i, k in uploads[:MAX_RELATED_FILES]:
        rng = _own(b, (i, k))
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


def compression_due(c: Compression, b: Branch) -> Iterator[Diagnostic]:
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
    if not c.due:
        return
    head = (
        f"history of {c.history_tokens:,} tokens passes the compression trigger of "
        f"{c.threshold:,} ({c.ratio * 100:g}% of {c.max_input_tokens:,}"
        f" − {c.reserved_tokens:,} reserved)"
    )
    span = c.older.range(b)
    related: list[Related] = []
    first_recent = b.messages[c.first_recent] if c.first_recent is not None else None
    if span is None:
        last = first_recent
        if last is None and c.last_message is not None:
            last = b.messages[c.last_message]
        if last is None:
            return
        yield Diagnostic(
            "compression-due",
            Severity.INFO,
            f"{head}, but nothing before the last user message can be summarized",
            last.range,
        )
        return
    n = c.older.n
    first_id, last_id = c.older_ids
    ids = f"`{first_id}`" if n == 1 else f"`{first_id}` … `{last_id}`"
    message = (
        f"{head}: {n:,} {'message' if n == 1 else 'messages'} ({ids}, {c.older_tokens:,} "
        f"tokens) would be summarized, {c.n_recent:,} kept"
    )
    if c.progressive:
        message += " (building on the existing summary)"
    if first_recent is not None:
        related.append(Related(first_recent.range, f"kept verbatim from here: `{first_recent.id}`"))
    yield Diagnostic("compression-due", Severity.INFO, message, span, related=tuple(related))


# ------------------------------------------------------------------------------ inputs


_Place = tuple[int, int | None]  # a message's index, and the entry of its ``files`` (or None)


@dataclass(frozen=True, slots=True)
class Span:
    """Where a list of history messages is written, without offsets: the places that
    start and end its document span (the summary node, placed anywhere, apart: its
    index), and how many document messages it holds."""

    first: _Place | None
    last: _Place | None
    summary: int | None
    n: int

    @property
    def placed(self) -> bool:
        """Whether it has a place (``range`` is not None)."""
        return (self.first is not None and self.last is not None) or self.summary is not None

    def range(self, b: Branch) -> TextRange | None:
        """The span in the version ``b`` is seen in (None: no place)."""
        if self.first is None or self.last is None:
            return b.messages[self.summary].range if self.summary is not None else None
        return TextRange(_own(b, self.first).start, _own(b, self.last).end)


_NO_SPAN = Span(None, None, None, 0)


@dataclass(frozen=True, slots=True)
class Truncation:
    """What the budget cut leaves out of the history (``span`` None: nothing, or the
    pipeline did not assemble): its place, the summary it cut, its tokens, the uploads
    injected in it (file id, name, message index, entry of its ``files``), the forgotten
    files listed for ``read_file``, the oldest message sent (its index), the budget."""

    span: Span | None
    tokens: int = 0
    uploads: tuple[tuple[str, str, int, int | None], ...] = ()
    forgotten: frozenset[str] = frozenset()
    first_kept: int | None = None
    history_budget: int = 0
    last_n: int | None = None


@query
def truncation(src: Source, kinds: MessageKinds) -> Truncation:
    ctx = src.ctx
    a, conv = ctx.assembly, ctx.conversation
    if a is None or not a.dropped or not a.ok or conv is None:
        return Truncation(None)
    memo = src.cache.memo
    k = len(a.dropped)
    dropped = a.history[:k]  # the cut drops the oldest: ``Assembly.dropped``
    places = _history_places(src, a, conv)
    first_kept = _first_sent(conv, a, places)
    # The places depend on where each dropped model message comes from and how it is
    # named (``_HistoryPlaces``), not on contents, ids or tool calls: typing in a
    # message, in an id or in a tool-call id keeps them.
    key = (places.stamp, len(a.history), k, a.summary_id)
    span, uploads = memo.derived(
        "history-truncated",
        key,
        lambda: (
            _span(
                conv,
                dropped,
                places.places[:k],
                places.named[:k],
                a.summary_id,
                kinds.summaries,
            ),
            tuple(_uploads(conv, dropped, places.places[:k], a.history_fids[:k])),
        ),
    )
    return Truncation(
        span,
        sum(a.history_tokens[:k]),
        uploads,
        frozenset(f.file_id for f in a.forgotten_files),
        first_kept,
        a.budget.history_budget,
        a.settings.last_n_user_messages,
    )


@dataclass(frozen=True, slots=True)
class Compression:
    """What the post-turn compression would summarize (``due`` False: nothing): the
    figures of the trigger, the span of the older messages (their first and last history
    ids, their tokens), how many messages are kept and the first of them (its index),
    and the branch's last message (its index), where the finding goes when nothing can be
    summarized."""

    due: bool
    history_tokens: int = 0
    threshold: int = 0
    ratio: float = 0.0
    max_input_tokens: int = 0
    reserved_tokens: int = 0
    progressive: bool = False
    older: Span = _NO_SPAN
    older_ids: tuple[str, str] = ("", "")
    older_tokens: int = 0
    n_recent: int = 0
    first_recent: int | None = None
    last_message: int | None = None


@query
def compression(src: Source) -> Compression:
    ctx = src.ctx
    a, conv = ctx.assembly, ctx.conversation
    if a is None or not a.compression.triggered or not a.ok:
        return Compression(False)
    plan = a.compression
    memo = src.cache.memo
    # The places depend on where the history's model messages come from (as for
    # ``truncation``) and on which positions are summarized or kept.
    places = _history_places(src, a, conv) if conv is not None else None
    key = (places.stamp if places else None, len(a.history), plan.summarize_at, plan.keep_at)
    span, n_recent, first_recent = memo.derived(
        "compression-due",
        key,
        lambda: _compression(
            conv, a, places, places.named if places else _names_file(a.history_ids)
        ),
    )
    last = None
    if first_recent is None and not span.placed:
        last = _last_message(conv, a)
    s = a.settings
    return Compression(
        True,
        plan.history_tokens,
        plan.threshold,
        s.compression_trigger_ratio,
        s.max_input_tokens,
        plan.reserved_tokens,
        plan.progressive,
        span,
        (plan.summarize[0], plan.summarize[-1]) if plan.summarize else ("", ""),
        plan.summarize_tokens,  # as the compression total counts them
        n_recent,
        first_recent,
        last,
    )


# ------------------------------------------------------------------------------ helpers


def _compression(
    conv: Conversation | None, a: Assembly, places: _HistoryPlaces | None, named: list[bool]
) -> tuple[Span, int, int | None]:
    plan = a.compression
    h = a.history
    older, recent = picked(h, plan.summarize_at), picked(h, plan.keep_at)
    where = places.places if places is not None else [None] * len(h)
    first_recent = next((where[p] for p in plan.keep_at if h[p].source is not None), None)
    at = picked(where, plan.summarize_at)
    span = _span(conv, older, at, picked(named, plan.summarize_at))
    recent_at, recent_named = picked(where, plan.keep_at), picked(named, plan.keep_at)
    return span, len(_placed(recent, recent_at, recent_named)[0]), first_recent


def _names_file(ids: Sequence[str]) -> list[bool]:
    """Whether each id names a file (``/files/``), at C speed."""
    return list(map(operator.contains, ids, itertools.repeat("/files/")))


@dataclass(slots=True, eq=False)
class _HistoryPlaces:
    """Where each model message of a history comes from: ``places[p]``, the index in the
    conversation of ``history[p]``'s source (None: none), and ``named[p]``, whether its
    id names a file (``/files/``). ``stamp`` stays the same object while every position
    keeps what the spans of the budget rules read of it (its source's place, whether its
    id names an upload and which, the upload it is), so a span keyed on it is kept;
    ``messages``: the stored messages it was found in."""

    history: tuple[LlmMessage, ...]
    places: list[int | None]
    summary_id: str | None
    messages: tuple[Message, ...]
    stamp: object
    named: list[bool]


def _history_places(src: Source, a: Assembly, conv: Conversation) -> _HistoryPlaces:
    """The places of ``a.history`` (shared by the budget inputs of one run), made from the
    last run's when they can be shown unchanged."""
    memo = src.cache.memo
    return memo.of_run(
        "history-places",
        a,
        lambda: memo.carried("history-places", lambda last: _places_made(src, a, conv, last)),
    )


def _places_made(
    src: Source, a: Assembly, conv: Conversation, last: _HistoryPlaces | None
) -> _HistoryPlaces:
    hist, data = a.history, conv.message_data
    if last is not None and _same_places(src, last, hist, data, a.summary_id):
        return _HistoryPlaces(hist, last.places, a.summary_id, data, last.stamp, last.named)
    places = _spliced_places(src, last, hist, data) if last is not None else None
    if places is None or last is None:
        places = conv.places_of(map(_SOURCE, hist))
        return _HistoryPlaces(
            hist, places, a.summary_id, data, object(), _names_file(a.history_ids)
        )
    # Spliced: the same model messages at the common ends (the same ids), found once.
    head, tail = common_ends(last.history, hist)
    mid = _names_file(a.history_ids[head : len(hist) - tail])
    named = [*last.named[:head], *mid, *last.named[len(last.history) - tail :]]
    return _HistoryPlaces(hist, places, a.summary_id, data, object(), named)


def _spliced_places(
    src: Source, last: _HistoryPlaces, hist: tuple[LlmMessage, ...], data: tuple[Message, ...]
) -> list[int | None] | None:
    """The places of ``hist`` from ``last``'s, when messages came or went in one run of
    the document (the engine's splice), or a few were replaced in place (a splice that
    moves none: a message that lost its uploads), and the history changed in one run of
    positions:
    the model messages before and after it are the same objects, of the same messages,
    whose places move as the splice moves them; those in it come from the document's run
    (found among its messages). None: not so."""
    cache, changed = src.cache, src.changed
    if changed is None or last.messages is not cache._messages:
        return None
    replaced: set[int] | None = None
    if cache._moved:
        head, mid, tail = cache._splice
    elif 0 < len(changed) <= 8:  # messages replaced in place: a splice that moves none
        head, tail = min(changed), max(changed) + 1
        replaced = set(changed)
        mid = [None if j in replaced else j for j in range(head, tail)]
    else:
        return None
    old = last.history
    n_old, n_new = len(old), len(hist)
    hh, tt = common_ends(old, hist)
    before, after = last.places[:hh], last.places[n_old - tt :]
    if None in before or None in after:
        return None  # (a model message of none)
    end = head + len(mid)
    moved: list[int | None]
    if replaced is not None and replaced.isdisjoint(before) and replaced.isdisjoint(after):
        moved = [*before, *after]  # nothing moves, and none is of a message replaced
    elif (not before or max(before) < head) and (not after or min(after) >= tail):  # type: ignore[type-var]
        # None of the splice's run: those before stay, those after move by its shift.
        moved = [*before, *map((end - tail).__add__, after)]  # type: ignore[arg-type]
    else:
        # Where each message of the last run is now (None: gone), at C speed.
        now: list[int | None] = [
            *range(head),
            *itertools.repeat(None, tail - head),
            *range(end, end + len(last.messages) - tail),
        ]
        for j, o in enumerate(mid, head):
            if o is not None:
                now[o] = j
        moved = list(map(now.__getitem__, (*before, *after)))  # type: ignore[call-overload]
    run = dict(zip(map(id, data[head:end]), range(head, end), strict=True))
    fresh = hist[hh : n_new - tt]
    between = list(map(run.get, map(id, map(_SOURCE, fresh))))
    if None in between:
        # Model messages made again from messages outside the run (kept objects: a tool
        # result after a deleted call, say): where the last run found them, moved.
        ids = map(id, map(_SOURCE, old[hh : n_old - tt]))
        was = dict(zip(ids, last.places[hh : n_old - tt], strict=True))
        shift = end - tail
        for j in [j for j, b in enumerate(between) if b is None]:
            src = fresh[j].source
            p = was.get(id(src)) if src is not None else None
            if p is not None and not head <= p < tail:
                p = p if p < head else p + shift
                if data[p] is src:
                    between[j] = p
    if None in moved or None in between:
        return None  # (a model message of a message gone, of another message, or of none)
    return [*moved[:hh], *between, *moved[hh:]]


def _same_places(
    src: Source,
    last: _HistoryPlaces,
    hist: tuple[LlmMessage, ...],
    data: tuple[Message, ...],
    summary_id: str | None,
) -> bool:
    """Whether ``hist`` keeps ``last``'s places and what the spans read at each position:
    only messages replaced in place since the last run (the engine's ``changed``, no
    message came or went), and the model messages that are new objects come from the
    message at the same place, name an upload as the old ones did and carry none (the
    reader keeps message ids unique, so counting sources by id counts them by place)."""
    changed = src.changed
    if (
        changed is None
        or src.cache._moved
        or last.messages is not src.cache._messages  # made in the last run
        or len(changed) > 8
        or len(last.history) != len(hist)
        or len(last.messages) != len(data)
        or last.summary_id != summary_id
    ):
        return False
    old, places, before = last.history, last.places, last.messages
    diff = differing(old, hist)
    if len(diff) > 64:
        return False
    for c in changed:
        if summary_id is not None and summary_id in (before[c].id, data[c].id):
            return False  # the summary node is found by its id
        n = places.count(c)  # every model message of a replaced message is new
        if n and n != sum(1 for p in diff if places[p] == c):
            return False
    for p in diff:
        o, e = old[p], hist[p]
        w = places[p]
        if e.source is None or o.source is None or w is None:
            if not (e.source is None and o.source is None and w is None):
                return False
        elif data[w] is not e.source:
            return False
        if o.file_id is not None or e.file_id is not None:
            return False  # an upload: its file's id and name are read
        named = "/files/" in o.id
        if named != ("/files/" in e.id):
            return False
        if named and (
            e.source is None or _file_index(e, e.source) != _file_index(o, o.source)  # type: ignore[arg-type]
        ):
            return False
    return True


def _span(
    conv: Conversation | None,
    msgs: Sequence[LlmMessage],
    where: Sequence[int | None],
    named: Sequence[bool],
    summary_id: str | None = None,
    nodes: Sequence[int] = (),
) -> Span:
    """The document span of ``msgs``' sources, and the summary node among them (placed
    anywhere in the document, so it is kept out of the span).

    The messages lie in the document in the order of their indexes, each one's files
    inside it in order: the span starts at the lowest index (the message itself, else its
    first file among ``msgs``) and ends at the highest (the message, else its last file).
    ``where``: the index in ``conv`` of each message's source (None: none); ``named``:
    whether each one's id names a file; ``nodes``: the indexes of the summary nodes
    (``MessageKinds.summaries``). A pass over the indexes at C speed, then a look at
    the two ends' entries.
    """
    seen, placed = _placed(msgs, where, named)
    n = len(seen)
    if conv is None or not msgs:
        return Span(None, None, None, n)
    summary: int | None = None
    if summary_id is not None:
        data = conv.message_data
        for at in nodes:  # the summary nodes with the summary's id (one, unless repeated)
            if data[at].id == summary_id and at in placed:
                summary = at
        placed.discard(summary)
    if not placed:
        return Span(None, None, summary, n)
    first = _end_place(conv, msgs, where, min(placed), first=True)  # type: ignore[type-var]
    last = _end_place(conv, msgs, where, max(placed), first=False)  # type: ignore[type-var]
    return Span(first, last, summary, n)


def _end_place(
    conv: Conversation, msgs: Sequence[LlmMessage], where: Sequence[int | None], i: int, first: bool
) -> _Place:
    """The first (else last) place of message ``i`` among ``msgs``: the message itself
    when it is among them, else its first (last) file."""
    src = conv.message_data[i]
    ks: list[int | None] = []
    at = where.index(i)
    while True:  # the entries of message ``i`` (found at C speed)
        ks.append(_file_index(msgs[at], src))
        try:
            at = where.index(i, at + 1)
        except ValueError:
            break
    if None in ks:
        return i, None
    files = [k for k in ks if k is not None]
    return i, (min(files) if first else max(files))


def _own(b: Branch, place: _Place) -> TextRange:
    """Where a message is written: the message, or the entry ``k`` of its ``files``."""
    i, k = place
    m = b.messages[i]
    return m.range if k is None else m.files[k].range


def _file_index(m: LlmMessage, src: object) -> int | None:
    """The index in ``src.files`` of an injected upload (id ``<message id>/files/<i>``)."""
    _, sep, tail = m.id.rpartition("/files/")
    # ``isdecimal``: the digits ``int`` reads (``isdigit`` also takes "²", which it does not).
    if sep and tail.isdecimal() and int(tail) < len(src.files):  # type: ignore[attr-defined]
        return int(tail)
    return None


def _placed(
    msgs: Sequence[LlmMessage], where: Sequence[int | None], named: Sequence[bool]
) -> tuple[set[int], set[int]]:
    """The places of the document messages among ``msgs`` (an upload injected before its
    message is not one: their number is how many messages ``msgs`` are), and the places
    of all of them; ``where``: the index of each one's source (None: none), ``named``:
    whether each one's id names a file (``/files/``)."""
    if True not in named:  # (most often: each is a document message of its own)
        seen = set(where)
        seen.discard(None)
        return seen, set(seen)  # type: ignore[return-value]
    # Passes at C speed: the messages whose id names no file, then the few others.
    seen = set(itertools.compress(where, map(operator.not_, named)))
    others: list[int | None] = []
    for m, w in itertools.compress(zip(msgs, where, strict=True), named):
        others.append(w)
        if m.source is not None and _file_index(m, m.source) is None:
            seen.add(w)  # injected uploads: whose id names a file
    seen.discard(None)
    placed = seen.union(others)
    placed.discard(None)
    return seen, placed  # type: ignore[return-value]


def _uploads(
    conv: Conversation,
    msgs: Sequence[LlmMessage],
    where: list[int | None],
    fids: Sequence[str | None],
) -> Iterator[tuple[str, str, int, int | None]]:
    """(file id, filename, message index, index in its ``files``) of the files ``msgs``
    inject (``where``: the index in ``conv`` of each one's source, ``fids``: each one's
    file id)."""
    with_file = list(map(operator.is_not, fids, itertools.repeat(None)))
    ups = list(itertools.compress(msgs, with_file))  # those with a file id (at C speed)
    data = conv.message_data
    for m, i in zip(ups, itertools.compress(where, with_file), strict=True):
        if i is None:
            continue
        src = data[i]
        k = _file_index(m, src)
        if k is not None:
            f = src.files[k]
            yield f.file_id, f.filename, i, k
        else:
            yield m.file_id, src.filename or m.file_id, i, None


def _first_sent(conv: Conversation, a: Assembly, places: _HistoryPlaces) -> int | None:
    """The index of the oldest message sent: the first of the layout's entries in a sent
    segment that comes from a message (the layout holds no position the cut dropped)."""
    for e in a.layout:
        src = e.message.source
        if e.segment in SENT_SEGMENTS and src is not None:
            # Most often one of the first model messages the cut keeps (the orphans
            # are left out): its place is known.
            h, k = a.history, len(a.dropped)
            for p in range(k, min(k + 8, len(h))):
                i = places.places[p] if h[p].source is src else None
                if i is not None and conv.message_data[i] is src:
                    return i
            return conv.index_of(src)
    return None


def _last_message(conv: Conversation | None, a: Assembly) -> int | None:
    """The index of the branch's last message (the chain's tip, else the last one)."""
    if conv is None or not conv.message_data:
        return None
    data = conv.message_data
    if a.chain:
        tip = a.chain[-1]
        return next((i for i in range(len(data) - 1, -1, -1) if data[i].id == tip), len(data) - 1)
    return len(data) - 1
