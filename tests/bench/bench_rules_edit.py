"""Benchmark: ``check`` after a one-character edit in an inline prompt, with and without
``RuleCache``.

Takes the 10 MB conversation (``--doc``, else generated with
``tests/bench/gen_conversation.py``), gives it an inline ``system_prompt`` (its system
message's text) if it has none, and types one character at a time into the strings of
``system_prompt``, ``custom_agent_prompt`` and ``reminder`` (all before the messages),
and, for comparison, into a message's content. The text is a ``Rope``, as in the language
server. Each edit is re-read as the incremental re-read does it: every message object is
kept, placed by the new table of starts (the prompt's new ``TextBlock`` comes from a parse
of the new text, outside the timing), then assembled afresh (outside the timing).
``check`` of the new context is timed with the cache and without it; medians over
``--edits`` edits per place, in milliseconds, how many runs ran no rule of typed
inputs again, and which ran.

    python tests/bench/bench_rules_edit.py [--edits 9] [--doc FILE]
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import datetime as dt
import gc
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from assembly.assemble import AssembleOptions, assemble
from assembly.diagnostics import Diagnostic, RuleCache, RuleContext, check, from_issues
from assembly.incremental import reparse_conversation
from assembly.model import Conversation, DocFormat, TextBlock
from assembly.reading import parse_conversation
from assembly.rope import Rope
from assembly.settings import SettingsLayer, resolve_settings
from assembly.syntax import Member, SNode
from assembly.text import TextRange
from assembly.tokens import Tokenizer
from server.tokenizers import load_tokenizer

ROOT = Path(__file__).resolve().parents[2]
GEN = Path(__file__).resolve().parent / "gen_conversation.py"
TODAY = dt.date(2026, 1, 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edits", type=int, default=9)
    ap.add_argument("--doc", type=Path, default=None)
    args = ap.parse_args()
    if args.doc is None:
        scratch = Path(tempfile.mkdtemp(prefix="promptls-bench-"))
        atexit.register(shutil.rmtree, scratch, True)  # the generated files go
        args.doc = scratch / "bench.conv.json"
        size = ["--messages", "10000", "--target-bytes", "10000000"]
        subprocess.run([sys.executable, str(GEN), *size, "--out", str(args.doc)], check=True)
    doc = json.loads(args.doc.read_text(encoding="utf-8"))
    if "system_prompt" not in doc:
        system = next(m["content"] for m in doc["messages"] if m["role"] == "system")
        doc = {"system_prompt": system, **doc}
    text = json.dumps(doc, indent=2, ensure_ascii=False)
    conv = parse_conversation(text, DocFormat.JSON)
    settings = resolve_settings([SettingsLayer("<document>", conv.settings)])[0]
    tokenizer = load_tokenizer(settings.encoding, model=settings.model).tokenizer
    rope = Rope.from_str(text)
    cache = RuleCache()
    check(_context(conv, rope, settings, tokenizer), cache=cache)
    rnd = random.Random(1)
    print(f"{len(text) / 1e6:.1f} M code points, {len(conv.messages):,} messages")
    print("check after an edit, median ms (max)")
    print("edit                   uncached        cached   none ran   rules run again")
    for attr in ("system_prompt", "custom_agent_prompt", "reminder", None):
        uncached, cached, reused, ran = [], [], 0, set()
        for _ in range(args.edits):
            conv, text, rope = _type(conv, text, rope, attr, rnd)
            ctx = _context(conv, rope, settings, tokenizer)
            gc.collect()
            cached.append(_ms(lambda ctx=ctx: check(ctx, cache=cache)))
            reused += not cache.ran
            ran.update(cache.ran)
            uncached.append(_ms(lambda ctx=ctx: check(ctx)))
        label = attr or "message content"
        print(
            f"{label:20} {_fmt(uncached):>12} {_fmt(cached):>13}   {reused}/{args.edits}"
            f"    {', '.join(sorted(ran)) or '-'}"
        )
    return 0


def _type(
    conv: Conversation, text: str, rope: Rope, attr: str | None, rnd: random.Random
) -> tuple[Conversation, str, Rope]:
    """Type one letter in the string of the prompt ``attr`` (None: in a message's content
    in the middle), and re-read the document as the incremental re-read does."""
    if attr is None:
        # A message in the middle whose content is one string the re-read can take alone
        # (a message with content parts, or an edit it must parse in full, is passed over).
        for _ in range(1000):
            m = conv.messages[len(conv.messages) // 2 + rnd.randrange(100)]
            if m.content_range is None or m.content_range.end - m.content_range.start < 8:
                continue
            new_text, at = _insert(text, m.content_range, rnd)
            new = reparse_conversation(conv, text, new_text, DocFormat.JSON)
            if new is not None:
                return new, new_text, rope.edit(at, at, new_text[at])
        raise SystemExit("no message in the middle of the document can be re-read alone")
    block = getattr(conv, attr)
    assert isinstance(block, TextBlock) and block.content_range is not None
    new_text, at = _insert(text, block.content_range, rnd)
    new_rope = rope.edit(at, at, new_text[at])
    return _reread_prompt(conv, new_text, attr, at, 1), new_text, new_rope


def _insert(text: str, rng: TextRange, rnd: random.Random) -> tuple[str, int]:
    """``text`` with one letter typed inside ``rng`` (never next to an escape), and where."""
    while True:
        at = rnd.randrange(rng.start + 1, rng.end - 1)
        if text[at - 1] != "\\" and text[at] != "\\":
            break
    return text[:at] + rnd.choice("abxy") + text[at:], at


def _reread_prompt(
    conv: Conversation, new_text: str, attr: str, at: int, delta: int
) -> Conversation:
    """What the incremental re-read of an edit inside the prompt ``attr`` gives: every
    message object and message node kept (placed by the new table of starts), the
    rest from a parse of the new text."""
    fresh = parse_conversation(new_text, DocFormat.JSON)
    return reuse_messages(conv, fresh, at, delta)


def reuse_messages(conv: Conversation, fresh: Conversation, at: int, delta: int) -> Conversation:
    """``fresh`` (a parse of the text after an edit at ``at`` outside the messages that
    changed its length by ``delta``) with the stored messages and their nodes of ``conv``
    (position-independent: the new table of starts places them)."""
    root, fresh_root = conv.tree, fresh.tree
    assert root is not None and fresh_root is not None and root.is_object
    holder, fresh_holder = root.get("messages"), fresh_root.get("messages")
    assert holder is not None and fresh_holder is not None
    assert conv.message_data == fresh.message_data
    kept = SNode("array", fresh_holder.range, items=holder.items, starts=fresh_holder.starts)
    members = tuple(
        Member(m.key, m.key_range, kept) if m.value is fresh_holder else m
        for m in fresh_root.members
    )
    new_root = SNode("object", fresh_root.range, members=members)
    return dataclasses.replace(fresh, message_data=conv.message_data, tree=new_root)


def _context(conv: Conversation, text: Rope, settings: object, tokenizer: Tokenizer) -> RuleContext:
    opts = AssembleOptions(today=TODAY, system_template=None, file_contents={})
    a = assemble(conv, settings, tokenizer, opts)  # type: ignore[arg-type]
    reported: list[Diagnostic] = [*from_issues(conv.issues)]
    return RuleContext(
        text=text,  # type: ignore[arg-type]
        settings=settings,  # type: ignore[arg-type]
        tokenizer=tokenizer,
        conversation=conv,
        assembly=a,
        reported=tuple(reported),
    )


def _ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def _fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({max(values):.1f})"


if __name__ == "__main__":
    sys.exit(main())
