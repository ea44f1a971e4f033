"""``assembly.seq``: the common head and tail of two versions, by identity, the indexes
where two versions of one length differ, and items picked at positions."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assembly.seq import apart, common_ends, differing, forget, nearer, note, picked

POOL = [object() for _ in range(6)]


def _naive(old: list[object], new: list[object]) -> tuple[int, int]:
    head = 0
    while head < min(len(old), len(new)) and old[head] is new[head]:
        head += 1
    tail = 0
    while (
        tail < min(len(old), len(new)) - head
        and old[len(old) - 1 - tail] is new[len(new) - 1 - tail]
    ):
        tail += 1
    return head, tail


@given(st.lists(st.sampled_from(POOL)), st.lists(st.sampled_from(POOL)))
def test_common_ends_is_the_longest_shared_head_then_tail(old: list, new: list) -> None:
    assert common_ends(old, new) == _naive(old, new)
    assert common_ends(tuple(old), tuple(new)) == _naive(old, new)


def test_identity_not_equality() -> None:
    a, b = [float("1000.5")], [float("1000.5")]
    assert a[0] == b[0] and a[0] is not b[0]
    assert common_ends(a, b) == (0, 0)
    x, y = object(), object()
    # A run removed in the middle: the head and the tail are found, never overlapping.
    assert common_ends([x, y, y, x], [x, x]) == (1, 1)
    assert common_ends([x, x, x], [x, x]) == (2, 0)


@given(st.lists(st.lists(st.sampled_from(POOL), max_size=6), min_size=2, max_size=6))
def test_the_kept_answer_is_only_for_the_same_two_tuples(versions: list[list]) -> None:
    """Asked again for the same two tuples (the kept answer) or for others, in any order,
    with ``forget`` between some: always the answer of a fresh search."""
    tuples = [tuple(v) for v in versions]
    for k, (old, new) in enumerate(itertools.pairwise(tuples)):
        assert common_ends(old, new) == _naive(list(old), list(new))
        assert common_ends(old, new) == _naive(list(old), list(new))
        assert common_ends(new, old) == _naive(list(new), list(old))
        if k % 2:
            forget()
    forget()


@given(st.lists(st.sampled_from(POOL), min_size=1), st.data())
def test_differing_is_every_index_holding_another_object(old: list, data: st.DataObject) -> None:
    """``differing``: of two sequences of one length, the indexes where the objects are not
    the same, in order (read from the run between the common ends, kept or not)."""
    new = data.draw(st.lists(st.sampled_from(POOL), min_size=len(old), max_size=len(old)))
    want = [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a is not b]
    assert differing(old, new) == want
    a, b = tuple(old), tuple(new)
    assert differing(a, b) == want
    assert differing(a, b) == want  # (the kept ends)
    forget()


def test_several_pairs_are_kept_at_once() -> None:
    """The answers for a few pairs are kept together (the messages and the model messages
    of two versions); each is its own pair's."""
    x, y = object(), object()
    pairs = [((x, x, y), (x, y, y)), ((y,) * 4, (y, y, x, y)), ((x,), (x,))]
    for _ in range(2):
        assert [differing(a, b) for a, b in pairs] == [[1], [2], []]
    forget()
    with pytest.raises(ValueError):
        differing((x,), (x, y))


def test_a_re_read_notes_what_it_kept_and_the_note_is_true() -> None:
    """``note``: the re-read that replaced one message, and the pipeline that patched its
    positions of the history, tell ``common_ends`` their answers (no scan); after a
    keystroke in a message of a real document each noted answer is the one a search
    finds, and ``forget`` drops it."""
    from pathlib import Path

    from assembly import seq
    from assembly.host import AnalysisHost, Edit
    from assembly.rope import Rope
    from tests.support.engine import analyze

    path = Path(__file__).resolve().parents[2] / "examples" / "support-agent.conv.json"
    text = path.read_text(encoding="utf-8")
    host = AnalysisHost()
    first = analyze(path, text=Rope.from_str(text), host=host)
    at = text.index('"content": "', len(text) // 2) + len('"content": "')
    noted: list[tuple[tuple, tuple, int, int]] = []
    real = seq.note

    def spy(a: tuple, b: tuple, head: int, tail: int) -> None:
        noted.append((a, b, head, tail))
        real(a, b, head, tail)

    seq.note = spy  # type: ignore[assignment]
    try:
        rope = Rope.from_str(text[:at] + "x" + text[at:])
        new = analyze(path, text=rope, host=host, edit=Edit.replace(at, at, "x"))
    finally:
        seq.note = real  # type: ignore[assignment]
    pairs = [(id(a), id(b)) for a, b, _, _ in noted]
    assert pairs == [
        (id(first.conversation.message_data), id(new.conversation.message_data)),
        (id(first.assembly.history), id(new.assembly.history)),
    ]
    for a, b, head, tail in noted:
        assert (head, tail) == seq._common_ends(a, b)
        assert head < len(b)  # (the edited message differs)
    forget()
    x = object()
    note((x,), (x, x), 1, 0)
    assert common_ends((x,), (x, x)) == (1, 0)


@given(st.lists(st.sampled_from(POOL), max_size=12), st.lists(st.sampled_from(POOL), max_size=12))
def test_apart_counts_the_items_to_make_again(old: list, new: list) -> None:
    """At one length the places holding other objects; else the items of both outside the
    common ends (all of one list ended early: the items it no longer holds)."""
    if len(old) == len(new):
        assert apart(old, new) == sum(a is not b for a, b in zip(old, new, strict=True))
    else:
        head, tail = _naive(old, new)
        assert apart(old, new) == len(old) + len(new) - 2 * (head + tail)
    assert apart(old, old[: len(old) // 2]) == len(old) - len(old) // 2


def test_a_memo_set_aside_is_nearer_only_by_a_margin() -> None:
    """A list that ended one item away is nearer than the whole one thousands went from;
    one that ended far away is not (making an item again costs more than dropping one)."""
    whole = [object() for _ in range(1_000)]
    ended, next_ended, far = whole[:500], whole[:501], whole[:800]
    assert nearer(ended, whole, next_ended)
    assert not nearer(ended, whole, far)  # 300 to make again against 200 to drop
    assert nearer(whole, ended, list(whole))  # the items came back: the whole one serves


@given(st.lists(st.integers(), max_size=40), st.data())
def test_picked_is_the_items_at_the_positions_in_order(
    items: list[int], data: st.DataObject
) -> None:
    at = data.draw(st.lists(st.integers(0, max(0, len(items) - 1)), max_size=60)) if items else []
    assert list(picked(items, at)) == [items[p] for p in at]
    assert list(picked(tuple(items), at)) == [items[p] for p in at]
