"""``promptls diff`` on a throwaway git repository built by the test (tests/support/gitrepo.py).

The outputs of ``diff main change`` are golden files in every format (tests/data/diff/);
the other tests check the revision defaults, the path scoping, the exit codes, that the
work tree is never touched, and the pure diff's byte arithmetic on hand-made objects.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from assembly.diff import diff_assembled, message_bytes
from server.cli.main import main
from tests.support.gitrepo import build_review_repo, edit, git
from tests.support.golden import check_golden

DATA = Path(__file__).resolve().parents[1] / "data" / "diff"
TODAY = "2026-07-15"


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    repo = tmp_path_factory.mktemp("review") / "repo"
    base, change = build_review_repo(repo)
    return repo, base, change


@pytest.fixture
def repo(origin: tuple[Path, str, str], tmp_path: Path) -> Path:
    """A fresh copy of the repository (on branch ``change``) that a test may edit."""
    dest = tmp_path / "repo"
    shutil.copytree(origin[0], dest, symlinks=True)
    return dest


def run(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    monkeypatch.chdir(repo)
    code = main(["diff", "--today", TODAY, *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "github"])
def test_golden_outputs(
    origin: tuple[Path, str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    fmt: str,
) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    code, out, err = run(origin[0], monkeypatch, capsys, "main", "change", "--format", fmt)
    assert code == 0, err
    ext = {"text": "txt", "json": "json", "markdown": "md", "github": "github.txt"}[fmt]
    check_golden(out, DATA / f"main-change.{ext}")


def test_markdown_is_the_worked_example_in_the_docs(
    origin: tuple[Path, str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = run(origin[0], monkeypatch, capsys, "main", "change", "--format", "markdown")
    doc = (Path(__file__).resolve().parents[2] / "docs" / "diff.md").read_text(encoding="utf-8")
    assert out in doc


def test_json_contents(
    origin: tuple[Path, str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo, base, change = origin
    _, out, _ = run(repo, monkeypatch, capsys, "main", "change", "--format", "json")
    obj = json.loads(out)
    assert (obj["old"]["commit"], obj["new"]["commit"]) == (base, change)
    files = {f["file"]: f for f in obj["files"]}
    assert sorted(files) == ["branching.conv.yaml", "overflow.conv.yaml", "support-agent.conv.yaml"]
    support = files["support-agent.conv.yaml"]
    assert "prompts/support-agent.prompt.md" in support["uses"]
    assert support["segments"][0]["name"] == "system" and support["segments"][0]["delta"] > 0
    assert support["cache"]["identical_messages"] == 0
    assert [f["code"] for f in support["findings"]["appeared"]] == ["unknown-placeholder"]
    overflow = files["overflow.conv.yaml"]
    assert overflow["moved"]["to_dropped"] == ["m12"]
    assert overflow["cache"]["identical_messages"] == 1
    assert overflow["cache"]["first_difference"]["old_id"] == "m12"
    assert [f["code"] for f in overflow["findings"]["disappeared"]] == ["orphaned-tool-response"]


def test_github_summary_goes_to_the_step_summary_file(
    origin: tuple[Path, str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    _, out, _ = run(origin[0], monkeypatch, capsys, "main", "change", "--format", "github")
    _, md, _ = run(origin[0], monkeypatch, capsys, "main", "change", "--format", "markdown")
    assert out.startswith("::warning file=prompts/support-agent.prompt.md,line=106")
    assert "<details>" not in out
    assert summary.read_text(encoding="utf-8") == md


def test_a_step_summary_that_cannot_be_written_is_a_warning(
    origin: tuple[Path, str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "no-such-dir" / "s.md"))
    code, out, err = run(origin[0], monkeypatch, capsys, "main", "change", "--format", "github")
    assert code == 0
    assert out.startswith("::warning file=prompts/support-agent.prompt.md,line=106")
    assert "promptls: warning: cannot write the job summary" in err
    assert "Traceback" not in err


def test_exit_code_follows_fail_on(
    origin: tuple[Path, str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(origin[0], monkeypatch, capsys, "main", "change")[0] == 0
    assert run(origin[0], monkeypatch, capsys, "main", "change", "--fail-on", "warning")[0] == 1
    # Backwards, the placeholder warning disappears and the orphaned tool response (a
    # warning) comes back: still 1 at warning level, 0 at error level.
    code, out, _ = run(origin[0], monkeypatch, capsys, "change", "main", "--fail-on", "warning")
    assert code == 1
    assert "+ warning[orphaned-tool-response]" in out
    assert run(origin[0], monkeypatch, capsys, "change", "main")[0] == 0


def test_default_is_merge_base_against_the_work_tree_without_checkout(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    edit(repo / "branching.conv.yaml", "branch_tip: u3", "branch_tip: u3\n  max_input_tokens: 2000")
    status = git(repo, "status", "--porcelain")
    head = git(repo, "rev-parse", "HEAD")
    code, out, err = run(repo, monkeypatch, capsys, "--format", "json")
    assert code == 0, err
    obj = json.loads(out)
    assert obj["old"]["label"] == "merge-base of HEAD and main"
    assert obj["old"]["commit"] == git(repo, "rev-parse", "main")
    assert obj["new"] == {"label": "work tree", "commit": None}
    files = {f["file"]: f for f in obj["files"]}
    assert len(files) == 3
    # The uncommitted edit is part of the new side.
    assert files["branching.conv.yaml"]["available_tokens"]["new"] == 1900
    assert git(repo, "status", "--porcelain") == status
    assert git(repo, "rev-parse", "HEAD") == head


def test_a_template_path_selects_the_conversations_that_use_it(
    origin: tuple[Path, str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = run(
        origin[0],
        monkeypatch,
        capsys,
        "main",
        "change",
        "prompts/support-agent.prompt.md",
        "--format",
        "json",
    )
    files = [f["file"] for f in json.loads(out)["files"]]
    assert files == ["branching.conv.yaml", "support-agent.conv.yaml"]
    _, out, _ = run(origin[0], monkeypatch, capsys, "main", "change", "overflow.conv.yaml")
    assert "overflow.conv.yaml" in out and "support-agent" not in out


def test_unrelated_change_leaves_every_conversation_unchanged(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "NOTES.txt").write_text("nothing to do with prompts\n", encoding="utf-8")
    code, out, _ = run(repo, monkeypatch, capsys, "HEAD", "--format", "markdown")
    assert code == 0
    assert "0 conversations changed, 3 unchanged" in out
    assert "No conversation's assembled context changes." in out


def test_settings_file_change_reaches_the_conversations_below_it(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "promptls.toml").write_text(
        "prompt_cache_chat_history = true\nmax_input_tokens = 3000\n", encoding="utf-8"
    )
    _, out, err = run(repo, monkeypatch, capsys, "HEAD", "--format", "json")
    obj = json.loads(out)
    # The two others set max_input_tokens themselves, which wins over the settings file.
    assert obj["unchanged"] == 2, err
    [branching] = obj["files"]
    assert branching["file"] == "branching.conv.yaml"
    assert branching["available_tokens"] == {"old": 121600, "new": 2850, "delta": -118750}


def test_added_and_removed_conversations(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "branching.conv.yaml").rename(repo / "renamed.conv.yaml")
    _, out, _ = run(repo, monkeypatch, capsys, "HEAD", "--format", "json")
    status = {f["file"]: f["status"] for f in json.loads(out)["files"]}
    assert status == {"branching.conv.yaml": "removed", "renamed.conv.yaml": "added"}


def test_two_files(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copyfile(repo / "overflow.conv.yaml", repo / "copy.conv.yaml")
    edit(repo / "copy.conv.yaml", "max_input_tokens: 3300", "max_input_tokens: 4096")
    code, out, _ = run(repo, monkeypatch, capsys, "--files", "overflow.conv.yaml", "copy.conv.yaml")
    assert code == 0
    assert "overflow.conv.yaml → copy.conv.yaml" in out
    assert "message m12 [history]: 0 → 142 (+142)  (now in the context)" in out
    # The findings of the two files are compared as one document's, whatever their names:
    # the budget's findings changed their counts, the orphan is new.
    findings = [
        line.split("]")[0] for line in out.split("\n") if line[:4] in ("  + ", "  - ", "  ~ ")
    ]
    assert findings == [
        "  + warning[orphaned-tool-response",
        "  ~ info[history-truncated",
        "  ~ info[compression-due",
    ]


def test_a_document_without_ids_is_aligned_by_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real log (a bare array: ids are positions) with one message inserted, two deleted
    and one edited: only those four are reported, the edited one under its old position,
    instead of every message after the first change."""
    log = Path(__file__).resolve().parents[1] / "data" / "real-logs" / "openai"
    messages = json.loads((log / "tau-bench-gpt-4o-airline-006.conv.json").read_text("utf-8"))
    (tmp_path / "old.conv.json").write_text(json.dumps(messages), encoding="utf-8")
    changed = [*messages[:3], {"role": "user", "content": "And my baggage allowance?"}]
    changed += messages[3:5] + messages[7:]
    changed[9] = {**changed[9], "content": changed[9]["content"] + " Let me know."}
    assert messages[10]["content"] == changed[9]["content"].removesuffix(" Let me know.")
    (tmp_path / "new.conv.json").write_text(json.dumps(changed), encoding="utf-8")
    _, out, _ = run(tmp_path, monkeypatch, capsys, "--files", "old.conv.json", "new.conv.json")
    rows = [line for line in out.split("\n") if line.startswith("  message ")]
    assert rows == [
        "  message 3 [history]: 0 → 5 (+5)  (now in the context)",
        "  message 9 (was 10) [history]: 88 → 92 (+4)",
        "  message 5 [history]: 12 → 0 (-12)  (removed from the document)",
        "  message 6 [history]: 34 → 0 (-34)  (removed from the document)",
    ]
    _, out, _ = run(
        tmp_path,
        monkeypatch,
        capsys,
        "--files",
        "old.conv.json",
        "new.conv.json",
        "--format",
        "json",
    )
    (d,) = json.loads(out)["files"]
    assert [(m["id"], m.get("old_id")) for m in d["messages"]] == [
        ("3", None),
        ("9", "10"),
        ("5", None),
        ("6", None),
    ]


def test_two_files_with_the_same_findings_are_unchanged(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A finding's file was part of its identity, so with ``--files A B`` every finding of
    A was gone and every one of B new: a copy of a file with an error was "changed" and
    exited 1. A finding in the conversation itself is in its file on either side."""
    broken = '[{"role": "user", "content": "hi"}, {"role": "tool", "content": "x"}]\n'
    (repo / "a.conv.json").write_text(broken, encoding="utf-8")
    (repo / "b.conv.json").write_text("\n" + broken, encoding="utf-8")  # a line further down
    code, out, _ = run(repo, monkeypatch, capsys, "--files", "a.conv.json", "b.conv.json")
    assert (code, out) == (0, "a.conv.json → b.conv.json: 0 conversations changed, 1 unchanged\n")
    (repo / "b.conv.json").write_text(broken.replace("hi", "hello"), encoding="utf-8")
    code, out, _ = run(repo, monkeypatch, capsys, "--files", "a.conv.json", "b.conv.json")
    assert code == 0 and "+ " not in out and "- " not in out  # tokens changed, no finding


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such-rev"], "unknown revision or path: no-such-rev"),
        (["--files", "nope.conv.yaml", "overflow.conv.yaml"], "no such file: nope.conv.yaml"),
        (
            ["--files", "overflow.conv.yaml", "/dev/null"],
            "cannot read: /dev/null: a character device, not a regular file",
        ),
    ],
)
def test_usage_errors(
    origin: tuple[Path, str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    code, out, err = run(origin[0], monkeypatch, capsys, *args)
    assert (code, out) == (2, "")
    assert err == f"promptls: error: {message}\n"


def test_outside_a_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    code, _, err = run(tmp_path, monkeypatch, capsys)
    assert code == 2
    assert "not inside a git repository" in err


# --- The pure diff ----------------------------------------------------------------------


def _obj(messages: list[dict[str, str]], *, prefix: int, tools: int = 10) -> dict[str, object]:
    layout = [
        {"id": f"m{i}", "segment": "history", "tokens": 5, "cache": i < prefix}
        for i in range(len(messages))
    ]
    return {
        "budget": {"used": 5 * len(messages), "tools": tools, "available_tokens": 1000},
        "segments": [{"name": "history", "tokens": 5 * len(messages), "messages": []}],
        "layout": layout,
        "messages": messages,
        "dropped": [],
        "orphans_dropped": [],
        "forgotten_files": [],
        "compression": {"triggered": False, "summarize": [], "keep": []},
        "cache_prefix_length": prefix,
        "diagnostics": [],
    }


def test_first_differing_byte_is_exact() -> None:
    a = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "héllo wörld"}]
    b = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "héllo world"}]
    d = diff_assembled(_obj(a, prefix=2), _obj(b, prefix=2), file="x")
    first = d["cache"]["first_difference"]
    wire_a = b"[" + b",".join(message_bytes(m) for m in a) + b"]"
    wire_b = b"[" + b",".join(message_bytes(m) for m in b) + b"]"
    expected = next(i for i, (x, y) in enumerate(zip(wire_a, wire_b, strict=False)) if x != y)
    assert first["byte"] == expected
    assert (first["message"], d["cache"]["identical_messages"]) == (1, 1)
    assert first["old"].endswith("⟦ö"[:1] + 'örld"}⟧')
    # The first message and the tools are still cached; the second message's 5 are not.
    assert d["cache"]["invalidated_tokens"] == 5


def test_changed_tools_invalidate_the_whole_prefix() -> None:
    msgs = [{"role": "system", "content": "Be brief."}]
    d = diff_assembled(_obj(msgs, prefix=1, tools=10), _obj(msgs, prefix=1, tools=12), file="x")
    assert d["cache"]["tools_changed"] is True
    assert d["cache"]["invalidated_tokens"] == 15
    assert d["status"] == "changed"


def test_identical_objects_are_unchanged() -> None:
    msgs = [{"role": "system", "content": "Be brief."}]
    d = diff_assembled(_obj(msgs, prefix=1), _obj(msgs, prefix=1), file="x")
    assert d["status"] == "unchanged"
    assert d["cache"]["first_difference"] is None


def test_markdown_excerpt_fence_outlasts_backticks_in_the_prompt() -> None:
    from server.cli.diff import DiffResult, Side, render_markdown

    a = [{"role": "system", "content": "Use ```python fences."}]
    b = [{"role": "system", "content": "Use ```` fences."}]
    d = diff_assembled(_obj(a, prefix=1), _obj(b, prefix=1), file="x.conv.yaml")
    res = DiffResult(Side("a", "0" * 40), Side("b", "1" * 40), files=[d])
    md = render_markdown(res)
    # The longest run of backticks in the excerpts is 3 (the marker splits the other).
    assert "  ````diff\n" in md and "\n  ````\n" in md


def test_aligned_ids_reach_the_moved_messages_and_the_compression_plan() -> None:
    """Deleting message 1 of a document without ids: the old 2 and 3 are the new 1 and 2,
    so the same plan summarizing them has not changed, and the old 3, kept, is now dropped."""
    msgs = [{"role": "user", "content": t} for t in ("a", "b", "c", "d")]

    def obj(ids: list[str], texts: list[str], dropped: list[str]) -> dict[str, Any]:
        o = _obj([msgs[0]] * len(ids), prefix=0)
        o["layout"] = [dict(e, id=i) for e, i in zip(o["layout"], ids, strict=True)]
        o["layout"] = [e for e in o["layout"] if e["id"] not in dropped]
        o["messages"] = o["messages"][: len(o["layout"])]
        o["dropped"] = dropped
        o["compression"] = {"triggered": True, "summarize": ids[1:3], "keep": []}
        o["_history"] = list(zip(ids, texts, strict=True))
        return o

    old = obj(["0", "1", "2", "3"], ["a", "b", "c", "d"], [])
    new = obj(["0", "1", "2"], ["a", "c", "d"], ["1"])
    new["compression"]["summarize"] = ["1", "2"]
    old["compression"]["summarize"] = ["2", "3"]
    d = diff_assembled(old, new, file="x")
    assert d["compression"]["changed"] is False
    assert d["moved"] == {"to_dropped": ["1"], "to_kept": []}
    assert [(m["id"], m.get("old_id"), m.get("removed")) for m in d["messages"]] == [
        ("1", None, True),
        ("1", "2", None),
    ]
    # Without the histories (a saved output), messages are matched by id as before.
    del old["_history"], new["_history"]
    assert diff_assembled(old, new, file="x")["compression"]["changed"] is True


def test_alignment_is_bounded_on_repeated_messages() -> None:
    """difflib is quadratic on repeated messages: past MAX_ALIGNED equal pairs the middle is
    matched by position instead, so 300 × 150 equal pairs cost no seconds."""
    from assembly.diff import MAX_ALIGNED, _aligner

    def hist(texts: list[str]) -> dict[str, Any]:
        return {"_history": [(str(i), t) for i, t in enumerate(texts)]}

    old = hist(["x"] * 300 + ["end"])
    new = hist(["x" if i % 2 else "y" for i in range(300)] + ["end, edited"])
    assert MAX_ALIGNED < 300 * 150
    key = _aligner(old, new)
    assert [key(i) for i in ("0", "150", "300")] == ["0", "150", "300"]
    # A small middle is aligned: the old 2 and 3 are the new 1 and 2.
    key = _aligner(hist(["a", "b", "c", "d"]), hist(["a", "c", "d"]))
    assert [key(i) for i in ("0", "1", "2", "3")] == ["0", "\0" + "1", "1", "2"]
