"""The GitHub Actions rendering of a lint result: one workflow-command annotation a finding."""

from __future__ import annotations

from pathlib import Path

from assembly.diagnostics import Severity
from server.cli.lint.model import LintResult, relative_uri_path, summary


def render_github(res: LintResult, *, src_root: Path) -> str:
    """GitHub Actions workflow commands (``::error file=…::message``), then the summary."""
    lines = []
    for f in res.findings:
        o = f.obj
        s, e = o["range"]["start"], o["range"]["end"]
        props = {
            "file": relative_uri_path(o["file"], src_root),
            "line": s["line"],
            "col": s["column"],
            "endLine": e["line"],
            "endColumn": e["column"],
            "title": o["code"],
        }
        message = o["message"]
        for r in o["related"]:
            rs = r["range"]["start"]
            rel = relative_uri_path(r["file"], src_root)
            message += f"\nrelated: {rel}:{rs['line']}:{rs['column']}: {r['message']}"
        if o["fix"] is not None:
            message += f"\nfix available: {o['fix']['title']}"
        prop_text = ",".join(f"{k}={gh_property(str(v))}" for k, v in props.items())
        lines.append(f"::{_GITHUB_COMMANDS[f.severity]} {prop_text}::{gh_data(message)}")
    lines.append(summary(res))
    return "\n".join(lines) + "\n"


# GitHub shows at most 10 error and 10 warning annotations of a step on the pull request; the
# job summary lists the rest, up to this many rows (its limit is 1 MiB a step).
MAX_SUMMARY_ROWS = 200


def render_github_summary(res: LintResult, *, src_root: Path) -> str:
    """The Markdown appended to ``$GITHUB_STEP_SUMMARY``: the summary line, then a table of
    the findings (the first ``MAX_SUMMARY_ROWS``)."""
    lines = ["### promptls lint", "", summary(res)]
    if res.findings:
        lines += ["", "| place | severity | rule | message |", "|---|---|---|---|"]
        for f in res.findings[:MAX_SUMMARY_ROWS]:
            o = f.obj
            s = o["range"]["start"]
            place = f"{relative_uri_path(o['file'], src_root)}:{s['line']}:{s['column']}"
            sev, code, msg = f.severity.value, o["code"], _md(o["message"])
            lines.append(f"| `{_md_code(place)}` | {sev} | `{code}` | {msg} |")
        more = len(res.findings) - MAX_SUMMARY_ROWS
        if more > 0:
            lines += ["", f"*… {more:,} more findings: the job's log lists every one.*"]
    return "\n".join(lines) + "\n\n"


def _md(text: str) -> str:
    """Text safe inside a Markdown table cell (no HTML, no cell break, one line)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _md_code(text: str) -> str:
    """Text safe inside a code span of a table cell."""
    return text.replace("`", "'").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


_GITHUB_COMMANDS = {
    Severity.ERROR: "error",
    Severity.WARNING: "warning",
    Severity.INFO: "notice",
    Severity.HINT: "notice",
}


def gh_data(text: str) -> str:
    """``text`` escaped as a workflow command's message (also used by ``promptls diff``)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def gh_property(text: str) -> str:
    """``text`` escaped as a workflow command's property value."""
    return gh_data(text).replace(":", "%3A").replace(",", "%2C")
