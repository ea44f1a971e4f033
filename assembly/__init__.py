"""promptls' pure library: documents, settings, tokens and the context assembly pipeline.

Nothing here does IO, reads the clock or imports the language server: callers pass text,
settings and a tokenizer in, and get frozen dataclasses out (offsets are code points).
The façade below is the public surface; the modules behind it are importable for tests.
"""

from assembly.assemble import AssembleOptions, Assembly, assemble
from assembly.documents import format_for_path, parse_conversation
from assembly.model import Conversation, DocFormat, PromptTemplate
from assembly.prompts import parse_prompt
from assembly.settings import Settings, SettingsLayer, resolve_settings
from assembly.tokens import TiktokenTokenizer, Tokenizer, encoding_for_model
from assembly.toolcalls import extract_tool_calls

__all__ = [
    "AssembleOptions",
    "Assembly",
    "Conversation",
    "DocFormat",
    "PromptTemplate",
    "Settings",
    "SettingsLayer",
    "TiktokenTokenizer",
    "Tokenizer",
    "assemble",
    "encoding_for_model",
    "extract_tool_calls",
    "format_for_path",
    "parse_conversation",
    "parse_prompt",
    "resolve_settings",
]
