"""The documentation holds: its links land, its runnable commands run, its generated pages are
current, and the README stays a README.

- Every relative link in README.md, CHANGELOG.md, RULES.md and docs/*.md names a file of the
  repository, and its ``#anchor`` a heading of that file (GitHub's slugs).
- A fenced block opened with ```` ```sh runnable ```` is run with bash from the repository root
  (this venv's ``promptls`` first on PATH) and must exit 0; when the next block is a plain
  ```` ``` ```` block, it is that command's output: each of its lines other than ``...`` must
  appear in what the command printed, in that order.
- docs/settings.md is ``python -m server.settingsdoc`` (as RULES.md is for the rules).
- docs/README.md lists every page of docs/, and only those.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

from server.rulesdoc import github_slug
from server.settingsdoc import REGENERATE_COMMAND, render_settings_md

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
PAGES = sorted([REPO / "README.md", REPO / "CHANGELOG.md", REPO / "RULES.md", *DOCS.glob("*.md")])
README_MAX_BYTES = 15_000

_FENCE = re.compile(r"^(```+|~~~+)(.*)$")
_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _outside_code(text: str, *, inline: bool = True) -> str:
    """``text`` with fenced blocks (and inline code) blanked: links there are not links."""
    out, fence = [], None
    for line in text.split("\n"):
        m = _FENCE.match(line.strip())
        if fence is None and m:
            fence = m.group(1)
            out.append("")
            continue
        if fence is not None:
            if line.strip().startswith(fence) and not line.strip()[len(fence) :].strip():
                fence = None
            out.append("")
            continue
        out.append(re.sub(r"`[^`]*`", "``", line) if inline else line)
    return "\n".join(out)


def _anchors(path: Path) -> set[str]:
    text = _outside_code(path.read_text(encoding="utf-8"), inline=False)
    return {github_slug(h) for h in re.findall(r"^#{1,6} (.+?)\s*#*$", text, flags=re.M)}


def _links(path: Path) -> list[str]:
    return _LINK.findall(_outside_code(path.read_text(encoding="utf-8")))


def test_the_pages_exist() -> None:
    names = {p.relative_to(REPO).as_posix() for p in PAGES}
    for name in ("README.md", "docs/README.md", "docs/settings.md", "docs/formats.md"):
        assert name in names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_land(page: Path) -> None:
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: … are not checked
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / unquote(file_part)).resolve() if file_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
            continue
        if not dest.is_relative_to(REPO):
            broken.append(f"{target}: outside the repository")
            continue
        if anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(REPO)}")
    assert broken == [], f"{page.relative_to(REPO)}: {broken}"


def _runnable(page: Path) -> list[tuple[int, str, str | None]]:
    """(line, commands, expected output or None) of each ```sh runnable block."""
    lines = page.read_text(encoding="utf-8").split("\n")
    blocks: list[tuple[int, str, str, int]] = []  # (line, info, body, end line)
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i].strip())
        if m:
            start, fence, info = i, m.group(1), m.group(2).strip()
            i += 1
            body = []
            while i < len(lines) and lines[i].strip() != fence:
                body.append(lines[i])
                i += 1
            blocks.append((start + 1, info, "\n".join(body), i))
        i += 1
    found = []
    for k, (line, info, body, end) in enumerate(blocks):
        if info.split()[:2] != ["sh", "runnable"]:
            continue
        expected = None
        if k + 1 < len(blocks):
            nline, ninfo, nbody, _ = blocks[k + 1]
            between = lines[end + 1 : nline - 1]
            if ninfo == "" and all(not s.strip() for s in between):
                expected = nbody
        found.append((line, body, expected))
    return found


RUNNABLE = [(page, *block) for page in PAGES for block in _runnable(page)]


def test_there_are_runnable_commands() -> None:
    assert len(RUNNABLE) >= 2


@pytest.mark.parametrize(
    ("page", "line", "commands", "expected"),
    RUNNABLE,
    ids=[f"{p.relative_to(REPO).as_posix()}:{n}" for p, n, _, _ in RUNNABLE],
)
def test_runnable_commands_run(page: Path, line: int, commands: str, expected: str | None) -> None:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    env.pop("NO_COLOR", None)
    env["TIKTOKEN_CACHE_DIR"] = ""  # offline encodings only, as on a fresh machine
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", commands],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    where = f"{page.relative_to(REPO)}:{line}"
    assert proc.returncode == 0, f"{where}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    if expected is None:
        return
    got = [s.rstrip() for s in proc.stdout.split("\n")]
    at = 0
    for want in expected.split("\n"):
        if want.strip() in ("", "..."):
            continue
        try:
            at = got.index(want.rstrip(), at) + 1
        except ValueError:
            pytest.fail(
                f"{where}: the documented output line\n{want}\nis not printed:\n{proc.stdout}"
            )


def test_settings_md_is_current() -> None:
    current = (DOCS / "settings.md").read_text(encoding="utf-8")
    if current != render_settings_md():
        pytest.fail(f"docs/settings.md is out of date: run `{REGENERATE_COMMAND}`")


def test_settings_md_documents_every_setting() -> None:
    from assembly.settings import SETTING_NAMES

    text = (DOCS / "settings.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (\w+)$", text, flags=re.M)
    assert headings == ["Summary", *SETTING_NAMES]


def test_docs_index_lists_every_page() -> None:
    index = DOCS / "README.md"
    linked = {
        (DOCS / t.partition("#")[0]).resolve()
        for t in _links(index)
        if not re.match(r"^[a-z]+:", t) and t.partition("#")[0]
    }
    pages = {p.resolve() for p in DOCS.glob("*.md") if p.name != "README.md"}
    assert pages - linked == set(), "add to docs/README.md"


def test_readme_is_short() -> None:
    size = len((REPO / "README.md").read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size:,} bytes: move detail to docs/"
    longest = max(len(s) for s in (REPO / "README.md").read_text(encoding="utf-8").split("\n"))
    assert longest <= 400


def test_readme_starts_with_the_two_set_up_commands() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    first = re.search(r"```sh\n(.*?)```", text, flags=re.DOTALL)
    assert first is not None
    commands = first.group(1).strip().split("\n")
    assert len(commands) == 2
    assert commands[0].endswith("promptls assemble examples/support-agent.conv.json")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.rstrip().split("\n")[-1] == commands[1], ".ci/run must run the second command"
