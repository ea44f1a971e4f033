"""Where two versions of a sequence of immutable objects differ, found by identity.

The pipeline, the rule engine and the rules keep values made from the last version's
messages; each finds what an edit kept (the common head and tail, the same objects) in
passes at C speed and reads only the run between. This is that one search.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence


def common_ends(old: Sequence[object], new: Sequence[object]) -> tuple[int, int]:
    """``(head, tail)``: how many leading and how many trailing items ``old`` and ``new``
    share by identity; the tail never overlaps the head (``head + tail`` is at most the
    shorter length).

    The last answer for two tuples is kept (they cannot change) until ``forget``: the
    pipeline, the rule engine and the rules ask it for the same two versions' messages
    in one analysis (``AnalysisHost`` forgets it at the end of each)."""
    if type(old) is tuple and type(new) is tuple:
        last = _LAST[0]
        if last[0] is old and last[1] is new:
            return last[2]
        found = _common_ends(old, new)
        _LAST[0] = (old, new, found)
        return found
    return _common_ends(old, new)


_NONE: tuple[object, object, tuple[int, int]] = ((), (), (0, 0))
_LAST = [_NONE]


def forget() -> None:
    """Drop the kept answer (and the two sequences it holds)."""
    _LAST[0] = _NONE


def _common_ends(old: Sequence[object], new: Sequence[object]) -> tuple[int, int]:
    n_old = len(old)
    lim = min(n_old, len(new))
    head = next(itertools.compress(itertools.count(), map(operator.is_not, old, new)), lim)
    lim -= head
    differs = map(operator.is_not, reversed(old[n_old - lim :]), reversed(new))
    tail = next(itertools.compress(itertools.count(), differs), lim)
    return head, tail
