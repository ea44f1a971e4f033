"""The assembled view's HTML (server/htmlview.py): `promptls assemble --format html` and the
`promptls.assembledHtml` command draw the same page from the same model."""

from __future__ import annotations

import datetime as dt
import html.parser
import re
import subprocess
import sys
from pathlib import Path

import pytest

from server.cli.main import main
from server.htmlview import render_html, view_model
from server.output import assembly_json
from server.workspace import analyze

REPO = Path(__file__).resolve().parents[2]
OVERFLOW = REPO / "examples" / "overflow.conv.yaml"
SUPPORT = REPO / "examples" / "support-agent.conv.json"
TODAY = dt.date(2026, 7, 15)


class _Page(html.parser.HTMLParser):
    """Collects what a self-contained page must not have, and the rows of the table."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.scripts = 0
        self.rows: list[list[str]] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self.parts: list[str] = []
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for key in ("src", "href"):
            if a.get(key):
                self.urls.append(a[key] or "")
        if tag == "link":
            self.urls.append(a.get("href") or "<link>")
        if tag == "script":
            self.scripts += 1
        if tag == "tr" and self.stack and "tbody" in self.stack:
            self._row = []
        if tag == "td" and self._row is not None:
            self._cell = []
        if (
            tag == "div"
            and (a.get("class") or "").startswith("part ")
            and "bar" in str(self.stack[-1:])
        ):
            self.parts.append((a.get("class") or "").removeprefix("part "))
        self.stack.append(tag if tag != "div" else f"div.{(a.get('class') or '').split()[0:1]}")

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        if tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None
        if self.stack:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _parse(page: str) -> _Page:
    p = _Page()
    p.feed(page)
    return p


def test_cli_writes_a_self_contained_page(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["assemble", str(OVERFLOW), "--format", "html", "--today", "2026-07-15"]) == 0
    page = capsys.readouterr().out
    assert page.startswith("<!DOCTYPE html>")
    p = _parse(page)
    assert p.urls == [] and p.scripts == 0, (p.urls, p.scripts)
    assert "default-src 'none'" in page and "script-src 'none'" in page
    assert not re.search(r"https?://", page)
    assert "3,218 / 3,891 tokens" in page


def test_the_bar_is_the_window_in_the_model_order() -> None:
    a = analyze(OVERFLOW, today=TODAY)
    m = view_model(a, display_path="overflow.conv.yaml")
    keys = [p["key"] for p in m["parts"]]
    assert keys == [
        *("system", "history", "custom_agent", "project_files", "forgotten_files"),
        *("last_user", "this_turn", "reminder", "tools", "free", "margin"),
    ]
    assert sum(p["tokens"] for p in m["parts"]) == m["window"] == 4096
    j = assembly_json(a, display_path="x")
    by = {p["key"]: p["tokens"] for p in m["parts"]}
    assert by["tools"] == j["budget"]["tools"] == 433
    assert by["margin"] == 4096 - j["budget"]["available_tokens"] == 205
    assert m["threshold"]["tokens"] == j["compression"]["threshold"] == 2718
    assert m["threshold"]["triggered"] is True
    assert m["threshold"]["at"] == by["system"] + 2718


def test_the_table_says_what_is_kept_dropped_and_why() -> None:
    a = analyze(OVERFLOW, today=TODAY)
    page = render_html(a, display_path="overflow.conv.yaml")
    rows = _parse(page).rows
    by_id = {r[1]: r for r in rows}
    j = assembly_json(a, display_path="x")
    # Every message sent, in order, then the budget's cut and the orphan.
    sent = [r[1] for r in rows if r[5] == "kept"]
    assert sent == [e["id"] for e in j["layout"]]
    dropped = [r[1] for r in rows if r[5] == "dropped"]
    assert dropped == [*j["dropped"], *j["orphans_dropped"]]
    assert "over the history budget" in by_id["m10"][8]
    assert "tool call is not sent" in by_id["m11"][8]
    assert "would be summarized" in by_id["m12"][8]
    # The cacheable prefix and the source lines (1-based) of the messages.
    # None by default (Onyx's PROMPT_CACHE_CHAT_HISTORY is off); see the test below.
    prefix = [r[1] for r in rows if r[6] == "prefix"]
    assert len(prefix) == j["cache_prefix_length"] == 0
    lines = OVERFLOW.read_text(encoding="utf-8").splitlines()
    assert "id: m19" in lines[int(by_id["m19"][7]) - 1]
    assert "id: m10" in lines[int(by_id["m10"][7]) - 1]


def test_the_webview_page_has_buttons_to_the_messages_and_its_nonce() -> None:
    a = analyze(OVERFLOW, today=TODAY)
    page = render_html(a, display_path="overflow.conv.yaml", webview=True, nonce="abc123")
    assert "script-src 'nonce-abc123'" in page
    assert '<script nonce="abc123">' in page
    buttons = re.findall(r'data-key="([^"]+)" data-line="(\d+)" data-column="(\d+)"', page)
    lines = OVERFLOW.read_text(encoding="utf-8").splitlines()
    for key, line, col in buttons:
        if key.startswith("$"):
            continue
        assert lines[int(line)][int(col) :].lstrip("- {").startswith("id"), (key, line, col)
    assert {k for k, _, _ in buttons} >= {"$system", "m1", "m19", "$reminder"}


def test_a_long_dropped_span_is_shown_by_its_ends() -> None:
    from server import htmlview

    a = analyze(OVERFLOW, today=TODAY)
    old = htmlview.MAX_DROPPED_ROWS
    htmlview.MAX_DROPPED_ROWS = 6
    try:
        rows = htmlview.rows(a)
    finally:
        htmlview.MAX_DROPPED_ROWS = old
    dropped = [r for r in rows if r.status == "dropped" and r.position is None]
    ids = [r.id for r in dropped]
    assert ids[5] == "… 1 more" and len(ids) == 12  # 11 cut (5 + 1 + 5) and the orphan
    cut = {m.id: m.tokens for m in a.assembly.history if m.id in a.assembly.dropped}
    assert sum(r.tokens for r in dropped[:11]) == sum(cut.values())


def test_hostile_text_is_escaped(tmp_path: Path) -> None:
    doc = tmp_path / "x.conv.json"
    doc.write_text(
        '[{"id": "<script>alert(1)</script>", "role": "user", "content": "hi"}]',
        encoding="utf-8",
    )
    page = render_html(analyze(doc, today=TODAY), display_path="<b>x</b>", webview=True, nonce="n")
    assert "<script>alert" not in page and "<b>x</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_document_that_cannot_be_assembled_still_renders(tmp_path: Path) -> None:
    doc = tmp_path / "x.conv.json"
    doc.write_text(
        '{"settings": {"max_input_tokens": 20, "encoding": "cl100k_base"}, "messages": '
        '[{"role": "user", "content": "' + "word " * 100 + '"}]}',
        encoding="utf-8",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "server.cli", "assemble", str(doc), "--format", "html"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout.startswith("<!DOCTYPE html>") and "</html>" in proc.stdout


def test_the_cacheable_prefix_rows_when_history_caching_is_on() -> None:
    """With prompt_cache_chat_history the rows of the prefix Onyx sends are marked."""
    path = Path(__file__).resolve().parent.parent / "data" / "assembly"
    a = analyze(path / "f11_prompt_cache_prefix_marked_for_anthropic.conv.yaml", today=TODAY)
    page = render_html(a, display_path="f11.conv.yaml")
    rows = _parse(page).rows
    assert [r[1] for r in rows if r[6] == "prefix"] == ["$system", "u1", "a1"]
    assert "the first 3 form the cacheable prefix" in page


def test_the_page_says_what_the_text_output_says_of_counts_and_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An Anthropic log counted with an OpenAI encoding is marked approximate, as the text
    output's head line says; each finding shown names its line, as `promptls lint` does."""
    data = REPO / "tests" / "data" / "real-logs"
    a = analyze(data / "anthropic" / "anthropic_tool_with_thinking.conv.json", today=TODAY)
    page = render_html(a, display_path="a.conv.json")
    assert "approximate counts: claude-sonnet-4-0 uses Anthropic&#x27;s own tokenizer" in page
    assert "read as Anthropic Messages request</p>" in page
    exact = render_html(analyze(OVERFLOW, today=TODAY), display_path="overflow.conv.yaml")
    assert "approximate counts" not in exact
    assert "read as promptls conversation</p>" in exact
    # A legacy encoding not in tiktoken's cache: counted with cl100k_base, and said so.
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    legacy = tmp_path / "legacy.conv.yaml"
    legacy.write_text(
        "settings: {encoding: p50k_base}\nmessages:\n  - {role: user, content: hi}\n",
        encoding="utf-8",
    )
    page = render_html(analyze(legacy, today=TODAY), display_path=legacy.name)
    assert "cl100k_base (asked for p50k_base) · provider" in page

    log = data / "openai" / "swe-agent-ctf-pwn-warmup.conv.json"
    m = view_model(analyze(log, today=TODAY), display_path=log.name)
    lines = [
        (d["code"], d["line"] + 1) for d in m["diagnostics"] if d["message"].startswith("unknown")
    ]
    assert lines == [("unknown-key", 5), ("unknown-key", 15), ("unknown-key", 16)]
    assert '<span class="muted">line 15</span>' in render_html(
        analyze(log, today=TODAY), display_path=log.name
    )
