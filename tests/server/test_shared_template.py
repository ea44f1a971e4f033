"""Work shared by the conversations of a project that use one ``*.prompt.md``.

``promptls lint`` analyses each file afresh; a template referenced by many conversations
is parsed once (``host.parse_template``) and indexed once for ``instruction-far-from-section``
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

from assembly import host
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
    host._TEMPLATES.clear()
    instructions._TOPICS.clear()


def test_a_shared_template_is_parsed_and_indexed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _project(tmp_path, [["web_search"]] * 4)
    _forget()
    parses: list[str] = []
    indexes: list[str] = []
    parse, topics = host.parse_prompt, instructions._Topics

    def counting_parse(text: str) -> Any:
        parses.append(text)
        return parse(text)

    class CountingTopics(topics):  # type: ignore[misc, valid-type]
        def __init__(self, template: Any, *args: Any) -> None:
            indexes.append(template.text)
            super().__init__(template, *args)

    monkeypatch.setattr(host, "parse_prompt", counting_parse)
    monkeypatch.setattr(instructions, "_Topics", CountingTopics)
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
    fresh = []
    for p in paths:
        _forget()
        fresh.append(_findings(p, tmp_path))
    assert remembered == fresh
    assert any(f["code"] == "instruction-far-from-section" for f in remembered[0])


def test_the_memos_are_bounded() -> None:
    _forget()
    for i in range(host._MAX_TEMPLATES + 5):
        host.parse_template(f"# Title {i}\n\nAlways answer briefly.\n")
    assert len(host._TEMPLATES) == host._MAX_TEMPLATES
    big = "# Big\n\n" + "Always answer. " * (host._MAX_TEMPLATE_CHARS // 15 + 1)
    host.parse_template(big)
    assert big not in host._TEMPLATES
    # An equal text (another string object) is the same template.
    text = "# Tools\n\nUse web_search.\n"
    assert host.parse_template(text) is host.parse_template("".join(list(text)))
