"""Reading files safely: only regular files, their size checked before reading.

Every file promptls reads on its own account (a document, its settings file, a
``.gitignore``, a template, a project file) goes through ``read_bytes``: it asks ``stat``
first and refuses what is not a regular file (a FIFO would block for ever, ``/dev/zero``
never ends, a socket or a device has no content) and what is larger than the limit, before
reading a byte; then it opens without blocking, checks the opened file again (it may have
been swapped since the ``stat``) and reads at most the limit. Problems that the path itself
causes (a dangling or looping symlink, a NUL byte, a name component over 255 bytes) are a
``FileProblem`` with a one-line reason, never an exception of the operating system.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

MAX_FILE_BYTES = 64 * 1024 * 1024


class FileProblem(Exception):
    """A file that was not read, and why (``code``: the rule code that reports it:
    ``file-not-found`` or ``document-too-large``)."""

    def __init__(self, reason: str, code: str = "file-not-found") -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words ("a FIFO (named pipe)", …)."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def path_problem(exc: BaseException) -> str:
    """A one-line reason for an error raised by a path operation."""
    if isinstance(exc, ValueError):  # "embedded null byte"
        return "the path contains a NUL byte"
    if isinstance(exc, RuntimeError):  # pathlib's "Symlink loop from …"
        return "a symbolic link loop"
    if isinstance(exc, OSError):
        return {
            errno.ENOENT: "no such file",
            errno.ENOTDIR: "a part of the path is not a directory",
            errno.ELOOP: "a symbolic link loop",
            errno.ENAMETOOLONG: "a name in the path is too long",
            errno.EACCES: "permission denied",
            errno.EPERM: "permission denied",
        }.get(exc.errno or 0, exc.strerror or type(exc).__name__)
    return type(exc).__name__


def check_regular(path: Path | str, *, limit: int | None = MAX_FILE_BYTES) -> os.stat_result:
    """``stat`` a file (following symlinks) and return it, or raise ``FileProblem``.

    A dangling symlink is "no such file"; ``limit`` None: any size.
    """
    try:
        st = os.stat(path)
    except (OSError, ValueError) as exc:
        if isinstance(exc, OSError) and exc.errno == errno.ENOENT and os.path.islink(path):
            raise FileProblem("a dangling symbolic link") from None
        raise FileProblem(path_problem(exc)) from None
    _check_stat(st, limit)
    return st


def _check_stat(st: os.stat_result, limit: int | None) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise FileProblem(f"{kind_of(st.st_mode)}, not a regular file")
    if limit is not None and st.st_size > limit:
        raise FileProblem(
            f"the file is {st.st_size:,} bytes; the limit is {limit:,}", code="document-too-large"
        )


def read_bytes(path: Path | str, *, limit: int = MAX_FILE_BYTES) -> bytes:
    """The contents of a regular file of at most ``limit`` bytes, or raise ``FileProblem``."""
    check_regular(path, limit=limit)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError) as exc:
        raise FileProblem(path_problem(exc)) from None
    try:
        st = os.fstat(fd)
        _check_stat(st, limit)  # the file may have been replaced since the stat
        chunks = []
        left = limit + 1
        # The first read asks for the whole file (and a byte more, to see its end): one
        # buffer, no joining copy (a 10 MB document read in 4 MB pieces and joined took
        # twice as long). A file that grows meanwhile is read on in pieces.
        size = st.st_size + 1 if st.st_size > 0 else 1 << 22
        while left > 0:
            chunk = os.read(fd, min(left, size))
            size = 1 << 22
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:  # it grew past the limit while being read
            raise FileProblem(f"the file is over {limit:,} bytes", code="document-too-large")
        return b"".join(chunks)
    except OSError as exc:
        raise FileProblem(path_problem(exc)) from None
    finally:
        os.close(fd)


def read_text(path: Path | str, *, limit: int = MAX_FILE_BYTES) -> str:
    """A regular file decoded as UTF-8 (invalid bytes replaced), or raise ``FileProblem``."""
    return read_bytes(path, limit=limit).decode("utf-8", errors="replace")
