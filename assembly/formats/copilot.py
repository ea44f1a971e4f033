"""Reading a GitHub Copilot CLI session (``~/.copilot/session-state/<id>/events.jsonl``).

The session is one event a line, ``{"type", "data", "id", "timestamp", "parentId"}``, in
the order they happened. It is read as the chat-completions request the session sends
next (the Copilot API takes OpenAI's chat format, whatever the model), made of the events'
own nodes, so that every range points at the line it came from:

- the system prompt is the last ``system.message`` (a ``developer`` role is a system
  message, as OpenAI's is): the CLI writes it again before each prompt, as it sends it;
- a ``user.message`` is a user message: its ``transformedContent`` (the prompt as sent,
  with the context the CLI adds, such as the date) or else its ``content``;
- an ``assistant.message`` is an assistant message: its ``content`` and its
  ``toolRequests`` as tool calls (``arguments`` as the JSON text the API carries);
- a ``tool.execution_complete`` is the tool message answering its call: its
  ``result.content`` (or a ``result`` string), or its ``error.message`` when the tool
  failed; one without either answers nothing (the session does not say what the model
  read);
- the events of a subagent (those with a ``parentToolCallId`` in their ``data``, or an
  ``agentId`` of their own) are its own conversation, not this one's, and so is its
  opening prompt: the ``user.message`` after its
  ``subagent.started`` whose content is the ``prompt`` its ``task`` call gave it (that one
  event carries no ``parentToolCallId``);
- a ``session.snapshot_rewind`` takes back the events after the one it names;
- a successful ``session.compaction_complete`` replaces the messages before it by its
  ``summaryContent``, read as a user message (by nothing when the log does not hold it);
- ``session.start``'s ``selectedModel``, ``session.model_change``'s ``newModel``, a reply's
  ``model`` (in ``auto`` mode the change says "auto", the reply the model used) and
  ``session.shutdown``'s ``currentModel`` set the model (the last one wins).

Not in the session, so not read: the tool definitions, the attachments' contents, the
reasoning the model's provider may be sent back. A message's id is its event's ``id``.
"""

from __future__ import annotations

from assembly.formats.sessions import (
    answer,
    made,
    read_as_chat,
    reply,
    request_of,
    string_at,
    tool_call,
)
from assembly.model import Conversation, DocFormat
from assembly.syntax import Member, ParsedData, SNode

COPILOT_WHY = (
    "a GitHub Copilot CLI session: its events read as the chat-completions request it sends next"
)
# The families of Copilot's event types (``session.start``, ``user.message``,
# ``tool.execution_complete``…): the first line of a session has one.
_FAMILIES = frozenset(
    {"session", "user", "assistant", "tool", "system", "subagent", "hook", "skill"}
)
# The events that name the session's model, and the key that does.
_MODEL_KEYS = {
    "session.start": "selectedModel",
    "session.model_change": "newModel",
    "session.shutdown": "currentModel",
    # (In ``auto`` mode the model change says "auto"; the reply names the model used.)
    "assistant.message": "model",
}


def is_copilot_session(root: SNode) -> bool:
    """Whether a JSON Lines document is a Copilot CLI session: its first line is an object
    with an object ``data`` and a ``type`` of one of Copilot's event families
    (``session.start``; a LangChain dump's ``type`` has no dot)."""
    first = root.items[0] if root.is_array and root.items else None
    if first is None or not first.is_object:
        return False
    kind, data = first.get("type"), first.get("data")
    if kind is None or not kind.is_string or data is None or not data.is_object:
        return False
    family, dot, name = kind.value.partition(".")
    return bool(dot and name) and family in _FAMILIES


def read_copilot_session(parsed: ParsedData, length: int) -> Conversation:
    """Read a Copilot CLI session (``is_copilot_session``) as the chat-completions request
    it sends next (``copilot_request``)."""
    return read_as_chat(parsed, DocFormat.JSONL, length, copilot_request, COPILOT_WHY)


def copilot_request(root: SNode) -> SNode:
    """The chat-completions request a Copilot CLI session sends next (see the module's
    docstring), made of the session's own nodes (``root``: its lines, ranges absolute)."""
    system: SNode | None = None
    model: SNode | None = None
    messages: list[SNode] = []
    prompts: dict[str, str] = {}  # a call's ``prompt`` argument (a subagent's task), by id
    opening: list[str] = []  # the prompts of the subagents started and not yet prompted
    for line, kind, data in _current(root.items if root.is_array else ()):
        if kind == "subagent.started":
            call_id = string_at(data, "toolCallId")
            if call_id is not None and call_id.value in prompts:
                opening.append(prompts[call_id.value])
            continue
        if string_at(data, "parentToolCallId") is not None or string_at(line, "agentId"):
            continue  # a subagent's own conversation
        if kind in ("tool.execution_start", "assistant.message"):
            prompts.update(_prompts(data))
        if kind == "user.message" and _opens(data, opening):
            continue  # a subagent's opening prompt (it carries no ``parentToolCallId``)
        if kind == "system.message":
            content = string_at(data, "content")
            if content is not None:
                role = string_at(data, "role")
                system = _message(line, role.value if role is not None else "system", content)
        elif kind == "user.message":
            content = string_at(data, "transformedContent")
            content = content if content is not None else string_at(data, "content")
            if content is not None:
                messages.append(_message(line, "user", content))
        elif kind == "assistant.message":
            said = _assistant(line, data)
            if said is not None:
                messages.append(said)
        elif kind == "tool.execution_complete":
            result = _tool(line, data)
            if result is not None:
                messages.append(result)
        elif kind == "session.compaction_complete":
            summary = string_at(data, "summaryContent")
            done = data.get("success")
            if done is None or done.value is True:
                # (Without its summary the log cannot say what replaced them: the CLI may
                # keep it in the session's checkpoint file.)
                messages = [] if summary is None else [_message(line, "user", summary)]
        if kind in _MODEL_KEYS:
            name = string_at(data, _MODEL_KEYS[kind])
            if name is not None and name.value:
                model = name
    if system is not None:
        messages.insert(0, system)
    return request_of(messages, model, root)


def _current(lines: tuple[SNode, ...]) -> list[tuple[SNode, str, SNode]]:
    """The session's events as ``(line, type, data)``, in order, without those a rewind
    took back (from the event after the one it names up to the rewind itself; a rewind
    naming no event takes nothing back). Each event is taken back at most once: linear
    in the lines, however many rewinds a file holds."""
    events: list[tuple[SNode, str, SNode]] = []
    ids: list[str | None] = []  # each event's id
    last: dict[str, int] = {}  # an id's last event
    for line in lines:
        kind = line.get("type") if line.is_object else None
        data = line.get("data") if line.is_object else None
        if kind is None or not kind.is_string or data is None or not data.is_object:
            continue
        if kind.value == "session.snapshot_rewind":
            to = string_at(data, "upToEventId")
            at = last.get(to.value) if to is not None else None
            if at is not None:
                for gone in ids[at + 1 :]:
                    if gone is not None and last.get(gone, -1) > at:
                        del last[gone]
                del events[at + 1 :], ids[at + 1 :]
            continue
        own = string_at(line, "id")
        ids.append(own.value if own is not None else None)
        if own is not None:
            last[own.value] = len(events)
        events.append((line, kind.value, data))
    return events


def _assistant(line: SNode, data: SNode) -> SNode | None:
    """An assistant message of an ``assistant.message`` event: its text and tool calls
    (None when it has neither)."""
    content = string_at(data, "content")
    calls: list[SNode] = []
    requests = data.get("toolRequests")
    for request in requests.items if requests is not None and requests.is_array else ():
        call_id = string_at(request, "toolCallId") if request.is_object else None
        name = string_at(request, "name") if request.is_object else None
        if call_id is not None and name is not None:
            calls.append(tool_call(call_id, name, request.get("arguments"), request))
    members = reply(line, content, calls, requests)
    return None if members is None else _with_id(line, members)


def _prompts(data: SNode) -> dict[str, str]:
    """The ``prompt`` argument of each call an event makes or starts, by call id (what a
    ``task`` call asks its subagent)."""
    requests = data.get("toolRequests")
    calls = requests.items if requests is not None and requests.is_array else (data,)
    found = {}
    for call in calls:
        call_id = string_at(call, "toolCallId") if call.is_object else None
        args = call.get("arguments") if call.is_object else None
        prompt = string_at(args, "prompt") if args is not None and args.is_object else None
        if call_id is not None and prompt is not None:
            found[call_id.value] = prompt.value
    return found


def _opens(data: SNode, opening: list[str]) -> bool:
    """Whether a ``user.message`` is a started subagent's opening prompt (its ``content``
    is the task's prompt); each prompt opens one subagent."""
    content = string_at(data, "content")
    if content is None or content.value not in opening:
        return False
    opening.remove(content.value)
    return True


def _tool(line: SNode, data: SNode) -> SNode | None:
    """The tool message of a ``tool.execution_complete`` event (None: it holds no
    result)."""
    call_id = string_at(data, "toolCallId")
    result, error = data.get("result"), data.get("error")
    content = result if result is not None and result.is_string else None
    if result is not None and result.is_object:
        content = string_at(result, "content")
    if content is None and error is not None and error.is_object:
        content = string_at(error, "message")
    if call_id is None or content is None:
        return None
    return _with_id(line, answer(line, call_id, content))


def _message(line: SNode, role: str, content: SNode) -> SNode:
    return _with_id(line, [made("role", line, role), Member("content", content.range, content)])


def _with_id(line: SNode, members: list[Member]) -> SNode:
    event_id = string_at(line, "id")
    if event_id is not None and event_id.value:
        members.append(Member("id", event_id.range, event_id))
    return SNode("object", line.range, None, (), tuple(members))
