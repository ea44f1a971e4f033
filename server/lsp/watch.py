"""The built-in file watcher, for clients that cannot watch files for the server.

watchfiles' recursive watch follows symbolic links: a link to ``/`` inside the workspace
makes it walk (and try to watch) the whole file system, and the first unreadable folder
stops it for good. So the workspace folders are walked here without following links
(skipping VCS data, virtual environments and dependency folders, and at most
``MAX_FOLDERS`` folders), and each folder found is watched on its own, non-recursively.
When a folder is added or removed, the walk is done again and the watch restarted.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

log = logging.getLogger(__name__)

MAX_FOLDERS = 20_000  # folders watched at most (each costs an inotify watch)


def folders(roots: Iterable[Path], skip: frozenset[str], limit: int = MAX_FOLDERS) -> list[Path]:
    """The folders under ``roots`` (themselves included), links not followed."""
    res: list[Path] = []
    seen: set[Path] = set()
    for root in roots:
        for top, dirs, _ in os.walk(root, followlinks=False, onerror=lambda e: None):
            path = Path(top)
            dirs[:] = [d for d in dirs if d not in skip]
            if path in seen:
                continue
            seen.add(path)
            res.append(path)
            if len(res) >= limit:
                log.warning("watching the first %d folders of the workspace only", limit)
                return res
    return res


class Watcher:
    """A thread watching the workspace folders; ``on_change`` gets the changed paths."""

    def __init__(
        self,
        roots: list[Path],
        on_change: Callable[[list[Path]], None],
        *,
        skip: frozenset[str] = frozenset(),
    ) -> None:
        self._roots = list(roots)
        self._on_change = on_change
        self._skip = skip
        self._stop = threading.Event()
        self._restart = threading.Event()  # set: walk again and restart the watch
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="promptls-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._restart.set()

    def set_roots(self, roots: list[Path]) -> None:
        self._roots = list(roots)
        self._restart.set()

    def _run(self) -> None:
        import watchfiles

        while not self._stop.is_set():
            self._restart.clear()
            watched = folders(self._roots, self._skip)
            if not watched:
                self._restart.wait()
                continue
            try:
                for changes in watchfiles.watch(
                    *watched,
                    stop_event=self._restart,
                    recursive=False,
                    ignore_permission_denied=True,
                    watch_filter=None,
                ):
                    paths = [Path(p) for _, p in changes]
                    if any(self._is_folder_change(c, p) for c, p in changes):
                        self._restart.set()
                    files = [p for p in paths if not self._skip.intersection(p.parts)]
                    if files:
                        self._on_change(files)
            except Exception:
                log.warning("file watching failed; watching again", exc_info=True)
                self._stop.wait(1.0)

    def _is_folder_change(self, change: object, path: str) -> bool:
        import watchfiles

        p = Path(path)
        if change == watchfiles.Change.added:
            return p.is_dir() and not p.is_symlink()
        if change == watchfiles.Change.deleted:
            return p.suffix == ""  # a folder cannot be told from a file once gone: walk again
        return False
