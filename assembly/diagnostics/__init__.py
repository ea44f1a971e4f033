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
from collections.abc import Collection, Iterable, Mapping

from assembly.diagnostics.core import (
    Diagnostic,
    Fix,
    Related,
    Rule,
    RuleContext,
    Severity,
    TextEdit,
    from_exception,
    from_issues,
    from_setting_issues,
    sort_key,
)
from assembly.diagnostics.incremental import (
    COMMENT_MARK,
    CUSTOM_AGENT_TEXT,
    FILE_REFS,
    REMINDER_TEXT,
    SYSTEM_TEXT,
    TEXT_CALLS,
    RuleCache,
    document_inputs,
    summary_inputs,
)
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
from assembly.diagnostics.window import contains
from assembly.model import Message
from assembly.text import LineIndex

__all__ = [
    "RULES",
    "Diagnostic",
    "Fix",
    "Related",
    "Rule",
    "RuleCache",
    "RuleContext",
    "Severity",
    "TextEdit",
    "check",
    "from_exception",
    "from_issues",
    "from_setting_issues",
    "rule_by_code",
    "sort_key",
]

E, W, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO
DOC = document_inputs  # what most rules read besides the messages (``incremental``)
NONE: frozenset[str] = frozenset()  # reads no content fact: only the messages' shapes
# What the prompt rules read: the system prompt (a system message's content or the inline
# ``system_prompt``), the custom agent prompt, the reminder.
SYSTEM_CUSTOM = frozenset({SYSTEM_TEXT, CUSTOM_AGENT_TEXT})
PROMPTS = frozenset({SYSTEM_TEXT, CUSTOM_AGENT_TEXT, REMINDER_TEXT})

# The rule table. Codes are never renamed or reused. Rules without ``inputs`` only filter
# what was reported, or read the budget figures of every message, and run every time; the
# others' findings are reused after an edit inside one message or one inline prompt that
# leaves their inputs, the message's shape and the content facts they ``reads`` equal
# (``incremental``). No rule with ``inputs`` reads the contents of attached files (the
# assembly's figures that depend on them, the cut and the forgotten-file listing, are in
# ``document_inputs``).
RULES: tuple[Rule, ...] = (
    # promptls itself failed.
    Rule("internal-error", E, reported.internal_error),
    # Bad input.
    Rule("syntax-error", E, reported.syntax_error),
    Rule("schema-error", E, reported.schema_error),
    Rule("schema-warning", W, reported.schema_warning),
    Rule("unknown-key", W, reported.unknown_key),
    Rule("synthesized-tool-call-id", INFO, reported.synthesized_tool_call_id),
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
    # The prompt cache.
    Rule("volatile-in-cached-prefix", INFO, cache.volatile_in_cached_prefix),
    Rule("tool-list-changes-prefix", W, cache.tool_list_changes_prefix),
    # Ordering and templates.
    Rule("reminder-not-last", W, ordering.reminder_not_last, inputs=DOC, reads=NONE),
    Rule(
        "custom-prompt-in-system",
        W,
        ordering.custom_prompt_in_system,
        inputs=DOC,
        reads=SYSTEM_CUSTOM,
    ),
    Rule(
        "unknown-placeholder",
        W,
        ordering.unknown_placeholder,
        fixable=True,
        inputs=DOC,
        reads=PROMPTS,
    ),
    Rule(
        "summary-on-other-branch",
        W,
        ordering.summary_on_other_branch,
        inputs=summary_inputs,
        reads=NONE,
    ),
    Rule("summary-covers-kept-message", E, ordering.summary_covers_kept_message),
    Rule("summary-covers-this-turn", E, ordering.summary_covers_this_turn),
    # Instructions.
    Rule(
        "instruction-far-from-section",
        W,
        instructions.instruction_far_from_section,
        fixable=True,
        inputs=DOC,
        reads=SYSTEM_CUSTOM,
    ),
    Rule(
        "guidance-for-unavailable-tool",
        W,
        instructions.guidance_for_unavailable_tool,
        inputs=DOC,
        reads=PROMPTS,
    ),
    # Tool calls and file ids.
    Rule(
        "orphaned-tool-response",
        W,
        tool_calls.orphaned_tool_response,
        fixable=True,
        inputs=DOC,
        reads=NONE,
    ),
    Rule("unanswered-tool-call", W, tool_calls.unanswered_tool_call, inputs=DOC, reads=NONE),
    Rule("duplicate-tool-call-id", E, tool_calls.duplicate_tool_call_id, inputs=DOC, reads=NONE),
    Rule(
        "tool-call-in-text",
        W,
        tool_calls.tool_call_in_text,
        fixable=True,
        inputs=DOC,
        reads=frozenset({TEXT_CALLS}),
    ),
    Rule(
        "tool-call-markup-in-text",
        INFO,
        tool_calls.tool_call_markup_in_text,
        inputs=DOC,
        reads=frozenset({TEXT_CALLS}),
    ),
    Rule(
        "file-id-not-in-read-file-list",
        W,
        files.file_id_not_in_read_file_list,
        inputs=DOC,
        reads=frozenset({FILE_REFS, CUSTOM_AGENT_TEXT}),
    ),
    Rule(
        "filename-instead-of-file-id",
        E,
        files.filename_instead_of_file_id,
        fixable=True,
        inputs=DOC,
        reads=NONE,
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
) -> list[Diagnostic]:
    """Run the enabled rules and return their findings, sorted by place.

    ``select`` limits the run to these codes (None: all); ``ignore`` removes codes;
    ``severities`` maps a code to a severity or ``off`` (the ``rules`` setting when None).
    ``cache`` is what the previous run on an earlier version of the same document kept:
    findings that cannot have changed are reused from it (``incremental``), and it is
    updated for the next run. None: everything is computed afresh.
    """
    severities = ctx.settings.rules if severities is None else severities
    run = cache.begin(ctx) if cache is not None else None
    if run is not None:
        ctx = dataclasses.replace(ctx, memo=run.cache.memo)
        suppress = _Suppressions(
            ctx, has_comments=run.n_comments > 0, ignoring=run.ignoring_messages
        )
    else:
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
        found: Iterable[Diagnostic] = run.run(rule, ctx) if run is not None else rule.check(ctx)
        for d in found:
            if level is not None:
                d = dataclasses.replace(d, severity=Severity(level))
            if not suppress(d):
                res.append(d)
    if run is not None:
        run.cache.finish(run)
    res.sort(key=sort_key)
    return res


class _Suppressions:
    """Answers whether a finding is suppressed where it is reported.

    ``has_comments`` and ``ignoring`` (the messages with an ignore key) come from a cache
    when the caller has them; else they are found here.
    """

    def __init__(
        self,
        ctx: RuleContext,
        *,
        has_comments: bool | None = None,
        ignoring: list[Message] | None = None,
    ) -> None:
        self.ctx = ctx
        conv = ctx.conversation
        if ignoring is None:
            # Per document, not per finding: the few messages that carry an ignore key.
            ignoring = [m for m in conv.messages if m.ignore] if conv is not None else []
        self._ignoring = ignoring
        self._has_comments = has_comments
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
            has = self._has_comments
            if has is None:
                has = contains(self.ctx.text, COMMENT_MARK)
            # Indexing a large document costs more than all its rules: only if needed.
            text = str(self.ctx.text) if has else ""
        elif path == self.ctx.template_path and self.ctx.template is not None:
            text = self.ctx.template.text
        else:
            return None
        lines: dict[int, set[str]] = {}
        index = None
        if COMMENT_MARK in text:
            index = LineIndex(text)
            for m in _IGNORE_COMMENT.finditer(text):
                codes = {c.strip() for c in m.group(1).split(",") if c.strip()}
                lines.setdefault(index.line_col(m.start()).line, set()).update(codes)
        self._by_file[path] = (index, lines)
        return self._by_file[path]
