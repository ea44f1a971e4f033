"""promptls' pure library: documents, settings, tokens and the context assembly pipeline.

Nothing here does IO, reads the clock or imports the language server: callers pass text,
settings and a tokenizer in, and get frozen dataclasses out (offsets are code points).
The façade below is the public surface; the modules behind it are importable for tests.
Its names are imported on first use, so that importing one light module (``assembly.tokens``
before a large document is counted, ``assembly.diagnostics`` for ``promptls rule``) does
not import the whole pipeline.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from assembly.assemble import AssembleOptions, Assembly, assemble
    from assembly.documents import format_for_path
    from assembly.model import Conversation, DocFormat, PromptTemplate
    from assembly.prompts import parse_prompt
    from assembly.reading import parse_conversation
    from assembly.settings import Settings, SettingsLayer, resolve_settings
    from assembly.tokens import CachedTokenizer, Tokenizer, encoding_for_model, model_encoding
    from assembly.toolcalls import extract_tool_calls

_FACADE = {
    "AssembleOptions": "assembly.assemble",
    "Assembly": "assembly.assemble",
    "assemble": "assembly.assemble",
    "format_for_path": "assembly.documents",
    "parse_conversation": "assembly.reading",
    "Conversation": "assembly.model",
    "DocFormat": "assembly.model",
    "PromptTemplate": "assembly.model",
    "parse_prompt": "assembly.prompts",
    "Settings": "assembly.settings",
    "SettingsLayer": "assembly.settings",
    "resolve_settings": "assembly.settings",
    "CachedTokenizer": "assembly.tokens",
    "Tokenizer": "assembly.tokens",
    "encoding_for_model": "assembly.tokens",
    "model_encoding": "assembly.tokens",
    "extract_tool_calls": "assembly.toolcalls",
}

__all__ = [
    "AssembleOptions",
    "Assembly",
    "CachedTokenizer",
    "Conversation",
    "DocFormat",
    "PromptTemplate",
    "Settings",
    "SettingsLayer",
    "Tokenizer",
    "assemble",
    "encoding_for_model",
    "extract_tool_calls",
    "format_for_path",
    "model_encoding",
    "parse_conversation",
    "parse_prompt",
    "resolve_settings",
]


def __getattr__(name: str) -> Any:
    module = _FACADE.get(name)
    if module is None:
        raise AttributeError(f"module 'assembly' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
