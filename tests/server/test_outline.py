"""``server/lsp/outline.py``: the outline's JSON kept by message equals the outline made afresh.

A conversation is analysed, its outline made (which keeps each message's entry), then
edited the ways that move, rename or reshape messages without changing most of them; after
each edit the outline made with the kept entries must be, value for value, the one
pygls writes for the ``lsp.DocumentSymbol`` of each of ``ide.symbols.conversation_symbols``
with nothing kept (``tests/support/lsp_reference.py``), in each position encoding. The
texts put an emoji and CJK on the lines messages start on, so that a kept column in the
wrong units shows.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from lsprotocol import converters

from assembly.host import AnalysisHost, Edit
from assembly.ide import symbols
from assembly.rope import Rope
from server.lsp import outline
from server.lsp.convert import TextMap
from tests.support import lsp_reference
from tests.support.engine import analyze

TODAY = dt.date(2026, 7, 15)
UNSTRUCTURE = converters.get_converter().unstructure


def _messages() -> list[dict[str, Any]]:
    res: list[dict[str, Any]] = []
    for i in range(4):
        res.append({"id": f"u{i}", "role": "user", "content": f"😀 读 {i}\nsecond line %d"})
        call = {"id": f"call_{i}", "type": "function"}
        call["function"] = {"name": f"search_{i}", "arguments": "{}"}
        res.append({"id": f"a{i}", "role": "assistant", "content": None, "tool_calls": [call]})
        res.append({"id": f"t{i}", "role": "tool", "tool_call_id": f"call_{i}", "content": "ok"})
    return res


def _text(suffix: str, *, one_line: bool = False) -> str:
    doc = {"settings": {"model": "gpt-4o"}, "messages": _messages()}
    if suffix == ".conv.yaml":
        return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    if suffix == ".conv.jsonl":
        lines = [{"settings": doc["settings"]}, *doc["messages"]]
        return "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines)
    return json.dumps(doc, ensure_ascii=False, indent=None if one_line else 2)


def _kept(key: str, a: Any, encoding: str) -> list[Any]:
    tm = TextMap.of(a.text, encoding)
    return json.loads(
        b"[" + b", ".join(outline.conversation_outline(key, a.conversation, tm)) + b"]"
    )


def _fresh(a: Any, encoding: str) -> list[Any]:
    tm = TextMap.of(a.text, encoding)
    syms = symbols.conversation_symbols(a.conversation)
    return [UNSTRUCTURE(lsp_reference.document_symbol(tm, s)) for s in syms]


def _edits(suffix: str, one_line: bool) -> list[Callable[[str], tuple[int, int, str]]]:
    """Edits in order, each made of the text the previous ones left."""

    def line(text: str) -> int:  # where the second user message's line (or object) starts
        second = text.index('"u1"' if suffix != ".conv.yaml" else "u1")
        return text.rindex("{", 0, second) if one_line else text.rindex("\n", 0, second) + 1

    def word(text: str) -> int:
        return text.index("second line %d", text.index("u1"))

    def name(text: str) -> int:
        return text.index("search_3")

    res: list[Callable[[str], tuple[int, int, str]]] = [
        lambda t: (line(t), line(t), " " if one_line else "\n"),  # every later message moves
        lambda t: (line(t) - 1, line(t), ""),  # and back
        lambda t: (word(t), word(t), "x"),  # inside a message
        lambda t: (name(t), name(t) + len("search"), "lookup"),  # tool message t3 renamed too
    ]
    if suffix == ".conv.json" and not one_line:
        # A space made a line break: the same length, the message read as before.
        def space(t: str) -> int:
            return t.index('"role": "user"', t.index("u1")) + len('"role":')

        res.append(lambda t: (space(t), space(t) + 1, "\n"))
    # An id renamed; on one line, every later message's column moves.
    res.append(lambda t: (t.index("u0"), t.index("u0"), "😀"))
    return res


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8"])
@pytest.mark.parametrize(
    ("suffix", "one_line"),
    [(".conv.json", False), (".conv.json", True), (".conv.yaml", False), (".conv.jsonl", False)],
)
def test_kept_outline_equals_the_outline_made_afresh(
    tmp_path: Path, suffix: str, one_line: bool, encoding: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[int] = []  # entries made again, per outline
    real = outline._entry

    def counting(*args: Any) -> Any:
        made[-1] += 1
        return real(*args)

    monkeypatch.setattr(outline, "_entry", counting)
    text = _text(suffix, one_line=one_line)
    path = tmp_path / f"chat{suffix}"
    key = path.as_uri()
    host, rope = AnalysisHost(), Rope.from_str(text)
    a = analyze(path, text=rope, host=host, root=tmp_path, today=TODAY)
    made.append(0)
    assert _kept(key, a, encoding) == _fresh(a, encoding)
    assert made == [12]
    texts = [rope]  # alive, as a server keeps the last version's: starts are carried from it
    for make in _edits(suffix, one_line):
        start, end, new = make(str(rope))
        rope = rope.edit(start, end, new)
        texts.append(rope)
        a = analyze(
            path,
            text=rope,
            host=host,
            root=tmp_path,
            edit=Edit.replace(start, end, new),
            today=TODAY,
        )
        made.append(0)
        assert _kept(key, a, encoding) == _fresh(a, encoding), (start, end, new)
    # The kept entries were used: each edit changed a message or two (a tool call renamed
    # renames the tool message answering it); on one line, the later messages' columns move.
    if not one_line:
        assert max(made[1:]) <= 2, made
    assert len(outline._MEMOS[key].entries) == 12
    outline.forget(key)
    assert key not in outline._MEMOS


def test_an_entry_whose_name_holds_a_percent_sign_is_kept_as_written(tmp_path: Path) -> None:
    text = json.dumps(
        {"messages": [{"id": "u%d", "role": "user", "content": '100% "line": -1 %s'}]}, indent=2
    )
    path = tmp_path / "chat.conv.json"
    host, rope = AnalysisHost(), Rope.from_str(text)
    a = analyze(path, text=rope, host=host, root=tmp_path, today=TODAY)
    _kept("k", a, "utf-16")
    rope = rope.edit(0, 0, "\n")
    a = analyze(
        path, text=rope, host=host, root=tmp_path, edit=Edit.replace(0, 0, "\n"), today=TODAY
    )
    got = _kept("k", a, "utf-16")
    assert got == _fresh(a, "utf-16")
    assert got[0]["name"] == 'u%d · user: 100% "line": -1 %s'
    assert got[0]["range"]["start"]["line"] == 3  # moved down one line


def _documents() -> list[Path]:
    data = Path(__file__).resolve().parents[1] / "data"
    res = [
        p
        for folder in ("ide", "foreign-formats", "real-logs", "yaml-real")
        for p in sorted((data / folder).rglob("*.conv.*"))
        if p.suffix in (".json", ".jsonl", ".yaml", ".yml") and p.stat().st_size < 300_000
    ]
    return res + sorted((data.parent.parent / "examples").glob("*.conv.*"))


@pytest.mark.parametrize("path", _documents(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_outline_of_every_fixture_equals_the_one_made_afresh(path: Path) -> None:
    """Every format the readers take (other providers' too), opened and then edited by a
    line added in its second half, in UTF-16 and UTF-8."""
    text = path.read_bytes().decode("utf-8", errors="replace")
    for encoding in ("utf-16", "utf-8"):
        key = f"{path.as_uri()}#{encoding}"
        host, rope = AnalysisHost(), Rope.from_str(text)
        a = analyze(path, text=rope, host=host, root=path.parent, today=TODAY)
        assert _kept(key, a, encoding) == _fresh(a, encoding)
        at = text.find("\n", len(text) // 2) + 1
        edited = rope.edit(at, at, "\n")
        edit = Edit.replace(at, at, "\n")
        a = analyze(path, text=edited, host=host, root=path.parent, edit=edit, today=TODAY)
        assert _kept(key, a, encoding) == _fresh(a, encoding)
        outline.forget(key)
