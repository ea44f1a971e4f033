"""Tests for assembly.toolcalls: recovering tool calls written as text (reference §10).

Scenarios marked "A4"/"A7" are Onyx's own unit tests from the reference appendix; the rest
pin the details of §10 and the two places where promptls deliberately differs from Onyx.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembly.diagnostics.rules.tool_calls import _MayHoldCall, _MayHoldMarkup
from assembly.toolcalls import (
    MAX_JSON_CANDIDATES,
    FunctionCallsFilter,
    extract_tool_calls,
    fallback_extraction,
    find_json_objects,
    looks_like_tool_call_markup,
    markup_tool_calls,
    parse_tool_args,
    resolve_tool_arguments,
    sanitize_llm_output,
    strip_function_calls,
)

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "internal_search",
        "parameters": {
            "type": "object",
            "properties": {"queries": {"type": "array", "items": {"type": "string"}}},
            "required": ["queries"],
        },
    },
}
OPEN_URL_TOOL = {
    "type": "function",
    "function": {
        "name": "open_url",
        "parameters": {
            "type": "object",
            "properties": {"urls": {"type": "array"}, "reason": {"type": "string"}},
            "required": ["urls"],
        },
    },
}
GET_TIME_TOOL = {
    "type": "function",
    "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
}
SEARCH = [SEARCH_TOOL]
ALL_TOOLS = [SEARCH_TOOL, OPEN_URL_TOOL, GET_TIME_TOOL]

ALPHA = '{"name":"internal_search","arguments":{"queries":["alpha"]}}'
BETA = '{"name":"internal_search","arguments":{"queries":["beta"]}}'
THREE_QUERIES = ["Onyx documentation", "Onyx docs", "Onyx platform"]
XML_THREE = (
    '<function_calls><invoke name="internal_search">'
    '<parameter name="queries" string="false">'
    '["Onyx documentation", "Onyx docs", "Onyx platform"]</parameter>'
    "</invoke></function_calls>"
)
XML_TWO = (
    '<function_calls><invoke name="internal_search">'
    '<parameter name="queries" string="false">["Onyx documentation", "Onyx docs"]</parameter>'
    "</invoke></function_calls>"
)


def check_extract(text: str, expect: list[tuple[str, dict[str, Any]]], tools=ALL_TOOLS) -> None:
    calls = extract_tool_calls(text, tools)
    assert [(call.name, call.arguments) for call in calls] == expect
    for call in calls:
        assert text[call.start : call.end]


def check_filter(chunks: list[str], expect: str) -> None:
    text_filter = FunctionCallsFilter()
    assert "".join(text_filter.feed(chunk) for chunk in chunks) + text_filter.flush() == expect


def check_fallback(expect: tuple[bool, list[tuple[str, dict[str, Any]]], str | None], **kwargs):
    args: dict[str, Any] = {
        "answer": None,
        "raw_answer": None,
        "reasoning": None,
        "tools": SEARCH,
        "tool_choice_required": False,
        "has_structured_calls": False,
        "already_attempted": False,
    }
    res = fallback_extraction(**(args | kwargs))
    assert (res.attempted, [(c.name, c.arguments) for c in res.calls], res.source) == expect


# -- A7 TestSanitizeLlmOutput ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("hello\x00world", "helloworld"),
        ("\x00start", "start"),
        ("end\x00", "end"),
        ("\x00\x00\x00", ""),
        ("hello\ud800world", "helloworld"),
        ("hello\udfffworld", "helloworld"),
        ("test\uda00value", "testvalue"),
        ("a\x00b\ud800c\udfffd", "abcd"),
        ("hello 👋 world", "hello 👋 world"),
        ("你好世界", "你好世界"),
        ("Hello мир 世界", "Hello мир 世界"),
        ("", ""),
        ("hello world", "hello world"),
        ('{"key": "value"}', '{"key": "value"}'),
    ],
)
def test_sanitize_llm_output(text: str, expect: str) -> None:
    assert sanitize_llm_output(text) == expect


# -- A7 TestParseToolArgsToDict ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expect"),
    [
        (None, {}),
        ({"key": "value", "num": 42}, {"key": "value", "num": 42}),
        ({"queries": '["q1", "q2"]'}, {"queries": ["q1", "q2"]}),
        ('{"key": "value"}', {"key": "value"}),
        (json.dumps(json.dumps({"key": "value"})), {"key": "value"}),
        ("not json", {}),
        ("{invalid}", {}),
        ("[1, 2, 3]", {}),
        ('"just a string"', {}),
        (123, {}),
        (["list"], {}),
        ({"query": "hello\x00world"}, {"query": "helloworld"}),
        ({"query": "hello\ud800world"}, {"query": "helloworld"}),
        ('{"query": "hello\x00world"}', {"query": "helloworld"}),
        ('{"query": "hello\ud800world"}', {"query": "helloworld"}),
        ({"queries": '["q1\x00", "q2\ud800"]'}, {"queries": ["q1", "q2"]}),
        ({"query": "hello 👋 世界"}, {"query": "hello 👋 世界"}),
        ('{"query": "hello 👋 世界"}', {"query": "hello 👋 世界"}),
        # Values of a parsed JSON string that look like JSON containers are parsed too.
        ('{"queries": "[\\"a\\"]"}', {"queries": ["a"]}),
        ({"note": "[not json]"}, {"note": "[not json]"}),
        ("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[" * 100, {}),
    ],
)
def test_parse_tool_args(value: object, expect: dict[str, Any]) -> None:
    assert parse_tool_args(value) == expect


# -- A7 TestResolveToolArguments ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "expect"),
    [
        ({"arguments": {"queries": ["test"]}}, {"queries": ["test"]}),
        ({"parameters": {"queries": ["test"]}}, {"queries": ["test"]}),
        ({"arguments": {"a": 1}, "parameters": {"b": 2}}, {"a": 1}),
        ({"arguments": '{"queries": ["test"]}'}, {"queries": ["test"]}),
        ({"arguments": "not valid json"}, {}),
        ({"name": "some_tool"}, {}),
        ({"arguments": [1, 2, 3]}, None),
        ({"arguments": 42}, None),
        ({"arguments": None}, None),
        ({"arguments": '["a"]'}, None),
    ],
)
def test_resolve_tool_arguments(obj: dict[str, Any], expect: dict[str, Any] | None) -> None:
    assert resolve_tool_arguments(obj) == expect


# -- A7 TestExtractToolCallsFromResponseText and the shapes of §10 -----------------------------


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        pytest.param(ALPHA, [("internal_search", {"queries": ["alpha"]})], id="A7-nested-dup"),
        pytest.param(
            f"{ALPHA}\n{BETA}",
            [
                ("internal_search", {"queries": ["alpha"]}),
                ("internal_search", {"queries": ["beta"]}),
            ],
            id="A7-sequence",
        ),
        pytest.param(
            f"{ALPHA}\n{ALPHA}",
            [("internal_search", {"queries": ["alpha"]})] * 2,
            id="A7-intentional-duplicate",
        ),
        pytest.param(
            '\n<function_calls>\n<invoke name="internal_search">\n'
            '<parameter name="queries" string="false">'
            '["Onyx documentation", "Onyx docs", "Onyx platform"]</parameter>\n'
            "</invoke>\n</function_calls>\n",
            [("internal_search", {"queries": THREE_QUERIES})],
            id="A7-xml-invoke",
        ),
        pytest.param(
            '\n<function_calls>\n<invoke name="unknown_tool">\n'
            '<parameter name="queries" string="false">["Onyx docs"]</parameter>\n'
            "</invoke>\n</function_calls>\n",
            [],
            id="A7-xml-unknown-tool",
        ),
        pytest.param(
            '{"name":"internal_search","arguments":{"queries":["a}b{"]}}',
            [("internal_search", {"queries": ["a}b{"]})],
            id="braces-in-strings",
        ),
        pytest.param(
            'Calling {"name":"internal_search","arguments":{"queries":["}"]}} now',
            [("internal_search", {"queries": ["}"]})],
            id="close-brace-in-string",
        ),
        pytest.param(
            '{"function":{"name":"internal_search","arguments":{"queries":["alpha"]}}}',
            [("internal_search", {"queries": ["alpha"]})],
            id="function-wrapper-once",
        ),
        pytest.param(
            '{"id":"call_1","type":"function","function":'
            '{"name":"internal_search","arguments":"{\\"queries\\":[\\"alpha\\"]}"}}',
            [("internal_search", {"queries": ["alpha"]})],
            id="function-wrapper-string-arguments-once",
        ),
        pytest.param(
            '{"function":{"name":"internal_search","arguments":{"queries":["a"]}}}\n'
            '{"function":{"name":"internal_search","arguments":{"queries":["a"]}}}',
            [("internal_search", {"queries": ["a"]})] * 2,
            id="function-wrapper-twice-on-purpose",
        ),
        pytest.param(
            '{"name":"internal_search","parameters":{"queries":["p"]}}',
            [("internal_search", {"queries": ["p"]})],
            id="parameters-key",
        ),
        pytest.param(
            '{"name":"internal_search","arguments":"{\\"queries\\": [\\"s\\"]}"}',
            [("internal_search", {"queries": ["s"]})],
            id="string-arguments",
        ),
        pytest.param(
            '{"name":"internal_search","arguments":"oops"}',
            [("internal_search", {})],
            id="unparseable-string-arguments",
        ),
        pytest.param('{"name":"get_time"}', [("get_time", {})], id="missing-arguments-is-empty"),
        pytest.param(
            '{"name":"internal_search","arguments":[1]}',
            [],
            id="list-arguments-fall-through",
        ),
        pytest.param(
            '{"open_url":{"urls":["https://a.example"]}}',
            [("open_url", {"urls": ["https://a.example"]})],
            id="tool-key",
        ),
        pytest.param(
            '{"open_url":"x","internal_search":{"queries":["k"]}}',
            [("internal_search", {"queries": ["k"]})],
            id="tool-key-needs-dict",
        ),
        pytest.param(
            '{"urls":["https://a.example"],"reason":"check","extra":1}',
            [("open_url", {"urls": ["https://a.example"], "reason": "check"})],
            id="schema",
        ),
        pytest.param('{"reason":"no urls"}', [], id="schema-missing-required"),
        pytest.param('{"other":1}', [], id="schema-no-property"),
        pytest.param('{"name":"delete_everything","arguments":{}}', [], id="unknown-tool-json"),
        pytest.param(
            '{"name":"internal_search","arguments":{"queries":["x"]}} '
            '<invoke name="get_time"></invoke>',
            [("internal_search", {"queries": ["x"]})],
            id="json-before-invoke",
        ),
        pytest.param(
            '<invoke name="internal_search"><parameter name="queries" string="true">42'
            "</parameter></invoke>",
            [("internal_search", {"queries": "42"})],
            id="invoke-string-true",
        ),
        pytest.param(
            '<invoke name="internal_search"><parameter name="queries" string="TRUE">[1]'
            "</parameter></invoke>",
            [("internal_search", {"queries": "[1]"})],
            id="invoke-string-true-any-case",
        ),
        pytest.param(
            '<invoke name="internal_search"><parameter name="queries">42</parameter></invoke>',
            [("internal_search", {"queries": 42})],
            id="invoke-json-value",
        ),
        pytest.param(
            '<invoke name="internal_search"><parameter name="queries">  plain words  '
            "</parameter></invoke>",
            [("internal_search", {"queries": "plain words"})],
            id="invoke-plain-value",
        ),
        pytest.param(
            "<invoke name='internal&#95;search'><parameter name=\"queries\">"
            "[&quot;a &amp; b&quot;, &quot;&lt;c&gt;&quot;]</parameter></invoke>",
            [("internal_search", {"queries": ["a & b", "<c>"]})],
            id="invoke-html-unescaped",
        ),
        pytest.param(
            '<invoke name=" get_time "></invoke>', [("get_time", {})], id="invoke-zero-params"
        ),
        pytest.param(
            '<INVOKE name="open_url">\n<parameter>skipped</parameter>\n'
            '<parameter name="urls">["u1"]</parameter>\n'
            '<parameter name="urls">["u2"]</parameter>\n</INVOKE>',
            [("open_url", {"urls": ["u2"]})],
            id="invoke-nameless-skipped-repeated-overwrites",
        ),
        pytest.param(
            '<invoke name="get_time"></invoke><invoke name="nope"></invoke>'
            '<invoke name="internal_search"><parameter name="queries">["q\x00"]</parameter>'
            "</invoke>",
            [("get_time", {}), ("internal_search", {"queries": ["q"]})],
            id="invoke-several-sanitized",
        ),
        pytest.param("Just prose, no calls.", [], id="prose"),
        pytest.param("", [], id="empty"),
    ],
)
def test_extract_tool_calls(text: str, expect: list[tuple[str, dict[str, Any]]]) -> None:
    check_extract(text, expect)


@pytest.mark.parametrize(
    "tools",
    [[], [{"type": "retrieval"}], [{"type": "function", "function": {"name": ""}}], ["junk"]],
)
def test_extract_tool_calls_without_usable_tools(tools: list[Any]) -> None:
    check_extract(ALPHA, [], tools=tools)


def test_nested_arguments_gap_is_kept() -> None:
    # Onyx behaviour kept on purpose: a later stand-alone object equal to the previous call's
    # nested arguments is taken for the nested duplicate and dropped.
    check_extract(
        f'{ALPHA} then {{"queries":["alpha"]}}', [("internal_search", {"queries": ["alpha"]})]
    )
    check_extract(
        f'{ALPHA} then {{"queries":["beta"]}}',
        [
            ("internal_search", {"queries": ["alpha"]}),
            ("internal_search", {"queries": ["beta"]}),
        ],
    )


@pytest.mark.parametrize(
    ("text", "fragment", "shape"),
    [
        ("😋 say " + ALPHA + " ok", ALPHA, "name-arguments"),
        (
            'é {"function":{"name":"get_time"}} x',
            '{"function":{"name":"get_time"}}',
            "function-wrapper",
        ),
        ('«{"get_time":{}}»', '{"get_time":{}}', "tool-key"),
        ('\n\n{"urls": ["x"]}\n', '{"urls": ["x"]}', "schema"),
        (
            '🙂 <function_calls>\n<invoke name="get_time">\n</invoke>\n</function_calls>',
            '<invoke name="get_time">\n</invoke>',
            "invoke",
        ),
    ],
)
def test_offsets_and_shape(text: str, fragment: str, shape: str) -> None:
    (call,) = extract_tool_calls(text, ALL_TOOLS)
    assert (text[call.start : call.end], call.start, call.shape) == (
        fragment,
        text.index(fragment),
        shape,
    )


def test_ids_are_deterministic() -> None:
    text = f"{ALPHA}\n{ALPHA}"
    first, second = extract_tool_calls(text, SEARCH)
    key = 'internal_search:{"queries": ["alpha"]}'
    assert first.id == "extracted_" + hashlib.sha1(f"0:{key}".encode()).hexdigest()[:8]
    assert second.id == "extracted_" + hashlib.sha1(f"1:{key}".encode()).hexdigest()[:8]
    assert [c.id for c in extract_tool_calls(text, SEARCH)] == [first.id, second.id]


# -- find_json_objects -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ('{"a":{"b":{}}}', ['{"a":{"b":{}}}', '{"b":{}}', "{}"]),
        ('x {"a":"}{"} y', ['{"a":"}{"}']),
        ('{"a":"\\"}"}', ['{"a":"\\"}"}']),
        ('{"a":"\\\\"}', ['{"a":"\\\\"}']),
        ('He said "hi" {"a":1} and "bye {"b":2}', ['{"a":1}', '{"b":2}']),
        ('{ code "quote\n{"a":1}', ['{"a":1}']),
        ("{not json} {'a': 1} [1]", []),
        ('{"a":1', []),
        ('}}{"a":1}{{', ['{"a":1}']),
        ('{"a": {"b": 1}, "a": 2}', ['{"a": {"b": 1}, "a": 2}', '{"b": 1}']),
    ],
)
def test_find_json_objects(text: str, expect: list[str]) -> None:
    found = find_json_objects(text)
    assert [text[start:end] for start, end, _ in found] == expect
    assert [obj for _, _, obj in found] == [json.loads(fragment) for fragment in expect]


def test_find_json_objects_caps_candidates() -> None:
    text = " ".join(f'{{"k":{i}}}' for i in range(MAX_JSON_CANDIDATES + 5))
    found = find_json_objects(text)
    assert len(found) == MAX_JSON_CANDIDATES
    assert found[-1][2] == {"k": MAX_JSON_CANDIDATES - 1}


def test_code_braces_do_not_use_up_the_cap() -> None:
    code = "function f(x) { if (x) { return {a: 1}; } else { s = '\"'; } }\n" * 1_000
    text = code + ALPHA
    check_extract(text, [("internal_search", {"queries": ["alpha"]})])


def test_deeply_nested_input_does_not_raise() -> None:
    assert find_json_objects('{"a":' * 5_000 + "1" + "}" * 5_000) == []


# -- A7 TestXmlToolCallContentFilter and the filter's chunk rules ------------------------------


@pytest.mark.parametrize(
    ("chunks", "expect"),
    [
        pytest.param(
            [
                'prefix <function_calls><invoke name="internal_search">'
                '<parameter name="queries" string="false">["Onyx docs"]</parameter>'
                "</invoke></function_calls> suffix"
            ],
            "prefix  suffix",
            id="A7-single-chunk",
        ),
        pytest.param(
            [
                "Start ",
                "<function_",
                'calls><invoke name="internal_search">',
                '<parameter name="queries" string="false">["Onyx docs"]',
                "</parameter></invoke></function_calls>",
                " End",
            ],
            "Start  End",
            id="A7-split-chunks",
        ),
        pytest.param(["A <tag>value</tag> B"], "A <tag>value</tag> B", id="A7-other-xml"),
        pytest.param(
            ["A <function_calls_v2><invoke>noop</invoke></function_calls_v2> B"],
            "A <function_calls_v2><invoke>noop</invoke></function_calls_v2> B",
            id="A7-v2-follower",
        ),
        pytest.param(
            ["A <function_calls_v2> ", "<function_calls>x</function_calls>B"],
            "A <function_calls_v2> B",
            id="invalid-follower-skipped-then-valid",
        ),
        pytest.param(
            ["A <function_calls", "_v2>x</function_calls_v2> B"],
            "A ",
            id="v2-after-chunk-end-swallows-unclosed",
        ),
        pytest.param(
            ["A <function_calls", "_v2>x</function_calls> B"],
            "A  B",
            id="v2-after-chunk-end-swallows-to-close",
        ),
        pytest.param(["a<FUNCTION_CALLS>x</Function_Calls>b"], "ab", id="case-insensitive"),
        pytest.param(
            ["a<function_calls\tx>y</function_calls>b<function_calls\r\n>z</function_calls>c"],
            "abc",
            id="whitespace-followers",
        ),
        pytest.param(["x<function_calls>never closed"], "x", id="unclosed-dropped-at-flush"),
        pytest.param(["x<function_calls>", "never", " closed"], "x", id="unclosed-across-chunks"),
        pytest.param(
            ["1<function_calls>a</function_calls>2<function_calls>b</function_calls>3"],
            "123",
            id="multiple-blocks-one-chunk",
        ),
        pytest.param(
            ["a<function_calls>", "x</func", "tion_calls>", "b"],
            "ab",
            id="close-marker-split",
        ),
        pytest.param(["a <", "b"], "a <b", id="held-lt-released"),
        pytest.param(["a <function_call"], "a <function_call", id="held-prefix-flushed"),
        pytest.param(["a <Function_Call", "ed>"], "a <Function_Called>", id="held-prefix-released"),
        pytest.param(["<function_call", "s>x</function_calls>y"], "y", id="held-prefix-completes"),
        pytest.param(["a <", "<", "<f"], "a <<<f", id="only-last-lt-held"),
        pytest.param(["", "", ""], "", id="empty-chunks"),
    ],
)
def test_function_calls_filter(chunks: list[str], expect: str) -> None:
    check_filter(chunks, expect)


@pytest.mark.parametrize(
    ("chunk", "shown", "flushed"),
    [
        ("text <", "text ", "<"),
        ("text <f", "text ", "<f"),
        ("text <function_call", "text ", "<function_call"),
        ("text <FUNCTION_CALL", "text ", "<FUNCTION_CALL"),
        ("text <fx", "text <fx", ""),
        ("text <function_calls", "text ", ""),
        ("a <b> <", "a <b> ", "<"),
    ],
)
def test_filter_holds_back_marker_prefixes(chunk: str, shown: str, flushed: str) -> None:
    text_filter = FunctionCallsFilter()
    assert (text_filter.feed(chunk), text_filter.flush()) == (shown, flushed)


# Random text avoids "s" so that "<function_calls" only comes from fragments that carry a
# valid follower: a chunk ending right after the marker then cannot change the outcome.
_FRAGMENTS = st.sampled_from(
    [
        "<",
        "<f",
        "<function_",
        "<function_call",
        "<function_calls>",
        "<FUNCTION_CALLS ",
        "<Function_Calls\n",
        "</function_calls>",
        "</FUNCTION_CALLS>",
        "</function_",
        "<invoke>",
        "_v2>",
        ">",
    ]
)
_FILTER_TEXT = st.lists(
    _FRAGMENTS | st.text(alphabet="ab <>/_\n\tFé😋", max_size=4), max_size=12
).map("".join)
_INVALID_FOLLOWER_RE = re.compile(r"<function_calls(?![> \t\n\r]|\Z)", re.IGNORECASE)


@given(st.text().filter(lambda text: "<" not in text))
def test_filter_leaves_text_without_lt_unchanged(text: str) -> None:
    assert strip_function_calls(text) == text


@given(_FILTER_TEXT, st.data())
def test_filter_output_does_not_depend_on_chunking(text: str, data: st.DataObject) -> None:
    assert _INVALID_FOLLOWER_RE.search(text) is None
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    bounds = [0, *cuts, len(text)]
    chunks = [text[start:end] for start, end in itertools.pairwise(bounds)]
    check_filter(chunks, strip_function_calls(text))


# -- A7 TestEmptyAnswerRecovery (markup checks, layer 2) ---------------------------------------


@pytest.mark.parametrize(
    ("raw", "filtered", "is_markup"),
    [
        ("<function_calls>noop</function_calls>", "", False),
        (
            '<function_calls><invoke name="search"><parameter name="query">hi</parameter>'
            "</invoke></function_calls>",
            "",
            True,
        ),
        ('<function_calls><invoke name="get_time"></invoke></function_calls>', "", True),
        ('<FUNCTION_CALLS><INVOKE name="get_time"></INVOKE></FUNCTION_CALLS>', "", True),
        ('<invoke name="get_time"></invoke>', '<invoke name="get_time"></invoke>', False),
        ("The answer is 42.", "The answer is 42.", False),
    ],
)
def test_markup_checks(raw: str, filtered: str, is_markup: bool) -> None:
    assert (strip_function_calls(raw), looks_like_tool_call_markup(raw)) == (filtered, is_markup)


# -- A4 TestFallbackToolExtraction and layer 3 -------------------------------------------------

ALPHA_CALL = [("internal_search", {"queries": ["alpha"]})]


@pytest.mark.parametrize(
    ("kwargs", "expect"),
    [
        pytest.param(
            {"answer": ALPHA, "tool_choice_required": True, "already_attempted": True},
            (False, [], None),
            id="A4-noop-if-already-attempted",
        ),
        pytest.param(
            {"answer": ALPHA, "tool_choice_required": True},
            (True, ALPHA_CALL, "answer"),
            id="A4-required-from-answer",
        ),
        pytest.param(
            {
                "answer": "I should search first.",
                "reasoning": '{"name":"internal_search","arguments":{"queries":["beta"]}}',
                "tool_choice_required": True,
            },
            (True, [("internal_search", {"queries": ["beta"]})], "reasoning"),
            id="A4-falls-back-to-reasoning",
        ),
        pytest.param(
            {"answer": XML_THREE, "tool_choice_required": True},
            (True, [("internal_search", {"queries": THREE_QUERIES})], "answer"),
            id="A4-xml-required",
        ),
        pytest.param(
            {"answer": None, "raw_answer": XML_THREE},
            (True, [("internal_search", {"queries": THREE_QUERIES})], "raw_answer"),
            id="A4-xml-auto-from-raw",
        ),
        pytest.param(
            {"answer": "", "raw_answer": XML_TWO},
            (True, [("internal_search", {"queries": THREE_QUERIES[:2]})], "raw_answer"),
            id="A4-raw-when-filtered-answer-empty",
        ),
        pytest.param(
            {"answer": "Here is a plain prose answer."},
            (False, [], None),
            id="A4-auto-without-hints",
        ),
        pytest.param(
            {
                "answer": "Let me think.",
                "reasoning": "Need more info.",
                "tool_choice_required": True,
            },
            (True, [], None),
            id="A4-required-nothing-extractable",
        ),
        pytest.param(
            {"answer": ALPHA, "tool_choice_required": True, "has_structured_calls": True},
            (False, [], None),
            id="A4-noop-with-structured-calls",
        ),
        pytest.param(
            {"answer": None, "reasoning": ALPHA},
            (True, ALPHA_CALL, "reasoning"),
            id="reasoning-without-answer",
        ),
        pytest.param(
            {"answer": "ok", "reasoning": ALPHA},
            (False, [], None),
            id="reasoning-with-answer-auto",
        ),
        pytest.param(
            {"answer": XML_THREE, "raw_answer": XML_THREE, "reasoning": ALPHA, "tools": []},
            (True, [], None),
            id="no-tools-offered",
        ),
        pytest.param(
            {"answer": "prose", "raw_answer": "prose", "reasoning": XML_TWO},
            (True, [("internal_search", {"queries": THREE_QUERIES[:2]})], "reasoning"),
            id="markup-in-reasoning",
        ),
        pytest.param(
            {"answer": ALPHA, "raw_answer": BETA, "tool_choice_required": True},
            (True, ALPHA_CALL, "answer"),
            id="answer-wins-over-raw",
        ),
    ],
)
def test_fallback_extraction(kwargs: dict[str, Any], expect: tuple[bool, list, str | None]):
    check_fallback(expect, **kwargs)


# -- the rules' pre-checks (``admits``): never refuse a text the parsers read ----------------

_CALL_PARTS = [
    "{",
    "}",
    '"name": "internal_search"',
    '"arguments": {"queries": ["a"]}',
    '<invoke name="internal_search">',
    '<INVOKE name="internal_search">',
    '<Invo\u212ae name="internal_search">',  # (KELVIN SIGN: "k" to ``re.IGNORECASE``)
    '<parameter name="queries" string="false">["a"]</parameter>',
    "</invoke>",
    "<function_calls>",
    "</function_calls>",
    "<tool_call>",
    "</tool_call>",
    "<|python_tag|>",
    "internal_search.call(queries=['a'])",
    "text ",
    "\n",
]


@settings(deadline=None)
@given(st.lists(st.sampled_from(_CALL_PARTS), max_size=12).map("".join))
def test_the_rules_pre_checks_admit_every_text_the_parsers_read(text: str) -> None:
    message: Any = SimpleNamespace(content=text)
    if extract_tool_calls(text, ALL_TOOLS):
        assert _MayHoldCall.admits(message)
    if markup_tool_calls(text):
        assert _MayHoldMarkup.admits(message)


def test_an_invoke_tag_in_any_case_is_admitted_as_the_parser_reads_it() -> None:
    for tag in ("<INVOKE", "<Invoke", "<invo\u212ae"):
        text = XML_THREE.replace("<invoke", tag)
        assert extract_tool_calls(text, ALL_TOOLS), tag
        assert _MayHoldCall.admits(SimpleNamespace(content=text)), tag  # type: ignore[arg-type]
    assert not _MayHoldCall.admits(SimpleNamespace(content="a < b, no call"))  # type: ignore[arg-type]
