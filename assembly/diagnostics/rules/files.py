"""Rules about file ids: what a `read_file` call or a `file_id="…"` reference names.

The model can name a file only by an id it was offered: a file injected earlier on the
branch that is still in the context (uploaded ``files``, a ``file_id`` message, an image),
or one listed for ``read_file`` (the forgotten-files listing, the project-file listing).
``read_file`` calls are checked at their place in the branch; ``file_id="…"`` patterns in
the custom agent prompt (after all history) and in user messages too.

One pass over the branch collects what is offered so far, so each reference costs O(1).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

from assembly.assemble import FILE_READER_TOOLS
from assembly.diagnostics.core import (
    Diagnostic,
    Fix,
    Related,
    RuleContext,
    Severity,
    TextEdit,
    message_memo,
)
from assembly.diagnostics.rules.tool_calls import (
    MessageNodes,
    branch_messages,
    decoded_range,
    decoded_spans,
)
from assembly.diagnostics.window import TextLike, offset_map
from assembly.model import Conversation, Message, Role, ToolCall
from assembly.syntax import SNode, parse_json
from assembly.text import TextRange

_FILE_ID_PATTERN = re.compile(r"""\bfile_id\s*=\s*(["'])([^"'\n]+)\1""")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_FILENAME = re.compile(r"^[^\s/\\]*[^\s/\\.]\.[A-Za-z][A-Za-z0-9]{0,9}$")


def file_id_not_in_read_file_list(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A `read_file` call or a `file_id` reference names a file the model was not offered.

    ## What it does
    Checks the `file_id` argument of every `read_file` call on the current branch, and
    every `file_id="…"` written in the custom agent prompt or a user message, against the
    files offered to the model at that point: files injected earlier on the branch that
    are still in the context (uploads, `file_id` messages, images) and the files listed for
    `read_file` (forgotten files, the project-file listing). A filename passed instead of
    an id is `filename-instead-of-file-id`. The related information points at the file,
    when it exists somewhere in the document.

    ## Why is this bad?
    `read_file` only opens files the conversation made available; any other id fails (or
    reads a file the user never shared), and the model answers without the content it
    asked for.

    ## Example
    ```yaml
    messages:
      - role: user
        content: Summarize the export.
        files: [{file_id: 5f0c…, filename: export.csv, type: tabular}]
      - role: assistant
        tool_calls: [{id: call_1, type: function,
                      function: {name: read_file, arguments: '{"file_id": "9b2e…"}'}}]
    ```
    `9b2e…` is no file of this conversation.
    """
    conv = ctx.conversation
    if conv is None:
        return
    files = _Files(ctx, conv)
    nodes = _LazyNodes(conv)
    memo = message_memo(ctx)
    for m, offered in files.walk():
        if m.role is Role.ASSISTANT:
            for call in m.tool_calls:
                value = _read_file_id(call)
                if value is None or value in offered or files.filename_ids(value) is not None:
                    continue
                ref = _locate_argument(ctx, m, call, value, nodes)
                yield _not_offered(files, value, ref.range, f"`{call.name}` asks for")
        elif m.role is Role.USER:
            refs = memo.get("file_refs", m, file_refs)
            missing = [ref for ref in refs if ref[0] not in offered]
            if not missing:
                continue
            spans = decoded_spans(ctx, m, nodes.get())
            for value, start, end in missing:
                if spans is not None:
                    rng = spans.range(start, end)
                else:
                    rng = m.content_range if m.content_range is not None else m.range
                yield _not_offered(files, value, rng, "the user message names")
    block = conv.custom_agent_prompt
    if block is not None and block.content_range is not None and "file_id" in block.content:
        offered = files.offered_at_end
        offsets = offset_map(ctx.text, block.content_range, block.content)
        for match in _FILE_ID_PATTERN.finditer(block.content):
            if match[2] not in offered:
                rng = offsets.range(match.start(2), match.end(2))
                yield _not_offered(files, match[2], rng, "the custom agent prompt names")


def filename_instead_of_file_id(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A `read_file` call passes a filename where the file_id is required.

    ## What it does
    Reports a `read_file` call whose `file_id` argument is the name of a file of the
    conversation, or looks like a filename (`name.ext`) rather than an id. When the name
    belongs to exactly one file, the fix puts that file's id in its place.

    ## Why is this bad?
    `read_file` looks files up by id; Onyx's listing says so ("You MUST pass the file_id
    UUID (not the filename)"). A call with a filename fails, and a conversation replaying it
    teaches the model the wrong habit.

    ## Example
    ```yaml
    - role: assistant
      tool_calls: [{id: call_1, type: function,
                    function: {name: read_file, arguments: '{"file_id": "export.csv"}'}}]
    ```
    """
    conv = ctx.conversation
    if conv is None:
        return
    files = _Files(ctx, conv)
    nodes = _LazyNodes(conv)
    for m in files.branch:
        for call in m.tool_calls:
            value = _read_file_id(call)
            ids = files.filename_ids(value) if value is not None else None
            if value is None or ids is None:
                continue
            ref = _locate_argument(ctx, m, call, value, nodes)
            related: tuple[Related, ...] = ()
            fix = None
            if not ids:
                message = f"`{call.name}` is passed `{ref.value}`, a filename rather than a file_id"
            elif len(ids) > 1:
                message = (
                    f"`{call.name}` is passed the filename `{ref.value}` instead of a file_id "
                    f"({len(ids)} files have this name)"
                )
            else:
                file_id = ids[0]
                message = (
                    f"`{call.name}` is passed the filename `{ref.value}` instead of its file_id "
                    f"`{file_id}`"
                )
                edit = ref.replace_with(file_id)
                if edit is not None:
                    fix = Fix(f"Pass the file_id `{file_id}`", (edit,))
            for file_id in ids[:1]:
                place = files.known.get(file_id)
                if place is not None and place.range is not None:
                    related = (Related(place.range, f"`{ref.value}` is injected here"),)
            yield Diagnostic(
                "filename-instead-of-file-id",
                Severity.ERROR,
                message,
                ref.range,
                related=related,
                fix=fix,
            )


def file_refs(m: Message) -> tuple[tuple[str, int, int], ...]:
    """The ``file_id="…"`` values a user message writes: (value, start, end in content)."""
    if m.role is not Role.USER or m.file_id is not None or "file_id" not in m.content:
        return ()
    return tuple((x[2], x.start(2), x.end(2)) for x in _FILE_ID_PATTERN.finditer(m.content))


# ------------------------------------------------------------------------- files known


@dataclass(frozen=True, slots=True)
class _Place:
    """Where a file id is given in the document (None: only in the pipeline's listing)."""

    file_id: str
    filename: str
    range: TextRange | None
    message_id: str | None  # the message that injects it; None for project files
    project: bool = False


class _Files:
    """Every file of the document, and what the model is offered along the branch."""

    def __init__(self, ctx: RuleContext, conv: Conversation) -> None:
        self.ctx = ctx
        self.conv = conv
        self.branch = branch_messages(ctx)
        self.branch_ids = {m.id for m in self.branch}
        self.known: dict[str, _Place] = {}
        self.by_name: dict[str, list[str]] = {}
        for m in conv.messages:
            for f in m.files:
                self._add(_Place(f.file_id, f.filename, f.range, m.id))
            if m.file_id is not None:
                self._add(_Place(m.file_id, m.filename or "", m.range, m.id))
            for image in m.images:
                self._add(_Place(image.ref, "", image.range, m.id))
        for f in conv.project_files:
            self._add(_Place(f.file_id, f.filename, f.range, None, project=True))
        self.listed: set[str] = set()
        self.dead: set[str] = set()  # injected, then dropped or summarized, and not listed
        assembly = ctx.assembly
        self.liveness = assembly is not None and assembly.ok and bool(assembly.layout)
        if assembly is not None:
            for forgotten in assembly.forgotten_files:
                self.listed.add(forgotten.file_id)
                self._add(_Place(forgotten.file_id, forgotten.filename, None, None))
            for entry in assembly.layout:
                if entry.id == "$project_file_list":
                    self.listed.update(m[2] for m in _FILE_ID_PATTERN.finditer(entry.message.text))
        for f in conv.project_files:
            if f.kind == "image" or not self.liveness:
                self.listed.add(f.file_id)
        self._live_carriers: set[str] = set()
        if assembly is not None and self.liveness:
            dropped = set(assembly.dropped)
            self._live_carriers = {h.id for h in assembly.history if h.id not in dropped}
        self.offered_at_end: set[str] = set()

    def _add(self, place: _Place) -> None:
        if place.file_id in self.known:
            return
        self.known[place.file_id] = place
        if place.filename:
            self.by_name.setdefault(place.filename, []).append(place.file_id)

    def walk(self) -> Iterator[tuple[Message, set[str]]]:
        """Yield each branch message with the ids offered to the model at that point.

        The set grows as the walk goes on (do not keep it); at the end it is also
        ``offered_at_end``, what the custom agent prompt (after all history) can name.
        """
        offered = set(self.listed)
        for m in self.branch:
            for k, f in enumerate(m.files):
                carrier = m.id if f.kind == "image" else f"{m.id}/files/{k}"
                self._offer(offered, f.file_id, carrier)
            if m.file_id is not None:
                self._offer(offered, m.file_id, m.id)
            for image in m.images:
                self._offer(offered, image.ref, m.id)
            yield m, offered
        self.offered_at_end = offered

    def _offer(self, offered: set[str], file_id: str, carrier: str) -> None:
        if not self.liveness or carrier in self._live_carriers:
            offered.add(file_id)
            self.dead.discard(file_id)
        elif file_id not in offered:
            self.dead.add(file_id)

    def filename_ids(self, value: str) -> list[str] | None:
        """The ids of the files named ``value`` when it is a filename, else None.

        An empty list: it looks like a filename (``name.ext``) but no file has that name.
        """
        if value in self.known or _UUID.match(value):
            return None
        ids = self.by_name.get(value)
        if ids:
            return ids
        return [] if _FILENAME.match(value) else None


def _not_offered(files: _Files, file_id: str, rng: TextRange, who: str) -> Diagnostic:
    place = files.known.get(file_id)
    name = f" (`{place.filename}`)" if place is not None and place.filename else ""
    related: tuple[Related, ...] = ()
    if place is None:
        why = "no file of this conversation has that id"
    elif file_id in files.dead:
        why = "it was dropped with older history and is not listed for read_file"
    elif place.project:
        why = "a project file sent inline: its id is not shown to the model"
    elif place.message_id is not None and place.message_id in files.branch_ids:
        why = "the file is only injected later"
    elif place.message_id is not None:
        why = "the file is injected on another branch"
    else:
        why = "the file is not offered at this point"
    if place is not None and place.range is not None:
        what = f"`{place.filename}`" if place.filename else f"file_id `{file_id}`"
        where = "is a project file" if place.project else "is injected here"
        related = (Related(place.range, f"{what} {where}"),)
    return Diagnostic(
        "file-id-not-in-read-file-list",
        Severity.WARNING,
        f"{who} file_id `{file_id}`{name}, which the model was not offered: {why}",
        rng,
        related=related,
    )


# ------------------------------------------------------------------------- arguments


@dataclass(frozen=True, slots=True)
class _ArgumentRef:
    """The `file_id` argument of a call: its value, its range and how to replace it."""

    value: str
    range: TextRange
    text: TextLike
    outer: SNode | None  # the `arguments` string node when arguments are a JSON string
    exact: bool = True  # False: ``range`` is all of the arguments (the value was not found)

    def replace_with(self, new_value: str) -> TextEdit | None:
        """An edit that writes ``new_value`` in place of the argument, or None if unsafe."""
        if not self.exact:
            return None
        inner = json.dumps(new_value, ensure_ascii=False)
        if self.outer is None:
            return TextEdit(self.range, inner)
        style = self.text[self.outer.range.start]
        if style == '"':
            return TextEdit(self.range, json.dumps(inner, ensure_ascii=False)[1:-1])
        if style == "'":
            return TextEdit(self.range, inner.replace("'", "''"))
        return None  # a plain or block scalar: leave it to the author


class _LazyNodes:
    """Builds the message nodes on first use (most conversations never need them)."""

    def __init__(self, conv: Conversation) -> None:
        self.conv = conv
        self._nodes: MessageNodes | None = None

    def get(self) -> MessageNodes:
        if self._nodes is None:
            self._nodes = MessageNodes(self.conv)
        return self._nodes


def _read_file_id(call: ToolCall) -> str | None:
    """The `file_id` argument of a `read_file` call, if it is a string."""
    if call.name not in FILE_READER_TOOLS or not isinstance(call.arguments, dict):
        return None
    value = call.arguments.get("file_id")
    return value if isinstance(value, str) else None


def _locate_argument(
    ctx: RuleContext, m: Message, call: ToolCall, value: str, nodes: _LazyNodes
) -> _ArgumentRef:
    """Find the `file_id` argument ``value`` of a call in the text (else all arguments)."""
    res = _find_argument(ctx, m, call, value, nodes)
    if res is not None:
        return res
    return _ArgumentRef(value, call.arguments_range, ctx.text, None, exact=False)


def _find_argument(
    ctx: RuleContext, m: Message, call: ToolCall, value: str, nodes: _LazyNodes
) -> _ArgumentRef | None:
    call_node = nodes.get().call_node(m, call)
    function = call_node.get("function") if call_node is not None else None
    arguments = function.get("arguments") if function is not None else None
    if arguments is None:
        return None
    if arguments.is_object:
        node = arguments.get("file_id")
        if node is None or not node.is_string:
            return None
        return _ArgumentRef(value, node.range, ctx.text, None)
    if not arguments.is_string:
        return None
    parsed = parse_json(str(arguments.value)).root
    node = parsed.get("file_id") if parsed is not None and parsed.is_object else None
    if node is None or not node.is_string or node.value != value:
        return None
    rng = decoded_range(ctx.text, arguments).range(node.range.start, node.range.end)
    return _ArgumentRef(value, rng, ctx.text, arguments)
