"""The prose patterns that run over whole prompts start where the regex engine can skip to.

CPython's regex engine scans for a pattern's possible first characters quickly only when
the pattern starts with a character, a class of them, or alternatives that each start
with one; with ``\\b``, a lookahead or a lookbehind first it tries a whole match at every
character. The hot patterns of the instruction rule and the sentence splitter are
written that way (``_word_at_start``, ``_names_at_start``): these tests check that they
find exactly what the plain formulation finds, and that the compiled patterns do carry a
start the engine can skip to.
"""

from __future__ import annotations

import re
from re import _compiler, _constants, _parser

from hypothesis import example, given, settings
from hypothesis import strategies as st

from assembly import prompts
from assembly.diagnostics.rules import instructions

# Letters of the words below, their neighbours in prose, and characters whose case or
# width is unusual (`İ` lowers to two characters, `ß` uppers to two).
_ALPHABET = "acdeilnorsuvtxACILRU_-.`'\" \n\t()。！？!?”’İßé0"
_TEXTS = st.text(alphabet=_ALPHABET, max_size=60)
_WORDS = st.lists(st.text(alphabet="acilnorsuvx_", min_size=1, max_size=7), min_size=1, max_size=6)


def _spans(pattern: re.Pattern[str], text: str, pos: int = 0) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(text, pos)]


def _skips_to_start(pattern: re.Pattern[str]) -> bool:
    """The compiled pattern has a literal prefix or a set of first characters."""
    code = _compiler._code(_parser.parse(pattern.pattern, pattern.flags), pattern.flags)
    wanted = _constants.SRE_INFO_PREFIX | _constants.SRE_INFO_CHARSET
    return bool(code[2] & wanted)


@settings(max_examples=400, deadline=None)
@given(words=_WORDS, text=_TEXTS, ignore_case=st.booleans(), pos=st.integers(0, 5))
@example(words=["i"], text="İ", ignore_case=True, pos=0)  # `İ` lowers to `i` (found by CI)
@example(words=["skip"], text="ſkip", ignore_case=True, pos=0)
def test_a_word_at_start_is_found_as_after_a_word_boundary(
    words: list[str], text: str, ignore_case: bool, pos: int
) -> None:
    words = list(dict.fromkeys(w for w in words if w[0].isalpha()))
    if not words:
        return
    flags = "i" if ignore_case else ""
    plain = re.compile(rf"\b(?{flags}:{'|'.join(map(re.escape, words))})")
    ours = re.compile(instructions._word_at_start(words, ignore_case=ignore_case))
    assert _spans(ours, text, pos) == _spans(plain, text, pos)


@settings(max_examples=400, deadline=None)
@given(names=_WORDS, text=_TEXTS, pos=st.integers(0, 5))
def test_names_at_start_are_found_as_after_the_lookbehind(
    names: list[str], text: str, pos: int
) -> None:
    names = sorted(set(names), key=len, reverse=True)
    plain = re.compile(rf"(?<![a-z0-9_-])({'|'.join(map(re.escape, names))})")
    ours = re.compile(rf"({instructions._names_at_start(names)})")
    low = instructions._lowered(text)
    assert [(m.span(), m.group(1)) for m in ours.finditer(low, pos)] == [
        (m.span(), m.group(1)) for m in plain.finditer(low, pos)
    ]


@settings(max_examples=400, deadline=None)
@given(text=_TEXTS, pos=st.integers(0, 5), cut=st.integers(0, 5))
def test_sentence_ends_are_those_of_the_plain_pattern(text: str, pos: int, cut: int) -> None:
    plain = re.compile(r"[.!?]+[\"'”’»)\]*_`]*(?=\s|\Z)|[。！？]+[\"'”’」』）)\]*_]*")
    end = max(pos, len(text) - cut)
    assert [m.span() for m in prompts._SENTENCE_END.finditer(text, pos, end)] == [
        m.span() for m in plain.finditer(text, pos, end)
    ]


def test_the_patterns_run_over_whole_prompts_start_where_the_engine_skips_to() -> None:
    patterns = [
        prompts._SENTENCE_END,
        instructions._CALLED,
        instructions._CALLED_PASCAL,
        instructions._NAMED_AS_TOOL,
        *instructions._NAMED_TOOL,
        *instructions._tool_finders(["read_file", "web_search", "lookup", "search"]),
        *instructions._tool_finders([f"tool_{i}" for i in range(100)] + ["lookup"]),
    ]
    slow = [p.pattern for p in patterns if not _skips_to_start(p)]
    assert slow == []
    # (and the check itself tells the two kinds apart)
    assert not _skips_to_start(re.compile(r"(?=[cu])\b(?:call|use)"))


@settings(max_examples=400, deadline=None)
@given(text=st.text(alphabet="ab_-.1 \n`Éé", max_size=40))
def test_a_text_without_a_dot_before_a_letter_has_no_dotted_name(text: str) -> None:
    # (``_content_words`` looks for dotted names only where the quick test finds one)
    if instructions._DOT_LETTER.search(text) is None:
        assert instructions._DOTTED.findall(text) == []


def test_dotted_names_are_content_words() -> None:
    words = instructions._content_words("Edit config.yaml, then read AGENTS.md.")
    assert {"config.yaml", "agents.md"} <= words


def test_the_characters_that_fold_to_ascii_letters_are_all_known() -> None:
    """Ignoring case, the regex engine takes four characters outside ASCII for ASCII
    letters; ``_word_at_start`` puts them in its class of first letters."""
    letter = re.compile("(?i:[a-z])")
    found = {chr(c) for c in range(0x80, 0x110000) if letter.fullmatch(chr(c))}
    assert found == set(instructions._ASCII_CASE_KIN)
