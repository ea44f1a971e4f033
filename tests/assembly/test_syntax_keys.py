"""The JSON tree shares one object per short key name (``syntax.MAX_SHARED_KEY_CHARS``):
a conversation repeats ``role``/``content`` tens of thousands of times."""

from __future__ import annotations

import json

from assembly.syntax import MAX_SHARED_KEY_CHARS, parse_json


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
