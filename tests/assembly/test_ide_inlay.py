"""Inlay hints and the code lens as data.

Inlay fixtures are ``tests/data/ide/inlay/*``: two ``$0`` markers delimit the requested
range (none: the whole document). ``check_inlay_hints`` renders the document with each
hint's label inserted as ``⟪label⟫`` where the editor would draw it, followed by the
tooltips, for the golden ``<fixture>.expected``. The lens is checked inline: one title per
document.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from assembly.ide.inlay import InlayHint, conversation_inlay_hints, prompt_inlay_hints
from assembly.ide.lens import conversation_lenses
from assembly.text import LineIndex, TextRange
from tests.support.engine import analyze, analyze_prompt, loaded
from tests.support.golden import check_golden
from tests.support.markers import markers

DATA = Path(__file__).resolve().parent.parent / "data" / "ide"
CASES = sorted(p for p in (DATA / "inlay").iterdir() if not p.name.endswith(".expected"))


@pytest.fixture(autouse=True)
def _offline_encodings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # no cache: offline cl100k_base only


@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_inlay_hints(path: Path) -> None:
    check_inlay_hints(path)


@pytest.mark.parametrize(
    ("doc", "title"),
    [
        (
            "messages:\n  - {id: u1, role: user, content: Hello?}\n",
            "2 / 121,600 tokens",
        ),
        (
            "settings: {max_input_tokens: 3000}\n"
            "messages:\n"
            "  - {id: u1, role: user, content: Old., token_count: 2000}\n"
            "  - {id: a1, role: assistant, content: Older answer., token_count: 1000}\n"
            "  - {id: u2, role: user, content: New?}\n",
            "1,002 / 2,850 tokens · 1 dropped",
        ),
        (
            (DATA / "inlay" / "overflow.conv.yaml").read_text(encoding="utf-8"),
            "538 / 1,000 tokens · 5 dropped · 1 file forgotten",
        ),
        (
            "messages:\n  - {id: a1, role: assistant, content: Hello.}\n",
            "no-user-message: the conversation has no user message: there is no turn to assemble",
        ),
        (
            "settings: {max_input_tokens: 10}\n"
            "system_prompt: {content: You are Lumi, the support agent of Lumen Analytics.}\n"
            "messages:\n  - {id: u1, role: user, content: Hello?}\n",
            "budget-overrun: the fixed parts need 22 tokens but only 9 are available after the "
            "tool definitions",
        ),
    ],
    ids=["fits", "dropped", "forgotten", "no-user-message", "overrun"],
)
def test_code_lens_title(tmp_path: Path, doc: str, title: str) -> None:
    check_lens(tmp_path, doc, title)


# ------------------------------------------------------------------------------ helpers


def check_inlay_hints(path: Path) -> None:
    text, offsets = markers(path.read_text(encoding="utf-8"))
    assert len(offsets) in (0, 2), f"{path.name}: mark the range with two $0, or none"
    rng = TextRange(offsets[0], offsets[1]) if offsets else TextRange(0, len(text))
    if path.name.endswith(".prompt.md"):
        p = analyze_prompt(path, text=text, root=DATA)
        tokenizer = loaded(p.settings.encoding, model=p.settings.model).tokenizer
        hints = prompt_inlay_hints(p, rng, tokenizer=tokenizer)
    else:
        hints = conversation_inlay_hints(analyze(path, text=text, root=DATA), rng)
    check_golden(_render(text, hints), path.with_name(path.name + ".expected"))


def check_lens(tmp_path: Path, doc: str, title: str) -> None:
    (tmp_path / ".git").mkdir()
    path = tmp_path / "case.conv.yaml"
    a = analyze(path, text=doc, root=tmp_path)
    [lens] = conversation_lenses(a, command="show", arguments=("uri",))
    first_line = doc.split("\n", 1)[0]
    assert (lens.range, lens.command, lens.arguments) == (
        TextRange(0, len(first_line)),
        "show",
        ("uri",),
    )
    assert lens.title == title


def _render(text: str, hints: list[InlayHint]) -> str:
    out = []
    pos = 0
    for h in sorted(hints, key=lambda h: h.offset):
        out.append(text[pos : h.offset])
        out.append(f"⟪{h.label}⟫")
        pos = h.offset
    out.append(text[pos:])
    index = LineIndex(text)
    tooltips = []
    for h in hints:
        lc = index.line_col(h.offset)
        tip = h.tooltip.replace("\n", "\n      ")
        tooltips.append(f"{lc.line + 1}:{lc.column + 1} ⟪{h.label}⟫ {tip}")
    return "".join(out) + "\n── tooltips\n" + "\n".join(tooltips) + "\n"


def test_hints_of_a_few_lines_make_views_of_those_messages_only(tmp_path: Path) -> None:
    """A client asks for the hints of the lines it shows: the messages there get views
    (``Conversation.messages``), not every message after them (a view is kept on the
    conversation: a slice of 5,000 of them at 10 MB cost 4 ms and their memory)."""
    import json

    msgs = [{"id": f"m{i}", "role": "user", "content": f"question {i}"} for i in range(400)]
    text = json.dumps({"messages": msgs}, indent=2)
    path = tmp_path / "chat.conv.json"
    a = analyze(path, text=text, root=tmp_path)
    views = a.conversation.messages
    start = text.index('"m200"')
    hints = conversation_inlay_hints(a, TextRange(start, text.index('"m203"')))
    assert len(hints) == 3
    assert len(views.made()) < 40  # the three, and the few a binary search looks at
