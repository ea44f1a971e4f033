"""What the text outputs print of a hostile document's own strings: no control character
reaches the terminal (a raw ESC in a YAML comment, escaped ones in a message id or role,
a carriage return), each is shown as its Unicode Control Picture, and the excerpt's carets
still point at the character the finding is about."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from server.cli.main import main
from server.terminal import visible

# Every C0 control but LF and TAB, DEL and every C1 control: what a terminal interprets.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

# An id and a role with ESC sequences (retitle the window, paint red, clear the screen)
# and a carriage return that would overwrite the line.
_HOSTILE_JSON = (
    '{"messages": [{"id": "\\u001b]0;owned\\u0007\\u001b[31mX\\r", "role": "user",'
    ' "content": "a"}, {"role": "\\u001b[2Jx", "content": "b"}]}'
)


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    main(args)
    captured = capsys.readouterr()
    return captured.out + captured.err


def test_visible_maps_one_character_to_one() -> None:
    text = "a\x1b[31m\tb\nc\r\x00\x7f\x9b"
    shown = visible(text)
    assert shown == "a\u241b[31m\tb\nc\u240d\u2400\u2421\ufffd"
    assert len(shown) == len(text)


def test_lint_text_prints_no_control_character(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.conv.json").write_text(_HOSTILE_JSON, encoding="utf-8")
    (tmp_path / "b.conv.yaml").write_text(
        "messages:\n  - role: user # \x1b[2J\x1b[31mhidden\n    content: hi\n",
        encoding="utf-8",
    )
    out = _run(["lint", "."], capsys)
    assert not _CONTROL.search(out), out
    assert "unknown role `\u241b[2Jx`" in out
    # The excerpt of the YAML finding shows the comment with the carets under the ESC.
    line = next(ln for ln in out.splitlines() if ln.startswith("2 |"))
    carets = out.splitlines()[out.splitlines().index(line) + 1]
    assert line == "2 |   - role: user # \u241b[2J\u241b[31mhidden"
    assert carets.index("^") == line.index("\u241b")


def test_assemble_and_diff_text_print_no_control_character(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.conv.json").write_text(_HOSTILE_JSON, encoding="utf-8")
    (tmp_path / "b.conv.json").write_text(
        _HOSTILE_JSON.replace('"content": "a"', '"content": "a b c d"'), encoding="utf-8"
    )
    out = _run(["assemble", "a.conv.json"], capsys)
    assert not _CONTROL.search(out), out
    assert "\u241b]0;owned\u2407\u241b[31mX\u240d" in out  # the id, in the table
    out = _run(["diff", "--files", "a.conv.json", "b.conv.json"], capsys)
    assert not _CONTROL.search(out), out
    assert "\u241b]0;owned\u2407\u241b[31mX\u240d" in out


def test_messages_on_stderr_print_no_control_character(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The notes and errors on stderr name files of the tree being linted and the
    arguments given: a dangling link and a FIFO whose names hold escape sequences (a
    repository can ship both) retitled the terminal and cleared it in the "skipped …"
    notes, as an unknown rule code did in its error."""
    import os

    (tmp_path / "evil\x1b]0;owned\x07.conv.json").symlink_to(tmp_path / "nowhere")
    os.mkfifo(tmp_path / "fifo\x1b[2J.conv.json")
    capsys.readouterr()
    main(["lint", str(tmp_path)])
    err = capsys.readouterr().err
    assert "skipped" in err and "evil\u241b]0;owned\u2407.conv.json" in err
    assert not _CONTROL.search(err), err
    main(["rule", "\x1b]0;owned\x07x"])
    err = capsys.readouterr().err
    assert "unknown rule `\u241b]0;owned\u2407x`" in err and not _CONTROL.search(err)
