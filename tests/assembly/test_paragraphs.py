"""``custom-prompt-in-system``'s paragraphs (``ordering._paragraphs``) are those of the
word-by-word definition: from the first non-space run of each blank-line-separated block to
the end of its last, every kind of Unicode space and line break included."""

from __future__ import annotations

import re
from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from assembly.diagnostics.rules.ordering import _paragraphs

_BREAK = re.compile(r"\n[ \t]*\n")
_WORD = re.compile(r"\S+")


def _reference(text: str) -> Iterator[tuple[int, int]]:
    pos = 0
    for brk in (*_BREAK.finditer(text), None):
        stop = brk.start() if brk is not None else len(text)
        words = list(_WORD.finditer(text, pos, stop))
        if words:
            yield words[0].start(), words[-1].end()
        if brk is not None:
            pos = brk.end()


# Spaces of every kind (ASCII, the separators \x1c-\x1f, NBSP, the Unicode spaces, line and
# paragraph separators), line breaks, and a few printable characters.
_CHARS = list(" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2007\u2028\u2029\u202f\u3000")
_CHARS += list("ab.-*\u200b\ufeff😀")


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(_CHARS), max_size=40))
def test_paragraphs_are_the_word_by_word_ones(text: str) -> None:
    assert list(_paragraphs(text)) == list(_reference(text))


def test_paragraphs_of_a_prompt() -> None:
    text = "  You are a helper.\n\n\u00a0Cite sources  \n \t\n\n   \nLast line\u2028 "
    assert list(_paragraphs(text)) == list(_reference(text)) == [(2, 19), (22, 34), (45, 54)]
