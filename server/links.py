"""The public web addresses promptls points users to, defined once.

The rule reference (``RULES.md``) is generated from ``assembly.diagnostics.RULES``; every
rule has a heading whose anchor is its code, so a rule's page is ``rule_doc_url(code)``.
SARIF ``helpUri``, the LSP ``codeDescription.href`` and the generated docs all use it.
"""

from __future__ import annotations

PROJECT_URL = "https://github.com/promptls/promptls"
RULES_DOC_URL = "https://github.com/promptls/promptls/blob/main/RULES.md"


def rule_doc_url(code: str) -> str:
    """The absolute address of a rule's documentation (its anchor in ``RULES.md``)."""
    return f"{RULES_DOC_URL}#{code}"
