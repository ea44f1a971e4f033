"""Parse prompt templates (``*.prompt.md``) into a ``PromptTemplate``.

A template is Markdown with optional YAML front matter. The parser finds the front matter,
the sections, the ``{{NAME}}`` placeholders and the prose sentences, each with its exact
source range.

Sections are the structures real prompts use, nested in one tree (``Section.kind``):
Markdown headings (ATX and setext); XML-style blocks, an opening tag alone on its line
(``<tool_calling>``) through its matching closing tag; blocks opened by a ``====`` line
whose next line is a short title (``====`` / ``TOOL USE``), which hold everything up to the
next such block; and title lines: a line that is only bold text (``**Search rules**``)
or a short ALL-CAPS line (``IMPORTANT RULES:``) that starts a paragraph, numbered too when a
bulleted list follows (``3. FORMATTING RESEARCH RESPONSE``). A title line is one
level below the heading it follows (a capitals title above a bold one); an XML block
holds whatever is written inside it and ends every section opened in it.

Invariants:

- Offsets are code points into the text exactly as given (CRLF kept); every range lies
  within the text, and every ``Sentence.text`` is the source slice of its range.
- ``parse_prompt`` never raises on user input: malformed front matter becomes an ``Issue``
  and everything else is read as well as it can be.
- Headings and sentences are never taken from fenced code blocks, HTML comments, lines of
  template statements (``{% include "role" %}``, ``{# note #}``) or front matter;
  placeholders are taken from the whole body, code blocks included, because they are
  substituted by plain string replacement.
- The scan is one pass over the lines with regexes and ``str.find``; no per-character
  Python loops.
- Only the first ``MAX_PROMPT_CHECKED`` characters of the body are read for headings,
  sentences and placeholders (cut at a line's end); a longer template gets one
  ``document-too-large`` issue where reading stopped. The whole text is still the
  template's text (sent and counted).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from assembly.model import Issue, Placeholder, PromptTemplate, Section, Sentence
from assembly.syntax import Member, SNode, parse_yaml
from assembly.text import TextRange

# The body read for structure: 25 times the largest real prompt of the evaluation corpora
# (42 KB). A 41 MB template of 2,000,000 one-line sentences took 93 s and 4 GB to lint.
MAX_PROMPT_CHECKED = 1 << 20


def parse_prompt(text: str) -> PromptTemplate:
    """Parse a prompt template; never raises.

    Args:
        text: the whole document text.

    Returns:
        The template with every range as code-point offsets into ``text``.
    """
    front = _parse_front_matter(text)
    body_start = front.body_start
    issues = list(front.issues)
    scan_end = checked_end(text, body_start)
    if scan_end < len(text):
        issues.append(
            Issue(
                "document-too-large",
                f"template body of {len(text) - body_start:,} characters: only the first "
                f"{scan_end - body_start:,} are checked (sections, instructions, "
                "placeholders); the rest is sent unchecked",
                TextRange(scan_end, min(len(text), scan_end + 1)),
                severity="warning",
            )
        )
    scan = _BodyScanner(text, body_start, scan_end)
    scan.run()
    sections = _build_sections(text, scan.headings)
    section_starts = [s.range.start for s in sections]
    sentences: list[Sentence] = []
    for block_start, block_end in scan.blocks:
        for start, end in _split_sentences(text, block_start, block_end):
            sentences.append(
                Sentence(
                    text[start:end],
                    TextRange(start, end),
                    innermost_section(sections, section_starts, start),
                )
            )
    placeholders = tuple(
        Placeholder(m.group(1), TextRange(m.start(), m.end()))
        for m in _PLACEHOLDER.finditer(text, body_start, scan_end)
    )
    return PromptTemplate(
        text=text,
        body_range=TextRange(body_start, len(text)),
        front_matter=front.value,
        front_matter_range=front.range,
        front_matter_root=front.root,
        sections=tuple(sections),
        placeholders=placeholders,
        sentences=tuple(sentences),
        issues=tuple(issues),
    )


def checked_end(text: str, start: int) -> int:
    """Where reading a prompt text from ``start`` for structure and placeholders stops:
    the text's end, or the end of the last line that starts within ``MAX_PROMPT_CHECKED``
    characters (the limit itself when that first line is longer)."""
    if len(text) - start <= MAX_PROMPT_CHECKED:
        return len(text)
    cut = start + MAX_PROMPT_CHECKED
    line_end = text.rfind("\n", start, cut)
    return line_end + 1 if line_end != -1 else cut


def checked_text(template: PromptTemplate) -> str:
    """The template's text up to where it was read (``checked_end`` of its body): what the
    prompt rules scan, so that a text past the limit costs them nothing."""
    end = checked_end(template.text, template.body_range.start)
    return template.text if end == len(template.text) else template.text[:end]


def innermost_section(
    sections: tuple[Section, ...] | list[Section], starts: list[int], offset: int
) -> int | None:
    """The index of the innermost section whose body holds ``offset`` (``starts``: the
    sections' range starts, in order)."""
    i: int | None = bisect.bisect_right(starts, offset) - 1
    while i is not None and i >= 0:
        section = sections[i]
        if section.body_range.start <= offset < section.body_range.end:
            return i
        if section.range.start <= offset < section.range.end:
            return section.parent  # on the heading line or a closing tag
        i = section.parent
    return None


def shift_node(node: SNode, delta: int) -> SNode:
    """Return a copy of ``node`` with every range (keys included) moved by ``delta``."""
    if delta == 0:
        return node
    return SNode(
        node.kind,
        node.range.shift(delta),
        node.value,
        tuple(shift_node(item, delta) for item in node.items),
        tuple(
            Member(m.key, m.key_range.shift(delta), shift_node(m.value, delta))
            for m in node.members
        ),
    )


# --------------------------------------------------------------------------------------
# Front matter

_FM_OPEN = re.compile(r"\ufeff?---[ \t]*(?:\r?\n|\Z)")
_FM_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*\r?(?:\n|\Z)", re.MULTILINE)


@dataclass(slots=True)
class _FrontMatter:
    """A template's front matter: where the body starts, the values read, the block's range
    and tree, and what was wrong with it."""

    body_start: int = 0
    value: dict[str, object] = field(default_factory=dict)
    range: TextRange | None = None
    root: SNode | None = None
    issues: list[Issue] = field(default_factory=list)


def _parse_front_matter(text: str) -> _FrontMatter:
    res = _FrontMatter()
    opening = _FM_OPEN.match(text)
    if opening is None:
        return res
    inner_start = opening.end()
    closing = _FM_CLOSE.search(text, inner_start)
    if closing is None:
        line_end = len(text[: opening.end()].rstrip("\r\n"))
        res.issues.append(
            Issue(
                "syntax-error",
                "front matter is not closed: expected `---`",
                TextRange(0, line_end),
            )
        )
        return res
    res.body_start = closing.end()
    res.range = TextRange(0, len(text[: closing.end()].rstrip("\r\n")))
    parsed = parse_yaml(text[inner_start : closing.start()])
    res.issues.extend(Issue(e.code, e.message, e.range.shift(inner_start)) for e in parsed.errors)
    if parsed.root is None:
        return res
    res.root = shift_node(parsed.root, inner_start)
    if res.root.is_object:
        res.value = res.root.to_python()
    else:
        res.issues.append(Issue("schema-error", "front matter must be a mapping", res.root.range))
    return res


# --------------------------------------------------------------------------------------
# Body: headings and prose blocks

_BLANK = re.compile(r"[ \t\r\f\v]*\Z")
# A line made only of Jinja statement or comment tags: `{% include "x" %}`, `{%- endif -%}`.
_TEMPLATE_TAGS = re.compile(
    r"[ \t]*(?:\{%(?:[^%\n]|%(?!\}))*%\}[ \t]*|\{#(?:[^#\n]|#(?!\}))*#\}[ \t]*)+\Z"
)
_FENCE_OPEN = re.compile(r"[ \t]*(`{3,}(?=[^`]*\Z)|~{3,})")
_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+|\Z)(.*)")
_ATX_CLOSING = re.compile(r"(?:\A|[ \t]+)#+[ \t]*\Z")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*\Z")
_THEMATIC = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*\Z")
# The start of an HTML block that may interrupt a paragraph (CommonMark 4.6, kinds 1-6).
_HTML_BLOCK = re.compile(
    r" {0,3}(?:<(?:script|pre|style|textarea)(?:[\s>]|\Z)|<!--|<\?|<![A-Za-z]|<!\[CDATA\[|"
    r"</?(?:address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd|"
    r"details|dialog|dir|div|dl|dt|fieldset|figcaption|figure|footer|form|frame|frameset|"
    r"h[1-6]|head|header|hr|html|iframe|legend|li|link|main|menu|menuitem|nav|noframes|ol|"
    r"optgroup|option|p|param|search|section|summary|table|tbody|td|tfoot|th|thead|title|tr|"
    r"track|ul)(?:[\s>]|/>|\Z))",
    re.IGNORECASE,
)
# A line that is only an open or a closing tag starts an HTML block too, but not inside a
# paragraph (kind 7).
_HTML_TAG_LINE = re.compile(
    r" {0,3}(?:<[A-Za-z][\w-]*"
    r"(?:\s+[A-Za-z_:][\w.:-]*(?:\s*=\s*(?:[^\s\"'=<>`]+|'[^']*'|\"[^\"]*\"))?)*\s*/?>"
    r"|</[A-Za-z][\w-]*\s*>)[ \t]*\Z",
    re.IGNORECASE,
)
_TABLE_SEP = re.compile(r"[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*\Z")
_TABLE_CELL = re.compile(r"[^|]+")
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]+(?:\[[ xX]\][ \t]+)?|\Z)")
_QUOTE = re.compile(r"[ \t]*(?:>[ \t]?)+")
_LIST_FIRST = frozenset("-*+0123456789")
_COMMENT_TAG = re.compile(r"<!--.*?-->")


@dataclass(slots=True)
class _Heading:
    """One line (or two) that opens a section: a Markdown heading, a `====` block's title, a
    title line or an XML-style tag."""

    level: int  # Markdown level; 0 for a `====` block; computed for title lines
    title: str
    start: int  # start of the heading's first line (the `====` line for "rule": the
    # heading of a `====` block is both lines, so its range starts where the section does)
    end: int  # end of its last line, without the line break
    body_start: int  # after the line break of its last line
    kind: str = "heading"
    close_start: int = -1  # "xml": start of the closing tag's line (-1: not closed yet)
    close_end: int = -1  # "xml": end of the closing tag's line
    name: str = ""  # "xml": the tag name as written


_RULE_LINE = re.compile(r" {0,3}={3,}[ \t]*\Z")
_XML_OPEN = re.compile(r"[ \t]*<([A-Za-z_][\w.:-]*)(?:[ \t]+[^<>]*)?>[ \t]*\Z")
_XML_CLOSE = re.compile(r"[ \t]*(?:(.*\S)[ \t]*)?</([A-Za-z_][\w.:-]*)>[ \t]*\Z")
_BOLD_TITLE = re.compile(
    r" {0,3}(?:\*\*([^*\n]{1,80}?)[ \t]*:?\*\*|__([^_\n]{1,80}?)[ \t]*:?__)[ \t]*:?[ \t]*\Z"
)
_CAPS_TITLE = re.compile(r" {0,3}([A-Z][A-Z0-9 &/'()+,_-]*[A-Z0-9)])[ \t]*:?[ \t]*\Z")
# A numbered capitals title over a bulleted list (`3. FORMATTING RESEARCH RESPONSE`,
# `2. DOCUMENTATION SEARCH REQUIREMENTS:`): a part of the prompt, as `### 3. …` would be.
_NUMBERED_CAPS_TITLE = re.compile(
    r" {0,3}(\d{1,2}[.)][ \t]+[A-Z][A-Z0-9 &/'()+,_-]*[A-Z0-9)])[ \t]*:?[ \t]*\Z"
)
_BULLET = re.compile(r"[ \t]*[-*+•][ \t]+\S")
# Capitals that mark a remark rather than name a part of the prompt.
_NOT_CAPS_TITLES = frozenset({"IMPORTANT", "NOTE", "WARNING", "CRITICAL", "TODO", "TIP", "OK"})
_MAX_TITLE_WORDS = 8


def _is_caps_title(title: str) -> bool:
    letters = sum(c.isalpha() for c in title)
    words = title.split()
    return letters >= 4 and len(words) <= _MAX_TITLE_WORDS and title not in _NOT_CAPS_TITLES


def _is_short_title(line: str) -> bool:
    stripped = line.strip().strip("*_#").strip()
    return (
        0 < len(stripped) <= 80
        and len(stripped.split()) <= _MAX_TITLE_WORDS
        and stripped[-1] not in ".,;!?"
    )


class _BodyScanner:
    """One pass over the body's lines: collects headings and prose blocks.

    A prose block is a contiguous source range in which a sentence may wrap over lines: a
    paragraph, a list item (with its indented continuation lines) or a table cell. Blank
    lines, headings, fences, comments and thematic breaks end a block.
    """

    def __init__(self, text: str, start: int, end: int) -> None:
        self.text = text
        self.headings: list[_Heading] = []
        self.blocks: list[tuple[int, int]] = []
        # (start, end) of each line of the body, without its line break.
        self._lines = _line_bounds(text, start, end)
        self._fence = ""  # the opening fence of the code block we are in, or ""
        self._in_comment = False
        self._block_start = -1  # -1: no open prose block
        self._block_end = -1
        self._block_is_list = False  # the open block is a list item
        self._block_line = 0  # the index of the open block's first line
        self._block_quoted = False  # the open block is in a block quote
        self._line_index = 0  # the line being read
        self._after_rule = -1  # start of the `====` line a title may follow, else -1
        self._open_tags: dict[str, list[_Heading]] = {}  # XML blocks not closed yet

    def run(self) -> None:
        index = 0
        while index < len(self._lines):
            index = self._scan_line(index)
        self._end_block()
        # An opening tag that is never closed is no block.
        self.headings = [h for h in self.headings if h.kind != "xml" or h.close_start >= 0]

    def _scan_line(self, index: int) -> int:
        """Read line ``index``; return the index of the next line to read."""
        text = self.text
        ls, le = self._lines[index]
        line = text[ls:le]
        self._line_index = index
        if self._fence:
            closing = _FENCE_OPEN.match(line)
            if (
                closing is not None
                and closing.group(1)[0] == self._fence[0]
                and len(closing.group(1)) >= len(self._fence)
                and _BLANK.match(line, closing.end())
            ):
                self._fence = ""
            return index + 1
        if self._in_comment:
            close = line.find("-->")
            if close != -1:
                self._in_comment = False
                self._add_prose(ls + close + 3, le)
            return index + 1
        if _BLANK.match(line):
            self._end_block()
            return index + 1
        after_rule, self._after_rule = self._after_rule, -1
        first = line.lstrip(" \t")[:1]
        if first == "=" and _RULE_LINE.match(line):
            self._end_block()
            self._after_rule = ls
            return index + 1
        if after_rule >= 0 and _is_short_title(line) and not _LIST_ITEM.match(line):
            self._end_block()
            self._add_heading(0, line.strip().strip("*_#").strip(), index, index, "rule")
            self.headings[-1].start = after_rule
            return index + 1
        if first == "<" and self._tag_line(index, line):
            return index + 1
        if first == "{" and _TEMPLATE_TAGS.match(line):
            # A line of template statements (`{% include "role" %}`, `{% if tools %}`) is
            # no prose: it ends the paragraph before it and starts none.
            self._end_block()
            return index + 1
        if (
            self._block_start < 0
            and (first in ("*", "_") or first.isupper())
            and self._title_line(index, line)
        ):
            return index + 1
        if first in ("`", "~") and (fence := _FENCE_OPEN.match(line)):
            self._end_block()
            self._fence = fence.group(1)
            return index + 1
        if first == "#" and (atx := _ATX.match(line)):
            self._end_block()
            title = _ATX_CLOSING.sub("", atx.group(2).strip(" \t"))
            self._add_heading(len(atx.group(1)), title, index, index)
            return index + 1
        if first in ("-", "*", "_") and _THEMATIC.match(line):
            self._end_block()
            return index + 1
        if first == "|":
            self._end_block()
            if not _TABLE_SEP.match(line):
                for cell in _TABLE_CELL.finditer(line):
                    self._add_prose(ls + cell.start(), ls + cell.end())
                    self._end_block()
                    if self._in_comment:
                        break
            return index + 1
        if first.isdigit() and self._numbered_title(index, line):
            return index + 1
        if first in _LIST_FIRST and (item := _LIST_ITEM.match(line)):
            self._end_block()
            self._block_is_list = True
            self._add_prose(ls + item.end(), le)
            return index + 1
        lazy = self._block_is_list and first == line[:1]
        if lazy:
            # A line that is not indented ends the list item (no lazy continuation).
            self._end_block()
        quote = _QUOTE.match(line) if first == ">" else None
        if (
            index + 1 < len(self._lines)
            and not self._block_is_list
            and "<!--" not in line
            and _SETEXT.match(text, *self._lines[index + 1])
            and self._setext_content(line, lazy, quote is not None)
        ):
            nls, nle = self._lines[index + 1]
            level = 1 if text[nls:nle].strip()[0] == "=" else 2
            first_line, title_start = index, ls
            if self._block_start >= 0:
                # The underline makes a heading of the whole paragraph above it.
                first_line, title_start = self._block_line, self._block_start
                self._block_start = -1
            self._end_block()
            title = " ".join(text[title_start:le].split())
            self._add_heading(level, title, first_line, index + 1)
            return index + 2
        self._add_prose(ls + quote.end() if quote is not None else ls, le)
        return index + 1

    def _setext_content(self, line: str, lazy: bool, quoted: bool) -> bool:
        """Whether ``line`` is paragraph text a setext underline below it makes a heading
        of, as CommonMark reads it: not a block quote line (`> foo` over `---` is a quote
        and a thematic break), not the lazy continuation of a list item or quote, not the
        first line of an indented code block or of an HTML block."""
        if quoted or lazy or self._block_quoted:
            return False
        if _HTML_BLOCK.match(line) is not None:
            return False
        if self._block_start >= 0:
            return True  # a continuation line of an open paragraph
        indent = len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip(" "))
        return indent < 4 and _HTML_TAG_LINE.match(line) is None

    def _tag_line(self, index: int, line: str) -> bool:
        """Take a line that is only an opening or closing XML tag; True when it was one."""
        opening = _XML_OPEN.match(line)
        if opening is not None:
            self._end_block()
            name = opening.group(1)
            self._add_heading(0, name, index, index, "xml")
            self.headings[-1].name = name
            self._open_tags.setdefault(name, []).append(self.headings[-1])
            return True
        closing = _XML_CLOSE.match(line)
        if closing is None or closing.group(1) is not None:
            return False
        return self._close_tag(closing.group(2), index)

    def _close_tag(self, name: str, index: int) -> bool:
        pending = self._open_tags.get(name)
        if not pending:
            return False
        self._end_block()
        block = pending.pop()
        ls, le = self._lines[index]
        block.close_start, block.close_end = ls, le
        # Blocks opened inside it and never closed are no blocks.
        for others in self._open_tags.values():
            while others and others[-1].start > block.start:
                others.pop()
        return True

    def _title_line(self, index: int, line: str) -> bool:
        """Take a bold or ALL-CAPS title line that starts a paragraph; True when it was one."""
        if index + 1 < len(self._lines):
            nls, nle = self._lines[index + 1]
            if _SETEXT.match(self.text, nls, nle) or _RULE_LINE.match(self.text, nls, nle):
                return False
        bold = _BOLD_TITLE.match(line)
        title = (bold.group(1) or bold.group(2)) if bold is not None else ""
        if title and _is_short_title(title):
            self._end_block()
            self._add_heading(0, title.strip().rstrip(":").strip(), index, index, "bold")
            return True
        caps = _CAPS_TITLE.match(line)
        if caps is not None and (
            _is_caps_title(caps.group(1)) or self._remark_over_list(index, line, caps.group(1))
        ):
            self._end_block()
            self._add_heading(0, caps.group(1), index, index, "caps")
            return True
        return False

    def _remark_over_list(self, index: int, line: str, title: str) -> bool:
        """Whether a remark word with its colon alone on its line (`IMPORTANT:`) heads the
        bulleted list below it: a part of the prompt beside `RULES:` (round 13, Cline's
        `IMPORTANT:` list after its `RULES:` list), not a remark on the next paragraph."""
        if title not in _NOT_CAPS_TITLES or not line.rstrip().endswith(":"):
            return False
        if index + 1 >= len(self._lines):
            return False
        nls, nle = self._lines[index + 1]
        return _BULLET.match(self.text, nls, nle) is not None

    def _numbered_title(self, index: int, line: str) -> bool:
        """Take a numbered capitals title line whose next line is a bulleted list item
        (`1. WEB SEARCH` over `- Conduct thorough web searches …`); True when it was one.
        A numbered capitals line over another numbered line is an item of a list of
        capitals rules, not a title."""
        numbered = _NUMBERED_CAPS_TITLE.match(line)
        if numbered is None or index + 1 >= len(self._lines):
            return False
        words = numbered.group(1).split(None, 1)
        if len(words) < 2 or not _is_caps_title(words[1]):
            return False
        nls, nle = self._lines[index + 1]
        if _BULLET.match(self.text, nls, nle) is None:
            return False
        self._end_block()
        self._add_heading(0, numbered.group(1), index, index, "caps")
        return True

    def _add_heading(
        self, level: int, title: str, first_line: int, last_line: int, kind: str = "heading"
    ) -> None:
        if "<!--" in title:
            title = _COMMENT_TAG.sub("", title)
            opening = title.find("<!--")
            if opening != -1:
                # An unclosed comment in a heading hides the lines that follow.
                title = title[:opening]
                self._in_comment = True
            title = title.strip()
        start = self._lines[first_line][0]
        end = self._lines[last_line][1]
        if last_line + 1 < len(self._lines):
            body_start = self._lines[last_line + 1][0]
        else:
            body_start = len(self.text)
        self.headings.append(_Heading(level, title, start, end, body_start, kind))

    def _add_prose(self, start: int, end: int) -> None:
        """Add a line's prose from ``start`` to ``end``, cutting out HTML comments."""
        text = self.text
        while start < end:
            opening = text.find("<!--", start, end)
            if opening == -1:
                self._extend_block(start, end)
                return
            self._extend_block(start, opening)
            self._end_block()
            closing = text.find("-->", opening + 4, end)
            if closing == -1:
                self._in_comment = True
                return
            start = closing + 3

    def _extend_block(self, start: int, end: int) -> None:
        if start >= end or _BLANK.match(self.text, start, end):
            return
        if self._block_start < 0:
            self._block_start = start
            self._block_line = self._line_index
            self._block_quoted = _QUOTE.match(self.text, *self._lines[self._line_index]) is not None
        self._block_end = end

    def _end_block(self) -> None:
        if self._block_start >= 0:
            self.blocks.append((self._block_start, self._block_end))
        self._block_start = -1
        self._block_is_list = False


def _line_bounds(text: str, start: int, stop: int) -> list[tuple[int, int]]:
    """Return ``(start, end)`` of each line from ``start`` to ``stop``, without its line
    break (``stop``: the text's end or just after a line break)."""
    res: list[tuple[int, int]] = []
    find = text.find
    line_start = start
    newline = find("\n", start, stop)
    while newline != -1:
        end = newline - 1 if newline > line_start and text[newline - 1] == "\r" else newline
        res.append((line_start, end))
        line_start = newline + 1
        newline = find("\n", line_start, stop)
    res.append((line_start, stop))
    return res


def _build_sections(text: str, headings: list[_Heading]) -> list[Section]:
    """Nest the headings, title lines and XML blocks into one tree and give each its extent.

    A Markdown heading (or title line) runs up to the next one of its level or higher,
    and at the latest to the end of the XML block it is written in; an XML block runs
    through its closing tag. Title lines get their level from the heading above them.
    """
    n = len(headings)
    ends = [len(text)] * n
    parents: list[int | None] = [None] * n
    levels = [h.level for h in headings]
    stack: list[int] = []

    def limit(k: int) -> int:
        """The end an implicit section at stack position ``k`` cannot pass."""
        for j in range(k - 1, -1, -1):
            outer = headings[stack[j]]
            if outer.kind == "xml":
                return outer.close_start
        return len(text)

    for index, h in enumerate(headings):
        # XML blocks that closed before this heading end, with everything opened in them.
        closed = next(
            (
                k
                for k, e in enumerate(stack)
                if headings[e].kind == "xml" and headings[e].close_start <= h.start
            ),
            None,
        )
        while closed is not None and len(stack) > closed:
            e = stack.pop()
            if headings[e].kind == "xml":
                ends[e] = headings[e].close_end
            else:
                ends[e] = limit(len(stack))
        if h.kind in ("caps", "bold"):
            above = ("heading", "rule") if h.kind == "caps" else ("heading", "rule", "caps")
            base = next((levels[e] for e in reversed(stack) if headings[e].kind in above), 0)
            levels[index] = min(base + 1, 7)
        if h.kind != "xml":
            while (
                stack and headings[stack[-1]].kind != "xml" and levels[stack[-1]] >= levels[index]
            ):
                ends[stack.pop()] = h.start
        else:
            levels[index] = (levels[stack[-1]] if stack else 0) + 1
        parents[index] = stack[-1] if stack else None
        stack.append(index)
    while stack:
        e = stack.pop()
        ends[e] = headings[e].close_end if headings[e].kind == "xml" else limit(len(stack))
    res = []
    for h, end, parent, level in zip(headings, ends, parents, levels, strict=True):
        body_end = h.close_start if h.kind == "xml" else end
        res.append(
            Section(
                title=h.title,
                level=level,
                heading_range=TextRange(h.start, h.end),
                range=TextRange(h.start, end),
                body_range=TextRange(min(h.body_start, body_end), body_end),
                parent=parent,
                kind=h.kind,
            )
        )
    return res


# --------------------------------------------------------------------------------------
# Sentences and placeholders

_PLACEHOLDER = re.compile(r"\{\{[ \t]*([A-Za-z_][A-Za-z0-9_.]*)[ \t]*\}\}")

# A sentence ends at `.`, `!` or `?` followed by whitespace (closing quotes, brackets and
# Markdown emphasis may come between), or at CJK full stops, which need no space after.
# Written to start with one character class (which of the two kinds it is, a lookbehind
# then tells), so the regex engine skips from stop to stop instead of trying a match at
# every character (which took 7× as long on the benchmark's generated prompts).
_SENTENCE_END = re.compile(
    r"[.!?。！？](?:(?<=[.!?])[.!?]*[\"'”’»)\]*_`]*(?=\s|\Z)|(?<=[。！？])[。！？]*[\"'”’」』）)\]*_]*)"
)

# Abbreviations that do not end a sentence when the next word is lowercase ("e.g." and
# "i.e." never do).
_ABBREVIATION = re.compile(
    r"(?<![\w.])(?:e\.g|i\.e|etc|vs|cf|approx|incl|esp|resp|viz)\Z", re.IGNORECASE
)
_NEXT_WORD = re.compile(r"\s*(\S)")


def _split_sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Split the prose block ``[start, end)`` into trimmed sentence ranges."""
    res: list[tuple[int, int]] = []
    cursor = start
    for m in _SENTENCE_END.finditer(text, start, end):
        dot = m.start()
        if text[dot] == "." and (abbr := _ABBREVIATION.search(text, max(start, dot - 8), dot)):
            if abbr.group(0).lower() in ("e.g", "i.e") and m.end() - dot == 1:
                continue  # "(i.e. Slack, Asana …)": no sentence ends with "e.g." or "i.e."
            following = _NEXT_WORD.match(text, m.end(), end)
            if following is not None and following.group(1).islower():
                continue
        _append_trimmed(res, text, cursor, m.end())
        cursor = m.end()
    _append_trimmed(res, text, cursor, end)
    return res


def _append_trimmed(res: list[tuple[int, int]], text: str, start: int, end: int) -> None:
    piece = text[start:end]
    stripped = piece.strip()
    if stripped:
        lead = len(piece) - len(piece.lstrip())
        res.append((start + lead, start + lead + len(stripped)))
