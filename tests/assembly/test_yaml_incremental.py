"""YAML re-read one piece at a time (``assembly.formats.yamldoc``) equals a whole read.

The property: after any edit, ``reparse_conversation`` on a YAML document either declines
(None: the caller reads it all) or gives exactly what ``parse_conversation`` of the new text
gives: every field, every range of the model and of the source tree, the issues, the parse's
value count. Checked over seeded random chains of edits of many kinds (typing, deleting
across items, pasting items, changing roles and ids, typing YAML's own syntax: quotes,
block scalars, anchors, tags, document markers, tabs, CRLF) on real documents (GitHub's
``gh-models`` prompt files, ``tests/data/yaml-real``), the project's YAML test documents,
real logs written as YAML in several styles, a generated conversation and hostile ones.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from assembly.formats.yamldoc import parse_yaml_conversation, reparse_yaml
from assembly.host import AnalysisHost, Edit
from assembly.incremental import reparse_conversation
from assembly.model import Conversation, DocFormat
from assembly.reading import parse_conversation
from assembly.rope import Rope
from assembly.text import RelRange
from tests.assembly.test_incremental import normalise
from tests.bench.gen_conversation import conversation as generated
from tests.support.engine import analyze
from tests.support.random_edits import LINE_KINDS, break_edit, line_edit, line_starts

DATA = Path(__file__).resolve().parents[1] / "data"
YAML = DocFormat.YAML


# ---------------------------------------------------------------------------------------
# Documents


class _Indented(yaml.SafeDumper):
    """Block sequences indented under their key (``messages:\\n  - role: …``)."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


class _Blocks(yaml.SafeDumper):
    """Multi-line strings written as ``|`` block scalars."""


def _block_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value and not value.endswith((" ", "\t")) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Blocks.add_representer(str, _block_str)


def _dump(doc: Any, style: str) -> str:
    common: dict[str, Any] = {"allow_unicode": True, "sort_keys": False}
    if style == "indented":
        return yaml.dump(doc, Dumper=_Indented, width=80, **common)
    if style == "blocks":
        return yaml.dump(doc, Dumper=_Blocks, width=10**9, **common)
    if style == "flowish":
        return yaml.safe_dump(doc, default_flow_style=None, width=60, **common)
    return yaml.safe_dump(doc, width=10**9, **common)


def _real_logs() -> list[tuple[str, str]]:
    """Real OpenAI-format logs (tests/data/real-logs) written as YAML, in four styles."""
    res = []
    files = sorted((DATA / "real-logs" / "openai").glob("*.conv.json"))
    for k, path in enumerate(files[::6]):
        doc = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and "messages" not in doc:
            continue
        style = ("compact", "indented", "blocks", "flowish")[k % 4]
        res.append((f"{path.name}:{style}", _dump(doc, style)))
    return res


_HOSTILE = [
    # Anchors and aliases: never re-read in pieces (an alias repeats another item's node).
    "messages:\n- &m1\n  role: user\n  content: hi\n- *m1\n- role: assistant\n  content: ok\n",
    # Tags, comments, flow items, a block scalar kept with its trailing lines.
    "# head\nsettings: {model: gpt-4o}\nmessages:  # the list\n- {role: user, content: a}\n"
    "# between\n- role: assistant\n  content: !!str 12\n- role: user\n  content: |+\n"
    "    kept\n\n\n- role: user\n  content: >-\n    folded\n    text\nreminder: r\n",
    # A root sequence, CRLF line ends, a quoted scalar over several lines.
    '- role: user\r\n  content: "one\r\n    two"\r\n- role: assistant\r\n  content: x\r\n',
    # Items whose content starts on the line after the dash; an empty item.
    "messages:\n-\n  role: user\n  content: a\n- role: user\n  content: b\n-\n",
    # Two documents; a directive; tabs.
    "messages:\n- role: user\n  content: a\n---\nmessages: []\n",
    "%YAML 1.1\n---\nmessages:\n- role: user\n  content: a\n",
    "messages:\n- role: user\n  content:\ta\t\n- role:\tuser\n  content: b\n",
]


def documents() -> list[tuple[str, str]]:
    docs = [
        (p.name, p.read_text(encoding="utf-8")) for p in sorted((DATA / "yaml-real").glob("*.yml"))
    ]
    project = sorted((DATA / "assembly").glob("*.conv.yaml"))
    docs += [(p.name, p.read_text(encoding="utf-8")) for p in project[::5]]
    docs += _real_logs()
    small = generated(24, 12_000, 11)
    docs += [(f"generated:{s}", _dump(small, s)) for s in ("compact", "indented", "blocks")]
    docs.append(("generated:crlf", _dump(small, "indented").replace("\n", "\r\n")))
    docs += [(f"hostile:{i}", t) for i, t in enumerate(_HOSTILE)]
    return docs


# ---------------------------------------------------------------------------------------
# Edits

_TYPED = [
    *"ab Z:-#'\"|>&*!\t\n\\{}[],",
    "é",
    "😀",
    "\r\n",
    "\n- ",
    "\n  ",
    ": ",
    "- role: user\n  content: pasted\n",
    "&a ",
    "*a",
    "!!str ",
    "!custom ",
    "---\n",
    "...\n",
    "%TAG ! x\n",
    "\u2028",
    "\x85",
    "\x01",
    "\ufeff",
]


def random_edit(rnd: random.Random, text: str) -> tuple[int, int, str]:
    """One edit ``(start, end, new)`` of a kind an editor makes."""
    n = len(text)
    lines = line_starts(text)
    kind = rnd.randrange(9)
    if kind == 0:  # type a character or a piece of YAML anywhere
        at = rnd.randint(0, n)
        return at, at, rnd.choice(_TYPED)
    if kind == 1:  # type inside a line's text (most keystrokes)
        at = rnd.randint(0, n)
        while 0 < at < n and text[at - 1] in "\n -":
            at += 1
        at = min(at, n)
        return at, at, rnd.choice("abcxyz é")
    if kind in LINE_KINDS:  # delete a span, delete across lines, paste or cut lines
        return line_edit(rnd, text, lines, kind, across=200)
    if kind == 6:  # change a role
        found = [i for i in range(n) if text.startswith("role: ", i)]
        if found:
            at = rnd.choice(found) + 6
            end = text.find("\n", at)
            return at, n if end < 0 else end, rnd.choice(["user", "system", "tool", "x"])
    if kind == 7:  # type at the end
        at = len(text.rstrip("\n"))
        return at, at, rnd.choice(["\n- role: user\n  content: new", "\n-", "x", "\n  id: z"])
    at = rnd.choice(lines)  # edit a line's indentation
    return (at, at, " ") if rnd.random() < 0.6 else (at, min(n, at + 1), "")


def check(prev: Conversation, text: str, new_text: str, edit: tuple[int, int, str]) -> Any:
    """Re-read ``new_text`` from ``prev``; assert it equals a whole read. The next prev."""
    start, end, new = edit
    res = reparse_conversation(prev, text, new_text, YAML, span=(start, end, start + len(new)))
    full = parse_conversation(new_text, YAML)
    if res is not None:
        assert normalise(res) == normalise(full), (text, edit)
        assert res.syntax == full.syntax, (text, edit)
    return res, full


def test_random_edit_chains_equal_whole_reads() -> None:
    docs = documents()
    assert len(docs) >= 40
    rnd = random.Random(20261201)
    counts: Counter[str] = Counter()
    for _name, pristine in docs:
        for _ in range(12):  # short chains, each from the pristine document
            text = pristine
            conv = parse_conversation(text, YAML)
            for _k in range(6):
                edit = random_edit(rnd, text)
                start, end, new = edit
                new_text = text[:start] + new + text[end:]
                if new_text == text:
                    continue
                res, full = check(conv, text, new_text, edit)
                clean = not (conv.syntax is None or conv.syntax[0])
                half_typed = "yaml-base" in conv._views  # broken, re-read from a whole parse
                counts["edits on a clean parse" if clean else "edits on a broken one"] += 1
                if res is not None:
                    counts["re-read in pieces"] += 1
                    counts["of which half typed"] += bool(res.issues and "yaml-base" in res._views)
                    # A text read whole with findings is read whole until it has none.
                    assert clean or half_typed
                conv, text = (res if res is not None else full), new_text
    # The property is not checked on declines alone.
    assert counts["re-read in pieces"] >= counts["edits on a clean parse"] // 2, counts
    assert counts["of which half typed"] >= 50, counts


def test_typing_in_real_documents_is_read_in_pieces() -> None:
    """Words typed in the middle of the real prompt files' last message: each keystroke is
    re-read in pieces (the files have no alias, tag or second document); YAML's own
    characters typed there are checked too (they may break the syntax: then read whole)."""
    for path in sorted((DATA / "yaml-real").glob("*.yml")):
        text = path.read_text(encoding="utf-8")
        conv = parse_conversation(text, YAML)
        assert conv.message_data, path.name
        body = conv.messages[-1].content_range
        assert body is not None
        at = next(i for i in range(body.start + 1, body.end) if text[i - 1 : i + 1].isalpha())
        typed = 0
        for ch in "hello world, - # ' \" :x":
            new_text = text[:at] + ch + text[at:]
            res, _ = check(conv, text, new_text, (at, at, ch))
            if (ch.isalpha() or ch == " ") and conv.syntax is not None and not conv.syntax[0]:
                assert res is not None, (path.name, ch)
            typed += res is not None
            conv, text, at = (res or parse_conversation(new_text, YAML)), new_text, at + 1
        assert typed >= 12, path.name


def _bench_like() -> str:
    return _dump(generated(40, 30_000, 5), "compact")


def _chain(text: str, edits: list[tuple[int, int, str]]) -> list[Conversation]:
    """Each edit re-read in pieces from the previous result and equal to a whole read."""
    conv = parse_conversation(text, YAML)
    res = [conv]
    for edit in edits:
        start, end, new = edit
        new_text = text[:start] + new + text[end:]
        nxt, _ = check(conv, text, new_text, edit)
        assert nxt is not None, edit
        conv, text = nxt, new_text
        res.append(conv)
    return res


def _bench_edits(text: str) -> dict[str, list[tuple[int, int, str]]]:
    """The benchmark's edit kinds in the middle of ``text``, each a chain of edits: typing
    in a message, a message typed at the end, two items merged and split again, an item
    pasted and deleted, a role, a tool-call id and the settings' model changed and back."""
    mid = len(text) // 2
    content = text.index("content: ", mid) + len("content: ") + 3
    role = text.index("role: user", mid) + len("role: ")
    call_id = text.index("tool_call_id: ", mid) + len("tool_call_id: ") + 2
    model = text.index("model: gpt-4o") + len("model: gpt-4o")
    item = text.index("\n- ", mid) + 1
    pasted = "- id: pasted\n  role: user\n  content: a pasted message\n"
    a = text.index("content: ", mid) + 11
    b = text.index("content: ", a) + 11
    end = len(text.rstrip("\n"))
    typed = "\n- id: new\n  role: user\n  content: and then?"
    return {
        "content": [(content + k, content + k, "x") for k in range(5)],
        "end": [(end + k, end + k, ch) for k, ch in enumerate(typed)],
        "merge": [(a, b, ""), (a, a, text[a:b])],
        "paste": [(item, item, pasted), (item, item + len(pasted), "")],
        "role": [(role, role + 4, "system"), (role, role + 6, "user")],
        "call id": [(call_id + k, call_id + k, "q") for k in range(4)],
        "model": [(model, model, "-mini"), (model, model + 5, "")],
    }


def test_every_edit_kind_of_the_benchmark_is_read_in_pieces() -> None:
    text = _bench_like()
    groups = list(_bench_edits(text).values())
    for edits in groups:
        chain = _chain(text, edits)
        first, last = chain[0], chain[-1]
        shared = sum(any(m is n for n in last.message_data) for m in first.message_data)
        assert shared >= len(first.message_data) - 3, edits[0]


def test_every_edit_kind_of_the_benchmark_reads_no_whole_tree(monkeypatch: Any) -> None:
    """Items pasted, deleted, merged, typed at the end (through half-typed states), the
    settings typed in: only the items or members the edit touched are read (the tree is
    never read again as a whole: ``incremental._read_items``), each result a whole read's."""
    import assembly.incremental as incremental

    def whole(*args: Any) -> Conversation:
        raise AssertionError("the whole tree was read again")

    monkeypatch.setattr(incremental, "read_parsed", whole)
    text = _bench_like()
    kinds = _bench_edits(text)
    for edits in (kinds["paste"], kinds["merge"], kinds["end"], kinds["model"]):
        chain = _chain(text, edits)
        assert not chain[-1].issues


def test_typing_inside_one_message_reads_that_message_alone(monkeypatch: Any) -> None:
    """As in JSON: no whole read of the tree (``read_parsed``) for an edit inside one
    message of a conversation without findings."""
    import assembly.incremental as incremental

    calls: list[int] = []
    real = incremental.read_parsed

    def counting(*args: Any) -> Conversation:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(incremental, "read_parsed", counting)
    text = _bench_like()
    at = text.index("content: ", len(text) // 2) + len("content: ") + 3
    chain = _chain(text, [(at + k, at + k, "xyz"[k]) for k in range(3)])
    assert not chain[0].issues and calls == []
    pairs = zip(chain[0].message_data, chain[-1].message_data, strict=True)
    assert sum(a is not b for a, b in pairs) == 1


def test_untouched_messages_are_shared_and_position_free() -> None:
    text = _bench_like()
    conv = parse_conversation(text, YAML)
    assert conv.tree is not None
    holder = conv.tree.get("messages")
    assert holder is not None and holder.starts is not None
    assert type(conv.message_data[0].range) is RelRange  # stored relative to its start
    at = text.index("content: ", len(text) // 4) + 12
    chain = _chain(text, [(at, at, "inserted words ")])
    before, after = chain
    changed = [
        i
        for i, (m, n) in enumerate(zip(before.message_data, after.message_data, strict=True))
        if m is not n
    ]
    assert len(changed) == 1
    k = changed[0]
    assert after.starts[k + 1 :] == tuple(s + 15 for s in before.starts[k + 1 :])
    # The old conversation still tells the truth about its own text.
    for m in before.messages:
        assert text[m.range.start : m.range.end].startswith(("id:", "role:"))


def test_declines_what_it_cannot_prove() -> None:
    """An alias, a parse with findings, two documents, an edit before the first key or on
    the ``messages:`` line: read whole."""
    aliased = _HOSTILE[0]
    conv = parse_conversation(aliased, YAML)
    at = aliased.index("content: ok") + 10
    new = aliased[:at] + "k" + aliased[at:]
    assert reparse_conversation(conv, aliased, new, YAML) is None
    broken = "messages:\n- role: user\n  content: 'open\n- role: user\n  content: b\n"
    conv = parse_conversation(broken, YAML)
    assert conv.issues
    at = broken.index("content: b") + 10
    assert reparse_conversation(conv, broken, broken[:at] + "x" + broken[at:], YAML) is None
    text = "messages:\n- role: user\n  content: a\n- role: user\n  content: b\n"
    conv = parse_conversation(text, YAML)
    at = text.index("content: a") + 10
    for piece in ("\n---\nmessages: []", "\n...\n", "\n%YAML 1.1"):
        assert reparse_conversation(conv, text, text[:at] + piece + text[at:], YAML) is None
    assert reparse_conversation(conv, text, "# c\n" + text, YAML) is None
    assert reparse_conversation(conv, text, text.replace("messages:", "messages: "), YAML) is None
    # An alias typed in the window: read whole.
    new = text.replace("content: b", "content: *x")
    assert reparse_conversation(conv, text, new, YAML) is None
    new = text.replace("content: b", "content: &x b\n- *x")  # anchor and alias in the window
    assert reparse_conversation(conv, text, new, YAML) is None


def test_a_control_character_typed_in_an_item_is_a_finding() -> None:
    """libyaml's reader refuses it without marks (``ReaderError``): the re-read declines
    (it raised ``AttributeError`` before) and the whole read reports it at its place."""
    text = "messages:\n- role: user\n  content: a\n- role: user\n  content: b\n"
    conv = parse_conversation(text, YAML)
    at = text.index("content: b") + 10
    new = text[:at] + "\x01" + text[at:]
    res, full = check(conv, text, new, (at, at, "\x01"))
    assert res is None
    found = [(i.range.start, i.message) for i in full.issues]
    assert found == [(at, "invalid YAML: character U+0001 is not allowed in YAML")]


def test_findings_of_the_piece_are_the_whole_parse_s_and_the_next_edit_mends_them() -> None:
    """A duplicate key or an unsupported tag in the edited item: reported as a whole read
    reports it; the next edit is re-read from the last whole parse without findings."""
    text = "messages:\n- role: user\n  content: a\n- role: user\n  content: b\n"
    at = text.index("content: b")
    for where, piece in ((at, "role: x\n  "), (at + len("content: "), "!custom ")):
        edits = [(where, where, piece), (where, where + len(piece), "")]
        chain = _chain(text, edits)
        assert chain[1].issues and not chain[2].issues
        assert chain[2].message_data[0] is chain[0].message_data[0] is chain[1].message_data[0]


def test_top_level_keys_are_read_in_pieces_without_the_messages() -> None:
    text = "settings:\n  model: gpt-4o\nmessages:\n- role: user\n  content: a\nreminder: r\n"
    conv = parse_conversation(text, YAML)
    for old, new in (("gpt-4o", "gpt-4o-mini"), ("reminder: r", "reminder: rr")):
        new_text = text.replace(old, new)
        at = text.index(old)
        res, _ = check(conv, text, new_text, (at, at + len(old), new))
        assert res is not None and res.message_data[0] is conv.message_data[0]
    # A key typed again is a duplicate (a finding): read whole; so is a second ``messages``.
    for piece in ("reminder: x\n", "messages: []\n"):
        new_text = piece + text
        assert reparse_yaml(conv, text, new_text, (0, 0, len(piece))) is None


def test_the_whole_read_keeps_the_value_count_and_relative_items() -> None:
    parsed = parse_yaml_conversation("messages:\n- role: user\n  content: a\n")
    assert parsed.tokens == 5  # the mapping, the list, the item, two values
    assert parsed.root is not None
    holder = parsed.root.get("messages")
    assert holder is not None and holder.starts == (12,)
    assert holder.items[0].range == RelRange(0, 23)
    assert parse_yaml_conversation("a: &x 1\nb: *x\n").tokens == 0  # an alias


def test_ropes_and_the_host_give_a_fresh_analysis(tmp_path: Path) -> None:
    """The server's path: ropes and ``AnalysisHost.apply_change`` with the editor's edit;
    every analysis's diagnostics equal a fresh one's."""
    path = tmp_path / "chat.conv.yaml"
    text = _bench_like()
    path.write_text(text, encoding="utf-8")
    today = dt.date(2025, 1, 15)
    host = AnalysisHost()
    rope = Rope.from_str(text)
    analyze(path, text=rope, root=tmp_path, today=today, host=host)
    rnd = random.Random(3)
    for _ in range(12):
        start, end, new = random_edit(rnd, text)
        text = text[:start] + new + text[end:]
        rope = rope.edit(start, end, new)
        edit = Edit(start, end, start + len(new))
        inc = analyze(path, text=rope, root=tmp_path, today=today, host=host, edit=edit)
        fresh = analyze(path, text=text, root=tmp_path, today=today)
        assert inc.diagnostics == fresh.diagnostics
        assert inc.parsed is not None and fresh.parsed is not None
        assert normalise(inc.parsed) == normalise(fresh.parsed)


# ---------------------------------------------------------------------------------------
# Error recovery


def _items(n: int) -> str:
    return "messages:\n" + "".join(f"- id: m{i}\n  role: user\n  content: c{i}\n" for i in range(n))


def test_a_damaged_item_keeps_the_items_after_it() -> None:
    """A quote left open in item 2 runs libyaml to the end of the text; the whole read goes
    on at item 3's line and reads the items after the damage (item 2 keeps what its lines
    before the error gave: its id and role)."""
    text = _items(6)
    at = text.index("content: c2") + len("content: ")
    broken = text[:at] + "'" + text[at:]
    conv = parse_conversation(broken, YAML)
    assert [m.id for m in conv.message_data] == ["m0", "m1", "m2", "m3", "m4", "m5"]
    assert conv.message_data[2].content == ""
    assert [(i.range.start, i.message) for i in conv.issues] == [
        (at, "invalid YAML: found unexpected end of stream while scanning a quoted scalar")
    ]
    # Typed in the clean text, and typed on: re-read in pieces, the items after shared.
    res, _ = check(parse_conversation(text, YAML), text, broken, (at, at, "'"))
    assert res is not None and [m.id for m in res.message_data] == [f"m{i}" for i in range(6)]
    more = broken[: at + 1] + "x" + broken[at + 1 :]
    nxt, _ = check(res, broken, more, (at + 1, at + 1, "x"))
    assert nxt is not None and nxt.message_data[3:] == res.message_data[3:]
    assert all(a is b for a, b in zip(nxt.message_data[3:], res.message_data[3:], strict=True))


def test_several_damaged_items_each_report_their_error() -> None:
    """Each piece read after an error may have its own: reported, and recovered from (the
    items between and after them read); a line that ends the list (a top-level key) ends
    the recovery without an error of its own. A bracket left open reads on into the next
    item, where libyaml stops (at its ``-``): that item is lost with the damaged one."""
    text = _items(8)
    for i in (2, 5):
        text = text.replace(f"content: c{i}\n", f"content: [c{i}\n")
    conv = parse_conversation(text, YAML)
    assert [m.id for m in conv.message_data] == ["m0", "m1", "m2", "m4", "m5", "m7"]
    lines = text.split("\n")
    found = [(text.count("\n", 0, i.range.start), i.message) for i in conv.issues]
    assert found == [(10, "invalid YAML: did not find expected ',' or ']'"), (19, found[0][1])]
    assert (lines[10], lines[19]) == ("- id: m3", "- id: m6")
    tail = parse_conversation(text + "reminder: r\n", YAML)
    assert tail.issues == conv.issues and tail.message_data == conv.message_data
    assert tail.reminder is None  # (not read after an error)


def test_recovery_is_bounded() -> None:
    """A text broken in every item: at most ``_MAX_PIECES`` pieces are read after the first
    error, each error reported once."""
    from assembly.formats.yamldoc import _MAX_PIECES

    text = "messages:\n" + "".join(f"- role: user\n  content: [c{i}\n" for i in range(60))
    conv = parse_conversation(text, YAML)
    assert len(conv.issues) == 1 + _MAX_PIECES
    assert len(conv.message_data) == 1 + _MAX_PIECES


def test_two_items_merged_keep_every_other_item() -> None:
    """The benchmark's delete across two items, and its undo: the broken version keeps
    every item but those merged, the same objects; the undo's keeps them too."""
    text = _bench_like()
    merge = _bench_edits(text)["merge"]
    first, broken, back = _chain(text, merge)
    assert broken.issues and not back.issues
    n = len(first.message_data)  # (libyaml stops a few items after the merged ones)
    assert len(broken.message_data) >= n - 3
    olds = {id(m) for m in first.message_data}
    assert sum(id(m) in olds for m in broken.message_data) >= n - 4
    assert sum(id(m) in olds for m in back.message_data) >= n - 4


def test_damage_in_the_middle_equals_whole_reads() -> None:
    """Random damage in the middle of the documents (``random_edits.break_edit``: a quote
    or a bracket left open, two items merged), then more edits: every re-read equals a
    whole read, and many are read in pieces with the items after the damage."""
    docs = [(name, t) for name, t in documents() if t.count("\n- ") + t.count("\n  - ") >= 6]
    assert len(docs) >= 12
    rnd = random.Random(20261202)
    counts: Counter[str] = Counter()
    for _name, pristine in docs:
        for _ in range(10):
            text = pristine
            conv = parse_conversation(text, YAML)
            for step in range(4):
                lines = line_starts(text)
                edit = break_edit(rnd, text, lines) if step == 0 else random_edit(rnd, text)
                start, end, new = edit
                new_text = text[:start] + new + text[end:]
                if new_text == text:
                    continue
                res, full = check(conv, text, new_text, edit)
                if res is not None and full.issues:
                    counts["broken, re-read in pieces"] += 1
                    shared = {id(m) for m in conv.message_data}
                    after = [m for m in res.message_data if id(m) in shared]
                    counts["of which kept items after the damage"] += bool(
                        after and res.issues[0].range.start < res.starts[-1]
                    )
                counts["edits"] += 1
                conv, text = (res if res is not None else full), new_text
    assert counts["broken, re-read in pieces"] >= 110, counts  # 169 of 556 edits
    assert counts["of which kept items after the damage"] >= 90, counts  # 140


def _plain_items(n: int) -> str:
    """A message list of plain scalars only: no quote, backslash or document marker."""
    return "messages:\n" + "".join(
        f"- id: m{i}\n  role: user\n  content: line {i} of the text\n    and its next line\n"
        for i in range(n)
    )


def _composed(monkeypatch: Any) -> list[int]:
    """The lengths of the texts ``formats.yamldoc`` composes from now on."""
    import assembly.formats.yamldoc as yamldoc

    sizes: list[int] = []
    real = yamldoc.compose_yaml

    def counting(text: str) -> Any:
        sizes.append(len(text))
        return real(text)

    monkeypatch.setattr(yamldoc, "compose_yaml", counting)
    return sizes


def test_a_quote_never_closed_reads_a_bounded_window(monkeypatch: Any) -> None:
    """A quote typed in item 100 of 400 that nothing after it closes: libyaml reads the
    rest of the text into the scalar and fails at its end. Each keystroke re-reads only the
    item's window (it was read to the end of the text on each keystroke): the text after it
    is scanned once for what could end the scalar (``_closer``, kept for the next
    keystrokes), and every result equals a whole read, the items after the damage shared."""
    for quote in ("'", '"'):
        text = _plain_items(400)
        at = text.index("content: line 100 ") + len("content: ")
        edits = [(at, at, quote), *((at + 1 + k, at + 1 + k, "xy z"[k]) for k in range(4))]
        chain = [parse_conversation(text, YAML)]
        cur = text
        for start, end, new in edits:
            nxt = cur[:start] + new + cur[end:]
            sizes = _composed(monkeypatch)
            res = reparse_conversation(
                chain[-1], cur, nxt, YAML, span=(start, end, start + len(new))
            )
            monkeypatch.undo()
            assert res is not None
            assert max(sizes) < 2 * len(text) // 400, (quote, sizes)  # about one item's window
            full = parse_conversation(nxt, YAML)
            assert normalise(res) == normalise(full) and res.syntax == full.syntax
            chain.append(res)
            cur = nxt
        last = chain[-1]
        assert [i.message for i in last.issues] == [
            "invalid YAML: found unexpected end of stream while scanning a quoted scalar"
        ]
        assert len(last.message_data) == 400
        after = zip(chain[0].message_data[101:], last.message_data[101:], strict=True)
        assert all(a is b for a, b in after)
        # The quote deleted again: a clean re-read.
        mended = cur[:at] + cur[at + 1 :]
        back, _ = check(last, cur, mended, (at, at + 1, ""))
        assert back is not None and not back.issues


def test_a_quote_closed_far_away_or_stopped_equals_whole_reads(monkeypatch: Any) -> None:
    """What may end the open scalar later in the text (its quote, a backslash after a
    double quote, a document marker line, also the final ``...``) makes the window reach
    it: each re-read equals a whole read (``check``), whatever the whole parse then finds
    there; all but the last in pieces."""
    base = _plain_items(120)
    value = "line 90 of the text\n    and its next line"
    enders = {  # item 90's content, each valid YAML
        "'": ["'quoted'", "'it''s'", "it's", "a 'b' c"],
        '"': ['"quoted"', '"a \\" b"', "a \\q b", 'say "hi"'],
    }
    for quote, found in enders.items():
        for ender in [*found, "end"]:
            if ender == "end":  # a document end marker after the list (then comments)
                text = base + "...\n# done\n"
            else:
                text = base.replace(f"content: {value}", f"content: {ender}", 1)
            assert not parse_conversation(text, YAML).issues, ender
            at = text.index("content: line 30 ") + len("content: ")
            for edits in ([(at, at, quote)], [(at, at, quote), (at + 1, at + 1, "x")]):
                conv = parse_conversation(text, YAML)
                cur = text
                for edit in edits:
                    start, end, new = edit
                    nxt = cur[:start] + new + cur[end:]
                    res, full = check(conv, cur, nxt, edit)
                    # (Read whole when the window reaches the end marker.)
                    assert res is not None or ender == "end", (quote, ender, edit)
                    conv, cur = (res if res is not None else full), nxt


def test_quotes_left_open_then_edited_equal_whole_reads() -> None:
    """Randomized: a quote typed at a value's start or inside a line of documents with and
    without quotes after it (plain ones, the test documents), then more random edits; every
    re-read equals a whole read, and those where nothing closes the quote are re-read in
    pieces."""
    docs = [(name, t) for name, t in documents() if t.count("\n- ") >= 6]
    docs += [("plain", _plain_items(40)), ("plain-crlf", _plain_items(30).replace("\n", "\r\n"))]
    rnd = random.Random(20261203)
    counts: Counter[str] = Counter()
    for name, pristine in docs:
        for _ in range(6):
            text = pristine
            conv = parse_conversation(text, YAML)
            lines = line_starts(text)
            inner = [a for a in lines if len(text) // 5 <= a <= len(text) - len(text) // 5]
            line = rnd.choice(inner or lines)
            stop = text.find("\n", line)
            colon = text.find(": ", line, len(text) if stop < 0 else stop)
            at = (
                colon + 2
                if colon >= 0 and rnd.random() < 0.7
                else rnd.randint(line, max(line, stop))
            )
            quote = rnd.choice("'\"")
            for step in range(4):
                if step == 0:
                    edit = (at, at, quote)
                elif step == 1 or rnd.random() < 0.5:
                    edit = (at + step, at + step, rnd.choice("ab \n"))
                else:
                    edit = random_edit(rnd, text)
                start, end, new = edit
                new_text = text[:start] + new + text[end:]
                if new_text == text:
                    continue
                res, full = check(conv, text, new_text, edit)
                counts["edits"] += 1
                if res is not None:
                    counts["re-read in pieces"] += 1
                    if name.startswith("plain") and full.issues:
                        counts["plain, open quote, in pieces"] += 1
                conv, text = (res if res is not None else full), new_text
    assert counts["re-read in pieces"] >= counts["edits"] // 3, counts
    assert counts["plain, open quote, in pieces"] >= 10, counts


def test_an_edit_moves_one_table_of_starts() -> None:
    """The message list's items and the messages stand at the same places: after an edit
    inside a message, one pasted and one typed in an id, the two tables are one (moved
    once per edit, not twice), and equal to a whole read's."""
    text = _bench_like()
    kinds = _bench_edits(text)
    for edits in (kinds["content"], kinds["paste"], kinds["call id"]):
        last = _chain(text, edits)[-1]
        assert last.tree is not None
        holder = last.tree.get("messages")
        assert holder is not None and holder.starts is last.starts, edits[0]


def test_an_item_s_line_commented_out_is_read_in_pieces() -> None:
    """``# `` typed at the start of an item's line (an editor's "comment line"): the edit
    touches that item's line, so the window takes that item too (it was read whole); the
    item's keys then continue the item before it. Equal to a whole read, and undone."""
    text = _items(40)
    at = text.index("- id: m20\n")
    res = _chain(text, [(at, at, "# "), (at, at + 2, "")])
    assert len(res[1].message_data) == 39 and len(res[2].message_data) == 40
    olds = {id(m) for m in res[0].message_data}
    assert sum(id(m) in olds for m in res[1].message_data) == 38


def test_a_character_typed_at_an_item_s_line_start_ends_the_list_in_pieces(
    monkeypatch: Any,
) -> None:
    """``-`` (or any key character) typed at the start of an item's ``-`` line of a list at
    column 0: the line becomes a top-level key (``-- id: m20``), the list ends there and
    libyaml stops at the item's next line. Read from a window (``yamldoc._list_ended``),
    not whole, equal to a whole read; the next keystroke (typed on, or undone) too. The
    first item, the last, several lines and other lists too."""
    import assembly.formats.yamldoc as yamldoc

    text = _items(40)
    bench = _bench_like()
    ended: list[int] = []
    real = yamldoc._list_ended

    def counting(*args: Any) -> Any:
        res = real(*args)
        ended.append(res is not None)
        return res

    monkeypatch.setattr(yamldoc, "_list_ended", counting)
    for doc, needle in ((text, "- id: m20\n"), (bench, "\n- ")):
        at = doc.index(needle, len(doc) // 2 if needle[0] == "\n" else 0)
        at += needle[0] == "\n"
        for typed in ("-", "x", "-x", "id: ", "z"):
            ended.clear()
            res = _chain(doc, [(at, at, typed), (at, at + len(typed), "")])
            assert ended[0], typed
            assert res[1].issues and res[1].issues[0].code == "syntax-error"
            assert len(res[2].message_data) == len(res[0].message_data)
        one = doc[:at] + "-" + doc[at:]  # then ``--``, then ``---``: a document marker
        prev = _chain(doc, [(at, at, "-")])[-1]
        for k in (1, 2):
            two = one[: at + k] + "-" + one[at + k :]
            prev, full = check(prev, one, two, (at + k, at + k, "-"))
            prev, one = prev or full, two
    # Hostile and edge cases: each result (in pieces or whole) equals a whole read.
    last = text.index("- id: m39\n")
    second = text.index("- id: m1\n")
    cases = [(at, at, s) for s in ("[", "{", "?", "'", '"', "&a ", "*a", "!x ", "|", "\t")]
    cases += [(second, second, "-"), (last, last, "-"), (last, last, "x: y\n")]
    cases += [(at, at + 30, "-"), (at - 5, at + 3, "q"), (at, at, "x\n"), (at, at, "x\x85")]
    indented = _dump(generated(6, 3_000, 2), "indented")
    sub = indented.index("\n  - ", len(indented) // 2) + 1
    for doc, edits in ((text, cases), (indented, [(sub, sub, "-"), (sub + 2, sub + 2, "-")])):
        prev = parse_conversation(doc, YAML)
        for edit in edits:
            start, end, new = edit
            check(prev, doc, doc[:start] + new + doc[end:], edit)


def test_an_item_s_line_made_a_key_reads_no_whole_tree(monkeypatch: Any) -> None:
    """The list ended by ``-`` typed at an item's line start: the items before it kept
    (the same objects), the document's fields read again with the unknown key the line
    made, the items after it left out; the tree is not read again as a whole."""
    import assembly.incremental as incremental

    def whole(*args: Any) -> Conversation:
        raise AssertionError("the whole tree was read again")

    text = "settings:\n  model: gpt-4o\n" + _items(30)
    at = text.index("- id: m12\n")
    before = parse_conversation(text, YAML)
    monkeypatch.setattr(incremental, "read_parsed", whole)
    prev, conv = _chain(text, [(at, at, "-")])
    assert [i.code for i in conv.issues] == ["syntax-error", "unknown-key"]
    assert conv.message_data == before.message_data[:12]
    assert all(a is b for a, b in zip(conv.message_data, prev.message_data, strict=False))


def test_top_level_keys_made_odd_equal_whole_reads() -> None:
    """Found by randomized chains over the project's documents: a tag or an anchor typed
    before the first key (the root then starts there), a tag that makes the first key a
    tagged flow mapping (the whole parse then fails at the next key), a line break libyaml
    reads (``\\x85``, ``\\u2028``) typed in a top-level key: each equal to a whole read."""
    text = "# a note\nsettings: {max_input_tokens: 20}\nreminder: be brief\n" + _items(3)
    first = text.index("settings")
    second = text.index("reminder")
    prev = parse_conversation(text, YAML)
    edits = [(first, first, s) for s in ("!!str ", "&a ", "!", "!x ", "\x85", "\u2028")]
    edits += [(9, 9, "!!str "), (second, second, "!"), (second + 2, second + 2, "\u2028")]
    pieces = 0
    for start, end, new in edits:
        res, _ = check(prev, text, text[:start] + new + text[end:], (start, end, new))
        pieces += res is not None
    assert pieces >= 4  # (the checks above compare those read in pieces)


def test_a_tag_or_anchor_before_a_key_then_edited_equals_whole_reads() -> None:
    """Found by randomized chains of typing at line starts: a tag or an anchor left on a
    line of its own before a later top-level key (alone, a window would give it to its
    mapping; in the document the line ends the root mapping), and an edit in the first key
    of a root whose tag sits above comments before it (the root still starts at the tag)."""
    items = _items(2)
    chains = [
        (
            "name: t\nsettings:\n  x: 1\ncustom: {a: 1}\n" + items,
            "custom",
            [(0, "!custom "), (2, "\r\n")],
        ),
        ("name: t\ntool_choice: auto\ntools:\n- a\n" + items, "tools", [(0, "&"), (2, "---\n")]),
        (
            "# one\n# two\nsettings: {safety_margin: 0, reserved_tokens: 0}\n" + items,
            "# two",
            [(0, "!!str ")],
        ),
    ]
    for text, anchor, steps in chains:
        at = text.index(anchor)
        prev = parse_conversation(text, YAML)
        for offset, new in steps:
            start = at + offset
            new_text = text[:start] + new + text[start:]
            res, full = check(prev, text, new_text, (start, start, new))
            prev, text = (res if res is not None else full), new_text
        if anchor == "# two":  # then an anchor typed inside the first key's flow mapping
            start = text.index("s: 0}")
            new_text = text[:start] + "&" + text[start + 1 :]
            res, _ = check(prev, text, new_text, (start, start + 1, "&"))
            assert res is not None  # read in pieces, and equal


def test_top_level_members_deleted_whole_are_read_in_pieces() -> None:
    """A top-level key added at the start (an SDK's field) and deleted again, and other
    members' lines deleted whole (the first, one in the middle, the last): the others
    kept, equal to whole reads (at 10 MB the deletion parsed the whole document: 2.1 s)."""
    text = _bench_like()
    key = "sdk_field: 1\n"
    _chain(text, [(0, 0, key), (0, len(key), "")])
    starts = [m.start() for m in re.finditer(r"^[a-z_]+:", text, re.MULTILINE)]
    lines = re.findall(r"^([a-z_]+):", text, re.MULTILINE)
    assert "messages" in lines and len(starts) >= 3
    for i, name in enumerate(lines):
        if name == "messages":
            continue
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        gone = _chain(text, [(starts[i], end, "")])[-1]
        assert len(gone.message_data) == len(parse_conversation(text, YAML).message_data)
