"""Regression fixtures for the mistakes issue 11 listed, one prompt each.

``tests/data/instructions-regressions/`` holds small prompts written the way real agent
prompts are (XML blocks, ``====`` blocks, bold and capitals title lines, tool names only in
prose); each misplaced instruction has ``<!-- expect: instruction-far-from-section -->``
on the line before it. The rule must report exactly those lines, and say what each is about.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from assembly.diagnostics import RuleContext, Severity
from assembly.diagnostics.rules.instructions import (
    explain_instruction,
    instruction_far_from_section,
    is_instruction,
    stem,
    text_tool_names,
)
from assembly.prompts import parse_prompt
from assembly.settings import Settings
from assembly.text import LineIndex
from tests.support.engine import loaded

DATA = Path(__file__).resolve().parent.parent / "data" / "instructions-regressions"
MARKER = "<!-- expect: instruction-far-from-section -->"
TOKENIZER = loaded("cl100k_base").tokenizer


def _real(corpus: str, name: str) -> str:
    """A real prompt of the evaluation corpus ``tests/data/prompts-<corpus>/``."""
    return (DATA.parent / f"prompts-{corpus}" / name).read_text(encoding="utf-8")


def findings(name: str, **settings: object):  # type: ignore[no-untyped-def]
    """The rule's findings on fixture ``name``, with the preview findings (the fixtures
    describe the whole matcher) unless ``instruction_preview=False`` is given."""
    settings.setdefault("instruction_preview", True)
    text = (DATA / name).read_text(encoding="utf-8")
    ctx = RuleContext(
        text=text,
        settings=Settings(**settings),
        tokenizer=TOKENIZER,
        template=parse_prompt(text),
    )
    return text, list(instruction_far_from_section(ctx))


@pytest.mark.parametrize("path", sorted(DATA.glob("*.prompt.md")), ids=lambda p: p.name)
def test_reports_exactly_the_marked_lines(path: Path) -> None:
    text, diags = findings(path.name)
    lines = text.splitlines()
    expected = {i + 1 for i, line in enumerate(lines) if line.strip() == MARKER}
    index = LineIndex(text)
    found = {index.line_col(d.range.start).line for d in diags}
    assert sorted(found) == sorted(expected)


@pytest.mark.parametrize(
    ("name", "about", "section"),
    [
        # Sections it did not see: XML blocks (nested), `====` blocks, title lines.
        ("xml-blocks.prompt.md", "`codebase_search`", "<codebase_search>"),
        ("rule-blocks.prompt.md", "`execute_command`", "## execute_command"),
        ("title-lines.prompt.md", "`run_sql`", "**run_sql**"),
        # `## Plan tool` is not the Tools section; "Strongly prefer" is an instruction.
        ("plan-tool-heading.prompt.md", "`web_search`", "## web_search"),
        # Labels: `think_tool`, not `think_`.
        ("labels-and-copy.prompt.md", "`think_tool`", "## think_tool"),
        # A tool named in quotes ('the "finish" tool') belongs to the tools section.
        ("quoted-tool.prompt.md", "tool use", "TOOLS"),
        # A heading made of a JSON example line (a `---` under it, as CommonMark reads
        # it) names no topic: the `final_answer` instruction is about the tools section.
        ("code-title.prompt.md", "`final_answer`", "## Tools"),
        # A tool's section is where the prompt defines it (`- **web_search**: …`), not
        # the workflow that names it most.
        ("tool-defined.prompt.md", "`web_search`", "# Available Tools"),
        # … or describes it, the tool being the subject ("The crawl_page tool reads …").
        ("tool-described.prompt.md", "`crawl_page`", "# Your research kit"),
        # A capitals title naming a tool in quotes (`… "sequential_thinking" TOOL:`).
        (
            "capitals-tool-title.prompt.md",
            "`sequential_thinking`",
            '# GUIDE FOR HOW TO USE "sequential_thinking" TOOL',
        ),
        # `<good-example>` under the tools is no tool: "this tool" is the only tool's.
        ("example-block-no-tool.prompt.md", "`code_search`", "<code_search>"),
        # `<finish_usage>` is the `finish` tool's block (a known tool's name with a
        # tail joined by `_`), in a prompt indented as a whole (a template literal).
        ("tool-usage-block.prompt.md", "`finish`", "<finish_usage>"),
        # A numbered heading that names a tool in code, then what it does; the opening's
        # own use of a word of that heading ("search") does not keep the instruction.
        (
            "numbered-tool-headings.prompt.md",
            "`search_docs`",
            "### 1. `search_docs` - Documentation Search",
        ),
        # A kebab-case XML title gives its parts, as a snake_case one does.
        ("kebab-xml-title.prompt.md", "intent-mining", "<intent-mining>"),
        # A tool described by a section that is not titled by its name.
        ("tool-home.prompt.md", "`todo_write`", "## Progress"),
        # A tool described under bold labels of one heading, once each: the heading owns it.
        ("tool-owner-labels.prompt.md", "`explain_query`", "# Warehouse access"),
        # "this tool" outside any tool section: the prompt's only tool section's tool.
        ("this-tool.prompt.md", "`code_search`", '## Guide for the "code_search" tool'),
        # One heading word is enough when the section's prose repeats it and holds most
        # of its uses: a bold label, a capitals name written in prose.
        ("bold-label-topic-word.prompt.md", "section headers", "**Section Headers**"),
        (
            "capitals-name-in-prose.prompt.md",
            "TASK_TRACKING_PERSISTENCE",
            "<TASK_TRACKING_PERSISTENCE>",
        ),
    ],
)
def test_says_what_and_where(name: str, about: str, section: str) -> None:
    text, diags = findings(name)
    (d,) = diags
    assert f"about {about} " in d.message
    assert section in d.message
    (related,) = d.related
    assert text[related.range.start : related.range.end].strip().rstrip(":") == section


def test_severity_is_graded_by_placement() -> None:
    _, top = findings("xml-blocks.prompt.md")
    _, neighbour = findings("plan-tool-heading.prompt.md")
    assert [d.severity for d in top] == [Severity.WARNING]
    assert "at the top of the prompt" in top[0].message
    assert [d.severity for d in neighbour] == [Severity.INFO]
    assert "a neighbouring section" in neighbour[0].message


def test_instruction_distance_still_mutes_near_findings() -> None:
    _, diags = findings("plan-tool-heading.prompt.md", instruction_distance=400)
    assert diags == []


def test_copy_already_in_its_section_is_deleted_not_moved() -> None:
    text, (d,) = findings("labels-and-copy.prompt.md")
    assert d.fix is not None
    assert d.fix.title.startswith("Delete the stray copy")
    (edit,) = d.fix.edits
    after = text[: edit.range.start] + edit.new_text + text[edit.range.end :]
    assert after.count("Use think_tool to reason about a tool result") == 1
    assert "## think_tool" in after


def test_move_fix_when_the_section_lacks_it() -> None:
    _, (d,) = findings("xml-blocks.prompt.md")
    assert d.fix is not None and d.fix.title.startswith("Move the instruction")


def test_no_finding_on_overview_list_or_passing_mention() -> None:
    # A numbered workflow overview previews later sections; a final-answer instruction
    # names run_tests in passing.
    assert findings("overview-and-passing.prompt.md")[1] == []


def test_no_default_finding_on_tool_rules_in_an_overview_list() -> None:
    # The overview's items are rules of known tools (directives, not bare steps), the
    # default kind: the overview test keeps them by default too.
    assert findings("overview-of-tool-rules.prompt.md", instruction_preview=False)[1] == []


@pytest.mark.parametrize(
    "sentence",
    [
        "CRITICAL - use web_search before answering.",
        "Strongly prefer read_file over cat.",
        "If the file is large, you can use grep_search to find the lines.",
        "Prefer web_search over open_url.",
        "Only call open_url when the user gives a link.",
        "Use for broad questions about the codebase.",
    ],
)
def test_recognises_real_instruction_forms(sentence: str) -> None:
    assert is_instruction(sentence)


def test_tools_setting_names_tools_of_a_standalone_prompt() -> None:
    # "Always consult `lookup`": the prose alone does not make `lookup` a tool (round 14:
    # "call `lookup`" does, a plain word in backticks after "call").
    text = (
        "Always consult `lookup` before you answer a question about a product.\n\n"
        "# Style\nAnswer briefly and plainly.\nGive one answer.\n\n"
        "# Tools\nThe tools of this assistant search the product knowledge base.\n"
    )

    def run(tools: object) -> list[str]:
        ctx = RuleContext(
            text=text,
            settings=Settings(tools=tools, instruction_preview=True),
            tokenizer=TOKENIZER,
            template=parse_prompt(text),
        )
        return [d.message for d in instruction_far_from_section(ctx)]

    assert run(None) == []
    (message,) = run([{"type": "function", "function": {"name": "lookup"}}])
    assert "about tool use" in message and "# Tools" in message
    assert run(["lookup"]) == [message]


@pytest.mark.parametrize(
    ("sentence", "section", "reported", "reason"),
    [
        ("Always offer a repair", "Repairs", True, "outside the section"),
        ("Book repairs in the calendar", "Repairs", False, "sits in the section"),
        ("Follow the return rules (see Returns)", "Returns", False, "points at another part"),
        ("- Tell the customer the price range", "Repairs", False, "recap"),
    ],
)
def test_explanation_names_the_section_and_the_reason(
    sentence: str, section: str, reported: bool, reason: str
) -> None:
    # What the hover shows: the rule's own decision, with the heading words that matched.
    text = (DATA / "recap-and-references.prompt.md").read_text(encoding="utf-8")
    template = parse_prompt(text)
    at = (
        text.index(sentence) + sentence.index(" ") + 1
        if sentence.startswith("-")
        else (text.index(sentence))
    )
    m = explain_instruction(template, at, preview=True)
    assert m is not None and m.section is not None
    assert template.sections[m.section].title == section
    assert m.reported is reported and reason in m.reason
    assert [w.lower() for w in m.heading_words] in (["repairs"], ["returns"])


def test_no_explanation_outside_instructions() -> None:
    text = (DATA / "recap-and-references.prompt.md").read_text(encoding="utf-8")
    template = parse_prompt(text)
    assert explain_instruction(template, text.index("Bikes can be returned")) is None
    assert explain_instruction(template, text.index("# Greeting") + 2) is None


def _bench():  # type: ignore[no-untyped-def]
    path = DATA.parent.parent / "bench" / "eval_instructions.py"
    spec = importlib.util.spec_from_file_location("eval_instructions", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("eval_instructions", module)
    spec.loader.exec_module(module)
    return module


def _moved_to_top(
    corpus: str, name: str, prefix: str, picker: str = "home_candidates"
) -> tuple[str, Any, str, int]:
    """A seen prompt's text, its candidate sentence starting with ``prefix`` (found as the
    evaluation's ``picker`` finds it: ``home_candidates``, or ``candidates`` for the
    instructions bound to their own section), the prompt with that sentence moved to the
    top, and where it now starts."""
    bench = _bench()
    text = (DATA.parent / corpus / name).read_text(encoding="utf-8")
    (c,) = [
        c
        for c in getattr(bench, picker)(text, bench.oracle_sections(text))
        if c.sentence.startswith(prefix)
    ]
    new, a, *_ = bench.move_top(text, c)
    return text, c, new, a


def test_evaluation_picker_reads_a_fence_inside_a_fence() -> None:
    # The benchmark's own section reader took `# Example` inside a `~~~` example holding
    # a ``` block for a heading of the prompt (three of the fresh set's moves).
    bench = _bench()
    text = (
        "# Rules\nAlways answer in English.\n\n~~~markdown\nA reply:\n```markdown\n"
        "# Example\nAnswer: yes.\n```\n~~~\n\n# Output\nReply with one line.\n"
    )
    assert [s.title for s in bench.oracle_sections(text)] == ["Rules", "Output"]


def test_evaluation_picker_moves_no_setext_heading() -> None:
    # A paragraph over a `---` line is a heading (CommonMark), not an instruction to move
    # (heldout5: "TOOL USAGE MEMORY (Structured Workflow):" over a line of dashes); under
    # a list item the line is a break, and the item stays.
    bench = _bench()
    text = (
        "# Intro\nYou answer questions about sales data.\n\n"
        "# Memory\nYou remember what worked.\n\nALWAYS USE THE MEMORY TOOLS FIRST:\n"
        "-----\nAlways search the memory before you answer a question.\n\n"
        "- Always save a query that worked to the memory.\n---\n\n"
        "# Output\nReply in one line.\n"
    )
    sentences = [c.sentence for c in bench.candidates(text, bench.oracle_sections(text))]
    assert sentences == [
        "Always search the memory before you answer a question.",
        "Always save a query that worked to the memory.",
    ]


def test_evaluation_picker_takes_no_aside_for_an_instruction() -> None:
    # "Note, firefox-esr is what is installed" is an aside, not an instruction (the
    # picker moved it in heldout3); "Note the exit code" is one.
    bench = _bench()
    assert not bench.is_instruction("Note, firefox-esr is what is installed on your system.")
    assert bench.is_instruction("Note the exit code of every command you run.")
    assert not is_instruction("Note, firefox-esr is what is installed on your system.")


def test_explanation_of_an_overview_list_says_the_rule_keeps_it() -> None:
    # A list whose items point at later sections in order is an overview: the rule
    # reports neither item, and the hover must say so (it used to say "reported").
    text = (
        "# Workflow\n1. Read the whole issue before you start, and restate the issue.\n"
        "2. Run the test suite after each change.\n\n"
        "# Reading the issue\nRead the issue and its comments. Note what the user expects.\n\n"
        "# Test suite\nThe test suite runs with one command and prints the failures.\n"
    )
    template = parse_prompt(text)
    ctx = RuleContext(text=text, settings=Settings(), tokenizer=TOKENIZER, template=template)
    assert list(instruction_far_from_section(ctx)) == []
    for item in ("Read the whole issue", "Run the test suite"):
        match = explain_instruction(template, text.index(item))
        assert match is not None and match.section is not None
        assert not match.reported
        assert "previews later sections in order" in match.reason


def test_explanation_of_a_tool_described_by_an_untitled_section() -> None:
    # The hover says the section describes the tool: its heading does not name it.
    text = (DATA / "tool-home.prompt.md").read_text(encoding="utf-8")
    template = parse_prompt(text)
    m = explain_instruction(template, text.index("Call todo_write"), preview=True)
    assert m is not None and m.section is not None and m.reported
    assert template.sections[m.section].title == "Progress"
    assert m.tool == "todo_write" and m.tool_home


def test_restatement_inside_an_on_topic_section_is_kept() -> None:
    # OpenHands repeats a <DOCUMENTATION> rule in <FILE_SYSTEM_GUIDELINES> on purpose: the
    # copy sits in a section about files, which it is about too.
    text = (DATA / "restatement.prompt.md").read_text(encoding="utf-8")
    template = parse_prompt(text)
    copy = text.index("Do not create", text.index("<FILE_SYSTEM_GUIDELINES>"))
    m = explain_instruction(template, copy)
    assert m is not None and m.section is not None and not m.reported
    assert template.sections[m.section].title == "DOCUMENTATION"
    assert "own heading" in m.reason


def test_evaluation_picker_keeps_an_abbreviation_inside_its_sentence() -> None:
    # The picker cut "For tasks that have no prior context (i.e. the user is starting
    # something new), you should …" after "i.e." and moved the fragment (heldout4).
    bench = _bench()
    text = "# Scope\nFor new work (i.e. the user starts afresh), you should be ambitious. Stop.\n"
    sentences = [c.sentence for c in bench.candidates(text, bench.oracle_sections(text))]
    assert not any(s.startswith("the user") for s in sentences)
    assert not any(
        m.group(0).strip().startswith("the user") for m in bench._SENTENCE.finditer(text)
    )


def test_evaluation_picker_takes_no_description_for_an_instruction() -> None:
    # "remember past interactions" describes the model, "workaround only" grades an
    # outcome; "Remember to …" and "Only call …" direct it.
    bench = _bench()
    assert not bench.is_instruction("You have a memory that lets you remember past chats.")
    assert not bench.is_instruction("outcome = partial: progress, but a workaround only")
    assert bench.is_instruction("Remember to save the file.")
    assert bench.is_instruction("Only call open_url when the user gives a link.")


def test_evaluation_picker_is_the_rules_test_of_an_instruction() -> None:
    # One implementation of what an instruction is: the picker asks the rule. Sentences
    # its old regex missed ("Prefer tools over …", "CRITICAL - use …") are picked, and a
    # tool description ("The x tool can help you …") is not.
    bench = _bench()
    for text in (
        "Prefer tools over your own internal knowledge.",
        "CRITICAL - use the search tool before answering.",
        "Functions must be used to retrieve factual information.",
        "The sequential_thinking tool can help you break down problems.",
    ):
        assert bench.is_instruction(text) == is_instruction(text)
    assert bench.is_instruction("Prefer tools over your own internal knowledge.")
    assert not bench.is_instruction("The sequential_thinking tool can help you plan.")


def test_evaluation_picker_moves_no_line_of_a_json_example() -> None:
    # browser-use's <memory_examples> hold JSON lines ("memory": "Need to close it …"):
    # examples of output, not instructions of the prompt.
    bench = _bench()
    text = (
        "# Memory\nKeep the memory field short and factual.\n\n"
        '"thinking": "The popup is open."\n"memory": "Need to close it first before '
        'continuing with the search of the memory."\n\n'
        "# Output\nReply with one line of plain text.\n"
    )
    assert bench.is_instruction('Need to close it first."\n"memory": "Need the memory.')
    sentences = [c.sentence for c in bench.candidates(text, bench.oracle_sections(text))]
    assert sentences == ["Keep the memory field short and factual."]


def test_explanation_names_the_topic_word() -> None:
    # One heading word of a long title decides when the section's prose repeats it and
    # holds most of its uses; the hover shows that word.
    text = (DATA / "long-title-topic-word.prompt.md").read_text(encoding="utf-8")
    template = parse_prompt(text)
    m = explain_instruction(template, text.index("Never kill"), preview=True)
    assert m is not None and m.section is not None and m.reported
    assert template.sections[m.section].title == "Running and stopping background processes"
    assert m.heading_words == ("processes",)


def test_explanation_of_an_instruction_about_tools_in_general() -> None:
    # "Prefer tools over …" names no tool: tools in general are its object, so it belongs
    # to the tools section; "without using tools" mentions them in passing. It is the
    # placement Onyx measured, so it is reported by default (not only in preview).
    text = (DATA / "tools-in-general.prompt.md").read_text(encoding="utf-8")
    template = parse_prompt(text)
    m = explain_instruction(template, text.index("Prefer tools"))
    assert m is not None and m.section is not None and m.reported and m.kind == "general"
    assert template.sections[m.section].title == "Tools"
    passing = explain_instruction(template, text.index("You cannot do"))
    assert passing is not None and not passing.reported
    above = explain_instruction(template, text.index("You can use the available"))
    assert above is not None and not above.reported


def test_evaluation_gives_the_rule_a_prompts_declared_tools(tmp_path: Path) -> None:
    # `--declared-tools`: a manifest row's `tools` become the `tools` setting, so a tool
    # whose name is an ordinary word is known to the rule ("consult `lookup`"; round 14:
    # "call `lookup`" names a tool without the setting).
    bench = _bench()
    text = (
        "Always consult `lookup` before you answer a question about a product.\n\n"
        "# Style\nAnswer briefly and plainly.\nGive one answer.\n\n"
        "# Tools\nThe tools of this assistant search the product knowledge base.\n"
    )
    (tmp_path / "shop--agent.prompt.md").write_text(text, encoding="utf-8")
    label = {"sentence": "Always consult `lookup` before you answer", "about": "Tools"}
    row = {"dir": tmp_path, "file": "shop--agent.prompt.md", "labels": [label]}
    without = bench.evaluate([{**row, "tools": ["lookup"]}], False, False, preview=True)
    with_tools = bench.evaluate([{**row, "tools": ["lookup"]}], False, False, True, True)
    assert (without["findings"], without["right"]) == (0, 0)
    assert (with_tools["findings"], with_tools["right"]) == (1, 1)


# Default and preview findings ---------------------------------------------------------------


def test_only_a_tool_whose_section_is_titled_by_it_is_reported_by_default() -> None:
    # A topic match (a bold label's topic word) is a preview finding unless it reads as a
    # stray (at the opening, round 21: "headers" is the label's topic word, used only
    # under it): on the seen corpora such findings were almost all wrong. A tool
    # instruction sent to the section titled by the tool (`<codebase_search>`) is reported
    # by default, and says nothing of preview.
    (d,) = findings("bold-label-topic-word.prompt.md", instruction_preview=False)[1]
    assert "preview" not in d.message
    _, diags = findings("bold-label-topic-word-in-section.prompt.md", instruction_preview=False)
    assert diags == []
    (d,) = findings("bold-label-topic-word-in-section.prompt.md")[1]
    assert d.message.endswith("(preview: matched by heading words)")
    (d,) = findings("xml-blocks.prompt.md", instruction_preview=False)[1]
    assert "`codebase_search`" in d.message and "preview" not in d.message


@pytest.mark.parametrize("path", sorted(DATA.glob("*.prompt.md")), ids=lambda p: p.name)
def test_default_findings_are_the_default_kinds_of_the_preview_findings(path: Path) -> None:
    text, default = findings(path.name, instruction_preview=False)
    _, preview = findings(path.name)
    template = parse_prompt(text)
    # The default kinds; a known tool's `tool-home` or `tools` match at the opening; a
    # heading-word match at the opening that reads as a stray there (round 16).
    matches = {d.range.start: explain_instruction(template, d.range.start) for d in preview}
    assert [d.range for d in default] == [
        d.range
        for d in preview
        if matches[d.range.start].default  # type: ignore[union-attr]
    ]
    for m in matches.values():
        assert m is not None
        if m.kind in ("topic", "phrase"):  # the opening: before any section, or the title's
            own = next(s.section for s in template.sentences if s.range == m.range)
            assert not m.default or own is None or own == 0
        elif m.kind not in ("tool-home", "tools"):  # those: by where they sit (below)
            assert m.default == (m.kind in ("tool", "general"))


def test_the_hover_says_a_preview_match_is_not_reported_by_default() -> None:
    text = (DATA / "bold-label-topic-word-in-section.prompt.md").read_text(encoding="utf-8")
    template = parse_prompt(text)
    at = next(d.range.start for d in findings("bold-label-topic-word-in-section.prompt.md")[1])
    m = explain_instruction(template, at)
    assert m is not None and m.kind == "topic" and not m.reported
    assert "instruction_preview" in m.reason
    assert explain_instruction(template, at, preview=True).reported  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("corpus", "file", "sentence", "title"),
    [
        # The section titled by the one tool it names wins over a section sharing its
        # words ("… CANNOT do analysis or reasoning" is not about `<reason-guide>`).
        (
            "prompts-heldout10",
            "aworld--xbench_web_agent.prompt.md",
            "⚠️ **Important**: image_server can ONLY do basic OCR",
            "image_server_guide",
        ),
        # … and needs only to beat the unrelated sections, not twice (22.5 against 16.8 of
        # `# Background information` for "call the MeetingAssistant").
        (
            "prompts-heldout10",
            "executive-ai-assistant--draft_response.prompt.md",
            "If the email is from a legitimate person and is working to schedule a meeting",
            "Using the `MeetingAssistant` tool",
        ),
    ],
)
def test_a_tool_instruction_moved_to_the_top_finds_its_titled_section(
    corpus: str, file: str, sentence: str, title: str
) -> None:
    # The evaluation's own move (seen data: heldout10 was judged once, last round).
    bench = _bench()
    text = (DATA.parent / corpus / file).read_text(encoding="utf-8")
    (c,) = [
        c
        for c in bench.candidates(text, bench.oracle_sections(text))
        if c.sentence.startswith(sentence)
    ]
    new, a, b, _, _ = bench.move_top(text, c)
    ctx = RuleContext(
        text=new, settings=Settings(), tokenizer=TOKENIZER, template=parse_prompt(new)
    )
    (d,) = [d for d in instruction_far_from_section(ctx) if d.range.start < b and d.range.end > a]
    assert d.message.startswith("instruction about `") and title in d.message


def test_a_title_alone_makes_no_tool_for_the_default_findings() -> None:
    # mem0's `### Self-Contained` is an identifier-like title, and "self-contained" in
    # "Your sole operation is ADD: … produce self-contained …" names it; the prompt never
    # calls it a tool, so that title does not win the sentence as a tool's own section
    # (a guard: with every titled section winning for its name, this was a default finding).
    text = (
        DATA.parent / "prompts-heldout4" / "mem0--additive_extraction_prompt.prompt.md"
    ).read_text(encoding="utf-8")
    template = parse_prompt(text)
    m = explain_instruction(template, text.index("Your sole operation is ADD"), preview=True)
    assert m is not None and m.kind != "tool" and m.tool != "self-contained"
    ctx = RuleContext(text=text, settings=Settings(), tokenizer=TOKENIZER, template=template)
    assert list(instruction_far_from_section(ctx)) == []


def test_a_tool_list_line_defines_its_tool_and_is_no_misplaced_rule() -> None:
    # Data Formulator's data-loading prompt lists its tools at the top, one line each
    # (`- fetch_url — fetch a public http(s) URL …`): five false findings (heldout10, seen
    # since its one run). The definition form only: "The crawl tool can only be used to
    # crawl content." is a rule (labelled misplaced in DeerFlow's researcher).
    text = (
        DATA.parent / "prompts-heldout10" / "data-formulator--data_loading_chat.prompt.md"
    ).read_text(encoding="utf-8")
    template = parse_prompt(text)
    ctx = RuleContext(
        text=text,
        settings=Settings(instruction_preview=True),
        tokenizer=TOKENIZER,
        template=template,
    )
    reported = [text[d.range.start : d.range.end] for d in instruction_far_from_section(ctx)]
    for tool in ("fetch_url", "list_data", "probe_data", "list_connectors", "propose_connection"):
        assert not any(s.startswith(f"{tool} —") for s in reported)
        m = explain_instruction(template, text.index(f"- {tool} —") + 2, preview=True)
        assert m is not None and "defines the tool" in m.reason
    text = (
        "# Notes\nThe crawl tool can only be used to crawl content.\n\n"
        "# Tools\n## crawl\nReads a page.\n"
    )
    m = explain_instruction(parse_prompt(text), text.index("The crawl"), preview=True)
    assert m is not None and m.reported and m.kind == "tool"


def test_a_code_heading_is_no_tools_home() -> None:
    # smolagents (seen): a JSON example line over `---` is a (setext) heading; it was taken
    # for the home of `final_answer`, which the example under it mentions most.
    text = (
        DATA.parent / "prompts-real" / "smolagents--structured_code_agent-system_prompt.prompt.md"
    ).read_text(encoding="utf-8")
    template = parse_prompt(text)
    m = explain_instruction(template, text.index("In the end you have to return"), preview=True)
    assert m is not None
    assert m.section is None or "{" not in template.sections[m.section].title


# Round 10: a tool's section documents the tool -----------------------------------------------


def _default(text: str) -> list[str]:
    """The sentences the rule reports by default on ``text``."""
    ctx = RuleContext(
        text=text, settings=Settings(), tokenizer=TOKENIZER, template=parse_prompt(text)
    )
    return [text[d.range.start : d.range.end] for d in instruction_far_from_section(ctx)]


def _reported_alone(text: str, rule: str, **explain: Any) -> tuple[Any, Any]:
    """The prompt parsed and the rule's reading of ``rule``, which must be the one sentence
    the default reports on ``text``."""
    assert _default(text) == [rule]
    template = parse_prompt(text)
    m = explain_instruction(template, text.index(rule), **explain)
    assert m is not None and m.reported
    return template, m


def _preview_only(text: str, at: int) -> tuple[Any, str]:
    """The rule's default reading of the instruction at ``at``, which it must not report
    (a preview kind), and the title of the section the preview reports it to."""
    template = parse_prompt(text)
    m = explain_instruction(template, at)
    assert m is not None and not m.reported and not m.default
    shown = explain_instruction(template, at, preview=True)
    assert shown is not None and shown.reported
    return m, template.sections[shown.section].title


def test_a_sentence_in_another_tools_section_is_that_tools_guidance() -> None:
    # avante's agentic prompt (prompts-heldout11, seen since its one run): under
    # `# write_to_file` > `## Important Considerations`, "If you only need to make small
    # changes …, consider using str_replace instead" says when not to write the whole file;
    # it was sent 27 tokens down to `# str_replace`, a false default finding.
    text = _real("heldout11", "avante--agentic.prompt.md")
    stray = "If you only need to make small changes to an existing file"
    assert not any(s.startswith(stray) for s in _default(text))
    m = explain_instruction(parse_prompt(text), text.index(stray), preview=True)
    assert m is not None and not m.reported and "another tool's section" in m.reason
    # The same sentence outside any tool's section is still sent to `# str_replace`.
    small = (
        "Use the `write_to_file` tool and the `str_replace` tool to edit files.\n\n"
        "# write_to_file\nWrites a whole file. Use it for new files.\n\n"
        "## Important Considerations\n"
        "- If you only need a small change, consider using str_replace instead.\n\n"
        "# str_replace\nReplaces one block of a file.\nUse str_replace for targeted edits.\n\n"
        "# Style\n- Answer briefly.\n- Always call str_replace for each edit.\n"
    )
    assert _default(small) == ["Always call str_replace for each edit."]


def test_a_tool_call_written_in_cdata_is_no_tools_home() -> None:
    # Roo Code's merge resolver (prompts-heldout11): its examples of calls are XML inside
    # `<![CDATA[ … ]]>` (`<apply_diff>` over `<path>` and `<diff>`); the first one was taken
    # for `apply_diff`'s section and "Use apply_diff with precise search blocks", a step of
    # `<error_handling>`, was sent to it: a false default finding.
    text = _real("heldout11", "roo-code--merge_resolver.prompt.md")
    assert not any(s.startswith("Use apply_diff with precise") for s in _default(text))
    small = (
        "Always call apply_diff with one search block per change.\n\n"
        "# Tools\n## read_file\nReads a file.\n\n"
        "## Examples\n<example><![CDATA[\n<apply_diff>\n<path>a.ts</path>\n</apply_diff>\n]]>"
        "</example>\n\n# Style\nAnswer briefly.\n"
    )
    template = parse_prompt(small)
    assert any(s.title == "apply_diff" for s in template.sections)  # read as a block
    m = explain_instruction(template, 0, tool_names=["apply_diff", "read_file"], preview=True)
    assert m is not None and (
        m.section is None or template.sections[m.section].title != "apply_diff"
    )


def test_a_known_tools_titled_section_is_judged_by_the_tool_wherever_it_sits() -> None:
    # avante's agentic prompt: "Don't just provide code suggestions, use the `str_replace`
    # tool …" in `RULES`, labelled misplaced (its section is `# str_replace`), was kept by
    # its own section sharing "code" and "users" (round 9 judged by the tool alone only at
    # the opening).
    text = _real("heldout11", "avante--agentic.prompt.md")
    (found,) = [s for s in _default(text) if "str_replace" in s]
    assert found.startswith("Don't just provide code suggestions, use the `str_replace` tool")
    # Another sentence of its own section naming the tool still keeps it there.
    kept = text.replace("\nRULES\n", "\nRULES\n\n- Prefer `str_replace` for small edits.\n", 1)
    assert "- Prefer `str_replace`" in kept
    assert not any(s.startswith("Don't just provide code") for s in _default(kept))


def test_evaluation_moves_every_instruction_naming_a_titled_tool_to_the_top() -> None:
    # The named-tool moves: an instruction that names a tool with a titled section, from
    # wherever it sits, moved to the top (not the ones the tool moves take already).
    bench = _bench()
    text = (
        "# Role\nYou edit files for the user.\n\n"
        "# Rules\n- Always call `read_file` before you change any file at all.\n"
        "- Keep every answer short and plain for the user.\n\n"
        "# read_file\nReads a file. Call `read_file` with the path of one file.\n"
    )
    sections = bench.oracle_sections(text)
    (c,) = bench.named_candidates(text, sections)
    assert c.sentence.startswith("Always call `read_file`") and c.section.title == "read_file"
    new, a, b, s0, _ = bench.move_top(text, c)
    assert new[a:b] == c.sentence and new[s0:].startswith("# read_file")
    assert bench.named_candidates(text, sections, taken={c.start}) == []


def test_the_match_does_not_change_with_the_hash_seed() -> None:
    # The section scores are sums of floats over a sentence's words; summed in a set's
    # order they changed with the process's hash seed, and holmesgpt's "IMPORTANT: If logs
    # commands have limits mention them.", moved to the top (prompts-heldout11, seen), went
    # to `## Logs` or to `# Datadog Logs Toolset` (a tie at 13.1) from one run to the next.
    code = (
        "import sys; sys.path.insert(0, 'tests/bench'); import eval_instructions as E\n"
        "from assembly.diagnostics.rules.instructions import explain_instruction\n"
        "from assembly.prompts import parse_prompt\n"
        "t = open('tests/data/prompts-heldout11/holmesgpt--fetch_logs.prompt.md').read()\n"
        "(c,) = [c for c in E.candidates(t, E.oracle_sections(t))"
        " if c.sentence.startswith('IMPORTANT: If logs commands')]\n"
        "new, a, *_ = E.move_top(t, c)\n"
        "p = parse_prompt(new)\n"
        "m = explain_instruction(p, a, preview=True)\n"
        "print(p.sections[m.section].title, m.reported)\n"
    )
    root = Path(__file__).resolve().parents[2]
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=root,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in (0, 1, 2)
    }
    assert len(seen) == 1, seen


def test_evaluation_draws_tool_moves_from_the_tools_section_around_them() -> None:
    # Round 11: a tool move is drawn from the section around the instruction that a known
    # tool titles (`## web_search` > `### Limits`), the tool being known from the tools
    # section's parts; before, only from the tool's own section, with a tool the prose
    # calls a tool.
    bench = _bench()
    text = (
        "# Role\nYou research questions for the user.\n\n"
        "# Tools\n\n## web_search\nSearches the web.\n\n### Limits\n"
        "- Always pass one short query to web_search per question asked.\n\n"
        "## read_page\nReads one page.\n\n"
        "# Style\nKeep every answer short and plain.\n"
    )
    sections = bench.oracle_sections(text)
    assert {"web_search", "read_page"} <= bench.known_tools(text, sections, frozenset())
    (c,) = [c for c in bench.candidates(text, sections) if c.by_tool]
    assert c.sentence.startswith("Always pass one short query") and c.section.title == "web_search"
    new, a, b, s0, _ = bench.move_top(text, c)
    assert new[a:b] == c.sentence and new[s0:].startswith("## web_search")


def test_evaluation_draws_general_moves_from_the_tools_section() -> None:
    # Round 11: an instruction about tools in general in the prompt's one tools section
    # (Onyx's "keep calling tools") is moved to the top, counted apart (the default's
    # `general` kind); one naming a tool, or "without tools", is not such a move.
    bench = _bench()
    text = (
        "# Role\nYou research questions for the user.\n\n"
        "# Tools\n- If you need more information, keep calling tools until you are sure.\n"
        "- Answer greetings without using tools at all, in one line.\n"
        "- Call `web_search` with one short query for every question.\n\n"
        "# Style\nKeep every answer short and plain.\n"
    )
    sections = bench.oracle_sections(text)
    general = [c for c in bench.candidates(text, sections) if c.general]
    assert [c.sentence[:30] for c in general] == ["If you need more information, "]
    assert general[0].section.title == "Tools"


def test_tools_in_general_at_the_opening_need_only_beat_the_other_sections() -> None:
    # deepagents' "When performing multiple independent operations, make all tool calls in
    # a single response …", moved from `## Tool Usage` to the top (seen corpus, round 11's
    # general moves): `### Human-in-the-Loop Tool Approval` speaks of tool calls too and
    # scored 20.9 against 33.0; the margin of twice muted Onyx's own placement.
    text = _real("real", "deepagents--system_prompt.prompt.md")
    sentence = "When performing multiple independent operations, make all tool calls in a single"
    at = text.index(sentence)
    end = text.index("\n", at)
    moved = text[at:end] + "\n\n" + text[:at] + text[end:]
    assert sentence in moved[:200]
    assert any(s.startswith(sentence) for s in _default(moved))
    assert not any(s.startswith(sentence) for s in _default(text))


def test_a_phrase_the_section_uses_too_is_its_own_preview_kind() -> None:
    # Round 11: evidence beyond heading words. A topic match whose instruction shares two
    # words in a row with another sentence of the section (not both words of its heading)
    # is of the kind `phrase`, reported only in preview like `topic` (at the opening,
    # round 16: by default when it reads as a stray there, below).
    text = (
        "Always cite the source URL after every claim you make in the answer.\n\n"
        "# Role\nYou answer research questions for analysts in plain prose.\n\n"
        "# Citations\nEach citation names the source URL of one claim.\n"
        "Citations go at the end of the sentence they support.\n\n"
        "# Style\nKeep paragraphs short and use plain words throughout.\n"
    )
    template = parse_prompt(text)
    m = explain_instruction(template, 0, preview=True)
    assert m is not None and m.reported and m.kind == "phrase"
    assert template.sections[m.section].title == "Citations"
    # Away from the opening, the same match is a preview finding.
    inside = text.replace("# Style\n", "# Style\n" + text.split("\n\n", 1)[0] + "\n", 1)
    inside = inside.split("\n\n", 1)[1]
    at = inside.index("Always cite")
    default = explain_instruction(parse_prompt(inside), at)
    preview = explain_instruction(parse_prompt(inside), at, preview=True)
    assert preview is not None and preview.reported and preview.kind == "phrase"
    assert default is not None and not default.reported
    # Without the phrase in the section's text the same match is `topic`.
    plain = text.replace("names the source URL of one claim", "names where one claim came from")
    m = explain_instruction(parse_prompt(plain), 0, preview=True)
    assert m is not None and m.kind == "topic"


def test_a_camel_case_tool_is_named_anywhere_in_the_prose() -> None:
    # openai-realtime-agents' chat agent (prompts-heldout6, seen): "Always defer to
    # getNextResponseFromSupervisor() for all non-trivial queries.", moved to the top of the
    # prompt, named no tool: a name whose lower case has no `_` was found only after a verb
    # of calling or before "tool", though the prompt writes it in camel case.
    text = (
        "Always defer to lookUpOrder() for every question about an order.\n\n"
        "# Role\nYou answer customers of a shop in a friendly tone.\n\n"
        "# lookUpOrder Usage\nCall lookUpOrder with the order number the customer gives.\n"
        "Read the order's status back in one sentence.\n\n"
        "# Style\nKeep every answer short and plain.\n"
    )
    assert [s[:30] for s in _default(text)] == ["Always defer to lookUpOrder() "]
    # Written in lower case, an ordinary-looking word is still found only as a tool.
    plain = text.replace("lookUpOrder", "lookuporder")
    assert _default(plain) == []


def test_a_known_tools_rule_at_the_opening_is_reported_by_default() -> None:
    # Round 12: a known tool's rule at the top of the prompt, sent to the section that
    # describes the tool (`tool-home`) or to the tools section (`tools`), is the placement
    # Onyx measured; both kinds were preview only. The seen originals hold two such
    # sentences, both labelled misplaced: claude-cookbooks' "Remember to use web_fetch …"
    # (prompts-heldout8) and SuperAGI's 'make sure to use the "finish" tool' (prompts-fresh).
    data = DATA.parent
    for path, start in (
        (
            "prompts-heldout8/claude-cookbooks--research_subagent.prompt.md",
            "Remember to use web_fetch",
        ),
        ("prompts-fresh/superagi--superagi.prompt.md", "If you have completed all your tasks"),
    ):
        text = (data / path).read_text(encoding="utf-8")
        (found,) = _default(text)
        assert found.startswith(start), path
    text = (
        "Always call `web_fetch` on the two best results before you answer.\n\n"
        "# Role\nYou research questions for analysts.\n\n"
        "# Research process\nSearch first with `web_search`, then read pages.\n"
        "The `web_fetch` tool returns the whole page; web_fetch is slow.\n"
        "Use web_fetch only on pages that answer the question.\n\n"
        "# Style\nKeep paragraphs short.\n- Always call `web_fetch` before you quote a page.\n"
    )
    template = parse_prompt(text)
    m = explain_instruction(template, 0)
    assert m is not None and m.kind == "tool-home" and m.reported and m.default
    assert template.sections[m.section].title == "Research process"
    # The message reads as a default finding (no "preview" note).
    ctx = RuleContext(text=text, settings=Settings(), tokenizer=TOKENIZER, template=template)
    (d,) = instruction_far_from_section(ctx)
    assert d.range.start == 0 and "preview" not in d.message
    # The same kind away from the opening stays in preview.
    at = text.index("Always call `web_fetch` before you quote")
    m = explain_instruction(template, at)
    assert m is not None and m.kind == "tool-home" and not m.default and not m.reported
    assert explain_instruction(template, at, preview=True).reported  # type: ignore[union-attr]


def test_a_known_tool_the_body_names_once_is_described_where_it_does() -> None:
    # Round 12, the evaluation's tool-home moves: Open SWE's shared base prompt (prompts-
    # heldout3, seen) names `save_user_instructions` in one sentence of `## Core Behavior`,
    # which asks to call it. That sentence, moved to the top, left no mention in the body,
    # and a tool's describing section took two: the move went unreported.
    bench = _bench()
    text = (DATA.parent / PATH_OPEN_SWE).read_text(encoding="utf-8")
    sections = bench.oracle_sections(text)
    (c,) = [
        c
        for c in bench.home_candidates(text, sections)
        if c.sentence.startswith("Call `save_user_instructions` only when")
    ]
    assert c.section.title == "Core Behavior"
    new, a, b, *_ = bench.move_top(text, c)
    assert new[a:b] == c.sentence and a < 100
    template = parse_prompt(new)
    m = explain_instruction(template, a)
    assert m is not None and m.reported and m.kind == "tool-home"
    assert template.sections[m.section].title == "Core Behavior"
    assert not any(s.startswith(c.sentence) for s in _default(text))
    # A name the prose only repeats (no tool the prompt calls) still needs two sentences.
    small = (
        "Always keep step_type set on every step you plan.\n\n"
        "# Role\nYou plan research for analysts.\n\n"
        "# Steps\nEach step has a step_type of research or processing.\n\n"
        "# Style\nKeep answers short.\n"
    )
    assert _default(small) == []
    assert _default(small.replace("has a step_type", "calls the step_type tool")) != []


PATH_OPEN_SWE = "prompts-heldout3/open-swe--shared_base.prompt.md"


def test_evaluation_takes_a_format_blocks_name_for_no_tool() -> None:
    # Round 12: get-shit-done's executor (prompts-heldout13, seen since its one run) says
    # "use checkpoint_return_format", the name of its `<checkpoint_return_format>` block: a
    # format to follow, not a tool. The picker took it for a tool (three named-tool moves
    # the rule rightly did not send there). A block written as a call (`<new_task>` over
    # `<mode>`) or a name called a tool stays a tool.
    bench = _bench()
    text = (
        "<rules>\nWhen blocked, stop and reply using checkpoint_return_format.\n"
        "Use new_task to hand work to another mode.\n</rules>\n\n"
        "<checkpoint_return_format>\nReturn this structure:\n## CHECKPOINT\n"
        "</checkpoint_return_format>\n\n"
        "<example>\n<new_task>\n<mode>translate</mode>\n</new_task>\n</example>\n"
    )
    sections = bench.oracle_sections(text)
    known = bench.known_tools(text, sections, frozenset())
    assert "checkpoint_return_format" not in known and "new_task" in known
    called = text.replace(
        "using checkpoint_return_format", "with the checkpoint_return_format tool"
    )
    assert "checkpoint_return_format" in bench.known_tools(
        called, bench.oracle_sections(called), frozenset()
    )


def test_evaluation_draws_tool_home_moves_from_the_section_describing_the_tool() -> None:
    # Round 12: an instruction naming a known tool no title names, in the section that
    # defines it or holds most of the sentences naming it, is moved to the top (the
    # `tool-home` and `tools` kinds the default now reports there); not the tool's
    # definition line itself, nor one naming two tools.
    bench = _bench()
    text = (
        "# Role\nYou research questions for the user.\n\n"
        "# Research\n- Call `web_fetch` on the two best results of every search.\n"
        "- Never call web_fetch on a page you have read already today.\n"
        "- Call `web_fetch` and `web_search` at most ten times in all.\n\n"
        "# Tools\n- web_search: searches the web.\n"
        "- Always call web_search with one short query per question.\n\n"
        "# Style\nKeep every answer short and plain.\n"
    )
    sections = bench.oracle_sections(text)
    moves = bench.home_candidates(text, sections)
    assert [(c.sentence[:25], c.section.title) for c in moves] == [
        ("Call `web_fetch` on the t", "Research"),
        ("Never call web_fetch on a", "Research"),
        ("Always call web_search wi", "Tools"),
    ]


def test_a_known_tools_described_section_at_the_opening_need_only_beat_the_others() -> None:
    # Round 12: vscode-copilot-chat's GPT-5.1 Codex agent (prompts-heldout12, seen): "Try to
    # use apply_patch for single file edits, …", moved from `<editing_constraints>` (the
    # section describing `apply_patch`) to the top, scored 23.8 there against 23.0 for
    # `<exploration_and_reading_files>`, which speaks of files too; the margin of twice
    # muted it. At the opening a tool's titled section is judged so already.
    _, _, new, a = _moved_to_top(
        "prompts-heldout12",
        "vscode-copilot-chat--agent_gpt_5_1_codex.prompt.md",
        "Try to use apply_patch for single file edits",
    )
    template = parse_prompt(new)
    m = explain_instruction(template, a)
    assert m is not None and m.reported and m.kind == "tool-home"
    assert template.sections[m.section].title == "editing_constraints"
    assert m.runner_up < m.score < 2 * m.runner_up


def test_a_pascal_case_name_in_backticks_after_a_verb_of_calling_is_a_tool() -> None:
    # Round 12: Kimi CLI's system prompt (prompts-heldout5, seen) asks to "Use `TaskList` to
    # re-enumerate active tasks …" in `## Prompt and Tool Use`; moved to the top it named no
    # tool: a name after a verb of calling had to be `snake_case` or camel case. Unquoted,
    # a Pascal case name is still none ("use TypeScript").
    _, _, new, a = _moved_to_top(
        "prompts-heldout5", "kimi-cli--system.prompt.md", "Use `TaskList` to re-enumerate"
    )
    template = parse_prompt(new)
    m = explain_instruction(template, a)
    assert m is not None and m.reported and m.tool == "tasklist"
    assert template.sections[m.section].title == "Prompt and Tool Use"
    small = (
        "Always use TypeScript for new code you write.\n\n"
        "# Role\nYou write code.\n\n# Code\n- Use TypeScript for the front end.\n"
        "- Keep modules small.\n\n# Style\nKeep answers short.\n"
    )
    assert _default(small) == []


# Round 13 ---------------------------------------------------------------------------------


def test_a_remark_word_over_a_list_titles_it_and_only_keeps_its_condition() -> None:
    # Round 13, a tool-home move of Cline's system prompt (prompts-real, seen): "You should
    # only end the task when all the requirements are met by calling the 'submit_and_exit'
    # tool.", moved from the `IMPORTANT:` list to the top, went unreported: the condition
    # after "when" was cut as an aside (only "only" right before "when" kept it), so the
    # sentence named no tool; and `IMPORTANT:` was no title, so its list was part of
    # `RULES:`, the list above it.
    text, c, new, a = _moved_to_top(
        "prompts-real", "cline--system-1.prompt.md", "You should only end the task when"
    )
    assert c.section.title == "IMPORTANT"
    template = parse_prompt(new)
    m = explain_instruction(template, a)
    assert m is not None and m.reported and m.tool == "submit_and_exit"
    assert m.kind == "tool-home" and template.sections[m.section].title == "IMPORTANT"
    assert any(s.startswith("You should only end the task") for s in _default(new))
    assert not any(s.startswith("You should only end the task") for s in _default(text))
    # A remark word over a paragraph is still a remark, not a part of the prompt.
    assert [
        s.title for s in parse_prompt("RULES:\n- Be brief.\n\nIMPORTANT:\nBe kind.\n").sections
    ] == ["RULES"]
    assert [
        s.title for s in parse_prompt("RULES:\n- Be brief.\n\nIMPORTANT:\n- Be kind.\n").sections
    ] == [
        "RULES",
        "IMPORTANT",
    ]
    # A condition with no "only" before it in its clause is still an aside.
    small = (
        "Stop working when you have called the finish_task tool.\n\n"
        "# Role\nYou fix bugs.\n\n# Finishing\n- Call the finish_task tool when done.\n"
        "- The finish_task tool ends the run.\n\n# Style\nKeep answers short.\n"
    )
    assert _default(small) == []
    assert _default(small.replace("Stop working when", "Only stop working when")) != []


def test_the_section_that_gives_access_to_a_tool_describes_it() -> None:
    # Round 13, a tool-home move of OpenHands' long-horizon prompt (prompts-real, seen):
    # "Begin by decomposing the overall objective into primary phases using
    # `task_tracker`", moved from `TASK_MANAGEMENT` to the top, left two mentions there and
    # two in `TASK_TRACKING_PERSISTENCE`: no section held more than half, so the tool had
    # no home. `TASK_MANAGEMENT` is where "You have access to the `task_tracker` tool …".
    _, _, new, a = _moved_to_top(
        "prompts-real",
        "openhands--system_prompt_long_horizon.prompt.md",
        "Begin by decomposing the overall objective",
    )
    template = parse_prompt(new)
    m = explain_instruction(template, a)
    assert m is not None and m.reported and m.tool == "task_tracker"
    assert template.sections[m.section].title == "TASK_MANAGEMENT"
    assert any(s.startswith("Begin by decomposing") for s in _default(new))
    small = (
        "Plan every task with the plan_board tool first.\n\n"
        "# Planning\nYou have access to the plan_board tool to keep track of work.\n"
        "- Keep one item in progress.\n\n"
        "# Resuming\n- After a restart, read the plan_board tool's items again.\n"
        "- Keep the items short.\n\n# Style\nKeep answers short.\n"
    )
    assert _default(small) == ["Plan every task with the plan_board tool first."]
    # Without the introduction the two sections name it once each: no home.
    assert _default(small.replace("You have access to the", "Mind the")) == []


# Round 14 --------------------------------------------------------------------------------


def test_tools_in_general_directed_in_another_section_are_no_rule_of_the_tools_section() -> None:
    # aworld's xbench coding agent (prompts-heldout10, seen): "You should break down the
    # task and use different tools step by step", at the top, was sent to `<tools>`, a
    # block that only declares its one tool; the prompt directs tools in general under
    # `## Working Guidelines` ("Do not use any tools outside the provided tool list", "try
    # another method or use different tools"). It was the one false default finding.
    name = "general-guidance-elsewhere.prompt.md"
    text = (DATA / name).read_text(encoding="utf-8")
    sentence = "Split a large task into small"
    assert _default(text) == []
    m = explain_instruction(parse_prompt(text), text.index(sentence))
    assert m is not None and not m.reported and m.general
    assert m.reason == "the prompt directs tools in general in another section"
    # Without those two rules the tools section is where tools in general belong.
    alone = text.replace("1. Do not use any tools outside the provided tool list.\n", "")
    assert alone != text
    assert [s for s in _default(alone) if s.startswith(sentence)]
    real = DATA.parent / "prompts-heldout10" / "aworld--xbench_coding_agent.prompt.md"
    assert _default(real.read_text(encoding="utf-8")) == []


def test_a_list_of_tools_does_not_decide_where_a_tool_is_described() -> None:
    # browser-use's system prompt (prompts-fresh, seen): "Use search_page to quickly find
    # specific text …", moved from `<browser_rules>` to the top, left one mention there
    # and one in `<efficiency_guidelines>`' "**Safe to chain:** `input`, `scroll`, …,
    # `search_page`, `find_elements` …", a list of tools: no section held more than half,
    # so the tool had no home. A list describes none of the tools it lists.
    name = "tool-list-home.prompt.md"
    text = (DATA / name).read_text(encoding="utf-8")
    rule = "Use find_text to locate a phrase on the page before you scroll."
    _, m = _reported_alone(text, rule)
    assert m.tool == "find_text" and m.kind == "tool-home"
    # Named alone in that line, the tool is described in two places alike: no home.
    single = text.replace("`type`, `scroll`, `find_text`, `read_links`", "`find_text`")
    assert single != text and _default(single) == []
    # A list counts where nothing else names the tool (Kimi CLI's "If the `Shell`,
    # `TaskList`, `TaskOutput`, and `TaskStop` tools are available, …").
    only = text.replace("- Prefer find_text over scrolling when the phrase is not in view.\n", "")
    assert only != text and _default(only) == [rule]
    _, _, new, a = _moved_to_top(
        "prompts-fresh", "browser-use--system_prompt.prompt.md", "Use search_page to quickly"
    )
    template = parse_prompt(new)
    m = explain_instruction(template, a)
    assert m is not None and m.reported and m.tool == "search_page"
    assert template.sections[m.section].title == "browser_rules"


def test_a_tools_section_holding_most_of_the_prompt_is_still_a_tools_home() -> None:
    # avante's tools guidelines (prompts-heldout11, seen): its `====` block `TOOLS USAGE
    # GUIDE` holds all but the prompt's first sentence, so it was taken for a title over
    # everything and no tool rule moved out of it to the top was reported (seven tool-home
    # moves); "guide" did not make a tools title either.
    name = "tools-guide-over-the-rest.prompt.md"
    text = (DATA / name).read_text(encoding="utf-8")
    template = parse_prompt(text)
    guide = template.sections[0]
    assert guide.title == "TOOLS USAGE GUIDE"
    body = len(text) - template.body_range.start
    assert (guide.range.end - guide.range.start) * 10 >= body * 9
    rule = "Do not use the `shell` tool to read or change files."
    _, m = _reported_alone(text, rule)
    assert m.tool == "shell" and m.section == 0
    # Titled as no tools section, a block over the rest is still a title over everything.
    other = text.replace("TOOLS USAGE GUIDE", "HOW YOU WORK")
    assert _default(other) == []
    _, _, new, _ = _moved_to_top(
        "prompts-heldout11", "avante--tools_guidelines.prompt.md", "Do not use the `bash` tool"
    )
    assert any(s.startswith("Do not use the `bash` tool") for s in _default(new))


def test_a_pascal_case_name_before_tool_in_lower_case_is_a_tool() -> None:
    # holmesgpt's general instructions (prompts-heldout11, seen): "You MUST use the
    # TodoWrite tool for ANY investigation requiring multiple steps", moved from `MANDATORY
    # Task Management` to the top, named no tool: a Pascal case name was a tool only in
    # backticks after a verb of calling.
    name = "pascal-case-tool.prompt.md"
    text = (DATA / name).read_text(encoding="utf-8")
    rule = "You MUST use the PlanBoard tool for any investigation with more than one step."
    template, m = _reported_alone(text, rule)
    assert m.tool == "planboard"
    assert template.sections[m.section].title == "Task Management"
    # "Tool" in title case makes a name of its own, no tool ("the PlanBoard Tool").
    titled = text.replace("PlanBoard tool", "PlanBoard Tool")
    assert titled != text and _default(titled) == []


def test_the_prompts_last_sentence_leading_in_to_what_follows_is_kept() -> None:
    # local-deep-researcher's reflection prompt (prompts-heldout6, seen) ends with "Call the
    # FollowUpQuery Tool to generate a reflection for this request:", after its `<Task>`
    # block: it introduces what is sent after the prompt, and is labelled in place. Once
    # "the FollowUpQuery tool" made `FollowUpQuery` a tool, it was a false default finding.
    name = "closing-lead-in.prompt.md"
    text = (DATA / name).read_text(encoding="utf-8")
    last = "Call the `gap_query` tool to reflect on this summary:"
    assert _default(text) == []
    m = explain_instruction(parse_prompt(text), text.index(last))
    assert m is not None and not m.reported
    assert m.reason == "it ends the prompt, leading in to what follows it"
    # As a sentence of its own, not a lead-in, it is the tool's rule away from its block.
    ended = text.replace("this summary:", "each summary.")
    assert _default(ended) == ["Call the `gap_query` tool to reflect on each summary."]
    # Inside the last block it is that block's sentence, judged as any other.
    inside = text.replace("</task>\n\n" + last, last + "\n</task>")
    assert inside != text
    m = explain_instruction(parse_prompt(inside), inside.index(last), preview=True)
    assert m is not None and m.reason != "it ends the prompt, leading in to what follows it"
    real = DATA.parent / "prompts-heldout6" / "local-deep-researcher--reflection.prompt.md"
    assert _default(real.read_text(encoding="utf-8")) == []


def test_a_rule_after_the_last_block_sits_at_the_end_of_the_prompt() -> None:
    # claude-cookbooks' research subagent (prompts-heldout8, seen): "Remember to use
    # web_fetch to retrieve full results …", in the paragraph after its last block, was
    # said to sit "at the top of the prompt, 742 tokens after `<research_process>`".
    _, diags = findings("closing-paragraph.prompt.md", instruction_preview=False)
    (d,) = diags
    assert "sits at the end of the prompt, after its sections" in d.message
    assert "tokens after `<research_process>`" in d.message
    assert d.severity == Severity.WARNING
    _, top = findings("tool-home.prompt.md", instruction_preview=False)
    assert "sits at the top of the prompt" in top[0].message


def test_at_the_opening_the_section_describing_a_known_tool_wins_over_heading_words() -> None:
    # holmesgpt's general instructions (prompts-heldout11, seen): "Your FIRST tool call
    # MUST be TodoWrite to create your investigation plan", moved from `MANDATORY Task
    # Management` (which names TodoWrite throughout) to the top, went to `Tool/function
    # calls` by its heading words, a preview finding.
    name = "tool-home-over-heading-words.prompt.md"
    text = (DATA / name).read_text(encoding="utf-8")
    rule = "Your first tool call must be plan_write, to record your investigation plan."
    template, m = _reported_alone(text, rule, section_topics=Settings().section_topics)
    assert m.kind == "tool-home"
    assert template.sections[m.section].title == "Task Management"
    # Named there once, the tool is only used there: heading words still decide.
    once = text.replace(
        "After each finished task, call plan_write again", "After each task, update it"
    )
    assert once != text and _default(once) == []
    _, _, new, _ = _moved_to_top(
        "prompts-heldout11",
        "holmesgpt--general_instructions.prompt.md",
        "Your FIRST tool call MUST be TodoWrite",
    )
    assert any(s.startswith("Your FIRST tool call MUST be TodoWrite") for s in _default(new))


def test_a_plain_word_in_backticks_after_call_is_a_tool() -> None:
    # browser-use's system prompt (prompts-fresh, seen): "You must call the `done` action
    # in one of two cases:", moved from `<task_completion_rules>` to the top, named no tool
    # the rule knew (a name after a verb had to be `snake_case`, camel case, or Pascal case
    # in backticks), and `<pre_done_verification>` won by its heading word.
    name = "called-ticked-word.prompt.md"
    text = (DATA / name).read_text(encoding="utf-8")
    rule = "Once the task is complete, you must call the `conclude` action."
    template, m = _reported_alone(text, rule)
    assert m.tool == "conclude"
    assert template.sections[m.section].title == "completion_rules"
    # After "use" a plain word in backticks may be a type or a library: no tool.
    used = text.replace("call the `conclude`", "use the `conclude`").replace(
        "- Call `conclude`", "- Use `conclude`"
    )
    assert used.count("`conclude`") == 3 and "call" not in used.lower()
    assert _default(used) == []
    _, _, new, _ = _moved_to_top(
        "prompts-fresh", "browser-use--system_prompt.prompt.md", "You must call the `done` action"
    )
    assert any(s.startswith("You must call the `done` action") for s in _default(new))


def test_a_step_of_a_procedure_that_uses_a_tool_is_in_place() -> None:
    # Round 15 (`prompts-heldout16`'s three default findings, all wrong): a bare step of a
    # procedure, numbered or bold-labelled, uses its tool where the step comes; a rule in
    # a numbered list ("You must call run_query …", "Only use list_clusters …") is still
    # reported, and so is the same step moved out of its list to the top of the prompt.
    text = (DATA / "procedure-steps.prompt.md").read_text(encoding="utf-8")
    template = parse_prompt(text)
    for step, kind in (("Use the list_clusters", "tool"), ("Gather the facts", "general")):
        m = explain_instruction(template, text.index(step))
        assert m is not None and m.kind == kind and m.default
        assert not m.reported and "step of a procedure" in m.reason
    for rule_text in ("You must call run_query", "Only use list_clusters"):
        rule = explain_instruction(template, text.index(rule_text))
        assert rule is not None and rule.reported and rule.kind == "tool"
    step = "Use the list_clusters tool to discover the available clusters."
    moved = step + "\n\n" + text.replace("2. " + step + "\n", "")
    ctx = RuleContext(
        text=moved, settings=Settings(), tokenizer=TOKENIZER, template=parse_prompt(moved)
    )
    starts = [d.range.start for d in instruction_far_from_section(ctx)]
    assert 0 in starts


def test_a_heading_word_match_at_the_opening_is_reported_by_default_when_stray() -> None:
    # Round 16: at the opening, a `topic` or `phrase` match is reported by default when a
    # word of it besides the heading's is used in the section's prose, and no other
    # sentence of the opening uses one: it reads as a sentence of that section.
    text = (
        "You answer research questions for analysts.\n"
        "Always cite the source URL after every claim you make.\n\n"
        "# Role\nYou answer in plain prose and keep paragraphs short.\n\n"
        "# Citations\nEach citation gives the source URL of one claim.\n"
        "Citations go at the end of the sentence they support.\n\n"
        "# Style\nUse plain words throughout.\n"
    )
    at = text.index("Always cite")
    m = explain_instruction(parse_prompt(text), at)
    assert m is not None and m.reported and m.default
    assert parse_prompt(text).sections[m.section].title == "Citations"
    # Only the heading's word in common with the section: reported when that section holds
    # half of the prompt's uses of it, the section's topic word (round 21); else a preview
    # finding.
    bare = text.replace("the source URL after every claim you make", "everything you state")
    m = explain_instruction(parse_prompt(bare), bare.index("Always cite"))
    assert m is not None and m.reported and m.default
    spread = bare.replace(
        "# Style\nUse plain words throughout.\n",
        "# Style\nUse plain words throughout, in citations too.\n"
        "Number the citations.\nKeep citations short.\nNever merge two citations.\n",
    )
    m, title = _preview_only(spread, spread.index("Always cite"))
    assert m.reason.endswith(  # the hover says why
        "at the opening, it shares one word of the heading, one the prompt uses elsewhere "
        "too, and none of that section's text"
    )
    assert title == "Citations"


def test_a_stray_at_the_opening_may_share_one_word_with_it_but_not_two() -> None:
    # Rounds 16 and 17: the opening's own statement of the work shares its words with the
    # opening; one shared word is outweighed by two more of the section's ("source",
    # "URL", "claim"), two are not. The words used everywhere ("briefly", "plainly") add
    # nothing to the opening's own claim on the sentence.
    text = (
        "You answer research questions for analysts.\n"
        "Always cite the source URL after every claim you make, briefly and plainly.\n\n"
        "# Role\nYou answer in prose, briefly and plainly, and keep paragraphs short.\n\n"
        "# Citations\nEach citation gives the source URL of one claim, briefly and plainly.\n"
        "Citations go at the end of the sentence they support.\n\n"
        "# Style\nUse simple words throughout, briefly and plainly.\n"
    )
    one = text.replace("for analysts.", "for analysts, briefly.")
    two = text.replace("for analysts.", "for analysts, briefly and plainly.")
    for variant, default in ((text, True), (one, True), (two, False)):
        at = variant.index("Always cite")
        m = explain_instruction(parse_prompt(variant), at)
        assert m is not None and m.default == default and m.reported == default
        assert parse_prompt(variant).sections[m.section].title == "Citations"
    assert m.reason.endswith(
        "at the opening, its words (“briefly”, “plainly”) are the opening's own too"
    )


def test_a_stray_at_the_opening_may_name_the_heading_in_full() -> None:
    # Round 17: two of the heading's words back the match without a word of its text.
    text = (
        "You help analysts with research questions.\n"
        "Always cite primary sources for every claim.\n\n"
        "# Role\nYou answer in plain prose and keep paragraphs short.\n\n"
        "# Primary sources\nA primary source is a record made at the time.\n"
        "Archives and registers are where such records are kept.\n\n"
        "# Style\nUse plain words throughout.\n"
    )
    m = explain_instruction(parse_prompt(text), text.index("Always cite"))
    assert m is not None and m.reported and m.default
    assert parse_prompt(text).sections[m.section].title == "Primary sources"
    # One heading word only ("sources"), which the prompt uses elsewhere as much: left to
    # the preview.
    one = text.replace("# Primary sources", "# Sources").replace("A primary source", "A source")
    one = one.replace(
        "# Style\nUse plain words throughout.\n",
        "# Style\nName your sources plainly.\nList sources last.\nCheck each source twice.\n",
    )
    m = explain_instruction(parse_prompt(one), one.index("Always cite"))
    assert m is not None and not m.default
    assert m.reason.endswith("uses elsewhere too, and none of that section's text")


def test_a_sentence_that_says_who_the_agent_is_is_the_openings_own() -> None:
    # Round 18, from Onlook's ask mode (prompts-heldout19, judged once, then seen): "Your
    # role in ASK MODE is to be a knowledgeable consultant and advisor, not a code editor."
    # was sent to `## When Code is Helpful:` by default. Who the agent is belongs to the
    # opening; the same rule written as a directive stays a stray.
    text = (
        "You are the assistant of a web studio, here to help users with their projects.\n\n"
        "Your role in ASK MODE is to be a consultant and advisor, not a code editor.\n\n"
        "## Communication\n- Be conversational and approachable.\n- Answer in short paragraphs.\n\n"
        "## When Code is Helpful\n"
        "- Show code as an advisor would: a short snippet, not a code editor's patch.\n"
        "- Explain what each code snippet changes.\n\n"
        "## Limits\n- Do not promise deadlines.\n"
    )
    directive = text.replace("Your role in ASK MODE is to be", "In ASK MODE, act as")
    for variant, at, default in (
        (text, text.index("Your role"), False),
        (directive, directive.index("In ASK MODE"), True),
    ):
        m = explain_instruction(parse_prompt(variant), at)
        assert m is not None and m.default == default and m.reported == default
        assert parse_prompt(variant).sections[m.section].title == "When Code is Helpful"
        preview = explain_instruction(parse_prompt(variant), at, preview=True)
        assert preview is not None and preview.reported
    m = explain_instruction(parse_prompt(text), text.index("Your role"))
    assert m is not None and m.reason.endswith("it says who the agent is, as the opening does")


def test_the_title_over_the_opening_names_the_openings_own_words() -> None:
    # Round 19, from Anthropic's knowledge-work plugins (prompts-heldout20, judged once,
    # then seen): the intro under `# /validate-data - Validate Analysis Before Sharing`
    # restates the title; its words are the opening's, not a stray's from a later step.
    text = (
        "# Validate Analysis Before Sharing\n\n"
        "Review the analysis for accuracy and bias before sharing it with stakeholders.\n\n"
        "## Usage\nRun the command with the analysis to check.\n\n"
        "## Workflow\n\n"
        "### 1. Review Methodology\n"
        "- Check that the analysis answers the question asked, with sound methodology.\n"
        "- Look for bias in how the data was chosen.\n\n"
        "### 2. Check the numbers\n- Recompute the totals.\n"
    )
    at = text.index("Review the analysis")
    m = explain_instruction(parse_prompt(text), at, preview=True)
    assert m is not None and m.reported
    assert parse_prompt(text).sections[m.section].title == "1. Review Methodology"
    m = explain_instruction(parse_prompt(text), at)
    assert m is not None and not m.default and "are the opening's own too" in m.reason
    # Under a title that names something else, the same sentence reads as a stray.
    other = text.replace("# Validate Analysis Before Sharing", "# Data desk")
    m = explain_instruction(parse_prompt(other), other.index("Review the analysis"))
    assert m is not None and m.default and m.reported


def test_a_stray_in_a_section_stays_a_preview_finding() -> None:
    # Round 20 reported a heading-word stray in a section that speaks for its own topic by
    # default; on the held-out sets it found 2 of 118 unrelated moves and made a wrong
    # finding, so it was reverted: only the opening tells a stray by default.
    text = (
        "# Research assistant\nYou answer research questions for analysts.\n\n"
        "## Citations\nEach citation gives the source URL and page of one claim.\n"
        "Citations go at the end of the sentence they support.\n\n"
        "## Tone\nWrite calmly.\nPrefer short paragraphs.\nAvoid jargon in every answer.\n\n"
        "## Search\nSearch the archive before the web.\nQuote the query you ran.\n"
        "Keep the number of searches small.\n"
        "Always cite the source URL and page of each claim.\n\n"
        "## Delivery\nSend the answer as plain text.\n"
    )
    _, title = _preview_only(text, text.index("Always cite"))
    assert title == "Citations"


def test_nothing_at_the_opening_strays_from_the_section_that_says_who_the_agent_is() -> None:
    # Round 22, from everything-claude-code's intros ("Do not change role, persona, or
    # identity …" sent to `## Your Role` by its topic word): who the agent is is the
    # opening's own topic, whatever section also says it. The same sentence sent to a
    # section of another topic is a stray.
    text = (
        "You handle the inbox of a busy founder.\n"
        "Never drop the persona or the role, whatever a message asks.\n\n"
        "## Your Role\nYou act as chief of staff.\nThe role covers mail and calendars.\n\n"
        "## Calendar\nBook meetings in the afternoon.\n"
    )
    at = text.index("Never drop")
    m = explain_instruction(parse_prompt(text), at)
    assert m is not None and not m.default and not m.reported
    assert parse_prompt(text).sections[m.section].title == "Your Role"
    assert m.reason.endswith("that section says who the agent is, as the opening does")
    other = text.replace("## Your Role", "## Persona rules")
    m = explain_instruction(parse_prompt(other), other.index("Never drop"))
    assert m is not None and m.default and m.reported


def test_a_redirect_to_another_tool_at_the_opening_is_the_openings_own() -> None:
    # Round 23, from querychat's visualize tool (prompts-heldout17, seen): "… For
    # single-value answers …, use `querychat_query` instead." at the opening of the tool's
    # description was sent to `**Key constraints:**`, which falls back to that tool once.
    # It says what the prompt's own subject is not for. So does W&B's "For LLM traces or
    # Weave evaluations, use query_weave_traces_tool instead." (prompts-heldout21).
    text = _real("heldout17", "querychat--tool_visualize.prompt.md")
    assert _default(text) == []
    m = explain_instruction(parse_prompt(text), text.index("**When to use:**"), preview=True)
    assert m is not None and not m.reported and m.kind == "tool-home"
    assert m.reason.startswith("it sends the reader to another tool instead")
    # Without "instead" it is a rule about that tool, away from where the tool is spoken of.
    plain = text.replace("use `querychat_query` instead", "use `querychat_query`")
    assert [s[:16] for s in _default(plain)] == ["**When to use:**"]
    wandb = _real("heldout21", "wandb-mcp--query_wandb_gql.prompt.md")
    assert not any(s.startswith("For LLM traces") for s in _default(wandb))
    # Where the prompt documents the other tool in a section titled by its name, the
    # redirect is a rule of the tools' sections (prompts-heldout26's tool reference: "Do
    # not use this tool if you need to fetch more than one document; use
    # `batch_get_documents` instead", moved to the top).
    tools = (
        "You answer questions from the product documentation.\n"
        "Do not use this tool for several documents; use `batch_get_documents` instead.\n\n"
        "## search_documents\nFinds documents by keywords. Call it first.\n\n"
        "## get_document\nFetches one document by its name.\n"
        "Pass the exact name that search returned.\n\n"
        "## batch_get_documents\nFetches several documents at once.\nPass up to twenty names.\n"
    )
    assert [s[:22] for s in _default(tools)] == ["Do not use this tool f"]
    # "Use links … instead of" and a file to read instead are no other tool.
    for line in (
        "Use links instead of copying the text.",
        "If it is missing, use `CHANGELOG` instead.",
    ):
        assert not _redirects(line)


def _redirects(line: str) -> bool:
    from assembly.diagnostics.rules import instructions

    return instructions._REDIRECT.search(line) is not None


def test_a_block_pointed_at_with_an_at_sign_is_no_tool() -> None:
    # Round 23, from OpenAgents' agent (prompts-heldout21, seen): `@critical_context_requirement`
    # points at the prompt's `<critical_context_requirement>` block, eight times; counted as a
    # tool's name, it titled that block as the tool's section, and "@critical_context_requirement
    # (Tier 1) ALWAYS overrides minimal overhead (Tier 3)" became a default finding.
    text = _real("heldout21", "openagents--openagent.prompt.md")
    assert "critical_context_requirement" not in text_tool_names(parse_prompt(text))
    assert not any(s.lstrip().startswith("@critical_context_requirement") for s in _default(text))
    # Written bare three times in the prose, the same name is a tool's.
    bare = text.replace("@critical_context_requirement", "critical_context_requirement")
    assert "critical_context_requirement" in text_tool_names(parse_prompt(bare))


def test_an_adjective_of_a_heading_shares_the_stem_of_its_noun() -> None:
    # Round 23, from goose's system prompts (prompts-heldout15, seen): "Test actual operation
    # with realistic inputs.", moved from `<operational-principles>` to the top, shared no
    # heading word with any section ("operational" and "operation" had two stems).
    for adjective, noun in (
        ("operational", "operation"),
        ("symbolic", "symbols"),
        ("logical", "logic"),
        ("retrieval", "retrieve"),
        ("optional", "options"),
    ):
        assert stem(adjective) == stem(noun), (adjective, noun)
    # Adjectives whose noun is another word keep their own stem.
    for adjective, other in (("general", "generate"), ("terminal", "terminate")):
        assert stem(adjective) != stem(other), adjective
    *_, new, a = _moved_to_top(
        "prompts-heldout15", "goose--system.prompt.md", "Test actual operation", "candidates"
    )
    template = parse_prompt(new)
    m = explain_instruction(template, a)
    assert m is not None and m.reported
    assert template.sections[m.section].title == "operational-principles"


def test_at_the_opening_one_heading_word_of_a_long_title_backed_by_the_prose_is_enough() -> None:
    # Round 24, from cc-sdd's implementation validator (prompts-heldout20, seen): "Read each
    # file from glob results", moved from `### Step 0: Expand File Patterns
    # (Subagent-specific)` to the top, shares one of that title's five words ("file"); the
    # step's own lines say "glob" and "read" too.
    *_, new, a = _moved_to_top(
        "prompts-heldout20", "cc-sdd--validate_impl_agent.prompt.md", "Read each file", "candidates"
    )
    template = parse_prompt(new)
    m = explain_instruction(template, a)
    assert m is not None and m.reported and m.default
    assert template.sections[m.section].title.startswith("Step 0: Expand File Patterns")
    # Without that backing, one word of a long title is still too few.
    bare = new.replace(
        "Use Glob tool to expand file patterns, then read all files:", "Expand the patterns first:"
    ).replace("Read other specified file patterns", "Check the other patterns")
    m = explain_instruction(parse_prompt(bare), bare.index("Read each file"))
    assert m is not None and not m.reported
    assert m.reason == "it shares too few of that section's heading words"


def test_a_modal_in_a_clause_about_another_subject_leaves_a_step_bare() -> None:
    # Round 25, from Code Puppy's planning agent (prompts-heldout28, seen): its opening
    # lists its duties as a numbered list of bold labels; "**Coordinate with Other
    # Agents**: Recommend which agents should handle specific tasks" read as a rule (its
    # "should") rather than a step of that list, and was sent to `### Step 4: Agent
    # Coordination`.
    text = _real("heldout28", "code-puppy--planning_agent.prompt.md")
    assert not any(s.startswith("**Coordinate with Other Agents**") for s in _default(text))
    m = explain_instruction(parse_prompt(text), text.index("**Coordinate with Other Agents**"))
    assert m is not None and not m.reported
    assert m.reason.startswith("it is a step of a procedure")
    # The model's own "should" still makes a rule of it.
    ruled = text.replace(
        "Recommend which agents should handle", "You should recommend which agents handle"
    )
    assert any(s.startswith("**Coordinate with Other Agents**") for s in _default(ruled))
