"""The types of the rule engine: ``Diagnostic``, ``Rule`` and ``RuleContext``.

Reading problems (``model.Issue``), invalid settings (``settings.SettingIssue``) and the
pipeline's own errors (``assemble.AssemblyError``) all become ``Diagnostic``s, and so does
every rule's finding, so the command line and the language server show them one way.
Ranges are code-point offsets into the file named by ``path`` (None: the document itself).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

from assembly.assemble import Assembly
from assembly.model import MAX_ISSUES_PER_CODE, Conversation, Issue, Message, PromptTemplate
from assembly.settings import SettingIssue
from assembly.text import TextRange
from assembly.tokens import Tokenizer

if TYPE_CHECKING:  # pydantic is imported when settings are first read
    from assembly.settings import Settings


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
    """Replace ``range`` of the document with ``new_text``."""

    range: TextRange
    new_text: str


@dataclass(frozen=True, slots=True)
class Fix:
    """A quick fix: its title and the edits that make it, applied together."""

    title: str
    edits: tuple[TextEdit, ...]


class LateRange(TextRange):
    """A range inside message ``message`` that the engine finds for the version the
    diagnostics are produced for: ``locate`` gets that message's source (an
    ``engine.MessageSource``) and answers the range (``key`` names what it locates, so the
    answer is kept while the message object is). Until then it stands at ``at``."""

    __slots__ = ("key", "locate", "message")

    def __init__(self, message: int, at: int, key: object, locate: Callable[[Any], TextRange]):
        super().__init__(at, at)
        self.message = message
        self.key = key
        self.locate = locate


@dataclass(frozen=True, slots=True)
class LateFix(Fix):
    """A fix whose edits read the text around a message, which no rule input holds: the
    engine makes them for the version the diagnostics are produced for (``make`` gets the
    whole analysis and the message at ``message``; None: no safe fix) and replaces this by
    the ``Fix`` (or by nothing)."""

    message: int = 0
    make: Callable[[RuleContext, Message], tuple[TextEdit, ...] | None] | None = None
    # The edits read only the message itself: they are kept while its object is.
    local: bool = False


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding: the rule's code, its severity, its message and where it is (``path``: in
    another file), with related places and a fix."""

    code: str
    severity: Severity
    message: str
    range: TextRange
    path: str | None = None
    related: tuple[Related, ...] = ()
    fix: Fix | None = None
    unnecessary: bool = False

    def shifted(self, delta: int) -> Diagnostic:
        """This finding of a text placed ``delta`` further into a larger one (a dataset's
        record in its document): its ranges there, and those of its fix and related
        places in the same text (not those in another file)."""
        if self.path is not None or not delta:
            return self
        related = tuple(
            r if r.path is not None else Related(r.range.shift(delta), r.message)
            for r in self.related
        )
        fix = self.fix
        if fix is not None:
            edits = tuple(TextEdit(e.range.shift(delta), e.new_text) for e in fix.edits)
            fix = dataclasses.replace(fix, edits=edits)
        return Diagnostic(
            code=self.code,
            severity=self.severity,
            message=self.message,
            range=self.range.shift(delta),
            related=related,
            fix=fix,
            unnecessary=self.unnecessary,
        )


@dataclass(frozen=True, slots=True)
class RuleContext:
    """Everything a rule may look at; rules are pure functions of it.

    ``template`` is the system prompt template: the document itself when a ``*.prompt.md``
    is checked on its own (``template_path`` None), else the file a conversation's
    ``system_prompt`` points to (``template_path`` names it, and findings in it carry that
    path). ``reported`` holds what reading, configuring and assembling already found.
    ``text`` may be any immutable str-like text (a ``Rope``): rules only index and slice
    it (``window.py``). ``memo`` holds per-message values kept from earlier runs
    (the engine sets it for the rules of the whole analysis; None: computed afresh).
    """

    text: str
    settings: Settings
    tokenizer: Tokenizer
    conversation: Conversation | None = None
    assembly: Assembly | None = None
    template: PromptTemplate | None = None
    template_path: str | None = None
    reported: tuple[Diagnostic, ...] = ()
    memo: MessageMemo | None = None


_T = TypeVar("_T")


class MessageMemo:
    """Values computed from a single message, kept as long as that ``Message`` object is.

    A message object never changes, and the re-read after an edit shares every message
    the edit did not touch, so what a rule derives from one message alone (the calls
    written in its text, the file ids it names) is computed once per message object.
    Values must not hold absolute offsets: a shared message may have moved.

    ``shapes`` is an object that stays the same while every message of the document keeps
    its shape (all but its ranges and contents: the engine's ``Branch`` input): the
    engine replaces it whenever that input changes. A value computed from the
    shapes alone (the first system message of the branch, the tools called) can be kept
    with ``derived`` under a key holding it.

    A value made from what changed since its last value (``carried``) is made by the
    same function as from nothing: the budget inputs keep the places of the history's
    model messages while only messages replaced in place keep them.

    ``callers``: the stored messages of this run that make tool calls, in document order
    (the engine sets them from its ``MessageKinds`` each run; None: not known, read every
    message), so a value over the calls reads a few hundred messages, not all of them.
    """

    __slots__ = ("_carried", "_derived", "_run", "_values", "callers", "shapes")

    def __init__(self) -> None:
        self._values: dict[int, tuple[Message, dict[str, Any]]] = {}
        self._derived: dict[str, tuple[object, Any]] = {}
        self._carried: dict[str, Any] = {}
        self._run: dict[tuple[str, int], tuple[object, Any]] = {}
        self.shapes: object = object()
        self.callers: Sequence[Message] | None = None

    def of_run(self, kind: str, owner: object, compute: Callable[[], _T]) -> _T:
        """A value derived from ``owner`` (the assembly, …), shared by the rules of one
        run and dropped at its end (``end_run``)."""
        key = (kind, id(owner))
        hit = self._run.get(key)
        if hit is not None and hit[0] is owner:
            return hit[1]  # type: ignore[no-any-return]
        value = compute()
        self._run[key] = (owner, value)
        return value

    def end_run(self) -> None:
        self._run.clear()

    def derived(self, kind: str, key: object, compute: Callable[[], _T]) -> _T:
        """A value derived from several messages, kept while ``key`` stays equal.

        One value per ``kind``. It may hold message objects (which can move), never offsets.
        """
        hit = self._derived.get(kind)
        if hit is not None and (hit[0] is key or hit[0] == key):
            return hit[1]  # type: ignore[no-any-return]
        value = compute()
        self._derived[kind] = (key, value)
        return value

    def carried(self, kind: str, make: Callable[[Any], _T]) -> _T:
        """``make(last)``, where ``last`` is the value ``make`` gave for ``kind`` the last
        time (None: never, or since ``clear``). The last value only saves work: ``make``
        must give what ``make(None)`` would (one implementation, from nothing or from
        its previous value and what changed since)."""
        value = self._carried[kind] = make(self._carried.get(kind))
        return value

    def get(self, kind: str, m: Message, compute: Callable[[Message], _T]) -> _T:
        """The ``kind`` value of ``m``, computed by ``compute(m)`` the first time."""
        hit = self._values.get(id(m))
        if hit is None or hit[0] is not m:
            hit = (m, {})
            self._values[id(m)] = hit
        values = hit[1]
        if kind in values:
            return values[kind]  # type: ignore[no-any-return]
        value = values[kind] = compute(m)
        return value

    def fork(self) -> MessageMemo:
        """A copy that runs on without changing this one (the values are shared: each
        is a pure value of its message, or immutable)."""
        res = MessageMemo()
        res._values = dict(self._values)
        res._derived = dict(self._derived)
        res._carried = dict(self._carried)
        res.shapes = self.shapes
        res.callers = self.callers
        return res

    def clear(self) -> None:
        self._values.clear()
        self._derived.clear()
        self._carried.clear()
        self._run.clear()
        self.shapes = object()
        self.callers = None

    def forget(self, m: Message) -> None:
        """Drop the values of a message that is no longer in the document."""
        hit = self._values.get(id(m))
        if hit is not None and hit[0] is m:
            del self._values[id(m)]

    def retain(self, messages: Iterable[Message]) -> None:
        """Keep only the values of ``messages``."""
        live = {id(m) for m in messages}
        self._values = {k: v for k, v in self._values.items() if k in live}


def message_memo(ctx: RuleContext) -> MessageMemo:
    """The memo of a run (a fresh one when the caller keeps none)."""
    return ctx.memo if ctx.memo is not None else MessageMemo()


@dataclass(frozen=True, slots=True)
class Rule:
    """One entry of the rule table: a stable slug code, a default severity, a check.

    The check's docstring is the rule's documentation: a one-line summary, then the
    sections ``What it does``, ``Why is this bad?`` and ``Example``. What the check reads
    is exactly its parameters, named by their types (``engine``): a ``RuleContext`` (the
    whole analysis: the rule runs every time), or typed summaries of the analysis
    (``inputs``: the rule runs again only when one of them differs), the first of which
    may be a ``MessageSource`` (a per-message rule, run once per message object).
    """

    code: str
    severity: Severity
    check: Callable[..., Iterable[Diagnostic]]
    fixable: bool = False
    # Its findings show the assembly's token counts (not only its decisions): a caller
    # that assembled with bounds (``tokens.BoundTokenizer``) assembles again with counts.
    counts: bool = False

    @property
    def summary(self) -> str:
        return (self.check.__doc__ or "").strip().splitlines()[0]

    @property
    def doc(self) -> str:
        return inspect.cleandoc(self.check.__doc__ or "")


def capped_per_code(codes: Sequence[str]) -> Iterator[tuple[int, int]]:
    """``(index, more)`` of the items to list, given each item's code in order: the first
    ``MAX_ISSUES_PER_CODE`` of each code (``more`` 0), then, at the first one left out, the
    number left out (a code with exactly one more than the cap lists them all)."""
    counts: dict[str, int] = {}
    for c in codes:
        counts[c] = counts.get(c, 0) + 1
    seen: dict[str, int] = {}
    for k, c in enumerate(codes):
        n = seen[c] = seen.get(c, 0) + 1
        if n <= MAX_ISSUES_PER_CODE or counts[c] == MAX_ISSUES_PER_CODE + 1:
            yield k, 0
        elif n == MAX_ISSUES_PER_CODE + 1:
            yield k, counts[c] - MAX_ISSUES_PER_CODE


def more_findings(code: str, more: int) -> str:
    """The message of the finding that stands for ``more`` findings left out."""
    return f"{more:,} more `{code}` findings are not listed"


def from_issues(issues: Sequence[Issue]) -> list[Diagnostic]:
    """Turn reading problems into diagnostics, at most ``MAX_ISSUES_PER_CODE`` of each code
    (then one, at the first left out, saying how many more there are)."""
    res = []
    for k, more in capped_per_code([i.code for i in issues]):
        i = issues[k]
        msg = more_findings(i.code, more) if more else i.message
        res.append(Diagnostic(i.code, Severity(i.severity), msg, i.range, path=i.path))
    return res


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


REPORT_URL = "https://github.com/promptls/promptls/issues"


def from_exception(exc: BaseException, *, during: str = "", path: str | None = None) -> Diagnostic:
    """The ``internal-error`` diagnostic for an unexpected exception, at the document head.

    The message is one line: the exception's type and first line (at most 200 characters,
    lone surrogates escaped so it can always be printed), the step that failed
    (``during``: "reading", "checking", …) and where to report it.
    """
    cause = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if len(cause) > 200:
        cause = cause[:199] + "…"
    cause = cause.encode("utf-8", "backslashreplace").decode("utf-8")
    what = type(exc).__name__ + (f": {cause}" if cause else "")
    step = f" while {during}" if during else ""
    message = f"internal error{step}: {what}; please report it at {REPORT_URL}"
    return Diagnostic("internal-error", Severity.ERROR, message, TextRange(0, 0), path=path)


def sort_key(d: Diagnostic) -> tuple[str, int, int, str]:
    return (d.path or "", d.range.start, d.range.end, d.code)
