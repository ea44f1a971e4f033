"""The compiled-code cache (``server/codecache.py``) changes nothing but the time.

Every method ``dataclasses`` generates for the engine's classes (and ``attrs`` for
lsprotocol's, which the language server imports), and every forward
reference ``typing`` compiles for the ``TypedDict`` fields imported with it, is compared,
code object by code object, between an interpreter that compiles them as usual and one
that takes them from a cache an earlier run wrote; then what a damaged, foreign or
unwritable cache does, and that the command line uses it.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from server import codecache

ROOT = Path(__file__).resolve().parents[2]

# Imports the engine (with the cache at argv[1] when given, else without), then prints a
# description of every method dataclasses generated (the full code object, recursively;
# the function's names, globals, annotations and closure's types) and of every forward
# reference of a TypedDict (its compiled code).
DESCRIBE = r"""
import dataclasses, json, sys, types
from pathlib import Path
from typing import Any
if len(sys.argv) > 1:
    from server import codecache
    codecache.install(Path(sys.argv[1]))
    codecache.install_attrs()
import server.output, server.workspace, server.cli.lint, server.lsp.handlers
import assembly.settings_model  # pydantic, when a setting is checked

def canon(code):
    consts = tuple(canon(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts)
    return [code.co_code.hex(), consts, code.co_names, code.co_varnames, code.co_freevars,
            code.co_cellvars, code.co_filename, code.co_name, code.co_qualname,
            code.co_firstlineno, code.co_flags, code.co_argcount, code.co_posonlyargcount,
            code.co_kwonlyargcount, code.co_stacksize, code.co_linetable.hex(),
            code.co_exceptiontable.hex()]

out = {}
for name, mod in sorted(sys.modules.items()):
    for cls in list(getattr(mod, "__dict__", {}).values()):
        if not isinstance(cls, type) or cls.__module__ != name:
            continue
        generated = "<string>" if dataclasses.is_dataclass(cls) else "<attrs generated "
        for attr, fn in sorted(vars(cls).items()):
            if not isinstance(fn, types.FunctionType):
                continue
            if not fn.__code__.co_filename.startswith(generated):
                continue
            cells = [type(c.cell_contents).__name__ for c in fn.__closure__ or ()]
            out[f"{name}.{cls.__qualname__}.{attr}"] = [
                canon(fn.__code__), fn.__qualname__, fn.__name__, fn.__module__,
                fn.__globals__ is vars(mod), repr(fn.__annotations__), cells,
            ]
        if hasattr(cls, "__required_keys__"):  # a TypedDict
            for key, ann in sorted(vars(cls).get("__annotations__", {}).items()):
                code = getattr(ann, "__forward_code__", None)
                if code is not None:
                    out[f"{name}.{cls.__qualname__}:{key}"] = canon(code)
if len(sys.argv) > 1:
    out["<compiled this run>"] = codecache._state["changed"] or codecache._attrs["changed"]
print(json.dumps(out))
"""


def _describe(cache: Path | None, **env: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", DESCRIBE, *([str(cache)] if cache else [])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        # (a fixed hash seed: attrs writes a hashable class's hash of its name in its code)
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0", **env},
        timeout=120,
        check=True,
    )
    return json.loads(proc.stdout)


def test_cached_methods_are_the_methods_compiled_without_it(tmp_path: Path) -> None:
    cache = tmp_path / "code.marshal"
    writes = {"PYTHONDONTWRITEBYTECODE": ""}
    plain = _describe(None)
    cold = _describe(cache, **writes)  # compiles everything and writes the cache
    assert cold.pop("<compiled this run>") is True and cache.is_file()
    warm = _describe(cache, **writes)  # compiles nothing
    assert warm.pop("<compiled this run>") is False
    assert sum(":" not in k for k in plain) > 500  # the methods of every dataclass
    assert sum("lsprotocol.types." in k for k in plain) > 500  # and of lsprotocol's attrs classes
    assert sum(":" in k for k in plain) > 500  # pydantic-core's TypedDicts' fields
    assert cold == plain
    assert warm == plain


def test_generated_code_is_compiled_as_the_builtins_would() -> None:
    # codecache.py has ``from __future__ import annotations``: the code it compiles
    # must not inherit it (the builtin exec, called from dataclasses, would not).
    codecache.install()
    try:
        point = dataclasses.make_dataclass("Point", [("x", int), ("y", "list[int]")], frozen=True)
        assert point.__init__.__annotations__ == {"x": int, "y": "list[int]", "return": None}
        p = point(1, [2])
        assert p == point(1, [2]) and repr(p) == "Point(x=1, y=[2])"
        assert hash(point(1, ())) == hash((1, ()))
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.x = 2  # type: ignore[attr-defined]
        # typing's forward references: the same code, the same errors.
        import typing

        ref = typing.ForwardRef("list[int] | None")
        assert eval(ref.__forward_code__) == (list[int] | None)
        with pytest.raises(SyntaxError, match="Forward reference must be an expression"):
            typing.ForwardRef("not an expression")
    finally:
        codecache.uninstall()
    assert "exec" not in vars(dataclasses)
    assert "compile" not in vars(typing)


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not a cache",
        b"promptls-dataclass-code-1\n\x00\x00\r\n\x00",  # another interpreter's magic
        "header",  # the right header, then damaged data
        "not a dict",
        "wrong types",
    ],
)
def test_a_damaged_or_foreign_cache_is_ignored(tmp_path: Path, content: bytes | str) -> None:
    import marshal

    cache = tmp_path / "code.marshal"
    header = codecache._header()
    kind = content
    if content == "header":
        content = header + b"\xff\x00garbage"
    elif content == "not a dict":
        content = header + marshal.dumps(["def f(): pass"])
    elif content == "wrong types":
        content = header + marshal.dumps(
            {("exec", "x = 1"): "x = 2", 3: compile("", "", "exec"), "x": compile("", "", "exec")}
        )
    cache.write_bytes(content)
    codecache.install(cache)
    try:
        if kind == "wrong types":  # read, never used as code
            assert codecache._code[("exec", "x = 1")] == "x = 2"
            namespace: dict[str, object] = {}
            codecache._exec("x = 1", namespace)
            assert namespace["x"] == 1
        else:
            assert codecache._code == {}
        cls = dataclasses.make_dataclass("C", ["a"])
        assert cls(1) == cls(1) and cls(1) != cls(2)
    finally:
        codecache.uninstall()


def test_nothing_is_written_without_bytecode_writing_or_to_an_unwritable_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "code.marshal"
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    codecache.install(cache)
    dataclasses.make_dataclass("D", ["a"])
    codecache.uninstall()
    assert not cache.exists()
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    blocked = tmp_path / "file"
    blocked.write_text("")
    codecache.install(blocked / "code.marshal")  # its folder is a file
    dataclasses.make_dataclass("E", ["a"])
    codecache.uninstall()  # saves: fails quietly
    assert blocked.read_text() == "" and list(tmp_path.iterdir()) == [blocked]


def test_the_cache_keeps_only_used_entries_past_its_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import marshal

    cache = tmp_path / "code.marshal"
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(codecache, "MAX_ENTRIES", 3)
    old = {("exec", f"x = {i}"): compile(f"x = {i}", "<string>", "exec") for i in range(5)}
    cache.write_bytes(codecache._header() + marshal.dumps(old))
    codecache.install(cache)
    dataclasses.make_dataclass("F", ["a"])
    codecache.uninstall()
    kept = marshal.loads(cache.read_bytes()[len(codecache._header()) :])
    assert kept and not set(kept) & set(old)


def test_the_command_line_writes_and_reuses_the_cache(tmp_path: Path) -> None:
    doc = tmp_path / "c.conv.json"
    doc.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONPYCACHEPREFIX": str(tmp_path / "pyc")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    outs = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-m", "server.cli", "assemble", str(doc), "--format", "json"],
            cwd=tmp_path,
            capture_output=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        outs.append(proc.stdout)
    assert outs[0] == outs[1]
    (cache,) = (tmp_path / "pyc").rglob("codecache.*.marshal")
    assert cache.parent.name == "server"


def test_the_language_server_keeps_attrs_code_in_a_file_of_its_own(tmp_path: Path) -> None:
    # ``serve`` ends at once when its input does; the second run compiles nothing new (a
    # fixed hash seed: a hashable attrs class's code holds its name's hash), so neither
    # file is written again.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONPYCACHEPREFIX": str(tmp_path / "pyc")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONHASHSEED"] = "0"
    written = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-m", "server.cli", "serve"],
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        files = sorted((tmp_path / "pyc").rglob("codecache.*.marshal"))
        written.append([(f.name, f.stat().st_mtime_ns) for f in files])
    assert written[0] == written[1]
    attrs, engine = sorted(f for f in (tmp_path / "pyc").rglob("codecache.*.marshal"))
    assert attrs.name.endswith(".attrs.marshal")
    kept = codecache._read(attrs)
    assert len(kept) > 500 and all(k[0].startswith("attrs exec <attrs generated ") for k in kept)
    assert not any(k[0].startswith("attrs ") for k in codecache._read(engine))


def _engine_patterns() -> list[re.Pattern[Any]]:
    import server.cli.lint
    import server.lsp.handlers
    import server.output  # noqa: F401

    found: dict[tuple[Any, int], re.Pattern[Any]] = {}
    for name, mod in sorted(sys.modules.items()):
        if name.split(".")[0] in ("assembly", "server"):
            for value in list(vars(mod).values()):
                if isinstance(value, re.Pattern):
                    found[(value.pattern, value.flags)] = value
    return list(found.values())


def _matches(p: re.Pattern[Any], text: Any) -> list[Any]:
    return [(m.span(), m.groups(), m.groupdict(), m.lastgroup) for m in p.finditer(text)]


def test_kept_regular_expressions_are_the_ones_re_compiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    patterns = _engine_patterns()
    assert len(patterns) > 100
    original = codecache._re_compile
    sample = (ROOT / "README.md").read_text(encoding="utf-8")[:20_000]
    cache = tmp_path / "code.marshal"
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(codecache, "_OURS", (__name__,))  # this module's patterns are kept
    monkeypatch.setattr(codecache, "_importing", lambda: True)  # as if imported
    codecache.install(cache)
    try:
        re.purge()
        cold = [re.compile(p.pattern, p.flags) for p in patterns]  # compiled, kept
    finally:
        codecache.uninstall()
    codecache.install(cache)

    def never(p: Any, flags: int = 0) -> Any:
        raise AssertionError(f"compiled again: {p!r}")

    try:
        monkeypatch.setattr(codecache, "_re_compile", never)
        re.purge()
        warm = [re.compile(p.pattern, p.flags) for p in patterns]  # from the cache
    finally:
        re.purge()
        monkeypatch.setattr(codecache, "_re_compile", original)
        codecache.uninstall()
    for p, c, w in zip(patterns, cold, warm, strict=True):
        fresh = original(p.pattern, p.flags)
        for q in (c, w):
            assert (q, q.groups, q.groupindex, q.flags) == (
                fresh,
                fresh.groups,
                fresh.groupindex,
                fresh.flags,
            )
            text = sample if isinstance(p.pattern, str) else sample.encode()
            assert _matches(q, text) == _matches(fresh, text)
    assert re._compiler.compile is original  # uninstalled


def test_a_damaged_program_or_a_debug_pattern_is_compiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import marshal

    cache = tmp_path / "code.marshal"
    program = codecache._program(r"(?P<a>x+)y", 0)
    assert program is not None
    flags, code, groups, groupindex, indexgroup = program
    damaged = {
        ("re 0", r"(?P<a>x+)y"): (flags, code[: len(code) // 2], groups, groupindex, indexgroup),
        ("re 0", "z+"): "not a program",
    }
    cache.write_bytes(codecache._header() + marshal.dumps(damaged))
    monkeypatch.setattr(codecache, "_OURS", (__name__,))
    monkeypatch.setattr(codecache, "_importing", lambda: True)
    codecache.install(cache)
    try:
        re.purge()
        p = re.compile(r"(?P<a>x+)y")
        assert p == codecache._re_compile(r"(?P<a>x+)y", 0) and p.match("xxy")["a"] == "xx"
        assert re.compile("z+").match("zz")
        monkeypatch.setattr(sys, "stdout", io.StringIO())  # DEBUG prints the program
        re.compile("q", re.DEBUG)
        assert not [k for k in codecache._code if k[1] == "q"]
        assert codecache._code[("re 0", r"(?P<a>x+)y")] == program  # the right one, kept
        # Another module's patterns are compiled every time.
        monkeypatch.setattr(codecache, "_OURS", ("assembly.",))
        re.compile("w+")
        assert not [k for k in codecache._code if k[1] == "w+"]
    finally:
        re.purge()
        codecache.uninstall()


def test_only_the_patterns_compiled_by_an_import_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A module's pattern constants are kept; a pattern a run makes later (from a
    # document's tool names) is compiled as usual and never written: the file every
    # start-up reads does not grow with the documents seen.
    cache = tmp_path / "code.marshal"
    (tmp_path / "codecache_probe.py").write_text(
        "import re\nCONSTANT = re.compile(r'probe-(constant)+')\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(codecache, "_OURS", (__name__, "codecache_probe"))
    codecache.install(cache)
    try:
        re.purge()
        made = re.compile("(?:" + "|".join(map(re.escape, ["probe_tool", "other_tool"])) + ")")
        import codecache_probe

        assert codecache_probe.CONSTANT.match("probe-constant")
        assert made.search("call other_tool")
    finally:
        re.purge()
        sys.modules.pop("codecache_probe", None)
        codecache.uninstall()
    kept = {k[1] for k in codecache._read(cache) if k[0].startswith("re ")}
    assert kept == {r"probe-(constant)+"}


def test_linting_a_document_keeps_no_pattern_of_its_tools(tmp_path: Path) -> None:
    doc = tmp_path / "c.conv.json"
    tools = [{"type": "function", "function": {"name": "zeta_lookup_tool"}}]
    system = (
        "You are a helpful agent.\n\n# Tools\n\n## zeta_lookup_tool\n\nCall `zeta_lookup_tool`"
        " before you answer.\n\n## omega_fetch_tool\n\nUse `omega_fetch_tool` to fetch a page.\n"
    )
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "hi"}]
    doc.write_text(json.dumps({"tools": tools, "messages": messages}))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONPYCACHEPREFIX": str(tmp_path / "pyc")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "server.cli", "lint", str(doc)],
        cwd=tmp_path,
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr
    (cache,) = (tmp_path / "pyc").rglob("codecache.*.opt*.marshal")
    kept = codecache._read(cache)
    patterns = [k[1] for k in kept if k[0].startswith("re ")]
    assert len(patterns) > 50  # the engine's own
    assert not [p for p in patterns if "mega_fetch_tool" in str(p) or "eta_lookup_tool" in str(p)]
