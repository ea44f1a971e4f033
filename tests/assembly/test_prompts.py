"""Tests of ``assembly.prompts``: templates are rendered as text and compared.

``check_prompt`` is the only code that calls ``parse_prompt``; it also checks the range
invariants on every case. Positions are printed 1-based ``line:column`` (code points).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembly.model import PromptTemplate
from assembly.prompts import parse_prompt
from assembly.text import LineIndex, TextRange

DATA = Path(__file__).resolve().parent.parent / "data" / "prompts"


def check_prompt(text: str, expected: str) -> PromptTemplate:
    """Parse ``text``, check its invariants, and compare its rendering with ``expected``."""
    template = parse_prompt(text)
    _check_invariants(template)
    assert _render(template) == _dedent(expected)
    return template


def test_front_matter() -> None:
    check_prompt(
        """\
---
name: agent
tools: [open_url]
settings: {model: x}
---
Hello.
""",
        """
        front_matter 1:1-5:4 {'name': 'agent', 'tools': ['open_url'], 'settings': {'model': 'x'}}
        body 6:1-7:1
        sentence - 6:1-6:7 'Hello.'
        """,
    )


def test_front_matter_ranges_are_offsets_into_the_whole_text() -> None:
    text = "---\nname: agent\ntools:\n  - open_url\n---\nBody."
    root = parse_prompt(text).front_matter_root
    assert root is not None
    assert text[root.range.start : root.range.end] == "name: agent\ntools:\n  - open_url"
    name, tools = root.members
    assert text[name.key_range.start : name.key_range.end] == "name"
    assert text[name.value.range.start : name.value.range.end] == "agent"
    item = tools.value.items[0]
    assert text[item.range.start : item.range.end] == "open_url"


def test_front_matter_closed_with_dots_and_crlf() -> None:
    check_prompt(
        "---  \r\nname: a\r\n...\r\nHi.\r\n",
        """
        front_matter 1:1-3:4 {'name': 'a'}
        body 4:1-5:1
        sentence - 4:1-4:4 'Hi.'
        """,
    )


def test_invalid_yaml_front_matter() -> None:
    check_prompt(
        """\
---
name: agent
bad: : value
---
# Title
""",
        """
        front_matter 1:1-4:4 {'name': 'agent'}
        issue syntax-error 3:6-3:7: invalid YAML: mapping values are not allowed in this context
        body 5:1-6:1
        section 0 # 'Title' 5:1-6:1 heading 5:1-5:8 body 6:1-6:1 parent -
        """,
    )


def test_unclosed_front_matter_makes_everything_body() -> None:
    check_prompt(
        """\
---
name: agent
# Title
Text.""",
        """
        issue syntax-error 1:1-1:4: front matter is not closed: expected `---`
        body 1:1-4:6
        section 0 # 'Title' 3:1-4:6 heading 3:1-3:8 body 4:1-4:6 parent -
        sentence - 2:1-2:12 'name: agent'
        sentence 0 4:1-4:6 'Text.'
        """,
    )


def test_front_matter_that_is_not_a_mapping() -> None:
    check_prompt(
        """\
---
- a
- b
---
""",
        """
        front_matter 1:1-4:4 {}
        issue schema-error 2:1-3:4: front matter must be a mapping
        body 5:1-5:1
        """,
    )


def test_empty_front_matter() -> None:
    check_prompt(
        "---\n---\nText.",
        """
        front_matter 1:1-2:4 {}
        body 3:1-3:6
        sentence - 3:1-3:6 'Text.'
        """,
    )


def test_atx_headings_and_parents() -> None:
    check_prompt(
        """\
Intro.
# One
## Two ##
### Three
##   Four   #
#Not a heading
    # indented
####### seven
# Five #bang
""",
        """
        body 1:1-10:1
        section 0 # 'One' 2:1-9:1 heading 2:1-2:6 body 3:1-9:1 parent -
        section 1 ## 'Two' 3:1-5:1 heading 3:1-3:10 body 4:1-5:1 parent 0
        section 2 ### 'Three' 4:1-5:1 heading 4:1-4:10 body 5:1-5:1 parent 1
        section 3 ## 'Four' 5:1-9:1 heading 5:1-5:14 body 6:1-9:1 parent 0
        section 4 # 'Five #bang' 9:1-10:1 heading 9:1-9:13 body 10:1-10:1 parent -
        sentence - 1:1-1:7 'Intro.'
        sentence 3 6:1-8:14 '#Not a heading\\n    # indented\\n####### seven'
        """,
    )


def test_setext_headings() -> None:
    check_prompt(
        """\
Title
=====
Some text.

Subtitle
--------
- item
---
""",
        """
        body 1:1-9:1
        section 0 # 'Title' 1:1-9:1 heading 1:1-2:6 body 3:1-9:1 parent -
        section 1 ## 'Subtitle' 5:1-9:1 heading 5:1-6:9 body 7:1-9:1 parent 0
        sentence 0 3:1-3:11 'Some text.'
        sentence 1 7:3-7:7 'item'
        """,
    )


def test_setext_underlines_follow_commonmark() -> None:
    # As CommonMark (and markdown-it) read it: the underline makes a heading of the whole
    # paragraph above it, a JSON line included; under a block quote, the lazy line of a
    # list item, an indented code line or the first line of an HTML block, `---` is a
    # thematic break.
    check_prompt(
        """\
Intro line one
line two
---
> quoted
---
- item
lazy
---
    indented code
---
<div class="note">html
---

{"name": "final_answer"}
---
Body.
""",
        """
        body 1:1-17:1
        section 0 ## 'Intro line one line two' 1:1-14:1 heading 1:1-3:4 body 4:1-14:1 parent -
        section 1 ## '{"name": "final_answer"}' 14:1-17:1 heading 14:1-15:4 body 16:1-17:1 parent -
        sentence 0 4:3-4:9 'quoted'
        sentence 0 6:3-6:7 'item'
        sentence 0 7:1-7:5 'lazy'
        sentence 0 9:5-9:18 'indented code'
        sentence 0 11:1-11:23 '<div class="note">html'
        sentence 1 16:1-16:6 'Body.'
        """,
    )


def test_front_matter_fence_is_not_a_setext_underline() -> None:
    check_prompt(
        "---\na: 1\n---\nText\n---\n",
        """
        front_matter 1:1-3:4 {'a': 1}
        body 4:1-6:1
        section 0 ## 'Text' 4:1-6:1 heading 4:1-5:4 body 6:1-6:1 parent -
        """,
    )


def test_tools_with_tool_subsections() -> None:
    check_prompt(
        """\
# Tools
You have tools.

## internal_search
Search the knowledge base first.

## open_url
Open a URL the user gave.

# User Information
Name: {{ user.name }}
""",
        """
        body 1:1-12:1
        section 0 # 'Tools' 1:1-10:1 heading 1:1-1:8 body 2:1-10:1 parent -
        section 1 ## 'internal_search' 4:1-7:1 heading 4:1-4:19 body 5:1-7:1 parent 0
        section 2 ## 'open_url' 7:1-10:1 heading 7:1-7:12 body 8:1-10:1 parent 0
        section 3 # 'User Information' 10:1-12:1 heading 10:1-10:19 body 11:1-12:1 parent -
        placeholder user.name 11:7-11:22
        sentence 0 2:1-2:16 'You have tools.'
        sentence 1 5:1-5:33 'Search the knowledge base first.'
        sentence 2 8:1-8:26 'Open a URL the user gave.'
        sentence 3 11:1-11:22 'Name: {{ user.name }}'
        """,
    )
    template = parse_prompt("# Tools\n## open_url\n# Other\n## open_url\n")
    assert template.section_named("open_url", parent=2) == 3


def test_code_fences_hide_headings_and_sentences() -> None:
    check_prompt(
        """\
# A
````md
```
# not a heading
```
Still code. {{CODE_VAR}}
````
~~~
## not a heading either
~~~~
After.
""",
        """
        body 1:1-12:1
        section 0 # 'A' 1:1-12:1 heading 1:1-1:4 body 2:1-12:1 parent -
        placeholder CODE_VAR 6:13-6:25
        sentence 0 11:1-11:7 'After.'
        """,
    )


def test_unclosed_fence_runs_to_the_end() -> None:
    check_prompt(
        "Text.\n```python\n# comment\nTail.",
        """
        body 1:1-4:6
        sentence - 1:1-1:6 'Text.'
        """,
    )


def test_html_comments_hide_headings_and_prose() -> None:
    check_prompt(
        """\
Before <!-- hidden. --> after.
<!--
# Not a heading
-->
# Real
Kept. <!-- open
still hidden.
--> Shown.
""",
        """
        body 1:1-9:1
        section 0 # 'Real' 5:1-9:1 heading 5:1-5:7 body 6:1-9:1 parent -
        sentence - 1:1-1:7 'Before'
        sentence - 1:25-1:31 'after.'
        sentence 0 6:1-6:6 'Kept.'
        sentence 0 8:5-8:11 'Shown.'
        """,
    )


def test_indented_xml_blocks_close() -> None:
    # A prompt kept in a template literal is indented as a whole: its closing tags are
    # indented as its opening tags are, and close the blocks.
    text = """\
  You are a research agent.

  <goal>
  Find the answer.
  </goal>

  <done_usage>
  Call done at the end.
  </done_usage>
"""
    template = parse_prompt(text)
    assert [(s.title, s.kind, s.parent) for s in template.sections] == [
        ("goal", "xml", None),
        ("done_usage", "xml", None),
    ]
    assert [s.section for s in template.sentences] == [None, 0, 1]
    assert text[template.sections[1].range.start : template.sections[1].range.end] == (
        "  <done_usage>\n  Call done at the end.\n  </done_usage>"
    )


def test_numbered_capitals_titles_over_a_list() -> None:
    # `1. WEB SEARCH` over a bulleted list is a part of the prompt (Strands' Tavily
    # researcher), as `### 1. Web search` would be; a numbered capitals line over another
    # numbered line is an item of a list of capitals rules, and stays prose.
    text = """\
You are a research assistant.

1. WEB SEARCH
- Search the web with the web_search tool.

2. READ FILE
   * Use the read_file tool to open a file.

RULES:
1. NEVER GUESS A URL.
2. ALWAYS CITE YOUR SOURCES.
"""
    template = parse_prompt(text)
    assert [(s.title, s.kind, s.parent) for s in template.sections] == [
        ("1. WEB SEARCH", "caps", None),
        ("2. READ FILE", "caps", None),
        ("RULES", "caps", None),
    ]
    assert [(s.text, s.section) for s in template.sentences][1:] == [
        ("Search the web with the web_search tool.", 0),
        ("Use the read_file tool to open a file.", 1),
        ("NEVER GUESS A URL.", 2),
        ("ALWAYS CITE YOUR SOURCES.", 2),
    ]


def test_template_statement_lines_are_not_prose() -> None:
    # A line of Jinja statements or comments ends the paragraph before it and is no
    # sentence: `{% include %}` is replaced by another file's text, not read as words.
    check_prompt(
        """\
{% include "scenarios.share:scen.role" %}
You will be provided with:
{%- if tools %} {# the tools, when there are any #}
- the tools
{% endif %}
Text {% if x %}kept{% endif %}.
""",
        """
        body 1:1-7:1
        sentence - 2:1-2:27 'You will be provided with:'
        sentence - 4:3-4:12 'the tools'
        sentence - 6:1-6:32 'Text {% if x %}kept{% endif %}.'
        """,
    )


def test_placeholders() -> None:
    check_prompt(
        """\
Now: {{CURRENT_DATETIME}} in {{ user.city }} {{	TAB	}}.
Not: {{ 1abc }} {{ a b }} {{ user.
city }} {{}}
{{CITATION_GUIDANCE}}{{REMINDER_TAG_DESCRIPTION}}
""",
        """
        body 1:1-5:1
        placeholder CURRENT_DATETIME 1:6-1:26
        placeholder user.city 1:30-1:45
        placeholder TAB 1:46-1:55
        placeholder CITATION_GUIDANCE 4:1-4:22
        placeholder REMINDER_TAG_DESCRIPTION 4:22-4:50
        sentence - 1:1-1:56 'Now: {{CURRENT_DATETIME}} in {{ user.city }} {{\\tTAB\\t}}.'
        sentence - 2:1-2:35 'Not: {{ 1abc }} {{ a b }} {{ user.'
        sentence - 3:1-4:50 'city }} {{}}\\n{{CITATION_GUIDANCE}}{{REMINDER_TAG_DESCRIPTION}}'
        """,
    )


def test_placeholders_in_front_matter_are_not_reported() -> None:
    check_prompt(
        "---\nname: '{{X}}'\n---\n{{Y}}",
        """
        front_matter 1:1-3:4 {'name': '{{X}}'}
        body 4:1-4:6
        placeholder Y 4:1-4:6
        sentence - 4:1-4:6 '{{Y}}'
        """,
    )


def test_sentences_wrap_over_lines() -> None:
    check_prompt(
        """\
  This sentence wraps
over two lines.   And this one
ends here! Does it? Yes

New paragraph without a stop
Second paragraph line.
""",
        """
        body 1:1-7:1
        sentence - 1:3-2:16 'This sentence wraps\\nover two lines.'
        sentence - 2:19-3:11 'And this one\\nends here!'
        sentence - 3:12-3:20 'Does it?'
        sentence - 3:21-3:24 'Yes'
        sentence - 5:1-6:23 'New paragraph without a stop\\nSecond paragraph line.'
        """,
    )


def test_list_items_and_tables() -> None:
    check_prompt(
        """\
Rules:
- First rule
- Second rule. Another
  sentence continued
* star item
+ plus item
1. numbered item
2) other numbered
- [ ] task item
Back to prose

| Tool | Use |
|:-----|----:|
| search | Look it up. Then answer |
***
-not a list item
""",
        """
        body 1:1-17:1
        sentence - 1:1-1:7 'Rules:'
        sentence - 2:3-2:13 'First rule'
        sentence - 3:3-3:15 'Second rule.'
        sentence - 3:16-4:21 'Another\\n  sentence continued'
        sentence - 5:3-5:12 'star item'
        sentence - 6:3-6:12 'plus item'
        sentence - 7:4-7:17 'numbered item'
        sentence - 8:4-8:18 'other numbered'
        sentence - 9:7-9:16 'task item'
        sentence - 10:1-10:14 'Back to prose'
        sentence - 12:3-12:7 'Tool'
        sentence - 12:10-12:13 'Use'
        sentence - 14:3-14:9 'search'
        sentence - 14:12-14:23 'Look it up.'
        sentence - 14:24-14:35 'Then answer'
        sentence - 16:1-16:17 '-not a list item'
        """,
    )


def test_abbreviations_numbers_and_file_names() -> None:
    # "e.g." and "i.e." end no sentence, whatever follows: Claude Cookbooks' research
    # subagent, "If there are any internal tools available (i.e. Slack, Asana …), ALWAYS
    # make sure to use these tools", was two sentences, the instruction cut off its "if".
    check_prompt(
        """\
Use tools, e.g. search, i.e. the index, etc. and more. Model gpt-4.1 costs 3.5 cents.
See notes.md and v1.2.3 first. Dr. Who is fine? Yes. Ask, e.g. Search. Done.
Wait... "Quoted." (Bracketed.) **Bold.** Next.
""",
        """
        body 1:1-4:1
        sentence - 1:1-1:55 'Use tools, e.g. search, i.e. the index, etc. and more.'
        sentence - 1:56-1:86 'Model gpt-4.1 costs 3.5 cents.'
        sentence - 2:1-2:31 'See notes.md and v1.2.3 first.'
        sentence - 2:32-2:35 'Dr.'
        sentence - 2:36-2:48 'Who is fine?'
        sentence - 2:49-2:53 'Yes.'
        sentence - 2:54-2:71 'Ask, e.g. Search.'
        sentence - 2:72-2:77 'Done.'
        sentence - 3:1-3:8 'Wait...'
        sentence - 3:9-3:18 '"Quoted."'
        sentence - 3:19-3:31 '(Bracketed.)'
        sentence - 3:32-3:41 '**Bold.**'
        sentence - 3:42-3:47 'Next.'
        """,
    )


def test_cjk_sentences() -> None:
    check_prompt(
        """\
# 工具
请先搜索。然后回答！可以吗？好的
日本語の文です。「引用。」次
""",
        """
        body 1:1-4:1
        section 0 # '工具' 1:1-4:1 heading 1:1-1:5 body 2:1-4:1 parent -
        sentence 0 2:1-2:6 '请先搜索。'
        sentence 0 2:6-2:11 '然后回答！'
        sentence 0 2:11-2:15 '可以吗？'
        sentence 0 2:15-3:9 '好的\\n日本語の文です。'
        sentence 0 3:9-3:14 '「引用。」'
        sentence 0 3:14-3:15 '次'
        """,
    )


def test_emoji_and_crlf_ranges_are_exact() -> None:
    text = (
        "---\r\nname: 😀\r\n---\r\n"
        "# Tools 🛠️\r\nUse 👨‍💻 {{ user.city }}. Then go!\r\n\r\n"
        "## 検索\r\n- 項目 😀\r\n"
    )
    template = parse_prompt(text)
    _check_invariants(template)

    def source(r: TextRange) -> str:
        return text[r.start : r.end]

    assert template.front_matter == {"name": "😀"}
    assert template.front_matter_range is not None
    assert source(template.front_matter_range) == "---\r\nname: 😀\r\n---"
    assert source(template.body_range).startswith("# Tools")
    tools, search = template.sections
    assert source(tools.heading_range) == "# Tools 🛠️"
    assert tools.title == "Tools 🛠️"
    assert source(tools.body_range).startswith("Use 👨‍💻")
    assert source(search.heading_range) == "## 検索"
    assert source(search.range) == "## 検索\r\n- 項目 😀\r\n"
    assert search.parent == 0
    assert [(p.name, source(p.range)) for p in template.placeholders] == [
        ("user.city", "{{ user.city }}")
    ]
    assert [(s.text, s.section) for s in template.sentences] == [
        ("Use 👨‍💻 {{ user.city }}.", 0),
        ("Then go!", 0),
        ("項目 😀", 1),
    ]


def test_empty_and_blank_text() -> None:
    check_prompt("", "body 1:1-1:1")
    check_prompt(" \n\t\r\n", "body 1:1-3:1")


@pytest.mark.parametrize("case", sorted(DATA.glob("*.prompt.md")), ids=lambda p: p.name)
def test_golden(case: Path) -> None:
    """Check every ``tests/data/prompts/*.prompt.md`` against its ``.expected`` rendering.

    ``UPDATE_GOLDEN=1`` rewrites the expectations; a missing one is written and fails.
    """
    text = case.read_text(encoding="utf-8")
    template = parse_prompt(text)
    _check_invariants(template)
    actual = _render(template) + "\n"
    expected_path = case.with_name(case.name.removesuffix(".prompt.md") + ".expected")
    if os.environ.get("UPDATE_GOLDEN") or not expected_path.exists():
        existed = expected_path.exists()
        expected_path.write_text(actual, encoding="utf-8")
        assert existed, f"wrote missing {expected_path.name}"
        return
    assert actual == expected_path.read_text(encoding="utf-8")


_FRAGMENTS = [
    "---",
    "...",
    "\n",
    "\r\n",
    "\r",
    "# ",
    "## ",
    "###### ",
    "```",
    "~~~",
    "````",
    "<!--",
    "-->",
    "{{",
    "}}",
    "{{ user.city }}",
    " ",
    "\t",
    "x",
    "Word",
    ". ",
    "e.g. ",
    "! ",
    "?",
    "。",
    "！",
    "😀",
    "👨‍💻",
    "中文",
    "|",
    "|---|",
    "- ",
    "* ",
    "1. ",
    "=",
    "===",
    "> ",
    "name: [",
    "a: 1",
    ":",
    "\ufeff",
]

_PROMPT_TEXT = st.one_of(
    st.text(max_size=200),
    st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=6)), max_size=60).map("".join),
)


@settings(max_examples=400, deadline=None)
@given(_PROMPT_TEXT)
def test_never_raises_and_ranges_are_consistent(text: str) -> None:
    _check_invariants(parse_prompt(text))


# --------------------------------------------------------------------------------------
# Helpers


def _render(template: PromptTemplate) -> str:
    index = LineIndex(template.text)

    def pos(r: TextRange) -> str:
        start, end = index.line_col(r.start), index.line_col(r.end)
        return f"{start.line + 1}:{start.column + 1}-{end.line + 1}:{end.column + 1}"

    def ref(i: int | None) -> str:
        return "-" if i is None else str(i)

    lines: list[str] = []
    if template.front_matter_range is not None:
        lines.append(f"front_matter {pos(template.front_matter_range)} {template.front_matter!r}")
    lines.extend(f"issue {i.code} {pos(i.range)}: {i.message}" for i in template.issues)
    lines.append(f"body {pos(template.body_range)}")
    lines.extend(
        f"section {i} {'#' * s.level} {s.title!r} {pos(s.range)}"
        f" heading {pos(s.heading_range)} body {pos(s.body_range)} parent {ref(s.parent)}"
        for i, s in enumerate(template.sections)
    )
    lines.extend(f"placeholder {p.name} {pos(p.range)}" for p in template.placeholders)
    lines.extend(f"sentence {ref(s.section)} {pos(s.range)} {s.text!r}" for s in template.sentences)
    return "\n".join(lines)


def _dedent(expected: str) -> str:
    return "\n".join(line.strip() for line in expected.strip().splitlines())


def _check_invariants(template: PromptTemplate) -> None:
    text = template.text
    n = len(text)

    def inside(r: TextRange) -> None:
        assert 0 <= r.start <= r.end <= n, (r, n)

    body = template.body_range
    assert body.end == n
    if template.front_matter_range is not None:
        assert template.front_matter_range.start == 0
        assert template.front_matter_range.end <= body.start
    for issue in template.issues:
        inside(issue.range)

    headings = [s.heading_range for s in template.sections]
    for i, s in enumerate(template.sections):
        inside(s.range)
        assert body.start <= s.range.start == s.heading_range.start
        assert s.heading_range.end <= s.body_range.start <= s.body_range.end == s.range.end
        assert "\n" not in text[s.heading_range.end - 1 : s.heading_range.end]
        if i:
            assert headings[i - 1].end < s.range.start
        if s.parent is not None:
            parent = template.sections[s.parent]
            assert s.parent < i and parent.level < s.level
            assert parent.range.start < s.range.start and s.range.end <= parent.range.end

    last = body.start
    for p in template.placeholders:
        inside(p.range)
        assert last <= p.range.start
        source = text[p.range.start : p.range.end]
        assert source.startswith("{{") and source.endswith("}}") and p.name in source
        last = p.range.end

    last = body.start
    for sentence in template.sentences:
        r = sentence.range
        inside(r)
        assert last <= r.start < r.end
        assert sentence.text == text[r.start : r.end] == sentence.text.strip()
        assert not any(h.start < r.end and r.start < h.end for h in headings)
        if sentence.section is None:
            assert not headings or r.start < headings[0].start
        else:
            assert template.sections[sentence.section].range.contains(r.start)
        last = r.end
