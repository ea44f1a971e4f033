"""The budget figure `promptls assemble` heads each output with is the same in text, JSON
and HTML: what is sent (messages and tool definitions) of the available input.

Before, the text said "2,785 / 3,458 tokens used" (messages of the room left by the tools)
while the HTML said "3,218 / 3,891 tokens sent" for the same document.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from server.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def _assemble(path: str, fmt: str, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    main(["assemble", path, "--format", fmt, "--today", "2026-07-15", "--root", str(ROOT)])
    return capsys.readouterr().out


@pytest.mark.parametrize("example", ["overflow.conv.yaml", "support-agent.conv.json"])
def test_text_json_and_html_print_the_same_budget_figures(
    example: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(ROOT / "examples" / example)
    b = json.loads(_assemble(path, "json", capsys))["budget"]
    sent, available = b["used"] + b["tools"], b["available_tokens"]
    assert b["tools"] > 0 and b["used"] > 0  # both parts are shown, neither is zero
    text = _assemble(path, "text", capsys).splitlines()[2]
    assert text.startswith(f"budget: {sent:,} / {available:,} tokens used  ")
    assert f"({b['used']:,} in messages + {b['tools']:,} in tool definitions;" in text
    page = html.unescape(re.sub(r"<[^>]+>", " ", _assemble(path, "html", capsys)))
    page = re.sub(r"\s+", " ", page)
    assert f"{sent:,} / {available:,} tokens sent of the available input" in page
    assert f"({b['used']:,} in messages + {b['tools']:,} in tool definitions)" in page
