"""The rule catalogue as documentation: ``RULES.md``, ``promptls rules`` and ``promptls rule``.

Everything here is rendered from ``assembly.diagnostics.RULES`` and the check functions'
docstrings at run time, so the catalogue cannot drift from the rules: ``RULES.md`` is
regenerated with ``python -m server.rulesdoc > RULES.md`` and ``tests/test_rules_doc.py``
fails when it is not current.

The published catalogue's address is ``server.links.RULES_DOC_URL``; every link to a rule
(LSP ``codeDescription.href``, SARIF ``helpUri``, the CLI) is ``rule_url(code)``, whose
anchor is GitHub's heading slug of the rule's ``## <code>`` section.
"""

from __future__ import annotations

import re
import sys

from assembly.diagnostics import RULES, Rule, rule_by_code
from server.links import rule_doc_url

REGENERATE_COMMAND = "python -m server.rulesdoc > RULES.md"

# A rule's address: `RULES_DOC_URL#<code>` (the code is its own GitHub heading slug, which
# tests/test_rules_doc.py checks for every rule).
rule_url = rule_doc_url

_FENCE = re.compile(r"^\s*(```|~~~)")


def github_slug(heading: str) -> str:
    """Return the anchor GitHub gives a Markdown heading with this text.

    GitHub lowercases, drops everything but letters, digits, ``-``, ``_`` and spaces, and
    turns spaces into ``-`` (duplicates get ``-1``, ``-2``…, which rule codes never need).
    """
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def render_rules_md() -> str:
    """Render ``RULES.md``: a table of every rule, then one section per rule."""
    lines = [
        "# Rules",
        "",
        f"<!-- Generated from assembly/diagnostics by `{REGENERATE_COMMAND}`; do not edit. -->",
        "",
        "Every finding promptls reports comes from one of these rules.",
        "Codes are stable: they are never renamed or reused.",
        "`promptls rules` prints this table and `promptls rule CODE` prints a rule's section.",
        "Change a rule's severity, or turn it off, with the `rules` setting "
        '(`rules = { compression-due = "off" }` under `[tool.promptls]`).',
        "Suppress one finding with a `promptls: ignore[CODE]` comment on its line or the line "
        'above (YAML, Markdown), or a `"promptls-ignore": ["CODE"]` key on a message.',
        "",
        "| code | default severity | fixable | summary |",
        "|---|---|---|---|",
    ]
    for rule in RULES:
        link = f"[`{rule.code}`](#{github_slug(rule.code)})"
        fixable = "yes" if rule.fixable else ""
        lines.append(f"| {link} | {rule.severity.value} | {fixable} | {_cell(rule.summary)} |")
    for rule in RULES:
        lines += ["", f"## {rule.code}", "", _facts(rule), "", _body(rule, heading_level=3)]
    return "\n".join(lines).rstrip() + "\n"


def render_rules_table() -> str:
    """Render the catalogue for a terminal: code, severity, fixable, summary."""
    rows = [("code", "severity", "fixable", "summary")]
    rows += [(r.code, r.severity.value, "yes" if r.fixable else "", r.summary) for r in RULES]
    width = [max(len(row[i]) for row in rows) for i in range(3)]
    res = []
    for row in rows:
        cells = [row[i].ljust(width[i]) for i in range(3)]
        res.append("  ".join([*cells, row[3]]).rstrip())
    return "\n".join(res) + "\n"


def rules_json() -> list[dict[str, object]]:
    """Return the catalogue as JSON-ready objects (``promptls rules --format json``)."""
    return [
        {
            "code": r.code,
            "severity": r.severity.value,
            "fixable": r.fixable,
            "summary": r.summary,
            "url": rule_url(r.code),
        }
        for r in RULES
    ]


def render_rule_doc(rule: Rule) -> str:
    """Render one rule's documentation for a terminal (``promptls rule CODE``)."""
    parts = [f"# {rule.code}", _facts(rule), _body(rule, heading_level=2), rule_url(rule.code)]
    return "\n\n".join(parts) + "\n"


def suggest_codes(code: str) -> list[str]:
    """Return the rule codes closest to an unknown ``code``, best first (``difflib``
    is imported here: every ``lint`` imports this module, few mistype a code)."""
    import difflib

    codes = [r.code for r in RULES]
    res = difflib.get_close_matches(code.lower(), codes, n=3, cutoff=0.6)
    res += [c for c in codes if code and code.lower() in c and c not in res]
    return res[:3]


def find_rule(code: str) -> Rule | None:
    """Return the rule with this code (case-insensitive), or None."""
    return rule_by_code(code.strip().lower())


def _facts(rule: Rule) -> str:
    fixable = "yes (a quick fix is offered)" if rule.fixable else "no"
    return f"Default severity: **{rule.severity.value}** · Fixable: {fixable}"


def _body(rule: Rule, *, heading_level: int) -> str:
    """Return the docstring: the summary line, then its sections at ``heading_level``.

    Docstrings write their sections as ``## What it does``; headings inside fenced code
    blocks are examples and are left alone.
    """
    out = []
    in_fence = False
    for line in rule.doc.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (m := re.match(r"^(#{2,6}) ", line)):
            line = "#" * (heading_level + len(m.group(1)) - 2) + line[len(m.group(1)) :]
        out.append(line)
    return "\n".join(out).strip()


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def main() -> int:
    sys.stdout.buffer.write(render_rules_md().encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
