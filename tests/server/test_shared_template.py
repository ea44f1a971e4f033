"""Work shared by the conversations of a project that use one ``*.prompt.md``.

``promptls lint`` analyses each file afresh; a template referenced by many conversations,
or an inline system prompt that an agent's logged conversations share, is parsed once
(``sysprompt.parse_prompt_text``) and indexed once for ``instruction-far-from-section``
(``instructions._topics``) per process, for as long as its text, the tools and the
section topics are the same. The findings must be exactly those of an analysis with
nothing remembered.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from assembly import sysprompt
from assembly.diagnostics.rules import instructions
from server.output import diagnostics_json
from server.workspace import analyze

DATA = Path(__file__).resolve().parents[1] / "data"
TEMPLATE = DATA / "diagnostics" / "instruction-far-from-section" / "prompts" / "scout.prompt.md"


def _project(root: Path, tool_sets: list[list[str]]) -> list[Path]:
    (root / ".git").mkdir()
    (root / "prompts").mkdir()
    shutil.copy(TEMPLATE, root / "prompts" / "scout.prompt.md")
    paths = []
    for i, tools in enumerate(tool_sets):
        doc = {
            "settings": {"encoding": "cl100k_base", "instruction_distance": 40},
            "system_prompt": "prompts/scout.prompt.md",
            "tools": [
                {"type": "function", "function": {"name": t, "parameters": {"type": "object"}}}
                for t in tools
            ],
            "messages": [{"role": "user", "content": f"Question {i}: who runs the harbour?"}],
        }
        path = root / f"c{i}.conv.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        paths.append(path)
    return paths


def _findings(path: Path, root: Path) -> list[dict[str, Any]]:
    analysis = analyze(path, root=root)
    return diagnostics_json(analysis, display_path=str(path))


def _forget() -> None:
    sysprompt._PARSED.clear()
    instructions._TOPICS.clear()
    instructions._TEXT_TOOLS.clear()
    instructions._NAMED_AS_TOOLS.clear()


def _counting(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """The texts parsed and the texts indexed from now on, in order."""
    parses: list[str] = []
    indexes: list[str] = []
    parse, topics = sysprompt.parse_prompt, instructions._Topics

    def counting_parse(text: str) -> Any:
        parses.append(text)
        return parse(text)

    class CountingTopics(topics):  # type: ignore[misc, valid-type]
        def __init__(self, template: Any, *args: Any) -> None:
            indexes.append(template.text)
            super().__init__(template, *args)

    monkeypatch.setattr(sysprompt, "parse_prompt", counting_parse)
    monkeypatch.setattr(instructions, "_Topics", CountingTopics)
    return parses, indexes


def test_a_shared_template_is_parsed_and_indexed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _project(tmp_path, [["web_search"]] * 4)
    _forget()
    parses, indexes = _counting(monkeypatch)
    for p in paths:
        _findings(p, tmp_path)
    template_text = TEMPLATE.read_text(encoding="utf-8")
    assert parses.count(template_text) == 1
    assert indexes.count(template_text) == 1


def test_findings_equal_those_of_analyses_that_remember_nothing(tmp_path: Path) -> None:
    # Different tools make different indexes; equal ones share one.
    paths = _project(tmp_path, [["web_search"], ["web_search"], [], ["web_search", "open_url"]])
    _forget()
    remembered = [_findings(p, tmp_path) for p in paths]
    _assert_as_if_nothing_remembered(remembered, paths, tmp_path)


def _assert_as_if_nothing_remembered(
    remembered: list[list[dict[str, Any]]], paths: list[Path], root: Path
) -> None:
    """The findings ``remembered`` are those of analyses made with every memo empty, and
    the instruction rule has some."""
    fresh = []
    for p in paths:
        _forget()
        fresh.append(_findings(p, root))
    assert remembered == fresh
    assert any(f["code"] == "instruction-far-from-section" for f in remembered[0])


def test_the_memos_are_bounded() -> None:
    _forget()
    parsed = sysprompt._PARSED
    for i in range(parsed.entries + 5):
        sysprompt.parse_prompt_text(f"# Title {i}\n\nAlways answer briefly.\n")
    assert len(parsed) == parsed.entries
    big = "# Big\n\n" + "Always answer. " * (parsed.chars // 15 + 1)
    sysprompt.parse_prompt_text(big)
    assert big not in parsed
    # An equal text (another string object) is the same template.
    text = "# Tools\n\nUse web_search.\n"
    assert sysprompt.parse_prompt_text(text) is sysprompt.parse_prompt_text("".join(list(text)))
    # The word indexes: one a set of tool names, the least recently used dropped first.
    template = sysprompt.parse_prompt_text(text)
    topics = {i: instructions._topics(template, [f"tool_{i}"], {}) for i in range(64)}
    assert len(instructions._TOPICS) == instructions._TOPICS.entries == 64
    instructions._topics(template, ["tool_0"], {})  # used again: kept
    instructions._topics(template, ["another"], {})
    assert instructions._topics(template, ["tool_0"], {}) is topics[0]
    assert instructions._topics(template, ["tool_1"], {}) is not topics[1]  # dropped


def test_an_inline_system_prompt_shared_by_logged_conversations_is_indexed_once_per_tool_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An agent's logs: every conversation has the same inline system prompt and calls some
    # of the agent's tools (more sets of tool names than a short memo holds, in turn).
    (tmp_path / ".git").mkdir()
    prompt = TEMPLATE.read_text(encoding="utf-8")
    tool_sets = [[f"tool_{i}", "web_search"] for i in range(12)]
    paths = []
    for i in range(36):
        doc = {
            "messages": [
                {"role": "system", "content": prompt},
                {"role": "user", "content": f"Question {i}: who runs the harbour?"},
            ],
            "tools": [
                {"type": "function", "function": {"name": t, "parameters": {"type": "object"}}}
                for t in tool_sets[i % len(tool_sets)]
            ],
        }
        paths.append(tmp_path / f"run{i}.conv.json")
        paths[-1].write_text(json.dumps(doc), encoding="utf-8")
    _forget()
    with monkeypatch.context() as m:
        parses, indexes = _counting(m)
        remembered = [_findings(p, tmp_path) for p in paths]
    assert parses.count(prompt) == 1
    assert indexes.count(prompt) == len(tool_sets)
    _assert_as_if_nothing_remembered(remembered, paths, tmp_path)
