"""Where two versions of a sequence of immutable objects differ, found by identity.

The pipeline, the rule engine and the rules keep values made from the last version's
messages; each finds what an edit kept (the common head and tail, the same objects) in
passes at C speed and reads only the run between. This is that one search, and the one
way to pick a sequence's items at many positions (``picked``).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import TypeVar

_T = TypeVar("_T")


def picked(items: Sequence[_T], at: Sequence[int]) -> Sequence[_T]:
    """The items at the positions ``at``, in order: one call at C speed (``itemgetter``),
    several times faster than a map of ``__getitem__`` over thousands of positions."""
    if len(at) > 1:
        return operator.itemgetter(*at)(items)  # type: ignore[no-any-return]
    return tuple(map(items.__getitem__, at))


def common_ends(old: Sequence[object], new: Sequence[object]) -> tuple[int, int]:
    """``(head, tail)``: how many leading and how many trailing items ``old`` and ``new``
    share by identity; the tail never overlaps the head (``head + tail`` is at most the
    shorter length).

    The last few answers for two tuples are kept (they cannot change) until ``forget``:
    the pipeline, the rule engine and the rules ask it for the same two versions'
    messages (and model messages) in one analysis (``AnalysisHost`` forgets them at the
    end of each)."""
    if type(old) is tuple and type(new) is tuple:
        key = (id(old), id(new))
        hit = _KEPT.get(key)
        if hit is not None and hit[0] is old and hit[1] is new:
            return hit[2]
        found = _common_ends(old, new)
        if len(_KEPT) >= _KEEP:
            _KEPT.clear()
        _KEPT[key] = (old, new, found)
        return found
    return _common_ends(old, new)


def note(old: tuple[object, ...], new: tuple[object, ...], head: int, tail: int) -> None:
    """Tell ``common_ends`` its answer for two tuples that their maker knows (the re-read
    that replaced one message of ``old`` by a new object knows it found the rest), so no
    one scans them."""
    if len(_KEPT) >= _KEEP:
        _KEPT.clear()
    _KEPT[(id(old), id(new))] = (old, new, (head, tail))


def differing(old: Sequence[object], new: Sequence[object]) -> list[int]:
    """The indexes, in order, at which ``old`` and ``new`` (of one length) hold other
    objects: those of the run between their common ends (``common_ends``, kept), the
    only part read again."""
    n = len(new)
    if len(old) != n:
        raise ValueError("differing: sequences of one length")
    head, tail = common_ends(old, new)
    end = n - tail
    if end - head <= 1:
        return list(range(head, end))  # (a run of one: its ends differ)
    return list(
        itertools.compress(range(head, end), map(operator.is_not, old[head:end], new[head:end]))
    )


def apart(old: Sequence[object], new: Sequence[object]) -> int:
    """How far ``new`` is from ``old``, in items to make again: at one length, the places
    that hold other objects; else the items of either outside their common ends
    (``common_ends``: what a splice keeps)."""
    if len(old) == len(new):
        return list(map(operator.is_not, old, new)).count(True)
    head, tail = common_ends(old, new)
    return len(old) + len(new) - 2 * (head + tail)


def nearer(aside: Sequence[object], last: Sequence[object], new: Sequence[object]) -> bool:
    """Whether a memo made from ``aside`` serves ``new`` better than one made from ``last``
    (of another length than ``new``): its items to make again (``apart``), each weighed as
    ``_MAKE`` items to drop, are fewer than the items that came or went since ``last``
    (``apart`` of ``last`` is at least that)."""
    gap = abs(len(last) - len(new))
    if _MAKE * abs(len(aside) - len(new)) >= gap:
        return False  # (``apart`` is at least the difference of the lengths)
    if len(aside) == len(new) and gap <= _MAKE:  # none to make again: all the same objects
        return all(map(operator.is_, aside, new))  # (stops at the first other one)
    return _MAKE * apart(aside, new) < gap


# Items dropped from a memo that cost about as much as one made again (converted,
# checked): the pipeline and the rule engine, measured on the 10 MB YAML conversation.
_MAKE = 8

_KEEP = 8  # answers kept (the messages, the model messages, of two versions…)
_KEPT: dict[tuple[int, int], tuple[object, object, tuple[int, int]]] = {}


def forget() -> None:
    """Drop the kept answers (and the sequences they hold)."""
    _KEPT.clear()


def _common_ends(old: Sequence[object], new: Sequence[object]) -> tuple[int, int]:
    n_old = len(old)
    lim = min(n_old, len(new))
    head = next(itertools.compress(itertools.count(), map(operator.is_not, old, new)), lim)
    lim -= head
    differs = map(operator.is_not, reversed(old[n_old - lim :]), reversed(new))
    tail = next(itertools.compress(itertools.count(), differs), lim)
    return head, tail
