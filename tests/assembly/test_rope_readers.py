"""Everything that reads a document's text gives the same answers on a ``Rope`` as on a str.

The language server keeps an open document as a ``Rope`` (``assembly.rope``); the IDE
features and the rules read it through indexing, slicing and ``find``. Each conversation
fixture (IDE, diagnostics, examples) and a generated conversation is analysed once; then
every feature runs on the ``str`` and on a rope of tiny chunks (so every read crosses
chunk boundaries) at many offsets, and ``check_same`` compares the answers.

The offsets are every one of a document under 300 code points, else both ends and evenly
spaced ones (a rope of 7-code-point chunks makes any read of 7 or more cross a boundary
wherever it starts); each document starts them at its own phase, so the fixtures together
probe every residue of the spacing rather than its multiples only.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import zlib
from pathlib import Path
from typing import Any

import pytest

from assembly.diagnostics import RuleContext, check
from assembly.host import Analysis
from assembly.ide import completion, folding, hover, inlay, lens, navigation
from assembly.rope import Rope
from assembly.text import TextRange
from tests.support.engine import analyze, loaded

ROOT = Path(__file__).resolve().parents[2]
TODAY = dt.date(2026, 7, 15)
MAX_OFFSETS = 150  # offsets tried per document (all of them in small documents)


def conversation_fixtures() -> list[Path]:
    dirs = [ROOT / "tests" / "data" / d for d in ("ide", "diagnostics", "assembly")]
    found = [p for d in dirs for p in d.rglob("*.conv.*") if not p.name.endswith(".expected")]
    found.extend((ROOT / "examples").glob("*.conv.*"))
    return sorted(found)


@pytest.fixture(autouse=True)
def _offline_encodings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # no cache: offline cl100k_base only


@pytest.mark.parametrize("path", conversation_fixtures(), ids=lambda p: str(p.relative_to(ROOT)))
def test_features_read_a_rope_as_a_str(path: Path) -> None:
    text = path.read_text(encoding="utf-8").replace("$0", "")
    check_same(analyze(path, text=text, today=TODAY))


def test_features_on_a_generated_conversation(tmp_path: Path) -> None:
    path = tmp_path / "gen.conv.json"
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Answer {{user.name}}."}]
    for i in range(40):
        call = {"id": f"c{i}", "type": "function"}
        call["function"] = {"name": "read_file", "arguments": json.dumps({"file_id": "f1"})}
        messages.append({"id": f"u{i}", "role": "user", "content": f"Question {i} 数据 😀\n"})
        messages.append({"id": f"a{i}", "role": "assistant", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "x" * 50})
    doc = {"project_files": [{"file_id": "f1", "filename": "a.md", "content": "A"}]}
    doc["messages"] = messages
    text = json.dumps(doc, indent=2, ensure_ascii=False).replace("\n", "\r\n")
    path.write_text(text, encoding="utf-8", newline="")
    check_same(analyze(path, text=text, today=TODAY))


def check_same(a: Analysis) -> None:
    """Every feature (and every rule) answers the same on the rope as on the str."""
    text = a.text
    r = dataclasses.replace(a, text=Rope.from_str(text, chunk_size=7))
    conv = a.conversation
    n = len(text)
    step = max(1, n // MAX_OFFSETS)
    phase = zlib.crc32(text.encode("utf-8", "surrogatepass")) % step  # (0 when step is 1)
    for offset in sorted({0, *range(phase, n + 1, step), n}):
        assert hover.conversation_hover(r, offset, today=TODAY) == hover.conversation_hover(
            a, offset, today=TODAY
        ), offset
        assert completion.conversation_completions(
            conv, r.text, offset
        ) == completion.conversation_completions(conv, text, offset), offset
        assert navigation.definition(conv, r.text, offset) == navigation.definition(
            conv, text, offset
        ), offset
        assert navigation.references(
            conv, r.text, offset, include_declaration=True
        ) == navigation.references(conv, text, offset, include_declaration=True), offset
    whole = TextRange(0, n)
    assert inlay.conversation_inlay_hints(r, whole) == inlay.conversation_inlay_hints(a, whole)
    assert lens.conversation_lenses(r, command="c", arguments=()) == lens.conversation_lenses(
        a, command="c", arguments=()
    )
    assert folding.conversation_folds(conv, r.text, index=r.text) == folding.conversation_folds(
        conv, text
    )
    tokenizer = loaded(a.settings.encoding, model=a.settings.model).tokenizer
    ctx = RuleContext(
        text=text,
        settings=a.settings,
        tokenizer=tokenizer,
        conversation=conv,
        assembly=a.assembly,
    )
    assert check(dataclasses.replace(ctx, text=r.text)) == check(ctx)  # type: ignore[arg-type]


def test_suppression_comments_are_read_from_a_rope(tmp_path: Path) -> None:
    source = (
        ROOT / "tests" / "data" / "diagnostics" / "history-truncated" / "dropped-span.conv.yaml"
    )
    path = tmp_path / source.name
    base = source.read_text(encoding="utf-8")
    found = analyze(path, text=base, today=TODAY).diagnostics
    at = next(d.range.start for d in found if d.code == "history-truncated")
    line = base.rfind("\n", 0, at) + 1
    text = base[:line] + "# promptls: ignore[history-truncated]\n" + base[line:]
    a = analyze(path, text=text, today=TODAY)
    assert not a.diagnostics  # the comment suppresses the one finding
    tokenizer = loaded(a.settings.encoding, model=a.settings.model).tokenizer
    ctx = RuleContext(
        text=text,
        settings=a.settings,
        tokenizer=tokenizer,
        conversation=a.conversation,
        assembly=a.assembly,
    )
    on_rope = check(dataclasses.replace(ctx, text=Rope.from_str(text)))  # type: ignore[arg-type]
    assert on_rope == check(ctx)
    assert "history-truncated" not in {d.code for d in on_rope}
    plain = Rope.from_str(text.replace("promptls:", "promptls-", 1))
    unsuppressed = dataclasses.replace(ctx, text=plain)
    assert "history-truncated" in {d.code for d in check(unsuppressed)}  # type: ignore[arg-type]
