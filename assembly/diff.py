"""The structural diff of two assembled contexts: what a change does to what the model receives.

``diff_assembled(old, new)`` compares two ``assemble --format json`` objects (the §7
contract, so saved outputs compare as well as fresh analyses) and returns a JSON-able dict:

- ``tokens``: the assembled total before and after; ``tools_tokens`` and
  ``available_tokens`` (the window less the safety margin) likewise;
- ``segments``: the segments whose tokens changed, with deltas;
- ``messages``: the messages whose tokens changed, appeared or disappeared in the layout.
  Messages are matched by id. A document without ids numbers its messages by position, so
  an inserted or deleted message would shift every later id: when both objects carry
  ``_history`` (each history message's id and a digest of its content, added by the caller
  from the analysis; a saved output has none) and every history id is such a position, the
  two histories are aligned by content first (``difflib``), a message is matched to its own
  content under its new position (``old_id`` says where it was), and an inserted or deleted
  one is reported as such;
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

import difflib
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

# Characters of context shown on each side of the first differing byte.
EXCERPT = 40
# The most pairs of equal messages (old, new) between the common head and tail for which
# they are aligned by content: difflib's work grows with them (quadratic on a history of
# repeated messages; about 0.1 s at this bound on the worst), not with the messages alone.
MAX_ALIGNED = 20_000


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
    key = _aligner(a, b)
    res: dict[str, Any] = {
        "file": file,
        "status": status,
        "tokens": _pair(a["budget"]["used"], b["budget"]["used"]),
        "tools_tokens": _pair(a["budget"]["tools"], b["budget"]["tools"]),
        "available_tokens": _pair(a["budget"]["available_tokens"], b["budget"]["available_tokens"]),
        "segments": _segments(a, b),
        "messages": _messages(a, b, key),
        "moved": _moved(a, b, key),
        "forgotten_files": _forgotten(a, b),
        "cache": _cache(a, b),
        "findings": _findings(a, b),
        "compression": _compression(a, b, key),
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


# The id a document without ids gives a message: its position (an upload: the position of
# the message it came with, then its own).
_POSITIONAL = re.compile(r"\d+(?:/files/\d+)?")


def positional_id(mid: str) -> bool:
    """Whether ``mid`` is the id a document without ids gives a message (its position)."""
    return _POSITIONAL.fullmatch(mid) is not None


def _aligner(a: Mapping[str, Any], b: Mapping[str, Any]) -> Any:
    """``key(old_id)``: the new id an old message is compared with (see the module doc)."""
    ha, hb = a.get("_history"), b.get("_history")
    if not ha or not hb or not all(positional_id(i) for i, _ in [*ha, *hb]):
        return lambda mid: mid
    da, db = [d for _, d in ha], [d for _, d in hb]
    # The common head and tail are matched as they are; only the middle between them, where
    # the edits are, is aligned, and only while difflib's work stays small (MAX_ALIGNED):
    # otherwise it is matched by position, as ids would be.
    head = 0
    while head < min(len(da), len(db)) and da[head] == db[head]:
        head += 1
    tail = 0
    while tail < min(len(da), len(db)) - head and da[-1 - tail] == db[-1 - tail]:
        tail += 1
    pairs = [(i, i) for i in range(head)]
    pairs += [(len(da) - 1 - k, len(db) - 1 - k) for k in range(tail)]
    ma, mb = da[head : len(da) - tail], db[head : len(db) - tail]
    counts = Counter(ma)
    if sum(counts[d] for d in mb) <= MAX_ALIGNED:
        sm = difflib.SequenceMatcher(None, ma, mb, autojunk=False)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
                # The same messages, or as many edited in place.
                pairs += [(head + i, head + j1 + i - i1) for i in range(i1, i2)]
    else:
        pairs += [(head + i, head + i) for i in range(min(len(ma), len(mb)))]
    rename = {ha[i][0]: hb[j][0] for i, j in pairs}
    unmatched = {i for i, _ in ha} - set(rename)
    # An old history message with no counterpart never meets a new id.
    return lambda mid: rename.get(mid, "\0" + mid if mid in unmatched else mid)


def _messages(a: Mapping[str, Any], b: Mapping[str, Any], key: Any) -> list[dict[str, Any]]:
    """Kept messages whose tokens changed, or that are kept on one side only."""
    olds = {key(e["id"]): e for e in a["layout"]}
    news = {e["id"]: e for e in b["layout"]}
    res = []
    for mid in [*news, *(i for i in olds if i not in news)]:
        o, n = olds.get(mid), news.get(mid)
        ot = o["tokens"] if o else 0
        nt = n["tokens"] if n else 0
        if o is not None and n is not None and ot == nt:
            continue
        entry = {
            # The new id, also for a message still in the document but no longer sent.
            "id": o["id"] if mid.startswith("\0") and o else mid,
            "segment": (n or o or {}).get("segment", ""),
            "kept": "both" if o and n else "new" if n else "old",
            **_pair(ot, nt),
        }
        if o is not None and o["id"] != entry["id"]:
            entry["old_id"] = o["id"]
        if mid.startswith("\0"):
            entry["removed"] = True  # aligned away: no longer in the document at all
        res.append(entry)
    return res


def _status(obj: Mapping[str, Any]) -> dict[str, str]:
    res = {e["id"]: "kept" for e in obj["layout"]}
    res.update({i: "dropped" for i in obj["dropped"]})
    res.update({i: "orphan dropped" for i in obj["orphans_dropped"]})
    return res


def _moved(a: Mapping[str, Any], b: Mapping[str, Any], key: Any) -> dict[str, list[str]]:
    sa = {key(i): s for i, s in _status(a).items()}
    sb = _status(b)
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


def _compression(a: Mapping[str, Any], b: Mapping[str, Any], key: Any) -> dict[str, Any]:
    ca, cb = a["compression"], b["compression"]
    summarized = [key(i) for i in ca["summarize"]] != cb["summarize"]
    return {
        "changed": ca["triggered"] != cb["triggered"] or summarized,
        "old_due": ca["triggered"],
        "new_due": cb["triggered"],
        "old_summarize": len(ca["summarize"]),
        "new_summarize": len(cb["summarize"]),
    }
