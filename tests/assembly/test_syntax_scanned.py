"""The message list's items read by ``json``'s C scanner (``JsonParser._scanned``).

An item the scanner reads whole is built from its values, and its ranges are found only
when one is asked for (``LazyRange``, ``Positions``), by the parser reading the message
again. The parse must say exactly what the parser alone says: the same tree (kinds,
values, every range, keys and their ranges), the same findings and the same count of
tokens, whatever the item holds; the reference below is the parser with the scanner's path
turned off. Hostile items (duplicate keys, a lone surrogate's escape, numbers too long,
``NaN``, nesting past the limit, control characters, a missing comma…) are left to the
parser, which reports them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assembly import syntax
from assembly.documents import Reader
from assembly.host import AnalysisHost, Edit
from assembly.model import DocFormat
from assembly.reading import parse_conversation
from assembly.rope import Rope
from assembly.syntax import (
    LazyRange,
    Positions,
    absolute,
    parse_json,
    parse_json_windows,
    parse_jsonl,
)
from tests.assembly.test_syntax_windows import Slices, outcome, shape
from tests.support.engine import analyze

# Pieces of JSON text: plain and hostile (each a value, or a member when it has a colon).
HOSTILE_VALUES = (
    '"\\ud800"',  # a lone surrogate's escape
    '"\\ud83d\\ude00"',  # a pair
    '"\\\\ud83d\\ude00"',  # an escaped backslash, "ud83d", a lone low surrogate
    '"\\ude00\\ud83d"',  # two lone ones
    '"\\u00e9\\n\\t\\"\\\\"',
    '"\u00e9t\u00e9 \U0001f600 \u65e5"',
    '"tab\there"',  # a raw control character
    "1" * (syntax.MAX_NUMBER_CHARS + 1),
    "1" * syntax.MAX_NUMBER_CHARS,
    "-0.5e-3",
    "1E400",
    "NaN",
    "-Infinity",
    "01",
    "true",
    "null",
    "[]",
    "{}",
    "[1, 2,]",
    '{"a": 1 "b": 2}',
    '"unterminated',
)
HOSTILE_MEMBERS = ('"role": "user"', '"role": "user"', '"id": 1', '"a": {"a": {"a": []}}')


def _values(depth: int) -> st.SearchStrategy[str]:
    leaf = st.one_of(
        st.sampled_from(HOSTILE_VALUES),
        st.text(max_size=8).map(json.dumps),
        st.text(max_size=8).map(lambda t: json.dumps(t, ensure_ascii=False)),
        st.integers().map(str),
        st.floats(allow_nan=False, allow_infinity=False).map(repr),
    )
    if depth == 0:
        return leaf
    inner = _values(depth - 1)
    return st.one_of(
        leaf,
        st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
        _objects(inner),
    )


def _objects(values: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    key = st.one_of(
        st.sampled_from(["role", "content", "id", "tool_calls", "a", "\\u0072ole"]),
        st.text(max_size=5),
    ).map(lambda k: k if k == "\\u0072ole" else json.dumps(k)[1:-1])
    member = st.one_of(
        st.tuples(key, values).map(lambda kv: f'"{kv[0]}": {kv[1]}'),
        st.sampled_from(HOSTILE_MEMBERS),
    )
    sep = st.sampled_from([", ", ",", ",\n  ", " ,\r\n"])
    return st.tuples(st.lists(member, max_size=5), sep).map(
        lambda ms: "{" + ms[1].join(ms[0]) + "}"
    )


DOCUMENTS = st.tuples(
    st.lists(_objects(_values(2)), max_size=6),
    st.sampled_from([",\n  ", ", ", ","]),
    st.booleans(),
).map(
    lambda d: (
        "[" + d[1].join(d[0]) + "]"
        if d[2]
        else '{"settings": {"a": [1]}, "messages": [' + d[1].join(d[0]) + '], "z": 1}'
    )
)


def _parser_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(syntax, "scanned", lambda *args, **kwargs: None)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(DOCUMENTS, st.sampled_from([None, 1, 7, 64]))
def test_scanned_items_read_as_the_parser_reads_them(
    monkeypatch: pytest.MonkeyPatch, text: str, window: int | None
) -> None:
    def parsed() -> Any:
        if window is None:
            return outcome(parse_json(text, messages=True))
        return outcome(parse_json_windows(Slices(text), messages=True, window=window))

    scanned = parsed()
    whole = parse_json(text, messages=True).root
    absolute_scanned = shape(absolute(whole)) if whole is not None else None
    with monkeypatch.context() as m:
        _parser_alone(m)
        assert scanned == parsed()
        alone = parse_json(text, messages=True).root
        assert absolute_scanned == (shape(absolute(alone)) if alone is not None else None)


LINES = st.lists(
    st.one_of(
        _objects(_values(2)),
        st.sampled_from(
            [
                "",
                "   ",
                '{"messages": [{"role": "user", "content": "x"}]}',  # a dataset's record
                '{"role": "user"} trailing',
                '{"role": "user"}\r',
                '{"role": "user"}  ',
                ' {"role": "user"}',
                '{"role": "user",',
                '"content": "x"}',
                "\ufeff{}",
            ]
        ),
    ),
    max_size=8,
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(LINES, st.booleans())
def test_scanned_lines_read_as_the_parser_reads_them(
    monkeypatch: pytest.MonkeyPatch, lines: list[str], spanning: bool
) -> None:
    text = "\n".join(lines)
    scanned = parse_jsonl(text, messages=True, spanning=spanning)
    whole = shape(absolute(scanned.root)) if scanned.root is not None else None
    with monkeypatch.context() as m:
        _parser_alone(m)
        alone = parse_jsonl(text, messages=True, spanning=spanning)
        assert (outcome(scanned), scanned.lines) == (outcome(alone), alone.lines)
        assert whole == (shape(absolute(alone.root)) if alone.root is not None else None)


@pytest.mark.parametrize(
    "item",
    [
        '{"role": "user", "role": "tool"}',
        '{"role": "user", "content": "\\udc00"}',
        '{"role": "user", "n": ' + "9" * (syntax.MAX_NUMBER_CHARS + 1) + "}",
        '{"role": "user", "n": NaN}',
        '{"role": "user", "n": Infinity}',
        '{"role": "user", "content": "a\tb"}',
        '{"role": "user" "content": "x"}',
        '{"role": "user", "deep": ' + "[" * syntax.MAX_DEPTH + "]" * syntax.MAX_DEPTH + "}",
    ],
)
def test_what_the_scanner_would_read_otherwise_is_left_to_the_parser(
    monkeypatch: pytest.MonkeyPatch, item: str
) -> None:
    """Each of these is read by the parser, which reports it (a finding, or a value the
    scanner would give differently)."""
    text = '[{"role": "user", "content": "fine"}, ' + item + "]"
    holder = parse_json(text, messages=True).root
    assert holder is not None
    assert isinstance(holder.items[0].members[0].key_range, LazyRange)  # (scanned)
    second = holder.items[1] if len(holder.items) > 1 else None
    assert second is None or not isinstance(second.members[0].key_range, LazyRange)
    scanned = outcome(parse_json(text, messages=True))
    with monkeypatch.context() as m:
        _parser_alone(m)
        assert scanned == outcome(parse_json(text, messages=True))


def test_a_messages_ranges_are_found_only_when_one_is_asked_for() -> None:
    """Reading a conversation keeps its messages' ranges without finding them; asking for
    one finds those of its own message only, and lets that message's text go."""
    messages: list[dict[str, Any]] = [
        {"id": f"m{i}", "role": "user", "content": f"\U0001f600 {i}"} for i in range(50)
    ]
    for i in range(0, 50, 5):  # nested values
        call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        messages[i] = {"id": f"m{i}", "role": "assistant", "content": None, "tool_calls": [call]}
    text = json.dumps({"messages": messages}, indent=2, ensure_ascii=False)
    conv = parse_conversation(Rope.from_str(text), DocFormat.JSON)
    tables = {id(t): t for t in _tables(conv.tree)}
    assert len(tables) == 50 and all(t._offsets is None for t in tables.values())
    located = conv.messages[7]
    content = located.content_range
    assert content is not None and text[content.start : content.end] == '"\U0001f600 7"'
    read = [t for t in tables.values() if t._offsets is not None]
    assert len(read) == 1 and read[0].source is None
    for i in (0, 31, 49):  # every range of every node where the parser puts it
        assert conv.messages[i].range == _fresh(text).messages[i].range
        assert conv.messages[i].role_range == _fresh(text).messages[i].role_range


def test_a_messages_ranges_once_found_are_kept_as_four_byte_numbers() -> None:
    """The ranges found for a message are kept as an array of 4-byte numbers (a list's
    would be a pointer and an ``int`` object each past 256), the same numbers, past 65,535
    too."""
    long = "x" * 70_000
    messages = [
        {"id": "m0", "role": "user", "content": long},
        {"role": "assistant", "content": "y"},
    ]
    text = json.dumps({"messages": messages}, indent=2)
    conv = parse_conversation(Rope.from_str(text), DocFormat.JSON)
    first = conv.messages[0]
    assert first.content_range == _fresh(text).messages[0].content_range
    found = [t for t in _distinct(conv.tree) if t._offsets is not None]
    assert len(found) == 1
    offsets = found[0].offsets()
    assert offsets.itemsize == 4 and max(offsets) > 70_000
    assert offsets[:2].tolist() == [0, first.range.end - first.range.start]  # the message


def test_unknown_message_keys_are_placed_without_finding_every_messages_ranges(
    tmp_path: Path,
) -> None:
    """A key the reader does not know, on every message (SWE-agent's ``thought``): only the
    message of its first place has its ranges found, at the open and after an edit that
    re-reads one message (the others' reads are reused), and the finding is where a fresh
    analysis puts it."""
    messages = [
        {"role": "user" if i % 2 else "assistant", "content": f"turn {i}", "thought": f"t{i}"}
        for i in range(40)
    ]
    text = json.dumps({"messages": messages}, indent=2)
    path = tmp_path / "log.conv.json"
    host = AnalysisHost()
    first = analyze(path, text=Rope.from_str(text), host=host)

    def unknown(a: Any) -> list[tuple[str, int, int]]:
        return [
            (d.message, d.range.start, d.range.end)
            for d in a.diagnostics
            if d.code == "unknown-key"
        ]

    where = text.index('"thought"')
    message = "unknown message key `thought` (and on 39 more messages): it is ignored"
    assert unknown(first) == [(message, where, where + len('"thought"'))]
    assert unknown(first) == unknown(analyze(path, text=text))
    tables = {id(t): t for t in _tables(first.conversation.tree)}.values()
    assert len(tables) == 40
    assert [t._offsets is not None for t in tables].count(True) == 1

    at = text.index('"turn 30"') + 1
    edited = text[:at] + "x" + text[at:]
    second = analyze(path, text=Rope.from_str(edited), host=host, edit=Edit(at, at, at + 1))
    assert unknown(second) == unknown(analyze(path, text=edited)) == unknown(first)
    tables = {id(t): t for t in _tables(second.conversation.tree)}.values()
    assert [t._offsets is not None for t in tables].count(True) == 1


def _fresh(text: str) -> Any:
    return parse_conversation(text, DocFormat.JSON)


def _tables(node: syntax.SNode | None) -> list[Positions]:
    out: list[Positions] = []
    stack = [node] if node is not None else []
    while stack:
        n = stack.pop()
        rng = n.range
        if isinstance(rng, LazyRange):
            out.append(rng.place()[0])
        stack.extend(n.items)
        stack.extend(m.value for m in n.members)
    return out


def test_a_lazy_range_is_pickled_as_the_range_it_stands_for() -> None:
    import pickle

    holder = parse_json('[{"role": "user", "content": "x"}]', messages=True).root
    assert holder is not None
    rng = holder.items[0].members[1].key_range
    assert isinstance(rng, LazyRange)
    back = pickle.loads(pickle.dumps(rng))
    assert type(back) is syntax.RelRange and back == rng and (back.start, back.end) == (17, 26)


def test_the_reader_reads_scanned_messages_as_parsed_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """The conversation read from scanned messages equals the one read from parsed ones."""
    messages = [
        {"id": f"m{i}", "role": r, "content": c}
        for i, (r, c) in enumerate([("system", "s"), ("user", "u \u00e9"), ("assistant", "a")])
    ]
    messages.append({"role": "tool", "tool_call_id": "c1", "content": [{"type": "text"}]})
    text = json.dumps({"settings": {"model": "gpt-4o"}, "messages": messages}, indent=1)
    scanned = Reader(DocFormat.JSON, len(text)).read(parse_json(text, messages=True))
    with monkeypatch.context() as m:
        _parser_alone(m)
        parsed = Reader(DocFormat.JSON, len(text)).read(parse_json(text, messages=True))
    assert scanned.message_data == parsed.message_data
    assert [i.message for i in scanned.issues] == [i.message for i in parsed.issues]


@pytest.mark.parametrize(
    ("text", "scanned"),
    [
        ('{"model": "m", "messages": [{"role": "user", "content": "x"}]}', True),
        ('{"settings": {}, "messages": [{"role": "user", "content": "x"}]}', True),
        ('{"system": "s", "messages": [{"role": "user", "content": "x"}]}', False),
        ('{"anthropic_version": "v", "messages": [{"role": "user", "content": "x"}]}', False),
        ('{"messages": [{"role": "user", "content": "x"}], "system": "s"}', True),
    ],
)
def test_a_foreign_formats_top_level_key_before_the_messages_leaves_them_to_the_parser(
    text: str, scanned: bool
) -> None:
    """Other providers' readers ask for every range at once (``absolute``): a top-level key
    only they use, written before ``messages``, keeps the scanner out of the list."""
    from assembly.formats.detect import FOREIGN_TOP_KEYS

    for parse in (
        lambda: parse_json(text, messages=True, unscanned=FOREIGN_TOP_KEYS),
        lambda: parse_json_windows(
            Slices(text), messages=True, window=8, unscanned=FOREIGN_TOP_KEYS
        ),
    ):
        root = parse().root
        assert root is not None
        item = root.get("messages").items[0]  # type: ignore[union-attr]
        assert isinstance(item.members[0].value.range, LazyRange) is scanned
    conv = parse_conversation(text, DocFormat.JSON)
    assert conv.messages[0].content == "x"


DATA = Path(__file__).resolve().parents[1] / "data"
REAL = sorted(
    p
    for p in DATA.rglob("*")
    if p.suffix in (".json", ".jsonl") and p.is_file() and p.stat().st_size < 2_000_000
)


@pytest.mark.parametrize("path", REAL, ids=lambda p: str(p.relative_to(DATA)))
def test_every_json_file_of_the_test_data_reads_the_same_scanned(
    monkeypatch: pytest.MonkeyPatch, path: Path
) -> None:
    """Real logs, other providers' bodies, datasets and the project's own fixtures: read
    with the scanner and by the parser alone, the same tree and the same conversation."""
    text = path.read_text(encoding="utf-8", errors="surrogatepass")
    fmt = DocFormat.JSONL if path.suffix == ".jsonl" else DocFormat.JSON
    parse = parse_jsonl if fmt is DocFormat.JSONL else parse_json

    def read() -> Any:
        conv = parse_conversation(text, fmt)
        return (
            outcome(parse(text, messages=True)),
            [(m.id, m.role, m.content, m.range, m.content_range) for m in conv.messages],
            [(i.code, i.message, i.range) for i in conv.issues],
            conv.source_format,
        )

    scanned = read()
    with monkeypatch.context() as m:
        _parser_alone(m)
        assert scanned == read()


def test_a_scanned_message_keeps_no_more_text_than_its_own() -> None:
    """Until its ranges are asked for, a scanned message keeps its text: a copy of its own
    (never the whole document's ``str``, which would stay alive for it), or the editor's
    rope it was read from, which the document holds anyway."""
    messages = [{"id": f"m{i}", "role": "user", "content": f"\U0001f600 {i}"} for i in range(40)]
    text = json.dumps({"messages": messages}, ensure_ascii=False)
    tables = _distinct(parse_json(text, messages=True).root)
    assert len(tables) == 40
    assert all(type(t.source) is str and len(t.source) == t.length for t in tables)
    rope = Rope.from_str(text)
    tables = _distinct(parse_json_windows(rope, messages=True, window=64).root)
    assert len(tables) == 40 and all(t.source is rope for t in tables)
    lines = Rope.from_str("".join(json.dumps(m) + "\n" for m in messages))
    conv = parse_conversation(lines, DocFormat.JSONL)
    tables = _distinct(conv.tree)
    assert len(tables) == 40 and all(t.source is lines for t in tables)
    assert conv.messages[39].content_range == _fresh_jsonl(str(lines)).messages[39].content_range


def _fresh_jsonl(text: str) -> Any:
    return parse_conversation(text, DocFormat.JSONL)


def _distinct(node: syntax.SNode | None) -> list[Positions]:
    return list({id(t): t for t in _tables(node)}.values())


def test_a_scanned_objects_members_are_its_table_kept_after_a_reader_lets_go() -> None:
    """A scanned object keeps only its table of values by key: its members are made from
    it, in source order, each key where it is written; ``release_fields`` keeps it."""
    text = '[{"role": "user", "content": {"k": 1, "j": [2]}, "id": "m1"}]'
    node = parse_json(text, messages=True).root.items[0]  # type: ignore[union-attr]
    node.release_fields()
    assert list(node.fields()) == ["role", "content", "id"]
    assert [m.key for m in node.members] == ["role", "content", "id"]
    for m in node.members:
        r = syntax.resolve(m.key_range, 1)
        assert text[r.start : r.end] == f'"{m.key}"'
        assert m.value is node.fields()[m.key]
    inner = node.fields()["content"]
    assert [(m.key, m.value.to_python()) for m in inner.members] == [("k", 1), ("j", [2])]
    assert node.to_python() == json.loads(text)[0]
