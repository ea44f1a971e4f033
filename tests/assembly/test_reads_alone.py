"""``all_read_alone`` says of a list of messages what ``reads_alone`` says of each.

A re-read after an edit keeps the messages it does not read again only when none of them
(and none of those it replaces) is read with its neighbours: a tool response without a
usable call id, or a call whose id was made up. ``all_read_alone`` answers for thousands
of messages at once (a list that ends early); it must agree with the per-message rule on
every mix of roles, call ids and calls.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from assembly.documents import all_read_alone, reads_alone
from assembly.model import Message, Role, ToolCall
from assembly.text import TextRange

_AT = TextRange(0, 1)


def _call(synthesized: bool) -> ToolCall:
    return ToolCall("c", "f", None, "{}", _AT, _AT, _AT, _AT, synthesized_id=synthesized)


_MESSAGES = st.builds(
    lambda role, call_id, with_range, calls: Message(
        "m",
        role,
        "text",
        _AT,
        tool_call_id=call_id,
        tool_call_id_range=_AT if with_range else None,
        tool_calls=tuple(map(_call, calls)),
    ),
    st.sampled_from([Role.USER, Role.ASSISTANT, Role.TOOL, Role.SYSTEM]),
    st.sampled_from([None, "", "call_1"]),
    st.booleans(),
    st.lists(st.booleans(), max_size=3),
)


@given(st.lists(_MESSAGES, max_size=12))
def test_all_read_alone_agrees_with_each_message(msgs: list[Message]) -> None:
    assert all_read_alone(msgs) == all(map(reads_alone, msgs))


def test_each_kind_of_message_read_with_its_neighbours() -> None:
    plain = Message("a", Role.USER, "hi", _AT)
    answered = Message("t", Role.TOOL, "ok", _AT, tool_call_id="call_1", tool_call_id_range=_AT)
    assert all_read_alone([plain, answered])
    empty_id = Message("t", Role.TOOL, "ok", _AT, tool_call_id="", tool_call_id_range=_AT)
    no_id = Message("t", Role.TOOL, "ok", _AT)
    invalid_id = Message("t", Role.TOOL, "ok", _AT, tool_call_id_range=_AT)  # not a string
    made_up = Message("a", Role.ASSISTANT, "", _AT, tool_calls=(_call(False), _call(True)))
    # A tool message's own calls are not read with its neighbours (only its call id is).
    tool_with_call = Message(
        "t", Role.TOOL, "", _AT, tool_call_id="x", tool_call_id_range=_AT, tool_calls=(_call(True),)
    )
    assert not all_read_alone([plain, empty_id])
    assert not all_read_alone([no_id, plain])
    assert all_read_alone([invalid_id])
    assert not all_read_alone([answered, made_up])
    assert all_read_alone([tool_with_call, answered])
