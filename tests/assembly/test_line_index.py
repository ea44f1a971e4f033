"""``LineIndex(text, few=True)`` answers exactly what the whole index answers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from assembly.text import LineIndex

# Line breaks of every kind, U+2028 (not a break), astral characters, and plain letters;
# half of the texts without ``\r`` (the ones ``few`` does not index up front).
_PIECES = ["a", "é", "🦊", "\n", "\n\n", "\u2028", " "]
_TEXT = st.one_of(
    st.lists(st.sampled_from(_PIECES)).map("".join),
    st.lists(st.sampled_from([*_PIECES, "\r", "\r\n"])).map("".join),
)


@settings(max_examples=300, deadline=None)
@given(text=_TEXT, offsets=st.lists(st.integers(min_value=-3, max_value=80), max_size=12))
def test_few_positions_equal_the_whole_index(text: str, offsets: list[int]) -> None:
    whole = LineIndex(text)
    few = LineIndex(text, few=True)
    # In any order, repeated, past the end: the same lines and columns.
    assert [few.line_col(o) for o in offsets] == [whole.line_col(o) for o in offsets]
    assert [(few.line_col(o).line, few.line_col(o).column) for o in sorted(offsets)] == [
        (whole.line_col(o).line, whole.line_col(o).column) for o in sorted(offsets)
    ]
    assert few.line_count == whole.line_count  # the rest indexes the whole text
    assert [few.offset(line, 1) for line in range(-1, 4)] == [
        whole.offset(line, 1) for line in range(-1, 4)
    ]
    assert [few.line_col(o) for o in offsets] == [whole.line_col(o) for o in offsets]


def test_few_positions_of_a_large_text_are_not_indexed_up_front() -> None:
    text = "".join(f"line {i} 🦊\n" for i in range(100_000))
    few = LineIndex(text, few=True)
    at = text.index("line 77777 ")
    assert (few.line_col(at + 5).line, few.line_col(at + 5).column) == (77777, 5)
    assert (few.line_col(len(text)).line, few.line_col(len(text)).column) == (100_000, 0)
    assert few._starts == []  # no line table was built
    assert few.line_count == 100_001 and few._starts  # until the whole index is asked for
