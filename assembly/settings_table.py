"""The settings (SPEC §3): each one's name, type, default, bounds and description.

``Settings`` holds the effective settings of one document: a frozen dataclass, which the
engine reads. Its fields are the one table of the settings: ``assembly/settings_model.py``
builds the pydantic model that validates a value from them (and the JSON schema and
docs/settings.md are generated from that model); ``assembly/settings.py`` merges the
sources. This module imports no pydantic: a command that checks no value never does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from assembly.tokens import DEFAULT_MODEL

if TYPE_CHECKING:
    from pydantic import NonNegativeInt, PositiveInt

DEFAULT_SECTION_TOPICS: dict[str, list[str]] = {
    "Tools": ["tool", "tools", "call", "search", "read_file", "open_url"],
    "Citations": ["cite", "citation", "citations", "source", "sources", "reference"],
    "User Information": ["user", "name", "email", "role", "preference", "memory", "memories"],
}


def _about(*, description: str, **bounds: float) -> dict[str, Any]:
    """A setting's metadata: its description and bounds (the keywords of ``pydantic.Field``:
    ``gt``, ``ge``, ``lt``, ``le``), which the settings model validates with."""
    return {"description": description, **bounds}


# The annotations are pydantic's types (``NonNegativeInt`` is an ``int`` ≥ 0): the settings
# model validates with exactly these (``assembly/settings_model.py``).
@dataclass(frozen=True, slots=True)
class Settings:
    """Effective settings of one document (defaults are Onyx's)."""

    model: str = field(
        default=DEFAULT_MODEL,
        metadata=_about(description="Model name; picks the encoding when `encoding` is unset."),
    )
    encoding: str | None = field(
        default=None,
        metadata=_about(
            description="tiktoken encoding; default: from the model, else cl100k_base."
        ),
    )
    max_input_tokens: int = field(
        default=128000,
        metadata=_about(
            gt=0,
            description="The model's input window; default: the model's, from litellm's "
            "model table (as Onyx reads it), else 128000.",
        ),
    )
    safety_margin: float = field(
        default=0.05,
        metadata=_about(ge=0, lt=1, description="Share of the window kept free (Onyx's 0.05)."),
    )
    compression_trigger_ratio: float = field(
        default=0.75,
        metadata=_about(
            gt=0,
            le=1,
            description="History share of (window - reserved) that triggers compression.",
        ),
    )
    recent_messages_ratio: float = field(
        default=0.2,
        metadata=_about(
            gt=0, lt=1, description="Share of the history kept verbatim when compressing."
        ),
    )
    reserved_tokens: Literal["auto"] | NonNegativeInt = field(
        default="auto",
        metadata=_about(
            description="Tokens reserved for prompts; `auto`: the worst-case system prompt "
            "with all tool guidance."
        ),
    )
    provider: Literal["openai", "ollama", "azure", "anthropic"] = field(
        default="openai",
        metadata=_about(
            description="Provider format of the assembled messages (`anthropic`: an Anthropic "
            "Messages request, `system` apart)."
        ),
    )
    image_cap: bool | int = field(
        default=False,
        metadata=_about(
            description="Cap on images per request: `false` (Onyx's default, "
            "ENABLE_AZURE_IMAGE_CAP off), `true` (Onyx's cap: Azure's documented limit of 50 "
            "when provider is azure, none otherwise), or a number of images for any provider."
        ),
    )
    prompt_cache_chat_history: bool = field(
        default=False,
        metadata=_about(
            description="Onyx's PROMPT_CACHE_CHAT_HISTORY: split off the cacheable prefix (the "
            "system prompt and the kept earlier history); off: no prefix."
        ),
    )
    prompt_cache_marker: Literal["none", "anthropic"] = field(
        default="none",
        metadata=_about(
            description="How the cacheable prefix is marked: `none` (implicit caching, as Onyx "
            "sends to OpenAI), `anthropic` (`cache_control: ephemeral` on its last message)."
        ),
    )
    last_n_user_messages: PositiveInt | None = field(
        default=None,
        metadata=_about(
            description="Keep only the history from the N-th last user message on (what Onyx's "
            "deep research and agent tools pass); default: the whole history."
        ),
    )
    keep_past_tool_results: bool = field(
        default=False,
        metadata=_about(
            description="Keep earlier turns' tool results instead of Onyx's placeholder."
        ),
    )
    instruction_distance: int = field(
        default=0,
        metadata=_about(
            ge=0,
            description="Tokens an instruction may sit away from its section before it is "
            "reported (0: wherever it sits outside it).",
        ),
    )
    instruction_preview: bool = field(
        default=False,
        metadata=_about(
            description="Also report the `instruction-far-from-section` findings not yet precise "
            "enough to be on by default (as ruff's preview rules): an instruction matched to a "
            "section by its heading words, by a tool that section only describes, to the tools "
            "section, or by a name only a title calls a tool. By default an instruction naming "
            "a tool whose section is titled by the tool's name, and one at the opening about "
            "tools in general, are reported."
        ),
    )
    section_topics: dict[str, list[str]] = field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_SECTION_TOPICS.items()},
        metadata=_about(
            description="Heading -> words that mark an instruction as belonging to it."
        ),
    )
    branch_tip: str | int | None = field(
        default=None,
        metadata=_about(
            description="Message id the conversation ends at (default: the last message)."
        ),
    )
    replace_system_prompt: bool = field(
        default=False,
        metadata=_about(
            description="The custom agent prompt replaces the system prompt (with no system "
            "prompt at all it is the system message anyway, Onyx's empty-base-prompt branch)."
        ),
    )
    datetime_aware: bool = field(
        default=True,
        metadata=_about(
            description="Add the current date to the system prompt when it has no placeholder."
        ),
    )
    vision: bool = field(
        default=True, metadata=_about(description="The model accepts image input.")
    )
    rules: dict[str, Literal["error", "warning", "info", "hint", "off"]] = field(
        default_factory=dict,
        metadata=_about(description="Per-rule severity, or `off`: `{rule-code: severity}`."),
    )
    last_cycle: bool = field(
        default=False,
        metadata=_about(
            description="Assemble for the last tool cycle of the turn (no tools offered)."
        ),
    )
    tools: list[str | dict[str, Any]] | None = field(
        default=None,
        metadata=_about(
            description="Tools offered when neither the document nor its template declares any "
            "(a bare array of messages cannot), and the tools a standalone prompt is used with: "
            "tool names, or OpenAI tool schemas (their `function.name` counts)."
        ),
    )
    include: list[str] = field(
        default_factory=list,
        metadata=_about(
            description="More files `promptls lint` checks in folders, as gitignore-style globs "
            "relative to the settings file (besides *.conv.json|jsonl|yaml|yml and *.prompt.md)."
        ),
    )
    exclude: list[str] = field(
        default_factory=list,
        metadata=_about(
            description="Files and folders `promptls lint` skips in folders, as gitignore-style "
            "globs relative to the settings file."
        ),
    )


# The settings' names, in order (the schema's and the docs').
SETTING_NAMES: tuple[str, ...] = tuple(Settings.__dataclass_fields__)
