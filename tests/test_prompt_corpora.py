"""The real-prompt corpora of ``tests/bench/eval_instructions.py`` are complete: every
prompt has a manifest row naming its source at a commit under a permissive licence, and a
label list; nothing is listed that is not there."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"
CORPORA = [
    "prompts-real",
    "prompts-fresh",
    "prompts-heldout3",
    "prompts-heldout4",
    "prompts-heldout5",
    "prompts-heldout6",
    "prompts-heldout7",
    "prompts-heldout8",
    "prompts-heldout9",
    "prompts-heldout10",
    "prompts-heldout11",
    "prompts-heldout12",
    "prompts-heldout13",
    "prompts-heldout14",
    "prompts-heldout15",
    "prompts-heldout16",
    "prompts-heldout17",
    "prompts-heldout18",
    "prompts-heldout19",
    "prompts-heldout20",
    "prompts-heldout21",
    "prompts-heldout22",
    "prompts-heldout23",
    "prompts-heldout24",
    "prompts-heldout25",
    "prompts-heldout26",
    "prompts-heldout27",
    "prompts-heldout28",
    "prompts-heldout29",
    "prompts-heldout30",
    "prompts-heldout31",
    "prompts-heldout32",
]
# ISC is permissive (like MIT). CC-BY only as itself: share-alike (-SA), non-commercial (-NC)
# and no-derivatives (-ND) are not permissive.
PERMISSIVE = re.compile(r"^(?:MIT|Apache-2\.0|BSD|ISC|CC0|CC-BY-[\d.]+(?![-\w.]))")


@pytest.mark.parametrize("name", CORPORA)
def test_manifest_and_labels_cover_every_prompt(name: str) -> None:
    folder = DATA / name
    files = {p.name for p in folder.glob("*.prompt.md")}
    manifest = json.loads((folder / "MANIFEST.json").read_text(encoding="utf-8"))
    labels = json.loads((folder / "LABELS.json").read_text(encoding="utf-8"))
    assert {row["file"] for row in manifest} == files
    assert set(labels) == files
    for row in manifest:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", row["repo"]), row
        assert re.fullmatch(r"[0-9a-f]{40}", row["commit"]), row
        assert PERMISSIVE.match(row["licence"]), row
        assert row["path"] and row["extract"], row
        if "tools" in row:  # declared tools: the names, as the evaluation's setting takes them
            assert isinstance(row["tools"], list) and row["tools"], row
            assert all(isinstance(t, str) and t.strip() == t and t for t in row["tools"]), row
            assert row["tools_from"], row
    for file, found in labels.items():
        text = (folder / file).read_text(encoding="utf-8")
        for label in found:
            # A label names a sentence of its prompt and the section it is about.
            assert " ".join(label["sentence"].split()) in " ".join(text.split()), label
            assert label["about"], label


def test_the_corpora_are_large_and_varied() -> None:
    rows = [
        row
        for name in CORPORA
        for row in json.loads((DATA / name / "MANIFEST.json").read_text(encoding="utf-8"))
    ]
    assert len(rows) >= 40
    assert len({row["repo"].lower() for row in rows}) >= 10


def test_each_held_out_set_is_of_projects_no_earlier_corpus_has() -> None:
    seen: set[str] = set()
    for name in CORPORA:
        rows = json.loads((DATA / name / "MANIFEST.json").read_text(encoding="utf-8"))
        repos = {row["repo"].lower() for row in rows}
        if name.startswith("prompts-heldout"):
            assert not repos & seen, (name, repos & seen)
            assert len(repos) >= 5, name
        seen |= repos


# The held-out sets whose README promises that no line of more than 50 characters (after
# stripping) is shared with any other file under tests/data/, nor between two of its projects:
# every one from `prompts-heldout13` on (a new set is added to ``CORPORA`` only).
NO_SHARED_LINES = CORPORA[CORPORA.index("prompts-heldout13") :]


def _long_lines(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    return {line.strip() for line in text.splitlines() if len(line.strip()) > 50}


@pytest.mark.parametrize("name", NO_SHARED_LINES)
def test_held_out_set_shares_no_long_line(name: str) -> None:
    folder = DATA / name
    others: set[str] = set()
    for path in DATA.rglob("*"):
        if path.is_file() and folder not in path.parents:
            others |= _long_lines(path)
    project_of: dict[str, str] = {}
    for path in sorted(folder.glob("*.prompt.md")):
        project = path.name.split("--")[0]
        for line in _long_lines(path):
            assert line not in others, (path.name, line)
            assert project_of.setdefault(line, project) == project, (path.name, line)
