"""Verdicts of settings checks, kept between runs so that start-up needs no pydantic.

Checking a setting's value takes the settings model (``assembly/settings_model.py``):
importing pydantic and building the model cost 40–80 ms of CPU, on every run of a command
whose document or settings file sets anything (``{"model": "gpt-4o"}`` will do). Yet a
verdict (the value as validated, or the message saying why it is invalid) is a pure
function of the key, the value, the code that checks it and pydantic's version. ``install``
hands ``assembly.settings`` a memo of the verdicts earlier runs reached for plain values
(JSON's own: ``assembly.settings.is_plain``, keyed by ``repr``), so pydantic is imported
only for a value not seen before. What is kept is what pydantic said: nothing here checks a
value.

The memo is a file where the interpreter writes bytecode (``__pycache__`` beside this
module, or under ``PYTHONPYCACHEPREFIX``). Where the interpreter writes no bytecode
(``PYTHONDONTWRITEBYTECODE``: a read-only install, a checkout kept clean), it is kept in the
user's cache folder instead, as ruff and black keep theirs (``PROMPTLS_CACHE_DIR``, else
``$XDG_CACHE_HOME/promptls``, ``~/.cache/promptls``; ``%LOCALAPPDATA%`` on Windows,
``~/Library/Caches`` on macOS), one file per installed copy of promptls: the verdicts are
data, not bytecode, and without them every run imports pydantic. It is keyed by the exact text of
``assembly/settings.py``, ``settings_table.py``, ``settings_model.py`` and pydantic's
``version.py``
(which pins pydantic-core's version) and by the interpreter's version: when any differs,
the file's verdicts are ignored and replaced. A file that is missing, foreign, damaged or
unwritable means checking as usual; unused verdicts are dropped once the file grows past
``MAX_ENTRIES``.
"""

from __future__ import annotations

import atexit
import contextlib
import marshal
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from assembly import settings

FORMAT = b"promptls-settings-verdicts-1\n"
MAX_ENTRIES = 2000
Key = tuple[str, str]


class Verdicts(dict[Key, tuple[bool, Any]]):
    """The memo ``assembly.settings`` reads and adds to; it remembers what this run used
    and whether it added anything."""

    def __init__(self, entries: dict[Key, tuple[bool, Any]]) -> None:
        super().__init__(entries)
        self.used: set[Key] = set()
        self.changed = False

    def get(self, key: Key, default: Any = None) -> Any:
        value = super().get(key, default)
        if value is not default:
            self.used.add(key)
        return value

    def __setitem__(self, key: Key, value: tuple[bool, Any]) -> None:
        if len(self) >= 2 * MAX_ENTRIES:  # a long session typing values: memory stays bounded
            return
        super().__setitem__(key, value)
        self.used.add(key)
        self.changed = True


_state: dict[str, Any] = {"path": None, "memo": None, "key": None}


def install(path: Path | None = None) -> None:
    """Give ``assembly.settings`` the verdicts kept in ``path`` (default: ``cache_path()``;
    none there means none are kept). Idempotent."""
    if _state["memo"] is not None:
        return
    path = path if path is not None else cache_path()
    if path is None:
        return
    key = fingerprint()
    if key is None:
        return
    memo = Verdicts(_read(path, key))
    _state.update(path=path, memo=memo, key=key)
    settings.remember_checks(memo)
    atexit.register(save)


def holds_verdicts() -> bool:
    """Whether ``install`` found verdicts of earlier runs (a first run, or one after the
    checking code or pydantic changed, finds none)."""
    memo = _state["memo"]
    return memo is not None and len(memo) > 0


def uninstall() -> None:
    """Undo ``install`` (the tests): every value is checked again."""
    if _state["memo"] is None:
        return
    save()
    atexit.unregister(save)
    settings.remember_checks(None)
    _state.update(path=None, memo=None, key=None)


def cache_path() -> Path | None:
    """Where the verdicts live: this module's bytecode folder, or the user's cache folder
    where the interpreter writes no bytecode; None if there is none."""
    from server.codecache import beside_bytecode

    if not sys.dont_write_bytecode:
        return beside_bytecode(__file__, f"settingscache.{sys.implementation.cache_tag}.marshal")
    folder = user_cache_dir()
    if folder is None or sys.implementation.cache_tag is None:
        return None
    # One file per copy of promptls (several checkouts or environments would otherwise
    # replace each other's verdicts on every run).
    import zlib

    copy = zlib.crc32(os.fsencode(os.path.dirname(os.path.abspath(__file__))))
    return folder / f"settingscache.{copy:08x}.{sys.implementation.cache_tag}.marshal"


CACHE_DIR_ENV = "PROMPTLS_CACHE_DIR"


def user_cache_dir() -> Path | None:
    """promptls' folder in the user's cache (``PROMPTLS_CACHE_DIR`` when set), None when
    there is no home to find it in."""
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return Path(explicit)
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA")
        return Path(base) / "promptls" / "Cache" if base else None
    if sys.platform == "darwin":
        home = os.path.expanduser("~")
        return Path(home) / "Library" / "Caches" / "promptls" if home != "~" else None
    base = os.environ.get("XDG_CACHE_HOME")
    if base and os.path.isabs(base):
        return Path(base) / "promptls"
    home = os.path.expanduser("~")
    return Path(home) / ".cache" / "promptls" if home != "~" else None


def fingerprint() -> tuple[str, ...] | None:
    """What the verdicts depend on: the checking code's text, pydantic's version file's,
    the interpreter's version; None when one cannot be read (then nothing is kept)."""
    from importlib.util import find_spec

    try:
        spec = find_spec("pydantic")
        places = list(spec.submodule_search_locations or ()) if spec is not None else []
        if not places:
            return None
        texts = [_text(Path(p)) for p in _sources(Path(places[0]) / "version.py")]
    except (OSError, ImportError, ValueError, UnicodeDecodeError):
        return None
    return (sys.version, *texts)


def _sources(pydantic_version: Path) -> Iterator[Path]:
    package = Path(settings.__file__).parent
    yield package / "settings.py"
    yield package / "settings_table.py"
    yield package / "settings_model.py"
    yield pydantic_version


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def save() -> None:
    """Write the verdicts if this run reached new ones (never raises)."""
    memo, path, key = _state["memo"], _state["path"], _state["key"]
    if memo is None or not memo.changed or path is None:
        return
    memo.changed = False
    entries = dict(memo) if len(memo) <= MAX_ENTRIES else {k: memo[k] for k in memo.used}
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(FORMAT + marshal.dumps((key, entries)))
        os.replace(tmp, path)
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def _read(path: Path, key: tuple[str, ...]) -> dict[Key, tuple[bool, Any]]:
    """The file's verdicts when they were reached by the code ``key`` names, else none.
    Only verdicts of the shape ``assembly.settings`` writes are kept."""
    try:
        data = path.read_bytes()
    except OSError:
        return {}
    if not data.startswith(FORMAT):
        return {}
    try:
        kept_key, entries = marshal.loads(memoryview(data)[len(FORMAT) :])
    except (EOFError, ValueError, TypeError):
        return {}
    if kept_key != key or type(entries) is not dict:
        return {}
    return {k: v for k, v in entries.items() if _well_formed(k, v)}


def _well_formed(key: Any, verdict: Any) -> bool:
    if not (type(key) is tuple and len(key) == 2 and all(type(p) is str for p in key)):
        return False
    if not (type(verdict) is tuple and len(verdict) == 2 and type(verdict[0]) is bool):
        return False
    return settings.is_plain(verdict[1]) if verdict[0] else type(verdict[1]) is str
