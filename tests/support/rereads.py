"""One-character edits of a document, each re-read as the language server re-reads it
(``assembly.incremental.reparse_conversation``), checked against a whole read."""

from __future__ import annotations

from assembly.incremental import reparse_conversation
from assembly.model import DocFormat
from assembly.reading import parse_conversation


def whole_reads_of_small_edits(text: str, fmt: DocFormat, step: int) -> int:
    """Insert an ``x``, and delete a character, every ``step`` characters of ``text``: each
    edit's incremental re-read, when there is one, must give the messages a whole read of
    the new text gives. Returns how many edits were read whole (no incremental re-read)."""
    whole = parse_conversation(text, fmt)
    whole_reads = 0
    for at in range(0, len(text), step):
        for new, span in (
            (text[:at] + "x" + text[at:], (at, at, at + 1)),
            (text[:at] + text[at + 1 :], (at, at + 1, at)),
        ):
            again = reparse_conversation(whole, text, new, fmt, span=span)
            if again is None:
                whole_reads += 1
                continue
            fresh = parse_conversation(new, fmt)
            assert [(m.id, m.role, m.content) for m in again.messages] == [
                (m.id, m.role, m.content) for m in fresh.messages
            ], at
    return whole_reads
