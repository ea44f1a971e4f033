"""Every ``messages`` array promptls prints is a valid request for its provider.

``tests/support/sendable.py`` holds the providers' documented request rules (OpenAI chat
completions, which Azure takes as is, and Ollama). Every conversation fixture, example and
real log is assembled for its provider and for the others, and the printed ``messages``
checked; the one kind of problem promptls keeps on purpose, a tool call nobody answered
(Onyx keeps it), must be reported at its place by ``unanswered-tool-call``.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from assembly.documents import format_for_path
from assembly.host import Analysis
from server.output import assembly_json
from server.workspace import analyze
from tests.support.sendable import Problem, problems

REPO = Path(__file__).resolve().parent.parent
DOCUMENTS = sorted(
    p
    for base in (REPO / "tests" / "data", REPO / "examples")
    for p in base.rglob("*")
    if p.is_file() and format_for_path(p.name) is not None
)
TODAY = dt.date(2026, 7, 15)


def _records(a: Analysis) -> tuple[Analysis, ...]:
    return a.records or (a,)


@pytest.mark.parametrize("provider", ["openai", "ollama", "azure"])
@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_printed_messages_are_sendable(path: Path, provider: str) -> None:
    analysis = analyze(path, overrides={"provider": provider}, today=TODAY)
    for a in _records(analysis):
        messages = assembly_json(a, display_path=path.name)["messages"]
        if a.settings.prompt_cache_marker == "anthropic":
            # The prefix mark is for Onyx's Anthropic adapter (LiteLLM), which takes it off.
            messages = [{k: v for k, v in m.items() if k != "cache_control"} for m in messages]
        if not messages:
            # Nothing to send: a document without messages, or a turn that cannot be
            # assembled (said at its place).
            assert not a.conversation.messages or not a.assembly.ok, path
            continue
        # Onyx's Anthropic cache marker (`prompt_cache_marker: anthropic`) is for LiteLLM,
        # which passes `cache_control` on to Anthropic.
        marker = getattr(a.settings, "prompt_cache_marker", None) == "anthropic"
        extra = frozenset({"cache_control"}) if marker else frozenset()
        found = [
            p
            for p in problems(
                messages, "ollama" if provider == "ollama" else "openai", extra_fields=extra
            )
            if not _reported(a, p) and not _example_answer(a, p, messages)
        ]
        assert not found, [f"messages[{p.index}]: {p.text}" for p in found]


# What promptls keeps as written, as Onyx does, and reports instead.
_REPORTED_BY = {
    "unanswered": {
        "unanswered-tool-call",
        "duplicate-tool-call-id",
        "anthropic-tool-result-placement",
    },
    "repeated": {"duplicate-tool-call-id"},
    "unpaired": {
        "duplicate-tool-call-id",
        "orphaned-tool-response",
        "anthropic-tool-result-placement",
    },
}


def _example_answer(a: Analysis, p: Problem, messages: list[dict[str, object]]) -> bool:
    """In a dataset, the calls of a record's last message are the example's answer (what
    the model is trained to say), not a request's unanswered calls."""
    return a.conversation.record and p.kind == "unanswered" and p.index == len(messages) - 1


def _reported(a: Analysis, p: Problem) -> bool:
    if p.kind is None:
        return False
    return any(
        d.code in _REPORTED_BY[p.kind] and f"`{p.call_id}`" in d.message for d in a.diagnostics
    )


def test_the_validator_refuses_what_providers_refuse() -> None:
    # Each rule of the validator, once: it is the oracle of the test above.
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    ok = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        {"role": "assistant", "content": "done"},
    ]
    assert problems(ok, "openai") == []
    bad = {
        "null content without calls": [{"role": "assistant", "content": None}],
        "empty call id": [
            {"role": "assistant", "tool_calls": [{**call, "id": ""}]},
            {"role": "tool", "tool_call_id": "", "content": "r"},
        ],
        "unanswered": [
            {"role": "assistant", "tool_calls": [call]},
            {"role": "user", "content": "u"},
        ],
        "answer after a user turn": [
            {"role": "assistant", "tool_calls": [call]},
            {"role": "user", "content": "u"},
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
        ],
        "unknown role": [{"role": "human", "content": "u"}],
        "extra field": [{"role": "user", "content": "u", "reasoning_content": "x"}],
        "empty tool_calls": [{"role": "assistant", "content": "a", "tool_calls": []}],
        "bad name": [
            {
                "role": "assistant",
                "tool_calls": [{**call, "function": {"name": "a b", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
        ],
        "empty": [],
    }
    for name, messages in bad.items():
        assert problems(messages, "openai"), name
    assert problems([{"role": "developer", "content": "d"}], "ollama")
    assert problems([{"role": "user", "content": None}], "ollama")


def test_an_inline_image_is_labelled_with_a_stand_in_id_not_its_data(tmp_path: Path) -> None:
    # A log's image is a data URL: Onyx's label names a file id (36 characters, never
    # counted), and naming the data instead put all of it, uncounted, beside the image
    # (openinference's recorded Anthropic request: a 133,903-character label).
    data = "data:image/png;base64," + "iVBORw0KGgo" * 2000
    url = "https://example.com/cat.png"
    doc = tmp_path / "img.conv.json"
    parts = [{"type": "text", "text": "What is this?"}]
    parts += [{"type": "image_url", "image_url": {"url": u}} for u in (data, url, data)]
    doc.write_text(json.dumps([{"role": "user", "content": parts}]))
    for vision in (True, False):
        a = analyze(doc, overrides={"vision": vision}, today=TODAY)
        content = assembly_json(a, display_path=doc.name)["messages"][-1]["content"]
        labels = [p["text"] for p in content if p["type"] == "text"][1:]
        assert len(labels) == 3 and all(len(t) < 120 for t in labels), labels
        assert not any("base64" in t for t in labels)
        assert url in labels[1]
        assert labels[0] == labels[2] and "file_id: data-" in labels[0]  # one image, one id
        images = [p["image_url"]["url"] for p in content if p["type"] == "image_url"]
        assert images == ([data, url, data] if vision else [])
