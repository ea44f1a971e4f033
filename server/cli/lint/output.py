"""Printing a lint result in the format asked for (one renderer per format)."""

from __future__ import annotations

import os
import sys
from typing import TextIO

from server.cli.lint.discover import source_root
from server.cli.lint.model import LintOptions, LintResult, summary


def emit(res: LintResult, opts: LintOptions, *, fmt: str, out: TextIO) -> None:
    """Write ``res`` to ``out`` with the renderer of ``fmt``; notes and, for the machine
    formats, the summary go to stderr. Only the renderer used is imported."""
    if fmt == "json":
        from server.cli.lint.render_json import render_json

        out.write(render_json(res, cwd=opts.cwd))
    elif fmt == "sarif":
        from server.cli.lint.render_sarif import render_sarif

        out.write(render_sarif(res, src_root=source_root(opts)))
    elif fmt == "github":
        from server.cli.lint.render_github import render_github

        out.write(render_github(res, src_root=source_root(opts)))
        _append_step_summary(res, opts)
    elif fmt == "gitlab":
        from server.cli.lint.render_gitlab import render_gitlab

        out.write(render_gitlab(res, src_root=source_root(opts)))
    else:
        from server.cli.lint.render_text import render_text

        out.write(render_text(res, cwd=opts.cwd, color=_use_color(out)))
    out.flush()
    for note in res.notes:
        print(f"promptls: note: {note}", file=sys.stderr)
    if not res.files:
        print("promptls: warning: no documents found", file=sys.stderr)
    if fmt in ("json", "sarif", "gitlab"):
        print(summary(res), file=sys.stderr)


def _append_step_summary(res: LintResult, opts: LintOptions) -> None:
    """In GitHub Actions, the findings also go to the job summary (``$GITHUB_STEP_SUMMARY``),
    where GitHub shows them on the run's page whatever the annotation limits."""
    if not os.environ.get("GITHUB_STEP_SUMMARY"):
        return
    from server.cli.github import append_step_summary
    from server.cli.lint.render_github import render_github_summary

    append_step_summary(render_github_summary(res, src_root=source_root(opts)))


def _use_color(out: TextIO) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty())
