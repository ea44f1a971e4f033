"""A model's input window: looked up in litellm's table as Onyx looks it up, and the
`max_input_tokens` setting's default where no source sets it."""

from __future__ import annotations

import pytest

from assembly.settings import SettingsLayer, resolve_settings
from assembly.windows import model_window
from assembly.windows_table import LITELLM_VERSION, WINDOWS


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-4o", 128_000),  # the default model: the setting's default, as before
        ("gpt-4.1", 1_047_576),
        ("gpt-5", 272_000),
        ("gpt-4", 8_192),
        ("o3", 200_000),
        ("claude-sonnet-4-5", 200_000),
        ("gemini-2.5-pro", 1_048_576),
        ("deepseek-chat", 131_072),
        # Onyx's ways of finding a name: after its first `/`, without a `:tag`.
        ("openai/gpt-4.1", 1_047_576),
        ("anthropic/claude-sonnet-4-5", 200_000),
        ("GPT-4.1", 1_047_576),  # as people write it
    ],
)
def test_known_models_have_their_window(model: str, window: int) -> None:
    assert model_window(model) == window


@pytest.mark.parametrize("model", ["", "a-model-nobody-makes", "a/b/c", "x\tgpt-4o", "gpt-4o\n"])
def test_unknown_or_odd_names_have_none(model: str) -> None:
    assert model_window(model) is None


def test_the_table_is_one_line_a_name() -> None:
    lines = WINDOWS.split("\n")
    assert lines[0] == lines[-1] == ""
    rows = [line.split("\t") for line in lines[1:-1]]
    assert all(len(r) == 2 and r[0] and int(r[1]) > 0 for r in rows)
    assert len({name for name, _ in rows}) == len(rows) > 3000
    assert LITELLM_VERSION.count(".") == 2


def _resolve(*layers: dict[str, object]) -> int:
    settings, issues = resolve_settings([SettingsLayer(f"l{i}", v) for i, v in enumerate(layers)])
    assert issues == []
    return settings.max_input_tokens


def test_the_window_defaults_to_the_models() -> None:
    assert _resolve({}) == 128_000  # gpt-4o
    assert _resolve({"model": "claude-sonnet-4-5"}) == 200_000
    assert _resolve({"model": "a-model-nobody-makes"}) == 128_000  # the setting's default
    # A window any source sets wins, in a layer below the model's or above it.
    assert _resolve({"max_input_tokens": 50_000}, {"model": "claude-sonnet-4-5"}) == 50_000
    assert _resolve({"model": "claude-sonnet-4-5"}, {"max_input_tokens": 64_000}) == 64_000
    # The model of the last layer that sets one decides.
    assert _resolve({"model": "gpt-4.1"}, {"model": "gpt-4"}) == 8_192
