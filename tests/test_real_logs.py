"""The real OpenAI-format corpus (tests/data/real-logs/openai/).

Each file is a conversation log, dataset or chat-completions request body written by a
public project (MANIFEST.md beside them names the source, path, commit and licence, and
says what is true in each file, checked by hand). For each, ``promptls lint`` and
``promptls assemble --format json`` are rendered as a golden ``.expected`` file beside it
(message contents cut to 160 characters there, for size); no ``schema-error`` is reported
on a field the format documents (the one file that is not valid JSON Lines is the only one
with errors of reading, and they say so); every file has its row in the manifest. The
printed ``messages`` are checked against the providers' rules by ``tests/test_sendable.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from server.cli.main import main
from tests.support.golden import check_golden

FOLDER = Path(__file__).resolve().parent / "data" / "real-logs" / "openai"
FILES = sorted(p for p in FOLDER.iterdir() if p.name.endswith((".conv.json", ".conv.jsonl")))
TODAY = "2026-07-15"
CUT = 160


def _cli(
    args: list[str], capsys: pytest.CaptureFixture[str], mp: pytest.MonkeyPatch
) -> tuple[int, str]:
    mp.chdir(FOLDER)
    capsys.readouterr()
    rc = main(args)
    return rc, capsys.readouterr().out


def _cut(value: Any) -> Any:
    if isinstance(value, str) and len(value) > CUT:
        return value[:CUT] + f"…(+{len(value) - CUT})"
    if isinstance(value, list):
        return [_cut(v) for v in value]
    if isinstance(value, dict):
        return {k: _cut(v) for k, v in value.items()}
    return value


def _render(d: dict[str, Any]) -> list[str]:
    lines = []
    if "record" in d:
        lines.append(f"record {d['record']} (line {d['line']})")
    lines.append(f"model: {d['settings']['model']} · tools: {d['budget']['tools']} tokens")
    lines.append(
        "layout: " + ", ".join(f"{e['id']}:{e['segment']}:{e['tokens']}" for e in d["layout"])
    )
    lines.append(f"dropped: {d['dropped']} · orphans_dropped: {d['orphans_dropped']}")
    lines.append("messages:")
    lines.extend("  " + json.dumps(_cut(m), ensure_ascii=False) for m in d["messages"])
    lines.append(
        "diagnostics: "
        + ", ".join(f"{x['code']}@{x['range']['start']['line']}" for x in d["diagnostics"])
    )
    return lines


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_real_log_golden(
    path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rc, lint = _cli(["lint", path.name], capsys, monkeypatch)
    out = [f"$ promptls lint {path.name}", f"exit {rc}", lint.rstrip(), ""]
    rc, text = _cli(
        ["assemble", path.name, "--format", "json", "--today", TODAY], capsys, monkeypatch
    )
    out += [f"$ promptls assemble {path.name} --format json", f"exit {rc}"]
    objects = (
        [json.loads(line) for line in text.splitlines() if line.strip()]
        if path.suffix == ".jsonl"
        else [json.loads(text)]
    )
    for d in objects:
        out += _render(d)
    check_golden("\n".join(out) + "\n", path.with_name(path.name + ".expected"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_schema_error_on_documented_fields(
    path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, text = _cli(["lint", "--format", "json", path.name], capsys, monkeypatch)
    codes = {d["code"] for d in json.loads(text)}
    assert "schema-error" not in codes


def test_every_file_is_in_the_manifest() -> None:
    manifest = (FOLDER / "MANIFEST.md").read_text(encoding="utf-8")
    missing = [p.name for p in FILES if f"`{p.name}`" not in manifest]
    assert not missing
    assert len(FILES) >= 30
