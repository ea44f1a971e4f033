"""The server's state: open documents, their latest analyses, config and capabilities.

Analyses run on one worker thread, off the message loop, so requests stay answered while
a large document is re-assembled. Each analysis is of one document version; a result for a
version that is no longer current is kept for hovers (the last good model) but never
published over a newer version. Edits are coalesced per document instead of debounced: an
edit starts an analysis at once when none of that document is under way, and edits that
arrive during one mark the document ``stale``, so one analysis of the latest version
follows. A lone keystroke waits for nothing; a burst costs one analysis per analysis time.

The session owns the text of the documents it analyses (``document_kind``): each is a
``Rope``, edited in place of pygls' copy (``server.lsp.app.PromptProtocol``), so an edit costs
time proportional to the edit, not to the document. Each open conversation has its
``AnalysisHost`` (``assembly.host``): an analysis builds on the previous one, given the edit
composed of every ``didChange`` since that analysis started (``take_edit``).

Its state changes only through its methods (``open``, ``change``, ``close``,
``initialize``, ``record``…); handlers read it, and ask it for a ``snapshot``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pygls.uris import to_fs_path

from assembly.diagnostics import from_exception
from assembly.diagnostics.inputs import called_names
from assembly.host import Analysis, AnalysisHost, DocKind, Edit, PromptAnalysis, kind_of
from assembly.rope import Rope
from assembly.settings import resolve_settings
from server.config import editor_layer
from server.lsp.capabilities import ResolvedCapabilities
from server.lsp.convert import TextMap
from server.lsp.scheduler import Scheduler, moved
from server.lsp.state import DocState, Snapshot
from server.lsp.watch import Watcher
from server.precount import PendingCounts
from server.tokenizers import load_tokenizer, release_tables
from server.workspace import analyze, analyze_prompt, find_root

log = logging.getLogger(__name__)

THAW_EVERY = 64  # analyses between unfreezing the objects kept out of garbage collection


_UNWATCHED = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", ".tox"})


def _is_filesystem_root(path: Path) -> bool:
    try:
        real = path.resolve()
    except (OSError, RuntimeError):
        return False
    return real == Path(real.anchor)


def _interesting(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return (
        name in ("pyproject.toml", "promptls.toml")
        or kind_of(name) is not None
        or (name.endswith(".md"))
    )


def conversation_tools(conv: Any) -> frozenset[str] | None:
    """The tool names a conversation declares (its ``tools``) and the (lower-case) names
    of the tools its messages call, declared or not; None when it declares none and calls
    none. What a template's instruction rules learn from the conversations that use it."""
    if conv is None:
        return None
    tools = conv.tools
    called = called_names(conv.message_data)
    if tools is None and not called:
        return None
    return frozenset(t.name for t in tools or ()) | called


def document_kind(uri: str) -> DocKind | None:
    """The kind of an open document whose text the session keeps, or None (pygls keeps it)."""
    path = to_fs_path(uri)
    return kind_of(path) if path else None


@dataclass
class Session:
    """All state of one server; handlers read it and replace its entries."""

    # The workspace folders (every folder of a multi-root workspace is a root; a
    # document's root is the innermost folder holding it, see ``root_for``).
    roots: list[Path] = field(default_factory=list)
    encoding: str = "utf-16"  # the negotiated position encoding
    capabilities: ResolvedCapabilities = field(default_factory=ResolvedCapabilities)
    settings: dict[str, Any] = field(default_factory=dict)  # editor settings (section promptls)
    initial_settings: dict[str, Any] = field(default_factory=dict)  # initializationOptions
    _documents: dict[str, DocState] = field(default_factory=dict)  # uri -> open document
    _snapshots: dict[str, Snapshot] = field(default_factory=dict)  # uri -> latest analysis
    executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="promptls-analysis")
    )
    loop: asyncio.AbstractEventLoop | None = None  # the message loop, set at initialize
    n_analyses: int = 0  # analyses finished (the collector is thawed every THAW_EVERY)
    scheduler: Scheduler = field(init=False)
    _watcher: Watcher | None = None  # the watchfiles thread, if any
    # template path -> (version key, the template-use computation): the code lens' cache
    _template_uses: dict[Path, tuple[object, asyncio.Future[Any]]] = field(default_factory=dict)
    # uri -> the open conversation's analysis host (used on the analysis thread only)
    _hosts: dict[str, AnalysisHost] = field(default_factory=dict)
    # uri -> the edits since the document's last analysis started, as one (None: unknown)
    _edits: dict[str, Edit | None] = field(default_factory=dict)
    # uri -> the counting child forked when the document's didOpen arrived, until its
    # first analysis takes it (``server.precount.start_open``)
    _counting: dict[str, PendingCounts] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.scheduler = Scheduler(self)

    @property
    def documents(self) -> Mapping[str, DocState]:
        """The open documents we analyse, by uri (read-only: ``open``, ``change``, ``close``)."""
        return MappingProxyType(self._documents)

    @property
    def snapshots(self) -> Mapping[str, Snapshot]:
        """Each open document's latest finished analysis (read-only: ``record``)."""
        return MappingProxyType(self._snapshots)

    # --------------------------------------------------------------------- the documents

    def initialize(
        self, capabilities: ResolvedCapabilities, encoding: str, loop: asyncio.AbstractEventLoop
    ) -> None:
        """Take what ``initialize`` says: the client's capabilities and position encoding."""
        self.capabilities = capabilities
        self.encoding = encoding
        self.loop = loop

    def open(
        self, uri: str, version: int | None, text: Rope, counting: PendingCounts | None = None
    ) -> DocState | None:
        """A document was opened: its state, or None when it is not one we analyse. Its
        analyses start afresh; ``counting``: a child counting its text, forked when its
        ``didOpen`` arrived, for its first analysis (stopped if it is not one we analyse)."""
        path = to_fs_path(uri)
        kind = document_kind(uri)
        old = self._counting.pop(uri, None)
        if old is not None:
            old.close()
        if counting is not None and (path is None or kind != "conversation"):
            counting.close()
            counting = None
        if path is None or kind is None:
            return None
        state = DocState(uri, Path(path), version, text, kind)
        self._hosts[uri] = AnalysisHost()
        self._edits[uri] = None
        self._documents[uri] = state
        if counting is not None:
            self._counting[uri] = counting
        return state

    def counting_waits(self) -> bool:
        """Whether a counting child forked at a ``didOpen`` still waits for its document's
        first analysis (``server.lsp.app.PromptProtocol.count_open``)."""
        return any(c.awaiting for c in list(self._counting.values()))

    def change(self, uri: str, version: int | None, text: Rope, edit: Edit) -> DocState | None:
        """An open document's text became ``text`` by ``edit``: its new state (None when the
        document is not open)."""
        old = self.documents.get(uri)
        if old is None:
            return None
        state = dataclasses.replace(old, version=version, text=text)
        self._documents[uri] = state
        if uri in self._edits:
            before = self._edits[uri]
            self._edits[uri] = None if before is None else before.then(edit)
        return state

    def close(self, uri: str) -> None:
        """A document was closed: forget it, its analyses and its scheduling."""
        self._documents.pop(uri, None)
        self._snapshots.pop(uri, None)
        self._hosts.pop(uri, None)
        self._edits.pop(uri, None)
        counting = self._counting.pop(uri, None)
        if counting is not None:
            counting.close()
        self.scheduler.closed(uri)

    def snapshot(self, uri: str) -> Snapshot | None:
        """The latest finished analysis of a document (current or not)."""
        return self.snapshots.get(uri)

    def record(self, snap: Snapshot) -> None:
        """Keep ``snap`` as its document's latest finished analysis (the scheduler's call)."""
        self._snapshots[snap.uri] = snap

    def take_edit(self, uri: str) -> Edit | None:
        """The edits since the document's last analysis started, as one (None: unknown, as
        before the first analysis); from now on the edits count from the state the
        analysis starting now reads."""
        if uri not in self._edits or uri not in self.documents:
            return None
        edit = self._edits[uri]
        self._edits[uri] = Edit.none(len(self.documents[uri].text))
        return edit

    def template_use(
        self, key: Path, version: object, start: Callable[[], asyncio.Future[Any]]
    ) -> asyncio.Future[Any]:
        """The code lens' template-use computation for ``key`` at ``version``: the one under
        way or done for that version, else ``start()``'s (a failure is not kept)."""
        cached = self._template_uses.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        task = start()
        self._template_uses[key] = (version, task)

        def forget_failure(f: asyncio.Future[Any]) -> None:
            failed = f.cancelled() or f.exception() is not None
            if failed and self._template_uses.get(key, (None, None))[1] is f:
                del self._template_uses[key]

        task.add_done_callback(forget_failure)
        return task

    @property
    def root(self) -> Path | None:
        """The first workspace folder (for callers that know of one root only)."""
        return self.roots[0] if self.roots else None

    def set_roots(self, roots: list[Path]) -> list[Path]:
        """Take the workspace folders; returns those refused (a filesystem root: a client
        that names ``/`` as its workspace would let every document read anything)."""
        refused = [r for r in roots if _is_filesystem_root(r)]
        kept: list[Path] = []
        for r in roots:
            if r not in refused and r not in kept:
                kept.append(r)
        self.roots = kept
        if self._watcher is not None:
            self._watcher.set_roots(self._watch_roots())
        return refused

    def root_for(self, path: Path) -> Path | None:
        """The workspace folder holding ``path`` (the innermost one), or None.

        ``path`` is compared as given and resolved, so a workspace opened through a
        symbolic link holds the documents named through it.
        """
        best: Path | None = None
        candidates = {path, path.resolve()}
        for root in self.roots:
            for r in (root, root.resolve()):
                if any(c.is_relative_to(r) for c in candidates):
                    if best is None or len(r.parts) > len(best.parts):
                        best = r
        return best

    def document_root(self, path: Path) -> Path:
        """The root a document reads inside: its workspace folder; for a document in none,
        its own project (``find_root``: the nearest folder with ``.git``, else its own),
        unless that is the file system's root: then the document itself, inside which
        nothing lies, so every reference it makes is refused."""
        root = self.root_for(path)
        if root is None:
            root = find_root(path)
            if _is_filesystem_root(root):
                root = path
        return root

    def in_workspace(self, path: Path) -> bool:
        """Whether ``path`` (resolved: no symlink out) lies inside a workspace folder."""
        real = path.resolve()
        return any(real.is_relative_to(r.resolve()) for r in self.roots)

    def start_file_watcher(self, on_change: Callable[[list[Path]], None]) -> None:
        """Watch the workspace folders (for clients that cannot watch for us).

        ``on_change`` runs on the message loop with the changed paths. The folders are
        walked without following symbolic links (``server.lsp.watch``), so a link out of the
        workspace (to ``/`` even) is neither watched nor able to stop the watcher.
        """
        if not self.roots or self._watcher is not None or self.loop is None:
            return
        loop = self.loop

        def changed(paths: list[Path]) -> None:
            if loop.is_closed():  # the server ended without a shutdown: no one to tell
                return
            try:
                loop.call_soon_threadsafe(on_change, [p for p in paths if _interesting(str(p))])
            except RuntimeError:  # it closed just now
                return

        self._watcher = Watcher(self._watch_roots(), changed, skip=_UNWATCHED)
        self._watcher.start()

    def _watch_roots(self) -> list[Path]:
        return [r for r in self.roots if r.is_dir()]

    def shutdown(self) -> None:
        """Stop: no analysis starts any more, the watcher and the worker thread end, and so
        do the counting children still waiting for a first analysis."""
        self.scheduler.stop()
        if self._watcher is not None:
            self._watcher.stop()
        self.executor.shutdown(wait=False, cancel_futures=True)
        for uri in list(self._counting):
            counting = self._counting.pop(uri, None)
            if counting is not None:
                counting.close()

    def overlay(self) -> Mapping[Path, str]:
        """Open documents' texts, which win over the files on disk.

        Keyed by resolved path, as references are resolved (a workspace opened through a
        symbolic link names the link in its URIs). A text is joined into a ``str`` only
        when it is read: an analysis reads the few files a conversation references, never
        the (possibly large) conversation being edited.
        """
        # Called on the analysis thread while the loop may add documents: take a copy.
        docs = list(self.documents.values())
        res = {d.path: d.text for d in docs}
        res.update((d.path.resolve(), d.text) for d in docs)
        return _Overlay(res)

    def dependents(self, path: Path) -> list[str]:
        """Open conversations whose last analysis read ``path``."""
        res = []
        for uri, snap in self.snapshots.items():
            base = snap.analysis or (snap.last_good.analysis if snap.last_good else None)
            deps = getattr(base, "dependencies", ())
            if uri in self.documents and path in deps:
                res.append(uri)
        return res

    def template_tools(self, path: Path) -> frozenset[str] | None:
        """The tool names of the open conversations whose last analysis used the template
        at ``path`` (as read, before the template's own tools joined them), and of the
        tools their messages call; None when no such conversation says which tools it has
        or calls any."""
        res: set[str] = set()
        said = False
        for uri, snap in list(self.snapshots.items()):
            a = snap.analysis
            if uri not in self.documents or not isinstance(a, Analysis):
                continue
            if path not in a.dependencies:
                continue
            names = conversation_tools(a.parsed or a.conversation)
            if names is not None:
                said = True
                res.update(names)
        return frozenset(res) if said else None

    def warm_up(self) -> None:
        """Load the tokenizer the editor's settings ask for before a document needs it (on
        a thread of its own after ``initialized``): loading ``o200k_base`` costs about
        0.08 s of CPU and 0.25 s of wall time, which the first open would otherwise wait
        for. A document asking for another encoding loads that one as before; a failure
        here only costs the first open that time."""
        try:
            settings = resolve_settings([editor_layer(self.settings)])[0]
            release_tables()  # a server runs long: the tables' source pages are let go
            load_tokenizer(settings.encoding, model=settings.model)
        except Exception:  # never a reason to fail: the analysis loads it, or says why not
            log.exception("loading the tokenizer ahead of the first document failed")

    def analyze_now(self, doc: DocState, edit: Edit | None = None) -> Snapshot:
        """Analyse ``doc`` (on the worker thread); ``edit``: the change since the document's
        previous analysis (``take_edit``)."""
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._analyze(doc, edit)
        finally:
            if collecting:
                self._release_collector()

    def _release_collector(self) -> None:
        """Freeze what an analysis built, and turn the cyclic garbage collector back on.

        An analysis of a large document builds hundreds of thousands of long-lived objects;
        with the collector on, CPython traverses them over and over while they are built
        (whole-heap collections included): a third of the CPU time of an edit at 10 MB.
        What it builds is freed by reference counting (the cyclic garbage of an analysis is
        a few dozen objects: closures of a ``json`` encoder), so pausing the collector
        loses nothing, and freezing the result keeps later collections (on the message
        loop too) from traversing it again. Every ``THAW_EVERY`` analyses the frozen
        objects are handed back, so the cycles frozen along the way are collected.
        """
        self.n_analyses += 1
        if self.n_analyses % THAW_EVERY == 0:
            gc.unfreeze()
        else:
            gc.freeze()
        gc.enable()

    def _analyze(self, doc: DocState, edit: Edit | None) -> Snapshot:
        start = time.perf_counter()
        analysis: Analysis | PromptAnalysis
        root = self.document_root(doc.path)
        if doc.kind == "prompt":  # templates are small: joining one costs nothing
            analysis = analyze_prompt(
                doc.path,
                text=str(doc.text),
                root=root,
                editor_settings=self.settings,
                user_tools=self.template_tools(doc.path.resolve()),
            )
        else:
            # A document closed meanwhile gets a host of its own, dropped with the result.
            host = self._hosts.get(doc.uri) or AnalysisHost()
            analysis = analyze(
                doc.path,
                text=doc.text,
                root=root,
                editor_settings=self.settings,
                overlay=self.overlay(),
                cold_cache=doc.uri not in self.snapshots,
                pending=self._counting.pop(doc.uri, None),
                host=host,
                edit=edit,
            )
        elapsed = time.perf_counter() - start
        log.debug("analysed %s@%s in %.1f ms", doc.uri, doc.version, elapsed * 1000)
        last = self.snapshots.get(doc.uri)  # its converted positions carry over
        previous = last.text_map if last is not None else None
        text_map = TextMap.of(doc.text, self.encoding, previous=previous)
        return Snapshot(doc.uri, doc.version, text_map, analysis, elapsed)

    def failed_snapshot(
        self, doc: DocState, exc: BaseException, previous: Snapshot | None, generation: int
    ) -> Snapshot:
        """The snapshot of an analysis that raised: an ``internal-error`` at the document
        head, then the last good findings moved into this text and marked stale."""
        last_good = previous if previous is None or previous.analysis is not None else None
        if last_good is None and previous is not None:
            last_good = previous.last_good
        text_map = TextMap.of(doc.text, self.encoding)
        findings = [from_exception(exc, during="analysing the document")]
        if last_good is not None:
            old = last_good.text_map.text
            span = doc.text.changed_span(old) if isinstance(old, Rope) else None
            note = f" (from version {last_good.version}: the last analysis that succeeded)"
            for d in last_good.diagnostics:
                if d.path is not None:
                    continue
                findings.append(
                    dataclasses.replace(
                        d,
                        message=d.message + note,
                        range=moved(d.range, span, len(doc.text)),
                        related=(),
                        fix=None,
                    )
                )
        return Snapshot(
            doc.uri,
            doc.version,
            text_map,
            None,
            0.0,
            generation=generation,
            failure=tuple(findings),
            last_good=last_good,
        )

    def settings_for(self, values: Mapping[str, Any] | None) -> None:
        """Take the editor's settings: ``initializationOptions`` first, then each answer to
        ``workspace/configuration`` or ``didChangeConfiguration`` merged over them (a client
        answering ``{}`` does not wipe what it said at initialize)."""
        self.settings = {**self.initial_settings, **dict(values or {})}

    def initial_settings_for(self, values: Mapping[str, Any] | None) -> None:
        self.initial_settings = dict(values or {})
        self.settings = dict(self.initial_settings)


class _Overlay(Mapping[Path, str]):
    """Open documents' texts by path, joined into ``str`` on first read (see ``overlay``)."""

    def __init__(self, texts: dict[Path, Rope]) -> None:
        self._texts = texts

    def __getitem__(self, path: Path) -> str:
        return str(self._texts[path])

    def __iter__(self) -> Iterator[Path]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)
