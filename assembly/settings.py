"""The settings schema (SPEC §3): the settings, their defaults, and merging their sources.

``Settings`` holds the effective settings of one document: a frozen dataclass whose fields
carry each setting's default and, in their metadata, its bounds and description. It is
checked by pydantic: ``assembly/settings_model.py`` builds the pydantic model from these
fields (its validators, the JSON schema and docs/settings.md come from there) and is
imported only when a value has to be checked. Importing pydantic and building the model
cost 40–80 ms of CPU at start-up, which a command that reads no setting does not pay; nor
does one whose every value was checked before, when the IO side keeps the checks' verdicts
between runs (``remember_checks``: the verdict of ``(key, value)`` is a pure function of
the model, which keys the memo).

Sources are merged in order, later wins: built-in defaults < ``[tool.promptls]`` in the
nearest ``pyproject.toml`` or a ``promptls.toml`` < editor settings < the document's own
``settings``. Finding and reading those files is the caller's IO; this module only takes
their values as ``SettingsLayer``s. An invalid value is reported at its exact place in the
layer that set it and the value from the layers below (ultimately the default) is used.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from assembly.text import TextRange
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
        default=128000, metadata=_about(gt=0, description="The model's input window.")
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
            if key not in Settings.__dataclass_fields__:
                issues.append(
                    SettingIssue(
                        layer.source, key, f"unknown setting `{key}`", where, severity="warning"
                    )
                )
                continue
            valid, result = _verdict(key, value)
            if not valid:
                issues.append(SettingIssue(layer.source, key, result, where))
                continue
            merged[key] = result
    return Settings(**merged), issues


# Verdicts of earlier checks: (key, ``repr`` of a plain value) -> (True, the value as
# validated) or (False, the message). Kept by the IO side between runs (``remember_checks``).
Verdicts = MutableMapping[tuple[str, str], tuple[bool, Any]]
_memo: list[Verdicts] = []


def remember_checks(verdicts: Verdicts | None) -> None:
    """Look verdicts up in ``verdicts`` before checking, and record new ones there (None:
    check every value). Its owner keys it by what the verdicts depend on: this module's and
    ``settings_model``'s source and pydantic's version (``server/settingscache.py``)."""
    _memo[:] = [] if verdicts is None else [verdicts]


def _verdict(key: str, value: Any) -> tuple[bool, Any]:
    """(True, ``value`` as validated) or (False, why it is invalid)."""
    shown = repr(value) if _memo and is_plain(value) else ""
    memo = _memo[0] if 0 < len(shown) <= MAX_KEPT_CHARS else None
    if memo is not None:
        seen = memo.get((key, shown))
        if seen is not None:
            valid, result = seen
            return valid, _fresh(result) if valid else result
    problem, result = _check_one(key, value)
    verdict = (False, problem) if problem is not None else (True, result)
    if memo is not None and (problem is not None or is_plain(result)):
        memo[(key, shown)] = (verdict[0], _fresh(verdict[1]))
    return verdict


def _check_one(key: str, value: Any) -> tuple[str | None, Any]:
    """Check one value with the settings model: (None, the value as validated) or (why it
    is invalid, None)."""
    from pydantic import ValidationError

    model = _model()
    shown = _show(value)
    annotation = str(model.model_fields[key].annotation)
    if (
        isinstance(value, bool)
        and _NUMBER_ANNOTATION.search(annotation)
        and "bool" not in annotation
    ):
        # pydantic reads `true` as 1 for an int; YAML and TOML users mean no number.
        return f"invalid value for `{key}`: expected a number, not a boolean (got {shown})", None
    if isinstance(value, int | float) and abs(value) > MAX_NUMBER:
        return f"invalid value for `{key}`: at most {MAX_NUMBER:,} (got {shown})", None
    try:
        return None, getattr(model.model_validate({key: value}), key)
    except ValidationError as exc:
        errors = exc.errors()
        err = errors[0]
        if len(errors) > 1 and not isinstance(value, str):
            # A union such as `"auto" | int >= 0`: the error of the branch of the value's
            # type says what is wrong (not "input should be 'auto'" for -1).
            err = next((e for e in errors if e["type"] != "literal_error"), err)
        if key == "reserved_tokens":
            msg = f"expected `auto` or an integer ≥ 0 (got {shown})"
            return f"invalid value for `{key}`: {msg}", None
        msg = str(err["msg"])
        msg = msg.removeprefix("Value error, ")
        return f"invalid value for `{key}`: {msg[:1].lower() + msg[1:]} (got {shown})", None


# No window, count or distance is larger; bigger numbers would overflow float arithmetic.
MAX_NUMBER = 10**12
_NUMBER_ANNOTATION = re.compile(r"\b(int|float)\b|Int\b")
MAX_PLAIN_NODES = 4096  # a larger value is checked every time (its verdict is not kept)
MAX_KEPT_CHARS = 16_384  # nor is one that ``repr`` writes longer than this


def is_plain(value: Any) -> bool:
    """Whether ``value`` is made of JSON's own values only: strings, integers, finite
    floats, booleans, None, lists and string-keyed dicts (at most ``MAX_PLAIN_NODES``).

    Such a value is written by ``repr`` unambiguously (the key of its verdict) and is its
    own JSON form (``settings_json``).
    """
    stack, budget = [value], MAX_PLAIN_NODES
    while stack:
        v = stack.pop()
        budget -= 1
        t = type(v)
        if budget < 0:
            return False
        if t is str or t is int or t is bool or v is None:
            continue
        if t is float:
            if v - v != 0:  # inf or nan: JSON has none
                return False
        elif t is list:
            stack.extend(v)
        elif t is dict:
            if any(type(k) is not str for k in v):
                return False
            stack.extend(v.values())
        else:
            return False
    return True


def _fresh(value: Any) -> Any:
    """A copy of a plain value's lists and dicts (a kept verdict is never shared)."""
    if type(value) is list:
        return [_fresh(v) for v in value]
    if type(value) is dict:
        return {k: _fresh(v) for k, v in value.items()}
    return value


def settings_json(settings: Settings) -> dict[str, Any]:
    """The settings as JSON values, every key in order (the model's JSON dump)."""
    values = {name: getattr(settings, name) for name in SETTING_NAMES}
    if is_plain(list(values.values())):
        return _fresh(values)  # plain values are their own JSON form
    return _model().model_construct(**values).model_dump(mode="json")


def _show(value: Any) -> str:
    """A value as written in the message: short, and printable whatever it holds."""
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


def _model() -> Any:
    """The pydantic model that validates settings (imported on first use)."""
    from assembly.settings_model import SettingsModel

    return SettingsModel
