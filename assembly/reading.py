"""Reading a conversation document: its text parsed, then read by the reader its shape asks for.

``parse_conversation`` is the front door: it parses the text (``syntax.py``) and hands the
tree to ``read_parsed``, which tells the format by the document's shape (``formats.detect``)
and reads it with promptls' own reader (``documents.Reader``) or an Anthropic or Responses
reader (``formats/``), which build on it; a coding agent's session file (Codex CLI, Claude
Code, Copilot CLI, Gemini CLI, pi) is read as the request its session sends, by those
readers. A dataset (one conversation per JSON Lines line) has each line read the same way.
Kept apart from ``documents.py`` so that the format readers can build on its ``Reader``
without an import circle.
"""

from __future__ import annotations

import dataclasses

from assembly.documents import (
    MAX_DOCUMENT_CHARS,
    Reader,
    is_claude_code_transcript,
    is_codex_rollout,
    is_dataset,
)
from assembly.formats.anthropic import read_anthropic, read_claude_code
from assembly.formats.copilot import is_copilot_session, read_copilot_session
from assembly.formats.detect import (
    FOREIGN_TOP_KEYS,
    NATIVE,
    SourceFormat,
    Tally,
    message_marks,
    tally,
)
from assembly.formats.gemini_cli import is_gemini_cli_session, read_gemini_cli_session
from assembly.formats.pi import is_pi_session, read_pi_session
from assembly.formats.responses import read_codex_rollout, read_responses
from assembly.formats.yamldoc import parse_yaml_conversation
from assembly.model import Conversation, DocFormat, Issue
from assembly.rope import Rope
from assembly.syntax import (
    WINDOW_CHARS,
    ParsedData,
    SNode,
    absolute,
    parse_json,
    parse_json_windows,
    parse_jsonl,
)
from assembly.text import TextRange


def parse_conversation(text: str | Rope, fmt: DocFormat) -> Conversation:
    """Parse a conversation document; never raises on user input.

    An editor's rope of JSON is parsed a window at a time (``syntax.parse_json_windows``);
    of JSON Lines or YAML, joined here, and the joined text is let go before the tree is
    read (the reader needs only the tree): at 10 MB with a few emoji it is a 40 MB ``str``.
    """
    length = len(text)
    if length > MAX_DOCUMENT_CHARS:
        issue = Issue(
            "document-too-large",
            f"document has {length:,} characters; the limit is {MAX_DOCUMENT_CHARS:,}",
            TextRange(0, 0),
        )
        return Conversation(fmt, (), issues=(issue,), length=length)
    if fmt is DocFormat.JSON and isinstance(text, Rope) and length > WINDOW_CHARS:
        # An editor's rope is read a window at a time, never joined.
        parsed = parse_json_windows(text, messages=True, unscanned=FOREIGN_TOP_KEYS)
        return read_parsed(parsed, fmt, length)
    source = str(text)
    # (A rope hands its first ``str`` over: this is then the only reference. The rope
    # stays the scanned lines' origin: ``syntax.scanned``.)
    origin = text if isinstance(text, Rope) else None
    del text
    if fmt is DocFormat.JSON:
        parsed = parse_json(source, messages=True, unscanned=FOREIGN_TOP_KEYS)
    elif fmt is DocFormat.YAML:
        parsed = parse_yaml_conversation(source)
    else:
        parsed = parse_jsonl(source, messages=True, origin=origin)
    del origin
    del source
    return read_parsed(parsed, fmt, length)


def read_parsed(
    parsed: ParsedData, fmt: DocFormat, length: int, previous: Conversation | None = None
) -> Conversation:
    """Read a parsed document in the format its shape says (``formats.detect``).

    ``previous``: a conversation read from an earlier version of the text whose source
    tree shares nodes with this one (``incremental.py``): what reading a shared message
    node gave is taken from it, not read again. The result is the same either way.
    """
    conv = _read_parsed(parsed, fmt, length, previous)
    # (Kept for an incremental re-read of this parse's tree: not of a tree made from it, as
    # a Copilot CLI session's request is, read whole on every change.)
    if (
        parsed.tokens
        and conv.tree is parsed.root
        and (conv.source_format in NATIVE or conv.records)
    ):
        object.__setattr__(conv, "syntax", (parsed.errors, parsed.tokens))
    return conv


MarksMemo = dict[int, tuple[SNode, tuple[tuple[str, str], ...]]]


def detect_format(
    root: SNode | None, fmt: DocFormat, marks_in: MarksMemo
) -> tuple[Tally, MarksMemo]:
    """The format a parsed document is read as, with the count of marks that told it
    (``formats.detect.tally``: an edit that replaces some messages tells the format again
    from it), each message node's marks taken from ``marks_in`` (by node: a re-read shares
    the nodes of the messages it did not touch) or made; and the marks of this tree's
    nodes."""
    marks_out: MarksMemo = {}

    def marks_of(node: SNode) -> list[tuple[str, str]]:
        hit = marks_in.get(id(node))
        if hit is None or hit[0] is not node:
            hit = (node, message_marks(node))
        marks_out[id(node)] = hit
        return hit[1]  # type: ignore[return-value]

    return tally(root, jsonl=fmt is DocFormat.JSONL, marks_of=marks_of), marks_out


def _read_parsed(
    parsed: ParsedData, fmt: DocFormat, length: int, previous: Conversation | None
) -> Conversation:
    root = parsed.root
    if fmt is DocFormat.JSONL and root is not None and is_codex_rollout(root):
        return read_codex_rollout(parsed, fmt, length)
    if fmt is DocFormat.JSONL and root is not None and is_claude_code_transcript(root):
        return read_claude_code(parsed, fmt, length)
    if fmt is DocFormat.JSONL and root is not None and is_copilot_session(root):
        return read_copilot_session(parsed, length)
    if fmt is DocFormat.JSONL and root is not None and is_pi_session(root):
        return read_pi_session(parsed, length)
    if root is not None and is_gemini_cli_session(root, fmt):
        return read_gemini_cli_session(parsed, fmt, length)
    if fmt is DocFormat.JSONL and root is not None and is_dataset(root):
        # A dataset: each record is read in the format its own shape says (``_records``),
        # relative to its line; a line node the previous version shares gives its record.
        records = previous._views.get("records") if previous is not None else None
        reader = Reader(fmt, length, read_record=read_parsed, record_reads=records)
        conv = reader.read(parsed)
        first = conv.records[0] if conv.records else None
        name = first.source_format if first else SourceFormat.OPENAI_CHAT.value
        why = "one conversation per line" + (
            f"; record 1: {first.source_format_why}" if first else ""
        )
        conv = dataclasses.replace(conv, source_format=name, source_format_why=why)
        conv._views["records"] = reader.record_reads
        return conv
    marks_in = previous._views.get("marks", {}) if previous is not None else {}
    told, marks_out = detect_format(root, fmt, marks_in)
    found = told.detection
    if found.format in (SourceFormat.ANTHROPIC, SourceFormat.RESPONSES) and root is not None:
        # Other providers' request bodies are read whole on every change: absolute ranges.
        parsed = ParsedData(absolute(root), parsed.errors, parsed.lines)
    if found.format is SourceFormat.ANTHROPIC:
        return read_anthropic(parsed, fmt, length, found.why)
    if found.format is SourceFormat.RESPONSES:
        return read_responses(parsed, fmt, length, found.why)
    reads = previous._views.get("reads") if previous is not None else None
    reader = Reader(fmt, length, reads)
    conv = reader.read(parsed)
    conv = dataclasses.replace(conv, source_format=found.format.value, source_format_why=found.why)
    if root is not None:
        conv._views["reads"] = reader.reads
        conv._views["marks"] = marks_out
        conv._views["tally"] = told
    return conv
