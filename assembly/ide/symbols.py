"""The outline of a document: document symbols in editor words.

A conversation's outline lists, in document order, its document keys (``settings`` with
one child per setting, ``system_prompt``, ``custom_agent_prompt``, ``project_files`` with
one child per file, ``tools`` with one child per tool, ``reminder``, ``user_info``) and its
messages, named ``m12 · assistant → read_file`` or ``u3 · user: first words…``, each with
its tool calls and uploaded files as children. A dataset's (one conversation per JSON
Lines line) lists its records, ``record 3``, each with its number of messages and the first
words of its first user message. A template's outline is its front matter (with its keys)
and its sections, nested by heading level.

Invariants: every name is non-empty (editors reject empty names); every ``focus_range``
lies within its ``range``; offsets are code points into the document text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from assembly.ide._tree import path_at
from assembly.model import Conversation, FileAttachment, Message, PromptTemplate, Role
from assembly.syntax import Member, SNode
from assembly.text import TextRange, plural

_NON_SPACE = re.compile(r"\S")
NAME_WORDS = 6  # words of a message's text in its name
NAME_CHARS = 48


class SymbolKind(StrEnum):
    SETTINGS = "settings"
    SETTING = "setting"
    PROMPT = "prompt"
    FILES = "files"
    FILE = "file"
    TOOLS = "tools"
    TOOL = "tool"
    TOOL_CALL = "tool call"
    OBJECT = "object"
    FRONT_MATTER = "front matter"
    SECTION = "section"
    SYSTEM_MESSAGE = "system message"
    USER_MESSAGE = "user message"
    ASSISTANT_MESSAGE = "assistant message"
    TOOL_MESSAGE = "tool message"
    REMINDER_MESSAGE = "reminder message"
    SUMMARY_MESSAGE = "summary message"
    RECORD = "record"


@dataclass(frozen=True, slots=True)
class Symbol:
    name: str
    kind: SymbolKind
    range: TextRange  # the whole thing (a message object, a key with its value)
    focus_range: TextRange  # the part to select (an id, a key, a heading)
    detail: str | None = None
    children: tuple[Symbol, ...] = ()


def conversation_symbols(conv: Conversation) -> list[Symbol]:
    """The outline of a conversation: document keys and messages, in document order (a
    dataset: its records)."""
    if conv.records:
        places = zip(conv.records, conv.record_starts, strict=True)
        return [record_symbol(r, k, base) for k, (r, base) in enumerate(places, 1)]
    calls = call_names(conv)
    res = key_symbols(conv)
    res.extend(message_symbol(conv, i, calls) for i in range(len(conv.message_data)))
    return sorted(res, key=lambda s: s.range.start)


def key_symbols(conv: Conversation) -> list[Symbol]:
    """The outline's document keys (``settings``, ``tools`` …), in document order; the
    messages (``message_symbol``) stand between them, each where it starts."""
    res = [_key_symbol(conv, m) for m in _document_members(conv.root)]
    return sorted((s for s in res if s is not None), key=lambda s: s.range.start)


def call_names(conv: Conversation) -> dict[str, str]:
    """The name of each tool call by its id: a tool message's outline name says it."""
    return {c.id: c.name for m in conv.message_data for c in m.tool_calls}


def message_symbol(conv: Conversation, index: int, call_names: dict[str, str]) -> Symbol:
    """The outline entry of message ``index``: named by ``message_name``, its tool calls
    and uploaded files as children."""
    return _message_symbol(conv.root, conv.messages[index], call_names)


def record_symbol(record: Conversation, number: int, base: int) -> Symbol:
    """The outline entry of a dataset's record ``number`` (1-based), whose line starts at
    ``base`` (its ranges are relative to it): ``record 3``, its messages and first words."""
    root = record.root
    start, end = (root.range.start, root.range.end) if root is not None else (0, 0)
    n = len(record.message_data)
    detail = plural(n, "message")
    first = next((m.content for m in record.message_data if m.role is Role.USER), None)
    if first and first.strip():
        detail += f": {first_words(first)}"
    rng = TextRange(base + start, base + end)
    focus = TextRange(rng.start, min(rng.end, rng.start + 1))
    return Symbol(f"record {number}", SymbolKind.RECORD, rng, focus, detail)


def template_symbols(template: PromptTemplate) -> list[Symbol]:
    """The outline of a template: its front matter, then its sections nested by level."""
    res: list[Symbol] = []
    root = template.front_matter_root
    if template.front_matter_range is not None:
        children = tuple(_setting(m) for m in root.members) if root is not None else ()
        rng = template.front_matter_range
        res.append(
            Symbol(
                "front matter",
                SymbolKind.FRONT_MATTER,
                rng,
                _first_line(template.text, rng),
                children=children,
            )
        )
    children_of: dict[int | None, list[int]] = {}
    for i, s in enumerate(template.sections):
        children_of.setdefault(s.parent, []).append(i)

    def build(i: int) -> Symbol:
        s = template.sections[i]
        rng = _trim_end(template.text, s.range)
        return Symbol(
            s.title or "(untitled)",
            SymbolKind.SECTION,
            rng.cover(s.heading_range),
            s.heading_range,
            detail="#" * s.level,
            children=tuple(build(c) for c in children_of.get(i, ())),
        )

    res.extend(build(i) for i in children_of.get(None, ()))
    return res


def message_name(m: Message, call_names: dict[str, str]) -> str:
    """A message's outline name: ``m12 · assistant → read_file``, ``u3 · user: Hi, our…``."""
    head = f"{m.id} · {m.role.value}"
    if m.tool_calls:
        return f"{head} → {', '.join(c.name for c in m.tool_calls)}"
    if m.role is Role.TOOL and m.tool_call_id is not None:
        return f"{head} ← {call_names.get(m.tool_call_id, m.tool_call_id)}"
    if m.file_id is not None:
        return f"{head}: file {m.filename or m.file_id}"
    words = first_words(m.content)
    return f"{head}: {words}" if words else head


def first_words(text: str, *, n_words: int = NAME_WORDS, n_chars: int = NAME_CHARS) -> str:
    """The first words of ``text`` on one line, with "…" when there is more."""
    head = text[: n_chars * 4]  # enough for the words shown; a long text is not split whole
    words = head.split(maxsplit=n_words)
    res = " ".join(words[:n_words])
    if len(res) > n_chars:
        return res[: n_chars - 1].rstrip() + "…"
    more = len(words) > n_words or _NON_SPACE.search(text, len(head)) is not None
    return res + "…" if more else res


# ------------------------------------------------------------------------------ private

_MESSAGE_KINDS = {
    Role.SYSTEM: SymbolKind.SYSTEM_MESSAGE,
    Role.USER: SymbolKind.USER_MESSAGE,
    Role.ASSISTANT: SymbolKind.ASSISTANT_MESSAGE,
    Role.TOOL: SymbolKind.TOOL_MESSAGE,
    Role.REMINDER: SymbolKind.REMINDER_MESSAGE,
    Role.SUMMARY: SymbolKind.SUMMARY_MESSAGE,
}
_KEY_KINDS = {
    "settings": SymbolKind.SETTINGS,
    "system_prompt": SymbolKind.PROMPT,
    "custom_agent_prompt": SymbolKind.PROMPT,
    "reminder": SymbolKind.PROMPT,
    "additional_context": SymbolKind.PROMPT,
    "project_files": SymbolKind.FILES,
    "tools": SymbolKind.TOOLS,
    "user_info": SymbolKind.OBJECT,
}


def _document_members(root: SNode | None) -> Iterable[Member]:
    """The document keys: of the root object, or of JSONL header lines."""
    if root is None:
        return ()
    if root.is_object:
        return root.members
    return [
        m
        for line in root.items
        if line.is_object and line.get("role") is None
        for m in line.members
    ]


def _key_symbol(conv: Conversation, member: Member) -> Symbol | None:
    kind = _KEY_KINDS.get(member.key)
    if kind is None:
        return None
    rng = member.key_range.cover(member.value.range)
    value = member.value
    children: tuple[Symbol, ...] = ()
    detail: str | None = None
    if kind is SymbolKind.SETTINGS and value.is_object:
        children = tuple(_setting(m) for m in value.members)
    elif kind is SymbolKind.FILES:
        files = [f for f in conv.project_files if rng.contains(f.range.start)]
        children = tuple(_file(conv.root, f) for f in files)
        detail = plural(len(files), "file")
    elif kind is SymbolKind.TOOLS:
        tools = [t for t in conv.tools or () if rng.contains(t.range.start)]
        children = tuple(Symbol(t.name, SymbolKind.TOOL, t.range, t.name_range) for t in tools)
        detail = plural(len(tools), "tool")
    elif kind is SymbolKind.PROMPT:
        detail = _prompt_detail(value)
    return Symbol(member.key, kind, rng, member.key_range, detail, children)


def _setting(m: Member) -> Symbol:
    value = m.value.to_python()
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return Symbol(
        m.key,
        SymbolKind.SETTING,
        m.key_range.cover(m.value.range),
        m.key_range,
        detail=first_words(shown, n_words=8, n_chars=40) or None,
    )


def _prompt_detail(value: SNode) -> str | None:
    if value.is_object:
        for key in ("path", "content"):
            node = value.get(key)
            if node is not None and node.is_string:
                return first_words(node.value) or None
        return None
    return first_words(value.value) if value.is_string and value.value else None


def _message_symbol(root: SNode | None, m: Message, call_names: dict[str, str]) -> Symbol:
    children = [
        Symbol(c.name or c.id, SymbolKind.TOOL_CALL, c.range, c.name_range, detail=c.id)
        for c in m.tool_calls
    ]
    children.extend(_file(root, f) for f in m.files)
    focus = m.id_range or m.role_range or m.range
    return Symbol(
        message_name(m, call_names),
        _MESSAGE_KINDS[m.role],
        m.range,
        focus,
        children=tuple(children),
    )


def _file(root: SNode | None, f: FileAttachment) -> Symbol:
    """A file entry, focused on its filename (or its file id)."""
    path = path_at(root, f.range.start)
    entry = path[-1].node if path else None
    focus = f.range
    if entry is not None and entry.range == f.range:
        node = entry.get("filename") or entry.get("file_id")
        focus = node.range if node is not None else focus
    return Symbol(f.filename, SymbolKind.FILE, f.range, focus, detail=f.file_id)


def _first_line(text: str, rng: TextRange) -> TextRange:
    end = text.find("\n", rng.start, rng.end)
    end = rng.end if end == -1 else end
    return TextRange(rng.start, end - 1 if text[end - 1 : end] == "\r" else end)


def _trim_end(text: str, rng: TextRange) -> TextRange:
    """Leave the blank lines at the end of a section out of it."""
    end = rng.end
    while end > rng.start and text[end - 1].isspace():
        end -= 1
    return TextRange(rng.start, end)
