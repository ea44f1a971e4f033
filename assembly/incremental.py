"""Re-reading a conversation after an edit (JSON and JSON Lines here; YAML: ``formats.yamldoc``).

``reparse_conversation`` finds the one changed span of the text (common prefix and
suffix). Every ``Message`` the edit does not touch is kept as is (the same object): its
ranges are relative to its start, so the messages after the edit move by a new entry in
the new version's table of message starts (``Conversation.starts``), not by a copy, and
the previous version is left exactly as it was (value snapshots). Two paths:

- an edit strictly inside one message (or one top-level value) of a document without
  findings (JSON, JSON Lines): that object alone is parsed and read again, even when its
  id changes (to one no other message has) or its format marks do (a role: the format is
  then told again from the memo of every message's marks);
- in such a document, an edit of the message list that the parser re-reads cleanly
  (messages pasted, deleted, merged): the items it touched are read alone and spliced in
  (``_read_items``), unless the rest could read differently (a finding, a duplicate id,
  a message read with its neighbours, ids that are places when the places move);
- any other edit after the message list's opening bracket (JSON; the document may be
  syntax-broken before and after): the parser resumes at the message the edit begins in,
  in the state a whole parse has there (inside the list, at an item), recovery included,
  and stops at the first unchanged message where the old parse was in that same state
  (after a comma, at an item), or else runs to the end; the old tree, syntax errors and
  error counts are kept around it. The tree is then read as a whole parse reads it, each
  shared message node giving the ``Message`` and findings it gave before
  (``read_parsed(previous=)``), so the result is the whole parse's by construction.

A dataset (one conversation per JSON Lines line, each record read as its line's own JSON
document) goes through the same line splice: the lines touched are parsed again, and each
line node kept gives the record it gave (``read_parsed(previous=)``).

It returns None whenever that might not give exactly what ``parse_conversation`` gives
(other providers' formats, an edit before the message list, a document near the token
limit, JSON Lines lines whose parse may depend on a record read over several lines that
may read on past them: ``_reparse_lines``); the caller then parses the whole text. A YAML text is
re-read by ``formats.yamldoc`` (the items or top-level members the edit touched, parsed
alone with libyaml), which reads one changed message with ``replace_message`` as JSON does.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from itertools import chain, compress, repeat
from operator import attrgetter, is_, is_not, itemgetter
from typing import Any

from assembly import seq
from assembly.documents import (
    MAX_DOCUMENT_CHARS,
    MAX_MESSAGES,
    Reader,
    all_read_alone,
    is_claude_code_transcript,
    is_codex_rollout,
    is_dataset,
    is_header_line,
    reads_alone,
    same_made_up_calls,
)
from assembly.formats.copilot import is_copilot_session
from assembly.formats.detect import (
    NATIVE,
    Detection,
    Tally,
    header_like,
    message_marks,
    message_nodes,
    retally,
    tally,
    top_marks,
)
from assembly.formats.gemini_cli import is_gemini_cli_session
from assembly.formats.pi import is_pi_session
from assembly.formats.yamldoc import reread_yaml
from assembly.model import Conversation, DocFormat, Issue, Message, RejectedCall
from assembly.reading import MarksMemo, read_parsed
from assembly.rope import Rope, Text
from assembly.syntax import (
    MAX_JSON_TOKENS,
    MAX_TOP_ITEMS,
    JsonParser,
    Member,
    MessagesParse,
    ParsedData,
    SNode,
    SyntaxIssue,
    absolute,
    parse_json,
    parse_jsonl,
    parse_messages,
    parse_messages_to_end,
)
from assembly.text import TextRange, sub_range


def common_prefix(a: str, b: str) -> int:
    """Length of the common prefix of ``a`` and ``b`` (binary search over C comparisons)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a.startswith(b[lo:mid], lo):  # copies only a slice of ``b``
            lo = mid
        else:
            hi = mid - 1
    return lo


def common_suffix(a: str, b: str, limit: int) -> int:
    """Length of the common suffix of ``a`` and ``b``, at most ``limit``."""
    la, lb = len(a), len(b)
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a.endswith(b[lb - mid : lb - lo], 0, la - lo):
            lo = mid
        else:
            hi = mid - 1
    return lo


def changed_span(old: Text, new: Text) -> tuple[int, int, int] | None:
    """``(p, old_end, new_end)``: ``old[p:old_end]`` became ``new[p:new_end]``; None for a
    string and a rope (comparing them would copy the rope)."""
    if isinstance(old, str) and isinstance(new, str):
        la, lb = len(old), len(new)
        p = common_prefix(old, new)
        s = common_suffix(old, new, min(la, lb) - p)
        return p, la - s, lb - s
    if isinstance(old, Rope) and isinstance(new, Rope):
        return new.changed_span(old)
    return None


def reparse_conversation(
    prev: Conversation,
    prev_text: Text,
    new_text: Text,
    fmt: DocFormat,
    *,
    span: tuple[int, int, int] | None = None,
    reach: int | None = None,
) -> Conversation | None:
    """The conversation of ``new_text`` from that of ``prev_text``, or None (parse it all).

    ``span``: where the two texts differ (``(p, old_end, new_end)``, the editor's edit),
    when the caller knows it; else it is found by comparing them. ``reach``: None too when
    JSON's message list would be parsed more than this many characters past the edit
    (the caller has a cheaper way: ``host._Aside``).
    """
    if prev.format is not fmt:
        return None
    if prev.length != len(prev_text) or (prev.tree is None and fmt is not DocFormat.YAML):
        return None  # (a half-typed YAML text without a tree is re-read from its last tree)
    if prev.source_format not in NATIVE and not prev.records:
        return None  # Anthropic and Responses documents are read whole (not a dataset's lines)
    if len(new_text) > MAX_DOCUMENT_CHARS:
        return None
    la, lb = len(prev_text), len(new_text)
    found = span if span is not None else changed_span(prev_text, new_text)
    if found is None:
        return None
    p, old_end, new_end = found  # the changed span is [p, old_end) before, [p, new_end) after
    if p == la == lb:
        return prev  # the same text
    res = None
    if fmt is DocFormat.YAML:
        found = (p, old_end, new_end)
        res = reread_yaml(
            prev, prev_text, new_text, found, read_parsed, replace_message, _read_items
        )
    else:
        if not prev.issues:
            res = _reparse_one(prev, new_text, fmt, p, old_end, lb - la)
        if res is None and fmt is DocFormat.JSON:
            res = _reparse_list(prev, new_text, p, old_end, new_end, lb - la, reach)
            if res is None:
                res = _reparse_head(prev, prev_text, new_text, p, old_end, lb - la)
        elif res is None:
            res = _reparse_lines(prev, new_text, p, old_end, new_end, lb - la)
    if res is not None and res.tree is not None and agent_session(res.tree, fmt):
        return None  # (an edit made it an agent's session, read whole: ``formats``)
    if res is not None and res is not prev:
        # The views of the messages that did not move are the previous version's.
        views = prev._views.get("messages") or prev._views.get("prior_views")
        if views is not None:
            res._views["prior_views"] = views
    return res


def agent_session(root: SNode, fmt: DocFormat) -> bool:
    """Whether a parsed document is a coding agent's session file, read as the request its
    session sends (whole, on every change: ``reading.read_parsed``)."""
    if fmt is DocFormat.JSONL and (
        is_codex_rollout(root)
        or is_claude_code_transcript(root)
        or is_copilot_session(root)
        or is_pi_session(root)
    ):
        return True
    return is_gemini_cli_session(root, fmt)


def _reparse_lines(
    prev: Conversation, new_text: Text, p: int, old_end: int, new_end: int, delta: int
) -> Conversation | None:
    """Any edit in a JSON Lines document: the lines the edit touches are parsed again
    (``parse_jsonl`` on them alone), the others kept (moved by the table of starts), and
    the lines read again spliced into the message list (``_read_items``), or else the tree
    read as a whole parse reads it (``read_parsed(previous=)``).

    A whole parse reads each line alone but for one thing: the first line that does not
    parse (while no such attempt has failed yet) is tried as a record written over several
    lines, read on into the lines after it. So the lines before the edit must have had no
    syntax error (their parse is then the same), or only such that the attempt ended
    before the edit (``_attempt_ended``) and the lines touched parse alone, before and
    after the edit (no attempt is made on them in either parse); the lines after it are kept
    only when the lines touched had none, before and after the edit (the lines after are
    then parsed as before, in the same state); lines touched at the end of the text (a
    new message being typed) may have any: nothing follows them.

    Broken lines touched far from the end (a message typed in the middle) are parsed with
    the two lines after them, when those two parse alone: each holds a whole value, so a
    record an attempt reads on from a broken line either ends among the lines touched, or
    is still open after the first of the two (which holds one whole value, and cannot
    close what it is in) and fails at the first token of the second (a value where a
    comma or a closing bracket must come): the attempt ends as in the whole parse. Broken
    lines further below (a log cut off in its last line) read the same in both parses
    when no record was read over several lines there: the first of them was tried as a
    record and failed, or is not tried now, which gives its own line's errors either
    way; except when the lines touched had a failed attempt before the edit and none
    after it: the broken line below is then tried now, and was not before, which gives
    the same only when it is the last line (a record over several lines cannot start
    there); else the text is read whole.

    Below such a failed attempt (it ended before the lines touched), both parses read
    every line alone: the lines touched are parsed alone without an attempt of their own
    (``spanning=False``), broken or not. Nearer it, the lines are parsed from the broken
    line on (its attempt made again), within ``_REACH``. Records read over several lines
    above either (attempts that succeeded, so attempts go on) change neither once they
    have ended: the lines after them start as with no error before them.

    Records read over several lines (every attempt succeeded, no other syntax error):
    the lines touched grow to the whole records they cut (``_records_region``), which are
    parsed again, attempts on, as the whole parse does there; an attempt of theirs that
    fails changes every line after it (no more attempts), so it is then parsed on to the
    end when that is near, or read whole."""
    if prev.syntax is None:
        return None
    errors, tokens = prev.syntax
    root = prev.tree
    if root is None or not root.is_array or root.starts is None:
        return None
    if len(root.items) > MAX_TOP_ITEMS:
        return None  # the parse stopped at the limit: the lines after it were not read
    starts = root.starts
    lb = prev.length + delta
    first = new_text.rfind("\n", 0, p) + 1  # the start of the first line touched
    end = new_text.find("\n", new_end)
    end = lb if end < 0 else end  # the end of the last one, after the edit
    old_last = end - delta  # ... and before it
    if errors and all(map(_over_lines, errors)):
        # Records read over several lines, and no other syntax error: every attempt
        # succeeded, so every line starts in the same state (attempts on).
        region = _records_region(new_text, starts, root.items, first, old_last, delta)
        if region is None:
            return None
        first, old_last = region
        end = old_last + delta
        if tokens + (end - first) >= MAX_JSON_TOKENS:
            return None
        sub = parse_jsonl(str(new_text[first:end]), messages=True, bom=first == 0)
        if not all(map(_over_lines, sub.errors)):  # an attempt failed: the lines after change
            if lb - end > _NEAR_END or tokens + (lb - first) >= MAX_JSON_TOKENS:
                return None
            end, old_last = lb, prev.length
            sub = parse_jsonl(str(new_text[first:end]), messages=True, bom=first == 0)
        return _lines_spliced(prev, root, errors, tokens, sub, first, old_last, delta)
    before = [e for e in errors if e.range.start < first]
    if before and all(map(_over_lines, before)) and _records_ended(starts, root.items, first):
        # Records read over several lines above, ended before the lines touched: every
        # attempt there succeeded, so those lines start as with no error before them.
        before = []
    if before and not _attempt_ended(before, starts, root.items, new_text, first):
        # The attempt at the first broken line may read the lines touched: parse again
        # from that line, when it is near (the attempt's state there is a whole parse's:
        # attempts on, the records read over several lines above it ended before it).
        failed = [e.range.start for e in before if not _over_lines(e)]
        if not failed:
            return None  # (a record over several lines holds the lines touched)
        broken = new_text.rfind("\n", 0, min(failed)) + 1
        if first - broken > _REACH or not _records_ended(starts, root.items, broken):
            return None
        first, before = broken, []
    sub = None
    if before:
        # An attempt failed before the lines touched (``_attempt_ended``): from there on,
        # both parses read every line alone, so the lines touched are parsed alone (and
        # without an attempt of their own), broken or not, and the lines after are kept.
        if tokens + (end - first) >= MAX_JSON_TOKENS:
            return None
        sub = parse_jsonl(str(new_text[first:end]), messages=True, bom=first == 0, spanning=False)
    elif end < lb and not any(first <= e.range.start <= old_last for e in errors):
        if tokens + (end - first) >= MAX_JSON_TOKENS:
            return None
        sub = parse_jsonl(str(new_text[first:end]), messages=True, bom=first == 0)
        if sub.errors:
            sub = None
    if sub is None:  # the lines touched are broken: parse them on to the end, when it is near
        failed_before = False  # the previous parse's attempt failed in the lines touched
        if lb - end <= _NEAR_END:
            end, old_last = lb, prev.length
        else:  # ... else with the two lines after them (see the docstring)
            after = [e for e in errors if e.range.start > old_last]
            two = _lines_on(new_text, end, 2)
            if two < 0 or any(e.range.start <= two - delta or _over_lines(e) for e in after):
                return None  # (they must parse alone; no record was read below)
            failed_before = bool(after) and any(
                first <= e.range.start <= old_last and not _over_lines(e) for e in errors
            )
            end, old_last = two, two - delta
            k0, k1 = bisect_left(starts, first), bisect_left(starts, old_last + 1)
            if any(
                s + node.range.end > old_last
                for s, node in zip(starts[k0:k1], root.items[k0:k1], strict=True)
            ):
                return None  # (a record of the previous parse reads on past them)
        if tokens + (end - first) >= MAX_JSON_TOKENS:
            return None
        sub = parse_jsonl(str(new_text[first:end]), messages=True, bom=first == 0)
        if failed_before and all(map(_over_lines, sub.errors)):
            # A broken line below now gets an attempt it did not get before: it fails as
            # its line alone does when that is the last line (no record starts there).
            below = min(e.range.start for e in errors if e.range.start > old_last) + delta
            nl = new_text.find("\n", below)
            if nl >= 0 and (lb - nl > _TAIL or new_text[nl:lb].strip()):
                return None
    return _lines_spliced(prev, root, errors, tokens, sub, first, old_last, delta)


def _over_lines(e: SyntaxIssue) -> bool:
    """Whether ``e`` is ``parse_jsonl``'s report of a record read over several lines."""
    return e.message.startswith("a record spans")


def _records_ended(starts: Sequence[int], items: Sequence[SNode], at: int) -> bool:
    """Whether the last line read before ``at`` (a line start) ends before it (a record
    read over several lines may hold ``at``)."""
    k = bisect_left(starts, at) - 1
    return k < 0 or starts[k] + items[k].range.end <= at


def _records_region(
    text: Text,
    starts: Sequence[int],
    items: Sequence[SNode],
    first: int,
    old_last: int,
    delta: int,
) -> tuple[int, int] | None:
    """The lines touched, from ``first`` (a line start) to ``old_last`` (a line end, in the
    previous text), grown to whole records: back to the start of a record read over
    several lines that holds ``first``, on to the end of the line where a record starting
    before ``old_last`` ends (after the edit: ``text``, the new text, from there on is the
    previous one moved by ``delta``; the rest of that line is blank). So the region starts
    and ends where a whole parse starts a line. None past ``_REACH``."""
    k = bisect_right(starts, first) - 1
    if k >= 0 and starts[k] + items[k].range.end > first:
        first = starts[k]
    k1 = bisect_left(starts, old_last + 1)
    if k1 > 0 and starts[k1 - 1] + items[k1 - 1].range.end > old_last:
        end = text.find("\n", starts[k1 - 1] + items[k1 - 1].range.end + delta)
        old_last = (len(text) if end < 0 else end) - delta
    return None if old_last - first > _REACH else (first, old_last)


def _lines_spliced(
    prev: Conversation,
    root: SNode,
    errors: Sequence[SyntaxIssue],
    tokens: int,
    sub: ParsedData,
    first: int,
    old_last: int,
    delta: int,
) -> Conversation | None:
    """The previous lines ``[first, old_last]`` replaced by those ``sub`` parsed (from
    ``first`` in the new text), the others kept; then read (``_read_items``, or the tree
    as a whole parse reads it)."""
    assert root.starts is not None
    starts = root.starts
    lb = prev.length + delta
    before = [e for e in errors if e.range.start < first]
    if sub.root is None or sub.root.starts is None:
        return None
    k0, k1 = bisect_left(starts, first), bisect_left(starts, old_last + 1)
    items = (*root.items[:k0], *sub.root.items, *root.items[k1:])
    if len(items) > MAX_TOP_ITEMS:
        return None
    new_root = SNode(
        "array",
        TextRange(0, lb),
        items=items,
        starts=(
            *starts[:k0],
            *map(first.__add__, sub.root.starts),
            *map(delta.__add__, starts[k1:]),
        ),
    )
    new_errors = (
        *before,
        *(_moved_issue(e, first) for e in sub.errors),
        *(_moved_issue(e, delta) for e in errors if e.range.start > old_last),
    )
    parsed = ParsedData(new_root, new_errors, tokens=tokens + sub.tokens)
    if agent_session(new_root, DocFormat.JSONL):
        return None  # (read as a provider's request, whole: ``formats``)
    if is_dataset(new_root) or is_dataset(root):
        # A dataset (before or after): its lines read as a whole read reads them, each
        # line node it shares giving the record it gave (``read_parsed(previous=)``).
        return read_parsed(parsed, prev.format, lb, prev)
    # The header lines (document keys) come first; an edit among them reads them again.
    head = _header_lines(root.items)
    if k0 >= head and not any(map(is_header_line, sub.root.items)):
        spliced = _read_items(prev, parsed, root, new_root, k0, k1, first, delta, head)
    elif (
        k1 <= head
        and len(sub.root.items) == k1 - k0
        and all(map(is_header_line, items[k0:k1]))
        and _line_marks(root.items[k0:k1]) == _line_marks(items[k0:k1])
    ):
        # Header lines edited, read again alone (as a whole read reads them, first).
        assert new_root.starts is not None
        lines = SNode("array", TextRange(0, lb), items=items[:head], starts=new_root.starts[:head])
        spliced = _read_items(
            prev, parsed, root, new_root, head, head, first, delta, head, lines, field_findings=True
        )
    else:
        spliced = None
    if spliced is not None:
        return spliced
    return _native(read_parsed(parsed, prev.format, lb, prev))


_NEAR_END = 65_536  # characters: broken lines this near the end are parsed on to it
_TAIL = 4_096  # characters after a broken last line looked at for another line
_REACH = 262_144  # characters: how far above the lines touched a broken line is parsed from
_PAIRS = 16  # pairs of lines ``_attempt_ended`` looks at


def _attempt_ended(
    errors: Sequence[SyntaxIssue],
    starts: Sequence[int],
    items: Sequence[SNode],
    text: Text,
    first: int,
) -> bool:
    """Whether the syntax errors of the lines before ``first`` (``errors``) leave those
    lines' parse as it is whatever follows ``first``: a broken line was tried as a record
    over several lines and failed (the first error that is not a record read over several
    lines: the attempts before it succeeded, and none is made after it), and that attempt
    ended before two consecutive lines, both after it and before ``first``, that parse
    alone (only blank lines between them): the first holds one whole value, so the attempt
    fails at the second's first token at the latest (see ``_reparse_lines``)."""
    failed = [e.range.start for e in errors if not _over_lines(e)]
    if not failed:
        return False  # (every attempt succeeded: attempts go on)
    if any(_over_lines(e) and e.range.start > min(failed) for e in errors):
        return False  # (not a whole parse's errors: no attempt follows a failed one)
    broken = text.find("\n", min(failed))  # the end of the first broken line
    if broken < 0:
        return False
    at = sorted(e.range.start for e in errors)
    i, stop = bisect_right(starts, broken), bisect_left(starts, first)
    for _ in range(_PAIRS):
        if i + 1 >= stop:
            return False
        a, b = starts[i], starts[i + 1]
        end_a, end_b = a + items[i].range.end, b + items[i + 1].range.end
        clean = bisect_left(at, a) == bisect_right(at, text.find("\n", end_b))
        if clean and not text[end_a:b].strip() and text.count("\n", end_a, b) >= 1:
            return True
        i += 1
    return False


_BLANK_LINES = 64  # blank lines ``_lines_on`` passes over before it gives up


def _lines_on(text: Text, at: int, count: int) -> int:
    """Where the ``count``-th line after ``at`` (the end of a line) that is not blank
    (``parse_jsonl`` reads it) ends: its line break, or the end of the text when fewer
    follow; -1 past ``_BLANK_LINES`` blank lines."""
    n, blank = len(text), 0
    while count and at < n:
        end = text.find("\n", at + 1)
        end = n if end < 0 else end
        if text[at + 1 : end].strip():
            count -= 1
        else:
            blank += 1
            if blank > _BLANK_LINES:
                return -1
        at = end
    return at


def _header_lines(items: Sequence[SNode]) -> int:
    """How many JSON Lines lines at the start hold document keys (``is_header_line``)."""
    n = 0
    while n < len(items) and is_header_line(items[n]):
        n += 1
    return n


def _reparse_list(
    prev: Conversation,
    new_text: Text,
    p: int,
    old_end: int,
    new_end: int,
    delta: int,
    reach: int | None = None,
) -> Conversation | None:
    """Any edit after the opening bracket of the message list (JSON): the text is parsed
    again from the start of the message the edit begins in, by the parser itself (its
    recovery included), until it reaches an unchanged message where the old parse had
    been in the same state (the start of an item of the list, just after a comma), or
    else to the end; the rest of the old tree and its syntax errors are kept, moved by
    the table of starts. The tree is then read as a whole parse reads it, each shared
    message node giving the ``Message`` it gave before (``read_parsed(previous=)``)."""
    if prev.syntax is None:
        return None
    errors, tokens = prev.syntax
    if tokens + (new_end - p) >= MAX_JSON_TOKENS:
        return None  # the limit could be reached: only a whole parse knows where
    if any(e.code != "syntax-error" or e.message.startswith("nesting deeper") for e in errors):
        return None
    root = prev.tree
    assert root is not None
    keys: set[str] | None
    if root.is_array:
        holder, depth, keys, mi = root, 0, None, -1
    elif root.is_object:
        where = [j for j, m in enumerate(root.members) if m.key == "messages"]
        if len(where) != 1:
            return None
        mi = where[0]
        holder, depth = root.members[mi].value, 1
        keys = {m.key for m in root.members[:mi]} | {"messages"}
    else:
        return None
    starts, counts = holder.starts, holder.error_counts
    if not starts or counts is None or len(starts) + 100 > MAX_TOP_ITEMS:
        return None
    if p <= holder.range.start:
        return None  # the list's opening bracket (or what is before it) changed
    # From the item that starts strictly before the edit (the checks after an item read
    # the token that follows it, which may be the edited one).
    k = max(0, bisect_left(starts, p) - 1)
    at = starts[k]
    bounds = (holder.range.start, root.range.start)
    before = errors[: counts[k]]
    if p <= at:  # between the opening bracket and the first item: parse from the bracket on
        at = holder.range.start + 1
        before = tuple(e for e in before if e.range.start <= holder.range.start)
    r = max(bisect_left(starts, old_end), k + 1)
    for _ in range(3):
        if r >= len(starts):
            break
        end = starts[r] + delta
        res = parse_messages(new_text[at:end], at, depth, keys, bounds, window=True)
        if res is not None:
            tail = tuple(
                e if e.range.start < old_end else _moved_issue(e, delta)
                for e in errors[counts[r] :]
            )
            n = len(before)
            new_holder = SNode(
                "array",
                TextRange(holder.range.start, holder.range.end + delta),
                items=(*holder.items[:k], *_keep_first(res, holder, k, at, p), *holder.items[r:]),
                starts=(*starts[:k], *res.starts, *map(delta.__add__, starts[r:])),
                error_counts=(
                    *counts[:k],
                    *(c + n for c in res.counts),
                    *map((n + len(res.errors) - counts[r]).__add__, counts[r:]),
                ),
            )
            if root is holder:
                new_root = new_holder
            else:
                members = list(root.members)
                members[mi] = Member("messages", members[mi].key_range, new_holder)
                for j in range(mi + 1, len(members)):
                    m = members[j]
                    members[j] = Member(
                        m.key, m.key_range.shift(delta), _shift_node(m.value, delta)
                    )
                new_root = SNode(
                    "object",
                    TextRange(root.range.start, root.range.end + delta),
                    members=tuple(members),
                )
            parsed = ParsedData(new_root, (*before, *res.errors, *tail), tokens=tokens + res.tokens)
            spliced = _read_items(prev, parsed, holder, new_holder, k, r, starts[r], delta)
            if spliced is not None:
                return spliced
            return _native(read_parsed(parsed, prev.format, prev.length + delta, prev))
        r += 1
    far = None if reach is None else new_end + reach
    res = parse_messages_to_end(new_text, at, depth, keys, bounds, reach=far)
    if res is None or res.holder is None:
        return None
    n = len(before)
    new_holder = SNode(
        "array",
        res.holder.range,
        items=(*holder.items[:k], *_keep_first(res, holder, k, at, p)),
        starts=(*starts[:k], *res.starts),
        error_counts=(*counts[:k], *(c + n for c in res.counts)),
    )
    if root is holder:
        new_root = new_holder
    else:
        assert res.rest is not None
        members = (
            *root.members[:mi],
            Member("messages", root.members[mi].key_range, new_holder),
            *res.rest.members,
        )
        new_root = SNode("object", res.rest.range, members=members)
    parsed = ParsedData(new_root, (*before, *res.errors), tokens=tokens + res.tokens)
    # The items from ``k`` on read again, and the fields after the list (parsed again).
    n = len(holder.items)
    fields = None if root is holder else new_root
    spliced = _read_items(
        prev, parsed, holder, new_holder, k, n, prev.length, delta, 0, fields, field_findings=True
    )
    if spliced is not None:
        return spliced
    return _native(read_parsed(parsed, prev.format, prev.length + delta, prev))


def _reparse_head(
    prev: Conversation, prev_text: Text, new_text: Text, p: int, old_end: int, delta: int
) -> Conversation | None:
    """Any edit before the message list of a document object (a new top-level key typed,
    its broken states included; a field's value when the document has findings): the
    object is parsed again with the list's text left out (one item in its place), and the
    list's node kept, moved. The list reads the same in both parses: the parser enters
    its ``[`` in the same state (the value of the top-level object's ``messages``,
    checked) and leaves at its ``]``; what it found inside is the previous version's, and
    the errors before it and after it are told apart by the item's count of errors
    before it. The previous version is parsed the same way first and must give back its
    own errors around its list (else None). Then the fields are read again and the
    messages kept (``_read_items``), or the tree is read as a whole read reads it."""
    root = prev.tree
    if root is None or not root.is_object or prev.syntax is None:
        return None
    where = [m.value for m in root.members if m.key == "messages"]
    if len(where) != 1:
        return None
    holder = where[0]
    if not holder.is_array or holder.starts is None or holder.error_counts is None:
        return None
    hs, he = holder.range.start, holder.range.end
    if not old_end <= hs:
        return None  # (an edit in the list or after it: ``_reparse_list``)
    errors, tokens = prev.syntax
    old = _without_list(prev_text, hs, he)
    new = _without_list(new_text, hs + delta, he + delta)
    if old is None or new is None:
        return None
    nb, na = len(old[1]), len(old[2])
    inside = errors[nb : len(errors) - na]
    if (*old[1], *inside, *old[2]) != errors or holder.error_counts[:1] not in ((), (nb,)):
        return None
    if any(not hs <= e.range.start < he for e in inside):
        return None
    total = tokens + new[0].tokens - old[0].tokens
    if total >= MAX_JSON_TOKENS:
        return None
    moved = SNode(
        "array",
        holder.range.shift(delta),
        items=holder.items,
        starts=_moved_starts(holder.starts, 0, delta),
        error_counts=tuple(c + len(new[1]) - nb for c in holder.error_counts),
    )
    new_root = _with_list(new[0].root, moved, he - hs - 3)
    found = (*new[1], *(_moved_issue(e, delta) for e in inside), *new[2])
    parsed = ParsedData(new_root, found, tokens=total)
    spliced = _read_items(
        prev, parsed, holder, moved, 0, 0, hs, delta, 0, new_root, field_findings=True
    )
    if spliced is not None:
        return spliced
    return _native(read_parsed(parsed, prev.format, prev.length + delta, prev))


def _without_list(
    text: Text, start: int, end: int
) -> tuple[ParsedData, tuple[SyntaxIssue, ...], tuple[SyntaxIssue, ...]] | None:
    """The parse of ``text`` with its message list (at ``[start, end)``) written ``[0]``,
    and its syntax errors found before the list and after it (moved into ``text``); None
    unless that ``[0]`` is the value of the top-level object's only ``messages``, and no
    error is in it or spans it."""
    parsed = parse_json(text[0:start] + "[0]" + text[end : len(text)], messages=True)
    root = parsed.root
    if root is None or not root.is_object:
        return None
    found = [m.value for m in root.members if m.key == "messages"]
    if len(found) != 1 or found[0].range != TextRange(start, start + 3):
        return None
    counts = found[0].error_counts
    if not counts or len(found[0].items) != 1:
        return None
    shift, errors = end - start - 3, parsed.errors
    if any(e.range.end > start and e.range.start < start + 3 for e in errors):
        return None
    after = tuple(
        e if e.range.end <= start else _moved_issue(e, shift) for e in errors[counts[0] :]
    )
    return parsed, errors[: counts[0]], after


def _with_list(root: SNode, holder: SNode, shift: int) -> SNode:
    """``root`` (parsed with ``[0]`` for its message list) with ``holder`` in its place,
    what follows it moved by ``shift`` (the list's length less 3)."""
    at = holder.range.start
    members = tuple(
        Member(m.key, m.key_range, holder)
        if m.key == "messages"
        else m
        if m.key_range.start < at
        else Member(m.key, m.key_range.shift(shift), _shift_node(m.value, shift))
        for m in root.members
    )
    return SNode("object", TextRange(root.range.start, root.range.end + shift), members=members)


def _read_items(
    prev: Conversation,
    parsed: ParsedData,
    holder: SNode,
    new_holder: SNode,
    k: int,
    r: int,
    old_end: int,
    delta: int,
    head: int = 0,
    fields: SNode | None = None,
    field_findings: bool = False,
) -> Conversation | None:
    """The items ``[k, r)`` of the previous message list replaced by those the parse read
    again: only those are read (as a whole read reads them), the other messages kept,
    and the document's fields after the list moved by ``delta``. ``head``: the JSON Lines
    header lines before the first message line (the same number before and after);
    ``fields``: a tree to read the document's fields again from when the edit may have
    changed them (the new root, or JSON Lines' header lines; ``_fields_of``);
    ``field_findings``: what reading those fields finds is kept (a whole read reports it
    after the syntax errors, before the messages' findings).

    The document may have syntax errors (``parsed.errors``, the whole parse's) and other
    findings: a whole read reports the syntax errors first, then its fields' (an unknown
    top-level key), then what reading each message found, in order. The fields' and the
    other messages' findings are the previous version's (``_kept_findings``), those after
    the edit moved; the items read again add theirs in between, and the unknown message
    keys' findings (one a key, after all those) are made again from the kept and the new
    places. None when the rest of the list could read differently (a duplicate id, a
    finding of the list as a whole; a message that is read with its neighbours, a message
    whose id is its place when the places move): ``read_parsed`` then reads the tree as a
    whole parse does."""
    n_old = len(holder.items)
    n_new = len(new_holder.items) - n_old + (r - k)
    data = prev.message_data
    reads_in = prev._views.get("reads")
    if reads_in is None or prev.syntax is None or new_holder.starts is None:
        return None
    if len(new_holder.items) - head > MAX_MESSAGES:
        return None
    fields_read = None
    if fields is not None:
        assert prev.tree is not None and parsed.root is not None
        if top_marks(prev.tree) != top_marks(parsed.root):
            return None  # the format the document is read as may change
        fields_read = _fields_of(prev.format, fields, prev.length + delta, field_findings)
        if fields_read is None:
            return None
    # What the replaced items gave: each must be in the memo; with the previous version's
    # syntax errors, its fields' findings and those of the other items, it accounts for
    # every finding (and rejected call). (Passes at C speed: a list ended may leave
    # thousands of items.)
    old_nodes = holder.items[k:r]
    old_reads = list(map(reads_in.get, map(id, old_nodes)))
    if not _all_read(old_reads, old_nodes):
        return None
    syntax = Reader(prev.format, prev.length)
    syntax.report_syntax(ParsedData(None, prev.syntax[0]))
    kept = _kept_findings(prev, reads_in, holder.items, head, k, r, len(syntax.issues), old_reads)
    if kept is None:
        return None
    kept_fields, kept_before, kept_after = kept.fields, kept.before, kept.after
    if fields is None:  # (else read again below)
        kept_fields = [e if e.range.start < old_end else _moved(e, delta) for e in kept_fields]
    read = list(map(_MESSAGE, old_reads))
    old_msgs = list(compress(read, map(is_not, read, repeat(None))))
    dk = k - head  # no message is left out but among the replaced items
    if len(data) != n_old - head - (r - k) + len(old_msgs):
        return None
    dr = dk + len(old_msgs)
    lb = prev.length + delta
    reader = Reader(prev.format, lb, reads_in)
    reader.report_syntax(parsed)
    reader.issues.extend(fields_read.issues if fields_read is not None else kept_fields)
    reader.issues.extend(kept_before)
    reader.rejected_calls.extend(kept.rejected_before)
    items = new_holder.items[k : k + n_new]
    bases = new_holder.starts[k : k + n_new]
    msgs, msg_starts, msg_nodes = [], [], []
    for j, (node, base) in enumerate(zip(items, bases, strict=True)):
        msg = reader.read_message(node, k + j - head, base)
        if msg is not None:
            msgs.append(msg)
            msg_starts.append(base)
            msg_nodes.append(node)
    if len(msgs) == len(old_msgs):  # (in place of as many: each the one at its place)
        msgs = list(map(partial(_as_before, reader), msg_nodes, msgs, old_msgs))
    # The replaced messages must read alone too, unless every message of the previous
    # version does (known from an earlier check, or made once when many go: a list ended).
    alone = prev._views.get("alone")
    if alone is None and len(old_msgs) > _CARRY_IDS:
        alone = prev.derived("alone", lambda c: all_read_alone(c.message_data))
    if not all_read_alone(msgs if alone else (*msgs, *old_msgs)) and not same_made_up_calls(
        msgs, old_msgs
    ):
        return None
    reader.issues.extend(_moved(e, delta) for e in kept_after)
    reader.rejected_calls.extend(
        dataclasses.replace(c, range=c.range.shift(delta)) for c in kept.rejected_after
    )
    if kept.unknown_before or reader.unknown_message_keys or kept.unknown_after:
        # The unknown message keys, as a whole read reports them after the messages' findings.
        after_keys = {k: ((rng, d + delta), n) for k, ((rng, d), n) in kept.unknown_after.items()}
        reader.unknown_message_keys = _merged_keys(
            (kept.unknown_before, reader.unknown_message_keys, after_keys)
        )
        reader.report_unknown_message_keys()
    new_ids = [m.id for m in msgs]
    # The ids kept are carried unless many went (a list ended): the next edit that needs
    # them makes them (``_ids``), once.
    carry_ids = len(old_msgs) <= _CARRY_IDS
    ids = _ids(prev) if new_ids or carry_ids else set()
    # (An id found among the removed is most often the first one's: no set of them made.)
    if len(set(new_ids)) != len(new_ids) or any(
        i in ids and i not in map(_ID, old_msgs) for i in new_ids
    ):
        return None  # a duplicate id: the whole list decides which one is renamed
    if n_new != r - k and any(map(is_, map(_ID_RANGE, data[dr:]), repeat(None))):
        return None  # a later message's id is its place, which moves
    # The marks in document order: unchanged unless those of the items read again differ
    # (JSON Lines: a line without ``role`` and ``type`` counts its keys as a header's).
    jsonl = prev.format is DocFormat.JSONL
    marks_in: MarksMemo = prev._views.get("marks", {})
    old_marks = list(map(marks_in.get, map(id, old_nodes)))
    new_marks = [(node, message_marks(node)) for node in items]
    detected = told = None
    hits = all(map(is_not, old_marks, repeat(None))) and all(
        map(is_, map(_FIRST, old_marks), old_nodes)
    )
    if (
        not hits
        or list(map(_SECOND, old_marks)) != list(map(_SECOND, new_marks))
        or (jsonl and _head_marks(old_nodes) != _head_marks(items))
    ):
        before = old_marks if hits else None  # (each a node with its marks)
        told = _told_again(prev, parsed.root, k, old_nodes, new_marks, marks_in, before)
        detected = told.detection
        if detected.format not in NATIVE:
            return None
        if kept.fields and detected.format.value != prev.source_format:
            return None  # the fields may read otherwise in the other format
    new_starts = None
    if len(msgs) == n_new:  # (every item read again a message)
        new_starts = _same_starts(holder.starts, prev.starts, new_holder.starts, head)
    if new_starts is None:
        new_starts = (*prev.starts[:dk], *msg_starts, *map(delta.__add__, prev.starts[dr:]))
    elif head:
        new_starts = new_starts[head:]
    res = _with_messages(
        prev,
        (*data[:dk], *msgs, *data[dr:]),
        new_starts,
        parsed.root,
        lb,
        old_end if fields is None else prev.length + 1,  # (the fields are read again)
        delta,
        detected,
    )
    res = dataclasses.replace(
        res if fields_read is None else _with_fields(res, fields_read),
        issues=tuple(reader.issues),
        rejected_calls=tuple(reader.rejected_calls),
    )
    _carry(prev, res, holder.items[k:r], new_marks, reader, 0)
    if told is not None:
        res._views["tally"] = told
    whole = parsed.tokens  # as ``read_parsed`` keeps it
    object.__setattr__(res, "syntax", (parsed.errors, parsed.tokens) if whole else None)
    if carry_ids:
        # (one copy: the previous version's set stays as it was)
        kept = ids.difference(map(_ID, old_msgs))
        kept.update(new_ids)
        res._views["ids"] = kept
    if alone:  # the kept messages are the previous version's, the new ones checked
        res._views["alone"] = True
    return res


def _line_marks(nodes: Sequence[SNode]) -> tuple[Any, ...]:
    """All the marks the detection takes from these JSON Lines lines."""
    return (_head_marks(nodes), [message_marks(n) for n in nodes])


def _head_marks(nodes: Sequence[SNode]) -> list[tuple[tuple[str, str], ...]]:
    """The marks the detection takes from JSON Lines lines read as a header's keys."""
    return [top_marks(n) for n in nodes if header_like(n)]


def _fields_of(
    fmt: DocFormat, root: SNode, length: int, findings: bool = False
) -> Conversation | None:
    """The document's fields as a whole read reads them from ``root`` (a document object,
    or JSON Lines' header lines), without the messages (reading the fields does not take
    them); None when reading them finds anything (a whole read reports it before the
    messages' findings), unless ``findings``."""
    if root.is_object:
        members = tuple(
            Member(m.key, m.key_range, SNode("array", m.value.range, items=(), starts=()))
            if m.key == "messages" and m.value.is_array
            else m
            for m in root.members
        )
        root = SNode("object", root.range, members=members)
    conv = Reader(fmt, length).read(ParsedData(root))
    return None if conv.issues and not findings else conv


def _all_read(reads: list[Any], nodes: Sequence[SNode]) -> bool:
    """Whether each node has its read in the memo (``reads``: looked up by ``id``)."""
    return all(map(is_not, reads, repeat(None))) and all(map(is_, map(_NODE, reads), nodes))


@dataclasses.dataclass(frozen=True, slots=True)
class _Kept:
    """The previous version's findings a splice keeps, in a whole read's order: after the
    syntax errors, its fields' (an unknown top-level key: an SDK's field), then those of
    the messages before the items read again, and after them (and their rejected calls),
    and the places of the unknown message keys (whose findings come after all those)."""

    fields: Sequence[Issue] = ()
    before: Sequence[Issue] = ()
    after: Sequence[Issue] = ()
    rejected_before: Sequence[RejectedCall] = ()
    rejected_after: Sequence[RejectedCall] = ()
    # The unknown message keys' places before the items read again, and after them.
    unknown_before: Mapping[str, tuple[Any, int]] = dataclasses.field(default_factory=dict)
    unknown_after: Mapping[str, tuple[Any, int]] = dataclasses.field(default_factory=dict)


_NOTHING_KEPT = _Kept()


def _kept_findings(
    prev: Conversation,
    reads: dict[int, Any],
    items: Sequence[SNode],
    head: int,
    k: int,
    r: int,
    n_syntax: int,
    replaced: list[Any],
) -> _Kept | None:
    """The findings of ``prev`` that are neither syntax errors nor those of its items
    ``[k, r)`` (``replaced``: their reads; ``head``: JSON Lines' header lines, which come
    first), split as a whole read orders them; None when some finding is of none of them
    (one of the list as a whole: a repeated id; a header line after the messages)."""
    issues, rejected = prev.issues, prev.rejected_calls
    extra = len(issues) - n_syntax - sum(map(len, map(_ISSUES, replaced)))
    n_rejected = sum(map(len, map(_REJECTED, replaced)))
    if not extra and len(rejected) == n_rejected:
        return _NOTHING_KEPT  # (most edits: no finding outside what is read again)
    tree = prev.tree
    if tree is None:
        return None
    fields: tuple[Issue, ...] = ()
    if tree.is_object or head:
        if tree.is_object:
            read = _fields_of(prev.format, tree, prev.length, True)
        else:  # (the header lines, read as a whole read reads them)
            assert tree.starts is not None
            lines = SNode("array", tree.range, items=items[:head], starts=tree.starts[:head])
            read = _fields_of(prev.format, lines, prev.length, True)
        if read is None:
            return None
        fields = read.issues
        if tuple(issues[n_syntax : n_syntax + len(fields)]) != fields:
            return None
    if extra == len(fields) and len(rejected) == n_rejected:
        return _Kept(fields)
    before, after = items[head:k], items[r:]
    reads_before = list(map(reads.get, map(id, before)))
    reads_after = list(map(reads.get, map(id, after)))
    if not (_all_read(reads_before, before) and _all_read(reads_after, after)):
        return None
    starts = tree.starts if not tree.is_object else _list_starts(tree)
    if starts is None:
        return None
    unknown_before = _unknown_places(reads_before, starts[head:k])
    unknown_after = _unknown_places(reads_after, starts[r:])
    every = _merged_keys((unknown_before, _unknown_places(replaced, starts[k:r]), unknown_after))
    nb = sum(map(len, map(_ISSUES, reads_before)))
    na = sum(map(len, map(_ISSUES, reads_after)))
    if extra != len(fields) + nb + na + len(every):
        return None  # (a repeated id: a finding of the list)
    rb = sum(map(len, map(_REJECTED, reads_before)))
    if len(rejected) != rb + n_rejected + sum(map(len, map(_REJECTED, reads_after))):
        return None
    at = n_syntax + len(fields)
    nr = len(issues) - n_syntax - extra  # (the findings of the items read again)
    tail = at + nb + nr + na  # (then the unknown keys' findings)
    if every:
        # They are as a whole read reports them (else None: they are not what they seem).
        check = Reader(prev.format, prev.length)
        check.unknown_message_keys = every
        check.report_unknown_message_keys()
        if tuple(check.issues) != issues[tail:]:
            return None
    return _Kept(
        fields,
        issues[at : at + nb],
        issues[at + nb + nr : tail],
        rejected[:rb],
        rejected[rb + n_rejected :],
        unknown_before,
        unknown_after,
    )


def _list_starts(root: SNode) -> tuple[int, ...] | None:
    """Where the items of a document object's message list start."""
    holder = root.get("messages")
    return None if holder is None else holder.starts


def _merged_keys(parts: Iterable[Mapping[str, tuple[Any, int]]]) -> dict[str, tuple[Any, int]]:
    """The unknown message keys of consecutive runs of messages (each as
    ``Reader.unknown_message_keys``), in document order: each key's first place and its
    count over all of them."""
    res: dict[str, tuple[Any, int]] = {}
    for part in parts:
        for key, (first, n) in part.items():
            got = res.get(key)
            res[key] = (first, n) if got is None else (got[0], got[1] + n)
    return res


def _unknown_places(reads: Sequence[Any], starts: Sequence[int]) -> dict[str, tuple[Any, int]]:
    """The unknown keys of the messages ``reads`` read (at ``starts``), in document order:
    each key's first place and how many of them have it (``Reader.unknown_message_keys``).
    (Counted at C speed: a log may carry its framework's own key on every message.)"""
    counts = Counter(map(_FIRST, chain.from_iterable(map(_UNKNOWN, reads))))
    if not counts:
        return {}
    first: dict[str, Any] = {}
    for read, base in zip(reads, starts, strict=False):
        for key, rng, d in read.unknown:
            if key not in first:
                first[key] = (rng, base + d)
        if len(first) == len(counts):
            break
    return {key: (first[key], n) for key, n in counts.items()}


def _moved(issue: Issue, delta: int) -> Issue:
    return dataclasses.replace(issue, range=issue.range.shift(delta))


def _with_fields(conv: Conversation, fields: Conversation) -> Conversation:
    """``conv`` with the document's fields of ``fields`` (JSON Lines header lines read
    again): everything but the messages, the tree, the format and the findings."""
    return dataclasses.replace(
        fields,
        message_data=conv.message_data,
        starts=conv.starts,
        tree=conv.tree,
        length=conv.length,
        source_format=conv.source_format,
        source_format_why=conv.source_format_why,
    )


_CARRY_IDS = 256  # messages gone in a splice up to which its set of ids is carried
_ID_RANGE = attrgetter("id_range")
_ID = attrgetter("id")
_NODE = attrgetter("node")
_MESSAGE = attrgetter("message")
_UNKNOWN = attrgetter("unknown")
_ISSUES = attrgetter("issues")
_REJECTED = attrgetter("rejected")
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)


def _keep_first(res: MessagesParse, holder: SNode, k: int, at: int, p: int) -> tuple[SNode, ...]:
    """The items read again, the first one the old node when it lies wholly before the edit
    (read again only for what follows it): its ``Message`` is then shared too."""
    items = res.items
    if not items or holder.starts is None or at != holder.starts[k] or res.starts[0] != at:
        return items
    old = holder.items[k]
    if at + old.range.end <= p and items[0].range == old.range:
        return (old, *items[1:])
    return items


def _native(conv: Conversation) -> Conversation | None:
    """``conv`` unless the edit made it another provider's format (read whole, as a
    whole parse reads it: the caller parses it all)."""
    return conv if conv.source_format in NATIVE else None


def _moved_issue(e: SyntaxIssue, delta: int) -> SyntaxIssue:
    return SyntaxIssue(e.message, e.range.shift(delta), e.code, e.severity)


def _reparse_one(
    prev: Conversation, new_text: Text, fmt: DocFormat, p: int, old_end: int, delta: int
) -> Conversation | None:
    """An edit strictly inside one message (or one top-level value) of a conversation
    without findings: that message alone is parsed and read again."""
    # The message nodes, and their depth in the parse of the whole text.
    root = prev.tree
    holder: SNode  # the array node holding the messages
    if fmt is DocFormat.JSONL:
        if not root.is_array:
            return None
        holder, depth = root, 0
        first_message = len(root.items) - len(prev.message_data)  # header lines come first
    elif root.is_array:
        holder, depth, first_message = root, 1, 0
    elif root.is_object:
        found_holder = root.get("messages")
        if found_holder is None or not found_holder.is_array:
            return None
        holder = found_holder
        if not (holder.range.start < p and old_end < holder.range.end):
            return _reparse_member(prev, root, p, old_end, delta, new_text)
        depth, first_message = 2, 0
    else:
        return None
    items, starts = holder.items, holder.starts
    if first_message < 0 or starts is None:
        return None
    k = bisect_right(starts, p) - 1
    if k < first_message:
        return None
    node, base = items[k], starts[k]
    # Strictly inside: the opening and the closing brace are both untouched.
    if not (node.is_object and base + node.range.start < p and old_end < base + node.range.end):
        return None
    index = k - first_message
    if index >= len(prev.message_data):
        return None
    old_msg = prev.message_data[index]
    if prev.starts[index] != base or old_msg.range != node.range:
        return None

    end = base + node.range.end + delta
    source = new_text[base:end]
    if fmt is DocFormat.JSONL and "\n" in source:
        return None  # a line break splits the line: the lines change
    # The message alone, relative to its start as in a parse of the whole text.
    parser = JsonParser(source, node.range.start, len(source), 0)
    new_node = parser._value(depth)
    if (
        parser.errors
        or new_node is None
        or not new_node.is_object
        or new_node.range != sub_range(node.range, node.range.start, len(source))
        or not parser.at_end()
    ):
        return None
    return replace_message(prev, fmt, k, index, new_node, delta, parser.tokens)


def replace_message(
    prev: Conversation,
    fmt: DocFormat,
    k: int,
    index: int,
    new_node: SNode,
    delta: int,
    tokens: int,
) -> Conversation | None:
    """``prev`` (without findings) with item ``k`` of its message list (message ``index``)
    replaced by ``new_node``, that item parsed again alone (ranges relative to its start,
    which did not move), everything after it moved by ``delta``; None unless reading it
    alone gives what reading the whole tree gives. ``tokens``: the parse's count grows by
    that much. JSON and JSON Lines (``_reparse_one``) and YAML (``formats.yamldoc``)."""
    root = prev.tree
    assert root is not None
    holder = root if root.is_array else root.get("messages")
    assert holder is not None and holder.starts is not None
    items, starts = holder.items, holder.starts
    node, base = items[k], starts[k]
    if index >= len(prev.message_data):
        return None
    old_msg = prev.message_data[index]
    if prev.starts[index] != base or old_msg.range != node.range:
        return None
    lb = prev.length + delta
    reader = Reader(fmt, lb)
    new_msg = reader.read_message(new_node, index, base)
    if (
        new_msg is None
        or reader.has_findings()
        or not reads_alone(new_msg)
        or not reads_alone(old_msg)
    ):
        return None
    if new_msg.id != old_msg.id and new_msg.id in _ids(prev):
        return None  # a duplicate id: the whole list decides which one is renamed
    new_msg = _as_before(reader, new_node, new_msg, old_msg)

    # Everything from the old end of the message on moves by ``delta``: the messages by a
    # new table of starts (the same objects stay), the rest by copies.
    at = base + node.range.end
    messages = (*prev.message_data[:index], new_msg, *prev.message_data[index + 1 :])
    if new_msg is not old_msg:  # (a new object: the others are the same)
        seq.note(prev.message_data, messages, index, len(messages) - index - 1)
    new_items = (*items[:k], new_node, *items[k + 1 :])
    new_holder = SNode(
        "array",
        _move_end(holder.range, delta),
        items=new_items,
        starts=_moved_starts(starts, k + 1, delta),
        error_counts=holder.error_counts,  # none before or after: no finding
    )
    head = k - index
    new_starts = _same_starts(starts, prev.starts, new_holder.starts, head)
    if new_starts is None:
        new_starts = _moved_starts(prev.starts, index + 1, delta)
    elif head:
        new_starts = new_starts[head:]
    if holder is root:
        new_root = new_holder
    else:
        members = []
        for m in root.members:
            if m.value is holder:
                members.append(Member(m.key, m.key_range, new_holder))
            elif m.key_range.start >= at:
                members.append(Member(m.key, m.key_range.shift(delta), _shift_node(m.value, delta)))
            else:
                members.append(m)
        new_root = SNode("object", _move_end(root.range, delta), members=tuple(members))

    marks_in: MarksMemo = prev._views.get("marks", {})
    new_marks = message_marks(new_node)
    old_marks = marks_in.get(id(node))
    detected = told = None
    if new_marks != (old_marks[1] if old_marks and old_marks[0] is node else message_marks(node)):
        # The format is told by the marks of every message: tell it again (the others'
        # marks from the memo); another provider's format is read whole.
        told = _told_again(prev, new_root, k, (node,), [(new_node, new_marks)], marks_in)
        detected = told.detection
        if detected.format not in NATIVE:
            return None
    res = _with_messages(prev, messages, new_starts, new_root, lb, at, delta, detected)
    _carry(prev, res, (node,), ((new_node, new_marks),), reader, tokens)
    if told is not None:
        res._views["tally"] = told
    ids = prev._views.get("ids")
    if ids is not None and new_msg.id != old_msg.id:
        ids = ids - {old_msg.id}  # (one copy: the previous version's set stays as it was)
        ids.add(new_msg.id)
    if ids is not None:
        res._views["ids"] = ids
    if prev._views.get("alone"):  # (the new message reads alone: checked above)
        res._views["alone"] = True
    return res


def _as_before(reader: Reader, node: SNode, msg: Message, old: Message) -> Message:
    """``msg`` (read from ``node`` by ``reader``), or the message ``old`` it replaces when
    it reads as that one did (an edit undone, a line read again unchanged): the previous
    object stays, so what the stages keep by identity serves it (the read kept for
    ``node`` gives it too)."""
    if msg is old or msg != old:
        return msg
    read = reader.reads.get(id(node))
    if read is not None and read.node is node:
        reader.reads[id(node)] = dataclasses.replace(read, message=old)
    return old


def _told_again(
    prev: Conversation,
    root: SNode | None,
    k: int,
    old: Sequence[SNode],
    new: list[tuple[SNode, tuple[tuple[str, str], ...]]],
    marks_in: MarksMemo,
    before: list[tuple[SNode, tuple[tuple[str, str], ...]]] | None = None,
) -> Tally:
    """The marks of ``root`` counted, its message nodes from ``k`` on, ``old``, replaced by
    ``new`` (each with its marks): from the previous version's count when that can tell the
    format and its reasons (``detect.retally``), else from every node's marks (the previous
    version's memo ``marks_in`` and ``new``). ``before``: ``old`` with their marks, when
    the caller has them."""
    jsonl = prev.format is DocFormat.JSONL
    memo: MarksMemo | None = None  # (made when a node's marks are looked up)

    def marks_of(node: SNode) -> tuple[tuple[str, str], ...]:
        nonlocal memo
        if memo is None:
            memo = {**marks_in, **{id(n): (n, m) for n, m in new}}
        hit = memo.get(id(node))
        return hit[1] if hit is not None and hit[0] is node else message_marks(node)

    counted = prev._views.get("tally")
    if before is None:
        before = [(n, marks_of(n)) for n in old]
    if isinstance(counted, Tally):  # (every native read keeps its count)
        found = retally(counted, k, before, new, jsonl=jsonl)
        if found is not None:
            return found
    return tally(root, jsonl=jsonl, marks_of=marks_of)


def _ids(conv: Conversation) -> set[str]:
    """The ids of the stored messages (unique: a conversation without findings)."""
    return conv.derived("ids", lambda c: {m.id for m in c.message_data})


def _carry(
    prev: Conversation,
    new: Conversation,
    old_nodes: Sequence[SNode],
    new_marks: Sequence[tuple[SNode, tuple[tuple[str, str], ...]]],
    reader: Reader | None,
    tokens: int,
) -> None:
    """Give ``new`` the memos the next re-read needs: the syntax state, what reading each
    message node gave and each node's format marks (``reading.read_parsed``): the
    previous version's, with the new nodes' (``reader``'s reads, ``new_marks``).

    The memos are shared with the previous version, not copied (10,000 entries a
    keystroke): each entry holds its node and is used only for that node (``is``), so
    entries of another version's nodes change no answer; they are dropped when the memo
    grows to twice the nodes of the version (``_pruned``)."""
    if prev.syntax is not None:
        object.__setattr__(new, "syntax", (prev.syntax[0], prev.syntax[1] + tokens))
    reads = prev._views.get("reads")
    marks = prev._views.get("marks")
    if reads is None or marks is None:
        reads, marks = dict(reads or {}), dict(marks or {})
    if reader is not None:
        reads.update(reader.reads)
    for node, node_marks in new_marks:
        marks[id(node)] = (node, node_marks)
    n = len(new.message_data) + len(old_nodes)
    if len(reads) > 2 * n + _SLACK or len(marks) > 2 * n + _SLACK:
        nodes = message_nodes(new.tree, new.format is DocFormat.JSONL)
        reads, marks = _pruned(reads, nodes), _pruned(marks, nodes)
    new._views["reads"] = reads
    new._views["marks"] = marks
    tally_in = prev._views.get("tally")  # the marks unchanged, unless the caller tells again
    if tally_in is not None:
        new._views["tally"] = tally_in


_SLACK = 4096  # entries of other versions' nodes a shared memo may hold beyond its own


def _pruned(memo: dict[int, Any], nodes: Sequence[SNode]) -> dict[int, Any]:
    """The entries of ``memo`` for ``nodes`` (a new dict: the old one stays as it was)."""
    res = {}
    for node in nodes:
        hit = memo.get(id(node))
        if hit is not None:
            res[id(node)] = hit
    return res


def _same_starts(
    items: tuple[int, ...] | None, messages: tuple[int, ...], new: tuple[int, ...] | None, head: int
) -> tuple[int, ...] | None:
    """The new table of the message list's items' starts (``new``) when it also gives the
    messages' (from its ``head``-th entry on; the caller slices, for JSON Lines' header
    lines): the items (``items``, before the edit) and the messages (``messages``) stand
    at the same places but for ``head`` items before the first message, and the caller
    knows the edit replaced items with as many messages. None otherwise (each table is
    moved on its own). One table shared saves moving 10,000 starts twice."""
    if items is None or new is None or len(items) != len(messages) + head:
        return None
    if items is messages or items[head:] == messages:
        return new
    return None


def _moved_starts(starts: tuple[int, ...], at: int, delta: int) -> tuple[int, ...]:
    """``starts`` with the entries from ``at`` on moved by ``delta``."""
    if not delta or at >= len(starts):
        return starts
    return (*starts[:at], *map(delta.__add__, starts[at:]))


def _reparse_member(
    prev: Conversation, root: SNode, p: int, old_end: int, delta: int, new_text: Text
) -> Conversation | None:
    """An edit strictly inside the value of a top-level member other than ``messages``
    (``settings``, ``system_prompt``, ``custom_agent_prompt``, ``project_files``...): that
    value is parsed again, the document's fields are read again from the top-level
    members (cheap: no message is read), and the messages are kept, moved by the table of
    starts when they come after the edit."""
    index = next(
        (
            j
            for j, m in enumerate(root.members)
            if m.value.range.start < p and old_end < m.value.range.end
        ),
        None,
    )
    if index is None:
        return None
    member = root.members[index]
    value = member.value
    if member.key == "messages":
        return None
    start, new_end = value.range.start, value.range.end + delta
    source = new_text[start:new_end]
    parser = JsonParser(source, 0, len(source), 0)
    parsed = parser._value(1)
    if (
        parser.errors
        or parsed is None
        or parsed.kind != value.kind
        or parsed.range.start != 0
        or parsed.range.end != len(source)
        or not parser.at_end()
    ):
        return None
    new_value = absolute(parsed, start)
    members = list(root.members)
    members[index] = Member(member.key, member.key_range, new_value)
    for j in range(index + 1, len(members)):
        m = members[j]
        members[j] = Member(m.key, m.key_range.shift(delta), _shift_node(m.value, delta))
    new_root = SNode("object", _move_end(root.range, delta), members=tuple(members))
    if top_marks(new_root) != top_marks(root):
        return None  # the format the document is read as may change (``tools``, ``model``)
    reader = Reader(prev.format, prev.length + delta)
    fields: dict[str, Any] = {}
    reader.top_fields(new_root, fields, allow_messages=True)
    if reader.issues:
        return None
    holder = new_root.get("messages")
    moved = holder is not None and holder.range.start >= value.range.end + delta
    res = Conversation(
        format=prev.format,
        source_format=prev.source_format,
        source_format_why=prev.source_format_why,
        message_data=prev.message_data,
        starts=_moved_starts(prev.starts, 0, delta) if moved else prev.starts,
        tree=new_root,
        length=prev.length + delta,
        **fields,
    )
    _carry(prev, res, (), (), None, parser.tokens)
    return res


def _move_end(r: TextRange, delta: int) -> TextRange:
    return TextRange(r.start, r.end + delta)


def _shift_node(node: SNode, delta: int) -> SNode:
    """``node`` (absolute) with every range (keys included) moved by ``delta``; the items of
    the message list are relative to their starts: only the starts move."""
    kind = node.kind
    r = node.range
    moved = TextRange(r.start + delta, r.end + delta)
    if kind == "object":
        return SNode(
            kind,
            moved,
            node.value,
            (),
            tuple(
                Member(m.key, m.key_range.shift(delta), _shift_node(m.value, delta))
                for m in node.members
            ),
        )
    if kind == "array":
        if node.starts is not None:
            return SNode(
                kind,
                moved,
                node.value,
                node.items,
                starts=_moved_starts(node.starts, 0, delta),
                error_counts=node.error_counts,
            )
        return SNode(kind, moved, node.value, tuple(_shift_node(i, delta) for i in node.items))
    return SNode(kind, moved, node.value)


def _with_messages(
    prev: Conversation,
    data: tuple[Message, ...],
    starts: tuple[int, ...] | None,
    tree: SNode,
    length: int,
    at: int,
    delta: int,
    detected: Detection | None,
) -> Conversation:
    """``prev`` with a new message list, table of starts and tree: the header's ranges after
    ``at`` moved by ``delta``, and the format as ``detected`` told it again (None: kept)."""
    res = dataclasses.replace(
        prev,
        message_data=data,
        starts=starts,
        settings_ranges={k: _shift_any(r, at, delta) for k, r in prev.settings_ranges.items()},
        system_prompt=_shift_any(prev.system_prompt, at, delta),
        custom_agent_prompt=_shift_any(prev.custom_agent_prompt, at, delta),
        project_files=_shift_any(prev.project_files, at, delta),
        tools=_shift_any(prev.tools, at, delta),
        reminder=_shift_any(prev.reminder, at, delta),
        additional_context=_shift_any(prev.additional_context, at, delta),
        tree=tree,
        length=length,
    )
    if detected is not None:
        res = dataclasses.replace(
            res, source_format=detected.format.value, source_format_why=detected.why
        )
    return res


def _shift_any(obj: Any, at: int, delta: int) -> Any:
    """Move every ``TextRange`` starting at or after ``at`` in a model value by ``delta``.

    Walks ranges, tuples and the model's dataclasses; anything else (strings, numbers, the
    plain dicts of schemas and settings) holds no range and is returned as is.
    """
    if isinstance(obj, TextRange):
        return obj.shift(delta) if obj.start >= at else obj
    if isinstance(obj, tuple):
        return tuple(_shift_any(x, at, delta) for x in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, (type, SNode)):
        changes = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            moved = _shift_any(value, at, delta)
            if moved is not value:
                changes[f.name] = moved
        return dataclasses.replace(obj, **changes) if changes else obj
    return obj
