"""Every conversation of the repository, assembled for ``--provider anthropic``, prints a
request that Anthropic's documented rules accept (``tests/support/anthropic_validator.py``).

The documents are the examples and every conversation fixture (rules, IDE features,
scenarios, the real-log corpora of every format): whatever their shape, the render must
repair what the API would refuse and say so, never print it.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from assembly.formats.anthropic_out import render_assembly
from server.workspace import analyze
from tests.support.anthropic_validator import validate

ROOT = Path(__file__).resolve().parent.parent
SUFFIXES = (".conv.json", ".conv.jsonl", ".conv.yaml", ".conv.yml")
DOCS = sorted(
    p
    for base in (ROOT / "examples", ROOT / "tests" / "data")
    for p in base.rglob("*")
    if p.is_file() and p.name.endswith(SUFFIXES)
)


def test_there_are_many_documents() -> None:
    assert len(DOCS) > 60


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_printed_anthropic_request_validates(path: Path) -> None:
    a = analyze(
        path,
        root=path.parent,
        overrides={"provider": "anthropic"},
        today=dt.date(2026, 7, 15),
    ).assembly
    if not a.provider_messages:
        assert not a.ok or not a.layout  # nothing assembled: nothing printed
        return
    request = render_assembly(a)
    assert validate({"system": request.system, "messages": request.messages}) == []
    # Every message of the layout (but the system prompt, sent apart) is in exactly one
    # printed message, or was left out with a repair that says so (a message promptls
    # adds is left out silently only when it is empty).
    sourced = [i for s in request.sources for i in s]
    assert len(sourced) == len(set(sourced))
    left_out = {r.id for r in request.repairs if r.code == "anthropic-empty-message"}
    layout = [e for k, e in enumerate(a.layout) if k > 0 or e.message.kind != "system"]
    for e in layout:
        if e.id not in sourced:
            assert e.id in left_out or (e.id.startswith("$") and not e.message.text.strip())
    assert set(sourced) <= {e.id for e in layout}
