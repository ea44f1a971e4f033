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
