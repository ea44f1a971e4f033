"""The rule engine: runs the rule table on one version of a document, and re-runs on the
next version only what can have changed (derived queries, as salsa has them).

What a rule reads is exactly its parameters, named by their types:

- a ``RuleContext``: the whole analysis. The rule runs every time (the rules that pass
  on what reading and assembling reported, the provider and prompt-cache rules: cheap,
  or off by default).
- *inputs*: typed summaries of the analysis (``inputs.py``; frozen values), each made by
  one *query* registered with ``@query`` from the ``Source`` (the version being checked,
  which no rule ever sees) or from other inputs. After each run the engine keeps every
  input's value; an input equal (``==``) to the last one is *unchanged* (early cut-off),
  and a rule none of whose inputs changed keeps its findings. That is the only
  invalidation there is: no rule says what it reads except by its parameters, so none
  can forget to.
- a per-message rule's first parameter is a ``MessageSource`` (one message of the current
  branch, with its source text and tree): it runs once per message object and per value
  of its other inputs. The incremental re-read shares every message object an edit did
  not touch, so typing in a message re-runs it for that message only; its findings stay
  with their message object when messages come or go before it. An ``AssistantMessage``
  first parameter narrows it to the assistant messages, and a subclass of it with an
  ``admits`` test to the stored messages that pass it (the others have no findings and are
  never seen). An input it reads only to word
  the findings a message already has, never to decide whether it has any, is marked
  ``Annotated[T, REFINES]`` (``tool-call-in-text`` reads the document's call ids for its
  fix's fresh id): when only such inputs change, it runs again on the messages that had
  findings, not on every message. An input that says whether the rule applies to the
  document at all is marked ``Annotated[T, When(holds)]``: while ``holds`` is false of its
  value, no message is visited (``tool-call-markup-in-text`` looks only when no tools are
  declared, ``tool-call-in-text`` only when some are).

Positions. Inputs never compare positions: ranges are left out of their equality
(``shape_key``), since an edit before a message moves it without changing it. A finding's
offsets are therefore kept relative to where they lie: inside (or at the end of) a
message, relative to that message's start, and valid while that message object is in the
document; in the gap before a message, relative to that message; elsewhere (before the
first message, after the last one) as they are, valid while the text before them is
unchanged. A document rule whose inputs are unchanged keeps its findings even when
messages came or went: each moves with its messages (by object) to their new indexes. A
finding with an offset no longer valid (its message gone, or outside the messages at or
after where the text changed) makes its rule run again; the others
are placed in the current version when the diagnostics are produced, with
``message_start`` (the one place that knows where a message is). Fixes whose edits read
the text around a message (``LateFix``) are made for the current version then too.
"""

from __future__ import annotations

import bisect
import dataclasses
import inspect
import itertools
import operator
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from assembly.diagnostics.core import (
    Diagnostic,
    Fix,
    LateFix,
    LateRange,
    MessageMemo,
    Related,
    Rule,
    RuleContext,
    TextEdit,
)
from assembly.diagnostics.window import TextLike, Windows, line_start
from assembly.model import ASSISTANT_ROLE, Message, Role
from assembly.rope import Rope
from assembly.seq import common_ends, differing, nearer
from assembly.syntax import SNode, item_at
from assembly.text import RelRange, TextRange

__all__ = [
    "REFINES",
    "AssistantMessage",
    "MessageSource",
    "RuleCache",
    "Source",
    "When",
    "message_start",
    "query",
    "rule_kind",
]


_T = TypeVar("_T")


def message_start(m: Message) -> int:
    """The absolute offset of message ``m`` (a message of ``Conversation.messages``: a view
    of one version) in that version."""
    return m.range.start


def message_end(m: Message) -> int:
    """The absolute offset of the end of message ``m`` (a view of one version)."""
    return m.range.end


# ------------------------------------------------------------------------------ source


class Source:
    """The version being checked, as the queries read it (never given to a rule).

    ``messages`` are the stored messages (``Conversation.message_data``: position-free,
    shared between versions), ``views`` the same seen in this version
    (``Conversation.messages``); ``changed`` holds the indexes of the stored messages that
    are new since the last run (None: all of them, or the first run; when messages came
    or went, the others moved: ``RuleCache._moved``, its splice); ``cache`` is the engine's state,
    which queries may use to build their values message by message.
    """

    __slots__ = ("cache", "changed", "ctx", "messages", "views")

    def __init__(
        self,
        ctx: RuleContext,
        messages: tuple[Message, ...],
        changed: list[int] | None,
        cache: RuleCache,
    ) -> None:
        self.ctx = ctx
        self.messages = messages
        conv = ctx.conversation
        self.views: Sequence[Message] = conv.messages if conv is not None else ()
        self.changed = changed
        self.cache = cache

    def per_message(self, kind: str, make: Callable[[Message], Any]) -> list[Any]:
        """``[make(m) for m in messages]`` (the stored messages), computed only for those
        that are new since the last run (the others' values are kept, by ``kind``)."""
        prev = self.cache._facts.get(kind)
        msgs = self.messages
        if prev is None or self.changed is None:
            values = list(map(make, msgs))
        elif self.cache._moved:  # messages came or went: the others' values move with them
            values = self.cache.moved_values(prev)
            for i in self.changed:
                values[i] = make(msgs[i])
        elif len(prev) != len(msgs):
            values = list(map(make, msgs))
        else:
            values = list(prev)
            for i in self.changed:
                values[i] = make(msgs[i])
        self.cache._facts_next[kind] = values
        return values

    def indexes(
        self, kind: str, flags: Callable[[Iterable[int]], Iterable[object]]
    ) -> tuple[int, ...]:
        """The indexes ``i`` of the stored messages for which ``flags`` is true
        (``flags(indexes)``: a truth value per index, for a message alone), in order.

        One implementation: from the last run's indexes (by ``kind``) and the messages
        new since (a message keeps its flag while its object is the same), else from
        every message (the first run, or the last run did not ask)."""
        cache = self.cache
        prev: tuple[int, ...] | None = cache._facts.get(kind)
        changed, n = self.changed, len(self.messages)
        res: tuple[int, ...]
        if prev is None or changed is None:
            res = tuple(itertools.compress(itertools.count(), flags(range(n))))
        elif cache._moved:  # messages came or went: a splice
            head, mid, tail = cache._splice
            a, b = bisect.bisect_left(prev, head), bisect.bisect_left(prev, tail)
            between = range(head, head + len(mid))
            shift = head + len(mid) - tail
            res = (
                *prev[:a],
                *itertools.compress(between, flags(between)),
                *map(shift.__add__, prev[b:]),
            )
        else:  # messages replaced in place
            res = prev
            for i, flag in zip(changed, flags(changed), strict=True):
                k = bisect.bisect_left(res, i)
                has = k < len(res) and res[k] == i
                if has and not flag:
                    res = res[:k] + res[k + 1 :]
                elif flag and not has:
                    res = (*res[:k], i, *res[k:])
        cache._facts_next[kind] = res
        return res


class MessageSource:
    """One message as a per-message rule sees it: the message (seen in this version), its
    source tree node and
    its text (``text`` reads only the message's own lines, in document offsets); the node
    and the text are found when first asked for (``inputs.message_source``)."""

    __slots__ = ("_ctx", "_index", "_message", "_node", "_text", "_views", "format", "stored")
    role: Role | None = None  # the role of the messages the rule reads (None: every one)
    # Whether the rule reads a stored message of that role at all (None: it reads each),
    # asked of the message alone: a message it does not admit has no findings, and no
    # view of it is made (``tool-call-in-text`` reads the texts that may hold a call).
    admits: Callable[[Message], bool] | None = None

    def __init__(
        self,
        message: Message | None,
        ctx: RuleContext,
        fmt: Any = False,
        stored: Message | None = None,
        views: Sequence[Message] = (),
        index: int = 0,
    ) -> None:
        # ``message`` None: ``views[index]``, seen when first asked for (a rule that finds
        # nothing in most messages reads ``stored``, the same message without positions).
        self._message = message
        self.stored: Message = stored if stored is not None else message  # type: ignore[assignment]
        self._views = views
        self._index = index
        self._ctx = ctx
        if fmt is False:  # not given: the conversation's
            conv = ctx.conversation
            fmt = conv.format if conv is not None else None
        self.format = fmt
        self._node: Any = None
        self._text: TextLike | None = None

    @property
    def message(self) -> Message:
        """The message seen in this version (its ranges)."""
        m = self._message
        if m is None:
            m = self._message = self._views[self._index]
        return m

    @property
    def node(self) -> Any:  # SNode | None
        if self._text is None:
            self._find()
        return self._node

    @property
    def text(self) -> TextLike:
        if self._text is None:
            self._find()
        assert self._text is not None
        return self._text

    def _find(self) -> None:
        self._node = message_node(self._ctx, self.message)
        self._text = message_text(self._ctx, self.message)


class AssistantMessage(MessageSource):
    """An assistant message as a per-message rule sees it: a rule whose first parameter
    has this type reads assistant messages only (the engine gives it no other)."""

    __slots__ = ()
    role: Role | None = ASSISTANT_ROLE


def message_node(ctx: RuleContext, m: Message) -> SNode | None:
    """The source tree node of message ``m`` (None: not found)."""
    conv = ctx.conversation
    root = conv.root if conv is not None else None
    array: SNode | None = None
    if root is not None and root.is_array:
        array = root
    elif root is not None and root.is_object:
        held = root.get("messages")
        array = held if held is not None and held.is_array else None
    if array is None:
        return None
    item = item_at(array, message_start(m))
    if item is not None and item.range == m.range and item.is_object:
        return item
    return None


def message_text(ctx: RuleContext, m: Message) -> TextLike:
    """The text of message ``m``'s lines (readable nowhere else)."""
    text = ctx.text
    lo = line_start(text, message_start(m))
    hi = min(len(text), message_end(m) + 2)
    return Windows(((lo, text[lo:hi]),))


@dataclass(frozen=True, slots=True)
class _Query:
    """An input of the rules: the function that makes it and what it reads."""

    fn: Callable[..., Any]
    params: tuple[type, ...]  # inputs, or a ``Source``: then it is made every run


QUERIES: dict[type, _Query] = {}
# The inputs the engine itself reads (set by ``inputs``): "messages", the messages'
# shapes (the memo's values kept by shapes are made again when it changes); "branch",
# whose ``indexes`` are the messages per-message rules see; "suppressions", whose
# ``indexes`` are the messages with an ignore key; "kinds", whose ``callers`` are the
# messages that make tool calls (``MessageMemo.callers``).
ROLES: dict[str, type] = {}


def query(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Register ``fn`` as the query that makes the input type it returns.

    Its parameters are inputs (by type) and may include the ``Source`` (it then reads
    the version, and is made again every run). Its value must be immutable, compare by
    value and leave positions out of the comparison. A value that holds places (a
    ``Branch``, to find a finding's range) has ``placed(input)``: when the engine keeps it
    from an earlier version (its inputs unchanged), it gets it seen in the current one
    (``input(T)``: the value of input ``T`` in this run).
    """
    hints = typing.get_type_hints(fn)
    out = hints.pop("return")
    params = tuple(hints[p] for p in inspect.signature(fn).parameters)
    if out in QUERIES:
        raise ValueError(f"two queries make {out.__name__}")
    QUERIES[out] = _Query(fn, params)
    return fn


# Marks an input of a per-message rule that never decides whether a message has findings,
# only what they say (``Annotated[CallIds, REFINES]``: a fix's fresh id must be none of the
# document's ids). When only such inputs change, the rule runs again on the messages that
# had findings, not on every message (a delete that removes a message making calls).
REFINES = object()


@dataclass(frozen=True, slots=True)
class When:
    """Marks an input of a per-message rule that says, for the whole document, whether the
    rule applies at all (``Annotated[Tools, When(undeclared)]``: the markup of a model's
    own tool calls is looked for only when no tools are declared). When ``holds`` is
    false of the input's value, the rule visits no message and has no findings, and keeps
    nothing: once it holds again, every message is checked. (Visiting each message to
    find it has nothing to do cost 3.5 µs a message: 14 ms at the open of a 10 MB
    conversation.)"""

    holds: Callable[[Any], bool]


def rule_kind(rule: Rule) -> tuple[str, tuple[type, ...]]:
    """``("whole" | "message" | "document", parameter types)`` of a rule."""
    hit = _KINDS.get(rule.check)
    if hit is None:
        hit = _KINDS[rule.check] = _rule_kind(rule)
    return hit


_KINDS: dict[Callable[..., Any], tuple[str, tuple[type, ...]]] = {}
_MARKS: dict[Callable[..., Any], tuple[tuple[Any, ...], ...]] = {}


def _marks(rule: Rule) -> tuple[tuple[Any, ...], ...]:
    """The ``Annotated`` marks of each of a per-message rule's inputs after the message."""
    hit = _MARKS.get(rule.check)
    if hit is None:
        hints = typing.get_type_hints(rule.check, include_extras=True)
        names = list(inspect.signature(rule.check).parameters)[1:]
        hit = _MARKS[rule.check] = tuple(
            getattr(hints.get(name), "__metadata__", ()) for name in names
        )
    return hit


def refining(rule: Rule) -> frozenset[int]:
    """The positions, among a per-message rule's inputs after the message, of those marked
    ``REFINES``."""
    return frozenset(k for k, marks in enumerate(_marks(rule)) if REFINES in marks)


def gates(rule: Rule) -> list[tuple[int, Callable[[Any], bool]]]:
    """``(position, holds)`` of each input of a per-message rule marked ``When(holds)``,
    among its inputs after the message."""
    return [
        (k, m.holds) for k, marks in enumerate(_marks(rule)) for m in marks if isinstance(m, When)
    ]


def _rule_kind(rule: Rule) -> tuple[str, tuple[type, ...]]:
    hints = typing.get_type_hints(rule.check)
    # A parameter without a type reads the whole analysis.
    params = tuple(hints.get(p, RuleContext) for p in inspect.signature(rule.check).parameters)
    if RuleContext in params:
        if params != (RuleContext,):
            raise TypeError(f"{rule.code}: a RuleContext is the only parameter or none")
        return "whole", params
    if params and isinstance(params[0], type) and issubclass(params[0], MessageSource):
        kind = "message"
        rest = params[1:]
    else:
        kind, rest = "document", params
    for p in rest:
        if p not in QUERIES:
            raise TypeError(f"{rule.code}: no query makes {getattr(p, '__name__', p)}")
    return kind, params


# ------------------------------------------------------------------------------ findings


@dataclass(slots=True)
class _Kept:
    """A finding as kept between runs: the diagnostic in the coordinates of the run that
    made it, where each of its document offsets is anchored, and the anchors' starts."""

    diagnostic: Diagnostic
    anchor_of: dict[int, int]  # offset → index of its message (-1: not in a message)
    objects: dict[int, tuple[Message, int]]  # index → (message object, its start then)
    # The last placing (``_Run._place``): the starts its messages had, and the result.
    placed: tuple[tuple[int, ...], Diagnostic] | None = None


@dataclass(slots=True)
class _RuleState:
    """A whole-document rule's findings, and the inputs they were made from."""

    verified: int  # the run at which its findings were last known current
    args: tuple[object, ...]
    found: list[_Kept]


@dataclass(slots=True)
class _MessageRuleState:
    """A per-message rule's findings, by message object (its ``id``: the state holds the
    objects, so no other live object has it): they stay with a message that moves."""

    verified: int
    args: tuple[object, ...]  # the inputs besides the message
    # Only messages with findings: (the message's index when they were kept, it, them).
    found: dict[int, tuple[int, Message, list[_Kept]]]
    done: dict[int, Message]  # the message objects it ran on (with or without findings)
    branch: object = None  # the branch indexes it was run for


def _offsets(d: Diagnostic) -> Iterable[int]:
    """The document offsets of ``d`` (ranges in other files are not moved)."""
    if d.path is None:
        yield d.range.start
        yield d.range.end
        if d.fix is not None:
            for e in d.fix.edits:
                yield e.range.start
                yield e.range.end
    for r in d.related:
        if r.path is None:
            yield r.range.start
            yield r.range.end


def _map(d: Diagnostic, move: Callable[[int], int]) -> Diagnostic:
    """``d`` with its document offsets moved by ``move``."""

    def doc(r: TextRange) -> TextRange:
        if isinstance(r, LateRange):
            return r  # found when the diagnostics are produced
        return TextRange(move(r.start), move(r.end))

    rng = doc(d.range) if d.path is None else d.range
    related = tuple(
        Related(doc(r.range), r.message, r.path) if r.path is None else r for r in d.related
    )
    fix = d.fix
    if fix is not None and d.path is None and not isinstance(fix, LateFix):
        fix = Fix(fix.title, tuple(TextEdit(doc(e.range), e.new_text) for e in fix.edits))
    elif isinstance(fix, LateFix):
        fix = dataclasses.replace(fix)
    return Diagnostic(d.code, d.severity, d.message, rng, d.path, related, fix, d.unnecessary)


# ------------------------------------------------------------------------------ the cache


class TextFacts:
    """What the suppressions read from a document's text, each kept with the text it was
    read from: the counts of ``RuleCache.count`` (by needle) and the comments by line
    (``diagnostics._Suppressions``)."""

    __slots__ = ("comments", "counted")

    def __init__(
        self,
        counted: dict[str, tuple[TextLike, int]] | None = None,
        comments: tuple[TextLike, Any] | None = None,
    ) -> None:
        self.counted = counted if counted is not None else {}
        self.comments = comments


class RuleCache:
    """What the engine keeps between runs on successive versions of one document.

    Pass the same object to every ``check`` of the document (the language server keeps
    it with the analysis); a fresh one reuses nothing. ``ran`` names the rules (other
    than those of the whole analysis) that the last run ran again, and ``message_runs``
    counts the runs of per-message rules on one message.
    """

    def __init__(self) -> None:
        self._run = 0
        self._messages: tuple[Message, ...] | None = None  # stored, of the last run
        self._starts: tuple[int, ...] = ()  # where they started
        self._text: TextLike | None = None
        self._values: dict[type, tuple[object, int]] = {}  # input → (value, changed at)
        self._query_args: dict[type, tuple[int, tuple[object, ...]]] = {}
        self._facts: dict[str, list[Any]] = {}
        self._facts_next: dict[str, list[Any]] = {}
        self._rules: dict[str, _RuleState] = {}
        self._message_rules: dict[str, _MessageRuleState] = {}
        self.memo = MessageMemo()  # for the rules of the whole analysis
        self.text_facts = TextFacts()
        # The edits of the message-local ``LateFix``es kept (by the fix), relative to it.
        self._late_fixes: dict[int, tuple[LateFix, Message, tuple[Any, ...]]] = {}
        # Where the ``LateRange``s of each message lie, relative to it, by key.
        self._located: dict[int, tuple[Message, dict[object, tuple[int, int]]]] = {}
        self._span: tuple[int, int, int] | None = None  # the last run's edit, when known
        # Whether messages came or went since the last run (the others kept their
        # objects): then ``_splice`` says where each one is now (``moved_index``).
        self._moved = False
        # Then also the splice: the common head's length, the old index of each message
        # between (None: new), where the common tail starts in the last run's messages.
        self._splice: tuple[int, list[int | None], int] = (0, [], 0)
        self._gone: set[int] = set()  # the indexes of the last run's messages now gone
        self._before: TextLike | None = None  # the text of the run before the last
        self.ran: tuple[str, ...] = ()
        self.message_runs = 0
        # The state of the version before the last, set aside untouched when the last run
        # saw messages come or go: when the text comes back (an undo, a redo: the host
        # gives back that version's messages, the same objects; ``-`` typed at a YAML
        # item's line start ends the list, deleting it brings the items back) the run goes
        # on from it (``_generation``).
        self._older: RuleCache | None = None

    def fork(self) -> RuleCache:
        """A copy of this state that runs on without changing this one: what a run
        changes in place is copied (its tables; the values in them are immutable or, in
        the memo and the located ranges, pure values of one message object)."""
        res = RuleCache.__new__(RuleCache)
        res.__dict__.update(self.__dict__)
        res._values = dict(self._values)
        res._query_args = dict(self._query_args)
        res._facts = dict(self._facts)
        res._facts_next = {}
        res._rules = {k: dataclasses.replace(v) for k, v in self._rules.items()}
        res._message_rules = {
            k: dataclasses.replace(v, found=dict(v.found), done=dict(v.done))
            for k, v in self._message_rules.items()
        }
        res.memo = self.memo.fork()
        res.text_facts = TextFacts(dict(self.text_facts.counted), self.text_facts.comments)
        res._located = dict(self._located)
        res._gone = set(self._gone)
        res._older = None
        return res

    def _generation(self, msgs: tuple[Message, ...]) -> None:
        """Before a run on ``msgs``: when the state set aside (the version before the
        last) is nearer to them than this one (``seq.nearer``: they came back, or the list
        ended one item from where it ended before), the two trade places; when messages
        came or went since the last run, this state is set aside (a ``fork``: a copy of its
        tables, 0.3 ms at 10 MB) before the run changes it. Either way the run is the one
        implementation, on a state kept from an earlier version."""
        prev, older = self._messages, self._older
        if prev is None:
            return
        if older is not None and older._messages is not None and len(prev) != len(msgs):
            if nearer(older._messages, prev, msgs):
                self._older = None
                mine = self.__dict__
                self.__dict__ = older.__dict__
                older.__dict__ = mine
                self._older = older
                return
        if len(prev) != len(msgs):
            self._older = self.fork()

    def moved_values(self, values: list[Any]) -> list[Any]:
        """A value per message of the last run (``values``) moved to the index each
        message has now (None for the new ones), when messages came or went: slices at C
        speed around the splice."""
        head, mid, tail = self._splice
        return [
            *values[:head],
            *(values[o] if o is not None else None for o in mid),
            *values[tail:],
        ]

    def moved_index(self, o: int) -> int | None:
        """The index now of the message at ``o`` in the last run, when messages came or
        went (None: gone)."""
        head, mid, tail = self._splice
        if o < head:
            return o
        if o >= tail:
            return o - tail + head + len(mid)
        return head + mid.index(o) if o in mid else None

    def input(self, t: type[_T]) -> _T:
        """The value of input ``t`` in the last run (which must have made it)."""
        return self._values[t][0]  # type: ignore[return-value]

    # -- what the suppressions need

    def count(self, text: TextLike, needle: str) -> int:
        """Occurrences of ``needle`` in ``text``, counted in the span that changed since
        the last call when both texts are ropes."""
        counted = self.text_facts.counted
        last = counted.get(needle)
        n: int | None = None
        if last is not None and last[0] is text:
            n = last[1]
        elif last is not None and (
            (self._span is not None and self._before is last[0])
            or (isinstance(text, Rope) and isinstance(last[0], Rope))
        ):
            old = last[0]
            if self._span is not None and self._before is old:
                p, old_end, new_end = self._span
            else:
                p, old_end, new_end = text.changed_span(old)  # type: ignore[union-attr]
            reach = len(needle) - 1  # a mark across the span's edge is in the window
            a = max(0, p - reach)
            before = old[a : min(len(old), old_end + reach)].count(needle)
            n = last[1] + text[a : min(len(text), new_end + reach)].count(needle) - before
        if n is None:
            n = text.count(needle)  # a rope counts without joining
        counted[needle] = (text, n)
        return n

    # -- one run

    def run(
        self,
        ctx: RuleContext,
        rules: Sequence[Rule],
        edit: tuple[TextLike, int, int, int] | None = None,
    ) -> list[Diagnostic]:
        """The findings of ``rules`` on ``ctx`` (unsorted, unsuppressed, in ``ctx``'s
        coordinates); ``edit``: where ``ctx.text`` differs from an older text (``check``)."""
        conv = ctx.conversation
        msgs = conv.message_data if conv is not None else ()
        self._generation(msgs)
        self._run += 1
        changed = self._changed(msgs, ctx.text, conv)
        if self._span is None and edit is not None and edit[0] is self._text:
            self._span = edit[1:]  # where the text changed, given
        run = _Run(self, ctx, msgs, changed)
        res: list[Diagnostic] = []
        try:
            for rule in rules:
                res.extend(run.findings(rule))
        except BaseException:
            self.__init__()  # type: ignore[misc]  # nothing half-made is kept
            raise
        self._messages = msgs
        self._starts = conv.starts if conv is not None else ()
        self._before = self._text
        self._text = ctx.text
        self._facts = self._facts_next
        self._facts_next = {}
        self.ran = tuple(run.ran)
        self._late_fixes = run.late_fixes  # those still shown
        self.message_runs = run.message_runs
        self.memo.end_run()
        return res

    def _changed(self, msgs: tuple[Message, ...], text: TextLike, conv: Any) -> list[int] | None:
        """The indexes of the new message objects (None: all); and ``_span``, where the
        text changed when that is one edit inside one message."""
        prev = self._messages
        self._span = None
        self._moved = False
        if prev is None:
            self.memo.clear()
            self._located.clear()
            return None
        if len(prev) != len(msgs):
            gone, self._splice = _moves(prev, msgs)
            self._moved, self._gone = True, gone
            # The values of the messages kept stay (kept with their objects; the places
            # found in them are relative to them: they move to their new indexes).
            for o in gone:
                self.memo.forget(prev[o])
            located = self._located
            head, mid, tail = self._splice
            if located:
                between = {o: j for j, o in enumerate(mid, head) if o is not None}
                shift = head + len(mid) - tail

                def now(o: int) -> int | None:
                    return o if o < head else o + shift if o >= tail else between.get(o)

                self._located = {j: v for o, v in located.items() if (j := now(o)) is not None}
            new = map(operator.is_, mid, itertools.repeat(None))
            return list(itertools.compress(itertools.count(head), new))
        res = differing(prev, msgs)
        for i in res:
            self.memo.forget(prev[i])
            self._located.pop(i, None)
        if len(res) == 1 and len(msgs) > 1 and self._text is not None:
            # One new message in place of one old: the re-read shares the others only when
            # the edit lies inside it, so the text outside it is unchanged if the lengths
            # add up (a single message proves nothing about the text around it).
            i = res[0]
            old, new = prev[i], msgs[i]
            if isinstance(old.range, RelRange) and isinstance(new.range, RelRange):
                start = self._starts[i]
                old_end, new_end = start + old.range.end, start + new.range.end
                same_start = conv.starts[i] == start
                if same_start and len(text) - len(self._text) == new_end - old_end:
                    self._span = (start, old_end, new_end)
        return res


class _Run:
    """One run of the engine."""

    def __init__(
        self,
        cache: RuleCache,
        ctx: RuleContext,
        msgs: tuple[Message, ...],
        changed: list[int] | None,
    ) -> None:
        self.cache = cache
        self.ctx = ctx
        self.msgs = msgs  # stored
        self.changed = changed
        self.source = Source(ctx, msgs, changed, cache)
        self.views = self.source.views
        self.values: dict[type, tuple[object, int]] = {}
        self.ran: list[str] = []
        self.message_runs = 0
        self._starts: list[int] | None = None
        self._first_change: int | bool | None = False  # False: not computed yet
        self._where: dict[int, int] | None = None  # id(stored message) → its index
        self._msg_ids: list[int] | None = None  # id(stored message) by index
        self._off: tuple[frozenset[int], list[int]] | None = None
        self.whole = dataclasses.replace(ctx, memo=cache.memo)
        self.late_fixes: dict[int, tuple[LateFix, Message, tuple[Any, ...]]] = {}
        cache.memo.callers = None
        if ctx.conversation is not None:
            if self.value(ROLES["messages"])[1] == cache._run:
                cache.memo.shapes = object()  # values kept by shapes are made again
            self.value(ROLES["suppressions"])
            callers: Any = self.value(ROLES["kinds"])[0]
            cache.memo.callers = tuple(map(msgs.__getitem__, callers.callers))

    # -- inputs

    def value(self, t: type) -> tuple[object, int]:
        """The value of input ``t`` in this run and the run at which it last changed."""
        hit = self.values.get(t)
        if hit is not None:
            return hit
        cache = self.cache
        q = QUERIES[t]
        last = cache._values.get(t)
        if Source in q.params:  # reads the version: made again every run
            v = q.fn(*(self.source if p is Source else self.value(p)[0] for p in q.params))
        else:
            args = [self.value(p) for p in q.params]
            before = cache._query_args.get(t)
            if (
                last is not None
                and before is not None
                and all(changed <= before[0] for _, changed in args)
            ):
                v = last[0]
            else:
                v = q.fn(*(a for a, _ in args))
            cache._query_args[t] = (cache._run, tuple(a for a, _ in args))
        if last is not None and v is last[0] and hasattr(v, "placed"):
            # Kept from an earlier version: an input that reads places is seen in this one.
            v = v.placed(self._input)
        if last is not None and (last[0] is v or last[0] == v):
            res = (v, last[1])  # unchanged: the rules that read it keep their findings
        else:
            res = (v, cache._run)
        self.values[t] = cache._values[t] = res
        return res

    def _input(self, t: type) -> object:
        return self.value(t)[0]

    # -- rules

    def findings(self, rule: Rule) -> list[Diagnostic]:
        kind, params = rule_kind(rule)
        if kind == "whole":
            return [self._late(d) for d in rule.check(self.whole)]
        if kind == "message":
            return self._per_message(rule, params[1:])
        args = [self.value(p) for p in params]
        state = self.cache._rules.get(rule.code)
        values = tuple(a for a, _ in args)
        if state is not None and all(changed <= state.verified for _, changed in args):
            # Its inputs are unchanged: its findings stand, moved with their messages
            # (None: one lies where the text changed, or its message is gone).
            kept = list(map(self._current, state.found))
            if None not in kept:
                state.verified = self.cache._run
                state.args = values
                state.found = kept  # type: ignore[assignment]
                return [self._place(k) for k in kept]  # type: ignore[arg-type]
        self.ran.append(rule.code)
        found = list(rule.check(*values))
        kept = [self._keep(d, None) for d in found]
        self.cache._rules[rule.code] = _RuleState(self.cache._run, values, kept)
        return [
            _placed(k, tuple(s for _, s in k.objects.values()), self._late(d))
            for k, d in zip(kept, found, strict=True)
        ]

    def _per_message(self, rule: Rule, params: tuple[type, ...]) -> list[Diagnostic]:
        args = [self.value(p) for p in params]
        cache = self.cache
        for k, holds in gates(rule):
            if not holds(args[k][0]):  # it applies to no message of this document
                cache._message_rules.pop(rule.code, None)
                return []
        branch: Any = self.value(ROLES["branch"])[0]
        state = cache._message_rules.get(rule.code)
        values = tuple(a for a, _ in args)
        msgs = self.msgs
        redo: list[tuple[int, Message]] = []  # with findings, made with other refining inputs
        if state is not None and not all(changed <= state.verified for _, changed in args):
            fine = refining(rule)
            if fine and all(
                changed <= state.verified for k, (_, changed) in enumerate(args) if k not in fine
            ):
                # Only what words the findings changed: the messages without findings keep
                # none; those with findings are checked again (as new messages are).
                redo = [(i, m) for i, m, _ in state.found.values()]
                for key in state.found:
                    state.done.pop(key, None)
                state.found = {}
                state.args = values
            else:
                state = None
        if state is None:
            state = _MessageRuleState(cache._run, values, {}, {})
            cache._message_rules[rule.code] = state
        done, found = state.done, state.found
        prev = cache._messages
        todo: list[int]
        if (
            (state.branch is branch.indexes or state.branch == branch.indexes)
            and self.changed is not None
            and not cache._moved
            and prev is not None
        ):
            todo = [i for i in self.changed if i in branch.indexes]
            for i in self.changed:  # the old objects of the new messages are gone
                done.pop(id(prev[i]), None)
                found.pop(id(prev[i]), None)
        elif (
            self.changed is not None
            and cache._moved
            and prev is not None
            and state.verified == cache._run - 1
            and isinstance(state.branch, frozenset)
        ):
            # Messages came or went since the last run, which left every message of its
            # branch done: the new ones, and the kept ones that were off that branch.
            for o in cache._gone:
                done.pop(id(prev[o]), None)
                found.pop(id(prev[o]), None)
            on = branch.indexes
            todo = [i for i in self.changed if i in on]
            if len(state.branch) < len(prev):
                for o in self._off_branch(state.branch, len(prev)):
                    j = cache.moved_index(o)
                    if j is not None and j in on and done.get(id(msgs[j])) is not msgs[j]:
                        todo.append(j)
                todo.sort()
        else:
            # The messages not done (in a pass at C speed), those of the branch.
            stale = map(operator.is_not, map(done.get, self._ids()), msgs)
            on = branch.indexes
            todo = list(itertools.compress(itertools.count(), stale))
            if len(on) != len(msgs):  # (else every message is on the branch)
                todo = [i for i in todo if i in on]
            if len(done) > len(msgs) + 64:  # forget the messages that are gone
                live = set(map(id, msgs))
                state.done = done = {k: m for k, m in done.items() if k in live}
                state.found = found = {k: v for k, v in found.items() if k in live}
        if redo:
            again = (self._index_of(m, i) for i, m in redo)
            todo = sorted({*todo, *(j for j in again if j is not None and j in branch.indexes)})
        source: type[MessageSource] = rule_kind(rule)[1][0]
        role, admits = source.role, source.admits
        if role is not None or admits is not None:  # the others: done without the rule
            mine = todo
            if role is not None:
                roles = map(_ROLE, map(msgs.__getitem__, mine))
                mine = list(itertools.compress(mine, map(role.__eq__, roles)))
            if admits is not None:
                mine = list(itertools.compress(mine, map(admits, map(msgs.__getitem__, mine))))
            if len(mine) != len(todo):
                rest = itertools.filterfalse(set(mine).__contains__, todo)
                others = list(map(msgs.__getitem__, rest))
                done.update(zip(map(id, others), others, strict=True))
                if found:
                    for m in others:
                        found.pop(id(m), None)
            todo = mine
        check, views, ctx = rule.check, self.views, self.ctx
        fmt = ctx.conversation.format if ctx.conversation is not None else None
        self.message_runs += len(todo)
        for i in todo:
            m = msgs[i]
            made = list(check(source(None, ctx, fmt, m, views, i), *values))
            done[id(m)] = m
            if made:
                found[id(m)] = (i, m, [self._keep(d, i) for d in made])
            elif found:
                found.pop(id(m), None)
        state.verified = cache._run
        state.branch = branch.indexes
        placed: list[tuple[int, list[_Kept]]] = []
        for key, (i, m, kept) in list(found.items()):
            j = i if i < len(msgs) and msgs[i] is m else self._index_of(m, i)
            if j is None:
                del found[key]
                continue
            if j != i:
                kept = [_reindexed(k, {i: j}) for k in kept]
                found[key] = (j, m, kept)
            if j in branch.indexes:
                placed.append((j, kept))
        placed.sort(key=_FIRST)
        return [self._place(k) for _, kept in placed for k in kept]

    def _off_branch(self, on: frozenset[int], n: int) -> list[int]:
        """The indexes below ``n`` not in ``on`` (made once per run for the last run's
        branch, which every per-message rule reads)."""
        hit = self._off
        if hit is None or hit[0] is not on:
            if len(on) == n and max(on, default=-1) < n:
                off: list[int] = []  # (``n`` indexes below ``n``: every one)
            else:
                off = list(itertools.filterfalse(on.__contains__, range(n)))
            hit = self._off = (on, off)
        return hit[1]

    def _ids(self) -> list[int]:
        """``id`` of each stored message of this version (made once per run)."""
        if self._msg_ids is None:
            self._msg_ids = list(map(id, self.msgs))
        return self._msg_ids

    def _index_of(self, m: Message, was: int | None = None) -> int | None:
        """The index of the stored message ``m`` in this version (None: not in it);
        ``was``: its index in the last run, when known (where it went is then found
        without a table of every message)."""
        if was is not None and self.cache._moved:
            j = self.cache.moved_index(was)
            if j is not None and j < len(self.msgs) and self.msgs[j] is m:
                return j
        if self._where is None:
            msgs = self.msgs
            self._where = dict(zip(self._ids(), range(len(msgs)), strict=True))
        j = self._where.get(id(m))
        return j if j is not None and self.msgs[j] is m else None

    # -- positions

    def _keep(self, d: Diagnostic, owner: int | None) -> _Kept:
        """Anchor the offsets of a new finding (``owner``: all in that message)."""
        msgs = self.msgs
        d = _map(d, _same)  # plain ranges: an anchored one would move with its message
        anchor_of: dict[int, int] = {}
        objects: dict[int, tuple[Message, int]] = {}
        for x in _offsets(d):
            if x in anchor_of:
                continue
            i = owner if owner is not None else self._anchor(x)
            anchor_of[x] = i
            if i >= 0 and i not in objects:
                objects[i] = (msgs[i], self._start(i))
        return _Kept(d, anchor_of, objects)

    def _anchor(self, x: int) -> int:
        """The message whose start ``x`` is kept relative to (-1: none)."""
        msgs = self.msgs
        if not msgs:
            return -1
        if self._starts is None:
            conv = self.ctx.conversation
            relative = conv is not None and isinstance(msgs[0].range, RelRange)
            self._starts = (
                list(conv.starts) if relative else [message_start(v) for v in self.views]  # type: ignore[union-attr]
            )
        i = bisect.bisect_right(self._starts, x) - 1
        if i < 0:
            return -1
        if x <= message_end(self.views[i]):
            return i
        return i + 1 if i + 1 < len(msgs) else -1  # in a gap: relative to the next one

    def _start(self, i: int) -> int:
        """Where message ``i`` starts in this version (a relative message: from the
        version's table of starts, without a view)."""
        r = self.msgs[i].range
        if isinstance(r, RelRange):
            return self.ctx.conversation.starts[i] + r.start  # type: ignore[union-attr]
        return message_start(self.views[i])

    def _current(self, k: _Kept) -> _Kept | None:
        """A kept finding of a document rule with its message indexes of this version
        (None: one of its messages is gone, or an offset outside messages lies at or after
        where the text changed)."""
        msgs = self.msgs
        moves: dict[int, int] = {}
        for i, (m, _) in k.objects.items():
            if i < len(msgs) and msgs[i] is m:
                continue
            j = self._index_of(m, i)
            if j is None:
                return None
            moves[i] = j
        if moves:  # one in the gap before a message that moved: the gap may have changed
            objects = k.objects
            if any(x < objects[i][1] for x, i in k.anchor_of.items() if i in moves):
                return None
        if -1 in k.anchor_of.values():
            p = self._changed_from()
            if p is not None and any(x >= p for x, i in k.anchor_of.items() if i < 0):
                return None
        return _reindexed(k, moves) if moves else k

    def _changed_from(self) -> int | None:
        """The first offset where the text differs from the last run's (None: equal)."""
        if self._first_change is not False:
            return self._first_change  # type: ignore[return-value]
        old, new = self.cache._text, self.ctx.text
        res: int | None
        if old is new:
            res = None
        elif old is None:
            res = 0
        elif self.cache._span is not None:
            res = self.cache._span[0]
        elif isinstance(old, Rope) and isinstance(new, Rope):
            p, old_end, new_end = new.changed_span(old)
            res = None if p == old_end == new_end else p
        else:
            a, b = str(old), str(new)
            res = None if a == b else _common_prefix(a, b)
        self._first_change = res
        return res

    def _locate(self, r: LateRange) -> TextRange:
        """Where ``r`` is in this version (kept, relative to its message, while the
        message object is)."""
        m = self.msgs[r.message]
        at = self._start(r.message)
        of = self.cache._located.get(r.message)
        if of is None or of[0] is not m:
            of = self.cache._located[r.message] = (m, {})
        hit = of[1].get(r.key)
        if hit is None:
            found = r.locate(MessageSource(self.views[r.message], self.ctx))
            hit = of[1][r.key] = (found.start - at, found.end - at)
        return TextRange(at + hit[0], at + hit[1])

    def _place(self, k: _Kept) -> Diagnostic:
        """A kept finding in this version's coordinates: the last placing's result while
        its messages (the same objects: ``_current``) start where they did then, unless
        its fix is made for each version (``LateFix``: it reads around its message)."""
        d = k.diagnostic
        objects = k.objects
        starts = tuple(map(self._start, objects))
        hit = k.placed
        if hit is not None:
            if hit[0] == starts:
                return hit[1]
            # Its messages all moved by one shift (an edit before them) and it lies in
            # them alone: the last placing moved by that shift.
            shift = starts[0] - hit[0][0]
            if -1 not in k.anchor_of.values() and all(
                map(shift.__eq__, map(operator.sub, starts, hit[0]))
            ):
                res = _map(hit[1], shift.__add__)
                k.placed = (starts, res)
                return res
        delta = {i: s - start for (i, (_, start)), s in zip(objects.items(), starts, strict=True)}
        if any(delta.values()):
            anchor = k.anchor_of
            d = _map(d, lambda x: x + delta.get(anchor[x], 0))
        return _placed(k, starts, self._late(d))

    def _late(self, d: Diagnostic) -> Diagnostic:
        """``d`` with its ``LateRange`` found and its ``LateFix`` made for this version."""
        if isinstance(d.range, LateRange):
            d = Diagnostic(
                d.code,
                d.severity,
                d.message,
                self._locate(d.range),
                d.path,
                d.related,
                d.fix,
                d.unnecessary,
            )
        fix = d.fix
        if not isinstance(fix, LateFix):
            return d
        edits = None
        i = fix.message
        if fix.make is not None and 0 <= i < len(self.msgs):
            kept = self.cache._late_fixes.get(id(fix)) if fix.local else None
            at = self._start(i)
            if kept is not None and kept[0] is fix and kept[1] is self.msgs[i]:
                edits = tuple(TextEdit(TextRange(at + a, at + b), new) for a, b, new in kept[2])
            else:
                edits = fix.make(self.whole, self.views[i])  # (with the memo)
                if fix.local:
                    rel = tuple(
                        (e.range.start - at, e.range.end - at, e.new_text) for e in edits or ()
                    )
                    kept = (fix, self.msgs[i], rel)
            if kept is not None:
                self.late_fixes[id(fix)] = kept
        made = Fix(fix.title, edits) if edits else None
        return dataclasses.replace(d, fix=made)


def _placed(k: _Kept, starts: tuple[int, ...], res: Diagnostic) -> Diagnostic:
    """``res``, the finding ``k`` placed where its messages start at ``starts``, kept as
    its last placing (``_Run._place``) unless it reads more than those starts: a fix made
    for each version, or a range found in a message it is not kept with."""
    d = k.diagnostic
    r = d.range
    if not isinstance(d.fix, LateFix) and (not isinstance(r, LateRange) or r.message in k.objects):
        k.placed = (starts, res)
    return res


def _same(x: int) -> int:
    return x


def _moves(
    prev: Sequence[Message], msgs: Sequence[Message]
) -> tuple[set[int], tuple[int, list[int | None], int]]:
    """The indexes of ``prev`` that are gone from ``msgs``, and the splice: the common
    head's length, the index in ``prev`` of each message between (None: new), by object
    identity (``prev`` is alive, so no other live object has its ids), and where the
    common tail starts in ``prev``. The common head and tail in passes at C speed, a
    table only for what lies between (a splice's run)."""
    n_old, n_new = len(prev), len(msgs)
    head, tail = common_ends(prev, msgs)
    old_mid = range(head, n_old - tail)
    where = dict(zip(map(id, prev[head : n_old - tail]), old_mid, strict=True))
    mid = list(map(where.get, map(id, msgs[head : n_new - tail])))
    return set(old_mid).difference(mid), (head, mid, n_old - tail)


_FIRST = operator.itemgetter(0)
_ROLE = operator.attrgetter("role")


def _reindexed(k: _Kept, moves: dict[int, int]) -> _Kept:
    """A finding kept with the messages at the indexes ``moves`` maps from, now at the
    indexes it maps to (the others stay). Its last placing stays: it reads only the
    starts of its messages (the same objects, in the same order), which ``_Run._place``
    compares, so a finding after a splice is moved by the splice's shift, not placed
    again (its ``LateRange`` found again)."""
    d = k.diagnostic
    r = d.range
    if isinstance(r, LateRange) and r.message in moves:
        d = dataclasses.replace(d, range=LateRange(moves[r.message], r.start, r.key, r.locate))
    if any(isinstance(x.range, LateRange) and x.range.message in moves for x in d.related):
        d = dataclasses.replace(
            d,
            related=tuple(
                dataclasses.replace(x, range=_late_moved(x.range, moves))
                if isinstance(x.range, LateRange)
                else x
                for x in d.related
            ),
        )
    if isinstance(d.fix, LateFix) and d.fix.message in moves:
        d = dataclasses.replace(d, fix=dataclasses.replace(d.fix, message=moves[d.fix.message]))
    anchor_of = {x: moves.get(a, a) for x, a in k.anchor_of.items()}
    objects = {moves.get(a, a): v for a, v in k.objects.items()}
    return _Kept(d, anchor_of, objects, k.placed)


def _late_moved(r: LateRange, moves: dict[int, int]) -> LateRange:
    return LateRange(moves.get(r.message, r.message), r.start, r.key, r.locate)


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    lo, step = 0, 1 << 16
    while lo < n and a[lo : lo + step] == b[lo : lo + step]:
        lo += step
    hi = min(n, lo + step)
    while lo < hi and a[lo] == b[lo]:
        lo += 1
    return lo
