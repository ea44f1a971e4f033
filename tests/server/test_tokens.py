"""The tokenizer (SPEC §1, §4 step 4): real offline counts, the cache, the fallback.

Counts come from the real ``cl100k_base`` and ``o200k_base`` files bundled in installed
packages (``server/tokenizers.py``). The loader tests point tiktoken's cache at an empty
(or damaged) directory and make every socket call fail, which proves the loader never
reaches for the network: a download attempt would show up as a recorded call.
"""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tiktoken.model

from assembly.tokens import CachedTokenizer, encoding_for_model, model_encoding, resolve_encoding
from server import tokenizers
from server.tokenizers import load_tokenizer, reference_encoding

OFFLINE = reference_encoding("cl100k_base")[0]
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"

FIXED_COUNTS = [
    ("hello world", 2),
    ("Hello, world!", 4),
    ("", 0),
    (" ", 1),
    ("tiktoken is great!", 6),
    ("你好，世界", 6),
    ("👩\u200d👩\u200d👧", 13),  # a ZWJ family: one glyph, many tokens
    ("🇯🇵", 6),
    ("antidisestablishmentarianism", 6),
    ("<|endoftext|>", 7),  # special tokens are counted as plain text
    ("\r\n\r\n", 1),
    ("12345678", 3),
]


@pytest.fixture
def tokenizer() -> CachedTokenizer:
    """A fresh tokenizer over the real offline cl100k_base encoding (an empty cache)."""
    return CachedTokenizer(load_tokenizer("cl100k_base").tokenizer.counter, "cl100k_base")  # type: ignore[attr-defined]


class _CountingEncoding:
    """The real counting function, with its calls recorded."""

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def __call__(self, text: str) -> int:
        self.encoded.append(text)
        return len(OFFLINE.encode_ordinary(text))


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Make every way out fail loudly, and record each attempt."""
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args[1:] if args else kwargs)
        raise OSError("network access is not allowed in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield attempts


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    return cache


# ------------------------------------------------------------------------------ counts


@pytest.mark.parametrize(("text", "expected"), FIXED_COUNTS)
def test_cl100k_counts(tokenizer: CachedTokenizer, text: str, expected: int) -> None:
    assert tokenizer.count(text) == expected
    assert len(OFFLINE.encode_ordinary(text)) == expected


def test_the_loaded_tokenizer_is_the_offline_cl100k() -> None:
    load = load_tokenizer()
    assert load.warning is None
    assert load.requested == "cl100k_base"
    assert load.tokenizer.encoding == "cl100k_base"
    for text, expected in FIXED_COUNTS:
        assert load.tokenizer.count(text) == expected


def test_offline_files_are_the_published_encodings() -> None:
    # SPEC §1: the bundled files are tiktoken's (their sha256 is checked against the hash
    # tiktoken expects before they are used).
    assert OFFLINE.n_vocab == 100277
    assert OFFLINE.encode_ordinary("hello world") == [15339, 1917]
    o200k = reference_encoding("o200k_base")[0]
    assert o200k.n_vocab == 200019
    assert o200k.encode_ordinary("hello world") == [24912, 2375]


def test_count_many_equals_count(tokenizer: CachedTokenizer) -> None:
    texts = [t for t, _ in FIXED_COUNTS] + ["hello world", "", "a longer sentence, counted once"]
    singles = [len(OFFLINE.encode_ordinary(t)) for t in texts]
    assert tokenizer.count_many(texts) == singles
    assert tokenizer.count_many([]) == []


def test_seeded_counts_are_used_without_encoding() -> None:
    spy = _CountingEncoding()
    tokenizer = CachedTokenizer(spy, "cl100k_base")
    tokenizer.seed({"counted elsewhere": 3})
    assert tokenizer.count_many(["counted elsewhere", "fresh"]) == [3, 1]
    assert spy.encoded == ["fresh"]


class _Calls:
    """The real counting function, counting its calls (it keeps no text alive)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, text: str) -> int:
        self.calls += 1
        return len(OFFLINE.encode_ordinary(text))


def _conversation(n: int) -> Any:
    from assembly.model import DocFormat
    from assembly.reading import parse_conversation

    messages = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"message {i}: " + "lorem ipsum " * 25,
        }
        for i in range(n)
    ]
    return parse_conversation(json.dumps({"messages": messages}), DocFormat.JSON)


def test_the_cache_is_bounded_by_the_texts_only_it_holds() -> None:
    calls = _Calls()
    tokenizer = CachedTokenizer(calls, "cl100k_base", max_weight=20_000)
    for i in range(2_000):  # 2,000 texts of 300 characters that nothing else keeps
        tokenizer.count(f"draft {i:04} " + "x" * 289)
    assert calls.calls == 2_000
    assert tokenizer.cache_weight() <= 20_000
    assert tokenizer.cache_size() <= 20_000 // (300 + 64) + 1
    # The newest are kept (an undo finds them), the oldest went.
    before = calls.calls
    tokenizer.count("draft 1999 " + "x" * 289)
    assert calls.calls == before
    tokenizer.count("draft 0000 " + "x" * 289)
    assert calls.calls == before + 1


def test_typing_in_one_message_never_recounts_the_others() -> None:
    # 200 messages of about 310 characters: 76,000 characters of live text, well over the
    # bound; the edited message's 3,000 earlier versions are what the bound drops.
    conv = _conversation(200)
    calls = _Calls()
    tokenizer = CachedTokenizer(calls, "cl100k_base", max_weight=20_000)
    contents = [m.content for m in conv.messages]
    first = tokenizer.count_many(contents)
    assert calls.calls == 200
    del contents
    edited = conv.messages[7].content
    for i in range(3_000):
        edited = edited + "abcdefghij"[i % 10]
        tokenizer.count(edited)
    assert calls.calls == 200 + 3_000
    assert tokenizer.cache_weight() <= 20_000
    again = tokenizer.count_many([m.content for m in conv.messages])
    assert again == first
    assert calls.calls == 200 + 3_000  # every message of the open document was still cached


def test_texts_parsed_again_take_over_the_entries() -> None:
    # A re-parse makes new, equal text objects: once the old version is dropped, its
    # texts are not "only in the cache" as long as the new version is open.
    calls = _Calls()
    tokenizer = CachedTokenizer(calls, "cl100k_base", max_weight=20_000)
    old = _conversation(100)
    tokenizer.count_many([m.content for m in old.messages])
    new = _conversation(100)
    tokenizer.count_many([m.content for m in new.messages])
    assert calls.calls == 100
    del old
    for i in range(1_000):
        tokenizer.count(f"draft {i:04} " + "y" * 289)
    tokenizer.count_many([m.content for m in new.messages])
    assert calls.calls == 100 + 1_000
    # Closing the document lets its texts go too.
    del new
    for i in range(200):
        tokenizer.count(f"other {i:04} " + "z" * 289)
    assert tokenizer.cache_weight() <= 20_000
    assert tokenizer.cache_size() <= 20_000 // (300 + 64) + 1


def test_second_count_many_hits_the_cache() -> None:
    spy = _CountingEncoding()
    tokenizer = CachedTokenizer(spy, "cl100k_base")
    texts = ["alpha beta", "gamma", "alpha beta", "", "délta ε"]
    first = tokenizer.count_many(texts)
    size = tokenizer.cache_size()
    assert size == 3  # distinct non-empty texts
    assert sorted(spy.encoded) == ["alpha beta", "délta ε", "gamma"]
    spy.encoded.clear()
    assert tokenizer.count_many(texts) == first
    assert tokenizer.count_many(list(reversed(texts))) == list(reversed(first))
    assert tokenizer.cache_size() == size
    assert spy.encoded == []
    # ``count`` shares the cache; only a new text is encoded.
    assert tokenizer.count("gamma") == first[1]
    assert tokenizer.count("new text") == 2
    assert spy.encoded == ["new text"]
    assert tokenizer.cache_size() == size + 1


OPENAI_MODELS = [
    "gpt-4o", "gpt-4o-mini", "gpt-4o-2024-08-06", "chatgpt-4o-latest", "gpt-4.1",
    "gpt-4.1-mini", "gpt-4.1-nano", "gpt-4.5-preview", "o1", "o1-mini", "o1-pro", "o3",
    "o3-mini", "o3-pro", "o4-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5-mini", "gpt-5-nano",
    "gpt-5-codex", "gpt-5.1", "gpt-oss-120b", "gpt-4", "gpt-4-turbo", "gpt-4-32k",
    "gpt-3.5-turbo", "gpt-3.5-turbo-0125", "gpt-35-turbo", "text-embedding-3-small",
    "text-embedding-ada-002", "davinci-002", "text-davinci-003", "gpt2",
]  # fmt: skip


@pytest.mark.parametrize("model", OPENAI_MODELS)
def test_openai_models_use_the_encoding_tiktoken_names(model: str) -> None:
    choice = model_encoding(model)
    assert choice == model_encoding(f"openai/{model}") == model_encoding(model.upper())
    assert (choice.encoding, choice.approximate) == (
        tiktoken.model.encoding_name_for_model(model),
        False,
    )


def test_todays_openai_models_use_o200k_base() -> None:
    for model in ("gpt-4o", "gpt-4.1", "o1", "o3", "o4-mini", "gpt-5", "gpt-5-mini"):
        assert encoding_for_model(model) == "o200k_base"
    assert encoding_for_model("gpt-4") == encoding_for_model("gpt-3.5-turbo") == "cl100k_base"


@pytest.mark.parametrize(
    ("model", "encoding", "maker"),
    [
        ("claude-sonnet-4-5", "cl100k_base", "Anthropic"),
        ("anthropic/claude-3.5-haiku", "cl100k_base", "Anthropic"),
        ("bedrock:anthropic.claude-3-5-sonnet-20240620-v1:0", "cl100k_base", "Anthropic"),
        ("gemini-2.5-pro", "o200k_base", "Google"),
        ("google/gemma-3-27b-it", "o200k_base", "Google"),
        ("meta-llama/Llama-3.1-8B-Instruct", "cl100k_base", "Meta"),
        ("llama3", "cl100k_base", "Meta"),
        ("Qwen/Qwen3-32B", "cl100k_base", "Alibaba"),
        ("mistral-large-latest", "cl100k_base", "Mistral"),
        ("codestral-2501", "cl100k_base", "Mistral"),
        ("deepseek-chat", "cl100k_base", "DeepSeek"),
    ],
)
def test_other_providers_models_are_approximations(model: str, encoding: str, maker: str) -> None:
    choice = model_encoding(model)
    assert (choice.encoding, choice.approximate) == (encoding, True)
    assert (
        choice.note
        == f"{model} uses {maker}'s own tokenizer; counts with {encoding} approximate it"
    )


def test_unknown_models_are_approximations_and_an_explicit_encoding_is_not() -> None:
    for name in ("my-finetune", "ollama/phi4"):
        assert (model_encoding(name).encoding, model_encoding(name).approximate) == (
            "cl100k_base",
            True,
        )
    unknown = model_encoding("ollama")  # "llama" inside a word is no Llama
    assert (unknown.encoding, unknown.approximate) == ("cl100k_base", True)
    assert unknown.note is not None and "not a model promptls knows" in unknown.note
    assert resolve_encoding("o200k_base", "my-finetune").approximate is False
    assert resolve_encoding(None, "gpt-4o").approximate is False
    # Another provider's model stays approximate whatever encoding counts it.
    claude = resolve_encoding("o200k_base", "claude-opus-4")
    assert (claude.encoding, claude.approximate) == ("o200k_base", True)


# ------------------------------------------------------------------------------ loading


def test_todays_models_load_offline_without_a_note(
    empty_cache: Path, no_network: list[Any]
) -> None:
    for model in ("gpt-4o", "gpt-4.1", "o3", "o4-mini", "gpt-5", "gpt-oss-20b", "gpt-4"):
        load = load_tokenizer(model=model)
        assert load.warning is None
        assert load.requested == load.tokenizer.encoding == encoding_for_model(model)
        assert load.tokenizer.count("hello world") == 2
    assert load_tokenizer(model="gpt-4o").tokenizer.count("你好，世界") == len(
        reference_encoding("o200k_base")[0].encode_ordinary("你好，世界")
    )
    assert no_network == []


def test_damaged_cached_file_is_left_alone_and_the_bundled_one_used(
    empty_cache: Path, no_network: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # tiktoken would delete a file whose hash does not match and download it again.
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    damaged = empty_cache / hashlib.sha1(O200K_URL.encode()).hexdigest()
    damaged.write_bytes(b"not a tiktoken file")
    enc, reason = reference_encoding("o200k_base")
    assert enc is not None and reason == ""
    assert enc.encode_ordinary("hello world") == [24912, 2375]
    assert damaged.read_bytes() == b"not a tiktoken file"
    assert no_network == []


def test_without_bundled_files_a_model_falls_back_with_one_note(
    empty_cache: Path, no_network: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A damaged installation (no package ships the files, no fast backend): the note.
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    monkeypatch.setattr(tokenizers, "DATA_PACKAGES", ())
    monkeypatch.setattr(tokenizers, "_LOADED", {"cl100k_base": load_tokenizer().tokenizer})
    monkeypatch.setenv("PROMPTLS_TOKENIZER", "tiktoken")
    load = load_tokenizer(model="gpt-4o")
    assert load.requested == "o200k_base"
    assert load.tokenizer.encoding == "cl100k_base"
    assert load.warning == (
        "encoding o200k_base is not available offline (no intact copy of its file in "
        "tiktoken's cache); counting with cl100k_base instead"
    )
    assert no_network == []


def test_the_reference_backend_can_be_forced_and_counts_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fast = load_tokenizer(model="gpt-4o").tokenizer
    monkeypatch.setattr(tokenizers, "_LOADED", {})
    monkeypatch.setenv("PROMPTLS_TOKENIZER", "tiktoken")
    assert tokenizers.backend("o200k_base") == "tiktoken"
    ref = load_tokenizer(model="gpt-4o").tokenizer
    assert ref is not fast
    texts = [t for t, _ in FIXED_COUNTS] + ["你好，世界 " * 50]
    assert ref.count_many(texts) == fast.count_many(texts)


@pytest.mark.parametrize("encoding", ["gpt2", "r50k_base", "p50k_edit"])
def test_encodings_not_bundled_fall_back_without_network(
    empty_cache: Path, no_network: list[Any], encoding: str
) -> None:
    load = load_tokenizer(encoding)
    assert load.tokenizer.encoding == "cl100k_base"
    assert load.warning == (
        f"encoding {encoding} is not available offline (no intact copy of its file in "
        "tiktoken's cache); counting with cl100k_base instead"
    )
    assert no_network == []


def test_unknown_encoding_name_gives_a_clear_warning(no_network: list[Any]) -> None:
    load = load_tokenizer("cl200k_base")
    assert load.requested == "cl200k_base"
    assert load.tokenizer.encoding == "cl100k_base"
    assert load.warning == (
        "encoding cl200k_base is not a known tiktoken encoding; counting with cl100k_base instead"
    )
    assert no_network == []


def test_an_explicit_encoding_wins_over_the_model(no_network: list[Any]) -> None:
    load = load_tokenizer("cl100k_base", model="gpt-4o")
    assert load.warning is None
    assert load.tokenizer.encoding == "cl100k_base"
    assert no_network == []
