"""The packaged JSON Schema of conversation documents is current and agrees with the reader.

Editors validate ``*.conv.json`` / ``*.conv.yaml`` files with
``assembly/data/conversation.schema.json`` without the language server, so the schema must
say what ``assembly.reading.parse_conversation`` says: every example and every fixture the
reader accepts validates, and what the schema accepts reads without a ``schema-error``.
A JSONL file is checked as the equivalent document: its header line's keys plus
``messages`` (the other lines), or a bare array when it has no header.
"""

from __future__ import annotations

import fnmatch
import json
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from assembly.documents import format_for_path, is_claude_code_transcript, is_codex_rollout
from assembly.formats.anthropic import claude_code_request
from assembly.formats.copilot import copilot_request, is_copilot_session
from assembly.formats.gemini_cli import gemini_cli_request, is_gemini_cli_session
from assembly.formats.pi import is_pi_session, pi_request
from assembly.formats.responses import codex_request
from assembly.model import DocFormat
from assembly.reading import parse_conversation
from assembly.settings import SettingsLayer, resolve_settings
from assembly.syntax import absolute, parse_json, parse_jsonl, parse_yaml
from server.schema import (
    CONVERSATION_SCHEMA_URL,
    REGENERATE_COMMAND,
    SCHEMA_FILE,
    render_schema,
    schema_path,
)

REPO = Path(__file__).resolve().parent.parent
SCHEMA_PATH = REPO / "assembly" / SCHEMA_FILE
EXAMPLES = sorted((REPO / "examples").glob("*.conv.*"))
FIXTURES = sorted(
    p
    for p in (REPO / "tests" / "data").rglob("*.conv.*")
    if p.is_file() and format_for_path(p.name) is not None
)
_PARSERS = {DocFormat.JSON: parse_json, DocFormat.JSONL: parse_jsonl, DocFormat.YAML: parse_yaml}


def test_schema_file_is_current() -> None:
    current = SCHEMA_PATH.read_text(encoding="utf-8") if SCHEMA_PATH.exists() else ""
    if current != render_schema():
        pytest.fail(f"{SCHEMA_PATH.relative_to(REPO)} is out of date: run `{REGENERATE_COMMAND}`")


def test_schema_is_draft_2020_12_with_the_published_id() -> None:
    schema = _schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == CONVERSATION_SCHEMA_URL
    assert CONVERSATION_SCHEMA_URL.startswith("https://")
    assert CONVERSATION_SCHEMA_URL.endswith("/" + SCHEMA_PATH.name)


def test_schema_ships_in_the_package() -> None:
    assert schema_path().read_text(encoding="utf-8") == SCHEMA_PATH.read_text(encoding="utf-8")
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["assembly"]
    assert any(fnmatch.fnmatch(SCHEMA_FILE, p) for p in patterns), patterns


def test_every_property_has_a_description() -> None:
    schema = _schema()
    missing = [
        path
        for path, prop in _properties(schema, "$")
        if "description" not in _resolve(schema, prop)
    ]
    assert not missing, f"properties without a description (editors show it on hover): {missing}"


def test_settings_come_from_the_settings_model() -> None:
    from assembly.settings import SETTING_NAMES

    settings = _schema()["$defs"]["settings"]
    assert list(settings["properties"]) == list(SETTING_NAMES)
    assert settings["additionalProperties"] is False


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_validate(path: Path) -> None:
    data, read_whole = _load(path)
    assert read_whole
    _check_valid(data, where=path.name)
    assert _reader_problems(_read(path), format_for_path(path.name)) == []


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(REPO / "tests/data")))
def test_fixtures_agree_with_the_reader(path: Path) -> None:
    """A fixture the reader accepts validates; one the schema accepts reads cleanly."""
    data, read_whole = _load(path)
    problems = _reader_problems(_read(path), format_for_path(path.name))
    if not read_whole:
        # A syntax error or an alias bomb: the schema sees only what could be recovered.
        assert problems
        return
    errors = _errors(data)
    if not problems:
        assert not errors, f"the reader accepts {path.name} but the schema does not: {errors}"
    else:
        assert errors, f"the schema accepts {path.name} but the reader reports: {problems}"


VALID = {
    "bare array": """
- {role: system, content: You help.}
- {role: user, content: [{type: text, text: hi}, {type: image_url, image_url: {url: "https://x/a.png"}}]}
- role: assistant
  content: null
  tool_calls: [{id: c1, type: function, function: {name: search, arguments: '{"q": 1}'}}]
- {role: tool, tool_call_id: c1, content: found, token_count: 3}
""",
    "object form": """
$schema: https://example.invalid/conversation.schema.json
settings:
  {max_input_tokens: 32000, safety_margin: 0, reserved_tokens: auto, rules: {budget-overrun: "off"}}
system_prompt: {content: You help., token_count: 3}
custom_agent_prompt: Be brief.
project_files:
  - {file_id: f1, filename: a.md, content: text, type: text}
  - {file_id: f2, filename: b.csv, content: "a,b", kind: tabular, approx_char_count: 3}
tools: [search, {type: function, function: {name: read_file, parameters: {type: object}}},
        {type: function, name: open_url}]
reminder: {content: Cite sources.}
user_info: {name: Ada, organization: {name: Acme}, memories: [likes tea], favourite: tea}
messages:
  - {id: 1, role: user, content: hi, files: [{file_id: u1, filename: x.txt, content: x}]}
  - {id: a1, parent: 1, role: assistant, content: ok, tool_calls: null}
  - {id: s1, role: summary, content: earlier, summarizes_through: 1}
  - {role: user, file_id: f9, filename: n.md, content: notes}
  - {role: assistant, content: "", tool_calls: [{id: c2, function: {name: search, arguments: {}}}]}
  - {role: tool, tool_call_id: c2, content: "", promptls-ignore: [orphaned-tool-response]}
  - {role: reminder, content: done?}
  - {role: user, content: go, promptls-ignore: all, token_count: null}
""",
    "template path": """
system_prompt: {path: prompts/agent.prompt.md}
messages: []
""",
}

INVALID = {
    "unknown role": "[{role: human, content: hi}]",
    "tool_calls not an array": "[{role: assistant, content: x, tool_calls: {id: c1}}]",
    "safety_margin 1.5": "{settings: {safety_margin: 1.5}, messages: [{role: user, content: x}]}",
    "unknown setting": "{settings: {max_tokens: 9}, messages: []}",
    "unknown top-level key": "{messages: [], sytem_prompt: x}",
    "unknown message key": "[{role: user, content: x, contnet: y}]",
    "no role": "[{content: x}]",
    "tool message without tool_call_id": "[{role: tool, content: x}]",
    "tool_calls on a user message": "[{role: user, content: x, tool_calls: []}]",
    "files on an assistant message": "[{role: assistant, content: x, files: []}]",
    "summary without summarizes_through": "[{role: summary, content: x}]",
    "summarizes_through on a user message": "[{role: user, content: x, summarizes_through: 0}]",
    "tool call without id": "[{role: assistant, tool_calls: [{function: {name: f}}]}]",
    "arguments not an object": """
[{role: assistant, tool_calls: [{id: c, function: {name: f, arguments: "[1]"}}]}]""",
    "negative token_count": "[{role: user, content: x, token_count: -1}]",
    "image part without a url": "[{role: user, content: [{type: image_url}]}]",
    "project file with content and path": """
{project_files: [{file_id: f, filename: a, content: x, path: a.md}], messages: []}""",
    "project file without file_id": "{project_files: [{filename: a, content: x}], messages: []}",
    "messages missing": "{settings: {}}",
    "tool without a name": "{tools: [{type: function, function: {description: x}}], messages: []}",
}


@pytest.mark.parametrize("name", VALID)
def test_valid_documents(name: str) -> None:
    text = VALID[name]
    _check_valid(parse_yaml(text).root.to_python(), where=name)
    assert _reader_problems(text, DocFormat.YAML) == []


@pytest.mark.parametrize("name", INVALID)
def test_invalid_documents(name: str) -> None:
    text = INVALID[name]
    assert _errors(parse_yaml(text).root.to_python()), f"the schema accepts: {name}"
    assert _reader_problems(text, DocFormat.YAML), f"the reader accepts: {name}"


# ---------------------------------------------------------------- helpers


def _schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


class _Dataset(list):  # type: ignore[type-arg]
    """A dataset's records (JSON Lines, one conversation per line): each is a document."""


def _errors(data: Any) -> list[str]:
    if isinstance(data, _Dataset):
        return [f"record {k}: {e}" for k, rec in enumerate(data, 1) for e in _errors(rec)]
    validator = jsonschema.Draft202012Validator(_schema())
    res = []
    for error in validator.iter_errors(data):
        deepest = jsonschema.exceptions.best_match([error])
        res.append(f"{deepest.json_path}: {deepest.message[:200]}")
    return res


def _check_valid(data: Any, *, where: str) -> None:
    errors = _errors(data)
    assert not errors, f"{where} does not validate: {errors}"


def _reader_problems(text: str, fmt: DocFormat | None) -> list[str]:
    """Return what reading the document and its settings reports (its information, such as
    a request continuing items OpenAI stored, is no problem of the document's)."""
    assert fmt is not None
    conv = parse_conversation(text, fmt)
    _, setting_issues = resolve_settings([SettingsLayer("document", conv.settings)])
    res = [
        f"{i.code}: {i.message}"
        for r in (conv, *conv.records)
        for i in r.issues
        if i.code != "stored-items-not-in-document"
    ]
    return res + [f"invalid-setting: {i.message}" for i in setting_issues]


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _load(path: Path) -> tuple[Any, bool]:
    """Return the document as JSON data (JSONL as its equivalent document), and whether it
    was read whole (no syntax error, no alias bomb)."""
    fmt = format_for_path(path.name)
    assert fmt is not None
    parsed = _PARSERS[fmt](_read(path))
    data = parsed.root.to_python() if parsed.root is not None else None
    if fmt is DocFormat.JSONL and parsed.root is not None and is_codex_rollout(parsed.root):
        # A Codex rollout is the Responses request its session makes, as the reader reads it.
        data = codex_request(absolute(parsed.root)).to_python()
    elif (
        fmt is DocFormat.JSONL
        and parsed.root is not None
        and is_claude_code_transcript(parsed.root)
    ):
        # A Claude Code transcript likewise, the Anthropic request its session sends next.
        data = claude_code_request(absolute(parsed.root)).to_python()
    elif fmt is DocFormat.JSONL and parsed.root is not None and is_copilot_session(parsed.root):
        # A Copilot CLI session likewise, the chat-completions request it sends next.
        data = copilot_request(absolute(parsed.root)).to_python()
    elif fmt is DocFormat.JSONL and parsed.root is not None and is_pi_session(parsed.root):
        # A pi session likewise.
        data = pi_request(absolute(parsed.root)).to_python()
    elif parsed.root is not None and is_gemini_cli_session(parsed.root, fmt):
        # A Gemini CLI session likewise.
        data = gemini_cli_request(absolute(parsed.root)).to_python()
    elif fmt is DocFormat.JSONL and data and isinstance(data[0], dict) and "role" not in data[0]:
        if isinstance(data[0].get("messages"), list):
            data = _Dataset(data)
        else:
            data = {**data[0], "messages": data[1:]}
    return data, not parsed.errors


def _properties(node: Any, path: str):
    """Yield (path, schema) for every property the schema declares (not in if/then/else)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("if", "then", "else", "not"):
                continue
            if key == "properties" and isinstance(value, dict):
                for name, prop in value.items():
                    yield f"{path}.{name}", prop
                    yield from _properties(prop, f"{path}.{name}")
            else:
                yield from _properties(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _properties(item, f"{path}[{i}]")


def _resolve(schema: dict[str, Any], node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node and "description" not in node:
        node = schema["$defs"][node["$ref"].removeprefix("#/$defs/")]
    return node
