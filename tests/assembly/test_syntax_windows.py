"""``parse_json_windows`` reads a text a window at a time and gives exactly what
``parse_json`` gives on the whole text: the tree (kinds, ranges, values, the message list's
starts and error counts), the errors, the token count, and the lexer's error count.

Windows of a few characters put a window's end inside every kind of token, between every
pair of tokens and inside whitespace; documents are generated conversations with random
damage (unterminated strings, stray brackets, backslashes, missing commas) and the real
request logs under ``tests/data/real-logs``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from assembly import syntax
from assembly.model import DocFormat
from assembly.reading import parse_conversation
from assembly.rope import Rope
from assembly.syntax import SNode, parse_json, parse_json_windows

REAL_LOGS = Path(__file__).resolve().parents[1] / "data" / "real-logs"
WINDOWS = (1, 2, 7, 23, 64, 300)
WORDS = (
    "hello",
    "w\u00f6rld",
    "\U0001f600 emoji",
    "tab\\t",
    'q\\"uote',
    "\\ud83d\\ude00",
    "\\n",
    "\u65e5",
)
DAMAGE = ('"', ",", "{", "}", "[", "]", ":", "x", "\\", "\n", "1e5", "null", "    \n    ", "-")


def shape(node: SNode | None) -> Any:
    """Everything a parse says of a node, nested (ranges compared by value)."""
    if node is None:
        return None
    return (
        node.kind,
        node.range,
        node.value if node.kind not in ("object", "array") else None,
        tuple(shape(i) for i in node.items),
        tuple((m.key, m.key_range, shape(m.value)) for m in node.members),
        node.starts,
        node.error_counts,
    )


def outcome(parsed: syntax.ParsedData) -> Any:
    return shape(parsed.root), parsed.errors, parsed.tokens


def generated(rng: random.Random) -> str:
    messages = []
    for i in range(rng.randint(0, 10)):
        content = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 25)))
        role = rng.choice(["user", "assistant", "tool"])
        messages.append(f'{{"id": "m{i}", "role": "{role}", "content": "{content}"}}')
    listing = "[" + rng.choice([",\n  ", ", ", ",", ",\n" + " " * 40]).join(messages) + "]"
    if rng.random() < 0.3:
        return listing
    return (
        '{"settings": {"max_tokens": 100, "a": [1, 2, 3]}, "messages": '
        + listing
        + ', "tools": [{"name": "x"}], "z": "end"}'
    )


def damaged(rng: random.Random, text: str) -> str:
    for _ in range(rng.randint(0, 4)):
        at = rng.randrange(len(text) + 1)
        if rng.random() < 0.4:
            text = text[:at] + text[min(len(text), at + rng.randint(1, 6)) :]
        else:
            text = text[:at] + rng.choice(DAMAGE) + text[at:]
    return text


def assert_windows_agree(text: str) -> None:
    whole = outcome(parse_json(text, messages=True))
    for window in WINDOWS:
        assert outcome(parse_json_windows(text, messages=True, window=window)) == whole, window
        if text:
            rope = Rope.from_parts([text], chunk_size=16)
            assert outcome(parse_json_windows(rope, messages=True, window=window)) == whole


@pytest.mark.parametrize("seed", range(4))
def test_windows_agree_with_the_whole_parse_on_damaged_conversations(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(60):
        assert_windows_agree(damaged(rng, generated(rng)))


def test_windows_agree_with_the_whole_parse_after_a_byte_order_mark() -> None:
    """A text an editor sent with its BOM (U+FEFF first, read as whitespace), damaged or
    not: the windows read what the whole parse reads, and the BOM hides no message."""
    rng = random.Random(7)
    for _ in range(60):
        text = generated(rng)
        assert_windows_agree("\ufeff" + damaged(rng, text))
        plain, marked = parse_json(text, messages=True), parse_json("\ufeff" + text, messages=True)
        assert marked.errors == () and plain.errors == ()
        assert marked.root is not None and plain.root is not None
        assert marked.root.range.start == plain.root.range.start + 1


def test_windows_agree_at_the_token_and_message_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``MAX_JSON_TOKENS`` the rest is not read, past ``MAX_TOP_ITEMS`` the items are
    skipped unread: both where the whole parse stops."""
    monkeypatch.setattr(syntax, "MAX_JSON_TOKENS", 40)
    monkeypatch.setattr(syntax, "MAX_TOP_ITEMS", 3)
    rng = random.Random(99)
    for _ in range(80):
        assert_windows_agree(damaged(rng, generated(rng)))


def test_windows_agree_on_the_real_request_logs() -> None:
    files = sorted(REAL_LOGS.rglob("*.json"))
    assert len(files) >= 5
    for path in files:
        text = path.read_text(encoding="utf-8")
        whole = outcome(parse_json(text, messages=True))
        for window in (64, 4096):
            assert outcome(parse_json_windows(text, messages=True, window=window)) == whole


class Slices:
    """A text that records the longest slice read from it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.longest = 0

    def __len__(self) -> int:
        return len(self.text)

    def __getitem__(self, key: slice) -> str:
        piece = self.text[key]
        self.longest = max(self.longest, len(piece))
        return piece


def test_a_long_conversation_is_read_in_windows_of_its_size_not_whole() -> None:
    messages = [
        {"id": f"m{i}", "role": "user", "content": f"message {i} \U0001f600 " * 20}
        for i in range(2000)
    ]
    # One message longer than a window: read again from a window that holds it.
    messages[700]["content"] = "long " * 3000
    text = json.dumps({"settings": {"max_tokens": 10}, "messages": messages}, indent=1)
    source = Slices(text)
    parsed = parse_json_windows(source, messages=True, window=8192)
    assert outcome(parsed) == outcome(parse_json(text, messages=True))
    assert len(text) > 100 * 8192
    assert source.longest <= 2 * len(json.dumps(messages[700], indent=1)) + 8192


@pytest.mark.parametrize("damage", [None, "open string", "missing comma"])
def test_an_item_longer_than_its_window_is_read_again_by_the_scanner_not_parsed(
    monkeypatch: pytest.MonkeyPatch, damage: str | None
) -> None:
    """A message that runs past its window (here thousands of keys: a hostile one had
    200,000) is read again from a larger window by the C scanner: the parser reads no
    token of it (it read each window to its end first: 4.7 s against 0.7 for a whole
    parse of the 2.4 MB one). Damaged, it is left to the parser, as it was; the result
    equals the whole parse's either way."""
    messages = [{"id": f"m{i}", "role": "user", "content": f"hi {i}"} for i in range(40)]
    messages[20].update({f"k{i}": i for i in range(3000)})
    text = json.dumps({"messages": messages})
    if damage == "open string":  # the last message's text never closed
        text = text[: text.rindex('"hi 39"') + 3]
    elif damage == "missing comma":
        text = text.replace(', "k1500"', ' "k1500"', 1)
    members = 0
    real = syntax.JsonParser._members

    def counting(self: Any, *args: Any) -> Any:
        nonlocal members
        members += 1
        return real(self, *args)

    monkeypatch.setattr(syntax.JsonParser, "_members", counting)
    parsed = parse_json_windows(Slices(text), messages=True, window=4096)
    read_by_parser = members
    monkeypatch.setattr(syntax.JsonParser, "_members", real)
    assert outcome(parsed) == outcome(parse_json(text, messages=True))
    assert len(json.dumps(messages[20])) > 10 * 4096
    if damage is None:
        assert read_by_parser == 1  # the document's object, not a message
    else:
        assert read_by_parser > 1


def test_an_editors_rope_is_parsed_in_windows_with_the_whole_parses_result() -> None:
    messages = [
        {"role": "user", "content": f"{i} \u00e9t\u00e9 \U0001f600 " * 4} for i in range(15_000)
    ]
    text = json.dumps({"messages": messages})
    assert len(text) > syntax.WINDOW_CHARS
    conv = parse_conversation(Rope.from_parts([text]), DocFormat.JSON)
    same = parse_conversation(text, DocFormat.JSON)
    assert conv.message_data == same.message_data and conv.starts == same.starts
    assert conv.issues == same.issues and len(conv.message_data) == 15_000


def test_ranges_inside_messages_are_shared_values() -> None:
    """One ``RelRange`` object for each place inside the messages the parser reads
    (``syntax._rel``; here a duplicate key makes it read them); the role values are one
    object whoever reads them."""
    text = json.dumps([{"role": "user", "content": "same"} for _ in range(3)])
    text = text.replace('"content"', '"content": "x", "content"')
    holder = parse_json(text, messages=True).root
    assert holder is not None
    ranges = [item.members[0].key_range for item in holder.items]
    assert type(ranges[0]) is syntax.RelRange
    assert ranges[0] == ranges[1] == ranges[2] and ranges[0] is ranges[1] is ranges[2]
    for doc in (text, json.dumps([{"role": "user", "content": "same"} for _ in range(3)])):
        holder = parse_json(doc, messages=True).root
        roles = [item.get("role").value for item in holder.items]  # type: ignore[union-attr]
        assert roles[0] is roles[1] is roles[2]


def test_content_after_the_document_is_one_finding_and_is_not_read() -> None:
    """A message list closed early (by a deletion from a message's text into a later
    one's) leaves the rest of the conversation after the document: one finding at its
    first token, however many values follow, and nothing after it is read (a bad string
    there is no finding of its own); the windows, cut inside that first token too, agree."""
    head = '{"messages": [{"role": "user", "content": "a"}]}'
    rest = ', {"role": "user", "content": "b"}' * 40 + "]}"
    bad = ', "tab\there", ]]'
    for tail, first in (
        (rest, ","),
        (bad, ","),
        (' "a long string that windows cut" , 1', '"a long string that windows cut"'),
        (" nonsense{", "nonsense"),
    ):
        text = head + tail
        parsed = parse_json(text, messages=True)
        at = text.index(first, len(head))
        assert [(e.message, e.range.start, e.range.end) for e in parsed.errors] == [
            ("unexpected content after the end of the document", at, at + len(first))
        ], tail
        assert_windows_agree(text)


def _to_end_cases(text: str) -> list[tuple[int, int, set[str] | None, tuple[int, int]]]:
    """Where the incremental re-read may start a parse to the document's end: the list's
    opening bracket and each item's start (``incremental._reparse_list``'s arguments)."""
    root = parse_json(text, messages=True).root
    if root is None:
        return []
    if root.is_array:
        holder, depth, keys = root, 0, None
    else:
        where = [j for j, m in enumerate(root.members) if m.key == "messages"]
        if not root.is_object or len(where) != 1 or not root.members[where[0]].value.is_array:
            return []
        holder, depth = root.members[where[0]].value, 1
        keys = {m.key for m in root.members[: where[0]]} | {"messages"}
    bounds = (holder.range.start, root.range.start)
    return [(at, depth, keys, bounds) for at in (holder.range.start + 1, *(holder.starts or ()))]


def _parsed(res: syntax.MessagesParse | None) -> Any:
    if res is None:
        return None
    return (
        tuple(map(shape, res.items)),
        res.starts,
        res.counts,
        res.errors,
        res.tokens,
        res.resynced,
        shape(res.holder),
        shape(res.rest),
    )


@pytest.mark.parametrize("seed", range(2))
def test_a_parse_to_the_end_in_windows_agrees_with_one_of_the_whole_rest(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The re-read's parse from an item to the document's end, reading a window at a time
    (what follows the list from one window first, read again to the end when the parse
    reaches its end), gives what parsing the whole rest at once gives; with a ``reach``, it
    gives that or None."""
    rng = random.Random(seed)
    texts = [damaged(rng, generated(rng)) for _ in range(25)]
    texts.append(generated(rng) + ", " + generated(rng) * 3)  # a list ended, much after it
    for window in (1, 7, 64):
        monkeypatch.setattr(syntax, "WINDOW_CHARS", window)
        for text in texts:
            for at, depth, keys, bounds in _to_end_cases(text):
                want = _parsed(
                    syntax.parse_messages(text[at:], at, depth, keys, bounds, window=False)
                )
                rope = Rope.from_parts([text], chunk_size=16)
                for source in (text, rope):
                    got = syntax.parse_messages_to_end(source, at, depth, keys, bounds)
                    assert _parsed(got) == want, (window, at)
                near = syntax.parse_messages_to_end(text, at, depth, keys, bounds, reach=at)
                assert near is None or _parsed(near) == want
