"""``promptls lint``: check documents headlessly, for CI and the terminal.

The steps are plain functions, one module each: ``discover`` turns PATHS into files
(folders are walked for the document suffixes plus the ``include`` globs, minus
``exclude``, ``.gitignore``d files and ``.git``/``node_modules``/``.venv``; a file named on
the command line is always linted); ``run.lint_files`` analyzes each file with
``server.workspace`` (in forked worker processes when there are many) and returns one
``FileReport`` per file; ``run.merge`` sorts and de-duplicates the findings (a template
referenced by ten conversations reports its problems once); ``output.emit`` prints them
with one renderer per format (``render_text``, ``render_json``, ``render_sarif``,
``render_github``, ``render_gitlab``); ``watch`` lints again what each change affects.
The types are in ``model``.

Findings are the §7 JSON objects of ``server.output.diagnostics_json``: 1-based lines and
columns counted in code points. Inside this package ``file`` is an absolute, resolved path;
each renderer makes it relative (to the working directory, or to the source root for SARIF
and GitHub). A usage or configuration error raises ``LintError`` (exit code 2).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from server.cli.lint.model import LintError, LintOptions, exit_code, parse_codes
from server.cli.lint.output import emit
from server.cli.lint.run import lint
from server.cli.lint.watch import watch


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
    emit(res, opts, fmt=args.format, out=sys.stdout)
    return exit_code(res, fail_on=args.fail_on)
