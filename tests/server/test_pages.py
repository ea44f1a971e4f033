"""Releasing a shared library's read-only pages once read (``server/pages.py``).

Each check runs in a fresh interpreter: the tokenizer is loaded once per process, and what
is measured is that process' own resident memory (``/proc/self/smaps``), on Linux.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from server import pages, tokenizers

ROOT = Path(__file__).resolve().parents[2]

_PROBE = textwrap.dedent(
    """
    import json, sys
    from server import tokenizers

    def resident_kb(path):
        total, mine = 0, False
        with open("/proc/self/smaps") as f:
            for line in f:
                head = line.split(maxsplit=5)
                if len(head) >= 5 and "-" in head[0] and not head[0].endswith(":"):
                    mine = len(head) == 6 and head[5].strip() == path
                elif mine and head[0] == "Rss:":
                    total += int(head[1])
        return total

    if sys.argv[2] == "server":
        tokenizers.release_tables()  # as the language server does (``Session.warm_up``)
    tok = tokenizers.load_tokenizer("o200k_base").tokenizer
    module = tokenizers._bpe_bindings()
    text = sys.argv[1]
    counts = [tok.count(text), tokenizers.fast_counter("o200k_base")(text * 50)]
    print(json.dumps({"kb": resident_kb(module.__file__), "counts": counts}))
    """
)


def _probe(text: str, role: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, text, role],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_the_fast_backend_keeps_no_table_data_resident_and_counts_the_same() -> None:
    module = tokenizers._bpe_bindings()
    assert module is not None, "bpe-openai is a dependency: its module must load"
    text = "Hello, world! 你好，世界 👩\u200d👩\u200d👧 " * 20
    reference = tokenizers.reference_encoding("o200k_base")[0]
    expected = [len(reference.encode_ordinary(text)), len(reference.encode_ordinary(text * 50))]
    got = _probe(text, "server")
    # Loading o200k_base reads ~32 MB of the module's embedded tables; after the release
    # only code pages in use stay (under 8 MB), and counting never reads the tables again.
    assert got["kb"] < 8 * 1024, got
    assert got["counts"] == expected
    # A one-shot command keeps them (it ends soon): the same counts.
    kept = _probe(text, "one-shot")
    assert kept["kb"] > 16 * 1024, kept
    assert kept["counts"] == expected


def test_a_mapping_the_loader_wrote_to_is_never_released(tmp_path: Path) -> None:
    module = tokenizers._bpe_bindings()
    ranges = pages._clean_readonly_ranges(str(Path(module.__file__).resolve()))
    assert ranges, "the module's read-only data is mapped"
    relocated = []
    with open("/proc/self/smaps") as f:
        current = None
        for line in f:
            head = line.split(maxsplit=5)
            if len(head) >= 5 and "-" in head[0] and not head[0].endswith(":"):
                lo, _, hi = head[0].partition("-")
                current = (int(lo, 16), int(hi, 16)), head
            elif current is not None and head[0] == "Anonymous:" and head[1] != "0":
                rng, h = current
                if len(h) == 6 and h[5].strip() == str(Path(module.__file__).resolve()):
                    relocated.append(rng)
    # The dynamic linker's relocated data (RELRO) holds private copies: dropping them would
    # read the unrelocated file back (a crash). They are never among the released ranges.
    assert relocated
    assert not set(relocated) & set(ranges)


def test_nothing_is_released_for_a_file_not_mapped(tmp_path: Path) -> None:
    assert pages.release_file_pages(str(tmp_path / "absent.so")) == 0
    assert pages.release_file_pages("") == 0


_THREAD_ARENAS = """
import sys, threading
from server import pages
assert pages.one_malloc_arena() if sys.argv[1] == "one" else True

def reserved() -> int:  # address ranges reserved with no access: thread stacks' guards, arenas
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if line.split()[1:2] == ["---p"] and len(line.split()) == 5)

before = reserved()
kept = []
together = threading.Barrier(3)  # all three threads alive at once (a finished thread's arena
def work() -> None:  # is handed to the next one), each allocating through malloc
    together.wait()
    kept.append([bytearray(2000) for _ in range(1000)])
    together.wait()
threads = [threading.Thread(target=work) for _ in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(reserved() - before)
"""


def test_threads_share_the_main_malloc_arena() -> None:
    # Without ``one_malloc_arena`` each thread that allocates reserves an arena of its own
    # (an address range with no access, beside its stack's guard page); with it, none.
    assert int(_script_output(_THREAD_ARENAS, "one")) < int(
        _script_output(_THREAD_ARENAS, "default")
    )


_LARGE_BLOCKS = """
import sys
from server import pages
assert pages.one_malloc_arena() if sys.argv[1] == "one" else True

def in_heap(address: int) -> bool:
    with open("/proc/self/maps") as f:
        for line in f:
            if line.rstrip().endswith("[heap]"):
                lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                if lo <= address < hi:
                    return True
    return False

big = bytes(4 << 20)
del big  # glibc's default raises its threshold to 4 MB here
block = bytes(1 << 20)
print(in_heap(id(block)))
"""


def test_large_blocks_are_mapped_on_their_own_after_a_larger_one_is_freed() -> None:
    # glibc's moving threshold puts a 1 MB block in the heap once a 4 MB one was freed (its
    # holes there fill with small objects); the server's fixed threshold maps it.
    in_heap = (_script_output(_LARGE_BLOCKS, mode) for mode in ("one", "default"))
    assert tuple(in_heap) == ("False", "True")


def _script_output(script: str, mode: str) -> str:
    """What ``script`` prints, run in a fresh interpreter with ``mode`` as its argument."""
    out = subprocess.run(
        [sys.executable, "-c", script, mode], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return out.stdout.strip()


_WITHOUT_OPENSSL = """
import contextlib, sys
from server import pages

with pages.without_openssl() if sys.argv[1] == "without" else contextlib.nullcontext(True) as did:
    import asyncio, hashlib, hmac, secrets

loaded = sorted({"ssl", "_hashlib"} & set(sys.modules))

async def echo() -> bytes:
    async def handle(reader, writer):
        writer.write(await reader.readline())
        await writer.drain()
        writer.close()
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"hello\\n")
    got = await reader.readline()
    writer.close()
    server.close()
    return got

got = asyncio.run(echo()) == b"hello\\n"
digests = (
    hashlib.sha256(b"x").hexdigest()[:8],
    hashlib.sha1(b"x").hexdigest()[:8],
    hmac.new(b"k", b"x", "sha256").hexdigest()[:8],
    len(secrets.token_hex(8)),
)
import ssl  # still importable by whatever asks for it later

with pages.without_openssl() as again:
    pass
print(did, loaded, got, digests, bool(ssl.OPENSSL_VERSION), again)
"""


def test_asyncio_and_hashes_work_without_openssl_loaded() -> None:
    # The same digests from Python's own implementations; sockets as before; once ssl is
    # loaded, nothing is blocked any more.
    digests = "('2d711642', '11f6ad8e', 'c38edc88', 16)"
    assert _script_output(_WITHOUT_OPENSSL, "without") == f"True [] True {digests} True False"
    default = _script_output(_WITHOUT_OPENSSL, "default")
    assert default == f"True ['_hashlib', 'ssl'] True {digests} True False"


_SERVE = """
import linecache, sys
from server.cli.main import main

status = main(["serve"])  # stdin is empty: the server starts and stops (its stdout closed)
generated = [k for k in linecache.cache if k.startswith(("<attrs generated", "<cattrs gen"))]
# A settings value no earlier run checked imports the settings model late, if the server
# did not at start (``server.settingscache``): OpenSSL stays out then too.
import assembly.settings_model
unused = {"ssl", "_hashlib", "server.cli.diff", "server.cli.lint", "server.htmlview"}
unused = sorted(unused & set(sys.modules))
print(status, "lsprotocol.types" in sys.modules, len(generated), unused, file=sys.stderr)
"""


@pytest.mark.parametrize("verdicts", ["none kept", "kept"])
def test_the_server_starts_without_what_it_does_not_run(tmp_path: Path, verdicts: str) -> None:
    # No OpenSSL (asyncio's import of ssl, pydantic's of secrets, at start or later), no
    # diff/lint driver or HTML view until a template lens or a page asks for them, no
    # generated attrs sources kept for a debugger. With settings verdicts kept, the server
    # imports pydantic only when a value misses them (``server.settingscache``).
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PROMPTLS_CACHE_DIR": str(tmp_path)}
    if verdicts == "kept":
        doc = tmp_path / "c.conv.json"
        doc.write_text('{"settings": {"model": "gpt-4o"}, "messages": []}')
        run = [sys.executable, "-m", "server.cli", "assemble", str(doc)]
        subprocess.run(run, capture_output=True, check=True, cwd=ROOT, env=env)
        assert list(tmp_path.glob("settingscache.*.marshal"))
    out = subprocess.run(
        [sys.executable, "-c", _SERVE],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    assert out.stderr.strip().splitlines()[-1] == "0 True 0 []", out.stderr[-2000:]


_SLIM = """
import json, sys, types
from lsprotocol import converters, types as lsp
from server import pages

converter = converters.get_converter()
MESSAGE = {
    "range": {"start": {"line": 1, "character": 2}, "end": {"line": 3, "character": 4}},
    "message": "m",
    "severity": 2,
    "code": "x",
    "relatedInformation": [],
}

def sample():
    d = converter.structure(MESSAGE, lsp.Diagnostic)
    p = lsp.Position(line=5, character=6)
    return [
        repr(d),
        json.dumps(converter.unstructure(d), sort_keys=True),
        d == converter.structure(MESSAGE, lsp.Diagnostic),
        p == lsp.Position(5, 6),
        p != lsp.Position(5, 7),
        repr(lsp.Range(start=p, end=p)),
    ]

before = sample()
rebuilt = pages.slim_generated_globals(lsp)
modules = {id(vars(m)) for m in list(sys.modules.values()) if m is not None}
widest = max(  # of the methods compiled over globals that are no module's namespace
    len(f.__globals__)
    for c in vars(lsp).values()
    if isinstance(c, type) and "__attrs_attrs__" in c.__dict__
    for f in vars(c).values()
    if isinstance(f, types.FunctionType) and id(f.__globals__) not in modules
)
print(json.dumps([before == sample(), rebuilt > 500, widest < 50, before == sample()]))
"""


def test_lsprotocol_classes_behave_the_same_over_slim_globals() -> None:
    # Structured, compared, printed and unstructured the same after the methods attrs
    # generated are rebuilt over a few names each (not a copy of the module's 300-odd).
    assert _script_output(_SLIM, "") == "[true, true, true, true]"
