"""Which tool call each tool response answers, in conversation order.

A call id may be used again once its call was answered (GPT-4o does it, as tau-bench's
trajectories show), so an id alone does not name one call: a response answers the oldest
call before it with its id that is still unanswered, else (a second answer) the latest call
before it with that id. Everything that links calls and responses (the tool-call rules,
hover, go-to-definition, references) asks this module, so they agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from assembly.model import ASSISTANT_ROLE, TOOL_ROLE, Conversation, Message, ToolCall
from assembly.text import resolve


@dataclass(frozen=True, slots=True)
class CallRef:
    """A tool call and the message that makes it."""

    owner: Message
    call: ToolCall
    position: int  # the call's place in ``owner.tool_calls``


@dataclass(slots=True)
class CallPairs:
    """The pairing of one message sequence (a branch, or a whole document in order)."""

    call_of: dict[str, CallRef] = field(default_factory=dict)  # response message id → call
    answers: dict[tuple[str, int], list[Message]] = field(default_factory=dict)
    # Responses that found their call still answered by an earlier response (a second answer).
    second_answers: set[str] = field(default_factory=set)

    def responses(self, owner: Message, position: int) -> list[Message]:
        """The responses answering the ``position``-th call of ``owner``, in order."""
        return self.answers.get((owner.id, position), [])


def pair_tool_calls(messages: Sequence[Message]) -> CallPairs:
    """Pair every tool response of ``messages`` (in order) with the call it answers."""
    res = CallPairs()
    unanswered: dict[str, list[CallRef]] = {}
    latest: dict[str, CallRef] = {}
    for m in messages:
        if m.role is ASSISTANT_ROLE:
            for k, c in enumerate(m.tool_calls):
                ref = CallRef(m, c, k)
                unanswered.setdefault(c.id, []).append(ref)
                latest[c.id] = ref
        elif m.role is TOOL_ROLE and m.tool_call_id:
            waiting = unanswered.get(m.tool_call_id)
            if waiting:
                ref = waiting.pop(0)
            elif m.tool_call_id in latest:
                ref = latest[m.tool_call_id]
                res.second_answers.add(m.id)
            else:
                continue
            res.call_of[m.id] = ref
            res.answers.setdefault((ref.owner.id, ref.position), []).append(m)
    return res


def conversation_pairs(conv: Conversation) -> CallPairs:
    """The pairing of a conversation's stored messages in document order, made once per
    version (no view of a message is made: ids and roles are all it reads)."""
    return conv.derived("pairs", lambda c: pair_tool_calls(c.message_data))


def call_at(conv: Conversation, call_id: str, offset: int) -> CallRef | None:
    """The call with ``call_id`` that a mention at ``offset`` refers to: the latest one made
    at or before that place, else the first one (of the stored messages)."""
    found: CallRef | None = None
    first: CallRef | None = None
    for m, base in zip(conv.message_data, conv.starts, strict=True):
        for k, c in enumerate(m.tool_calls):
            if c.id != call_id:
                continue
            ref = CallRef(m, c, k)
            first = first or ref
            if resolve(m.range, base).start <= offset:
                found = ref
    return found or first


def seen(conv: Conversation, ref: CallRef) -> CallRef:
    """``ref`` (of stored messages) with its message and call seen at their place in
    ``conv``'s version (views: absolute ranges)."""
    owner = conv.locate(ref.owner)
    return CallRef(owner, owner.tool_calls[ref.position], ref.position)  # type: ignore[arg-type]
