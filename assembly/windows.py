"""A model's input window, as Onyx finds it in litellm's model table.

Onyx takes a model's ``max_input_tokens`` from litellm's table (``get_model_map`` and
``find_model_obj`` in ``backend/onyx/llm/model_capabilities.py``). ``model_window`` looks a
name up the way Onyx does when the provider's own prefix does not match: the name as
written, the name after its first ``/`` (Onyx's ``_strip_extra_provider_from_model_name``),
and each of those without a ``:tag`` suffix (Onyx's ``_strip_colon_from_model_name``, for
Ollama's tags); a name of the table with a ``/`` is also found by its last part, unless
that part is a name of its own (Onyx's ``get_model_map``). Names are then tried in lower
case, as people write them. The table (``windows_table.py``) is generated from litellm's
by ``server/windowtable.py``. Onyx also keeps 1,024 tokens of the window for the answer
(``GEN_AI_NUM_RESERVED_OUTPUT_TOKENS``), and falls back to 32,000 for a model it does not
find; promptls shows the window as the table lists it, and the `max_input_tokens`
setting's default (128,000) for a model it does not find (docs/onyx-differences.md).
Pure: the table is a module.
"""

from __future__ import annotations

import functools

from assembly.windows_table import WINDOWS


@functools.lru_cache(maxsize=256)  # settings are resolved on every analysis (a keystroke)
def model_window(model: str) -> int | None:
    """The input window litellm's table gives ``model``, or None when it has none."""
    stripped = model.split("/")[1] if "/" in model else model
    names = [model, stripped]
    names += [":".join(n.split(":")[:-1]) for n in names if ":" in n]
    for name in dict.fromkeys([*names, *(n.lower() for n in names)]):
        if not name or "\n" in name or "\t" in name:
            continue
        at = WINDOWS.find(f"\n{name}\t")
        if at != -1:
            start = at + len(name) + 2
            return int(WINDOWS[start : WINDOWS.index("\n", start)])
    return None
