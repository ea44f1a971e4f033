"""The document model: conversations and prompt templates as frozen dataclasses.

Every message, field and sentence carries its exact source range (code-point offsets into
the document it came from). Values are plain Python; ranges are ``TextRange``s. These types
are built by ``documents.py`` (conversations) and ``prompts.py`` (templates) and never hold
anything protocol-specific.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from assembly.syntax import SNode
from assembly.text import TextRange


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    REMINDER = "reminder"
    SUMMARY = "summary"


class DocFormat(StrEnum):
    JSON = "json"
    JSONL = "jsonl"
    YAML = "yaml"


@dataclass(frozen=True, slots=True)
class Issue:
    """A problem found while reading a document, before any rule runs.

    ``code`` is a rule code of the catalogue (``syntax-error``, ``schema-error``, …);
    ``path`` names the file when the problem is in another file than the document.
    """

    code: str
    message: str
    range: TextRange
    severity: str = "error"
    path: str | None = None


@dataclass(frozen=True, slots=True)
class Image:
    """An image content part or an uploaded image file."""

    ref: str  # file id, or the URL / data URL of an image_url part
    range: TextRange
    token_count: int | None = None  # stored image cost; None = not counted (as Onyx)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """An OpenAI-style tool call of an assistant message."""

    id: str
    name: str
    arguments: dict[str, Any] | None  # None when the arguments text is not a JSON object
    arguments_text: str
    range: TextRange
    id_range: TextRange
    name_range: TextRange
    arguments_range: TextRange
    token_count: int | None = None
    # The call had no usable id (``"id": ""`` from Gemini's OpenAI-compatible endpoint, or a
    # legacy ``function_call``): ``id`` was made up from the message's id and position.
    synthesized_id: bool = False


@dataclass(frozen=True, slots=True)
class RejectedCall:
    """A tool call with an id that could not be read (no ``function``, no name…): it is not
    sent, and the responses to it are orphans that should point at it."""

    id: str
    range: TextRange
    reason: str


@dataclass(frozen=True, slots=True)
class FileAttachment:
    """A file uploaded with a user message (``files``) or a project file."""

    file_id: str
    filename: str
    content: str | None  # None: not loaded (a path that could not be read, or an image)
    range: TextRange
    kind: str = "text"  # text | tabular | image
    token_count: int | None = None
    approx_char_count: int | None = None
    path: str | None = None  # as written in the document (project files may use a path)
    path_range: TextRange | None = None
    processing: bool = False  # still being processed: Onyx sends its notice, not the text


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the conversation as written in the document."""

    id: str
    index: int  # position in ``Conversation.messages`` (the id defaults to the document's)
    role: Role
    content: str  # text parts joined with "\n"; "" for null content
    range: TextRange
    content_range: TextRange | None = None
    id_range: TextRange | None = None
    role_range: TextRange | None = None
    parent: str | None = None
    parent_range: TextRange | None = None
    images: tuple[Image, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_call_id_range: TextRange | None = None
    name: str | None = None
    file_id: str | None = None  # an injected file message
    filename: str | None = None
    files: tuple[FileAttachment, ...] = ()
    token_count: int | None = None
    summarizes_through: str | None = None
    summarizes_through_range: TextRange | None = None
    ignore: tuple[str, ...] = ()  # rule codes suppressed on this message
    # The role as the document spells it when it is read as another one (``developer`` is
    # read as ``system``, the legacy ``function`` as ``tool``); None when it is ``role``.
    written_role: str | None = None


@dataclass(frozen=True, slots=True)
class TextBlock:
    """A prompt given inline (``{"content": …}`` or a plain string) in a conversation."""

    content: str
    range: TextRange
    content_range: TextRange | None = None
    token_count: int | None = None


@dataclass(frozen=True, slots=True)
class PromptRef:
    """``system_prompt`` given as a path to a ``*.prompt.md`` template."""

    path: str
    range: TextRange


@dataclass(frozen=True, slots=True)
class ToolDef:
    """A tool offered this turn (OpenAI tool schema)."""

    name: str
    schema: dict[str, Any]
    range: TextRange
    name_range: TextRange


@dataclass(frozen=True, slots=True)
class Conversation:
    """A parsed conversation document (any of the three formats)."""

    format: DocFormat
    messages: tuple[Message, ...]
    settings: dict[str, Any] = field(default_factory=dict)
    settings_ranges: dict[str, TextRange] = field(default_factory=dict)
    system_prompt: TextBlock | PromptRef | None = None
    custom_agent_prompt: TextBlock | None = None
    project_files: tuple[FileAttachment, ...] = ()
    tools: tuple[ToolDef, ...] | None = None  # None: the document does not say
    reminder: TextBlock | None = None
    additional_context: TextBlock | None = None  # sent before the last user message
    user_info: dict[str, Any] | None = None
    issues: tuple[Issue, ...] = ()
    root: SNode | None = None
    length: int = 0  # length of the document text
    rejected_calls: tuple[RejectedCall, ...] = ()
    # A dataset (JSON Lines with one conversation per line, ``{"messages": […], …}``): each
    # line's conversation, read on its own (ranges are offsets into the whole document).
    # ``messages`` is then empty and ``issues`` holds what is wrong with the lines themselves.
    records: tuple[Conversation, ...] = ()
    record: int | None = None  # in a dataset: this conversation's 1-based place
    # [True] once a re-parse (``assembly/incremental.py``) moved the anchors this
    # conversation shares with the one it made: its ranges no longer match its own text,
    # so it must not be the base of another re-parse.
    moved: list[bool] = field(default_factory=lambda: [False], compare=False, repr=False)


# ------------------------------------------------------------------------------------
# Prompt templates


@dataclass(frozen=True, slots=True)
class Section:
    """A heading and everything up to the next heading of the same or a higher level."""

    title: str
    level: int  # 1 for "#", 2 for "##", …
    heading_range: TextRange  # the heading line, without its line break
    range: TextRange  # heading line through the end of the section (nested ones included)
    body_range: TextRange  # after the heading line through the end of the section
    parent: int | None  # index of the enclosing section in ``PromptTemplate.sections``
    # How the section is written: "heading" (Markdown ATX or setext), "xml" (a block
    # `<name>` … `</name>`, its title the tag name), "rule" (a title line after a `====`
    # line), "bold" (a line that is only `**Title**`), "caps" (an ALL-CAPS title line).
    kind: str = "heading"

    @property
    def label(self) -> str:
        """How messages name the section: `## Tools`, `<tool_calling>`, `TOOL USE`."""
        if self.kind == "heading":
            return f"{'#' * self.level} {self.title}"
        if self.kind == "xml":
            return f"<{self.title}>"
        if self.kind == "bold":
            return f"**{self.title}**"
        return self.title


@dataclass(frozen=True, slots=True)
class Placeholder:
    """A ``{{NAME}}`` occurrence (``user.x`` keys keep their dotted name)."""

    name: str
    range: TextRange


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence of prose (code blocks, front matter and headings excluded)."""

    text: str
    range: TextRange
    section: int | None  # index of the innermost enclosing section


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """A parsed ``*.prompt.md`` template (or any prompt text parsed as Markdown)."""

    text: str
    body_range: TextRange  # the text after the front matter
    front_matter: dict[str, Any] = field(default_factory=dict)
    front_matter_range: TextRange | None = None
    front_matter_root: SNode | None = None  # offsets into ``text``
    sections: tuple[Section, ...] = ()
    placeholders: tuple[Placeholder, ...] = ()
    sentences: tuple[Sentence, ...] = ()
    issues: tuple[Issue, ...] = ()

    def section_named(self, title: str, *, parent: int | None = None) -> int | None:
        """Return the index of the first section titled ``title`` (case-insensitive)."""
        want = title.strip().lower()
        for i, s in enumerate(self.sections):
            if s.title.strip().lower() == want and (parent is None or s.parent == parent):
                return i
        return None
