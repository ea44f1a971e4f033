"""Linting files: each analysed with ``server.workspace`` (in forked worker processes when
there are many, one crash costing one file), then merged: sorted, and de-duplicated (a
template referenced by ten conversations reports its problems once)."""

from __future__ import annotations

import dataclasses
import gc
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from assembly.diagnostics import from_exception
from assembly.settings import Settings, resolve_settings
from assembly.syntax import yaml_loader
from assembly.text import LineIndex
from server.cli.lint.discover import Folder, check_configs, discover, folders_of
from server.cli.lint.model import FileReport, Finding, LintOptions, LintResult
from server.cpus import usable_cpus
from server.output import diagnostics_json, head_diagnostic_json
from server.tokenizers import load_tokenizer
from server.workspace import analyze, analyze_prompt

# Below this many files the start-up of worker processes costs more than it saves.
MIN_PARALLEL_FILES = 16
# Files whose analysis may read YAML: conversations in YAML, templates (front matter).
_YAML_READERS = frozenset({".yaml", ".yml", ".md"})


# A source excerpt shows at most this many lines and this many code points of each.
MAX_EXCERPT_LINES = 3


def lint(paths: Sequence[Path], opts: LintOptions, *, jobs: int | None = None) -> LintResult:
    """Discover the files under ``paths``, check their settings files, lint them."""
    notes: list[str] = []
    files = discover(paths, opts, notes=notes)
    folders = check_configs(files, opts)
    res = merge(lint_files(files, opts, jobs=jobs, folders=folders))
    return dataclasses.replace(res, notes=tuple(notes))


def lint_files(
    files: Sequence[Path],
    opts: LintOptions,
    *,
    jobs: int | None = None,
    folders: Mapping[Path, Folder] | None = None,
) -> list[FileReport]:
    """Lint each file, in worker processes when there are many; reports in file order.

    A file's root and settings file are its folder's (``folders``, else looked up here):
    found, read and parsed once a folder, not once a file."""
    table = dict(folders or {})
    table.update(folders_of([f for f in files if f.parent not in table], opts))
    work = [(f, table[f.parent]) for f in files]
    n_workers = _n_workers(len(work), jobs)
    if n_workers <= 1:
        return [lint_file(f, folder, opts) for f, folder in work]
    # Load here the encodings the folders' settings files ask for (the default model's
    # where a folder has none): forked workers inherit them instead of each loading them.
    # Another one a document's own settings pick (cl100k_base for Claude, say) is loaded
    # by the workers whose files need it, in parallel: as fast, and no memory where none
    # does.
    for settings in _folder_settings(table.values()):
        load_tokenizer(settings.encoding, model=settings.model)
    # PyYAML too, when a file may need it (a YAML conversation, a template's front
    # matter): imported here once, not by each worker on its first such file, compiling
    # its patterns again on every run (what a worker compiles, its exit never keeps in the
    # code cache, ``server.codecache``).
    if any(f.suffix.lower() in _YAML_READERS for f, _ in work):
        yaml_loader()
    # The models' windows, which settings read where no source sets one (``resolve_settings``).
    import assembly.windows  # noqa: F401

    # What the workers inherit is never scanned by their collections (nor written to by
    # them: copy-on-write pages stay shared).
    gc.freeze()
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    reports: list[FileReport] = []
    try:
        with ProcessPoolExecutor(n_workers, mp_context=_fork_context()) as pool:
            batches = [
                pool.submit(_lint_batch, work[start:stop], opts)
                for start, stop in _batches(len(work), n_workers)
            ]
            for batch in batches:
                reports.extend(batch.result())
    except BrokenProcessPool:
        # A worker died (killed, out of memory, a crash in a C extension): the files not
        # reported yet are linted again one process each, so only the culprit is lost.
        reports.extend(_lint_isolated(f, folder, opts) for f, folder in work[len(reports) :])
    return reports


def _folder_settings(folders: Iterable[Folder]) -> list[Settings]:
    """The settings each distinct settings file of ``folders`` gives (invalid values left
    at their defaults, as the analysis does), and the defaults for a folder without one."""
    files = {f.settings_file.path if f.settings_file else None: f.settings_file for f in folders}
    return [
        resolve_settings([c.layer])[0] if c is not None and c.layer is not None else Settings()
        for c in files.values()
    ]


MAX_BATCH = 16  # files a worker is handed at once


def _batches(n_files: int, n_workers: int) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of each batch, in file order: a quarter of each worker's share of
    the files left, at most ``MAX_BATCH`` and at least one. Batches shrink towards the
    end, so the workers finish together (a last batch of 16 files could leave the other
    cores idle while one worker ends it); early ones are large, so handing them out costs
    little."""
    start = 0
    while start < n_files:
        size = max(1, min(MAX_BATCH, (n_files - start) // (n_workers * 4)))
        yield start, start + size
        start += size


def _lint_batch(batch: Sequence[tuple[Path, Folder]], opts: LintOptions) -> list[FileReport]:
    return [lint_file(f, folder, opts) for f, folder in batch]


def _fork_context() -> Any:
    """multiprocessing's "fork" context (None where there is no ``fork``), imported only
    when workers are started: ``concurrent.futures``' process pool and ``multiprocessing``
    import ``socket``, ``pickle``, ``logging`` and ``subprocess`` (20 ms of a small lint's
    start-up, which forks none)."""
    import multiprocessing

    return multiprocessing.get_context("fork") if hasattr(os, "fork") else None


def _lint_isolated(path: Path, folder: Folder, opts: LintOptions) -> FileReport:
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    try:
        with ProcessPoolExecutor(1, mp_context=_fork_context()) as pool:
            return pool.submit(lint_file, path, folder, opts).result()
    except BrokenProcessPool as exc:
        return _internal_error_report(path, exc, during="linting (the worker process died)")


def lint_file(path: Path, folder: Folder, opts: LintOptions) -> FileReport:
    """Analyze one file (a ``*.md`` as a prompt template, anything else as a conversation).

    Never raises: an unexpected exception is an ``internal-error`` finding at the head of
    the file, and the other files are linted as usual. The cyclic garbage collector is
    off while the file is analysed (its objects are freed by reference counting; the
    collector would walk them as they are built) and back on between files.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _lint_file(path, folder, opts)
    except Exception as exc:  # a bug in promptls: one finding, not a traceback
        return _internal_error_report(path, exc, during="linting")
    finally:
        if collecting:
            gc.enable()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _internal_error_report(path: Path, exc: BaseException, *, during: str) -> FileReport:
    obj = head_diagnostic_json(from_exception(exc, during=during), file=str(path))
    return FileReport(path=str(path), n_bytes=0, findings=(Finding(obj),))


def _lint_file(path: Path, folder: Folder, opts: LintOptions) -> FileReport:
    select, ignore = opts.select, opts.ignore
    root, config = folder.root, folder.settings_file
    if path.name.lower().endswith(".md"):
        prompt = analyze_prompt(path, root=root, select=select, ignore=ignore, settings_file=config)
        texts = {str(prompt.path): prompt.text, **prompt.other_texts}
        objs = diagnostics_json(prompt, display_path=str(prompt.path))
        deps: tuple[str, ...] = ()
    else:
        conv = analyze(
            path,
            root=root,
            select=select,
            ignore=ignore,
            settings_file=config,
            findings_only=True,
        )
        texts = {str(conv.path): conv.text, **conv.other_texts}
        objs = diagnostics_json(conv, display_path=str(conv.path))
        deps = tuple(str(d) for d in conv.dependencies)
    return FileReport(
        path=str(path),
        n_bytes=_size(path),
        findings=tuple(_with_source(objs, texts)),
        dependencies=deps,
    )


def merge(reports: Iterable[FileReport]) -> LintResult:
    """One result: findings de-duplicated (the first report wins) and sorted by place."""
    reports = list(reports)
    seen: dict[tuple[Any, ...], Finding] = {}
    for r in reports:
        for f in r.findings:
            seen.setdefault(f.identity(), f)
    findings = sorted(seen.values(), key=Finding.sort_key)
    return LintResult(
        files=tuple(r.path for r in reports),
        findings=tuple(findings),
        n_bytes=sum(r.n_bytes for r in reports),
    )


def _n_workers(n_files: int, jobs: int | None) -> int:
    if jobs is not None:
        wanted = min(jobs, n_files)
    elif n_files < MIN_PARALLEL_FILES:
        wanted = 1
    else:
        wanted = min(usable_cpus(), n_files // 4)
    if wanted <= 1:
        return 1  # (without importing multiprocessing: ``_fork_context``)
    import multiprocessing

    return wanted if "fork" in multiprocessing.get_all_start_methods() else 1


def _with_source(objs: list[dict[str, Any]], texts: dict[str, str]) -> Iterable[Finding]:
    """Attach to each finding the lines of source its range covers."""
    indexes: dict[str, LineIndex] = {}
    # One string per source line, shared by every finding on it (a minified document is one
    # line of megabytes that may carry thousands of findings).
    line_texts: dict[tuple[str, int], str] = {}
    for obj in objs:
        text = texts.get(obj["file"])
        if text is None:
            yield Finding(obj)
            continue
        index = indexes.get(obj["file"])
        if index is None:
            index = indexes[obj["file"]] = LineIndex(text)
        start, end = obj["range"]["start"], obj["range"]["end"]
        first, last = start["line"] - 1, end["line"] - 1
        # A range that ends at the start of a line ends on the line before it.
        if last > first and end["column"] == 1:
            last -= 1
        lines = []
        for n in range(first, min(last, first + MAX_EXCERPT_LINES - 1) + 1):
            line = line_texts.get((obj["file"], n))
            if line is None:
                begin = index.line_start(n)
                stop = text.find("\n", begin)
                line = text[begin : stop if stop != -1 else len(text)].rstrip("\r")
                line_texts[(obj["file"], n)] = line
            lines.append(line)
        yield Finding(obj, tuple(lines), last - first + 1)
