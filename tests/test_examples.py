"""The bundled examples assemble as their README says, through the library and the CLI.

``examples/`` is what a new user runs first (the top-level README's first command), so each
example is checked for the behaviour it is there to show: the summary and the injected
upload of the support agent, the same layout from its three formats, the cut, forgotten
file, orphan and compression of the overflow example, and the chosen branch of the tree.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from assembly.diagnostics import Severity
from assembly.host import Analysis
from server.workspace import analyze

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
TODAY = dt.date(2026, 7, 15)

SUPPORT_FORMATS = ("support-agent.conv.json", "support-agent.conv.yaml", "support-agent.conv.jsonl")
ASSEMBLABLE = (*SUPPORT_FORMATS, "branching.conv.yaml")
ALL_EXAMPLES = (*ASSEMBLABLE, "overflow.conv.yaml")

CSV_ID = "021501cf-458c-413b-92ac-a45bcb62481e"  # uploaded with m10 in the support agent
LOG_ID = "cb156e4e-19bf-44e6-b9eb-346cc9e4faaf"  # uploaded with m1, summarized away
OVERFLOW_UPLOAD_ID = "ed4f0ed6-c103-4070-955b-0e28d0c2fca1"

SEGMENT_ORDER = [
    "system",
    "history",
    "custom_agent",
    "project_files",
    "forgotten_files",
    "last_user",
    "this_turn",
    "reminder",
]
BUDGET_KEYS = {
    "max_input_tokens",
    "safety_margin",
    "available_tokens",
    "tools",
    "system",
    "custom_agent",
    "project_files",
    "reminder",
    "history_budget",
    "used",
}
TOP_KEYS = {
    "file",
    "settings",
    "encoding",
    "budget",
    "segments",
    "layout",
    "messages",
    "dropped",
    "orphans_dropped",
    "forgotten_files",
    "compression",
    "cache_prefix_length",
    "diagnostics",
}
COMPRESSION_KEYS = {"triggered", "threshold", "history_tokens", "summarize", "keep"}


def _analyze(name: str) -> Analysis:
    return analyze(EXAMPLES / name, today=TODAY)


def _errors(a: Analysis) -> list[str]:
    return [f"{d.code}: {d.message}" for d in a.diagnostics if d.severity is Severity.ERROR]


def _layout(a: Analysis) -> list[tuple[str, str, int, bool]]:
    return [(e.id, e.segment, e.tokens, e.cache) for e in a.assembly.layout]


def _ids(a: Analysis, segment: str | None = None) -> list[str]:
    return [e.id for e in a.assembly.layout if segment is None or e.segment == segment]


def _in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """``promptls ARGS`` run in this process (``server.cli.main.main``, the entry point the
    script calls), from the repository: what a subprocess of it prints and returns, without
    a Python start-up. The commands' true subprocess runs are the tests beside."""
    from server.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(list(args))
    finally:
        os.chdir(cwd)
    return subprocess.CompletedProcess(list(args), rc, out.getvalue(), err.getvalue())


def _run_cli(path: Path, *, in_process: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``promptls assemble PATH --format json`` in a subprocess (or in this process),
    from the repository."""
    args = ["assemble", str(path), "--format", "json", "--today", "2026-07-15"]
    if in_process:
        return _in_process(*args)
    cmd = [sys.executable, "-m", "server.cli", *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)


# ------------------------------------------------------------------------------ all examples


def test_every_example_is_covered() -> None:
    found = {p.name for p in EXAMPLES.glob("*.conv.*")}
    assert found == set(ALL_EXAMPLES)


@pytest.mark.parametrize("name", ASSEMBLABLE)
def test_example_assembles_without_errors(name: str) -> None:
    a = _analyze(name)
    assert a.assembly.ok
    assert _errors(a) == []
    assert a.assembly.layout
    assert not a.assembly.dropped
    assert a.assembly.budget.used <= a.assembly.budget.available_tokens - a.assembly.budget.tools


# ------------------------------------------------------------------------------ support agent


def test_support_agent_formats_assemble_identically() -> None:
    first, *others = (_analyze(name).assembly for name in SUPPORT_FORMATS)
    for other in others:
        assert [(e.id, e.segment, e.tokens, e.cache) for e in other.layout] == [
            (e.id, e.segment, e.tokens, e.cache) for e in first.layout
        ]
        assert other.provider_messages == first.provider_messages
        assert other.budget == first.budget
        assert other.forgotten_files == first.forgotten_files
        assert other.compression == first.compression


def test_support_agent_applies_the_summary() -> None:
    a = _analyze("support-agent.conv.json")
    assert a.assembly.summary_id == "m20"
    summarized = {f"m{i}" for i in range(1, 10)}
    assert summarized.isdisjoint(_ids(a))
    assert summarized.isdisjoint(a.assembly.dropped)
    history = _ids(a, "history")
    assert history[0] == "m20"  # the summary opens the history, as an assistant message
    assert a.assembly.layout[1].message.kind == "assistant"
    assert history[1:] == ["m10/files/0", *(f"m{i}" for i in range(10, 20))]
    # The log uploaded with the summarized m1 is listed as forgotten, size unknown.
    assert [(f.file_id, f.approx_char_count) for f in a.assembly.forgotten_files] == [(LOG_ID, 0)]
    assert _ids(a, "forgotten_files") == ["$forgotten_files"]


def test_support_agent_injects_the_upload_right_before_its_message() -> None:
    a = _analyze("support-agent.conv.json")
    ids = _ids(a)
    at = ids.index("m10/files/0")
    assert ids[at + 1] == "m10"
    entry = a.assembly.layout[at]
    assert entry.segment == "history"
    assert entry.message.file_id == CSV_ID
    assert CSV_ID in entry.message.text  # tabular: the model gets the id, not the rows


def test_support_agent_reads_the_upload_by_its_uuid() -> None:
    a = _analyze("support-agent.conv.json")
    calls = [c for e in a.assembly.layout for c in e.message.tool_calls if c.name == "read_file"]
    assert len(calls) == 2
    assert all(isinstance(c.arguments, dict) and c.arguments["file_id"] == CSV_ID for c in calls)


def test_support_agent_segments() -> None:
    a = _analyze("support-agent.conv.json")
    assert _ids(a, "system") == ["$system"]
    assert _ids(a, "custom_agent") == ["$custom_agent"]
    assert _ids(a, "project_files") == ["$project_files"]
    assert _ids(a, "last_user") == ["m21"]
    assert _ids(a, "this_turn") == ["m22", "m23", "m24"]
    assert _ids(a, "reminder") == ["$reminder"]
    parallel = a.assembly.layout[_ids(a).index("m22")].message
    assert [c.name for c in parallel.tool_calls] == ["read_file", "internal_search"]
    # The project file given by path was read from examples/docs/.
    documents = a.assembly.layout[_ids(a).index("$project_files")].message.text
    assert "Lumen Analytics Service Level Agreement" in documents
    assert not a.assembly.compression.triggered


def test_support_agent_system_prompt() -> None:
    a = _analyze("support-agent.conv.json")
    system = a.assembly.system_text or ""
    assert "Today is Wednesday July 15, 2026." in system
    assert "{{" not in system
    for tool in ("internal_search", "web_search", "open_url", "read_file"):
        assert f"## {tool}" in system
    assert "Pass the `file_id` UUID exactly as it was given to you" in system
    # run_python is not offered this turn: its guidance is left out.
    assert "## run_python" not in system
    assert "run_python" not in system
    assert "sandbox" not in system
    assert "# System Reminders" in system


# ------------------------------------------------------------------------------ overflow


def test_overflow_truncates_and_reports_it() -> None:
    a = _analyze("overflow.conv.yaml")
    asm = a.assembly
    assert asm.ok
    assert _errors(a) == []
    # The cut is contiguous: everything up to the long draft m10 is dropped.
    assert list(asm.dropped) == ["m1/files/0", *(f"m{i}" for i in range(1, 11))]
    assert list(asm.orphans_dropped) == ["m11"]
    assert "m11" not in _ids(a)
    assert [f.file_id for f in asm.forgotten_files] == [OVERFLOW_UPLOAD_ID]
    assert asm.forgotten_files[0].approx_char_count > 0
    assert _ids(a, "forgotten_files") == ["$forgotten_files"]
    assert _ids(a, "history") == [f"m{i}" for i in range(12, 19)]
    assert _ids(a, "last_user") == ["m19"]
    assert asm.compression.triggered
    assert asm.compression.summarize
    assert asm.budget.used <= asm.budget.available_tokens - asm.budget.tools


# ------------------------------------------------------------------------------ branching


def test_branching_assembles_only_the_chosen_branch() -> None:
    a = _analyze("branching.conv.yaml")
    assert a.settings.branch_tip == "u3"
    assert list(a.assembly.chain) == ["u1", "a1-regen", "t1", "a2", "u2", "a3", "u3"]
    assert _ids(a) == ["$system", "u1", "a1-regen", "t1", "a2", "u2", "a3", "u3"]
    other_branch = {"a1", "u2-old", "a2-old"}
    assert other_branch.isdisjoint(_ids(a))
    assert other_branch.isdisjoint(m.id for m in a.assembly.history)
    assert not a.assembly.dropped
    system = a.assembly.system_text or ""
    assert "## internal_search" in system
    assert "## read_file" not in system


# ------------------------------------------------------------------------------ the CLI


def _check_contract(obj: dict) -> None:
    """The keys and shapes of SPEC §7's ``assemble --format json`` object."""
    assert obj.keys() >= TOP_KEYS
    assert isinstance(obj["settings"], dict)
    assert isinstance(obj["encoding"], str)
    assert obj["budget"].keys() >= BUDGET_KEYS
    assert [s["name"] for s in obj["segments"]] == SEGMENT_ORDER
    for s in obj["segments"]:
        assert {"name", "tokens", "messages"} <= s.keys()
    for entry in obj["layout"]:
        assert {"id", "segment", "tokens", "cache"} <= entry.keys()
        assert entry["segment"] in SEGMENT_ORDER
    assert isinstance(obj["messages"], list)
    assert len(obj["layout"]) == len(obj["messages"])
    for key in ("dropped", "orphans_dropped", "forgotten_files", "diagnostics"):
        assert isinstance(obj[key], list)
    for f in obj["forgotten_files"]:
        assert {"file_id", "filename", "approx_char_count"} <= f.keys()
    assert obj["compression"].keys() >= COMPRESSION_KEYS
    assert isinstance(obj["cache_prefix_length"], int)
    for d in obj["diagnostics"]:
        assert {"file", "code", "severity", "message", "range", "related", "fix"} <= d.keys()


def test_cli_assembles_the_readme_example() -> None:
    proc = _run_cli(Path("examples/support-agent.conv.json"))
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    _check_contract(obj)
    assert obj["file"] == "examples/support-agent.conv.json"
    assert obj["diagnostics"] == []
    assert [e["id"] for e in obj["layout"]] == _ids(_analyze("support-agent.conv.json"))
    assert obj["messages"][0]["role"] == "system"
    assert "Wednesday July 15, 2026" in obj["messages"][0]["content"]
    assert obj["messages"][-1]["role"] == "user"
    assert obj["messages"][-1]["content"].startswith("<system-reminder>")
    assert obj["budget"]["used"] == sum(e["tokens"] for e in obj["layout"])


def test_cli_overflow_is_not_an_error() -> None:
    proc = _run_cli(Path("examples/overflow.conv.yaml"))
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    _check_contract(obj)
    assert obj["dropped"]
    assert obj["orphans_dropped"] == ["m11"]
    assert [f["file_id"] for f in obj["forgotten_files"]] == [OVERFLOW_UPLOAD_ID]
    assert obj["compression"]["triggered"] is True
    assert obj["messages"]
    assert not [d for d in obj["diagnostics"] if d["severity"] == "error"]


def test_cli_last_turn_over_budget_exits_1_and_still_prints(tmp_path: Path) -> None:
    doc = tmp_path / "too-small.conv.yaml"
    doc.write_text(
        "settings: {max_input_tokens: 24, encoding: cl100k_base}\n"
        "messages:\n"
        "  - {id: u1, role: user, content: Hi.}\n"
        "  - {id: a1, role: assistant, content: Hello! How can I help?}\n"
        "  - id: u2\n"
        "    role: user\n"
        "    content: >-\n"
        "      Please summarise the attached quarterly report, list every risk it names with\n"
        "      its owner and due date, and draft a reply to the board that covers each of\n"
        "      them in two sentences or fewer, in a friendly but precise tone.\n",
        encoding="utf-8",
    )
    proc = _run_cli(doc)
    assert proc.returncode == 1, proc.stderr
    obj = json.loads(proc.stdout)
    _check_contract(obj)
    assert obj["messages"] == []
    assert obj["layout"] == []
    codes = [(d["code"], d["severity"]) for d in obj["diagnostics"]]
    assert ("last-turn-over-budget", "error") in codes


@pytest.mark.parametrize("fmt", ["json", "sarif", "github", "text"])
def test_lint_of_the_examples_reports_only_what_the_overflow_example_shows(fmt: str) -> None:
    args = ("lint", "examples", "--format", fmt)
    if fmt == "json":  # the command itself once; the other formats in this process
        cmd = [sys.executable, "-m", "server.cli", *args]
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    else:
        proc = _in_process(*args)
    assert proc.returncode == 0, proc.stderr  # infos and a warning: below --fail-on error
    expected = [
        ("examples/overflow.conv.yaml", "history-truncated", 122),
        ("examples/overflow.conv.yaml", "compression-due", 122),
        ("examples/overflow.conv.yaml", "orphaned-tool-response", 317),
    ]
    if fmt == "json":
        found = [
            (d["file"], d["code"], d["range"]["start"]["line"]) for d in json.loads(proc.stdout)
        ]
    elif fmt == "sarif":
        results = json.loads(proc.stdout)["runs"][0]["results"]
        found = [
            (
                r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
                r["ruleId"],
                r["locations"][0]["physicalLocation"]["region"]["startLine"],
            )
            for r in results
        ]
    elif fmt == "github":
        rows = [r for r in proc.stdout.splitlines() if r.startswith("::")]
        found = [
            (
                re.search(r"file=([^,]+)", r).group(1),  # type: ignore[union-attr]
                re.search(r"title=([^:,]+)", r).group(1),  # type: ignore[union-attr]
                int(re.search(r",line=(\d+)", r).group(1)),  # type: ignore[union-attr]
            )
            for r in rows
        ]
    else:
        rows = re.findall(r"^(\S+):(\d+):\d+: \w+\[([a-z-]+)\]", proc.stdout, re.MULTILINE)
        found = [(file, code, int(line)) for file, line, code in rows]
    assert found == expected


def test_cli_summary_request_is_opt_in() -> None:
    plain = json.loads(_run_cli(Path("examples/overflow.conv.yaml"), in_process=True).stdout)
    assert "request" not in plain["compression"]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "server.cli",
            "assemble",
            "examples/overflow.conv.yaml",
            "--format",
            "json",
            "--today",
            "2026-07-15",
            "--summary-request",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    request = json.loads(proc.stdout)["compression"]["request"]
    assert request[0]["role"] == "system"
    cutoff = [m for m in request if m["content"].startswith("<context_cutoff>")]
    assert len(cutoff) == 1
    assert request[-1]["content"].startswith("Help summarize the conversation up to the cutoff")
    # Older messages come before the marker; an assistant that used tools is summarized as
    # the names of its tools only.
    before = request[1 : request.index(cutoff[0])]
    assert any(m["content"].startswith("[Used tools: ") for m in before)


@pytest.mark.parametrize("name", ALL_EXAMPLES)
def test_cli_json_contract_holds_for_every_example(name: str) -> None:
    proc = _run_cli(Path("examples") / name, in_process=True)
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    _check_contract(obj)
    assert obj["budget"]["used"] <= obj["budget"]["available_tokens"] - obj["budget"]["tools"]


def test_overflow_comment_names_the_window_it_pins() -> None:
    text = (EXAMPLES / "overflow.conv.yaml").read_text(encoding="utf-8")
    said = re.search(r"pinned to ([\d,]+) tokens", text)
    assert said is not None
    pinned = yaml.safe_load(text)["settings"]["max_input_tokens"]
    assert int(said.group(1).replace(",", "")) == pinned == 4096
