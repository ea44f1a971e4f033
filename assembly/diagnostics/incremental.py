"""Incremental rules: ``RuleCache``, what ``check`` keeps between runs on one document.

After an edit inside one message, the re-read conversation shares every other ``Message``
object with the previous one (``assembly/incremental.py``); those after the edit may have
moved. After an edit inside an inline prompt (the string of ``system_prompt``,
``custom_agent_prompt`` or ``reminder``), it shares every message and has a new
``TextBlock`` for that prompt. ``check(ctx, cache=…)`` then:

- finds the edited message by identity (one C-level pass). Anything else (several new
  message objects, a different count, a length that does not add up, a document with a
  single message, where nothing proves that the rest of the text is the same) and nothing
  is reused;
- compares the edited message's *facts* before and after: its *shape* (every field but
  its ranges, its content and the contents of its attached files) and its *content facts*,
  what rules read from the contents, by kind (``CONTENT_FACTS``): all of the text of a
  system message (taken as the system prompt), the calls written as text, the
  ``file_id="…"`` references, the contents of the attached files. A different shape and
  nothing is reused; else the kinds that differ are noted;
- when every message is shared, compares the inline prompts instead (``PROMPT_FACTS``:
  their texts and what the pipeline sent for them). Exactly one prompt's text may differ,
  its string starting where it did and longer by what the document grew (on a ``Rope``,
  whose ``changed_span`` is cheap, the changed span must also lie strictly inside that
  string): the edit lies inside it, and its kind is noted as changed;
- reuses a rule's previous findings when the rule's ``inputs`` (settings, the prompts'
  shapes, the assembly's branch and cut, …) are equal and it ``reads`` none of the content
  facts that differ, moving every offset after the edited message (or prompt string) by
  the length difference. So typing in a system message re-runs only the four rules that
  read the system prompt, typing in the custom agent prompt those five that read it,
  typing in the reminder the two that read it, and typing in an attached file's content
  none (what its length changes in the assembly, such as the cut, is in ``inputs``). A
  finding with an offset strictly inside the edited message or string is not moved (its
  place in it may have changed): the rule runs again.

Findings are kept with plain absolute ranges in the coordinates of the run that produced
or moved them, so a later move of anchored ranges cannot change them; so are the places of
the inline prompts. Rules without ``inputs`` always run: those that only filter what was
reported, and the budget rules, whose figures change with every edit (they keep their
costly part, where the cut lies, in the memo and re-read its ranges and tokens each time).
The cache also keeps the per-message memo (``MessageMemo``) and what the suppressions
need: the number of ``promptls:`` comments in the text and the messages with an ignore key.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from assembly.assemble import Assembly, LayoutEntry
from assembly.diagnostics.core import (
    Diagnostic,
    Fix,
    MessageMemo,
    Related,
    Rule,
    RuleContext,
    TextEdit,
    message_memo,
)
from assembly.diagnostics.rules.budget import history_ids
from assembly.diagnostics.rules.files import file_refs
from assembly.diagnostics.rules.tool_calls import text_calls, tool_definitions
from assembly.diagnostics.window import TextLike
from assembly.model import Conversation, FileAttachment, Message, Role, TextBlock
from assembly.rope import Rope
from assembly.text import TextRange
from assembly.toolcalls import RecoveredCall, markup_tool_calls

__all__ = [
    "COMMENT_MARK",
    "CONTENT_FACTS",
    "CUSTOM_AGENT_TEXT",
    "FILE_CONTENTS",
    "FILE_REFS",
    "PROMPT_FACTS",
    "REMINDER_TEXT",
    "SYSTEM_TEXT",
    "TEXT_CALLS",
    "RuleCache",
    "document_inputs",
    "summary_inputs",
]

COMMENT_MARK = "promptls:"  # what every suppression comment contains

# The kinds of content facts (``message_facts``, ``prompt_facts``), what a rule's
# ``reads`` names.
SYSTEM_TEXT = "system text"  # a system message's content, an inline ``system_prompt``
TEXT_CALLS = "text calls"  # the calls an assistant message writes as text
FILE_REFS = "file refs"  # the ``file_id="…"`` values a user message writes
FILE_CONTENTS = "file contents"  # the contents of the files attached to a message
CUSTOM_AGENT_TEXT = "custom agent prompt"  # the text of ``custom_agent_prompt``
REMINDER_TEXT = "reminder"  # the text of the ``reminder`` key
# The inline prompts, by kind: where the conversation holds each, and the id of what the
# pipeline sends for it (``Assembly.layout``; the system prompt's entry takes a system
# message's id when that message is the system prompt, whose content is a message fact).
PROMPT_FACTS: dict[str, tuple[str, str]] = {
    SYSTEM_TEXT: ("system_prompt", "$system"),
    CUSTOM_AGENT_TEXT: ("custom_agent_prompt", "$custom_agent"),
    REMINDER_TEXT: ("reminder", "$reminder"),
}
CONTENT_FACTS = frozenset(
    {SYSTEM_TEXT, TEXT_CALLS, FILE_REFS, FILE_CONTENTS, CUSTOM_AGENT_TEXT, REMINDER_TEXT}
)
FORGOTTEN_LISTING = "$forgotten_files"  # the layout id of the forgotten-files listing
_PROMPT_IDS = frozenset(layout_id for _, layout_id in PROMPT_FACTS.values())
_ENTRY_ID = operator.attrgetter("id")
_NOT_KEYED = _PROMPT_IDS | {FORGOTTEN_LISTING}  # layout texts not in ``document_inputs``


class RuleCache:
    """What ``check`` keeps between two runs on successive versions of one document.

    Pass the same object to every ``check`` of the document (the language server keeps it
    in the analysis); a fresh one reuses nothing.
    """

    def __init__(self) -> None:
        self.memo = MessageMemo()  # per-message values, by message object
        self._messages: tuple[Message, ...] | None = None  # of the last run
        self._text: TextLike | None = None  # the last run's text
        self._tools: list[dict[str, Any]] | None = None  # the memo's tool definitions
        self._findings: dict[str, tuple[object, tuple[Diagnostic, ...]]] = {}
        self._n_comments = 0  # occurrences of COMMENT_MARK in the last run's text
        self._ignoring: tuple[int, ...] = ()  # indexes of the messages with an ignore key
        self._document_key: object = None  # ``document_inputs`` of the last run
        self._prompts: dict[str, _Prompt] | None = None  # ``prompt_facts`` of the last run
        self.reused = False  # whether the last run could reuse findings (for tests, logs)
        self.changed: frozenset[str] = frozenset()  # content facts the last edit changed
        self.recomputed: tuple[str, ...] = ()  # rules with inputs the last run ran again

    def begin(self, ctx: RuleContext) -> CacheRun:
        """Start a run on ``ctx``: find what changed since the last run."""
        conv = ctx.conversation
        msgs = conv.messages if conv is not None else ()
        tools = tool_definitions(conv) if conv is not None else []
        if tools != self._tools:
            self.memo.clear()  # the calls found in a text depend on the tools
            self._messages = None
            self._tools = tools
        prompts = prompt_facts(conv, ctx.assembly) if conv is not None else None
        move: _Move | None = None
        edited: tuple[Message, Message] | None = None
        changed: frozenset[str] = frozenset()
        span: _Move | None = None  # where the text changed, when known
        if (
            prompts is not None
            and self._prompts is not None
            and self._messages is not None
            and self._text is not None
        ):
            move, edited, changed, span = self._compare(
                self._messages, msgs, self._text, ctx.text, self._prompts, prompts
            )
        if move is None:
            self.memo.shapes = object()  # the messages' shapes may differ from the last run's
        # What the suppressions need.
        if span is not None:
            assert self._text is not None
            n_comments = self._n_comments + _count_change(self._text, ctx.text, span)
        elif move is not None:
            n_comments = self._n_comments  # the very same text
        else:
            n_comments = _count(ctx.text, COMMENT_MARK)
        if move is not None:
            ignoring = self._ignoring
        else:
            stored = conv.message_data if conv is not None else ()
            ignoring = tuple(i for i, m in enumerate(stored) if m.ignore)
        run = CacheRun(self, move, edited, changed, msgs, ctx.text, n_comments, ignoring)
        run.prompts = prompts
        return run

    def finish(self, run: CacheRun) -> None:
        """Keep what ``run`` found for the next run."""
        self._messages = run.messages
        self._text = run.text
        self._findings = run.findings
        self._n_comments = run.n_comments
        self._ignoring = run.ignoring
        self._document_key = run.document_key
        self._prompts = run.prompts
        self.reused = run.move is not None
        self.changed = run.changed
        self.recomputed = tuple(run.recomputed)
        self.memo.end_run()
        if run.edited is not None:
            self.memo.forget(run.edited[0])
        elif run.move is None:
            made = getattr(run.messages, "made", None)
            self.memo.retain(made() if made is not None else run.messages)

    def _compare(
        self,
        prev: tuple[Message, ...],
        msgs: tuple[Message, ...],
        prev_text: TextLike,
        text: TextLike,
        prev_prompts: dict[str, _Prompt],
        prompts: dict[str, _Prompt],
    ) -> tuple[_Move | None, tuple[Message, Message] | None, frozenset[str], _Move | None]:
        """How the text moved since the last run (None: unknown), the edited message, the
        kinds of content facts that changed, and where the text changed (when known).

        Only the incremental re-read shares message objects, and it does so only when the
        edit lies strictly inside one message or one inline prompt's string: a shared
        message proves that the text outside the new message object (or, all being
        shared, outside the prompt whose text changed) is unchanged.
        """
        none: frozenset[str] = frozenset()
        if not msgs or len(prev) != len(msgs):
            return None, None, none, None
        # What the pipeline sends for the prompts is read by the rules that read them.
        rendered = frozenset(
            k for k, p in prompts.items() if p.rendered != prev_prompts[k].rendered
        )
        texts = [k for k, p in prompts.items() if p.content != prev_prompts[k].content]
        # The stored messages (position-independent) are what the re-read shares.
        stored = getattr(msgs, "stored", None)
        prev_stored = getattr(prev, "stored", None)
        if stored is not None and prev_stored is not None:
            same = list(map(operator.is_, prev_stored, stored))
        else:
            same = [a.green is b.green for a, b in zip(prev, msgs, strict=True)]
        try:
            i = same.index(False)
        except ValueError:  # all shared: the very same text, or an edit inside one prompt
            return self._prompt_edit(prev_text, text, prev_prompts, prompts, texts, rendered)
        try:
            same.index(False, i + 1)
            return None, None, none, None  # several messages are new: a full parse
        except ValueError:
            pass
        if len(msgs) < 2 or texts:
            # Nothing is shared: no proof the rest is unchanged; or a prompt's text changed
            # too: not one edit inside the message.
            return None, None, none, None
        old, new = prev[i], msgs[i]
        start, old_end, new_end = old.range.start, old.range.end, new.range.end
        if new.range.start != start or len(text) - len(prev_text) != new_end - old_end:
            return None, None, none, None
        span = _Move(start, old_end, new_end)
        tools = self._tools or []
        old_shape, old_facts = message_facts(old, self.memo, tools)
        new_shape, new_facts = message_facts(new, self.memo, tools)
        if old_shape != new_shape:
            return None, (old, new), none, span
        changed = frozenset(k for k, v in old_facts.items() if new_facts[k] != v)
        return span, (old, new), changed | rendered, span

    @staticmethod
    def _prompt_edit(
        prev_text: TextLike,
        text: TextLike,
        prev_prompts: dict[str, _Prompt],
        prompts: dict[str, _Prompt],
        texts: list[str],
        rendered: frozenset[str],
    ) -> tuple[_Move | None, None, frozenset[str], _Move | None]:
        """``_compare`` when every message is shared: the text is the same, or one inline
        prompt's text changed strictly inside its string."""
        if not texts:
            if len(text) != len(prev_text):
                return None, None, frozenset(), None  # an edit elsewhere (nothing reads it)
            return _Move(0, 0, 0), None, rendered, None
        if len(texts) > 1:
            return None, None, frozenset(), None
        kind = texts[0]
        old, new = prev_prompts[kind].place, prompts[kind].place
        if old is None or new is None:
            return None, None, frozenset(), None  # a prompt appeared, or is no string
        (at, old_end), (new_at, new_end) = old, new
        if new_at != at or len(text) - len(prev_text) != new_end - old_end:
            return None, None, frozenset(), None
        if isinstance(text, Rope) and isinstance(prev_text, Rope):
            p, changed_end, _ = text.changed_span(prev_text)
            if not at < p <= changed_end < old_end:
                return None, None, frozenset(), None  # not strictly inside the string
        span = _Move(at, old_end, new_end)
        return span, None, rendered | {kind}, span


class CacheRun:
    """One ``check`` run with a cache: reuses or recomputes each rule's findings."""

    def __init__(
        self,
        cache: RuleCache,
        move: _Move | None,
        edited: tuple[Message, Message] | None,
        changed: frozenset[str],
        messages: tuple[Message, ...],
        text: TextLike,
        n_comments: int,
        ignoring: tuple[int, ...],
    ) -> None:
        self.cache = cache
        self.move = move  # None: nothing is reused
        self.edited = edited  # (old, new) when exactly one message object is new
        self.changed = changed  # the kinds of the edited message's content facts that differ
        self.recomputed: list[str] = []  # the rules with inputs run again
        self.messages = messages
        self.text = text
        self.n_comments = n_comments
        self.ignoring = ignoring
        self.findings: dict[str, tuple[object, tuple[Diagnostic, ...]]] = {}
        self.prompts: dict[str, _Prompt] | None = None  # ``prompt_facts`` of this run
        self._scratch: dict[str, Any] = {"previous document": cache._document_key}

    @property
    def document_key(self) -> object:
        return self._scratch.get("document")

    @property
    def ignoring_messages(self) -> list[Message]:
        return [self.messages[i] for i in self.ignoring]

    def run(self, rule: Rule, ctx: RuleContext) -> Iterable[Diagnostic]:
        """The findings of ``rule`` on ``ctx``: the previous ones moved, or new ones."""
        if rule.inputs is None:
            return rule.check(ctx)
        key = rule.inputs(ctx, self._scratch)
        kept = self.cache._findings.get(rule.code)
        if self.move is not None and kept is not None and kept[0] == key and not self._reads(rule):
            moved = _move_all(kept[1], self.move)
            if moved is not None:
                self.findings[rule.code] = (key, moved)
                return moved
        self.recomputed.append(rule.code)
        found = list(rule.check(ctx))
        self.findings[rule.code] = (key, tuple(map(_absolute, found)))
        return found

    def _reads(self, rule: Rule) -> bool:
        """Whether ``rule`` reads a content fact that the edit changed."""
        if not self.changed:
            return False
        return rule.reads is None or not rule.reads.isdisjoint(self.changed)


# ------------------------------------------------------------------------------ facts


def _markup_calls(m: Message) -> tuple[RecoveredCall, ...]:
    if m.role is not Role.ASSISTANT:
        return ()
    if "<tool_call>" not in m.content and "<|python_tag|>" not in m.content:
        return ()
    return tuple(markup_tool_calls(m.content))


def message_facts(
    m: Message, memo: MessageMemo, tools: Sequence[dict[str, Any]]
) -> tuple[object, dict[str, object]]:
    """What the rules can read in a message, apart from where it is: its shape and its
    content facts by kind.

    The shape is every field but the ranges, the content and the contents of the attached
    files (whether a file has one is shape). The content facts (``CONTENT_FACTS``) are the
    content of a system message (taken as the system prompt), the calls its text holds,
    the file ids it names and the contents of its files; a rule reads no other part of a
    message's contents, and one that reads these says so in its ``reads``.
    """
    facts: dict[str, object] = {
        SYSTEM_TEXT: m.content if m.role is Role.SYSTEM else None,
        TEXT_CALLS: (
            memo.get("text_calls", m, lambda m: text_calls(m, tools)),
            memo.get("markup_calls", m, _markup_calls),
        ),
        FILE_REFS: memo.get("file_refs", m, file_refs),
        FILE_CONTENTS: tuple(f.content for f in m.files),
    }
    return _shape(m), facts


@dataclass(frozen=True, slots=True)
class _Prompt:
    """What the rules can read of one inline prompt: its text and what the pipeline sent
    for it; and where its string is written (absolute offsets of that run, for moving)."""

    content: str | None  # None: not given inline
    place: tuple[int, int] | None  # its string's range; None: none
    rendered: tuple[str, ...]  # the texts of the layout entries with its id


def prompt_facts(conv: Conversation, assembly: Assembly | None) -> dict[str, _Prompt]:
    """The inline prompts' facts by kind (``PROMPT_FACTS``).

    The texts the pipeline builds from the prompts (placeholders filled, guidance added,
    …) are compared with them: only the rules that read a prompt read what it became.
    """
    rendered = _rendered(assembly.layout) if assembly is not None else {}
    res = {}
    for kind, (attr, layout_id) in PROMPT_FACTS.items():
        block = getattr(conv, attr)
        if isinstance(block, TextBlock):
            rng = block.content_range
            place = (rng.start, rng.end) if rng is not None else None
            res[kind] = _Prompt(block.content, place, rendered.get(layout_id, ()))
        else:
            res[kind] = _Prompt(None, None, rendered.get(layout_id, ()))
    return res


def _rendered(layout: Sequence[LayoutEntry]) -> dict[str, tuple[str, ...]]:
    """The texts of the entries of ``layout`` with a prompt's id (``_PROMPT_IDS``; a
    document message may take such an id too), found by C-level searches of the ids."""
    ids = list(map(_ENTRY_ID, layout))
    res: dict[str, tuple[str, ...]] = {}
    for layout_id in _PROMPT_IDS:
        texts = []
        k = -1
        while True:
            try:
                k = ids.index(layout_id, k + 1)
            except ValueError:
                break
            texts.append(layout[k].message.text)
        res[layout_id] = tuple(texts)
    return res


_MESSAGE_FIELDS = tuple(
    f.name for f in dataclasses.fields(Message) if f.name not in ("content", "files")
)
_FILE_FIELDS = tuple(f.name for f in dataclasses.fields(FileAttachment) if f.name != "content")


def _shape(m: Message) -> tuple[Any, ...]:
    files = tuple(
        (f.content is None, *(_strip(getattr(f, name)) for name in _FILE_FIELDS)) for f in m.files
    )
    return (*(_strip(getattr(m, name)) for name in _MESSAGE_FIELDS), files)


def _strip(value: Any) -> Any:
    """``value`` with every range replaced by a marker (ranges are compared by moving)."""
    if value is None or isinstance(value, (str, int, float)):
        return value
    if isinstance(value, TextRange):
        return ...
    if isinstance(value, tuple):
        return tuple(_strip(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (
            type(value).__name__,
            *(_strip(getattr(value, f.name)) for f in dataclasses.fields(value)),
        )
    return value  # dicts and lists of plain values (settings, schemas, arguments)


# ------------------------------------------------------------------------------ inputs


def document_inputs(ctx: RuleContext, scratch: dict[str, Any]) -> object:
    """What most rules read besides the messages: settings, prompts, tools, the assembly's
    branch, cut and listings (offsets are moved, not compared)."""
    key = scratch.get("document")
    if key is None:
        key = (_context_key(ctx), _assembly_key(ctx, scratch))
        previous = scratch.get("previous document")
        if previous is not None and previous == key:
            key = previous  # the same object: every rule's comparison is then immediate
        scratch["document"] = key
    return key


def summary_inputs(ctx: RuleContext, scratch: dict[str, Any]) -> object:
    """``document_inputs`` and what the pipeline reported about summaries."""
    reported = tuple(
        (d.message, d.severity, d.path, tuple((r.message, r.path) for r in d.related))
        for d in ctx.reported
        if d.code == "summary-on-other-branch"
    )
    return (document_inputs(ctx, scratch), reported)


def _context_key(ctx: RuleContext) -> object:
    t = ctx.template
    return (
        ctx.settings,
        getattr(ctx.tokenizer, "encoding", id(ctx.tokenizer)),
        ctx.template_path,
        t.text if t is not None else None,
        _conversation_key(ctx.conversation) if ctx.conversation is not None else None,
    )


def _conversation_key(conv: Conversation) -> object:
    root = conv.root
    members = tuple(m.key for m in root.members) if root is not None and root.is_object else ()
    return (
        conv.format,
        conv.settings,
        tuple(conv.settings_ranges),
        _prompt_shape(conv.system_prompt),
        _prompt_shape(conv.custom_agent_prompt),
        _strip(conv.project_files),
        _strip(conv.tools),
        _prompt_shape(conv.reminder),
        _strip(conv.additional_context),
        conv.user_info,
        root.kind if root is not None else None,
        members,
        len(conv.messages),
    )


def _prompt_shape(block: object) -> object:
    """A prompt given in the conversation, but its text (``prompt_facts``)."""
    if isinstance(block, TextBlock):
        return ("TextBlock", block.token_count, block.content_range is None)
    return _strip(block)


def _assembly_key(ctx: RuleContext, scratch: dict[str, Any]) -> object:
    a, conv = ctx.assembly, ctx.conversation
    if a is None or conv is None:
        return None
    # The listings and the system message the rules look at (few entries: the prompts
    # and the listings come before and after the history). The forgotten files are
    # compared by id and name: the rules read nothing else of them, and their character
    # counts (also in the listing's text) change as one types in an attached file. What
    # the prompts became is compared as the prompts' facts (``prompt_facts``): only the
    # rules that read a prompt read it.
    layout = tuple(
        (
            e.id,
            e.segment,
            e.message.text if e.id.startswith("$") and e.id not in _NOT_KEYED else None,
            conv.index_of(e.message.source) if e.message.source is not None else None,
        )
        for e in a.layout
        if e.segment == "system" or e.id.startswith("$")
    )
    return (
        a.ok,
        a.chain,
        a.dropped,
        a.orphans_dropped,
        tuple((f.file_id, f.filename) for f in a.forgotten_files),
        a.summary_id,
        history_ids(a, message_memo(ctx)),
        bool(a.layout),
        layout,
    )


# ------------------------------------------------------------------------------ moving


@dataclass(frozen=True, slots=True)
class _Move:
    """An edit strictly inside the message at ``[at, old_end)``, now ``[at, new_end)``."""

    at: int
    old_end: int
    new_end: int

    def offset(self, x: int) -> int | None:
        """Where offset ``x`` of the last run is now; None strictly inside the message."""
        if x <= self.at:
            return x
        if x >= self.old_end:
            return x + self.new_end - self.old_end
        return None


def _move_all(found: Sequence[Diagnostic], move: _Move) -> tuple[Diagnostic, ...] | None:
    if move.new_end == move.old_end:
        # Nothing moves; only offsets strictly inside the message could be wrong.
        inside = move.offset
        if all(_all_offsets(d, inside) for d in found):
            return tuple(found)
        return None

    def shift(r: TextRange) -> TextRange | None:
        start, end = move.offset(r.start), move.offset(r.end)
        if start is None or end is None:
            return None
        return r if start == r.start and end == r.end else TextRange(start, end)

    res = []
    for d in found:
        moved = _map_diagnostic(d, shift)
        if moved is None:
            return None
        res.append(moved)
    return tuple(res)


def _all_offsets(d: Diagnostic, offset: Callable[[int], int | None]) -> bool:
    ranges = []
    if d.path is None:
        ranges.append(d.range)
        if d.fix is not None:
            ranges.extend(e.range for e in d.fix.edits)
    ranges.extend(r.range for r in d.related if r.path is None)
    return all(offset(r.start) is not None and offset(r.end) is not None for r in ranges)


def _absolute(d: Diagnostic) -> Diagnostic:
    res = _map_diagnostic(d, _plain)
    assert res is not None
    return res


def _plain(r: TextRange) -> TextRange:
    """An absolute copy of a range that may follow an anchor."""
    return r if type(r) is TextRange else TextRange(r.start, r.end)


def _map_diagnostic(
    d: Diagnostic, doc: Callable[[TextRange], TextRange | None]
) -> Diagnostic | None:
    """``d`` with ``doc`` applied to its ranges in the document (None if one fails) and
    the ranges in other files copied as they are."""

    def other(r: TextRange) -> TextRange:
        return _plain(r)

    own = doc if d.path is None else other
    rng = own(d.range)
    if rng is None:
        return None
    related = []
    for r in d.related:
        moved = (doc if r.path is None else other)(r.range)
        if moved is None:
            return None
        related.append(r if moved is r.range else Related(moved, r.message, r.path))
    fix = d.fix
    if fix is not None:
        edits = []
        for e in fix.edits:
            moved = own(e.range)
            if moved is None:
                return None
            edits.append(e if moved is e.range else TextEdit(moved, e.new_text))
        if any(a is not b for a, b in zip(edits, fix.edits, strict=True)):
            fix = Fix(fix.title, tuple(edits))
    if (
        rng is d.range
        and fix is d.fix
        and all(a is b for a, b in zip(related, d.related, strict=True))
    ):
        return d
    return dataclasses.replace(d, range=rng, related=tuple(related), fix=fix)


def _count_change(old: TextLike, new: TextLike, span: _Move) -> int:
    """How many more ``COMMENT_MARK``s ``new`` has than ``old``, which differ only in
    ``span``: counted in the span widened by the mark's length less one on each side (a
    mark across the span's edge is in the window; one across the window's edge is outside
    the span, so in both texts alike)."""
    reach = len(COMMENT_MARK) - 1
    a = max(0, span.at - reach)
    before = old[a : min(len(old), span.old_end + reach)].count(COMMENT_MARK)
    return new[a : min(len(new), span.new_end + reach)].count(COMMENT_MARK) - before


def _count(text: TextLike, needle: str) -> int:
    """Occurrences of ``needle`` in the whole text (a full run reads it all anyway)."""
    return text.count(needle)  # a rope counts chunk by chunk: no joined copy
