"""Which conversation format a document is, told by its shape alone.

A document never says its format in a flag: ``detect`` scores the marks of each format
that its top-level keys, its tools and its messages carry (an Anthropic ``tool_use``
block, a Responses ``function_call`` item, a promptls ``settings`` key, an OpenAI
``tool_calls`` list…) and picks the format with most of them; a tie goes to the promptls
reader, which reads OpenAI chat messages too. The reason is kept, so every output can
name the format read and why (a wrong guess must be impossible to miss).

The marks of one message depend on that message's source alone (``message_marks``), so a
re-read of one edited message can tell whether the guess could change.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import chain
from operator import itemgetter

from assembly.syntax import SNode


class SourceFormat(StrEnum):
    PROMPTLS = "promptls"
    OPENAI_CHAT = "openai-chat"
    ANTHROPIC = "anthropic-messages"
    RESPONSES = "openai-responses"

    @property
    def title(self) -> str:
        return _TITLES[self]


_TITLES = {
    SourceFormat.PROMPTLS: "promptls conversation",
    SourceFormat.OPENAI_CHAT: "OpenAI Chat Completions messages",
    SourceFormat.ANTHROPIC: "Anthropic Messages request",
    SourceFormat.RESPONSES: "OpenAI Responses input",
}

# Formats whose reader is ``documents.Reader`` (an edit can be re-read incrementally).
NATIVE = frozenset({SourceFormat.PROMPTLS, SourceFormat.OPENAI_CHAT})

_A, _R, _O, _P = "anthropic", "responses", "openai", "promptls"

# Top-level keys only one family uses (a chat-completions body shares model, messages,
# tools, temperature… with the others, which say nothing).
_TOP_MARKS: dict[str, str] = {
    "system": _A,
    "anthropic_version": _A,
    "stop_sequences": _A,
    "top_k": _A,
    "mcp_servers": _A,
    "container": _A,
    "input": _R,
    "instructions": _R,
    "previous_response_id": _R,
    "max_output_tokens": _R,
    "max_tool_calls": _R,
    "truncation": _R,
    "include": _R,
    "max_completion_tokens": _O,
    "response_format": _O,
    "frequency_penalty": _O,
    "presence_penalty": _O,
    "logit_bias": _O,
    "n": _O,
    # Bedrock Converse's own keys: read by the promptls reader, which says it does not read
    # that format (``documents.CONVERSE_KEYS``), rather than by the Anthropic one its
    # ``system`` would pick, which read its untyped blocks as unsupported ones.
    "inferenceConfig": _P,
    "toolConfig": _P,
    "additionalModelRequestFields": _P,
    "additionalModelResponseFieldPaths": _P,
    "guardrailConfig": _P,
    "promptVariables": _P,
    "performanceConfig": _P,
    "settings": _P,
    "system_prompt": _P,
    "custom_agent_prompt": _P,
    "project_files": _P,
    "reminder": _P,
    "user_info": _P,
}
TOP_WEIGHT = 3  # a top-level key says more than one message does
# Top-level keys of the formats whose readers ask for every range of the tree at once
# (``syntax.absolute``): written before ``messages``, its items are not read by the C
# scanner (``syntax.parse_json(unscanned=)``), whose ranges are found when asked for.
FOREIGN_TOP_KEYS = frozenset(k for k, family in _TOP_MARKS.items() if family in (_A, _R))

ANTHROPIC_BLOCKS = frozenset(
    {
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "document",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
        "search_result",
        "compaction",
    }
)
RESPONSES_ITEMS = frozenset(
    {
        "message",
        "function_call",
        "function_call_output",
        "reasoning",
        "item_reference",
        "compaction",
        "custom_tool_call",
        "custom_tool_call_output",
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "computer_call",
        "computer_call_output",
        "image_generation_call",
        "local_shell_call",
        "local_shell_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
    }
)
RESPONSES_PARTS = frozenset({"input_text", "output_text", "input_image", "input_file", "refusal"})
OPENAI_PARTS = frozenset({"image_url", "input_audio", "file"})
_OPENAI_ROLES = frozenset({"system", "tool", "developer", "function"})
_PROMPTLS_ROLES = frozenset({"reminder", "summary"})
_OPENAI_KEYS = frozenset({"tool_calls", "tool_call_id", "function_call"})
_PROMPTLS_KEYS = frozenset(
    {"files", "parent", "file_id", "summarizes_through", "token_count", "promptls-ignore"}
)


@dataclass(frozen=True, slots=True)
class Detection:
    """The format read, and the marks that decided it (for every output to show)."""

    format: SourceFormat
    why: str  # e.g. "top-level `system`, `tool_use` blocks"


def message_marks(node: SNode) -> tuple[tuple[str, str], ...]:
    """The marks one message (or Responses item) carries: ``(family, what)`` pairs."""
    if node.kind != "object":
        return ()
    fields = node.fields()  # (one table for the look-ups; a key it lacks has no mark)
    if (
        "type" not in fields
        and _KEY_MARKS.keys().isdisjoint(fields)
        and getattr(fields.get("content"), "kind", None) != "array"
    ):
        # The commonest message: its role is its only mark (one tuple per role, shared).
        role = fields.get("role")
        if role is not None and role.kind == "string":
            return _ROLE_ONLY.get(role.value, ())
        return ()
    marks: list[tuple[str, str]] = []
    item_type = fields.get("type")
    if item_type is not None and item_type.kind == "string":
        mark = _ITEM_MARKS.get(item_type.value)
        if mark is not None:
            marks.append(mark)
    role = fields.get("role")
    if role is not None and role.kind == "string":
        mark = _ROLE_MARKS.get(role.value)
        if mark is not None:
            marks.append(mark)
    if not _KEY_MARKS.keys().isdisjoint(fields):
        for key in fields:  # (in source order; a key written twice marks once)
            mark = _KEY_MARKS.get(key)
            if mark is not None:
                marks.append(mark)
    content = fields.get("content")
    if content is not None and content.kind == "array":
        for part in content.items:
            marks.extend(_part_marks(part))
    return tuple(marks)


def _part_marks(part: SNode) -> list[tuple[str, str]]:
    if part.kind != "object":
        return []
    ptype = part.get("type")
    kind = ptype.value if ptype is not None and ptype.kind == "string" else None
    mark = _PART_MARKS.get(kind) if kind is not None else None
    if mark is not None:
        return [mark]
    if kind == "image" and part.get("source") is not None:
        return [(_A, "`image` blocks with `source`")]
    return []


# Each mark is made once and shared: a message's marks are kept for as long as its
# document is open (``reading.detect_format``), and 10,000 messages would otherwise hold
# 10,000 copies of the same few pairs (and make them, a string each, on open).
_ITEM_MARKS = {t: (_R, f"`{t}` items") for t in RESPONSES_ITEMS}
_ROLE_MARKS = {r: (_O, f"role `{r}`") for r in _OPENAI_ROLES} | {
    r: (_P, f"role `{r}`") for r in _PROMPTLS_ROLES
}
_ROLE_ONLY = {r: (mark,) for r, mark in _ROLE_MARKS.items()}
_KEY_MARKS = {k: (_O, f"`{k}`") for k in _OPENAI_KEYS} | {k: (_P, f"`{k}`") for k in _PROMPTLS_KEYS}
# A part type in several families is the first's: Anthropic's, then Responses', then OpenAI's.
_PART_MARKS = (
    {k: (_O, f"`{k}` parts") for k in OPENAI_PARTS}
    | {k: (_R, f"`{k}` parts") for k in RESPONSES_PARTS}
    | {k: (_A, f"`{k}` blocks") for k in ANTHROPIC_BLOCKS}
)


def tool_marks(node: SNode) -> tuple[tuple[str, str], ...]:
    """The marks of a ``tools`` list: Anthropic's ``input_schema``, Responses' flat
    function tools, Chat Completions' nested ``function``."""
    if not node.is_array:
        return ()
    marks: list[tuple[str, str]] = []
    for item in node.items:
        if not item.is_object:
            continue
        if item.get("input_schema") is not None:
            marks.append((_A, "tools with `input_schema`"))
        elif item.get("function") is not None:
            marks.append((_O, "tools with `function`"))
        elif item.get("parameters") is not None and item.get("name") is not None:
            marks.append((_R, "flat function tools"))
    return tuple(marks)


def top_marks(root: SNode) -> tuple[tuple[str, str], ...]:
    """The marks of a document object's own keys and of its ``tools``."""
    marks: list[tuple[str, str]] = []
    for m in root.members:
        family = _TOP_MARKS.get(m.key)
        if family is not None:
            marks.extend([(family, f"top-level `{m.key}`")] * TOP_WEIGHT)
        if m.key == "tools":
            marks.extend(tool_marks(m.value))
        if m.key == "model" and m.value.is_string and "claude" in m.value.value.lower():
            # Weak: Claude is also served behind OpenAI-compatible endpoints.
            marks.append((_A, "a Claude `model`"))
    return tuple(marks)


def message_nodes(root: SNode | None, jsonl: bool) -> list[SNode]:
    """The message (or input item) nodes a document holds, for detection."""
    if root is None:
        return []
    if root.is_array:
        return list(root.items)
    if root.is_object and not jsonl:
        for key in ("messages", "input"):
            node = root.get(key)
            if node is not None and node.is_array:
                return list(node.items)
    return []


Marks = tuple[tuple[str, str], ...]


def _walk(
    root: SNode | None, jsonl: bool, marks_of: Callable[[SNode], Marks]
) -> Iterator[tuple[tuple[int, int], Marks]]:
    """The marks of a document in the order ``tally`` takes them, each with where it
    stands: (0, 0) the top-level keys, (1, i) JSON Lines line ``i`` read as a header's keys,
    (2, i) message node ``i``."""
    if root is not None and root.is_object and not jsonl:
        yield (0, 0), top_marks(root)
    nodes = message_nodes(root, jsonl)
    if jsonl and root is not None and root.is_array:
        for i, node in enumerate(nodes):  # a header line's keys count as top-level keys
            if header_like(node):
                yield (1, i), top_marks(node)
    places = [(2, i) for i in range(len(nodes))]
    yield from zip(places, map(marks_of, nodes), strict=True)


def header_like(node: SNode) -> bool:
    """Whether a JSON Lines line's keys count as top-level keys (no ``role``, no ``type``)."""
    return node.is_object and node.get("role") is None and node.get("type") is None


def detect(
    root: SNode | None,
    *,
    jsonl: bool = False,
    marks_of: Callable[[SNode], Marks] | None = None,
) -> Detection:
    """The format of a parsed document (its source tree) and the marks that decided it.

    ``marks_of`` gives a message node's marks (``message_marks``, or a memo of it)."""
    return tally(root, jsonl=jsonl, marks_of=marks_of or message_marks).detection


def _winner(score: Counter[str]) -> tuple[SourceFormat, str]:
    """The format the marks' count per family points to, and that family."""
    native = score[_O] + score[_P]
    best = max((score[_A], 2, SourceFormat.ANTHROPIC), (score[_R], 1, SourceFormat.RESPONSES))
    if best[0] > native:
        fmt = best[2]
        return fmt, _A if fmt is SourceFormat.ANTHROPIC else _R
    if score[_P]:
        return SourceFormat.PROMPTLS, _P
    return SourceFormat.OPENAI_CHAT, _O


@dataclass(frozen=True, slots=True)
class Tally:
    """A document's marks counted (``tally``), so that the format can be told again after
    some message nodes were replaced without taking every node's marks again (``retally``).

    The format is the family with the most marks (``_winner``; a tie goes to the promptls
    reader), told by the first three different reasons of that family in document order:
    ``firsts`` holds them with where each first stands (``_walk``'s places); a reason
    that first stands after the third changes nothing."""

    counts: Counter[tuple[str, str]]
    detection: Detection
    family: str
    firsts: tuple[tuple[str, tuple[int, int]], ...]

    @property
    def horizon(self) -> tuple[int, int] | None:
        """Where the third reason first stands (None: fewer than three)."""
        return self.firsts[2][1] if len(self.firsts) == 3 else None


def tally(root: SNode | None, *, jsonl: bool, marks_of: Callable[[SNode], Marks]) -> Tally:
    """The marks of a document counted; ``detection`` is ``detect``'s."""
    groups = list(_walk(root, jsonl, marks_of))
    counts = Counter(chain.from_iterable(map(_MARKS, groups)))
    fmt, family = _winner(_families(counts))
    return _told(counts, fmt, family, _first_three(groups, family))


def _first_three(
    groups: Iterable[tuple[tuple[int, int], Marks]], family: str, limit: int | None = 3
) -> list[tuple[str, tuple[int, int]]]:
    """The first three (``limit``; None: all) different reasons of ``family`` among
    ``groups`` (in their order), each with where it first stands."""
    firsts: list[tuple[str, tuple[int, int]]] = []
    seen: set[str] = set()
    for at, ms in groups:
        for fam, what in ms:
            if fam == family and what not in seen:
                seen.add(what)
                firsts.append((what, at))
                if len(firsts) == limit:
                    return firsts
    return firsts


def _told(
    counts: Counter[tuple[str, str]],
    fmt: SourceFormat,
    family: str,
    firsts: Sequence[tuple[str, tuple[int, int]]],
) -> Tally:
    why = ", ".join(r for r, _ in firsts) if firsts else "no mark of another format"
    return Tally(counts, Detection(fmt, why), family, tuple(firsts))


def retally(
    t: Tally,
    k: int,
    old: list[tuple[SNode, Marks]],
    new: list[tuple[SNode, Marks]],
    *,
    jsonl: bool,
) -> Tally | None:
    """``t`` after the message nodes from ``k`` on, ``old`` (each with its marks), were
    replaced by ``new`` (the top-level keys unchanged): what ``tally`` of the new tree
    gives, or None when the reasons it gives might change in a way the count cannot tell
    (it must be told from every node then): the winning family changed, or a node
    replaced held where one of the first three reasons first stood.

    Otherwise the first three reasons are those of ``t`` (moved by the replacement's
    shift) and the new nodes' own, in document order: a reason not among ``t``'s first
    three first stands after the third of them, so it can come first only in a new node."""
    removed, added = _region(old, k, jsonl), _region(new, k, jsonl)
    counts = t.counts.copy()
    # (Counted at C speed, then subtracted and added per distinct mark.)
    counts.subtract(Counter(chain.from_iterable(ms for _, ms in removed)))
    counts.update(Counter(chain.from_iterable(ms for _, ms in added)))
    counts = +counts  # (no count below zero: they were counted there)
    fmt, family = _winner(_families(counts))
    if family != t.family:
        return None
    end, shift = k + len(old), len(new) - len(old)
    kept: list[tuple[str, tuple[int, int]]] = []
    for what, (tier, i) in t.firsts:
        if tier > 0 and k <= i < end:
            return None  # (where it stands next is not known)
        kept.append((what, (tier, i + shift) if tier > 0 and i >= end else (tier, i)))
    groups: list[tuple[tuple[int, int], Marks]] = []
    if jsonl:
        groups += [((1, j), top_marks(n)) for j, (n, _) in enumerate(new, k) if header_like(n)]
    groups += [((2, j), ms) for j, (_, ms) in enumerate(new, k)]
    merged = sorted([*kept, *_first_three(groups, family, None)], key=_PLACE)
    firsts = _first_three(((at, ((family, r),)) for r, at in merged), family)
    return _told(counts, fmt, family, firsts)


def _region(
    nodes: list[tuple[SNode, Marks]], k: int, jsonl: bool
) -> list[tuple[tuple[int, int], list[tuple[str, str]]]]:
    """The marks of the nodes replaced from ``k`` on, by where they stand (``_walk``'s
    places, every node's index taken as ``k``: only what stands before them matters)."""
    res: list[tuple[tuple[int, int], list[tuple[str, str]]]] = []
    if jsonl:
        res.append(((1, k), [m for node, _ in nodes if header_like(node) for m in top_marks(node)]))
    res.append(((2, k), list(chain.from_iterable(map(_MARKS, nodes)))))
    return res


_MARKS = itemgetter(1)  # of a node with its marks
_PLACE = itemgetter(1)  # of a reason with where it first stands


def _families(counts: Counter[tuple[str, str]]) -> Counter[str]:
    score: Counter[str] = Counter()
    for (fam, _), n in counts.items():
        score[fam] += n
    return score
