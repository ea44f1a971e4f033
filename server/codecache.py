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

The cache file sits where the interpreter writes bytecode (``__pycache__`` beside this
module, or under ``PYTHONPYCACHEPREFIX``), is tagged with the interpreter's bytecode magic
number and optimization level, and is written only when the interpreter writes bytecode
at all (not under ``PYTHONDONTWRITEBYTECODE``). A file that is missing, foreign, damaged
or unwritable means compiling as usual; unused entries are dropped once the file grows
past ``MAX_ENTRIES``.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import dataclasses
import marshal
import os
import sys
import typing
from pathlib import Path
from types import CodeType
from typing import Any

FORMAT = b"promptls-code-cache-1\n"
MAX_ENTRIES = 8000  # about 4 times what the engine compiles; past it, unused ones go
FILENAME = "<string>"  # what both modules compile under

# (mode, source) -> code
_code: dict[tuple[str, str], CodeType] = {}
_used: set[tuple[str, str]] = set()
_state: dict[str, Any] = {"installed": False, "changed": False, "path": None}


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
    atexit.register(save)


def uninstall() -> None:
    """Undo ``install`` (the tests): both modules use the builtins again."""
    if not _state["installed"]:
        return
    save()
    atexit.unregister(save)
    vars(dataclasses).pop("exec", None)
    vars(typing).pop("compile", None)
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
    return pyc.with_name(f"codecache.{sys.implementation.cache_tag}.opt{opt}.marshal")


def _header() -> bytes:
    from importlib.util import MAGIC_NUMBER

    return FORMAT + MAGIC_NUMBER + bytes([sys.flags.optimize])


def _compiled(mode: str, source: str) -> CodeType:
    key = (mode, source)
    code = _code.get(key)
    if type(code) is not CodeType:
        code = builtins.compile(source, FILENAME, mode, dont_inherit=True)
        _code[key] = code
        _state["changed"] = True
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


def save() -> None:
    """Write the cache if this run compiled something new (never raises)."""
    path = _state["path"]
    if not _state["changed"] or path is None or sys.dont_write_bytecode:
        return
    _state["changed"] = False
    entries = _code if len(_code) <= MAX_ENTRIES else {k: _code[k] for k in _used if k in _code}
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(_header() + marshal.dumps(entries))
        os.replace(tmp, path)
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def _read(path: Path) -> dict[tuple[str, str], CodeType]:
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
