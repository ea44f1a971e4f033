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
    MAX_ISSUES_PER_CODE,
    Diagnostic,
    Fix,
    Related,
    Rule,
    RuleContext,
    Severity,
    TextEdit,
    capped_per_code,
    from_exception,
    from_issues,
    from_setting_issues,
    more_findings,
    sort_key,
)
from assembly.diagnostics.engine import RuleCache, TextFacts, message_end, message_start
from assembly.diagnostics.inputs import Ignoring
from assembly.diagnostics.rules import (
    anthropic,
    budget,
    cache,
    files,
    instructions,
    ordering,
    reported,
    tool_calls,
)
from assembly.diagnostics.window import TextLike
from assembly.model import Message
from assembly.text import LineIndex

__all__ = [
    "COUNTED_CODES",
    "RULES",
    "Diagnostic",
    "Fix",
    "Related",
    "Rule",
    "RuleCache",
    "RuleContext",
    "Severity",
    "TextEdit",
    "TextFacts",
    "check",
    "from_exception",
    "from_issues",
    "from_setting_issues",
    "rule_by_code",
    "sort_key",
]

E, W, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO
COMMENT_MARK = "promptls:"  # what every suppression comment contains

# The rule table. Codes are never renamed or reused. What each rule reads is its check's
# parameters (``engine``): rules of the whole analysis run every time, the others again
# only when one of their inputs changed.
RULES: tuple[Rule, ...] = (
    # promptls itself failed.
    Rule("internal-error", E, reported.internal_error),
    # Bad input.
    Rule("syntax-error", E, reported.syntax_error),
    Rule("schema-error", E, reported.schema_error),
    Rule("schema-warning", W, reported.schema_warning),
    Rule("unknown-key", W, reported.unknown_key),
    Rule("synthesized-tool-call-id", INFO, reported.synthesized_tool_call_id),
    Rule("stored-items-not-in-document", INFO, reported.stored_items_not_in_document),
    Rule("invalid-setting", E, reported.invalid_setting),
    Rule("file-not-found", E, reported.file_not_found),
    Rule("path-outside-workspace", E, reported.path_outside_workspace),
    Rule("document-too-large", E, reported.document_too_large),
    # The pipeline cannot assemble.
    Rule("budget-overrun", E, reported.budget_overrun, counts=True),
    Rule("last-turn-over-budget", E, reported.last_turn_over_budget, counts=True),
    Rule("no-user-message", E, reported.no_user_message),
    # Budget and history.
    Rule("history-truncated", INFO, budget.history_truncated, counts=True),
    Rule("compression-due", INFO, budget.compression_due, counts=True),
    # The prompt cache.
    Rule("volatile-in-cached-prefix", INFO, cache.volatile_in_cached_prefix, counts=True),
    Rule("tool-list-changes-prefix", W, cache.tool_list_changes_prefix, counts=True),
    # Ordering and templates.
    Rule("reminder-not-last", W, ordering.reminder_not_last),
    Rule(
        "custom-prompt-in-system",
        W,
        ordering.custom_prompt_in_system,
    ),
    Rule(
        "unknown-placeholder",
        W,
        ordering.unknown_placeholder,
        fixable=True,
    ),
    Rule(
        "summary-on-other-branch",
        W,
        ordering.summary_on_other_branch,
    ),
    Rule("summary-covers-kept-message", E, ordering.summary_covers_kept_message),
    Rule("summary-covers-this-turn", E, ordering.summary_covers_this_turn),
    # Instructions.
    Rule(
        "instruction-far-from-section",
        W,
        instructions.instruction_far_from_section,
        fixable=True,
    ),
    Rule(
        "guidance-for-unavailable-tool",
        W,
        instructions.guidance_for_unavailable_tool,
    ),
    # Tool calls and file ids.
    Rule(
        "orphaned-tool-response",
        W,
        tool_calls.orphaned_tool_response,
        fixable=True,
    ),
    Rule("unanswered-tool-call", W, tool_calls.unanswered_tool_call),
    Rule("duplicate-tool-call-id", E, tool_calls.duplicate_tool_call_id),
    Rule(
        "tool-call-in-text",
        W,
        tool_calls.tool_call_in_text,
        fixable=True,
    ),
    Rule(
        "tool-call-markup-in-text",
        INFO,
        tool_calls.tool_call_markup_in_text,
    ),
    Rule(
        "file-id-not-in-read-file-list",
        W,
        files.file_id_not_in_read_file_list,
    ),
    Rule(
        "filename-instead-of-file-id",
        E,
        files.filename_instead_of_file_id,
        fixable=True,
    ),
    # The structure Anthropic's Messages API requires (provider `anthropic`); they read
    # the assembly's rendering, so they run every time.
    Rule("anthropic-tool-result-placement", E, anthropic.tool_result_placement),
    Rule("anthropic-unanswered-tool-use", E, anthropic.unanswered_tool_use),
    Rule("anthropic-first-turn-not-user", INFO, anthropic.first_turn_not_user),
    Rule("anthropic-empty-message", W, anthropic.empty_message),
    Rule("anthropic-merged-turns", INFO, anthropic.merged_turns),
    Rule("anthropic-system-in-history", INFO, anthropic.system_in_history),
    Rule("anthropic-tool-use-id", INFO, anthropic.tool_use_id),
)

_BY_CODE = {r.code: r for r in RULES}
# The codes whose findings show the assembly's counts (``Rule.counts``).
COUNTED_CODES = frozenset(r.code for r in RULES if r.counts)
_IGNORE_COMMENT = re.compile(r"promptls:\s*ignore\[([A-Za-z0-9_,\s-]+)\]")


def rule_by_code(code: str) -> Rule | None:
    return _BY_CODE.get(code)


def check(
    ctx: RuleContext,
    *,
    select: Collection[str] | None = None,
    ignore: Collection[str] = (),
    severities: Mapping[str, str] | None = None,
    cache: RuleCache | None = None,
    edit: tuple[TextLike, int, int, int] | None = None,
) -> list[Diagnostic]:
    """Run the enabled rules and return their findings, sorted by place, at most
    ``MAX_ISSUES_PER_CODE`` of each code (then one saying how many more there are).

    ``select`` limits the run to these codes (None: all); ``ignore`` removes codes;
    ``severities`` maps a code to a severity or ``off`` (the ``rules`` setting when None).
    ``cache`` is what the previous run on an earlier version of the same document kept
    (``engine``): only the rules whose inputs changed run again, and it is updated for
    the next run. None: everything is computed afresh. ``edit``: ``(old text, start,
    old_end, new_end)``, where ``ctx.text`` differs from the text of the cache's last
    run when that run read ``old text`` (saves finding the span again).
    """
    severities = ctx.settings.rules if severities is None else severities
    rules = [
        rule
        for rule in RULES
        if (select is None or rule.code in select)
        and rule.code not in ignore
        and severities.get(rule.code) != "off"
    ]
    engine = cache if cache is not None else RuleCache()
    found = engine.run(ctx, rules, edit)
    suppress = _Suppressions(ctx, engine)
    res: list[Diagnostic] = []
    for d in found:
        level = severities.get(d.code)
        if level is not None:
            d = dataclasses.replace(d, severity=Severity(level))
        if not suppress(d):
            res.append(d)
    res.sort(key=sort_key)
    if len(res) <= MAX_ISSUES_PER_CODE:
        return res
    return [
        dataclasses.replace(res[k], message=more_findings(res[k].code, more), fix=None)
        if more
        else res[k]
        for k, more in capped_per_code([d.code for d in res])
    ]


class _Suppressions:
    """Answers whether a finding is suppressed where it is reported.

    The messages with an ignore key and whether the text has a ``promptls:`` comment at
    all come from the engine, which keeps them between runs.
    """

    def __init__(self, ctx: RuleContext, engine: RuleCache) -> None:
        self.ctx = ctx
        self._engine = engine
        conv = ctx.conversation
        self._ignoring: list[Message] = []
        if conv is not None and conv.messages:
            # Per document, not per finding: the few messages that carry an ignore key.
            msgs = conv.messages
            self._ignoring = [msgs[i] for i in engine.input(Ignoring).indexes]
        self._by_file: dict[str | None, tuple[LineIndex | None, dict[int, set[str]]]] = {}

    def __call__(self, d: Diagnostic) -> bool:
        if d.path is None:
            for m in self._ignoring:
                start, end = message_start(m), message_end(m)
                if start <= d.range.start < max(end, start + 1):
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
            facts = self._engine.text_facts
            if facts.comments is not None and facts.comments[0] is self.ctx.text:
                found: tuple[LineIndex | None, dict[int, set[str]]] = facts.comments[1]
            else:
                has = self._engine.count(self.ctx.text, COMMENT_MARK) > 0
                # Indexing a large document costs more than all its rules: only if needed.
                found = _comment_lines(str(self.ctx.text) if has else "")
                facts.comments = (self.ctx.text, found)
        elif path == self.ctx.template_path and self.ctx.template is not None:
            found = _comment_lines(self.ctx.template.text)
        else:
            return None
        self._by_file[path] = found
        return found


def _comment_lines(text: str) -> tuple[LineIndex | None, dict[int, set[str]]]:
    """The codes the suppression comments of ``text`` name, by line, and the text's line
    index (None when it has no comment)."""
    lines: dict[int, set[str]] = {}
    index = None
    if COMMENT_MARK in text:
        index = LineIndex(text)
        for m in _IGNORE_COMMENT.finditer(text):
            codes = {c.strip() for c in m.group(1).split(",") if c.strip()}
            lines.setdefault(index.line_col(m.start()).line, set()).update(codes)
    return index, lines
