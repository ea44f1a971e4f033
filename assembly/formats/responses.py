"""Reading OpenAI Responses API input into the ``Conversation`` model.

A Responses document is a request body (``input``, ``instructions``, ``tools``,
``model``…) or a bare array of input items. The reading:

- ``instructions`` is the system prompt (as an inline ``system_prompt``: ``$system`` in
  the layout); a string ``input`` is one user message with id ``input``;
- a ``message`` item (or an item with a ``role`` and no ``type``) is a message of its
  role (``developer`` and ``system`` are system messages); its parts ``input_text`` /
  ``output_text`` are text, ``input_image`` an image, ``input_file`` an uploaded file;
- ``function_call`` items (``call_id``, ``name``, ``arguments``) become tool calls of
  one assistant message: consecutive calls, and the assistant message right before them,
  form one turn whose id is the index of its first item;
- ``function_call_output`` (``call_id``, ``output``) becomes a tool message;
  ``custom_tool_call`` / ``custom_tool_call_output`` likewise;
- the calls of the tools the client runs itself (``local_shell_call``, ``shell_call``,
  ``computer_call``, ``apply_patch_call``) are tool calls too, named by their tool's type
  (``local_shell``, ``shell``, ``computer_use_preview``, ``apply_patch``), their
  ``action`` (or ``operation``) as the arguments; their ``…_output`` items are the tool
  messages answering them (``local_shell_call_output`` names its call by ``id`` in the
  API reference, by ``call_id`` in some clients; a ``shell_call_output``'s ``stdout`` and
  ``stderr``, a ``computer_call_output``'s screenshot is an image; an object ``output`` of a
  ``local_shell_call_output``, the API's JSON string left unserialised, is read as its JSON
  text): the client sends those outputs, and the model reads them;
- ``reasoning`` items, ``item_reference`` and the hosted tools' items (web search, code
  interpreter, MCP…) are accepted and not counted.

Ids are the items' indexes in ``input`` (a Responses item's own ``id``, such as
``msg_…``, is the provider's and is not used). ``model`` sets the ``model`` setting unless
the document's ``settings`` say otherwise; the other documented request fields are
accepted silently.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from assembly.documents import Reader, clip, head, not_read, show
from assembly.formats.detect import RESPONSES_ITEMS, SourceFormat
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

REQUEST_KEYS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "temperature",
        "top_p",
        "top_logprobs",
        "max_output_tokens",
        "max_tool_calls",
        "previous_response_id",
        "conversation",
        "reasoning",
        "store",
        "stream",
        "stream_options",
        "text",
        "truncation",
        "metadata",
        "include",
        "parallel_tool_calls",
        "background",
        "prompt",
        "prompt_cache_key",
        "prompt_cache_retention",
        "safety_identifier",
        "service_tier",
        "user",
        "context_management",
    }
)
# (``phase``: Codex's assistant messages say whether they are commentary or the final
# answer.)
_ITEM_KEYS = frozenset({"type", "id", "role", "content", "status", "phase", "promptls-ignore"})
_CALL_KEYS = frozenset({"type", "id", "call_id", "name", "arguments", "input", "status"})
# The calls of tools the client runs (their outputs are sent back): the tool's name (its
# type in ``tools``) and the key holding what to do.
_CLIENT_CALLS = {
    "local_shell_call": ("local_shell", "action"),
    "shell_call": ("shell", "action"),
    "computer_call": ("computer_use_preview", "action"),
    "apply_patch_call": ("apply_patch", "operation"),
}
_CLIENT_CALL_KEYS = frozenset(
    {"type", "id", "call_id", "action", "operation", "status", "pending_safety_checks"}
)
_CALLS = ("function_call", "custom_tool_call", *_CLIENT_CALLS)
_OUTPUTS = (
    "function_call_output",
    "custom_tool_call_output",
    *(f"{kind}_output" for kind in _CLIENT_CALLS),
)
_OUTPUT_KEYS = frozenset(
    {"type", "id", "call_id", "output", "status", "acknowledged_safety_checks", "max_output_length"}
)
_SKIPPED = RESPONSES_ITEMS - {"message", *_CALLS, *_OUTPUTS}
FORMAT_NAME = SourceFormat.RESPONSES.title


def _type_of(node: SNode) -> str | None:
    t = node.get("type")
    return t.value if t is not None and t.is_string else None


def read_responses(parsed: ParsedData, fmt: DocFormat, length: int, why: str) -> Conversation:
    """Read a parsed Responses document; never raises on user input."""
    return _ResponsesReader(fmt, length).read_doc(parsed, why)


CODEX_WHY = "a Codex CLI rollout: its `response_item` lines read as Responses input"
# Codex's own items, never sent to the model (a snapshot for undo, what it could not parse).
_CODEX_ONLY = frozenset({"ghost_snapshot", "other"})


def read_codex_rollout(parsed: ParsedData, fmt: DocFormat, length: int) -> Conversation:
    """Read a Codex CLI rollout (``documents.is_codex_rollout``) as the Responses request its
    session makes (``codex_request``)."""
    if parsed.root is None:
        return read_responses(parsed, fmt, length, CODEX_WHY)
    doc = codex_request(absolute(parsed.root))
    return read_responses(ParsedData(doc, parsed.errors, parsed.lines), fmt, length, CODEX_WHY)


def codex_request(root: SNode) -> SNode:
    """The Responses request a Codex CLI rollout's session makes, made of the rollout's own
    nodes (``root``: its lines, ranges absolute): the ``payload`` of each ``response_item``
    line, in order, is an input item (what the agent sent and received); the session's
    instructions (``session_meta``'s ``instructions``, or its ``base_instructions.text``)
    are ``instructions``; the last ``turn_context``'s ``model`` is ``model``. A ``compacted``
    line replaces the items before it, as Codex rebuilds its history: by its
    ``replacement_history`` when it has one; else by the user messages so far (Codex's
    context and the user's words; earlier summaries left out) and its ``message``, the
    summary, as a user message after Codex's own words for it (``SUMMARY_PREFIX``; the cap
    Codex puts on the user messages kept is not applied). ``event_msg`` lines, which tell
    the terminal the same turns again, are not read."""
    items: list[SNode] = []
    members: dict[str, Member] = {}
    for line in root.items if root.is_array else ():
        kind, payload = line.get("type"), line.get("payload") if line.is_object else None
        if kind is None or not kind.is_string or payload is None or not payload.is_object:
            continue
        if kind.value == "response_item":
            if _type_of(payload) not in _CODEX_ONLY:
                items.append(payload)
        elif kind.value == "compacted":
            items = _compacted(payload, items)
        elif kind.value == "session_meta":
            text = payload.get("instructions")
            base = payload.get("base_instructions")
            if (text is None or not text.is_string) and base is not None and base.is_object:
                text = base.get("text")
            if text is not None and text.is_string:
                members["instructions"] = Member("instructions", text.range, text)
        elif kind.value == "turn_context":
            model = payload.get("model")
            if model is not None and model.is_string and model.value:
                members["model"] = Member("model", model.range, model)
    whole = SNode("array", root.range, None, tuple(items))
    return SNode(
        "object", root.range, None, (), (Member("input", root.range, whole), *members.values())
    )


# Codex's words before a compaction's summary (``codex-rs/core/templates/compact/
# summary_prefix.md``), and the line it then starts.
_SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its "
    "thinking process. You also have access to the state of the tools that were used by that "
    "language model. Use this to build on the work that has already been done and avoid "
    "duplicating work. Here is the summary produced by the other language model, use the "
    "information in this summary to  assist with your own analysis:"
)


def _compacted(payload: SNode, items: list[SNode]) -> list[SNode]:
    """The items after a ``compacted`` line (see ``codex_request``)."""
    replacement = payload.get("replacement_history")
    if replacement is not None and replacement.is_array:
        return [i for i in replacement.items if i.is_object and _type_of(i) not in _CODEX_ONLY]
    summary = payload.get("message")
    if summary is None or not summary.is_string:
        return items
    kept = [i for i in items if _user_words(i) is not None and not _is_summary(i)]
    text = SNode("string", summary.range, f"{_SUMMARY_PREFIX}\n{summary.value}")
    part = SNode(
        "object",
        summary.range,
        None,
        (),
        (
            Member("type", summary.range, SNode("string", summary.range, "input_text")),
            Member("text", summary.range, text),
        ),
    )
    said = SNode(
        "object",
        payload.range,
        None,
        (),
        (
            Member("type", payload.range, SNode("string", payload.range, "message")),
            Member("role", payload.range, SNode("string", payload.range, "user")),
            Member("content", summary.range, SNode("array", summary.range, None, (part,))),
        ),
    )
    return [*kept, said]


def _user_words(item: SNode) -> str | None:
    """The text of a user ``message`` item (None: another item)."""
    role = item.get("role")
    if _type_of(item) not in (None, "message") or role is None or role.value != "user":
        return None
    content = item.get("content")
    if content is not None and content.is_string:
        return str(content.value)
    parts = content.items if content is not None and content.is_array else ()
    return "".join(str(t.value) for p in parts if (t := p.get("text")) is not None and t.is_string)


def _is_summary(item: SNode) -> bool:
    words = _user_words(item)
    return words is not None and words.startswith(_SUMMARY_PREFIX + "\n")


# A Gemini Interactions request has an ``input`` too (a string, typed parts or turns), told
# apart by keys no Responses request has: said there, rather than each of its parts being
# an unsupported Responses item.
_INTERACTIONS_KEYS = frozenset(
    {"generation_config", "system_instruction", "previous_interaction_id"}
)
_INTERACTIONS = "a Gemini Interactions request (`input` with `generation_config`)"


def _interactions_key(root: SNode) -> Member | None:
    return next((m for m in root.members if m.key in _INTERACTIONS_KEYS), None)


# Keys that make OpenAI send stored items before the request's ``input``.
_STORED = ("previous_response_id", "conversation")


class _ResponsesReader(Reader):
    def read_doc(self, parsed: ParsedData, why: str) -> Conversation:
        self.report_syntax(parsed)
        root = parsed.root
        fields: dict[str, Any] = {}
        messages: list[Message] = []
        items: list[SNode] = []
        if root is None:
            pass
        elif root.is_array:
            items = list(root.items)
        elif root.is_object and (told := _interactions_key(root)) is not None:
            self.error(f"`{told.key}`: {not_read(_INTERACTIONS)}", told.key_range)
        elif root.is_object:
            self._request_fields(root, fields, messages)
            node = root.get("input")
            if node is None:
                self.error("missing `input`: the request has no input", head(root))
            elif node.is_string:
                messages.append(Message("input", Role.USER, node.value, node.range, node.range))
            elif not node.is_array:
                self.error("`input` must be a string or an array of input items", node.range)
            else:
                items = list(node.items)
        else:
            self.error("a Responses request must be an object with `input`", root.range)
        self._items(items, messages)
        seen: set[str] = set()
        unique = []
        for m in messages:
            if m.id in seen:
                self.error(f"duplicate message id `{m.id}`", m.id_range or m.range)
                continue
            seen.add(m.id)
            unique.append(m)
        return Conversation(
            format=self.fmt,
            message_data=tuple(unique),
            issues=tuple(self.issues),
            tree=root,
            length=self.length,
            source_format=SourceFormat.RESPONSES.value,
            source_format_why=why,
            **fields,
        )

    def _request_fields(self, node: SNode, fields: dict[str, Any], out: list[Message]) -> None:
        def instructions(value: SNode) -> None:
            if value.is_string:
                fields["system_prompt"] = TextBlock(value.value, value.range, value.range)
            elif value.kind != "null":
                self.error("`instructions` must be a string", value.range)

        def tools(value: SNode) -> None:
            fields["tools"] = self._response_tools(value)

        for m in node.members:
            if m.key in _STORED and m.value.kind != "null":
                what = "response" if m.key == "previous_response_id" else "conversation"
                named = m.value.get("id") if m.value.is_object else m.value  # (``{"id": …}``)
                self.info(
                    "stored-items-not-in-document",
                    f"this request continues the stored {what}"
                    + (f" `{clip(named.value)}`" if named is not None and named.is_string else "")
                    + ": OpenAI sends its items (earlier turns, the calls that "
                    "`function_call_output` items answer) before this `input`, and this "
                    "document does not hold them; promptls reads, counts and assembles the "
                    "`input` alone",
                    m.key_range,
                )
        settings, ranges = self._other_request_fields(
            node,
            fields,
            list_key="input",
            known=REQUEST_KEYS,
            format_name=FORMAT_NAME,
            read={"instructions": instructions, "tools": tools},
        )
        if settings:
            fields["settings"] = settings
            fields["settings_ranges"] = ranges

    def _response_tools(self, node: SNode) -> tuple[ToolDef, ...]:
        if not node.is_array:
            self.error("`tools` must be an array of tool definitions", node.range)
            return ()
        res = []
        for item in node.items:
            if not item.is_object:
                self.error("a tool must be an object with a `type`", item.range)
                continue
            fn = item.get("function")
            holder = fn if fn is not None and fn.is_object else item
            name = holder.get("name")
            if name is not None and name.is_string and name.value:
                res.append(ToolDef(name.value, item.to_python(), item.range, name.range))
                continue
            ttype = item.get("type")
            if ttype is not None and ttype.is_string and ttype.value not in ("function", "custom"):
                # A hosted tool (web_search, file_search, code_interpreter…): named by type.
                res.append(ToolDef(ttype.value, item.to_python(), item.range, ttype.range))
                continue
            self.error("a function tool needs a string `name`", (name or item).range)
        return tuple(res)

    # ------------------------------------------------------------------ items

    def _items(self, items: list[SNode], out: list[Message]) -> None:
        pending: Message | None = None  # the assistant turn that calls may join
        for k, node in enumerate(items):
            if node.is_string:
                out.append(Message(str(k), Role.USER, node.value, node.range, node.range))
                pending = None
                continue
            if not node.is_object:
                self.error("an input item must be an object", node.range)
                pending = None
                continue
            t = node.get("type")
            kind = t.value if t is not None and t.is_string else None
            if kind is None and t is not None:
                self.error("an item `type` must be a string", t.range)
                continue
            if kind in _CALLS:
                call = self._call(node, kind)
                if call is None:
                    continue
                if pending is not None and out and out[-1] is pending:
                    joined = replace(
                        pending,
                        tool_calls=(*pending.tool_calls, call),
                        range=TextRange(pending.range.start, node.range.end),
                    )
                    out[-1] = joined
                    pending = joined
                else:
                    pending = Message(
                        self._item_id(node, k),
                        Role.ASSISTANT,
                        "",
                        node.range,
                        tool_calls=(call,),
                        id_range=None,
                    )
                    out.append(pending)
                continue
            if kind in _OUTPUTS:
                msg = self._output(node, k, len(out))
                if msg is not None:
                    out.append(msg)
                pending = None
                continue
            if kind in _SKIPPED:
                continue  # reasoning, item references, hosted tools: not counted
            if kind not in (None, "message"):
                self.error(
                    f"unsupported input item type {show(t)} in an {FORMAT_NAME}",  # type: ignore[arg-type]
                    node.range,
                )
                pending = None
                continue
            msg = self._message_item(node, k, len(out))
            if msg is not None:
                out.append(msg)
                pending = msg if msg.role is Role.ASSISTANT else None
            else:
                pending = None

    def _item_id(self, node: SNode, k: int) -> str:
        return str(k)

    def _message_item(self, node: SNode, k: int, index: int) -> Message | None:
        for m in node.members:
            if m.key not in _ITEM_KEYS:
                self.unknown_key(f"unknown message key `{m.key}` in an {FORMAT_NAME}", m.key_range)
        role_node = node.get("role")
        if role_node is None:
            self.error("a message item has no `role`", head(node))
            return None
        roles = {
            "user": Role.USER,
            "assistant": Role.ASSISTANT,
            "system": Role.SYSTEM,
            "developer": Role.SYSTEM,
        }
        role = roles.get(role_node.value) if role_node.is_string else None
        if role is None:
            self.error(
                f"unknown role {show(role_node)}: expected `user`, `assistant`, `system` or "
                "`developer`",
                role_node.range,
            )
            return None
        c = node.get("content")
        texts: list[str] = []
        text_nodes: list[SNode] = []
        images: list[Image] = []
        files: list[FileAttachment] = []
        if c is None:
            self.error("a message item needs `content`", head(node))
        elif c.is_string:
            texts.append(c.value)
            text_nodes.append(c)
        elif c.is_array:
            for p, part in enumerate(c.items):
                self._part(part, p, str(k), role, texts, text_nodes, images, files)
        else:
            self.error("`content` must be a string or an array of content parts", c.range)
        content_range = text_nodes[0].range if len(text_nodes) == 1 else (c.range if c else None)
        return Message(
            id=str(k),
            role=role,
            content="\n".join(texts),
            range=node.range,
            content_range=content_range,
            role_range=role_node.range,
            images=tuple(images),
            files=tuple(files) if role is Role.USER else (),
            ignore=self._ignore_list(node),
        )

    def _part(
        self,
        part: SNode,
        p: int,
        msg_id: str,
        role: Role,
        texts: list[str],
        text_nodes: list[SNode],
        images: list[Image],
        files: list[FileAttachment],
    ) -> None:
        if not part.is_object:
            self.error("a content part must be an object with a `type`", part.range)
            return
        t = part.get("type")
        kind = t.value if t is not None and t.is_string else None
        if kind in ("input_text", "output_text", "text", "summary_text"):
            text = part.get("text")
            if text is not None and text.is_string:
                texts.append(text.value)
                text_nodes.append(text)
            else:
                self.error(f"a `{kind}` part needs a string `text`", part.range)
        elif kind == "refusal":
            r = part.get("refusal")
            if r is not None and r.is_string:
                texts.append(r.value)
                text_nodes.append(r)
        elif kind == "input_image":
            url = part.get("image_url")
            fid = part.get("file_id")
            ref = url.value if url is not None and url.is_string else None
            if ref is None and fid is not None and fid.is_string:
                ref = fid.value
            if ref is None:
                self.error("an `input_image` part needs `image_url` or `file_id`", part.range)
            else:
                images.append(Image(ref, part.range, self._token_count(part)))
        elif kind == "input_file":
            if role is not Role.USER:
                self.error("only user messages carry `input_file` parts", part.range)
                return
            name = part.get("filename")
            fid = part.get("file_id")
            url = part.get("file_url")
            file_id = (
                fid.value
                if fid is not None and fid.is_string
                else url.value
                if url is not None and url.is_string
                else f"{msg_id}/file/{p}"
            )
            files.append(
                FileAttachment(
                    file_id=file_id,
                    filename=name.value if name is not None and name.is_string else "file",
                    content=None,
                    range=part.range,
                )
            )
        elif kind == "input_audio":
            return
        else:
            self.error(
                f"unsupported content part type {show(t) if t else '(none)'} in an {FORMAT_NAME}",
                part.range,
            )

    def _call(self, node: SNode, kind: str) -> ToolCall | None:
        if kind in _CLIENT_CALLS:
            return self._client_call(node, kind)
        for m in node.members:
            if m.key not in _CALL_KEYS:
                self.unknown_key(f"unknown key `{m.key}` of a `{kind}` item", m.key_range)
        cid = node.get("call_id")
        name = node.get("name")
        if cid is None or not cid.is_string or not cid.value:
            self.error(f"a `{kind}` item needs a string `call_id`", (cid or node).range)
            return None
        if name is None or not name.is_string:
            self.error(f"a `{kind}` item needs a string `name`", (name or node).range)
            return None
        a = node.get("arguments" if kind == "function_call" else "input")
        args: dict[str, Any] | None
        if a is None or a.kind == "null":
            args, text, rng = {}, "{}", node.range
        elif a.is_string:
            text, rng = a.value, a.range
            try:
                loaded = json.loads(text) if text.strip() else {}
            except (ValueError, RecursionError):  # (nested too deep to read)
                loaded = None
            args = loaded if isinstance(loaded, dict) else None
            if args is None and kind == "function_call":
                self.warn("`arguments` is not a JSON object", a.range)
            elif args is None:
                args = {"input": text}
        else:
            self.error("`arguments` must be a JSON string", a.range)
            return None
        return ToolCall(
            id=cid.value,
            name=name.value,
            arguments=args,
            arguments_text=text,
            range=node.range,
            id_range=cid.range,
            name_range=name.range,
            arguments_range=rng,
        )

    def _client_call(self, node: SNode, kind: str) -> ToolCall | None:
        """A call of a tool the client runs: named by its tool's type, its action as the
        arguments."""
        for m in node.members:
            if m.key not in _CLIENT_CALL_KEYS:
                self.unknown_key(f"unknown key `{m.key}` of a `{kind}` item", m.key_range)
        cid = node.get("call_id")
        if kind == "local_shell_call" and (cid is None or cid.kind == "null"):
            cid = node.get("id")  # (Codex writes ``"call_id": null``; its output names ``id``)
        if cid is None or not cid.is_string or not cid.value:
            self.error(f"a `{kind}` item needs a string `call_id`", (cid or node).range)
            return None
        name, key = _CLIENT_CALLS[kind]
        t = node.get("type")  # the item's type names the tool
        what = node.get(key)
        args = what.to_python() if what is not None and what.is_object else {}
        return ToolCall(
            id=cid.value,
            name=name,
            arguments=args,
            arguments_text=json.dumps(args, ensure_ascii=False),
            range=node.range,
            id_range=cid.range,
            name_range=t.range if t is not None else node.range,
            arguments_range=what.range if what is not None else node.range,
        )

    def _output(self, node: SNode, k: int, index: int) -> Message | None:
        for m in node.members:
            if m.key not in _OUTPUT_KEYS:
                self.unknown_key(f"unknown key `{m.key}` of a tool output item", m.key_range)
        t = node.get("type")
        cid = node.get("call_id")
        if cid is None and t is not None and t.value == "local_shell_call_output":
            cid = node.get("id")  # the API reference names the call so
        if cid is None or not cid.is_string:
            self.error("a tool output item needs a string `call_id`", (cid or node).range)
            return None
        out = node.get("output")
        text = ""
        content_range = out.range if out is not None else None
        images: list[Image] = []
        if out is None or out.kind == "null":
            pass
        elif out.is_string:
            text = out.value
        elif out.is_array:
            texts: list[str] = []
            nodes: list[SNode] = []
            files: list[FileAttachment] = []
            for p, part in enumerate(out.items):
                streams = [part.get(key) for key in ("stdout", "stderr")] if part.is_object else []
                if any(x is not None for x in streams):  # a ``shell_call_output`` entry
                    for x in streams:
                        if x is not None and x.is_string and x.value:
                            texts.append(x.value)
                            nodes.append(x)
                    continue
                self._part(part, p, str(k), Role.USER, texts, nodes, images, files)
            text = "\n".join(texts)
            if len(nodes) == 1:
                content_range = nodes[0].range
        elif out.is_object and _type_of(out) == "computer_screenshot":
            url, fid = out.get("image_url"), out.get("file_id")
            ref = url if url is not None and url.is_string else fid
            if ref is not None and ref.is_string:
                images.append(Image(ref.value, out.range, self._token_count(out)))
            else:
                self.error("a `computer_screenshot` needs `image_url` or `file_id`", out.range)
        elif out.is_object and t is not None and t.value == "local_shell_call_output":
            # The API takes "a JSON string of the output" (Codex's is ``{"output": …,
            # "metadata": {"exit_code": …}}`` serialised); an object is that JSON left
            # unserialised: read as the JSON text a client would send, with a warning.
            text = json.dumps(out.to_python(), ensure_ascii=False)
            self.warn(
                "`output` of a `local_shell_call_output` is a string (its JSON text) in the "
                "API: this object is read as that text",
                out.range,
            )
        else:
            self.error("`output` must be a string or an array of content parts", out.range)
        return Message(
            id=str(k),
            role=Role.TOOL,
            content=text,
            range=node.range,
            content_range=content_range,
            role_range=t.range if t is not None else None,
            images=tuple(images),
            tool_call_id=cid.value,
            tool_call_id_range=cid.range,
        )
