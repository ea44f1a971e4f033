"""Hostile inputs through the real command line, each under time and memory limits.

Every case generates its input (nothing large is committed), runs ``promptls assemble``
or ``promptls lint`` as a subprocess (``tests/support/limited.py``: an address-space
limit, a deadline that kills the process group, the peak RSS from ``wait4``) and checks
what no run may ever show (a hang, a traceback, a crash, output that is not valid UTF-8)
and then the finding the case is about. The bounds on time and memory are far above a
normal run (they catch hangs and unbounded growth, not slowness; the speed targets are in
``tests/bench``). ``tests/fuzz/fuzz_cli.py`` runs thousands of variants on demand.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.limited import Run, promptls

MAX_SECONDS = 60.0  # a hang, on a loaded 2-core machine
MAX_RSS_MB = 900.0  # unbounded growth (a normal small run: about 100 MB)
USER = "messages:\n  - {role: user, content: hi}\n"


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    # (code, words in the message) expected among the findings; None: check() does it.
    expect: tuple[str, str] | None
    check: Callable[[Run], None] | None = None
    exit_codes: tuple[int, ...] = (0, 1)


def _findings(run: Run) -> list[dict[str, object]]:
    data = json.loads(run.out)
    return data["diagnostics"] if isinstance(data, dict) else data  # type: ignore[no-any-return]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- The cases: each writes its files into ``d`` and returns what to run ------------------


def big_int_json(d: Path) -> Case:
    doc = '{"settings": {"max_input_tokens": ' + "9" * 5000 + "}, " + '"messages": []}'
    _write(d / "n.conv.json", doc)
    return Case(("assemble", "--format", "json", "n.conv.json"), ("syntax-error", "a number of"))


def big_int_yaml(d: Path) -> Case:
    _write(d / "n.conv.yaml", "settings: {max_input_tokens: " + "7" * 5000 + "}\n" + USER)
    return Case(("assemble", "--format", "json", "n.conv.yaml"), ("syntax-error", "a number of"))


def nul_in_path(d: Path) -> Case:
    _write(d / "p.conv.yaml", 'system_prompt: "a\\0b.prompt.md"\n' + USER)
    return Case(("lint", "--format", "json", "p.conv.yaml"), ("file-not-found", "NUL byte"))


def long_component(d: Path) -> Case:
    _write(d / "p.conv.yaml", "system_prompt: " + "a" * 300 + ".prompt.md\n" + USER)
    return Case(("lint", "--format", "json", "p.conv.yaml"), ("file-not-found", "too long"))


def symlink_loop_reference(d: Path) -> Case:
    os.symlink("loop.prompt.md", d / "loop.prompt.md")
    _write(d / "p.conv.yaml", "system_prompt: loop.prompt.md\n" + USER)
    return Case(("assemble", "--format", "json", "p.conv.yaml"), ("file-not-found", "loop"))


def lone_high_surrogate(d: Path) -> Case:
    _write(d / "s.conv.json", '[{"role": "user", "content": "bad \\ud800 here"}]')
    return Case(("assemble", "--format", "json", "s.conv.json"), ("syntax-error", "surrogate"))


def lone_low_surrogate_text(d: Path) -> Case:
    _write(d / "s.conv.json", '[{"role": "user", "content": "bad \\udc80 here"}]')

    def check(run: Run) -> None:
        assert "error[syntax-error] lone surrogate `\\udc80`" in run.out

    return Case(("assemble", "s.conv.json"), None, check)


def lone_surrogate_lint(d: Path) -> Case:
    _write(d / "s.conv.jsonl", '{"role": "user", "content": "\\udc80 \\ud83d"}\n')
    return Case(("lint", "--format", "sarif", "s.conv.jsonl"), None, lambda r: None)


def raw_control_characters(d: Path) -> Case:
    _write(d / "c.conv.json", '[{"role": "user", "content": "a\tb\x00c\x1bd"}]')
    return Case(("lint", "--format", "json", "c.conv.json"), ("syntax-error", "U+0009 (TAB)"))


def raw_control_characters_jsonl(d: Path) -> Case:
    _write(d / "c.conv.jsonl", '{"role": "user", "content": "esc \x1b"}\n')
    return Case(("lint", "--format", "json", "c.conv.jsonl"), ("syntax-error", "U+001B (ESC)"))


def duplicate_keys(d: Path) -> Case:
    _write(d / "k.conv.json", '[{"role": "user", "content": "a", "content": "b"}]')
    return Case(("lint", "--format", "json", "k.conv.json"), ("schema-error", "duplicate key"))


def bool_as_int(d: Path) -> Case:
    _write(d / "b.conv.yaml", "settings: {max_input_tokens: true}\n" + USER)
    return Case(("lint", "--format", "json", "b.conv.yaml"), ("invalid-setting", "boolean"))


def negative_reserved(d: Path) -> Case:
    _write(d / "r.conv.yaml", "settings: {reserved_tokens: -1}\n" + USER)
    return Case(
        ("lint", "--format", "json", "r.conv.yaml"), ("invalid-setting", "`auto` or an integer")
    )


def unknown_encoding(d: Path) -> Case:
    _write(d / "e.conv.yaml", "settings: {encoding: foo_base}\n" + USER)
    return Case(("lint", "--format", "json", "e.conv.yaml"), ("invalid-setting", "unknown"))


def yaml_tags(d: Path) -> Case:
    _write(d / "t.conv.yaml", "messages:\n  - !!python/object {role: user, content: hi}\n")
    return Case(("lint", "--format", "json", "t.conv.yaml"), ("schema-error", "YAML tag"))


def reserved_id(d: Path) -> Case:
    _write(d / "i.conv.yaml", "messages:\n  - {id: $system, role: user, content: hi}\n")
    return Case(("assemble", "--format", "json", "i.conv.yaml"), ("schema-error", "`$`"))


def self_referencing_anchor(d: Path) -> Case:
    _write(d / "a.conv.yaml", "messages: &m\n  - {role: user, content: hi}\n  - *m\n  - *m\n")

    def check(run: Run) -> None:
        found = _findings(run)
        assert len(found) <= 3, found
        assert any("its own anchor" in str(f["message"]) for f in found)

    return Case(("assemble", "--format", "json", "a.conv.yaml"), None, check)


def alias_bomb_padded(d: Path) -> Case:
    # Past 250,000 characters, so the counting child is forked before the engine loads.
    lines = ["pad: " + "p" * 300_000, 'a0: &a0 ["lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    lines.append("messages:\n  - {role: user, content: *a9}")
    _write(d / "bomb.conv.yaml", "\n".join(lines) + "\n")
    return Case(
        ("assemble", "--format", "json", "bomb.conv.yaml"), ("document-too-large", "aliases")
    )


def gigabyte_document(d: Path) -> Case:
    with open(d / "huge.conv.json", "wb") as f:
        f.truncate(1024**3)  # sparse: costs no disk
    return Case(("assemble", "--format", "json", "huge.conv.json"), ("document-too-large", "limit"))


def huge_project_file(d: Path) -> Case:
    with open(d / "big.txt", "wb") as f:
        f.truncate(100 * 1024**2)
    files = "project_files:\n  - {file_id: f1, filename: b, path: big.txt}\n"
    _write(d / "p.conv.yaml", files + USER)
    return Case(("lint", "--format", "json", "p.conv.yaml"), ("document-too-large", "limit"))


def million_tiny_messages(d: Path) -> Case:
    one = '{"role":"user","content":"x"}'
    with open(d / "m.conv.json", "w", encoding="utf-8") as f:
        f.write("[" + ",".join([one] * 1_000_000) + "]")
    return Case(("assemble", "--format", "json", "m.conv.json"), ("document-too-large", "20,000"))


def device_as_document(d: Path) -> Case:
    os.symlink("/dev/zero", d / "zero.conv.json")
    return Case(("assemble", "zero.conv.json"), None, lambda r: None, exit_codes=(2,))


def fifo_named_on_command_line(d: Path) -> Case:
    os.mkfifo(d / "f.conv.json")

    def check(run: Run) -> None:
        assert "FIFO" in run.err

    return Case(("lint", "f.conv.json"), None, check, exit_codes=(2,))


def special_files_in_folder(d: Path) -> Case:
    tree, outside = d / "tree", d / "outside"
    tree.mkdir()
    outside.mkdir()
    (tree / ".git").mkdir()
    _write(tree / "ok.conv.yaml", USER)
    _write(outside / "secret.conv.yaml", "messages:\n  - {role: assistant, content: x}\n")
    _write(outside / "promptls.toml", "max_input_tokens = not toml\n")
    os.mkfifo(tree / "fifo.conv.json")
    os.mkfifo(tree / ".gitignore")
    os.symlink("/dev/zero", tree / "zero.conv.json")
    os.symlink("nowhere.conv.json", tree / "dangling.conv.json")
    os.symlink("loop-b.conv.json", tree / "loop-a.conv.json")
    os.symlink("loop-a.conv.json", tree / "loop-b.conv.json")
    os.symlink(outside / "secret.conv.yaml", tree / "leak.conv.yaml")
    os.symlink(outside, tree / "outdir")

    def check(run: Run) -> None:
        assert run.returncode == 0, run.out + run.err  # only ok.conv.yaml, which is clean
        assert "All checks passed (1 file)" in run.out
        for name in ("fifo.conv.json", ".gitignore", "zero.conv.json", "dangling.conv.json"):
            assert f" tree/{name}: " in run.err, (name, run.err)
        for name in ("loop-a.conv.json", "leak.conv.yaml", "outdir"):
            assert f"skipped tree/{name}: " in run.err, (name, run.err)

    return Case(("lint", "tree"), None, check, exit_codes=(0,))


def undecodable_file_name(d: Path) -> Case:
    name = os.fsdecode(b"\xff.conv.yaml")  # not UTF-8: a lone surrogate in Python
    _write(d / name, "messages:\n  - {role: user, content: a, content: b}\n")

    def check(run: Run) -> None:
        assert '"uri": "%FF.conv.yaml"' in run.out

    return Case(("lint", "--format", "sarif", "."), None, check, exit_codes=(1,))


def unknown_keys_on_one_line(d: Path) -> Case:
    # A minified message with 200,000 keys: it timed out (60 s) in the text output, each
    # finding's excerpt mapping the whole 2 MB line, and took 1.1 GB in the JSON outputs.
    keys = ",".join(f'"k{i}": 1' for i in range(200_000))
    _write(d / "k.conv.json", f'[{{"role": "user", "content": "hi", {keys}}}]')

    def check(run: Run) -> None:
        assert "199,000 more `unknown-key` findings are not listed" in run.out
        assert run.out.count("warning[unknown-key]") == 1_001

    return Case(("lint", "k.conv.json"), None, check, exit_codes=(0,))


CASES = [
    big_int_json,
    big_int_yaml,
    nul_in_path,
    long_component,
    symlink_loop_reference,
    lone_high_surrogate,
    lone_low_surrogate_text,
    lone_surrogate_lint,
    raw_control_characters,
    raw_control_characters_jsonl,
    duplicate_keys,
    bool_as_int,
    negative_reserved,
    unknown_encoding,
    yaml_tags,
    reserved_id,
    self_referencing_anchor,
    alias_bomb_padded,
    gigabyte_document,
    huge_project_file,
    million_tiny_messages,
    device_as_document,
    fifo_named_on_command_line,
    special_files_in_folder,
    undecodable_file_name,
    unknown_keys_on_one_line,
]


@pytest.mark.parametrize("make", CASES, ids=lambda f: f.__name__)
def test_hostile_input(make: Callable[[Path], Case], tmp_path: Path) -> None:
    case = make(tmp_path)
    run = promptls(*case.args, cwd=tmp_path)
    assert run.problems() == []
    assert run.returncode in case.exit_codes, (run.returncode, run.err)
    assert run.seconds < MAX_SECONDS
    assert run.max_rss_mb < MAX_RSS_MB, f"peak RSS {run.max_rss_mb:.0f} MB"
    if case.expect is not None:
        code, words = case.expect
        found = _findings(run)
        assert any(f["code"] == code and words in str(f["message"]) for f in found), found
    if case.check is not None:
        case.check(run)


INJECT = """
import os, sys
import assembly.diagnostics as d
from assembly.diagnostics import Rule

def boom(ctx):
    if "kill" in ctx.text:
        os.kill(os.getpid(), 9)  # a worker that dies, not one that raises
    raise ZeroDivisionError("injected failure")

d.RULES = tuple(Rule(r.code, r.severity, boom) if r.code == "history-truncated" else r
                for r in d.RULES)
from server.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_an_exception_in_a_rule_is_an_internal_error_finding_in_every_command(
    tmp_path: Path,
) -> None:
    """A bug (here: a rule that raises, and one that kills its worker process) never
    shows a traceback: the file gets an ``internal-error`` and the run goes on."""
    from tests.support.limited import run_python

    for i in range(20):  # enough files for worker processes
        _write(tmp_path / f"c{i:02}.conv.yaml", USER)
    _write(tmp_path / "c05.conv.yaml", "messages:\n  - {role: user, content: kill}\n")
    run = run_python(["-c", INJECT, "lint", "--format", "json", "--jobs", "2", "."], cwd=tmp_path)
    assert run.problems() == []
    found = _findings(run)
    by_file = {str(f["file"]): f for f in found}
    assert len(by_file) == 20 and all(f["code"] == "internal-error" for f in found)
    assert "ZeroDivisionError: injected failure" in str(by_file["c00.conv.yaml"]["message"])
    assert "worker process died" in str(by_file["c05.conv.yaml"]["message"])

    for fmt in ("json", "text"):
        run = run_python(["-c", INJECT, "assemble", "--format", fmt, "c00.conv.yaml"], cwd=tmp_path)
        assert run.problems() == []
        assert "internal-error" in run.out and "injected failure" in run.out
        assert "https://github.com/promptls/promptls/issues" in run.out
