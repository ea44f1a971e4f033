"""The code ``dataclasses`` compiles when a class is defined, kept between runs.

Defining a dataclass makes the standard library write the source of its methods
(``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, a frozen class's ``__setattr__`` and
``__delattr__``…) and ``exec`` it. Importing the engine defines about 160 dataclasses,
whose ~800 small functions take about a third of the engine's import time just to
compile: every command that imports the engine paid it on every start-up.

``install()`` keeps that compiled code between runs, the way Python keeps a module's in
``__pycache__``: ``dataclasses``' own ``exec`` is given a stand-in that looks the source
text up in a cache of code objects compiled from exactly that text (the text is the key),
and compiles (and remembers) any text it has not seen. The methods made are the same
functions as without the cache: the code object is what ``exec`` would compile from the
same text (same file name ``<string>``, no inherited ``__future__`` flags, the same
optimization level), run with the same globals and namespace. Only the time to compile
it is saved.

The cache file sits where the interpreter writes bytecode (``__pycache__`` beside this
module, or under ``PYTHONPYCACHEPREFIX``), is tagged with the interpreter's bytecode
magic number and optimization level, and is written only when the interpreter writes
bytecode at all (not under ``PYTHONDONTWRITEBYTECODE``). A file that is missing, foreign,
damaged or unwritable means compiling as usual; an unused entry is dropped once the file
grows past ``MAX_ENTRIES``.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import marshal
import os
import sys
from pathlib import Path
from types import CodeType
from typing import Any

FORMAT = b"promptls-dataclass-code-1\n"
MAX_ENTRIES = 4000  # about 4 times what the engine defines; past it, unused ones go

_code: dict[str, CodeType] = {}
_used: set[str] = set()
_state = {"installed": False, "changed": False, "path": None}


def install(path: Path | None = None) -> None:
    """Make ``dataclasses`` reuse the code compiled by earlier runs (idempotent).

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
    dataclasses.exec = _exec  # type: ignore[attr-defined]  # shadows the builtin there only
    atexit.register(save)


def uninstall() -> None:
    """Undo ``install`` (the tests): ``dataclasses`` compiles with the builtin ``exec``."""
    if not _state["installed"]:
        return
    save()
    atexit.unregister(save)
    vars(dataclasses).pop("exec", None)
    _code.clear()
    _used.clear()
    _state.update(installed=False, changed=False, path=None)


def cache_path() -> Path | None:
    """Where the cache lives: the bytecode folder of this module, None if there is none."""
    if sys.implementation.cache_tag is None:
        return None
    from importlib.util import cache_from_source

    try:
        pyc = Path(cache_from_source(__file__))
    except (NotImplementedError, ValueError):
        return None
    opt = sys.flags.optimize
    return pyc.with_name(f"dataclass_code.{sys.implementation.cache_tag}.opt{opt}.marshal")


def _header() -> bytes:
    from importlib.util import MAGIC_NUMBER

    return FORMAT + MAGIC_NUMBER + bytes([sys.flags.optimize])


def _exec(source: Any, globals: Any = None, locals: Any = None, /) -> None:
    """``exec`` as ``dataclasses`` calls it, with the compiled code of a known text."""
    if globals is None:  # the caller's namespaces, as the builtin would take them
        frame = sys._getframe(1)
        globals = frame.f_globals
        if locals is None:
            locals = frame.f_locals
    if type(source) is str:
        code = _code.get(source)
        if code is None:
            code = compile(source, "<string>", "exec", dont_inherit=True)
            _code[source] = code
            _state["changed"] = True
        _used.add(source)
        source = code
    exec(source, globals, locals)


def save() -> None:
    """Write the cache if this run compiled something new (never raises)."""
    path = _state["path"]
    if not _state["changed"] or path is None or sys.dont_write_bytecode:
        return
    _state["changed"] = False
    entries = _code if len(_code) <= MAX_ENTRIES else {t: _code[t] for t in _used if t in _code}
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(_header() + marshal.dumps(entries))
        os.replace(tmp, path)
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def _read(path: Path) -> dict[str, CodeType]:
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
    if not isinstance(entries, dict):
        return {}
    return {t: c for t, c in entries.items() if type(t) is str and type(c) is CodeType}
