"""The command line's JSON documents, written as ``json.dumps(obj, ensure_ascii=False,
indent=2)`` writes them, in about 60 % of its time.

With ``indent``, the standard library does not use its C encoder (CPython 3.11–3.13): a
chain of Python generators yields each token, and the 1 MB benchmark conversation's
``assemble --format json`` (600 KB of JSON) spent 17–20 ms there, 7 % of the whole cold
command. ``dumps`` walks the value once, writing each container's members in its own
loop, and leaves each string to the standard library's own C escaping
(``json.encoder.encode_basestring``): the text is the same, character for character.

It writes the plain JSON types only (``dict`` with ``str`` keys, ``list``, ``tuple``,
``str``, ``int``, ``float``, ``bool``, ``None``, exactly those types). A value holding
anything else (a subclass, a non-string key, a type ``json`` refuses), or nested deeper
than the interpreter's recursion limit allows, is written by ``json.dumps`` itself, which
then gives its own text or its own error (a circular reference, say): one way to say what
the text is.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring as _quoted  # (C, without ensure_ascii)
from typing import Any

_INFINITY = float("inf")
_float = float.__repr__
_int = int.__repr__


class _NotPlain(Exception):
    """A value ``dumps`` leaves to ``json.dumps``."""


def dumps(obj: Any) -> str:
    """``json.dumps(obj, ensure_ascii=False, indent=2)``."""
    parts: list[str] = []
    try:
        if type(obj) is dict or type(obj) is list or type(obj) is tuple:
            _container(obj, "\n", parts.append)
        else:
            parts.append(_scalar(obj))
    except (_NotPlain, RecursionError):
        return json.dumps(obj, ensure_ascii=False, indent=2)
    return "".join(parts)


def _container(value: Any, indent: str, put: Any) -> None:
    """Write a dict, list or tuple whose closing bracket goes after ``indent`` (a newline
    and two spaces per level); its members go one level deeper. (The two loops write a
    member alike, each in its own body: one loop over keys and members zipped for both
    kinds took a third longer.)"""
    inner = indent + "  "
    if type(value) is dict:
        if not value:
            put("{}")
            return
        sep = "{" + inner
        for key, x in value.items():
            if type(key) is not str:
                raise _NotPlain
            put(sep + _quoted(key) + ": ")
            sep = "," + inner
            t = type(x)
            if t is str:
                put(_quoted(x))
            elif t is dict or t is list or t is tuple:
                _container(x, inner, put)
            else:
                put(_scalar(x))
        put(indent + "}")
        return
    if not value:
        put("[]")
        return
    sep = "[" + inner
    for x in value:
        put(sep)
        sep = "," + inner
        t = type(x)
        if t is str:
            put(_quoted(x))
        elif t is dict or t is list or t is tuple:
            _container(x, inner, put)
        else:
            put(_scalar(x))
    put(indent + "]")


def _scalar(value: Any) -> str:
    t = type(value)
    if t is str:
        return _quoted(value)  # type: ignore[no-any-return]
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if t is int:
        return _int(value)
    if t is float:
        if value != value:
            return "NaN"
        if value == _INFINITY:
            return "Infinity"
        if value == -_INFINITY:
            return "-Infinity"
        return _float(value)
    raise _NotPlain
