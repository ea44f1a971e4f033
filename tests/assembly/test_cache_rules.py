"""The prompt-cache rules (``volatile-in-cached-prefix``, ``tool-list-changes-prefix``) and
the cache boundary (``assembly.cache``) on small conversations analysed end to end."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from assembly.cache import boundary
from assembly.host import Analysis
from assembly.ide.hover import conversation_hover
from tests.support.engine import analyze

TOOL = """  - type: function
    function:
      name: {name}
      description: d
      parameters: {{type: object, properties: {{}}}}
"""

CONV = """settings:
  datetime_aware: {aware}
  prompt_cache_chat_history: true
system_prompt: "You are a helper.{date}"
tools:
{tools}messages:
  - id: u1
    role: user
    content: Find the retry policy.
  - id: a1
    role: assistant
    content: null
    tool_calls:
      - id: call_1
        type: function
        function:
          name: web_search
          arguments: '{{"query": "retry policy"}}'
  - id: t1
    role: tool
    tool_call_id: call_1
    content: Retries happen three times.
  - id: a2
    role: assistant
    content: It retries three times.
  - id: u2
    role: user
    content: Thanks. And the backoff?
"""


def _analyze(
    tmp_path: Path, *, date: str = "", aware: str = "true", tools: tuple[str, ...] = ("web_search",)
) -> Analysis:
    path = tmp_path / "c.conv.yaml"
    tool_text = "".join(TOOL.format(name=n) for n in tools)
    path.write_text(CONV.format(date=date, aware=aware, tools=tool_text), encoding="utf-8")
    return analyze(path, root=tmp_path, today=dt.date(2026, 7, 15))


def _codes(a: Analysis, code: str) -> list[str]:
    return [str(a.text)[d.range.start : d.range.end] for d in a.diagnostics if d.code == code]


def test_placeholder_in_the_cached_system_prompt(tmp_path: Path) -> None:
    a = _analyze(tmp_path, date=" Today is {{CURRENT_DATETIME}}.")
    assert _codes(a, "volatile-in-cached-prefix") == ["{{CURRENT_DATETIME}}"]
    [d] = [d for d in a.diagnostics if d.code == "volatile-in-cached-prefix"]
    assert "changes every day" in d.message
    assert d.related[0].message.startswith("this conversation's cached prefix: ")


def test_date_appended_by_onyx_is_not_reported_but_the_hover_says_it(tmp_path: Path) -> None:
    a = _analyze(tmp_path)
    assert _codes(a, "volatile-in-cached-prefix") == []
    assert "changes every day" in boundary(a.assembly).markdown()


def test_no_date_no_finding(tmp_path: Path) -> None:
    assert _codes(_analyze(tmp_path, aware="false"), "volatile-in-cached-prefix") == []


def test_call_to_a_tool_no_longer_offered(tmp_path: Path) -> None:
    a = _analyze(tmp_path, aware="false", tools=("internal_search",))
    assert _codes(a, "tool-list-changes-prefix") == ["web_search"]
    assert _codes(_analyze(tmp_path, aware="false"), "tool-list-changes-prefix") == []


def test_boundary_says_why_the_prefix_ends(tmp_path: Path) -> None:
    a = _analyze(tmp_path, date=" Today is {{CURRENT_DATETIME}}.")
    b = boundary(a.assembly)
    assert b.n_cached == a.assembly.cache_prefix_length == 5
    assert b.first_id == "u2"
    text = b.markdown()
    assert "It ends before `u2`: it is this turn's user message" in text
    assert "changes every day" in text
    assert b.cached_tokens == a.assembly.budget.tools + sum(e.tokens for e in a.assembly.layout[:5])


def test_boundary_without_a_date(tmp_path: Path) -> None:
    a = _analyze(tmp_path, aware="false")
    assert "every day" not in boundary(a.assembly).markdown()


def test_hover_on_the_cache_boundary(tmp_path: Path) -> None:
    a = _analyze(tmp_path, date=" Today is {{CURRENT_DATETIME}}.")
    text = str(a.text)
    last_cached = conversation_hover(a, text.index("id: a2") + 4, today=dt.date(2026, 7, 15))
    first_after = conversation_hover(a, text.index("id: u2") + 4, today=dt.date(2026, 7, 15))
    inside = conversation_hover(a, text.index("id: t1") + 4, today=dt.date(2026, 7, 15))
    for res in (last_cached, first_after):
        assert (
            "cache boundary: Cacheable prefix: the tool definitions and the first 5" in res.markdown
        )
        assert "It ends before `u2`: it is this turn's user message" in res.markdown
    assert "cache boundary" not in inside.markdown
    assert "cache: in the cacheable prefix" in inside.markdown
