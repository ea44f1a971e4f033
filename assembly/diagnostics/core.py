"""The types of the rule engine: ``Diagnostic``, ``Rule`` and ``RuleContext``.

Reading problems (``model.Issue``), invalid settings (``settings.SettingIssue``) and the
pipeline's own errors (``assemble.AssemblyError``) all become ``Diagnostic``s, and so does
every rule's finding, so the command line and the language server show them one way.
Ranges are code-point offsets into the file named by ``path`` (None: the document itself).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum

from assembly.assemble import Assembly
from assembly.model import Conversation, Issue, PromptTemplate
from assembly.settings import SettingIssue, Settings
from assembly.text import TextRange
from assembly.tokens import Tokenizer


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    HINT = "hint"

    @property
    def rank(self) -> int:
        """Higher is more severe (``--fail-on`` compares ranks)."""
        return {"error": 3, "warning": 2, "info": 1, "hint": 0}[self.value]


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


@dataclass(frozen=True, slots=True)
class RuleContext:
    """Everything a rule may look at; rules are pure functions of it.

    ``template`` is the system prompt template: the document itself when a ``*.prompt.md``
    is checked on its own (``template_path`` None), else the file a conversation's
    ``system_prompt`` points to (``template_path`` names it, and findings in it carry that
    path). ``reported`` holds what reading, configuring and assembling already found.
    """

    text: str
    settings: Settings
    tokenizer: Tokenizer
    conversation: Conversation | None = None
    assembly: Assembly | None = None
    template: PromptTemplate | None = None
    template_path: str | None = None
    reported: tuple[Diagnostic, ...] = ()


RuleCheck = Callable[[RuleContext], Iterator[Diagnostic]]


@dataclass(frozen=True, slots=True)
class Rule:
    """One entry of the rule table: a stable slug code, a default severity, a check.

    The check's docstring is the rule's documentation: a one-line summary, then the
    sections ``What it does``, ``Why is this bad?`` and ``Example``.
    """

    code: str
    severity: Severity
    check: RuleCheck
    fixable: bool = False

    @property
    def summary(self) -> str:
        return (self.check.__doc__ or "").strip().splitlines()[0]

    @property
    def doc(self) -> str:
        return inspect.cleandoc(self.check.__doc__ or "")


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
