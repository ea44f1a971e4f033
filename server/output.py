"""Command-line renderings of an analysis: the §7 JSON contract and the text table.

Positions in the JSON are 1-based lines and columns counted in code points (the
convention of ruff and eslint); the language server converts to LSP units elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from assembly.assemble import Assembly
from assembly.diagnostics import Diagnostic, sort_key
from assembly.formats.anthropic_out import render_assembly
from assembly.formats.detect import SourceFormat
from assembly.host import Analysis
from assembly.model import Conversation
from assembly.rope import Rope
from assembly.settings import settings_json
from assembly.text import LineIndex, PlacedIndex, TextRange
from assembly.tokens import resolve_encoding
from server.terminal import visible


def assembly_json(
    analysis: Analysis,
    *,
    display_path: str,
    summary_request: bool = False,
    document: str | Rope | None = None,
) -> dict[str, Any]:
    """Return the ``assemble --format json`` object (SPEC §7).

    The summarization request (as large as the history it would summarize) is included
    only when ``summary_request`` is set. ``document``: the dataset's text, when
    ``analysis`` is one of its records (``text_index``).
    """
    a = analysis.assembly
    b = a.budget
    res = {
        "file": display_path,
        "format": format_json(analysis.conversation),
        "settings": settings_json(analysis.settings),
        "encoding": a.encoding,
        "encoding_requested": analysis.encoding_requested,
        "encoding_approximate": resolve_encoding(
            analysis.settings.encoding, analysis.settings.model
        ).approximate,
        "budget": {
            "max_input_tokens": b.max_input_tokens,
            "safety_margin": b.safety_margin,
            "available_tokens": b.available_tokens,
            "tools": b.tools,
            "system": b.system,
            "custom_agent": b.custom_agent,
            "project_files": b.project_files,
            "reminder": b.reminder,
            "history_budget": b.history_budget,
            "used": b.used,
            "reserved_tokens": a.reserved_tokens,
        },
        "segments": [
            {"name": s.name, "tokens": s.tokens, "messages": list(s.ids)} for s in a.segments
        ],
        "layout": [
            {"id": e.id, "segment": e.segment, "tokens": e.tokens, "cache": e.cache}
            for e in a.layout
        ],
        "messages": list(a.provider_messages),
        "dropped": list(a.dropped),
        "orphans_dropped": list(a.orphans_dropped),
        "forgotten_files": [
            {"file_id": f.file_id, "filename": f.filename, "approx_char_count": f.approx_char_count}
            for f in a.forgotten_files
        ],
        "compression": {
            "triggered": a.compression.triggered,
            "threshold": a.compression.threshold,
            "history_tokens": a.compression.history_tokens,
            "tokens_for_recent": a.compression.tokens_for_recent,
            "summarize": list(a.compression.summarize),
            "keep": list(a.compression.keep),
            "progressive": a.compression.progressive,
            **({"request": list(a.compression.request)} if summary_request else {}),
        },
        "cache_prefix_length": a.cache_prefix_length,
        "diagnostics": diagnostics_json(
            analysis, display_path=display_path, relative=True, document=document
        ),
    }
    if a.settings.provider == "anthropic":
        request = render_assembly(a)
        res["system"] = request.system
        res["messages"] = request.messages
        res["message_sources"] = request.sources
    return res


def format_json(conv: Conversation) -> dict[str, str]:
    """The format a document was read as, and the marks of its shape that decided it."""
    fmt = SourceFormat(conv.source_format)
    return {"name": fmt.value, "title": fmt.title, "why": conv.source_format_why}


def format_line(conv: Conversation) -> str:
    """One line naming the format read, for the text outputs."""
    f = format_json(conv)
    return f"read as: {f['title']} ({f['name']}) — by its shape: {f['why']}"


def diagnostics_json(
    analysis: Analysis,
    *,
    display_path: str,
    relative: bool = False,
    document: str | Rope | None = None,
) -> list[dict[str, Any]]:
    """Diagnostics as ``lint --format json`` objects; ``relative``: another file's path
    (a settings file, a template) relative to the current folder when inside it, as
    ``promptls lint`` prints paths (lint itself keeps them absolute: it relocates them);
    ``document`` as for ``assembly_json``."""
    # A text's line index is made for its first finding (most linted files have none),
    # for the few positions of the findings (a large document is not indexed up front).
    texts: dict[str | None, Any] = dict(analysis.other_texts)
    indexes: dict[str | None, Any] = {}

    def where(path: str | None) -> tuple[str, Any]:
        index = indexes.get(path)
        if index is None and path is None:
            index = indexes[path] = text_index(analysis, document, few=True)
        elif index is None and path in texts:
            index = indexes[path] = LineIndex(str(texts[path]), few=True)
        if path is None:
            return display_path, index
        return (_relative(path) if relative else path), index

    res = []
    for d in sorted(analysis.diagnostics, key=sort_key):
        file, index = where(d.path)
        related = []
        for r in d.related:
            rfile, rindex = where(r.path)
            related.append(
                {"file": rfile, "range": _range_json(r.range, rindex), "message": r.message}
            )
        fix = None
        if d.fix is not None:
            fix = {
                "title": d.fix.title,
                "edits": [
                    {"range": _range_json(e.range, index), "new_text": e.new_text}
                    for e in d.fix.edits
                ],
            }
        res.append(
            {
                "file": file,
                "code": d.code,
                "severity": d.severity.value,
                "message": d.message,
                "range": _range_json(d.range, index),
                "related": related,
                "fix": fix,
            }
        )
    return res


def head_diagnostic_json(d: Diagnostic, *, file: str) -> dict[str, Any]:
    """A diagnostic at the head of ``file`` (``internal-error``) as a §7 finding object."""
    return {
        "file": file,
        "code": d.code,
        "severity": d.severity.value,
        "message": d.message,
        "range": _range_json(TextRange(0, 0), None),
        "related": [],
        "fix": None,
    }


def render_text(
    analysis: Analysis,
    *,
    display_path: str,
    title: str | None = None,
    document: str | Rope | None = None,
) -> str:
    """A per-segment table a person reads instead of the JSON; ``title`` heads it instead of
    the path (a dataset's record), which the findings' locations keep."""
    a = analysis.assembly
    b = a.budget
    approx = resolve_encoding(analysis.settings.encoding, analysis.settings.model)
    lines = [
        f"{title or display_path}  ·  {analysis.settings.model}  ·  {a.encoding}"
        + (f" (asked for {analysis.encoding_requested})" if analysis.encoding_warning else "")
        + (f"  ·  approximate counts: {approx.note}" if approx.approximate else ""),
        format_line(analysis.conversation),
        (
            # The figure the assembled view heads with: what is sent, tools included, of
            # the available input (JSON: budget.used + budget.tools, available_tokens).
            f"budget: {b.used + b.tools:,} / {b.available_tokens:,} tokens used"
            f"  ({b.used:,} in messages + {b.tools:,} in tool definitions; max_input_tokens "
            f"{b.max_input_tokens:,} × (1 − {b.safety_margin:g}) = {b.available_tokens:,})"
        ),
        (
            f"fixed: system {b.system:,} · custom agent {b.custom_agent:,} · project files "
            f"{b.project_files:,} · reminder {b.reminder:,}  →  history budget {b.history_budget:,}"
        ),
        "",
    ]
    lines.extend(_table(a))
    c = a.compression
    lines.append("")
    lines.append(
        f"compression: {'DUE' if c.triggered else 'not due'} — history {c.history_tokens:,} "
        f"{'>' if c.triggered else '≤'} threshold {c.threshold:,}"
        + (
            f"; would summarize {len(c.summarize)} message(s), keep {len(c.keep)}"
            if c.triggered
            else ""
        )
    )
    if a.forgotten_files:
        names = ", ".join(f.filename for f in a.forgotten_files)
        lines.append(f"forgotten files: {names}")
    if a.cache_prefix_length:
        line = f"cacheable prefix: {a.cache_prefix_length} message(s)"
        marked = a.provider_messages[a.cache_prefix_length - 1]
        if "cache_control" in marked:
            line += f", cache_control on `{a.layout[a.cache_prefix_length - 1].id}`"
        lines.append(line)
    if a.settings.provider == "anthropic" and a.provider_messages:
        request = render_assembly(a)
        lines.append(
            f"anthropic request: system {'apart' if request.system else 'none'}, "
            f"{len(request.messages)} alternating turn(s) from {len(a.layout)} message(s)"
        )
    diags = diagnostics_json(analysis, display_path=display_path, relative=True, document=document)
    if diags:
        lines.append("")
        for d in diags:
            start = d["range"]["start"]
            lines.append(
                f"{d['file']}:{start['line']}:{start['column']}: {d['severity']}"
                f"[{d['code']}] {d['message']}"
            )
    return visible("\n".join(lines) + "\n")


def _table(a: Assembly) -> list[str]:
    """One row per message: kept rows in model order, the dropped span where it was cut."""
    rows: list[tuple[str, ...]] = []
    cumulative = 0
    dropped_shown = not a.dropped
    for e in a.layout:
        if not dropped_shown and e.segment != "system":
            rows.extend(_dropped_rows(a))
            dropped_shown = True
        cumulative += e.tokens
        rows.append((e.segment, e.id, e.message.kind, f"{e.tokens:,}", "kept", f"{cumulative:,}"))
    if not dropped_shown:
        rows.extend(_dropped_rows(a))
    orphans = set(a.orphans_dropped)
    for m in a.history:
        if m.id in orphans:
            rows.append(("", m.id, m.kind, f"{m.tokens:,}", "orphan dropped", ""))
    header = ("segment", "message", "role", "tokens", "status", "cumulative")
    rows = [(r[0], _clip(r[1]), *r[2:]) for r in rows]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def fmt(r: Iterable[str]) -> str:
        cells = zip(r, widths, strict=True)
        return "  ".join(
            c.rjust(w) if i in (3, 5) else c.ljust(w) for i, (c, w) in enumerate(cells)
        ).rstrip()

    return [fmt(header), fmt("-" * w for w in widths), *(fmt(r) for r in rows)]


def _dropped_rows(a: Assembly) -> list[tuple[str, ...]]:
    """The dropped span; a long one is shown as its ends and a count."""
    dropped = set(a.dropped)
    msgs = [m for m in a.history if m.id in dropped]
    shown = msgs if len(msgs) <= 12 else msgs[:3] + msgs[-3:]
    rows = [("history", m.id, m.kind, f"{m.tokens:,}", "dropped", "") for m in shown]
    if len(msgs) > 12:
        hidden = msgs[3:-3]
        total = sum(m.tokens for m in hidden)
        rows.insert(3, ("history", f"… {len(hidden):,} more", "", f"{total:,}", "dropped", ""))
    return rows


def _clip(s: str, n: int = 40) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def text_index(analysis: Analysis, document: str | Rope | None = None, *, few: bool = False) -> Any:
    """What gives the line and column of an offset into ``analysis.text`` (its own
    findings' and messages' ranges): an index of it, or, for a dataset's record, of the
    dataset's text ``document``, placed where the record starts (``PlacedIndex``)."""
    if document is None or not analysis.base:
        text = analysis.text if document is None else document
        return text if hasattr(text, "line_col") else LineIndex(str(text), few=few)
    index = document if hasattr(document, "line_col") else LineIndex(str(document), few=few)
    return PlacedIndex(index, analysis.base)


def _range_json(rng: TextRange, index: Any) -> dict[str, Any]:
    if index is None:
        return {"start": {"line": 1, "column": 1}, "end": {"line": 1, "column": 1}}
    s = index.line_col(rng.start)
    e = index.line_col(rng.end)
    return {
        "start": {"line": s.line + 1, "column": s.column + 1},
        "end": {"line": e.line + 1, "column": e.column + 1},
    }


def _relative(path: str) -> str:
    """``path`` relative to the current folder when it is inside it."""
    p = Path(path)
    cwd = Path.cwd()
    if p.is_absolute() and p.is_relative_to(cwd):
        return p.relative_to(cwd).as_posix()
    return path


def record_line(index: LineIndex, record: Analysis) -> int:
    """The 1-based line of a dataset record (its conversation's first character)."""
    root = record.conversation.root
    return index.line_col(record.base + (root.range.start if root is not None else 0)).line + 1
