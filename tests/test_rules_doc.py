"""The rule catalogue: ``RULES.md`` is current, links land on it, and the CLI prints it.

``RULES.md`` is generated from ``assembly.diagnostics.RULES`` (read at run time, so a rule
added anywhere is covered) by ``python -m server.rulesdoc > RULES.md``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from assembly.diagnostics import RULES
from server.cli.main import main
from server.links import RULES_DOC_URL, rule_doc_url
from server.rulesdoc import REGENERATE_COMMAND, github_slug, render_rules_md, rule_url

REPO = Path(__file__).resolve().parent.parent
RULES_MD = REPO / "RULES.md"
CODES = [r.code for r in RULES]


def test_rules_md_is_current() -> None:
    current = RULES_MD.read_text(encoding="utf-8") if RULES_MD.exists() else ""
    if current != render_rules_md():
        pytest.fail(f"RULES.md is out of date: run `{REGENERATE_COMMAND}`")


def test_rules_md_has_a_row_and_a_section_per_rule() -> None:
    text = _outside_fences(render_rules_md())
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert headings == CODES
    for rule in RULES:
        assert f"| [`{rule.code}`](#{github_slug(rule.code)}) | {rule.severity.value} |" in text
        section = text.split(f"\n## {rule.code}\n", 1)[1].split("\n## ", 1)[0]
        for name in ("What it does", "Why is this bad?", "Example"):
            assert f"\n### {name}\n" in section, (rule.code, name)


@pytest.mark.parametrize("code", CODES)
def test_rule_url_lands_on_the_rule_section(code: str) -> None:
    url = rule_url(code)
    assert url == rule_doc_url(code)
    assert url.startswith("https://")
    base, anchor = url.split("#")
    assert base == RULES_DOC_URL
    assert base.endswith("/RULES.md")
    assert anchor == github_slug(code)


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("budget-overrun", "budget-overrun"),
        ("Why is this bad?", "why-is-this-bad"),
        ("`schema-error`", "schema-error"),
        ("What it does", "what-it-does"),
    ],
)
def test_github_slug(heading: str, slug: str) -> None:
    assert github_slug(heading) == slug


def test_cli_rules_lists_every_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["code", "severity", "fixable", "summary"]
    assert [line.split()[0] for line in lines[1:]] == CODES
    for line, rule in zip(lines[1:], RULES, strict=True):
        assert line.split()[1] == rule.severity.value
        assert line.endswith(rule.summary)


def test_cli_rules_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "--format", "json"]) == 0
    objs = json.loads(capsys.readouterr().out)
    assert [o["code"] for o in objs] == CODES
    for o, rule in zip(objs, RULES, strict=True):
        assert o == {
            "code": rule.code,
            "severity": rule.severity.value,
            "fixable": rule.fixable,
            "summary": rule.summary,
            "url": rule_url(rule.code),
        }


@pytest.mark.parametrize("code", CODES)
def test_cli_rule_prints_its_docs(code: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rule", code]) == 0
    out = capsys.readouterr().out
    rule = next(r for r in RULES if r.code == code)
    assert out.startswith(f"# {code}\n")
    assert rule.summary in out
    for name in ("What it does", "Why is this bad?", "Example"):
        assert f"\n## {name}\n" in out
    assert rule_url(code) in out


def test_cli_rule_unknown_code_suggests(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rule", "budget-overun"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "unknown rule `budget-overun`; did you mean `budget-overrun`?" in captured.err


def test_cli_rule_unknown_code_without_a_close_match(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rule", "zzzz"]) == 2
    err = capsys.readouterr().err
    assert "unknown rule `zzzz`" in err
    assert "did you mean" not in err
    assert "promptls rules" in err


def _outside_fences(markdown: str) -> str:
    """Blank the lines of fenced code blocks (examples may hold Markdown headings)."""
    res, in_fence = [], False
    for line in markdown.splitlines():
        fence = line.lstrip().startswith(("```", "~~~"))
        res.append("" if in_fence or fence else line)
        if fence:
            in_fence = not in_fence
    return "\n".join(res)
