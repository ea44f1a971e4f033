"""Counting a large document's tokens in a forked process while this one parses it.

Both counting backends (tiktoken, bpe-openai) hold the GIL while they count, so threads
do not overlap counting with our (pure Python) parsing; a forked child does. The child
reads the document's values with the standard library's C parsers (no positions needed),
counts every string of at least ``MIN_CHARS`` with the same encoding, and sends back the
encoding's name and ``(hash, length, count)`` triples (a forked child shares this
process's string hashes), in batches as it counts, newest messages first.
``PendingCounts.seed`` then fills the tokenizer's cache for the strings of the parsed
conversation, so the pipeline finds them counted. It only ever saves time: if anything
fails, nothing is seeded and the pipeline counts as usual.

The language server forks the child of a large document as soon as its ``didOpen``'s
bytes have arrived (``start_open``, from ``server.lsp.stream``), before it decodes them:
the child reads the message with ``json``'s C parser while the server builds the rope and
starts the analysis, which tells it the format and the tokenizer (``count_with``). Other
large documents get a child when their analysis starts (``start``). Neither is waited
for: ``seed`` takes the batches already sent, and the child goes on counting while the
pipeline converts the messages: a text not seeded is asked of it first (``late``, through
``CachedTokenizer.elsewhere``), else counted in place. The child counts the newest
messages first and the pipeline converts the oldest first, so they meet in the middle;
the history's budget often never reaches the oldest (a fifth of the 10 MB benchmark
conversation's text is never counted). The analysis' end stops the child, and a killed
child is reaped on a thread of its own: the analysis waits for neither a slow child, nor
counts it does not need, nor the system freeing a child's memory.

The command line's child (``start_early``) also loads the encoding, instead of this
process: it then stays to count, on request, the texts the pipeline makes (a file's
``File: …`` block, a rendered tool call), one round trip each, so that this process never
loads the encoding (20–50 ms of its critical path) unless the child stops answering.
Started ``on_demand`` (``promptls assemble``), it is not waited for either: ``seed`` does
nothing when the tokenizer counts through the child, and ``count`` looks texts up in the
batches sent so far before asking the child, in one request, for the texts still missing
(the pipeline asks for its branch's texts at once). A request stops the child's own
counting (between two batches): what it had not reached yet is the oldest text, which the
branch often never reads (a document's summary covers it), and whatever is asked later is
counted on request.
"""

from __future__ import annotations

import _thread
import contextlib
import gc
import json
import marshal
import os
import re
import select
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from server import files  # the standard library only
from server.cpus import usable_cpus  # so is this

# This module imports the standard library only, and none of its heavier modules
# (``dataclasses`` pulls in ``inspect``, ``ast``, ``dis``…): ``start_early`` runs before
# anything else is imported, and every millisecond before the fork delays the child.
if TYPE_CHECKING:  # nor the engine
    from assembly.model import Conversation
    from assembly.rope import Rope
    from assembly.tokens import Tokenizer

MIN_DOCUMENT_CHARS = 2_000_000  # below this, forking a loaded process costs more than it saves
# Before the engine is imported, forking is cheap: ``assemble`` forks the child of a document
# of any size. Its child loads the encoding, which this process then never loads: 20-100 ms
# off a cold command's critical path, the longest part of a small document's.
MIN_EARLY_CHARS = 0
# From this size on, a document's shape decides whether a child is worth its memory
# (``_worth_forking``); a smaller one's values cost it little whatever they are.
MIN_SHAPED_CHARS = 250_000
# Strings shorter than this are counted in place: ids, roles and names, which would only
# cost the child calls and the seeding lookups. Longer ones are counted by the child,
# short message texts too: at 10 MB, 256 left the parent counting 2,600 texts (0.8 M
# characters, ~25 ms of its critical path) that the child counts in parallel.
MIN_CHARS = 32
# JSON whose strings are shorter than this on average is not worth a child (the 10 MB
# benchmark conversation averages 77 characters a string).
MIN_MEAN_STRING_CHARS = 24
MAX_YAML_LINES = 250_000
# The parent waits at most this long for the counts (then stops the child and counts in
# place): the child's work is linear in the document (aliases are walked once), so this is
# only a safety net.
TIMEOUT_S = 20.0
# The child sends its counts in batches of about this many characters counted (a few ms of
# counting each): what a parent that does not wait (``PendingCounts.drain``) can take.
BATCH_CHARS = 200_000
# The pipe's buffer is grown to this (Linux; the unprivileged maximum by default), so a
# child that is not read from until ``seed`` never blocks on writing its batches (the 10 MB
# benchmark conversation's are about 300 KB).
PIPE_BYTES = 1 << 20
_F_SETPIPE_SZ = 1031  # fcntl's command on Linux
# A drained child still counting (``PendingCounts.late``) is looked at for new batches at
# most this often (a batch is a few ms of counting; a look, a system call or two).
POLL_S = 0.002
# A request of this many characters (about 25 ms of counting) is counted by the serving
# child and a helper it forks, in parallel (``_count_all``).
SPLIT_CHARS = 1_000_000


class PendingCounts:
    """A child process counting; ``seed`` waits for it and fills the tokenizer's cache."""

    __slots__ = (
        "_buffer",
        "_ended",
        "_next_poll",
        "_owner",
        "_sent",
        "_tokenizer",
        "closed",
        "drain",
        "encoding",
        "fd",
        "go",
        "on_demand",
        "pid",
        "received",
        "replies",
        "requests",
        "serves",
    )

    def __init__(
        self,
        pid: int,
        fd: int,
        encoding: str | None,  # the encoding the child counts with (None: the child picks it)
        *,
        requests: int | None = None,  # a serving child's request pipe (``count``)
        replies: int | None = None,
        drain: bool = False,
        serves: str | None = None,  # the encoding a serving child counts requests with
        go: int | None = None,  # an open's child waits for what to count with (``count_with``)
    ) -> None:
        self.pid = pid
        self.fd = fd
        self.encoding = encoding
        self.go = go
        self.closed = False
        self.requests = requests
        self.replies = replies
        self.received: tuple[str | None, dict[int, tuple[int, int]]] | None = None
        # Take the batches sent so far and stop the child, instead of waiting for all of
        # them (a child that does not serve ``count``; see the module's docstring).
        self.drain = drain
        # A serving child is not waited for: its counts are taken as they arrive, and the
        # texts still missing when asked for are counted on request (``count``).
        self.on_demand = False
        self.serves = serves
        self._buffer = b""  # what was read of a batch not received whole yet
        self._ended = False  # the child closed its end of the counts' pipe
        # The counts received so far: (encoding, by hash: (length, count)); encoding None
        # while nothing is received, and for good when a batch could not be trusted.
        self._sent: tuple[str | None, dict[int, tuple[int, int]]] = (None, {})
        # A drained child still counting after ``seed``: the tokenizer that asks it
        # (``late``), from the thread that seeded it, looking for new batches at most
        # every ``POLL_S``.
        self._tokenizer: Any = None
        self._owner = 0
        self._next_poll = 0.0

    @property
    def awaiting(self) -> bool:
        """A child forked when a ``didOpen`` arrived (``start_open``) that has not been
        told yet how to read and count its document (``count_with``)."""
        return self.go is not None and not self.closed

    def count_with(self, fmt: str, encoding: str | None, model: str | None) -> None:
        """Tell a ``start_open`` child the document's format and the tokenizer to count
        with (``server.tokenizers.load_tokenizer``'s arguments: the child loads it too when
        it was not loaded before the fork)."""
        go, self.go = self.go, None
        if go is None or self.closed:
            return
        try:
            _write_all(go, marshal.dumps((str(fmt), encoding, model)))
        except OSError:  # the child is gone: nothing will be sent
            self.close()
        finally:
            os.close(go)

    def seed(self, conv: Conversation, tokenizer: Tokenizer) -> int:
        """Seed the counts of the conversation's strings; return how many were seeded.

        Counts of another encoding than the tokenizer's are not used. A child that serves
        ``count`` stays; any other is done.
        """
        if (
            self.on_demand
            and not conv.records
            and self.requests is not None
            and not self.closed
            and getattr(tokenizer, "encoding", None) == self.serves
        ):
            # The tokenizer counts through this child (``count``), which looks up what it
            # sent before asking: nothing to wait for, nor to seed (the counts are looked
            # up for the texts the pipeline asks for, not for every string of the document).
            # A dataset's records are assembled one after the other, the first first, and
            # the child counts the last first: they wait for all its counts, as before (a
            # request would stop it, and each record would then ask for its own texts).
            return 0
        # The strings are found and hashed (a ``str`` keeps its hash) before waiting: the
        # child is often still counting when the parse and the read are done.
        texts = [(text, hash(text)) for text in _strings(conv)]
        # A drained child still counting goes on while the pipeline counts (``late``).
        follow = self.drain and getattr(tokenizer, "elsewhere", False) is None
        try:
            encoding, counts = self._arrived() if follow else self._counts()
        finally:
            if self.requests is None and not follow:
                self.close()
        if follow:
            if self._ended or self.closed or encoding not in (None, tokenizer.encoding):
                self.close()  # every count is in, or none of another encoding is of use
            else:
                self._tokenizer, self._owner = tokenizer, _thread.get_ident()
                self._next_poll = time.monotonic() + POLL_S
                tokenizer.elsewhere = self.late
        seed = getattr(tokenizer, "seed", None)
        if not counts or seed is None or tokenizer.encoding != encoding:
            return 0
        found = {}
        get = counts.get
        for text, h in texts:
            known = get(h)
            if known is not None and known[0] == len(text):
                found[text] = known[1]
        seed(found)
        return len(found)

    def late(self, text: str) -> int | None:
        """The count of ``text`` if a drained child still counting has sent it since
        ``seed`` (the tokenizer asks before counting a text itself), else None.

        The child counts the newest messages first and the pipeline converts the oldest
        first, so the two meet in the middle instead of this process counting everything
        the child had not reached when the parse and the read were done. Only the thread
        that seeded asks (a hover meanwhile counts alone); the pipe is read at most every
        ``POLL_S``.
        """
        if self.closed or _thread.get_ident() != self._owner:
            return None
        if not self._ended:
            now = time.monotonic()
            if now >= self._next_poll:
                self._next_poll = now + POLL_S
                try:
                    self._read(None)
                except (OSError, ValueError):  # never a reason for the analysis to fail
                    self._ended = True
        encoding, counts = self._checked()
        if encoding is None or encoding != getattr(self._tokenizer, "encoding", None):
            return None
        found = counts.get(hash(text))
        return found[1] if found is not None and found[0] == len(text) else None

    def count(self, texts: list[str]) -> list[int] | None:
        """A serving child's counts of ``texts`` (in the encoding it serves), or None when
        there is no such child or it does not answer (it is then stopped)."""
        if self.requests is None or self.replies is None or self.closed:
            return None
        known: list[int | None] = [None] * len(texts)
        if self.on_demand:
            # Those it has counted and sent by now are not asked for: the rest at once.
            encoding, counts = self._arrived()
            if encoding is not None and encoding == self.serves:
                for i, text in enumerate(texts):
                    found = counts.get(hash(text))
                    if found is not None and found[0] == len(text):
                        known[i] = found[1]
            missing = [text for text, n in zip(texts, known, strict=True) if n is None]
            if not missing:
                return [n for n in known if n is not None]
            asked = self._ask(missing)
            if asked is None:
                return None
            answers = iter(asked)
            return [next(answers) if n is None else n for n in known]
        self._counts()  # first what the child sends first: it answers after
        if self.closed:
            return None
        return self._ask(texts)

    def _ask(self, texts: list[str]) -> list[int] | None:
        """The child's counts of ``texts``, asked in one request (None: it is stopped)."""
        request = [len(texts).to_bytes(8, "little")]
        for text in texts:
            data = text.encode("utf-8", "surrogatepass")
            request += (len(data).to_bytes(8, "little"), data)
        try:
            _write_all(self.requests, b"".join(request))
            reply = _read_exactly(self.replies, 8 * len(texts), time.monotonic() + TIMEOUT_S)
        except OSError:
            reply = None
        ns = (
            None
            if reply is None
            else [
                int.from_bytes(reply[i : i + 8], "little", signed=True)
                for i in range(0, len(reply), 8)
            ]
        )
        if ns is None or any(n < 0 for n in ns):  # no answer, or the child failed to count
            self.close()
            return None
        return ns

    def __del__(self) -> None:  # dropped without ``seed`` (an analysis that failed)
        # (Not ``contextlib.suppress``: at the interpreter's exit, modules may be gone. The
        # pipes close with the process then, and the child ends on their end.)
        try:  # noqa: SIM105
            self.close()
        except Exception:
            pass

    def close(self, *, reap: bool = True) -> None:
        """Stop the child (if it is still counting) and reap it; idempotent.

        Reaping a killed child waits while the system frees its memory (the encoding's
        tables, the document: 10-25 ms of wall time at 1-10 MB, in the middle of the
        server's first analysis): a killed child is reaped on a thread of its own
        (``_reap_later``), so nobody waits for it. A process about to end passes
        ``reap=False``: the child is killed and left to be reaped by the system when this
        process ends.
        """
        if self.closed:
            return
        self.closed = True
        tokenizer, self._tokenizer = self._tokenizer, None
        if tokenizer is not None and tokenizer.elsewhere == self.late:
            tokenizer.elsewhere = None  # (no longer asks this child)
        for fd in (self.fd, self.requests, self.replies, self.go):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.go = None
        if self.serves is not None and (tokenizers := sys.modules.get("server.tokenizers")):
            tokenizers.elsewhere_ended(self.count)  # (if ``count_elsewhere`` took it)
        try:
            if os.waitpid(self.pid, os.WNOHANG) == (0, 0):
                os.kill(self.pid, signal.SIGKILL)
                if reap:
                    _reap_later(self.pid)
        except ChildProcessError:
            pass

    def _counts(self) -> tuple[str | None, dict[int, tuple[int, int]]]:
        if self.received is None:
            self.received = (None, {}) if self.closed else self._receive()
            if self.received[0] is None:  # no counts: nor will it answer requests
                self.close()
        return self.received

    def _receive(self) -> tuple[str | None, dict[int, tuple[int, int]]]:
        """The counts the child sent: all of them (until it closes the pipe, at most
        ``TIMEOUT_S``), or with ``drain`` those sent so far (the child is then stopped)."""
        self._read(None if self.drain else time.monotonic() + TIMEOUT_S)
        if not self._ended and not self.drain:
            return None, {}
        if not self._ended:
            self.close()  # what it would still send is not waited for
        return self._checked()

    def _arrived(self) -> tuple[str | None, dict[int, tuple[int, int]]]:
        """The counts sent so far (``on_demand``), read without waiting."""
        if not self.closed:
            self._read(None)
        return self._checked()

    def _checked(self) -> tuple[str | None, dict[int, tuple[int, int]]]:
        encoding, counts = self._sent
        if encoding is None or (self.encoding is not None and encoding != self.encoding):
            return None, {}
        return encoding, counts

    def _read(self, deadline: float | None) -> None:
        """Take in what the child has sent, until its end or ``deadline`` (None: what is
        there now); every whole batch is decoded as soon as it is read."""
        while not self._ended:
            left = 0.0 if deadline is None else deadline - time.monotonic()
            if left < 0 or not select.select([self.fd], [], [], left)[0]:
                return
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                self._ended = True
                return
            self._buffer += chunk
            self._decode()

    def _decode(self) -> None:
        """Move the whole batches of ``_buffer`` into ``_sent``. By hash, then length: two
        strings of one hash keep one count (the other is counted in place). A batch in
        another encoding than the first's drops every count, and one that is not what a
        child writes ends what is taken from it (nothing more from it is trusted)."""
        encoding, counts = self._sent
        at = 0
        for name, triples, end in _batches(self._buffer):
            if encoding is not None and name != encoding:
                self._sent, self._ended, self._buffer = (None, {}), True, b""
                return
            encoding = name
            counts.update((h, (n, c)) for h, n, c in triples)
            at = end
        rest = self._buffer[at:]
        if len(rest) >= 8 and len(rest) >= 8 + int.from_bytes(rest[:8], "little"):
            self._ended = True  # a whole batch that does not decode: nothing after it
            rest = b""
        self._buffer = rest
        self._sent = (encoding, counts)


def _batches(data: bytes) -> Iterator[tuple[str, list[tuple[int, int, int]], int]]:
    """The whole batches in what a child sent (each: its length in 8 bytes, then the
    marshalled encoding name and triples), each with the offset where it ends; a batch cut
    short (a child stopped or dead mid-write, or not sent whole yet) and anything after it
    are left out, and so is anything after a batch that does not decode."""
    at = 0
    while at + 8 <= len(data):
        size = int.from_bytes(data[at : at + 8], "little")
        body = data[at + 8 : at + 8 + size]
        if len(body) < size:
            return
        try:
            name, triples = marshal.loads(body)
        except Exception:  # not what a child writes: nothing more from it is trusted
            return
        at += 8 + size
        yield name, triples, at


class EarlyStart(NamedTuple):
    """A document read before the engine was imported, and its counting child."""

    text: str
    pending: PendingCounts | None


def start_early(path: Path, *, on_demand: bool = False) -> EarlyStart | None:
    """Read a conversation file and fork its counting child before anything heavy loads.

    The child counts with the encoding the document's own ``settings`` ask for (its
    ``encoding``, else its ``model``'s, else the default model's); when the effective
    settings (a settings file, say) pick another one, the counts are dropped. Returns None
    when the file is not plain UTF-8 (the normal path then reads and reports it).
    ``on_demand``: a child that serves requests is not waited for (``PendingCounts``).
    """
    suffixes = {".json": "json", ".jsonl": "jsonl", ".yaml": "yaml", ".yml": "yaml"}
    fmt = suffixes.get(path.suffix.lower())
    try:
        # Only a regular file under the size limit, checked before reading (``files``).
        data = files.read_bytes(path)
        text = data.decode("utf-8-sig" if data.startswith(b"\xef\xbb\xbf") else "utf-8")
    except (files.FileProblem, UnicodeDecodeError):
        return None
    if fmt is None or not _worth_forking(text, MIN_EARLY_CHARS, fmt):
        return EarlyStart(text, None)
    from server import tokenizers

    serve = _likely_encoding(text, fmt)
    if serve not in tokenizers.BUNDLED_ENCODINGS or tokenizers.is_loaded(serve):
        if len(text) < MIN_SHAPED_CHARS:
            # It would only count a small document's strings, with an encoding loaded here
            # anyway: not worth a process.
            return EarlyStart(text, None)
        serve = None  # loaded here before the fork: the child inherits it
        _load_likely_encoding(text, fmt)
    pending = _fork(text, fmt, None, None, None, serve=serve)
    if serve is not None:
        pending.on_demand = on_demand
        tokenizers.count_elsewhere(serve, pending.count)
    return EarlyStart(text, pending)


def serve_early() -> PendingCounts | None:
    """Fork, before the engine is imported, a child that loads the default model's encoding
    and counts the texts this process sends it (``tokenizers.count_elsewhere``): ``lint``
    of a few files, which knows no settings yet. A folder or a document whose settings pick
    another encoding has it loaded here as usual; the child's is then unused, and cost
    only another core's time. None: no child (one core, no ``fork``, or the encoding is
    loaded already or not bundled)."""
    if not _can_fork():
        return None
    from assembly.tokens import DEFAULT_MODEL, resolve_encoding
    from server import tokenizers

    serve = resolve_encoding(None, DEFAULT_MODEL).encoding
    if serve not in tokenizers.BUNDLED_ENCODINGS or tokenizers.is_loaded(serve):
        return None
    pending = _fork("", "jsonl", None, None, None, serve=serve)  # nothing to count first
    pending.on_demand = True
    tokenizers.count_elsewhere(serve, pending.count)
    return pending


def _likely_encoding(text: str, fmt: str) -> str:
    """The encoding the document most likely asks for.

    The guess reads the ``settings`` object near the top of a JSON document (where the
    documents put it), else takes the default model's; the child still reads the
    document's settings, and the pipeline its effective ones. A wrong guess costs one
    load, never a wrong count.
    """
    from assembly.tokens import resolve_encoding

    asked, model = _document_encoding([_peek_settings(text, fmt)])
    return resolve_encoding(asked, model).encoding


def _load_likely_encoding(text: str, fmt: str) -> None:
    """Load, before forking, the encoding the document most likely asks for (when the
    child cannot serve it: not a bundled one): the child inherits it and this process uses
    it later, where each used to load it on its own (20–50 ms of CPU, twice)."""
    from server.tokenizers import load_tokenizer

    asked, model = _document_encoding([_peek_settings(text, fmt)])
    load_tokenizer(asked, model=model)


# The patterns below read a large document's settings before the fork; they are compiled
# when first used (``re``'s cache keeps them), not by every command that imports this
# module (2-3 ms of each start-up).
_SETTINGS_KEY = r'"settings"\s*:\s*(?=\{)'
PEEK_CHARS = 65_536  # where a document's ``settings`` are looked for before the fork


def _peek_settings(text: str, fmt: str) -> dict[str, Any]:
    """``{"settings": …}`` when the first ``PEEK_CHARS`` of the text hold a settings object
    (a guess: a key of that name in a message would do too), else ``{}``. Of a YAML
    document, only a mapping at the top level (``_peek_yaml``). Of JSON, a request body's
    ``model`` (an API log's) counts when the settings name neither model nor encoding, as
    the reader takes it (``settings.model`` wins over it)."""
    if fmt == "yaml":
        return _peek_yaml(text)
    settings: dict[str, Any] = {}
    m = re.compile(_SETTINGS_KEY).search(text, 0, PEEK_CHARS)
    if m is not None:
        try:
            value = json.JSONDecoder().raw_decode(text, m.end())[0]
        except (ValueError, RecursionError):  # not JSON there, or nested too deep for a guess
            return {}
        if not isinstance(value, dict) or value.get("model") or value.get("encoding"):
            return {"settings": value}
        settings = value
    model = re.compile(_MODEL_KEY).search(text, 0, PEEK_CHARS)
    if model is None:
        return {"settings": settings} if m is not None else {}
    return {"settings": {**settings, "model": model[1]}}


_MODEL_KEY = r'"model"\s*:\s*"([^"\\\n]{1,200})"'


_YAML_FLOW_SETTINGS = r"(?m)^settings:[ \t]*\{([^{}\[\]\n#]*)\}[ \t]*(?:#.*)?$"
_YAML_SETTINGS = r"(?m)^settings:[ \t]*(?:#.*)?\n((?:[ \t]+\S.*\n|[ \t]*(?:#.*)?\n)*)"
# ``key: value`` on one line: double-quoted without escapes, single-quoted, or plain (not
# opening with an indicator; ``#`` opens a comment only after a space).
_YAML_KEY = (
    r"(?m)^([ \t]+)(encoding|model):[ \t]+"
    r"(?:\"([^\"\\\n]*)\"|'((?:[^'\n]|'')*)'"
    r"|((?:[^\s#'\"\[\]{}&*!|>%@`,?:-]|[-?:](?=\S))(?:[^\s#]|(?<=\S)#)*"
    r"(?:[ \t]+[^\s#](?:[^\s#]|(?<=\S)#)*)*))"
    r"(?:[ \t]+#.*)?[ \t]*$"
)


def _peek_yaml(text: str) -> dict[str, Any]:
    """``{"settings": {"encoding": …, "model": …}}`` read from a ``settings:`` block at the
    top level of the first ``PEEK_CHARS`` of a YAML text: its ``encoding`` and ``model``
    keys, at the block's own indentation, with a plain or quoted one-line value, or from a
    one-line flow mapping (``settings: {model: gpt-4o, max_input_tokens: 4096}``) of plain
    values (PyYAML is not imported before the fork; a guess: anything else is left to the
    parse)."""
    flow = re.compile(_YAML_FLOW_SETTINGS).search(text, 0, PEEK_CHARS)
    if flow is not None:
        pairs = (item.partition(":") for item in flow[1].split(","))
        values = {k.strip(): v.strip().strip("'\"") for k, sep, v in pairs if sep}
        return {"settings": {k: v for k, v in values.items() if k in ("model", "encoding") and v}}
    m = re.compile(_YAML_SETTINGS).search(text, 0, PEEK_CHARS)
    if m is None:
        return {}
    block = m.group(1)
    settings: dict[str, str] = {}
    indent = None
    for line in block.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            indent = line[: len(line) - len(line.lstrip())]
            break
    for k in re.compile(_YAML_KEY).finditer(block):
        if k.group(1) == indent:
            double, single, plain = k.group(3, 4, 5)
            value = (
                single.replace("''", "'")
                if single is not None
                else double
                if double is not None
                else plain
            )
            settings.setdefault(k.group(2), value)
    return {"settings": settings}


def widen_pipe(fd: int) -> bool:
    """Grow the buffer of the pipe ``fd`` is an end of to ``PIPE_BYTES`` (Linux; False
    where it cannot be, ``fd`` being no pipe included). A writer then blocks, and its
    reader wakes, once a megabyte rather than every 64 KB."""
    try:
        import fcntl

        fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_BYTES)
    except (OSError, AttributeError, ImportError, ValueError):
        return False
    return True


def start(text: str | Rope, fmt: str, tokenizer: Tokenizer) -> PendingCounts | None:
    """Fork a child counting ``text``'s long strings with ``tokenizer``, when it pays off.

    The child inherits the tokenizer's cache: strings counted before are not counted again.
    An editor's rope is joined by the child, not here (the parent's parse joins it once).
    """
    from server.tokenizers import counts_elsewhere

    count = getattr(tokenizer, "counter", None)
    if count is None or not _worth_forking(text, MIN_DOCUMENT_CHARS, str(fmt)):
        return None
    if counts_elsewhere(tokenizer):  # a serving child counts: asked, it counts these too
        return None
    pending = _fork(text, fmt, count, getattr(tokenizer, "cached", None), tokenizer.encoding)
    pending.drain = True
    return pending


def _can_fork() -> bool:
    """A child can run beside this process: ``fork`` exists and two cores are usable."""
    return hasattr(os, "fork") and usable_cpus() >= 2


def _worth_forking(text: str | Rope, min_chars: int, fmt: str = "yaml") -> bool:
    """Large enough, and, from ``MIN_SHAPED_CHARS`` on, (JSON) made of long strings: the
    child loads every value, so a document of many tiny values (a million short messages)
    would cost more memory in it than its counts save."""
    if len(text) < min_chars or not _can_fork():
        return False
    if len(text) < MIN_SHAPED_CHARS:
        return True
    if fmt in ("json", "jsonl"):
        return len(text) >= MIN_MEAN_STRING_CHARS * text.count('"') // 2
    # YAML of this many lines is counted as events before the parser composes it, and
    # perhaps refused (``syntax.MAX_YAML_NODES``); loading it here would cost gigabytes.
    return text.count("\n") + text.count(",") < MAX_YAML_LINES


def _fork(
    text: str | Rope,
    fmt: str,
    count: Callable[[str], int] | None,
    cached: Callable[[str], int | None] | None,
    encoding: str | None,
    *,
    serve: str | None = None,
) -> PendingCounts:
    """Fork the child; without ``count`` it loads the encoding the document asks for.

    ``serve``: after sending its counts, the child stays and counts any text this process
    sends with that encoding (``PendingCounts.count``), until the request pipe closes.
    """
    read_fd, write_fd = os.pipe()
    widen_pipe(write_fd)
    pipes = (*os.pipe(), *os.pipe()) if serve is not None else None
    pid = os.fork()
    if pid == 0:  # the child: count, write, exit without running any cleanup
        status = 0
        gc.disable()  # a one-shot job: its few cycles go with the process
        try:
            os.close(read_fd)
            if pipes is not None:
                os.close(pipes[1])  # this end's requests: the parent's closing ends them
                os.close(pipes[2])
            _detach()
            values = list(_values(str(text), fmt))
            if count is None:
                from server.tokenizers import load_tokenizer

                asked, model = _document_encoding(values)
                tokenizer = load_tokenizer(asked, model=model).tokenizer
                count, encoding = tokenizer.count, tokenizer.encoding
            _count_and_send(values, count, cached, encoding, write_fd, pipes[0] if pipes else None)
            if pipes is not None and serve is not None:
                _serve(pipes[0], pipes[3], serve)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write_fd)
    if pipes is None:
        return PendingCounts(pid, read_fd, encoding)
    os.close(pipes[0])
    os.close(pipes[3])
    return PendingCounts(pid, read_fd, encoding, requests=pipes[1], replies=pipes[2], serves=serve)


def start_open(body: bytes) -> PendingCounts | None:
    """Fork a child counting the document a ``didOpen`` carries, as soon as the message's
    bytes have arrived (the language server's ``server.lsp.stream``), before this process
    decodes them: the child reads ``body`` with ``json``'s C parser, and the document's
    values (in the format the document's name says), while this process decodes the text
    into its rope and starts its analysis, so its counts are sent about as early as the
    analysis starts (a child forked by the analysis, ``start``, first waited for the
    message to be decoded). The child then waits for the format and the tokenizer the
    analysis picks (``PendingCounts.count_with``), counts, and sends its batches; the
    analysis drains them (``seed``) as with ``start``.
    None when no child is forked (a body this small, one core, no ``fork``); a body that
    is not a ``didOpen`` of a document worth it only ends its child early.
    """
    if len(body) < MIN_DOCUMENT_CHARS or not _can_fork():
        return None
    read_fd, write_fd = os.pipe()
    widen_pipe(write_fd)
    go_read, go_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: read, wait to be told, count, write, exit without cleanup
        status = 0
        gc.disable()
        try:
            os.close(read_fd)
            os.close(go_write)
            _detach()
            _count_open(body, go_read, write_fd)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write_fd)
    os.close(go_read)
    pending = PendingCounts(pid, read_fd, None, go=go_write)
    pending.drain = True
    return pending


def _count_open(body: bytes, go: int, write_fd: int) -> None:
    """A ``start_open`` child's work: the text of the ``didOpen`` in ``body``, its values
    (read in the format its name says while the parent decodes the message, again when
    the parent says another), and their counts with the tokenizer the parent names."""
    doc = json.loads(body)["params"]["textDocument"]
    del body
    text, guess = doc["text"], _format_of(doc.get("uri"))
    del doc
    values = None
    if isinstance(text, str) and guess and _worth_forking(text, MIN_DOCUMENT_CHARS, guess):
        values = list(_values(text, guess))  # by the name's format, before being told
    told = _read_exactly(go, 1 << 16, time.monotonic() + TIMEOUT_S, partial=True)
    if not told or not isinstance(text, str):
        return  # the parent does not count this document
    fmt, asked, model = marshal.loads(told)
    if fmt != guess or values is None:  # (the parent's format is the one read by)
        if not _worth_forking(text, MIN_DOCUMENT_CHARS, fmt):
            return
        values = list(_values(text, fmt))
    del text
    from server.tokenizers import load_tokenizer

    tokenizer = load_tokenizer(asked, model=model).tokenizer
    _count_and_send(values, tokenizer.counter, tokenizer.cached, tokenizer.encoding, write_fd)


def _format_of(uri: Any) -> str | None:
    """The format a ``didOpen``'s document name says (as the analysis reads it first:
    ``assembly.host.document_format``), or None."""
    if not isinstance(uri, str):
        return None
    from urllib.parse import unquote

    from assembly.documents import format_for_path

    fmt = format_for_path(unquote(uri.rsplit("/", 1)[-1]))
    return None if fmt is None else str(fmt)


def _detach() -> None:
    """A child's standard streams, not its parent's: whoever reads the parent's output (a
    pipe) would otherwise wait for this child too, until the system has freed its memory
    (it closes a process's files after that)."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _count_and_send(
    values: list[Any],
    count: Callable[[str], int],
    cached: Callable[[str], int | None] | None,
    encoding: str | None,
    write_fd: int,
    requests: int | None = None,
) -> None:
    """Count the strings of ``values`` (those ``cached`` does not know), newest first, and
    send them in batches of about ``BATCH_CHARS``; a request arriving on ``requests``
    (``on_demand``) ends the counting at the next batch. Closes ``write_fd``."""
    batch: list[tuple[int, int, int]] = []
    weight = 0
    for s in _document_strings(values):  # newest first (``_walk_strings``)
        if cached is None or cached(s) is None:
            batch.append((hash(s), len(s), count(s)))
            weight += len(s)
        if weight >= BATCH_CHARS:
            _send_batch(write_fd, encoding, batch)
            batch, weight = [], 0
            if requests is not None and select.select([requests], [], [], 0)[0]:
                break  # asked for texts (``on_demand``): those, not the rest
    _send_batch(write_fd, encoding, batch)
    os.close(write_fd)  # the counts end here


def _reap_later(pid: int) -> None:
    """Reap a killed child on a thread of its own (see ``PendingCounts.close``), started
    with ``_thread``: ``threading.Thread.start`` waits until the thread has run (on a
    busy machine, tens of ms of the analysis that stopped the child)."""
    _thread.start_new_thread(_reap, (pid,))


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _serve(requests: int, replies: int, encoding: str) -> None:
    """The child's second job: count each text the parent sends, until it closes the pipe.

    A request is a number of texts (8 bytes), then each text's UTF-8 length (8 bytes) and
    the text (lone surrogates passed as they are); the answer is their counts (8 bytes
    each, -1 for a text whose counting failed).
    """
    from server.tokenizers import load_tokenizer

    count = load_tokenizer(encoding).tokenizer.count
    # A helper (``_count_all``) is reaped by the system when it ends: waiting for it here
    # would hold up the next request while its memory is freed (20-40 ms at 10 MB).
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    read = _Reader(requests)
    while True:
        head = read.exactly(8)
        if head is None:
            return
        texts = []
        for _ in range(int.from_bytes(head, "little")):
            size = read.exactly(8)
            data = read.exactly(int.from_bytes(size, "little")) if size else None
            if data is None:
                return
            texts.append(data.decode("utf-8", "surrogatepass"))
        counts, _ = _count_all(count, texts)
        _write_all(replies, b"".join(n.to_bytes(8, "little", signed=True) for n in counts))


class _Reader:
    """Reads a pipe in large pieces and hands out exact lengths (a request of thousands of
    texts is a few reads, not two a text)."""

    __slots__ = ("_at", "_buffer", "_fd")

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""
        self._at = 0

    def exactly(self, n: int) -> bytes | None:
        """The next ``n`` bytes, or None at the pipe's end."""
        while len(self._buffer) - self._at < n:
            chunk = os.read(self._fd, max(1 << 20, n - (len(self._buffer) - self._at)))
            if not chunk:
                return None
            self._buffer = self._buffer[self._at :] + chunk
            self._at = 0
        data = self._buffer[self._at : self._at + n]
        self._at += n
        return data


def _count_all(count: Callable[[str], int], texts: list[str]) -> tuple[list[int], int | None]:
    """Each text's count (-1 where counting failed), and the helper process if one was
    forked (the caller reaps it, or lets the system do it).

    A request of at least ``SPLIT_CHARS`` characters is shared with a helper forked from
    this child (it has the encoding loaded already): the parent waits for the answer, so
    its core is free meanwhile. The helper counts the second half (by characters) and
    sends its counts back; if it fails, this process counts that half too.
    """
    total = sum(map(len, texts))
    if total < SPLIT_CHARS or len(texts) < 2 or not _can_fork():
        return [_count_one(count, t) for t in texts], None
    half, seen = 1, len(texts[0])
    while half < len(texts) - 1 and 2 * seen < total:  # the first half's characters
        seen += len(texts[half])
        half += 1
    mine, theirs = texts[:half], texts[half:]
    try:
        read_fd, write_fd = os.pipe()
    except OSError:
        return [_count_one(count, t) for t in texts], None
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return [_count_one(count, t) for t in texts], None
    if pid == 0:  # the helper: count, write, exit without running any cleanup
        status = 0
        try:
            os.close(read_fd)
            answer = b"".join(
                _count_one(count, t).to_bytes(8, "little", signed=True) for t in theirs
            )
            _write_all(write_fd, answer)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write_fd)
    try:
        first = [_count_one(count, t) for t in mine]
        data = _read_exactly(read_fd, 8 * len(theirs), time.monotonic() + TIMEOUT_S)
    finally:
        os.close(read_fd)
    if data is None:  # the helper failed: counted here
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        return first + [_count_one(count, t) for t in theirs], pid
    second = [
        int.from_bytes(data[i : i + 8], "little", signed=True) for i in range(0, len(data), 8)
    ]
    return first + second, pid


def _count_one(count: Callable[[str], int], text: str) -> int:
    try:
        return count(text)
    except Exception:
        return -1


def _send_batch(fd: int, encoding: str | None, triples: list[tuple[int, int, int]]) -> None:
    data = marshal.dumps((encoding, triples))  # plain values: no pickle import
    _write_all(fd, len(data).to_bytes(8, "little") + data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(
    fd: int, n: int, deadline: float | None, *, partial: bool = False
) -> bytes | None:
    """``n`` bytes from ``fd``; None at its end, or when ``deadline`` passes first.
    ``partial``: what was read when the end comes (at most ``n`` bytes) is the answer."""
    chunks: list[bytes] = []
    while n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return b"".join(chunks) if partial else None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _document_encoding(values: list[Any]) -> tuple[str | None, str]:
    """The ``encoding`` and ``model`` a document's own settings name (defaults otherwise)."""
    from assembly.tokens import DEFAULT_MODEL as default  # not the settings: no pydantic

    for value in values[:1]:
        settings = value.get("settings") if isinstance(value, dict) else None
        if isinstance(settings, dict):
            encoding, model = settings.get("encoding"), settings.get("model")
            return (
                encoding if isinstance(encoding, str) else None,
                model if isinstance(model, str) and model else default,
            )
    return None, default


def _document_strings(values: list[Any]) -> Iterator[str]:
    """The distinct strings of at least ``MIN_CHARS`` in the loaded values, newest first
    (the last JSON Lines line first, each value as ``_walk_strings`` walks it), the results
    of tools called before the last user message after all the others.

    The pipeline replaces an earlier turn's tool result by a placeholder (Onyx's, reference
    §4) and counts the placeholder, so those results are counted last: in the 10 MB
    benchmark conversation they are half the text of its newest half, which the parent
    would otherwise count itself while the child counts them. Only the order changes.
    """
    seen: set[str] = set()
    later: list[str] = []
    passed = [False]  # the walk has passed the last user message (walking newest first)
    for value in reversed(values):
        for s in _walk_strings(value, later, passed):
            if len(s) >= MIN_CHARS and s not in seen:
                seen.add(s)
                yield s
    for s in later:
        if len(s) >= MIN_CHARS and s not in seen:
            seen.add(s)
            yield s


def _values(text: str, fmt: str) -> Iterator[Any]:
    if fmt == "json":
        yield json.loads(text)
    elif fmt == "jsonl":
        for line in text.splitlines():
            if line.strip():
                try:
                    yield json.loads(line)
                except ValueError:
                    continue
    else:
        import yaml

        yield yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _walk_strings(
    value: Any, later: list[str] | None = None, passed: list[bool] | None = None
) -> Iterator[str]:
    """Every string in a loaded value, each container visited once.

    YAML aliases load as the same list or dict object wherever they are used: an alias
    bomb is a small graph with exponentially many paths, so containers are walked once
    by identity (a self-referencing anchor is a cycle, and ends too). Depth first, the
    last item of a container first: a conversation's newest messages come first.

    An uploaded file (an object with a string ``content`` in a ``files`` list) is counted
    as the pipeline counts it, inside its block (``assembly.texts.file_block``), not alone:
    the pipeline never counts its bare content, so counting that would be the child's time
    lost and the block's count this process's. With ``later``, the content of a message of
    role ``tool`` met once ``passed[0]`` is set (by a message of role ``user``) goes there
    instead (``_document_strings``).
    """
    from assembly.texts import file_block  # (no imports of its own)

    stack = [value]
    seen: set[int] = set()
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            yield v
        elif isinstance(v, dict | list):
            if id(v) in seen:
                continue
            seen.add(id(v))
            if later is not None and passed is not None and isinstance(v, dict):
                role = v.get("role")
                if role == "user":
                    passed[0] = True
                elif role == "tool" and passed[0] and isinstance(v.get("content"), str):
                    later.append(v["content"])
                    stack.extend(w for k, w in v.items() if k != "content")
                    continue
            stack.extend(v.values() if isinstance(v, dict) else v)
            files = v.get("files") if isinstance(v, dict) else None
            if isinstance(files, list) and id(files) not in seen:
                seen.add(id(files))
                for f in files:
                    if isinstance(f, dict) and id(f) not in seen:
                        seen.add(id(f))
                        content, name = f.get("content"), f.get("filename")
                        if isinstance(content, str):
                            yield file_block(name if isinstance(name, str) else "unknown", content)
                        stack.extend(w for k, w in f.items() if k != "content")
                    else:
                        stack.append(f)


def _strings(conv: Conversation) -> Iterable[str]:
    from assembly.texts import file_block

    for r in conv.records:
        yield from _strings(r)
    # The stored messages (their texts are the views'): no view of each of ten thousand
    # messages made and kept for this walk (7 ms of the server's first open at 10 MB).
    for m in conv.message_data:
        if len(m.content) >= MIN_CHARS:
            yield m.content
        for f in m.files:  # as the pipeline counts an uploaded file, and the child
            if f.content is not None:
                block = file_block(f.filename, f.content)
                if len(block) >= MIN_CHARS:
                    yield block
    for f in conv.project_files:
        if f.content is not None and len(f.content) >= MIN_CHARS:
            yield f.content
