"""Source the standard library compiles while the engine is imported, compiled once.

Importing the engine compiles small snippets of source, on every start-up, that no
``__pycache__`` keeps:

- ``dataclasses`` writes the source of each dataclass' methods (``__init__``, ``__repr__``,
  ``__eq__``, ``__hash__``, a frozen class's ``__setattr__``…) and ``exec``s it: about 160
  classes, 800 functions;
- ``typing`` compiles every string annotation it turns into a ``ForwardRef`` (pydantic's
  core schema alone defines ~700 ``TypedDict`` fields that way).

Compiling them was a third of the engine's import time. ``install()`` keeps the compiled
code between runs, the way Python keeps a module's: the ``exec`` that ``dataclasses`` calls
and the ``compile`` that ``typing`` calls are given stand-ins (in those two modules only)
that look the source text up in a cache of code objects compiled from exactly that text
(the text is the key), and compile and remember any text not seen before. What runs is
what would have run: the code object is the one the builtin compiles from the same text
(file name ``<string>``, the same mode, no inherited ``__future__`` flags, as from those
modules, which have none, and the same optimization level), with the same globals and
namespace. Only the time to compile is saved.

Likewise the engine's ~130 regular expressions (compiled at import: 10–15 ms of CPU on
every start-up, most of them unused by any one command) and PyYAML's (``_ours``):
``re``'s compiler is given a stand-in that keeps each pattern's program (the operation
codes and group tables that ``_sre.compile`` builds a pattern from) and builds a known
pattern from it without parsing it again. A program is kept only when the pattern built
from it equals the one ``re`` compiled (the same code, flags and groups); ``DEBUG`` and
``LOCALE`` patterns are always compiled, and ``_sre`` validates every program it is
given.

A pattern is kept only when it is compiled while a module is imported: a constant of the
code, the same in every run. One compiled later may be made from a document (the patterns
that find a conversation's tool names), and keeping those grew the file with every
document seen, while every start-up reads the whole file (3,000 entries, half of them such
patterns, took 17 ms to read; the engine's own 1,100, 3.6 ms). It is compiled as usual.
The methods ``dataclasses`` writes and the annotations ``typing`` compiles are the code's
own wherever they are made (the rule engine reads the rules' annotations as it first runs
them), so they are always kept.

The cache file sits where the interpreter writes bytecode (``__pycache__`` beside this
module, or under ``PYTHONPYCACHEPREFIX``), is tagged with the interpreter's exact version,
bytecode magic number and optimization level, and is written only when the interpreter
writes bytecode at all (not under ``PYTHONDONTWRITEBYTECODE``). A file that is missing,
foreign, damaged or unwritable means compiling as usual; unused entries are dropped once
the file grows past ``MAX_ENTRIES``.

The language server also imports lsprotocol, whose ~570 ``attrs`` classes have their methods
generated and compiled the same way (``compile`` in ``attr._make``): 300 ms of the server's
900 ms import. ``install_attrs()`` gives that ``compile`` a stand-in too, which compiles a text
not seen before exactly as the builtin called from there would (the same file name, mode and
``__future__`` flags, those of ``attr._make``), and keeps those entries in a file of their own
beside the first (``…attrs.marshal``): the commands that never import attrs do not read it.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import dataclasses
import marshal
import os
import re
import sys
import typing
from pathlib import Path
from types import CodeType
from typing import Any

FORMAT = b"promptls-code-cache-3\n"  # (3: no entry made from a document)
MAX_ENTRIES = 8000  # about 4 times what the engine compiles; past it, unused ones go
FILENAME = "<string>"  # what both modules compile under

# (mode, source) -> code; ("re <flags>", pattern) -> a regular expression's program
_code: dict[tuple[str, Any], Any] = {}
_used: set[tuple[str, Any]] = set()
_re_compiler: Any = getattr(re, "_compiler", None)  # CPython's (3.11+)
_re_compile = getattr(_re_compiler, "compile", None)  # the stand-in's original
_NEVER_KEPT = re.DEBUG | re.LOCALE  # compiled every time (DEBUG prints; LOCALE's code varies)
_state: dict[str, Any] = {"installed": False, "changed": False, "path": None}
_ATTRS = "attrs "  # the keys of attrs' code: ("attrs <mode> <file name>", source)
_attrs: dict[str, Any] = {"module": None, "flags": 0, "path": None, "changed": False}


def install(path: Path | None = None) -> None:
    """Make ``dataclasses`` and ``typing`` reuse the code earlier runs compiled (idempotent).

    ``path`` is the cache file (default: ``cache_path()``); None there means no cache
    can be kept, and nothing is installed.
    """
    if _state["installed"]:
        return
    path = path if path is not None else cache_path()
    if path is None:
        return
    _code.update(_read(path))
    _state.update(installed=True, path=path)
    # Module globals shadow the builtins, in these two modules only.
    dataclasses.exec = _exec  # type: ignore[attr-defined]
    typing.compile = _compile  # type: ignore[attr-defined]
    if _re_compile is not None:
        _re_compiler.compile = _compile_re
    atexit.register(save)


def uninstall() -> None:
    """Undo ``install`` (the tests): both modules use the builtins again."""
    if not _state["installed"]:
        return
    save()
    atexit.unregister(save)
    vars(dataclasses).pop("exec", None)
    vars(typing).pop("compile", None)
    if _attrs["module"] is not None:
        vars(_attrs["module"]).pop("compile", None)
    _attrs.update(module=None, flags=0, path=None, changed=False)
    if _re_compile is not None:
        _re_compiler.compile = _re_compile
    _code.clear()
    _used.clear()
    _state.update(installed=False, changed=False, path=None)


def install_attrs() -> None:
    """Make ``attrs`` reuse the code earlier runs compiled for the methods it generates
    (after ``install``, which it needs; idempotent). Imports attrs."""
    path = _state["path"]
    if not _state["installed"] or path is None or _attrs["module"] is not None:
        return
    from attr import _make

    own = path.with_name(path.name.removesuffix(".marshal") + ".attrs.marshal")
    _code.update(_read(own))
    _attrs.update(module=_make, flags=_future_flags(_make), path=own)
    _make.compile = _compile_attrs  # type: ignore[attr-defined]


def _future_flags(module: Any) -> int:
    """The compiler flags of the ``__future__`` features ``module`` imports (what the builtin
    ``compile`` inherits when called from its code)."""
    import __future__

    flags = 0
    for name in __future__.all_feature_names:
        feature = getattr(__future__, name)
        if vars(module).get(name) is feature:
            flags |= feature.compiler_flag
    return flags


def cache_path() -> Path | None:
    """Where the cache lives: the bytecode folder of this module, None if there is none."""
    opt = sys.flags.optimize
    return beside_bytecode(__file__, f"codecache.{sys.implementation.cache_tag}.opt{opt}.marshal")


def beside_bytecode(source: str, name: str) -> Path | None:
    """``name`` in the folder where the interpreter keeps ``source``'s bytecode
    (``__pycache__`` beside it, or under ``PYTHONPYCACHEPREFIX``); None if there is none."""
    if sys.implementation.cache_tag is None:
        return None
    from importlib.util import cache_from_source

    try:
        return Path(cache_from_source(source)).with_name(name)
    except (NotImplementedError, ValueError):
        return None


def _header() -> bytes:
    from importlib.util import MAGIC_NUMBER

    version = sys.version.encode("utf-8", "replace")
    return FORMAT + MAGIC_NUMBER + bytes([sys.flags.optimize]) + version + b"\n"


def _compiled(
    mode: str, source: str, filename: str = FILENAME, flags: int = 0, state: dict[str, Any] = _state
) -> CodeType:
    """The code the builtin compiles from ``source`` (``flags``, nothing inherited), the
    kept one when there is one; ``state``: the file it is kept in (``_state`` or ``_attrs``)."""
    key = (mode, source) if state is _state else (f"{_ATTRS}{mode} {filename}", source)
    code = _code.get(key)
    if type(code) is not CodeType:
        code = builtins.compile(source, filename, mode, flags, True)
        _code[key] = code
        state["changed"] = True
    _used.add(key)
    return code


def _exec(source: Any, globals: Any = None, locals: Any = None, /) -> None:
    """``exec`` as ``dataclasses`` calls it, with the compiled code of a known text."""
    if globals is None:  # the caller's namespaces, as the builtin would take them
        frame = sys._getframe(1)
        globals = frame.f_globals
        if locals is None:
            locals = frame.f_locals
    if type(source) is str:
        source = _compiled("exec", source)
    builtins.exec(source, globals, locals)


def _compile(
    source: Any,
    filename: Any,
    mode: str,
    flags: int = 0,
    dont_inherit: bool = False,
    optimize: int = -1,
    **kwargs: Any,
) -> Any:
    """``compile`` as ``typing`` calls it (``compile(text, '<string>', 'eval')``), with
    the code of a known text; any other call is passed on as made."""
    if type(source) is str and filename == FILENAME and not flags and optimize == -1 and not kwargs:
        return _compiled(mode, source)
    return builtins.compile(source, filename, mode, flags, True, optimize, **kwargs)


def _compile_attrs(
    source: Any,
    filename: Any,
    mode: str,
    flags: int = 0,
    dont_inherit: bool = False,
    optimize: int = -1,
    **kwargs: Any,
) -> Any:
    """``compile`` as ``attr._make`` calls it (``compile(script, filename, "exec")``), with
    the code of a known text under the same file name; any other call is passed on as
    made (inheriting ``attr._make``'s flags, as there)."""
    inherited = flags | (0 if dont_inherit else _attrs["flags"])
    if (
        type(source) is not str
        or type(filename) is not str
        or inherited != _attrs["flags"]
        or optimize != -1
        or kwargs
    ):
        return builtins.compile(source, filename, mode, inherited, True, optimize, **kwargs)
    return _compiled(mode, source, filename, inherited, _attrs)


def _compile_re(p: Any, flags: int = 0) -> Any:
    """``re._compiler.compile`` (what ``re.compile`` calls for a pattern it has not
    compiled in this process), building a known pattern from its kept program."""
    if (type(p) is not str and type(p) is not bytes) or flags & _NEVER_KEPT or not _ours():
        return _re_compile(p, flags)
    key = (f"re {flags}", p)
    kept = _code.get(key)
    if kept is not None:
        try:
            pattern = _sre_compile(p, kept)
        except Exception:  # a program of another shape: compiled below
            pass
        else:
            _used.add(key)
            return pattern
    pattern = _re_compile(p, flags)
    # Past twice its bound the cache takes no more; its file keeps the used ones (``save``).
    if len(_code) >= 2 * MAX_ENTRIES or not _importing():
        return pattern
    program = _program(p, flags)
    if program is not None and _same_pattern(_sre_compile(p, program), pattern):
        _code[key] = program
        _used.add(key)
        _state["changed"] = True
    return pattern


def _ours() -> bool:
    """Whether the pattern is one the cache keeps: ``re.compile`` (``re.match``…) was called
    by a module of ``assembly`` or ``server``, or of PyYAML, whose patterns are constants
    of its modules (compiling them took 5-6 ms of every import of it: each YAML
    conversation's ``assemble``, each ``lint`` worker). Others' may be written anew by
    every run (``tokenize`` joins a set of string prefixes, whose order changes with each
    process's string hashes): they are compiled as usual."""
    try:
        caller = sys._getframe(4).f_globals.get("__name__", "")
    except ValueError:
        return False
    return isinstance(caller, str) and caller.startswith(_OURS)


_OURS = ("assembly.", "server.", "yaml.")


_BOOTSTRAP = "<frozen importlib._bootstrap>"


def _importing() -> bool:
    """Whether a module is being imported (importlib runs its body, further up the stack):
    a pattern compiled then is the code's own; otherwise it may be made from a document
    and is not kept."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == _BOOTSTRAP:
            return True
        frame = frame.f_back
    return False


def _program(p: str | bytes, flags: int) -> tuple[Any, ...] | None:
    """The arguments ``re._compiler.compile`` gives ``_sre.compile`` for ``p`` (None
    when this interpreter's ``re`` is built otherwise)."""
    try:
        parsed = _re_compiler._parser.parse(p, flags)
        code = _re_compiler._code(parsed, flags)
        groupindex = {str(k): int(i) for k, i in parsed.state.groupdict.items()}
        indexgroup: list[str | None] = [None] * parsed.state.groups
        for name, i in groupindex.items():
            indexgroup[i] = name
        # Plain ints (the opcodes and flags are int subclasses): what marshal keeps.
        return (
            int(flags | parsed.state.flags),
            [int(c) for c in code],
            int(parsed.state.groups - 1),
            groupindex,
            tuple(indexgroup),
        )
    except Exception:
        return None


def _sre_compile(p: str | bytes, program: tuple[Any, ...]) -> Any:
    flags, code, groups, groupindex, indexgroup = program
    return _re_compiler._sre.compile(p, flags, code, groups, groupindex, indexgroup)


def _same_pattern(a: Any, b: Any) -> bool:
    """Same pattern, flags and program (``Pattern.__eq__``), and the same groups."""
    return bool(a == b and a.groups == b.groups and a.groupindex == b.groupindex)


def save() -> None:
    """Write the cache files to which this run compiled something new (never raises)."""
    if sys.dont_write_bytecode:
        return
    for state, attrs in ((_state, False), (_attrs, True)):
        path = state["path"]
        if not state["changed"] or path is None:
            continue
        state["changed"] = False
        entries = {k: v for k, v in _code.items() if _of_attrs(k) is attrs}
        if attrs or len(entries) > MAX_ENTRIES:
            # attrs' file keeps what this run used: the ``__hash__`` text of a frozen class
            # holds the process's hash of the class's name, another one in every run.
            entries = {k: entries[k] for k in _used if k in entries}
        _write(path, entries)


def _of_attrs(key: Any) -> bool:
    """Whether ``key`` is of attrs' code (a damaged file's keys may have any shape)."""
    return type(key) is tuple and bool(key) and type(key[0]) is str and key[0].startswith(_ATTRS)


def _write(path: Path, entries: dict[tuple[str, Any], Any]) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(_header() + marshal.dumps(entries))
        os.replace(tmp, path)
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def _read(path: Path) -> dict[tuple[str, Any], Any]:
    try:
        data = path.read_bytes()
    except OSError:
        return {}
    header = _header()
    if not data.startswith(header):
        return {}
    try:
        entries = marshal.loads(memoryview(data)[len(header) :])
    except (EOFError, ValueError, TypeError):
        return {}
    # Entries are checked when used (``_compiled``): a key of another shape is never asked.
    return entries if isinstance(entries, dict) else {}
