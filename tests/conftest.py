"""Session set-up shared by every test directory.

Bytecode for the Python processes the tests start. Well over a hundred tests start
``python -m server`` or ``python -m server.cli`` (the e2e editors, the CLI, the hostile
input, packaging and hook tests). Where ``PYTHONDONTWRITEBYTECODE`` is set (the development
machine sets it), each of them compiled every module of promptls it imported from source
again: 0.15 s of the 1 s a server start costs, 0.13 s of the 0.55 s of a one-file
``promptls lint``. An installed promptls has its ``.pyc`` files, so for the processes the
tests start that variable is dropped and their bytecode goes to a scratch folder of this
session (``PYTHONPYCACHEPREFIX``), never into the checkout: the first process compiles, the
others read, as the benchmarks' processes do (tests/bench/bench_lint.py). The test process
itself is left as it is; the folder is removed at the end of the session. What a run keeps
in the user's cache folder (``PROMPTLS_CACHE_DIR``) goes to a scratch folder too.

The cyclic garbage collector in each test process. Collecting builds thousands of test items
and their modules, strategies and fixtures, which live to the end of the session; with the
collector's defaults, every full collection walks them again, and the tests make enough
objects for a few hundred of those: 15 s of the 125 s that ``tests/assembly`` takes alone.
Once collection is done they are frozen (``gc.freeze``: the collector no longer looks at
them, as the server freezes what an analysis keeps), and the youngest generation is
collected every ``GC_THRESHOLD`` allocations rather than every 700: over the whole suite,
the two workers' time in the collector goes from 20 s to 9 s (the in-process servers hand
what is frozen back every ``THAW_EVERY`` analyses, see ``server.lsp.session``, so part of it
stays). Nothing that a test checks depends on when a cycle is collected: a test that needs
it collects (``gc.collect``). Both are undone when the session ends.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile

import pytest

GC_THRESHOLD = 10_000  # allocations between collections of the youngest generation (700)

_SAVED: dict[str, str | None] = {}
_SAVED_THRESHOLD: list[tuple[int, ...]] = []
_SCRATCH: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    if "PROMPTLS_CACHE_DIR" not in os.environ:
        # The settings verdicts a run keeps where no bytecode is written (the test process
        # itself, a test's quiet subprocess) go here, not into the user's cache folder.
        cache = tempfile.mkdtemp(prefix="promptls-test-cache-")
        _SCRATCH.append(cache)
        _SAVED["PROMPTLS_CACHE_DIR"] = None
        os.environ["PROMPTLS_CACHE_DIR"] = cache
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or "PYTHONPYCACHEPREFIX" in os.environ:
        return
    scratch = tempfile.mkdtemp(prefix="promptls-test-pycache-")
    _SCRATCH.append(scratch)
    for name in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX"):
        _SAVED[name] = os.environ.get(name)
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = scratch


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.collect()
    gc.freeze()
    if not _SAVED_THRESHOLD:
        _SAVED_THRESHOLD.append(gc.get_threshold())
    gc.set_threshold(GC_THRESHOLD, *_SAVED_THRESHOLD[0][1:])


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SAVED_THRESHOLD:
        gc.unfreeze()
        gc.set_threshold(*_SAVED_THRESHOLD.pop())
    for name, value in _SAVED.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _SAVED.clear()
    for scratch in _SCRATCH:
        shutil.rmtree(scratch, ignore_errors=True)
    _SCRATCH.clear()
