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
    shorter length)."""
    n_old = len(old)
    lim = min(n_old, len(new))
    head = next(itertools.compress(itertools.count(), map(operator.is_not, old, new)), lim)
    lim -= head
    differs = map(operator.is_not, reversed(old[n_old - lim :]), reversed(new))
    tail = next(itertools.compress(itertools.count(), differs), lim)
    return head, tail
