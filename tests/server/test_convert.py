"""``server/lsp/convert.py``: offsets <-> LSP positions in UTF-8/16/32, and diagnostics.

The expected columns of ``x="😋"`` are the ones the LSP specification and pygls' own codec
give (7 in UTF-8, 5 in UTF-16, 4 in UTF-32 for the closing quote); round trips are checked
for every offset of a text mixing ASCII, CJK, emoji, a ZWJ sequence, flags and CRLF, and
each position is compared with pygls' unit counters.
"""

from __future__ import annotations

import re

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsprotocol import types as lsp
from pygls.workspace.position_codec import Utf8, Utf16, Utf32

from assembly.diagnostics import Diagnostic, Fix, Related, Severity, TextEdit
from assembly.ide.folding import Fold, FoldKind
from assembly.ide.symbols import Symbol, SymbolKind
from assembly.rope import Rope
from assembly.text import TextRange
from server.links import rule_doc_url
from server.lsp import convert as convert_module
from server.lsp.convert import (
    TextMap,
    from_lsp_position,
    from_lsp_range,
    to_lsp_diagnostic,
    to_lsp_diagnostics,
    to_lsp_position,
    to_lsp_range,
)

ENCODINGS = ["utf-8", "utf-16", "utf-32"]
COUNTERS = {"utf-8": Utf8(), "utf-16": Utf16(), "utf-32": Utf32()}
ZWJ = "👨\u200d💻"  # man + zero-width joiner + laptop: one glyph, three code points
MIXED = f'x="😋"\r\n你好, world ✅\ndev {ZWJ} 🇯🇵 👍🏽 e\u0301\r\n\n\r\ntail without newline 🎉'


def check_to(text: str, encoding: str, offset: int, expect: tuple[int, int]) -> None:
    pos = to_lsp_position(TextMap.of(text, encoding), offset)
    assert (pos.line, pos.character) == expect


def check_from(text: str, encoding: str, position: tuple[int, int], expect: int) -> None:
    m = TextMap.of(text, encoding)
    assert from_lsp_position(m, lsp.Position(*position)) == expect


@pytest.mark.parametrize(
    ("encoding", "quote", "end"), [("utf-8", 7, 8), ("utf-16", 5, 6), ("utf-32", 4, 5)]
)
def test_emoji_columns(encoding: str, quote: int, end: int) -> None:
    text = 'x="😋"\n'
    check_to(text, encoding, 3, (0, 3))  # before the emoji: all encodings agree
    check_to(text, encoding, 4, (0, quote))  # the closing quote, after the emoji
    check_to(text, encoding, 5, (0, end))  # the line's end
    check_to(text, encoding, 6, (1, 0))
    check_from(text, encoding, (0, quote), 4)
    check_from(text, encoding, (0, end), 5)


@pytest.mark.parametrize(("encoding", "inside"), [("utf-8", [4, 5, 6]), ("utf-16", [4])])
def test_position_inside_a_code_point_rounds_down(encoding: str, inside: list[int]) -> None:
    for character in inside:
        check_from('x="😋"', encoding, (0, character), 3)


@pytest.mark.parametrize(("encoding", "world", "end"), [("utf-8", 8, 13), ("utf-16", 4, 9)])
def test_cjk(encoding: str, world: int, end: int) -> None:
    text = "你好, world"
    check_to(text, encoding, 4, (0, world))
    check_to(text, encoding, len(text), (0, end))
    check_from(text, encoding, (0, world), 4)
    check_from(text, encoding, (0, end), len(text))


@pytest.mark.parametrize(("encoding", "after"), [("utf-8", 11), ("utf-16", 5), ("utf-32", 3)])
def test_zwj_sequence_counts_each_code_point(encoding: str, after: int) -> None:
    text = f"{ZWJ}!"
    check_to(text, encoding, 3, (0, after))
    check_from(text, encoding, (0, after), 3)
    # The joiner is its own code point: offsets inside the glyph are valid positions.
    joiner = {"utf-8": 4, "utf-16": 2, "utf-32": 1}[encoding]
    check_to(text, encoding, 1, (0, joiner))
    check_from(text, encoding, (0, joiner), 1)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_crlf_column_never_counts_the_carriage_return(encoding: str) -> None:
    text = "ab\r\ncd\r\n"
    check_to(text, encoding, 2, (0, 2))  # at the "\r": the end of line 0
    check_to(text, encoding, 3, (0, 2))  # between "\r" and "\n": still the end of line 0
    check_to(text, encoding, 4, (1, 0))
    check_to(text, encoding, 8, (2, 0))
    check_from(text, encoding, (0, 2), 2)
    check_from(text, encoding, (0, 3), 2)  # past the end of the line: before the "\r"
    check_from(text, encoding, (1, 99), 6)
    check_from(text, encoding, (2, 0), 8)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_lone_carriage_return_ends_a_line(encoding: str) -> None:
    # LSP: "\n", "\r\n" and "\r" end lines (U+2028 does not); the two directions agree.
    check_to("ab\r", encoding, 3, (1, 0))
    check_from("ab\r", encoding, (0, 3), 2)  # past the end of the line: before the "\r"
    check_from("ab\r", encoding, (1, 0), 3)
    text = "a\rb😀\rc\u2028d"
    check_to(text, encoding, 2, (1, 0))
    check_to(text, encoding, 5, (2, 0))
    check_to(text, encoding, 6, (2, 1))
    assert to_lsp_position(TextMap.of(text, encoding), 8).line == 2  # U+2028 ends no line
    check_from(text, encoding, (2, 0), 5)
    rng = to_lsp_range(TextMap.of(text, encoding), TextRange(0, 3))  # across a lone "\r"
    assert (rng.start.line, rng.end.line, rng.end.character) == (0, 1, 1)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_empty_file(encoding: str) -> None:
    check_to("", encoding, 0, (0, 0))
    check_to("", encoding, 5, (0, 0))
    check_to("", encoding, -1, (0, 0))
    check_from("", encoding, (0, 0), 0)
    check_from("", encoding, (0, 7), 0)
    check_from("", encoding, (3, 4), 0)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_past_the_end_is_clamped(encoding: str) -> None:
    text = "ab\ncd😋\n"
    check_from(text, encoding, (0, 99), 2)  # past the end of a line: its end
    check_from(text, encoding, (1, 99), 6)
    check_from(text, encoding, (2, 0), 7)  # the empty line after the final newline
    check_from(text, encoding, (2, 5), 7)
    check_from(text, encoding, (3, 0), 7)  # past the last line: the end of the text
    check_from(text, encoding, (1000, 1000), 7)
    check_to(text, encoding, 1000, (2, 0))


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_negative_values_are_clamped(encoding: str) -> None:
    text = "ab\ncd"
    check_to(text, encoding, -4, (0, 0))
    # lsprotocol refuses negative numbers when it structures a message; a Position built
    # without validation (by a caller's own arithmetic) is still clamped.
    m = TextMap.of(text, encoding)
    with attrs.validators.disabled():
        assert from_lsp_position(m, lsp.Position(-1, 1)) == 0
        assert from_lsp_position(m, lsp.Position(1, -3)) == 3


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_every_offset_round_trips(encoding: str) -> None:
    m = TextMap.of(MIXED, encoding)
    for offset in range(len(MIXED) + 1):
        pos = to_lsp_position(m, offset)
        back = from_lsp_position(m, pos)
        inside_crlf = MIXED[offset - 1 : offset + 1] == "\r\n"
        assert back == (offset - 1 if inside_crlf else offset), (offset, pos)
        # The column is what pygls' unit counter gives for the line's prefix.
        line_start = MIXED.rfind("\n", 0, offset) + 1
        prefix = MIXED[line_start:back]
        assert pos.line == MIXED.count("\n", 0, offset), offset
        assert pos.character == COUNTERS[encoding].num_units(prefix), (offset, pos)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_every_position_of_a_line_lands_on_a_code_point(encoding: str) -> None:
    line = f"a😋b{ZWJ}你"
    m = TextMap.of(line + "\r\nnext", encoding)
    counter = COUNTERS[encoding]
    for character in range(counter.num_units(line) + 3):
        # The last code point that starts at or before ``character`` units (clamped).
        expect = max(i for i in range(len(line) + 1) if counter.num_units(line[:i]) <= character)
        assert from_lsp_position(m, lsp.Position(0, character)) == expect, character


def test_long_line_positions_are_exact() -> None:
    # A minified document is one long line; conversions stay exact and proportional.
    text = ("ascii " * 1000 + "你好😋" * 1000) * 20
    for encoding in ENCODINGS:
        m = TextMap.of(text, encoding)
        for offset in (0, 5999, 6000, 6001, 6003, 50_000, len(text)):
            pos = to_lsp_position(m, offset)
            assert pos.character == COUNTERS[encoding].num_units(text[:offset])
            assert from_lsp_position(m, pos) == offset


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_lone_surrogate_counts_as_one_code_point(encoding: str) -> None:
    # JSON allows an unpaired "\ud83d" escape; it must not break conversions.
    text = "a\ud83db"
    m = TextMap.of(text, encoding)
    for offset in range(len(text) + 1):
        assert from_lsp_position(m, to_lsp_position(m, offset)) == offset


def test_ranges() -> None:
    text = 'x="😋"\r\nnext'
    m = TextMap.of(text, "utf-16")
    assert to_lsp_range(m, TextRange(3, 7)) == lsp.Range(lsp.Position(0, 3), lsp.Position(1, 0))
    assert from_lsp_range(m, lsp.Range(lsp.Position(0, 3), lsp.Position(1, 0))) == TextRange(3, 7)
    # A reversed range is put in order; a range past the end is clamped.
    reversed_ = lsp.Range(lsp.Position(1, 2), lsp.Position(0, 5))
    assert from_lsp_range(m, reversed_) == TextRange(4, 9)
    past = lsp.Range(lsp.Position(0, 99), lsp.Position(9, 9))
    assert from_lsp_range(m, past) == TextRange(5, len(text))


def test_text_map_encoding_names() -> None:
    assert TextMap.of("", lsp.PositionEncodingKind.Utf8).encoding == "utf-8"
    assert TextMap.of("", "UTF-32").encoding == "utf-32"
    assert TextMap.of("", "latin-1").encoding == "utf-16"  # LSP's default


# ------------------------------------------------------------------------- diagnostics

DOC = "user: 😋 {{name}}\nassistant: ok\n"
TEMPLATE_PATH = "/work/project/system.prompt.md"
TEMPLATE = "# Rules\n\nSay 🎉 {{name}}.\n"


@pytest.mark.parametrize(
    ("severity", "expect"),
    [
        (Severity.ERROR, lsp.DiagnosticSeverity.Error),
        (Severity.WARNING, lsp.DiagnosticSeverity.Warning),
        (Severity.INFO, lsp.DiagnosticSeverity.Information),
        (Severity.HINT, lsp.DiagnosticSeverity.Hint),
    ],
)
def test_diagnostic_severity(severity: Severity, expect: lsp.DiagnosticSeverity) -> None:
    d = Diagnostic("unknown-placeholder", severity, "m", TextRange(0, 4))
    res = to_lsp_diagnostic(TextMap.of(DOC, "utf-16"), d, "file:///doc.conv.yaml")
    assert res.severity == expect


def test_diagnostic_fields() -> None:
    uri = "file:///work/project/doc.conv.yaml"
    m = TextMap.of(DOC, "utf-16")
    placeholder = TextRange(DOC.index("{{"), DOC.index("}}") + 2)
    d = Diagnostic(
        "unknown-placeholder",
        Severity.WARNING,
        "unknown placeholder `name`",
        placeholder,
        related=(Related(TextRange(17, 26), "the answer"),),
        fix=Fix("remove it", (TextEdit(placeholder, ""),)),
        unnecessary=True,
    )
    res = to_lsp_diagnostic(m, d, uri)
    assert res.range == lsp.Range(lsp.Position(0, 9), lsp.Position(0, 17))
    assert res.code == "unknown-placeholder"
    assert res.code_description == lsp.CodeDescription(href=rule_doc_url("unknown-placeholder"))
    assert res.code_description.href.startswith("https://")
    assert res.code_description.href.endswith("#unknown-placeholder")
    assert res.source == "promptls"
    assert res.message == "unknown placeholder `name`"
    assert res.tags == [lsp.DiagnosticTag.Unnecessary]
    assert res.related_information == [
        lsp.DiagnosticRelatedInformation(
            location=lsp.Location(uri, lsp.Range(lsp.Position(1, 0), lsp.Position(1, 9))),
            message="the answer",
        )
    ]
    assert res.data == {"code": "unknown-placeholder", "start": 8, "end": 16}


def test_diagnostic_without_extras() -> None:
    d = Diagnostic("no-user-message", Severity.ERROR, "no user message", TextRange(0, 0))
    res = to_lsp_diagnostic(TextMap.of("", "utf-8"), d, "file:///a.conv.json")
    assert res.tags is None
    assert res.related_information is None
    assert res.range == lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))


def test_diagnostics_of_a_document() -> None:
    uri = "file:///work/project/doc.conv.yaml"
    in_template = TextRange(TEMPLATE.index("{{"), TEMPLATE.index("}}") + 2)
    findings = [
        Diagnostic(
            "unknown-placeholder",
            Severity.WARNING,
            "in the document",
            TextRange(8, 16),
            related=(
                Related(in_template, "used in the template", TEMPLATE_PATH),
                Related(TextRange(0, 1), "in a file whose text is unknown", "/elsewhere.md"),
            ),
        ),
        Diagnostic(
            "unknown-placeholder", Severity.WARNING, "elsewhere", in_template, TEMPLATE_PATH
        ),
    ]
    res = to_lsp_diagnostics(
        TextMap.of(DOC, "utf-8"), findings, uri, other_texts={TEMPLATE_PATH: TEMPLATE}
    )
    # Findings in other files are not this document's; related places there are kept
    # when their text is known, in the same encoding.
    assert [d.message for d in res] == ["in the document"]
    assert res[0].related_information == [
        lsp.DiagnosticRelatedInformation(
            location=lsp.Location(
                "file:///work/project/system.prompt.md",
                lsp.Range(lsp.Position(2, 9), lsp.Position(2, 17)),
            ),
            message="used in the template",
        )
    ]


# Pieces that matter to a position: line breaks of every kind (a "\r\n" an edit may split or
# join), CJK and emoji (units differ by encoding), U+2028 (not a line break), a lone surrogate.
PIECES = ("a", "b", "ab", " ", "\n", "\r\n", "\r", "中文", "😀", "\u2028", "é", "\ud800", "xyz")
pieces = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces, st.sampled_from([1, 2, 3, 5, 1024]), st.sampled_from(ENCODINGS), st.data())
def test_positions_carried_to_the_next_version_are_the_ones_it_would_convert(
    text: str, chunk_size: int, encoding: str, data: st.DataObject
) -> None:
    """A ``TextMap`` made with ``previous=`` starts from the earlier version's converted
    positions the edit did not move within their line; each one, and every conversion
    after it (cached or not), equals the conversion in a fresh map of the same text."""
    rope = Rope.from_str(text, chunk_size=chunk_size)
    m = TextMap.of(rope, encoding)
    for _ in range(data.draw(st.integers(1, 5))):
        n = len(text)
        # Convert positions and ranges everywhere, so that there is something to carry.
        for offset in range(n + 1):
            to_lsp_position(m, offset)
        for _ in range(8):
            a = data.draw(st.integers(0, n))
            to_lsp_range(m, TextRange(a, data.draw(st.integers(a, n))))
        start = data.draw(st.integers(0, n))
        end = data.draw(st.integers(start, n))
        new = data.draw(pieces)
        text = text[:start] + new + text[end:]
        rope = rope.edit(start, end, new)
        m = TextMap.of(rope, encoding, previous=m)
        fresh = TextMap.of(text, encoding)
        for offset, position in m.positions.items():
            assert position == to_lsp_position(fresh, offset), (offset, text)
        for offset in range(len(text) + 1):
            assert to_lsp_position(m, offset) == to_lsp_position(TextMap.of(text, encoding), offset)
        for _ in range(8):
            a = data.draw(st.integers(0, len(text)))
            rng = TextRange(a, data.draw(st.integers(a, len(text))))
            assert to_lsp_range(m, rng) == to_lsp_range(TextMap.of(text, encoding), rng)


def test_a_keystroke_carries_every_position_off_its_line() -> None:
    """Typing a character keeps every position converted before it and every one on a
    later line (moved by a line when the character is a line break); only those after it
    on its own line are converted again. A map keeps at most ``_KEPT_POSITIONS``."""
    lines = [f"line {k} with 😀 and 中文\r\n" for k in range(200)]
    text = "".join(lines)
    rope = Rope.from_str(text, chunk_size=64)
    m = TextMap.of(rope, "utf-16")
    offsets = list(range(0, len(text), 7))
    for offset in offsets:
        to_lsp_position(m, offset)
    at = sum(map(len, lines[:100])) + 5  # line 100, after "line "
    for typed, lines_added in (("x", 0), ("\n", 1)):
        edited = rope.edit(at, at, typed)
        carried = TextMap.of(edited, "utf-16", previous=m)
        line_end = sum(map(len, lines[:101]))
        expect = {o if o < at else o + 1 for o in offsets if o < at or o >= line_end}
        assert set(carried.positions) == expect
        fresh = TextMap.of(str(edited), "utf-16")
        for offset in expect:
            position = carried.positions[offset]
            assert position == to_lsp_position(fresh, offset)
            if offset > at:
                assert position.line == to_lsp_position(m, offset - 1).line + lines_added
    crowded = TextMap.of(rope, "utf-8")
    for offset in range(len(text) + 1):
        to_lsp_position(crowded, offset)
    assert len(crowded.positions) == convert_module._KEPT_POSITIONS < len(text)


@pytest.mark.parametrize("kind", [None, *FoldKind])
@pytest.mark.parametrize("lines", [(1, 3), None])
def test_a_fold_is_written_as_pygls_writes_its_folding_range(
    kind: FoldKind | None, lines: tuple[int, int] | None
) -> None:
    """The folds' answer is written without lsprotocol objects; it must be the bytes pygls
    writes for the ``lsp.FoldingRange`` (a fold without lines is placed by its range)."""
    import json

    from lsprotocol.converters import get_converter

    text = "a\nb {\n  c\n}\ne"
    m = TextMap.of(text, "utf-16")
    fold = Fold(TextRange(text.index("b"), text.index("}")), kind, lines)
    want = lsp.FoldingRange(
        start_line=1,
        end_line=3,
        kind=None if kind is None else lsp.FoldingRangeKind(kind.value),
    )
    written = json.dumps(get_converter().unstructure(want)).encode("ascii")
    assert convert_module.folding_range_json(m, fold) == written


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
@pytest.mark.parametrize("kind", list(SymbolKind))
def test_a_symbol_is_written_as_pygls_writes_its_document_symbol(
    encoding: str, kind: SymbolKind
) -> None:
    """The outline's answer is written without lsprotocol objects; each entry must be the
    bytes pygls writes for the ``lsp.DocumentSymbol`` (nested children, a detail, names
    that JSON escapes, positions after an emoji and CJK, a range across lines)."""
    import json

    from lsprotocol.converters import get_converter

    from tests.support.lsp_reference import document_symbol

    text = '{"a": "😀 读 x",\r\n "b": {"c": "\\"q\\" 😀", "d": 1}\n}'
    m = TextMap.of(text, encoding)
    leaf = Symbol(
        'say "hi"\u2026 \\ 😀',
        kind,
        TextRange(text.index('"c"'), text.index("1") + 1),
        TextRange(text.index('"c"'), text.index('"c"') + 3),
    )
    parent = Symbol(
        "b",
        kind,
        TextRange(text.index('"b"'), len(text) - 2),
        TextRange(text.index('"b"'), text.index('"b"') + 3),
        detail="2 keys · 读",
        children=(leaf, leaf),
    )
    top = Symbol("a", kind, TextRange(text.index("x"), text.index("x") + 1), TextRange(1, 4))
    for s in (parent, leaf, top):
        want = json.dumps(get_converter().unstructure(document_symbol(m, s))).encode("ascii")
        assert convert_module.document_symbol_json(m, s) == want


def _expected_span(text: str, encoding: str, start: int, end: int) -> tuple[int, int, int, int]:
    def point(offset: int) -> tuple[int, int]:
        if text[offset - 1 : offset + 1] == "\r\n":  # between the two: the line's end
            offset -= 1
        line_start = max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1
        line = len(re.findall(r"\r\n|\r|\n", text[:offset]))
        return line, COUNTERS[encoding].num_units(text[line_start:offset])

    return (*point(start), *point(end))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.sampled_from(["a", "b ", "你", "😋", "\r\n", "\u0301", "\ud83d", "xy" * 900]),
        min_size=1,
        max_size=40,
    ),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 300)), min_size=1, max_size=30),
    st.sampled_from(ENCODINGS),
    st.booleans(),
)
def test_positions_on_lines_longer_than_a_step_are_exact(
    pieces: list[str], spans: list[tuple[int, int]], encoding: str, rope: bool
) -> None:
    # A minified document is one line: its columns are counted in pieces of ``_STEP`` code
    # points kept by the map; every position and range must be what counting the line's
    # start gives (pygls' counters), on a step's edge too.
    step = convert_module._STEP
    text = "".join(pieces) * 3
    n = len(text)
    m = TextMap.of(Rope.from_str(text) if rope else text, encoding)
    offsets = {0, n, step - 1, step, step + 1, 2 * step, 2 * step + 1, 3 * step - 1}
    for a, length in spans:
        offsets.add(a % (n + 1))
        start = a % (n + 1)
        end = min(n, start + length)
        if text[start - 1 : start + 1] == "\r\n" or text[end - 1 : end + 1] == "\r\n":
            continue  # (an offset inside a line break: the round trips' test)
        assert convert_module.lsp_span(m, TextRange(start, end)) == _expected_span(
            text, encoding, start, end
        ), (start, end)
    for offset in sorted(o for o in offsets if o <= n):
        pos = to_lsp_position(m, offset)
        assert (pos.line, pos.character) == _expected_span(text, encoding, offset, offset)[:2]


@pytest.mark.parametrize("rope", [False, True])
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_line_break_on_a_steps_edge_is_the_lines_end(encoding: str, rope: bool) -> None:
    step = convert_module._STEP
    for k in (1, 2):
        text = "a" * (k * step - 1) + "\r\nb"
        m = TextMap.of(Rope.from_str(text) if rope else text, encoding)
        # Between the "\r" and the "\n", exactly a multiple of a step into the line.
        pos = to_lsp_position(m, k * step)
        assert (pos.line, pos.character) == (0, k * step - 1)
        assert convert_module.lsp_span(m, TextRange(k * step, k * step + 1)) == (
            0,
            k * step - 1,
            1,
            0,
        )
