"""A validator of Anthropic Messages request bodies, written from the API's documented rules.

No network and no SDK: ``validate`` checks the shapes and the structural rules of the
Messages API reference (roles and alternation — not a user turn first: the API answered
a recorded request that opens with the assistant, content block types and their fields, tool
use and tool result pairing and order, id patterns and uniqueness, image sources), and
returns what it finds, one sentence per problem with its JSON path. Tests use it on every
request promptls prints for ``--provider anthropic``.
"""

from __future__ import annotations

import re
from typing import Any

_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}
_BLOCKS_USER = {"text", "image", "document", "tool_result", "search_result"}
_BLOCKS_ASSISTANT = {"text", "tool_use", "thinking", "redacted_thinking"}


def validate(body: dict[str, Any], *, request: bool = False) -> list[str]:
    """The problems of ``body`` (``system`` and ``messages``; with ``request``, also the
    required ``model`` and ``max_tokens``); empty when the API would take it."""
    errors: list[str] = []
    if not isinstance(body, dict):
        return ["the body must be an object"]
    if request:
        if not isinstance(body.get("model"), str) or not body["model"]:
            errors.append("model: a non-empty string is required")
        mt = body.get("max_tokens")
        if not isinstance(mt, int) or isinstance(mt, bool) or mt < 1:
            errors.append("max_tokens: an integer ≥ 1 is required")
    system = body.get("system")
    if system is not None:
        if isinstance(system, list):
            for k, b in enumerate(system):
                if not (isinstance(b, dict) and b.get("type") == "text"):
                    errors.append(f"system[{k}]: system blocks must be text blocks")
                else:
                    errors.extend(_text(b, f"system[{k}]"))
        elif not isinstance(system, str):
            errors.append("system: must be a string or text blocks")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*errors, "messages: a non-empty array is required"]
    seen_ids: set[str] = set()
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(msg, dict):
            errors.append(f"{where}: must be an object")
            continue
        extra = set(msg) - {"role", "content"}
        if extra:
            errors.append(f"{where}: unknown keys {sorted(extra)}")
        role = msg.get("role")
        if role not in ("user", "assistant"):
            errors.append(f"{where}.role: must be `user` or `assistant`, not {role!r}")
            continue
        if i > 0 and isinstance(messages[i - 1], dict) and messages[i - 1].get("role") == role:
            errors.append(f"{where}: roles must alternate (two `{role}` messages in a row)")
        content = msg.get("content")
        last = i == len(messages) - 1
        if isinstance(content, str):
            if not content.strip() and not (last and role == "assistant"):
                errors.append(f"{where}.content: must not be empty")
            if last and role == "assistant" and content != content.rstrip():
                errors.append(f"{where}.content: a final assistant turn must not end in whitespace")
            blocks: list[Any] = []
        elif isinstance(content, list):
            if not content and not (last and role == "assistant"):
                errors.append(f"{where}.content: must not be empty")
            blocks = content
        else:
            errors.append(f"{where}.content: must be a string or an array of content blocks")
            continue
        allowed = _BLOCKS_USER if role == "user" else _BLOCKS_ASSISTANT
        results_done = False
        for k, b in enumerate(blocks):
            bw = f"{where}.content[{k}]"
            if not isinstance(b, dict) or not isinstance(b.get("type"), str):
                errors.append(f"{bw}: a block must be an object with a `type`")
                continue
            t = b["type"]
            if t not in allowed:
                errors.append(f"{bw}: `{t}` blocks are not allowed in a {role} message")
                continue
            if t == "tool_result":
                if results_done:
                    errors.append(f"{bw}: tool_result blocks must come before any other content")
            else:
                results_done = True
            errors.extend(_block(b, bw, seen_ids))
        errors.extend(_pairing(messages, i, blocks, where))
    return errors


def _text(b: dict[str, Any], where: str) -> list[str]:
    t = b.get("text")
    if not isinstance(t, str):
        return [f"{where}.text: a string is required"]
    if not t.strip():
        return [f"{where}.text: text blocks must be non-empty"]
    return []


def _block(b: dict[str, Any], where: str, seen_ids: set[str]) -> list[str]:
    t = b["type"]
    if t == "text":
        return _text(b, where)
    if t == "image":
        return _image_source(b.get("source"), f"{where}.source")
    if t == "document":
        src = b.get("source")
        if not isinstance(src, dict) or src.get("type") not in (
            "base64",
            "text",
            "url",
            "content",
            "file",
        ):
            return [f"{where}.source: a document source is required"]
        return []
    if t == "tool_use":
        errs = []
        tid = b.get("id")
        if not isinstance(tid, str) or not _TOOL_ID.match(tid):
            errs.append(f"{where}.id: must match ^[a-zA-Z0-9_-]+$ (got {tid!r})")
        elif tid in seen_ids:
            errs.append(f"{where}.id: `{tid}` is used by another tool_use of the request")
        else:
            seen_ids.add(tid)
        if not isinstance(b.get("name"), str) or not _TOOL_NAME.match(b["name"]):
            errs.append(f"{where}.name: must match ^[a-zA-Z0-9_-]{{1,128}}$")
        if not isinstance(b.get("input"), dict):
            errs.append(f"{where}.input: an object is required")
        return errs
    if t == "tool_result":
        errs = []
        if not isinstance(b.get("tool_use_id"), str) or not _TOOL_ID.match(b["tool_use_id"]):
            errs.append(f"{where}.tool_use_id: must match ^[a-zA-Z0-9_-]+$")
        c = b.get("content")
        if isinstance(c, list):
            for k, inner in enumerate(c):
                if not isinstance(inner, dict) or inner.get("type") not in ("text", "image"):
                    errs.append(f"{where}.content[{k}]: must be a text or image block")
                elif inner["type"] == "text":
                    errs.extend(_text(inner, f"{where}.content[{k}]"))
                else:
                    errs.extend(_image_source(inner.get("source"), f"{where}.content[{k}].source"))
        elif c is not None and not isinstance(c, str):
            errs.append(f"{where}.content: must be a string or blocks")
        if "is_error" in b and not isinstance(b["is_error"], bool):
            errs.append(f"{where}.is_error: must be a boolean")
        return errs
    if t == "thinking":
        ok = isinstance(b.get("thinking"), str) and isinstance(b.get("signature"), str)
        return [] if ok else [f"{where}: thinking blocks need `thinking` and `signature`"]
    if t == "redacted_thinking":
        return [] if isinstance(b.get("data"), str) else [f"{where}.data: a string is required"]
    return []


def _image_source(src: Any, where: str) -> list[str]:
    if not isinstance(src, dict):
        return [f"{where}: a source object is required"]
    st = src.get("type")
    if st == "base64":
        errs = []
        if src.get("media_type") not in _IMAGE_TYPES:
            errs.append(f"{where}.media_type: must be one of {sorted(_IMAGE_TYPES)}")
        if not isinstance(src.get("data"), str):
            errs.append(f"{where}.data: a string is required")
        return errs
    if st == "url":
        return [] if isinstance(src.get("url"), str) else [f"{where}.url: a string is required"]
    if st == "file":
        ok = isinstance(src.get("file_id"), str)
        return [] if ok else [f"{where}.file_id: a string is required"]
    return [f"{where}.type: must be base64, url or file"]


def _pairing(messages: list[Any], i: int, blocks: list[Any], where: str) -> list[str]:
    """tool_use answered in the very next message; tool_result answers the message before."""
    errs = []
    msg = messages[i]
    if msg.get("role") == "assistant":
        uses = [b.get("id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        if uses:
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            nb = nxt.get("content") if isinstance(nxt, dict) else None
            answered = {
                b.get("tool_use_id")
                for b in (nb if isinstance(nb, list) else [])
                if isinstance(b, dict) and b.get("type") == "tool_result"
            }
            for u in uses:
                if u not in answered:
                    errs.append(f"{where}: tool_use `{u}` has no tool_result in the next message")
    else:
        prev = messages[i - 1] if i > 0 else None
        pb = prev.get("content") if isinstance(prev, dict) else None
        uses_before = {
            b.get("id")
            for b in (pb if isinstance(pb, list) else [])
            if isinstance(b, dict) and b.get("type") == "tool_use"
        }
        for b in blocks:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                if b.get("tool_use_id") not in uses_before:
                    errs.append(
                        f"{where}: tool_result `{b.get('tool_use_id')}` answers no tool_use of "
                        "the previous message"
                    )
    return errs
