"""What the readers of coding agents' session files share (``copilot``, ``gemini_cli``, ``pi``).

Such a session is read as the chat-completions request it sends next: a request tree made
of the session's own nodes (so that every range points at the text it came from, and a
value made here, such as a role, sits at the node it stands for), which promptls' own
reader then reads as it reads any chat-completions request.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

from assembly.documents import Reader
from assembly.formats.detect import SourceFormat
from assembly.model import Conversation, DocFormat
from assembly.syntax import Member, ParsedData, SNode, absolute


def read_as_chat(
    parsed: ParsedData, fmt: DocFormat, length: int, request: Callable[[SNode], SNode], why: str
) -> Conversation:
    """Read a session as the chat-completions request ``request`` makes of its tree (with
    ranges absolute), shown as ``openai-chat`` for the reason ``why``. The conversation
    keeps the document's syntax ``fmt`` (a fix removes a line of a JSON Lines session);
    its tree is the request's, read whole on every change."""
    reader = Reader(DocFormat.JSON, length)
    if parsed.root is None:
        conv = reader.read(parsed)
    else:
        conv = reader.read(ParsedData(request(absolute(parsed.root)), parsed.errors, parsed.lines))
    return dataclasses.replace(
        conv, format=fmt, source_format=SourceFormat.OPENAI_CHAT.value, source_format_why=why
    )


def request_of(messages: list[SNode], model: SNode | None, at: SNode) -> SNode:
    """The request object: ``messages``, and ``model`` when the session names one."""
    members = [Member("messages", at.range, SNode("array", at.range, None, tuple(messages)))]
    if model is not None:
        members.append(Member("model", model.range, model))
    return SNode("object", at.range, None, (), tuple(members))


def reply(
    at: SNode, content: SNode | None, calls: list[SNode], listed: SNode | None
) -> list[Member] | None:
    """The members of an assistant message (``at``: the node it is made of): its text and
    its tool calls (``listed``: the node that lists them); None when it has neither."""
    said = content is not None and (not content.is_string or bool(content.value))
    if not calls and not said:
        return None
    members = [made("role", at, "assistant")]
    if content is not None and (said or not calls):
        members.append(Member("content", content.range, content))
    if calls and listed is not None:
        array = SNode("array", listed.range, None, tuple(calls))
        members.append(Member("tool_calls", listed.range, array))
    return members


def text_of(content: SNode | None, keep: Callable[[SNode], bool]) -> SNode | None:
    """A message's text: ``content`` when it is a string, else the ``text`` of those of its
    parts ``keep`` keeps (``text_content``); None when it has none."""
    if content is None or content.is_string:
        return content
    if not content.is_array:
        return None
    texts = [
        t
        for p in content.items
        if p.is_object and keep(p) and (t := string_at(p, "text")) is not None
    ]
    return text_content(texts, content)


def text_content(texts: list[SNode], at: SNode) -> SNode | None:
    """A message's content of text nodes: the one node, or an array of text parts (each
    at its node; ``at``: the node that held them), as the API takes several; None for none."""
    if len(texts) < 2:
        return texts[0] if texts else None
    parts = tuple(
        SNode("object", t.range, None, (), (made("type", t, "text"), Member("text", t.range, t)))
        for t in texts
    )
    return SNode("array", at.range, None, parts)


def answer(at: SNode, call_id: SNode, content: SNode) -> list[Member]:
    """The members of the tool message answering ``call_id`` with ``content``."""
    return [
        made("role", at, "tool"),
        Member("tool_call_id", call_id.range, call_id),
        Member("content", content.range, content),
    ]


def tool_call(call_id: SNode, name: SNode, args: SNode | None, at: SNode) -> SNode:
    """A chat-completions tool call (``at``: the node it is made of): its ``arguments`` are
    the JSON text the API carries, as JavaScript's ``JSON.stringify`` writes an object;
    a string is taken as written."""
    if args is None:
        text = SNode("string", at.range, "{}")
    elif args.is_string:
        text = args
    else:
        text = SNode("string", args.range, json_text(args))
    function = SNode(
        "object",
        at.range,
        None,
        (),
        (Member("name", name.range, name), Member("arguments", text.range, text)),
    )
    return SNode(
        "object",
        at.range,
        None,
        (),
        (
            Member("id", call_id.range, call_id),
            made("type", at, "function"),
            Member("function", at.range, function),
        ),
    )


def json_text(node: SNode) -> str:
    """A value as compact JSON text."""
    return json.dumps(node.to_python(), ensure_ascii=False, separators=(",", ":"))


def made(key: str, at: SNode, value: str) -> Member:
    """A member made here (its value is not written in the session), placed at ``at``."""
    return Member(key, at.range, SNode("string", at.range, value))


def string_at(node: SNode, key: str) -> SNode | None:
    """``node``'s string value at ``key`` (None: absent, or not a string)."""
    value = node.get(key)
    return value if value is not None and value.is_string else None
