"""Reading a pi coding-agent session (``~/.pi/agent/sessions/--<path>--/<time>_<id>.jsonl``).

The session is a JSON Lines file: a header (``{"type": "session", "id", "cwd"…}``), then
entries with a ``type``. Since its version 2 every entry has an ``id`` and a ``parentId``,
so the file is a tree (a user may go back and branch); a version 1 file's entries follow one
another. It is read as the chat-completions request the session sends next, as pi builds
its context, made of the entries' own nodes so that every range points at its text:

- the path: from the last entry back to the root through ``parentId`` (in file order for a
  version 1 file);
- a ``message`` entry's ``message`` by its ``role``: ``user`` a user message, ``assistant``
  an assistant message (its ``text`` blocks, its ``toolCall`` blocks as tool calls; its
  ``thinking`` is not counted; one whose ``stopReason`` is ``error`` or ``aborted`` is not
  sent, as pi does not send it), ``toolResult`` the tool message answering its
  ``toolCallId``, ``bashExecution`` (a command the user ran) a user message of the text pi
  writes for it (``Ran `…```, its output, its exit code), ``custom`` a user message;
- a ``custom_message`` entry is a user message; a ``branch_summary`` one the summary of the
  branch the user came back from, a user message in pi's words;
- the last ``compaction`` on the path: its summary, a user message in pi's words, then the
  messages from its ``firstKeptEntryId`` (a version 1 file: ``firstKeptEntryIndex``, a line
  index) up to it, then those after it;
- the model: the last ``model_change``'s ``modelId`` or assistant message's ``model`` on
  the path (the header's ``modelId`` in a version 1 file).

A call left without a result when the next user or assistant message comes is answered
as pi answers it when it sends, "No result provided" (a tool message made at the call, id
``<call id>/result``). Only text is counted: images are not read. Not in the session, so
not read: the system prompt and the tool definitions. A message's id is its entry's ``id``,
else its line's index in the file.
"""

from __future__ import annotations

from assembly.formats.sessions import (
    answer,
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

PI_WHY = (
    "a pi coding-agent session: the messages of its current branch read as the "
    "chat-completions request it sends next"
)
# The words pi wraps a summary in (``COMPACTION_SUMMARY_PREFIX``… of its ``messages.ts``).
_COMPACTED = (
    "The conversation history before this point was compacted into the following summary:"
    "\n\n<summary>\n",
    "\n</summary>",
)
_NO_RESULT = "No result provided"
# The ``title`` lines a session may start with, before its header, looked at.
_TITLES = 8
_BRANCHED = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n",
    "</summary>",
)


def is_pi_session(root: SNode) -> bool:
    """Whether a JSON Lines document is a pi session: its first line is a header,
    ``{"type": "session", "id": …}`` with no ``role`` (after the ``title`` lines some
    versions write first)."""
    return _header(root) is not None


def _header(root: SNode) -> int | None:
    """The index of a pi session's header line, None when the document is no session."""
    for n, line in enumerate(root.items[:_TITLES] if root.is_array else ()):
        kind = string_at(line, "type") if line.is_object else None
        if kind is None or line.get("role") is not None:
            return None
        if kind.value == "session":
            return n if string_at(line, "id") is not None else None
        if kind.value != "title":
            return None
    return None


def read_pi_session(parsed: ParsedData, length: int) -> Conversation:
    """Read a pi session (``is_pi_session``) as the chat-completions request it sends next
    (``pi_request``)."""
    return read_as_chat(parsed, DocFormat.JSONL, length, pi_request, PI_WHY)


def pi_request(root: SNode) -> SNode:
    """The chat-completions request a pi session sends next (see the module's docstring),
    made of the session's own nodes (``root``: its lines, ranges absolute)."""
    lines = root.items if root.is_array else ()
    at = _header(root)
    header = lines[at] if at is not None else None
    start = at + 1 if at is not None else 1
    entries = [(n, line) for n, line in enumerate(lines[start:], start) if line.is_object]
    path = _path(entries)
    model = string_at(header, "modelId") if header is not None else None
    compaction = None
    for at, (_, entry) in enumerate(path):
        kind = string_at(entry, "type")
        name = None
        if kind is not None and kind.value == "model_change":
            name = string_at(entry, "modelId")
        elif kind is not None and kind.value == "compaction":
            compaction = at
        elif (said := entry.get("message")) is not None and said.is_object:
            role = string_at(said, "role")
            name = (
                string_at(said, "model") if role is not None and role.value == "assistant" else None
            )
        if name is not None and name.value:
            model = name
    messages: list[SNode] = []
    if compaction is None:
        for n, entry in path:
            messages.extend(_messages(n, entry))
    else:
        n, entry = path[compaction]
        summary = string_at(entry, "summary")
        if summary is not None:
            messages.append(_wrapped(n, entry, summary, _COMPACTED))
        first = _first_kept(entry, path[:compaction])
        for n, kept in path[first:compaction]:
            messages.extend(_messages(n, kept))
        for n, after in path[compaction + 1 :]:
            messages.extend(_messages(n, after))
    return request_of(_answered(messages), model, root)


def _answered(messages: list[SNode]) -> list[SNode]:
    """``messages`` with the answer pi sends for each call left without a result when the
    next user or assistant message comes: a tool message "No result provided" (an error),
    made at the call."""
    res: list[SNode] = []
    pending: list[SNode] = []  # the last assistant message's calls not answered yet
    for message in messages:
        role = message.get("role")
        if role is not None and role.value in ("user", "assistant"):
            for call in pending:
                call_id = call.get("id")
                assert call_id is not None  # (``tool_call``)
                text = SNode("string", call.range, _NO_RESULT)
                res.append(_with_id(-1, call, answer(call, call_id, text), suffix="/result"))
            calls = message.get("tool_calls") if role.value == "assistant" else None
            pending = list(calls.items) if calls is not None else []
        elif role is not None and role.value == "tool":
            answered = string_at(message, "tool_call_id")
            if answered is not None:
                pending = [c for c in pending if not _calls(c, answered.value)]
        res.append(message)
    return res


def _calls(call: SNode, call_id: str) -> bool:
    own = string_at(call, "id")
    return own is not None and own.value == call_id


def _path(entries: list[tuple[int, SNode]]) -> list[tuple[int, SNode]]:
    """The entries of the current branch, root first: from the last entry back through
    ``parentId`` when the entries have ids (each visited once), else all, in order."""
    by_id = {i.value: (n, e) for n, e in entries if (i := string_at(e, "id")) is not None}
    if not by_id:
        return entries
    path: list[tuple[int, SNode]] = []
    seen: set[int] = set()
    node: tuple[int, SNode] | None = entries[-1] if entries else None
    while node is not None and node[0] not in seen:
        seen.add(node[0])
        path.append(node)
        parent = string_at(node[1], "parentId")
        node = by_id.get(parent.value) if parent is not None else None
    path.reverse()
    return path


def _first_kept(compaction: SNode, before: list[tuple[int, SNode]]) -> int:
    """Where the messages a compaction kept start in ``before`` (the path up to it):
    at its ``firstKeptEntryId``, or a version 1 file's ``firstKeptEntryIndex`` (a line
    index); none kept when it names nothing there."""
    kept = string_at(compaction, "firstKeptEntryId")
    index = compaction.get("firstKeptEntryIndex")
    for at, (n, entry) in enumerate(before):
        own = string_at(entry, "id")
        if kept is not None and own is not None and own.value == kept.value:
            return at
        if kept is None and index is not None and index.value == n:
            return at
    return len(before)


def _messages(n: int, entry: SNode) -> list[SNode]:
    """The messages of one entry of the path (none, one, or a reply and nothing else)."""
    kind = string_at(entry, "type")
    if kind is None:
        return []
    if kind.value == "custom_message":
        content = _text(entry.get("content"))
        return [] if content is None else [_message(n, entry, "user", content)]
    if kind.value == "branch_summary":
        summary = string_at(entry, "summary")
        return (
            [] if summary is None or not summary.value else [_wrapped(n, entry, summary, _BRANCHED)]
        )
    said = entry.get("message") if kind.value == "message" else None
    role = string_at(said, "role") if said is not None and said.is_object else None
    if said is None or role is None:
        return []
    if role.value in ("user", "custom"):
        content = _text(said.get("content"))
        return [] if content is None else [_message(n, entry, "user", content)]
    if role.value == "assistant":
        stop = string_at(said, "stopReason")
        if stop is not None and stop.value in ("error", "aborted"):
            return []  # (pi does not send a turn that failed or was stopped)
        blocks = said.get("content")
        parts = blocks.items if blocks is not None and blocks.is_array else ()
        calls = [
            tool_call(call_id, name, block.get("arguments"), block)
            for block in parts
            if _kind(block) == "toolCall"
            and (call_id := string_at(block, "id")) is not None
            and (name := string_at(block, "name")) is not None
        ]
        members = reply(entry, _text(blocks), calls, blocks)
        return [] if members is None else [_with_id(n, entry, members)]
    if role.value == "toolResult":
        call_id = string_at(said, "toolCallId")
        content = _text(said.get("content"))
        if call_id is None or content is None:
            return []
        return [_with_id(n, entry, answer(entry, call_id, content))]
    if role.value == "bashExecution" and not _is_true(said.get("excludeFromContext")):
        return [_message(n, entry, "user", SNode("string", said.range, _ran(said)))]
    return []


def _ran(said: SNode) -> str:
    """The text pi sends for a command the user ran (its ``bashExecutionToText``)."""
    command, output = string_at(said, "command"), string_at(said, "output")
    text = f"Ran `{command.value if command is not None else ''}`\n"
    text += f"```\n{output.value}\n```" if output is not None and output.value else "(no output)"
    code, path = said.get("exitCode"), string_at(said, "fullOutputPath")
    if _is_true(said.get("cancelled")):
        text += "\n\n(command cancelled)"
    elif code is not None and code.kind == "number" and code.value != 0:
        text += f"\n\nCommand exited with code {code.value}"
    if _is_true(said.get("truncated")) and path is not None:
        text += f"\n\n[Output truncated. Full output: {path.value}]"
    return text


def _text(content: SNode | None) -> SNode | None:
    """A content's text: a string, or its ``text`` blocks; None when it has none."""
    return text_of(content, lambda block: _kind(block) == "text")


def _wrapped(n: int, entry: SNode, summary: SNode, words: tuple[str, str]) -> SNode:
    text = SNode("string", summary.range, words[0] + summary.value + words[1])
    return _message(n, entry, "user", text)


def _message(n: int, entry: SNode, role: str, content: SNode) -> SNode:
    members = [made("role", entry, role), Member("content", content.range, content)]
    return _with_id(n, entry, members)


def _with_id(n: int, entry: SNode, members: list[Member], suffix: str = "") -> SNode:
    """A message with its entry's ``id`` (and ``suffix``), else its line's index, as its
    id."""
    own = string_at(entry, "id")
    name = own.value if own is not None and own.value else str(n)
    where = own if own is not None and own.value else entry
    members.append(Member("id", where.range, SNode("string", where.range, name + suffix)))
    return SNode("object", entry.range, None, (), tuple(members))


def _kind(block: SNode) -> str | None:
    kind = string_at(block, "type")
    return kind.value if kind is not None else None


def _is_true(node: SNode | None) -> bool:
    return node is not None and node.value is True
