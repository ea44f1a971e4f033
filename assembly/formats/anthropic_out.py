"""The assembled context rendered as an Anthropic Messages request.

The pipeline assembles OpenAI-shaped messages (one per layout entry); ``render_anthropic``
turns them into what the Messages API takes: the system prompt apart (``system``), every
other message a ``user`` or ``assistant`` turn of content blocks, tool calls as
``tool_use`` blocks and tool results as ``tool_result`` blocks of the next user turn.
Consecutive turns of one role are merged into one, as the API itself merges them, so the
result strictly alternates.

Where the assembled context breaks one of the API's structural rules, the render repairs
it and says so in a ``Repair`` (each becomes a diagnostic of the ``anthropic-*`` rules):

- ``anthropic-tool-result-placement``: a tool result that is not in the user turn right
  after its ``tool_use`` turn is sent as text (``[Tool Result] id=…``, the format the
  ``ollama`` provider uses); one after other content of its turn is moved before it;
- ``anthropic-unanswered-tool-use``: a ``tool_use`` whose result is not in the next turn
  is sent as text (``[Tool Call] name=… id=… args=…``);
- ``anthropic-merged-turns``: two consecutive document messages of one role become one
  turn (the API merges them; the author may not expect it);
- ``anthropic-first-turn-not-user``: the first turn is the assistant's (the API takes it:
  a request recorded in 2025 that starts so was answered; it is said, not changed);
- ``anthropic-empty-message``: a message with nothing to send (empty text blocks are
  refused) is left out;
- ``anthropic-system-in-history``: a system message after the first is sent as a user
  turn's text (the API has one system prompt, apart);
- ``anthropic-tool-use-id``: a call id the API refuses (not ``[A-Za-z0-9_-]+``, or used
  twice in the request) is sent renamed, and its result with it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from assembly.assemble import Assembly

_ID_OK = re.compile(r"^[A-Za-z0-9_-]+$")
_ID_BAD_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_DATA_URL = re.compile(r"^data:([^;,]+);base64,(.*)$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Repair:
    """A structural problem of the assembled context and what the render did about it."""

    code: str
    id: str  # the layout id of the message it is about
    message: str
    call_id: str | None = None  # the call it is about, as the document names it


@dataclass(slots=True)
class AnthropicRequest:
    """The ``system`` and ``messages`` of the request, and where each message came from."""

    system: str | list[dict[str, Any]] | None  # text blocks when the prefix mark is on it
    messages: list[dict[str, Any]]
    sources: list[list[str]]  # the layout ids each message was made of
    repairs: list[Repair] = field(default_factory=list)


@dataclass(slots=True)
class _Turn:
    """One message of the Anthropic request being built: its role, its content blocks and
    the layout ids they come from."""

    role: str
    blocks: list[dict[str, Any]]
    ids: list[str]
    block_ids: list[str]  # the layout id each block came from


def render_anthropic(messages: Sequence[dict[str, Any]], ids: Sequence[str]) -> AnthropicRequest:
    """Render assembled OpenAI-shaped ``messages`` (with their layout ``ids``)."""
    repairs: list[Repair] = []
    system_parts: list[str] = []
    system_cache: Any = None
    turns: list[_Turn] = []
    renames = _call_ids(messages, ids, repairs)
    for k, (msg, mid) in enumerate(zip(messages, ids, strict=True)):
        role = msg.get("role")
        if role == "system" and k == 0:
            system_parts.append(str(msg.get("content") or ""))
            system_cache = msg.get("cache_control")
            continue
        blocks = _blocks(msg, renames.get(k, []))
        if blocks and "cache_control" in msg:
            # The cacheable prefix's mark (``prompt_cache_marker``) goes on its last block.
            blocks[-1] = {**blocks[-1], "cache_control": msg["cache_control"]}
        if not blocks:
            if not str(mid).startswith("$"):
                repairs.append(
                    Repair(
                        "anthropic-empty-message",
                        mid,
                        f"message `{mid}` has nothing to send (the API refuses empty content): "
                        "it is left out",
                    )
                )
            continue
        if role == "system" and not str(mid).startswith("$"):
            repairs.append(
                Repair(
                    "anthropic-system-in-history",
                    mid,
                    f"system message `{mid}` is not the first message: the Messages API has "
                    "one system prompt, so it is sent as a user turn's text",
                )
            )
        turn_role = "assistant" if role == "assistant" else "user"
        turns.append(_Turn(turn_role, blocks, [mid], [mid] * len(blocks)))
    merged = _merge(turns, repairs)
    back: dict[str, str] = {}
    for k, names in renames.items():
        for call, name in zip(messages[k].get("tool_calls") or (), names, strict=False):
            back[name] = str(call.get("id", ""))
    _pair(merged, repairs, back)
    if merged and merged[0].role != "user":
        first = merged[0].ids[0]
        repairs.append(
            Repair(
                "anthropic-first-turn-not-user",
                first,
                f"the request starts with the assistant's message `{first}`: the API takes "
                "it, and the model reads that turn as its own words",
            )
        )
    system: str | list[dict[str, Any]] | None = "\n\n".join(p for p in system_parts if p) or None
    if system and system_cache is not None:
        system = [{"type": "text", "text": system, "cache_control": system_cache}]
    return AnthropicRequest(
        system=system,
        messages=[{"role": t.role, "content": t.blocks} for t in merged],
        sources=[t.ids for t in merged],
        repairs=repairs,
    )


def _call_ids(
    messages: Sequence[dict[str, Any]], ids: Sequence[str], repairs: list[Repair]
) -> dict[int, list[str]]:
    """The id each call is sent as, and each result answers, by message position (one per
    call of an assistant message, one for a tool message): ids the API refuses are renamed
    (a result answers the latest call of its id)."""
    used: set[str] = set()
    current: dict[str, str] = {}  # original id -> the name its latest call is sent as
    res: dict[int, list[str]] = {}
    for k, msg in enumerate(messages):
        if msg.get("role") == "assistant":
            names = []
            for call in msg.get("tool_calls") or ():
                orig = str(call.get("id", ""))
                name = _ID_BAD_CHARS.sub("_", orig) or "call"
                base, n = name, 1
                while name in used:
                    n += 1
                    name = f"{base}_{n}"
                used.add(name)
                current[orig] = name
                names.append(name)
                if name != orig:
                    why = (
                        "used twice in the request"
                        if _ID_OK.match(orig)
                        else "not made of letters, digits, `_` and `-`"
                    )
                    repairs.append(
                        Repair(
                            "anthropic-tool-use-id",
                            ids[k],
                            f"call id `{orig}` is {why}: it is sent as `{name}`",
                            orig,
                        )
                    )
            res[k] = names
        elif msg.get("role") == "tool":
            orig = str(msg.get("tool_call_id", ""))
            res[k] = [current.get(orig, _ID_BAD_CHARS.sub("_", orig) or "call")]
    return res


def _blocks(msg: dict[str, Any], names: list[str]) -> list[dict[str, Any]]:
    role = msg.get("role")
    content = msg.get("content")
    out: list[dict[str, Any]] = []
    if role == "tool":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": names[0]}
        if content:
            block["content"] = str(content)
        return [block]
    if isinstance(content, str):
        if content.strip():
            out.append({"type": "text", "text": content})
    elif isinstance(content, list):
        for part in content:
            if part.get("type") == "text":
                if str(part.get("text", "")).strip():
                    out.append({"type": "text", "text": part["text"]})
            elif part.get("type") == "image_url":
                out.append(_image(str(part.get("image_url", {}).get("url", ""))))
    for call, name in zip(msg.get("tool_calls") or (), names, strict=False):
        fn = call.get("function", {})
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except (ValueError, RecursionError):  # (nested too deep to read)
            args = None
        if not isinstance(args, dict):
            args = {"arguments": fn.get("arguments")}
        out.append({"type": "tool_use", "id": name, "name": str(fn.get("name", "")), "input": args})
    return out


def _image(ref: str) -> dict[str, Any]:
    m = _DATA_URL.match(ref)
    if m:
        source = {"type": "base64", "media_type": m.group(1), "data": m.group(2)}
    elif ref.startswith(("http://", "https://")):
        source = {"type": "url", "url": ref}
    else:
        source = {"type": "file", "file_id": ref}
    return {"type": "image", "source": source}


def _merge(turns: list[_Turn], repairs: list[Repair]) -> list[_Turn]:
    """Consecutive turns of one role become one, as the API merges them."""
    out: list[_Turn] = []
    for t in turns:
        if out and out[-1].role == t.role:
            prev = out[-1]
            a, b = prev.ids[-1], t.ids[0]
            if _authored(a, prev) and _authored(b, t):
                repairs.append(
                    Repair(
                        "anthropic-merged-turns",
                        b,
                        f"`{a}` and `{b}` are consecutive {t.role} messages: the Messages API "
                        "merges them into one turn",
                    )
                )
            prev.blocks.extend(t.blocks)
            prev.ids.extend(t.ids)
            prev.block_ids.extend(t.block_ids)
        else:
            out.append(_Turn(t.role, list(t.blocks), list(t.ids), list(t.block_ids)))
    return out


def _authored(mid: str, turn: _Turn) -> bool:
    """Whether a message was written as its own message (not created by the pipeline, not
    a tool result, not an uploaded file injected before its message)."""
    if mid.startswith("$") or "/files/" in mid:
        return False
    return not any(
        b.get("type") == "tool_result"
        for b, i in zip(turn.blocks, turn.block_ids, strict=True)
        if i == mid
    )


def _pair(turns: list[_Turn], repairs: list[Repair], back: dict[str, str]) -> None:
    """Every ``tool_use`` answered in the next turn, every ``tool_result`` answering the
    turn before, results first in their turn; what cannot be is sent as text."""
    for i, t in enumerate(turns):
        if t.role != "assistant":
            continue
        nxt = turns[i + 1] if i + 1 < len(turns) and turns[i + 1].role == "user" else None
        answered = {
            b["tool_use_id"] for b in (nxt.blocks if nxt else ()) if b["type"] == "tool_result"
        }
        for k, b in enumerate(t.blocks):
            if b["type"] == "tool_use" and b["id"] not in answered:
                repairs.append(
                    Repair(
                        "anthropic-unanswered-tool-use",
                        t.block_ids[k],
                        f"the `tool_use` `{b['id']}` ({b['name']}) has no `tool_result` in the "
                        "next user turn, which the API refuses: it is sent as text",
                        back.get(b["id"], b["id"]),
                    )
                )
                t.blocks[k] = {
                    "type": "text",
                    "text": f"[Tool Call] name={b['name']} id={b['id']} "
                    f"args={json.dumps(b['input'])}",
                }
    for i, t in enumerate(turns):
        if t.role != "user":
            continue
        prev = turns[i - 1] if i > 0 else None
        uses = {b["id"] for b in (prev.blocks if prev else ()) if b["type"] == "tool_use"}
        results, rest = [], []
        seen_other = False
        for k, b in enumerate(t.blocks):
            bid = t.block_ids[k]
            if b["type"] != "tool_result":
                seen_other = True
                rest.append((b, bid))
                continue
            if b["tool_use_id"] not in uses:
                repairs.append(
                    Repair(
                        "anthropic-tool-result-placement",
                        bid,
                        f"the result of `{b['tool_use_id']}` is not in the user turn right "
                        "after its `tool_use`, which the API refuses: it is sent as text",
                        back.get(b["tool_use_id"], b["tool_use_id"]),
                    )
                )
                text = f"[Tool Result] id={b['tool_use_id']}\n{b.get('content', '')}"
                rest.append(({"type": "text", "text": text}, bid))
                continue
            if seen_other:
                repairs.append(
                    Repair(
                        "anthropic-tool-result-placement",
                        bid,
                        f"the result of `{b['tool_use_id']}` comes after other content of its "
                        "turn; the API takes tool results first: it is moved before them",
                        back.get(b["tool_use_id"], b["tool_use_id"]),
                    )
                )
            results.append((b, bid))
        ordered = results + rest
        t.blocks = [b for b, _ in ordered]
        t.block_ids = [i for _, i in ordered]


def render_assembly(a: Assembly) -> AnthropicRequest:
    """The Anthropic request of an assembly (its provider messages and layout ids)."""
    ids = [e.id for e in a.layout]
    ids += [f"${k}" for k in range(len(ids), len(a.provider_messages))]
    return render_anthropic(a.provider_messages, ids[: len(a.provider_messages)])
