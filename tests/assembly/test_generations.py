"""Messages that go and come back: the stages' memos of the version before the last.

``-`` typed at the start of a YAML item's line ends the message list there (every later
item leaves the conversation) and deleting it brings the items back as the same objects.
The pipeline's first two stages (``AssemblyCache``) and the rule engine (``RuleCache``)
set the last version's memo aside when messages go, and go on from it when it is the
nearer one. The property: every analysis of a host going through such chains (and
through random edits between them) equals a fresh analysis, positions included; and the
keystroke that brings the items back converts and checks only what differs.
"""

from __future__ import annotations

import datetime as dt
import operator
import random
from pathlib import Path
from typing import Any

import pytest

from assembly.host import Analysis, AnalysisHost, Edit
from assembly.rope import Rope
from assembly.seq import apart
from tests.assembly.test_yaml_incremental import _dump, random_edit
from tests.bench.gen_conversation import conversation as generated
from tests.support.engine import analyze

TODAY = dt.date(2025, 1, 15)


def _placed(a: Analysis) -> list[tuple[Any, int, int]]:
    return [(d, d.range.start, d.range.end) for d in a.diagnostics]


class _Chain:
    """A host and a rope going through edits, each analysis compared with a fresh one."""

    def __init__(self, path: Path, text: str) -> None:
        self.path, self.text = path, text
        path.write_text(text, encoding="utf-8")
        self.host = AnalysisHost()
        self.rope = Rope.from_str(text)
        analyze(path, text=self.rope, root=path.parent, today=TODAY, host=self.host)

    def edit(self, start: int, end: int, new: str) -> Analysis:
        self.text = self.text[:start] + new + self.text[end:]
        self.rope = self.rope.edit(start, end, new)
        got = analyze(
            self.path,
            text=self.rope,
            root=self.path.parent,
            today=TODAY,
            host=self.host,
            edit=Edit.replace(start, end, new),
        )
        want = analyze(self.path, text=self.text, root=self.path.parent, today=TODAY)
        assert _placed(got) == _placed(want), (start, end, new)
        assert got.assembly == want.assembly, (start, end, new)
        return got


def _same(a: Any, b: Any) -> bool:
    """Whether two versions' messages are the same objects."""
    return a is not None and len(a) == len(b) and all(map(operator.is_, a, b))


def _item_starts(text: str) -> list[int]:
    return [i + 1 for i in range(len(text) - 2) if text.startswith("\n- ", i)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_items_that_leave_and_come_back_equal_fresh_analyses(tmp_path: Path, seed: int) -> None:
    """Random chains on a generated YAML conversation (tool calls, uploads, file ids:
    findings spread over the document): ``-`` (or a key) typed at an item's line start
    and deleted, with random edits between and in the ended state; the engine sets its
    state aside whenever messages come or go, so its fork and trade are in every step."""
    rnd = random.Random(seed)
    text = _dump(generated(60, 40_000, seed), "compact")
    chain = _Chain(tmp_path / "chat.conv.yaml", text)
    for _ in range(10):
        items = _item_starts(chain.text)
        if not items:
            break
        at = rnd.choice(items[1:] or items)
        typed = rnd.choice(["-", "-", "x", "id: "])
        chain.edit(at, at, typed)
        if rnd.random() < 0.3:  # typed on in the ended state, then undone
            chain.edit(at + len(typed), at + len(typed), "y")
            chain.edit(at + len(typed), at + len(typed) + 1, "")
        chain.edit(at, at + len(typed), "")
        if rnd.random() < 0.5:
            chain.edit(*random_edit(rnd, chain.text))


def test_bringing_items_back_converts_and_checks_only_what_differs(tmp_path: Path) -> None:
    """At the benchmark's ``-`` kind (hundreds of items leave): the keystroke that ends the
    list converts nothing and checks no message again; the one that undoes it goes on from
    the memos of the version before, converting and checking the one item read again, not
    the hundreds that came back."""
    text = _dump(generated(1_200, 400_000, 7), "compact")
    chain = _Chain(tmp_path / "chat.conv.yaml", text)
    items = _item_starts(chain.text)
    at = items[len(items) // 3]
    for _ in range(2):
        n = len(chain.host.previous.conversation.message_data)  # type: ignore[union-attr]
        ended = chain.edit(at, at, "-")
        left = n - len(ended.conversation.message_data)
        assert left > 256
        back = chain.edit(at, at + 1, "")
        assert len(back.conversation.message_data) == n
        assert chain.host.assemble_cache.converted <= 2
        assert chain.host.rule_cache.message_runs <= 4


def test_the_state_set_aside_is_the_version_before(tmp_path: Path) -> None:
    """When messages go, the rule engine's state of the version before is set aside
    untouched (a ``fork``: the run changes the copy), and after they come back the ended
    version's state is the one set aside."""
    text = _dump(generated(400, 150_000, 11), "compact")
    chain = _Chain(tmp_path / "chat.conv.yaml", text)
    at = _item_starts(text)[20]
    first = chain.host.previous.conversation.message_data  # type: ignore[union-attr]
    ended = chain.edit(at, at, "-").conversation.message_data
    aside = chain.host.rule_cache._older
    assert aside is not None and aside._messages is first
    chain.edit(at, at + 1, "")
    aside = chain.host.rule_cache._older
    assert aside is not None and aside._messages is ended


def test_the_list_ended_at_the_next_item_goes_on_from_the_ended_version(tmp_path: Path) -> None:
    """``-`` typed at an item's line start, deleted, then typed at the next item's: the
    second ended version is one message away from the first (the state set aside after
    the undo), not hundreds as from the version before it, so the rule engine and the
    pipeline's first stages go on from the first one's memos (no message gone since, the
    whole version's memos set aside for the undo), each analysis equal to a fresh one."""
    text = _dump(generated(1_200, 400_000, 7), "compact")
    chain = _Chain(tmp_path / "chat.conv.yaml", text)
    whole = chain.host.previous.conversation.message_data  # type: ignore[union-attr]
    k = len(_item_starts(chain.text)) // 3
    for j in range(k, k + 3):
        at = _item_starts(chain.text)[j]
        ended = chain.edit(at, at, "-")
        assert len(whole) - len(ended.conversation.message_data) > 256
        rules, stages = chain.host.rule_cache, chain.host.assemble_cache
        assert rules._older is not None and _same(rules._older._messages, whole)
        assert stages._older is not None and _same(stages._older[0][1], whole)
        if j > k:
            assert not rules._gone
        back = chain.edit(at, at + 1, "")
        # (The item read again reads as before: its object stays.)
        assert apart(whole, back.conversation.message_data) == 0
        assert chain.host.assemble_cache.converted <= 2
        assert chain.host.rule_cache.message_runs <= 4
