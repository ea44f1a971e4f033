"""Regression tests of issue 9's input half, in-process: each hostile input of the report
becomes a finding at its place (exact ranges), never an exception.

The same inputs run through the real command line under limits in
``test_hostile_cli.py``; these tests pin the details (where, what, how many).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from assembly import syntax
from assembly.documents import MAX_MESSAGES
from assembly.model import DocFormat
from assembly.reading import parse_conversation
from assembly.settings import Settings, SettingsLayer, resolve_settings
from assembly.text import TextRange
from server import files, precount
from server.cli.lint.discover import discover
from server.cli.lint.model import LintOptions
from server.cli.lint.watch import relint_reporting
from server.workspace import analyze, analyze_prompt, resolve_reference


def _errors(text: str, parse: object = syntax.parse_json) -> list[tuple[str, str, TextRange]]:
    data = parse(text)  # type: ignore[operator]
    return [(e.code, e.message, e.range) for e in data.errors]


# --- Item 11: raw control characters in JSON strings ------------------------------------


@pytest.mark.parametrize("char", ["\t", "\x00", "\x1b", "\x01", "\x1f"])
def test_raw_control_character_in_a_json_string_is_a_syntax_error_at_its_place(
    char: str,
) -> None:
    text = '[{"role": "user", "content": "ab' + char + 'cd"}]'
    errors = _errors(text)
    at = text.index(char)
    assert [(c, r) for c, _, r in errors] == [("syntax-error", TextRange(at, at + 1))]
    assert f"U+{ord(char):04X}" in errors[0][1]
    # The value is still read, as written.
    root = syntax.parse_json(text).root
    assert root is not None and root.items[0].get("content").value == "ab" + char + "cd"  # type: ignore[union-attr]


def test_control_characters_in_jsonl_and_in_keys_and_one_finding_per_string() -> None:
    text = '{"role": "user", "content": "x\x1by\x1bz"}\n{"ro\tle": "user"}\n'
    errors = _errors(text, syntax.parse_jsonl)
    assert [r for _, _, r in errors] == [
        TextRange(text.index("\x1b"), text.index("\x1b") + 1),
        TextRange(text.index("\t"), text.index("\t") + 1),
    ]
    assert "(and 1 more in this string)" in errors[0][1]


def test_escaped_control_characters_and_invalid_escapes() -> None:
    assert _errors('["a\\tb\\u0000c"]') == []
    errors = _errors('["a\\qb", "c\\\\qd"]')  # `\q` is invalid; `\\q` is an escaped backslash
    assert [(m, r) for _, m, r in errors] == [("invalid escape `\\q` in a string", TextRange(3, 5))]


# --- Item 6: lone surrogates --------------------------------------------------------------


@pytest.mark.parametrize(
    ("escape", "lone"),
    [("\\ud800", True), ("\\udc80", True), ("\\uD83D\\uDE00", False), ("\\ud83d x", True)],
)
def test_lone_surrogate_escapes_are_replaced_and_reported(escape: str, lone: bool) -> None:
    text = '["bad ' + escape + ' here"]'
    data = syntax.parse_json(text)
    assert data.root is not None
    value = data.root.items[0].value
    value.encode("utf-8")  # always encodable
    if lone:
        assert [(e.code, e.range) for e in data.errors] == [
            ("syntax-error", TextRange(text.index("\\u"), text.index("\\u") + 6))
        ]
        assert "\ufffd" in value
    else:
        assert data.errors == () and value == "bad \U0001f600 here"


def test_surrogates_in_every_output_are_valid_utf8(tmp_path: Path) -> None:
    from server.output import assembly_json

    doc = tmp_path / "s.conv.json"
    doc.write_text('[{"role": "user", "content": "\\udc80", "name": "\\ud800"}]', encoding="utf-8")
    a = analyze(doc, root=tmp_path)
    import json

    json.dumps(assembly_json(a, display_path="s"), ensure_ascii=False).encode("utf-8")
    assert sum(d.code == "syntax-error" for d in a.diagnostics) == 2


# --- Item 5: numbers; item 12: duplicate keys, tags, anchors, ids -------------------------


def test_numbers_longer_than_the_limit_are_refused_not_raised() -> None:
    n = "9" * 5000
    errors = _errors("[" + n + "]")
    assert [(c, r) for c, _, r in errors] == [("syntax-error", TextRange(1, 5001))]
    yaml_errors = _errors("a: " + n, syntax.parse_yaml)
    assert [(c, r) for c, _, r in yaml_errors] == [("syntax-error", TextRange(3, 5003))]
    assert _errors("[" + "1" * syntax.MAX_NUMBER_CHARS + "]") == []


def test_duplicate_keys_are_reported_at_the_repeated_key() -> None:
    text = '{"messages": [], "settings": {"a": 1, "a": 2}, "messages": []}'
    errors = _errors(text)
    assert [(c, r) for c, _, r in errors] == [
        ("schema-error", TextRange(38, 41)),
        ("schema-error", TextRange(47, 57)),
    ]
    errors = _errors("a: 1\nb: 2\na: 3\n", syntax.parse_yaml)
    assert [(c, r) for c, _, r in errors] == [("schema-error", TextRange(10, 11))]


def test_unknown_yaml_tags_are_warnings_and_known_ones_are_read() -> None:
    data = syntax.parse_yaml("a: !!binary aGk=\nb: !foo x\nc: !!str 12\nd: 2026-01-01\n")
    assert [(e.severity, e.range) for e in data.errors] == [
        ("warning", TextRange(3, 11)),
        ("warning", TextRange(20, 24)),
    ]
    assert data.root is not None and data.root.to_python() == {
        "a": "aGk=",
        "b": "x",
        "c": "12",
        "d": "2026-01-01",
    }


def test_a_self_referencing_anchor_is_one_finding_not_thousands() -> None:
    text = "messages: &m\n  - {role: user, content: hi}\n" + "  - *m\n" * 40
    conv = parse_conversation(text, DocFormat.YAML)
    assert len(conv.issues) <= 2, conv.issues
    assert len(conv.messages) == 1
    doc = "a: &a {b: *a, c: [*a, *a], d: {e: *a}}"
    assert len(syntax.parse_yaml(doc).errors) == 1


def test_deep_yaml_nesting_is_one_finding() -> None:
    text = "a: " + "[" * 300 + "]" * 300 + "\nb: " + "[" * 300 + "]" * 300
    assert len(syntax.parse_yaml(text).errors) == 1


def test_dollar_ids_are_the_pipelines_own() -> None:
    conv = parse_conversation(
        "messages:\n  - {id: $system, role: user, content: hi}\n", DocFormat.YAML
    )
    assert [i.code for i in conv.issues] == ["schema-error"]
    assert conv.messages[0].id == "0"


# --- Item 7: limits checked before the work ------------------------------------------


def test_token_and_message_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    one = '{"role":"user","content":"x"}'
    conv = parse_conversation("[" + ",".join([one] * (MAX_MESSAGES + 50)) + "]", DocFormat.JSON)
    assert len(conv.messages) == MAX_MESSAGES
    assert [i.code for i in conv.issues] == ["document-too-large"]
    monkeypatch.setattr(syntax, "MAX_JSON_TOKENS", 1000)
    data = syntax.parse_json("[" + ",".join(["1"] * 5000) + "]")
    assert [e.code for e in data.errors] == ["document-too-large"]  # no "unclosed" noise
    assert data.root is not None and len(data.root.items) == 500


def test_a_jsonl_file_with_lone_cr_line_ends_says_why_it_is_one_line() -> None:
    text = '{"role": "user", "content": "a"}\r{"role": "user", "content": "b"}\r'
    errors = _errors(text, syntax.parse_jsonl)
    at = text.index("\r") + 1
    assert errors == [
        (
            "syntax-error",
            "unexpected content after the end of the line; a lone carriage return (CR) "
            "does not end a JSON Lines line",
            TextRange(at, at + 1),
        )
    ]
    # CRLF ends a line; other trailing content says nothing of CRs.
    assert _errors(text.replace("\r", "\r\n"), syntax.parse_jsonl) == []
    assert [m for _, m, _ in _errors('{"a": 1} x\n', syntax.parse_jsonl)] == [
        "unexpected content after the end of the line"
    ]


def test_reading_findings_of_one_code_are_capped_per_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assembly import documents
    from assembly.diagnostics.core import MAX_ISSUES_PER_CODE

    n = MAX_ISSUES_PER_CODE + 500
    keys = ",".join(f'"k{i}": 1' for i in range(n))
    roles = ",".join('{"role": 5}' for _ in range(n))
    doc = tmp_path / "k.conv.json"
    text = f'[{{"role": "user", "content": "hi", {keys}}}, {roles}]'
    doc.write_text(text, encoding="utf-8")
    placed = 0
    real = documents._placed

    def counting(*args: Any) -> Any:
        nonlocal placed
        placed += 1
        return real(*args)

    monkeypatch.setattr(documents, "_placed", counting)
    a = analyze(doc, root=tmp_path)
    assert placed == MAX_ISSUES_PER_CODE + 1  # the keys left out are not placed
    unknown = [d for d in a.diagnostics if d.code == "unknown-key"]
    for i, d in enumerate(unknown[:-1]):  # each listed one at its own key
        at = text.index(f'"k{i}"')
        assert d.range == TextRange(at, at + len(f'"k{i}"'))
    schema = [d for d in a.diagnostics if d.code == "schema-error"]
    assert len(unknown) == len(schema) == MAX_ISSUES_PER_CODE + 1
    assert unknown[-1].message == "500 more `unknown-key` findings are not listed"
    # It stands at the first key left out.
    at = text.index(f'"k{MAX_ISSUES_PER_CODE}"')
    assert unknown[-1].range == TextRange(at, at + len(f'"k{MAX_ISSUES_PER_CODE}"'))
    assert unknown[-1].severity.value == "warning"
    assert schema[-1].message == "500 more `schema-error` findings are not listed"
    assert schema[-1].severity.value == "error"


def test_one_finding_over_the_cap_is_listed_not_summarized(tmp_path: Path) -> None:
    from assembly.diagnostics.core import MAX_ISSUES_PER_CODE

    keys = ",".join(f'"k{i}": 1' for i in range(MAX_ISSUES_PER_CODE + 1))
    doc = tmp_path / "k.conv.json"
    doc.write_text(f'[{{"role": "user", "content": "hi", {keys}}}]', encoding="utf-8")
    unknown = [d for d in analyze(doc, root=tmp_path).diagnostics if d.code == "unknown-key"]
    assert len(unknown) == MAX_ISSUES_PER_CODE + 1
    assert unknown[-1].message == f"unknown message key `k{MAX_ISSUES_PER_CODE}`: it is ignored"


def test_rule_findings_of_one_code_are_capped_after_suppression(tmp_path: Path) -> None:
    from assembly.diagnostics.core import MAX_ISSUES_PER_CODE

    # The first placeholder is suppressed: the cap counts what is reported, so the list
    # still holds MAX_ISSUES_PER_CODE, the first left out being the one after them.
    n = MAX_ISSUES_PER_CODE + 300
    lines = ["# T", "<!-- promptls: ignore[unknown-placeholder] -->", "{{x_sup}}"]
    lines += [f"Use {{{{x_{i}}}}} here." for i in range(n)]
    doc = tmp_path / "t.prompt.md"
    doc.write_text("\n".join(lines) + "\n", encoding="utf-8")
    found = [d for d in analyze_prompt(doc, root=tmp_path).diagnostics]
    unknown = [d for d in found if d.code == "unknown-placeholder"]
    assert len(unknown) == MAX_ISSUES_PER_CODE + 1
    assert all("x_sup" not in d.message for d in unknown)
    assert "`{{x_999}}`" in unknown[-2].message
    assert unknown[-1].message == "300 more `unknown-placeholder` findings are not listed"
    assert unknown[-1].fix is None and unknown[-1].severity.value == "warning"
    text = doc.read_text(encoding="utf-8")
    at = text.index(f"{{{{x_{MAX_ISSUES_PER_CODE}}}}}")
    assert unknown[-1].range.start == at


def test_a_template_past_the_checked_length_is_read_up_to_a_line_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from assembly import prompts

    monkeypatch.setattr(prompts, "MAX_PROMPT_CHECKED", 100)
    body = "".join(f"Call tool_{i} with {{{{x_{i}}}}} now.\n" for i in range(20))
    text = "---\nname: t\n---\n" + body
    t = prompts.parse_prompt(text)
    start = t.body_range.start
    (issue,) = [i for i in t.issues if i.code == "document-too-large"]
    assert issue.severity == "warning"
    # The cut is after the last line that starts within the limit, never inside a line.
    cut = issue.range.start
    assert start < cut <= start + 100 and text[cut - 1] == "\n"
    assert text[cut : cut + 10] != "" and cut + 30 > start + 100
    assert t.sentences and all(s.range.end <= cut for s in t.sentences)
    assert t.placeholders and all(p.range.end <= cut for p in t.placeholders)
    assert prompts.checked_text(t) == text[:cut]
    # The template's text is still all of it: it is what is sent and counted.
    assert t.text == text and t.body_range.end == len(text)
    # Under the limit nothing is cut and nothing is said.
    monkeypatch.setattr(prompts, "MAX_PROMPT_CHECKED", len(body))
    t = prompts.parse_prompt(text)
    assert not t.issues and prompts.checked_text(t) is text


def test_a_huge_template_is_checked_in_bounded_time_and_memory(tmp_path: Path) -> None:
    from assembly import prompts

    # Four times the checked length in one-line sentences, each with a placeholder: before
    # the limit, 41 MB of them took `lint` 180 s and 4.5 GB (here: the real limit).
    line = "Use {{var_1}} and call run_step here.\n"
    n = 4 * prompts.MAX_PROMPT_CHECKED // len(line)
    doc = tmp_path / "big.prompt.md"
    doc.write_text("# Big\n" + line * n, encoding="utf-8")
    found = analyze_prompt(doc, root=tmp_path).diagnostics
    too_large = [d for d in found if d.code == "document-too-large"]
    assert len(too_large) == 1
    assert too_large[0].message.startswith(f"template body of {len(line) * n + 6:,} characters")
    assert len([d for d in found if d.code == "unknown-placeholder"]) == 1_001


def test_a_prompt_of_thousands_of_sections_is_weighed_only_up_to_its_limit(
    tmp_path: Path,
) -> None:
    # 5,000 sections whose headings share a few words, each with two instructions: the
    # placement rule scored every instruction against every section, and `lint` took 56 s.
    words = ["search", "file", "tool", "answer", "cite", "format", "code", "plan"]
    parts = ["# Prompt", ""]
    for i in range(5_000):
        a, b = words[i % 8], words[i * 3 % 8]
        parts += [f"## {a.title()} {b} {i}", f"Always use the {a} to {b} it. Never skip {b}.", ""]
    doc = tmp_path / "big.prompt.md"
    doc.write_text("\n".join(parts), encoding="utf-8")
    found = [
        d
        for d in analyze_prompt(doc, root=tmp_path).diagnostics
        if d.code == "instruction-far-from-section"
    ]
    assert [(d.severity, d.message) for d in found] == [
        (
            "info",
            "10,000 instructions in 5,001 sections: more than this rule weighs (100,000 "
            "pairs), so where they sit is not checked",
        )
    ]


def test_a_json_lines_line_left_open_is_not_read_with_the_lines_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each line opens a value it does not close: read from the text, the C scanner took the
    # lines after it as that value, to the end of the text (100,000 such lines: 17 s).
    text = '{"role": "user", "content": \n' * 2_000 + '{"role": "user", "content": "ok"}\n'
    scanned: list[int] = []
    scan = syntax._scan_item

    def counted(s: str, p: int) -> Any:
        scanned.append(len(s) - p)
        return scan(s, p)

    monkeypatch.setattr(syntax, "_scan_item", counted)
    conv = parse_conversation(text, DocFormat.JSONL)
    assert conv.messages[-1].content == "ok"
    assert len(scanned) == 2_001 and max(scanned) <= len('{"role": "user", "content": "ok"}')


def test_yaml_with_too_many_values_is_refused_before_composing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(syntax, "MAX_YAML_NODES", 400)
    composed = []
    monkeypatch.setattr(syntax, "compose_yaml", lambda *a: composed.append(1))
    data = syntax.parse_yaml("messages:\n" + "  - {role: user, content: x}\n" * 200)
    assert [e.code for e in data.errors] == ["document-too-large"] and composed == []


def test_file_size_is_checked_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.conv.json"
    with open(big, "wb") as f:
        f.truncate(files.MAX_FILE_BYTES + 1)
    with pytest.raises(files.FileProblem) as exc:
        files.read_bytes(big)
    assert exc.value.code == "document-too-large"
    a = analyze(big, root=tmp_path)
    assert [d.code for d in a.diagnostics] == ["document-too-large"]


def test_a_file_is_read_whole_at_any_size_and_refused_past_the_limit(tmp_path: Path) -> None:
    # The first read asks for the size ``stat`` gave; what is there is read, in pieces
    # past it, and a limit is still a limit.
    path = tmp_path / "c.conv.json"
    for size in (0, 1, 4095, (1 << 22) + 3, 9 << 20):
        data = os.urandom(size)
        path.write_bytes(data)
        assert files.read_bytes(path) == data
    with pytest.raises(files.FileProblem) as exc:
        files.read_bytes(path, limit=(9 << 20) - 1)
    assert exc.value.code == "document-too-large"


# --- Items 4 and 5: only regular files; paths that make the OS raise ----------------------


def test_special_files_are_refused_with_their_kind(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    os.symlink("/dev/zero", tmp_path / "zero")
    os.symlink("nowhere", tmp_path / "dangling")
    os.symlink("loop", tmp_path / "loop")
    reasons = {}
    for name in ("fifo", "zero", "dangling", "loop"):
        with pytest.raises(files.FileProblem) as exc:
            files.read_bytes(tmp_path / name)
        reasons[name] = exc.value.reason
    assert reasons == {
        "fifo": "a FIFO (named pipe), not a regular file",
        "zero": "a character device, not a regular file",
        "dangling": "a dangling symbolic link",
        "loop": "a symbolic link loop",
    }


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        ("a\x00b.md", "the path contains a NUL byte"),
        ("a" * 300 + ".md", "a name in the path is too long"),
        ("loop.md", "a symbolic link loop"),
        ("fifo.md", "a FIFO (named pipe), not a regular file"),
    ],
)
def test_references_that_make_the_os_raise_are_findings(
    tmp_path: Path, ref: str, reason: str
) -> None:
    os.symlink("loop.md", tmp_path / "loop.md")
    os.mkfifo(tmp_path / "fifo.md")
    target, problem, code = resolve_reference(tmp_path / "d.conv.yaml", ref, tmp_path)
    assert target is None and code == "file-not-found"
    assert problem is not None and problem.endswith(reason)


def test_discovery_skips_what_it_cannot_read_and_what_leaves_the_tree(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "ok.conv.json").write_text("[]", encoding="utf-8")
    (tmp_path / "out.conv.json").write_text("[]", encoding="utf-8")
    os.mkfifo(tree / "f.conv.json")
    os.symlink(tmp_path / "out.conv.json", tree / "leak.conv.json")
    os.symlink(tree / "ok.conv.json", tree / "alias.conv.json")  # inside: the same file
    notes: list[str] = []
    found = discover([Path("tree")], LintOptions(cwd=tmp_path), notes=notes)
    assert found == [tree / "ok.conv.json"]
    assert sorted(notes) == [
        "skipped tree/f.conv.json: a FIFO (named pipe), not a regular file",
        "skipped tree/leak.conv.json: a symbolic link that leads out of the folder being linted",
    ]


def test_watch_reports_an_unexpected_exception_and_goes_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def relint(changed: object) -> None:
        raise KeyError("boom")

    relint_reporting(relint, None)
    err = capsys.readouterr().err
    assert "internal error while re-linting: KeyError: 'boom'" in err


# --- Item 3: the counting child and the alias bomb ------------------------------------


def test_counting_child_walks_each_aliased_value_once() -> None:
    lines = ['a0: &a0 ["' + "w " * 200 + '"]']
    for i in range(1, 30):  # 2**29 paths: walking them all would never end
        lines.append(f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}]")
    lines.append("self: &s [*s]")
    started = time.monotonic()
    values = list(precount._values("\n".join(lines), "yaml"))
    strings = list(precount._document_strings(values))
    assert len(strings) == 1 and time.monotonic() - started < 10


def test_parent_stops_a_child_that_does_not_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a child that never writes
        os.close(r)
        time.sleep(60)
        os._exit(0)
    os.close(w)
    monkeypatch.setattr(precount, "TIMEOUT_S", 0.2)
    pending = precount.PendingCounts(pid, r, "cl100k_base")
    started = time.monotonic()
    assert pending._receive() == (None, {})
    pending.close()
    assert time.monotonic() - started < 5
    # Killed, and reaped on a thread of its own (``PendingCounts.close``): its entry in
    # ``/proc`` goes once that thread has reaped it.
    while Path(f"/proc/{pid}").exists():
        assert time.monotonic() - started < 30, "the child was never reaped"
        time.sleep(0.01)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)


# --- Item 12: settings --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("max_input_tokens", True, "expected a number, not a boolean"),
        ("instruction_distance", False, "expected a number, not a boolean"),
        ("reserved_tokens", -1, "expected `auto` or an integer ≥ 0 (got -1)"),
        ("reserved_tokens", "x", "expected `auto` or an integer ≥ 0"),
        ("encoding", "foo_base", "unknown tiktoken encoding"),
        ("max_input_tokens", 10**40, "at most 1,000,000,000,000"),
        # One entry of a table: that entry and its value (it named the whole table).
        ("rules", {"history-truncated": "loud"}, "`rules.history-truncated`: input should be"),
        ("rules", {"history-truncated": "loud"}, "(got 'loud')"),
        ("section_topics", {"Tools": ["tool", 5]}, "`section_topics.Tools[1]`: input"),
    ],
)
def test_invalid_settings_say_what_is_wrong(key: str, value: object, words: str) -> None:
    settings, issues = resolve_settings([SettingsLayer("doc", {key: value})])
    assert [i.key for i in issues] == [key] and words in issues[0].message
    assert getattr(settings, key) == getattr(Settings(), key)


def test_an_unknown_rule_code_in_rules_is_a_warning_not_silence() -> None:
    """`rules = { histroy-truncated = "off" }` changed nothing and said nothing."""
    layer = SettingsLayer(
        "doc", {"rules": {"histroy-truncated": "off", "history-truncated": "info"}}
    )
    from assembly.host import RULE_CODES

    settings, issues = resolve_settings([layer], rule_codes=RULE_CODES)
    assert [(i.key, i.severity) for i in issues] == [("rules", "warning")]
    assert "unknown rule code `histroy-truncated`" in issues[0].message
    assert "did you mean `history-truncated`?" in issues[0].message
    assert settings.rules["history-truncated"] == "info"  # the rest of the table holds


def test_booleans_stay_booleans() -> None:
    settings, issues = resolve_settings([SettingsLayer("doc", {"vision": False})])
    assert issues == [] and settings.vision is False
    # A setting that takes a number or a boolean keeps taking both (`false`: no image cap).
    settings, issues = resolve_settings([SettingsLayer("doc", {"image_cap": False})])
    assert issues == [] and settings.image_cap is False


# --- Item 12: the empty document ------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "codes"),
    [
        ("e.conv.json", "", ["syntax-error"]),  # not JSON at all
        ("e.conv.json", "[]", []),  # an empty history: Onyx assembles the fixed parts
        ("e.conv.yaml", "", []),
        ("e.conv.yaml", "messages: []\n", []),
        ("e.conv.jsonl", "", []),
    ],
)
def test_the_empty_document_contract(
    tmp_path: Path, name: str, text: str, codes: list[str]
) -> None:
    doc = tmp_path / name
    doc.write_text(text, encoding="utf-8")
    a = analyze(doc, root=tmp_path)
    assert [d.code for d in a.diagnostics] == codes
    assert a.assembly.ok


def test_yaml_event_counting_ignores_syntax_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(syntax, "MAX_YAML_NODES", 8)
    data = syntax.parse_yaml("a: [1, 2\n" + "b: 1\n" * 10)
    # The composer reports it (with the prefix that parses), not the event count.
    assert [e.code for e in data.errors] == ["syntax-error"]


def test_jsonl_limits_hold_for_the_whole_text(monkeypatch: pytest.MonkeyPatch) -> None:
    one = '{"role":"user","content":"x"}'
    conv = parse_conversation("\n".join([one] * (MAX_MESSAGES + 50)), DocFormat.JSONL)
    assert len(conv.messages) == MAX_MESSAGES
    assert [i.code for i in conv.issues] == ["document-too-large"]
    monkeypatch.setattr(syntax, "MAX_JSON_TOKENS", 100)
    data = syntax.parse_jsonl("\n".join(["[1, 2, 3, 4]"] * 50))
    assert [e.code for e in data.errors] == ["document-too-large"]
    assert data.root is not None and len(data.root.items) == 10


def test_after_one_bad_string_the_c_scanner_is_not_used_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its exception counts the lines before the string: many bad strings in a long text
    would make the parse quadratic."""
    strict_calls = []
    real = syntax._scanstring

    def counting(text: str, at: int, strict: bool) -> object:
        if strict:
            strict_calls.append(at)
        return real(text, at, strict)

    monkeypatch.setattr(syntax, "_scanstring", counting)
    lines = ['{"content": "a\x01"}'] * 30
    data = syntax.parse_jsonl("\n".join(lines))
    assert strict_calls == [2, 13]  # the first line's key, then its bad value; none after
    assert len(data.errors) == 30 and data.root is not None and len(data.root.items) == 30


def test_a_long_yaml_message_list_is_composed_only_up_to_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(syntax, "MAX_YAML_NODES", 1000)  # counted as events from 250 lines
    monkeypatch.setattr(syntax, "MAX_TOP_ITEMS", 10)
    composed: list[int] = []
    real = syntax.compose_yaml

    def compose(text: str) -> object:
        composed.append(len(text))
        return real(text)

    monkeypatch.setattr(syntax, "compose_yaml", compose)
    item = "  - {role: user, content: x}\n"
    text = "messages:\n" + item * 300
    data = syntax.parse_yaml(text)
    assert composed == [len("messages:\n") + 11 * len(item)]  # the reader sees one too many
    assert data.errors == () and data.root is not None
    assert len(data.root.get("messages").items) == 11  # type: ignore[union-attr]
    # A flow list cannot be cut: it is composed whole, and the converter stops.
    flow = "messages: [" + ", ".join(["{role: user, content: x}"] * 150) + "]\n"
    composed.clear()
    data = syntax.parse_yaml(flow)
    assert composed == [len(flow)] and len(data.root.get("messages").items) == 11  # type: ignore[union-attr]


def test_json_findings_come_in_text_order_with_those_inside_tokens() -> None:
    """The parser reads the text once, with no token list: a finding inside a string (a
    raw control character, a lone surrogate) comes where it stands among the grammar's (so
    the incremental re-read places those of the items it reads again as any other)."""
    text = '{"a": 1 "b": "x\x01y", "c": "\\ud800", "d": }'
    data = syntax.parse_json(text)
    assert [(e.range.start, e.range.end, e.message.split(":")[0]) for e in data.errors] == [
        (7, 7, "expected `,` or `}`"),
        (15, 16, "raw control character U+0001 in a string"),
        (26, 32, "lone surrogate `\\ud800` is not a character"),
        (40, 41, "expected a value, found `}`"),
    ]
    # ``{ "a" : 1 "b" : "…" , "c" : "…" , "d" : }``: 15 tokens, and the end counts as one.
    assert data.tokens == 15 + 1
    assert data.root is not None
    assert [m.key for m in data.root.members] == ["a", "b", "c"]
    assert data.root.get("c").value == "\ufffd"  # type: ignore[union-attr]


def test_a_character_yaml_does_not_allow_is_reported_at_that_character() -> None:
    """libyaml counts a reader error's position in UTF-8 bytes: after non-ASCII text the
    finding used to land that many characters too far, with PyYAML's multi-line message."""
    for text in (
        "messages:\n  - role: ééééé # \x1b[2J\n",
        "messages:\n  - {role: user, content: \u2028\x85 x\x7f}\n",
        "a: \U0001f600\U0001f600\n\x00",
    ):
        ((code, message, rng),) = _errors(text, syntax.parse_yaml)
        bad = next(i for i, c in enumerate(text) if c in "\x1b\x7f\x00")
        assert (code, rng) == ("syntax-error", TextRange(bad, bad + 1)), (text, message)
        assert f"U+{ord(text[bad]):04X}" in message and "\n" not in message


@pytest.mark.parametrize(
    "text",
    [
        "base: &b {role: user, content: hi}\nmessages:\n  - <<: *b\n  - <<: *b\n    content: yo\n",
        "a: &a {x: 1, y: 2}\nb: &b {y: 3, z: 4}\nc:\n  <<: [*a, *b]\n  z: 5\n",
        "a: &a {x: 1}\nb: &b\n  <<: *a\n  y: 2\nc: {<<: *b, x: 0}\n",
    ],
)
def test_yaml_merge_keys_are_read_as_pyyaml_reads_them(text: str) -> None:
    """A `<<: *base` merge key (YAML 1.1, which PyYAML's loaders merge) was a mapping key
    like any other: the message it completed had "no role" and `<<` was an unknown key."""
    import yaml

    data = syntax.parse_yaml(text)
    assert data.errors == ()
    assert data.root is not None and data.root.to_python() == yaml.safe_load(text)


def test_a_merge_key_of_something_else_is_one_finding_at_it() -> None:
    text = "a: &a {role: user}\nmessages:\n  - <<: [*a, 7]\n    content: hi\n"
    ((code, message, rng),) = _errors(text, syntax.parse_yaml)
    assert (code, text[rng.start : rng.end]) == ("syntax-error", "7")
    assert "merge key" in message
    conv = parse_conversation(text, DocFormat.YAML)
    assert [(m.role.value, m.content) for m in conv.messages] == [("user", "hi")]


@pytest.mark.parametrize(
    ("text", "at", "message"),
    [
        ("messages: []\n---\nmessages: [1]\n", "---", "a second document"),
        ("a: &x 1\nb: &x 2\nmessages: []\n", "&x 2", "already defined (line 1)"),
    ],
)
def test_yaml_errors_libyaml_gives_in_two_halves_are_said_whole(
    text: str, at: str, message: str
) -> None:
    """libyaml's composer splits these messages in a context and a problem: the finding
    said only the second half ("but found another document", "second occurrence")."""
    ((code, said, rng),) = _errors(text, syntax.parse_yaml)
    assert (code, rng.start) == ("syntax-error", text.index(at))
    assert message in said


def test_a_template_s_front_matter_tools_and_settings_are_checked_on_it(tmp_path: Path) -> None:
    """`tools: 5` or `settings: 5` in a template's front matter said nothing when the
    template was linted (only a conversation using it said the tools')."""
    from server.workspace import analyze_prompt

    text = "---\nsettings: 5\ntools: [web_search, 7]\n---\n# Tools\nUse web_search.\n"
    doc = tmp_path / "a.prompt.md"
    doc.write_text(text, encoding="utf-8")
    a = analyze_prompt(doc, root=tmp_path)
    found = sorted((d.code, text[d.range.start : d.range.end]) for d in a.diagnostics)
    assert found == [("schema-error", "5"), ("schema-error", "7")]
    messages = sorted(d.message for d in a.diagnostics)
    assert messages[0].startswith("a tool must be") and "`settings` must be" in messages[1]


DEEP = "[" * 5000 + "]" * 5000  # a JSON text ``json.loads`` cannot read: RecursionError
DEEP_OBJECT = '{"results":' * 3000 + "1" + "}" * 3000


def _deep_documents() -> dict[str, object]:
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": DEEP}}
    chat = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
        {"role": "user", "content": "hi"},
    ]
    responses = {
        "input": [
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": DEEP},
            {"type": "function_call_output", "call_id": "c1", "output": "x"},
            {"role": "user", "content": "hi"},
        ]
    }

    def cycle(k: int, tool: str, output: str) -> list[dict[str, object]]:
        fn = {"name": tool, "arguments": "{}"}
        return [
            {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{k}", "function": fn}]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": output},
        ]

    outputs = {  # tool outputs Onyx's rules read as JSON
        "tools": ["generate_image", "web_search", "run_python", "open_url"],
        "messages": [
            {"role": "user", "content": "draw"},
            *cycle(1, "generate_image", DEEP),
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "search"},
            *cycle(2, "web_search", DEEP_OBJECT),
            *cycle(3, "run_python", DEEP_OBJECT),
        ],
    }
    return {"chat": chat, "responses": responses, "outputs": outputs}


@pytest.mark.parametrize("name", ["chat", "responses", "outputs"])
def test_json_nested_too_deep_inside_strings_is_not_an_internal_error(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Tool call arguments and tool outputs are JSON inside a string, read with
    ``json.loads``: nested 5,000 deep they raised RecursionError, and the whole document
    was one internal error. Such arguments are not a JSON object (a warning at them); such
    an output is text."""
    import json

    from server.cli.main import main

    path = tmp_path / f"{name}.conv.json"
    path.write_text(json.dumps(_deep_documents()[name]), encoding="utf-8")
    capsys.readouterr()
    main(["lint", "--format", "json", str(path)])
    codes = [f["code"] for f in json.loads(capsys.readouterr().out)]
    assert "internal-error" not in codes
    assert codes == ([] if name == "outputs" else ["schema-warning"])
    for provider in ("openai", "anthropic"):
        main(["assemble", "--format", "json", "--provider", provider, str(path)])
        out = json.loads(capsys.readouterr().out)
        assert "internal-error" not in [d["code"] for d in out["diagnostics"]], provider
        assert out["messages"], provider
