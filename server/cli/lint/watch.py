"""``promptls lint --watch``: lint, then lint again what each change affects."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from assembly.diagnostics import from_exception
from assembly.host import PROMPT_SUFFIX
from server.cli.lint.discover import check_configs, discover
from server.cli.lint.model import EXIT_OK, FileReport, LintError, LintOptions
from server.cli.lint.output import emit
from server.cli.lint.run import lint_files, merge
from server.config import CONFIG_FILES


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
        folders = check_configs(files, opts)
        todo = _affected(files, reports, changed)
        names = {str(f) for f in files}
        if changed is not None and not todo and names == set(reports):
            # Nothing linted reads what changed (another file of the folder, or this
            # command's own output redirected into it, which would re-lint forever).
            return
        for r in lint_files(todo, opts, jobs=jobs, folders=folders):
            reports[r.path] = r
        for stale in set(reports) - names:
            del reports[stale]
        if clear:
            out.write("\x1b[2J\x1b[H")
        res = merge(reports[str(f)] for f in files)
        emit(dataclasses.replace(res, notes=tuple(notes)), opts, fmt=fmt, out=out)

    try:
        relint_reporting(relint, None)
        print(f"promptls: watching {len(targets)} path(s) for changes", file=sys.stderr)
        for changes in watchfiles.watch(*targets, debounce=400, step=50):
            relint_reporting(relint, {_resolved(Path(p)) for _, p in changes})
    except KeyboardInterrupt:
        return EXIT_OK
    return EXIT_OK


def relint_reporting(relint: Callable[[set[Path] | None], None], changed: set[Path] | None) -> None:
    """Run ``relint(changed)``: an error is printed, and watching goes on."""
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
