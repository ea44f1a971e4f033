"""Findings about documents: the ``Diagnostic`` type every producer reports with.

Reading problems (``model.Issue``), invalid settings (``settings.SettingIssue``) and the
pipeline's own errors (``assemble.AssemblyError``) all become ``Diagnostic``s here, so the
command line and the language server show them one way. Ranges are code-point offsets into
the file named by ``path`` (None: the document itself).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from assembly.model import Issue
from assembly.settings import SettingIssue
from assembly.text import TextRange


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    HINT = "hint"


@dataclass(frozen=True, slots=True)
class Related:
    """Another place that explains a finding (the other end of a tool call, …)."""

    range: TextRange
    message: str
    path: str | None = None


@dataclass(frozen=True, slots=True)
class TextEdit:
    range: TextRange
    new_text: str


@dataclass(frozen=True, slots=True)
class Fix:
    title: str
    edits: tuple[TextEdit, ...]


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    severity: Severity
    message: str
    range: TextRange
    path: str | None = None
    related: tuple[Related, ...] = ()
    fix: Fix | None = None
    unnecessary: bool = False


def from_issues(issues: Iterable[Issue]) -> list[Diagnostic]:
    """Turn reading problems into diagnostics."""
    return [
        Diagnostic(i.code, Severity(i.severity), i.message, i.range, path=i.path) for i in issues
    ]


def from_setting_issues(
    issues: Iterable[SettingIssue], *, document_source: str
) -> list[Diagnostic]:
    """Turn settings problems into diagnostics; ``document_source`` names the document's layer.

    A problem in another layer (a ``pyproject.toml``, the editor) keeps that layer's name as
    ``path``; one without a known place points at the start of its file.
    """
    res = []
    for i in issues:
        path = None if i.source == document_source else i.source
        code = "invalid-setting"
        res.append(
            Diagnostic(code, Severity(i.severity), i.message, i.range or TextRange(0, 0), path=path)
        )
    return res


def sort_key(d: Diagnostic) -> tuple[str, int, int, str]:
    return (d.path or "", d.range.start, d.range.end, d.code)
