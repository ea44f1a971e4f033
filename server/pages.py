"""Keeping the server's resident memory to what it uses: one malloc arena, a shared
library's read-only data let go once it has been read, and no memory spent on what the
server imports but never runs.

``one_malloc_arena``: glibc gives each thread that allocates its own malloc arena (up to
eight a core), each grown and fragmented on its own. The server's threads take turns
under the GIL (the message loop, the analysis worker, the thread that loads the
tokenizer), so the arenas buy no parallelism, while the memory one thread frees stays in
its arena instead of serving the next thread's allocations: with one arena, the server's
peak with the 10 MB conversation open was 8-12 MB lower, and what it kept after 8-11 MB.
It also fixes the size from which a block is mapped on its own (``MMAP_THRESHOLD``).

bpe-openai's compiled module embeds its encodings' serialized tables (about 70 MB of
read-only data in the ``.so``). Loading an encoding reads its tables once and builds the
structures it counts with on the heap; the file pages it read stay mapped in the process
afterwards (32 MB of resident memory for ``o200k_base``) though nothing reads them again.
The kernel drops such clean file pages only under memory pressure; ``release_file_pages``
drops them now (``madvise(MADV_DONTNEED)``), so the server's resident set is what it uses.

Only mappings that are private, not writable and hold no anonymous page are released:
their content is the file's, and a page read again is read back from the file (as after
the kernel's own reclaim). A mapping the dynamic linker relocated (RELRO) holds anonymous
pages and is never touched. Linux only; elsewhere, or on any failure, nothing is done.

``import_asyncio_without_ssl``: asyncio imports ``ssl`` for TLS transports (OpenSSL's
libssl, the ``_ssl`` module and its set-up: about 4 MB resident), which a language server on
stdio or a loopback socket never makes. ``forget_generated_sources``: attrs keeps the source
of every method it generates in ``linecache`` (for debuggers), 1.5 MB for lsprotocol's
classes, read only when a traceback passes through one of them.
"""

from __future__ import annotations

import os
import sys

MADV_DONTNEED = 4  # Linux' value (asm-generic/mman-common.h)
M_ARENA_MAX = -8  # glibc's ``mallopt`` parameter (malloc.h)
M_MMAP_THRESHOLD = -3
# glibc maps a block this large on its own, and unmaps it when freed. Its default moves the
# threshold up to the largest block freed so far (up to 32 MB): once a few MB block was
# freed (a 10 MB ``didOpen``'s pieces, an outline's bytes), blocks up to that size come
# from the heap, and the holes they leave there are filled with small objects that keep
# the heap from shrinking. Fixed, the 10 MB open kept 6 MB less. At 512 KB, the parse's
# windows (``syntax.WINDOW_CHARS``: at most 256 KB) stay in the heap, each reusing the
# block the last one freed.
MMAP_THRESHOLD = 512 * 1024
# The names attrs and cattrs give the sources they compile (``linecache`` keys).
GENERATED_SOURCES = ("<attrs generated", "<cattrs generated")


def one_malloc_arena() -> bool:
    """Make glibc's malloc use one arena for every thread started from now on (the
    main thread's), and map every block of ``MMAP_THRESHOLD`` bytes or more on its own;
    False when not on glibc or a call failed. Call it before the server starts its
    threads."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt  # (musl has none: AttributeError)
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        mallopt.restype = ctypes.c_int
        return bool(mallopt(M_ARENA_MAX, 1)) and bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (OSError, AttributeError):
        return False


def import_asyncio_without_ssl() -> bool:
    """Import asyncio with ``ssl`` unavailable, so that its modules keep ``ssl = None`` (as
    on a Python built without OpenSSL) and never load it; ``ssl`` stays importable by
    anything that asks for it later. False (nothing done) when asyncio or ssl was imported
    already. asyncio then refuses a TLS transport (``ssl=`` given), which the server never
    asks for."""
    if "asyncio" in sys.modules or "ssl" in sys.modules:
        return False
    sys.modules["ssl"] = None  # type: ignore[assignment]  # ``import ssl`` raises ImportError
    try:
        import asyncio  # noqa: F401
    finally:
        del sys.modules["ssl"]
    return True


def forget_generated_sources() -> int:
    """Drop the generated sources attrs and cattrs put in ``linecache`` (a traceback through
    a generated method then shows no source line); returns how many were dropped."""
    import linecache

    names = [k for k in linecache.cache if isinstance(k, str) and k.startswith(GENERATED_SOURCES)]
    for k in names:
        linecache.cache.pop(k, None)
    return len(names)


def release_file_pages(path: str) -> int:
    """Drop the resident read-only pages mapped from the file at ``path``; returns the bytes
    of mappings released (0 when not on Linux, nothing matched, or a call failed)."""
    if not sys.platform.startswith("linux") or not path:
        return 0
    try:
        real = os.path.realpath(path)
        ranges = _clean_readonly_ranges(real)
        if not ranges:
            return 0
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        madvise.restype = ctypes.c_int
        released = 0
        for start, end in ranges:
            if madvise(start, end - start, MADV_DONTNEED) == 0:
                released += end - start
        return released
    except (OSError, ValueError, AttributeError):
        return 0


def _clean_readonly_ranges(path: str) -> list[tuple[int, int]]:
    """The address ranges mapped from ``path`` private and read-only with no anonymous
    (copy-on-write) page, from ``/proc/self/smaps``."""
    res: list[tuple[int, int]] = []
    candidate: tuple[int, int] | None = None
    with open("/proc/self/smaps", encoding="utf-8", errors="replace") as f:
        for line in f:
            head = line.split(maxsplit=5)
            if len(head) >= 5 and "-" in head[0] and not head[0].endswith(":"):
                candidate = None
                if len(head) == 6 and head[5].rstrip("\n") == path and head[1] == "r--p":
                    lo, _, hi = head[0].partition("-")
                    candidate = (int(lo, 16), int(hi, 16))
            elif candidate is not None and head and head[0] == "Anonymous:":
                if head[1] == "0":
                    res.append(candidate)
                candidate = None
    return res
