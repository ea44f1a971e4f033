"""``server.jsonout.dumps`` writes exactly what ``json.dumps(…, ensure_ascii=False,
indent=2)`` writes, for every value, and leaves to it what it does not write itself."""

from __future__ import annotations

import enum
import json
import math
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server import jsonout
from server.output import assembly_json
from server.workspace import analyze

ROOT = Path(__file__).resolve().parents[2]


def _reference(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=2)


# Strings with what JSON escapes or may mishandle: quotes, backslashes, control
# characters, DEL, line and paragraph separators, non-BMP characters, lone surrogates.
_text = st.text(
    alphabet=st.one_of(
        st.characters(codec=None),
        st.sampled_from(['"', "\\", "\n", "\t", "\x00", "\x1f", "\x7f", "\u2028", "\ud800"]),
    ),
    max_size=20,
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    _text,
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.lists(inner, max_size=5).map(tuple),
        st.dictionaries(_text, inner, max_size=5),
    ),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(_values)
def test_every_plain_value_is_written_as_json_writes_it(value: Any) -> None:
    assert jsonout.dumps(value) == _reference(value)


class _Color(enum.IntEnum):
    RED = 1


class _Name(str):
    pass


@pytest.mark.parametrize(
    "value",
    [
        {},
        [],
        (),
        {"a": {}, "b": [], "c": [{}]},
        [[[]]],
        -0.0,
        1e-7,
        1e16,
        math.nan,
        [math.inf, -math.inf],
        10**40,
        "",
        {"k": "\u2028 \x85 😀 \ud83d"},
        # Values ``json`` writes its own way, left to it: non-string keys, subclasses.
        {1: "one", 2.5: "x", False: "f", None: "n"},
        {"color": _Color.RED, "name": _Name("n")},
        OrderedDict([("b", 1), ("a", 2)]),
        [{"nested": (_Color.RED,)}],
    ],
    ids=repr,
)
def test_edge_values(value: Any) -> None:
    assert jsonout.dumps(value) == _reference(value)


def test_what_json_refuses_is_refused_the_same_way() -> None:
    for bad in ({"x": {1, 2}}, [object()], {("a",): 1}):
        with pytest.raises(TypeError):
            _reference(bad)
        with pytest.raises(TypeError):
            jsonout.dumps(bad)
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        jsonout.dumps(loop)


def test_nesting_past_the_recursion_limit_is_left_to_json() -> None:
    deep: Any = "end"
    for _ in range(sys.getrecursionlimit() // 3):
        deep = [deep]
    assert jsonout.dumps(deep) == _reference(deep)
    deeper: Any = "end"
    for _ in range(sys.getrecursionlimit() * 2):
        deeper = {"k": deeper}
    with pytest.raises(RecursionError):
        _reference(deeper)
    with pytest.raises(RecursionError):
        jsonout.dumps(deeper)


@pytest.mark.parametrize(
    "example", sorted((ROOT / "examples").glob("*.conv.*")), ids=lambda p: p.name
)
def test_the_assembled_json_of_every_example(example: Path) -> None:
    obj = assembly_json(analyze(example), display_path=example.name)
    assert jsonout.dumps(obj) == _reference(obj)
