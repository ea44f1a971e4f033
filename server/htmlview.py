"""The assembled view as HTML: one renderer for ``promptls assemble --format html`` and VS Code.

``view_model`` turns an analysis into what the picture shows: the window as a stacked bar
(the eight segments in the order the model reads them, the tool definitions, the free room
and the safety margin), the compression threshold, the dropped history, and one row per
message (segment, tokens, kept or dropped and why, cacheable prefix, where it is written).
``render_html`` draws that model as a self-contained page: inline CSS, no network asset
(its Content-Security-Policy forbids any), colours from the VS Code theme's variables with
fallbacks for a plain browser (light or dark). With ``webview=True`` it adds the small script
the VS Code webview runs: a row's message id is a button that asks the extension to reveal
the message in its document, and updates sent while you type replace the view in place.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from assembly.assemble import Assembly, LlmMessage
from assembly.host import Analysis
from assembly.rope import Rope
from assembly.text import TextRange
from assembly.tokens import resolve_encoding
from server.output import format_json, text_index

SEGMENT_LABELS = {
    "system": "system prompt",
    "history": "history",
    "custom_agent": "custom agent prompt",
    "project_files": "project files",
    "forgotten_files": "forgotten files",
    "last_user": "last user message",
    "this_turn": "this turn",
    "reminder": "reminder",
}
# Segments the pipeline always sends (only the history is cut by the budget).
_ALWAYS = {
    "system": "always sent",
    "custom_agent": "always sent",
    "project_files": "always sent",
    "forgotten_files": "lists the dropped files for read_file",
    "last_user": "always sent",
    "this_turn": "always sent (this turn)",
    "reminder": "always sent, last",
}
# The dropped span is shown whole up to this many rows, else as its ends and a count.
MAX_DROPPED_ROWS = 40


@dataclass(frozen=True, slots=True)
class Row:
    """One message as the table shows it."""

    id: str
    segment: str
    role: str
    tokens: int
    status: str  # "kept", "dropped", or "" for a row standing for several messages
    reason: str
    cache: bool
    position: int | None  # 1-based place in the messages sent, None when not sent
    line: int | None  # 0-based line of the message in its document, code points
    column: int | None


def view_model(
    analysis: Analysis, *, display_path: str, document: str | Rope | None = None
) -> dict[str, Any]:
    """What the view shows, as JSON-able data (the HTML is drawn from this and only this);
    ``document``: the dataset's text, when ``analysis`` is one of its records."""
    a = analysis.assembly
    b = a.budget
    margin = b.max_input_tokens - b.available_tokens
    parts = [
        {"key": s.name, "label": SEGMENT_LABELS.get(s.name, s.name), "tokens": s.tokens}
        for s in a.segments
    ]
    parts.append({"key": "tools", "label": "tool definitions", "tokens": b.tools})
    sent = b.used + b.tools
    parts.append({"key": "free", "label": "free", "tokens": max(0, b.available_tokens - sent)})
    parts.append({"key": "margin", "label": "safety margin", "tokens": margin})
    history_start = next((s.tokens for s in a.segments if s.name == "system"), 0)
    dropped = set(a.dropped)
    dropped_tokens = sum(m.tokens for m in a.history if m.id in dropped)
    orphan_ids = set(a.orphans_dropped)
    c = a.compression
    approx = resolve_encoding(analysis.settings.encoding, analysis.settings.model)
    index = text_index(analysis, document)
    return {
        "file": display_path,
        "model": analysis.settings.model,
        "encoding": a.encoding,
        # The encoding the settings asked for when it could not be used (None: it was).
        "encoding_requested": analysis.encoding_requested if analysis.encoding_warning else None,
        # Why the counts only approximate the model's tokenizer (None: they are exact), as
        # the text output's head line and the JSON's `encoding_approximate` say.
        "encoding_approximate": approx.note if approx.approximate else None,
        "format": format_json(analysis.conversation)["title"],  # what it was read as
        "provider": analysis.settings.provider,
        "ok": a.ok,
        "window": b.max_input_tokens,
        "available": b.available_tokens,
        "safety_margin": b.safety_margin,
        "sent": sent,
        "used": b.used,
        "tools": b.tools,
        "history_budget": b.history_budget,
        "parts": parts,
        "threshold": {
            "tokens": c.threshold,
            "at": min(b.max_input_tokens, history_start + c.threshold),
            "history_tokens": c.history_tokens,
            "triggered": c.triggered,
            "summarize": len(c.summarize),
        },
        "dropped": {
            "count": len(a.dropped),
            "tokens": dropped_tokens,
            "orphans": len(orphan_ids),
            "orphan_tokens": sum(m.tokens for m in a.history if m.id in orphan_ids),
        },
        "cache_prefix_length": a.cache_prefix_length,
        "rows": [_row_json(r) for r in rows(analysis, document)],
        "diagnostics": [
            {
                "code": d.code,
                "severity": d.severity.value,
                "message": d.message,
                "line": index.line_col(d.range.start).line,  # 0-based
            }
            for d in analysis.diagnostics
            if d.path is None and d.severity.value in ("error", "warning")
        ][:50],
    }


def rows(analysis: Analysis, document: str | Rope | None = None) -> list[Row]:
    """Every message in the order the model reads it; the dropped span where it was cut
    (``document`` as for ``view_model``)."""
    a = analysis.assembly
    where = _locator(analysis, document)
    summarize = set(a.compression.summarize)
    out: list[Row] = []
    dropped_shown = not a.dropped
    for i, e in enumerate(a.layout):
        if not dropped_shown and e.segment != "system":
            out.extend(_dropped_rows(a, where))
            dropped_shown = True
        m = e.message
        if e.segment == "history":
            reason = "fits the history budget"
            if m.replaced:
                reason += "; old tool result sent as a placeholder"
            if m.id in summarize:
                reason += "; would be summarized"
        else:
            reason = _ALWAYS.get(e.segment, "sent")
        line, col = where(m)
        # In the prefix Onyx sends (none unless prompt_cache_chat_history is on).
        cached = i < a.cache_prefix_length
        row = Row(m.id, e.segment, m.kind, e.tokens, "kept", reason, cached, i + 1, line, col)
        out.append(row)
    if not dropped_shown:
        out.extend(_dropped_rows(a, where))
    orphans = set(a.orphans_dropped)
    for m in a.history:
        if m.id in orphans:
            line, col = where(m)
            reason = "orphaned: its tool call is not sent"
            row = Row(m.id, "history", m.kind, m.tokens, "dropped", reason, False, None, line, col)
            out.append(row)
    return out


def _dropped_rows(a: Assembly, where: Any) -> list[Row]:
    dropped = set(a.dropped)
    msgs = [m for m in a.history if m.id in dropped]
    reason = "over the history budget"

    def row(m: LlmMessage) -> Row:
        line, col = where(m)
        return Row(m.id, "history", m.kind, m.tokens, "dropped", reason, False, None, line, col)

    if len(msgs) <= MAX_DROPPED_ROWS:
        return [row(m) for m in msgs]
    head, hidden, tail = msgs[:5], msgs[5:-5], msgs[-5:]
    more = Row(
        f"… {len(hidden):,} more",
        "history",
        "",
        sum(m.tokens for m in hidden),
        "dropped",
        reason,
        False,
        None,
        None,
        None,
    )
    return [*map(row, head), more, *map(row, tail)]


def _locator(analysis: Analysis, document: str | Rope | None) -> Any:
    """``LlmMessage -> (line, column)`` (0-based, code points) of where it is written."""
    index = text_index(analysis, document)
    conv = analysis.conversation
    fixed: dict[str, TextRange | None] = {
        "$custom_agent": getattr(conv.custom_agent_prompt, "range", None),
        "$reminder": getattr(conv.reminder, "range", None),
        "$system": getattr(conv.system_prompt, "range", None),
    }
    if conv.project_files:
        fixed["$project_files"] = conv.project_files[0].range
        fixed["$project_file_list"] = conv.project_files[0].range

    def where(m: LlmMessage) -> tuple[int | None, int | None]:
        rng = conv.locate(m.source).range if m.source is not None else fixed.get(m.id)
        if rng is None:
            return None, None
        lc = index.line_col(rng.start)
        return lc.line, lc.column

    return where


def _row_json(r: Row) -> dict[str, Any]:
    return {
        "id": r.id,
        "segment": r.segment,
        "role": r.role,
        "tokens": r.tokens,
        "status": r.status,
        "reason": r.reason,
        "cache": r.cache,
        "position": r.position,
        "line": r.line,
        "column": r.column,
    }


# ------------------------------------------------------------------------------- HTML

_CSS = """
:root {
  --fb-fg: #1f2328; --fb-bg: #ffffff; --fb-muted: #59636e; --fb-border: #d1d9e0;
  --fb-blue: #0969da; --fb-purple: #8250df; --fb-orange: #bc4c00; --fb-green: #1a7f37;
  --fb-yellow: #9a6700; --fb-red: #cf222e; --fb-focus: #0969da; --fb-row: #f6f8fa;
}
@media (prefers-color-scheme: dark) {
  :root {
    --fb-fg: #e6edf3; --fb-bg: #0d1117; --fb-muted: #9198a1; --fb-border: #3d444d;
    --fb-blue: #4493f8; --fb-purple: #ab7df8; --fb-orange: #db6d28; --fb-green: #3fb950;
    --fb-yellow: #d29922; --fb-red: #f85149; --fb-focus: #4493f8; --fb-row: #151b23;
  }
}
:root {
  --fg: var(--vscode-foreground, var(--fb-fg));
  --bg: var(--vscode-editor-background, var(--fb-bg));
  --muted: var(--vscode-descriptionForeground, var(--fb-muted));
  --border: var(--vscode-panel-border, var(--fb-border));
  --focus: var(--vscode-focusBorder, var(--fb-focus));
  --row: var(--vscode-list-hoverBackground, var(--fb-row));
  --c-system: var(--vscode-charts-purple, var(--fb-purple));
  --c-history: var(--vscode-charts-blue, var(--fb-blue));
  --c-custom_agent: var(--vscode-charts-orange, var(--fb-orange));
  --c-project_files: var(--vscode-charts-green, var(--fb-green));
  --c-forgotten_files: var(--vscode-charts-yellow, var(--fb-yellow));
  --c-last_user: var(--vscode-charts-red, var(--fb-red));
  --c-this_turn: var(--vscode-charts-orange, var(--fb-orange));
  --c-reminder: var(--vscode-charts-green, var(--fb-green));
  --c-tools: var(--vscode-charts-foreground, var(--fb-muted));
  --c-threshold: var(--vscode-charts-yellow, var(--fb-yellow));
  --c-error: var(--vscode-errorForeground, var(--fb-red));
}
body { color: var(--fg); background: var(--bg); margin: 0;
  font-family: var(--vscode-font-family, system-ui, -apple-system, "Segoe UI", sans-serif);
  font-size: var(--vscode-font-size, 14px); }
main { padding: 10px 14px 24px; max-width: 1200px; }
h1 { font-size: 1.25em; margin: 0.2em 0; font-weight: 600; }
h2 { font-size: 1.05em; margin: 1.2em 0 0.4em; font-weight: 600; }
.meta, .muted { color: var(--muted); }
.total { font-size: 1.1em; margin: 0.5em 0; }
.total.over { color: var(--c-error); }
.barwrap { position: relative; margin: 14px 0 6px; padding-top: 18px; }
.bar { display: flex; height: 30px; border: 1px solid var(--border); border-radius: 3px;
  overflow: hidden; }
.part { height: 100%; min-width: 0; }
.part.free { background: transparent; }
.part.margin { background: repeating-linear-gradient(135deg, var(--border) 0 4px,
  transparent 4px 8px); }
.part.tools { background: repeating-linear-gradient(45deg, var(--c-tools) 0 3px,
  transparent 3px 6px); }
.part.dropped { background: repeating-linear-gradient(135deg, var(--muted) 0 2px,
  transparent 2px 6px); opacity: 0.6; }
.sw-system, .part.system { background: var(--c-system); }
.sw-history, .part.history { background: var(--c-history); }
.sw-custom_agent, .part.custom_agent { background: var(--c-custom_agent); }
.sw-project_files, .part.project_files { background: var(--c-project_files); }
.sw-forgotten_files, .part.forgotten_files { background: var(--c-forgotten_files); }
.sw-last_user, .part.last_user { background: var(--c-last_user); }
.sw-this_turn, .part.this_turn { background: var(--c-this_turn); opacity: 0.7; }
.sw-reminder, .part.reminder { background: var(--c-reminder); opacity: 0.7; }
.sw-tools { background: repeating-linear-gradient(45deg, var(--c-tools) 0 3px,
  transparent 3px 6px); }
.sw-free { border: 1px solid var(--border); }
.sw-margin { background: repeating-linear-gradient(135deg, var(--border) 0 4px,
  transparent 4px 8px); border: 1px solid var(--border); }
.sw-dropped { background: repeating-linear-gradient(135deg, var(--muted) 0 2px,
  transparent 2px 6px); }
.marker { position: absolute; top: 0; bottom: 0; border-left: 2px dashed var(--c-threshold); }
.marker span { position: absolute; top: 0; left: 4px; white-space: nowrap; font-size: 0.8em;
  color: var(--c-threshold); }
.marker.flip span { left: auto; right: 4px; }
.droppedbar { display: flex; height: 10px; margin-top: 6px; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 16px; margin: 8px 0 0; padding: 0;
  list-style: none; }
.legend li { display: flex; align-items: center; gap: 6px; }
.sw { display: inline-block; width: 12px; height: 12px; border-radius: 2px; }
table { border-collapse: collapse; width: 100%; margin-top: 6px; font-size: 0.92em; }
td, th { white-space: nowrap; }
td.reason { white-space: normal; min-width: 8em; }
.tablewrap { overflow-x: auto; }
caption { text-align: left; color: var(--muted); padding-bottom: 4px; }
th, td { text-align: left; padding: 3px 6px; border-bottom: 1px solid var(--border);
  vertical-align: top; }
th { font-weight: 600; position: sticky; top: 0; background: var(--bg); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.dropped td { color: var(--muted); text-decoration: line-through;
  text-decoration-color: var(--muted); }
tr.dropped td.reason, tr.dropped td.status { text-decoration: none; }
tbody tr:hover { background: var(--row); }
.jump { font: inherit; color: var(--vscode-textLink-foreground, var(--c-history));
  background: none; border: none; padding: 0; cursor: pointer; text-align: left; }
.jump:focus-visible, tbody tr:focus-within { outline: 1px solid var(--focus);
  outline-offset: -1px; }
code, .id { font-family: var(--vscode-editor-font-family, ui-monospace, monospace); }
.diag { margin: 2px 0; }
.diag .sev-error { color: var(--c-error); }
.diag .sev-warning { color: var(--c-threshold); }
"""

_SCRIPT = """
(function () {
  const vscode = acquireVsCodeApi();
  const view = () => document.getElementById("view");
  function buttons() { return Array.from(document.querySelectorAll("button.jump")); }
  document.addEventListener("click", (e) => {
    const b = e.target.closest("button.jump");
    if (!b) return;
    vscode.postMessage({ type: "reveal", line: Number(b.dataset.line),
                         column: Number(b.dataset.column) });
  });
  document.addEventListener("keydown", (e) => {
    const b = e.target.closest ? e.target.closest("button.jump") : null;
    if (!b || (e.key !== "ArrowDown" && e.key !== "ArrowUp")) return;
    const all = buttons();
    const next = all[all.indexOf(b) + (e.key === "ArrowDown" ? 1 : -1)];
    if (next) { next.focus(); e.preventDefault(); }
  });
  window.addEventListener("message", (e) => {
    const msg = e.data;
    if (!msg || msg.type !== "update") return;
    const doc = new DOMParser().parseFromString(msg.html, "text/html");
    const fresh = doc.getElementById("view");
    if (!fresh) return;
    const focused = document.activeElement && document.activeElement.dataset
      ? document.activeElement.dataset.key : undefined;
    const y = window.scrollY;
    view().replaceWith(document.adoptNode(fresh));
    if (focused) {
      const again = document.querySelector('button.jump[data-key="' + CSS.escape(focused) + '"]');
      if (again) again.focus({ preventScroll: true });
    }
    window.scrollTo(0, y);
  });
})();
"""


def render_html(
    analysis: Analysis,
    *,
    display_path: str,
    webview: bool = False,
    nonce: str = "",
    document: str | Rope | None = None,
) -> str:
    """A self-contained HTML page of the view model (``webview``: with the VS Code script;
    ``document`` as for ``view_model``)."""
    model = view_model(analysis, display_path=display_path, document=document)
    return render_model_html(model, webview=webview, nonce=nonce)


def render_model_html(model: dict[str, Any], *, webview: bool = False, nonce: str = "") -> str:
    e = html.escape
    script_src = f"'nonce-{e(nonce)}'" if webview and nonce else "'none'"
    csp = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src {script_src}"
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Assembled context: {e(model['file'])}</title>",
        f"<style>{_CSS}</style></head><body>",
        _body(model, webview=webview),
    ]
    if webview:
        out.append(f'<script nonce="{e(nonce)}">{_SCRIPT}</script>')
    out.append("</body></html>\n")
    return "\n".join(out)


def _n(x: int) -> str:
    return f"{x:,}"


def _pct(x: int, whole: int) -> str:
    return f"{100 * x / whole:.3f}%" if whole > 0 else "0%"


def _body(m: dict[str, Any], *, webview: bool) -> str:
    e = html.escape
    window = max(1, m["window"])
    over = m["sent"] > m["available"] or not m["ok"]
    out = ['<main id="view">']
    out.append(f"<h1>Assembled context: <code>{e(m['file'])}</code></h1>")
    out.append(
        f'<p class="meta">{e(m["model"])} · {e(m["encoding"])}'
        + (f" (asked for {e(m['encoding_requested'])})" if m["encoding_requested"] else "")
        + f" · provider {e(m['provider'])}"
        f" · window {_n(m['window'])} · safety margin {m['safety_margin']:g}"
        f" · read as {e(m['format'])}</p>"
    )
    if m["encoding_approximate"]:
        out.append(f'<p class="meta approx">approximate counts: {e(m["encoding_approximate"])}</p>')
    out.append(
        f'<p class="total{" over" if over else ""}"><strong>{_n(m["sent"])} / '
        f"{_n(m['available'])} tokens</strong> sent of the available input "
        f"({_n(m['used'])} in messages + {_n(m['tools'])} in tool definitions)</p>"
    )
    # The bar: the window, left to right in the order the model reads it.
    parts = [p for p in m["parts"] if p["tokens"] > 0]
    summary = ", ".join(f"{p['label']} {_n(p['tokens'])}" for p in parts)
    out.append('<div class="barwrap">')
    out.append(
        f'<div class="bar" role="img" aria-label="Window of {_n(m["window"])} tokens: '
        f'{e(summary)}">'
    )
    for p in parts:
        title = f"{p['label']}: {_n(p['tokens'])} tokens ({_pct(p['tokens'], window)})"
        out.append(
            f'<div class="part {e(p["key"])}" style="width:{_pct(p["tokens"], window)}" '
            f'title="{e(title)}"></div>'
        )
    out.append("</div>")
    t = m["threshold"]
    flip = " flip" if t["at"] > 0.7 * window else ""
    label = f"compression threshold: history {_n(t['tokens'])}"
    out.append(
        f'<div class="marker{flip}" style="left:{_pct(t["at"], window)}" '
        f'title="{e(label)}" aria-hidden="true"><span>{e(label)}</span></div>'
    )
    out.append("</div>")
    d = m["dropped"]
    lost = d["tokens"] + d["orphan_tokens"]
    if lost:
        out.append(
            f'<div class="droppedbar" aria-hidden="true"><div class="part dropped" '
            f'style="width:{_pct(min(lost, window), window)}" title="dropped: {_n(lost)} tokens">'
            "</div></div>"
        )
    out.append('<ul class="legend">')
    for p in m["parts"]:
        out.append(
            f'<li><span class="sw sw-{e(p["key"])}" aria-hidden="true"></span>'
            f'{e(p["label"])} <span class="muted">{_n(p["tokens"])}</span></li>'
        )
    if lost:
        out.append(
            '<li><span class="sw sw-dropped" aria-hidden="true"></span>dropped history '
            f'<span class="muted">{_n(lost)} (not sent)</span></li>'
        )
    out.append("</ul>")
    verdict = (
        f"due: history {_n(t['history_tokens'])} &gt; threshold {_n(t['tokens'])}; "
        f"Onyx would summarize {t['summarize']} message(s) after this turn"
        if t["triggered"]
        else f"not due: history {_n(t['history_tokens'])} ≤ threshold {_n(t['tokens'])}"
    )
    out.append(f'<p class="compression">Compression {verdict}.</p>')
    if d["count"] or d["orphans"]:
        out.append(
            f"<p>Dropped: {d['count']} history message(s), {_n(d['tokens'])} tokens"
            + (f"; {d['orphans']} orphaned tool response(s)" if d["orphans"] else "")
            + ".</p>"
        )
    if m["diagnostics"]:
        out.append('<div class="diags">')
        for diag in m["diagnostics"]:
            out.append(
                f'<p class="diag"><span class="sev-{e(diag["severity"])}">'
                f"{e(diag['severity'])}</span> <code>{e(diag['code'])}</code> "
                f'{e(diag["message"])} <span class="muted">line {diag["line"] + 1}</span></p>'
            )
        out.append("</div>")
    out.append("<h2>Messages</h2>")
    out.append('<div class="tablewrap"><table>')
    hint = " Select a message id to go to it in the document." if webview else ""
    prefix = m["cache_prefix_length"]
    where_cached = (
        f"the first {prefix} form the cacheable prefix"
        if prefix
        else "no cacheable prefix (prompt_cache_chat_history is off)"
    )
    out.append(f"<caption>In the order the model receives them; {where_cached}.{hint}</caption>")
    out.append(
        '<thead><tr><th class="num">#</th><th>message</th><th>segment</th><th>role</th>'
        '<th class="num">tokens</th><th class="status">status</th><th>cache</th>'
        '<th class="num">line</th><th>why</th></tr></thead><tbody>'
    )
    for r in m["rows"]:
        cls = "dropped" if r["status"] == "dropped" else "kept"
        if r["line"] is not None and webview:
            ident = (
                f'<button class="jump id" data-key="{e(r["id"])}" data-line="{r["line"]}" '
                f'data-column="{r["column"]}" title="Go to {e(r["id"])} (line {r["line"] + 1})">'
                f"{e(r['id'])}</button>"
            )
        else:
            ident = f'<span class="id">{e(r["id"])}</span>'
        out.append(
            f'<tr class="{cls} seg-{e(r["segment"])}">'
            f'<td class="num">{r["position"] if r["position"] is not None else ""}</td>'
            f"<td>{ident}</td>"
            f'<td><span class="sw sw-{e(r["segment"])}" aria-hidden="true"></span> '
            f"{e(r['segment'])}</td>"
            f"<td>{e(r['role'])}</td>"
            f'<td class="num">{_n(r["tokens"])}</td>'
            f'<td class="status">{e(r["status"])}</td>'
            f"<td>{'prefix' if r['cache'] else ''}</td>"
            f'<td class="num">{"" if r["line"] is None else r["line"] + 1}</td>'
            f'<td class="reason">{e(r["reason"])}</td></tr>'
        )
    out.append("</tbody></table></div>")
    out.append("</main>")
    return "\n".join(x for x in out if x)
