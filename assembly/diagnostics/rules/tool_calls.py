"""Rules about tool calls and their responses: orphans, unanswered calls, duplicate ids and
calls written as text.

Everything is judged on the current branch (``Assembly.chain``, in order), which is what the
model is sent; messages on other branches only serve as the "other end" of a finding. Each
rule walks the branch once (no quadratic loops: a 10,000-message log stays fast).

Also here, for the file rules (``files.py``): ``decoded_spans`` and ``decoded_range`` (a
span of a decoded string back to the document).

Fixes are text edits that keep the document parsing: a removed message takes its separating
comma (JSON), its line (JSONL) or its list-item lines (YAML) with it; where no such edit is
safe, no fix is offered.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import itertools
import json
import operator
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from assembly.diagnostics.core import (
    Diagnostic,
    Fix,
    LateFix,
    Related,
    RuleContext,
    Severity,
    TextEdit,
    message_memo,
)
from assembly.diagnostics.engine import (
    REFINES,
    AssistantMessage,
    MessageSource,
    When,
    message_start,
)
from assembly.diagnostics.inputs import CallIds, MessageShape, OrphanCut, Tools, ToolTraffic
from assembly.diagnostics.window import TextLike, find_newline, line_start, offset_map
from assembly.model import (
    ASSISTANT_ROLE,
    TOOL_ROLE,
    Conversation,
    DocFormat,
    Message,
    RejectedCall,
    ToolCall,
)
from assembly.pairs import CallPairs, pair_tool_calls
from assembly.seq import common_ends, differing
from assembly.sourcemap import OffsetMap
from assembly.syntax import SNode
from assembly.text import TextRange, resolve
from assembly.toolcalls import (
    RecoveredCall,
    extract_tool_calls,
    looks_like_tool_call_markup,
    markup_tool_calls,
    may_hold_markup,
)

# Recovered shapes that are unmistakably a call; a bare schema match ({"query": "…"}) in
# prose is reported only when the text also looks like tool-call markup (Onyx's trigger).
_EXPLICIT_SHAPES = frozenset({"name-arguments", "function-wrapper", "tool-key", "invoke"})
_ARGS_PREVIEW = 80


def orphaned_tool_response(b: ToolTraffic, cut: OrphanCut) -> Iterator[Diagnostic]:
    """A tool response has no matching earlier tool call.

    ## What it does
    Walks the current branch and reports every `tool` message whose `tool_call_id` was not
    made by an earlier assistant tool call: as written (the call is missing, comes later, or
    sits on another branch), and after truncation (the call was older than the budget cut,
    or summarized away, so the response is silently dropped too). The related information
    points at the call the response lost (or at the call left out because it is malformed);
    every response that is not sent is faded.

    ## Why is this bad?
    Providers reject a tool result without its call, so Onyx drops such responses before
    sending: whatever the result said never reaches the model.

    ## Example
    ```yaml
    messages:
      - {role: user, content: "What is the weather in Oslo?"}
      - {role: tool, tool_call_id: call_1, content: "12 °C, rain"}
    ```
    No assistant message made `call_1`. The fix removes the response.
    """
    t = _traffic(b)
    order, on_branch, tools, call_ids, at = t.order, t.on_branch, t.tools, t.call_ids, t.at
    written: set[str] = set()
    calls: _CallIndex | None = None
    # At C speed: a response is an orphan when the first call of its id comes after it.
    n = len(on_branch)
    first_call = dict(zip(reversed(call_ids), reversed(at), strict=True))
    first_call.pop("", None)  # a response without a call id answers nothing
    responses = list(map(on_branch.__getitem__, tools))
    placed = map(operator.is_not, map(_ANSWER_RANGE, responses), itertools.repeat(None))
    late = map(
        operator.gt, map(first_call.get, map(_TOOL_CALL_ID, responses), itertools.repeat(n)), tools
    )
    for p in itertools.compress(tools, map(operator.and_, placed, late)):
        m = b.messages[order[p]]
        written.add(m.id)
        calls = calls or _CallIndex(b, t)
        yield _orphan_as_written(b, m, calls)
    if not cut.orphans_dropped:
        return
    by_id = dict(zip(map(_ID, on_branch), order, strict=True))
    data = b.data
    dropped = cut.dropped_callers
    pairs: CallPairs | None = None
    where: dict[int, int] = {}  # the pairing messages' indexes, by identity
    for msg_id in cut.orphans_dropped:
        i = by_id.get(msg_id)
        if i is None or msg_id in written or data[i].role is not TOOL_ROLE:
            continue
        if pairs is None:
            at = _pairing(t, cut.orphans_dropped)
            paired = list(map(on_branch.__getitem__, at))
            pairs = pair_tool_calls(paired)
            where = dict(zip(map(id, paired), map(order.__getitem__, at), strict=True))
        ref = pairs.call_of.get(msg_id)
        if ref is None:
            continue
        owner = ref.owner
        call = b.messages[where[id(owner)]].tool_calls[ref.position]
        if owner.id in dropped:
            why = f"its call in `{owner.id}` is cut by the token budget"
            note = "the call, dropped by the budget cut"
        else:
            why = f"its call in `{owner.id}` is replaced by the summary"
            note = "the call, summarized away"
        yield Diagnostic(
            "orphaned-tool-response",
            Severity.WARNING,
            f"tool response to `{call.id}` is not sent: {why}",
            b.messages[i].range,
            related=(Related(call.id_range, note),),
            unnecessary=True,
        )


def _pairing(t: _Traffic, ids: Sequence[str]) -> list[int]:
    """The positions on the branch of the messages the pairing of the responses ``ids``
    depends on: the calls and responses of their call ids (``pair_tool_calls`` pairs each
    call id on its own), in branch order.

    Found in passes at C speed over the branch's traffic ``t``: the messages named
    ``ids``, the tool messages answering one of their call ids, the assistant messages
    making a call of one.
    """
    on_branch = t.on_branch
    wanted = set(ids)
    named = itertools.compress(on_branch, map(wanted.__contains__, map(_ID, on_branch)))
    call_ids = set(map(_TOOL_CALL_ID, named))
    call_ids.discard(None)
    if not call_ids:
        return []
    answers = map(_TOOL_CALL_ID, map(on_branch.__getitem__, t.tools))
    keep = set(itertools.compress(t.tools, map(call_ids.__contains__, answers)))
    keep.update(itertools.compress(t.at, map(call_ids.__contains__, t.call_ids)))
    return sorted(keep)


_ID = operator.attrgetter("id")
_TOOL_CALL_ID = operator.attrgetter("tool_call_id")
_TOOL_CALLS = operator.attrgetter("tool_calls")
_ROLE = operator.attrgetter("role")
_ANSWER_RANGE = operator.attrgetter("tool_call_id_range")


@dataclass(frozen=True, slots=True)
class _Traffic:
    """The tool traffic of a branch (``ToolTraffic``'s), found at C speed: its messages'
    indexes and stored messages (``order``, ``on_branch``), the positions of its tool
    messages; the calls of each assistant message, in order; every call's id and the
    position of its message, flattened in branch order."""

    order: list[int]
    on_branch: list[Message]
    tools: list[int]
    made: list[tuple[ToolCall, ...]]
    call_ids: list[str]
    at: list[int]


_LAST_TRAFFIC: list[tuple[ToolTraffic, _Traffic]] = []  # the last one only


def _traffic(b: ToolTraffic) -> _Traffic:
    """``b``'s traffic, made once for the three tool-call rules reading it; from the last
    one when the branch goes through the same messages and those replaced since keep
    their roles and calls (a response's text or call id typed in)."""
    last = _LAST_TRAFFIC[0] if _LAST_TRAFFIC else None
    if last is not None and last[0] is b:
        return last[1]
    order = b.order()
    on_branch = b.branch_data()
    if last is not None and last[1].order == order:
        was = last[1].on_branch
        diff = differing(was, on_branch)
        if len(diff) <= 8 and all(
            on_branch[p].role is was[p].role and on_branch[p].tool_calls == was[p].tool_calls
            for p in diff
        ):
            t = dataclasses.replace(last[1], order=order, on_branch=on_branch)
            _LAST_TRAFFIC[:] = [(b, t)]
            return t
    roles = list(map(_ROLE, on_branch))
    n = len(roles)
    tools = list(
        itertools.compress(range(n), map(operator.is_, roles, itertools.repeat(TOOL_ROLE)))
    )
    makers = list(
        itertools.compress(range(n), map(operator.is_, roles, itertools.repeat(ASSISTANT_ROLE)))
    )
    made = list(map(_TOOL_CALLS, map(on_branch.__getitem__, makers)))
    call_ids = list(map(_ID, itertools.chain.from_iterable(made)))
    at = list(itertools.chain.from_iterable(map(itertools.repeat, makers, map(len, made))))
    t = _Traffic(order, on_branch, tools, made, call_ids, at)
    _LAST_TRAFFIC[:] = [(b, t)]
    return t


def unanswered_tool_call(b: ToolTraffic) -> Iterator[Diagnostic]:
    """An assistant tool call has no tool response after it.

    ## What it does
    Reports every tool call on the current branch that no later `tool` message answers
    (no `tool_call_id` equal to the call's `id` after it).

    ## Why is this bad?
    OpenAI-compatible providers reject a request in which an assistant tool call is not
    followed by its result. Onyx keeps such calls silently, so the turn fails at the
    provider rather than in the editor.

    ## Example
    ```yaml
    messages:
      - {role: user, content: "Find the refund policy"}
      - role: assistant
        tool_calls: [{id: call_1, type: function,
                      function: {name: internal_search, arguments: '{"query": "refund"}'}}]
      - {role: user, content: "Any luck?"}
    ```
    `call_1` is never answered: add its `tool` message right after the call.

    In a dataset (one conversation per JSON Lines line), the calls of a record's last
    message are the example's answer, not unanswered calls.
    """
    t = _traffic(b)
    order, on_branch, tools, made, call_ids, at = (
        t.order,
        t.on_branch,
        t.tools,
        t.made,
        t.call_ids,
        t.at,
    )
    if b.answer:  # the last message (an assistant's) makes a dataset record's answer
        last = len(call_ids) - len(made[-1])
        made, call_ids, at = made[:-1], call_ids[:last], at[:last]
    # At C speed: a call is answered when the last response to its id comes after it.
    last_answer = dict(
        zip(map(_TOOL_CALL_ID, map(on_branch.__getitem__, tools)), tools, strict=True)
    )
    last_answer.pop("", None)  # an empty call id answers nothing
    ks = itertools.chain.from_iterable(map(range, map(len, made)))
    unanswered = map(operator.lt, map(last_answer.get, call_ids, itertools.repeat(-1)), at)
    shapes = b.messages
    for p, k in itertools.compress(zip(at, ks, strict=True), unanswered):
        call = shapes[order[p]].tool_calls[k]
        yield Diagnostic(
            "unanswered-tool-call",
            Severity.WARNING,
            f"tool call `{call.id}` to `{call.name}` has no tool response",
            call.id_range,
        )


def duplicate_tool_call_id(b: ToolTraffic) -> Iterator[Diagnostic]:
    """The same tool call id is used twice where a response cannot tell the calls apart.

    ## What it does
    Reports a tool call whose `id` another call of the same assistant message uses, or an
    earlier call on the current branch that is still unanswered; and a `tool` message
    answering a call that an earlier `tool` message already answered. Using an id again
    after its call was answered is not reported: providers accept it (GPT-4o does it) and
    each response pairs with the call before it, in conversation order.
    The related information points at the first use.

    ## Why is this bad?
    A response is matched to its call by id: with two open calls of one id, one of them has
    no result of its own (or gets the other's), and providers reject duplicate ids in one
    message.

    ## Example
    ```yaml
    - role: assistant
      tool_calls:
        - {id: call_1, type: function, function: {name: web_search, arguments: '{"query": "a"}'}}
        - {id: call_1, type: function, function: {name: web_search, arguments: '{"query": "b"}'}}
    ```
    """
    # Calls as (message index, position), resolved to their place for a finding only.
    open_calls: dict[str, list[tuple[int, int]]] = {}  # unanswered calls by id, oldest first
    answered: dict[str, int] = {}  # answered ids → the index of the answer
    shapes = b.messages

    def call_range(at: tuple[int, int]) -> TextRange:
        return shapes[at[0]].tool_calls[at[1]].id_range

    def answer_range(i: int) -> TextRange:
        m = shapes[i]
        return m.tool_call_id_range or m.range

    for i, g in _sharing_ids(_traffic(b)):
        if g.role is ASSISTANT_ROLE:
            here: dict[str, tuple[int, int]] = {}
            for k, call in enumerate(g.tool_calls):
                waiting = open_calls.setdefault(call.id, [])
                first = here.get(call.id)
                why = "another call of this message"
                if first is None and waiting:
                    first, why = waiting[0], "an earlier call that is still unanswered"
                here.setdefault(call.id, (i, k))
                waiting.append((i, k))
                answered.pop(call.id, None)
                if first is None:
                    continue
                yield Diagnostic(
                    "duplicate-tool-call-id",
                    Severity.ERROR,
                    f"tool call id `{call.id}` is already used by {why}",
                    call_range((i, k)),
                    related=(Related(call_range(first), "first used here"),),
                )
        elif g.role is TOOL_ROLE and g.tool_call_id:
            waiting = open_calls.get(g.tool_call_id)
            if waiting:
                waiting.pop(0)
                answered.setdefault(g.tool_call_id, i)
                continue
            earlier = answered.get(g.tool_call_id)
            if earlier is None:
                continue  # no call before it: an orphan, reported there
            yield Diagnostic(
                "duplicate-tool-call-id",
                Severity.ERROR,
                f"tool call `{g.tool_call_id}` is answered twice",
                answer_range(i),
                related=(Related(answer_range(earlier), "first answer"),),
            )


def _sharing_ids(t: _Traffic) -> list[tuple[int, Message]]:
    """The (index, message) pairs of the branch, in order, that make a call of or answer
    an id made by two calls or answered by two tool messages: each id's calls and answers
    are paired on their own, so only these can reuse an id. Found at C speed.
    """
    order, on_branch, tools, call_ids, at = t.order, t.on_branch, t.tools, t.call_ids, t.at
    answers = list(map(_TOOL_CALL_ID, map(on_branch.__getitem__, tools)))
    shared: set[str | None] = set()
    for counts in (collections.Counter(call_ids), collections.Counter(answers)):
        shared.update(itertools.compress(counts.keys(), map((1).__lt__, counts.values())))
    shared.discard(None)
    if not shared:
        return []
    keep = set(itertools.compress(at, map(shared.__contains__, call_ids)))
    keep.update(itertools.compress(tools, map(shared.__contains__, answers)))
    keep_ = sorted(keep)
    return list(zip(map(order.__getitem__, keep_), map(on_branch.__getitem__, keep_), strict=True))


def _declared(tools: Tools) -> bool:
    return tools.declared


def _undeclared(tools: Tools) -> bool:
    return not tools.declared


class _MayHoldCall(AssistantMessage):
    """An assistant message whose text may hold a call (``_may_hold_call``)."""

    __slots__ = ()

    @staticmethod
    def admits(m: Message) -> bool:
        return _may_hold_call(m.content)


class _MayHoldMarkup(AssistantMessage):
    """An assistant message whose text holds a chat template's call markup."""

    __slots__ = ()

    @staticmethod
    def admits(m: Message) -> bool:
        return may_hold_markup(m.content)


def tool_call_in_text(
    src: _MayHoldCall,
    tools: Annotated[Tools, When(_declared)],
    ids: Annotated[CallIds, REFINES],
) -> Iterator[Diagnostic]:
    """An assistant message wrote a tool call as text.

    ## What it does
    Runs Onyx's text tool-call recovery over each assistant message of the current branch,
    with the tools offered this turn: JSON objects shaped like a call
    (`{"name": …, "arguments": …}`, `{"function": {…}}`, `{"<tool>": {…}}`) and
    `<invoke name="…">` blocks. A bare object that only matches a tool's parameter schema
    counts when the text also looks like tool-call markup (`<function_calls>` with
    `<invoke>`), as in Onyx. A text call that repeats one of the message's structured
    `tool_calls` is not reported. The message shows the call the parser recovers.

    ## Why is this bad?
    A call written as text is not executed: the model meant to use the tool, but the turn
    ends with markup in the answer, or Onyx's once-per-turn fallback parser has to guess
    the call. In a test conversation it replays as text, not as the call it stands for.

    ## Example
    ```json
    {"role": "assistant",
     "content": "{\\"name\\": \\"web_search\\", \\"arguments\\": {\\"query\\": \\"Oslo\\"}}"}
    ```
    The fix (JSON and JSONL documents) moves the call into `tool_calls`.
    """
    calls = text_calls(src.stored, tools.definitions)  # (of the message alone)
    if calls:
        spans = decoded_spans(src)
        for call in calls:
            rng = _call_range(src, spans, call.start, call.end)
            args = json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"))
            if len(args) > _ARGS_PREVIEW:
                args = args[: _ARGS_PREVIEW - 1] + "…"
            yield Diagnostic(
                "tool-call-in-text",
                Severity.WARNING,
                f"tool call written as text: the fallback parser recovers `{call.name}({args})`",
                rng,
                fix=_structured_call_fix(src, call, ids.ids),
            )


def _call_range(src: MessageSource, spans: DecodedSpans | None, start: int, end: int) -> TextRange:
    """Where a call written in a message's text lies: its characters when the content maps
    back to the document (``decoded_spans``), else the content (or the message)."""
    m = src.message
    if spans is not None:
        return spans.range(start, end)
    return m.content_range if m.content_range is not None else m.range


def tool_call_markup_in_text(
    src: _MayHoldMarkup, tools: Annotated[Tools, When(_undeclared)]
) -> Iterator[Diagnostic]:
    """An assistant message holds a tool call in a model's own markup, and no tool is declared.

    ## What it does
    When the conversation declares no tools (a bare array of messages cannot; the `tools`
    key, a request body's `tools`, a template's front matter or the `tools` setting can),
    recognises the tool-call markup of well-known chat templates in assistant messages:
    `<tool_call>{"name": …, "arguments": …}</tool_call>` (Hermes, Qwen) and Llama's
    `<|python_tag|>` followed by a JSON call or a `tool.call(…)` line. With tools declared,
    `tool-call-in-text` checks the calls against them instead.

    ## Why is this bad?
    It may not be: open-weight models served without a tool parser, and fine-tuning sets
    for them, write calls this way. Sent to an OpenAI-compatible API, the call stays text:
    nothing executes it. Declare the tools (e.g. the `tools` setting) to have the calls
    checked, or move them into `tool_calls`.

    ## Example
    ```json
    {"role": "assistant",
     "content": "<tool_call>{\\"name\\": \\"get_weather\\", \\"arguments\\": {}}</tool_call>"}
    ```
    """
    calls = markup_tool_calls(src.stored.content)  # (no positions are read but for a finding)
    if calls:
        spans = decoded_spans(src)
        for call in calls:
            rng = _call_range(src, spans, call.start, call.end)
            template = (
                "Hermes/Qwen `<tool_call>`" if call.shape == "hermes" else "Llama `<|python_tag|>`"
            )
            yield Diagnostic(
                "tool-call-markup-in-text",
                Severity.INFO,
                f"tool call to `{call.name}` written in {template} markup; no tools are "
                "declared to check it against",
                rng,
            )


# ------------------------------------------------------------------------- shared helpers


def text_calls(m: Message, tools: Sequence[Mapping[str, Any]]) -> tuple[RecoveredCall, ...]:
    """The calls written in the text of an assistant message that `tool-call-in-text`
    reports, with offsets into its content; depends on the message and ``tools`` alone."""
    if m.role is not ASSISTANT_ROLE or not _may_hold_call(m.content):
        return ()
    recovered = extract_tool_calls(m.content, tools)
    if not recovered:
        return ()
    markup = looks_like_tool_call_markup(m.content)
    made = [(c.name, c.arguments) for c in m.tool_calls]
    return tuple(
        c
        for c in recovered
        if (markup or c.shape in _EXPLICIT_SHAPES) and (c.name, c.arguments) not in made
    )


def call_node(src: MessageSource, call: ToolCall) -> SNode | None:
    """The source object of one of the message's tool calls."""
    node = src.node
    calls = node.get("tool_calls") if node is not None else None
    if calls is None or not calls.is_array:
        return None
    return next((c for c in calls.items if c.range == call.range), None)


class _Nodes:
    """The message list's source array and what deleting a message could break: the ids
    named by ``parent``/``summarizes_through``, and the position of the last message named
    by its index (no ``id``). An item's place is read from the stored array (``range``),
    so placing one message makes no view of the others."""

    def __init__(self, conv: Conversation, refs: _References) -> None:
        self.array: SNode | None = None
        root = conv.root
        if root is not None and root.is_array:
            self.array = root
        elif root is not None and root.is_object:
            messages = root.get("messages")
            if messages is not None and messages.is_array:
                self.array = messages
        green = getattr(self.array, "green", self.array)
        self._items: tuple[SNode, ...] = green.items if green is not None else ()
        self._starts: tuple[int, ...] | None = green.starts if green is not None else None
        self._base: int = getattr(self.array, "base", 0)
        self.referenced: Mapping[str | None, int] = refs.counts
        self.last_implicit_id = refs.implicit.rfind(1)

    def __len__(self) -> int:
        return len(self._items)

    def range(self, k: int) -> TextRange:
        """The range of the ``k``-th item of the array."""
        base = self._starts[k] if self._starts is not None else self._base
        return resolve(self._items[k].range, base)

    def item(self, m: Message) -> int | None:
        """The index of the message's node in the array."""
        if self.array is None:
            return None
        at = message_start(m)
        k = bisect.bisect_left(range(len(self)), at, key=lambda k: self.range(k).start)
        return k if k < len(self) and self.range(k).start == at else None


_PARENT = operator.attrgetter("parent")
_THROUGH = operator.attrgetter("summarizes_through")
_ID_RANGE = operator.attrgetter("id_range")


@dataclass(frozen=True, slots=True)
class _References:
    """Over the stored messages ``msgs``: how many name each id by ``parent`` or
    ``summarizes_through`` (None not counted; no zero counts), and per message whether
    it has no ``id`` of its own (1: named by its index)."""

    msgs: tuple[Message, ...]
    counts: dict[str | None, int]
    implicit: bytes


def _references(msgs: tuple[Message, ...], last: _References | None) -> _References:
    """The references of ``msgs``, made from ``last`` (those of an earlier version, or
    None) where the messages are the same objects: the common head and tail are found
    by identity in passes at C speed, only the messages between are read (all of them
    when ``last`` is None)."""
    if last is not None and last.msgs is msgs:
        return last  # (another fix of the same version)
    old = last.msgs if last is not None else ()
    n_old, n_new = len(old), len(msgs)
    head, tail = common_ends(old, msgs)
    gone, came = old[head : n_old - tail], msgs[head : n_new - tail]
    counts = collections.Counter(last.counts if last is not None else ())
    if gone:
        counts.subtract(itertools.chain(map(_PARENT, gone), map(_THROUGH, gone)))
    counts.update(itertools.chain(map(_PARENT, came), map(_THROUGH, came)))
    for k in set(itertools.chain(map(_PARENT, gone), map(_THROUGH, gone))):
        if counts.get(k, 0) <= 0:
            counts.pop(k, None)  # (no zero counts)
    counts.pop(None, None)
    new_mid = bytes(map(operator.is_, map(_ID_RANGE, came), itertools.repeat(None)))
    implicit = (
        new_mid
        if last is None
        else b"".join((last.implicit[:head], new_mid, last.implicit[n_old - tail :]))
    )
    return _References(msgs, dict(counts), implicit)


def _node_start(node: SNode) -> int:
    return node.range.start


class DecodedSpans:
    """Maps spans of a decoded text made of one or more string nodes to document ranges.

    ``pieces`` are ``(offset in the decoded text, node, map)``: a message's content parts
    are joined with one ``"\\n"`` between them, as the reader joins them.
    """

    def __init__(self, pieces: list[tuple[int, SNode, OffsetMap]]) -> None:
        self.pieces = pieces

    def range(self, start: int, end: int) -> TextRange:
        first = self._piece(start)
        last = self._piece(max(start, end - 1))
        lo = first[2](start - first[0])
        hi = last[2].end(end - last[0]) if end > start else lo
        return TextRange(lo, max(lo, hi))

    def _piece(self, offset: int) -> tuple[int, SNode, OffsetMap]:
        res = self.pieces[0]
        for piece in self.pieces:
            if piece[0] > offset:
                break
            res = piece
        return res


def decoded_spans(src: MessageSource) -> DecodedSpans | None:
    """The span map of a message's content (a string or text parts), or None."""
    m = src.message
    if m.content_range is None:
        return None
    node = src.node
    content = node.get("content") if node is not None else None
    if content is None or content.range != m.content_range:
        return None
    if content.is_string:
        return decoded_range(src.text, content)
    if not content.is_array:
        return None
    pieces: list[tuple[int, SNode, OffsetMap]] = []
    offset = 0
    for part in content.items:
        text_node = part if part.is_string else None
        if part.is_object:
            ptype = part.get("type")
            candidate = part.get("text")
            if ptype is not None and ptype.value == "text" and candidate is not None:
                text_node = candidate if candidate.is_string else None
        if text_node is None:
            continue
        value = str(text_node.value)
        pieces.append((offset, text_node, offset_map(src.text, text_node.range, value)))
        offset += len(value) + 1
    return DecodedSpans(pieces) if pieces else None


def decoded_range(text: TextLike, node: SNode) -> DecodedSpans:
    """The span map of one string node."""
    return DecodedSpans([(0, node, offset_map(text, node.range, str(node.value)))])


def remove_message_edit(ctx: RuleContext, m: Message) -> tuple[TextEdit, ...] | None:
    """An edit that deletes a message and keeps the document valid, or None when unsafe
    (a ``LateFix``: it reads the text around the message in the version shown)."""
    conv = ctx.conversation
    if conv is None:
        return None
    memo = message_memo(ctx)
    # The array is this version's; the references are carried from the last version's.
    refs = memo.carried("message-references", lambda last: _references(conv.message_data, last))
    nodes = _Nodes(conv, refs)
    if not _nothing_refers_to(ctx, nodes, m):
        return None
    text = ctx.text
    edit: TextEdit | None
    k = nodes.item(m)
    array = nodes.array
    if conv.format is DocFormat.JSONL:
        edit = _remove_line(text, m.range)
    elif array is None or k is None:
        return None
    elif text[array.range.start : array.range.start + 1] == "[":
        edit = _remove_flow_item(text, array, nodes, k)
    elif len(nodes) < 2:
        return None  # an empty block sequence would leave `messages:` null
    else:
        edit = _remove_block_item(text, nodes.range(k))
    return (edit,) if edit is not None else None


# ------------------------------------------------------------------------- orphans


class _CallIndex:
    """The first call of each id on the branch (in its traffic's calls, flattened in branch
    order: only assistant messages make calls) and in the whole document (the calls of
    every caller flattened, when some caller is off the branch), looked up at C speed."""

    def __init__(self, b: ToolTraffic, t: _Traffic) -> None:
        self._b = b
        self._t = t
        self._anywhere: tuple[list[str], list[int], list[int]] | None = None

    def on_branch(self, call_id: str) -> ToolCall | None:
        t = self._t
        try:
            k = t.call_ids.index(call_id)
        except ValueError:
            return None
        calls = self._b.messages[t.order[t.at[k]]].tool_calls
        return next(c for c in calls if c.id == call_id)

    def anywhere(self, call_id: str) -> ToolCall | None:
        b = self._b
        if self._anywhere is None:
            if sum(map(len, map(_TOOL_CALLS, b.callers_data()))) == len(self._t.call_ids):
                return self.on_branch(call_id)  # every caller is on the branch
            self._anywhere = _flat_calls(b.data, b.callers)
        ids, owners, positions = self._anywhere
        try:
            k = ids.index(call_id)
        except ValueError:
            return None
        return b.messages[owners[k]].tool_calls[positions[k]]


def _flat_calls(
    data: Sequence[Message], indexes: Sequence[int]
) -> tuple[list[str], list[int], list[int]]:
    """The calls of the messages ``indexes``, in that order, flattened (at C speed): their
    ids, the index of the message making each, its position among the message's calls."""
    calls = list(map(_TOOL_CALLS, map(data.__getitem__, indexes)))
    counts = list(map(len, calls))
    owners = list(itertools.chain.from_iterable(map(itertools.repeat, indexes, counts)))
    positions = list(itertools.chain.from_iterable(map(range, counts)))
    return list(map(_ID, itertools.chain.from_iterable(calls))), owners, positions


def _orphan_as_written(b: ToolTraffic, m: MessageShape, calls: _CallIndex) -> Diagnostic:
    """An orphan as written: the branch makes its call only later, or nowhere."""
    assert m.tool_call_id_range is not None
    call_id = m.tool_call_id or ""
    related: tuple[Related, ...] = ()
    rejected: RejectedCall | None = None
    if not call_id:
        message = "tool response has an empty `tool_call_id`: it answers no call and is not sent"
    elif (later := calls.on_branch(call_id)) is not None:
        message = f"tool response to `{call_id}` comes before its call and is not sent"
        related = (Related(later.id_range, "the call, made after its response"),)
    elif (elsewhere := calls.anywhere(call_id)) is not None:
        message = f"tool response to `{call_id}` has no call on this branch and is not sent"
        related = (Related(elsewhere.id_range, "the call, on another branch"),)
    elif (rejected := next((r for r in b.rejected_calls if r.id == call_id), None)) is not None:
        message = (
            f"tool response to `{call_id}` is not sent: its call is malformed and left out "
            f"({rejected.reason})"
        )
        related = (Related(rejected.range, "the malformed call"),)
    else:
        message = f"tool response to `{call_id}` answers no tool call and is not sent"
    # The call is there but malformed: repairing it is the fix, not deleting its answer.
    fix = None
    if rejected is None:
        title = "Remove the orphaned tool response"
        fix = LateFix(title, (), message=m.index, make=remove_message_edit)
    return Diagnostic(
        "orphaned-tool-response",
        Severity.WARNING,
        message,
        m.range,
        related=related,
        fix=fix,
        unnecessary=True,
    )


def _nothing_refers_to(ctx: RuleContext, nodes: _Nodes, m: Message) -> bool:
    """Whether deleting ``m`` leaves every message reference (and implicit id) intact."""
    tip = ctx.settings.branch_tip
    if tip == m.id or m.id in nodes.referenced:
        return False
    if tip is None and not nodes.referenced:
        return True
    # Later messages without an `id` are named by their index, which the deletion shifts.
    return nodes.last_implicit_id < m.index


def _remove_line(text: TextLike, rng: TextRange) -> TextEdit | None:
    start = line_start(text, rng.start)
    end = find_newline(text, rng.end)
    if text[start : rng.start].strip() or text[rng.end : end if end != -1 else None].strip():
        return None
    if end != -1:
        return TextEdit(TextRange(start, end + 1), "")
    return TextEdit(TextRange(max(0, start - 1), len(text)), "")


def _remove_flow_item(text: TextLike, array: SNode, nodes: _Nodes, k: int) -> TextEdit | None:
    if len(nodes) == 1:
        return TextEdit(
            TextRange(array.range.start + 1, max(array.range.start + 1, array.range.end - 1)), ""
        )
    here = nodes.range(k)
    if k + 1 < len(nodes):
        after = nodes.range(k + 1)
        if text[here.end : after.start].strip() != ",":
            return None
        return TextEdit(TextRange(here.start, after.start), "")
    before = nodes.range(k - 1)
    if text[before.end : here.start].strip() != ",":
        return None
    return TextEdit(TextRange(before.end, here.end), "")


def _remove_block_item(text: TextLike, rng: TextRange) -> TextEdit | None:
    dash = rng.start - 1
    while dash >= 0 and text[dash] in " \t\r\n":
        dash -= 1
    if dash < 0 or text[dash] != "-":
        return None
    start = line_start(text, dash)
    if text[start:dash].strip(" "):
        return None
    end = find_newline(text, rng.end)
    rest = text[rng.end : end if end != -1 else None].strip()
    if rest and not rest.startswith("#"):
        return None
    return TextEdit(TextRange(start, end + 1 if end != -1 else len(text)), "")


# ------------------------------------------------------------------------- calls in text


def _may_hold_call(content: str) -> bool:
    """A cheap pre-check: only text with a brace or an invoke tag can hold a call."""
    # (Searched for as the parser's pattern reads the tag, any case: ``lower()`` made a
    # copy of each text with a "<", the most of the open's time for this rule.)
    return "{" in content or ("<" in content and _INVOKE_TAG.search(content) is not None)


_INVOKE_TAG = re.compile("<invoke", re.IGNORECASE)


_FUNCTION_CALLS_OPEN = re.compile(r"<function_calls\s*>\s*$", re.IGNORECASE)
_FUNCTION_CALLS_CLOSE = re.compile(r"^\s*</function_calls>", re.IGNORECASE)


def _without_call(content: str, start: int, end: int) -> str:
    """The content with one recovered call (and a wrapper left empty by it) removed."""
    before, after = content[:start], content[end:]
    opened = _FUNCTION_CALLS_OPEN.search(before)
    closed = _FUNCTION_CALLS_CLOSE.search(after)
    if opened is not None and closed is not None:
        before, after = before[: opened.start()], after[closed.end() :]
    left, right = before.rstrip(), after.lstrip()
    if not left or not right:
        return left + right
    # Keep the wider of the two breaks around the call, not both.
    gaps = (before[len(left) :], after[: len(after) - len(right)])
    if any("\n\n" in gap for gap in gaps):
        return f"{left}\n\n{right}"
    return left + ("\n" if any("\n" in gap for gap in gaps) else " ") + right


def _structured_call_fix(
    src: MessageSource, call: RecoveredCall, taken: frozenset[str]
) -> Fix | None:
    """Move a recovered call into the message's `tool_calls` (JSON and JSONL only)."""
    if src.format is DocFormat.YAML:
        return None
    m = src.message
    node = src.node
    content = node.get("content") if node is not None else None
    if node is None or content is None or not content.is_string:
        return None
    call_id = call.id
    n = 2
    while call_id in taken:
        call_id, n = f"{call.id}_{n}", n + 1
    structured = {
        "id": call_id,
        "type": "function",
        "function": {
            "name": call.name,
            "arguments": json.dumps(call.arguments, ensure_ascii=False),
        },
    }
    call_json = json.dumps(structured, ensure_ascii=False)
    rest = _without_call(m.content, call.start, call.end)
    content_json = json.dumps(rest, ensure_ascii=False) if rest.strip() else "null"
    member = node.member("tool_calls")
    edits: list[TextEdit]
    if member is None:
        edits = [TextEdit(content.range, f'{content_json}, "tool_calls": [{call_json}]')]
    elif member.value.kind == "null":
        edits = [
            TextEdit(content.range, content_json),
            TextEdit(member.value.range, f"[{call_json}]"),
        ]
    elif member.value.is_array and member.value.items:
        last = member.value.items[-1].range.end
        edits = [
            TextEdit(content.range, content_json),
            TextEdit(TextRange(last, last), f", {call_json}"),
        ]
    elif member.value.is_array:
        edits = [
            TextEdit(content.range, content_json),
            TextEdit(member.value.range, f"[{call_json}]"),
        ]
    else:
        return None
    edits.sort(key=lambda e: e.range.start)
    return Fix(f"Make the `{call.name}` call a structured tool call", tuple(edits))
