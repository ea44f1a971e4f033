"""The YAML loader's cheaper resolver (``syntax.yaml_loader``) resolves as PyYAML's does.

Every tag a scalar can be given (null, bool, int, float, timestamp, merge, value, yaml) and
the strings around them, plain and quoted, one by one and as a whole document; then every
YAML file of the repository's test data composed by both loaders, node by node: kinds,
tags, values, styles and marks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from assembly.syntax import compose_yaml, yaml_loader

DATA = Path(__file__).resolve().parents[1] / "data"
BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

SCALARS = [
    "",
    "~",
    "null",
    "Null",
    "NULL",
    "nul",
    "yes",
    "Yes",
    "YES",
    "y",
    "n",
    "no",
    "No",
    "on",
    "Off",
    "true",
    "True",
    "false",
    "FALSE",
    "t",
    "0",
    "-0",
    "+12",
    "0x1F",
    "0o17",
    "017",
    "0b101",
    "1_000",
    "190:20:30",
    "1.5",
    "-.5",
    ".inf",
    "-.INF",
    ".nan",
    ".NaN",
    "1e10",
    "6.8523015e+5",
    "685.230_15e+03",
    "2001-12-14",
    "2001-12-14t21:59:43.10-05:00",
    "2001-12-14 21:59:43.10 -5",
    "<<",
    "< <",
    "=",
    "!",
    "&",
    "*",
    ".",
    "-",
    "+",
    "message",
    "Yesterday",
    "nothing",
    "o",
    "tomorrow",
    "12 monkeys",
    "-- id",
    "0.0.0.0",
]


def _both(kind: Any, value: str, implicit: tuple[bool, bool]) -> tuple[Any, Any]:
    ours = yaml_loader()("")
    theirs = BASE("")
    try:
        return ours.resolve(kind, value, implicit), theirs.resolve(kind, value, implicit)
    finally:
        ours.dispose()
        theirs.dispose()


def test_every_kind_of_scalar_resolves_alike() -> None:
    assert yaml_loader() is not BASE  # the safe loader has no path resolvers
    for value in SCALARS:
        for implicit in ((True, False), (False, True), (False, False), (True, True)):
            ours, theirs = _both(yaml.ScalarNode, value, implicit)
            assert ours == theirs, (value, implicit)
    for kind in (yaml.SequenceNode, yaml.MappingNode):
        assert _both(kind, "", (False, False))[0] == _both(kind, "", (False, False))[1]


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("0123456789.-+_:eExXoObB yYnNtTfF~<=!&*aiInN ")), max_size=12
    )
)
def test_generated_scalars_resolve_alike(value: str) -> None:
    for implicit in ((True, False), (False, True)):
        ours, theirs = _both(yaml.ScalarNode, value, implicit)
        assert ours == theirs, (value, implicit)


def _shape(node: Any, seen: dict[int, int]) -> Any:
    """The node graph as nested tuples; a node met again (an alias) by its first place."""
    if id(node) in seen:
        return ("alias", seen[id(node)])
    seen[id(node)] = len(seen)
    head = (
        type(node).__name__,
        node.tag,
        node.start_mark.index,
        node.end_mark.index,
        getattr(node, "style", None),
        getattr(node, "flow_style", None),
    )
    if isinstance(node, yaml.ScalarNode):
        return (*head, node.value)
    if isinstance(node, yaml.SequenceNode):
        return (*head, [_shape(c, seen) for c in node.value])
    return (*head, [(_shape(k, seen), _shape(v, seen)) for k, v in node.value])


def test_documents_compose_alike() -> None:
    docs = [
        "\n".join(f"k{i}: {v}" for i, v in enumerate(SCALARS[1:])),
        "- " + "\n- ".join(f"'{v}'" for v in SCALARS),
        "base: &b {a: 1, b: yes}\nmerged:\n  <<: *b\n  c: ~\nlist: [1, 2.5, .inf, 2001-12-14]\n",
        "!!str 12: !!int '7'\n? complex\n: value\n",
    ]
    files = sorted([*DATA.rglob("*.yaml"), *DATA.rglob("*.yml")])
    files = [f for f in files if f.stat().st_size <= 1 << 20]
    assert len(files) >= 100
    docs += [f.read_text(encoding="utf-8", errors="replace") for f in files]
    composed = 0
    for text in docs:
        try:
            theirs = yaml.compose(text, Loader=BASE)
        except yaml.YAMLError as exc:
            try:
                compose_yaml(text)
            except yaml.YAMLError as ours:
                assert str(ours) == str(exc)
                continue
            raise AssertionError("composed by one loader only") from exc
        ours = compose_yaml(text)
        assert (ours is None) == (theirs is None)
        if theirs is not None:
            assert _shape(ours, {}) == _shape(theirs, {})
            composed += 1
    assert composed >= 100
