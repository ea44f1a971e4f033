"""Reading conversation documents (SPEC §2.1) into the ``Conversation`` model.

The three formats (JSON, JSONL, YAML) are parsed into the same source tree
(``syntax.SNode``); this module reads that tree. A bare array is a message list; an object
has ``settings``, ``system_prompt``, ``custom_agent_prompt``, ``project_files``, ``tools``,
``reminder`` and ``messages``. Reading never raises: anything that does not fit the schema
becomes an ``Issue`` (code ``schema-error``) at the exact place and is left out, and the rest
of the document is still read.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, compress, repeat
from operator import attrgetter, is_, not_
from typing import Any

from assembly.model import (
    MAX_ISSUES_PER_CODE,
    Conversation,
    DocFormat,
    FileAttachment,
    Image,
    Issue,
    Message,
    PromptRef,
    RejectedCall,
    Role,
    TextBlock,
    ToolCall,
    ToolDef,
)
from assembly.syntax import (
    MAX_TOP_ITEMS,
    ParsedData,
    SNode,
    absolute,
)
from assembly.text import RelRange, Span, TextRange, plural, resolve, sub_range

MAX_DOCUMENT_CHARS = 64 * 1024 * 1024
# Messages read from one document (the 10 MB benchmark conversation has 10,000); the rest
# is left out with a ``document-too-large`` finding.
MAX_MESSAGES = MAX_TOP_ITEMS
# promptls' own document keys, read as in a promptls document when they stand in another
# provider's request body.
OTHER_FORMAT_DOCUMENT_KEYS = frozenset(
    {"$schema", "settings", "custom_agent_prompt", "project_files", "reminder", "user_info"}
)
# Syntax problems reported for one document; the rest are counted in one last finding.
MAX_SYNTAX_ISSUES = 1_000

CONVERSATION_SUFFIXES: dict[str, DocFormat] = {
    ".conv.json": DocFormat.JSON,
    ".conv.jsonl": DocFormat.JSONL,
    ".conv.yaml": DocFormat.YAML,
    ".conv.yml": DocFormat.YAML,
}

_TOP_KEYS = (
    "$schema",
    "settings",
    "system_prompt",
    "custom_agent_prompt",
    "project_files",
    "tools",
    "reminder",
    "additional_context",
    "messages",
    "user_info",
)
_MESSAGE_KEYS = {
    "id",
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "tool_call_ids",
    "name",
    "parent",
    "file_id",
    "filename",
    "files",
    "token_count",
    "summarizes_through",
    "promptls-ignore",
    "function_call",
    "images",
}
# Message fields that real logs carry and that are never sent back as input: read silently.
# OpenAI response fields (``refusal``, ``audio``, ``annotations``), reasoning traces
# (``reasoning_content``: DeepSeek, vLLM, Fireworks; ``reasoning``: OpenRouter, Ollama;
# ``thinking``: Ollama; ``reasoning_details``: OpenRouter; ``thinking_blocks``: LiteLLM),
# the fine-tuning ``weight`` and the ``prefix`` flag of prefix completion (DeepSeek, Mistral).
LOG_MESSAGE_KEYS = frozenset(
    {
        "refusal",
        "audio",
        "annotations",
        "reasoning_content",
        "reasoning",
        "reasoning_details",
        "thinking",
        "thinking_blocks",
        "weight",
        "prefix",
    }
)
# The roles read as another one: OpenAI's ``developer`` (the system role of o-series and
# GPT-5 requests) is a system message, the legacy ``function`` role a tool response.
ROLE_ALIASES: dict[str, Role] = {"developer": Role.SYSTEM, "function": Role.TOOL}
_ROLES: dict[str, Role] = {r.value: r for r in Role}
# The roles the reader compares with per message, as plain globals: ``Role.TOOL`` goes
# through ``EnumType.__getattr__``'s lookup hook (160 ns, eight times a global's).
_TOOL, _USER, _ASSISTANT, _SUMMARY = Role.TOOL, Role.USER, Role.ASSISTANT, Role.SUMMARY
# A chat-completions request body (or a fine-tuning / eval record) is a conversation:
# ``messages``, ``tools`` and ``model`` are read (``functions``, the legacy tool list, as
# tools); the other documented request fields are accepted silently: OpenAI chat
# completions; Ollama's ``options``, ``format``, ``keep_alive``, ``think``; the extensions
# OpenAI-compatible providers document (Groq's ``reasoning_format``, ``search_settings``;
# OpenRouter's ``models``, ``provider``, ``transforms``, ``reasoning``, ``usage``,
# ``plugins``, ``preset``; Together's ``top_k``, ``min_p``, ``repetition_penalty``,
# ``echo``, ``safety_model``, ``context_length_exceeded_behavior``, the first three
# vLLM's and Fireworks' sampling parameters too).
REQUEST_BODY_KEYS = frozenset(
    {
        "model",
        "functions",
        "audio",
        "frequency_penalty",
        "function_call",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "metadata",
        "modalities",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "tool_choice",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
        "web_search_options",
        "options",
        "format",
        "keep_alive",
        "think",
        "reasoning_format",
        "search_settings",
        "models",
        "provider",
        "transforms",
        "reasoning",
        "usage",
        "plugins",
        "preset",
        "top_k",
        "min_p",
        "repetition_penalty",
        "echo",
        "safety_model",
        "context_length_exceeded_behavior",
    }
)
_IGNORE_KEY = "promptls-ignore"
_KNOWN_MESSAGE_KEYS = frozenset(_MESSAGE_KEYS | LOG_MESSAGE_KEYS)


def format_for_path(path: str) -> DocFormat | None:
    """Return the conversation format a file name implies, or None."""
    lower = path.lower()
    for suffix, fmt in CONVERSATION_SUFFIXES.items():
        if lower.endswith(suffix):
            return fmt
    return None


RecordReader = Callable[[ParsedData, DocFormat, int], Conversation]
# What reading each line of a dataset gave, by the line's node: (node, its conversation).
RecordReads = dict[int, tuple[SNode, Conversation]]


def read_tools(node: SNode) -> tuple[tuple[ToolDef, ...], list[Issue]]:
    """Read a ``tools`` list (e.g. from a template's front matter) on its own."""
    reader = Reader(DocFormat.YAML, 0)
    return reader._tools(node), reader.issues


class Reader:
    """Reads a source tree into a ``Conversation``; the format readers build on it.

    Inside a message of the message list the tree's ranges are relative to the message
    (``base``: where it starts), and so are the ranges of the ``Message`` read from it;
    what is reported (issues, rejected calls) is resolved to absolute ranges first.
    """

    def __init__(
        self,
        fmt: DocFormat,
        length: int,
        reads: MessageReads | None = None,
        read_record: RecordReader | None = None,
        record_reads: RecordReads | None = None,
    ) -> None:
        self.fmt = fmt
        self.length = length
        # How a dataset line is read: in the format its own shape says (``reading.py``
        # passes its dispatcher; without one, a dataset line is read as promptls' own).
        self.read_record = read_record
        # What reading each dataset line gave: the previous version's (reused for a line
        # node it shares, the same object) and this one's.
        self.record_reads_in: RecordReads = record_reads if record_reads is not None else {}
        self.record_reads: RecordReads = {}
        self.base = 0  # where the message being read starts
        # What reading each message node gave, by node: the previous version's (``reads``,
        # reused for a node it shares) and this one's.
        self.reads_in: MessageReads = reads if reads is not None else {}
        self.reads: MessageReads = {}
        self._log: list[tuple[str, int, int]] | None = None  # unknown keys of one message
        self.issues: list[Issue] = []
        self.rejected_calls: list[RejectedCall] = []
        # Unknown message keys, by key: reported once each, at the first place (a log whose
        # every message carries its framework's own field says so once, not per message).
        # Each unknown key's first place, unresolved (its range, the offset it is placed
        # at: ``_placed``), and how many messages have it. Resolving the range of a message
        # the C scanner read finds every range of the message (a walk over its text); only
        # a key's first place is shown.
        self.unknown_message_keys: dict[str, tuple[tuple[Span, int], int]] = {}

    def error(self, message: str, rng: Span, code: str = "schema-error") -> None:
        self.issues.append(Issue(code, message, resolve(rng, self.base)))

    def warn(self, message: str, rng: Span, code: str = "schema-warning") -> None:
        self.issues.append(Issue(code, message, resolve(rng, self.base), severity="warning"))

    def unknown_key(self, message: str, rng: Span) -> None:
        self.warn(message, rng, code="unknown-key")

    def info(self, code: str, message: str, rng: Span) -> None:
        self.issues.append(Issue(code, message, resolve(rng, self.base), severity="info"))

    # ---------------------------------------------------------------- document

    def report_syntax(self, parsed: ParsedData) -> None:
        """The parse's own findings, each with its severity, at most ``MAX_SYNTAX_ISSUES``
        of them (then one saying how many more there are)."""
        errors = parsed.errors
        for err in errors[:MAX_SYNTAX_ISSUES]:
            self.issues.append(Issue(err.code, err.message, err.range, severity=err.severity))
        if len(errors) > MAX_SYNTAX_ISSUES:
            last = errors[MAX_SYNTAX_ISSUES]
            more = len(errors) - MAX_SYNTAX_ISSUES
            msg = f"{more:,} more syntax problems from here on are not listed"
            self.issues.append(Issue("syntax-error", msg, last.range))

    def read(self, parsed: ParsedData) -> Conversation:
        self.report_syntax(parsed)
        root = parsed.root
        fields: dict[str, Any] = {}
        messages: tuple[tuple[Message, int], ...] = ()
        if root is None:
            pass
        elif self.fmt is DocFormat.JSONL:
            messages = self._read_jsonl(root, fields)
        elif root.is_array:
            messages = self._messages(root)
        elif root.is_object:
            messages = self._read_object(root, fields)
        else:
            self.error(
                "a conversation must be an array of messages or an object with `messages`",
                root.range,
            )
        return Conversation(
            format=self.fmt,
            message_data=tuple(m for m, _ in messages),
            starts=tuple(s for _, s in messages),
            issues=tuple(self.issues),
            tree=root,
            length=self.length,
            rejected_calls=tuple(self.rejected_calls),
            **fields,
        )

    def _read_jsonl(self, root: SNode, fields: dict[str, Any]) -> tuple[tuple[Message, int], ...]:
        lines = list(root.items)
        starts = root.starts or (0,) * len(lines)
        if is_dataset(root):
            fields["records"], fields["record_starts"] = self._records(lines, starts)
            return ()
        message_nodes: list[SNode] = []
        bases: list[int] = []
        for i, node in enumerate(lines):
            if is_header_line(node):
                if message_nodes:
                    self.error(
                        "document keys must come before the first message line",
                        resolve(node.range, starts[i]),
                    )
                    continue
                node = absolute(node, starts[i])  # read as a document's fields: absolute
                if i > 0 and "settings" in fields:
                    self.warn("a second header line: its keys are merged", node.range)
                self.top_fields(node, fields, allow_messages=False)
                continue
            message_nodes.append(node)
            bases.append(starts[i])
        return self._message_list(message_nodes, bases)

    def _records(
        self, lines: list[SNode], starts: Sequence[int]
    ) -> tuple[tuple[Conversation, ...], tuple[int, ...]]:
        """Each line of a dataset is a conversation of its own, read as a JSON document of
        the line's text (ranges relative to where the line starts), and where each starts.
        A line node the previous version had gives the conversation it gave then."""
        res: list[Conversation] = []
        at: list[int] = []
        reads_in, reads = self.record_reads_in, self.record_reads
        for node, start in zip(lines, starts, strict=True):
            hit = reads_in.get(id(node))
            if hit is None or hit[0] is not node:  # (a node kept was a record before)
                if not node.is_object or (
                    node.get("messages") is None and node.get("input") is None
                ):
                    self.error(
                        "a dataset line must be a conversation object with `messages` (or a "
                        "Responses `input`) "
                        "(this file holds one conversation per line)",
                        resolve(head(node) if node.is_object else node.range, start),
                    )
                    continue
                # Read as it was parsed: relative to the line, its ranges found only when
                # asked for (a finding's), as a JSON document's scanned messages are.
                whole = ParsedData(node)
                length = node.range.end
                if self.read_record is not None:
                    conv = self.read_record(whole, DocFormat.JSON, length)
                else:
                    conv = Reader(DocFormat.JSON, length).read(whole)
                hit = (node, dataclasses.replace(conv, record=True))
            reads[id(node)] = hit
            res.append(hit[1])
            at.append(start)
        return tuple(res), tuple(at)

    def _read_object(self, root: SNode, fields: dict[str, Any]) -> tuple[tuple[Message, int], ...]:
        converse = next((m for m in root.members if m.key in CONVERSE_KEYS), None)
        if converse is not None:
            self.error(f"`{converse.key}`: {not_read(_CONVERSE)}", converse.key_range)
            return ()
        self.top_fields(root, fields, allow_messages=True)
        node = root.get("messages")
        if node is None:
            foreign = foreign_shape(root)
            if foreign is not None:
                what, at = foreign
                self.error(f"missing `messages`: {not_read(what)}", at)
                return ()
            self.error("missing `messages`: the conversation has no message list", head(root))
            return ()
        if not node.is_array:
            self.error("`messages` must be an array of message objects", node.range)
            return ()
        return self._messages(node)

    def _other_request_fields(
        self,
        node: SNode,
        fields: dict[str, Any],
        *,
        list_key: str,
        known: frozenset[str],
        format_name: str,
        read: Mapping[str, Callable[[SNode], None]],
    ) -> tuple[dict[str, Any], dict[str, TextRange]]:
        """The top-level keys of another provider's request body (Anthropic Messages,
        OpenAI Responses): promptls' own document keys as in a promptls document, ``model``
        as the model setting (the document's ``settings.model`` wins), the keys in ``read``
        by their readers, the other ``known`` keys accepted silently, the rest reported.
        Returns the settings and their ranges (the caller stores them in ``fields``)."""
        own = [m for m in node.members if m.key in OTHER_FORMAT_DOCUMENT_KEYS]
        if own:
            self.top_fields(
                SNode("object", node.range, members=tuple(own)), fields, allow_messages=False
            )
        settings = dict(fields.get("settings", {}))
        ranges = dict(fields.get("settings_ranges", {}))
        for m in node.members:
            key, value = m.key, m.value
            if key in OTHER_FORMAT_DOCUMENT_KEYS or key == list_key:
                continue
            if key == "model":
                if value.is_string and value.value:
                    if "model" not in settings:
                        settings["model"] = value.value
                        ranges["model"] = value.range
                else:
                    self.error("`model` must be a non-empty string", value.range)
            elif key in read:
                read[key](value)
            elif key not in known:
                self.unknown_key(
                    f"unknown key `{key}` in an {format_name} (read as such because of its shape)",
                    m.key_range,
                )
        return settings, ranges

    def top_fields(self, node: SNode, fields: dict[str, Any], *, allow_messages: bool) -> None:
        for m in node.members:
            key, value = m.key, m.value
            if key == "settings":
                self._settings(value, fields)
            elif key == "system_prompt":
                fields["system_prompt"] = self._system_prompt(value)
            elif key == "custom_agent_prompt":
                fields["custom_agent_prompt"] = self._text_block(value, key)
            elif key == "reminder":
                fields["reminder"] = self._text_block(value, key)
            elif key == "additional_context":
                fields["additional_context"] = self._text_block(value, key)
            elif key == "project_files":
                fields["project_files"] = self._project_files(value)
            elif key == "tools":
                fields["tools"] = (*fields.get("tools", ()), *self._tools(value))
            elif key == "functions" and allow_messages:
                fields["tools"] = (*self._tools(value), *fields.get("tools", ()))
            elif key == "model" and allow_messages:
                self._model(value, fields)
            elif key == "user_info":
                if value.is_object:
                    fields["user_info"] = value.to_python()
                else:
                    self.error("`user_info` must be an object", value.range)
            elif key == "$schema" or (
                allow_messages and (key == "messages" or key in REQUEST_BODY_KEYS)
            ):
                continue
            else:
                expected = ", ".join(f"`{k}`" for k in _TOP_KEYS if k != "$schema")
                self.unknown_key(
                    f"unknown key `{key}` (expected one of {expected}, or a chat-completions "
                    "request field)",
                    m.key_range,
                )

    def _model(self, node: SNode, fields: dict[str, Any]) -> None:
        """A request body's ``model`` is the document's ``model`` setting, unless its
        ``settings`` say otherwise."""
        if not node.is_string or not node.value:
            self.error("`model` must be a model name", node.range)
            return
        values = dict(fields.get("settings", {}))
        ranges = dict(fields.get("settings_ranges", {}))
        if "model" in values:
            return
        values["model"] = node.value
        ranges["model"] = node.range
        fields["settings"] = values
        fields["settings_ranges"] = ranges

    def _settings(self, node: SNode, fields: dict[str, Any]) -> None:
        if not node.is_object:
            self.error("`settings` must be an object", node.range)
            return
        values = dict(fields.get("settings", {}))
        ranges = dict(fields.get("settings_ranges", {}))
        for m in node.members:
            values[m.key] = m.value.to_python()
            ranges[m.key] = m.value.range
        fields["settings"] = values  # ``settings.model`` wins over a request body's ``model``
        fields["settings_ranges"] = ranges

    def _system_prompt(self, node: SNode) -> TextBlock | PromptRef | None:
        if node.is_string and _looks_like_path(node.value):
            return PromptRef(node.value, node.range)
        if node.is_object and node.get("path") is not None:
            path = node.get("path")
            assert path is not None
            if not path.is_string:
                self.error("`path` must be a string", path.range)
                return None
            return PromptRef(path.value, path.range)
        return self._text_block(node, "system_prompt")

    def _text_block(self, node: SNode, what: str) -> TextBlock | None:
        if node.kind == "null":
            return None
        if node.is_string:
            return TextBlock(node.value, node.range, node.range)
        if node.is_object:
            content = node.get("content")
            if content is None or not content.is_string:
                self.error(f"`{what}` needs a string `content`", (content or node).range)
                return None
            return TextBlock(content.value, node.range, content.range, self._token_count(node))
        self.error(f"`{what}` must be a string or an object with `content`", node.range)
        return None

    def _token_count(self, node: SNode) -> int | None:
        tc = node.get("token_count")
        if tc is None or tc.kind == "null":
            return None
        if (
            tc.kind == "number"
            and isinstance(tc.value, int)
            and not isinstance(tc.value, bool)
            and tc.value >= 0
        ):
            return tc.value
        self.error("`token_count` must be a whole number ≥ 0", tc.range)
        return None

    def _project_files(self, node: SNode) -> tuple[FileAttachment, ...]:
        if not node.is_array:
            self.error("`project_files` must be an array of files", node.range)
            return ()
        res = []
        for item in node.items:
            f = self._file(item, "project file", allow_path=True)
            if f is not None:
                res.append(f)
        return tuple(res)

    def _file(self, node: SNode, what: str, *, allow_path: bool) -> FileAttachment | None:
        if not node.is_object:
            self.error(f"a {what} must be an object with `file_id` and `filename`", node.range)
            return None
        file_id = self._string(node, "file_id", what=what)
        filename = self._string(node, "filename", what=what, required=False)
        if file_id is None:
            return None
        kind_node = node.get("type") or node.get("kind")
        kind = "text"
        if kind_node is not None:
            if kind_node.is_string and kind_node.value in ("text", "tabular", "image", "document"):
                kind = "text" if kind_node.value == "document" else kind_node.value
            else:
                self.error("file `type` must be `text`, `tabular` or `image`", kind_node.range)
        content_node = node.get("content")
        path_node = node.get("path") if allow_path else None
        content = None
        if content_node is not None:
            if content_node.is_string:
                content = content_node.value
            elif content_node.kind != "null":
                self.error("file `content` must be a string", content_node.range)
        path = None
        if path_node is not None:
            if path_node.is_string:
                path = path_node.value
                if content is not None:
                    self.warn(
                        "a file has both `content` and `path`: `content` is used", path_node.range
                    )
            else:
                self.error("file `path` must be a string", path_node.range)
        processing = False
        processing_node = node.get("processing")
        if processing_node is not None and processing_node.kind != "null":
            if isinstance(processing_node.value, bool):
                processing = processing_node.value
            else:
                self.error("file `processing` must be true or false", processing_node.range)
        approx = node.get("approx_char_count")
        approx_value = (
            approx.value if approx is not None and isinstance(approx.value, int) else None
        )
        return FileAttachment(
            file_id=file_id,
            filename=filename if filename is not None else "unknown",
            content=content,
            range=node.range,
            kind=kind,
            token_count=self._token_count(node),
            approx_char_count=approx_value,
            path=path,
            path_range=path_node.range if path_node is not None else None,
            processing=processing,
        )

    def _tools(self, node: SNode) -> tuple[ToolDef, ...]:
        if node.kind == "null":  # none offered (SDKs send every optional field, as null)
            return ()
        if not node.is_array:
            self.error("`tools` must be an array of tool schemas", node.range)
            return ()
        res = []
        for item in node.items:
            if item.is_string:
                # Shorthand: a bare tool name.
                schema = {"type": "function", "function": {"name": item.value}}
                res.append(ToolDef(item.value, schema, item.range, item.range))
                continue
            if not item.is_object:
                self.error("a tool must be an OpenAI tool schema object", item.range)
                continue
            fn = item.get("function")
            holder = fn if fn is not None and fn.is_object else item
            name = holder.get("name")
            kind = item.get("type")
            if (
                fn is None
                and name is None
                and kind is not None
                and kind.is_string
                and kind.value not in ("", "function")
            ):
                # A provider's built-in tool (`{"type": "web_search"}`,
                # `{"type": "openrouter:advisor", …}`): offered, named by its type.
                res.append(ToolDef(kind.value, item.to_python(), item.range, kind.range))
                continue
            if name is None or not name.is_string or not name.value:
                self.error("a tool needs `function.name`", (name or item).range)
                continue
            res.append(ToolDef(name.value, item.to_python(), item.range, name.range))
        return tuple(res)

    # ---------------------------------------------------------------- messages

    def _messages(self, node: SNode) -> tuple[tuple[Message, int], ...]:
        starts = node.starts or (0,) * len(node.items)
        return self._message_list(list(node.items), list(starts))

    def _message_list(
        self, nodes: list[SNode], bases: list[int]
    ) -> tuple[tuple[Message, int], ...]:
        """Read the messages (each with where it starts: ``bases``, its node's ranges being
        relative to it). A message that cannot be read is left out; the ones after it keep
        their ids (the document's ``id``, else their position in the document)."""
        if len(nodes) > MAX_MESSAGES:
            self.error(
                f"more than {MAX_MESSAGES:,} messages: the rest is not read",
                resolve(head(nodes[MAX_MESSAGES]), bases[MAX_MESSAGES]),
                code="document-too-large",
            )
            nodes, bases = nodes[:MAX_MESSAGES], bases[:MAX_MESSAGES]
        read = [
            (i, base, self.read_message(node, i, base))
            for i, (node, base) in enumerate(zip(nodes, bases, strict=True))
        ]
        self.report_unknown_message_keys()
        written = {m.id for _, _, m in read if m is not None}
        res: list[tuple[Message, int]] = []
        seen: set[str] = set()
        for index, base, msg in read:
            if msg is None:
                continue
            if msg.id in seen:
                # The index, unless another message is written with that id.
                fallback = str(index)
                if fallback in seen or (fallback in written and fallback != msg.id):
                    self.error(
                        f"duplicate message id `{msg.id}`: the message is left out",
                        resolve(msg.id_range or msg.range, base),
                    )
                    continue
                self.error(
                    f"duplicate message id `{msg.id}`: this message is read as `{fallback}`, "
                    "its index",
                    resolve(msg.id_range or msg.range, base),
                )
                msg = dataclasses.replace(msg, id=fallback)
            seen.add(msg.id)
            res.append((msg, base))
        return self._pair_unnamed_responses(res)

    def unknown_key_at(self, key: str, place: tuple[Span, int]) -> None:
        """Note a message's unknown key (its place: a range and the offset it is relative
        to, resolved by ``_placed`` only when reported)."""
        got = self.unknown_message_keys.get(key)
        self.unknown_message_keys[key] = (place, 1) if got is None else (got[0], got[1] + 1)

    def report_unknown_message_keys(self) -> None:
        """One finding for each unknown message key, at its first place, after the
        messages' own (``unknown_message_keys``, in document order).

        Only the first ``MAX_ISSUES_PER_CODE + 1`` are placed: whatever came before them,
        no later one is listed (``from_issues`` lists that many of a code at most, the last
        one saying how many more there are), so the others take the last one's place
        instead of each finding its own (a message of 200,000 keys: a second of work)."""
        place: TextRange | None = None
        for n, (key, (first, count)) in enumerate(self.unknown_message_keys.items()):
            if place is None or n <= MAX_ISSUES_PER_CODE:
                place = _placed(*first)
            more = count - 1
            also = f" (and on {plural(more, 'more message')})" if more else ""
            self.unknown_key(f"unknown message key `{key}`{also}: it is ignored", place)

    def has_findings(self) -> bool:
        """Whether reading found anything to report (reported or still to be)."""
        return bool(self.issues or self.unknown_message_keys)

    def _pair_unnamed_responses(
        self, messages: list[tuple[Message, int]]
    ) -> tuple[tuple[Message, int], ...]:
        """Give the responses written without a usable ``tool_call_id`` the id of the call
        they answer, in conversation order: a ``tool`` message with ``"tool_call_id": ""`` (or
        none) answers the oldest unanswered call whose id was made up; a legacy ``function``
        message answers the oldest unanswered legacy ``function_call`` of its name."""
        if not any(
            _depends_on_neighbours(m)
            for m, _ in messages
            if m.tool_calls or m.role is _TOOL  # (else it cannot: no call each)
        ):
            return tuple(messages)
        pending: list[ToolCall] = []
        res: list[tuple[Message, int]] = []
        for m, base in messages:
            if m.role is _ASSISTANT:
                pending.extend(c for c in m.tool_calls if c.synthesized_id)
            elif _unnamed_response(m):
                legacy = m.written_role == "function"
                match = next(
                    (c for c in pending if not legacy or c.name == (m.name or c.name)), None
                )
                if match is not None:
                    pending.remove(match)
                    m = dataclasses.replace(m, tool_call_id=match.id)
                elif legacy:
                    self.error(
                        "a `function` message answers no earlier `function_call`"
                        + (f" of `{m.name}`" if m.name else ""),
                        resolve(m.role_range or m.range, base),
                    )
                elif m.tool_call_id is None:
                    # (``"tool_call_id": ""`` that answers no call: an orphan, reported there.)
                    self.error(
                        "a tool message needs `tool_call_id`",
                        resolve(m.role_range or m.range, base),
                    )
            res.append((m, base))
        return tuple(res)

    def read_message(self, node: SNode, index: int, base: int = 0) -> Message | None:
        """Read one message from its node, stored relative to ``base`` (its start) when the
        node is; ``index`` is its place in the document (its id when it has none).

        A node the previous version's reads share gives the same ``Message`` object and
        the same findings (placed at ``base``), unless its id was its place and that moved.
        """
        hit = self.reads_in.get(id(node))
        if hit is not None and hit.node is node and hit.index in (None, index):
            self.reads[id(node)] = hit
            for code, message, start, end, severity in hit.issues:
                self.issues.append(
                    Issue(code, message, TextRange(base + start, base + end), severity)
                )
            for key, key_range, delta in hit.unknown:
                self.unknown_key_at(key, (key_range, base + delta))
            for call_id, start, end, why in hit.rejected:
                rc = RejectedCall(call_id, TextRange(base + start, base + end), why)
                self.rejected_calls.append(rc)
            return hit.message
        n_issues, n_rejected = len(self.issues), len(self.rejected_calls)
        self.base, self._log = base, []
        try:
            msg = self._message(node, index)
        finally:
            self.base, log, self._log = 0, self._log, None
        # (A parsed node's table, made for these look-ups, is let go: kept, the tables would
        # outweigh the messages' own objects. A scanned node's table is its members.)
        node.release_fields()
        issues, rejected = self.issues, self.rejected_calls
        self.reads[id(node)] = _MessageRead(
            node,
            index if msg is None or msg.id == str(index) else None,
            msg,
            tuple(
                (i.code, i.message, i.range.start - base, i.range.end - base, i.severity)
                for i in issues[n_issues:]
            )
            if len(issues) > n_issues
            else (),
            tuple(log) if log else (),
            tuple(
                (r.id, r.range.start - base, r.range.end - base, r.reason)
                for r in rejected[n_rejected:]
            )
            if len(rejected) > n_rejected
            else (),
        )
        return msg

    def _message(self, node: SNode, index: int) -> Message | None:
        # (``kind ==`` rather than the ``is_…`` properties here: a call each, per message)
        if node.kind != "object":
            self.error("a message must be an object with a `role`", node.range)
            return None
        # The table of the message's keys: each look-up below is the table's own, not a
        # call each, and a key it lacks is known without the helper that reads it.
        fields = node.fields()
        get = fields.get
        role_node = get("role")
        if not _KNOWN_MESSAGE_KEYS.issuperset(fields):
            # A line of a format promptls does not read: said once, at the key that tells
            # it, not as every key it has that a message has not; a Gemini turn of a role
            # promptls knows (`user` and `parts`) likewise (another role, `model`, says it
            # with the unknown role, below).
            foreign = (
                foreign_shape(node)
                if role_node is None or ("parts" in fields and "content" not in fields)
                else None
            )
            if foreign is not None and (role_node is None or _known_role(role_node)):
                what, at = foreign
                said = "message has no `role`" if role_node is None else "message has `parts`"
                self.error(f"{said}: {not_read(what)}; it is left out", at)
                return None
            for m in node.members if foreign is None else ():
                if m.key not in _KNOWN_MESSAGE_KEYS:
                    # Kept unresolved (``_placed``): only a key's first place is reported.
                    key_range = m.key_range
                    delta = self.base if isinstance(key_range, RelRange) else 0
                    self.unknown_key_at(m.key, (key_range, delta))
                    if self._log is not None:
                        self._log.append((m.key, key_range, delta - self.base))
        if role_node is None:
            self.error("message has no `role`: it is left out", head(node))
            return None
        written_role = None
        role = None
        if role_node.kind == "string":
            role = _ROLES.get(role_node.value)  # (not ``Role(…)``: two calls in ``enum``)
            if role is None:
                role = ROLE_ALIASES.get(role_node.value)
                written_role = role_node.value if role is not None else None
        if role is None:
            roles = ", ".join(f"`{r.value}`" for r in Role)
            foreign = foreign_shape(node)
            also = f" ({not_read(foreign[0])})" if foreign is not None else ""
            self.error(
                f"unknown role {show(role_node)}: expected one of {roles}{also}; the message "
                "is left out",
                role_node.range,
            )
            return None
        id_node = get("id")
        msg_id = str(index)
        if id_node is not None:
            if id_node.kind == "string" and id_node.value.startswith("$"):
                self.error(
                    f"message id `{clip(id_node.value)}`: ids starting with `$` are the "
                    "pipeline's own ($system, $reminder, …); the message's index is used",
                    id_node.range,
                )
            elif id_node.kind == "string" and id_node.value:
                msg_id = id_node.value
            elif id_node.kind == "number" and isinstance(id_node.value, int):
                msg_id = str(id_node.value)
            else:
                self.error("message `id` must be a non-empty string or an integer", id_node.range)
        content, content_range, images = self._content(get("content"))
        if "images" in fields:
            images += self._ollama_images(fields["images"])
        parent_node = get("parent")
        parent = None
        if parent_node is not None and parent_node.kind != "null":
            if parent_node.kind == "string" or (
                parent_node.kind == "number" and isinstance(parent_node.value, int)
            ):
                parent = str(parent_node.value)
            else:
                self.error("`parent` must be a message id", parent_node.range)
        tool_calls = (
            self._tool_calls(node, role, msg_id)
            if "tool_calls" in fields or "function_call" in fields
            else ()
        )
        tcid_node = get("tool_call_id")
        tool_call_id = None
        if tcid_node is None and role is _TOOL:
            tcid_node = self._tool_call_ids(node)
        if tcid_node is not None and tcid_node.kind != "null":
            if tcid_node.kind == "string":
                tool_call_id = tcid_node.value
            else:
                self.error("`tool_call_id` must be a string", tcid_node.range)
        files: tuple[FileAttachment, ...] = ()
        files_node = get("files")
        if files_node is not None:
            if role is not _USER:
                self.error("only user messages carry uploaded `files`", files_node.range)
            elif files_node.kind != "array":
                self.error("`files` must be an array of files", files_node.range)
            else:
                files = tuple(
                    f
                    for f in (self._file(i, "file", allow_path=False) for i in files_node.items)
                    if f
                )
        file_id = filename = None
        if "file_id" in fields:
            file_id = self._string(node, "file_id", what="message", required=False)
        if "filename" in fields:
            filename = self._string(node, "filename", what="message", required=False)
        if file_id is not None and role is not _USER:
            fid_node = get("file_id")
            assert fid_node is not None
            self.error("only user messages can be injected files (`file_id`)", fid_node.range)
            file_id = None
        st_node = get("summarizes_through")
        summarizes_through = None
        if role is _SUMMARY:
            if st_node is None or st_node.kind == "null":
                self.error(
                    "a summary needs `summarizes_through`: the id of the last summarized message",
                    role_node.range,
                )
            elif st_node.kind == "string" or (
                st_node.kind == "number" and isinstance(st_node.value, int)
            ):
                summarizes_through = str(st_node.value)
            else:
                self.error("`summarizes_through` must be a message id", st_node.range)
        elif st_node is not None:
            self.error(
                "`summarizes_through` belongs on a message with role `summary`", st_node.range
            )
        ignore = self._ignore_list(node) if _IGNORE_KEY in fields else ()
        name = (
            self._string(node, "name", what="message", required=False) if "name" in fields else None
        )
        token_count = self._token_count(node) if "token_count" in fields else None
        # Every field, in order, by position: with 22 keywords, matching the names took a
        # sixth of reading a conversation (each keyword is looked for among the parameters).
        return Message(
            msg_id,  # id
            role,
            content,
            node.range,  # range
            content_range,
            id_node.range if id_node is not None else None,  # id_range
            role_node.range,  # role_range
            parent,
            parent_node.range if parent_node is not None else None,  # parent_range
            images,
            tool_calls,
            tool_call_id,
            tcid_node.range if tcid_node is not None else None,  # tool_call_id_range
            name,
            file_id,
            filename,
            files,
            token_count,
            summarizes_through,
            st_node.range if st_node is not None else None,  # summarizes_through_range
            ignore,
            written_role,
        )

    def _tool_call_ids(self, node: SNode) -> SNode | None:
        """SWE-agent writes a tool response's call id as ``tool_call_ids: [id]``."""
        ids = node.get("tool_call_ids")
        if ids is None or ids.kind != "array":
            return ids if ids is not None and ids.kind != "null" else None
        if len(ids.items) == 1:
            return ids.items[0]
        self.error("`tool_call_ids` must name exactly one tool call", ids.range)
        return None

    def _content(self, c: SNode | None) -> tuple[str, TextRange | None, tuple[Image, ...]]:
        """A message's content (its ``content`` value, None when it has none)."""
        if c is None or c.kind == "null":
            return "", c.range if c is not None else None, ()
        if c.kind == "string":
            return c.value, c.range, ()
        if c.kind != "array":
            self.error("`content` must be a string, null or an array of content parts", c.range)
            return "", c.range, ()
        texts: list[str] = []
        images: list[Image] = []
        for part in c.items:
            if part.kind == "string":
                texts.append(part.value)
                continue
            if part.kind != "object":
                self.error("a content part must be an object with a `type`", part.range)
                continue
            ptype = part.get("type")
            kind = ptype.value if ptype is not None and ptype.kind == "string" else None
            if kind == "text":
                text = part.get("text")
                if text is not None and text.kind == "string":
                    texts.append(text.value)
                else:
                    self.error("a text part needs a string `text`", part.range)
            elif kind in ("image_url", "image", "input_image"):
                ref = _image_ref(part)
                if ref is None:
                    self.error("an image part needs `image_url.url` or `file_id`", part.range)
                else:
                    images.append(Image(ref, part.range, self._token_count(part)))
            elif kind == "refusal" and _string_value(part, "refusal") is not None:
                texts.append(_string_value(part, "refusal") or "")
            elif kind in _UNASSEMBLED_PARTS:
                self.warn(
                    f"content part `{kind}` is neither counted nor sent: promptls assembles "
                    "text and images",
                    part.range,
                )
            else:
                self.error(
                    f"unsupported content part type {show(ptype) if ptype else '(none)'}",
                    part.range,
                )
        return "\n".join(texts), c.range, tuple(images)

    def _ollama_images(self, node: SNode) -> tuple[Image, ...]:
        """Ollama's ``images`` (``/api/chat``): base64 images sent with the message, read
        as image parts with a data URL (its type told by the data's first bytes)."""
        if node.kind == "null":
            return ()
        if node.kind != "array":
            self.error("`images` must be an array of base64 strings", node.range)
            return ()
        res: list[Image] = []
        for item in node.items:
            if item.kind != "string" or not item.value:
                self.error("an image of `images` must be a base64 string", item.range)
                continue
            mime = next((m for p, m in _BASE64_IMAGE_TYPES if item.value.startswith(p)), "png")
            res.append(Image(f"data:image/{mime};base64,{item.value}", item.range))
        return tuple(res)

    def _tool_calls(self, node: SNode, role: Role, msg_id: str) -> tuple[ToolCall, ...]:
        tcs = node.get("tool_calls")
        legacy = node.get("function_call")
        if (tcs is None or tcs.kind == "null") and legacy is not None and legacy.is_object:
            if role is not _ASSISTANT:
                self.error("only assistant messages make a `function_call`", legacy.range)
                return ()
            # The legacy single call: read as a tool call (``function`` is the call itself).
            call = self._tool_call(legacy, msg_id, 0, function=legacy)
            return (call,) if call is not None else ()
        if tcs is None or tcs.kind == "null":
            return ()
        if role is not _ASSISTANT:
            self.error("only assistant messages make `tool_calls`", tcs.range)
            return ()
        if not tcs.is_array:
            self.error("`tool_calls` must be an array", tcs.range)
            return ()
        res = []
        for k, tc in enumerate(tcs.items):
            call = self._tool_call(tc, msg_id, k)
            if call is not None:
                res.append(call)
        return tuple(res)

    def _tool_call(
        self, tc: SNode, msg_id: str, k: int, *, function: SNode | None = None
    ) -> ToolCall | None:
        if not tc.is_object:
            self.error("a tool call must be an object with `id` and `function`", tc.range)
            return None
        id_node = tc.get("id") if function is None else None
        fn = tc.get("function") if function is None else function
        synthesized = id_node is None or (id_node.is_string and not id_node.value)
        if not synthesized and (id_node is None or not id_node.is_string):
            self.error("a tool call `id` must be a string", (id_node or tc).range)
            return None
        if fn is None or not fn.is_object:
            return self._reject(tc, id_node, "a tool call needs a `function` object", fn or tc)
        name = fn.get("name")
        if name is None or not name.is_string:
            return self._reject(tc, id_node, "a tool call needs `function.name`", name or fn)
        args_node = fn.get("arguments")
        args: dict[str, Any] | None
        if args_node is None or args_node.kind == "null":
            args_text, args, args_range = "{}", {}, fn.range
        elif args_node.is_string:
            args_text, args_range = args_node.value, args_node.range
            try:
                loaded = json.loads(args_text) if args_text.strip() else {}
            except (ValueError, RecursionError):  # (nested too deep to read)
                loaded = None
            args = loaded if isinstance(loaded, dict) else None
            if args is None:
                self.warn("tool call `arguments` is not a JSON object", args_node.range)
        elif args_node.is_object:
            args = args_node.to_python()
            args_text, args_range = json.dumps(args), args_node.range
        else:
            return self._reject(
                tc, id_node, "`arguments` must be a JSON string or an object", args_node
            )
        call_id = id_node.value if id_node is not None and not synthesized else ""
        id_range = id_node.range if id_node is not None else head(tc)
        if synthesized:
            call_id = f"call_{msg_id}_{k}"
            if function is not None:
                what = "a legacy `function_call`"
            elif id_node is None:
                what = "a tool call without `id`"
            else:
                what = 'a tool call with `"id": ""`'
            self.info(
                "synthesized-tool-call-id",
                f"{what} is read as tool call `{call_id}` (an id made up here, sent in the "
                "assembled messages); the response that answers it, if any (in conversation "
                "order), gets the same id",
                id_range,
            )
        return ToolCall(
            id=call_id,
            name=name.value,
            arguments=args,
            arguments_text=args_text,
            range=tc.range,
            id_range=id_range,
            name_range=name.range,
            arguments_range=args_range,
            token_count=self._token_count(tc),
            synthesized_id=synthesized,
        )

    def _reject(self, tc: SNode, id_node: SNode | None, why: str, at: SNode) -> None:
        """Report a tool call that cannot be read; remember it when it has an id."""
        self.error(why, at.range)
        if id_node is not None and id_node.is_string and id_node.value:
            self.rejected_calls.append(
                RejectedCall(id_node.value, resolve(tc.range, self.base), why)
            )

    def _string(self, node: SNode, key: str, *, what: str, required: bool = True) -> str | None:
        v = node.get(key)
        if v is None or v.kind == "null":
            if required:
                self.error(f"a {what} needs `{key}`", head(node))
            return None
        if v.is_string:
            return v.value
        if v.kind == "number" and isinstance(v.value, int):
            return str(v.value)
        self.error(f"`{key}` must be a string", v.range)
        return None

    def _ignore_list(self, node: SNode) -> tuple[str, ...]:
        v = node.get(_IGNORE_KEY)
        if v is None:
            return ()
        if v.is_string:
            return (v.value,)
        if v.is_array and all(i.is_string for i in v.items):
            return tuple(i.value for i in v.items)
        self.error(f"`{_IGNORE_KEY}` must be a rule code or a list of codes", v.range)
        return ()


# Content parts that providers document and promptls does not assemble: OpenAI's `file` and
# `input_audio`, Mistral's `document_url`, the `video_url` / `audio_url` of vLLM and
# OpenRouter. Read with a warning (the part is left out), not refused.
_UNASSEMBLED_PARTS = frozenset({"file", "input_audio", "document_url", "video_url", "audio_url"})


def _string_value(node: SNode, key: str) -> str | None:
    v = node.get(key)
    return v.value if v is not None and v.is_string else None


def tools_from_settings(values: list[str | dict[str, Any]]) -> tuple[ToolDef, ...]:
    """The ``tools`` setting as tool definitions (names, or OpenAI tool schemas)."""
    res = []
    nowhere = TextRange(0, 0)
    for v in values:
        if isinstance(v, str):
            schema: dict[str, Any] = {"type": "function", "function": {"name": v}}
            res.append(ToolDef(v, schema, nowhere, nowhere))
            continue
        fn = v.get("function")
        holder = fn if isinstance(fn, dict) else v
        name = holder.get("name")
        if isinstance(name, str) and name:
            res.append(ToolDef(name, v, nowhere, nowhere))
    return tuple(res)


def is_dataset(root: SNode) -> bool:
    """Whether a JSON Lines document holds one conversation per line (fine-tuning sets, eval
    records: ``{"messages": […], "tools": […]}``) rather than one message per line: its first
    line is an object with a ``messages`` array and no ``role``."""
    first = root.items[0] if root.is_array and root.items else None
    if first is None or not first.is_object or first.get("role") is not None:
        return False
    messages = first.get("messages")
    return messages is not None and messages.is_array


# The ``type`` of a Codex CLI rollout's lines (``~/.codex/sessions/…/rollout-….jsonl``, one
# ``{"timestamp", "type", "payload"}`` event a line).
CODEX_LINE_TYPES = frozenset(
    {"session_meta", "response_item", "turn_context", "event_msg", "compacted"}
)


# The lines a transcript's first message may come after (``summary`` lines pile up at the
# head of a session resumed many times): the look at each version stays short.
_CLAUDE_CODE_HEAD = 200
# Keys only Claude Code's lines have, on lines that hold no message.
_CLAUDE_CODE_MARKS = ("leafUuid", "messageId", "parentUuid")


def is_claude_code_transcript(root: SNode) -> bool:
    """Whether a JSON Lines document is a Claude Code session transcript: its lines, up to
    the first message, are objects with a string ``type`` (Claude Code writes new kinds of
    lines as it goes: ``summary``, ``permission-mode``, ``progress``, ``attachment``…), and
    that first message line is a ``user`` or ``assistant`` line with a ``message`` object
    and a ``uuid`` or ``sessionId``; or it has no message, and one of those lines is Claude
    Code's own (a ``summary`` line's ``leafUuid``, a snapshot's ``messageId``, a
    ``parentUuid``). Read by ``formats.anthropic.read_claude_code``."""
    own = False
    for line in itertools.islice(root.items if root.is_array else (), _CLAUDE_CODE_HEAD):
        kind = line.get("type") if line.is_object else None
        if kind is None or not kind.is_string or line.get("role") is not None:
            return False  # (a Responses item has a ``type`` too, and is a message itself)
        message = line.get("message")
        if message is not None:
            return (
                kind.value in ("user", "assistant")
                and message.is_object
                and (line.get("uuid") is not None or line.get("sessionId") is not None)
            )
        own = own or any(line.get(k) is not None for k in _CLAUDE_CODE_MARKS)
    return own


def is_codex_rollout(root: SNode) -> bool:
    """Whether a JSON Lines document is a Codex CLI rollout: its first line is an object
    with a rollout line's ``type`` and an object ``payload`` (read by
    ``formats.responses.read_codex_rollout``)."""
    first = root.items[0] if root.is_array and root.items else None
    if first is None or not first.is_object:
        return False
    kind, payload = first.get("type"), first.get("payload")
    return (
        kind is not None
        and kind.is_string
        and kind.value in CODEX_LINE_TYPES
        and payload is not None
        and payload.is_object
    )


def _depends_on_neighbours(m: Message) -> bool:
    """Whether reading ``m`` takes the messages around it: a call whose id was made up, or a
    response without a usable ``tool_call_id`` (paired in conversation order)."""
    if m.role is _TOOL:
        return _unnamed_response(m)
    return any(c.synthesized_id for c in m.tool_calls)


def _unnamed_response(m: Message) -> bool:
    """A tool response without a usable ``tool_call_id``: none written, or ``""`` (an invalid
    value is an error of its own)."""
    if m.role is not _TOOL:
        return False
    return m.tool_call_id == "" or (m.tool_call_id is None and m.tool_call_id_range is None)


def reads_alone(m: Message) -> bool:
    """Whether ``m`` reads the same on its own as inside its document (for re-parsing one
    message after an edit: ``incremental.py``)."""
    return not _depends_on_neighbours(m)


def all_read_alone(msgs: Sequence[Message]) -> bool:
    """``all(map(reads_alone, msgs))`` in passes at C speed (a list that ends early leaves
    thousands of messages to look at): no tool response without a usable call id, no
    call with a made-up id in another message."""
    tools = list(map(is_, map(_ROLE, msgs), repeat(_TOOL)))
    answers = list(compress(msgs, tools))
    if answers:
        ids = list(map(_TOOL_CALL_ID, answers))
        if "" in ids:
            return False
        if None in ids:
            unset = compress(answers, map(is_, ids, repeat(None)))
            if any(map(is_, map(_TOOL_CALL_ID_RANGE, unset), repeat(None))):
                return False
    if not any(map(_SYNTHESIZED, chain.from_iterable(map(_CALLS, msgs)))):
        return True
    others = compress(msgs, map(not_, tools))  # (a tool message's own calls do not count)
    return not any(map(_SYNTHESIZED, chain.from_iterable(map(_CALLS, others))))


def same_made_up_calls(new: Sequence[Message], old: Sequence[Message]) -> bool:
    """Whether ``new``, read again in place of ``old``, reads as it would in its document
    although some of them do not read alone: their only tie to their neighbours is calls
    with made-up ids (no tool response without a usable id among either), and those are
    the same calls, by id and name in order, as ``old``'s. The responses that the document's
    pairing (``Reader._pair_unnamed_responses``) gave those ids then keep them: typing in
    the text of an assistant message whose calls have no ``id`` (Writer's and Ollama's
    logs) changes nothing the pairing reads."""
    if any(map(_unnamed_response, chain(new, old))):
        return False
    return _made_up_calls(new) == _made_up_calls(old)


def _made_up_calls(msgs: Sequence[Message]) -> list[tuple[str, str]]:
    return [
        (c.id, c.name)
        for m in msgs
        if m.role is _ASSISTANT
        for c in m.tool_calls
        if c.synthesized_id
    ]


_ROLE = attrgetter("role")
_CALLS = attrgetter("tool_calls")
_TOOL_CALL_ID = attrgetter("tool_call_id")
_TOOL_CALL_ID_RANGE = attrgetter("tool_call_id_range")
_SYNTHESIZED = attrgetter("synthesized_id")


# The base64 of each image format's first bytes (for Ollama's ``images``, which are bare).
_BASE64_IMAGE_TYPES = (("/9j/", "jpeg"), ("iVBOR", "png"), ("R0lGOD", "gif"), ("UklGR", "webp"))


def _image_ref(part: SNode) -> str | None:
    fid = part.get("file_id")
    if fid is not None and fid.is_string:
        return fid.value
    url = part.get("image_url")
    if url is not None:
        if url.is_string:
            return url.value
        if url.is_object:
            u = url.get("url")
            if u is not None and u.is_string:
                return u.value
    return None


def _looks_like_path(value: str) -> bool:
    return "\n" not in value and value.strip().lower().endswith((".md", ".txt", ".prompt"))


@dataclass(slots=True, unsafe_hash=True)
class _MessageRead:
    """What reading one message node gave: the ``Message`` (None: left out), the findings
    (relative to the message's start), and the index its id was taken from (None: it has
    its own id, read the same anywhere).

    Immutable by convention, like ``Message`` (one is made per message at an open)."""

    node: SNode
    index: int | None
    message: Message | None
    issues: tuple[tuple[str, str, int, int, str], ...]
    unknown: tuple[tuple[str, Span, int], ...]  # (key, range, its offset less the start's)
    rejected: tuple[tuple[str, int, int, str], ...]


MessageReads = dict[int, _MessageRead]


def _placed(rng: Span, delta: int) -> TextRange:
    """A place of ``Reader.unknown_message_keys`` in the document."""
    return rng.at(delta) if isinstance(rng, RelRange) else rng.shift(delta)


def is_header_line(node: SNode) -> bool:
    """Whether a JSON Lines line holds document keys (settings, prompts, tools…), not a
    message."""
    return (
        node.is_object
        and node.get("role") is None
        and any(k.key in _HEAD_KEYS for k in node.members)
    )


_HEAD_KEYS = frozenset(
    {"settings", "system_prompt", "custom_agent_prompt", "project_files"}
    | {"tools", "reminder", "user_info"}
)


# Dataset and provider shapes users keep conversations in that promptls does not read, each
# told by one key (and a second one for a turn): ShareGPT records (``conversations`` of
# ``from``/``value`` turns: LLaMA-Factory, FastChat, Axolotl datasets) and Gemini
# ``generateContent`` bodies (``contents`` of ``role``/``parts`` turns), and the session
# transcripts coding agents keep, one event a line: Claude Code's (the message inside a
# ``message`` object, a ``summary`` line), LangChain's message dumps. (Codex CLI's rollouts
# are read: ``is_codex_rollout``.) Said at that key, instead of a missing ``messages`` or ``role``
# that would leave the user guessing (a Claude Code line has a ``role``, inside ``message``).
# Each entry: the key, a second key it needs (None: the first is a list), the second's
# values that tell it (None: any), the format.
_CLAUDE_CODE = "a Claude Code session transcript (lines of `type` and `message`)"
_FOREIGN_SHAPES: tuple[tuple[str, str | None, frozenset[str] | None, str], ...] = (
    ("conversations", None, None, "a ShareGPT record (`conversations` of `from`/`value` turns)"),
    ("from", "value", None, "a ShareGPT turn (`from`/`value`)"),
    ("contents", None, None, "a Gemini request (`contents` of `role`/`parts` turns)"),
    ("parts", None, None, "a Gemini turn (`role`/`parts`)"),
    ("message", "type", frozenset({"user", "assistant", "system"}), _CLAUDE_CODE),
    ("message", "sessionId", None, _CLAUDE_CODE),
    ("leafUuid", "type", frozenset({"summary"}), _CLAUDE_CODE),
    ("loglines", None, None, "a Claude Code web transcript (`loglines` of session lines)"),
    (
        "data",
        "type",
        frozenset({"human", "ai", "tool", "system", "chat", "function", "generic"}),
        "a LangChain message dump (`type` and `data`)",
    ),
    ("kwargs", "lc", None, "a LangChain serialized message (`lc`, `kwargs`)"),
)


# The top-level keys only a Bedrock Converse request has (its ``messages`` hold content
# blocks without a ``type``: ``{"text": …}``, ``{"toolUse": …}``): a request of a format
# promptls does not read, said at the first of them.
CONVERSE_KEYS = frozenset(
    {
        "inferenceConfig",
        "toolConfig",
        "additionalModelRequestFields",
        "additionalModelResponseFieldPaths",
        "guardrailConfig",
        "promptVariables",
        "performanceConfig",
    }
)
_CONVERSE = "a Bedrock Converse request (`messages` of untyped `text`/`toolUse` blocks)"


def _known_role(node: SNode) -> bool:
    return node.kind == "string" and (node.value in _ROLES or node.value in ROLE_ALIASES)


def foreign_shape(node: SNode) -> tuple[str, Span] | None:
    """The format ``node`` (an object without ``messages`` or ``role``) is written in, when
    it is one promptls knows and does not read, with the place of the key that tells it."""
    for key, second, values, what in _FOREIGN_SHAPES:
        value = node.get(key)
        if value is None or (second is None and not value.is_array):
            continue
        told = node.get(second) if second is not None else None
        if second is not None and (
            told is None or (values is not None and not (told.is_string and told.value in values))
        ):
            continue
        member = next(m for m in node.members if m.key == key)
        return what, member.key_range
    return None


def not_read(what: str) -> str:
    """What a finding says of a document in ``what``, a format promptls does not read."""
    return (
        f"this looks like {what}, which promptls does not read; write OpenAI chat messages "
        "(`messages` of `role`/`content`)"
    )


def head(node: SNode) -> Span:
    """A short range at the start of a node (its opening bracket), for whole-object errors."""
    return sub_range(node.range, node.range.start, min(node.range.end, node.range.start + 1))


def clip(s: str, n: int = 60) -> str:
    """``s``, cut to ``n`` characters with an ellipsis (a value quoted in a message)."""
    return s if len(s) <= n else s[: n - 1] + "…"


def show(node: SNode) -> str:
    value = node.to_python()
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else f"`{value}`"
    return text if len(text) <= 40 else text[:39] + "…"
