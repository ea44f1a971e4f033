"""The settings model (SPEC §3): the pydantic class behind ``assembly.settings.Settings``.

Kept apart from ``assembly/settings.py`` so that importing the engine does not import
pydantic and build this model (about 80 ms of CPU at start-up): ``assembly.settings``
imports this module when ``Settings`` is first used (a settings value is validated, a
default ``Settings`` is made, the schema is generated). ``promptls rule CODE`` and
``promptls rules`` never use it. Import ``Settings`` from ``assembly.settings``.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    field_validator,
)

from assembly.tokens import DEFAULT_MODEL

DEFAULT_SECTION_TOPICS: dict[str, list[str]] = {
    "Tools": ["tool", "tools", "call", "search", "read_file", "open_url"],
    "Citations": ["cite", "citation", "citations", "source", "sources", "reference"],
    "User Information": ["user", "name", "email", "role", "preference", "memory", "memories"],
}


# The encodings tiktoken defines (``tiktoken.list_encoding_names()``, without the offline
# copy of cl100k_base, which promptls picks itself).
KNOWN_ENCODINGS = (
    "cl100k_base",
    "o200k_base",
    "o200k_harmony",
    "p50k_base",
    "p50k_edit",
    "r50k_base",
    "gpt2",
)


class Settings(BaseModel):
    """Effective settings of one document (defaults are Onyx's)."""

    # Built just below, without plugin discovery (``_no_plugin_discovery``).
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    model: str = Field(
        DEFAULT_MODEL, description="Model name; picks the encoding when `encoding` is unset."
    )
    encoding: str | None = Field(
        None, description="tiktoken encoding; default: from the model, else cl100k_base."
    )
    max_input_tokens: int = Field(128000, gt=0, description="The model's input window.")
    safety_margin: float = Field(
        0.05, ge=0, lt=1, description="Share of the window kept free (Onyx's 0.05)."
    )
    compression_trigger_ratio: float = Field(
        0.75,
        gt=0,
        le=1,
        description="History share of (window - reserved) that triggers compression.",
    )
    recent_messages_ratio: float = Field(
        0.2, gt=0, lt=1, description="Share of the history kept verbatim when compressing."
    )
    reserved_tokens: Literal["auto"] | NonNegativeInt = Field(
        "auto",
        description="Tokens reserved for prompts; `auto`: the worst-case system prompt "
        "with all tool guidance.",
    )
    provider: Literal["openai", "ollama", "azure", "anthropic"] = Field(
        "openai",
        description="Provider format of the assembled messages (`anthropic`: an Anthropic "
        "Messages request, `system` apart).",
    )
    image_cap: bool | int = Field(
        False,
        description="Cap on images per request: `false` (Onyx's default, "
        "ENABLE_AZURE_IMAGE_CAP off), `true` (Onyx's cap: Azure's documented limit of 50 "
        "when provider is azure, none otherwise), or a number of images for any provider.",
    )
    prompt_cache_chat_history: bool = Field(
        False,
        description="Onyx's PROMPT_CACHE_CHAT_HISTORY: split off the cacheable prefix (the "
        "system prompt and the kept earlier history); off: no prefix.",
    )
    prompt_cache_marker: Literal["none", "anthropic"] = Field(
        "none",
        description="How the cacheable prefix is marked: `none` (implicit caching, as Onyx "
        "sends to OpenAI), `anthropic` (`cache_control: ephemeral` on its last message).",
    )
    last_n_user_messages: PositiveInt | None = Field(
        None,
        description="Keep only the history from the N-th last user message on (what Onyx's "
        "deep research and agent tools pass); default: the whole history.",
    )
    keep_past_tool_results: bool = Field(
        False, description="Keep earlier turns' tool results instead of Onyx's placeholder."
    )
    instruction_distance: int = Field(
        0,
        ge=0,
        description="Tokens an instruction may sit away from its section before it is "
        "reported (0: wherever it sits outside it).",
    )
    section_topics: dict[str, list[str]] = Field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_SECTION_TOPICS.items()},
        description="Heading -> words that mark an instruction as belonging to it.",
    )
    branch_tip: str | int | None = Field(
        None, description="Message id the conversation ends at (default: the last message)."
    )
    replace_system_prompt: bool = Field(
        False,
        description="The custom agent prompt replaces the system prompt (with no system "
        "prompt at all it is the system message anyway, Onyx's empty-base-prompt branch).",
    )
    datetime_aware: bool = Field(
        True, description="Add the current date to the system prompt when it has no placeholder."
    )
    vision: bool = Field(True, description="The model accepts image input.")
    rules: dict[str, Literal["error", "warning", "info", "hint", "off"]] = Field(
        default_factory=dict, description="Per-rule severity, or `off`: `{rule-code: severity}`."
    )
    last_cycle: bool = Field(
        False, description="Assemble for the last tool cycle of the turn (no tools offered)."
    )
    tools: list[str | dict[str, Any]] | None = Field(
        None,
        description="Tools offered when neither the document nor its template declares any "
        "(a bare array of messages cannot), and the tools a standalone prompt is used with: "
        "tool names, or OpenAI tool schemas (their `function.name` counts).",
    )
    include: list[str] = Field(
        default_factory=list,
        description="More files `promptls lint` checks in folders, as gitignore-style globs "
        "relative to the settings file (besides *.conv.json|jsonl|yaml|yml and *.prompt.md).",
    )
    exclude: list[str] = Field(
        default_factory=list,
        description="Files and folders `promptls lint` skips in folders, as gitignore-style "
        "globs relative to the settings file.",
    )

    @field_validator("image_cap")
    @classmethod
    def _positive_cap(cls, value: bool | int) -> bool | int:
        """A number of images must be at least 1 (`false` turns the cap off)."""
        if not isinstance(value, bool) and value <= 0:
            raise ValueError("a number of images must be > 0 (false turns the cap off)")
        return value

    @field_validator("branch_tip")
    @classmethod
    def _numeric_tip(cls, value: str | int | None) -> str | None:
        """Accept a numeric message id, as Onyx stores them."""
        if isinstance(value, bool):
            raise ValueError("a message id is a string or an integer")
        return str(value) if isinstance(value, int) else value

    @field_validator("encoding")
    @classmethod
    def _known_encoding(cls, value: str | None) -> str | None:
        if value is not None and value not in KNOWN_ENCODINGS:
            known = ", ".join(f"`{e}`" for e in KNOWN_ENCODINGS)
            raise ValueError(f"unknown tiktoken encoding; known: {known}")
        return value

    @field_validator("rules", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        """Accept YAML 1.1's boolean reading of an unquoted `off` as `off`."""
        if isinstance(value, dict):
            return {k: "off" if v is False else v for k, v in value.items()}
        return value


_PLUGIN_LOADER = "pydantic.plugin._loader"


@contextmanager
def _no_plugin_discovery() -> Iterator[None]:
    """Build a model's validator without looking for pydantic plugins.

    Building a validator asks pydantic's plugin loader for plugins; the loader imports
    ``importlib.metadata`` and reads every installed distribution's entry points (20–50 ms
    of CPU on every start-up, before any setting is read). Plugins observe the validation
    of a program's models; ``Settings`` is promptls' private schema, so none is asked
    for. While the block runs, the loader's module is a stand-in that reports none; after
    it, pydantic's own loader is imported on its next use, so every other model in the
    process gets its plugins as usual. When the loader is loaded already, nothing changes.
    """
    if _PLUGIN_LOADER in sys.modules:
        yield
        return
    stand_in = types.ModuleType(_PLUGIN_LOADER)
    stand_in.get_plugins = tuple  # type: ignore[attr-defined]  # no plugins
    sys.modules[_PLUGIN_LOADER] = stand_in
    try:
        yield
    finally:
        if sys.modules.get(_PLUGIN_LOADER) is stand_in:
            del sys.modules[_PLUGIN_LOADER]


with _no_plugin_discovery():
    Settings.model_rebuild(force=True)
