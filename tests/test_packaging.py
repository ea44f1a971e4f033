"""The distribution: ``python -m build`` gives a wheel and an sdist that hold what users need,
and the wheel installed into a fresh virtual environment works.

The build runs without isolation (``build`` and ``setuptools`` are in the test extra), so it
needs no network. The fresh environment gets the wheel with ``--no-deps`` and borrows the
dependencies (pygls, tiktoken, …) from this one through a ``.pth`` line: what is tested is the
wheel's own content and entry point, offline and in seconds. A ``.pth`` line does not run the
``.pth`` files of the folder it adds, so this checkout's editable install is not visible there
(the test checks that ``server`` is imported from the fresh environment).
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
VERSION = "0.1.0"
EXAMPLES = [
    "examples/README.md",
    "examples/support-agent.conv.json",
    "examples/support-agent.conv.jsonl",
    "examples/support-agent.conv.yaml",
    "examples/overflow.conv.yaml",
    "examples/branching.conv.yaml",
    "examples/prompts/support-agent.prompt.md",
    "examples/docs/sla-policy.md",
]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    yield out


def _wheel(dist: Path) -> Path:
    [wheel] = dist.glob("promptls-*.whl")
    return wheel


def test_the_wheel_holds_the_schema_the_rules_doc_and_the_examples(dist: Path) -> None:
    names = set(zipfile.ZipFile(_wheel(dist)).namelist())
    assert "assembly/data/conversation.schema.json" in names
    assert "server/cli/main.py" in names and "assembly/assemble.py" in names
    share = f"promptls-{VERSION}.data/data/share/promptls"
    for doc in ("RULES.md", "README.md", "CHANGELOG.md", "LICENSE", *EXAMPLES):
        assert f"{share}/{doc}" in names, doc
    assert not [n for n in names if n.startswith("tests/") or "__pycache__" in n]


def test_the_sdist_holds_the_sources_docs_and_examples(dist: Path) -> None:
    [sdist] = dist.glob("promptls-*.tar.gz")
    root = f"promptls-{VERSION}"
    with tarfile.open(sdist) as tar:
        names = {n.removeprefix(root + "/") for n in tar.getnames()}
    for name in ("pyproject.toml", "README.md", "RULES.md", "CHANGELOG.md", "LICENSE"):
        assert name in names, name
    assert "assembly/data/conversation.schema.json" in names
    assert {"docs/settings.md", "docs/formats.md", *EXAMPLES} <= names
    assert "tests/bench/gen_conversation.py" in names
    assert not [n for n in names if n.startswith("client-vscode")]


def test_the_wheel_installs_and_runs_in_a_fresh_venv(dist: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"  # no pip of its own: this environment's pip installs into it
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    py = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(py)]
    subprocess.run(
        [*pip, "install", "-q", "--no-deps", "--no-index", str(_wheel(dist))],
        check=True,
        timeout=120,
    )
    [fresh_site] = (venv / "lib").glob("python3*/site-packages")
    borrowed = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (fresh_site / "zz_borrowed_deps.pth").write_text("\n".join(borrowed) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["TIKTOKEN_CACHE_DIR"] = ""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )

    where = run(str(py), "-c", "import server; print(server.__file__)")
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout
    promptls = venv / "bin" / "promptls"
    version = run(str(promptls), "--version")
    assert version.returncode == 0 and version.stdout.strip() == f"promptls {VERSION}"
    schema = run(str(py), "-m", "server.schema", "--path")
    assert schema.returncode == 0, schema.stderr
    assert Path(schema.stdout.strip()).is_file()
    assert Path(schema.stdout.strip()).is_relative_to(venv)
    share = venv / "share" / "promptls"
    assert (share / "RULES.md").read_text(encoding="utf-8").startswith("# Rules")
    example = share / "examples" / "support-agent.conv.json"
    assembled = run(str(promptls), "assemble", str(example), "--format", "json")
    assert assembled.returncode == 0, assembled.stderr
    assert '"$reminder"' in assembled.stdout
    html = run(
        str(promptls),
        "assemble",
        str(share / "examples" / "overflow.conv.yaml"),
        "--format",
        "html",
    )
    assert html.returncode == 0 and "3,218 / 3,891 tokens" in html.stdout


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    from server.cli.main import main

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"promptls {version('promptls')}"
