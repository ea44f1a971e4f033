"""The settings schema (SPEC §3): one pydantic model, its defaults and its validation.

The model, ``Settings``, lives in ``assembly/settings_model.py`` and is imported from here
on first use (``assembly.settings.Settings``): pydantic and the model's build cost about
80 ms of CPU, which a command that never reads settings (``promptls rule CODE``) does not
pay. Modules that only annotate with it import it under ``TYPE_CHECKING``.

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
from typing import TYPE_CHECKING, Any, Literal

from assembly.text import TextRange

if TYPE_CHECKING:
    from assembly.settings_model import Settings as Settings


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
    settings = _model()
    merged: dict[str, Any] = {}
    issues: list[SettingIssue] = []
    for layer in layers:
        for key, value in layer.values.items():
            where = layer.ranges.get(key)
            if key not in settings.model_fields:
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
    return settings.model_validate(merged), issues


def _check_one(key: str, value: Any) -> str | None:
    from pydantic import ValidationError

    settings = _model()
    shown = _show(value)
    annotation = str(settings.model_fields[key].annotation)
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
        settings.model_validate({key: value})
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


def _model() -> type[Settings]:
    from assembly.settings_model import Settings

    return Settings


def __getattr__(name: str) -> Any:
    """``Settings``, imported on first use (see the module's docstring)."""
    if name == "Settings":
        value = globals()["Settings"] = _model()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
