"""The settings model (SPEC §3): the pydantic model that validates ``Settings``' values.

Built from the fields of ``assembly.settings_table.Settings`` (their types, defaults, bounds and
descriptions), with the checks a type cannot say (below): it is how a setting's value is
validated, and what the JSON schema and docs/settings.md are generated from. Kept apart
so that the engine does not import pydantic and build this model (40–80 ms of CPU at
start-up) unless a value must be checked (``assembly.settings._verdict``). ``promptls rule
CODE`` and ``promptls rules`` never use it.
"""

from __future__ import annotations

import dataclasses
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
    create_model,
    field_validator,
)

from assembly.settings_table import Settings

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
# The names ``Settings``' annotations use, for pydantic to read them here.
_TYPES = (Any, Literal, NonNegativeInt, PositiveInt)


@field_validator("image_cap")
@classmethod
def _positive_cap(cls: type, value: bool | int) -> bool | int:
    """A number of images must be at least 1 (`false` turns the cap off)."""
    if not isinstance(value, bool) and value <= 0:
        raise ValueError("a number of images must be > 0 (false turns the cap off)")
    return value


@field_validator("branch_tip")
@classmethod
def _numeric_tip(cls: type, value: str | int | None) -> str | None:
    """Accept a numeric message id, as Onyx stores them."""
    if isinstance(value, bool):
        raise ValueError("a message id is a string or an integer")
    return str(value) if isinstance(value, int) else value


@field_validator("encoding")
@classmethod
def _known_encoding(cls: type, value: str | None) -> str | None:
    if value is not None and value not in KNOWN_ENCODINGS:
        known = ", ".join(f"`{e}`" for e in KNOWN_ENCODINGS)
        raise ValueError(f"unknown tiktoken encoding; known: {known}")
    return value


@field_validator("rules", mode="before")
@classmethod
def _yaml_off(cls: type, value: Any) -> Any:
    """Accept YAML 1.1's boolean reading of an unquoted `off` as `off`."""
    if isinstance(value, dict):
        return {k: "off" if v is False else v for k, v in value.items()}
    return value


def _field(f: dataclasses.Field[Any]) -> Any:
    """``Settings``' field ``f`` as a pydantic field: its default, bounds and description."""
    if f.default_factory is not dataclasses.MISSING:
        return Field(default_factory=f.default_factory, **f.metadata)
    return Field(f.default, **f.metadata)


_PLUGIN_LOADER = "pydantic.plugin._loader"


@contextmanager
def _no_plugin_discovery() -> Iterator[None]:
    """Build a model's validator without looking for pydantic plugins.

    Building a validator asks pydantic's plugin loader for plugins; the loader imports
    ``importlib.metadata`` and reads every installed distribution's entry points (20–50 ms
    of CPU on every start-up, before any setting is read). Plugins observe the validation
    of a program's models; ``SettingsModel`` is promptls' private schema, so none is asked
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
    SettingsModel: type[BaseModel] = create_model(
        "Settings",
        __config__=ConfigDict(extra="forbid", frozen=True),
        __doc__=Settings.__doc__,
        __module__=__name__,
        __validators__={
            "_positive_cap": _positive_cap,
            "_numeric_tip": _numeric_tip,
            "_known_encoding": _known_encoding,
            "_yaml_off": _yaml_off,
        },
        **{f.name: (f.type, _field(f)) for f in dataclasses.fields(Settings)},
    )
