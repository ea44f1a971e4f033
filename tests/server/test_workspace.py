"""The IO half: settings files, referenced files and the workspace boundary."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from assembly.diagnostics import Diagnostic
from assembly.model import Role
from assembly.text import LineIndex
from server.workspace import analyze

TODAY = dt.date(2026, 7, 15)
CONV = """\
system_prompt: prompts/agent.prompt.md
tools: [read_file]
messages:
  - {id: u1, role: user, content: "hello"}
"""
PROMPT = """\
---
name: agent
settings:
  max_input_tokens: 64000
---
# Role
You are a careful assistant. Today is {{CURRENT_DATETIME}}.

# Tools

## read_file
Pass the file_id UUID, never the filename.

## web_search
Search the web only for public facts.
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def _at(d: Diagnostic, text: str) -> str:
    """Render a diagnostic as `code line:col `source`` for readable assertions."""
    pos = LineIndex(text).line_col(d.range.start)
    return f"{d.code} {pos.line + 1}:{pos.column + 1} `{text[d.range.start : d.range.end]}`"


def test_template_is_resolved_and_only_offered_tools_keep_guidance(tmp_path: Path) -> None:
    _write(tmp_path, {"c.conv.yaml": CONV, "prompts/agent.prompt.md": PROMPT})
    a = analyze(tmp_path / "c.conv.yaml", root=tmp_path, today=TODAY)
    system = a.assembly.system_text or ""
    assert "Today is Wednesday July 15, 2026." in system
    assert "## read_file" in system
    assert "web_search" not in system
    # The template's front matter settings apply below the document's own.
    assert a.settings.max_input_tokens == 64000
    assert [d.code for d in a.diagnostics] == []
    assert tmp_path / "prompts/agent.prompt.md" in a.dependencies


def test_pyproject_setting_invalid_value_is_reported_where_written(tmp_path: Path) -> None:
    pyproject = '[project]\nname = "x"\n\n[tool.promptls]\nsafety_margin = 1.5\nmodel = "gpt-4.1"\n'
    _write(
        tmp_path,
        {
            "pyproject.toml": pyproject,
            "c.conv.yaml": CONV.replace("system_prompt: prompts/agent.prompt.md\n", ""),
        },
    )
    a = analyze(tmp_path / "c.conv.yaml", root=tmp_path, today=TODAY)
    (d,) = a.diagnostics
    assert d.path == str(tmp_path / "pyproject.toml")
    assert _at(d, pyproject) == "invalid-setting 5:17 `1.5`"
    assert "less than 1" in d.message
    assert a.settings.safety_margin == 0.05  # the default stays in force
    assert a.settings.model == "gpt-4.1"  # the valid key of the same file applies


def test_promptls_toml_is_found_above_the_document_and_the_document_wins(tmp_path: Path) -> None:
    conv = "settings: {max_input_tokens: 9000}\nmessages:\n  - {role: user, content: hi}\n"
    _write(
        tmp_path,
        {
            "promptls.toml": "max_input_tokens = 5000\nkeep_past_tool_results = true\n",
            "sub/c.conv.yaml": conv,
        },
    )
    a = analyze(tmp_path / "sub/c.conv.yaml", root=tmp_path, today=TODAY)
    assert a.settings.max_input_tokens == 9000
    assert a.settings.keep_past_tool_results is True


def test_only_the_nearest_settings_file_is_read(tmp_path: Path) -> None:
    """As docs/settings.md says: a pyproject.toml without [tool.promptls] is passed over, in
    one folder promptls.toml wins, and a file further up is not merged into the nearest."""
    conv = "messages:\n  - {role: user, content: hi}\n"
    _write(
        tmp_path,
        {
            "promptls.toml": 'model = "gpt-4"\n',
            "a/pyproject.toml": '[project]\nname = "x"\n',
            "a/c.conv.yaml": conv,
            "b/pyproject.toml": "[tool.promptls]\nmax_input_tokens = 6000\n",
            "b/promptls.toml": "max_input_tokens = 7000\n",
            "b/c.conv.yaml": conv,
        },
    )
    a = analyze(tmp_path / "a/c.conv.yaml", root=tmp_path, today=TODAY)
    assert a.settings.model == "gpt-4"
    b = analyze(tmp_path / "b/c.conv.yaml", root=tmp_path, today=TODAY)
    assert (b.settings.max_input_tokens, b.settings.model) == (7000, "gpt-4o")


def test_document_setting_invalid_value_is_reported_at_its_value(tmp_path: Path) -> None:
    conv = "settings:\n  provider: bedrock\nmessages:\n  - {role: user, content: hi}\n"
    _write(tmp_path, {"c.conv.yaml": conv})
    a = analyze(tmp_path / "c.conv.yaml", root=tmp_path, today=TODAY)
    (d,) = a.diagnostics
    assert d.path is None
    assert _at(d, conv) == "invalid-setting 2:13 `bedrock`"
    assert a.settings.provider == "openai"


@pytest.mark.parametrize(
    ("ref", "code"),
    [
        ("../outside.prompt.md", "path-outside-workspace"),
        ("prompts/missing.prompt.md", "file-not-found"),
    ],
)
def test_system_prompt_path_problems(tmp_path: Path, ref: str, code: str) -> None:
    ws = tmp_path / "ws"
    _write(tmp_path, {"outside.prompt.md": PROMPT})
    conv = CONV.replace("prompts/agent.prompt.md", ref)
    _write(ws, {"c.conv.yaml": conv})
    a = analyze(ws / "c.conv.yaml", root=ws, today=TODAY)
    (d,) = a.diagnostics
    assert _at(d, conv) == f"{code} 1:16 `{ref}`"
    assert a.assembly.system_text is None


def test_symlink_escaping_the_workspace_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _write(tmp_path, {"secret.md": "top secret"})
    conv = (
        "project_files:\n  - {file_id: f1, filename: s.md, path: docs/link.md}\n"
        "messages:\n  - {role: user, content: hi}\n"
    )
    _write(ws, {"c.conv.yaml": conv})
    (ws / "docs").mkdir()
    os.symlink(tmp_path / "secret.md", ws / "docs/link.md")
    a = analyze(ws / "c.conv.yaml", root=ws, today=TODAY)
    assert [d.code for d in a.diagnostics] == ["path-outside-workspace"]
    assert all("top secret" not in str(m.get("content")) for m in a.assembly.provider_messages)


def test_project_file_path_is_read_relative_to_the_document(tmp_path: Path) -> None:
    conv = (
        "project_files:\n  - {file_id: f1, filename: policy.md, path: docs/policy.md}\n"
        "messages:\n  - {role: user, content: hi}\n"
    )
    _write(tmp_path, {"a/c.conv.yaml": conv, "a/docs/policy.md": "Refunds within 30 days."})
    a = analyze(tmp_path / "a/c.conv.yaml", root=tmp_path, today=TODAY)
    assert a.diagnostics == ()
    (docs,) = [e for e in a.assembly.layout if e.id == "$project_files"]
    assert "Refunds within 30 days." in docs.message.text
    assert '"title": "policy.md"' in docs.message.text


def test_invalid_utf8_is_reported_and_the_rest_assembled(tmp_path: Path) -> None:
    path = tmp_path / "c.conv.json"
    path.write_bytes(b'[{"role": "user", "content": "caf\xe9 ok"}]')
    a = analyze(path, root=tmp_path, today=TODAY)
    (d,) = a.diagnostics
    assert d.code == "syntax-error"
    assert a.text[d.range.start] == "\ufffd"
    assert [e.id for e in a.assembly.layout] == ["0"]


def test_unavailable_encoding_falls_back_with_one_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    _write(
        tmp_path,
        {
            "c.conv.yaml": "settings: {model: text-davinci-003}\n"
            "messages: [{role: user, content: hi}]\n"
        },
    )
    a = analyze(tmp_path / "c.conv.yaml", root=tmp_path, today=TODAY)
    assert a.assembly.encoding == "cl100k_base"
    assert a.encoding_requested == "p50k_base"
    assert a.encoding_warning is not None and "p50k_base" in a.encoding_warning


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4.1-mini", "o3", "o4-mini", "gpt-5-nano"])
def test_todays_openai_models_count_with_o200k_base_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # no cache at all: the bundled file only
    _write(
        tmp_path,
        {
            "c.conv.yaml": f"settings: {{model: {model}}}\n"
            "messages: [{role: user, content: 你好}]\n"
        },
    )
    a = analyze(tmp_path / "c.conv.yaml", root=tmp_path, today=TODAY)
    assert (a.assembly.encoding, a.encoding_requested, a.encoding_warning) == (
        "o200k_base",
        "o200k_base",
        None,
    )


# ------------------------------------------------------ the document's own bytes


def test_invalid_utf8_is_reported_and_the_replaced_text_assembled(tmp_path: Path) -> None:
    path = tmp_path / "latin1.conv.json"
    path.write_bytes(b'[{"role": "user", "content": "caf\xe9 au lait"}]')
    res = analyze(path, root=tmp_path, today=TODAY)
    [diag] = [d for d in res.diagnostics if d.code == "syntax-error"]
    assert diag.severity == "error"
    assert "0xe9" in diag.message
    assert res.text[diag.range.start : diag.range.end] == "\ufffd"
    assert (diag.range.start, diag.range.end) == (33, 34)
    assert res.assembly.ok
    assert res.assembly.provider_messages == ({"role": "user", "content": "caf\ufffd au lait"},)


def test_invalid_utf8_after_a_bom(tmp_path: Path) -> None:
    path = tmp_path / "bom.conv.json"
    path.write_bytes(b'\xef\xbb\xbf[{"role": "user", "content": "caf\xe9"}]')
    res = analyze(path, root=tmp_path, today=TODAY)
    assert [(d.code, res.text[d.range.start : d.range.end]) for d in res.diagnostics] == [
        ("syntax-error", "\ufffd")
    ]
    assert "0xe9" in res.diagnostics[0].message
    assert res.assembly.provider_messages == ({"role": "user", "content": "caf\ufffd"},)


def test_a_bom_alone_is_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bom.conv.yaml"
    path.write_bytes("\ufeff- role: user\n  content: héllo\n".encode())
    res = analyze(path, root=tmp_path, today=TODAY)
    assert res.diagnostics == ()
    assert [m.role for m in res.conversation.messages] == [Role.USER]


@pytest.mark.parametrize("kind", ["folder", "fifo", "dev-zero", "dangling"])
def test_settings_file_that_is_not_a_regular_file_is_an_error_at_it(
    tmp_path: Path, kind: str
) -> None:
    """A promptls.toml that is a folder, a FIFO, a link to /dev/zero or a dangling link
    was skipped as if absent (the parent's settings applied, no word said); it is a
    settings error at the file, found without reading it (a FIFO would block)."""
    conv = "messages:\n  - {role: user, content: hi}\n"
    _write(tmp_path, {"promptls.toml": "max_input_tokens = 5000\n", "sub/c.conv.yaml": conv})
    bad = tmp_path / "sub/promptls.toml"
    if kind == "folder":
        bad.mkdir()
    elif kind == "fifo":
        os.mkfifo(bad)
    elif kind == "dev-zero":
        bad.symlink_to("/dev/zero")
    else:
        bad.symlink_to(tmp_path / "sub/missing.toml")
    a = analyze(tmp_path / "sub/c.conv.yaml", root=tmp_path, today=TODAY)
    (d,) = a.diagnostics
    assert (d.code, d.path) == ("invalid-setting", str(bad))
    reason = {
        "folder": "a directory",
        "fifo": "a FIFO",
        "dev-zero": "a character device",
        "dangling": "a dangling symbolic link",
    }[kind]
    assert d.message.startswith(f"cannot read promptls.toml: {reason}")


def test_broken_nearer_settings_file_is_an_error_and_the_one_above_applies(
    tmp_path: Path,
) -> None:
    """A nearer promptls.toml with invalid TOML made the defaults apply: every setting of
    the project's file above was dropped while the user typed. As in ruff's language
    server, the broken file is an error at it and the next readable one above applies
    (both are dependencies, so fixing either re-checks the document); a second broken
    file on the way up is reported too."""
    conv = "messages:\n  - {role: user, content: hi}\n"
    _write(
        tmp_path,
        {
            "promptls.toml": "max_input_tokens = 5000\nkeep_past_tool_results = true\n",
            "a/pyproject.toml": "[tool.promptls]\nmodel = [\n",
            "a/b/promptls.toml": "max_input_tokens = \n",
            "a/b/c.conv.yaml": conv,
        },
    )
    a = analyze(tmp_path / "a/b/c.conv.yaml", root=tmp_path, today=TODAY)
    assert [(d.code, Path(d.path or "").relative_to(tmp_path)) for d in a.diagnostics] == [
        ("invalid-setting", Path("a/b/promptls.toml")),
        ("invalid-setting", Path("a/pyproject.toml")),
    ]
    assert all("invalid TOML" in d.message for d in a.diagnostics)
    assert a.settings.max_input_tokens == 5000
    assert a.settings.keep_past_tool_results is True
    assert tmp_path / "promptls.toml" in a.dependencies
    assert tmp_path / "a/b/promptls.toml" in a.dependencies
    # Not above the root: a broken file at the root falls back to the defaults.
    b = analyze(tmp_path / "a/b/c.conv.yaml", root=tmp_path / "a/b", today=TODAY)
    assert [d.code for d in b.diagnostics] == ["invalid-setting"]
    assert b.settings.max_input_tokens != 5000
