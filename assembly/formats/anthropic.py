"""Reading Anthropic Messages request bodies and logs into the ``Conversation`` model.

An Anthropic document is an object with ``messages`` (and ``system``, ``tools``,
``model``, ``max_tokens``… as the API takes them) or a bare array of its messages. The
reading, block by block:

- ``system`` (a string or text blocks) is the system prompt (as an inline
  ``system_prompt``: its id in the layout is ``$system``);
- a ``text`` block is text, ``image`` (base64, url or file source) an image part,
  ``document`` an uploaded file of its message (its text when the source is text);
- ``tool_use`` becomes a tool call of its assistant message (``input`` are the arguments);
- ``tool_result`` becomes a tool message answering ``tool_use_id`` (string or block
  content; ``is_error`` accepted), placed before the rest of its user message, as the API
  reads it;
- ``thinking`` / ``redacted_thinking`` and the server-tool blocks (``server_tool_use``,
  ``web_search_tool_result``, ``mcp_tool_use``…) are accepted and not counted: the API
  drops earlier turns' thinking, and server tools run on Anthropic's side.

A message that yields one model message keeps the document index as its id (or its
``id``); when a user message also carries tool results, each ``tool_result`` becomes
``<index>/<block>``. ``model`` sets the ``model`` setting and the provider becomes
``anthropic``, unless the document's ``settings`` say otherwise; the other documented
request fields are accepted silently.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from assembly.documents import Reader, head, show
from assembly.formats.detect import ANTHROPIC_BLOCKS, SourceFormat
from assembly.model import (
    Conversation,
    DocFormat,
    FileAttachment,
    Image,
    Message,
    Role,
    TextBlock,
    ToolCall,
    ToolDef,
)
from assembly.syntax import Member, ParsedData, SNode, absolute
from assembly.text import TextRange

# The request fields of the Messages API (and of Bedrock / Vertex bodies), read or
# accepted silently.
REQUEST_KEYS = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "system",
        "metadata",
        "stop_sequences",
        "stream",
        "temperature",
        "top_k",
        "top_p",
        "thinking",
        "tool_choice",
        "tools",
        "service_tier",
        "container",
        "mcp_servers",
        "context_management",
        "output_config",
        "output_format",
        "inference_geo",
        "cache_control",
        "anthropic_version",
        "anthropic_beta",
        "betas",
    }
)
_MESSAGE_KEYS = frozenset({"role", "content", "id", "promptls-ignore", "token_count"})
# Blocks accepted and not counted (see the module docstring).
_SKIPPED_BLOCKS = ANTHROPIC_BLOCKS - {"tool_use", "tool_result", "document"}
_SKIPPED_BLOCKS |= {"tool_addition", "advisor_tool_result", "tool_search_tool_result"}
FORMAT_NAME = SourceFormat.ANTHROPIC.title


def read_anthropic(parsed: ParsedData, fmt: DocFormat, length: int, why: str) -> Conversation:
    """Read a parsed Anthropic Messages document; never raises on user input."""
    return _AnthropicReader(fmt, length).read_doc(parsed, why)


CLAUDE_CODE_WHY = (
    "a Claude Code session transcript: the messages of its current branch read as an "
    "Anthropic request"
)


def read_claude_code(parsed: ParsedData, fmt: DocFormat, length: int) -> Conversation:
    """Read a Claude Code transcript (``documents.is_claude_code_transcript``) as the
    Anthropic request its session sends next (``claude_code_request``)."""
    if parsed.root is None:
        return read_anthropic(parsed, fmt, length, CLAUDE_CODE_WHY)
    doc = claude_code_request(absolute(parsed.root))
    return read_anthropic(
        ParsedData(doc, parsed.errors, parsed.lines), fmt, length, CLAUDE_CODE_WHY
    )


def claude_code_request(root: SNode) -> SNode:
    """The Anthropic request a Claude Code session sends next, made of the transcript's own
    nodes (``root``: its lines, ranges absolute).

    The messages are those of the current branch: from the last message line outside a
    subagent's sidechain (``isSidechain``), back through ``parentUuid`` (across the lines
    that are no messages: hook progress, attachments; a compaction's boundary has none, so
    the branch starts at the summary after it), in file order when the lines have no
    ``parentUuid``. A transcript of sidechain lines alone (a subagent's own file) is read
    the same way. Since Claude Code 2.1 each parallel call's result hangs off its own call's
    line, so the branch passes through the last result only: a line of results alone whose
    parent is on the branch, answering calls the branch has not answered, is on it too.
    Lines that are shown, not sent (``isVisibleInTranscriptOnly``) and the errors Claude
    Code writes in the assistant's place (``isApiErrorMessage``) are left out. The messages
    are taken in file order; consecutive lines of one role are one message, their content
    blocks in order, as the API takes them: Claude Code writes each block of a streamed
    reply on a line of its own (the same ``message.id``), and each call's result on its
    own. A message's id is its first line's ``uuid``; the last assistant message's
    ``model`` is the ``model``. Claude Code's system prompt, its tool definitions and the
    attachments it adds at send time are not in the transcript.
    """
    lines = [n for n in root.items if n.is_object] if root.is_array else []
    said = [n for n in lines if _said(n)]
    main = [n for n in said if not _is_true(n.get("isSidechain"))] or said
    chain = main
    if main and any(n.get("parentUuid") is not None for n in lines):
        by_uuid = {u.value: n for n in lines if (u := n.get("uuid")) is not None and u.is_string}
        on: dict[int, SNode] = {}  # id -> line, every line of the branch (messages or not)
        node: SNode | None = main[-1]
        while node is not None and id(node) not in on:
            on[id(node)] = node
            parent = node.get("parentUuid")
            node = by_uuid.get(parent.value) if parent is not None and parent.is_string else None
        sent = {id(n) for n in said}
        chain = [n for n in on.values() if id(n) in sent]
        answered = {i for n in chain for i in _results(n)}
        for n in main:
            parent = n.get("parentUuid")
            above = by_uuid.get(parent.value) if parent is not None and parent.is_string else None
            calls = _results(n) if above is not None and id(above) in on else set()
            if calls and id(n) not in on and not calls & answered:
                chain.append(n)
                answered |= calls
        chain.sort(key=lambda n: n.range.start)
    messages: list[SNode] = []
    model: SNode | None = None
    group: list[tuple[SNode, SNode]] = []  # (line, its message) of one role
    for line in chain:
        message = line.get("message")
        assert message is not None  # (``_said``)
        role = message.get("role")
        assert role is not None
        if group and role.value != group[0][1].get("role").value:  # type: ignore[union-attr]
            messages.append(_one_message(group))
            group = []
        group.append((line, message))
        if role.value == "assistant" and (m := message.get("model")) is not None and m.is_string:
            model = m
    if group:
        messages.append(_one_message(group))
    members = [Member("messages", root.range, SNode("array", root.range, None, tuple(messages)))]
    if model is not None:
        members.append(Member("model", model.range, model))
    return SNode("object", root.range, None, (), tuple(members))


def _said(line: SNode) -> bool:
    """A line of a message sent to the model: ``user`` or ``assistant``, with a ``message``
    whose ``role`` is a string, neither shown only nor an error Claude Code wrote."""
    kind, message = line.get("type"), line.get("message")
    if kind is None or kind.value not in ("user", "assistant") or message is None:
        return False
    if not message.is_object or (role := message.get("role")) is None or not role.is_string:
        return False
    return not (
        _is_true(line.get("isVisibleInTranscriptOnly")) or _is_true(line.get("isApiErrorMessage"))
    )


def _results(line: SNode) -> set[str]:
    """The calls a user line answers when it holds tool results and nothing else."""
    message = line.get("message")
    content = message.get("content") if message is not None else None
    if content is None or not content.is_array or not content.items:
        return set()
    ids = set()
    for block in content.items:
        kind = block.get("type") if block.is_object else None
        call = block.get("tool_use_id") if block.is_object else None
        if kind is None or kind.value != "tool_result" or call is None or not call.is_string:
            return set()
        ids.add(call.value)
    return ids


def _is_true(node: SNode | None) -> bool:
    return node is not None and node.value is True


def _one_message(group: list[tuple[SNode, SNode]]) -> SNode:
    """One message of the request, of consecutive lines of one role (each with its
    ``message``): its ``role``, its ``content`` (the blocks of all, a string content as a
    text block where there are several) and its first line's ``uuid`` as its ``id``."""
    first_line, first = group[0]
    role = first.get("role")
    assert role is not None
    contents = [c for _, m in group if (c := m.get("content")) is not None]
    content = contents[0] if len(contents) == 1 else None
    if len(contents) > 1:
        blocks: list[SNode] = []
        for c in contents:
            if c.is_string:  # (anything else not an array is the reader's to report)
                kind = Member("type", c.range, SNode("string", c.range, "text"))
                blocks.append(
                    SNode("object", c.range, None, (), (kind, Member("text", c.range, c)))
                )
            else:
                blocks.extend(c.items if c.is_array else (c,))
        span = TextRange(contents[0].range.start, contents[-1].range.end)
        content = SNode("array", span, None, tuple(blocks))
    members = [Member("role", role.range, role)]
    if content is not None:
        members.append(Member("content", content.range, content))
    uuid = first_line.get("uuid")
    if uuid is not None and uuid.is_string and uuid.value:
        members.append(Member("id", uuid.range, uuid))
    span = TextRange(first.range.start, group[-1][1].range.end)
    return SNode("object", span, None, (), tuple(members))


class _AnthropicReader(Reader):
    def read_doc(self, parsed: ParsedData, why: str) -> Conversation:
        self.report_syntax(parsed)
        root = parsed.root
        fields: dict[str, Any] = {}
        messages: list[Message] = []
        nodes: list[SNode] = []
        if root is None:
            pass
        elif self.fmt is DocFormat.JSONL and root.is_array:
            for node in root.items:
                if node.is_object and node.get("role") is None:
                    self._request_fields(node, fields, messages)
                else:
                    nodes.append(node)
        elif root.is_array:
            nodes = list(root.items)
        elif root.is_object:
            self._request_fields(root, fields, messages)
            node = root.get("messages")
            if node is None:
                self.error("missing `messages`: the request has no message list", head(root))
            elif not node.is_array:
                self.error("`messages` must be an array of message objects", node.range)
            else:
                nodes = list(node.items)
        else:
            self.error("an Anthropic request must be an object with `messages`", root.range)
        seen: set[str] = {m.id for m in messages}
        for k, node in enumerate(nodes):
            for msg in self._anthropic_message(node, k, len(messages)):
                if msg.id in seen:
                    self.error(f"duplicate message id `{msg.id}`", msg.id_range or msg.range)
                    continue
                seen.add(msg.id)
                messages.append(msg)
        return Conversation(
            format=self.fmt,
            message_data=tuple(messages),
            issues=tuple(self.issues),
            tree=root,
            length=self.length,
            source_format=SourceFormat.ANTHROPIC.value,
            source_format_why=why,
            **fields,
        )

    # ------------------------------------------------------------------ request

    def _request_fields(self, node: SNode, fields: dict[str, Any], out: list[Message]) -> None:
        def system(value: SNode) -> None:
            fields["system_prompt"] = self._system(value)

        def tools(value: SNode) -> None:
            fields["tools"] = self._anthropic_tools(value)

        settings, ranges = self._other_request_fields(
            node,
            fields,
            list_key="messages",
            known=REQUEST_KEYS,
            format_name=FORMAT_NAME,
            read={"system": system, "tools": tools},
        )
        if "provider" not in settings:
            settings["provider"] = "anthropic"
            ranges["provider"] = head(node)
        fields["settings"] = settings
        fields["settings_ranges"] = ranges

    def _system(self, node: SNode) -> TextBlock | None:
        """``system``: the system prompt, read as an inline ``system_prompt``."""
        if node.kind == "null":
            return None
        if node.is_string:
            return TextBlock(node.value, node.range, node.range)
        if node.is_array:
            parts = []
            for block in node.items:
                t = self._text_of_block(block)
                if t is not None:
                    parts.append(t)
            # One block maps back to its string; several have no one string to map to.
            content_range = parts[0][1].range if len(parts) == 1 else None
            return TextBlock("\n".join(t for t, _ in parts), node.range, content_range)
        self.error("`system` must be a string or an array of text blocks", node.range)
        return None

    def _text_of_block(self, block: SNode) -> tuple[str, SNode] | None:
        """A text block's text and its string node."""
        if not block.is_object:
            self.error("a text block must be an object with `type` and `text`", block.range)
            return None
        text = block.get("text")
        btype = block.get("type")
        if btype is not None and not (btype.is_string and btype.value == "text"):
            self.error("this must be a `text` block", btype.range)
            return None
        if text is None or not text.is_string:
            self.error("a text block needs a string `text`", (text or block).range)
            return None
        return str(text.value), text

    def _anthropic_tools(self, node: SNode) -> tuple[ToolDef, ...]:
        if not node.is_array:
            self.error("`tools` must be an array of tool definitions", node.range)
            return ()
        res = []
        for item in node.items:
            if not item.is_object:
                self.error("a tool must be an object with `name` and `input_schema`", item.range)
                continue
            name = item.get("name")
            if name is None or not name.is_string or not name.value:
                self.error("a tool needs a string `name`", (name or item).range)
                continue
            res.append(ToolDef(name.value, item.to_python(), item.range, name.range))
        return tuple(res)

    # ------------------------------------------------------------------ messages

    def _anthropic_message(self, node: SNode, k: int, index: int) -> list[Message]:
        if not node.is_object:
            self.error("a message must be an object with `role` and `content`", node.range)
            return []
        for m in node.members:
            if m.key not in _MESSAGE_KEYS:
                self.unknown_key(f"unknown message key `{m.key}` in an {FORMAT_NAME}", m.key_range)
        role_node = node.get("role")
        if role_node is None:
            self.error("message has no `role`", head(node))
            return []
        if not (role_node.is_string and role_node.value in ("user", "assistant")):
            self.error(
                f"unknown role {show(role_node)}: an {FORMAT_NAME} has `user` and `assistant`"
                " messages (the system prompt is the top-level `system`)",
                role_node.range,
            )
            return []
        role = Role(role_node.value)
        id_node = node.get("id")
        msg_id = str(k)
        if id_node is not None:
            if id_node.is_string and id_node.value:
                msg_id = id_node.value
            elif id_node.kind == "number" and isinstance(id_node.value, int):
                msg_id = str(id_node.value)
            else:
                self.error("message `id` must be a non-empty string or an integer", id_node.range)
        ignore = self._ignore_list(node)
        c = node.get("content")
        texts: list[str] = []
        text_nodes: list[SNode] = []
        images: list[Image] = []
        files: list[FileAttachment] = []
        calls: list[ToolCall] = []
        results: list[Message] = []
        if c is None:
            self.error("a message needs `content`", head(node))
        elif c.is_string:
            texts.append(c.value)
            text_nodes.append(c)
        elif c.is_array:
            for b, block in enumerate(c.items):
                self._block(
                    block, b, role, msg_id, texts, text_nodes, images, files, calls, results, ignore
                )
        else:
            self.error("`content` must be a string or an array of content blocks", c.range)
        content_range = None
        if c is not None:
            content_range = text_nodes[0].range if len(text_nodes) == 1 else c.range
        main_needed = bool(texts or images or files or calls) or not results
        # Messages stay in source order with disjoint ranges (hover, rules and the
        # placements find a message by bisecting on starts): the tool results take the
        # head of the message's range and the rest its tail.
        start, end = node.range.start, node.range.end
        misplaced = results and any(
            r.range.start > b.range.start for r in results for b in text_nodes
        )
        main = None
        if main_needed:
            if not results:
                main_range = node.range
            elif misplaced:
                main_range = TextRange(start, results[0].range.start)
            else:
                main_range = TextRange(results[-1].range.end, end)
            main = Message(
                id=msg_id,
                role=role,
                content="\n".join(texts),
                range=main_range,
                content_range=content_range,
                id_range=id_node.range if id_node is not None else None,
                role_range=role_node.range,
                images=tuple(images),
                tool_calls=tuple(calls),
                files=tuple(files),
                token_count=self._token_count(node),
                ignore=ignore,
            )
        if results and not misplaced:
            first = results[0]
            results[0] = replace(first, range=TextRange(start, first.range.end))
            if main is None:
                results[-1] = replace(results[-1], range=TextRange(results[-1].range.start, end))
        if results and main is None and len(results) == 1 and id_node is None:
            # The message is one tool result: it keeps the message's own id.
            results[0] = replace(results[0], id=msg_id)
        out: list[Message] = []
        if misplaced and main is not None:
            out = [main, *results]
        else:
            out = [*results, *([main] if main is not None else [])]
        return out

    def _block(
        self,
        block: SNode,
        b: int,
        role: Role,
        msg_id: str,
        texts: list[str],
        text_nodes: list[SNode],
        images: list[Image],
        files: list[FileAttachment],
        calls: list[ToolCall],
        results: list[Message],
        ignore: tuple[str, ...],
    ) -> None:
        if block.is_string:
            texts.append(block.value)
            text_nodes.append(block)
            return
        if not block.is_object:
            self.error("a content block must be an object with a `type`", block.range)
            return
        btype = block.get("type")
        kind = btype.value if btype is not None and btype.is_string else None
        if kind == "text":
            text = block.get("text")
            if text is not None and text.is_string:
                texts.append(text.value)
                text_nodes.append(text)
            else:
                self.error("a text block needs a string `text`", block.range)
        elif kind == "image":
            ref = self._source_ref(block, "image")
            if ref is not None:
                images.append(Image(ref, block.range, self._token_count(block)))
        elif kind == "document":
            if role is not Role.USER:
                self.error("only user messages carry `document` blocks", block.range)
                return
            f = self._document(block, msg_id, b)
            if f is not None:
                files.append(f)
        elif kind == "tool_use":
            if role is not Role.ASSISTANT:
                self.error("only assistant messages make `tool_use` blocks", block.range)
                return
            call = self._tool_use(block)
            if call is not None:
                calls.append(call)
        elif kind == "tool_result":
            if role is not Role.USER:
                self.error("only user messages carry `tool_result` blocks", block.range)
                return
            r = self._tool_result(block, f"{msg_id}/{b}", ignore)
            if r is not None:
                results.append(r)
        elif kind in _SKIPPED_BLOCKS:
            return
        else:
            shown = show(btype) if btype is not None else "(none)"
            self.error(f"unsupported content block type {shown} in an {FORMAT_NAME}", block.range)

    def _source_ref(self, block: SNode, what: str) -> str | None:
        src = block.get("source")
        if src is None or not src.is_object:
            self.error(f"an `{what}` block needs a `source` object", (src or block).range)
            return None
        stype = src.get("type")
        kind = stype.value if stype is not None and stype.is_string else None
        if kind == "base64":
            media = src.get("media_type")
            data = src.get("data")
            if data is None or not data.is_string:
                self.error("a base64 source needs a string `data`", (data or src).range)
                return None
            mt = (
                media.value if media is not None and media.is_string else "application/octet-stream"
            )
            return f"data:{mt};base64,{data.value}"
        if kind == "url":
            url = src.get("url")
            if url is None or not url.is_string:
                self.error("a url source needs a string `url`", (url or src).range)
                return None
            return str(url.value)
        if kind == "file":
            fid = src.get("file_id")
            if fid is None or not fid.is_string:
                self.error("a file source needs a string `file_id`", (fid or src).range)
                return None
            return str(fid.value)
        if kind in ("text", "content") and what == "document":
            return None
        self.error(
            f"unsupported `{what}` source type {show(stype) if stype else '(none)'}",
            (stype or src).range,
        )
        return None

    def _document(self, block: SNode, msg_id: str, b: int) -> FileAttachment | None:
        src = block.get("source")
        title = block.get("title")
        filename = title.value if title is not None and title.is_string else "document"
        content: str | None = None
        file_id = f"{msg_id}/document/{b}"
        if src is not None and src.is_object:
            stype = src.get("type")
            kind = stype.value if stype is not None and stype.is_string else None
            if kind == "text":
                data = src.get("data")
                if data is not None and data.is_string:
                    content = data.value
                else:
                    self.error("a text source needs a string `data`", (data or src).range)
            elif kind == "content":
                inner = src.get("content")
                if inner is not None and inner.is_string:
                    content = inner.value
                elif inner is not None and inner.is_array:
                    found = (self._text_of_block(i) for i in inner.items)
                    content = "\n".join(t for t, _ in (f for f in found if f is not None))
                else:
                    self.error("a content source needs `content`", src.range)
            else:
                ref = self._source_ref(block, "document")
                if ref is None:
                    return None
                if kind in ("url", "file"):
                    file_id = ref
        else:
            self.error("a `document` block needs a `source` object", (src or block).range)
            return None
        return FileAttachment(
            file_id=file_id,
            filename=filename,
            content=content,
            range=block.range,
            token_count=self._token_count(block),
        )

    def _tool_use(self, block: SNode) -> ToolCall | None:
        id_node = block.get("id")
        name = block.get("name")
        if id_node is None or not id_node.is_string or not id_node.value:
            self.error("a `tool_use` block needs a string `id`", (id_node or block).range)
            return None
        if name is None or not name.is_string:
            self.error("a `tool_use` block needs a string `name`", (name or block).range)
            return None
        inp = block.get("input")
        args: dict[str, Any] | None
        if inp is None or inp.kind == "null":
            # The API requires an object (``{}`` for no arguments): an error at the block
            # (or at the null), and the call is read with no arguments so its result pairs.
            where = block.range if inp is None else inp.range
            self.error("a `tool_use` block needs an object `input` (`{}` for none)", where)
            args, args_text, args_range = {}, "{}", block.range
        elif inp.is_object:
            args = inp.to_python()
            args_text, args_range = json.dumps(args), inp.range
        else:
            self.error("`input` of a `tool_use` block must be an object", inp.range)
            return None
        return ToolCall(
            id=id_node.value,
            name=name.value,
            arguments=args,
            arguments_text=args_text,
            range=block.range,
            id_range=id_node.range,
            name_range=name.range,
            arguments_range=args_range,
            token_count=self._token_count(block),
        )

    def _tool_result(self, block: SNode, msg_id: str, ignore: tuple[str, ...]) -> Message | None:
        tid = block.get("tool_use_id")
        if tid is None or not tid.is_string:
            self.error("a `tool_result` block needs a string `tool_use_id`", (tid or block).range)
            return None
        err = block.get("is_error")
        if err is not None and err.kind not in ("bool", "null"):
            self.error("`is_error` must be true or false", err.range)
        c = block.get("content")
        texts: list[str] = []
        images: list[Image] = []
        content_range = c.range if c is not None else None
        if c is None or c.kind == "null":
            pass
        elif c.is_string:
            texts.append(c.value)
        elif c.is_array:
            text_nodes = []
            for part in c.items:
                ptype = part.get("type") if part.is_object else None
                kind = ptype.value if ptype is not None and ptype.is_string else None
                if kind == "text":
                    t = part.get("text")
                    if t is not None and t.is_string:
                        texts.append(t.value)
                        text_nodes.append(t)
                    else:
                        self.error("a text block needs a string `text`", part.range)
                elif kind == "image":
                    ref = self._source_ref(part, "image")
                    if ref is not None:
                        images.append(Image(ref, part.range))
                elif kind in ("document", "search_result", "tool_reference"):
                    continue  # documented result blocks, not counted
                else:
                    self.error(
                        "a `tool_result` content block must be `text` or `image`", part.range
                    )
            if len(text_nodes) == 1:
                content_range = text_nodes[0].range
        else:
            self.error("`content` of a `tool_result` must be a string or blocks", c.range)
        return Message(
            id=msg_id,
            role=Role.TOOL,
            content="\n".join(texts),
            range=block.range,
            content_range=content_range,
            role_range=block.get("type").range if block.get("type") is not None else None,  # type: ignore[union-attr]
            images=tuple(images),
            tool_call_id=tid.value,
            tool_call_id_range=tid.range,
            token_count=self._token_count(block),
            ignore=ignore,
        )
