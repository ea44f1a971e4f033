"""The instruction rules on realistic prompts, and their building blocks.

``tests/data/prompts-corpus/`` holds long system prompts of several domains, written the
way a careful author writes them (instructions inside the section they constrain), with
a few instructions deliberately put far from their section. Each of those is marked by
``<!-- expect: instruction-far-from-section -->`` on the line before it. ``check_corpus``
runs the rule on a prompt with the real offline cl100k tokenizer and the default settings
but `instruction_preview` (the corpus marks what the whole matcher should find) and
compares the lines it reports with the marked lines: any extra line is a false positive,
any missing one a false negative.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembly.diagnostics import RuleContext, Severity
from assembly.diagnostics.rules.instructions import (
    explain_instruction,
    instruction_far_from_section,
    is_instruction,
    stem,
)
from assembly.prompts import parse_prompt
from assembly.settings import Settings
from assembly.text import LineIndex
from tests.support.engine import loaded

CORPUS = Path(__file__).resolve().parent.parent / "data" / "prompts-corpus"
PROMPTS = sorted(CORPUS.glob("*.prompt.md"))
MARKER = "<!-- expect: instruction-far-from-section -->"
TOKENIZER = loaded("cl100k_base").tokenizer


def check_corpus(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    expected = {i + 1 for i, line in enumerate(lines) if line.strip() == MARKER}
    ctx = RuleContext(
        text=text,
        settings=Settings(instruction_preview=True),
        tokenizer=TOKENIZER,
        template=parse_prompt(text),
    )
    index = LineIndex(text)
    # Warnings: an instruction in a neighbouring section is information (it is listed
    # too, but the corpus marks only the far ones).
    found = {
        index.line_col(d.range.start).line
        for d in instruction_far_from_section(ctx)
        if d.severity is Severity.WARNING
    }
    extra = sorted(f"{n + 1}: {lines[n].strip()}" for n in found - expected)
    missing = sorted(f"{n + 1}: {lines[n].strip()}" for n in expected - found)
    assert (extra, missing) == ([], [])


def test_corpus_is_realistic() -> None:
    assert len(PROMPTS) >= 6
    for path in PROMPTS:
        size = len(path.read_bytes())
        assert 1024 <= size <= 4096, f"{path.name}: {size} bytes"


@pytest.mark.parametrize("path", PROMPTS, ids=lambda p: p.name)
def test_corpus_reports_exactly_the_marked_instructions(path: Path) -> None:
    check_corpus(path)


@pytest.mark.parametrize(
    ("sentence", "expect"),
    [
        ("Use internal_search for questions about company documents.", True),
        ("If you need more information, call internal_search again.", True),
        ("Never apologise more than once per conversation.", True),
        ("You must cite every figure.", True),
        ("Every statement about pricing must be backed by a document.", True),
        ("Before answering, open the two best results.", True),
        ("Always do arithmetic with run_python.", True),
        ("Make sure the answer fits on one screen.", True),
        ("Cite what is needed, nothing more.", True),
        ("Searches the public web and returns snippets.", False),
        ("Search results are often stale.", False),
        ("Release notes are the authority on what shipped and when.", False),
        ("Which plan is the customer on?", False),
        ("**Format Illustration:**", False),
        ("{{CITATION_GUIDANCE}}", False),
        ("You are Lumi, the support agent of Lumen Analytics.", False),
        # A noun clause is no directive (Agent-S's `<thoughts>` field description).
        ("Your step-by-step reasoning about what needs to be done and how to do it.", False),
        ("Decide what needs to be done first.", True),
        ("You need to verify each claim.", True),
    ],
)
def test_is_instruction(sentence: str, expect: bool) -> None:
    assert is_instruction(sentence) is expect


@pytest.mark.parametrize(
    "family",
    [
        "cite cites cited citing citation citations",
        "source sources sourced",
        "search searches searching searched",
        "escalate escalates escalated escalating escalation",
        "format formats formatted formatting",
        "memory memories",
        "tool tools",
    ],
)
def test_stem_joins_word_families(family: str) -> None:
    assert len({stem(w) for w in family.split()}) == 1


def test_stem_keeps_identifiers() -> None:
    assert stem("web_search") == "web_search"
    assert stem("gpt4") == "gpt4"


@given(
    names=st.lists(st.text("ab_.-1", min_size=1, max_size=6), min_size=1, max_size=25),
    text=st.text("ab_.-1 `'\n", max_size=200),
    tail=st.sampled_from([r"(?![a-z0-9_]|-\w)", "", r"(?=[\"']?\s+tool\b)", "`"]),
)
@settings(max_examples=400, deadline=None)
def test_the_tool_finders_trie_matches_what_the_longest_first_alternation_matches(
    names: list[str], text: str, tail: str
) -> None:
    """A prompt naming thousands of tools (qa8: 20,000 in a 768 KB template took 40 s) is
    searched with one trie-shaped regex; it must find exactly what the plain alternation
    of the names, longest first, finds, whatever follows the name."""
    import re
    from unittest import mock

    from assembly.diagnostics.rules import instructions

    flat = "|".join(re.escape(n) for n in sorted(set(names), key=len, reverse=True))
    plain = re.compile(rf"(?<![a-z0-9_-])({flat}){tail}")
    with mock.patch.object(instructions, "_TRIE_MIN", 0):  # (a trie however few the names)
        written = instructions._alternation(sorted(set(names)))
    assert "(?:" in written or len(set(names)) == 1
    trie = re.compile(rf"(?<![a-z0-9_-])({written}){tail}")
    text += " tool"
    assert [m.span(1) for m in trie.finditer(text)] == [m.span(1) for m in plain.finditer(text)]


def test_names_that_nest_too_deep_for_a_trie_are_joined_plainly() -> None:
    import re

    from assembly.diagnostics.rules.instructions import _TRIE_DEPTH, _alternation

    names = ["a" * k for k in range(1, _TRIE_DEPTH + 50)]
    pattern = _alternation(names)
    assert "(?:" not in pattern
    assert re.compile(f"({pattern})").match("a" * 120).end() == 120


FIXTURE = (
    Path(__file__).resolve().parent.parent
    / "data"
    / "diagnostics"
    / "instruction-far-from-section"
    / "citations-in-style.prompt.md"
)


def _findings(text: str) -> list[tuple[str, str, int]]:
    ctx = RuleContext(
        text=text,
        settings=Settings(instruction_preview=True),
        tokenizer=TOKENIZER,
        template=parse_prompt(text),
    )
    return [(d.severity, d.message, d.range.start) for d in instruction_far_from_section(ctx)]


def test_a_prompt_past_the_pairs_it_weighs_gets_one_note_and_no_placement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from assembly.diagnostics.rules import instructions

    text = FIXTURE.read_text(encoding="utf-8")
    template = parse_prompt(text)
    n = sum(1 for s in template.sentences if is_instruction(s.text))
    pairs = n * len(template.sections)
    found = _findings(text)
    assert [(sev, m.split(",")[0]) for sev, m, _ in found] == [
        (Severity.WARNING, "instruction about citations sits in `# Response Style`")
    ]
    at = text.index("Cite the source")
    monkeypatch.setattr(instructions, "MAX_PLACEMENT_PAIRS", pairs)
    assert _findings(text) == found  # at the limit: weighed as before
    topics = Settings().section_topics
    match = explain_instruction(template, at, section_topics=topics, preview=True)
    assert match is not None and match.reported and match.section is not None
    monkeypatch.setattr(instructions, "MAX_PLACEMENT_PAIRS", pairs - 1)
    heading = template.sections[0].heading_range
    assert _findings(text) == [
        (
            Severity.INFO,
            f"{n:,} instructions in {len(template.sections):,} sections: more than this "
            f"rule weighs ({pairs - 1:,} pairs), so where they sit is not checked",
            heading.start,
        )
    ]
    # The hover says the same.
    match = explain_instruction(template, at, section_topics=topics, preview=True)
    assert match is not None and not match.reported and match.section is None
    assert match.reason == (
        f"the prompt has more instructions times sections than the rule weighs ({pairs - 1:,}): "
        "it is not checked"
    )


# Published prompts seen by earlier rounds (``prompts-heldout18`` stays unread), and the
# regression fixtures (an overview that previews tools' sections among them).
SEEN = sorted(
    p
    for d in ("prompts-real", "prompts-fresh", "instructions-regressions")
    for p in (CORPUS.parent / d).glob("*.prompt.md")
)


def _kinds_run(text: str, preview: bool) -> list[tuple[object, ...]]:
    ctx = RuleContext(
        text=text,
        settings=Settings(instruction_preview=preview),
        tokenizer=TOKENIZER,
        template=parse_prompt(text),
    )
    return [
        (d.range, d.severity, d.message, d.related, d.fix)
        for d in instruction_far_from_section(ctx)
        if not preview or "(preview: " not in d.message
    ]


def _tool_rules_at_the_top(text: str, limit: int = 3) -> list[str]:
    """The prompt with one of its first ``limit`` instructions that name an identifier
    (`` `task` ``, `web_search`) moved to the top of its body, one prompt a move."""
    template = parse_prompt(text)
    top = template.body_range.start
    out = []
    for s in template.sentences:
        if len(out) == limit:
            break
        if s.section is not None and ("_" in s.text or "`" in s.text) and is_instruction(s.text):
            a, b = s.range.start, s.range.end
            out.append(text[:top] + s.text + "\n\n" + text[top:a] + text[b:])
    return out


@pytest.mark.parametrize("path", SEEN, ids=lambda p: p.name)
def test_the_default_findings_are_the_preview_runs_findings_of_default_kinds(
    path: Path,
) -> None:
    # By default the rule weighs only the instructions a default kind can report (and the
    # overview test of their sections): what it reports must be exactly what the run
    # that weighs every instruction reports without a preview note, on the prompt and
    # with a tool's rule moved to the top (the placement the default kinds find).
    text = path.read_text(encoding="utf-8")
    for variant in [text, *_tool_rules_at_the_top(text)]:
        assert _kinds_run(variant, preview=False) == _kinds_run(variant, preview=True)


def test_an_instruction_settled_by_its_tool_has_no_target() -> None:
    # A default run does not weigh an instruction that names one known tool whose titled
    # section holds it (``settled_by_tool``): the full weighing must find no target for
    # it either, on every such instruction of the seen prompts and the fixtures.
    from assembly.diagnostics.rules.instructions import _topics

    settled = 0
    for path in SEEN:
        template = parse_prompt(path.read_text(encoding="utf-8"))
        if not template.sections:
            continue
        topics = _topics(template, (), Settings().section_topics)
        for k, sentence in enumerate(template.sentences):
            if is_instruction(sentence.text) and topics.settled_by_tool(k):
                settled += 1
                assert topics.target(k) is None, (path.name, sentence.text)
    assert settled >= 10


_TOOL_WORDS = ["web_search", "lookup", "shell", "read_file", "İnfo", "call", "use", "the", "tool"]


@given(
    st.lists(st.sampled_from(_TOOL_WORDS), min_size=1, max_size=4, unique=True),
    st.lists(
        st.sampled_from([*_TOOL_WORDS, "`", " ", "\n", '"', "-", "x", "Web_Search", "ReadFile"]),
        max_size=14,
    ),
)
def test_a_sentence_the_name_search_skips_has_no_tool_finder_match(
    names: list[str], words: list[str]
) -> None:
    # ``guidance-for-unavailable-tool`` looks for the unoffered tools' finders only in the
    # sentences where one search finds a name: it must never skip one a finder matches.
    from assembly.diagnostics.rules.instructions import _cached_tool_finders, _lowered

    finders, any_name = _cached_tool_finders(frozenset(names))
    lowered = _lowered("".join(words))
    if any(f.search(lowered) for f in finders):
        assert any_name.search(lowered) is not None


def test_the_name_search_finds_what_each_kind_of_finder_finds() -> None:
    from assembly.diagnostics.rules.instructions import _cached_tool_finders, _lowered

    finders, any_name = _cached_tool_finders(frozenset({"lookup", "web_search"}))
    for text in ("Call lookup first.", "Use `lookup`.", "the lookup tool", "Try web_search."):
        lowered = _lowered(text)
        assert any(f.search(lowered) for f in finders), text
        assert any_name.search(lowered) is not None
    assert any_name.search(_lowered("Search the web.")) is None


def test_a_distance_of_one_token_is_one_token() -> None:
    text = (
        "---\ntools: [web_search]\ninstruction_distance: 0\n---\nYou are a helpful assistant.\n\n"
        "Always call web_search before you answer a question about current events.\n"
        "## web_search\n\nSearches the web.\n"
    )
    ctx = RuleContext(
        text=text,
        settings=Settings(instruction_distance=0, tools=("web_search",)),
        tokenizer=TOKENIZER,
        template=parse_prompt(text),
    )
    (found,) = instruction_far_from_section(ctx)
    assert ", 1 token before `## web_search`" in found.message, found.message
