"""`promptls assemble` shows the cacheable prefix as Onyx would send it.

The prefix exists only with `prompt_cache_chat_history` (Onyx's PROMPT_CACHE_CHAT_HISTORY,
backend/onyx/configs/app_configs.py:1680-1682); with `prompt_cache_marker: anthropic` its
last message carries Anthropic's `cache_control` (llm/prompt_cache/providers/anthropic.py:
15-31), in the text rendering and in the JSON `messages`.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from server.output import assembly_json, render_text
from server.workspace import analyze

DATA = Path(__file__).resolve().parent.parent / "data" / "assembly"
TODAY = dt.date(2026, 7, 15)


def test_the_marked_prefix_in_text_and_json() -> None:
    a = analyze(DATA / "f11_prompt_cache_prefix_marked_for_anthropic.conv.yaml", today=TODAY)
    text = render_text(a, display_path="case")
    assert "cacheable prefix: 3 message(s), cache_control on `a1`" in text
    res = assembly_json(a, display_path="case")
    assert res["cache_prefix_length"] == 3
    marked = [m for m in res["messages"] if "cache_control" in m]
    assert marked == [
        {
            "role": "assistant",
            "content": "Hello! How can I help?",
            "cache_control": {"type": "ephemeral"},
        }
    ]


def test_no_prefix_by_default() -> None:
    a = analyze(DATA / "f12_no_cache_prefix_by_default.conv.yaml", today=TODAY)
    assert "cacheable prefix" not in render_text(a, display_path="case")
    res = assembly_json(a, display_path="case")
    assert res["cache_prefix_length"] == 0
    assert not [m for m in res["messages"] if "cache_control" in m]
    assert [e["cache"] for e in res["layout"]] == [True, True, True, False]
