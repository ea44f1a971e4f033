"""The settings schema (SPEC §3): one pydantic model, its defaults and its validation.

Sources are merged in order, later wins: built-in defaults < ``[tool.promptls]`` in the
nearest ``pyproject.toml`` or a ``promptls.toml`` < editor settings < the document's own
``settings``. Finding and reading those files is the caller's IO; this module only takes
their values as ``SettingsLayer``s. An invalid value is reported at its exact place in the
layer that set it and the value from the layers below (ultimately the default) is used.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    ValidationError,
    field_validator,
)

from assembly.text import TextRange
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

    model_config = ConfigDict(extra="forbid", frozen=True)

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


@dataclass(frozen=True, slots=True)
class SettingsLayer:
    """Values from one source; ``ranges`` locate each key's value in ``source``."""

    source: str
    values: Mapping[str, Any]
    ranges: Mapping[str, TextRange] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SettingIssue:
    """An invalid or unknown setting, located in the layer that set it."""

    source: str
    key: str
    message: str
    range: TextRange | None
    severity: Literal["error", "warning"] = "error"


def resolve_settings(layers: Sequence[SettingsLayer]) -> tuple[Settings, list[SettingIssue]]:
    """Merge ``layers`` (later wins) into valid ``Settings`` and the issues found.

    Each key is validated on its own, so one bad value never hides the others and the
    previous layer's value (or the default) stays in force.
    """
    merged: dict[str, Any] = {}
    issues: list[SettingIssue] = []
    for layer in layers:
        for key, value in layer.values.items():
            where = layer.ranges.get(key)
            if key not in Settings.model_fields:
                issues.append(
                    SettingIssue(
                        layer.source, key, f"unknown setting `{key}`", where, severity="warning"
                    )
                )
                continue
            problem = _check_one(key, value)
            if problem is not None:
                issues.append(SettingIssue(layer.source, key, problem, where))
                continue
            merged[key] = value
    return Settings.model_validate(merged), issues


def _check_one(key: str, value: Any) -> str | None:
    shown = _show(value)
    annotation = str(Settings.model_fields[key].annotation)
    if (
        isinstance(value, bool)
        and _NUMBER_ANNOTATION.search(annotation)
        and "bool" not in annotation
    ):
        # pydantic reads `true` as 1 for an int; YAML and TOML users mean no number.
        return f"invalid value for `{key}`: expected a number, not a boolean (got {shown})"
    if isinstance(value, int | float) and abs(value) > MAX_NUMBER:
        return f"invalid value for `{key}`: at most {MAX_NUMBER:,} (got {shown})"
    try:
        Settings.model_validate({key: value})
    except ValidationError as exc:
        errors = exc.errors()
        err = errors[0]
        if len(errors) > 1 and not isinstance(value, str):
            # A union such as `"auto" | int >= 0`: the error of the branch of the value's
            # type says what is wrong (not "input should be 'auto'" for -1).
            err = next((e for e in errors if e["type"] != "literal_error"), err)
        if key == "reserved_tokens":
            return f"invalid value for `{key}`: expected `auto` or an integer ≥ 0 (got {shown})"
        msg = str(err["msg"])
        msg = msg.removeprefix("Value error, ")
        return f"invalid value for `{key}`: {msg[:1].lower() + msg[1:]} (got {shown})"
    return None


# No window, count or distance is larger; bigger numbers would overflow float arithmetic.
MAX_NUMBER = 10**12
_NUMBER_ANNOTATION = re.compile(r"\b(int|float)\b|Int\b")


def _show(value: Any) -> str:
    """A value as written in the message: short, and printable whatever it holds."""
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"
