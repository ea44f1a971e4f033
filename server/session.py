"""The server's state: open documents, their latest analyses, config and capabilities.

Analyses run on one worker thread, off the message loop, so requests stay answered while
a large document is re-assembled. Each analysis is of one document version; a result for a
version that is no longer current is kept for hovers (the last good model) but never
published over a newer version. Edits are debounced per document.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from assembly.documents import format_for_path
from server.capabilities import ResolvedCapabilities
from server.convert import TextMap
from server.workspace import Analysis, PromptAnalysis, analyze, analyze_prompt

log = logging.getLogger(__name__)

DocKind = Literal["conversation", "prompt"]
DEBOUNCE_S = 0.05


@dataclass(frozen=True, slots=True)
class DocState:
    """One open document at one version (replaced on every change, never mutated)."""

    uri: str
    path: Path
    version: int | None
    text: str
    kind: DocKind


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A finished analysis of one version of a document."""

    uri: str
    version: int | None
    text_map: TextMap
    analysis: Analysis | PromptAnalysis
    elapsed_s: float

    @property
    def is_conversation(self) -> bool:
        return isinstance(self.analysis, Analysis)


def _interesting(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return (
        name in ("pyproject.toml", "promptls.toml")
        or kind_of(name) is not None
        or (name.endswith(".md"))
    )


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
    documents: dict[str, DocState] = field(default_factory=dict)  # uri -> open document
    snapshots: dict[str, Snapshot] = field(default_factory=dict)  # uri -> latest analysis
    # uri -> the analysis under way, and the version it is for
    running: dict[str, tuple[int | None, Future[Snapshot]]] = field(default_factory=dict)
    # uri -> timer of a debounced analysis
    timers: dict[str, asyncio.TimerHandle] = field(default_factory=dict)
    executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="promptls-analysis")
    )
    loop: asyncio.AbstractEventLoop | None = None  # the message loop, set at initialize
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
                for changes in watchfiles.watch(root, stop_event=stop, recursive=True):
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

    def overlay(self) -> dict[Path, str]:
        """Open documents' texts, which win over the files on disk."""
        return {d.path: d.text for d in self.documents.values()}

    def dependents(self, path: Path) -> list[str]:
        """Open conversations whose last analysis read ``path``."""
        res = []
        for uri, snap in self.snapshots.items():
            deps = getattr(snap.analysis, "dependencies", ())
            if uri in self.documents and path in deps:
                res.append(uri)
        return res

    def analyze_now(self, doc: DocState) -> Snapshot:
        """Analyse ``doc`` (on the worker thread)."""
        start = time.perf_counter()
        analysis: Analysis | PromptAnalysis
        if doc.kind == "prompt":
            analysis = analyze_prompt(
                doc.path, text=doc.text, root=self.root, editor_settings=self.settings
            )
        else:
            analysis = analyze(
                doc.path,
                text=doc.text,
                root=self.root,
                editor_settings=self.settings,
                overlay=self.overlay(),
            )
        elapsed = time.perf_counter() - start
        log.debug("analysed %s@%s in %.1f ms", doc.uri, doc.version, elapsed * 1000)
        return Snapshot(
            doc.uri, doc.version, TextMap.of(doc.text, self.encoding), analysis, elapsed
        )

    def submit(self, doc: DocState, on_done: Callable[[Snapshot], None]) -> Future[Snapshot]:
        """Start analysing ``doc`` on the worker; ``on_done`` runs on the worker when done."""
        running = self.running.get(doc.uri)
        if running is not None and running[0] == doc.version:
            return running[1]
        future = self.executor.submit(self.analyze_now, doc)

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
        self.settings = dict(values or {})
