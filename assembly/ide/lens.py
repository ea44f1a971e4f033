"""Code lens: the assembled total at the top of a conversation.

One lens on the first line, e.g. ``98,112 / 121,600 tokens · 3 dropped · 2 files
forgotten`` (the parts that are zero are left out), or the assembly error's short form
when the conversation cannot be assembled. The total counts the tool definitions and every
message sent, against the available budget (the window less the safety margin). The lens
runs the command the caller names (the server's "show the assembled view").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from assembly.ide.placement import ConversationDoc, Totals, fmt_tokens, placements, short_error
from assembly.text import TextRange


@dataclass(frozen=True, slots=True)
class Lens:
    """A title over ``range`` that runs ``command`` with ``arguments`` when clicked."""

    range: TextRange
    title: str
    command: str
    arguments: tuple[Any, ...]


def conversation_lenses(
    doc: ConversationDoc, *, command: str, arguments: tuple[Any, ...], at: int = 0
) -> list[Lens]:
    """Return the lens of the document's first line (of the line at ``at``: a dataset
    record's)."""
    totals = placements(doc.conversation, doc.assembly).totals()
    end = doc.text.find("\n", at)
    end = len(doc.text) if end == -1 else end
    if end > at and doc.text[end - 1] == "\r":
        end -= 1
    return [Lens(TextRange(at, end), total_title(totals), command, arguments)]


def total_title(t: Totals) -> str:
    """``used / available tokens · N dropped · N files forgotten``, or the error."""
    if t.error is not None:
        return short_error(t.error)
    parts = [f"{fmt_tokens(t.used)} / {fmt_tokens(t.available)} tokens"]
    if t.dropped:
        parts.append(f"{t.dropped:,} dropped")
    if t.forgotten:
        parts.append(f"{t.forgotten:,} {'file' if t.forgotten == 1 else 'files'} forgotten")
    return " · ".join(parts)
