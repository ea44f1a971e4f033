"""The rule engine: the one table of rules, and ``check`` that runs it.

Every finding promptls reports is produced by a rule of ``RULES``: a stable slug code, a
default severity and a pure check function whose docstring is the rule's documentation
(``RULES.md`` is generated from it). ``check`` runs the enabled rules on a
``RuleContext``, applies per-rule severities from the settings and the suppressions
written in the documents (``promptls: ignore[code]`` comments in YAML and Markdown, a
``"promptls-ignore": ["code"]`` key on a JSON message), and sorts the result.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Mapping

from assembly.diagnostics.core import (
    Diagnostic,
    Fix,
    Related,
    Rule,
    RuleContext,
    Severity,
    TextEdit,
    from_issues,
    from_setting_issues,
    sort_key,
)
from assembly.diagnostics.rules import (
    budget,
    files,
    instructions,
    ordering,
    reported,
    tool_calls,
)
from assembly.text import LineIndex

__all__ = [
    "RULES",
    "Diagnostic",
    "Fix",
    "Related",
    "Rule",
    "RuleContext",
    "Severity",
    "TextEdit",
    "check",
    "from_issues",
    "from_setting_issues",
    "rule_by_code",
    "sort_key",
]

E, W, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO

# The rule table. Codes are never renamed or reused.
RULES: tuple[Rule, ...] = (
    # Bad input.
    Rule("syntax-error", E, reported.syntax_error),
    Rule("schema-error", E, reported.schema_error),
    Rule("invalid-setting", E, reported.invalid_setting),
    Rule("file-not-found", E, reported.file_not_found),
    Rule("path-outside-workspace", E, reported.path_outside_workspace),
    Rule("document-too-large", E, reported.document_too_large),
    # The pipeline cannot assemble.
    Rule("budget-overrun", E, reported.budget_overrun),
    Rule("last-turn-over-budget", E, reported.last_turn_over_budget),
    Rule("no-user-message", E, reported.no_user_message),
    # Budget and history.
    Rule("history-truncated", INFO, budget.history_truncated),
    Rule("compression-due", INFO, budget.compression_due),
    # Ordering and templates.
    Rule("reminder-not-last", W, ordering.reminder_not_last),
    Rule("custom-prompt-in-system", W, ordering.custom_prompt_in_system),
    Rule("unknown-placeholder", W, ordering.unknown_placeholder, fixable=True),
    Rule("summary-on-other-branch", W, ordering.summary_on_other_branch),
    # Instructions.
    Rule(
        "instruction-far-from-section",
        W,
        instructions.instruction_far_from_section,
        fixable=True,
    ),
    Rule("guidance-for-unavailable-tool", W, instructions.guidance_for_unavailable_tool),
    # Tool calls and file ids.
    Rule("orphaned-tool-response", W, tool_calls.orphaned_tool_response, fixable=True),
    Rule("unanswered-tool-call", W, tool_calls.unanswered_tool_call),
    Rule("duplicate-tool-call-id", E, tool_calls.duplicate_tool_call_id),
    Rule("tool-call-in-text", W, tool_calls.tool_call_in_text, fixable=True),
    Rule("file-id-not-in-read-file-list", W, files.file_id_not_in_read_file_list),
    Rule(
        "filename-instead-of-file-id",
        E,
        files.filename_instead_of_file_id,
        fixable=True,
    ),
)

_BY_CODE = {r.code: r for r in RULES}
_IGNORE_COMMENT = re.compile(r"promptls:\s*ignore\[([A-Za-z0-9_,\s-]+)\]")


def rule_by_code(code: str) -> Rule | None:
    return _BY_CODE.get(code)


def check(
    ctx: RuleContext,
    *,
    select: Collection[str] | None = None,
    ignore: Collection[str] = (),
    severities: Mapping[str, str] | None = None,
) -> list[Diagnostic]:
    """Run the enabled rules and return their findings, sorted by place.

    ``select`` limits the run to these codes (None: all); ``ignore`` removes codes;
    ``severities`` maps a code to a severity or ``off`` (the ``rules`` setting when None).
    """
    severities = ctx.settings.rules if severities is None else severities
    suppress = _Suppressions(ctx)
    res: list[Diagnostic] = []
    for rule in RULES:
        if select is not None and rule.code not in select:
            continue
        if rule.code in ignore:
            continue
        level = severities.get(rule.code)
        if level == "off":
            continue
        for d in rule.check(ctx):
            if level is not None:
                d = dataclasses.replace(d, severity=Severity(level))
            if not suppress(d):
                res.append(d)
    res.sort(key=sort_key)
    return res


class _Suppressions:
    """Answers whether a finding is suppressed where it is reported."""

    def __init__(self, ctx: RuleContext) -> None:
        self.ctx = ctx
        conv = ctx.conversation
        # Per document, not per finding: the few messages that carry an ignore key.
        self._ignoring = [m for m in conv.messages if m.ignore] if conv is not None else []
        self._by_file: dict[str | None, tuple[LineIndex | None, dict[int, set[str]]]] = {}

    def __call__(self, d: Diagnostic) -> bool:
        if d.path is None:
            for m in self._ignoring:
                if m.range.start <= d.range.start < max(m.range.end, m.range.start + 1):
                    if d.code in m.ignore or "all" in m.ignore:
                        return True
        found = self._comments(d.path)
        if found is None:
            return False
        index, lines = found
        if index is None:
            return False
        line = index.line_col(d.range.start).line
        codes = lines.get(line, set()) | lines.get(line - 1, set())
        return d.code in codes or "all" in codes

    def _comments(self, path: str | None) -> tuple[LineIndex | None, dict[int, set[str]]] | None:
        if path in self._by_file:
            return self._by_file[path]
        if path is None:
            text = self.ctx.text
        elif path == self.ctx.template_path and self.ctx.template is not None:
            text = self.ctx.template.text
        else:
            return None
        lines: dict[int, set[str]] = {}
        index = None  # indexing a large document costs more than all its rules: only if needed
        if "promptls:" in text:
            index = LineIndex(text)
            for m in _IGNORE_COMMENT.finditer(text):
                codes = {c.strip() for c in m.group(1).split(",") if c.strip()}
                lines.setdefault(index.line_col(m.start()).line, set()).update(codes)
        self._by_file[path] = (index, lines)
        return self._by_file[path]
