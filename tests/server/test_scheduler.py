"""``server/lsp/scheduler.py``: one analysis per document state, the latest state published.

Deterministic: a real ``PromptServer`` in-process (``tests.support.inprocess``) whose
analysis executor is a ``ManualExecutor``: analyses are queued when the server starts
them and run only when the test says, so every interleaving of edits, requests and
finishing analyses is chosen by the test, not by timing. The analyses themselves are the
real ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp

from server.lsp.session import Session
from tests.support.inprocess import WATCHING_CLIENT, InProcessClient

FINDING = "reminder: 'Today is {{CURENT_DATETIME}}.'\n"
PLAIN = 'messages:\n  - {id: u1, role: user, content: "Draft the memo, take %d."}\n'


def text_of(version: int) -> str:
    """Even versions have a finding (an unknown placeholder), odd ones none."""
    return (FINDING if version % 2 == 0 else "") + PLAIN % version


class ManualExecutor:
    """Holds submitted analyses until ``run_next``; runs them on the caller's thread."""

    def __init__(self) -> None:
        self.pending: list[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = []
        self.submitted = 0

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self.pending.append((future, fn, args))
        self.submitted += 1
        return future

    def run_next(self) -> None:
        future, fn, args = self.pending.pop(0)
        future.set_running_or_notify_cancel()
        try:
            future.set_result(fn(*args))
        except BaseException as e:
            future.set_exception(e)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.pending.clear()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    return root


@pytest.fixture
async def client(workspace: Path) -> AsyncIterator[InProcessClient]:
    res = InProcessClient()
    await res.initialize(WATCHING_CLIENT, root_uri=workspace.as_uri())
    res.server.session.executor = ManualExecutor()  # type: ignore[assignment]
    yield res
    res.shutdown()


def executor(client: InProcessClient) -> ManualExecutor:
    return client.server.session.executor  # type: ignore[return-value]


async def turn() -> None:
    """Let the loop run what is ready (posted callbacks, dispatched handlers)."""
    for _ in range(5):
        await asyncio.sleep(0)


async def run_next(client: InProcessClient) -> None:
    executor(client).run_next()
    await turn()


def published(client: InProcessClient, uri: str) -> list[lsp.PublishDiagnosticsParams]:
    return [
        client.converter.structure(m["params"], lsp.PublishDiagnosticsParams)
        for m in client.sent
        if m.get("method") == lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS and m["params"]["uri"] == uri
    ]


def codes(params: lsp.PublishDiagnosticsParams) -> list[str]:
    return sorted(str(d.code) for d in params.diagnostics)


def open_doc(client: InProcessClient, uri: str, text: str) -> None:
    client.notify(
        lsp.TEXT_DOCUMENT_DID_OPEN,
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=uri, language_id="yaml", version=1, text=text)
        ),
    )


def outline(client: InProcessClient, uri: str) -> asyncio.Task[Any]:
    params = lsp.DocumentSymbolParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    return asyncio.create_task(client.request(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL, params))


async def test_the_issue_interleaving_publishes_the_last_version(
    client: InProcessClient, workspace: Path
) -> None:
    # didOpen; didChange v2, v3; documentSymbol; didChange v4 -> v4 must be published.
    uri = (workspace / "chat.conv.yaml").as_uri()
    open_doc(client, uri, text_of(1))
    client.change(uri, 2, text_of(2))
    client.change(uri, 3, text_of(3))
    symbols = outline(client, uri)
    await turn()
    client.change(uri, 4, text_of(4))
    await turn()
    # Only v1's analysis was started: edits coalesce, the request started none.
    assert executor(client).submitted == 1
    await run_next(client)  # v1 ends: the document moved on, nothing is published
    assert published(client, uri) == []
    assert not symbols.done()  # it waits for the analysis of (at least) its version, v3
    assert executor(client).submitted == 2  # v4's analysis, the one that coalesced v2-v4
    await run_next(client)
    assert [p.version for p in published(client, uri)] == [4]
    assert codes(published(client, uri)[0]) == ["unknown-placeholder"]
    result = await symbols
    assert result  # answered from v4's analysis
    assert executor(client).submitted == 2 and not executor(client).pending


async def test_requests_never_start_analyses(client: InProcessClient, workspace: Path) -> None:
    uri = (workspace / "chat.conv.yaml").as_uri()
    open_doc(client, uri, text_of(1))
    requests = []
    for version in range(2, 32):  # a keystroke, an outline and a folding request, 30 times
        client.change(uri, version, text_of(version))
        requests.append(outline(client, uri))
        folding = lsp.FoldingRangeParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
        requests.append(
            asyncio.create_task(client.request(lsp.TEXT_DOCUMENT_FOLDING_RANGE, folding))
        )
        await turn()
        if version % 10 == 0:  # an analysis ends now and then
            await run_next(client)
    while executor(client).pending:
        await run_next(client)
    await asyncio.gather(*requests)
    # One analysis running at a time, each of the then-latest text: 1 + one per finish.
    assert executor(client).submitted == 5
    assert [p.version for p in published(client, uri)][-1] == 31


async def test_each_state_is_published_once_and_in_order(
    client: InProcessClient, workspace: Path
) -> None:
    uri = (workspace / "chat.conv.yaml").as_uri()
    open_doc(client, uri, text_of(1))
    await run_next(client)
    for version in range(2, 8):
        client.change(uri, version, text_of(version))
        await turn()
        await run_next(client)
    versions = [p.version for p in published(client, uri)]
    assert versions == list(range(1, 8))
    for p in published(client, uri):
        assert p.version is not None
        assert codes(p) == (["unknown-placeholder"] if p.version % 2 == 0 else [])


async def test_a_request_that_waits_too_long_answers_from_the_older_analysis_mapped(
    client: InProcessClient, workspace: Path
) -> None:
    uri = (workspace / "chat.conv.yaml").as_uri()
    text = text_of(2)
    open_doc(client, uri, text)
    await run_next(client)
    client.server.session.scheduler.wait_s = 0.05
    # Delete the first line (the reminder): the v2 analysis's ranges are past what is left.
    short = text[len(FINDING) :]
    client.change(uri, 3, short)
    await turn()
    hover = lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(0, 4)
    )
    res = await client.request(lsp.TEXT_DOCUMENT_HOVER, hover, lsp.Hover)
    assert res is not None and "changed since" in res.contents.value  # it says so
    lines = short.split("\n")
    for rng in (res.range,):
        assert rng is not None
        assert rng.end.line < len(lines) and rng.end.character <= len(lines[rng.end.line])
    lens_params = lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    lenses = await client.request(lsp.TEXT_DOCUMENT_CODE_LENS, lens_params, list[lsp.CodeLens])
    hints_params = lsp.InlayHintParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        range=lsp.Range(lsp.Position(0, 0), lsp.Position(len(lines), 0)),
    )
    hints = await client.request(lsp.TEXT_DOCUMENT_INLAY_HINT, hints_params, list[lsp.InlayHint])
    assert lenses and hints
    places = [x.range.end for x in lenses] + [h.position for h in hints]
    for pos in places:  # never past the end of the current text
        assert pos.line < len(lines) and pos.character <= len(lines[pos.line]), pos
    # The outline waited (bounded) and answered too; code actions offer nothing stale.
    assert await outline(client, uri) is not None
    actions = lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        range=lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)),
        context=lsp.CodeActionContext(diagnostics=[]),
    )
    assert await client.request(lsp.TEXT_DOCUMENT_CODE_ACTION, actions) is None
    await run_next(client)
    assert [p.version for p in published(client, uri)] == [1, 3]


async def test_folds_and_outline_from_the_older_analysis_are_in_the_current_lines(
    client: InProcessClient, workspace: Path
) -> None:
    # Two lines added in the first message while the analysis of the new text waits: the
    # folds and the outline answered from the older analysis (mapped) are those of the new
    # text, not the lines the older analysis found them on (which the folds carry).
    uri = (workspace / "chat.conv.yaml").as_uri()
    text = "messages:\n" + "".join(
        f"  - id: u{i}\n    role: user\n    content: |\n      line one\n      line two\n"
        for i in range(3)
    )
    open_doc(client, uri, text)
    await run_next(client)
    client.server.session.scheduler.wait_s = 0.05
    at = text.index("      line two")
    client.change(uri, 2, text[:at] + "      line 1.5\n      line 1.7\n" + text[at:])
    await turn()
    params = lsp.FoldingRangeParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    kind = list[lsp.FoldingRange]
    mapped = await client.request(lsp.TEXT_DOCUMENT_FOLDING_RANGE, params, kind)
    mapped_outline = await outline(client, uri)
    await run_next(client)
    assert [p.version for p in published(client, uri)] == [1, 2]
    fresh = await client.request(lsp.TEXT_DOCUMENT_FOLDING_RANGE, params, kind)
    assert mapped and [(f.start_line, f.end_line) for f in mapped] == [
        (f.start_line, f.end_line) for f in fresh
    ]
    assert mapped[-1].start_line == 15  # the last message's block, two lines down
    fresh_outline = await outline(client, uri)
    assert [(s["range"], s["selectionRange"]) for s in mapped_outline] == [
        (s["range"], s["selectionRange"]) for s in fresh_outline
    ]  # (its names are the older text's)


async def test_a_failing_analysis_is_published_as_internal_error_and_keeps_the_last_good(
    client: InProcessClient, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = (workspace / "chat.conv.yaml").as_uri()
    open_doc(client, uri, text_of(2))
    await run_next(client)
    assert codes(published(client, uri)[-1]) == ["unknown-placeholder"]

    real = Session._analyze

    def boom(self: Session, doc: Any, edit: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(Session, "_analyze", boom)
    client.change(uri, 3, "# a line before\n" + text_of(2))
    await turn()
    await run_next(client)
    last = published(client, uri)[-1]
    assert last.version == 3
    assert codes(last) == ["internal-error", "unknown-placeholder"]
    head = next(d for d in last.diagnostics if d.code == "internal-error")
    assert head.range.start == lsp.Position(0, 0)
    assert "RecursionError" in head.message and "report" in head.message
    stale = next(d for d in last.diagnostics if d.code == "unknown-placeholder")
    assert "from version 1" in stale.message
    assert stale.range.start.line == 1  # moved past the inserted line
    # Requests answer from the last good analysis; code actions are empty, not errors.
    assert await outline(client, uri)
    actions = lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        range=lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)),
        context=lsp.CodeActionContext(diagnostics=[]),
    )
    assert await client.request(lsp.TEXT_DOCUMENT_CODE_ACTION, actions) is None
    # The next edit that analyses again recovers.
    monkeypatch.setattr(Session, "_analyze", real)
    client.change(uri, 4, text_of(5))
    await turn()
    await run_next(client)
    assert published(client, uri)[-1].version == 4
    assert codes(published(client, uri)[-1]) == []


async def test_a_closed_document_drops_its_running_analysis(
    client: InProcessClient, workspace: Path
) -> None:
    uri = (workspace / "chat.conv.yaml").as_uri()
    open_doc(client, uri, text_of(2))
    symbols = outline(client, uri)
    await turn()
    client.notify(
        lsp.TEXT_DOCUMENT_DID_CLOSE,
        lsp.DidCloseTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri)),
    )
    await turn()
    assert await symbols is None  # the waiting request is answered, not left hanging
    await run_next(client)
    assert [list(p.diagnostics) for p in published(client, uri)] == [[]]  # the clearing only


async def test_requests_waiting_for_one_analysis_share_one_outline(
    client: InProcessClient, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from server.lsp.handlers import folding, symbols

    calls = {"symbols": 0, "folding": 0}
    real = {"symbols": symbols._prepared, "folding": folding._folds}

    def counting(kind: str) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            calls[kind] += 1
            return real[kind](*args)

        return run

    monkeypatch.setattr(symbols, "_prepared", counting("symbols"))
    monkeypatch.setattr(folding, "_folds", counting("folding"))
    uri = (workspace / "chat.conv.yaml").as_uri()
    open_doc(client, uri, text_of(1))
    requests = []
    for version in range(2, 12):  # ten keystrokes, an outline and folds after each
        client.change(uri, version, text_of(version))
        requests.append(outline(client, uri))
        folds = lsp.FoldingRangeParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
        requests.append(asyncio.create_task(client.request(lsp.TEXT_DOCUMENT_FOLDING_RANGE, folds)))
        await turn()
    await run_next(client)  # v1: every request still waits for a later version
    assert calls == {"symbols": 0, "folding": 0}
    await run_next(client)  # v11, the latest: all twenty requests answered from it
    results = await asyncio.gather(*requests)
    assert all(results[::2])  # outlines (a two-line document has no folds)
    assert calls == {"symbols": 1, "folding": 1}


async def test_an_edit_analysed_while_an_outline_settles_is_not_analysed_again(
    client: InProcessClient, workspace: Path
) -> None:
    # The outline waits a moment for edits already sent (``SETTLE_S``); an edit that
    # arrives and is analysed meanwhile is answered from, not analysed a second time.
    uri = (workspace / "chat.conv.yaml").as_uri()
    open_doc(client, uri, text_of(1))
    await run_next(client)
    symbols = outline(client, uri)
    await turn()
    client.change(uri, 2, text_of(2))
    await turn()
    await run_next(client)
    assert await symbols
    assert executor(client).submitted == 2 and not executor(client).pending
    assert [p.version for p in published(client, uri)] == [1, 2]


async def test_outline_and_fold_computations_run_one_at_a_time_on_their_own_thread(
    client: InProcessClient, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each builds a result for every message (tens of MB at 10 MB); one per version side
    # by side while typing only added up their memory and took the GIL from the analysis.
    import threading
    import time

    from server.lsp.handlers import folding, symbols

    running: list[int] = [0]
    most: list[int] = [0]
    threads: set[str] = set()
    lock = threading.Lock()
    real = {"symbols": symbols._prepared, "folding": folding._folds}

    def slow(kind: str) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
                threads.add(threading.current_thread().name)
            time.sleep(0.05)
            with lock:
                running[0] -= 1
            return real[kind](*args)

        return run

    monkeypatch.setattr(symbols, "_prepared", slow("symbols"))
    monkeypatch.setattr(folding, "_folds", slow("folding"))
    uri = (workspace / "chat.conv.yaml").as_uri()
    open_doc(client, uri, text_of(1))
    await run_next(client)
    requests = []
    for version in range(2, 5):  # each version analysed, then its outline and folds asked
        folds = lsp.FoldingRangeParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
        requests.append(outline(client, uri))
        requests.append(asyncio.create_task(client.request(lsp.TEXT_DOCUMENT_FOLDING_RANGE, folds)))
        await asyncio.sleep(0.12)  # (the outline settles for edits first)
        client.change(uri, version, text_of(version))
        await turn()
        await run_next(client)
    results = await asyncio.wait_for(asyncio.gather(*requests), 10)
    assert all(results[::2])
    assert most[0] == 1
    assert len(threads) == 1 and next(iter(threads)).startswith("promptls-views")


async def test_a_costly_request_settles_only_while_the_document_is_being_typed(
    client: InProcessClient, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An outline asked while edits keep coming waits for the document to go ``SETTLE_S``
    # without a change (its answer would be stale at once); one asked after the typing
    # stopped is answered at once, from the analysis there is. (Even texts have a
    # ``reminder`` key, which the outline lists; odd ones none.)
    from server.lsp.handlers import documents

    monkeypatch.setattr(documents, "SETTLE_S", 1.0)  # (wide: no timing decides this test)
    client.server.session.scheduler.wait_s = 30.0
    uri = (workspace / "chat.conv.yaml").as_uri()
    open_doc(client, uri, text_of(2))
    await run_next(client)
    doc = client.server.session.scheduler._docs[uri]
    doc.changed_at -= 60  # the last change long ago
    quiet = outline(client, uri)
    await turn()
    client.change(uri, 3, text_of(3))  # an edit sent after the request
    await turn()
    # The text before the edit, at once: settling, it would wait for the edit's analysis,
    # which this test has not run (``wait_s``, 30 s here, then answer from this one).
    assert "reminder" in str(await asyncio.wait_for(quiet, 5))
    await run_next(client)
    typing = outline(client, uri)  # the edit just made: the outline settles
    await turn()
    client.change(uri, 4, text_of(4))
    await turn()
    assert not typing.done()
    await run_next(client)
    assert "reminder" in str(await asyncio.wait_for(typing, 10))  # the edit's text


async def test_views_are_computed_with_a_short_switch_interval(
    client: InProcessClient, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The outline and the folds are computed while the threads hand the GIL over often
    (``SWITCH_INTERVAL_S``, a busy views thread would otherwise hold back the loop and the
    analyses): the interval is that during the computation, and what it was after it, a
    computation that raises included."""
    import sys

    from server.lsp import scheduler

    uri = (workspace / "chat.conv.yaml").as_uri()
    open_doc(client, uri, text_of(1))
    await run_next(client)
    before = sys.getswitchinterval()
    assert before != scheduler.SWITCH_INTERVAL_S
    seen: list[float] = []
    symbols = scheduler.Scheduler.shared

    async def watched(self: Any, view: Any, kind: str, compute: Callable[..., Any]) -> Any:
        def noted(v: Any, check: Callable[[], None]) -> Any:
            seen.append(sys.getswitchinterval())
            if kind == "folding":
                raise RuntimeError("a view that fails")
            return compute(v, check)

        return await symbols(self, view, kind, noted)

    monkeypatch.setattr(scheduler.Scheduler, "shared", watched)
    assert await outline(client, uri)
    params = lsp.FoldingRangeParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    with pytest.raises(Exception, match="a view that fails"):
        await client.request(lsp.TEXT_DOCUMENT_FOLDING_RANGE, params, list[lsp.FoldingRange])
    assert seen == [scheduler.SWITCH_INTERVAL_S] * 2
    assert sys.getswitchinterval() == before


def _until_cancelled(started: Any, stopped: list[str]) -> Callable[..., Any]:
    """A computation that runs (up to 10 s) until its check raises, noting why it ended."""
    import time

    from server.lsp import scheduler

    def compute(view: Any, check: Callable[[], None]) -> str:
        started.set()
        for _ in range(1000):
            try:
                check()
            except scheduler.Cancelled:
                stopped.append("cancelled")
                raise
            time.sleep(0.01)
        stopped.append("finished")
        return "finished"

    return compute


async def test_a_view_every_request_gave_up_stops_at_its_next_check(
    client: InProcessClient, workspace: Path
) -> None:
    # An editor cancels its outline and folds when the user types on: computed to its end
    # on the views thread, a stale view took the GIL from the keystroke's analysis
    # (``bench_lsp.py --kinds``, typing every 150 ms at 10 MB: 38 ms a key, 17 without).
    import threading

    sched = client.server.session.scheduler
    uri = (workspace / "chat.conv.yaml").as_uri()
    open_doc(client, uri, text_of(1))
    await run_next(client)
    view = await sched.view(uri)
    assert view is not None
    started, stopped = threading.Event(), []
    compute = _until_cancelled(started, stopped)
    first = asyncio.create_task(sched.shared(view, "outline", compute))
    second = asyncio.create_task(sched.shared(view, "outline", compute))  # (shares it)
    assert await asyncio.to_thread(started.wait, 5)
    first.cancel()
    await asyncio.sleep(0.1)
    assert not stopped and not second.done()  # one request still waits for it
    second.cancel()
    for _ in range(500):
        if stopped:
            break
        await asyncio.sleep(0.01)
    assert stopped == ["cancelled"]
    for task in (first, second):
        with pytest.raises(asyncio.CancelledError):
            await task
    # The next request computes again, not from the computation that was given up.
    assert await sched.shared(view, "outline", lambda v, check: "again") == "again"


async def test_a_cancelled_outline_request_is_answered_as_cancelled_and_stops(
    client: InProcessClient, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Through the protocol: ``$/cancelRequest`` for the only request waiting for the
    # outline stops its computation (the check the handler passes on) and the request is
    # answered with the RequestCancelled error; a later outline is computed and answered.
    import threading

    from server.lsp.handlers import symbols

    uri = (workspace / "chat.conv.yaml").as_uri()
    open_doc(client, uri, text_of(2))
    await run_next(client)
    started, stopped = threading.Event(), []
    real = symbols._prepared
    slow = _until_cancelled(started, stopped)
    monkeypatch.setattr(symbols, "_prepared", lambda u, v, check: slow(v, check))
    request_id = 10_000
    client._feed(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL,
            "params": {"textDocument": {"uri": uri}},
        }
    )
    assert await asyncio.to_thread(started.wait, 5)
    client.notify(lsp.CANCEL_REQUEST, lsp.CancelParams(id=request_id))
    for _ in range(500):
        if request_id in client._responses:
            break
        await asyncio.sleep(0.01)
    assert client._responses.pop(request_id)["error"]["code"] == -32800  # RequestCancelled
    for _ in range(500):
        if stopped:
            break
        await asyncio.sleep(0.01)
    assert stopped == ["cancelled"]
    monkeypatch.setattr(symbols, "_prepared", real)
    assert "reminder" in str(await outline(client, uri))


async def test_a_first_outline_is_made_whole_and_a_later_one_can_be_stopped(
    client: InProcessClient, workspace: Path
) -> None:
    # A conversation's outline entries are kept only once an outline is whole: the first
    # one, given up while the user types, would start from nothing each time.
    from server.lsp import outline as kept_outlines
    from server.lsp import scheduler
    from server.lsp.handlers import symbols

    uri = (workspace / "chat.conv.yaml").as_uri()
    open_doc(client, uri, text_of(2))
    await run_next(client)
    view = await client.server.session.scheduler.view(uri)
    assert view is not None

    def stop() -> None:
        raise scheduler.Cancelled

    assert not kept_outlines.kept(uri)
    assert symbols._prepared(uri, view, stop) is not None  # the first: made whole
    assert kept_outlines.kept(uri)
    with pytest.raises(scheduler.Cancelled):
        symbols._prepared(uri, view, stop)
