"""Token counting: the ``Tokenizer`` protocol, the model → encoding table and a count cache.

The tokenizer is built once by the caller (``server/tokenizers.py`` loads an encoding
offline and picks its counting backend) and passed down: ``assembly`` never loads
encodings, reads files or touches the network. ``CachedTokenizer`` memoises counts by
content, so an edit recounts only what changed; its memory is bounded by the texts only it
still holds (docs/tokens.md, "The count cache").

``model_encoding`` is the one table from model names to encodings. OpenAI's models map to
the encoding they use (as tiktoken's own table has them); other providers' models (Claude,
Gemini, Llama, Qwen, Mistral, DeepSeek…) and unknown names map to the tiktoken encoding
that approximates their tokenizer, marked ``approximate``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, Protocol

DEFAULT_ENCODING = "cl100k_base"
DEFAULT_MODEL = "gpt-4o"  # the ``model`` setting's default (``assembly.settings``)

# OpenAI model name prefixes -> encoding, as tiktoken's model table has them. A prefix
# matches the whole name or a name that goes on with a non-alphanumeric character
# (``gpt-4o-mini``, ``gpt-5.1``, ``o3-pro``); the longest matching prefix wins, so
# ``gpt-4.1`` and ``gpt-4o`` are not read as ``gpt-4``.
_OPENAI_ENCODINGS: Mapping[str, str] = {
    "gpt-5": "o200k_base",  # gpt-5, -mini, -nano, -pro, -codex, gpt-5.1 …
    "gpt-4.5": "o200k_base",
    "gpt-4.1": "o200k_base",  # gpt-4.1, -mini, -nano
    "gpt-4o": "o200k_base",  # gpt-4o, -mini, -audio, -realtime …
    "chatgpt-4o": "o200k_base",
    "o1": "o200k_base",
    "o3": "o200k_base",
    "o4-mini": "o200k_base",
    "codex-mini": "o200k_base",
    "gpt-oss": "o200k_harmony",
    "gpt-4": "cl100k_base",  # gpt-4, gpt-4-turbo, gpt-4-32k
    "gpt-3.5": "cl100k_base",
    "gpt-35-turbo": "cl100k_base",
    "text-embedding-3": "cl100k_base",
    "text-embedding-ada-002": "cl100k_base",
    "davinci-002": "cl100k_base",
    "babbage-002": "cl100k_base",
    "text-davinci-003": "p50k_base",
    "text-davinci-002": "p50k_base",
    "code-davinci-002": "p50k_base",
    "gpt2": "gpt2",
    "gpt-2": "gpt2",
}
_OPENAI_PREFIXES = sorted(_OPENAI_ENCODINGS, key=len, reverse=True)

# Other providers' model families -> (the encoding that approximates their tokenizer, who
# makes them). None of these tokenizers is a tiktoken encoding; the choice is the closest
# public one: Llama 3, Qwen 2/3, Mistral's Tekken and DeepSeek use byte-level BPE
# vocabularies of 128–152 K tokens built like (Llama 3, Qwen: extending) cl100k_base's,
# Claude's tokenizer is not public, and Gemini/Gemma's 256 K SentencePiece vocabulary is
# closer in size to o200k_base's. Matched as a word anywhere in the name
# (``anthropic/claude-sonnet-4``, ``meta-llama/Llama-3.1-8B``, ``bedrock:anthropic.claude…``).
_APPROXIMATIONS: tuple[tuple[str, str, str], ...] = (
    ("claude", "cl100k_base", "Anthropic"),
    ("gemini", "o200k_base", "Google"),
    ("gemma", "o200k_base", "Google"),
    ("llama", "cl100k_base", "Meta"),
    ("qwen", "cl100k_base", "Alibaba"),
    ("qwq", "cl100k_base", "Alibaba"),
    ("mistral", "cl100k_base", "Mistral"),
    ("mixtral", "cl100k_base", "Mistral"),
    ("codestral", "cl100k_base", "Mistral"),
    ("ministral", "cl100k_base", "Mistral"),
    ("magistral", "cl100k_base", "Mistral"),
    ("devstral", "cl100k_base", "Mistral"),
    ("pixtral", "cl100k_base", "Mistral"),
    ("deepseek", "cl100k_base", "DeepSeek"),
)
_FAMILY = re.compile(r"(?<![a-z])(" + "|".join(f for f, _, _ in _APPROXIMATIONS) + ")")


class ModelEncoding(NamedTuple):
    """The encoding counts use for a model, and whether it only approximates the model's.

    ``note`` says, for people, why the counts are approximate (None when they are exact).
    (A named tuple, not a dataclass: the command line guesses a document's encoding
    before it imports ``dataclasses``, see ``server.precount.start_early``.)
    """

    encoding: str
    approximate: bool = False
    note: str | None = None


class Tokenizer(Protocol):
    """Counts tokens of text; ``encoding`` names what it counts with."""

    encoding: str

    def count(self, text: str) -> int: ...

    def count_many(self, texts: Sequence[str]) -> list[int]: ...


def model_encoding(model: str) -> ModelEncoding:
    """Return the encoding of ``model``: exact for OpenAI's models, else an approximation."""
    name = model.strip().lower()
    last = name.rsplit("/", 1)[-1].removeprefix("ft:")
    for prefix in _OPENAI_PREFIXES:
        if last.startswith(prefix) and (
            len(last) == len(prefix) or not last[len(prefix)].isalnum()
        ):
            return ModelEncoding(_OPENAI_ENCODINGS[prefix])
    m = _FAMILY.search(name)
    if m is not None:
        family = m.group(1)
        encoding, maker = next((e, w) for f, e, w in _APPROXIMATIONS if f == family)
        return ModelEncoding(
            encoding,
            True,
            f"{model} uses {maker}'s own tokenizer; counts with {encoding} approximate it",
        )
    return ModelEncoding(
        DEFAULT_ENCODING,
        True,
        f"{model} is not a model promptls knows; counts with {DEFAULT_ENCODING} approximate "
        "its tokenizer (set `encoding` to choose)",
    )


def resolve_encoding(encoding: str | None, model: str) -> ModelEncoding:
    """The encoding settings ask for: ``encoding`` when set, else the model's.

    An explicit encoding is exact for OpenAI's and unknown models (the user chose it); for
    another provider's model it stays an approximation, since no tiktoken encoding is its
    tokenizer.
    """
    by_model = model_encoding(model)
    if encoding is None or encoding == by_model.encoding:
        return by_model
    if by_model.approximate and _FAMILY.search(model.lower()) is not None:
        return ModelEncoding(
            encoding,
            True,
            f"{model} has its own tokenizer; counts with {encoding} approximate it",
        )
    return ModelEncoding(encoding)


def encoding_for_model(model: str) -> str:
    """Return the encoding counts use for ``model`` (see ``model_encoding``)."""
    return model_encoding(model).encoding


# The count cache's bound: texts that only the cache still holds (an edited message's
# earlier versions, a closed document's texts) may total this much ``weight`` (each
# entry's length plus ENTRY_WEIGHT, which stands for the entry's own overhead); the oldest
# of them are dropped past it. Texts something else still holds (the messages of an open
# document, an analysis still in use) cost the cache no text memory and are kept, so an
# edit never recounts the messages it did not change. 8 Mi characters keep, say, 160
# versions of a 50 KB message for an undo, in at most 8 MB (32 MB of 4-byte characters).
MAX_CACHED_WEIGHT = 1 << 23
ENTRY_WEIGHT = 64


def _refcount_alone() -> int:
    """What ``_alone_counts`` says of a text only the cache holds (its key and its entry's
    first item): measured, not assumed, so that it holds for any CPython version."""
    text = "".join(["only ", "the cache"])
    cache = {text: (text, 0)}
    del text
    return next(iter(_alone_counts(cache)))[1]


def _alone_counts(cache: Mapping[str, tuple[str, int]]) -> list[tuple[str, int]]:
    getrefcount = sys.getrefcount
    return [(t, getrefcount(t)) for t in list(cache)]


_ALONE = _refcount_alone()


class CachedTokenizer:
    """A counting function with a content-keyed, bounded count cache.

    ``count_fn`` counts the tokens of one text as tiktoken's ``encode_ordinary`` does
    (special tokens counted as text); ``server/tokenizers.py`` picks it. The cache is what
    makes an edit cheap: only texts never seen before are counted. ``seed`` lets a caller
    that counted texts elsewhere (another process, a stored count) fill the cache; results
    are the same as counting one by one.

    The cache is bounded (``MAX_CACHED_WEIGHT``) by what it alone keeps alive. Each entry
    keeps the text object it was last asked about (an equal text parsed again replaces
    it), so while a document is open its texts are the cache's keys too. When the texts
    added since the last look may have passed the bound, the cache looks at every entry
    and drops, oldest first, the texts nothing else references until those left weigh at
    most half the bound (so a look is paid for by half a bound of new texts). A text still
    referenced elsewhere (by the documents and analyses in use) is never dropped: it costs
    the cache one entry, not its characters.
    """

    def __init__(
        self,
        count_fn: Callable[[str], int],
        name: str,
        *,
        max_weight: int = MAX_CACHED_WEIGHT,
        batch_fn: Callable[[list[str]], list[int]] | None = None,
        byte_level: bool = False,
    ) -> None:
        self.counter = count_fn
        self.encoding = name
        self.max_weight = max_weight
        # ``count_fn`` counts with a byte-level BPE encoding (every tiktoken encoding):
        # ``at_most`` then bounds a count without counting.
        self.byte_level = byte_level
        # Counts several texts at once, where that is cheaper than one by one (a counting
        # process asked once instead of once a text): ``count_many`` gives it its misses.
        self.batch = batch_fn
        # text -> (the text object last asked about, its count); oldest first
        self._cache: dict[str, tuple[str, int]] = {}
        self._pending = 0  # an upper bound of the weight only the cache holds
        # Counts still arriving from elsewhere (a counting process that goes on while
        # this one counts, ``server.precount``): asked for a text before it is counted
        # here; None when it has not counted that text (yet).
        self.elsewhere: Callable[[str], int | None] | None = None

    def count(self, text: str) -> int:
        if not text:
            return 0
        hit = self._cache.get(text)
        if hit is None:
            n = self._count(text)
            self._add(text, n)
            return n
        if hit[0] is not text:
            self._rekey(text, hit[1])
        return hit[1]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        get = self._cache.get
        if self.batch is not None:
            missing = [t for t in dict.fromkeys(texts) if t and get(t) is None]
            if len(missing) > 1:
                for t, n in zip(missing, self.batch(missing), strict=True):
                    self._add(t, n)
        out = []
        for t in texts:
            if not t:
                out.append(0)
                continue
            hit = get(t)
            if hit is None:
                n = self._count(t)
                self._add(t, n)
            else:
                n = hit[1]
                if hit[0] is not t:
                    self._rekey(t, n)
            out.append(n)
        return out

    def at_most(self, text: str) -> int | None:
        """An upper bound of ``count(text)`` known without counting, or None (the counting
        function promises none).

        With a byte-level BPE encoding each token stands for one or more bytes of the
        text's UTF-8 (a lone surrogate is counted as U+FFFD, three bytes, as
        ``surrogatepass`` encodes it), so a text has at most as many tokens as bytes. A
        caller that only compares a sum of counts with a threshold needs no count when
        the bounds already fit (the parity tests check the bound on every text they count).
        """
        if not self.byte_level:
            return None
        hit = self._cache.get(text)
        if hit is not None:
            return hit[1]
        return utf8_bound(text)

    def _count(self, text: str) -> int:
        elsewhere = self.elsewhere
        n = elsewhere(text) if elsewhere is not None else None
        return self.counter(text) if n is None else n

    def cached(self, text: str) -> int | None:
        """Return the count of ``text`` if it was counted or seeded before, else None."""
        if not text:
            return 0
        hit = self._cache.get(text)
        return None if hit is None else hit[1]

    def seed(self, counts: Mapping[str, int]) -> None:
        """Add counts made elsewhere with this same encoding (the bound is kept at the end:
        a document's 10,000 texts are added in one go)."""
        cache = self._cache
        weight = 0
        for text, n in counts.items():
            if text and text not in cache:
                cache[text] = (text, n)
                weight += len(text) + ENTRY_WEIGHT
        self._pending += weight
        if self._pending > self.max_weight:
            self._sweep()

    def cache_size(self) -> int:
        return len(self._cache)

    def cache_weight(self) -> int:
        """The weight of the cached texts that only the cache holds (looks at every entry)."""
        return sum(
            len(t) + ENTRY_WEIGHT for t, refs in _alone_counts(self._cache) if refs <= _ALONE
        )

    def _rekey(self, text: str, n: int) -> None:
        # The old key object may be garbage now; the live one makes the entry "in use".
        # (``pop``: a hover on the message loop may count while an analysis sweeps.)
        self._cache.pop(text, None)
        self._cache[text] = (text, n)

    def _add(self, text: str, n: int) -> None:
        self._cache[text] = (text, n)
        self._pending += len(text) + ENTRY_WEIGHT
        if self._pending > self.max_weight:
            self._sweep()

    def _sweep(self) -> None:
        cache = self._cache
        alone = [t for t, refs in _alone_counts(cache) if refs <= _ALONE]
        weight = sum(len(t) + ENTRY_WEIGHT for t in alone)
        keep = self.max_weight // 2
        for t in alone:
            if weight <= keep:
                break
            weight -= len(t) + ENTRY_WEIGHT
            cache.pop(t, None)
        self._pending = weight


def utf8_bound(text: str) -> int:
    """The most tokens a byte-level BPE can make of ``text``: its UTF-8 length (a lone
    surrogate, counted as U+FFFD, is three bytes either way)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class BoundTokenizer:
    """Counts each text as its most possible tokens, one a byte of its UTF-8
    (``utf8_bound``), whatever was counted before: the same text, the same bound.

    For a caller that uses only the decisions an assembly makes, not its figures
    (``promptls lint``): every decision of the pipeline compares sums of counts with a
    threshold, and the pipeline says when one was close enough for counts to matter
    (``Assembly.decided_by_counts``). A sum of bounds that fits says what the sum of the
    counts would; one that does not is assembled again with the counts (docs/tokens.md,
    "Counts that decide nothing").
    """

    bounds = True  # what the pipeline tells its assembly (``Assembly.counts_are_bounds``)

    def __init__(self, exact: CachedTokenizer) -> None:
        self.encoding = exact.encoding

    count = staticmethod(utf8_bound)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return list(map(utf8_bound, texts))


def bound_tokenizer(tokenizer: Tokenizer) -> BoundTokenizer | None:
    """A ``BoundTokenizer`` over ``tokenizer``, or None when it promises no bound (a
    counting function that is no byte-level BPE)."""
    if isinstance(tokenizer, CachedTokenizer) and tokenizer.byte_level:
        return BoundTokenizer(tokenizer)
    return None
