"""The JSON rendering of a lint result: the §7 finding objects, paths relative to the cwd."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from server import jsonout
from server.cli.lint.model import LintResult, shown_path


def render_json(res: LintResult, *, cwd: Path) -> str:
    """The §7 array of findings, ``file`` relative to ``cwd`` when inside it."""
    objs = [_relocated(f.obj, lambda p: shown_path(p, cwd)) for f in res.findings]
    return jsonout.dumps(objs) + "\n"


def _relocated(obj: dict[str, Any], where: Callable[[str], str]) -> dict[str, Any]:
    res = dict(obj)
    res["file"] = where(obj["file"])
    res["related"] = [{**r, "file": where(r["file"])} for r in obj["related"]]
    return res
