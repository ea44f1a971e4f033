"""The SARIF 2.1.0 rendering of a lint result (GitHub code scanning and other viewers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from assembly.diagnostics import RULES, Rule, Severity
from server import jsonout
from server.cli.lint.model import LintResult
from server.links import PROJECT_URL, rule_doc_url

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def render_sarif(res: LintResult, *, src_root: Path) -> str:
    """A SARIF 2.1.0 log that GitHub code scanning accepts, URIs relative to ``src_root``."""
    rule_index = {r.code: i for i, r in enumerate(RULES)}
    results = []
    for f in res.findings:
        o = f.obj
        result: dict[str, Any] = {"ruleId": o["code"]}
        if o["code"] in rule_index:
            result["ruleIndex"] = rule_index[o["code"]]
        result["level"] = _sarif_level(f.severity)
        result["message"] = {"text": o["message"]}
        result["locations"] = [
            {"physicalLocation": _sarif_location(o["file"], o["range"], src_root)}
        ]
        if o["related"]:
            result["relatedLocations"] = [
                {
                    "id": i,
                    "physicalLocation": _sarif_location(r["file"], r["range"], src_root),
                    "message": {"text": r["message"]},
                }
                for i, r in enumerate(o["related"])
            ]
        if o["fix"] is not None and o["fix"]["edits"]:
            result["fixes"] = [
                {
                    "description": {"text": o["fix"]["title"]},
                    "artifactChanges": [
                        {
                            "artifactLocation": _sarif_artifact(o["file"], src_root),
                            "replacements": [
                                {
                                    "deletedRegion": _sarif_region(e["range"]),
                                    "insertedContent": {"text": e["new_text"]},
                                }
                                for e in o["fix"]["edits"]
                            ],
                        }
                    ],
                }
            ]
        results.append(result)
    version = _version()
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "promptls",
                        "version": version,
                        "semanticVersion": version,
                        "informationUri": PROJECT_URL,
                        "rules": [_sarif_rule(r) for r in RULES],
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": src_root.as_uri() + "/"}},
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    return jsonout.dumps(log) + "\n"


def _sarif_artifact(path: str, src_root: Path) -> dict[str, Any]:
    p = Path(path)
    if p.is_absolute() and p.is_relative_to(src_root):
        return {"uri": _quote(p.relative_to(src_root).as_posix()), "uriBaseId": "%SRCROOT%"}
    if p.is_absolute():
        return {"uri": p.as_uri()}
    return {"uri": _quote(path)}


def _quote(path: str) -> str:
    """A path as a URI path; a file name's undecodable bytes are percent-encoded as such."""
    return quote(path, errors="surrogateescape")


def _sarif_location(path: str, rng: dict[str, Any], src_root: Path) -> dict[str, Any]:
    return {"artifactLocation": _sarif_artifact(path, src_root), "region": _sarif_region(rng)}


def _sarif_region(rng: dict[str, Any]) -> dict[str, int]:
    s, e = rng["start"], rng["end"]
    return {
        "startLine": s["line"],
        "startColumn": s["column"],
        "endLine": e["line"],
        "endColumn": e["column"],
    }


def _sarif_level(severity: Severity) -> str:
    return {"error": "error", "warning": "warning"}.get(severity.value, "note")


def _sarif_rule(rule: Rule) -> dict[str, Any]:
    doc = rule.doc or rule.code
    short = doc.splitlines()[0]
    return {
        "id": rule.code,
        "name": "".join(w.capitalize() for w in rule.code.split("-")),
        "shortDescription": {"text": short},
        "fullDescription": {"text": doc},
        "help": {"text": doc, "markdown": doc},
        "helpUri": rule_doc_url(rule.code),
        "defaultConfiguration": {"level": _sarif_level(rule.severity)},
    }


def _version() -> str:
    from server import __version__  # the package's, without a metadata lookup

    return __version__
