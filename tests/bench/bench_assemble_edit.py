"""Benchmark: ``assemble`` after a one-character edit, without and with ``AssemblyCache``.

Generates the 10 MB conversation with ``tests/bench/gen_conversation.py`` (as is), parses
it, assembles it once with a cache, then types one character into the content of messages
near the start, the middle and the end, into the system message taken as the system prompt,
and into the text of files uploaded with user messages near the start, the middle and the
end, re-reading the document as the editor does (``reparse_conversation``: only the edited
message is a new object). Then it types into the inline prompts at the top of the document:
the ``custom_agent_prompt`` and the ``reminder`` the generated document has, and a
``system_prompt`` given inline (the text of its system message, added once with a full run);
such an edit is re-read as the same conversation with a new ``TextBlock`` for the field
(``dataclasses.replace``), as the incremental re-parse of the top of the document gives.
For each edit it times ``assemble`` of the new conversation with the cache and without it
(the tokenizer's count cache is warm in both). Medians over ``--edits`` edits per place, in
milliseconds, and how many were answered incrementally (at most the edited message
converted again and the per-position lists patched, ``AssemblyCache.converted`` and
``rebuilt``).

    python tests/bench/bench_assemble_edit.py [--edits 9] [--size 10]
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import datetime as dt
import gc
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from assembly.assemble import AssembleOptions, AssemblyCache, assemble
from assembly.incremental import reparse_conversation
from assembly.model import Conversation, DocFormat, Message, Role, TextBlock
from assembly.reading import parse_conversation
from assembly.settings import SettingsLayer, resolve_settings
from server.tokenizers import load_tokenizer

ROOT = Path(__file__).resolve().parents[2]
GEN = Path(__file__).resolve().parent / "gen_conversation.py"
SIZES = {1: (1000, 1_000_000), 10: (10000, 10_000_000)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edits", type=int, default=9)
    ap.add_argument("--size", type=int, default=10, choices=sorted(SIZES))
    args = ap.parse_args()
    if not GEN.is_file():
        print(f"generator not found: {GEN}", file=sys.stderr)
        return 2
    messages, target = SIZES[args.size]
    scratch = Path(tempfile.mkdtemp(prefix="promptls-bench-"))
    atexit.register(shutil.rmtree, scratch, True)  # the generated files go
    doc = scratch / "bench.conv.json"
    size = ["--messages", str(messages), "--target-bytes", str(target)]
    subprocess.run([sys.executable, str(GEN), *size, "--out", str(doc)], check=True)
    text = doc.read_text(encoding="utf-8")
    conv = parse_conversation(text, DocFormat.JSON)
    settings = resolve_settings([SettingsLayer("<document>", conv.settings)])[0]
    tokenizer = load_tokenizer(settings.encoding, model=settings.model).tokenizer
    opts = AssembleOptions(today=dt.date(2026, 1, 1))
    cache = AssemblyCache()
    assemble(conv, settings, tokenizer, opts, cache=cache)
    stats = {"converted": 0, "rebuilt": 0}

    def bench(c: Conversation) -> tuple[float, float, bool]:
        cached = _ms(lambda: assemble(c, settings, tokenizer, opts, cache=cache))
        # Incremental: at most the edited message converted again, the per-position lists
        # patched rather than made again.
        incremental = cache.converted <= 1 and not cache.rebuilt
        stats["converted"] += cache.converted
        stats["rebuilt"] += cache.rebuilt
        return cached, _ms(lambda: assemble(c, settings, tokenizer, opts)), incremental

    n = len(conv.messages)
    print(f"{args.size} MB, {n:,} messages: assemble after an edit, median ms (max)")
    print("edit              uncached       cached   incremental")
    system = next((m.index for m in conv.messages if m.role is Role.SYSTEM), None)
    for place, first in (("start", 1), ("middle", n // 2), ("end", n - 3 * args.edits)):
        where = [(k, None) for k in _string_contents(conv, text, first)[: args.edits]]
        conv, text = _time_edits(f"message {place}", where, conv, text, bench)
    if system is not None:
        conv, text = _time_edits("system message", [(system, None)] * args.edits, conv, text, bench)
    uploads = [m.index for m in conv.messages if m.files]
    e, half = args.edits, len(uploads) // 2
    for place, ks in (
        ("start", uploads[:e]),
        ("middle", uploads[half : half + e]),
        ("end", uploads[-e:]),
    ):
        conv, text = _time_edits(f"file {place}", [(k, 0) for k in ks], conv, text, bench)
    for name in ("custom_agent_prompt", "reminder"):
        if getattr(conv, name) is not None:
            conv = _time_block_edits(name, args.edits, conv, bench)
    if system is not None and conv.system_prompt is None:
        content = conv.messages[system].content
        conv = dataclasses.replace(
            conv, system_prompt=TextBlock(content, conv.messages[system].range)
        )
        assemble(conv, settings, tokenizer, opts, cache=cache)  # a new structure: a full run
        conv = _time_block_edits("system_prompt", args.edits, conv, bench)
    print(
        f"({cache.calls} cached calls: {stats['converted']} messages converted, "
        f"per-position lists made again {stats['rebuilt']} times)"
    )
    return 0


Bench = Callable[[Conversation], tuple[float, float, bool]]


def _time_edits(
    label: str, where: list[tuple[int, int | None]], conv: Conversation, text: str, bench: Bench
) -> tuple[Conversation, str]:
    """Type one character at each place (a message's content, or the content of its
    uploaded file number ``f``), timing ``bench`` on each re-read conversation."""
    uncached, cached = [], []
    fast = 0
    for k, f in where:
        at = _content_start(conv.messages[k], f, text) + 1
        new_text = text[:at] + "x" + text[at:]
        new = reparse_conversation(conv, text, new_text, DocFormat.JSON)
        assert new is not None, "the edit was not re-read incrementally"
        gc.collect()
        c, u, incremental = bench(new)
        fast += incremental
        cached.append(c)
        uncached.append(u)
        conv, text = new, new_text
    if where:
        print(f"{label:16} {_fmt(uncached):>13} {_fmt(cached):>12}   {fast}/{len(where)}")
    return conv, text


def _time_block_edits(name: str, edits: int, conv: Conversation, bench: Bench) -> Conversation:
    """Type one character at a time into the inline prompt ``name`` (middle of its text)."""
    uncached, cached = [], []
    fast = 0
    for _ in range(edits):
        block = getattr(conv, name)
        assert isinstance(block, TextBlock)
        at = len(block.content) // 2
        content = block.content[:at] + "x" + block.content[at:]
        conv = dataclasses.replace(conv, **{name: dataclasses.replace(block, content=content)})
        gc.collect()
        c, u, incremental = bench(conv)
        fast += incremental
        cached.append(c)
        uncached.append(u)
    label = {"custom_agent_prompt": "custom agent", "system_prompt": "system prompt"}.get(
        name, name
    )
    print(f"{label:16} {_fmt(uncached):>13} {_fmt(cached):>12}   {fast}/{edits}")
    return conv


def _content_start(m: Message, f: int | None, text: str) -> int:
    """Where the JSON string of the message's content, or of its file ``f``'s, starts."""
    if f is None:
        assert m.content_range is not None
        return m.content_range.start
    rng = m.files[f].range
    return text.index('"content": "', rng.start, rng.end) + len('"content": ')


def _string_contents(conv: Conversation, text: str, first: int) -> list[int]:
    """Indexes from ``first`` on of messages whose content is one JSON string."""
    return [
        m.index
        for m in conv.messages[first:]
        if m.content_range is not None and text[m.content_range.start] == '"'
    ]


def _ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def _fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({max(values):.1f})"


if __name__ == "__main__":
    sys.exit(main())
