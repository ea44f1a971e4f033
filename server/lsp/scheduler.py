"""Scheduling analyses: one analysis per document state, each state's result published.

Every open document has a *generation* that grows on every change of its text and of
anything its analysis reads (settings, a file it references, an open template). Per
document, the scheduler keeps at most one analysis running and at most one due:

- A change starts an analysis at once when none of that document is running, else marks
  one due. When the running one ends, the due one starts with the then-latest state, so
  edits in between coalesce into one analysis, and the latest state is always analysed
  within one analysis time after the last change. Nothing else starts an analysis.
- A finished analysis becomes the document's latest snapshot (unless a newer one is
  already kept) and is handed to ``on_current`` (which publishes it) only when it is of
  the latest generation: an older state's result is kept for answers that must not wait,
  never published over a newer one.
- Requests never start analyses: ``view`` waits, at most ``wait_s``, for the analysis of
  the generation the request was sent in, or of the latest one when the document changed
  meanwhile (so that requests sent while typing share the analysis, and the computation
  on it, that follows the last keystroke), else answers from the newest finished
  snapshot seen through the edits made since (``View.fresh`` is False, and the offsets
  are mapped between the two texts). Answers are in the current text's coordinates.
  Costly answers (the outline, the folds) also wait while the user is typing: until the
  document has gone ``SETTLE_S`` without a change.
- An analysis that raises becomes a snapshot of its own state all the same
  (``Session.failed_snapshot``: an ``internal-error`` at the document head and the last
  good findings moved into the current text and marked stale), so it is published, and
  requests answer from the last good analysis instead of waiting for ever.

Costly answers are computed on one views thread, shared by the requests that wait for the
same analysis (``shared``). When every request waiting for a computation is cancelled (an
editor sends ``$/cancelRequest`` for its outline and folds when the user types on), the
computation stops at its next checkpoint (``Shared.check``, between messages), as
rust-analyzer's queries unwind when a change comes in: under the GIL, a stale outline
computed to its end would slow the analysis of the keystroke that made it stale.

Everything here runs on the message loop except the analyses (``Session.executor``).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from lsprotocol import types as lsp

from assembly.host import Edit
from assembly.ide import relocated
from assembly.text import TextRange
from server.lsp import convert
from server.lsp.convert import TextMap
from server.lsp.state import DocState, Snapshot

log = logging.getLogger(__name__)

_T = TypeVar("_T")
WAIT_S = 5.0  # the longest a request waits for the analysis of its version
SETTLE_S = 0.05  # how long costly requests wait for more edits (``view``'s ``settle``)
# The interpreter's switch interval while a view is computed (``shared``). The message
# loop, the analyses and the views share the GIL: a thread that wants it waits for a busy
# one up to the interval at each hand-over, and a keystroke needs many (read, decode,
# apply, analyse, publish). The first outline of a 10 MB conversation is a second of
# Python on the views thread: at Python's 5 ms, the last key of a fast burst typed
# meanwhile had its diagnostics 108-132 ms after it; at 0.5 ms, 28-39 ms. Only while a
# view is computed: at all times, the many hand-overs of the open (the body read, decoded
# and analysed on three threads) made it 4 % slower.
SWITCH_INTERVAL_S = 0.0005


class Cancelled(Exception):
    """A shared computation stopped: every request waiting for it was cancelled."""


class Shared:
    """A computation for the requests that waited for the same analysis (``shared``): how
    many still wait for it, and whether all of them gave up."""

    __slots__ = ("base", "cancelled", "ident", "task", "waiting")

    def __init__(self, ident: Any, base: Any) -> None:
        self.ident = ident
        self.base = base  # (kept so that ``id`` is not reused while the entry lives)
        self.task: asyncio.Future[Any] | None = None
        self.waiting = 0
        self.cancelled = False

    def check(self) -> None:
        """A checkpoint of the computation (on its thread): raises ``Cancelled`` once every
        request waiting for it was cancelled."""
        if self.cancelled:
            raise Cancelled


CHECK_EVERY = 256  # items between two checkpoints (``checked``)


def checked(items: Iterable[_T], check: Callable[[], None]) -> Iterator[_T]:
    """``items``, with ``check()`` called before the first and every ``CHECK_EVERY`` after."""
    for i, item in enumerate(items):
        if not i % CHECK_EVERY:
            check()
        yield item


@dataclass
class _Doc:
    """The scheduling state of one open document."""

    generation: int = 0  # grows on every change of the document or of what it reads
    changed_at: float = 0.0  # when it last grew (``time.monotonic``)
    running: Future[Snapshot] | None = None  # the analysis under way
    due: bool = False  # the latest generation needs an analysis after the running one
    shown: Snapshot | None = None  # the last snapshot handed to ``on_current``
    # Requests waiting for the analysis of a generation: (generation, wake-up future).
    waiters: list[tuple[int, asyncio.Future[None]]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class View:
    """What a request answers from: a finished analysis seen from the current text.

    ``snap`` is the document's latest snapshot as is (it may be a failed one, whose
    findings are already in the current text); ``base`` is the newest snapshot with an
    analysis (``snap`` itself unless it failed). ``text_map`` is of the current text.
    When ``base`` is of another text, offsets are mapped through the one span where the
    two texts differ (``Rope.changed_span``): outside it they move with the edit, inside
    it they stick to its start (or end, for a range's end). ``fresh`` says the answer is
    of the document's latest state.
    """

    snap: Snapshot
    base: Snapshot | None
    text_map: TextMap
    fresh: bool
    span: tuple[int, int, int] | None = None  # (start, old end, new end); None: same text
    # The text the request's positions are in (the document's when the request arrived)
    # and where it differs from the current text, when edits arrived while the request
    # waited; None: the current text.
    asked: tuple[TextMap, tuple[int, int, int]] | None = None

    @property
    def mapped(self) -> bool:
        return self.span is not None

    def to_old(self, offset: int) -> int:
        """An offset in the current text, in the base's text."""
        if self.span is None or self.base is None:
            return offset
        p, old_end, new_end = self.span
        return _move(offset, (p, new_end, old_end), len(self.base.text_map.text), False)

    def unchanged(self, offset: int) -> bool:
        """``offset`` of the base's text is not inside what changed since (it has a place
        in the current text, not only the changed span's start)."""
        if self.span is None:
            return True
        p, old_end, _ = self.span
        return not p < offset < old_end

    def to_new(self, offset: int, *, end: bool = False) -> int:
        """An offset in the base's text, in the current text (clamped to it)."""
        return _move(offset, self.span, len(self.text_map.text), end)

    def range_to_new(self, rng: TextRange) -> TextRange:
        return moved(rng, self.span, len(self.text_map.text))

    def carry(self, item: _T) -> _T:
        """A result computed on the base's text (an ``assembly.ide`` value with a
        ``range``, ``focus_range``, ``offset`` or ``children``), moved into the current text."""
        if self.span is None:
            return item
        return relocated(item, self.range_to_new, self.to_new)

    def offset_of(self, position: lsp.Position) -> int:
        """A request's position, as an offset into the base's text."""
        return self.to_old(self._asked(convert.from_lsp_position(self._asked_map, position)))

    def range_of(self, rng: lsp.Range) -> TextRange:
        r = convert.from_lsp_range(self._asked_map, rng)
        start = self.to_old(self._asked(r.start))
        return TextRange(start, max(start, self.to_old(self._asked(r.end, end=True))))

    @property
    def _asked_map(self) -> TextMap:
        return self.text_map if self.asked is None else self.asked[0]

    def _asked(self, offset: int, *, end: bool = False) -> int:
        """An offset in the text the request was sent about, in the current text."""
        if self.asked is None:
            return offset
        return _move(offset, self.asked[1], len(self.text_map.text), end)


def moved(rng: TextRange, span: tuple[int, int, int] | None, n: int) -> TextRange:
    """A range of an older text in the newer one, given the span where they differ
    (``Rope.changed_span``: start, old end, new end) and the newer text's length ``n``."""
    start = _move(rng.start, span, n, False)
    return TextRange(start, max(start, _move(rng.end, span, n, True)))


def _move(offset: int, span: tuple[int, int, int] | None, n: int, end: bool) -> int:
    if span is not None:
        p, old_end, new_end = span
        if offset >= old_end and offset > p:
            offset += new_end - old_end
        elif offset > p:  # inside what changed: its start (its end, for a range's end)
            offset = new_end if end else p
    return max(0, min(offset, n))


class Documents(Protocol):
    """What the scheduler reads of the session (``server.lsp.session.Session``) and asks
    of it: the scheduler never changes the session's state but through these methods."""

    @property
    def documents(self) -> Mapping[str, DocState]: ...
    @property
    def snapshots(self) -> Mapping[str, Snapshot]: ...
    @property
    def encoding(self) -> str: ...
    @property
    def executor(self) -> Executor: ...
    @property
    def loop(self) -> asyncio.AbstractEventLoop | None: ...

    def analyze_now(self, doc: DocState, edit: Edit | None = None) -> Snapshot: ...
    def failed_snapshot(
        self, doc: DocState, exc: BaseException, previous: Snapshot | None, generation: int
    ) -> Snapshot: ...
    def take_edit(self, uri: str) -> Edit | None: ...
    def record(self, snap: Snapshot) -> None: ...


class Scheduler:
    """Starts, coalesces and finishes the analyses of a ``Session``'s open documents."""

    def __init__(self, session: Documents) -> None:
        self._session = session
        self._docs: dict[str, _Doc] = {}
        # Called on the loop with a snapshot of a document's latest state and the one last
        # handed to it for that document (None at first): publish it.
        self.on_current: Callable[[Snapshot, Snapshot | None], None] = lambda snap, prev: None
        self.wait_s = WAIT_S
        self.stopped = False  # set at shutdown: nothing starts any more
        # (uri, kind) -> the computation for the view it was asked for.
        self._shared: dict[tuple[str, str], Shared] = {}
        # The thread those computations run on, one at a time: each builds the outline or
        # the folds of every message (tens of MB at 10 MB), and several side by side (one
        # per version while typing) only add up their memory: under the GIL they would not
        # finish sooner.
        self._views_pool: ThreadPoolExecutor | None = None

    # ------------------------------------------------------------------------ changes

    def changed(self, uri: str) -> None:
        """The document, or something its analysis reads, changed: analyse it again."""
        if uri not in self._session.documents:
            return
        d = self._docs.setdefault(uri, _Doc())
        d.generation += 1
        d.changed_at = time.monotonic()
        if d.running is None:
            self._start(uri, d)
        else:
            d.due = True

    def closed(self, uri: str) -> None:
        for key in [k for k in self._shared if k[0] == uri]:
            del self._shared[key]
        d = self._docs.pop(uri, None)
        if d is not None:
            for _, waiter in d.waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def stop(self) -> None:
        """At shutdown: no analysis or shared computation starts any more."""
        self.stopped = True
        if self._views_pool is not None:
            self._views_pool.shutdown(wait=False, cancel_futures=True)

    def busy(self) -> bool:
        """Whether any analysis is running or due (for tests and benchmarks)."""
        return any(d.running is not None or d.due for d in self._docs.values())

    # ----------------------------------------------------------------------- requests

    async def view(
        self, uri: str, *, wait: bool = True, settle: float = 0.0, arrived: DocState | None = None
    ) -> View | None:
        """The analysis a request about ``uri`` answers from.

        ``wait``: wait, at most ``wait_s`` in all, for the analysis of the document's state
        when the request arrived, and, when the document changed meanwhile, for that of
        its latest state (an answer is given in the current text: computing one for each
        state passed while typing would only slow the analysis the client waits for);
        else take the latest finished one at once, waiting only when there is none yet
        (the first analysis after opening). ``settle``: once there, wait for more edits
        (then for their analysis) until the document has gone that long without a change,
        for requests whose answer is costly to compute (an outline of a large document)
        and that editors send after every keystroke; one that comes once the typing
        stopped (editors that wait a moment after a change send theirs so) is answered at
        once. ``arrived``: the document's state when the request arrived (its positions
        are in that text; by default, the state now).
        """
        s = self._session
        d = self._docs.get(uri)
        snap = s.snapshots.get(uri)
        if arrived is None:  # the request's positions are in the text of its arrival
            arrived = s.documents.get(uri)
        if d is not None and uri in s.documents:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.wait_s
            while True:
                while snap is None or (wait and snap.generation < d.generation):
                    left = deadline - loop.time()
                    if left <= 0:
                        log.info("no analysis of %s in time: answering from an older one", uri)
                        break
                    await self._wait(uri, d, d.generation, left)
                    snap = s.snapshots.get(uri)
                    if self._docs.get(uri) is not d:
                        break  # closed meanwhile
                quiet = settle - (time.monotonic() - d.changed_at)  # (left to wait)
                if quiet <= 0 or loop.time() + quiet > deadline:
                    break
                seen = d.generation
                await asyncio.sleep(quiet)
                if d.generation == seen or self._docs.get(uri) is not d:
                    break
                snap = s.snapshots.get(uri)
        doc = s.documents.get(uri)
        if snap is None:
            return None
        if doc is None:  # not open: answer from what there is, as is
            return View(snap, snap if snap.analysis is not None else None, snap.text_map, True)
        d = self._docs.get(uri)
        base = snap if snap.analysis is not None else snap.last_good
        current = d is not None and snap.generation == d.generation
        fresh = current and base is snap
        text_map = TextMap.of(doc.text, s.encoding)
        old_text = base.text_map.text if base is not None else doc.text
        span = None
        if old_text is not doc.text:
            p, old_end, new_end = doc.text.changed_span(old_text)  # type: ignore[arg-type]
            if (p, old_end) != (len(old_text), len(old_text)) or new_end != len(doc.text):
                span = (p, old_end, new_end)
        asked = None
        if arrived is not None and arrived.text is not doc.text:  # edits came meanwhile
            asked_map = TextMap.of(arrived.text, s.encoding)
            asked = (asked_map, doc.text.changed_span(arrived.text))
        if not fresh:
            log.info("answering about %s from an analysis of version %s", uri, snap.version)
        return View(snap, base, text_map, fresh, span, asked)

    async def shared(
        self, view: View, kind: str, compute: Callable[[View, Callable[[], None]], _T]
    ) -> _T:
        """``compute(view, check)`` on a worker thread, once per document, kind and view:
        requests that waited for the same analysis (an outline and a folding request per
        keystroke) share one computation instead of each making its own. ``compute`` calls
        ``check`` between items (``checked``): once every request waiting for it is
        cancelled, ``check`` raises ``Cancelled`` and the thread is free for the next."""
        key = (view.snap.uri, kind)
        ident = (id(view.base), view.span, id(view.text_map.text))
        entry = self._shared.get(key)
        if entry is None or entry.ident != ident or entry.base is not view.base:
            if self._views_pool is None:
                self._views_pool = ThreadPoolExecutor(1, thread_name_prefix="promptls-views")
            entry = Shared(ident, view.base)
            task = asyncio.get_running_loop().run_in_executor(
                self._views_pool, _switching_often, compute, view, entry.check
            )
            task.add_done_callback(_retrieved)
            entry.task = task
            self._shared[key] = entry
        assert entry.task is not None
        entry.waiting += 1
        try:
            return await asyncio.shield(entry.task)  # type: ignore[no-any-return]
        except asyncio.CancelledError:
            if entry.waiting == 1 and not entry.task.done():
                entry.cancelled = True  # (read on the views thread: a plain flag)
                if self._shared.get(key) is entry:
                    del self._shared[key]
            raise
        finally:
            entry.waiting -= 1

    async def _wait(self, uri: str, d: _Doc, target: int, timeout: float) -> None:
        snap = self._session.snapshots.get(uri)
        if snap is not None and snap.generation >= target:
            return
        if d.running is None and not d.due:  # cannot happen: every change starts one
            log.error("no analysis of %s under way for a waiting request: starting one", uri)
            self._start(uri, d)
        waiter = asyncio.get_running_loop().create_future()
        d.waiters.append((target, waiter))
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout)
        except TimeoutError:
            pass
        finally:
            if (target, waiter) in d.waiters:
                d.waiters.remove((target, waiter))

    # ------------------------------------------------------------------------ private

    def _start(self, uri: str, d: _Doc) -> None:
        s = self._session
        doc = s.documents.get(uri)
        if doc is None or self.stopped:
            return
        generation = d.generation
        d.due = False
        future = s.executor.submit(s.analyze_now, doc, s.take_edit(uri))
        d.running = future
        future.add_done_callback(
            lambda f: self._post(lambda: self._done(uri, d, doc, generation, f))
        )

    def _post(self, fn: Callable[[], None]) -> None:
        loop = self._session.loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(fn)

    def _done(self, uri: str, d: _Doc, doc: DocState, generation: int, f: Future[Snapshot]) -> None:
        if self._docs.get(uri) is not d:
            return  # closed meanwhile
        s = self._session
        d.running = None
        previous = s.snapshots.get(uri)
        snap: Snapshot | None = None
        if not f.cancelled():
            exc = f.exception()
            if exc is None:
                snap = replace(f.result(), generation=generation)
            else:
                log.error("analysis of %s failed", uri, exc_info=exc)
                snap = s.failed_snapshot(doc, exc, previous, generation)
        if snap is not None and (previous is None or previous.generation <= generation):
            s.record(snap)
            for target, waiter in d.waiters:
                if target <= generation and not waiter.done():
                    waiter.set_result(None)
            if generation == d.generation:
                shown, d.shown = d.shown, snap
                self.on_current(snap, shown)
        if d.due or (snap is None and d.generation > generation):
            self._start(uri, d)


def _switching_often(
    compute: Callable[[View, Callable[[], None]], _T], view: View, check: Callable[[], None]
) -> _T:
    """``compute(view, check)`` with the interpreter's switch interval
    ``SWITCH_INTERVAL_S`` (on the views thread: one computation at a time)."""
    check()  # (cancelled while it waited for the thread)
    before = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        return compute(view, check)
    finally:
        sys.setswitchinterval(before)


def _retrieved(task: asyncio.Future[Any]) -> None:
    """A shared computation's end, seen even when no request waits for it any more (a
    cancelled one's ``Cancelled`` is not an error to log)."""
    if not task.cancelled():
        task.exception()
