"""What the command line loads and says about encodings: startup, approximations, no note.

Each command runs in a fresh interpreter (as a user runs it), which then reports the
modules it imported: ``promptls --version`` and ``promptls rule CODE`` import no
tokenizer at all; ``assemble`` loads only the encoding the document needs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER_MODULES = ("tiktoken", "tiktoken_ext", "bpe_openai", "server.tokenizers")

# Runs the CLI in-process and prints, on stderr's last line, the modules it imported.
PROBE = """
import json, sys
from server.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
sys.stdout.flush()
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
sys.exit(code)
"""


def _run(*args: str, cwd: Path = ROOT) -> tuple[int, str, str, set[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TIKTOKEN_CACHE_DIR": ""},
        timeout=120,
        check=False,
    )
    *err, modules = proc.stderr.rstrip("\n").split("\n")
    return proc.returncode, proc.stdout, "\n".join(err), set(json.loads(modules))


def _tokenizer_modules(modules: set[str]) -> list[str]:
    return sorted(
        m for m in modules if m.split(".")[0] in TOKENIZER_MODULES or m in TOKENIZER_MODULES
    )


def test_version_loads_no_tokenizer() -> None:
    code, out, _, modules = _run("--version")
    assert code == 0
    assert out.startswith("promptls ") and out.split()[1][0].isdigit()
    assert _tokenizer_modules(modules) == []
    assert "assembly.assemble" not in modules
    # The version is the package's own constant: no package-metadata lookup (``email``…).
    assert not {"importlib.metadata", "email"} & modules
    # Building the parser asks the terminal's width only to lay out help: no ``shutil``
    # (which imports ``bz2`` and ``lzma``).
    assert not {"shutil", "bz2", "lzma"} & modules


def test_assemble_imports_no_archive_module_and_help_still_fits_the_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = tmp_path / "c.conv.json"
    doc.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    code, out, _, modules = _run("assemble", str(doc), "--format", "json", cwd=tmp_path)
    assert code == 0 and json.loads(out)["messages"]
    assert not {"shutil", "bz2", "lzma"} & modules
    # Nor what only an unknown placeholder's suggestion needs.
    assert "difflib" not in modules
    helps = {}
    for columns in (50, 200):
        monkeypatch.setenv("COLUMNS", str(columns))
        code, out, _, _ = _run("assemble", "--help", cwd=tmp_path)
        assert code == 0 and out.startswith("usage: promptls assemble")
        helps[columns] = out.splitlines()
    # Laid out for the terminal's width (not the one told while the parser was built).
    assert len(helps[50]) > len(helps[200])
    assert max(map(len, helps[200])) > 80 > max(map(len, helps[50]))


def test_rule_docs_load_no_tokenizer_and_no_settings_model() -> None:
    code, out, _, modules = _run("rule", "budget-overrun")
    assert code == 0 and "budget-overrun" in out
    assert _tokenizer_modules(modules) == []
    # The rule catalogue reads no settings: pydantic and the settings model (80 ms of
    # start-up) are not imported.
    assert "pydantic" not in modules and "assembly.settings_model" not in modules
    # Nor what only some documents need: OpenSSL (a recovered call's id), html entities.
    assert not {"hashlib", "html"} & modules
    code, out, _, modules = _run("rules")
    assert code == 0 and "budget-overrun" in out
    assert _tokenizer_modules(modules) == []
    assert "pydantic" not in modules and "assembly.settings_model" not in modules


@pytest.mark.parametrize(
    "args",
    [
        ["--tcp", "0.0.0.0:2087"],
        ["--ws", "[::]:2087"],
        ["--tcp", "127.0.0.1:2087", "--allow-origin", "http://x"],
    ],
)
def test_serve_refuses_before_importing_the_server(args: list[str]) -> None:
    code, out, err, modules = _run("serve", *args)
    assert (code, out) == (2, "")
    assert err.startswith("promptls: error: ") and "Traceback" not in err
    heavy = {"pygls", "lsprotocol", "server.lsp.handlers", "server.lsp.app", "assembly.host"}
    assert not heavy & modules
    assert _tokenizer_modules(modules) == [] and "pydantic" not in modules


def test_lint_imports_only_what_the_folder_needs(tmp_path: Path) -> None:
    # No .gitignore, no settings file, JSON output: no pattern matcher, no TOML parser,
    # no other renderer.
    (tmp_path / "c.conv.json").write_text(json.dumps({"messages": []}))
    code, out, _, modules = _run("lint", "--format", "json", "--jobs", "1", ".", cwd=tmp_path)
    assert (code, json.loads(out)) == (0, [])
    assert not {"pathspec", "tomllib", "importlib.metadata"} & modules
    # One worker: no process pool (``multiprocessing`` imports socket, pickle, logging…).
    assert not {"multiprocessing", "concurrent.futures"} & modules
    # Nor what only a mistyped rule code's suggestion needs.
    assert "difflib" not in modules
    assert "server.cli.lint.render_json" in modules
    assert not {"server.cli.lint.render_sarif", "server.cli.lint.render_text"} & modules
    # A .gitignore and a settings file load what reads them, and are obeyed.
    (tmp_path / ".gitignore").write_text("ignored/\n")
    (tmp_path / "ignored").mkdir()
    (tmp_path / "ignored" / "x.conv.json").write_text("{")
    (tmp_path / "promptls.toml").write_text("max_input_tokens = 0\n")
    code, out, _, modules = _run("lint", "--format", "sarif", "--jobs", "1", ".", cwd=tmp_path)
    assert {"pathspec", "tomllib"} <= modules
    # SARIF's tool version is the package's constant, looked up in no package metadata.
    assert "importlib.metadata" not in modules
    (run,) = json.loads(out)["runs"]
    from importlib.metadata import version

    assert run["tool"]["driver"]["version"] == version("promptls")
    assert {r["ruleId"] for r in run["results"]} == {"invalid-setting"}


def test_lint_of_a_few_files_loads_its_encoding_in_a_child_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pre-commit hook's ``lint`` of the files it names: the child forked before the engine
    # is imported loads the encoding and counts for this process, which loads no backend;
    # the output is the one of counting in place. The prompt's budget rule needs counts.
    from server.cli import main as cli

    names = ["support-agent.conv.json", "overflow.conv.yaml", "prompts/support-agent.prompt.md"]
    for name in names:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text((ROOT / "examples" / name).read_text(encoding="utf-8"))
    args = ("lint", "--format", "json", "--fail-on=info", names[0], names[2])
    code, out, err, modules = _run(*args, cwd=tmp_path)
    assert code in (0, 1), err
    assert _tokenizer_modules(modules) == ["server.tokenizers"]  # the module, no backend
    # overflow.conv.yaml asks for cl100k_base: that one is loaded here, the child's is unused.
    every = ("lint", "--format", "json", "--fail-on=info", *names)
    code_every, out_every, err, modules = _run(*every, cwd=tmp_path)
    assert "bpe_openai._bindings" in modules, err
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "MAX_EARLY_LINT_FILES", 0)  # no child: counted here
    for argv, was_code, was_out in ((args, code, out), (every, code_every, out_every)):
        capsys.readouterr()
        assert cli.main(list(argv)) == was_code
        assert capsys.readouterr().out == was_out
    # A folder of a few documents (``.`` by default) is served by the child too, with the
    # output of counting in place.
    few = tmp_path / "few"
    for name in (names[0], names[2]):
        (few / name).parent.mkdir(parents=True, exist_ok=True)
        (few / name).write_text((tmp_path / name).read_text(encoding="utf-8"))
    for folder in (("few",), ()):
        cwd = tmp_path if folder else few
        code_dir, out_dir, err, modules = _run("lint", "--format", "json", *folder, cwd=cwd)
        assert _tokenizer_modules(modules) == ["server.tokenizers"], err
        monkeypatch.chdir(cwd)
        capsys.readouterr()
        assert cli.main(["lint", "--format", "json", *folder]) == code_dir
        assert capsys.readouterr().out == out_dir
    monkeypatch.chdir(tmp_path)
    # More documents than that in the folder (here, beside the other files): loaded here.
    for k in range(cli.MAX_EARLY_LINT_FILES):
        (tmp_path / "more" / f"m{k}.conv.json").parent.mkdir(exist_ok=True)
        (tmp_path / "more" / f"m{k}.conv.json").write_text('{"messages": []}')
    code, _, err, modules = _run("lint", ".", cwd=tmp_path)
    assert "bpe_openai._bindings" in modules, err
    # Nor is a child forked for more files than that, worker processes asked for (they
    # would share the child's pipes), watching, help, or an option lint does not have.
    assert _min_parallel_files() > cli.MAX_EARLY_LINT_FILES
    monkeypatch.setattr(cli, "MAX_EARLY_LINT_FILES", 2)
    for argv in (
        [".", names[0]],
        [*names],
        ["--jobs", "1", names[0]],
        ["-j1", names[0]],
        ["--jo=2", names[0]],
        ["--wat", names[0]],
        ["-h"],
        ["--frobnicate", names[0]],
        [],
    ):
        cli._serve_early(argv)
        assert cli._SERVING == [], argv
    from server import tokenizers

    monkeypatch.setattr(tokenizers, "_LOADED", {})  # as in a fresh process (``main`` loaded it)
    cli._serve_early(["--format", "json", "--select=budget-overrun", "--", names[0]])
    (child,) = cli._SERVING
    child.close()
    cli._SERVING.clear()


def _min_parallel_files() -> int:
    from server.cli.lint.run import MIN_PARALLEL_FILES

    return MIN_PARALLEL_FILES


def test_assemble_imports_the_settings_model_it_validates_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No verdict kept from an earlier run (server/settingscache.py): the value is checked.
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "pyc"))
    doc = tmp_path / "c.conv.json"
    doc.write_text(json.dumps({"settings": {"max_input_tokens": 0}, "messages": []}))
    code, out, _, modules = _run("assemble", str(doc), "--format", "json", cwd=tmp_path)
    assert code == 0  # the default window is used, and the value reported
    (found,) = [d for d in json.loads(out)["diagnostics"] if d["code"] == "invalid-setting"]
    assert "input should be greater than 0 (got 0)" in found["message"]
    assert {"pydantic", "assembly.settings_model"} <= modules
    # Building the settings model looks for no pydantic plugin (the plugin loader reads
    # every installed package's metadata).
    assert "importlib.metadata" not in modules and "pydantic.plugin._loader" not in modules


def test_other_pydantic_models_still_get_the_plugin_loader() -> None:
    # The settings model is built without plugin discovery; a model built after it, in
    # the same process, goes through pydantic's own loader as usual.
    probe = (
        "import sys, assembly.settings_model as sm\n"
        "assert 'pydantic.plugin._loader' not in sys.modules\n"
        "assert sm.SettingsModel.model_validate({'max_input_tokens': 10}).max_input_tokens == 10\n"
        "from pydantic import BaseModel\n"
        "class Other(BaseModel):\n"
        "    x: int = 1\n"
        "loader = sys.modules['pydantic.plugin._loader']\n"
        "assert hasattr(loader, 'entry_points'), loader\n"
        "print(Other(x=2).x)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    assert (proc.returncode, proc.stdout) == (0, "2\n"), proc.stderr


def test_assemble_counts_gpt4o_with_o200k_base_without_a_note(tmp_path: Path) -> None:
    doc = tmp_path / "c.conv.json"
    doc.write_text(
        json.dumps(
            {"settings": {"model": "gpt-4o"}, "messages": [{"role": "user", "content": "你好"}]}
        )
    )
    code, out, err, modules = _run(
        "assemble", str(doc), "--format", "json", "--today", "2026-01-01"
    )
    assert code == 0, err
    obj = json.loads(out)
    assert (obj["encoding"], obj["encoding_requested"], obj["encoding_approximate"]) == (
        "o200k_base",
        "o200k_base",
        False,
    )
    assert "note:" not in err
    # The encoding is loaded by the counting child forked before the engine was imported
    # (``precount.start_early``): this process loads no backend.
    assert _tokenizer_modules(modules) == ["server.tokenizers"]


@pytest.mark.parametrize(
    ("model", "encoding"), [("claude-sonnet-4-5", "cl100k_base"), ("gemini-2.5-pro", "o200k_base")]
)
def test_assemble_says_when_counts_approximate_another_providers_model(
    tmp_path: Path,
    model: str,
    encoding: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    doc = tmp_path / "c.conv.json"
    doc.write_text(
        json.dumps({"settings": {"model": model}, "messages": [{"role": "user", "content": "hi"}]})
    )
    code, out, err, _ = _run("assemble", str(doc), "--format", "json", "--today", "2026-01-01")
    assert code == 0, err
    obj = json.loads(out)
    assert (obj["encoding"], obj["encoding_approximate"]) == (encoding, True)
    # The text format's head, in-process (the same entry point; the run above is the command's
    # fresh interpreter).
    from server.cli.main import main

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    capsys.readouterr()
    code = main(["assemble", str(doc), "--today", "2026-01-01"])
    out, err = capsys.readouterr()
    assert code == 0, err
    head = out.splitlines()[0]
    assert f"·  {encoding}  ·  approximate counts: {model} uses " in head
    assert f"counts with {encoding} approximate it" in head


def test_hover_head_says_counts_are_approximate(tmp_path: Path) -> None:
    import datetime as dt

    from assembly.ide.hover import head_markdown
    from server.workspace import analyze

    for model, approximate in (("llama-3.3-70b", True), ("gpt-4.1", False)):
        doc = tmp_path / "c.conv.yaml"
        doc.write_text(f"settings: {{model: {model}}}\nmessages: [{{role: user, content: hi}}]\n")
        head = head_markdown(analyze(doc, root=tmp_path, today=dt.date(2026, 1, 1)))
        first, last = head.splitlines()[0], head.splitlines()[-1]
        assert ("≈" in first) is approximate
        assert ("**Approximate counts**" in last) is approximate
        if approximate:
            assert last == (
                "Encoding: `cl100k_base`. **Approximate counts**: llama-3.3-70b uses Meta's own "
                "tokenizer; counts with cl100k_base approximate it."
            )


def test_a_million_spaces_before_a_word_are_counted_not_a_traceback(tmp_path: Path) -> None:
    # tiktoken's regex engine panics on this text (a Rust panic, not an Exception), which
    # took `assemble` down; the counting backend counts it. The split pattern cuts it into
    # the run of spaces and " x", which tiktoken counts one by one (test_token_parity.py).
    from server.tokenizers import reference_encoding

    ref = reference_encoding("cl100k_base")[0]
    doc = tmp_path / "c.conv.json"
    content = " " * 1_100_000 + "x"
    doc.write_text(
        json.dumps(
            {
                # gpt-4's own window is 8,192 tokens: one wide enough for the message
                "settings": {"model": "gpt-4", "max_input_tokens": 2_000_000},
                "messages": [{"role": "user", "content": content}],
            }
        )
    )
    code, out, err, _ = _run("assemble", str(doc), "--format", "json", "--today", "2026-01-01")
    assert code == 0, err
    assert "Traceback" not in err
    obj = json.loads(out)
    expected = len(ref.encode_ordinary(" " * 1_099_999)) + len(ref.encode_ordinary(" x"))
    assert [e["tokens"] for e in obj["layout"] if e["id"] == "0"] == [expected]


def test_a_large_documents_counts_come_from_the_child_and_are_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A generated conversation (files, tool calls) above ``precount.MIN_EARLY_CHARS``: the
    # counting child also counts the texts the pipeline makes, and this process loads no
    # encoding at all; the output is the one of counting everything in place.
    from server import precount
    from server.cli.main import main

    doc = tmp_path / "big.conv.json"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "tests" / "bench" / "gen_conversation.py"),
            "--messages",
            "300",
            "--target-bytes",
            str(2 * precount.MIN_EARLY_CHARS),
            "--out",
            str(doc),
        ],
        check=True,
        timeout=120,
    )
    args = ("assemble", str(doc), "--format", "json", "--today", "2026-01-01")
    code, out, err, modules = _run(*args, cwd=tmp_path)
    assert code in (0, 1), err
    assert _tokenizer_modules(modules) == ["server.tokenizers"]  # the module, no backend
    assert "pickle" not in modules  # the counts come as plain values (marshal)
    monkeypatch.setattr(precount, "MIN_EARLY_CHARS", 10**12)  # no child: counted here
    capsys.readouterr()
    assert main(list(args)) == code
    assert capsys.readouterr().out == out
    obj = json.loads(out)
    assert obj["encoding"] == "o200k_base"
    assert sum(1 for m in obj["messages"] if m.get("tool_calls")) > 10


@pytest.mark.parametrize(
    "example",
    ["support-agent.conv.json", "support-agent.conv.yaml", "overflow.conv.yaml"],
)
def test_a_small_documents_encoding_is_loaded_by_the_child_only(
    example: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Below ``precount.MIN_SHAPED_CHARS`` too, the child loads the encoding the document
    # asks for (overflow.conv.yaml: ``encoding: cl100k_base``, read before the fork without
    # PyYAML) and counts for this process, which loads no backend; the output is the one of
    # counting in place.
    from server import precount
    from server.cli.main import main

    doc = tmp_path / example
    doc.write_text((ROOT / "examples" / example).read_text(encoding="utf-8"), encoding="utf-8")
    assert len(doc.read_text(encoding="utf-8")) < precount.MIN_SHAPED_CHARS
    args = ("assemble", str(doc), "--format", "json", "--today", "2026-01-01")
    code, out, err, modules = _run(*args, cwd=tmp_path)
    assert code == 0, err
    assert _tokenizer_modules(modules) == ["server.tokenizers"]  # the module, no backend
    monkeypatch.setattr(precount, "MIN_EARLY_CHARS", 10**12)  # no child: counted here
    capsys.readouterr()
    assert main(list(args)) == code
    assert capsys.readouterr().out == out


def test_the_program_ends_without_teardown_and_says_everything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # ``promptls`` (``run``) ends a one-shot command's process without the interpreter's
    # teardown: its output, notes and exit code are still complete, as ``main``'s.
    from server.cli.main import main

    doc = tmp_path / "c.conv.json"
    doc.write_text(
        json.dumps(
            {
                "settings": {"encoding": "p50k_base", "max_input_tokens": 0},
                "messages": [{"role": "user", "content": "hi " * 30_000}],
            }
        )
    )
    args = ["assemble", str(doc), "--format", "json", "--today", "2026-01-01"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TIKTOKEN_CACHE_DIR": ""}
    proc = subprocess.run(
        [sys.executable, "-m", "server.cli", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    capsys.readouterr()
    code = main(args)
    out, err = capsys.readouterr()
    assert (proc.returncode, proc.stdout, proc.stderr) == (code, out, err)
    assert "promptls: note: encoding p50k_base is not available offline" in err
    assert json.loads(out)["diagnostics"]
    for other in (["rule", "budget-overrun"], ["rule", "no-such-rule"], ["rules"]):
        proc = subprocess.run(
            [sys.executable, "-m", "server.cli", *other],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        code = main(other)
        out, err = capsys.readouterr()
        assert (proc.returncode, proc.stdout, proc.stderr) == (code, out, err)


# Runs ``run`` (the ``promptls`` program) and reports, as the process ends without its
# teardown, whether the cyclic collector is on and how many objects await it.
END_PROBE = """
import gc, os, sys
from server.cli import main as cli

def ending(code, exit=os._exit):
    print(gc.isenabled(), gc.get_count()[0], file=sys.stderr)
    sys.stderr.flush()
    exit(code)

os._exit = ending
cli.run()
"""


def test_a_one_shot_command_ends_without_turning_the_collector_back_on(tmp_path: Path) -> None:
    # Turned on after the output, the collector would walk every object the analysis made
    # (they all wait in its youngest generation) before the process ends: 20 ms at 1 MB.
    import gc

    from server.cli.main import main

    doc = tmp_path / "c.conv.json"
    doc.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}] * 300}))
    args = ["assemble", str(doc), "--format", "json"]
    proc = subprocess.run(
        [sys.executable, "-c", END_PROBE, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    enabled, waiting = proc.stderr.split()
    assert enabled == "False" and int(waiting) > 1000  # nothing was collected
    assert json.loads(proc.stdout)["messages"]
    # Called as a function (``main``), the command leaves the collector as it found it.
    assert gc.isenabled()
    assert main(args) == 0
    assert gc.isenabled()


def test_the_folder_count_before_lint_forks_its_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ``lint FOLDER`` forks its counting child only when the folder holds few documents: the
    # count is made before the engine is imported, so it reads what discovery reads.
    from assembly.documents import CONVERSATION_SUFFIXES
    from assembly.host import PROMPT_SUFFIX
    from server.cli import folders
    from server.cli import main as cli
    from server.cli.lint import discover
    from server.cli.lint.model import LintOptions

    assert (*CONVERSATION_SUFFIXES, PROMPT_SUFFIX) == folders.DOCUMENT_SUFFIXES
    (tmp_path / "a.conv.json").write_text("{}")
    (tmp_path / "B.Prompt.MD").write_text("x" * 10)  # discovery's suffixes ignore case
    (tmp_path / "notes.md").write_text("not a document")
    for skipped in (".git", "node_modules", ".venv"):
        (tmp_path / skipped).mkdir()
        (tmp_path / skipped / "c.conv.yaml").write_text("messages: []")
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    (tmp_path / "sub" / "deeper" / "d.conv.jsonl").write_text("{}\n")
    (tmp_path / "sub" / "dangling.conv.json").symlink_to(tmp_path / "nowhere")
    assert folders.documents_below(str(tmp_path), 8) == (3, 2 + 10 + 3)
    assert [p.name for p in discover.discover([tmp_path], LintOptions(cwd=tmp_path))] == [
        "B.Prompt.MD",
        "a.conv.json",
        "d.conv.jsonl",
    ]
    assert folders.documents_below(str(tmp_path), 2) is None  # too many to serve
    monkeypatch.setattr(folders, "MAX_SCAN_ENTRIES", 5)
    assert folders.documents_below(str(tmp_path), 8) is None  # too large a tree to read twice
    monkeypatch.setattr(folders, "MAX_SCAN_ENTRIES", 1_000)
    # Each of these forks no child: too many documents in all, too many bytes, no folder.
    from server import precount, tokenizers

    monkeypatch.setattr(tokenizers, "_LOADED", {})  # as in a fresh process: a child could serve
    (tmp_path / "more").mkdir()
    for k in range(6):
        (tmp_path / "more" / f"m{k}.conv.json").write_text("{}")
    monkeypatch.setattr(precount, "MIN_DOCUMENT_CHARS", 3)
    (tmp_path / "sub" / "deeper" / "empty").mkdir()
    for argv in (
        [str(tmp_path)],
        [str(tmp_path / "sub")],  # one document of 3 bytes
        [str(tmp_path / "more"), str(tmp_path / "a.conv.json")],  # 6 + 2 bytes
        [str(tmp_path / "missing")],
        [str(tmp_path / "sub" / "deeper" / "empty")],  # no document in it
    ):
        cli._serve_early(argv)
        served, cli._SERVING[:] = list(cli._SERVING), []
        for child in served:
            child.close()
        assert served == [], argv
    # The count's own limit is checked before a child is forked.
    monkeypatch.setattr(precount, "MIN_DOCUMENT_CHARS", 4)
    cli._serve_early([str(tmp_path / "sub")])
    (child,) = cli._SERVING
    (served,) = tokenizers._LOADED.values()
    assert tokenizers.counts_elsewhere(served) and served.batch is not None
    assert served.count("hello world") == 2  # counted by the child
    # Stopped, the child no longer serves: its tokenizer is an ordinary one (a process that
    # goes on, as a test's does, loads the encoding when next asked).
    child.close()
    cli._SERVING.clear()
    assert not tokenizers.counts_elsewhere(served) and served.batch is None
    assert served.count("hello world!") == 3
