"""The GitLab Code Quality rendering of a lint result (a JSON report)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from assembly.diagnostics import Severity
from server import jsonout
from server.cli.lint.model import LintResult, relative_uri_path


def render_gitlab(res: LintResult, *, src_root: Path) -> str:
    """A GitLab Code Quality report: a JSON array of issues, paths relative to the repository.

    The fingerprint identifies an issue across pipelines (GitLab compares them to show what a
    merge request adds or fixes): a hash of the path, the rule and the message, not the line,
    so an edit above a finding does not turn it into a new one; equal findings in one file
    are told apart by their order.
    """
    seen: dict[str, int] = {}
    issues = []
    for f in res.findings:
        o = f.obj
        path = relative_uri_path(o["file"], src_root)
        key = "\0".join((path, o["code"], o["message"]))
        n = seen[key] = seen.get(key, -1) + 1
        fingerprint = hashlib.sha256(f"{key}\0{n}".encode()).hexdigest()
        s, e = o["range"]["start"], o["range"]["end"]
        issues.append(
            {
                "type": "issue",
                "check_name": o["code"],
                "description": f"{o['code']}: {o['message']}",
                "categories": ["Bug Risk"],
                "severity": _GITLAB_SEVERITIES[f.severity],
                "fingerprint": fingerprint,
                "location": {
                    "path": path,
                    "positions": {
                        "begin": {"line": s["line"], "column": s["column"]},
                        "end": {"line": e["line"], "column": e["column"]},
                    },
                },
            }
        )
    return jsonout.dumps(issues) + "\n"


# GitLab's scale is info < minor < major < critical < blocker.
_GITLAB_SEVERITIES = {
    Severity.ERROR: "major",
    Severity.WARNING: "minor",
    Severity.INFO: "info",
    Severity.HINT: "info",
}
