"""Whether an assembled ``messages`` array is a valid request for its provider (no network).

Written from the providers' documented request rules:

- OpenAI chat completions (Azure OpenAI takes the same body): ``messages`` is a non-empty
  array; each message has a ``role`` of ``system``, ``developer``, ``user``, ``assistant`` or
  ``tool`` and only that role's fields; ``content`` is a string or an array of content parts
  (``text``; on a user message also ``image_url`` with ``url``, ``input_audio``, ``file``; on
  an assistant message ``refusal``), required except on an assistant message that makes
  tool calls, where it may be null; ``tool_calls`` is a non-empty array of
  ``{id, type: "function", function: {name, arguments}}`` with a non-empty string id, a
  name of at most 64 characters from ``a-zA-Z0-9_-`` and a string of arguments; every call
  is answered by a ``tool`` message (``tool_call_id``, ``content``) among the messages that
  directly follow it, and a ``tool`` message answers a call of the assistant message before
  its run of tool messages.
- Ollama (``/api/chat``, and its OpenAI-compatible endpoint for content parts): roles
  ``system``, ``user``, ``assistant``, ``tool``; ``content`` a string or text / image parts.

``problems`` returns what a provider would refuse; a problem of pairing calls and answers
names its call id, so a test can check that promptls, which keeps such input as Onyx does
(an unanswered call, a second answer, an id reused while open), reports it at its place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_OPENAI_FIELDS = {
    "system": {"role", "content", "name"},
    "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls", "refusal", "audio", "function_call"},
    "tool": {"role", "content", "tool_call_id"},
}
_PARTS = {
    "system": {"text"},
    "developer": {"text"},
    "user": {"text", "image_url", "input_audio", "file"},
    "assistant": {"text", "refusal"},
    "tool": {"text"},
}


@dataclass(frozen=True)
class Problem:
    index: int  # the message's place in ``messages``
    text: str
    # For the problems of pairing: the call id, and ``unanswered`` (a call no tool message
    # answers), ``repeated`` (a call id twice among the open calls) or ``unpaired`` (a tool
    # message that answers no call of the assistant message before its run).
    call_id: str | None = None
    kind: str | None = None


def problems(
    messages: Any, provider: str, *, extra_fields: frozenset[str] = frozenset()
) -> list[Problem]:
    """What the provider would refuse in ``messages`` (empty: it is a valid request).

    ``extra_fields`` are message fields a gateway takes besides the provider's own (e.g.
    LiteLLM passes Anthropic's ``cache_control`` marker through)."""
    if not isinstance(messages, list) or not messages:
        return [Problem(-1, "`messages` must be a non-empty array")]
    if provider == "ollama":
        return _ollama(messages, extra_fields)
    return _openai(messages, extra_fields)


def _openai(messages: list[Any], extra_fields: frozenset[str]) -> list[Problem]:
    res: list[Problem] = []
    open_calls: dict[str, int] = {}  # calls of the last assistant message not yet answered
    in_tool_run = False
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in _OPENAI_FIELDS:
            res.append(Problem(i, f"not a message with a known role: {m!r:.80}"))
            continue
        role = m["role"]
        extra = set(m) - _OPENAI_FIELDS[role] - extra_fields
        if extra:
            res.append(Problem(i, f"fields not allowed on a {role} message: {sorted(extra)}"))
        if role != "tool":
            for call_id, at in open_calls.items():
                res.append(
                    Problem(at, f"tool call `{call_id}` is not answered", call_id, "unanswered")
                )
            open_calls = {}
            in_tool_run = False
        calls = m.get("tool_calls")
        if role == "assistant" and calls is not None:
            if not isinstance(calls, list) or not calls:
                res.append(Problem(i, "`tool_calls` must be a non-empty array"))
            else:
                for c in calls:
                    res.extend(_call(i, c))
                    if isinstance(c, dict) and isinstance(c.get("id"), str):
                        if c["id"] in open_calls:
                            res.append(
                                Problem(
                                    i, f"tool call id `{c['id']}` repeated", c["id"], "repeated"
                                )
                            )
                        open_calls[c["id"]] = i
                in_tool_run = True
        content = m.get("content")
        needs_content = not (role == "assistant" and calls)
        if content is None:
            if needs_content:
                res.append(Problem(i, f"a {role} message needs `content`"))
        elif isinstance(content, list):
            for part in content:
                if not isinstance(part, dict) or part.get("type") not in _PARTS[role]:
                    res.append(Problem(i, f"content part not allowed on {role}: {part!r:.60}"))
                elif part["type"] == "text" and not isinstance(part.get("text"), str):
                    res.append(Problem(i, "a text part needs a string `text`"))
                elif part["type"] == "image_url" and not isinstance(
                    (part.get("image_url") or {}).get("url"), str
                ):
                    res.append(Problem(i, "an image part needs `image_url.url`"))
            if not content and needs_content:
                res.append(Problem(i, "empty content array"))
        elif not isinstance(content, str):
            res.append(Problem(i, f"`content` must be a string or parts: {content!r:.60}"))
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                res.append(Problem(i, "a tool message needs a string `tool_call_id`"))
            elif not in_tool_run or call_id not in open_calls:
                res.append(
                    Problem(
                        i,
                        f"tool message `{call_id}` answers no preceding call",
                        call_id,
                        "unpaired",
                    )
                )
            else:
                del open_calls[call_id]
    for call_id, at in open_calls.items():
        res.append(Problem(at, f"tool call `{call_id}` is not answered", call_id, "unanswered"))
    return res


def _call(i: int, c: Any) -> list[Problem]:
    if not isinstance(c, dict):
        return [Problem(i, "a tool call must be an object")]
    res = []
    if not isinstance(c.get("id"), str) or not c["id"]:
        res.append(Problem(i, f"a tool call needs a non-empty string `id`: {c!r:.60}"))
    if c.get("type") != "function":
        res.append(Problem(i, "a tool call needs `type: function`"))
    fn = c.get("function")
    if not isinstance(fn, dict):
        return [*res, Problem(i, "a tool call needs `function`")]
    if not isinstance(fn.get("name"), str) or not _NAME.match(fn["name"]):
        res.append(Problem(i, f"invalid function name {fn.get('name')!r}"))
    if not isinstance(fn.get("arguments"), str):
        res.append(Problem(i, "`function.arguments` must be a string"))
    return res


def _ollama(messages: list[Any], extra_fields: frozenset[str]) -> list[Problem]:
    res = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "tool"):
            res.append(Problem(i, f"not an Ollama message: {m!r:.80}"))
            continue
        content = m.get("content")
        if isinstance(content, list):
            for part in content:
                if not isinstance(part, dict) or part.get("type") not in ("text", "image_url"):
                    res.append(Problem(i, f"content part Ollama does not take: {part!r:.60}"))
        elif not isinstance(content, str):
            res.append(Problem(i, f"Ollama needs string `content`: {content!r:.60}"))
        extra = set(m) - {"role", "content", "images", "tool_calls", "tool_name", "thinking"}
        extra -= extra_fields
        if extra:
            res.append(Problem(i, f"fields Ollama does not take: {sorted(extra)}"))
    return res
