"""Completion in conversations and prompt templates.

What is offered where:

- after ``{{`` in prompt text (a template's body; a conversation's inline system prompt,
  custom agent prompt, reminder and system messages): the placeholders the pipeline fills;
- in a tool call's ``function.name`` value, and in a ``## `` heading under ``# Tools`` of a
  template: the tools offered (the conversation's ``tools``, the template's front matter);
- in a ``file_id`` value (a ``read_file`` call's arguments included): the files the
  conversation injects, with their filenames; in a ``tool_call_id`` value: the tool calls
  that have no response yet, the latest first;
- in a ``role`` value: the roles.

The value being typed is found from the text before the cursor, so a half-typed document
(whose tree lost the member) still completes; the tree only tells which object the cursor
is in. Each item replaces the part of the value already typed and adds the quotes the
format needs. Offsets are code points into the document text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from assembly import texts
from assembly.documents import read_tools
from assembly.ide._tree import path_at
from assembly.model import Conversation, DocFormat, PromptTemplate, Role, TextBlock
from assembly.rope import Text
from assembly.sysprompt import KNOWN_PLACEHOLDERS, USER_PLACEHOLDER_KEYS
from assembly.text import TextRange, resolve


class CompletionKind(StrEnum):
    PLACEHOLDER = "placeholder"
    TOOL = "tool"
    FILE = "file"
    TOOL_CALL = "tool call"
    ROLE = "role"


@dataclass(frozen=True, slots=True)
class CompletionItem:
    """One proposal: what to show and the edit that puts it in."""

    label: str
    kind: CompletionKind
    range: TextRange  # the text the item replaces (what is typed of the value so far)
    new_text: str
    detail: str | None = None  # shown beside the label (a file id's filename)
    documentation: str | None = None  # Markdown
    sort_text: str | None = None


PLACEHOLDER_DOCS: Mapping[str, str] = {
    "CURRENT_DATETIME": (
        "The date of the turn, e.g. `Wednesday July 15, 2026`.\n\n"
        "Without it, a date-aware system prompt gets the date appended as "
        "*Additional Information*."
    ),
    "CITATION_GUIDANCE": (
        "How to cite documents, when citations apply this turn (project files are loaded or "
        "a search tool ran); empty otherwise:\n\n> " + texts.CITATION_GUIDANCE.strip()
    ),
    "REMINDER_TAG_DESCRIPTION": (
        "Explains the `<system-reminder>` tags to the model:\n\n> "
        + texts.REMINDER_TAG_DESCRIPTION.replace("\n", "\n> ")
    ),
}

ROLE_DOCS: Mapping[Role, str] = {
    Role.SYSTEM: "A system message; the first one of the branch is the system prompt.",
    Role.USER: "A user turn; may carry uploaded `files`, or inject one file (`file_id`).",
    Role.ASSISTANT: "An assistant reply; may make `tool_calls`.",
    Role.TOOL: "A tool's response; `tool_call_id` names the call it answers.",
    Role.REMINDER: "A reminder, sent wrapped in `<system-reminder>` tags.",
    Role.SUMMARY: "A summary of the history through `summarizes_through`.",
}


def conversation_completions(conv: Conversation, text: Text, offset: int) -> list[CompletionItem]:
    """Proposals at ``offset`` of a conversation document (empty: nothing to offer here)."""
    if _in_prompt_text(conv, text, offset):
        typed = _placeholder_typed(text, offset)
        if typed is not None:
            return _placeholders(text, typed, offset, conv.user_info)
    slot = _value_slot(text, offset, yaml=conv.format is DocFormat.YAML)
    if slot is None:
        return []
    if slot.key == "role":
        return [_item(slot, r.value, CompletionKind.ROLE, documentation=ROLE_DOCS[r]) for r in Role]
    if slot.key == "file_id":
        return _files(conv, slot)
    if slot.key == "tool_call_id":
        return _open_calls(conv, slot, offset)
    if slot.key == "name" and _in_tool_call_function(conv, text, offset):
        return [
            _item(slot, t.name, CompletionKind.TOOL, documentation=_tool_doc(t.schema))
            for t in conv.tools or ()
        ]
    return []


def template_completions(template: PromptTemplate, offset: int) -> list[CompletionItem]:
    """Proposals at ``offset`` of a ``*.prompt.md`` template."""
    text = template.text
    if offset < template.body_range.start:
        return []
    typed = _placeholder_typed(text, offset)
    if typed is not None:
        return _placeholders(text, typed, offset, None)
    line_start = text.rfind("\n", 0, offset) + 1
    heading = _TOOL_HEADING.match(text, line_start, offset)
    if heading is None or heading.end() != offset or not _under_tools(template, line_start):
        return []
    stop = text.find("\n", offset)
    stop = len(text) if stop == -1 else stop
    while stop > offset and text[stop - 1].isspace():
        stop -= 1
    rng = TextRange(heading.start(1), stop)
    root = template.front_matter_root
    node = root.get("tools") if root is not None else None
    tools = read_tools(node)[0] if node is not None else ()
    return [
        CompletionItem(t.name, CompletionKind.TOOL, rng, t.name, documentation=_tool_doc(t.schema))
        for t in tools
    ]


# ------------------------------------------------------------------------------ private

_PLACEHOLDER_OPEN = re.compile(r"\{\{[ \t]*([A-Za-z0-9_.]*)\Z")
_NAME_CHARS = re.compile(r"[A-Za-z0-9_.]*")
_TOOL_HEADING = re.compile(r" {0,3}##[ \t]+([^\n]*)")
# `"key": "partly typed` (JSON, a flow mapping, escaped inside a JSON string) ...
_QUOTED_KEY = re.compile(
    r"(?P<kq>\\?[\"'])(?P<key>[A-Za-z_$][\w$-]*)(?P=kq)[ \t]*:[ \t]*"
    r"(?P<vq>\\?[\"'])?(?P<typed>[^\"'\\\n]*)\Z"
)
# ... and `key: partly typed` (YAML block or flow).
_PLAIN_KEY = re.compile(
    r"(?:^|[\s{,])(?P<key>[A-Za-z_$][\w$-]*):(?P<space>[ \t]*)"
    r"(?P<vq>[\"'])?(?P<typed>[^\"'\n,{}\[\]#]*)\Z"
)
_PLAIN_VALUE_REST = re.compile(r"[^\s,{}\[\]#\"']*")


@dataclass(frozen=True, slots=True)
class _Slot:
    """The value being typed after ``key:``."""

    key: str
    range: TextRange  # what is typed of the value (inside its quotes)
    open_quote: str  # "" when the value has no opening quote yet
    close_quote: str  # the quote to write around a new value ("" for YAML plain)
    lead: str  # written before a value that has no quote yet (a space after a YAML `:`)


def _value_slot(text: Text, offset: int, *, yaml: bool) -> _Slot | None:
    line, line_start = _line_around(text, offset)
    before = line[: offset - line_start]
    m = _QUOTED_KEY.search(before)
    lead = ""
    if m is not None:
        quote = m.group("kq")  # a value takes the quote style of its key
    else:
        m = _PLAIN_KEY.search(before)
        if m is None:
            return None
        quote = "" if yaml else '"'
        if yaml and not m.group("space") and not m.group("vq"):
            lead = " "
    open_quote = m.group("vq") or ""
    start = offset - len(m.group("typed"))
    if open_quote:
        close = text.find(open_quote, offset)
        line_end = text.find("\n", offset)
        end = close if close != -1 and (line_end == -1 or close < line_end) else offset
    else:
        end = line_start + _PLAIN_VALUE_REST.match(line, offset - line_start).end()  # type: ignore[union-attr]
    return _Slot(m.group("key"), TextRange(start, end), open_quote, quote, lead)


def _item(
    slot: _Slot,
    value: str,
    kind: CompletionKind,
    *,
    detail: str | None = None,
    documentation: str | None = None,
    sort_text: str | None = None,
) -> CompletionItem:
    new_text = (
        value if slot.open_quote else f"{slot.lead}{slot.close_quote}{value}{slot.close_quote}"
    )
    return CompletionItem(value, kind, slot.range, new_text, detail, documentation, sort_text)


def _in_prompt_text(conv: Conversation, text: Text, offset: int) -> bool:
    """The cursor is inside the text of a prompt (not on its quotes)."""
    ranges = [
        b.content_range
        for b in (conv.system_prompt, conv.custom_agent_prompt, conv.reminder)
        if isinstance(b, TextBlock)
    ]
    # (The stored messages, placed by their starts: a completion is asked at every space
    # typed, and a view of each of 10,000 messages would be made for it.)
    ranges.extend(
        resolve(m.content_range, base)
        for m, base in zip(conv.message_data, conv.starts, strict=True)
        if m.role is Role.SYSTEM and m.content_range is not None
    )
    for r in ranges:
        if r is None or not r.start < offset <= r.end:
            continue
        quoted = text[r.start] in "\"'"
        if not quoted or offset < r.end:
            return True
    return False


def _placeholder_typed(text: Text, offset: int) -> str | None:
    line, line_start = _line_around(text, offset)
    m = _PLACEHOLDER_OPEN.search(line, 0, offset - line_start)
    return m.group(1) if m is not None else None


def _placeholders(
    text: Text, typed: str, offset: int, user_info: Mapping[str, Any] | None
) -> list[CompletionItem]:
    line, line_start = _line_around(text, offset)
    end = _NAME_CHARS.match(line, offset - line_start).end()  # type: ignore[union-attr]
    closed = line[end:].lstrip(" \t").startswith("}}")
    end += line_start
    rng = TextRange(offset - len(typed), end)
    res = []
    for name in KNOWN_PLACEHOLDERS:
        res.append(_placeholder(name, rng, closed, PLACEHOLDER_DOCS.get(name)))
    keys = sorted(user_info) if user_info is not None else sorted(USER_PLACEHOLDER_KEYS)
    for key in keys:
        if user_info is not None:
            doc = f"`user_info.{key}` of this conversation: `{_short(str(user_info[key]))}`"
        else:
            doc = f"The user's `{key}` from their profile; empty when they have none."
        res.append(_placeholder(f"user.{key}", rng, closed, doc))
    return res


def _placeholder(name: str, rng: TextRange, closed: bool, doc: str | None) -> CompletionItem:
    new_text = name if closed else name + "}}"
    return CompletionItem(name, CompletionKind.PLACEHOLDER, rng, new_text, documentation=doc)


def _files(conv: Conversation, slot: _Slot) -> list[CompletionItem]:
    seen: dict[str, str] = {}
    for f in conv.project_files:
        seen.setdefault(f.file_id, f.filename)
    for m in conv.message_data:  # (stored: only names are read)
        for f in m.files:
            seen.setdefault(f.file_id, f.filename)
        if m.file_id is not None:
            seen.setdefault(m.file_id, m.filename or "unknown")
    return [
        _item(slot, file_id, CompletionKind.FILE, detail=filename)
        for file_id, filename in seen.items()
    ]


def _open_calls(conv: Conversation, slot: _Slot, offset: int) -> list[CompletionItem]:
    """Calls without a response (other than the one being typed), the latest first."""
    data = conv.message_data  # (stored, placed by their starts: no view of each is made)
    answered = {
        m.tool_call_id
        for m, base in zip(data, conv.starts, strict=True)
        if m.tool_call_id is not None and not resolve(m.range, base).contains(offset)
    }
    calls = [(c, m) for m in data for c in m.tool_calls if c.id not in answered]
    return [
        _item(
            slot,
            c.id,
            CompletionKind.TOOL_CALL,
            detail=f"{c.name} in {m.id}",
            documentation=f"`{c.name}({_short(c.arguments_text)})`",
            sort_text=f"{len(calls) - i:06d}",
        )
        for i, (c, m) in enumerate(calls)
    ]


def _in_tool_call_function(conv: Conversation, text: Text, offset: int) -> bool:
    """The cursor is in the ``function`` object of an entry of ``tool_calls``.

    The tree is asked about the last character typed before the cursor: an object left
    open at the end of a half-typed document ends there, not at the cursor.
    """
    probe = offset
    while probe > 0 and text[probe - 1].isspace():
        probe -= 1
    path = path_at(conv.root, max(0, probe - 1))
    keys = [s.key for s in path if s.node.kind in ("object", "array")]
    return len(keys) >= 3 and keys[-1] == "function" and keys[-3] == "tool_calls"


def _line_around(text: Text, offset: int) -> tuple[str, int]:
    """The line holding ``offset`` (without its ``\\n``) and where it starts.

    Regexes run on this line, never on the whole document: it may be a ``Rope``, and a
    large one.
    """
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return text[start : len(text) if end == -1 else end], start


def _under_tools(template: PromptTemplate, line_start: int) -> bool:
    top = [s for s in template.sections if s.level == 1 and s.heading_range.start < line_start]
    return bool(top) and top[-1].title.strip().lower() == "tools"


def _tool_doc(schema: Mapping[str, Any]) -> str | None:
    fn = schema.get("function")
    holder = fn if isinstance(fn, Mapping) else schema
    description = holder.get("description")
    return description if isinstance(description, str) and description else None


def _short(s: str, n: int = 80) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"
