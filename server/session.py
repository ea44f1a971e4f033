"""The server's state: open documents, their latest analyses, config and capabilities.

Analyses run on one worker thread, off the message loop, so requests stay answered while
a large document is re-assembled. Each analysis is of one document version; a result for a
version that is no longer current is kept for hovers (the last good model) but never
published over a newer version. Edits are coalesced per document instead of debounced: an
edit starts an analysis at once when none of that document is under way, and edits that
arrive during one mark the document ``stale``, so one analysis of the latest version
follows. A lone keystroke waits for nothing; a burst costs one analysis per analysis time.

The session owns the text of the documents it analyses (``document_kind``): each is a
``Rope``, edited in place of pygls' copy (``server.app.PromptProtocol``), so an edit costs
time proportional to the edit, not to the document.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pygls.uris import to_fs_path

from assembly.documents import format_for_path
from assembly.rope import Rope
from server.capabilities import ResolvedCapabilities
from server.convert import TextMap
from server.workspace import Analysis, PromptAnalysis, analyze, analyze_prompt

log = logging.getLogger(__name__)

DocKind = Literal["conversation", "prompt"]
THAW_EVERY = 64  # analyses between unfreezing the objects kept out of garbage collection


@dataclass(frozen=True, slots=True)
class DocState:
    """One open document at one version (replaced on every change, never mutated)."""

    uri: str
    path: Path
    version: int | None
    text: Rope
    kind: DocKind


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A finished analysis of one version of a document."""

    uri: str
    version: int | None
    text_map: TextMap
    analysis: Analysis | PromptAnalysis
    elapsed_s: float


_UNWATCHED = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", ".tox"})


def _watch_filter(change: Any, path: str) -> bool:
    """Skip virtual environments, VCS data and dependency folders."""
    return not _UNWATCHED.intersection(Path(path).parts) and _interesting(path)


def _interesting(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return (
        name in ("pyproject.toml", "promptls.toml")
        or kind_of(name) is not None
        or (name.endswith(".md"))
    )


def document_kind(uri: str) -> DocKind | None:
    """The kind of an open document whose text the session keeps, or None (pygls keeps it)."""
    path = to_fs_path(uri)
    return kind_of(path) if path else None


def kind_of(path: str) -> DocKind | None:
    """The kind of document a file name says, or None for files we do not analyse."""
    if path.lower().endswith(".prompt.md"):
        return "prompt"
    if format_for_path(path) is not None:
        return "conversation"
    return None


@dataclass
class Session:
    """All state of one server; handlers read it and replace its entries."""

    root: Path | None = None  # the workspace root (first workspace folder or rootUri)
    encoding: str = "utf-16"  # the negotiated position encoding
    capabilities: ResolvedCapabilities = field(default_factory=ResolvedCapabilities)
    settings: dict[str, Any] = field(default_factory=dict)  # editor settings (section promptls)
    initial_settings: dict[str, Any] = field(default_factory=dict)  # initializationOptions
    documents: dict[str, DocState] = field(default_factory=dict)  # uri -> open document
    snapshots: dict[str, Snapshot] = field(default_factory=dict)  # uri -> latest analysis
    # uri -> the analysis under way, and the version it is for
    running: dict[str, tuple[int | None, Future[Snapshot]]] = field(default_factory=dict)
    # uris whose text, settings or dependencies changed after their running analysis began
    stale: set[str] = field(default_factory=set)
    executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="promptls-analysis")
    )
    loop: asyncio.AbstractEventLoop | None = None  # the message loop, set at initialize
    n_analyses: int = 0  # analyses finished (the collector is thawed every THAW_EVERY)
    _watch_stop: threading.Event | None = None  # stops the watchfiles thread, if any

    def start_file_watcher(self, on_change: Callable[[list[Path]], None]) -> None:
        """Watch the workspace with watchfiles (for clients that cannot watch for us).

        ``on_change`` runs on the message loop with the changed paths.
        """
        if self.root is None or self._watch_stop is not None or self.loop is None:
            return
        stop = threading.Event()
        self._watch_stop = stop
        root, loop = self.root, self.loop

        def watch() -> None:
            import watchfiles

            try:
                for changes in watchfiles.watch(
                    root, stop_event=stop, recursive=True, watch_filter=_watch_filter
                ):
                    paths = [Path(p) for _, p in changes if _interesting(p)]
                    if paths:
                        loop.call_soon_threadsafe(on_change, paths)
            except Exception:
                log.warning("file watching stopped", exc_info=True)

        threading.Thread(target=watch, name="promptls-watch", daemon=True).start()

    def close(self) -> None:
        if self._watch_stop is not None:
            self._watch_stop.set()
        self.executor.shutdown(wait=False, cancel_futures=True)

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
            deps = getattr(snap.analysis, "dependencies", ())
            if uri in self.documents and path in deps:
                res.append(uri)
        return res

    def template_tools(self, path: Path) -> frozenset[str] | None:
        """The tool names of the open conversations whose last analysis used the template
        at ``path`` (as read, before the template's own tools joined them); None when no
        such conversation says which tools it has."""
        res: set[str] = set()
        said = False
        for uri, snap in list(self.snapshots.items()):
            a = snap.analysis
            if uri not in self.documents or not isinstance(a, Analysis):
                continue
            if path not in a.dependencies:
                continue
            conv = a.parsed or a.conversation
            if conv is not None and conv.tools is not None:
                said = True
                res.update(t.name for t in conv.tools)
        return frozenset(res) if said else None

    def analyze_now(self, doc: DocState) -> Snapshot:
        """Analyse ``doc`` (on the worker thread)."""
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._analyze(doc)
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

    def _analyze(self, doc: DocState) -> Snapshot:
        start = time.perf_counter()
        analysis: Analysis | PromptAnalysis
        if doc.kind == "prompt":  # templates are small: joining one costs nothing
            analysis = analyze_prompt(
                doc.path,
                text=str(doc.text),
                root=self.root,
                editor_settings=self.settings,
                user_tools=self.template_tools(doc.path.resolve()),
            )
        else:
            prev = self.snapshots.get(doc.uri)
            previous = prev.analysis if prev is not None else None
            analysis = analyze(
                doc.path,
                text=doc.text,
                root=self.root,
                editor_settings=self.settings,
                overlay=self.overlay(),
                cold_cache=doc.uri not in self.snapshots,
                previous=previous if isinstance(previous, Analysis) else None,
            )
        elapsed = time.perf_counter() - start
        log.debug("analysed %s@%s in %.1f ms", doc.uri, doc.version, elapsed * 1000)
        return Snapshot(
            doc.uri, doc.version, TextMap.of(doc.text, self.encoding), analysis, elapsed
        )

    def submit(self, doc: DocState, on_done: Callable[[Snapshot], None]) -> Future[Snapshot]:
        """Start analysing ``doc`` on the worker; ``on_done`` runs on the worker when done."""
        running = self.running.get(doc.uri)
        # Join an analysis of this version under way; a finished one is not reused, since a
        # re-analysis of the same version means a setting or a file it reads has changed.
        if running is not None and running[0] == doc.version and not running[1].done():
            return running[1]
        future = self.executor.submit(self.analyze_now, doc)
        self.stale.discard(doc.uri)  # this analysis will see the latest state

        def done(f: Future[Snapshot]) -> None:
            if f.cancelled() or f.exception() is not None:
                if f.exception() is not None:
                    log.error("analysis of %s failed", doc.uri, exc_info=f.exception())
                return
            on_done(f.result())

        future.add_done_callback(done)
        self.running[doc.uri] = (doc.version, future)
        return future

    def is_current(self, snap: Snapshot) -> bool:
        doc = self.documents.get(snap.uri)
        return doc is not None and doc.version == snap.version

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
