"""Every rule against its fixtures (tests/data/diagnostics/<code>/).

A fixture is a conversation (``*.conv.yaml|json|jsonl``) or a template (``*.prompt.md``)
checked by the real pipeline with the real offline tokenizer; its findings — all of them,
so noise shows up too — are rendered as annotated excerpts and compared with the fixture's
``.expected`` file (``UPDATE_GOLDEN=1`` rewrites; a missing one is written and fails).
Every fix is applied to its fixture: the result must parse and have one finding of that
code fewer.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from assembly.diagnostics import RULES, Diagnostic
from tests.support.annotate import annotate, apply_edits
from tests.support.engine import analyze, analyze_prompt

DATA = Path(__file__).resolve().parent.parent / "data" / "diagnostics"
TODAY = dt.date(2026, 7, 15)
SUFFIXES = (".conv.yaml", ".conv.yml", ".conv.json", ".conv.jsonl", ".prompt.md")
FIXTURES = sorted(p for p in DATA.glob("*/*") if p.is_file() and p.name.endswith(SUFFIXES))
# Findings of the IO layer (a referenced file missing, or outside the workspace): their
# fixtures run through ``server.workspace`` in tests/server/test_rules_io.py.
IO_CODES = ("file-not-found", "path-outside-workspace")
PURE = [p for p in FIXTURES if p.parent.name not in IO_CODES]


def _run(path: Path, text: str | None = None) -> tuple[str, list[Diagnostic], dict[str, str]]:
    if path.name.endswith(".prompt.md"):
        pa = analyze_prompt(path, text=text, root=DATA)
        return pa.text, list(pa.diagnostics), pa.other_texts
    a = analyze(path, text=text, root=DATA, today=TODAY)
    return a.text, list(a.diagnostics), a.other_texts


def _golden(path: Path, actual: str) -> None:
    expected_path = path.with_name(path.name + ".expected")
    if os.environ.get("UPDATE_GOLDEN") or not expected_path.exists():
        expected_path.write_text(actual, encoding="utf-8")
        if not os.environ.get("UPDATE_GOLDEN"):
            pytest.fail(f"wrote missing {expected_path.name}; check it and run again")
    assert actual == expected_path.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", PURE, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_findings(path: Path) -> None:
    text, diags, others = _run(path)
    _golden(path, annotate(diags, text, path.name, others))


@pytest.mark.parametrize("path", PURE, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixes_remove_their_finding(path: Path) -> None:
    text, diags, _ = _run(path)
    for d in diags:
        if d.fix is None or d.path is not None:
            continue
        fixed = apply_edits(text, ((e.range, e.new_text) for e in d.fix.edits))
        _, after, _ = _run(path, fixed)
        assert not [x for x in after if x.code in ("syntax-error", "schema-error")], d.fix.title
        before_n = sum(1 for x in diags if x.code == d.code)
        after_n = sum(1 for x in after if x.code == d.code)
        assert after_n == before_n - 1, f"{d.fix.title}: {d.code} {before_n} -> {after_n}"


def test_every_rule_has_a_positive_and_a_negative_fixture() -> None:
    missing = []
    for rule in RULES:
        folder = DATA / rule.code
        cases = [p for p in FIXTURES if p.parent == folder]
        expected = [p.with_name(p.name + ".expected").read_text(encoding="utf-8") for p in cases]
        # No document triggers a bug on purpose: ``test_internal_error`` and the
        # reliability suite (tests/reliability/) make it fire.
        fires_in_fixture = rule.code != "internal-error"
        if fires_in_fixture and not any(f"[{rule.code}]" in e for e in expected):
            missing.append(f"{rule.code}: no fixture where it fires")
        if not any(f"[{rule.code}]" not in e for e in expected):
            missing.append(f"{rule.code}: no fixture where it stays quiet")
    assert missing == []


def test_every_rule_is_documented() -> None:
    codes = [r.code for r in RULES]
    assert len(codes) == len(set(codes))
    for rule in RULES:
        doc = rule.doc
        assert rule.code == rule.code.lower() and " " not in rule.code
        assert rule.summary and not rule.summary.endswith(" "), rule.code
        for section in ("## What it does", "## Why is this bad?", "## Example"):
            assert section in doc, f"{rule.code}: missing {section}"
