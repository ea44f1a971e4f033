"""Which files ``promptls lint`` checks: PATHS walked for the document suffixes and the
``include`` globs, minus ``exclude``, ``.gitignore``d files and ``.git``/``node_modules``/``.venv``
(a file named on the command line is always linted), and each file's workspace root."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from assembly.settings import Settings, resolve_settings
from server import files as fileio
from server.cli.folders import DOCUMENT_SUFFIXES, SKIP_DIRS
from server.cli.lint.model import LintError, LintOptions, shown_path
from server.config import ConfigFile, find_config

# pathspec (30-60 ms to import) is imported where patterns are read: a `.gitignore`, the
# `include`/`exclude` settings.
if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

MAX_GITIGNORE_BYTES = 8 * 1024 * 1024  # checked before reading (``server.files``)


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


@dataclass(frozen=True, slots=True)
class Folder:
    """What the documents of one folder share: their workspace root and the settings file
    above them (None: there is none), looked up once a folder, not once a document."""

    root: Path
    settings_file: ConfigFile | None


def folders_of(files: Iterable[Path], opts: LintOptions) -> dict[Path, Folder]:
    """Each folder of ``files`` with its root and settings file."""
    res: dict[Path, Folder] = {}
    for f in files:
        folder = f.parent
        if folder not in res:
            root = root_for(folder, opts)
            res[folder] = Folder(root, find_config(folder, root))
    return res


def check_configs(files: Iterable[Path], opts: LintOptions) -> dict[Path, Folder]:
    """The folders of ``files`` (``folders_of``); raise ``LintError`` for a settings file
    that cannot be read at all (TOML syntax).

    An invalid *value* is not a configuration error: it is an ``invalid-setting`` finding.
    """
    folders = folders_of(files, opts)
    for folder in folders.values():
        config = folder.settings_file
        if config is not None and config.layer is None and config.error:
            raise LintError(f"{shown_path(str(config.path), opts.cwd)}: {config.error}")
    return folders


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
    repo = git_root(top)
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
                notes.append(f"skipped {shown_path(str(path), opts.cwd)}: {_LEAVES}")
        for name in filenames:
            path = folder / name
            if not (is_document(name) or (include and include.verdict(path, is_dir=False))):
                continue
            if skipped(path, is_dir=False):
                continue
            problem = _not_lintable(path, top)
            if problem is not None:
                notes.append(f"skipped {shown_path(str(path), opts.cwd)}: {problem}")
                continue
            # Every folder os.walk enters is a real one (``top`` is resolved and symlinked
            # folders are not entered), so only a symlinked file has another real path: a
            # file's realpath (a system call per folder above it) was a third of the walk.
            res.append(path.resolve() if os.path.islink(path) else path)
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
    config = find_config(top, root_for(top, opts))
    if config is None:
        return Settings(), top
    if config.layer is None:
        raise LintError(f"{shown_path(str(config.path), opts.cwd)}: {config.error}")
    # Invalid values fall back to the defaults here; linting reports them as findings.
    settings, _ = resolve_settings([config.layer])
    return settings, config.path.parent


def _globs(base: Path, patterns: Sequence[str]) -> _Globs | None:
    return _Globs(base, _spec(patterns)) if patterns else None


def _spec(lines: Sequence[str]) -> GitIgnoreSpec:
    from pathspec import GitIgnoreSpec

    return GitIgnoreSpec.from_lines(lines)


def _gitignore(folder: Path, notes: list[str], opts: LintOptions) -> _Globs | None:
    path = folder / ".gitignore"
    if not os.path.lexists(path):
        return None
    try:
        text = fileio.read_text(path, limit=MAX_GITIGNORE_BYTES)
    except fileio.FileProblem as problem:
        notes.append(f"ignored {shown_path(str(path), opts.cwd)}: {problem.reason}")
        return None
    return _Globs(folder, _spec(text.splitlines()))


def _ignored(path: Path, specs: Sequence[_Globs], *, is_dir: bool) -> bool:
    """Git's rule: the last matching pattern wins, deeper ``.gitignore`` files last."""
    res = False
    for g in specs:
        verdict = g.verdict(path, is_dir=is_dir)
        if verdict is not None:
            res = verdict
    return res


def git_root(path: Path) -> Path | None:
    """The git repository holding ``path`` (the nearest folder with ``.git``), or None."""
    start = path if path.is_dir() else path.parent
    for cur in (start, *start.parents):
        if (cur / ".git").exists():
            return cur
    return None


def root_for(path: Path, opts: LintOptions) -> Path:
    """The workspace root: ``--root``, else the git repository, else the cwd (or the folder)."""
    if opts.root is not None:
        return opts.root
    repo = git_root(path)
    if repo is not None:
        return repo
    if path.is_relative_to(opts.cwd):
        return opts.cwd
    return path if path.is_dir() else path.parent


def source_root(opts: LintOptions) -> Path:
    """The folder SARIF and GitHub paths are relative to: --root, the git repo, the cwd."""
    return opts.root or git_root(opts.cwd) or opts.cwd
