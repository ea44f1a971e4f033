"""Rules about file ids: what a `read_file` call or a `file_id="…"` reference names.

The model can name a file only by an id it was offered: a file injected earlier on the
branch that is still in the context (uploaded ``files``, a ``file_id`` message, an image),
or one listed for ``read_file`` (the forgotten-files listing, the project-file listing).
``read_file`` calls are checked at their place in the branch; ``file_id="…"`` patterns in
the custom agent prompt (after all history) and in user messages too.

One pass over the branch collects what is offered so far, so each reference costs O(1).
"""

from __future__ import annotations

import itertools
import json
import operator
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from assembly.assemble import FILE_READER_TOOLS
from assembly.diagnostics.core import (
    Diagnostic,
    Fix,
    LateFix,
    LateRange,
    Related,
    RuleContext,
    Severity,
    TextEdit,
)
from assembly.diagnostics.engine import MessageSource, Source, message_start, query
from assembly.diagnostics.inputs import (
    Branch,
    BranchPart,
    Cut,
    MessageKinds,
    MessageShape,
    message_source,
    same_messages,
    shape_key,
)
from assembly.diagnostics.rules.tool_calls import call_node, decoded_range, decoded_spans
from assembly.diagnostics.window import offset_map
from assembly.model import ASSISTANT_ROLE, USER_ROLE, FileAttachment, Message, ToolCall
from assembly.syntax import parse_json
from assembly.text import TextRange

_FILE_ID_PATTERN = re.compile(r"""\bfile_id\s*=\s*(["'])([^"'\n]+)\1""")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_ID = operator.attrgetter("id")
_FILENAME = re.compile(r"^[^\s/\\]*[^\s/\\.]\.[A-Za-z][A-Za-z0-9]{0,9}$")


def file_id_not_in_read_file_list(b: FileTraffic, in_prompt: PromptFileIds) -> Iterator[Diagnostic]:
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
    if not b.messages and not in_prompt.ids:
        return
    files = _files_of(b)
    data = b.data
    # What each message names (``FileMentions``) is read first; the message's shape (its
    # calls, where it is) only for a finding.
    for i, offered in files.walk():
        found = b.of_message[i]
        role = data[i].role
        if role is ASSISTANT_ROLE:
            for k, value in found.items():  # (the calls' indexes, in order)
                if not isinstance(value, str):
                    continue
                if value in offered or files.filename_ids(value) is not None:
                    continue
                m = b.messages[i]
                rng = _argument_range(m, k, value)
                yield _not_offered(files, value, rng, f"`{m.tool_calls[k].name}` asks for")
        elif role is USER_ROLE:
            for k, ref in found.items():
                if isinstance(ref, tuple) and ref[0] not in offered:
                    rng = _ref_range(b.messages[i], k, ref)
                    yield _not_offered(files, ref[0], rng, "the user message names")
    offered = files.offered_at_end
    for value, rng in in_prompt.ids:
        if value not in offered:
            yield _not_offered(files, value, rng, "the custom agent prompt names")


def filename_instead_of_file_id(b: FileTraffic) -> Iterator[Diagnostic]:
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
    if not b.messages:
        return
    files = _files_of(b)
    for i, found in b.of_message.items():
        for k, value in found.items():  # (a call's argument; a user message's are tuples)
            ids = files.filename_ids(value) if isinstance(value, str) else None
            if not isinstance(value, str) or ids is None:
                continue
            m = b.messages[i]
            call = m.tool_calls[k]
            related: tuple[Related, ...] = ()
            fix: Fix | None = None
            if not ids:
                message = f"`{call.name}` is passed `{value}`, a filename rather than a file_id"
            elif len(ids) > 1:
                message = (
                    f"`{call.name}` is passed the filename `{value}` instead of a file_id "
                    f"({len(ids)} files have this name)"
                )
            else:
                file_id = ids[0]
                message = (
                    f"`{call.name}` is passed the filename `{value}` instead of its file_id "
                    f"`{file_id}`"
                )
                fix = LateFix(
                    f"Pass the file_id `{file_id}`",
                    (),
                    message=m.index,
                    make=_pass_file_id(k, value, file_id),
                    local=True,
                )
            for file_id in ids[:1]:
                place = files.known.get(file_id)
                rng = files.range(place) if place is not None else None
                if rng is not None:
                    related = (Related(rng, f"`{value}` is injected here"),)
            yield Diagnostic(
                "filename-instead-of-file-id",
                Severity.ERROR,
                message,
                _argument_range(m, k, value),
                related=related,
                fix=fix,
            )


def file_refs(m: Message) -> tuple[tuple[str, int, int], ...]:
    """The ``file_id="…"`` values a user message writes: (value, start, end in content)."""
    if m.role is not USER_ROLE or m.file_id is not None or "file_id" not in m.content:
        return ()
    return tuple((x[2], x.start(2), x.end(2)) for x in _FILE_ID_PATTERN.finditer(m.content))


# ------------------------------------------------------------------------- files known


@dataclass(frozen=True, slots=True)
class _Place:
    """Where a file id is given in the document: ``at`` is (message index, which: "files",
    "file_id" or "images", position), or a project file's range (None: only in the
    pipeline's listing)."""

    file_id: str
    filename: str
    at: tuple[int, str, int] | TextRange | None
    message_id: str | None  # the message that injects it; None for project files
    project: bool = False


def _files_of(b: FileTraffic) -> _Files:
    """``_Files(b)``, made once for the two rules that read it (the last one is kept)."""
    last = _LAST_FILES[0] if _LAST_FILES else None
    if last is not None and last[0] is b:
        return last[1]
    files = _Files(b)
    _LAST_FILES[:] = [(b, files)]
    return files


class _Files:
    """Every file of the document, and what the model is offered along the branch.

    Read from the stored messages (no message shape is made but for a finding)."""

    def __init__(self, b: FileTraffic) -> None:
        self._b = b
        self.order = b.on_branch
        data = b.data
        self.branch_ids = set(map(_ID, b.stored[: len(b.on_branch)]))
        self.known: dict[str, _Place] = {}
        self.by_name: dict[str, list[str]] = {}
        self._carriers = b.carriers  # the messages that inject a file, in document order
        for i in self._carriers:
            m = data[i]
            for k, f in enumerate(m.files):
                self._add(_Place(f.file_id, f.filename, (i, "files", k), m.id))
            if m.file_id is not None:
                self._add(_Place(m.file_id, m.filename or "", (i, "file_id", 0), m.id))
            for k, image in enumerate(m.images):
                self._add(_Place(image.ref, "", (i, "images", k), m.id))
        for f in b.project_files:
            self._add(_Place(f.file_id, f.filename, f.range, None, project=True))
        self.listed: set[str] = set()
        self.dead: set[str] = set()  # injected, then dropped or summarized, and not listed
        self.liveness = b.assembled
        for file_id, filename in b.forgotten:
            self.listed.add(file_id)
            self._add(_Place(file_id, filename, None, None))
        self.listed.update(b.project_listed)
        for f in b.project_files:
            if f.kind == "image" or not self.liveness:
                self.listed.add(f.file_id)
        self._live_carriers = b.live
        self.offered_at_end: set[str] = set()

    def _add(self, place: _Place) -> None:
        if place.file_id in self.known:
            return
        self.known[place.file_id] = place
        if place.filename:
            self.by_name.setdefault(place.filename, []).append(place.file_id)

    def range(self, place: _Place) -> TextRange | None:
        """Where ``place`` is in this version (None: nowhere in the document)."""
        at = place.at
        if not isinstance(at, tuple):
            return at
        i, which, k = at
        m = self._b.messages[i]
        if which == "files":
            return m.files[k].range
        return m.range if which == "file_id" else m.images[k].range

    def walk(self) -> Iterator[tuple[int, set[str]]]:
        """Yield the index of each branch message that names a file id with the ids
        offered to the model at that point.

        The set grows as the walk goes on (do not keep it); at the end it is also
        ``offered_at_end``, what the custom agent prompt (after all history) can name.
        """
        offered = set(self.listed)
        self.dead = set()  # (as found so far: a finding reads it as the walk goes)
        data = self._b.data
        carriers = set(self._carriers)
        of_message = self._b.of_message
        for i in self.order:
            if i in carriers:
                m = data[i]
                for k, f in enumerate(m.files):
                    carrier = m.id if f.kind == "image" else f"{m.id}/files/{k}"
                    self._offer(offered, f.file_id, carrier)
                if m.file_id is not None:
                    self._offer(offered, m.file_id, m.id)
                for image in m.images:
                    self._offer(offered, image.ref, m.id)
            if i in of_message:
                yield i, offered
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
    given = files.range(place) if place is not None else None
    if place is not None and given is not None:
        what = f"`{place.filename}`" if place.filename else f"file_id `{file_id}`"
        where = "is a project file" if place.project else "is injected here"
        related = (Related(given, f"{what} {where}"),)
    return Diagnostic(
        "file-id-not-in-read-file-list",
        Severity.WARNING,
        f"{who} file_id `{file_id}`{name}, which the model was not offered: {why}",
        rng,
        related=related,
    )


# ------------------------------------------------------------------------- arguments


@dataclass(frozen=True, slots=True)
class _Ref:
    """The `file_id` argument of a call: where it is and how to write another in its
    place."""

    range: TextRange
    exact: bool = True  # False: ``range`` is all of the arguments (the value was not found)
    quote: str | None = None  # the quote of the `arguments` string holding it (None: none)

    def replace_with(self, new_value: str) -> TextEdit | None:
        """An edit that writes ``new_value`` in place of the argument, or None if unsafe."""
        if not self.exact:
            return None
        inner = json.dumps(new_value, ensure_ascii=False)
        if self.quote is None:
            return TextEdit(self.range, inner)
        if self.quote == '"':
            return TextEdit(self.range, json.dumps(inner, ensure_ascii=False)[1:-1])
        if self.quote == "'":
            return TextEdit(self.range, inner.replace("'", "''"))
        return None  # a plain or block scalar: leave it to the author


def _argument_range(m: MessageShape, k: int, value: str) -> LateRange:
    """Where the `file_id` argument of call ``k`` of ``m`` is (found when shown)."""

    def locate(src: MessageSource) -> TextRange:
        return _locate_argument(src, src.message.tool_calls[k], value).range

    return LateRange(m.index, message_start(m), ("read_file", k, value), locate)


def _ref_range(m: MessageShape, k: int, ref: tuple[str, int, int]) -> LateRange:
    """Where the ``file_id="…"`` ``k`` of a user message is (found when shown)."""

    def locate(src: MessageSource) -> TextRange:
        spans = decoded_spans(src)
        if spans is not None:
            return spans.range(ref[1], ref[2])
        msg = src.message
        return msg.content_range if msg.content_range is not None else msg.range

    return LateRange(m.index, message_start(m), ("file ref", k, ref), locate)


def _pass_file_id(
    k: int, value: str, file_id: str
) -> Callable[[RuleContext, Message], tuple[TextEdit, ...] | None]:
    def make(ctx: RuleContext, m: Message) -> tuple[TextEdit, ...] | None:
        if k >= len(m.tool_calls):
            return None
        edit = _locate_argument(message_source(ctx, m), m.tool_calls[k], value).replace_with(
            file_id
        )
        return (edit,) if edit is not None else None

    return make


@dataclass(frozen=True, slots=True)
class FileMentions:
    """The file ids the messages name: ``of_message[i]`` is None when message ``i`` names
    none; else, by the index of the ``read_file`` call, its `file_id` argument (assistant
    messages), or, by the index of the ``file_id="…"``, its value and place in the
    content (user messages)."""

    of_message: tuple[dict[int, str | tuple[str, int, int]] | None, ...]
    named: tuple[int, ...] = ()  # the indexes of the messages that name one


@query
def file_mentions(src: Source) -> FileMentions:
    of = src.per_message("file mentions", _mentions)
    named = src.indexes(
        "file mentions: named",
        lambda idx: map(operator.is_not, map(of.__getitem__, idx), itertools.repeat(None)),
    )
    return FileMentions(tuple(of), named)


@dataclass(frozen=True, slots=True, eq=False)
class FileTraffic(BranchPart):
    """The messages the file rules read, and what they read of the budget cut.

    ``on_branch``: the branch's messages (in order) that inject a file (``files``, a
    ``file_id`` message, images) or name one (``of_message``: what each names, as
    ``FileMentions``); ``carriers``: every message of the document that injects a file (in
    document order). ``live``: the ids (``<message id>`` or ``<message id>/files/<k>``)
    under which the carriers' files are in the context after the cut; ``assembled``,
    ``forgotten``, ``project_listed``: as in ``Cut``. Read like a ``Branch`` for a finding's
    place (``messages``, ``data``, ``project_files``).

    Equal when those messages are (by shape and what they name, in order) and what the cut
    says of them is: an edit to any other message keeps the value, and the findings move
    with their messages.
    """

    on_branch: tuple[int, ...]
    carriers: tuple[int, ...]
    of_message: dict[int, dict[int, str | tuple[str, int, int]]]
    assembled: bool
    live: frozenset[str]
    forgotten: tuple[tuple[str, str], ...]
    project_listed: tuple[str, ...]
    stored: tuple[Message, ...]  # at ``on_branch``, then at ``carriers``

    @property
    def project_files(self) -> tuple[FileAttachment, ...]:
        return self.branch.project_files

    def _key(self) -> tuple[Any, ...]:
        return (
            len(self.on_branch),
            list(map(self.of_message.__getitem__, sorted(self.of_message))),
            self.assembled,
            self.live,
            self.forgotten,
            self.project_listed,
            shape_key(self.branch.project_files),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FileTraffic):
            return NotImplemented
        return self._key() == other._key() and same_messages(self.stored, other.stored)

    __hash__ = None  # type: ignore[assignment]


@query
def file_traffic(b: Branch, cut: Cut, mentions: FileMentions, k: MessageKinds) -> FileTraffic:
    # The messages that inject a file or name one, found among a few indexes; then those
    # of the branch (in its order, a pass at C speed).
    data = b.data
    order = b.order()
    carriers = k.carriers
    last = _LAST_ON[0] if _LAST_ON else None
    if last is not None and last[0] is carriers and last[1] == mentions.named and last[2] == order:
        on = last[3]  # the same messages inject or name files, on the same branch
    else:
        either = set(carriers).union(mentions.named)
        on = list(filter(either.__contains__, order))
        _LAST_ON[:] = [(carriers, mentions.named, order, on)]
    of = mentions.of_message
    named_on = list(map(of.__getitem__, on))
    of_message = dict(
        itertools.compress(
            zip(on, named_on, strict=True), map(operator.is_not, named_on, itertools.repeat(None))
        )
    )
    live: frozenset[str] = frozenset()
    stored = (*map(data.__getitem__, on), *map(data.__getitem__, carriers))
    if cut.assembled:  # the carriers' ids in the history, less those the cut dropped
        held = stored[len(on) :]
        was = _LAST_LIVE[0] if _LAST_LIVE else None
        same = was is not None and len(was[0]) == len(held) and all(map(operator.is_, was[0], held))
        if same and was[1] == cut.history and was[2] == cut.dropped:  # type: ignore[index]
            live = was[4]  # type: ignore[index]  # the same carriers, history and cut
        else:
            # (The same carriers have the same ids: only the history or the cut changed.)
            names = was[3] if same else {n for m in held for n in _carrier_ids(m)}  # type: ignore[index]
            live = frozenset(names.intersection(cut.history).difference(cut.dropped))
            _LAST_LIVE[:] = [(held, cut.history, cut.dropped, names, live)]
    return FileTraffic(
        b,
        tuple(on),
        tuple(carriers),
        of_message,  # type: ignore[arg-type]
        cut.assembled,
        live,
        cut.forgotten,
        cut.project_listed,
        stored,
    )


# The last ``_Files`` made, with the traffic it was made of.
_LAST_FILES: list[tuple[FileTraffic, _Files]] = []

# The last ``file_traffic``'s carriers, named messages and branch, and those of them on it;
# its carriers' messages, the history and the ids the cut dropped, the carriers' ids and
# those of them live.
_LAST_ON: list[tuple[tuple[int, ...], tuple[int, ...], list[int], list[int]]] = []
_LAST_LIVE: list[
    tuple[tuple[Message, ...], tuple[str, ...], tuple[str, ...], set[str], frozenset[str]]
] = []


def _carrier_ids(m: Message) -> Iterator[str]:
    """The history ids under which a message's files are injected (``_Files.walk``)."""
    yield m.id
    for k in range(len(m.files)):
        yield f"{m.id}/files/{k}"


@dataclass(frozen=True, slots=True)
class PromptFileIds:
    """The ``file_id="…"`` values written in the custom agent prompt, with their ranges."""

    ids: tuple[tuple[str, TextRange], ...]


@query
def prompt_file_ids(src: Source) -> PromptFileIds:
    ctx = src.ctx
    conv = ctx.conversation
    found: list[tuple[str, TextRange]] = []
    block = conv.custom_agent_prompt if conv is not None else None
    if block is not None and block.content_range is not None and "file_id" in block.content:
        offsets = offset_map(ctx.text, block.content_range, block.content)
        for match in _FILE_ID_PATTERN.finditer(block.content):
            found.append((match[2], offsets.range(match.start(2), match.end(2))))
    return PromptFileIds(tuple(found))


def _mentions(m: Message) -> dict[int, str | tuple[str, int, int]] | None:
    """What message ``m`` names by file id (``FileMentions.of_message``)."""
    if m.role is ASSISTANT_ROLE:
        res: dict[int, str | tuple[str, int, int]] = {}
        for k, call in enumerate(m.tool_calls):
            value = _read_file_id(call)
            if value is not None:
                res[k] = value
        return res or None
    refs = file_refs(m)
    return dict(enumerate(refs)) if refs else None


def _read_file_id(call: ToolCall) -> str | None:
    """The `file_id` argument of a `read_file` call, if it is a string."""
    if call.name not in FILE_READER_TOOLS or not isinstance(call.arguments, dict):
        return None
    value = call.arguments.get("file_id")
    return value if isinstance(value, str) else None


def _locate_argument(src: MessageSource, call: ToolCall, value: str) -> _Ref:
    """Find the `file_id` argument ``value`` of a call in the text (else all arguments)."""
    res = _find_argument(src, call, value)
    return res if res is not None else _Ref(call.arguments_range, exact=False)


def _find_argument(src: MessageSource, call: ToolCall, value: str) -> _Ref | None:
    node = call_node(src, call)
    function = node.get("function") if node is not None else None
    arguments = function.get("arguments") if function is not None else None
    if arguments is None:
        return None
    if arguments.is_object:
        file_node = arguments.get("file_id")
        if file_node is None or not file_node.is_string:
            return None
        return _Ref(file_node.range)
    if not arguments.is_string:
        return None
    parsed = parse_json(str(arguments.value)).root
    inner = parsed.get("file_id") if parsed is not None and parsed.is_object else None
    if inner is None or not inner.is_string or inner.value != value:
        return None
    rng = decoded_range(src.text, arguments).range(inner.range.start, inner.range.end)
    return _Ref(rng, quote=src.text[arguments.range.start])
