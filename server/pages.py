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

What the server imports and never runs (``without_openssl``, ``let_go_of_import_leftovers``):
- asyncio imports ``ssl`` for TLS transports (OpenSSL's libssl, the ``_ssl`` module and its
  set-up: about 4 MB resident), which a language server on stdio or a loopback socket never
  makes; pydantic imports ``secrets``, whose ``hmac`` loads OpenSSL's libcrypto through
  ``_hashlib`` (3 MB resident) for hashes Python has built in;
- attrs keeps the source of every method it generates in ``linecache`` (for debuggers),
  1.5 MB for lsprotocol's classes, read only when a traceback passes through one of them;
- attrs compiles a class's methods over a namespace of their own, a copy of the class's
  module's (``lsprotocol.types``: 557 copies of its 300-odd names, 5.3 MB); each is rebuilt
  over only the names its methods read.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager

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
OPENSSL_MODULES = ("ssl", "_hashlib")
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


@contextmanager
def without_openssl() -> Iterator[bool]:
    """While in it, OpenSSL's Python modules (``ssl``, ``_hashlib``) cannot be imported, as
    on a Python built without OpenSSL: asyncio's modules keep ``ssl = None`` (no TLS
    transport, which the server never makes), and ``hashlib`` and ``hmac`` use Python's own
    implementations (md5, sha1, sha2, sha3, blake2: every hash promptls takes). Both stay
    importable afterwards by whatever asks for them. Yields False (nothing blocked) when
    either was imported already."""
    if "ssl" in sys.modules or "_hashlib" in sys.modules:
        yield False
        return
    for name in OPENSSL_MODULES:
        sys.modules[name] = None  # type: ignore[assignment]  # ``import`` raises ImportError
    try:
        yield True
    finally:
        for name in OPENSSL_MODULES:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def let_go_of_import_leftovers() -> None:
    """What the server's imports left that it never reads: the generated sources in
    ``linecache`` and the copies of lsprotocol's namespace (call it once they are done)."""
    forget_generated_sources()
    module = sys.modules.get("lsprotocol.types")
    if module is not None:
        slim_generated_globals(module)


def forget_generated_sources() -> int:
    """Drop the generated sources attrs and cattrs put in ``linecache`` (a traceback through
    a generated method then shows no source line); returns how many were dropped."""
    import linecache

    names = [k for k in linecache.cache if isinstance(k, str) and k.startswith(GENERATED_SOURCES)]
    for k in names:
        linecache.cache.pop(k, None)
    return len(names)


def slim_generated_globals(module: types.ModuleType) -> int:
    """Rebuild the methods attrs generated for ``module``'s classes over globals holding only
    the names their code reads (and the builtins): the same code, defaults, closure, names,
    annotations and attributes, so they behave the same; the copies of the module's namespace
    they were compiled over are let go. Returns how many methods were rebuilt. A method
    whose globals are a module's own namespace (written in a module, not generated) is left
    as it is."""
    modules = {id(vars(m)) for m in list(sys.modules.values()) if hasattr(m, "__dict__")}
    rebuilt = 0
    for cls in list(vars(module).values()):
        if not isinstance(cls, type) or "__attrs_attrs__" not in cls.__dict__:
            continue
        slim: dict[int, dict[str, object]] = {}  # a class's methods shared one namespace
        for name, f in list(cls.__dict__.items()):
            # (``type(f) is``: ``isinstance`` asks some of the classes' attributes for their
            # ``__class__``, a tenth of this function's time)
            if type(f) is not types.FunctionType or id(f.__globals__) in modules:
                continue
            copy = f.__globals__
            names = slim.get(id(copy))
            if names is None:
                names = slim[id(copy)] = {
                    k: copy[k] for k in ("__builtins__", "__name__") if k in copy
                }
            names.update((k, copy[k]) for k in _global_names(f.__code__) if k in copy)
            new = types.FunctionType(f.__code__, names, f.__name__, f.__defaults__, f.__closure__)
            new.__kwdefaults__ = f.__kwdefaults__
            new.__qualname__ = f.__qualname__
            new.__doc__ = f.__doc__
            new.__module__ = f.__module__
            new.__annotations__ = f.__annotations__
            new.__dict__.update(f.__dict__)
            setattr(cls, name, new)
            rebuilt += 1
    return rebuilt


def _global_names(code: types.CodeType) -> Iterator[str]:
    """The names ``code`` (and the code nested in it) may look up in its globals."""
    yield from code.co_names
    for const in code.co_consts:
        if type(const) is types.CodeType:
            yield from _global_names(const)


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
