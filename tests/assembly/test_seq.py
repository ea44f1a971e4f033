"""``assembly.seq.common_ends``: the common head and tail of two versions, by identity."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from assembly.seq import common_ends, forget

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
