"""What ``promptls lint`` is told and what it finds: options, findings, reports, the exit code."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assembly.diagnostics import RULES, Severity
from assembly.text import plural
from server.rulesdoc import suggest_codes

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


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


def parse_codes(value: str | None, *, option: str) -> frozenset[str] | None:
    """Parse a comma-separated list of rule codes; an unknown code is a ``LintError``."""
    if value is None:
        return None
    codes = [c.strip().lower() for c in value.split(",") if c.strip()]
    known = {r.code for r in RULES}
    if "all" in codes:  # every rule, as `ignore[all]` in a suppression comment (ruff: ALL)
        codes = [c for c in codes if c != "all"] + sorted(known)
    for code in codes:
        if code not in known:
            close = suggest_codes(code)
            hint = f"; did you mean `{close[0]}`?" if close else " (`promptls rules` lists them)"
            raise LintError(f"unknown rule code `{code}` in {option}{hint}")
    return frozenset(codes) if codes else None


def exit_code(res: LintResult, *, fail_on: str) -> int:
    """1 when a finding is at or above ``fail_on``, else 0."""
    floor = Severity(fail_on).rank
    failing = any(f.severity.rank >= floor for f in res.findings)
    return EXIT_FINDINGS if failing else EXIT_OK


def summary(res: LintResult) -> str:
    """``Found N problems (…) in F files; M fixable`` or ``All checks passed (F files)``."""
    if not res.findings:
        return f"All checks passed ({plural(len(res.files), 'file')})"
    by = {s: 0 for s in Severity}
    for f in res.findings:
        by[f.severity] += 1
    parts = [
        plural(by[Severity.ERROR], "error"),
        plural(by[Severity.WARNING], "warning"),
        plural(by[Severity.INFO], "info"),
    ]
    if by[Severity.HINT]:
        parts.append(plural(by[Severity.HINT], "hint"))
    n_files = len({f.file for f in res.findings})
    return (
        f"Found {plural(len(res.findings), 'problem')} ({', '.join(parts)}) in "
        f"{plural(n_files, 'file')}; {res.fixable} fixable"
    )


@functools.lru_cache(maxsize=4096)
def shown_path(path: str, cwd: Path) -> str:
    """``path`` relative to ``cwd`` when inside it, else as it is (cached: asked per finding)."""
    p = Path(path)
    if p.is_absolute() and p.is_relative_to(cwd):
        return p.relative_to(cwd).as_posix()
    return path


def relative_uri_path(path: str, src_root: Path) -> str:
    """``path`` as a relative URI path under ``src_root`` when inside it, else as it is."""
    p = Path(path)
    if p.is_absolute() and p.is_relative_to(src_root):
        return p.relative_to(src_root).as_posix()
    return path
