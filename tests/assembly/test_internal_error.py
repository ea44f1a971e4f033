"""The ``internal-error`` diagnostic made from an unexpected exception."""

from __future__ import annotations

from assembly.diagnostics import Severity, from_exception, rule_by_code
from assembly.text import TextRange


def test_one_line_cause_at_the_head_with_where_to_report() -> None:
    try:
        raise ValueError("first line\nsecond line")
    except ValueError as exc:
        d = from_exception(exc, during="checking")
    assert d.code == "internal-error"
    assert d.severity is Severity.ERROR
    assert d.range == TextRange(0, 0)
    assert d.path is None
    assert "\n" not in d.message
    assert d.message.startswith("internal error while checking: ValueError: first line;")
    assert "second line" not in d.message
    assert "https://github.com/promptls/promptls/issues" in d.message
    rule = rule_by_code("internal-error")
    assert rule is not None and not rule.fixable and rule.severity is Severity.ERROR


def test_cause_is_bounded_and_always_encodable() -> None:
    d = from_exception(RuntimeError("\ud800" + "x" * 1000))
    d.message.encode("utf-8")  # a lone surrogate in the cause is escaped
    assert "\\ud800" in d.message
    assert len(d.message) <= 320
    assert from_exception(KeyError()).message.startswith("internal error: KeyError;")
