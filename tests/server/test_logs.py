"""Real logs open as they are: datasets, request bodies, the CLI's answers around them.

Datasets (JSON Lines with one conversation per line) are linted per record, assembled with
``--record N`` or all as JSON Lines, and the language server answers hovers, lenses and
go-to-definition from the record under the cursor. The command line says what to do on a
prompt template, an unknown flag of a subcommand, an impossible ``--today``, and prints
its version without loading a tokenizer.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp

from server.cli.main import main
from server.workspace import analyze
from tests.support.inprocess import InProcessClient

REPO = Path(__file__).resolve().parents[2]
DATASET = (
    '{"messages": [{"role": "system", "content": "Be happy."}, {"role": "user", "content": '
    '"I fell."}, {"role": "assistant", "content": "Great exercise!"}]}\n'
    '{"messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", '
    '"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", '
    '"arguments": "{}"}}]}], "tools": [{"type": "function", "function": {"name": "weather"}}]}\n'
    '{"messages": [{"role": "system", "content": "Be happy."}, {"role": "assistant", '
    '"content": "You are great!"}]}\n'
)


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], mp: pytest.MonkeyPatch, *args: str):  # type: ignore[no-untyped-def]
    mp.chdir(tmp_path)
    capsys.readouterr()
    try:
        rc = main(list(args))
    except SystemExit as exc:  # argparse's usage errors
        rc = int(exc.code or 0)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_a_dataset_is_linted_per_record(tmp_path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "train.conv.jsonl").write_text(DATASET, encoding="utf-8")
    rc, out, _ = _run(tmp_path, capsys, monkeypatch, "lint", "--format", "json", ".")
    found = [(d["code"], d["range"]["start"]["line"]) for d in json.loads(out)]
    # Line 3 has no user message; line 2's call is the example's answer, not unanswered.
    assert found == [("no-user-message", 3)]
    assert rc == 1


def test_assemble_picks_a_record_or_prints_all_as_json_lines(tmp_path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "train.conv.jsonl").write_text(DATASET, encoding="utf-8")
    rc, out, err = _run(tmp_path, capsys, monkeypatch, "assemble", "train.conv.jsonl")
    assert rc == 2 and "dataset of 3 conversations" in err and "--record N" in err
    rc, out, _ = _run(
        tmp_path,
        capsys,
        monkeypatch,
        "assemble",
        "train.conv.jsonl",
        "--record",
        "2",
        "--format",
        "json",
    )
    one = json.loads(out)
    assert (rc, one["record"], one["line"]) == (0, 2, 2)
    assert one["budget"]["tools"] > 0  # the record's own tools
    assert [m["role"] for m in one["messages"]] == ["user", "assistant"]
    rc, out, _ = _run(
        tmp_path, capsys, monkeypatch, "assemble", "train.conv.jsonl", "--format", "json"
    )
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["record"] for r in records] == [1, 2, 3]
    assert rc == 1  # record 3 cannot be assembled
    # Characters some readers split lines at are escaped (str.splitlines: U+2028 …).
    separators = DATASET.replace("I fell.", "I\u2028fell\u0085\u2029.")
    (tmp_path / "sep.conv.jsonl").write_text(separators, encoding="utf-8")
    rc, out, _ = _run(
        tmp_path, capsys, monkeypatch, "assemble", "sep.conv.jsonl", "--format", "json"
    )
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["record"] for r in records] == [1, 2, 3]
    assert "I\u2028fell\x85\u2029." in json.dumps(records[0], ensure_ascii=False)
    rc, out, _ = _run(
        tmp_path, capsys, monkeypatch, "assemble", "train.conv.jsonl", "--record", "1"
    )
    assert rc == 0 and out.startswith("train.conv.jsonl (record 1, line 1)")
    rc, _, err = _run(
        tmp_path, capsys, monkeypatch, "assemble", "train.conv.jsonl", "--record", "4"
    )
    assert rc == 2 and "has 3 conversations" in err
    (tmp_path / "one.conv.json").write_text('[{"role": "user", "content": "hi"}]', encoding="utf-8")
    rc, _, err = _run(tmp_path, capsys, monkeypatch, "assemble", "one.conv.json", "--record", "1")
    assert rc == 2 and "not a dataset" in err


def test_a_record_is_drawn_in_the_format_asked_with_its_findings_at_the_file(
    tmp_path, capsys, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """`--record N --format html` is the record's page (it was the text table), and the text
    table's findings are located `train.conv.jsonl:3:…` (the record's words head the table)."""
    (tmp_path / "train.conv.jsonl").write_text(DATASET, encoding="utf-8")
    rc, out, _ = _run(
        tmp_path,
        capsys,
        monkeypatch,
        "assemble",
        "train.conv.jsonl",
        "--record",
        "3",
        "--format",
        "html",
    )
    assert rc == 1 and out.startswith("<!DOCTYPE html>")
    assert "<code>train.conv.jsonl (record 3, line 3)</code>" in out
    assert "no-user-message" in out
    rc, out, _ = _run(
        tmp_path, capsys, monkeypatch, "assemble", "train.conv.jsonl", "--record", "3"
    )
    assert out.startswith("train.conv.jsonl (record 3, line 3)  ·  ")
    assert out.rstrip("\n").split("\n")[-1].startswith("train.conv.jsonl:3:"), out


def test_summary_request_without_json_is_a_usage_error(tmp_path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    overflow = str(REPO / "examples" / "overflow.conv.yaml")
    rc, out, err = _run(tmp_path, capsys, monkeypatch, "assemble", overflow, "--summary-request")
    assert (rc, out) == (2, "")
    assert err == "promptls: error: --summary-request applies to --format json\n"


def test_message_per_line_jsonl_is_still_read_as_one_conversation(tmp_path: Path) -> None:
    path = tmp_path / "chat.conv.jsonl"
    path.write_text(
        '{"tools": ["weather"]}\n'
        '{"role": "user", "content": "hi"}\n'
        '{"role": "assistant", "content": "yo"}\n',
        encoding="utf-8",
    )
    a = analyze(path)
    assert not a.records and [m.id for m in a.conversation.messages] == ["0", "1"]


def test_usage_errors_of_assemble(tmp_path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "a.conv.json").write_text('[{"role": "user", "content": "hi"}]', encoding="utf-8")
    (tmp_path / "agent.prompt.md").write_text("You help.\n", encoding="utf-8")
    rc, _, err = _run(tmp_path, capsys, monkeypatch, "assemble", "a.conv.json", "--bogus")
    assert rc == 2
    assert err.startswith("usage: promptls assemble")
    assert "promptls assemble: error: unrecognized arguments: --bogus" in err
    rc, _, err = _run(
        tmp_path, capsys, monkeypatch, "assemble", "a.conv.json", "--today", "2026-13-45"
    )
    assert rc == 2
    assert "invalid date '2026-13-45': expected a calendar date as YYYY-MM-DD" in err
    assert "Traceback" not in err and "month must be" not in err
    rc, _, err = _run(tmp_path, capsys, monkeypatch, "assemble", "agent.prompt.md")
    assert rc == 2 and "is a prompt template, not a conversation" in err and "system_prompt" in err


def test_version_does_not_load_a_tokenizer() -> None:
    code = (
        "import sys\nfrom server.cli.main import main\ntry:\n    main(['--version'])\n"
        "except SystemExit as exc:\n    rc = exc.code or 0\n"
        "print(rc, 'tiktoken' in sys.modules, 'assembly' in sys.modules)"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    first, last = res.stdout.splitlines()
    assert first.startswith("promptls ") and first.split()[1][0].isdigit()
    assert last == "0 False False"


def test_a_settings_file_finding_prints_its_path_relative_to_the_folder(
    tmp_path, capsys, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        "[tool.promptls]\nsafety_margin = 2\n", encoding="utf-8"
    )
    (tmp_path / "a.conv.json").write_text('[{"role": "user", "content": "hi"}]', encoding="utf-8")
    _, out, _ = _run(tmp_path, capsys, monkeypatch, "assemble", "a.conv.json", "--format", "json")
    assert [d["file"] for d in json.loads(out)["diagnostics"]] == ["pyproject.toml"]
    _, out, _ = _run(tmp_path, capsys, monkeypatch, "assemble", "a.conv.json")
    assert "\npyproject.toml:2:17: error[invalid-setting]" in out


def test_the_tools_setting_declares_tools_for_a_bare_array(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "promptls.toml").write_text('tools = ["web_search"]\n', encoding="utf-8")
    path = tmp_path / "log.conv.json"
    path.write_text(
        '[{"role": "user", "content": "news?"},\n'
        ' {"role": "assistant", "content": '
        '"{\\"name\\": \\"web_search\\", \\"arguments\\": {\\"query\\": \\"news\\"}}"}]',
        encoding="utf-8",
    )
    a = analyze(path)
    assert [d.code for d in a.diagnostics] == ["tool-call-in-text"]
    assert a.assembly.budget.tools > 0
    (tmp_path / "promptls.toml").unlink()
    assert [d.code for d in analyze(path).diagnostics] == []


def test_a_response_nothing_calls_does_not_count_against_the_last_turn(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    path = tmp_path / "turn.conv.json"
    big = "lorem ipsum " * 400
    path.write_text(
        json.dumps(
            {
                "settings": {"max_input_tokens": 300, "safety_margin": 0, "reserved_tokens": 0},
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "tool", "tool_call_id": "call_gone", "content": big},
                ],
            }
        ),
        encoding="utf-8",
    )
    a = analyze(path)
    codes = [d.code for d in a.diagnostics]
    assert "last-turn-over-budget" not in codes and "orphaned-tool-response" in codes
    assert a.assembly.ok and a.assembly.orphans_dropped == ("1",)


# ------------------------------------------------------------------------------ server


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[InProcessClient]:
    (tmp_path / ".git").mkdir()
    c = InProcessClient()
    await c.initialize(lsp.ClientCapabilities(), root_uri=tmp_path.as_uri())
    yield c
    c.shutdown()


async def _lenses(client: InProcessClient, doc: lsp.TextDocumentIdentifier) -> Any:
    return await client.request(lsp.TEXT_DOCUMENT_CODE_LENS, lsp.CodeLensParams(text_document=doc))


async def test_the_server_answers_per_record(client: InProcessClient, tmp_path: Path) -> None:
    uri = (tmp_path / "train.conv.jsonl").as_uri()
    await client.open(uri, DATASET, language_id="jsonl")
    doc = lsp.TextDocumentIdentifier(uri=uri)
    lenses = await _lenses(client, doc)
    assert [(x["range"]["start"]["line"], x["command"]["arguments"][1]) for x in lenses] == [
        (0, 1),
        (1, 2),
        (2, 3),
    ]
    assert lenses[2]["command"]["title"].startswith("no-user-message")
    view = await client.request(
        lsp.WORKSPACE_EXECUTE_COMMAND,
        lsp.ExecuteCommandParams(command="promptls.showAssembled", arguments=[uri, 2]),
    )
    assert [e["id"] for e in view["layout"]] == ["0", "1"]
    # The assembled view's page: the record asked for (default the first), named in the page.
    pages = {}
    for record in (None, 2):
        options = {"nonce": "n0nce"} | ({} if record is None else {"record": record})
        page = await client.request(
            lsp.WORKSPACE_EXECUTE_COMMAND,
            lsp.ExecuteCommandParams(command="promptls.assembledHtml", arguments=[uri, options]),
        )
        pages[record] = page["html"]
    # Each row's jump button names its message's line: record 2's two messages are on line 2.
    jumps = {k: re.findall(r'data-key="(\w+)" data-line="(\d+)"', v) for k, v in pages.items()}
    assert jumps[2] == [("0", "1"), ("1", "1")]
    assert jumps[None] == [("0", "0"), ("1", "0"), ("2", "0")]
    assert "<h1>Assembled context: <code>train.conv.jsonl (record 2)</code></h1>" in pages[2]
    assert "<code>train.conv.jsonl (record 1)</code>" in pages[None]
    for bad in (4, 0, "2", True):
        with pytest.raises(Exception, match="record"):
            await client.request(
                lsp.WORKSPACE_EXECUTE_COMMAND,
                lsp.ExecuteCommandParams(
                    command="promptls.assembledHtml",
                    arguments=[uri, {"nonce": "n0nce", "record": bad}],
                ),
            )
    # Hover on the call id of line 2: that record's call.
    col = DATASET.splitlines()[1].index('"c1"') + 1
    hover = await client.request(
        lsp.TEXT_DOCUMENT_HOVER, lsp.HoverParams(text_document=doc, position=lsp.Position(1, col))
    )
    assert "tool call `c1`" in hover["contents"]["value"]
    found = await client.request(
        lsp.TEXT_DOCUMENT_DEFINITION,
        lsp.DefinitionParams(text_document=doc, position=lsp.Position(1, col)),
    )
    assert [loc["range"]["start"]["line"] for loc in found] == [1]


def test_hover_pairs_a_reused_call_id_in_conversation_order(tmp_path: Path) -> None:
    from assembly.ide.hover import conversation_hover

    (tmp_path / ".git").mkdir()
    path = tmp_path / "reuse.conv.json"
    text = (
        '[{"id": "u1", "role": "user", "content": "Oslo?"},\n'
        ' {"id": "a1", "role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",'
        ' "function": {"name": "weather", "arguments": "{}"}}]},\n'
        ' {"id": "t1", "role": "tool", "tool_call_id": "call_1", "content": "12"},\n'
        ' {"id": "u2", "role": "user", "content": "Bergen?"},\n'
        ' {"id": "a2", "role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",'
        ' "function": {"name": "weather", "arguments": "{}"}}]},\n'
        ' {"id": "t2", "role": "tool", "tool_call_id": "call_1", "content": "9"}]'
    )
    path.write_text(text, encoding="utf-8")
    a = analyze(path)
    assert [d.code for d in a.diagnostics] == []
    first_call = text.index('"call_1"') + 2
    hover = conversation_hover(a, first_call, today=dt.date(2026, 7, 15))
    assert "Answered by `t1`" in hover.markdown and "`t2`" not in hover.markdown
    second_answer = text.rindex('"call_1"') + 2
    hover = conversation_hover(a, second_answer, today=dt.date(2026, 7, 15))
    assert "called in `a2`" in hover.markdown


async def test_the_server_places_each_record_after_lines_move(
    client: InProcessClient, tmp_path: Path
) -> None:
    """A record added above the others moves every line: the records the edit did not touch
    keep their analyses, placed at their new lines, so hovers, go-to-definition, lenses and
    the assembled view answer at the new lines."""
    uri = (tmp_path / "train.conv.jsonl").as_uri()
    await client.open(uri, DATASET, language_id="jsonl")
    session = client.server.session
    before = session.snapshots[uri].analysis
    added = '{"messages": [{"role": "user", "content": "First!"}]}\n'
    start = lsp.Position(0, 0)
    client.notify(
        lsp.TEXT_DOCUMENT_DID_CHANGE,
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                lsp.TextDocumentContentChangePartial(range=lsp.Range(start, start), text=added)
            ],
        ),
    )
    await client.analysed(uri, 2)
    after = session.snapshots[uri].analysis
    # (The old first line is read again: the insertion ends at its start.)
    kept = list(zip(after.records[2:], before.records[1:], strict=True))
    assert all(a.conversation is b.conversation and a.base > b.base for a, b in kept)
    doc = lsp.TextDocumentIdentifier(uri=uri)
    col = DATASET.splitlines()[1].index('"c1"') + 1
    where = lsp.Position(2, col)
    hover = await client.request(
        lsp.TEXT_DOCUMENT_HOVER, lsp.HoverParams(text_document=doc, position=where)
    )
    assert "tool call `c1`" in hover["contents"]["value"]
    assert hover["range"]["start"]["line"] == 2
    found = await client.request(
        lsp.TEXT_DOCUMENT_DEFINITION, lsp.DefinitionParams(text_document=doc, position=where)
    )
    assert [loc["range"]["start"]["line"] for loc in found] == [2]
    lenses = await _lenses(client, doc)
    lines = [(x["range"]["start"]["line"], x["command"]["arguments"][1]) for x in lenses]
    assert lines == [(0, 1), (1, 2), (2, 3), (3, 4)]
    # The outline lists the records, each at its line.
    symbols = await client.request(
        lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL, lsp.DocumentSymbolParams(text_document=doc)
    )
    assert [(s["name"], s["range"]["start"]["line"]) for s in symbols] == [
        (f"record {k + 1}", k) for k in range(4)
    ]
    assert symbols[2]["detail"] == "2 messages: Weather?"
    # Each message's tokens at its own line (those of lines 2 and 3 alone, when asked).
    for first, want in ((0, [0, 1, 1, 1, 2, 2, 3, 3]), (2, [2, 2, 3, 3])):
        asked = lsp.Range(lsp.Position(first, 0), lsp.Position(4, 0))
        hints = await client.request(
            lsp.TEXT_DOCUMENT_INLAY_HINT, lsp.InlayHintParams(text_document=doc, range=asked)
        )
        assert [h["position"]["line"] for h in hints] == want
    page = await client.request(
        lsp.WORKSPACE_EXECUTE_COMMAND,
        lsp.ExecuteCommandParams(
            command="promptls.assembledHtml", arguments=[uri, {"nonce": "n0nce", "record": 3}]
        ),
    )
    jumps = re.findall(r'data-key="(\w+)" data-line="(\d+)"', page["html"])
    assert jumps == [("0", "2"), ("1", "2")]
    # Every finding sits where a fresh analysis of the new text puts it.
    fresh = analyze(tmp_path / "train.conv.jsonl", text=added + DATASET)
    assert [(d.code, d.range) for d in after.diagnostics] == [
        (d.code, d.range) for d in fresh.diagnostics
    ]


async def test_completion_in_a_record_offers_that_records_calls_and_tools(
    client: InProcessClient, tmp_path: Path
) -> None:
    """In a dataset, completion reads the record under the cursor: a response's
    `tool_call_id` is offered the open calls of its own record (not of another line), and a
    call's function name the tools of its own record."""
    response = '{"role": "tool", "tool_call_id": "", "content": "sunny"}'
    lines = DATASET.splitlines()
    lines[1] = lines[1].replace("}}]}]", "}}]}, " + response + "]")
    text = "\n".join(lines) + "\n"
    uri = (tmp_path / "train.conv.jsonl").as_uri()
    await client.open(uri, text, language_id="jsonl")
    doc = lsp.TextDocumentIdentifier(uri=uri)
    col = lines[1].index('"tool_call_id": ""') + len('"tool_call_id": "')
    got = await client.request(
        lsp.TEXT_DOCUMENT_COMPLETION,
        lsp.CompletionParams(text_document=doc, position=lsp.Position(1, col)),
    )
    items = got["items"]
    assert [i["label"] for i in items] == ["c1"]
    assert items[0]["textEdit"]["range"]["start"] == {"line": 1, "character": col}
    col = lines[1].index('"name": "weather"') + len('"name": "')
    got = await client.request(
        lsp.TEXT_DOCUMENT_COMPLETION,
        lsp.CompletionParams(text_document=doc, position=lsp.Position(1, col)),
    )
    assert [i["label"] for i in got["items"]] == ["weather"]
