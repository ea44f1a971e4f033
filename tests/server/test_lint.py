"""``promptls lint`` end to end: the real command line and pipeline on small trees.

Most tests run ``server.cli.main`` in-process in a temporary folder (the cwd, so paths print
relative to it); a few run the installed command in a subprocess: exit codes, colour on a
terminal, ``--watch``. Findings come from real rules on real documents: a YAML document
with an unknown role and an unterminated string, a reminder in the middle of the history
(a warning with a related location), a template with an unknown placeholder (a warning
with a fix).
"""

from __future__ import annotations

import json
import os
import pty
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest

from assembly.diagnostics import RULES
from server.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SARIF_SCHEMA = ROOT / "tests" / "data" / "sarif" / "sarif-schema-2.1.0.json"

BAD = """\
messages:
  - {role: human, content: "hi 😋 there"}
  - {role: user, content: "hello
"""
REMINDER = """\
system_prompt: prompts/agent.prompt.md
messages:
  - {id: u1, role: user, content: "hello"}
  - {id: r1, role: reminder, content: "Be brief."}
  - {id: a1, role: assistant, content: "hi"}
  - {id: u2, role: user, content: "bye"}
"""
TEMPLATE = """\
# Role
You are a careful assistant. The date is {{CURRENT_DATE}}.
"""
OK_JSON = '[{"role": "user", "content": "hello"}]\n'
OK_YAML = "messages:\n  - {role: user, content: hello}\n"
# One syntax error per file: every linted file shows up in the findings.
BROKEN = '[{"role": "user", "content": "hello}]\n'

TREE = {
    "bad.conv.yaml": BAD,
    "chat.conv.yaml": REMINDER,
    "prompts/agent.prompt.md": TEMPLATE,
    "ok.conv.json": OK_JSON,
}


@dataclass(frozen=True)
class Run:
    rc: int
    out: str
    err: str


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


def _lint(
    root: Path, *args: str, capsys: pytest.CaptureFixture[str], mp: pytest.MonkeyPatch
) -> Run:
    """Run ``promptls lint ARGS`` in-process with ``root`` as the working directory."""
    mp.chdir(root)
    capsys.readouterr()
    try:
        rc = main(["lint", *args])
    except SystemExit as exc:  # argparse refuses a bad flag this way.
        rc = int(exc.code or 0)
    captured = capsys.readouterr()
    return Run(rc, captured.out, captured.err)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def _cli(root: Path, *args: str, **env: str) -> Run:
    """Run the real command line in a subprocess."""
    proc = subprocess.run(
        [sys.executable, "-m", "server.cli", "lint", *args],
        cwd=root,
        capture_output=True,
        text=True,
        env=_env(**env),
        timeout=120,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def _files_linted(run: Run) -> list[str]:
    return sorted({f["file"] for f in json.loads(run.out)})


# --- text ---------------------------------------------------------------------------------


def test_text_output(tmp_path, capsys, monkeypatch):
    _write(tmp_path, TREE)
    run = _lint(tmp_path, capsys=capsys, mp=monkeypatch)
    assert run.rc == 1
    assert run.out == (
        "bad.conv.yaml:2:12: error[schema-error] unknown role `human`: expected one of "
        "`system`, `user`, `assistant`, `tool`, `reminder`, `summary`; the message is left out\n"
        "  |\n"
        '2 |   - {role: human, content: "hi 😋 there"}\n'
        "  |            ^^^^^\n"
        "  |\n"
        "\n"
        "bad.conv.yaml:3:27: error[syntax-error] invalid YAML: found unexpected end of stream "
        "while scanning a quoted scalar\n"
        "  |\n"
        '3 |   - {role: user, content: "hello\n'
        "  |                           ^^^^^^\n"
        "  |\n"
        "\n"
        "chat.conv.yaml:4:20: warning[reminder-not-last] reminder `r1` is not the last "
        "message: 2 messages follow it, so it is sent in the middle of the history instead "
        "of last (use the `reminder` key)\n"
        "  |\n"
        '4 |   - {id: r1, role: reminder, content: "Be brief."}\n'
        "  |                    ^^^^^^^^\n"
        "  |\n"
        "  = related: chat.conv.yaml:6:5: the conversation ends here: `u2`\n"
        "\n"
        "prompts/agent.prompt.md:2:42: warning[unknown-placeholder] unknown placeholder "
        "`{{CURRENT_DATE}}` in the system prompt is sent literally; did you mean "
        "`{{CURRENT_DATETIME}}`?\n"
        "  |\n"
        "2 | You are a careful assistant. The date is {{CURRENT_DATE}}.\n"
        "  |                                          ^^^^^^^^^^^^^^^^\n"
        "  |\n"
        "  = fix available: Replace with `{{CURRENT_DATETIME}}`\n"
        "\n"
        "Found 4 problems (2 errors, 2 warnings, 0 infos) in 3 files; 1 fixable\n"
    )


def test_excerpt_aligns_wide_characters_and_clips_long_lines(tmp_path, capsys, monkeypatch):
    long_line = "x" * 300
    _write(
        tmp_path,
        {
            "wide.conv.yaml": 'messages:\n  - {content: "日本語😋", role: humain}\n',
            "long.conv.json": (
                f'[{{"content": "{long_line}", "role": "usr", "id": "{long_line}"}}]\n'
            ),
        },
    )
    run = _lint(tmp_path, capsys=capsys, mp=monkeypatch)
    lines = run.out.splitlines()
    i = lines.index('2 |   - {content: "日本語😋", role: humain}')
    # Each of the four wide characters takes two terminal columns.
    assert lines[i + 1] == "  |" + " " * (1 + 15 + 2 * 4 + 9) + "^^^^^^"
    j = next(k for k, line in enumerate(lines) if line.startswith("1 | "))
    shown = lines[j][4:]
    assert shown.startswith("…") and shown.endswith("…")
    assert 'x", "role": "usr"' in shown
    caret = lines[j + 1][4:]
    assert shown[caret.index("^") :].startswith('"usr"')


def test_excerpt_of_a_long_line_shows_its_control_characters_only_in_the_window(
    tmp_path, capsys, monkeypatch
):
    # A minified document: one line of 200,000 characters carrying many findings. The
    # excerpt is clipped first, then its control characters made visible (one for one).
    pad = "y" * 100_000
    keys = ",".join(f'"k{i}\x1b": 1' for i in range(3))
    text = f'[{{"content": "{pad}", "role": "user", {keys}, "tail": "{pad}"}}]'
    _write(tmp_path, {"long.conv.json": text})
    run = _lint(tmp_path, "--select", "unknown-key", capsys=capsys, mp=monkeypatch)
    lines = run.out.splitlines()
    excerpts = [i for i, line in enumerate(lines) if line.startswith("1 | ")]
    assert len(excerpts) == 4  # k0, k1, k2 and tail
    for n, i in enumerate(excerpts[:3]):
        shown, caret = lines[i][4:], lines[i + 1][4:]
        assert shown.startswith("…") and shown.endswith("…") and len(shown) == 122
        assert "\x1b" not in shown and "␛" in shown
        assert shown[caret.index("^") :].startswith(f'"k{n}␛"')
        assert caret.count("^") == len(f'"k{n}␛"')


def test_excerpt_indentation_of_a_continuation_line_stops_at_a_control_character():
    from server.cli.lint.model import Finding
    from server.cli.lint.render_text import _excerpt

    # VT is whitespace to Python but prints as a picture: the caret starts under it, after
    # the spaces and the tab before it.
    rng = {"start": {"line": 1, "column": 3}, "end": {"line": 2, "column": 8}}
    f = Finding({"range": rng}, ("a [b", " \t\x0b c]"), 2)
    assert _excerpt(f, lambda text, _code: text, "") == [
        "  |",
        "1 | a [b",
        "  |   ^^",
        "2 |   ␋ c]",
        "  |   ^^^^",
        "  |",
    ]


def test_summary_when_clean(tmp_path, capsys, monkeypatch):
    _write(tmp_path, {"a.conv.json": OK_JSON, "b.conv.yaml": OK_YAML})
    run = _lint(tmp_path, capsys=capsys, mp=monkeypatch)
    assert (run.rc, run.out) == (0, "All checks passed (2 files)\n")


def test_no_documents(tmp_path, capsys, monkeypatch):
    run = _lint(tmp_path, capsys=capsys, mp=monkeypatch)
    assert (run.rc, run.out) == (0, "All checks passed (0 files)\n")
    assert "no documents found" in run.err


def test_paths_outside_the_cwd_stay_absolute(tmp_path, capsys, monkeypatch):
    _write(tmp_path, {"docs/x.conv.json": BROKEN, "elsewhere/.keep": ""})
    run = _lint(tmp_path / "elsewhere", str(tmp_path / "docs"), capsys=capsys, mp=monkeypatch)
    assert run.out.startswith(f"{tmp_path / 'docs' / 'x.conv.json'}:1:")


# --- json ---------------------------------------------------------------------------------


def test_json_findings(tmp_path, capsys, monkeypatch):
    _write(tmp_path, TREE)
    run = _lint(tmp_path, "--format", "json", capsys=capsys, mp=monkeypatch)
    assert run.rc == 1
    findings = json.loads(run.out)
    assert [(f["file"], f["code"]) for f in findings] == [
        ("bad.conv.yaml", "schema-error"),
        ("bad.conv.yaml", "syntax-error"),
        ("chat.conv.yaml", "reminder-not-last"),
        # Reported once, though both the template and the conversation using it find it.
        ("prompts/agent.prompt.md", "unknown-placeholder"),
    ]
    keys = ["file", "code", "severity", "message", "range", "related", "fix"]
    assert all(list(f) == keys for f in findings)
    assert findings[0]["range"] == {
        "start": {"line": 2, "column": 12},
        "end": {"line": 2, "column": 17},
    }
    assert findings[2]["related"] == [
        {
            "file": "chat.conv.yaml",
            "range": {"start": {"line": 6, "column": 5}, "end": {"line": 6, "column": 41}},
            "message": "the conversation ends here: `u2`",
        }
    ]
    assert findings[3]["fix"] == {
        "title": "Replace with `{{CURRENT_DATETIME}}`",
        "edits": [
            {
                "range": {"start": {"line": 2, "column": 42}, "end": {"line": 2, "column": 58}},
                "new_text": "{{CURRENT_DATETIME}}",
            }
        ],
    }
    assert run.err == "Found 4 problems (2 errors, 2 warnings, 0 infos) in 3 files; 1 fixable\n"


def test_json_finding_in_the_settings_file(tmp_path, capsys, monkeypatch):
    _write(tmp_path, {"promptls.toml": "max_input_tokens = -5\n", "a.conv.json": OK_JSON})
    run = _lint(tmp_path, "--format", "json", capsys=capsys, mp=monkeypatch)
    # An invalid value is a finding in the settings file, not a configuration error.
    assert run.rc == 1
    [finding] = json.loads(run.out)
    assert (finding["file"], finding["code"]) == ("promptls.toml", "invalid-setting")
    assert finding["range"]["start"] == {"line": 1, "column": 20}


# --- sarif --------------------------------------------------------------------------------


def test_sarif_is_valid_and_complete(tmp_path, capsys, monkeypatch):
    (tmp_path / ".git").mkdir()
    _write(tmp_path, TREE)
    run = _lint(tmp_path / "prompts", "--format", "sarif", "..", capsys=capsys, mp=monkeypatch)
    log = json.loads(run.out)
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator.check_schema(schema)
    jsonschema.Draft4Validator(schema).validate(log)

    assert log["version"] == "2.1.0"
    [sarif_run] = log["runs"]
    driver = sarif_run["tool"]["driver"]
    assert driver["name"] == "promptls" and driver["version"]
    assert [r["id"] for r in driver["rules"]] == [r.code for r in RULES]
    rule = driver["rules"][[r.code for r in RULES].index("syntax-error")]
    assert rule["helpUri"].endswith("RULES.md#syntax-error")
    assert rule["shortDescription"]["text"]
    assert rule["defaultConfiguration"] == {"level": "error"}
    assert sarif_run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"

    results = sarif_run["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [
        ("schema-error", "error"),
        ("syntax-error", "error"),
        ("reminder-not-last", "warning"),
        ("unknown-placeholder", "warning"),
    ]
    for r in results:
        assert driver["rules"][r["ruleIndex"]]["id"] == r["ruleId"]
    # URIs are relative to the repository root, wherever the command runs.
    loc = results[0]["locations"][0]["physicalLocation"]
    assert loc == {
        "artifactLocation": {"uri": "bad.conv.yaml", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 2, "startColumn": 12, "endLine": 2, "endColumn": 17},
    }
    assert results[2]["relatedLocations"][0]["message"]["text"] == (
        "the conversation ends here: `u2`"
    )
    fix = results[3]["fixes"][0]
    assert fix["description"]["text"] == "Replace with `{{CURRENT_DATETIME}}`"
    [change] = fix["artifactChanges"]
    assert change["artifactLocation"]["uri"] == "prompts/agent.prompt.md"
    assert change["replacements"] == [
        {
            "deletedRegion": {"startLine": 2, "startColumn": 42, "endLine": 2, "endColumn": 58},
            "insertedContent": {"text": "{{CURRENT_DATETIME}}"},
        }
    ]


def test_sarif_levels_follow_the_rules_setting(tmp_path, capsys, monkeypatch):
    _write(
        tmp_path,
        {
            "promptls.toml": 'rules = { reminder-not-last = "info" }\n',
            "chat.conv.yaml": REMINDER.replace("system_prompt: prompts/agent.prompt.md\n", ""),
        },
    )
    run = _lint(tmp_path, "--format", "sarif", capsys=capsys, mp=monkeypatch)
    [result] = json.loads(run.out)["runs"][0]["results"]
    assert (result["ruleId"], result["level"]) == ("reminder-not-last", "note")


# --- github -------------------------------------------------------------------------------


def test_github_annotations(tmp_path, capsys, monkeypatch):
    _write(tmp_path, TREE)
    run = _lint(tmp_path, "--format", "github", capsys=capsys, mp=monkeypatch)
    assert run.rc == 1
    assert run.out.splitlines() == [
        "::error file=bad.conv.yaml,line=2,col=12,endLine=2,endColumn=17,title=schema-error"
        "::unknown role `human`: expected one of `system`, `user`, `assistant`, `tool`, "
        "`reminder`, `summary`; the message is left out",
        "::error file=bad.conv.yaml,line=3,col=27,endLine=3,endColumn=33,title=syntax-error"
        "::invalid YAML: found unexpected end of stream while scanning a quoted scalar",
        "::warning file=chat.conv.yaml,line=4,col=20,endLine=4,endColumn=28,"
        "title=reminder-not-last::reminder `r1` is not the last message: 2 messages follow "
        "it, so it is sent in the middle of the history instead of last (use the `reminder` "
        "key)%0Arelated: chat.conv.yaml:6:5: the conversation ends here: `u2`",
        "::warning file=prompts/agent.prompt.md,line=2,col=42,endLine=2,endColumn=58,"
        "title=unknown-placeholder::unknown placeholder `{{CURRENT_DATE}}` in the system "
        "prompt is sent literally; did you mean `{{CURRENT_DATETIME}}`?"
        "%0Afix available: Replace with `{{CURRENT_DATETIME}}`",
        "Found 4 problems (2 errors, 2 warnings, 0 infos) in 3 files; 1 fixable",
    ]


def test_github_escaping(tmp_path, capsys, monkeypatch):
    (tmp_path / ".git").mkdir()
    _write(tmp_path, {"a,b:c.conv.yaml": 'messages:\n  - {role: "50%,\\r\\nx:y", content: hi}\n'})
    run = _lint(tmp_path, "--format", "github", capsys=capsys, mp=monkeypatch)
    first = run.out.splitlines()[0]
    assert first.startswith("::error file=a%2Cb%3Ac.conv.yaml,line=2,")
    assert "::unknown role `50%25,%0D%0Ax:y`" in first


def test_github_findings_go_to_the_step_summary(tmp_path, capsys, monkeypatch):
    _write(tmp_path, TREE)
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    run = _lint(tmp_path, "--format", "github", capsys=capsys, mp=monkeypatch)
    assert run.rc == 1
    # The log keeps the annotations and the summary line; the job summary gets a table.
    assert run.out.splitlines()[-1].startswith("Found 4 problems")
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n### promptls lint\n\nFound 4 problems (2 errors,")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) == 4
    assert rows[0].startswith("| `bad.conv.yaml:2:12` | error | `schema-error` | unknown role")
    assert rows[3].startswith("| `prompts/agent.prompt.md:2:42` | warning | `unknown-placeholder`")


def test_github_step_summary_is_bounded_and_escaped(tmp_path, capsys, monkeypatch):
    from server.cli.lint.render_github import MAX_SUMMARY_ROWS

    msgs = ",".join(f'{{"role": "x|<b>{i}", "content": "hi"}}' for i in range(MAX_SUMMARY_ROWS + 5))
    _write(tmp_path, {"many.conv.json": f"[{msgs}]"})
    summary = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    run = _lint(tmp_path, "--format", "github", capsys=capsys, mp=monkeypatch)
    assert run.rc == 1
    text = summary.read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) == MAX_SUMMARY_ROWS
    assert "unknown role `x\\|&lt;b&gt;0`" in rows[0]
    assert "<b>" not in text
    n_more = MAX_SUMMARY_ROWS + 5 - MAX_SUMMARY_ROWS
    assert f"*… {n_more} more findings: the job's log lists every one.*" in text


def test_github_step_summary_that_cannot_be_written_is_a_warning(tmp_path, capsys, monkeypatch):
    _write(tmp_path, TREE)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "no-such-dir" / "s.md"))
    run = _lint(tmp_path, "--format", "github", capsys=capsys, mp=monkeypatch)
    assert run.rc == 1
    assert run.out.splitlines()[-1].startswith("Found 4 problems")
    assert "promptls: warning: cannot write the job summary" in run.err
    assert "Traceback" not in run.err


def test_info_findings_are_notices(tmp_path, capsys, monkeypatch):
    _write(
        tmp_path,
        {
            "promptls.toml": 'rules = { reminder-not-last = "info" }\n',
            "chat.conv.yaml": REMINDER.replace("system_prompt: prompts/agent.prompt.md\n", ""),
        },
    )
    run = _lint(tmp_path, "--format", "github", capsys=capsys, mp=monkeypatch)
    assert run.out.startswith("::notice file=chat.conv.yaml,line=3,")


# --- select, ignore, severities and exit codes -------------------------------------------


def test_select_and_ignore(tmp_path, capsys, monkeypatch):
    _write(tmp_path, TREE)

    def codes(*args: str) -> list[str]:
        run = _lint(tmp_path, "--format", "json", *args, capsys=capsys, mp=monkeypatch)
        return [f["code"] for f in json.loads(run.out)]

    assert codes("--select", "syntax-error, reminder-not-last") == [
        "syntax-error",
        "reminder-not-last",
    ]
    assert codes("--ignore", "schema-error,syntax-error,unknown-placeholder") == [
        "reminder-not-last"
    ]
    assert codes("--select", "syntax-error,schema-error", "--ignore", "schema-error") == [
        "syntax-error"
    ]
    # `all`, as in a suppression comment's `ignore[all]`: every rule.
    assert codes("--ignore", "ALL") == []
    assert codes("--select", "all", "--ignore", "syntax-error,schema-error,reminder-not-last") == [
        "unknown-placeholder"
    ]


@pytest.mark.parametrize("option", ["--select", "--ignore"])
def test_unknown_code_is_a_usage_error(tmp_path, capsys, monkeypatch, option):
    _write(tmp_path, TREE)
    run = _lint(tmp_path, option, "syntax-eror", capsys=capsys, mp=monkeypatch)
    assert (run.rc, run.out) == (2, "")
    assert run.err == (
        f"promptls: error: unknown rule code `syntax-eror` in {option}; "
        "did you mean `syntax-error`?\n"
    )


@pytest.mark.parametrize(
    ("files", "args", "rc"),
    [
        ({"ok.conv.json": OK_JSON}, [], 0),
        ({"bad.conv.yaml": BAD}, [], 1),
        ({"chat.conv.yaml": REMINDER, "prompts/agent.prompt.md": "# Role\n"}, [], 0),
        (
            {"chat.conv.yaml": REMINDER, "prompts/agent.prompt.md": "# Role\n"},
            ["--fail-on", "warning"],
            1,
        ),
        (
            {
                "chat.conv.yaml": REMINDER,
                "prompts/agent.prompt.md": "# Role\n",
                "promptls.toml": 'rules = { reminder-not-last = "info" }\n',
            },
            ["--fail-on", "warning"],
            0,
        ),
        (
            {
                "chat.conv.yaml": REMINDER,
                "prompts/agent.prompt.md": "# Role\n",
                "promptls.toml": 'rules = { reminder-not-last = "info" }\n',
            },
            ["--fail-on", "info"],
            1,
        ),
        (
            {
                "chat.conv.yaml": REMINDER,
                "prompts/agent.prompt.md": "# Role\n",
                "promptls.toml": 'rules = { reminder-not-last = "error" }\n',
            },
            [],
            1,
        ),
        ({"ok.conv.json": OK_JSON}, ["missing-folder"], 2),
        ({"ok.conv.json": OK_JSON}, ["--fail-on", "hint"], 2),
        ({"ok.conv.json": OK_JSON}, ["--format", "xml"], 2),
        ({"ok.conv.json": OK_JSON}, ["--jobs", "0"], 2),
        ({"ok.conv.json": OK_JSON, "promptls.toml": "max_input_tokens = [\n"}, [], 2),
        ({"ok.conv.json": OK_JSON, "pyproject.toml": "[tool.promptls\nmodel = 1\n"}, [], 2),
    ],
)
def test_exit_codes(tmp_path, capsys, monkeypatch, files, args, rc):
    _write(tmp_path, files)
    assert _lint(tmp_path, *args, capsys=capsys, mp=monkeypatch).rc == rc


def test_rule_turned_off_in_settings(tmp_path, capsys, monkeypatch):
    _write(tmp_path, {**TREE, "promptls.toml": 'rules = { schema-error = "off" }\n'})
    run = _lint(tmp_path, "--format", "json", capsys=capsys, mp=monkeypatch)
    assert "schema-error" not in {f["code"] for f in json.loads(run.out)}


def test_configuration_error_message(tmp_path, capsys, monkeypatch):
    _write(tmp_path, {"ok.conv.json": OK_JSON, "promptls.toml": "max_input_tokens = [\n"})
    run = _lint(tmp_path, capsys=capsys, mp=monkeypatch)
    assert run.err.startswith("promptls: error: promptls.toml: invalid TOML: ")


def test_a_settings_file_nested_too_deep_is_a_configuration_error(tmp_path, capsys, monkeypatch):
    """tomllib reads nested arrays by recursion: 5,000 of them raised RecursionError, an
    "internal error; please report it". It is the file's error, said at its place."""
    from assembly.config import parse_config

    deep = "max_input_tokens = 4000\nx = " + "[" * 5000 + "]" * 5000 + "\n"
    _write(tmp_path, {"ok.conv.json": OK_JSON, "promptls.toml": deep})
    run = _lint(tmp_path, capsys=capsys, mp=monkeypatch)
    assert run.rc == 2
    assert run.err == (
        "promptls: error: promptls.toml: invalid TOML: arrays or inline tables nested more "
        "than 100 deep\n"
    )
    parsed = parse_config("promptls.toml", "promptls.toml", deep)
    assert parsed is not None and parsed.error_range is not None
    assert parsed.error_range.start == deep.index("[") + 100  # the 101st bracket


def test_suppression_comments(tmp_path, capsys, monkeypatch):
    suppressed = BAD.replace(
        "  - {role: human", "  # promptls: ignore[schema-error]\n  - {role: human"
    )
    reminder = (
        '[{"role": "user", "content": "a"}, {"role": "reminder", "content": "b", '
        '"promptls-ignore": ["reminder-not-last"]}, {"role": "user", "content": "c"}]\n'
    )
    template = TEMPLATE.replace("The date", "<!-- promptls: ignore[all] -->\nThe date")
    files = {"bad.conv.yaml": suppressed, "r.conv.json": reminder, "t.prompt.md": template}
    _write(tmp_path, files)
    run = _lint(tmp_path, "--format", "json", capsys=capsys, mp=monkeypatch)
    assert [(f["file"], f["code"]) for f in json.loads(run.out)] == [
        ("bad.conv.yaml", "syntax-error")
    ]
    _write(
        tmp_path,
        {"r.conv.json": reminder.replace(', "promptls-ignore": ["reminder-not-last"]', "")},
    )
    run = _lint(tmp_path, "--format", "json", "r.conv.json", capsys=capsys, mp=monkeypatch)
    assert [f["code"] for f in json.loads(run.out)] == ["reminder-not-last"]


# --- discovery ----------------------------------------------------------------------------


def test_gitignore_and_skipped_folders(tmp_path, capsys, monkeypatch):
    (tmp_path / ".git").mkdir()
    _write(
        tmp_path,
        {
            ".gitignore": "build/\n*.tmp.conv.json\n!keep.tmp.conv.json\n/top.conv.json\n"
            "docs/**/drafts\n",
            "a.conv.json": BROKEN,
            "top.conv.json": BROKEN,
            "sub/top.conv.json": BROKEN,
            "x.tmp.conv.json": BROKEN,
            "keep.tmp.conv.json": BROKEN,
            "build/b.conv.json": BROKEN,
            "docs/one/two/drafts/d.conv.json": BROKEN,
            "docs/one/e.conv.json": BROKEN,
            "sub/.gitignore": "local.conv.json\n!x.tmp.conv.json\n",
            "sub/local.conv.json": BROKEN,
            "sub/x.tmp.conv.json": BROKEN,
            "node_modules/n.conv.json": BROKEN,
            ".venv/v.conv.json": BROKEN,
            ".git/g.conv.json": BROKEN,
            "notes.txt": BROKEN,
            "README.md": "# not a prompt\n",
        },
    )
    run = _lint(tmp_path, "--format", "json", capsys=capsys, mp=monkeypatch)
    assert _files_linted(run) == [
        "a.conv.json",
        "docs/one/e.conv.json",
        "keep.tmp.conv.json",
        "sub/top.conv.json",
        "sub/x.tmp.conv.json",
    ]
    # The repository's .gitignore applies to a subfolder linted on its own.
    run = _lint(tmp_path / "sub", "--format", "json", capsys=capsys, mp=monkeypatch)
    assert _files_linted(run) == ["top.conv.json", "x.tmp.conv.json"]


def test_a_symlinked_document_is_linted_once_at_its_real_path(tmp_path, capsys, monkeypatch):
    # Discovery resolves only a symlinked file (the folders it walks are real ones): a link
    # to a document of the folder is that document, reported once under its own name.
    _write(tmp_path, {"real/a.conv.json": BROKEN, "real/b.conv.json": BROKEN})
    (tmp_path / "link.conv.json").symlink_to(tmp_path / "real" / "a.conv.json")
    (tmp_path / "real" / "also-b.conv.json").symlink_to("b.conv.json")
    run = _lint(tmp_path, "--format", "json", capsys=capsys, mp=monkeypatch)
    assert _files_linted(run) == ["real/a.conv.json", "real/b.conv.json"]
    assert " in 2 files;" in run.err


def test_named_files_are_always_linted(tmp_path, capsys, monkeypatch):
    _write(
        tmp_path,
        {
            ".gitignore": "*.conv.json\n",
            "ignored.conv.json": BROKEN,
            "notes.txt": BROKEN,
            "node_modules/n.conv.json": BROKEN,
        },
    )
    args = ["--format", "json", "ignored.conv.json", "notes.txt", "node_modules/n.conv.json"]
    run = _lint(tmp_path, *args, capsys=capsys, mp=monkeypatch)
    assert _files_linted(run) == ["ignored.conv.json", "node_modules/n.conv.json", "notes.txt"]


def test_include_and_exclude_settings(tmp_path, capsys, monkeypatch):
    _write(
        tmp_path,
        {
            "pyproject.toml": "[tool.promptls]\n"
            'include = ["chats/*.json", "*.chat.yaml"]\n'
            'exclude = ["archive/", "skip-*.conv.json"]\n',
            "chats/one.json": BROKEN,
            "chats/deeper/two.json": BROKEN,
            "sub/three.chat.yaml": "messages: [\n",
            "archive/old.conv.json": BROKEN,
            "skip-me.conv.json": BROKEN,
            "a.conv.json": BROKEN,
            "templates/t.md": "# not included\n",
        },
    )
    run = _lint(tmp_path, "--format", "json", capsys=capsys, mp=monkeypatch)
    assert _files_linted(run) == ["a.conv.json", "chats/one.json", "sub/three.chat.yaml"]


def test_invalid_include_is_a_finding(tmp_path, capsys, monkeypatch):
    _write(tmp_path, {"promptls.toml": 'include = "*.json"\n', "a.conv.json": OK_JSON})
    run = _lint(tmp_path, "--format", "json", capsys=capsys, mp=monkeypatch)
    assert [(f["file"], f["code"]) for f in json.loads(run.out)] == [
        ("promptls.toml", "invalid-setting")
    ]


# --- parallel -----------------------------------------------------------------------------


def test_parallel_equals_sequential(tmp_path, capsys, monkeypatch):
    files = {f"d{i:02}/c{i:02}.conv.yaml": BAD if i % 3 else OK_YAML for i in range(30)}
    _write(tmp_path, {**files, **TREE})
    for fmt in ("text", "json", "sarif", "github"):
        runs = [
            _lint(tmp_path, "--format", fmt, *jobs, capsys=capsys, mp=monkeypatch)
            for jobs in (["-j", "1"], ["-j", "3"], [])
        ]
        assert runs[0].out.count("schema-error") >= 20
        assert runs[0] == runs[1] == runs[2]


@pytest.mark.parametrize("jobs", ["1", "3"])
def test_a_settings_file_is_read_once_a_folder(tmp_path, capsys, monkeypatch, jobs):
    """The documents of a folder share its settings file: found, read and parsed once (by
    the walk, which reads its include/exclude, and once for the documents), and every
    document is checked with it, in worker processes too."""
    import server.config

    settings = 'rules = { reminder-not-last = "error" }\n'
    files = {f"d{i % 2}/c{i:02}.conv.yaml": REMINDER for i in range(20)}
    _write(tmp_path, {**files, "promptls.toml": settings, "prompts/agent.prompt.md": TEMPLATE})
    reads: list[Path] = []
    read_config = server.config.read_config

    def counted(path: Path) -> server.config.ConfigFile | None:
        reads.append(path)
        return read_config(path)

    monkeypatch.setattr(server.config, "read_config", counted)
    run = _lint(tmp_path, "--format", "json", "-j", jobs, capsys=capsys, mp=monkeypatch)
    findings = json.loads(run.out)
    assert sorted(f["file"] for f in findings if f["code"] == "reminder-not-last") == sorted(files)
    assert {f["severity"] for f in findings if f["code"] == "reminder-not-last"} == {"error"}
    # The walk of "." and each of the three folders (d0, d1, prompts): four reads, not 25.
    assert reads == [tmp_path / "promptls.toml"] * 4


def test_workers_inherit_the_encoding_the_settings_file_asks_for(tmp_path, capsys, monkeypatch):
    """Before forking its workers, lint loads the encodings the folders' settings files
    name (the default model's only for a folder without one), and counts with them."""
    import server.cli.lint.run  # noqa: F401 (the module, not the package's ``run``)

    lint_run = sys.modules["server.cli.lint.run"]
    files = {f"c{i:02}.conv.yaml": REMINDER for i in range(20)}
    settings = 'model = "gpt-4"\nrules = { reminder-not-last = "error" }\n'
    _write(
        tmp_path / "a", {**files, "promptls.toml": settings, "prompts/agent.prompt.md": TEMPLATE}
    )
    _write(tmp_path / "b", {"x.conv.yaml": REMINDER, "prompts/agent.prompt.md": TEMPLATE})
    loaded: list[str] = []
    load = lint_run.load_tokenizer

    def recorded(encoding: str | None = None, *, model: str | None = None) -> object:
        res = load(encoding, model=model)
        loaded.append(res.requested)
        return res

    monkeypatch.setattr(lint_run, "load_tokenizer", recorded)
    run = _lint(tmp_path / "a", "--format", "json", "-j", "2", capsys=capsys, mp=monkeypatch)
    assert loaded == ["cl100k_base"]
    assert len([f for f in json.loads(run.out) if f["code"] == "reminder-not-last"]) == 20
    loaded.clear()
    _lint(tmp_path, "--format", "json", "-j", "2", "a", "b", capsys=capsys, mp=monkeypatch)
    assert sorted(loaded) == ["cl100k_base", "o200k_base"]


@pytest.mark.parametrize("kind", ["conv.yaml", "prompt.md"])
def test_workers_import_nothing_the_parent_did_not(tmp_path, kind):
    """Whatever the files need is imported before the workers fork (PyYAML too, for YAML
    conversations and templates' front matter): a module a worker imports is imported
    once per worker, and the patterns it compiles are never kept (``server.codecache``)."""
    text = OK_YAML if kind == "conv.yaml" else TEMPLATE
    _write(tmp_path, {f"d{i:02}/x{i:02}.{kind}": text for i in range(20)})
    run = _cli(tmp_path, "--format", "json", "-j", "2", PYTHONPROFILEIMPORTTIME="1")
    assert run.rc == 0, run.err
    imported = [line.rpartition("|")[2].strip() for line in run.err.splitlines()]
    imported = [m for m in imported if m and "import time:" not in m]
    twice = sorted({m for m in imported if imported.count(m) > 1 and not m.startswith("_")})
    # (names the standard library looks for on other platforms are looked for each time)
    assert [m for m in twice if m not in ("nt", "org", "org.python", "org.python.core")] == []
    assert "yaml" in imported


# --- subprocess: the installed command ----------------------------------------------------


def test_subprocess_exit_codes_and_plain_output(tmp_path):
    _write(tmp_path, TREE)
    run = _cli(tmp_path)
    assert run.rc == 1
    assert "\x1b[" not in run.out
    assert run.out.endswith(
        "Found 4 problems (2 errors, 2 warnings, 0 infos) in 3 files; 1 fixable\n"
    )
    assert _cli(tmp_path, "--select", "reminder-not-last").rc == 0
    run = _cli(tmp_path, "nowhere")
    assert (run.rc, run.err) == (2, "promptls: error: no such file or directory: nowhere\n")


def test_the_program_ends_without_teardown_once_its_workers_are_joined(
    tmp_path, capsys, monkeypatch
):
    # ``promptls lint`` (``run``) ends without the interpreter's teardown (no ``atexit``
    # handler runs), after its worker processes were joined: the output, the summary and
    # the exit code are those of ``main`` in-process, with workers and without.
    files = {f"d{i:02}/c{i:02}.conv.yaml": BAD if i % 3 else OK_YAML for i in range(20)}
    _write(tmp_path, {**files, **TREE})
    program = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write('torn down\\n'))\n"
        "from server.cli.main import run\n"
        "sys.argv = ['promptls', *sys.argv[1:]]\n"
        "run()\n"
    )
    for jobs in (["-j", "1"], ["-j", "2"]):
        args = ["lint", "--format", "json", *jobs]
        proc = subprocess.run(
            [sys.executable, "-c", program, *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=_env(),
            timeout=120,
        )
        run = _lint(tmp_path, *args[1:], capsys=capsys, mp=monkeypatch)
        assert (proc.returncode, proc.stdout, proc.stderr) == (run.rc, run.out, run.err)
        assert run.rc == 1 and len(_files_linted(run)) == 16  # the 13 broken, and TREE's 3
        assert "torn down" not in proc.stderr
    # ``--version`` is not a command: its process ends as usual (the handler runs).
    proc = subprocess.run(
        [sys.executable, "-c", program, "--version"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert proc.stderr.endswith("torn down\n")


@pytest.mark.parametrize(("no_color", "colored"), [("", True), ("1", False)])
def test_colour_only_on_a_terminal_without_no_color(tmp_path, no_color, colored):
    _write(tmp_path, {"bad.conv.yaml": BAD})
    main_fd, child_fd = pty.openpty()
    env = _env(NO_COLOR=no_color) if no_color else _env()
    proc = subprocess.Popen(
        [sys.executable, "-m", "server.cli", "lint"],
        cwd=tmp_path,
        stdout=child_fd,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    os.close(child_fd)
    chunks = []
    while True:
        try:
            data = os.read(main_fd, 4096)
        except OSError:  # EIO: the child closed the terminal.
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=60) == 1
    os.close(main_fd)
    out = b"".join(chunks).decode()
    assert ("\x1b[1;31merror[schema-error]\x1b[0m" in out) is colored
    assert "error[schema-error]" in out


def test_watch_relints_on_change(tmp_path):
    _write(tmp_path, {"a.conv.json": OK_JSON, "b.conv.yaml": OK_YAML})
    # The watcher is stopped by Ctrl-C (SIGINT). A test run started in the background (a
    # non-interactive `cmd &`) ignores SIGINT, and an ignored signal stays ignored across
    # exec: start the watcher as a terminal would, with SIGINT's default action.
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "lint", "--watch", "."],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
    finally:
        signal.signal(signal.SIGINT, saved)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()

    def wait_for(text: str, *, touch: Path | None = None, content: str = "") -> bool:
        """Wait for a line with ``text``, (re)writing ``touch`` until the watcher sees it."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if touch is not None:
                touch.write_text(content, encoding="utf-8")
            try:
                while True:
                    if text in lines.get(timeout=2):
                        return True
            except queue.Empty:
                continue
        return False

    try:
        assert wait_for("All checks passed (2 files)")
        assert wait_for("syntax-error", touch=tmp_path / "a.conv.json", content=BROKEN)
        assert wait_for("in 1 file;")
        fixed = tmp_path / "a.conv.json"
        assert wait_for("All checks passed (2 files)", touch=fixed, content=OK_JSON)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# --- gitlab -------------------------------------------------------------------------------


def test_gitlab_code_quality_report(tmp_path, capsys, monkeypatch):
    _write(tmp_path, TREE)
    run = _lint(tmp_path, "--format", "gitlab", capsys=capsys, mp=monkeypatch)
    assert run.rc == 1
    issues = json.loads(run.out)
    # GitLab's required keys, with its severity names and repository-relative paths.
    assert [(i["check_name"], i["severity"], i["location"]["path"]) for i in issues] == [
        ("schema-error", "major", "bad.conv.yaml"),
        ("syntax-error", "major", "bad.conv.yaml"),
        ("reminder-not-last", "minor", "chat.conv.yaml"),
        ("unknown-placeholder", "minor", "prompts/agent.prompt.md"),
    ]
    first = issues[0]
    assert first["description"].startswith("schema-error: unknown role `human`")
    assert first["location"]["positions"] == {
        "begin": {"line": 2, "column": 12},
        "end": {"line": 2, "column": 17},
    }
    assert len({i["fingerprint"] for i in issues}) == 4
    assert all(re.fullmatch(r"[0-9a-f]{64}", i["fingerprint"]) for i in issues)
    assert "Found 4 problems" in run.err


def test_gitlab_fingerprints_survive_lines_moving(tmp_path, capsys, monkeypatch):
    _write(tmp_path, TREE)
    before = json.loads(_lint(tmp_path, "--format", "gitlab", capsys=capsys, mp=monkeypatch).out)
    chat = tmp_path / "chat.conv.yaml"
    chat.write_text("# a comment above everything\n" + chat.read_text(encoding="utf-8"))
    after = json.loads(_lint(tmp_path, "--format", "gitlab", capsys=capsys, mp=monkeypatch).out)
    moved = [i for i in after if i["location"]["path"] == "chat.conv.yaml"]
    old = [i for i in before if i["location"]["path"] == "chat.conv.yaml"]
    assert moved[0]["location"]["positions"]["begin"]["line"] == (
        old[0]["location"]["positions"]["begin"]["line"] + 1
    )
    assert [i["fingerprint"] for i in after] == [i["fingerprint"] for i in before]


def test_batches_cover_every_file_once_in_order_and_shrink_at_the_end():
    from server.cli.lint.run import MAX_BATCH, _batches

    for n_files, n_workers in ((1, 2), (17, 2), (1000, 2), (1000, 8), (5000, 3)):
        batches = list(_batches(n_files, n_workers))
        assert [i for start, stop in batches for i in range(start, stop)] == list(range(n_files))
        sizes = [stop - start for start, stop in batches]
        assert all(1 <= s <= MAX_BATCH for s in sizes)
        assert sizes == sorted(sizes, reverse=True)  # never larger than the one before
        # The last batch of each worker is a single file: they finish together.
        assert sizes[-n_workers:] == [1] * min(n_workers, len(sizes))
