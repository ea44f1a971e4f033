"""The real Anthropic and Responses corpus (tests/data/real-logs/{anthropic,responses}/).

Each file is a request body recorded from the provider's real API by a public project
(MANIFEST.md beside them names the source, commit and licence, and says what is true in
each file, checked by hand). For each, ``promptls lint`` and ``promptls assemble --format
json`` (the provider the document implies, and the other one) are rendered as a golden
``.expected`` file beside it; every printed Anthropic request passes the validator written
from Anthropic's documented rules; the format read is the one the folder says; no
`schema-error` is reported on a field the format documents.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from server.cli.main import main
from tests.support.anthropic_validator import validate
from tests.support.golden import check_golden

DATA = Path(__file__).resolve().parent / "data" / "real-logs"
_SUFFIXES = (".conv.json", ".conv.jsonl")
# (Codex CLI's rollouts are read as the Responses request their session makes, Claude
# Code's transcripts as the Anthropic request theirs sends next, Copilot CLI's, Gemini
# CLI's and pi's sessions as the chat-completions request theirs sends next.)
FORMATS = {
    "anthropic": "anthropic-messages",
    "responses": "openai-responses",
    "codex": "openai-responses",
    "claude-code": "anthropic-messages",
    "copilot": "openai-chat",
    "gemini-cli": "openai-chat",
    "pi": "openai-chat",
}
ANTHROPIC_FOLDERS = ("anthropic", "claude-code")
FILES = sorted(
    p for folder in FORMATS for p in (DATA / folder).iterdir() if p.name.endswith(_SUFFIXES)
)
TODAY = "2026-07-15"


def _cli(
    args: list[str], folder: Path, capsys: pytest.CaptureFixture[str], mp: pytest.MonkeyPatch
) -> tuple[int, str]:
    mp.chdir(folder)
    capsys.readouterr()
    rc = main(args)
    return rc, capsys.readouterr().out


def _assembled(path: Path, provider: str | None, capsys, mp) -> tuple[int, dict]:  # type: ignore[no-untyped-def]
    args = ["assemble", path.name, "--format", "json", "--today", TODAY]
    if provider:
        args += ["--provider", provider]
    rc, out = _cli(args, path.parent, capsys, mp)
    return rc, json.loads(out)


def _render(rc: int, d: dict, title: str) -> list[str]:  # type: ignore[type-arg]
    lines = [f"$ {title}", f"exit {rc}", f"format: {d['format']['name']} ({d['format']['why']})"]
    lines.append(f"provider: {d['settings']['provider']} · model: {d['settings']['model']}")
    lines.append(
        "layout: " + ", ".join(f"{e['id']}:{e['segment']}:{e['tokens']}" for e in d["layout"])
    )
    lines.append(f"dropped: {d['dropped']} · orphans_dropped: {d['orphans_dropped']}")
    if "system" in d:
        lines.append("system: " + json.dumps(d["system"], ensure_ascii=False))
        lines.append(f"message_sources: {d['message_sources']}")
    lines.append("messages:")
    lines.extend("  " + json.dumps(m, ensure_ascii=False) for m in d["messages"])
    lines.append(
        "diagnostics: "
        + ", ".join(f"{x['code']}@{x['range']['start']['line']}" for x in d["diagnostics"])
    )
    return lines


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_log_golden(
    path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rc, lint = _cli(["lint", path.name], path.parent, capsys, monkeypatch)
    out = [f"$ promptls lint {path.name}", f"exit {rc}", lint.rstrip(), ""]
    implied = "anthropic" if path.parent.name in ANTHROPIC_FOLDERS else "openai"
    other = "openai" if implied == "anthropic" else "anthropic"
    rc1, d1 = _assembled(path, None, capsys, monkeypatch)
    out += _render(rc1, d1, f"promptls assemble {path.name} --format json")
    out.append("")
    rc2, d2 = _assembled(path, other, capsys, monkeypatch)
    out += _render(rc2, d2, f"promptls assemble {path.name} --format json --provider {other}")
    check_golden("\n".join(out) + "\n", path.with_name(path.name + ".expected"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_log_reads_as_its_format_and_prints_a_valid_anthropic_request(
    path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rc, d = _assembled(path, "anthropic", capsys, monkeypatch)
    assert rc == 0
    assert d["format"]["name"] == FORMATS[path.parent.name]
    assert d["messages"], "nothing assembled"
    assert validate({"system": d["system"], "messages": d["messages"]}) == []
    # Message ids are the document's: an index (of `messages` / `input`), `<index>/<block>`
    # for a tool result split from its message, an uploaded file's id, or a named part; a
    # Claude Code message's is its first line's `uuid`, a Copilot CLI message's its event's
    # `id`, a Gemini CLI message's its record's (a call's result: `<id>/<n>`), a pi
    # message's its entry's, or its line's index.
    text = path.read_text(encoding="utf-8")
    own = {"claude-code": "uuid", "copilot": "id", "gemini-cli": "id"}.get(path.parent.name)
    for e in d["layout"]:
        if path.parent.name == "pi" and not e["id"].startswith("$"):
            # (A first-version pi session's entries have no id: a message's is its line's.)
            assert int(e["id"]) < len(text.splitlines()), e
            continue
        if own is not None and not e["id"].startswith("$"):
            assert f'"{own}":"{e["id"].split("/")[0]}"' in text.replace('": "', '":"'), e
            continue
        assert re.fullmatch(r"\d+(/\d+)?(/files/\d+)?|system|instructions|input|\$\w+", e["id"]), e
    # Every field of these files is documented by its format: no reading finding.
    reading = {"schema-error", "schema-warning", "unknown-key"}
    assert [x for x in d["diagnostics"] if x["code"] in reading] == []


def test_every_real_file_has_a_hand_checked_note() -> None:
    for folder in FORMATS:
        manifest = (DATA / folder / "MANIFEST.md").read_text(encoding="utf-8")
        named = set(re.findall(r"`([\w.\-\[\]]+\.conv\.jsonl?)`", manifest))
        present = {p.name for p in (DATA / folder).iterdir() if p.name.endswith(_SUFFIXES)}
        assert named == present, folder
        assert "MIT" in manifest and re.search(r"\b[0-9a-f]{40}\b", manifest)
