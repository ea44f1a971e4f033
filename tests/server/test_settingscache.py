"""Kept verdicts of settings checks (``server/settingscache.py``) change nothing but the time.

Every value below is resolved three ways: checked by the settings model with no memo,
checked while a memo fills, and taken from a memo an earlier run wrote (where the model
must not be asked at all); the settings and the issues must be the same. Then what a
foreign, damaged or stale file does, that a kept verdict is never shared, that the JSON of
the settings is the model's own, and that the command line needs no pydantic for values
it checked before.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from assembly import settings as settings_module
from assembly.settings import (
    SETTING_NAMES,
    Settings,
    SettingsLayer,
    is_plain,
    resolve_settings,
    settings_json,
)
from assembly.settings_model import SettingsModel
from server import settingscache
from server.codecache import beside_bytecode

ROOT = Path(__file__).resolve().parents[2]

# (key, value): valid, invalid, changed by validation (an integer id, YAML's `off`), and of
# every type JSON, YAML and TOML give.
VALUES: list[tuple[str, Any]] = [
    ("model", "gpt-4o"),
    ("model", "claude-sonnet-4-5"),
    ("model", 4),
    ("model", None),
    ("encoding", "o200k_base"),
    ("encoding", "foo_base"),
    ("encoding", None),
    ("max_input_tokens", 128000),
    ("max_input_tokens", 0),
    ("max_input_tokens", -5),
    ("max_input_tokens", True),
    ("max_input_tokens", 10**40),
    ("max_input_tokens", 1.5),
    ("max_input_tokens", 2.0),
    ("max_input_tokens", "1000"),
    ("safety_margin", 0.1),
    ("safety_margin", 1),
    ("safety_margin", float("nan")),
    ("safety_margin", float("inf")),
    ("compression_trigger_ratio", 1),
    ("recent_messages_ratio", 0),
    ("reserved_tokens", "auto"),
    ("reserved_tokens", -1),
    ("reserved_tokens", "x"),
    ("reserved_tokens", 500),
    ("provider", "anthropic"),
    ("provider", "bedrock"),
    ("image_cap", True),
    ("image_cap", 0),
    ("image_cap", 3),
    ("prompt_cache_marker", "anthropic"),
    ("last_n_user_messages", 0),
    ("last_n_user_messages", 2),
    ("instruction_distance", False),
    ("section_topics", {"Tools": ["tool"], "Safety": []}),
    ("section_topics", {"Tools": "tool"}),
    ("branch_tip", 7),
    ("branch_tip", "m7"),
    ("branch_tip", True),
    ("rules", {"budget-overrun": False, "orphaned-tool-response": "warning"}),
    ("rules", {"budget-overrun": "loud"}),
    ("rules", ["off"]),
    ("tools", ["search", {"type": "function", "function": {"name": "f", "parameters": {}}}]),
    ("tools", [{"function": {"name": "f"}, "when": dt.date(2026, 1, 1)}]),
    ("tools", "search"),
    ("include", ["*.md"]),
    ("exclude", ["build/", 3]),
    ("vision", "yes"),
    ("datetime_aware", 0),
    ("last_cycle", {"x": 1}),
    ("unknown_key", 1),
]


def _resolve(values: list[tuple[str, Any]]) -> list[tuple[Settings, list[Any]]]:
    return [resolve_settings([SettingsLayer("doc", {key: value})]) for key, value in values]


@pytest.fixture
def memo_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    settingscache.uninstall()  # the command line's, when a test ran it in this process
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as where bytecode is written
    yield tmp_path / "verdicts.marshal"
    settingscache.uninstall()


def test_kept_verdicts_are_the_models_own(memo_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checked = _resolve(VALUES)
    settingscache.install(memo_file)
    assert _resolve(VALUES) == checked  # checked, and kept
    settingscache.uninstall()  # written
    assert memo_file.is_file()
    settingscache.install(memo_file)

    def no_check(key: str, value: Any) -> Any:
        raise AssertionError(f"{key}={value!r} was checked again")

    plain = [(k, v) for k, v in VALUES if is_plain(v)]
    assert len(plain) >= 40
    with monkeypatch.context() as m:
        m.setattr(settings_module, "_check_one", no_check)
        assert _resolve(plain) == [
            c for (k, v), c in zip(VALUES, checked, strict=True) if is_plain(v)
        ]
    # Values that are not JSON's own (a date, NaN) are checked every time, as before.
    assert _resolve(VALUES) == checked


def test_a_kept_verdict_is_never_shared(memo_file: Path) -> None:
    settingscache.install(memo_file)
    layer = SettingsLayer("doc", {"rules": {"budget-overrun": False}, "include": ["a"]})
    first, _ = resolve_settings([layer])
    first.rules["budget-overrun"] = "error"
    first.include.append("b")
    second, _ = resolve_settings([layer])
    assert (second.rules, second.include) == ({"budget-overrun": "off"}, ["a"])


def test_verdicts_of_other_code_or_damaged_files_are_not_used(memo_file: Path) -> None:
    key = settingscache.fingerprint()
    assert key is not None
    settingscache.install(memo_file)
    resolve_settings([SettingsLayer("doc", {"max_input_tokens": 0})])
    settingscache.uninstall()
    assert settingscache._read(memo_file, key)
    # Another version of the checking code (or of pydantic, or of Python): none is used.
    assert settingscache._read(memo_file, (*key[:-1], key[-1] + " ")) == {}
    data = memo_file.read_bytes()
    for damaged in (data[: len(data) // 2], b"junk" + data, data[:10], b""):
        memo_file.write_bytes(damaged)
        assert settingscache._read(memo_file, key) == {}
    # Entries of another shape are dropped; the others are kept.
    import marshal

    wrong = {
        ("max_input_tokens", "0"): (True, 0.0 * float("inf")),
        ("model", "'x'"): (False, 3),
        ("model", 1): (True, "x"),
        ("model", "'y'"): (True, "y", 1),
        ("model", "'z'"): (True, "z"),
    }
    memo_file.write_bytes(settingscache.FORMAT + marshal.dumps((key, wrong)))
    assert settingscache._read(memo_file, key) == {("model", "'z'"): (True, "z")}


def test_settings_json_is_the_models_dump() -> None:
    cases = [
        Settings(),
        Settings(model="x\ud800y", tools=["a", {"b": [1, 2.5, None, True]}], branch_tip="3"),
        Settings(tools=[{"x": float("inf")}], rules={"a": "off"}),
        Settings(tools=[{"when": dt.date(2026, 1, 1), "n": float("nan")}]),
        Settings(section_topics={"T": ["a"]}, include=["*.md"], reserved_tokens=5),
    ]
    for s in cases:
        values = {name: getattr(s, name) for name in SETTING_NAMES}
        expected = SettingsModel.model_construct(**values).model_dump(mode="json")
        assert json.dumps(settings_json(s)) == json.dumps(expected)
    assert list(SettingsModel.model_fields) == list(SETTING_NAMES)
    assert SettingsModel().model_dump() == {n: getattr(Settings(), n) for n in SETTING_NAMES}


PROBE = """
import json, sys
from server.cli.main import main
code = main(sys.argv[1:])
sys.stdout.flush()
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
sys.exit(code)
"""


def _python(source: str, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``source`` in a fresh interpreter with ``args``; it must succeed."""
    proc = subprocess.run(
        [sys.executable, "-c", source, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def _writing_bytecode(tmp_path: Path) -> dict[str, str]:
    """An environment that runs this checkout and keeps its bytecode (and the verdicts
    beside it) under ``tmp_path``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(ROOT), PYTHONPYCACHEPREFIX=str(tmp_path / "pyc"))
    return env


def test_assemble_needs_no_pydantic_for_values_checked_before(tmp_path: Path) -> None:
    doc = tmp_path / "c.conv.json"
    settings = {"model": "gpt-4o", "max_input_tokens": 0, "rules": {"budget-overrun": False}}
    doc.write_text(json.dumps({"settings": settings, "messages": []}))
    env = _writing_bytecode(tmp_path)

    def run(env: dict[str, str]) -> tuple[str, set[str]]:
        args = ["assemble", str(doc), "--format", "json", "--today", "2026-01-01"]
        proc = _python(PROBE, args, env)
        return proc.stdout, set(json.loads(proc.stderr.rstrip("\n").split("\n")[-1]))

    first, modules = run(env)
    assert "pydantic" in modules
    (found,) = [d for d in json.loads(first)["diagnostics"] if d["code"] == "invalid-setting"]
    assert "input should be greater than 0 (got 0)" in found["message"]
    again, modules = run(env)
    assert again == first
    assert "pydantic" not in modules and "assembly.settings_model" not in modules
    # Where no bytecode is written, the verdicts are kept in the user's cache folder (one
    # file per copy of promptls), and nothing beside the bytecode.
    cache = tmp_path / "user-cache"
    quiet = {
        **env,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPYCACHEPREFIX": str(tmp_path / "q"),
        "PROMPTLS_CACHE_DIR": str(cache),
    }
    out, modules = run(quiet)
    assert out == first and "pydantic" in modules
    (kept,) = cache.glob("settingscache.*.marshal")
    out, modules = run(quiet)
    assert out == first and "pydantic" not in modules
    assert list(cache.iterdir()) == [kept]
    assert not list((tmp_path / "q").rglob("settingscache*"))


def test_the_user_cache_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setenv("PROMPTLS_CACHE_DIR", str(tmp_path / "mine"))
    path = settingscache.cache_path()
    assert path is not None and path.parent == tmp_path / "mine"
    monkeypatch.delenv("PROMPTLS_CACHE_DIR")
    if sys.platform not in ("win32", "darwin"):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert settingscache.user_cache_dir() == tmp_path / "xdg" / "promptls"
        monkeypatch.setenv("XDG_CACHE_HOME", "relative")  # ignored, as the spec says
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        assert settingscache.user_cache_dir() == tmp_path / "home" / ".cache" / "promptls"
    # Where bytecode is written, the verdicts sit beside it, as before.
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    tag = sys.implementation.cache_tag
    assert settingscache.cache_path() == beside_bytecode(
        settingscache.__file__, f"settingscache.{tag}.marshal"
    )


SERVE_PROBE = """
import sys
import server.lsp.handlers as handlers
from server.cli.main import main

class Server:  # stands in for the language server: records what is loaded when IO starts
    def start_io(self):
        print("assembly.settings_model" in sys.modules, "pydantic" in sys.modules)

handlers.build_server = Server
sys.exit(main(["serve"]))
"""


def test_serve_loads_the_settings_model_before_the_first_document_of_a_first_run(
    tmp_path: Path,
) -> None:
    # A one-shot command imports pydantic only on a memo miss; a server checks its first
    # document's settings inside the open. With no verdicts kept (a first run) a miss is
    # certain: it imports the model while the editor starts. With verdicts kept it does
    # not (8-10 MB for the server's life, against 40-80 ms of one open on a new value).
    env = _writing_bytecode(tmp_path)
    assert _python(SERVE_PROBE, [], env).stdout.split() == ["True", "True"]
    # An earlier run checked a value: its verdict is kept.
    doc = tmp_path / "c.conv.json"
    doc.write_text(json.dumps({"settings": {"model": "gpt-4o"}, "messages": []}))
    _python(PROBE, ["assemble", str(doc), "--format", "json"], env)
    assert list((tmp_path / "pyc").rglob("settingscache*.marshal"))
    assert _python(SERVE_PROBE, [], env).stdout.split() == ["False", "False"]
