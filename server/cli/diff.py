"""``promptls diff``: what a change does to the assembled context of every conversation.

The IO half of the diff. ``resolve_sides`` turns the command line into two sides: a git
revision (its tree written to a temporary folder by ``git archive``: never a checkout, the
work tree and index are not touched) or the work tree itself. ``collect`` finds the
conversations of both sides with ``server.cli.lint.discover``, analyzes them with
``server.workspace.analyze`` (the one pipeline: ``assemble`` and ``lint`` use it too) and
compares their §7 JSON objects with the pure ``assembly.diff.diff_assembled``. A
conversation is analyzed on the old side only when it, a file it reads (template, project
files) or a settings file above it is among the files git says changed; the others cannot
differ. ``render_*`` print the result as text, JSON, Markdown (a PR comment) or GitHub
workflow commands plus a job summary. A usage or git error raises ``DiffError`` (exit 2).
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assembly.diagnostics import Severity
from assembly.diff import diff_assembled, has_changes, positional_id
from assembly.host import PROMPT_SUFFIX
from assembly.text import plural
from server import files, jsonout
from server.cli.github import append_step_summary
from server.cli.lint.discover import discover as lint_discover
from server.cli.lint.model import EXIT_FINDINGS, EXIT_OK, LintOptions
from server.cli.lint.render_github import gh_data, gh_property
from server.config import CONFIG_FILES
from server.output import assembly_json
from server.terminal import visible
from server.workspace import analyze

DIFF_FORMATS = ("text", "json", "markdown", "github")
WORK_TREE = "work tree"
# A PR comment holds at most 65,536 characters; the Markdown report stops before that.
MAX_MARKDOWN_CHARS = 60_000
# Rows of one table in the Markdown and text reports before "… N more".
MAX_ROWS = 20
_GITHUB_COMMANDS = {"error": "error", "warning": "warning", "info": "notice"}


class DiffError(Exception):
    """A usage or git error; the command prints it and exits with code 2."""


@dataclass(frozen=True, slots=True)
class Side:
    """One side of the diff: a git revision (``rev``, ``commit``) or the work tree."""

    label: str
    commit: str | None  # None: the work tree (or a file given with --files)


@dataclass(slots=True)
class DiffResult:
    """The diffs of every conversation that changed, and what was compared."""

    old: Side
    new: Side
    files: list[dict[str, Any]] = field(default_factory=list)
    unchanged: int = 0
    # The conversations of the new side in the scope (changed or not), repository-relative.
    in_scope: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "old": {"label": self.old.label, "commit": self.old.commit},
            "new": {"label": self.new.label, "commit": self.new.commit},
            "changed": len(self.files),
            "unchanged": self.unchanged,
            "files": self.files,
        }


# --- Git --------------------------------------------------------------------------------


def git(args: Sequence[str], cwd: Path, *, check: bool = True) -> str:
    """Run git; its failure is a ``DiffError`` carrying git's own message."""
    try:
        proc = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, encoding="utf-8", check=False
        )
    except FileNotFoundError as exc:
        raise DiffError("git is not installed") from exc
    if check and proc.returncode != 0:
        msg = proc.stderr.strip().splitlines()
        raise DiffError(f"git {' '.join(args)}: {msg[-1] if msg else 'failed'}")
    return proc.stdout if proc.returncode == 0 else ""


def repo_root(cwd: Path) -> Path:
    out = git(["rev-parse", "--show-toplevel"], cwd, check=False).strip()
    if not out:
        raise DiffError("not inside a git repository (use --files A B to compare two files)")
    return Path(out).resolve()


def commit_of(rev: str, root: Path) -> str | None:
    """The commit a revision names, or None when it names none."""
    if rev.startswith("-"):
        return None
    out = git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], root, check=False)
    return out.strip() or None


def default_base(root: Path) -> tuple[str, str]:
    """The merge-base of HEAD with the default branch (origin/HEAD, else main, else master)."""
    head = git(["symbolic-ref", "--quiet", "refs/remotes/origin/HEAD"], root, check=False).strip()
    candidates = [head] if head else []
    candidates += ["origin/main", "origin/master", "main", "master"]
    for ref in candidates:
        if commit_of(ref, root) is None:
            continue
        base = git(["merge-base", "HEAD", ref], root, check=False).strip()
        if base:
            short = ref.removeprefix("refs/remotes/")
            return f"merge-base of HEAD and {short}", base
    raise DiffError(
        "no default branch to compare with (origin/HEAD, main or master); name a revision"
    )


@contextmanager
def materialize(commit: str, root: Path) -> Iterator[Path]:
    """The tree of ``commit`` in a temporary folder (``git archive``), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="promptls-diff-") as tmp:
        proc = subprocess.Popen(
            ["git", "archive", "--format=tar", commit], cwd=root, stdout=subprocess.PIPE
        )
        assert proc.stdout is not None
        try:
            with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                tar.extractall(tmp, filter="data")
        finally:
            proc.stdout.close()
            if proc.wait() != 0:
                raise DiffError(f"git archive {commit} failed")
        yield Path(tmp).resolve()


def changed_paths(old: str, new: str | None, root: Path) -> set[str]:
    """Repository-relative paths that differ between ``old`` and ``new`` (None: work tree)."""
    args = ["diff", "--name-only", "--no-renames", "-z", old]
    if new is not None:
        args.append(new)
    names = set(filter(None, git(args, root).split("\0")))
    if new is None:
        untracked = git(["ls-files", "--others", "--exclude-standard", "-z"], root)
        names.update(filter(None, untracked.split("\0")))
    return names


# --- Command ----------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    """Run ``promptls diff`` with parsed arguments; return the exit code."""
    today = args.today or dt.date.today()
    cwd = Path.cwd().resolve()
    if args.files:
        res = diff_files(Path(args.files[0]), Path(args.files[1]), cwd=cwd, today=today)
    else:
        res = diff_revisions(args.args, cwd=cwd, today=today)
    _emit(res, args.format, out=sys.stdout)
    return exit_code(res, fail_on=args.fail_on)


def exit_code(res: DiffResult, *, fail_on: str) -> int:
    """1 when a finding at or above ``fail_on`` appeared, else 0."""
    floor = Severity(fail_on).rank
    for f in res.files:
        if any(Severity(x["severity"]).rank >= floor for x in f["findings"]["appeared"]):
            return EXIT_FINDINGS
    return EXIT_OK


def diff_files(a: Path, b: Path, *, cwd: Path, today: dt.date) -> DiffResult:
    """Two conversation files compared directly (no git)."""
    for p in (a, b):
        try:
            files.check_regular(cwd / p, limit=None)  # the size is checked when it is read
        except files.FileProblem as problem:
            what = "no such file" if problem.reason == "no such file" else "cannot read"
            detail = "" if what == problem.reason else f": {problem.reason}"
            raise DiffError(f"{what}: {p}{detail}") from None
    old = _analyze(cwd / a, None, display=str(a), today=today)
    new = _analyze(cwd / b, None, display=str(b), today=today)
    res = DiffResult(Side(str(a), None), Side(str(b), None))
    d = diff_assembled(old, new, file=f"{a} → {b}")
    if has_changes(d):
        res.files.append(d)
    else:
        res.unchanged = 1
    return res


def diff_revisions(words: Sequence[str], *, cwd: Path, today: dt.date) -> DiffResult:
    """``[REV_A] [REV_B] [PATHS]``: leading words that name commits are revisions."""
    root = repo_root(cwd)
    revs: list[tuple[str, str]] = []
    paths: list[str] = []
    for i, w in enumerate(words):
        if w == "--":
            paths.extend(words[i + 1 :])
            break
        commit = commit_of(w, root) if not paths and len(revs) < 2 else None
        if commit is not None and not (cwd / w).exists():
            revs.append((w, commit))
        else:
            paths.append(w)
    if not revs:
        revs.append(default_base(root))
    old = Side(revs[0][0], revs[0][1])
    new = Side(revs[1][0], revs[1][1]) if len(revs) > 1 else Side(WORK_TREE, None)
    scope = []
    for p in paths:
        full = (cwd / p).resolve()
        if not full.is_relative_to(root):
            raise DiffError(f"path is outside the repository: {p}")
        rel = full.relative_to(root)
        if not full.exists() and not any(_exists_in(c, rel, root) for _, c in revs):
            raise DiffError(f"unknown revision or path: {p}")
        scope.append(rel.as_posix())
    assert old.commit is not None
    changed = changed_paths(old.commit, new.commit, root)
    with materialize(old.commit, root) as old_root:
        if new.commit is None:
            return _compare(old, new, old_root, root, changed, scope, today)
        with materialize(new.commit, root) as new_root:
            return _compare(old, new, old_root, new_root, changed, scope, today)


@dataclass(frozen=True, slots=True)
class TemplateUse:
    """Which conversations use a template, and what its changes since HEAD do to them."""

    template: str  # the template's path, relative to the repository (or the root searched)
    conversations: tuple[str, ...]  # the conversations that read it, same base
    # The change of the assembled totals over those conversations, work tree vs HEAD;
    # None when the template is in no git repository (or the repository has no commit).
    delta: int | None
    result: DiffResult | None  # the diff itself (None: no git)

    def lens_title(self) -> str:
        """``used by 3 conversations · +312 tokens vs HEAD``."""
        title = f"used by {plural(len(self.conversations), 'conversation')}"
        if self.delta is not None:
            title += f" · {_signed(self.delta)} tokens vs HEAD"
        return title

    def markdown(self) -> str:
        """The diff as Markdown (``promptls diff HEAD -- TEMPLATE --format markdown``)."""
        if self.result is None:
            names = "".join(f"\n- `{c}`" for c in self.conversations)
            return (
                f"`{self.template}` is {self.lens_title()} (not in a git repository: "
                f"nothing to compare with).\n{names}\n"
            )
        return render_markdown(self.result)


def template_use(template: Path, *, root: Path | None, today: dt.date) -> TemplateUse:
    """The conversations that read ``template`` and ``promptls diff HEAD -- TEMPLATE``.

    In a git repository with a commit, this is the diff of the work tree (files as saved)
    against HEAD limited to the template: the conversations it reads are the diff's scope.
    Outside git, the conversations under ``root`` (default: the template's folder) are
    analyzed to find the ones that read it, and there is no delta.
    """
    template = template.resolve()
    try:
        repo = repo_root(template.parent)
        head = commit_of("HEAD", repo)
    except DiffError:
        repo, head = None, None
    if repo is not None and head is not None and template.is_relative_to(repo):
        rel = template.relative_to(repo).as_posix()
        try:
            res = diff_revisions(["HEAD", "--", rel], cwd=repo, today=today)
        except DiffError:
            pass  # git failed half-way: fall back to the search without a delta
        else:
            delta = sum(f["tokens"]["delta"] for f in res.files)
            return TemplateUse(rel, tuple(sorted(res.in_scope)), delta, res)
    base = (root or template.parent).resolve()
    users = []
    for rel_conv, path in _conversations(base).items():
        # (Only the files it read are wanted: nothing is counted that decides nothing.)
        if template in analyze(path, root=base, today=today, findings_only=True).dependencies:
            users.append(rel_conv)
    inside = template.is_relative_to(base)
    shown = template.relative_to(base).as_posix() if inside else str(template)
    return TemplateUse(shown, tuple(sorted(users)), None, None)


def _exists_in(commit: str, rel: Path, root: Path) -> bool:
    """Whether ``rel`` names a file or folder in ``commit``."""
    proc = subprocess.run(
        ["git", "cat-file", "-e", f"{commit}:{rel.as_posix()}"], cwd=root, capture_output=True
    )
    return proc.returncode == 0


def _compare(
    old: Side,
    new: Side,
    old_root: Path,
    new_root: Path,
    changed: set[str],
    scope: list[str],
    today: dt.date,
) -> DiffResult:
    res = DiffResult(old, new)
    old_convs = _conversations(old_root)
    new_convs = _conversations(new_root)
    for rel in sorted(set(old_convs) | set(new_convs)):
        in_old, in_new = rel in old_convs, rel in new_convs
        new_obj = _analyze(new_root / rel, new_root, display=rel, today=today) if in_new else None
        deps = set(new_obj["_deps"]) if new_obj else set()
        if in_old and in_new and not _touched(rel, deps, changed):
            if _in_scope(rel, deps, scope):
                res.unchanged += 1
                res.in_scope.append(rel)
            continue
        old_obj = _analyze(old_root / rel, old_root, display=rel, today=today) if in_old else None
        if old_obj is not None:
            deps |= set(old_obj["_deps"])
        if not _in_scope(rel, deps, scope):
            continue
        if in_new:
            res.in_scope.append(rel)
        d = diff_assembled(old_obj, new_obj, file=rel)
        d["uses"] = sorted(deps)
        if has_changes(d):
            res.files.append(d)
        else:
            res.unchanged += 1
    return res


def _conversations(root: Path) -> dict[str, Path]:
    files = lint_discover([root], LintOptions(cwd=root, root=root))
    return {
        f.relative_to(root).as_posix(): f
        for f in files
        if not f.name.lower().endswith(PROMPT_SUFFIX) and f.is_relative_to(root)
    }


def _touched(rel: str, deps: set[str], changed: set[str]) -> bool:
    if rel in changed or deps & changed:
        return True
    folder = Path(rel).parent
    for c in changed:
        p = Path(c)
        if p.name in CONFIG_FILES and folder.is_relative_to(p.parent):
            return True
    return False


def _in_scope(rel: str, deps: set[str], scope: list[str]) -> bool:
    if not scope:
        return True
    return any(
        p == s or Path(p).is_relative_to(s) or s in (".", "") for p in (rel, *deps) for s in scope
    )


def _analyze(path: Path, root: Path | None, *, display: str, today: dt.date) -> dict[str, Any]:
    """The §7 object of one conversation, with paths relative to its side's root."""
    analysis = analyze(path, root=root, today=today)
    obj = assembly_json(analysis, display_path=display)
    base = root if root is not None else path.parent

    def rel(p: str) -> str:
        q = Path(p)
        if q.is_absolute() and q.is_relative_to(base):
            return q.relative_to(base).as_posix()
        return p

    for d in obj["diagnostics"]:
        d["file"] = rel(d["file"])
        for r in d["related"]:
            r["file"] = rel(r["file"])
    obj["_deps"] = [rel(str(p)) for p in analysis.dependencies]
    # Each history message's id and a digest of what it says, to align the histories of a
    # document without ids (``assembly.diff``); a document with ids is matched by them.
    history = analysis.assembly.history
    if all(positional_id(m.id) for m in history):
        obj["_history"] = [
            (m.id, _digest(m.kind, m.text, m.tool_calls, m.tool_call_id, m.file_id))
            for m in history
        ]
    return obj


def _digest(*parts: object) -> int:
    # Both sides are digested in this process, so the salted str hash compares them (and
    # hashlib would load OpenSSL into a server whose template lens runs a diff).
    return hash(repr(parts))


# --- Renderings -------------------------------------------------------------------------


def _emit(res: DiffResult, fmt: str, *, out: Any) -> None:
    if fmt == "json":
        out.write(jsonout.dumps(res.to_json()) + "\n")
    elif fmt == "markdown":
        out.write(render_markdown(res))
    elif fmt == "github":
        out.write(render_github(res))
        if not append_step_summary(render_markdown(res)):
            out.write(render_markdown(res))
    else:
        out.write(visible(render_text(res)))


def _n(x: int) -> str:
    return f"{x:,}"


def _signed(x: int) -> str:
    return f"{x:+,}" if x else "±0"


def headline(res: DiffResult) -> str:
    new = res.new.label + (f" ({res.new.commit[:7]})" if res.new.commit else "")
    old = res.old.label + (f" ({res.old.commit[:7]})" if res.old.commit else "")
    return (
        f"{old} → {new}: {plural(len(res.files), 'conversation')} changed, "
        f"{_n(res.unchanged)} unchanged"
    )


def cache_sentence(d: dict[str, Any]) -> str:
    """One sentence: what happens to the provider cache."""
    c = d["cache"]
    if d["status"] != "changed" and d["status"] != "unchanged":
        return f"cacheable prefix: {c['old_prefix']} → {c['new_prefix']} message(s)"
    first = c["first_difference"]
    head = f"cacheable prefix {c['old_prefix']} → {c['new_prefix']} message(s); "
    if c["tools_changed"]:
        return (
            head + "the tool definitions changed, so no byte of the old prefix is reused: "
            f"{_n(c['invalidated_tokens'])} cached tokens are billed again"
        )
    if first is None:
        return head + "every message is byte-identical"
    ids = [i for i in (first["old_id"], first["new_id"]) if i]
    label = " → ".join(dict.fromkeys(ids))
    where = f"message {first['message']}" + (f", `{label}`" if label else "")
    s = (
        head + f"{plural(c['identical_messages'], 'leading message')} byte-identical; "
        f"first difference at byte {_n(first['byte'])} ({where})"
    )
    if c["invalidated_tokens"]:
        s += f"; {_n(c['invalidated_tokens'])} cached tokens are billed again"
    elif c["old_prefix"]:
        s += "; the cached prefix is still reused"
    return s


def render_text(res: DiffResult) -> str:
    lines = [headline(res)]
    for d in res.files:
        t = d["tokens"]
        lines.append("")
        lines.append(
            f"{d['file']}  {d['status']}  tokens {_n(t['old'])} → {_n(t['new'])} "
            f"({_signed(t['delta'])})"
        )
        for key, label in (("available_tokens", "window"), ("tools_tokens", "tools")):
            tt = d[key]
            if tt["delta"] and d["status"] == "changed":
                lines.append(
                    f"  {label}: {_n(tt['old'])} → {_n(tt['new'])} ({_signed(tt['delta'])})"
                )
        for s in d["segments"]:
            lines.append(
                f"  segment {s['name']}: {_n(s['old'])} → {_n(s['new'])} ({_signed(s['delta'])})"
            )
        msgs = d["messages"]
        for m in msgs[:MAX_ROWS]:
            lines.append(
                f"  message {m['id']}{_was(m, '')} [{m['segment']}]: {_n(m['old'])} → "
                f"{_n(m['new'])} "
                f"({_signed(m['delta'])})" + _kept_note(m)
            )
        if len(msgs) > MAX_ROWS:
            lines.append(f"  … {len(msgs) - MAX_ROWS:,} more messages")
        mv = d["moved"]
        if mv["to_dropped"]:
            lines.append(f"  now dropped: {_ids(mv['to_dropped'])}")
        if mv["to_kept"]:
            lines.append(f"  now kept: {_ids(mv['to_kept'])}")
        ff = d["forgotten_files"]
        if ff["added"]:
            lines.append(f"  forgotten files added: {', '.join(ff['added'])}")
        if ff["removed"]:
            lines.append(f"  forgotten files removed: {', '.join(ff['removed'])}")
        lines.append(f"  cache: {cache_sentence(d)}")
        first = d["cache"]["first_difference"]
        if first is not None and d["status"] == "changed":
            lines.append(f"    old: {first['old']}")
            lines.append(f"    new: {first['new']}")
        comp = d["compression"]
        if comp["changed"]:
            lines.append(f"  compression: {_compression_text(comp)}")
        for f in d["findings"]["appeared"]:
            lines.append(f"  + {_finding_text(f)}")
        for f in d["findings"]["disappeared"]:
            lines.append(f"  - {_finding_text(f)}")
        for f in d["findings"]["changed"]:
            lines.append(f"  ~ {_finding_text(f)}")
            lines.append(f"      was: {f['old_message']}")
    return "\n".join(lines) + "\n"


def _was(m: dict[str, Any], quote: str) -> str:
    """`` (was 7)``: where a message of a document without ids was before the change."""
    return f" (was {quote}{m['old_id']}{quote})" if "old_id" in m else ""


def _kept_note(m: dict[str, Any]) -> str:
    if m.get("removed"):
        return "  (removed from the document)"
    return {"both": "", "new": "  (now in the context)", "old": "  (no longer in the context)"}[
        m["kept"]
    ]


def _ids(ids: list[str]) -> str:
    shown = ", ".join(ids[:MAX_ROWS])
    return shown + (f" … {len(ids) - MAX_ROWS:,} more" if len(ids) > MAX_ROWS else "")


def _compression_text(c: dict[str, Any]) -> str:
    def one(due: bool, n: int) -> str:
        return f"due, summarizes {n}" if due else "not due"

    return f"{one(c['old_due'], c['old_summarize'])} → {one(c['new_due'], c['new_summarize'])}"


def _finding_text(f: dict[str, Any]) -> str:
    return f"{f['severity']}[{f['code']}] {f['message']} ({f['file']}:{f['line']})"


def _md(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


def render_markdown(res: DiffResult) -> str:
    """A PR comment: a summary table, then one collapsed ``<details>`` per conversation."""
    head = [f"### promptls diff: {_md(headline(res))}", ""]
    if not res.files:
        return "\n".join([*head, "No conversation's assembled context changes."]) + "\n"
    head += [
        "| conversation | tokens | cache prefix | findings |",
        "|---|---:|---|---|",
    ]
    for d in res.files:
        t, c = d["tokens"], d["cache"]
        fa, fd = len(d["findings"]["appeared"]), len(d["findings"]["disappeared"])
        fc = len(d["findings"]["changed"])
        cache = f"{c['identical_messages']}/{c['old_prefix']} kept"
        if c["invalidated_tokens"]:
            cache += f", {_n(c['invalidated_tokens'])} re-billed"
        head.append(
            f"| `{_md(d['file'])}` ({d['status']}) | {_n(t['old'])} → {_n(t['new'])} "
            f"({_signed(t['delta'])}) | {cache} | +{fa} −{fd} ~{fc} |"
        )
    parts = ["\n".join(head)]
    size = len(parts[0])
    for i, d in enumerate(res.files):
        block = _markdown_file(d)
        if size + len(block) > MAX_MARKDOWN_CHARS:
            parts.append(
                f"*… {len(res.files) - i:,} more conversations: the comment would exceed "
                f"{MAX_MARKDOWN_CHARS:,} characters; run `promptls diff` for all of them.*"
            )
            break
        parts.append(block)
        size += len(block)
    return "\n\n".join(parts) + "\n"


def _markdown_file(d: dict[str, Any]) -> str:
    t = d["tokens"]
    lines = [
        "<details>",
        f"<summary><code>{_md(d['file'])}</code> — {d['status']}, "
        f"{_n(t['old'])} → {_n(t['new'])} tokens ({_signed(t['delta'])})</summary>",
        "",
    ]
    if d.get("uses"):
        lines += [f"Reads: {', '.join(f'`{u}`' for u in d['uses'])}", ""]
    rows = []
    for key, label in (("available_tokens", "window"), ("tools_tokens", "tools")):
        tt = d[key]
        if tt["delta"] and d["status"] == "changed":
            rows.append(f"| {label} | {_n(tt['old'])} | {_n(tt['new'])} | {_signed(tt['delta'])} |")
    rows += [
        f"| segment `{s['name']}` | {_n(s['old'])} | {_n(s['new'])} | {_signed(s['delta'])} |"
        for s in d["segments"]
    ]
    msgs = d["messages"]
    rows += [
        f"| message `{_md(m['id'])}`{_md(_was(m, '`'))}{_md(_kept_note(m)).replace('  (', ' (')} "
        f"| {_n(m['old'])} | {_n(m['new'])} "
        f"| {_signed(m['delta'])} |"
        for m in msgs[:MAX_ROWS]
    ]
    if len(msgs) > MAX_ROWS:
        rows.append(f"| … {len(msgs) - MAX_ROWS:,} more messages | | | |")
    if rows:
        lines += ["| | before | after | Δ tokens |", "|---|---:|---:|---:|", *rows, ""]
    mv, ff = d["moved"], d["forgotten_files"]
    for label, ids in (("Now dropped", mv["to_dropped"]), ("Now kept", mv["to_kept"])):
        if ids:
            lines.append(f"- **{label}:** {_md(_ids(ids))}")
    for label, names in (
        ("Forgotten files added", ff["added"]),
        ("Forgotten files removed", ff["removed"]),
    ):
        if names:
            lines.append(f"- **{label}:** {_md(', '.join(names))}")
    lines.append(f"- **Cache:** {_md(cache_sentence(d))}")
    first = d["cache"]["first_difference"]
    if first is not None and d["status"] == "changed":
        # A fence longer than any run of backticks in the excerpts, so none closes it.
        runs = re.findall(r"`+", first["old"] + first["new"])
        fence = "`" * max(3, 1 + max((len(r) for r in runs), default=0))
        lines += [
            "",
            f"  {fence}diff",
            f"  - {first['old']}",
            f"  + {first['new']}",
            f"  {fence}",
        ]
    if d["compression"]["changed"]:
        lines.append(f"- **Compression:** {_compression_text(d['compression'])}")
    appeared, gone = d["findings"]["appeared"], d["findings"]["disappeared"]
    changed = d["findings"]["changed"]
    if appeared or gone or changed:
        lines += ["", "| | finding | where |", "|---|---|---|"]
        lines += [
            f"| {sign} | {f['severity']} `{f['code']}`: {_md(f['message'])} "
            f"| `{_md(f['file'])}:{f['line']}` |"
            for sign, fs in (("➕ new", appeared), ("➖ gone", gone), ("✏️ now", changed))
            for f in fs[:MAX_ROWS]
        ]
    lines += ["", "</details>"]
    return "\n".join(lines)


def render_github(res: DiffResult) -> str:
    """Workflow commands for the findings that appeared (they annotate the PR's files)."""
    lines: list[str] = []
    for d in res.files:
        for f in d["findings"]["appeared"]:
            props = {"file": f["file"], "line": f["line"], "col": f["column"], "title": f["code"]}
            prop_text = ",".join(f"{k}={gh_property(str(v))}" for k, v in props.items())
            cmd = _GITHUB_COMMANDS[f["severity"]]
            lines.append(f"::{cmd} {prop_text}::{gh_data(f['message'] + ' (new in this change)')}")
    # A template's finding appears in every conversation that uses it: annotate it once.
    return "".join(line + "\n" for line in dict.fromkeys(lines))
