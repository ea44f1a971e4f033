"""Folding ranges: what an editor can collapse.

In a conversation: every object, array and string value that spans several lines (each
message, the ``messages`` array, ``project_files``, ``tools``, a tool schema, a YAML block
scalar …). In a template: the front matter, every section (nested by level), fenced code
blocks and multi-line HTML comments.

A ``Fold`` covers the lines from the line of ``range.start`` through the line of
``range.end``. A member's fold starts at its key (a YAML ``messages:`` line); the line
holding a closing ``}`` or ``]`` alone stays visible, as in editors' own JSON folding. The
document itself (the root value) is not folded. Folds span at least two lines, and no two
start on the same line (the outer one is kept). Offsets are code points into the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from assembly.model import Conversation, PromptTemplate
from assembly.syntax import SNode
from assembly.text import LineIndex, TextRange


class FoldKind(StrEnum):
    REGION = "region"
    COMMENT = "comment"


@dataclass(frozen=True, slots=True)
class Fold:
    range: TextRange
    kind: FoldKind | None = None


def conversation_folds(
    conv: Conversation, text: str, *, index: LineIndex | None = None
) -> list[Fold]:
    """Folds of a conversation document, in document order."""
    if conv.root is None:
        return []
    res: list[Fold] = []
    # The root (the whole document; in JSONL, the list of lines) is not folded.
    root = conv.root
    stack: list[tuple[int, SNode]] = [(m.key_range.start, m.value) for m in root.members]
    stack.extend((n.range.start, n) for n in root.items)
    stack.reverse()
    while stack:
        start, node = stack.pop()
        if text.find("\n", node.range.start, node.range.end) == -1:
            continue  # one line: nothing inside spans lines either
        res.append(Fold(TextRange(start, _visible_end(text, node))))
        if node.kind == "object":
            stack.extend((m.key_range.start, m.value) for m in reversed(node.members))
        elif node.kind == "array":
            stack.extend((n.range.start, n) for n in reversed(node.items))
    return _tidy(res, index or LineIndex(text))


def template_folds(template: PromptTemplate, *, index: LineIndex | None = None) -> list[Fold]:
    """Folds of a ``*.prompt.md`` template, in document order."""
    text = template.text
    res: list[Fold] = []
    if template.front_matter_range is not None:
        res.append(Fold(template.front_matter_range))
    for s in template.sections:
        end = s.range.end
        while end > s.range.start and text[end - 1].isspace():
            end -= 1  # blank lines before the next heading stay unfolded
        res.append(Fold(TextRange(s.range.start, end)))
    body = template.body_range
    res.extend(Fold(r) for r in _fences(text, body.start))
    res.extend(
        Fold(TextRange(m.start(), m.end()), FoldKind.COMMENT)
        for m in _COMMENT.finditer(text, body.start)
    )
    return _tidy(res, index or LineIndex(text))


# ------------------------------------------------------------------------------ private

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[^\n]*$", re.MULTILINE)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def _visible_end(text: str, node: SNode) -> int:
    """Where the fold of a node ends: before a closing bracket that is alone on its line."""
    end = node.range.end
    if node.kind not in ("object", "array") or text[end - 1 : end] not in ("}", "]"):
        return end
    newline = text.rfind("\n", node.range.start, end - 1)
    if newline != -1 and not text[newline + 1 : end - 1].strip():
        return newline - 1 if newline > 0 and text[newline - 1] == "\r" else newline
    return end


def _fences(text: str, start: int) -> list[TextRange]:
    """Fenced code blocks, from the opening fence through the closing one (or the end)."""
    res = []
    opening: re.Match[str] | None = None
    for m in _FENCE.finditer(text, start):
        fence = m.group(1)
        if opening is None:
            if fence[0] != "`" or "`" not in m.group(0)[m.end(1) - m.start() :]:
                opening = m
            continue
        wanted = opening.group(1)
        rest = m.group(0)[m.end(1) - m.start() :]
        if fence[0] == wanted[0] and len(fence) >= len(wanted) and not rest.strip():
            res.append(TextRange(opening.start(), m.end()))
            opening = None
    if opening is not None:
        end = len(text)
        while end > opening.end() and text[end - 1].isspace():
            end -= 1
        res.append(TextRange(opening.start(), end))
    return res


def _tidy(folds: list[Fold], index: LineIndex) -> list[Fold]:
    """Keep folds of two lines or more, one per start line (the longest), in order."""
    by_line: dict[int, tuple[int, Fold]] = {}
    for f in folds:
        first = index.line_col(f.range.start).line
        last = index.line_col(f.range.end).line
        if last <= first:
            continue
        kept = by_line.get(first)
        if kept is None or last > kept[0]:
            by_line[first] = (last, f)
    return [f for _, (_, f) in sorted(by_line.items())]
