"""``assembly.rope``: a ``Rope`` behaves as the ``str`` it stands for, after any edits.

Hypothesis builds texts from pieces that matter for offsets and lines (``\\n``, ``\\r\\n``,
a lone ``\\r``, CJK, an emoji outside the BMP, U+2028, which is *not* a line break here,
Latin-1, a lone surrogate),
cuts them into tiny chunks so every operation crosses chunk boundaries, applies random
edit sequences, and ``check_rope`` compares every operation with the same one on the plain
``str`` (and the line functions with ``assembly.text.LineIndex``). A seeded run of edits
over the conversation fixtures and examples does the same with realistic text.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assembly import rope as rope_module
from assembly.rope import Rope, _mark_step, _plain
from assembly.text import LineCol, LineIndex

ROOT = Path(__file__).resolve().parents[2]
# "é" keeps a chunk a one-byte ``str``; CJK, an emoji or a lone surrogate (a JSON "\\ud800"
# escape) make it one stored as UTF-8 (``rope._packed``).
PIECES = ("a", "b", "ab", " ", "\n", "\r\n", "\r", "中文", "😀", "\u2028", "{", "}", "\n\n")
PIECES += ("é", "\ud800")
# Each example compares some 5,000 reads of the rope with the str's (every index, every
# slice around every offset, a dozen needles at 81 bound pairs, every line and column):
# 150 examples over 13 pieces and 7 chunk sizes. ROPE_EXAMPLES=2000 for a deeper run.
PROPERTY = settings(
    max_examples=int(os.environ.get("ROPE_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

texts = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)
chunk_sizes = st.sampled_from([1, 2, 3, 4, 7, 16, 1024])


def check_rope(rope: Rope, text: str, data: st.DataObject | None = None) -> None:
    """Every reading of ``rope`` agrees with ``text``."""
    n = len(text)
    assert len(rope) == n
    assert str(rope) == text
    assert rope == text
    assert rope == Rope.from_str(text, chunk_size=5)
    assert list(rope) == list(text)
    for i in range(-n, n):
        assert rope[i] == text[i]
    for i in (n, -n - 1):
        with pytest.raises(IndexError):
            rope[i]
    for a in range(-2, n + 3):
        for b in (a, a + 1, a + 3, n, n + 2, -1, None):
            assert rope[a:b] == text[a:b], (a, b)
    assert rope[::2] == text[::2]
    # find / rfind / startswith / endswith, bounds as str takes them
    subs = {"", "\n", "\r\n", "a", "aa", "\n\n", "ab", "😀", "\u2028", "zz", text[1:4], text[-3:]}
    bounds = [0, 1, n // 2, n - 1, n, n + 1, -1, -3, None]
    for sub in subs:
        assert (sub in rope) == (sub in text)
        for start in bounds:
            for end in bounds:
                assert rope.find(sub, start, end) == text.find(sub, start, end), (sub, start, end)
                assert rope.rfind(sub, start, end) == text.rfind(sub, start, end), (
                    sub,
                    start,
                    end,
                )
                assert rope.count(sub, start, end) == text.count(sub, start, end)
                assert rope.startswith(sub, start, end) == text.startswith(sub, start, end)
                assert rope.endswith(sub, start, end) == text.endswith(sub, start, end)
    # the line index: lines end after "\n", "\r\n" or a lone "\r", as in LSP
    index = LineIndex(text)
    lines = re.split(r"\r\n|\r|\n", text)
    assert rope.line_count == index.line_count == len(lines)
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    for line in range(-1, rope.line_count + 2):
        assert rope.line_start(line) == index.line_start(line)
        if 0 <= line < len(starts):
            assert index.line_start(line) == starts[line]
        expected_text = lines[line] if 0 <= line < len(lines) else ""
        assert rope.line_text(line) == expected_text
        for column in (-1, 0, 1, 2, 5, 100):
            assert rope.offset_at(line, column) == index.offset(line, column), (line, column)
            assert rope.offset(line, column) == index.offset(line, column)
    few = LineIndex(text, few=True)
    for offset in range(-1, n + 2):
        assert rope.line_col(offset) == index.line_col(offset), offset
        line = index.line_col(offset).line
        assert rope.line_of(offset) == index.line_of(offset) == few.line_of(offset) == line
        if 0 <= offset <= n:  # the line, column and text from the line's start to a stop
            lc = index.line_col(offset)
            line, column = lc.line, lc.column
            for stop in {offset, min(offset + 1, n), min(offset + 40, n), n}:
                head = (line, column, 0, text[offset - column : stop])
                assert rope.line_head(offset, stop) == head, (offset, stop)
                # A long column leaves the line's first multiple of ``step`` out (less than
                # the column: the character before the offset stays in the text).
                for step in (1, 3, 7):
                    skip = (column - 1) // step * step if column > step else 0
                    head = (line, column, skip, text[offset - column + skip : stop])
                    assert rope.line_head(offset, stop, step) == head, (offset, stop, step)
    if data is not None:  # a few more random slices
        for _ in range(5):
            a = data.draw(st.integers(-n - 2, n + 2))
            b = data.draw(st.integers(-n - 2, n + 2))
            assert rope[a:b] == text[a:b]


def expected_span(old: str, new: str) -> tuple[int, int, int]:
    """The longest common prefix, then the longest common suffix that does not overlap it."""
    limit = min(len(old), len(new))
    p = 0
    while p < limit and old[p] == new[p]:
        p += 1
    s = 0
    while s < limit - p and old[-1 - s] == new[-1 - s]:
        s += 1
    return p, len(old) - s, len(new) - s


def edit_of(data: st.DataObject, n: int) -> tuple[int, int, str]:
    start = data.draw(st.integers(0, n))
    end = data.draw(st.integers(start, n))
    return start, end, data.draw(texts)


@PROPERTY
@given(texts, chunk_sizes, st.data())
def test_a_rope_reads_as_its_text(text: str, chunk_size: int, data: st.DataObject) -> None:
    check_rope(Rope.from_str(text, chunk_size=chunk_size), text, data)


@PROPERTY
@given(texts, chunk_sizes, st.data())
def test_edits_give_the_edited_text_and_their_span(
    text: str, chunk_size: int, data: st.DataObject
) -> None:
    rope = Rope.from_str(text, chunk_size=chunk_size)
    for _ in range(data.draw(st.integers(1, 6))):
        start, end, new = edit_of(data, len(text))
        edited = text[:start] + new + text[end:]
        res = rope.edit(start, end, new)
        assert str(res) == edited
        assert res.changed_span(rope) == expected_span(text, edited)
        assert rope.changed_span(res) == expected_span(edited, text)
        assert str(rope) == text, "editing never changes the rope edited"
        rope, text = res, edited
    check_rope(rope, text, data)


@PROPERTY
@given(texts, texts, chunk_sizes)
def test_span_between_unrelated_ropes(old: str, new: str, chunk_size: int) -> None:
    a, b = Rope.from_str(old, chunk_size=chunk_size), Rope.from_str(new, chunk_size=3)
    assert b.changed_span(a) == expected_span(old, new)
    assert (a == b) == (old == new)


@PROPERTY
@given(texts, texts, chunk_sizes)
def test_with_text_gives_the_new_text(old: str, new: str, chunk_size: int) -> None:
    rope = Rope.from_str(old, chunk_size=chunk_size)
    res = rope.with_text(new)
    check_rope(res, new)
    assert res.changed_span(rope) == expected_span(old, new)


def test_an_edit_shares_the_chunks_it_does_not_touch() -> None:
    text = "".join(f"line {i} 😀 中文\r\n" for i in range(5000))
    rope = Rope.from_str(text, chunk_size=256)
    offset = text.index("line 2500")
    res = rope.edit(offset, offset + 4, "LINE")
    shared = {id(c) for c in rope._chunks} & {id(c) for c in res._chunks}
    assert len(shared) >= len(rope._chunks) - 3
    assert res.changed_span(rope) == (offset, offset + 4, offset + 4)
    check_edit_sequence(text, chunk_size=256, n_edits=30, seed=7)


def test_full_replacement_shares_chunks_outside_the_change() -> None:
    text = "".join(f'{{"id": "m{i}", "content": "text {i}"}}\n' for i in range(3000))
    rope = Rope.from_str(text, chunk_size=512)
    at = text.index('"text 1500"') + 1
    res = rope.with_text(text[:at] + "x" + text[at:])
    assert res.changed_span(rope) == (at, at, at + 1)
    shared = {id(c) for c in rope._chunks} & {id(c) for c in res._chunks}
    assert len(shared) >= len(rope._chunks) - 3


def test_a_chunk_with_one_emoji_is_not_stored_four_bytes_a_character() -> None:
    """Nearly every chunk of a conversation holds an emoji, which makes a ``str`` four
    bytes a character: the chunks keep the smaller of the ``str`` and its UTF-8, and still
    read, edit and compare as the text."""
    line = "plain ASCII text of a message, written by someone; " * 40 + "😀\n"
    text = line * 500  # about 1 M characters, an emoji every 2,000
    rope = Rope.from_str(text)
    stored = sum(sys.getsizeof(c.data) for c in rope._chunks)
    assert stored < 1.1 * len(text.encode())  # as a str: 4 bytes a character
    latin = "é" * 100_000 + "\n"  # a one-byte str is smaller than its UTF-8: kept
    assert all(type(c.data) is str for c in Rope.from_str(latin * 3)._chunks)
    cjk = "中文" * 50_000 + "\n"  # two bytes a character as a str, three in UTF-8: kept
    assert all(type(c.data) is str for c in Rope.from_str(cjk * 3)._chunks)
    at = text.index("😀", len(text) // 2)
    edited = rope.edit(at, at + 1, "👋 x")
    assert str(edited) == text[:at] + "👋 x" + text[at + 1 :]
    assert edited.changed_span(rope) == (at, at + 1, at + 3)
    assert rope == Rope.from_str(text, chunk_size=777)
    check_edit_sequence(text[:50_000], chunk_size=1000, n_edits=30, seed=11)


def test_needles_across_packed_chunks() -> None:
    """``find``, ``rfind`` and ``count`` skip a packed chunk, and the seam between two
    chunks, without decoding them only when the needle's UTF-8 is not there: needles cut
    from the text at every seam are found as in the ``str``."""
    rng = random.Random(5)
    text = "".join(rng.choice(PIECES) for _ in range(3000))
    for size in (8, 64):
        rope = Rope.from_str(text, chunk_size=size)
        seams = list(itertools.accumulate(c.n for c in rope._chunks))[:-1]
        assert any(type(c.data) is bytes for c in rope._chunks)
        for seam in seams[:: max(1, len(seams) // 30)]:
            for m in (2, 3, 5, 9):
                for sub in {text[seam - k : seam - k + m] for k in range(1, m)} | {"z\u2028z"}:
                    for lo, hi in ((0, len(text)), (seam - m, seam + m), (seam, len(text))):
                        assert rope.find(sub, lo, hi) == text.find(sub, lo, hi)
                        assert rope.rfind(sub, lo, hi) == text.rfind(sub, lo, hi)
                        assert rope.count(sub, lo, hi) == text.count(sub, lo, hi)


def test_slices_of_packed_chunks_decode_only_about_the_slice() -> None:
    """A slice of a packed chunk, once its byte marks are made, decodes only the bytes
    between the marks around it: every slice (and character) reads as the ``str``'s with
    the memo of whole decoded chunks empty, for chunks of 1 to 2,000 code points (a mark
    every 1 to 32 code points), emoji, CJK, a lone surrogate and line breaks at the marks."""
    rng = random.Random(8)
    text = "".join(rng.choice(PIECES) for _ in range(4000))
    for size in (1, 5, 64, 1000):
        rope = Rope.from_str(text, chunk_size=size)
        assert any(type(c.data) is bytes for c in rope._chunks)
        str(rope[:])  # the first read of each chunk makes its marks
        for c in rope._chunks:
            rope_module._DECODED.clear()
            c.sub(0, 1)
            assert type(c.data) is str or c._marks is not None
        bounds = sorted({0, len(text), *(rng.randrange(len(text) + 1) for _ in range(300))})
        for a in bounds:
            for b in (a, a + 1, a + 2, a + 37, a + 700):
                rope_module._DECODED.clear()
                assert rope[a:b] == text[a:b], (size, a, b)
            if a < len(text):
                rope_module._DECODED.clear()
                assert rope[a] == text[a]
        for c in rope._chunks:  # each chunk alone, at every pair of offsets near its marks
            whole = _plain(c)
            step = _mark_step(c.n)
            near = sorted({x for k in range(0, c.n + 1, step) for x in (k - 1, k, k + 1)})
            near = [x for x in near if 0 <= x <= c.n]
            for a in near[:12]:
                for b in near:
                    if a <= b:
                        rope_module._DECODED.clear()
                        assert c.sub(a, b) == whole[a:b]


def test_empty_rope() -> None:
    rope = Rope.from_str("")
    check_rope(rope, "")
    assert rope.line_col(5).line == 0
    res = rope.edit(0, 0, "a\nb")
    check_rope(res, "a\nb")
    check_rope(res.edit(0, 3, ""), "")


def test_long_lines_are_cut_into_chunks() -> None:
    text = "x" * 5000 + "\r\n" + "y" * 3000
    rope = Rope.from_str(text, chunk_size=100)
    assert len(rope._chunks) > 30
    assert rope.line_count == 2
    assert rope.line_col(len(text)).column == 3000
    assert rope.offset_at(0, 10_000) == 5001  # before the "\n", after the "\r", as LineIndex
    assert rope.line_text(0) == "x" * 5000
    check_edit_sequence(text, chunk_size=100, n_edits=20, seed=3)


def fixture_texts() -> list[Path]:
    patterns = ("*.conv.json", "*.conv.jsonl", "*.conv.yaml", "*.prompt.md")
    dirs = (ROOT / "tests" / "data", ROOT / "examples")
    found = {p for d in dirs for pattern in patterns for p in d.rglob(pattern)}
    return sorted(found)[:40]


@pytest.mark.parametrize("path", fixture_texts(), ids=lambda p: str(p.relative_to(ROOT)))
def test_random_edits_on_fixtures(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    check_edit_sequence(text, chunk_size=64, n_edits=25, seed=len(text))


def check_edit_sequence(text: str, *, chunk_size: int, n_edits: int, seed: int) -> None:
    """Random small edits (typing, deleting, pasting lines) agree with ``str`` splicing."""
    rng = random.Random(seed)
    rope = Rope.from_str(text, chunk_size=chunk_size)
    for _ in range(n_edits):
        start = rng.randint(0, len(text))
        end = min(len(text), start + rng.choice([0, 0, 1, 2, 10, 200]))
        new = rng.choice(["", "x", "\n", "é", "😀", '"a": 1,\r\n', "line\n" * 50])
        edited = text[:start] + new + text[end:]
        res = rope.edit(start, end, new)
        assert res.changed_span(rope) == expected_span(text, edited)
        rope, text = res, edited
        assert len(rope) == len(text)
        for offset in rng.sample(range(len(text) + 1), min(20, len(text) + 1)):
            lc = rope.line_col(offset)
            assert rope.line_start(lc.line) + lc.column == offset
            assert rope.find("\n", offset) == text.find("\n", offset)
            assert rope.rfind("\n", 0, offset) == text.rfind("\n", 0, offset)
            assert rope[offset : offset + 30] == text[offset : offset + 30]
    assert str(rope) == text
    index = LineIndex(text)
    for offset in range(0, len(text) + 1, max(1, len(text) // 500)):
        assert rope.line_col(offset) == index.line_col(offset)


def test_a_crlf_is_never_cut_between_chunks() -> None:
    # Lone CRs are line ends (LSP); the "\r" of a "\r\n" is not. A chunk ending in "\r"
    # followed by one starting with "\n" would count that line end twice.
    text = ("x" * 9 + "\r") * 30 + "\n" + ("y\r" * 40)
    rope = Rope.from_str(text, chunk_size=10)
    check_rope(rope, text)
    rng = random.Random(7)
    for _ in range(300):
        start = rng.randint(0, len(text))
        end = min(len(text), start + rng.choice([0, 1, 2, 5]))
        new = rng.choice(["\r", "\n", "\r\n", "", "z"])
        rope, text = rope.edit(start, end, new), text[:start] + new + text[end:]
        chunks = [c.text for c in rope._chunks]
        assert not any(
            a.endswith("\r") and b.startswith("\n") for a, b in itertools.pairwise(chunks)
        )
        assert rope.line_count == len(re.split(r"\r\n|\r|\n", text))
    check_rope(rope, text)


@pytest.mark.parametrize("chunk_size", [1, 2, 3])
def test_a_deletion_that_brings_a_cr_to_an_lf_joins_their_chunks(chunk_size: int) -> None:
    # "\r" | "\r\n" | "\n" with the middle chunk deleted whole: no piece is left to test,
    # and the two chunks it brings together make one "\r\n" (a hypothesis run of
    # test_convert found it: the rope counted 3 lines in "\r\n" and carried LSP
    # positions one line too far).
    rope = Rope.from_str("\r\n", chunk_size=chunk_size).edit(1, 1, "\r\n")
    rope = rope.edit(1, 3, "")
    assert str(rope) == "\r\n"
    assert rope.line_count == 2
    check_rope(rope, "\r\n")
    text = "ab\r" + "x" * 7 + "\nc"
    rope = Rope.from_str("ab\r", chunk_size=chunk_size)
    rope = rope.edit(3, 3, "x" * 7).edit(10, 10, "\nc").edit(3, 10, "")
    assert str(rope) == text[:3] + text[10:]
    assert rope.line_count == 2
    check_rope(rope, text[:3] + text[10:])


def test_lone_cr_and_line_separators_as_lsp_defines_lines() -> None:
    text = "a\rb\r\nc\nd\u2028e\u2029f\x85g\r"
    rope, index = Rope.from_str(text, chunk_size=2), LineIndex(text)
    assert rope.line_count == index.line_count == 5  # \r, \r\n, \n, \r; nothing else
    assert [rope.line_text(i) for i in range(5)] == ["a", "b", "c", "d\u2028e\u2029f\x85g", ""]
    assert rope.line_col(text.index("b")) == index.line_col(text.index("b"))
    assert index.line_col(text.index("b")) == LineCol(1, 0)


def test_str_hands_over_the_source_once_and_keeps_no_joined_text() -> None:
    # An open document is parsed from the editor's copy of its text (handed over by the
    # first ``str``), and no rope keeps a joined copy of itself afterwards.
    text = "".join(f"line {i} 🦊\n" for i in range(400))
    rope = Rope.from_str(text, chunk_size=64)
    assert str(rope) is text
    again = str(rope)
    assert again == text and again is not text
    assert str(rope) is not again  # joined each time: the rope kept nothing
    edited = rope.edit(0, 4, "LINE")
    assert str(edited) == "LINE" + text[4:]
    assert str(Rope.from_str("short", chunk_size=64)) == "short"


@PROPERTY
@given(texts, chunk_sizes, st.data())
def test_a_rope_made_from_parts_is_the_rope_of_their_text(
    text: str, chunk_size: int, data: st.DataObject
) -> None:
    # Wherever the parts meet (a didOpen's text decoded window by window), the chunks are
    # those of the whole text, and the rope reads as it.
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=6)))
    parts = [text[a:b] for a, b in itertools.pairwise([0, *cuts, len(text)])]
    rope = Rope.from_parts(iter(parts), chunk_size=chunk_size)
    whole = Rope.from_str(text, chunk_size=chunk_size)
    assert [c.data for c in rope._chunks] == [c.data for c in whole._chunks]
    check_rope(rope, text, data)


def test_parts_are_packed_as_they_come() -> None:
    # Each part is cut into chunks (packed: one emoji a line) before the next is asked
    # for: the text never exists whole.
    made: list[int] = []

    def parts() -> Iterator[str]:
        for i in range(50):
            made.append(i)
            yield "".join(f"message {i}.{k} 🦊\n" for k in range(40))

    rope = Rope.from_parts(parts(), chunk_size=256)
    assert made == list(range(50))
    text = "".join("".join(f"message {i}.{k} 🦊\n" for k in range(40)) for i in range(50))
    assert str(rope) == text and rope == text
    assert all(type(c.data) is bytes for c in rope._chunks)  # packed: one emoji a line
    assert str(Rope.from_parts(iter(()))) == "" and len(Rope.from_parts([""])) == 0


def test_str_of_packed_chunks_is_joined_as_utf8_and_decoded_once() -> None:
    # Joining the decoded chunks would keep each decoded chunk alive beside the result.
    text = "".join(f"line {i} 🦊 é \ud800 ü\r\n" for i in range(300))
    rope = Rope.from_parts([text[:1000], text[1000:]], chunk_size=64)
    assert any(type(c.data) is bytes for c in rope._chunks)
    assert str(rope) == text
    latin = Rope.from_parts(["é" * 500], chunk_size=64)  # str chunks, not ASCII
    assert all(type(c.data) is str for c in latin._chunks) and str(latin) == "é" * 500
