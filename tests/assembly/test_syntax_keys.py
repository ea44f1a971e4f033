"""The JSON tree shares one object per short key name (``syntax.MAX_SHARED_KEY_CHARS``):
a conversation repeats ``role``/``content`` tens of thousands of times."""

from __future__ import annotations

import json

from assembly.syntax import MAX_SHARED_KEY_CHARS, located, parse_json
from assembly.text import TextRange, resolve


def test_short_keys_are_one_object_each_and_long_keys_are_read_as_written() -> None:
    long_key = "k" * (MAX_SHARED_KEY_CHARS + 1)
    messages = [
        {"role": "user", "content": f"hello {i}", long_key: i, "caf\u00e9": 1} for i in range(3)
    ]
    parsed = parse_json(json.dumps({"messages": messages}), messages=True)
    assert not parsed.errors
    holder = parsed.root.get("messages")
    assert holder is not None and len(holder.items) == 3
    by_name: dict[str, list[str]] = {}
    for item in holder.items:
        for m in item.members:
            by_name.setdefault(m.key, []).append(m.key)
    assert set(by_name) == {"role", "content", long_key, "caf\u00e9"}
    for name in ("role", "content", "caf\u00e9"):
        first = by_name[name][0]
        assert all(k is first for k in by_name[name]), name
    assert len({id(k) for k in by_name[long_key]}) == 3  # not interned: one per member
    # Values are never shared this way (only keys).
    contents = [item.get("content") for item in holder.items]
    assert [c.value for c in contents if c is not None] == ["hello 0", "hello 1", "hello 2"]


def test_a_repeated_key_reads_as_its_last_member_by_every_look_up() -> None:
    """``get``, ``fields`` and ``member`` agree (JSON's last value wins), on the stored
    tree and on a message seen at its place (``located``)."""
    text = '{"messages": [{"role": "user", "content": "a", "role": "assistant", "n": 1}]}'
    parsed = parse_json(text, messages=True)
    holder = parsed.root.get("messages")
    assert holder is not None
    msg = holder.items[0]
    second = text.rindex('"role"')
    for node, base in ((msg, holder.starts[0]), (located(holder).items[0], 0)):
        role = node.get("role")
        assert role is not None and role.value == "assistant"
        assert node.fields()["role"].value == "assistant"
        assert list(node.fields()) == ["role", "content", "n"]
        member = node.member("role")
        assert member is not None and member.value.value == "assistant"
        assert resolve(member.key_range, base) == TextRange(second, second + len('"role"'))
        assert node.get("missing") is None and node.member("missing") is None
    assert parsed.root.member("messages") is not None
    assert parse_json("[]").root.get("x") is None
