"""The settings schema (SPEC §3): merging the settings' sources, each value checked.

``Settings`` (``assembly/settings_table.py``, re-exported here) holds the effective
settings of one document: a frozen dataclass whose fields carry each setting's default
and, in their metadata, its bounds and description. A value is checked by pydantic:
``assembly/settings_model.py`` builds the pydantic model from those fields and is imported
only when a value has to be checked. Importing pydantic and building the model cost 40–80
ms of CPU at start-up, which a command that reads no setting does not pay; nor does one
whose every value was checked before, when the IO side keeps the checks' verdicts between
runs (``remember_checks``: the verdict of ``(key, value)`` is a pure function of the key,
the value, the checking code and pydantic's version, which key the memo).

Sources are merged in order, later wins: built-in defaults < ``[tool.promptls]`` in the
nearest ``pyproject.toml`` or a ``promptls.toml`` < editor settings < the document's own
``settings``. Finding and reading those files is the caller's IO; this module only takes
their values as ``SettingsLayer``s. A window (``max_input_tokens``) no source sets is the
model's, as litellm's table lists it (``assembly/windows.py``), else the default. An invalid
value is reported at its exact place in the layer that set it and the value from the layers
below (ultimately the default) is used.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from assembly.settings_table import DEFAULT_SECTION_TOPICS, SETTING_NAMES, Settings
from assembly.text import TextRange
from assembly.tokens import DEFAULT_MODEL

__all__ = [
    "DEFAULT_SECTION_TOPICS",
    "SETTING_NAMES",
    "SettingIssue",
    "Settings",
    "SettingsLayer",
    "is_plain",
    "remember_checks",
    "resolve_settings",
    "settings_json",
]


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


def resolve_settings(
    layers: Sequence[SettingsLayer], *, rule_codes: Collection[str] = ()
) -> tuple[Settings, list[SettingIssue]]:
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
            if key == "rules" and result and rule_codes:
                issues += _unknown_rule_codes(layer.source, result, where, rule_codes)
            merged[key] = result
    if "max_input_tokens" not in merged:  # the model's own window, when its table has one
        from assembly.windows import model_window

        window = model_window(merged.get("model", DEFAULT_MODEL))
        if window is not None:
            merged["max_input_tokens"] = window
    return Settings(**merged), issues


def _unknown_rule_codes(
    source: str, rules: Mapping[str, str], where: TextRange | None, codes: Collection[str]
) -> list[SettingIssue]:
    """A warning for each code of the ``rules`` setting that is not one of ``codes`` (a
    typo would silently change nothing), as ``--select`` refuses one."""
    import difflib

    known = sorted(codes)
    res = []
    for code in rules:
        if code not in known:
            close = difflib.get_close_matches(code.lower(), known, n=1, cutoff=0.6)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            message = f"unknown rule code `{code}` in `rules`: it is ignored{hint}"
            res.append(SettingIssue(source, "rules", message, where, severity="warning"))
    return res


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
        loc = err.get("loc", ())
        if isinstance(value, dict) and len(loc) > 1 and loc[1] in value:
            # One entry of a table (`rules`, `section_topics`): that entry, not the table.
            inner: Any = value
            for part in loc[1:]:
                if isinstance(inner, dict) and part in inner:
                    key, inner = f"{key}.{part}", inner[part]
                elif isinstance(inner, list) and isinstance(part, int) and part < len(inner):
                    key, inner = f"{key}[{part}]", inner[part]
                else:
                    break
            shown = _show(inner)
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
