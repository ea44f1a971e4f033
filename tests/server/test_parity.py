"""JSON, YAML and JSONL parity: one conversation written three ways assembles identically.

Each case under ``tests/data/parity/`` is written by hand in the three formats (JSONL: a
header line with the document keys, then one message per line). ``check_parity`` analyzes
every variant as the command line does and asserts that the document model (ranges aside)
and the whole §7 ``assemble --format json`` object (diagnostic positions aside: they differ
by format) are the same; the JSON variant's assembly is also rendered and compared with
``<case>.expected`` (``UPDATE_GOLDEN=1`` rewrites it).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from assembly.host import Analysis
from assembly.model import Conversation
from server.output import assembly_json
from server.workspace import analyze
from tests.support.golden import check_golden

DATA = Path(__file__).resolve().parent.parent / "data" / "parity"
FORMATS = (".conv.json", ".conv.yaml", ".conv.jsonl")
TODAY = dt.date(2025, 6, 2)
CASES = sorted({p.name.split(".")[0] for p in DATA.glob("*.conv.*")})


@pytest.mark.parametrize("case", CASES)
def test_parity(case: str) -> None:
    check_parity(case)


def test_every_case_is_written_in_the_three_formats() -> None:
    assert len(CASES) >= 3
    for case in CASES:
        assert sorted(p.name for p in DATA.glob(f"{case}.conv.*")) == sorted(
            case + suffix for suffix in FORMATS
        )


def check_parity(case: str) -> None:
    """Analyze the three variants of ``case``; assert they agree and match the golden file."""
    analyses = [_analyze(DATA / f"{case}{suffix}") for suffix in FORMATS]
    reference = analyses[0]
    assert not [d for d in reference.diagnostics if d.code in ("syntax-error", "schema-error")]
    for other in analyses[1:]:
        where = other.path.name
        assert _model(other.conversation) == _model(reference.conversation), where
        assert other.settings == reference.settings, where
        assert _contract(other) == _contract(reference), where
    check_golden(_render(reference), DATA / f"{case}.expected")


def _analyze(path: Path) -> Analysis:
    return analyze(path, root=DATA, today=TODAY)


def _contract(analysis: Analysis) -> dict[str, Any]:
    """The §7 JSON object, without what legitimately differs between formats."""
    res = assembly_json(analysis, display_path="case")
    res["diagnostics"] = [(d["code"], d["severity"], d["message"]) for d in res["diagnostics"]]
    return res


def _model(conv: Conversation) -> dict[str, Any]:
    """The document model without source ranges (and without the source tree)."""
    fields = {
        f.name: getattr(conv, f.name)
        for f in dataclasses.fields(conv)
        if f.name
        not in (
            "format",
            "tree",
            "_views",
            "syntax",
            "starts",
            "length",
            "settings_ranges",
            "issues",
        )
    }
    return _strip_ranges(_plain(fields))


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _strip_ranges(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _strip_ranges(v)
            for k, v in value.items()
            if k != "range" and not k.endswith("_range") and k != "index"
        }
    if isinstance(value, list):
        return [_strip_ranges(v) for v in value]
    return value


def _render(analysis: Analysis) -> str:
    """The assembly as text: budget, layout, what was cut, compression, the messages sent."""
    a = assembly_json(analysis, display_path=analysis.path.name)
    b = a["budget"]
    lines = [
        f"encoding {a['encoding']}",
        "budget "
        + " ".join(f"{k}={b[k]}" for k in ("available_tokens", "tools", "history_budget", "used")),
        "fixed "
        + " ".join(f"{k}={b[k]}" for k in ("system", "custom_agent", "project_files"))
        + f" reminder={b['reminder']}",
        "layout:",
    ]
    lines.extend(
        f"  {e['id']:<18} {e['segment']:<16} {e['tokens']:>5}{'  cache' if e['cache'] else ''}"
        for e in a["layout"]
    )
    lines.append(f"dropped: {' '.join(a['dropped']) or '-'}")
    lines.append(f"orphans_dropped: {' '.join(a['orphans_dropped']) or '-'}")
    forgotten = [
        f"{f['file_id']}={f['filename']}~{f['approx_char_count']}" for f in a["forgotten_files"]
    ]
    lines.append(f"forgotten_files: {' '.join(forgotten) or '-'}")
    c = a["compression"]
    lines.append(
        f"compression: triggered={c['triggered']} threshold={c['threshold']} "
        f"history={c['history_tokens']} summarize=[{' '.join(c['summarize'])}] "
        f"keep=[{' '.join(c['keep'])}] progressive={c['progressive']}"
    )
    lines.append(f"cache_prefix_length: {a['cache_prefix_length']}")
    lines.append("messages:")
    lines.extend("  " + json.dumps(m, ensure_ascii=False) for m in a["messages"])
    # Codes only: the rules own their wording (the parity check compares the messages).
    lines.append("diagnostics: " + (" ".join(d["code"] for d in a["diagnostics"]) or "-"))
    return "\n".join(lines) + "\n"
