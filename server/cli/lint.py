"""``promptls lint``: check documents headlessly, for CI and the terminal.

The steps are plain functions: ``discover`` turns PATHS into files (folders are walked for
the document suffixes plus the ``include`` globs, minus ``exclude``, ``.gitignore``d files
and ``.git``/``node_modules``/``.venv``; a file named on the command line is always
linted); ``lint_files`` analyzes each file with ``server.workspace`` (in forked worker
processes when there are many) and returns one ``FileReport`` per file; ``merge`` sorts
and de-duplicates the findings (a template referenced by ten conversations reports its
problems once); ``render_*`` print them as text, JSON, SARIF 2.1.0, GitHub annotations
or a GitLab Code Quality report.

Findings are the §7 JSON objects of ``server.output.diagnostics_json``: 1-based lines and
columns counted in code points. Inside this module ``file`` is an absolute, resolved path;
each renderer makes it relative (to the working directory, or to the source root for SARIF
and GitHub). A usage or configuration error raises ``LintError`` (exit code 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import multiprocessing
import os
import stat
import sys
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from importlib import metadata
from itertools import repeat
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from pathspec import GitIgnoreSpec

from assembly.diagnostics import RULES, Rule, Severity, from_exception
from assembly.documents import CONVERSATION_SUFFIXES
from assembly.settings import Settings, resolve_settings
from assembly.text import LineIndex
from server import files as fileio
from server.config import CONFIG_FILES, find_config
from server.links import PROJECT_URL, rule_doc_url
from server.output import diagnostics_json, head_diagnostic_json
from server.rulesdoc import suggest_codes
from server.tokenizers import load_tokenizer
from server.workspace import analyze, analyze_prompt

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
PROMPT_SUFFIX = ".prompt.md"
DOCUMENT_SUFFIXES = (*CONVERSATION_SUFFIXES, PROMPT_SUFFIX)
SKIP_DIRS = frozenset({".git", "node_modules", ".venv"})
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
# Below this many files the start-up of worker processes costs more than it saves.
MIN_PARALLEL_FILES = 16
# A source excerpt shows at most this many lines and this many code points of each.
MAX_EXCERPT_LINES = 3
MAX_EXCERPT_WIDTH = 120
MAX_GITIGNORE_BYTES = 8 * 1024 * 1024  # checked before reading (``server.files``)


class LintError(Exception):
    """A usage or configuration error; the command prints it and exits with code 2."""


@dataclass(frozen=True, slots=True)
class LintOptions:
    """What to check; the same in every worker process."""

    cwd: Path
    # Rule codes to run (None: all) and to leave out.
    select: frozenset[str] | None = None
    ignore: frozenset[str] = frozenset()
    # Workspace root for every file (None: each file's git repository, else the cwd).
    root: Path | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    """A §7 finding (``file`` absolute) and the source lines its range covers."""

    obj: dict[str, Any]
    # The first lines of the range (at most MAX_EXCERPT_LINES), for the text excerpt.
    source: tuple[str, ...] = ()
    # How many lines the range spans (it may be more than ``source`` holds).
    n_lines: int = 1

    @property
    def file(self) -> str:
        return str(self.obj["file"])

    @property
    def severity(self) -> Severity:
        return Severity(self.obj["severity"])

    def sort_key(self) -> tuple[Any, ...]:
        r = self.obj["range"]
        s, e = r["start"], r["end"]
        return (self.file, s["line"], s["column"], e["line"], e["column"], self.obj["code"])

    def identity(self) -> tuple[Any, ...]:
        return (*self.sort_key(), self.obj["severity"], self.obj["message"])


@dataclass(frozen=True, slots=True)
class FileReport:
    """The result of linting one file."""

    path: str
    n_bytes: int
    findings: tuple[Finding, ...]
    # Files the document read (its template, project files): a change re-lints it.
    dependencies: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LintResult:
    """Every file checked and every finding, de-duplicated and sorted by place."""

    files: tuple[str, ...]
    findings: tuple[Finding, ...]
    n_bytes: int = 0
    # What discovery skipped and why ("skipped x.conv.json: a FIFO …"), printed to stderr.
    notes: tuple[str, ...] = ()

    @property
    def fixable(self) -> int:
        return sum(1 for f in self.findings if f.obj["fix"] is not None)


def run(args: argparse.Namespace) -> int:
    """Run ``promptls lint`` with parsed arguments; return the exit code."""
    cwd = Path.cwd().resolve()
    root = None
    if args.root:
        root = (cwd / args.root).resolve()
        if not root.is_dir():
            raise LintError(f"--root is not a directory: {args.root}")
    opts = LintOptions(
        cwd=cwd,
        select=parse_codes(args.select, option="--select"),
        ignore=parse_codes(args.ignore, option="--ignore") or frozenset(),
        root=root,
    )
    if args.jobs is not None and args.jobs < 1:
        raise LintError("--jobs must be at least 1")
    paths = [Path(p) for p in args.paths or ["."]]
    if args.watch:
        return watch(paths, opts, fmt=args.format, jobs=args.jobs, out=sys.stdout)
    res = lint(paths, opts, jobs=args.jobs)
    _emit(res, opts, fmt=args.format, out=sys.stdout)
    return exit_code(res, fail_on=args.fail_on)


def parse_codes(value: str | None, *, option: str) -> frozenset[str] | None:
    """Parse a comma-separated list of rule codes; an unknown code is a ``LintError``."""
    if value is None:
        return None
    codes = [c.strip().lower() for c in value.split(",") if c.strip()]
    known = {r.code for r in RULES}
    for code in codes:
        if code not in known:
            close = suggest_codes(code)
            hint = f"; did you mean `{close[0]}`?" if close else " (`promptls rules` lists them)"
            raise LintError(f"unknown rule code `{code}` in {option}{hint}")
    return frozenset(codes) if codes else None


def lint(paths: Sequence[Path], opts: LintOptions, *, jobs: int | None = None) -> LintResult:
    """Discover the files under ``paths``, check their settings files, lint them."""
    notes: list[str] = []
    files = discover(paths, opts, notes=notes)
    check_configs(files, opts)
    return dataclasses.replace(merge(lint_files(files, opts, jobs=jobs)), notes=tuple(notes))


def exit_code(res: LintResult, *, fail_on: str) -> int:
    """1 when a finding is at or above ``fail_on``, else 0."""
    floor = Severity(fail_on).rank
    failing = any(f.severity.rank >= floor for f in res.findings)
    return EXIT_FINDINGS if failing else EXIT_OK


# --- Discovery --------------------------------------------------------------------------


def discover(
    paths: Sequence[Path], opts: LintOptions, *, notes: list[str] | None = None
) -> list[Path]:
    """The files to lint under ``paths``, resolved and sorted.

    Only regular files are linted. In a folder, a FIFO, device or socket named like a
    document, a dangling or looping symlink, and a symlink (to a file or a folder) that
    leads out of the folder are skipped, each with a line in ``notes``. A path named on
    the command line that is not a regular file or a folder is a ``LintError``.
    """
    found: set[Path] = set()
    for p in paths:
        path = opts.cwd / p
        try:
            st = os.stat(path)
        except (OSError, ValueError) as exc:
            if isinstance(exc, FileNotFoundError) and not os.path.lexists(path):
                raise LintError(f"no such file or directory: {p}") from None
            raise LintError(f"cannot read {p}: {_path_problem(path, exc)}") from None
        if stat.S_ISDIR(st.st_mode):
            found.update(_walk(path.resolve(), opts, notes if notes is not None else []))
        elif stat.S_ISREG(st.st_mode):
            found.add(path.resolve())
        else:
            raise LintError(f"{p} is {fileio.kind_of(st.st_mode)}, not a regular file")
    return sorted(found)


def _path_problem(path: Path, exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError) and os.path.islink(path):
        return "a dangling symbolic link"
    return fileio.path_problem(exc)


def is_document(name: str) -> bool:
    """Whether a file name has one of the suffixes linted by default."""
    lower = name.lower()
    return lower.endswith(DOCUMENT_SUFFIXES)


def check_configs(files: Iterable[Path], opts: LintOptions) -> None:
    """Raise ``LintError`` for a settings file that cannot be read at all (TOML syntax).

    An invalid *value* is not a configuration error: it is an ``invalid-setting`` finding.
    """
    seen: set[Path] = set()
    for f in files:
        folder = f.parent
        if folder in seen:
            continue
        seen.add(folder)
        config = find_config(folder, _root_for(folder, opts))
        if config is not None and config.layer is None and config.error:
            raise LintError(f"{_display(str(config.path), opts.cwd)}: {config.error}")


@dataclass(frozen=True, slots=True)
class _Globs:
    """Gitignore-style patterns that apply to the files under ``base``."""

    base: Path
    spec: GitIgnoreSpec

    def verdict(self, path: Path, *, is_dir: bool) -> bool | None:
        """True: matched (ignored/included); False: re-included by ``!``; None: no match."""
        try:
            rel = path.relative_to(self.base).as_posix()
        except ValueError:
            return None
        return self.spec.check_file(rel + "/" if is_dir else rel).include


def _walk(top: Path, opts: LintOptions, notes: list[str]) -> list[Path]:
    settings, base = _walk_settings(top, opts)
    include = _globs(base, settings.include)
    exclude = _globs(base, settings.exclude)
    repo = _git_root(top)
    # .gitignore files above ``top`` apply too, from the repository root down.
    above = [] if repo is None else [d for d in reversed(top.parents) if d.is_relative_to(repo)]
    outer = tuple(g for d in above if (g := _gitignore(d, notes, opts)) is not None)
    specs: dict[Path, tuple[_Globs, ...]] = {}
    res: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(top):
        folder = Path(dirpath)
        own = _gitignore(folder, notes, opts)
        inherited = outer if folder == top else specs[folder.parent]
        here = (*inherited, own) if own is not None else inherited
        specs[folder] = here

        def skipped(path: Path, *, is_dir: bool, here: tuple[_Globs, ...] = here) -> bool:
            if exclude is not None and exclude.verdict(path, is_dir=is_dir):
                return True
            return _ignored(path, here, is_dir=is_dir)

        dirnames[:] = sorted(
            n for n in dirnames if n not in SKIP_DIRS and not skipped(folder / n, is_dir=True)
        )
        for name in dirnames:  # os.walk does not enter symlinked folders; say so if they leave
            path = folder / name
            if os.path.islink(path) and not _inside(path, top):
                notes.append(f"skipped {_display(str(path), opts.cwd)}: {_LEAVES}")
        for name in filenames:
            path = folder / name
            if not (is_document(name) or (include and include.verdict(path, is_dir=False))):
                continue
            if skipped(path, is_dir=False):
                continue
            problem = _not_lintable(path, top)
            if problem is not None:
                notes.append(f"skipped {_display(str(path), opts.cwd)}: {problem}")
                continue
            res.append(path.resolve())
    return res


_LEAVES = "a symbolic link that leads out of the folder being linted"


def _inside(path: Path, top: Path) -> bool:
    try:
        return path.resolve().is_relative_to(top)
    except (OSError, RuntimeError, ValueError):
        return False


def _not_lintable(path: Path, top: Path) -> str | None:
    """Why a file found in a folder is not linted (None: it is)."""
    try:
        fileio.check_regular(path, limit=None)
    except fileio.FileProblem as problem:
        return problem.reason
    if os.path.islink(path) and not _inside(path, top):
        return _LEAVES
    return None


def _walk_settings(top: Path, opts: LintOptions) -> tuple[Settings, Path]:
    """The ``include``/``exclude`` of the settings file that governs ``top``, and its folder."""
    config = find_config(top, _root_for(top, opts))
    if config is None:
        return Settings(), top
    if config.layer is None:
        raise LintError(f"{_display(str(config.path), opts.cwd)}: {config.error}")
    # Invalid values fall back to the defaults here; linting reports them as findings.
    settings, _ = resolve_settings([config.layer])
    return settings, config.path.parent


def _globs(base: Path, patterns: Sequence[str]) -> _Globs | None:
    return _Globs(base, GitIgnoreSpec.from_lines(patterns)) if patterns else None


def _gitignore(folder: Path, notes: list[str], opts: LintOptions) -> _Globs | None:
    path = folder / ".gitignore"
    if not os.path.lexists(path):
        return None
    try:
        text = fileio.read_text(path, limit=MAX_GITIGNORE_BYTES)
    except fileio.FileProblem as problem:
        notes.append(f"ignored {_display(str(path), opts.cwd)}: {problem.reason}")
        return None
    return _Globs(folder, GitIgnoreSpec.from_lines(text.splitlines()))


def _ignored(path: Path, specs: Sequence[_Globs], *, is_dir: bool) -> bool:
    """Git's rule: the last matching pattern wins, deeper ``.gitignore`` files last."""
    res = False
    for g in specs:
        verdict = g.verdict(path, is_dir=is_dir)
        if verdict is not None:
            res = verdict
    return res


def _git_root(path: Path) -> Path | None:
    start = path if path.is_dir() else path.parent
    for cur in (start, *start.parents):
        if (cur / ".git").exists():
            return cur
    return None


def _root_for(path: Path, opts: LintOptions) -> Path:
    """The workspace root: ``--root``, else the git repository, else the cwd (or the folder)."""
    if opts.root is not None:
        return opts.root
    repo = _git_root(path)
    if repo is not None:
        return repo
    if path.is_relative_to(opts.cwd):
        return opts.cwd
    return path if path.is_dir() else path.parent


# --- Linting ----------------------------------------------------------------------------


def lint_files(
    files: Sequence[Path], opts: LintOptions, *, jobs: int | None = None
) -> list[FileReport]:
    """Lint each file, in worker processes when there are many; reports in file order."""
    work = [(f, _root_for(f, opts)) for f in files]
    n_workers = _n_workers(len(work), jobs)
    if n_workers <= 1:
        return [lint_file(f, root, opts) for f, root in work]
    # Load the usual encodings once here: forked workers inherit them instead of each
    # loading them (the default model's, and cl100k_base, the fallback and approximation).
    load_tokenizer(model=Settings().model)
    load_tokenizer()
    chunksize = max(1, min(16, len(work) // (n_workers * 4)))
    reports: list[FileReport] = []
    try:
        with ProcessPoolExecutor(n_workers, mp_context=_FORK) as pool:
            reports.extend(
                pool.map(
                    lint_file,
                    [f for f, _ in work],
                    [r for _, r in work],
                    repeat(opts),
                    chunksize=chunksize,
                )
            )
    except BrokenProcessPool:
        # A worker died (killed, out of memory, a crash in a C extension): the files not
        # reported yet are linted again one process each, so only the culprit is lost.
        reports.extend(_lint_isolated(f, root, opts) for f, root in work[len(reports) :])
    return reports


_FORK = multiprocessing.get_context("fork") if hasattr(os, "fork") else None


def _lint_isolated(path: Path, root: Path, opts: LintOptions) -> FileReport:
    try:
        with ProcessPoolExecutor(1, mp_context=_FORK) as pool:
            return pool.submit(lint_file, path, root, opts).result()
    except BrokenProcessPool as exc:
        return _internal_error_report(path, exc, during="linting (the worker process died)")


def lint_file(path: Path, root: Path, opts: LintOptions) -> FileReport:
    """Analyze one file (a ``*.md`` as a prompt template, anything else as a conversation).

    Never raises: an unexpected exception is an ``internal-error`` finding at the head of
    the file, and the other files are linted as usual.
    """
    try:
        return _lint_file(path, root, opts)
    except Exception as exc:  # a bug in promptls: one finding, not a traceback
        return _internal_error_report(path, exc, during="linting")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _internal_error_report(path: Path, exc: BaseException, *, during: str) -> FileReport:
    obj = head_diagnostic_json(from_exception(exc, during=during), file=str(path))
    return FileReport(path=str(path), n_bytes=0, findings=(Finding(obj),))


def _lint_file(path: Path, root: Path, opts: LintOptions) -> FileReport:
    select, ignore = opts.select, opts.ignore
    if path.name.lower().endswith(".md"):
        prompt = analyze_prompt(path, root=root, select=select, ignore=ignore)
        texts = {str(prompt.path): prompt.text, **prompt.other_texts}
        objs = diagnostics_json(prompt, display_path=str(prompt.path))
        deps: tuple[str, ...] = ()
    else:
        conv = analyze(path, root=root, select=select, ignore=ignore)
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
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    if jobs is not None:
        return max(1, min(jobs, n_files))
    if n_files < MIN_PARALLEL_FILES:
        return 1
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cpus or 1, n_files // 4))


def _with_source(objs: list[dict[str, Any]], texts: dict[str, str]) -> Iterable[Finding]:
    """Attach to each finding the lines of source its range covers."""
    indexes: dict[str, LineIndex] = {}
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
            begin = index.line_start(n)
            stop = text.find("\n", begin)
            lines.append(text[begin : stop if stop != -1 else len(text)].rstrip("\r"))
        yield Finding(obj, tuple(lines), last - first + 1)


# --- Watching ---------------------------------------------------------------------------


def watch(
    paths: Sequence[Path], opts: LintOptions, *, fmt: str, jobs: int | None, out: TextIO
) -> int:
    """Lint, then re-lint what each batch of file changes affects, until Ctrl-C (exit 0).

    A changed document is re-linted with the documents that read it (templates, project
    files); a changed ``*.prompt.md`` or settings file re-lints everything.
    """
    import watchfiles

    discover(paths, opts)  # A missing path is a usage error before anything starts.
    targets = [(opts.cwd / p).resolve() for p in paths]
    reports: dict[str, FileReport] = {}
    clear = fmt == "text" and out.isatty()

    def relint(changed: set[Path] | None) -> None:
        notes: list[str] = []
        files = discover(paths, opts, notes=notes)
        check_configs(files, opts)
        todo = _affected(files, reports, changed)
        for r in lint_files(todo, opts, jobs=jobs):
            reports[r.path] = r
        names = {str(f) for f in files}
        for stale in set(reports) - names:
            del reports[stale]
        if clear:
            out.write("\x1b[2J\x1b[H")
        res = merge(reports[str(f)] for f in files)
        _emit(dataclasses.replace(res, notes=tuple(notes)), opts, fmt=fmt, out=out)

    try:
        _relint_reporting(relint, None)
        print(f"promptls: watching {len(targets)} path(s) for changes", file=sys.stderr)
        for changes in watchfiles.watch(*targets, debounce=400, step=50):
            _relint_reporting(relint, {_resolved(Path(p)) for _, p in changes})
    except KeyboardInterrupt:
        return EXIT_OK
    return EXIT_OK


def _relint_reporting(
    relint: Callable[[set[Path] | None], None], changed: set[Path] | None
) -> None:
    try:
        relint(changed)
    except LintError as exc:
        print(f"promptls: error: {exc}", file=sys.stderr, flush=True)
    except Exception as exc:  # a bug in promptls: say so and keep watching
        d = from_exception(exc, during="re-linting")
        print(f"promptls: error: {d.message}", file=sys.stderr, flush=True)


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError, ValueError):
        return path.absolute()


def _affected(
    files: Sequence[Path], reports: dict[str, FileReport], changed: set[Path] | None
) -> list[Path]:
    if changed is None or any(
        p.name in CONFIG_FILES or p.name.lower().endswith(PROMPT_SUFFIX) for p in changed
    ):
        return list(files)
    names = {str(p) for p in changed}
    return [
        f
        for f in files
        if f in changed
        or str(f) not in reports
        or any(d in names for d in reports[str(f)].dependencies)
    ]


# --- Rendering --------------------------------------------------------------------------


def render_text(res: LintResult, *, cwd: Path, color: bool = False) -> str:
    """Findings like ruff: ``path:line:col: severity[code] message``, excerpt, summary."""
    paint = _painter(color)
    lines: list[str] = []
    for f in res.findings:
        o = f.obj
        s = o["range"]["start"]
        sev = f.severity
        where = paint(f"{_display(f.file, cwd)}:{s['line']}:{s['column']}:", "1")
        label = paint(f"{sev.value}[{o['code']}]", _SEVERITY_COLORS[sev])
        lines.append(f"{where} {label} {o['message']}")
        lines.extend(_excerpt(f, paint, _SEVERITY_COLORS[sev]))
        for r in o["related"]:
            rs = r["range"]["start"]
            rel = f"{_display(r['file'], cwd)}:{rs['line']}:{rs['column']}"
            lines.append(f"  {paint('=', '34')} related: {rel}: {r['message']}")
        if o["fix"] is not None:
            lines.append(f"  {paint('=', '34')} fix available: {o['fix']['title']}")
        lines.append("")
    lines.append(summary(res))
    return "\n".join(lines) + "\n"


def render_json(res: LintResult, *, cwd: Path) -> str:
    """The §7 array of findings, ``file`` relative to ``cwd`` when inside it."""
    objs = [_relocated(f.obj, lambda p: _display(p, cwd)) for f in res.findings]
    return json.dumps(objs, ensure_ascii=False, indent=2) + "\n"


def render_sarif(res: LintResult, *, src_root: Path) -> str:
    """A SARIF 2.1.0 log that GitHub code scanning accepts, URIs relative to ``src_root``."""
    rule_index = {r.code: i for i, r in enumerate(RULES)}
    results = []
    for f in res.findings:
        o = f.obj
        result: dict[str, Any] = {"ruleId": o["code"]}
        if o["code"] in rule_index:
            result["ruleIndex"] = rule_index[o["code"]]
        result["level"] = _sarif_level(f.severity)
        result["message"] = {"text": o["message"]}
        result["locations"] = [
            {"physicalLocation": _sarif_location(o["file"], o["range"], src_root)}
        ]
        if o["related"]:
            result["relatedLocations"] = [
                {
                    "id": i,
                    "physicalLocation": _sarif_location(r["file"], r["range"], src_root),
                    "message": {"text": r["message"]},
                }
                for i, r in enumerate(o["related"])
            ]
        if o["fix"] is not None and o["fix"]["edits"]:
            result["fixes"] = [
                {
                    "description": {"text": o["fix"]["title"]},
                    "artifactChanges": [
                        {
                            "artifactLocation": _sarif_artifact(o["file"], src_root),
                            "replacements": [
                                {
                                    "deletedRegion": _sarif_region(e["range"]),
                                    "insertedContent": {"text": e["new_text"]},
                                }
                                for e in o["fix"]["edits"]
                            ],
                        }
                    ],
                }
            ]
        results.append(result)
    version = _version()
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "promptls",
                        "version": version,
                        "semanticVersion": version,
                        "informationUri": PROJECT_URL,
                        "rules": [_sarif_rule(r) for r in RULES],
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": src_root.as_uri() + "/"}},
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    return json.dumps(log, ensure_ascii=False, indent=2) + "\n"


def render_github(res: LintResult, *, src_root: Path) -> str:
    """GitHub Actions workflow commands (``::error file=…::message``), then the summary."""
    lines = []
    for f in res.findings:
        o = f.obj
        s, e = o["range"]["start"], o["range"]["end"]
        props = {
            "file": _relative_uri_path(o["file"], src_root),
            "line": s["line"],
            "col": s["column"],
            "endLine": e["line"],
            "endColumn": e["column"],
            "title": o["code"],
        }
        message = o["message"]
        for r in o["related"]:
            rs = r["range"]["start"]
            rel = _relative_uri_path(r["file"], src_root)
            message += f"\nrelated: {rel}:{rs['line']}:{rs['column']}: {r['message']}"
        if o["fix"] is not None:
            message += f"\nfix available: {o['fix']['title']}"
        prop_text = ",".join(f"{k}={_gh_property(str(v))}" for k, v in props.items())
        lines.append(f"::{_GITHUB_COMMANDS[f.severity]} {prop_text}::{_gh_data(message)}")
    lines.append(summary(res))
    return "\n".join(lines) + "\n"


def render_gitlab(res: LintResult, *, src_root: Path) -> str:
    """A GitLab Code Quality report: a JSON array of issues, paths relative to the repository.

    The fingerprint identifies an issue across pipelines (GitLab compares them to show what a
    merge request adds or fixes): a hash of the path, the rule and the message, not the line,
    so an edit above a finding does not turn it into a new one; equal findings in one file
    are told apart by their order.
    """
    seen: dict[str, int] = {}
    issues = []
    for f in res.findings:
        o = f.obj
        path = _relative_uri_path(o["file"], src_root)
        key = "\0".join((path, o["code"], o["message"]))
        n = seen[key] = seen.get(key, -1) + 1
        fingerprint = hashlib.sha256(f"{key}\0{n}".encode()).hexdigest()
        s, e = o["range"]["start"], o["range"]["end"]
        issues.append(
            {
                "type": "issue",
                "check_name": o["code"],
                "description": f"{o['code']}: {o['message']}",
                "categories": ["Bug Risk"],
                "severity": _GITLAB_SEVERITIES[f.severity],
                "fingerprint": fingerprint,
                "location": {
                    "path": path,
                    "positions": {
                        "begin": {"line": s["line"], "column": s["column"]},
                        "end": {"line": e["line"], "column": e["column"]},
                    },
                },
            }
        )
    return json.dumps(issues, ensure_ascii=False, indent=2) + "\n"


def summary(res: LintResult) -> str:
    """``Found N problems (…) in F files; M fixable`` or ``All checks passed (F files)``."""
    if not res.findings:
        return f"All checks passed ({_count(len(res.files), 'file')})"
    by = {s: 0 for s in Severity}
    for f in res.findings:
        by[f.severity] += 1
    parts = [
        _count(by[Severity.ERROR], "error"),
        _count(by[Severity.WARNING], "warning"),
        _count(by[Severity.INFO], "info"),
    ]
    if by[Severity.HINT]:
        parts.append(_count(by[Severity.HINT], "hint"))
    n_files = len({f.file for f in res.findings})
    return (
        f"Found {_count(len(res.findings), 'problem')} ({', '.join(parts)}) in "
        f"{_count(n_files, 'file')}; {res.fixable} fixable"
    )


def source_root(opts: LintOptions) -> Path:
    """The folder SARIF and GitHub paths are relative to: --root, the git repo, the cwd."""
    return opts.root or _git_root(opts.cwd) or opts.cwd


def _emit(res: LintResult, opts: LintOptions, *, fmt: str, out: TextIO) -> None:
    if fmt == "json":
        out.write(render_json(res, cwd=opts.cwd))
    elif fmt == "sarif":
        out.write(render_sarif(res, src_root=source_root(opts)))
    elif fmt == "github":
        out.write(render_github(res, src_root=source_root(opts)))
    elif fmt == "gitlab":
        out.write(render_gitlab(res, src_root=source_root(opts)))
    else:
        out.write(render_text(res, cwd=opts.cwd, color=_use_color(out)))
    out.flush()
    for note in res.notes:
        print(f"promptls: note: {note}", file=sys.stderr)
    if not res.files:
        print("promptls: warning: no documents found", file=sys.stderr)
    if fmt in ("json", "sarif", "gitlab"):
        print(summary(res), file=sys.stderr)


_SEVERITY_COLORS = {
    Severity.ERROR: "1;31",
    Severity.WARNING: "1;33",
    Severity.INFO: "1;34",
    Severity.HINT: "1;36",
}
# GitLab's scale is info < minor < major < critical < blocker.
_GITLAB_SEVERITIES = {
    Severity.ERROR: "major",
    Severity.WARNING: "minor",
    Severity.INFO: "info",
    Severity.HINT: "info",
}
_GITHUB_COMMANDS = {
    Severity.ERROR: "error",
    Severity.WARNING: "warning",
    Severity.INFO: "notice",
    Severity.HINT: "notice",
}


def _use_color(out: TextIO) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty())


def _painter(color: bool) -> Callable[[str, str], str]:
    if not color:
        return lambda text, _code: text
    return lambda text, code: f"\x1b[{code}m{text}\x1b[0m"


def _excerpt(f: Finding, paint: Callable[[str, str], str], caret_color: str) -> list[str]:
    """The covered source lines with carets under the range, ruff style."""
    if not f.source:
        return []
    start, end = f.obj["range"]["start"], f.obj["range"]["end"]
    first = start["line"]
    last = first + f.n_lines - 1
    shown_last = first + len(f.source) - 1
    width = len(str(shown_last))
    bar = paint(" " * width + " |", "34")
    res = [bar]
    for i, text in enumerate(f.source):
        n = first + i
        text = text.replace("\t", " ")
        a = start["column"] - 1 if i == 0 else len(text) - len(text.lstrip())
        b = end["column"] - 1 if n == last else len(text)
        shown, a, b = _window(text, a, max(b, a + 1))
        marks = max(1, _cells(shown[a:b]))
        res.append(f"{paint(f'{n:>{width}} |', '34')} {shown}".rstrip())
        res.append(f"{bar} {' ' * _cells(shown[:a])}{paint('^' * marks, caret_color)}")
    if last > shown_last:
        more = last - shown_last
        res.append(f"{bar} … {_count(more, 'more line')}")
    res.append(bar)
    return res


def _window(text: str, a: int, b: int) -> tuple[str, int, int]:
    """Clip a long line to MAX_EXCERPT_WIDTH code points around the range's start."""
    if len(text) <= MAX_EXCERPT_WIDTH:
        return text, a, b
    lo = max(0, min(a - 40, len(text) - MAX_EXCERPT_WIDTH))
    hi = lo + MAX_EXCERPT_WIDTH
    prefix = "…" if lo > 0 else ""
    suffix = "…" if hi < len(text) else ""
    shift = len(prefix) - lo
    return prefix + text[lo:hi] + suffix, a + shift, min(b, hi) + shift


def _cells(text: str) -> int:
    """Terminal columns ``text`` takes: wide East Asian characters count two."""
    n = 0
    for ch in text:
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            continue
        n += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return n


def _display(path: str, cwd: Path) -> str:
    """``path`` relative to ``cwd`` when inside it, else as it is."""
    p = Path(path)
    if p.is_absolute() and p.is_relative_to(cwd):
        return p.relative_to(cwd).as_posix()
    return path


def _relocated(obj: dict[str, Any], where: Callable[[str], str]) -> dict[str, Any]:
    res = dict(obj)
    res["file"] = where(obj["file"])
    res["related"] = [{**r, "file": where(r["file"])} for r in obj["related"]]
    return res


def _relative_uri_path(path: str, src_root: Path) -> str:
    p = Path(path)
    if p.is_absolute() and p.is_relative_to(src_root):
        return p.relative_to(src_root).as_posix()
    return path


def _sarif_artifact(path: str, src_root: Path) -> dict[str, Any]:
    p = Path(path)
    if p.is_absolute() and p.is_relative_to(src_root):
        return {"uri": _quote(p.relative_to(src_root).as_posix()), "uriBaseId": "%SRCROOT%"}
    if p.is_absolute():
        return {"uri": p.as_uri()}
    return {"uri": _quote(path)}


def _quote(path: str) -> str:
    """A path as a URI path; a file name's undecodable bytes are percent-encoded as such."""
    return quote(path, errors="surrogateescape")


def _sarif_location(path: str, rng: dict[str, Any], src_root: Path) -> dict[str, Any]:
    return {"artifactLocation": _sarif_artifact(path, src_root), "region": _sarif_region(rng)}


def _sarif_region(rng: dict[str, Any]) -> dict[str, int]:
    s, e = rng["start"], rng["end"]
    return {
        "startLine": s["line"],
        "startColumn": s["column"],
        "endLine": e["line"],
        "endColumn": e["column"],
    }


def _sarif_level(severity: Severity) -> str:
    return {"error": "error", "warning": "warning"}.get(severity.value, "note")


def _sarif_rule(rule: Rule) -> dict[str, Any]:
    doc = rule.doc or rule.code
    short = doc.splitlines()[0]
    return {
        "id": rule.code,
        "name": "".join(w.capitalize() for w in rule.code.split("-")),
        "shortDescription": {"text": short},
        "fullDescription": {"text": doc},
        "help": {"text": doc, "markdown": doc},
        "helpUri": rule_doc_url(rule.code),
        "defaultConfiguration": {"level": _sarif_level(rule.severity)},
    }


def _version() -> str:
    try:
        return metadata.version("promptls")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_property(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
