"""Every message id promptls outputs is the document's ``id`` or index, whatever is wrong.

Random message lists with corrupted roles (unknown, aliases, not strings, missing), ids
(valid, repeated, empty, of the wrong type), tool calls (empty or missing ids, legacy
``function_call``) and items that are not messages at all are parsed in the three formats,
assembled and checked: each message read carries its item's id, or its position among the
items when it has none (a message left out never renumbers the ones after it), and every id
in the assembly's layout, ``dropped`` and ``orphans_dropped`` names such a message.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assembly.assemble import AssembleOptions, assemble
from assembly.model import DocFormat
from assembly.reading import parse_conversation
from assembly.settings import SettingsLayer, resolve_settings
from tests.support.engine import loaded

TOKENIZER = loaded().tokenizer
PROPERTY = settings(
    max_examples=int(os.environ.get("PROMPTLS_PROPERTY_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
ROLES = ("system", "user", "assistant", "tool", "developer", "function", "human", "", 7, None)
IDS = ("a", "b", "1", "2", 1, 3, "", None, [1], True)


def _call() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"type": st.just("function"), "function": st.just({"name": "f", "arguments": "{}"})},
        optional={"id": st.sampled_from(("c1", "c2", "", 5))},
    )


def _message() -> st.SearchStrategy[Any]:
    msg = st.fixed_dictionaries(
        {"content": st.sampled_from(("hi", "", None, [{"type": "text", "text": "x"}], 3))},
        optional={
            "role": st.sampled_from(ROLES),
            "id": st.sampled_from(IDS),
            "tool_calls": st.lists(_call(), max_size=2),
            "tool_call_id": st.sampled_from(("c1", "c2", "", None, 9)),
            "function_call": st.just({"name": "f", "arguments": "{}"}),
            "name": st.sampled_from(("f", "g")),
            "reasoning_content": st.just("thinking"),
            "agent": st.just("main"),
        },
    )
    return st.one_of(msg, msg, msg, st.sampled_from(("text", 3, None, [])))


def _written_id(item: Any, position: int) -> set[str]:
    """The ids a message read from ``item`` may carry."""
    ok = {str(position)}
    if isinstance(item, dict):
        v = item.get("id")
        if isinstance(v, str) and v:
            ok.add(v)
        elif isinstance(v, int) and not isinstance(v, bool):
            ok.add(str(v))
    return ok


@PROPERTY
@given(st.lists(_message(), max_size=12), st.sampled_from(list(DocFormat)))
def test_every_output_id_is_the_documents_id_or_index(items: list[Any], fmt: DocFormat) -> None:
    if fmt is DocFormat.JSONL:
        # Every line is a message line (a line with document keys would be a header).
        text = "\n".join(json.dumps(i) for i in items)
    else:  # JSON is YAML too
        text = json.dumps(items, indent=1)
    conv = parse_conversation(text, fmt)
    nodes = list(conv.root.items) if conv.root is not None and conv.root.is_array else []
    position = {n.range.start: k for k, n in enumerate(nodes)}
    for m in conv.messages:
        k = position.get(m.range.start)
        assert k is not None, m
        assert m.id in _written_id(items[k], k), (m.id, items[k], k)
        assert conv.messages[m.index] is m
    ids = {m.id for m in conv.messages}
    assert len(ids) == len(conv.messages)
    s, _ = resolve_settings([SettingsLayer("document", {"max_input_tokens": 4000})])
    result = assemble(conv, s, TOKENIZER, AssembleOptions(today=dt.date(2026, 7, 15)))
    for entry in result.layout:
        if not entry.id.startswith("$"):
            assert entry.id.split("/files/")[0] in ids, entry.id
    assert set(result.dropped) <= ids
    assert set(result.orphans_dropped) <= ids
