"""Recover tool calls that a model wrote as text instead of sending them as structured calls.

This follows Onyx's three layers (reference §10, "Recovering tool calls written as text"):

1. ``FunctionCallsFilter`` / ``strip_function_calls``: the streaming display filter that removes
   ``<function_calls>…</function_calls>`` blocks from what the user sees.
2. ``looks_like_tool_call_markup``: the empty-answer recovery guard's "is this markup?" check.
3. ``fallback_extraction`` over ``extract_tool_calls``: the post-stream extraction, tried once
   per turn, which recovers calls from JSON objects first and ``<invoke>``/``<parameter>``
   blocks only when no JSON object matched.

Where promptls deliberately differs from Onyx:

- ``find_json_objects`` is string-aware: braces inside JSON strings do not count (Onyx counts
  every brace). Quotes only open strings inside an unclosed ``{``, so prose quotes between
  objects are harmless, and a raw line break ends a string (a JSON string cannot contain one),
  so a stray quote in prose or code can hide objects on its own line only.
  A ``{`` inside a string is not a candidate: inside a real JSON string such an object cannot
  have keys (its quotes would end the string), so it could never match a tool.
- The ``{"function": {"name": …, "arguments": …}}`` shape yields its call once: the inner
  ``function`` object is suppressed as a nested duplicate (Onyx yields the call twice).
- Call ids are deterministic, not random: ``extracted_`` + the first 8 hex digits of the SHA-1 of
  ``f"{index}:{name}:{json.dumps(arguments, sort_keys=True)}"``, where ``index`` is the call's
  position in the returned list. The same text always gives the same ids.
- ``find_json_objects`` tries at most ``MAX_JSON_CANDIDATES`` candidate objects per text (in
  opening-brace order), so a long message full of braces costs a bounded amount of parsing.

Everything here is pure: no IO, no clock, no randomness. Offsets (``RecoveredCall.start`` and
``end``) are code points (Python ``str`` indices) into the text that was scanned.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# At most this many candidate objects (balanced ``{…}`` spans that start like a JSON object)
# are handed to ``json.loads`` per text; later ones are ignored.
MAX_JSON_CANDIDATES = 2_000


@dataclass(frozen=True, slots=True)
class RecoveredCall:
    """A tool call recovered from text.

    ``start``/``end`` are the code-point offsets of the matched JSON object or ``<invoke>``
    block in the scanned text, so ``text[start:end]`` is exactly what was recovered.
    ``shape`` is ``"name-arguments"``, ``"function-wrapper"``, ``"tool-key"``, ``"schema"``
    (the four JSON shapes, in matching order) or ``"invoke"``.
    """

    name: str
    arguments: dict[str, Any]
    id: str
    start: int
    end: int
    shape: str


@dataclass(frozen=True, slots=True)
class FallbackResult:
    """The outcome of one post-stream extraction (layer 3).

    ``attempted`` is true when extraction was triggered, whether or not it found anything; the
    caller then sets its once-per-turn flag. ``source`` names the text the calls came from
    (``"answer"``, ``"raw_answer"`` or ``"reasoning"``), or is ``None`` when ``calls`` is empty.
    """

    attempted: bool
    calls: tuple[RecoveredCall, ...]
    source: str | None


class FunctionCallsFilter:
    """Strip ``<function_calls>…</function_calls>`` blocks from streamed text (layer 1).

    Markers match case-insensitively. An open marker counts only when the next character is
    the end of the buffer, ``>``, a space, a tab, ``\\n`` or ``\\r``; so ``<function_calls_v2>``
    stays text, but a chunk that ends right after ``<function_calls`` opens a block even if the
    next chunk goes on with ``_v2>`` (as in Onyx). A trailing prefix of ``<function_calls`` is
    held back until the next chunk decides it. ``flush`` drops an unclosed block and returns
    the held-back text.
    """

    __slots__ = ("_inside", "_pending")

    def __init__(self) -> None:
        self._pending = ""  # text not yet emitted or dropped
        self._inside = False  # true between an open marker and its close marker

    def feed(self, chunk: str) -> str:
        """Add a chunk and return the text that can be shown now."""
        self._pending += chunk
        res: list[str] = []
        while True:
            if self._inside:
                close = _CLOSE_MARKER_RE.search(self._pending)
                if close is None:
                    # Only a tail that may begin a split close marker is worth keeping.
                    self._pending = self._pending[-(len(_CLOSE_MARKER) - 1) :]
                    break
                self._pending = self._pending[close.end() :]
                self._inside = False
            open_marker = _OPEN_MARKER_RE.search(self._pending)
            if open_marker is None:
                cut = len(self._pending) - _held_back_len(self._pending)
                res.append(self._pending[:cut])
                self._pending = self._pending[cut:]
                break
            res.append(self._pending[: open_marker.start()])
            self._pending = self._pending[open_marker.end() :]
            self._inside = True
        return "".join(res)

    def flush(self) -> str:
        """End the stream: drop an unclosed block, return any held-back text."""
        res = "" if self._inside else self._pending
        self._pending = ""
        self._inside = False
        return res


def strip_function_calls(text: str) -> str:
    """Return ``text`` with its ``<function_calls>`` blocks removed, as the stream filter would."""
    text_filter = FunctionCallsFilter()
    return text_filter.feed(text) + text_filter.flush()


def looks_like_tool_call_markup(text: str) -> bool:
    """Return whether text looks like XML tool-call markup (layer 2).

    True when the lower-cased text contains both ``<function_calls`` and ``<invoke``; no
    ``<parameter>`` is needed, so zero-argument invocations count.
    """
    lowered = text.lower()
    return "<function_calls" in lowered and "<invoke" in lowered


def sanitize_llm_output(text: str) -> str:
    """Remove NUL characters and surrogate code points (which cannot be encoded as UTF-8)."""
    return _BAD_CHARS_RE.sub("", text)


def parse_tool_args(value: object) -> dict[str, Any]:
    """Parse structured tool-call arguments into a dict, as Onyx's ``_parse_tool_args_to_dict``.

    ``None`` → ``{}``. A dict is returned with its string values sanitized and, when they look
    like a JSON array or object, parsed. A string is sanitized and parsed as JSON; a JSON
    string literal holding an object (double encoding) is parsed once more; the values of the
    resulting dict are handled like a dict's (without sanitizing again). Anything else, and
    any parse failure, gives ``{}``.
    """
    if isinstance(value, dict):
        return {
            key: _parse_json_container(sanitize_llm_output(v) if isinstance(v, str) else v)
            for key, v in value.items()
        }
    if not isinstance(value, str):
        return {}
    parsed = _loads(sanitize_llm_output(value))
    if isinstance(parsed, str):
        parsed = _loads(parsed)
    if not isinstance(parsed, dict):
        return {}
    return {key: _parse_json_container(v) for key, v in parsed.items()}


def resolve_tool_arguments(obj: dict[str, Any]) -> dict[str, Any] | None:
    """Return the ``arguments`` (else ``parameters``) of a tool-call-like object as a dict.

    A missing pair gives ``{}``; a string is sanitized and parsed as JSON (unparseable → ``{}``);
    a dict is returned as is; any other value (list, number, null, a JSON string that is not an
    object) gives ``None``.
    """
    arguments = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(arguments, str):
        parsed = _loads(sanitize_llm_output(arguments))
        arguments = {} if parsed is _INVALID else parsed
    if isinstance(arguments, dict):
        return arguments
    return None


def find_json_objects(text: str) -> list[tuple[int, int, dict[str, Any]]]:
    """Return every JSON object in text as ``(start, end, obj)``, in opening-brace order.

    One string-aware pass pairs each ``{`` with its ``}`` (braces inside JSON strings do not
    count), so nested objects are found as well as the objects around them. Each balanced
    span that starts like an object (``{`` then optional whitespace then ``"`` or ``}``) is a
    candidate; at most ``MAX_JSON_CANDIDATES`` candidates are parsed, and spans that do not
    parse as a JSON object are skipped. ``text[start:end]`` is the object's source.
    """
    res: list[tuple[int, int, dict[str, Any]]] = []
    n_candidates = 0
    for start, end in sorted(_balanced_brace_spans(text)):
        if _OBJECT_START_RE.match(text, start) is None:
            continue
        if n_candidates == MAX_JSON_CANDIDATES:
            break
        n_candidates += 1
        obj = _loads(text[start:end])
        if isinstance(obj, dict):
            res.append((start, end, obj))
    return res


def extract_tool_calls(text: str, tools: Sequence[Mapping[str, Any]]) -> list[RecoveredCall]:
    """Recover the tool calls written in text, for the tools offered (OpenAI definitions).

    JSON objects are matched first, each by the first of four shapes that applies:
    ``{"name": <tool>, "arguments"|"parameters": …}``, ``{"function": {…that shape…}}``,
    ``{"<tool>": {…}}`` and a match of the tool's parameter schema. Nested objects that merely
    repeat the previous call's arguments are skipped. Only when no JSON object matched are
    ``<invoke name="…">`` blocks with their ``<parameter>`` children read. Unknown tool names
    are ignored; with no usable tool definition nothing is recovered.
    """
    known = _known_tools(tools)
    if not text or not known:
        return []
    matches = _json_matches(text, known) or _invoke_matches(text, known)
    return [
        RecoveredCall(name, arguments, _call_id(index, name, arguments), start, end, shape)
        for index, (name, arguments, start, end, shape) in enumerate(matches)
    ]


def fallback_extraction(
    *,
    answer: str | None,
    raw_answer: str | None,
    reasoning: str | None,
    tools: Sequence[Mapping[str, Any]],
    tool_choice_required: bool,
    has_structured_calls: bool,
    already_attempted: bool,
) -> FallbackResult:
    """Run Onyx's post-stream tool-call extraction for one LLM step (layer 3).

    Args:
        answer: the displayed answer (after the ``<function_calls>`` filter).
        raw_answer: the unfiltered streamed content.
        reasoning: the reasoning text, if any.
        tools: the OpenAI tool definitions offered in this step.
        tool_choice_required: whether tool choice was REQUIRED.
        has_structured_calls: whether the step already returned structured tool calls.
        already_attempted: the caller's once-per-turn flag.

    Returns:
        Not attempted when ``already_attempted``, or when none of these holds: tool choice is
        required and there are no calls; there is reasoning but no answer and no calls; there
        are no calls and one of the texts looks like tool-call markup. Otherwise attempted,
        with the calls of the first source that yields any, tried in the order answer,
        raw answer (when it differs from the answer), reasoning.
    """
    not_attempted = FallbackResult(attempted=False, calls=(), source=None)
    if already_attempted or has_structured_calls:
        return not_attempted
    looks_like_markup = any(
        text and looks_like_tool_call_markup(text) for text in (answer, raw_answer, reasoning)
    )
    if not (tool_choice_required or (reasoning and not answer) or looks_like_markup):
        return not_attempted
    sources = (
        ("answer", answer),
        ("raw_answer", raw_answer if raw_answer != answer else None),
        ("reasoning", reasoning),
    )
    for source, text in sources:
        if not text:
            continue
        calls = extract_tool_calls(text, tools)
        if calls:
            return FallbackResult(attempted=True, calls=tuple(calls), source=source)
    return FallbackResult(attempted=True, calls=(), source=None)


# (name, arguments, start, end, shape) of one recovered call, before its id is assigned.
_Match = tuple[str, dict[str, Any], int, int, str]

_OPEN_MARKER = "<function_calls"
_CLOSE_MARKER = "</function_calls>"
_OPEN_MARKER_RE = re.compile(r"<function_calls(?=[> \t\n\r]|\Z)", re.IGNORECASE | re.ASCII)
_CLOSE_MARKER_RE = re.compile(r"</function_calls>", re.IGNORECASE | re.ASCII)

_BAD_CHARS_RE = re.compile("[\x00\ud800-\udfff]")

# The characters the brace scan reacts to; everything else is skipped by the regex engine.
_SCAN_RE = re.compile(r'[{}"\\\n]')
_OBJECT_START_RE = re.compile(r'\{\s*["}]')

_INVOKE_RE = re.compile(
    r"<invoke\b(?P<attrs>[^>]*)>(?P<body>.*?)</invoke>", re.IGNORECASE | re.DOTALL
)
_PARAMETER_RE = re.compile(
    r"<parameter\b(?P<attrs>[^>]*)>(?P<value>.*?)</parameter>", re.IGNORECASE | re.DOTALL
)
_NAME_ATTR_RE = re.compile(r"""\bname\s*=\s*(['"])(.*?)\1""", re.IGNORECASE | re.DOTALL)
_STRING_ATTR_RE = re.compile(r"""\bstring\s*=\s*(['"])(.*?)\1""", re.IGNORECASE | re.DOTALL)

# Returned by ``_loads`` for text that is not JSON, so that a JSON ``null`` stays distinct.
_INVALID: Any = object()


def _held_back_len(pending: str) -> int:
    """Return the length of the longest suffix of pending that begins the open marker."""
    # A prefix of the marker starts with "<", so only the last "<" can begin one.
    cut = pending.rfind("<")
    if cut == -1 or len(pending) - cut >= len(_OPEN_MARKER):
        return 0
    return len(pending) - cut if _OPEN_MARKER.startswith(pending[cut:].lower()) else 0


def _loads(text: str) -> Any:
    """Parse JSON, returning ``_INVALID`` instead of raising on bad or too deeply nested input."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _INVALID


def _parse_json_container(value: Any) -> Any:
    """Parse a string value that looks like a JSON array or object; keep anything else."""
    if not isinstance(value, str):
        return value
    stripped = value.strip()
    if not (
        (stripped.startswith("[") and stripped.endswith("]"))
        or (stripped.startswith("{") and stripped.endswith("}"))
    ):
        return value
    parsed = _loads(stripped)
    return value if parsed is _INVALID else parsed


def _balanced_brace_spans(text: str) -> list[tuple[int, int]]:
    """Return the ``(start, end)`` span of every balanced ``{…}`` pair, in closing order.

    Quotes open a string only inside an unclosed ``{``; inside a string, ``\\`` escapes the
    next character, braces do not count, and a raw line break ends the string (JSON strings
    cannot hold one, so the quote that opened it was prose). Unmatched braces are ignored.
    """
    res: list[tuple[int, int]] = []
    open_braces: list[int] = []
    in_string = False
    escaped_until = -1  # offsets below this are escaped by a preceding backslash
    for match in _SCAN_RE.finditer(text):
        offset = match.start()
        char = text[offset]
        if in_string:
            if char == "\n":
                in_string = False
            elif offset < escaped_until:
                pass
            elif char == "\\":
                escaped_until = offset + 2
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = bool(open_braces)
        elif char == "{":
            open_braces.append(offset)
        elif char == "}" and open_braces:
            res.append((open_braces.pop(), offset + 1))
    return res


def _known_tools(tools: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Map each offered function tool's name to its ``function`` definition."""
    res: dict[str, Mapping[str, Any]] = {}
    for tool in tools:
        if not isinstance(tool, Mapping) or tool.get("type") != "function":
            continue
        function = tool.get("function")
        if not isinstance(function, Mapping):
            continue
        name = function.get("name")
        if isinstance(name, str) and name:
            res[name] = function
    return res


def _json_matches(text: str, known: dict[str, Mapping[str, Any]]) -> list[_Match]:
    """Match the JSON objects of text against the tools, dropping nested duplicates."""
    res: list[_Match] = []
    previous: tuple[dict[str, Any], str, tuple[str, dict[str, Any]]] | None = None
    for start, end, obj in find_json_objects(text):
        matched = _match_json_object(obj, known)
        if matched is None:
            continue
        name, arguments, shape = matched
        if (
            previous is not None
            and previous[2] == (name, arguments)
            and _is_nested_duplicate(obj, previous[0], previous[1], known)
        ):
            continue
        res.append((name, arguments, start, end, shape))
        previous = (obj, shape, (name, arguments))
    return res


def _match_json_object(
    obj: dict[str, Any], known: dict[str, Mapping[str, Any]]
) -> tuple[str, dict[str, Any], str] | None:
    """Return ``(name, arguments, shape)`` for the first shape obj matches, or ``None``."""
    name = obj.get("name")
    if isinstance(name, str) and name in known:
        arguments = resolve_tool_arguments(obj)
        if arguments is not None:
            return name, arguments, "name-arguments"
    function = obj.get("function")
    if isinstance(function, dict):
        name = function.get("name")
        if isinstance(name, str) and name in known:
            arguments = resolve_tool_arguments(function)
            if arguments is not None:
                return name, arguments, "function-wrapper"
    for name in known:
        if isinstance(obj.get(name), dict):
            return name, obj[name], "tool-key"
    for name, function_def in known.items():
        properties, required = _schema(function_def)
        if not properties:
            continue
        if all(isinstance(key, str) and key in obj for key in required) and any(
            key in obj for key in properties
        ):
            return name, {key: v for key, v in obj.items() if key in properties}, "schema"
    return None


def _schema(function_def: Mapping[str, Any]) -> tuple[Mapping[str, Any], Sequence[Any]]:
    """Return the ``properties`` and ``required`` of a definition; malformed parts are empty."""
    parameters = function_def.get("parameters")
    if not isinstance(parameters, Mapping):
        return {}, ()
    properties = parameters.get("properties")
    required = parameters.get("required")
    return (
        properties if isinstance(properties, Mapping) else {},
        required if isinstance(required, list | tuple) else (),
    )


def _is_nested_duplicate(
    obj: dict[str, Any],
    previous_obj: dict[str, Any],
    previous_shape: str,
    known: dict[str, Mapping[str, Any]],
) -> bool:
    """Return whether obj is a part of the previous kept object that repeats its call."""
    # Onyx only knows the nested arguments object; the inner object of the function-wrapper
    # shape is also part of the same call, so promptls skips it too (Onyx yields it again).
    if previous_shape == "function-wrapper" and obj == previous_obj.get("function"):
        return True
    nested = _nested_arguments(previous_obj, known)
    return nested is not None and obj == nested


def _nested_arguments(
    obj: dict[str, Any], known: dict[str, Mapping[str, Any]]
) -> dict[str, Any] | None:
    """Return the arguments object nested in a tool-call-shaped object, if it is a dict."""
    name = obj.get("name")
    if isinstance(name, str) and name in known:
        arguments = obj.get("arguments", obj.get("parameters"))
        if isinstance(arguments, dict):
            return arguments
    function = obj.get("function")
    if isinstance(function, dict):
        name = function.get("name")
        if isinstance(name, str) and name in known:
            arguments = function.get("arguments", function.get("parameters"))
            if isinstance(arguments, dict):
                return arguments
    for name in known:
        if isinstance(obj.get(name), dict):
            return obj[name]
    return None


def _invoke_matches(text: str, known: dict[str, Mapping[str, Any]]) -> list[_Match]:
    """Read ``<invoke name="…">`` blocks of known tools and their ``<parameter>`` values."""
    res: list[_Match] = []
    import html  # here: most documents have no such markup (html.entities: 2-10 ms)

    for invoke in _INVOKE_RE.finditer(text):
        name = _attribute(_NAME_ATTR_RE, invoke["attrs"])
        if not name or name not in known:
            continue
        arguments: dict[str, Any] = {}
        for parameter in _PARAMETER_RE.finditer(invoke["body"]):
            parameter_name = _attribute(_NAME_ATTR_RE, parameter["attrs"])
            if not parameter_name:
                continue
            string_attr = _attribute(_STRING_ATTR_RE, parameter["attrs"])
            value = sanitize_llm_output(html.unescape(parameter["value"]).strip())
            if string_attr is not None and string_attr.lower() == "true":
                arguments[parameter_name] = value
            else:
                parsed = _loads(value)
                arguments[parameter_name] = value if parsed is _INVALID else parsed
        res.append((name, arguments, invoke.start(), invoke.end(), "invoke"))
    return res


def _attribute(attr_re: re.Pattern[str], attrs: str) -> str | None:
    """Return an attribute's value: trimmed, html-unescaped and sanitized."""
    import html

    match = attr_re.search(attrs)
    if match is None:
        return None
    return sanitize_llm_output(html.unescape(match[2].strip()))


def _call_id(index: int, name: str, arguments: dict[str, Any]) -> str:
    """Return the deterministic id of the index-th recovered call."""
    import hashlib  # here: OpenSSL costs 5-10 ms to load (`promptls rule` never needs it)

    key = f"{index}:{name}:{json.dumps(arguments, sort_keys=True)}"
    return "extracted_" + hashlib.sha1(key.encode()).hexdigest()[:8]


# Tool calls in a model's own chat-template markup, recognised without any declared tool:
# Hermes / Qwen write `<tool_call>{"name": …, "arguments": …}</tool_call>`; Llama 3.1+ writes
# `<|python_tag|>` followed by a JSON call (`parameters` or `arguments`) or a
# `tool.call(…)` line.
_HERMES_RE = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)
_PYTHON_TAG = "<|python_tag|>"
_PYTHON_CALL_RE = re.compile(r"\s*([A-Za-z_][\w.]*?)(?:\.call)?\(")


def may_hold_markup(text: str) -> bool:
    """Whether ``text`` holds a marker ``markup_tool_calls`` reads calls after (a check
    that finds no call where it says none, at C speed)."""
    return "<tool_call>" in text or _PYTHON_TAG in text


def markup_tool_calls(text: str) -> list[RecoveredCall]:
    """The calls written in a well-known model markup, with their spans in ``text``."""
    res: list[RecoveredCall] = []
    if "<tool_call>" in text:
        for m in _HERMES_RE.finditer(text):
            obj = _loads(m.group(1))
            if isinstance(obj, dict) and isinstance(obj.get("name"), str) and obj["name"]:
                args = obj.get("arguments", obj.get("parameters", {}))
                args = args if isinstance(args, dict) else {}
                name = obj["name"]
                res.append(
                    RecoveredCall(
                        name, args, _call_id(len(res), name, args), m.start(), m.end(), "hermes"
                    )
                )
    at = text.find(_PYTHON_TAG)
    if at != -1:
        body_start = at + len(_PYTHON_TAG)
        body = text[body_start:]
        objects = find_json_objects(body)
        obj = objects[0][2] if objects else None
        name: str | None = None
        args: dict[str, Any] = {}
        if obj is not None and isinstance(obj.get("name"), str):
            name = obj["name"]
            raw = obj.get("parameters", obj.get("arguments", {}))
            args = raw if isinstance(raw, dict) else {}
        else:
            call = _PYTHON_CALL_RE.match(body)
            name = call.group(1) if call else None
        if name:
            end = body_start + (objects[0][1] if obj is not None and objects else len(body))
            res.append(RecoveredCall(name, args, _call_id(len(res), name, args), at, end, "llama"))
    return res
