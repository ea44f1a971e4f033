"""Reading a Gemini CLI session (``~/.gemini/tmp/<project>/chats/session-….jsonl``).

The session is a JSON Lines log of records: a first line of metadata (``sessionId``,
``projectHash``…), then message records (``id``, ``type``, ``content``…), metadata updates
(``$set``) and rewinds (``$rewindTo``). A message record written again with the same ``id``
replaces the earlier one, in its place; a rewind takes back the message it names and every
one after it; a ``$set`` of ``messages`` states the whole list. Gemini CLI's earlier
sessions are one JSON document, the metadata with ``messages`` (``session-….json``); both
are read alike.

It is read as the chat-completions request the session sends next, as Gemini CLI rebuilds
its history when a session is resumed, made of the records' own nodes so that every range
points at the text it came from:

- ``info``, ``error`` and ``warning`` records are the terminal's, not sent;
- a ``user`` record is a user message: the text of its ``content`` (a string, or parts with
  ``text``); one that is empty, a slash command (``/…``, ``?…``) or the CLI's own context
  (``<session_context>``, ``<hook_context>``) is not sent;
- a ``gemini`` record is an assistant message: the text of its ``content`` (its thoughts,
  and parts marked ``thought``, are not counted) and its ``toolCalls`` as tool calls
  (``id``, ``name``, ``args`` as the JSON text of the arguments); then each call's
  ``result`` (``functionResponse`` parts, or a string) is a tool message answering it: the
  response's ``output`` (or ``error``) when it is text, else the response as JSON text;
- the last ``gemini`` record's ``model`` is the model.

Not in the session, so not read: the system prompt and the tool definitions. A message's
id is its record's ``id``; a call's result is ``<record id>/<n>``, its ``n``-th.
"""

from __future__ import annotations

from assembly.formats.sessions import (
    answer,
    json_text,
    made,
    read_as_chat,
    reply,
    request_of,
    string_at,
    text_of,
    tool_call,
)
from assembly.model import Conversation, DocFormat
from assembly.syntax import Member, ParsedData, SNode
from assembly.text import TextRange

GEMINI_CLI_WHY = (
    "a Gemini CLI session: its messages read as the chat-completions request it sends next"
)
# Records shown in the terminal and never sent.
_SHOWN = frozenset({"info", "error", "warning"})
# A user record whose text starts so is a command or the CLI's own context: not sent.
_NOT_SENT = ("/", "?", "<session_context>", "<hook_context>")


def is_gemini_cli_session(root: SNode, fmt: DocFormat) -> bool:
    """Whether a document is a Gemini CLI session: JSON Lines whose first line is an object
    with a string ``sessionId`` and ``projectHash`` and no ``messages``; or a JSON object
    with those two and a ``messages`` array (the earlier sessions)."""
    if fmt is DocFormat.JSONL:
        first = root.items[0] if root.is_array and root.items else None
        return first is not None and _metadata(first) and first.get("messages") is None
    if fmt is DocFormat.JSON and _metadata(root):
        messages = root.get("messages")
        return messages is not None and messages.is_array
    return False


def _metadata(node: SNode) -> bool:
    if not node.is_object or node.get("role") is not None:
        return False
    return string_at(node, "sessionId") is not None and string_at(node, "projectHash") is not None


def read_gemini_cli_session(parsed: ParsedData, fmt: DocFormat, length: int) -> Conversation:
    """Read a Gemini CLI session (``is_gemini_cli_session``) as the chat-completions
    request it sends next (``gemini_cli_request``)."""
    return read_as_chat(parsed, fmt, length, gemini_cli_request, GEMINI_CLI_WHY)


def gemini_cli_request(root: SNode) -> SNode:
    """The chat-completions request a Gemini CLI session sends next (see the module's
    docstring), made of the session's own nodes (``root``: its lines, or the earlier
    sessions' object, ranges absolute)."""
    messages: list[SNode] = []
    model: SNode | None = None
    for record in _records(root):
        kind = string_at(record, "type")
        if kind is None or kind.value in _SHOWN:
            continue
        if kind.value == "user":
            content = _text_of(record.get("content"))
            said = _plain(content).strip() if content is not None else ""
            if content is not None and said and not said.startswith(_NOT_SENT):
                members = [made("role", record, "user"), Member("content", content.range, content)]
                messages.append(_with_id(record, "", members, record.range))
        elif kind.value == "gemini":
            messages.extend(_turn(record))
            name = string_at(record, "model")
            if name is not None and name.value:
                model = name
    return request_of(messages, model, root)


def _records(root: SNode) -> list[SNode]:
    """The session's message records, in order: the last version of each ``id`` in the
    place of its first, without those a rewind took back (the record it names, and every
    one after it); or, when a ``$set`` line states the ``messages`` (the last that does),
    those."""
    if root.is_object:
        listed = root.get("messages")
        lines = listed.items if listed is not None and listed.is_array else ()
    else:
        lines = root.items if root.is_array else ()
    records: dict[str, SNode] = {}  # by id, in the order of their first lines
    order: list[str] = []
    place: dict[str, int] = {}  # an id's place in ``order``
    stated: tuple[SNode, ...] = ()  # the messages the last ``$set`` of them states
    for line in lines:
        if not line.is_object:
            continue
        update = line.get("$set")
        listed = update.get("messages") if update is not None and update.is_object else None
        if listed is not None and listed.is_array:
            stated = listed.items
        rewind = string_at(line, "$rewindTo")
        if rewind is not None:
            # (As Gemini CLI does: a rewind to an id it does not hold takes back all.)
            at = place.get(rewind.value, 0)
            for gone in order[at:]:  # each record taken back once: linear in the lines
                del records[gone], place[gone]
            del order[at:]
            continue
        record_id = string_at(line, "id")
        if record_id is not None:
            if record_id.value not in records:
                place[record_id.value] = len(order)
                order.append(record_id.value)
            records[record_id.value] = line
    if stated:  # (as Gemini CLI loads it: a list of messages set is the list)
        return [m for m in stated if m.is_object]
    return [records[i] for i in order]


def _turn(record: SNode) -> list[SNode]:
    """The assistant message of a ``gemini`` record, and the tool messages of its calls'
    results."""
    content = _text_of(record.get("content"))
    calls: list[SNode] = []
    answers: list[SNode] = []
    listed = record.get("toolCalls")
    for call in listed.items if listed is not None and listed.is_array else ():
        call_id = string_at(call, "id") if call.is_object else None
        name = string_at(call, "name") if call.is_object else None
        if call_id is None or name is None:
            continue
        calls.append(tool_call(call_id, name, call.get("args"), call))
        result = call.get("result")
        for said in _answers(result) if result is not None else ():
            members = answer(call, call_id, said)
            answers.append(_with_id(record, f"/{len(answers)}", members, said.range))
    members = reply(record, content, calls, listed)
    if members is None:
        return answers
    return [_with_id(record, "", members, record.range), *answers]


def _answers(result: SNode) -> list[SNode]:
    """What answers a call: its result string, or each ``functionResponse`` part's
    response (its ``output``, or its ``error`` alone, when text; else its JSON text)."""
    if result.is_string:
        return [result]
    answers: list[SNode] = []
    for part in result.items if result.is_array else (result,):
        response = part.get("functionResponse") if part.is_object else None
        body = response.get("response") if response is not None and response.is_object else None
        if body is None:
            continue
        said = string_at(body, "output") if body.is_object else None
        if said is None and body.is_object and len(body.members) == 1:
            said = string_at(body, "error")
        answers.append(said if said is not None else SNode("string", body.range, json_text(body)))
    return answers


def _text_of(content: SNode | None) -> SNode | None:
    """The text of a record's ``content``: a string, or the ``text`` of its parts but its
    thoughts."""
    return text_of(content, lambda part: not _thought(part))


def _thought(part: SNode) -> bool:
    """Whether a part is a thought (``"thought": true``), which is not counted."""
    flag = part.get("thought")
    return flag is not None and flag.value is True


def _plain(content: SNode) -> str:
    """The text of a content (a string, or text parts), as Gemini CLI reads a prompt's."""
    if content.is_string:
        return str(content.value)
    return "".join(str(t.value) for p in content.items if (t := p.get("text")) is not None)


def _with_id(record: SNode, suffix: str, members: list[Member], span: TextRange) -> SNode:
    """A message at ``span`` with its record's ``id`` (and ``suffix``) as its id."""
    record_id = string_at(record, "id")
    if record_id is not None and record_id.value:
        value = SNode("string", record_id.range, record_id.value + suffix)
        members.append(Member("id", record_id.range, value))
    return SNode("object", span, None, (), tuple(members))
