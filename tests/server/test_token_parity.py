"""The fast counting backend (bpe-openai) counts exactly as the reference (tiktoken) does.

promptls counts ``cl100k_base``, ``o200k_base`` and ``o200k_harmony`` with bpe-openai's
compiled module when it is installed, and everything else with tiktoken. These tests run
both on every fixture and example of the repository (whole files and every string value
in them), the generated corpora, a hypothesis strategy of hostile Unicode and texts longer
than the million code points bpe-openai's own Python wrapper refuses, and fail on any
difference. The reference is built offline from the bundled files, like the runtime's.
The same texts hold the bound ``CachedTokenizer.at_most`` gives (a token a UTF-8 byte at
most).
"""

from __future__ import annotations

import json
import platform
import sys
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from assembly.tokens import CachedTokenizer
from server.tokenizers import fast_counter, load_tokenizer, reference_encoding

ROOT = Path(__file__).resolve().parents[2]
# Every check runs once per counting function: o200k_harmony counts ordinary text with
# o200k_base's function, and its reference with o200k_base's pattern and ranks, so its
# counts are o200k_base's (test_o200k_harmony_counts_ordinary_text_as_o200k_base).
DISTINCT = ("cl100k_base", "o200k_base")
TEXT_SUFFIXES = (".json", ".jsonl", ".yaml", ".yml", ".md", ".toml", ".txt", ".expected", ".py")
# bpe-openai publishes wheels for these (pyproject.toml installs it there).
FAST_PLATFORM = (sys.platform, platform.machine()) in {
    ("linux", "x86_64"),
    ("linux", "aarch64"),
    ("darwin", "arm64"),
    ("win32", "AMD64"),
}


@cache
def _pair(name: str) -> tuple[Callable[[str], int], Callable[[str], int]]:
    ref, reason = reference_encoding(name)
    assert ref is not None, f"tiktoken cannot build {name} offline: {reason}"
    fast = fast_counter(name)
    if FAST_PLATFORM:
        assert fast is not None, f"bpe-openai should count {name} on this platform"
    if fast is None:  # no wheel here: the runtime counts with tiktoken itself
        fast = _tiktoken(ref)
    return _tiktoken(ref), fast


def _tiktoken(enc: object) -> Callable[[str], int]:
    encode = enc.encode_ordinary  # type: ignore[attr-defined]
    return lambda text: len(encode(text))


def _differences(name: str, texts: Sequence[str]) -> list[tuple[str, int, int]]:
    ref, fast = _pair(name)
    out = []
    for t in texts:
        a, b = ref(t), fast(t)
        if a != b:
            out.append((t[:80], a, b))
    return out


def _strings(value: object) -> Iterator[str]:
    stack = [value]
    seen: set[int] = set()  # YAML aliases share objects: an alias bomb is walked once
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            yield v
        elif id(v) in seen:
            continue
        elif isinstance(v, dict):
            seen.add(id(v))
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            seen.add(id(v))
            stack.extend(v)


def _file_texts(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        text = path.read_bytes().decode("utf-8", "replace")
    texts = [text]
    name = path.name.lower()
    try:
        if name.endswith(".json"):
            texts.extend(_strings(json.loads(text)))
        elif name.endswith(".jsonl"):
            for line in text.splitlines():
                try:
                    texts.extend(_strings(json.loads(line)))
                except ValueError:
                    texts.append(line)
        elif name.endswith((".yaml", ".yml")):
            for doc in yaml.safe_load_all(text):
                texts.extend(_strings(doc))
    except (ValueError, yaml.YAMLError, RecursionError):
        pass  # a deliberately broken fixture: its whole text is compared
    return texts


@cache
def _corpus(*folders: str) -> tuple[str, ...]:
    """The texts of ``folders`` (read once per session: each encoding counts the same)."""
    texts: list[str] = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and path.name.lower().endswith(TEXT_SUFFIXES):
                texts.extend(_file_texts(path))
    return tuple(texts)


@pytest.mark.parametrize("encoding", DISTINCT)
def test_every_fixture_and_example_counts_the_same(encoding: str) -> None:
    texts = _corpus("tests/data", "examples", "assembly", "server", "client-vscode/src")
    assert len(texts) > 5_000  # whole files and every string value in them
    assert _differences(encoding, texts) == []


def test_o200k_harmony_counts_ordinary_text_as_o200k_base() -> None:
    # Both sides of the harmony pair are o200k_base's: the runtime's counting function is
    # the very same object, and tiktoken's ordinary encoding reads only the split pattern
    # and the ranks, which are equal (harmony adds special tokens, which ordinary text
    # never produces). So every parity check of o200k_base holds for o200k_harmony.
    assert fast_counter("o200k_harmony") is fast_counter("o200k_base")
    harmony, base = reference_encoding("o200k_harmony")[0], reference_encoding("o200k_base")[0]
    assert harmony._pat_str == base._pat_str
    assert harmony._mergeable_ranks == base._mergeable_ranks
    assert set(base._special_tokens) <= set(harmony._special_tokens)
    ref, fast = _pair("o200k_harmony")
    for text in ("<|endoftext|> <|start|>", "".join(HOSTILE), "hello world"):
        assert ref(text) == fast(text) == _pair("o200k_base")[0](text)


@pytest.mark.parametrize("encoding", DISTINCT)
def test_the_generated_corpora_count_the_same(encoding: str) -> None:
    texts = _corpus("tests/data/generated")
    assert len(texts) > 1_000
    ref, fast = _pair(encoding)
    assert sum(map(fast, texts)) == sum(map(ref, texts))
    assert _differences(encoding, texts) == []


# Pieces that stress the pre-tokenizer: every branch of both split patterns (contractions
# in both cases and with a typographic apostrophe, letter classes Lu/Lt/Lm/Lo/M, digit runs
# in several scripts, punctuation runs before line breaks and slashes, whitespace runs
# before and after non-space), grapheme clusters made of many code points, line and
# paragraph separators, zero-width characters, lone surrogates and special token texts.
HOSTILE = [
    "'s",
    "'S",
    "'ll",
    "'LL",
    "'ve",
    "'re",
    "'d",
    "'m",
    "'t",
    "’s",
    "''",
    "'",
    "ǅ",
    "ǈ",
    "ʰ",
    "ˢ",
    "々",
    "ー",
    "\u0301",
    "e\u0301",
    "\u093f",
    "ก",
    "\u0e31",
    "你好",
    "世界",
    "日本語",
    "ｶﾀｶﾅ",
    "한국어",
    "עברית",
    "العربية",
    "\u200f",
    "\u200e",
    "٣٤٥",
    "१२३",
    "١٢٣٤",
    "12345678",
    "3.14159",
    "1,000,000",
    "٠",
    "👨\u200d👩\u200d👧\u200d👦",
    "🏳️\u200d🌈",
    "🇯🇵",
    "🇺🇸🇬🇧",
    "👍🏽",
    "❤️",
    "🦊",
    "\u2028",
    "\u2029",
    "\u200b",
    "\u200c",
    "\u200d",
    "\ufeff",
    "\u00a0",
    "\u3000",
    "\u0085",
    "\x0b",
    "\x0c",
    "\t",
    "\r\n",
    "\r",
    "\n",
    "\n\n\n",
    "   ",
    " ",
    "  \n ",
    "\ud800",
    "\udfff",
    "\ud83d",
    "\ufffd",
    "\uffff",
    "\U0010ffff",
    "\ue000",
    "\x00",
    "<|endoftext|>",
    "<|endofprompt|>",
    "<|fim_prefix|>",
    "<|im_start|>",
    "!!!",
    "?!\n",
    "...",
    "—",
    "/**/",
    "//",
    "\\",
    "```",
    '{"a": [1, 2]}',
    "https://example.com/a/b?c=d",
    "C:\\path\\file.txt",
    "snake_case",
    "camelCaseWord",
    "HTTPServerError",
    "ALLCAPS",
    "Ünïcödé",
    "ÀÉÎÕÜ",
    "ß",
    "ẞ",
    "ﬁ",
    "Ⅻ",
    "ⓐ",
    "𝔘𝔫𝔦",
]
hostile_text = st.lists(
    st.one_of(
        st.sampled_from(HOSTILE),
        st.text(max_size=12),
        st.text(st.characters(codec="utf-8"), max_size=12),
        st.text(st.characters(categories=["Zs", "Cc", "Cf", "Mn", "Lm", "Lo", "Nd"]), max_size=6),
    ),
    max_size=40,
).map("".join)


@pytest.mark.parametrize("encoding", DISTINCT)
@settings(max_examples=600, deadline=None)
@given(text=hostile_text)
def test_hostile_unicode_counts_the_same(encoding: str, text: str) -> None:
    ref, fast = _pair(encoding)
    assert fast(text) == ref(text)


@pytest.mark.parametrize("encoding", DISTINCT)
def test_texts_beyond_a_million_code_points_count_the_same(encoding: str) -> None:
    # bpe-openai's Python wrapper refuses these ("Input too long to encode safely"); the
    # compiled module that promptls calls counts them whole, exactly as tiktoken does.
    corpus = "\n".join(_corpus("tests/data/generated", "examples"))
    mixed = "".join(HOSTILE) * 20
    texts = [
        (corpus * (1_100_000 // len(corpus) + 1))[:1_100_000],
        (mixed * (1_100_000 // len(mixed) + 1))[:1_100_000],
        "a" * 1_100_000,
        "\n" * 1_100_000,
        "7" * 1_100_001,
        "你" * 1_100_000,
    ]
    assert all(len(t) > 1_000_000 for t in texts)
    assert _differences(encoding, texts) == []


@pytest.mark.parametrize("encoding", DISTINCT)
def test_a_long_whitespace_run_counts_the_same_and_the_runtime_survives_longer_ones(
    encoding: str,
) -> None:
    # tiktoken's regex engine overflows its backtracking stack (a Rust panic, raised as a
    # BaseException) on about a million spaces followed by a word (o200k_base: on a long
    # run alone too); up to 800,000 it counts, and the two agree. promptls' backend counts
    # the longer runs too.
    assert _differences(encoding, [" " * 800_000 + "x", "\t" * 800_000 + "x"]) == []
    # Both split patterns cut " " * n + "x" into the run of n - 1 spaces (`\\s+(?!\\S)`)
    # and " x", and a run alone into itself (`\\s++$`, `\\s+(?!\\S)` at the end), so the
    # reference's count of the pieces is the count of the whole.
    ref, fast = _pair(encoding)
    n = 1_100_000
    whole = fast(" " * n + "x")
    assert whole == fast(" " * (n - 1)) + ref(" x")
    if encoding == "cl100k_base":  # tiktoken counts this run alone (`\s++$` takes it whole)
        assert whole == ref(" " * (n - 1)) + ref(" x")


# ``CachedTokenizer.at_most``: a text has at most as many tokens as UTF-8 bytes (each token
# of a byte-level BPE stands for one byte or more; a lone surrogate counts as U+FFFD's
# three). The pipeline skips counting project files whose bounds fit their share: it holds
# for every text the parity tests count, with both backends, in every encoding.


def _fresh(name: str) -> CachedTokenizer:
    """The runtime's tokenizer of ``name`` with nothing counted yet (``at_most`` of a
    text counted before is its count)."""
    loaded = load_tokenizer(name).tokenizer
    assert loaded.at_most("") == 0  # type: ignore[attr-defined]  # the runtime's has the bound
    return CachedTokenizer(loaded.counter, name, byte_level=True)  # type: ignore[attr-defined]


def _unbounded(name: str, texts: Sequence[str]) -> list[tuple[str, int, int]]:
    fresh = _fresh(name)
    out = []
    for counter in _pair(name):
        for t in texts:
            n, most = counter(t), fresh.at_most(t)
            if most is None or n > most:
                out.append((t[:80], n, -1 if most is None else most))
    return out


@pytest.mark.parametrize("encoding", DISTINCT)
def test_a_count_is_at_most_the_texts_utf8_length(encoding: str) -> None:
    texts = _corpus("tests/data", "examples", "tests/data/generated")
    assert _unbounded(encoding, [*texts, *HOSTILE, "", "\ud800", "a\udfffb"]) == []
    # The bound is a bound, not a count: it is reached by text made of one-byte tokens.
    fresh = _fresh(encoding)
    assert fresh.at_most("你好 world") == 12
    assert fresh.count("你好 world") < 12 and fresh.at_most("你好 world") == fresh.count(
        "你好 world"
    )


@pytest.mark.parametrize("encoding", DISTINCT)
@settings(max_examples=300, deadline=None)
@given(text=hostile_text)
def test_hostile_unicode_has_at_most_a_token_a_byte(encoding: str, text: str) -> None:
    assert _unbounded(encoding, [text]) == []
