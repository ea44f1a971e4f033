"""``assembly.host``: the edit algebra, and an ``AnalysisHost`` going on from its previous
analysis giving exactly what a fresh analysis gives, with the edit told or found."""

from __future__ import annotations

import dataclasses
import operator
import random
from pathlib import Path, PurePath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assembly.host import AnalysisHost, Edit, FileText, Inputs, LoadedTokenizer
from assembly.model import Conversation
from assembly.rope import Rope
from assembly.tokens import Tokenizer
from tests.support.engine import DEFAULT_TODAY, DiskSources, analyze, loaded

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ALPHABET = 'ab "{},:\\\n'


def _apply(text: str, edit: tuple[int, int, str]) -> str:
    start, end, new = edit
    return text[:start] + new + text[end:]


@st.composite
def _edits(draw: st.DrawFn) -> tuple[str, list[tuple[int, int, str]]]:
    text = draw(st.text(alphabet="abcxy\n", max_size=40))
    edits = []
    current = text
    for _ in range(draw(st.integers(1, 6))):
        start = draw(st.integers(0, len(current)))
        end = draw(st.integers(start, len(current)))
        new = draw(st.text(alphabet="abz", max_size=5))
        edits.append((start, end, new))
        current = _apply(current, (start, end, new))
    return text, edits


@given(_edits())
def test_edits_compose_into_one_that_covers_them_all(case: tuple[str, list]) -> None:
    """``then`` gives an edit of the first text into the last: outside it the two agree."""
    text, steps = case
    total = Edit.none(len(text))
    current = text
    for start, end, new in steps:
        total = total.then(Edit.replace(start, end, new))
        current = _apply(current, (start, end, new))
    assert total.fits(len(text), len(current))
    assert text[: total.start] == current[: total.start]
    assert text[total.old_end :] == current[total.new_end :]
    # Nothing before the first step that changes something is in the composition (it may
    # start later: where later steps undo an earlier one, as a text typed and deleted
    # before another deletion); when the steps undo each other, an empty edit anywhere is.
    changing = [start for start, end, new in steps if end > start or new]
    empty = total.start == total.old_end == total.new_end
    if changing and not (empty and text == current):
        assert total.start >= min(changing)
    else:
        assert total.start == total.old_end == total.new_end  # no change


def test_no_change_is_the_identity_of_then() -> None:
    keystroke = Edit.replace(40, 40, "x")
    assert Edit.none(100).then(keystroke) == keystroke
    assert keystroke.then(Edit.none(101)) == keystroke
    assert Edit.none(100).then(Edit.none(100)) == Edit.none(100)


def test_an_edit_that_cannot_be_the_change_does_not_fit() -> None:
    assert Edit(2, 4, 5).fits(10, 11)
    assert not Edit(2, 4, 5).fits(10, 12)  # the lengths say another edit
    assert not Edit(2, 11, 12).fits(10, 11)  # beyond the old text
    assert not Edit(3, 2, 3).fits(10, 11)


def _doc() -> tuple[Path, str]:
    path = EXAMPLES / "support-agent.conv.json"
    return path, path.read_text(encoding="utf-8")


def _typing(text: str, rnd: random.Random) -> tuple[str, Edit]:
    """A keystroke inside some message's string (typed or deleted)."""
    starts = [i for i in range(len(text)) if text.startswith('"content": "', i)]
    at = rnd.choice(starts) + len('"content": "') + rnd.randrange(0, 5)
    if rnd.random() < 0.3 and text[at] not in '"\\':
        return text[:at] + text[at + 1 :], Edit(at, at + 1, at)
    ch = rnd.choice("xyz ")
    return text[:at] + ch + text[at:], Edit.replace(at, at, ch)


@pytest.mark.parametrize("told", [True, False], ids=["edit told", "edit found"])
def test_apply_change_equals_a_fresh_analysis(told: bool) -> None:
    path, text = _doc()
    rnd = random.Random(13)
    host = AnalysisHost()
    first = analyze(path, text=Rope.from_str(text), root=EXAMPLES, host=host)
    assert host.previous is first and first.parsed is not None
    rope = Rope.from_str(text)
    kept = 0
    for _ in range(12):
        text, edit = _typing(text, rnd)
        rope = rope.edit(edit.start, edit.old_end, text[edit.start : edit.new_end])
        before = host.previous
        got = analyze(path, text=rope, root=EXAMPLES, host=host, edit=edit if told else None)
        want = analyze(path, text=text, root=EXAMPLES)
        assert [(d, d.range.start, d.range.end) for d in got.diagnostics] == [
            (d, d.range.start, d.range.end) for d in want.diagnostics
        ]
        assert got.assembly == want.assembly
        assert host.previous is got
        assert before is not None and got.parsed is not None and before.parsed is not None
        kept += got.parsed.message_data[0] is before.parsed.message_data[0]
    assert kept >= 10  # re-read one message, not the document


def test_an_edit_that_does_not_fit_is_found_instead() -> None:
    path, text = _doc()
    host = AnalysisHost()
    analyze(path, text=text, root=EXAMPLES, host=host)
    at = text.index('"content": "') + len('"content": "')
    new_text = text[:at] + "x" + text[at:]
    wrong = Edit(0, 0, 5)  # says five characters were inserted at the start
    got = analyze(path, text=new_text, root=EXAMPLES, host=host, edit=wrong)
    assert got.diagnostics == analyze(path, text=new_text, root=EXAMPLES).diagnostics


class _Failing(DiskSources):
    """Sources whose tokenizer cannot be loaded (a bug, for the host's sake)."""

    def tokenizer(self, encoding: str | None, model: str | None) -> LoadedTokenizer:
        raise RuntimeError("no tokenizer")


def test_a_failed_analysis_leaves_the_host_empty() -> None:
    path, text = _doc()
    host = AnalysisHost()
    inputs = Inputs(path=path, today=DEFAULT_TODAY)
    host.analyze(text, inputs, DiskSources(path))
    assert host.previous is not None
    with pytest.raises(RuntimeError):
        host.apply_change(
            text + " ", Edit.replace(len(text), len(text), " "), inputs, _Failing(path)
        )
    assert host.previous is None  # the next analysis starts afresh, not from a half-update
    again = host.apply_change(text, None, inputs, DiskSources(path))
    assert again.diagnostics == host.analyze(text, inputs, DiskSources(path)).diagnostics


class _InMemory:
    """Sources with no file system at all: the host asks for nothing else."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.counted: list[str] = []

    def read(self, ref: str) -> FileText:
        if ref not in self.files:
            return FileText(None, code="file-not-found", problem=f"no {ref}")
        return FileText(PurePath("/mem") / ref, self.files[ref])

    def tokenizer(self, encoding: str | None, model: str | None) -> LoadedTokenizer:
        return loaded(encoding, model=model)

    def counting(self, conversation: Conversation, tokenizer: Tokenizer) -> None:
        self.counted.append(tokenizer.encoding)


def test_the_files_a_document_names_come_from_its_sources() -> None:
    text = (
        "system_prompt: agent.prompt.md\n"
        "messages:\n"
        "  - {id: u1, role: user, content: hi}\n"
        "project_files:\n"
        "  - {file_id: f1, path: notes.md}\n"
        "  - {file_id: f2, path: gone.md}\n"
    )
    sources = _InMemory({"agent.prompt.md": "# Role\nYou help.\n", "notes.md": "notes"})
    inputs = Inputs(path=PurePath("/mem/doc.conv.yaml"), today=DEFAULT_TODAY)
    a = AnalysisHost().analyze(text, inputs, sources)
    assert "You help." in a.assembly.system_text
    assert a.dependencies == (PurePath("/mem/agent.prompt.md"), PurePath("/mem/notes.md"))
    assert [
        (d.code, text[d.range.start : d.range.end])
        for d in a.diagnostics
        if d.code == "file-not-found"
    ] == [("file-not-found", "gone.md")]
    assert sources.counted  # the IO half was told what to count with


def _splice(text: str, rnd: random.Random) -> tuple[str, Edit]:
    """An edit that makes messages come or go: a deletion from inside one message's string
    into the next one's (two messages become one), or a message pasted before another."""
    key = '"content": "'
    starts = [i for i in range(len(text)) if text.startswith(key, i)]
    k = rnd.randrange(len(starts) - 1)
    if rnd.random() < 0.6:
        a = starts[k] + len(key) + rnd.randrange(0, 3)
        b = starts[k + 1] + len(key) + rnd.randrange(0, 3)
        return text[:a] + text[b:], Edit(a, b, a)
    at = text.rindex("\n    {", 0, starts[k + 1]) + 1
    new = '    {"role": "user", "content": "pasted (promptls: ignore[empty-message])"},\n'
    return text[:at] + new + text[at:], Edit.replace(at, at, new)


def test_splices_with_the_edit_told_equal_a_fresh_analysis() -> None:
    """Messages that come and go, the edit told (the rule engine counts the suppression
    comments in the edit's span): what a fresh analysis finds, and the comments counted."""
    from assembly.diagnostics import COMMENT_MARK

    path, text = _doc()
    at = text.index('"content": "') + len('"content": "')
    text = text[:at] + "(promptls: ignore[empty-message]) " + text[at:]
    rnd = random.Random(29)
    host = AnalysisHost()
    rope = Rope.from_str(text)
    analyze(path, text=rope, root=EXAMPLES, host=host)
    for _ in range(10):
        text, edit = _splice(text, rnd)
        rope = rope.edit(edit.start, edit.old_end, text[edit.start : edit.new_end])
        got = analyze(path, text=rope, root=EXAMPLES, host=host, edit=edit)
        want = analyze(path, text=text, root=EXAMPLES)
        assert [(d, d.range.start, d.range.end) for d in got.diagnostics] == [
            (d, d.range.start, d.range.end) for d in want.diagnostics
        ]
        assert got.assembly == want.assembly
        assert host.rule_cache.count(rope, COMMENT_MARK) == text.count(COMMENT_MARK)


def _dataset_record(k: int, content: str = "") -> str:
    import json

    messages = [
        {"role": "user", "content": content or f"question {k}"},
        {"role": "tool", "tool_call_id": f"call_{k}", "content": "orphan"},
    ]
    return json.dumps({"messages": messages})


def test_a_suppression_comment_in_a_dataset_holds_for_its_own_record(tmp_path: Path) -> None:
    """Each record of a dataset is its own conversation, read as the JSON document its
    line's text is: a suppression comment in a record silences its own findings, not
    those of the record on the next line (before records were analysed alone, the line
    below a comment was silenced too)."""
    comment = "promptls: ignore[orphaned-tool-response]"
    text = "\n".join(_dataset_record(k, comment if k == 3 else "") for k in range(1, 9)) + "\n"
    got = analyze(tmp_path / "train.conv.jsonl", text=text)
    orphans = [d.range.start for d in got.diagnostics if d.code == "orphaned-tool-response"]
    lines = [text.count("\n", 0, start) + 1 for start in orphans]
    assert lines == [1, 2, 4, 5, 6, 7, 8]
    assert all(text[s : s + 6] == '"tool"' or text[s] == "{" for s in orphans), orphans


def test_an_edit_of_a_dataset_analyses_only_the_records_it_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dataset's record the edit did not touch keeps its analysis (the same object),
    placed again when its line moved; each version's analysis stays true of its own text
    (its records' ranges are relative to their lines), and equals a fresh analysis."""
    import assembly.host as host_module

    path = tmp_path / "train.conv.jsonl"
    analysed: list[str] = []
    conversation = host_module._conversation

    def counting(conv: Conversation, text: str, *args: object, **kw: object) -> object:
        analysed.append(text)
        return conversation(conv, text, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(host_module, "_conversation", counting)
    text = "\n".join(_dataset_record(k) for k in range(1, 9)) + "\n"
    host = AnalysisHost()
    first = analyze(path, text=Rope.from_str(text), host=host)
    assert len(analysed) == 8 and len(first.records) == 8
    versions = [(first, text)]
    edits = [
        (text.index("question 5") + 3, 0, "X"),  # typed inside record 5
        (0, 0, _dataset_record(0) + "\n"),  # a record added above all: every line moves
        (len(text), 0, _dataset_record(9)),  # and one at the end
    ]
    for at, n, new in edits:
        before = len(analysed)
        old = versions[-1][1]
        if at == len(text):
            at = len(old)
        cur = old[:at] + new + old[at + n :]
        got = analyze(
            path, text=Rope.from_str(cur), host=host, edit=Edit(at, at + n, at + len(new))
        )
        # The record typed in, or the one added (and the line its insertion ends at).
        assert 1 <= len(analysed) - before <= 2, analysed[before:]
        fresh = analyze(path, text=cur)
        assert [(d.code, d.range, d.message) for d in got.diagnostics] == [
            (d.code, d.range, d.message) for d in fresh.diagnostics
        ]
        versions.append((got, cur))
    for a, own in versions:  # every version's records still point at their own text
        assert [a.at(r.base + 1) for r in a.records] == list(a.records)
        for r in a.records:
            assert own[r.base : r.base + len(r.text)] == r.text
            for d in r.diagnostics:
                assert (
                    r.text[d.range.start : d.range.end]
                    == own[r.base + d.range.start : r.base + d.range.end]
                )
    r = first.records[3]  # (placed by hand: every field, as ``replace`` would)
    assert r.placed_at(r.base + 9) == dataclasses.replace(r, base=r.base + 9)
    moved = versions[2][0].records[1:]  # after the record added above all
    assert all(
        m.conversation is f.conversation
        for m, f in zip(moved[1:4], first.records[1:4], strict=True)
    )
    assert all(m.base > f.base for m, f in zip(moved, first.records, strict=True))


def test_a_datasets_record_is_analysed_again_when_a_file_it_reads_changes(
    tmp_path: Path,
) -> None:
    """A record that points to a template keeps its analysis only while the template reads
    the same; the dataset depends on the files of every record, not only the first's."""
    import json

    template = tmp_path / "sys.prompt.md"
    template.write_text("Be brief.\n", encoding="utf-8")
    path = tmp_path / "train.conv.jsonl"
    plain = {"messages": [{"role": "user", "content": "hi"}]}
    templated = {"system_prompt": "sys.prompt.md", **plain}
    text = json.dumps(plain) + "\n" + json.dumps(templated) + "\n"
    host = AnalysisHost()
    first = analyze(path, text=text, host=host)
    assert template.resolve() in {Path(p).resolve() for p in first.dependencies}

    def system_tokens(a: object) -> int:
        return next(s.tokens for s in a.assembly.segments if s.name == "system")  # type: ignore[attr-defined]

    template.write_text("Be brief. " * 50 + "\n", encoding="utf-8")
    again = analyze(path, text=text, host=host, edit=Edit.none(len(text)))
    assert again.records[0] is first.records[0]  # (it reads no file)
    assert system_tokens(again.records[1]) > system_tokens(first.records[1]) + 50
    assert system_tokens(again.records[1]) == system_tokens(analyze(path, text=text).records[1])


def test_a_document_that_becomes_a_dataset_and_back_equals_a_fresh_analysis(
    tmp_path: Path,
) -> None:
    """One message per line, then (the first line edited) one conversation per line, then
    back: the host goes on across the change of kind, each version as a fresh analysis."""
    import json

    path = tmp_path / "log.conv.jsonl"
    lines = [
        json.dumps({"role": "user", "content": "hi"}),
        json.dumps({"role": "tool", "tool_call_id": "c1", "content": "orphan"}),
        json.dumps({"messages": [{"role": "tool", "tool_call_id": "c2", "content": "x"}]}),
    ]
    text = "\n".join(lines) + "\n"
    record = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    host = AnalysisHost()
    analyze(path, text=text, host=host)
    kinds = []
    for old, new in ((lines[0], record), (record, lines[0])):
        at = text.index(old)
        text = text[:at] + new + text[at + len(old) :]
        got = analyze(path, text=text, host=host, edit=Edit(at, at + len(old), at + len(new)))
        fresh = analyze(path, text=text)
        kinds.append(len(got.records))
        assert [(d.code, d.range, d.message) for d in got.diagnostics] == [
            (d.code, d.range, d.message) for d in fresh.diagnostics
        ]
        assert got.assembly == fresh.assembly
    assert kinds == [2, 0]  # (the second line is no record: the dataset's finding)


def _uploads_log(n: int) -> str:
    """A conversation of ``n`` messages, every fourth one with an uploaded file, and a
    budget small enough that the oldest messages are dropped."""
    import json

    messages = []
    for k in range(n):
        m: dict[str, object] = {
            "id": f"m{k}",
            "role": "user" if k % 2 == 0 else "assistant",
            "content": f"message {k} " + "words " * (k % 7),
        }
        if k % 4 == 0:
            m["files"] = [{"filename": f"f{k}.txt", "content": f"file {k} " + "text " * 9}]
        messages.append(m)
    doc = {"settings": {"max_input_tokens": 2000}, "messages": messages}
    return json.dumps(doc, indent=2)


def test_the_edit_that_brings_back_a_cut_list_reads_only_what_it_touches(tmp_path: Path) -> None:
    """A deletion from a message's text into the text of a file uploaded with it ends the
    message list there (the rest of the document is content after its end); the edits
    after it, their undo last, are read from the version before the cut: every version
    equals a fresh analysis, and the messages that come back are the objects they were."""
    path = tmp_path / "cut.conv.json"
    text = _uploads_log(
        2400
    )  # (past the cut, more than the host reads again from the last version)
    host = AnalysisHost()
    rope = Rope.from_str(text)
    first = analyze(path, text=rope, host=host)
    assert first.parsed is not None
    f = text.index('"files": [', len(text) // 8)
    a = text.rindex('"content": "', 0, f) + len('"content": "') + 2
    b = text.index('"content": "', f) + len('"content": "') + 2
    c = text.index('"content": "', len(text) // 10) + len('"content": "')  # an earlier message
    steps = [
        (a, b, ""),  # the cut
        (c, c, "x"),  # typing before it
        (c + 1, c + 1, "y"),
        (a + 2, a + 2, "z"),  # and in the message it merged
        (a + 2, a + 3, ""),
        (c, c + 2, ""),
        (a, a, text[a:b]),  # the undo
    ]
    counts = []
    for start, end, new in steps:
        text = text[:start] + new + text[end:]
        rope = rope.edit(start, end, new)
        got = analyze(path, text=rope, host=host, edit=Edit.replace(start, end, new))
        want = analyze(path, text=text)
        assert [(d, d.range.start, d.range.end) for d in got.diagnostics] == [
            (d, d.range.start, d.range.end) for d in want.diagnostics
        ]
        assert got.assembly == want.assembly
        assert got.parsed is not None
        counts.append(len(got.parsed.message_data))
    assert counts[0] < 400 and counts[:-1] == [counts[0]] * 6 and counts[-1] == 2400
    assert got.text == first.text
    back = got.parsed.message_data
    kept = sum(m is o for m, o in zip(back, first.parsed.message_data, strict=True))
    assert kept >= 2398  # all but the message typed in and the one cut and put back
    # The version with the list cut is kept in turn: the redo gives it back.
    before = host.previous
    assert host.aside is not None and before is not None
    cut_version = host.aside.conv
    rope = rope.edit(a, b, "")
    redo = analyze(path, text=rope, host=host, edit=Edit.replace(a, b, ""))
    assert redo.parsed is cut_version


def test_messages_deleted_and_pasted_back_are_the_objects_they_were(tmp_path: Path) -> None:
    """Many whole messages deleted and pasted back; a deletion from one message's text into
    the next one's, undone, redone and undone; a long paste into a cut list taken out again
    before its undo: the version that has the messages again is the one before the
    deletion (the same text), its messages the objects they were; every version equals a
    fresh analysis."""
    path = tmp_path / "cut.conv.json"
    text = _uploads_log(2400)
    host = AnalysisHost()
    rope = Rope.from_str(text)
    first = analyze(path, text=rope, host=host)
    assert first.parsed is not None
    m1 = text.index("\n    {", len(text) // 4) + 1
    m2 = text.index("\n    {", len(text) // 2) + 1
    f = text.index('"files": [', len(text) // 8)
    a = text.rindex('"content": "', 0, f) + len('"content": "') + 2
    b = text.index('"content": "', f) + len('"content": "') + 2
    big = "p" * 70_000
    q1 = text.index('"content": "', len(text) // 3) + len('"content": "') + 2
    q2 = text.index('"content": "', q1) + len('"content": "') + 2  # the next message's
    for steps in (
        [(m1, m2, ""), (m1, m1, text[m1:m2])],
        [(q1, q2, ""), (q1, q1, text[q1:q2]), (q1, q2, ""), (q1, q1, text[q1:q2])],
        [(a, b, ""), (a, a, big), (a, a + len(big), ""), (a, a, text[a:b])],
    ):
        for start, end, new in steps:
            text = text[:start] + new + text[end:]
            rope = rope.edit(start, end, new)
            got = analyze(path, text=rope, host=host, edit=Edit.replace(start, end, new))
            want = analyze(path, text=text)
            assert got.diagnostics == want.diagnostics and got.assembly == want.assembly
        assert got.parsed is not None
        back, before = got.parsed.message_data, first.parsed.message_data
        assert len(back) == len(before) and all(map(operator.is_, back, before))
