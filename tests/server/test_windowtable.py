"""The generator of the models' windows (``server/windowtable.py``) reads litellm's table
as Onyx's ``get_model_map`` and ``llm_max_input_tokens`` do."""

from __future__ import annotations

from server.windowtable import windows


def test_the_generator_reads_the_table_as_onyx_does() -> None:
    table = {
        "sample_spec": {"mode": "one of: chat, …", "max_input_tokens": "…"},
        "gpt-x": {"mode": "chat", "max_input_tokens": 1000, "max_tokens": 10},
        "old-model": {"mode": "completion", "max_tokens": 4096},  # no max_input_tokens
        "an-embedder": {"mode": "embedding", "max_input_tokens": 8191},
        "prov/gpt-x": {"mode": "chat", "max_input_tokens": 5},  # `gpt-x` is a name of its own
        "a/shared": {"mode": "chat", "max_input_tokens": 100},
        "b/shared": {"mode": "chat", "max_input_tokens": 200, "supports_vision": True},
        "c/shared": {"mode": "chat", "max_input_tokens": 300},  # as detailed as `a/`: not it
    }
    assert windows(table) == {
        "a/shared": 100,
        "b/shared": 200,
        "c/shared": 300,
        "gpt-x": 1000,
        "old-model": 4096,
        "prov/gpt-x": 5,
        "shared": 200,  # the entry that describes the most fields
    }
