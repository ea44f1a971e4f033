"""The structural diff of two assembled contexts: what a change does to what the model receives.

``diff_assembled(old, new)`` compares two ``assemble --format json`` objects (the §7
contract, so saved outputs compare as well as fresh analyses) and returns a JSON-able dict:

- ``tokens``: the assembled total before and after; ``tools_tokens`` and
  ``available_tokens`` (the window less the safety margin) likewise;
- ``segments``: the segments whose tokens changed, with deltas;
- ``messages``: the messages whose tokens changed, appeared or disappeared in the layout;
- ``moved``: messages that went from kept to dropped (the budget cut now removes them) or
  back;
- ``forgotten_files``: files added to or removed from the ``read_file`` listing;
- ``cache``: the provider cache prefix. Providers cache a request by its exact leading
  bytes, tool definitions first, then the messages. ``identical_messages`` is how many
  leading provider messages stay byte-identical; ``first_difference`` is the first byte of
  the serialized message list that differs (its message and an excerpt of both sides);
  ``invalidated_tokens`` are the tokens of the old cacheable prefix that no longer match,
  so the next request re-bills them at the uncached price;
- ``findings``: findings that appeared or disappeared, compared by file, code, severity and
  message (line numbers move with any edit above a finding, so they are not part of the
  identity; a finding in the conversation itself is in "its file" on both sides, so two
  files compared by name match); a finding that stays at its line with its rule and
  severity but whose message changed (a count in it moved) is listed under ``changed``
  with both messages;
- ``compression``: whether the compression plan changed (due or not, what it summarizes).

Pure: no IO; the caller reads the revisions (``server/cli/diff.py``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

# Characters of context shown on each side of the first differing byte.
EXCERPT = 40


def message_bytes(message: Mapping[str, Any]) -> bytes:
    """One provider message as it goes over the wire (key order kept, UTF-8, compact)."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def diff_assembled(
    old: Mapping[str, Any] | None, new: Mapping[str, Any] | None, *, file: str
) -> dict[str, Any]:
    """The structural diff of two ``assemble --format json`` objects (None: no such file)."""
    if old is None and new is None:
        raise ValueError("nothing to compare")
    status = "added" if old is None else "removed" if new is None else "changed"
    a: Mapping[str, Any] = old or _EMPTY
    b: Mapping[str, Any] = new or _EMPTY
    res: dict[str, Any] = {
        "file": file,
        "status": status,
        "tokens": _pair(a["budget"]["used"], b["budget"]["used"]),
        "tools_tokens": _pair(a["budget"]["tools"], b["budget"]["tools"]),
        "available_tokens": _pair(a["budget"]["available_tokens"], b["budget"]["available_tokens"]),
        "segments": _segments(a, b),
        "messages": _messages(a, b),
        "moved": _moved(a, b),
        "forgotten_files": _forgotten(a, b),
        "cache": _cache(a, b),
        "findings": _findings(a, b),
        "compression": _compression(a, b),
    }
    if status == "changed" and not has_changes(res):
        res["status"] = "unchanged"
    return res


def has_changes(d: Mapping[str, Any]) -> bool:
    """Whether a diff shows any change at all."""
    if d["status"] in ("added", "removed"):
        return True
    cache = d["cache"]
    return bool(
        d["tokens"]["delta"]
        or d["tools_tokens"]["delta"]
        or d["available_tokens"]["delta"]
        or d["segments"]
        or d["messages"]
        or d["moved"]["to_dropped"]
        or d["moved"]["to_kept"]
        or d["forgotten_files"]["added"]
        or d["forgotten_files"]["removed"]
        or cache["first_difference"] is not None
        or cache["old_prefix"] != cache["new_prefix"]
        or d["findings"]["appeared"]
        or d["findings"]["disappeared"]
        or d["findings"]["changed"]
        or d["compression"]["changed"]
    )


_EMPTY: Mapping[str, Any] = {
    "budget": {"used": 0, "tools": 0, "available_tokens": 0},
    "segments": [],
    "layout": [],
    "messages": [],
    "dropped": [],
    "orphans_dropped": [],
    "forgotten_files": [],
    "compression": {"triggered": False, "summarize": [], "keep": [], "history_tokens": 0},
    "cache_prefix_length": 0,
    "diagnostics": [],
}


def _pair(old: int, new: int) -> dict[str, int]:
    return {"old": old, "new": new, "delta": new - old}


def _segments(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, Any]]:
    olds = {s["name"]: s["tokens"] for s in a["segments"]}
    news = {s["name"]: s["tokens"] for s in b["segments"]}
    names = [*olds, *(n for n in news if n not in olds)]
    return [
        {"name": n, **_pair(olds.get(n, 0), news.get(n, 0))}
        for n in names
        if olds.get(n, 0) != news.get(n, 0)
    ]


def _messages(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Kept messages whose tokens changed, or that are kept on one side only."""
    olds = {e["id"]: e for e in a["layout"]}
    news = {e["id"]: e for e in b["layout"]}
    res = []
    for mid in [*news, *(i for i in olds if i not in news)]:
        o, n = olds.get(mid), news.get(mid)
        ot = o["tokens"] if o else 0
        nt = n["tokens"] if n else 0
        if o is not None and n is not None and ot == nt:
            continue
        res.append(
            {
                "id": mid,
                "segment": (n or o or {}).get("segment", ""),
                "kept": "both" if o and n else "new" if n else "old",
                **_pair(ot, nt),
            }
        )
    return res


def _status(obj: Mapping[str, Any]) -> dict[str, str]:
    res = {e["id"]: "kept" for e in obj["layout"]}
    res.update({i: "dropped" for i in obj["dropped"]})
    res.update({i: "orphan dropped" for i in obj["orphans_dropped"]})
    return res


def _moved(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, list[str]]:
    sa, sb = _status(a), _status(b)
    common = [i for i in sb if i in sa]
    return {
        "to_dropped": [i for i in common if sa[i] == "kept" and sb[i] != "kept"],
        "to_kept": [i for i in common if sa[i] != "kept" and sb[i] == "kept"],
    }


def _forgotten(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, list[str]]:
    fa = {f["file_id"]: f["filename"] for f in a["forgotten_files"]}
    fb = {f["file_id"]: f["filename"] for f in b["forgotten_files"]}
    return {
        "added": [fb[i] for i in fb if i not in fa],
        "removed": [fa[i] for i in fa if i not in fb],
    }


def _cache(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    ma: Sequence[Mapping[str, Any]] = a["messages"]
    mb: Sequence[Mapping[str, Any]] = b["messages"]
    ba = [message_bytes(m) for m in ma]
    bb = [message_bytes(m) for m in mb]
    same = 0
    while same < min(len(ba), len(bb)) and ba[same] == bb[same]:
        same += 1
    tools_changed = a["budget"]["tools"] != b["budget"]["tools"]
    first: dict[str, Any] | None = None
    if same < max(len(ba), len(bb)):
        # The byte offset in the serialized message list `[m0,m1,…]`.
        offset = 1 + sum(len(x) + 1 for x in ba[:same])
        xa = ba[same] if same < len(ba) else b""
        xb = bb[same] if same < len(bb) else b""
        k = 0
        while k < min(len(xa), len(xb)) and xa[k] == xb[k]:
            k += 1
        la, lb = a["layout"], b["layout"]
        first = {
            "message": same,
            "old_id": la[same]["id"] if same < len(la) else None,
            "new_id": lb[same]["id"] if same < len(lb) else None,
            "byte": offset + k,
            "byte_in_message": k,
            "old": _excerpt(xa, k),
            "new": _excerpt(xb, k),
        }
    old_prefix = int(a["cache_prefix_length"])
    reused = 0 if tools_changed else min(same, old_prefix)
    cached_tokens = sum(e["tokens"] for e in a["layout"][:old_prefix])
    reused_tokens = sum(e["tokens"] for e in a["layout"][:reused])
    if tools_changed:
        cached_tokens += a["budget"]["tools"]
    else:
        reused_tokens += a["budget"]["tools"] if old_prefix else 0
        cached_tokens += a["budget"]["tools"] if old_prefix else 0
    return {
        "old_prefix": old_prefix,
        "new_prefix": int(b["cache_prefix_length"]),
        "identical_messages": same,
        "tools_changed": tools_changed,
        "first_difference": first,
        "reused_messages": reused,
        "invalidated_tokens": max(0, cached_tokens - reused_tokens),
    }


def _excerpt(data: bytes, k: int) -> str:
    """Up to EXCERPT characters on each side of byte ``k``, with ``⟦⟧`` at the difference."""
    before = data[max(0, k - EXCERPT * 4) : k].decode("utf-8", errors="ignore")[-EXCERPT:]
    after = data[k : k + EXCERPT * 4].decode("utf-8", errors="ignore")[:EXCERPT]
    return f"{before}⟦{after}⟧" if data else "(no message)"


def _finding_key(f: Mapping[str, Any], own: object) -> tuple[str, str, str, str]:
    """A finding's identity. Its file is the side's own conversation (``own``, its
    ``file``) or another file (a template) by path: two files compared with
    ``diff --files`` are one conversation, whatever their names."""
    where = "" if f["file"] == own else str(f["file"])
    return (where, str(f["code"]), str(f["severity"]), str(f["message"]))


def _findings(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    own_a, own_b = a.get("file"), b.get("file")
    ca = Counter(_finding_key(f, own_a) for f in a["diagnostics"])
    cb = Counter(_finding_key(f, own_b) for f in b["diagnostics"])
    appeared = _pick(b["diagnostics"], cb - ca, own_b)
    disappeared = _pick(a["diagnostics"], ca - cb, own_a)
    # A finding at the same place with the same rule and severity whose message changed
    # (a count in it moved) is one finding that changed, not one gone and one new.
    changed = []
    for f in list(appeared):
        key = (_finding_key(f, own_b)[0], f["code"], f["severity"], f["line"])
        twin = next(
            (
                g
                for g in disappeared
                if (_finding_key(g, own_a)[0], g["code"], g["severity"], g["line"]) == key
            ),
            None,
        )
        if twin is not None:
            appeared.remove(f)
            disappeared.remove(twin)
            changed.append({**f, "old_message": twin["message"]})
    return {"appeared": appeared, "disappeared": disappeared, "changed": changed}


def _pick(
    diags: Sequence[Mapping[str, Any]], wanted: Counter[Any], own: object
) -> list[dict[str, Any]]:
    left = Counter(wanted)
    res = []
    for f in diags:
        key = _finding_key(f, own)
        if left[key] > 0:
            left[key] -= 1
            start = f["range"]["start"]
            res.append(
                {
                    "file": f["file"],
                    "line": start["line"],
                    "column": start["column"],
                    "code": f["code"],
                    "severity": f["severity"],
                    "message": f["message"],
                }
            )
    return res


def _compression(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    ca, cb = a["compression"], b["compression"]
    return {
        "changed": ca["triggered"] != cb["triggered"] or ca["summarize"] != cb["summarize"],
        "old_due": ca["triggered"],
        "new_due": cb["triggered"],
        "old_summarize": len(ca["summarize"]),
        "new_summarize": len(cb["summarize"]),
    }
