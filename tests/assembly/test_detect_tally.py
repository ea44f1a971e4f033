"""The format told again from a count of marks (``formats.detect.retally``) equals ``detect``.

The property: after message nodes are replaced, ``retally`` either declines (None) or gives
exactly what counting the new tree's marks gives (``tally``: the counts, the format and its
reasons as ``detect`` gives them, the winning family and where its third reason stands).
Checked on real logs of every format (OpenAI, Anthropic, Responses, as JSON and as JSON
Lines lines), with nodes replaced by other documents' nodes, so that the format flips.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from assembly.formats.detect import detect, message_marks, message_nodes, retally, tally
from assembly.syntax import Member, SNode, parse_json, parse_jsonl
from assembly.text import TextRange

DATA = Path(__file__).resolve().parents[1] / "data" / "real-logs"


def _trees() -> list[tuple[SNode, bool]]:
    res = []
    for path in sorted(DATA.rglob("*.conv.json")):
        text = path.read_text(encoding="utf-8")
        root = parse_json(text).root
        if root is not None:
            res.append((root, False))
        doc = json.loads(text)
        if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
            head = {k: v for k, v in doc.items() if k != "messages"}
            lines = [json.dumps(head)] if head else []
            lines += [json.dumps(m) for m in doc["messages"]]
            jsonl = parse_jsonl("\n".join(lines)).root
            if jsonl is not None:
                res.append((jsonl, True))
    return res


def _with_nodes(root: SNode, jsonl: bool, nodes: list[SNode]) -> SNode:
    """``root`` with its message nodes replaced by ``nodes``."""
    if root.is_array:
        return SNode("array", root.range, items=tuple(nodes))
    key = "messages" if root.get("messages") is not None else "input"
    members = tuple(
        Member(m.key, m.key_range, SNode("array", m.value.range, items=tuple(nodes)))
        if m.key == key and m.value.is_array
        else m
        for m in root.members
    )
    return SNode("object", root.range, members=members)


def test_retally_equals_a_count_of_the_new_tree() -> None:
    trees = [(r, j) for r, j in _trees() if message_nodes(r, j)]
    assert len(trees) >= 60
    pool = [n for r, j in trees for n in message_nodes(r, j)]
    pool.append(SNode("object", TextRange(0, 0), members=()))
    rnd = random.Random(13)
    told = declined = flipped = 0
    for root, jsonl in trees:
        t = tally(root, jsonl=jsonl, marks_of=message_marks)
        assert t.detection == detect(root, jsonl=jsonl)
        for _ in range(25):
            nodes = message_nodes(root, jsonl)
            k = rnd.randrange(len(nodes) + 1)
            r = min(len(nodes), k + rnd.choice((0, 1, 1, 2, 5)))
            new = [rnd.choice(pool) for _ in range(rnd.choice((0, 1, 1, 2, 3)))]
            after = _with_nodes(root, jsonl, [*nodes[:k], *new, *nodes[r:]])
            fresh = tally(after, jsonl=jsonl, marks_of=message_marks)
            old_marks = [(n, message_marks(n)) for n in nodes[k:r]]
            new_marks = [(n, message_marks(n)) for n in new]
            got = retally(t, k, old_marks, new_marks, jsonl=jsonl)
            if got is None:
                declined += 1
                got = fresh
            else:
                told += 1
                assert got == fresh, (k, r)
            flipped += got.detection.format != t.detection.format
            root, t = after, got
    # (Small documents have few reasons: a change among the first three is told again.)
    assert told >= declined and flipped >= 20, (told, declined, flipped)


def test_a_whole_read_keeps_its_count_and_the_first_edit_tells_the_format_from_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A whole read keeps the count of marks that told its format (what counting its tree
    gives), so the first edit that changes a message's marks tells the format again from
    it, without counting every node (at 10 MB, 25 ms on the first such edit after opening):
    counting is refused here, and the count told equals what counting the new tree gives."""
    from assembly import incremental
    from assembly.incremental import reparse_conversation
    from assembly.model import DocFormat
    from assembly.reading import parse_conversation

    head: list[dict[str, object]] = [
        {"id": "s", "role": "system", "content": "be brief"},
        {"id": "a", "role": "assistant", "content": "", "tool_calls": []},
        {"id": "t", "role": "tool", "tool_call_id": "c", "content": "ok"},
    ]
    msgs = head + [{"id": f"m{i}", "role": "user", "content": f"c{i}"} for i in range(12)]
    for fmt in (DocFormat.YAML, DocFormat.JSON):
        if fmt is DocFormat.YAML:
            lines = [json.dumps(m)[1:-1].replace('", "', '"\n  "') for m in msgs]
            doc = "messages:\n" + "".join(f"- {item}\n" for item in lines)
        else:
            doc = json.dumps({"messages": msgs}, indent=1)
        conv = parse_conversation(doc, fmt)
        assert conv._views["tally"] == tally(conv.tree, jsonl=False, marks_of=message_marks)
        at = doc.index("user", len(doc) // 2)
        new = doc[:at] + "developer" + doc[at + 4 :]
        with monkeypatch.context() as m:
            m.setattr(incremental, "tally", _refused)
            res = reparse_conversation(conv, doc, new, fmt, span=(at, at + 4, at + 9))
        assert res is not None
        told = res._views["tally"]
        assert told == tally(res.tree, jsonl=False, marks_of=message_marks)
        assert told.counts[("openai", "role `developer`")] == 1


def _refused(*args: object, **kwargs: object) -> object:
    raise AssertionError("every node's marks counted again")


def test_a_reason_among_the_first_three_is_told_from_the_count_when_it_stands_elsewhere() -> None:
    """A node replaced before the third reason first stands, its own reasons already told
    by an earlier node (a JSON Lines record that loses its `files`, in the middle of a log
    whose third reason is its last record's `summary` role): the format and its reasons
    are told from the count, and equal a count of the new tree. A node that held where a
    reason first stood is not (where that reason stands next is not known)."""
    records = [{"settings": {"max_input_tokens": 9000}}]
    records += [{"id": f"m{i}", "role": "user", "content": "x"} for i in range(6)]
    records[3]["files"] = [{"file_id": "f", "filename": "a.md", "content": "y"}]
    records[5]["files"] = [{"file_id": "g", "filename": "b.md", "content": "z"}]
    records.append({"id": "s", "role": "summary", "content": "so far"})
    root = parse_jsonl("\n".join(json.dumps(r) for r in records)).root
    assert root is not None
    t = tally(root, jsonl=True, marks_of=message_marks)
    assert t.horizon is not None and t.horizon[1] == len(records) - 1, t.firsts
    nodes = message_nodes(root, True)
    for k, told in ((5, True), (3, False)):  # (the second `files`; the first)
        plain = parse_jsonl(json.dumps({"id": f"m{k}", "role": "user", "content": "x"})).root
        assert plain is not None
        new = list(plain.items)
        after = _with_nodes(root, True, [*nodes[:k], *new, *nodes[k + 1 :]])
        got = retally(
            t, k, [(nodes[k], message_marks(nodes[k]))], [(n, message_marks(n)) for n in new],
            jsonl=True,
        )  # fmt: skip
        assert (got is not None) is told, (k, t.firsts)
        if got is not None:
            assert got == tally(after, jsonl=True, marks_of=message_marks)
