"""Benchmark: what telling a document's format by its shape costs (run on demand).

Generates a chat log of N messages (user text parts, assistant tool calls, tool results)
in promptls', Anthropic's and the Responses shape, and measures, medians over
``--repeat`` runs: the detection alone (``formats.detect.detect`` on the parsed tree) and
the whole read (``parse_conversation``), so the detection's share of a read is seen.

    python tests/bench/bench_formats.py [--messages 20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from assembly.formats.detect import detect
from assembly.model import DocFormat
from assembly.reading import parse_conversation
from assembly.syntax import parse_json


def _chat(n: int) -> Any:
    msgs: list[dict[str, Any]] = []
    for i in range(n):
        if i % 3 == 0:
            msgs.append({"role": "user", "content": [{"type": "text", "text": "y" * 400}]})
        elif i % 3 == 1:
            call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        else:
            msgs.append({"role": "tool", "tool_call_id": f"c{i - 1}", "content": "x" * 300})
    return {"settings": {}, "messages": msgs}


def _anthropic(n: int) -> Any:
    msgs: list[dict[str, Any]] = []
    for i in range(0, n, 2):
        use = {"type": "tool_use", "id": f"t{i}", "name": "f", "input": {}}
        result = {"type": "tool_result", "tool_use_id": f"t{i}", "content": "x" * 300}
        msgs.append({"role": "user", "content": [result] if i else [{"type": "text", "text": "y"}]})
        msgs.append({"role": "assistant", "content": [{"type": "text", "text": "y" * 400}, use]})
    msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n - 2}"}]})
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "s", "messages": msgs}


def _responses(n: int) -> Any:
    items: list[dict[str, Any]] = []
    for i in range(n):
        if i % 3 == 0:
            items.append({"role": "user", "content": [{"type": "input_text", "text": "y" * 400}]})
        elif i % 3 == 1:
            items.append(
                {"type": "function_call", "call_id": f"c{i}", "name": "f", "arguments": "{}"}
            )
        else:
            items.append(
                {"type": "function_call_output", "call_id": f"c{i - 1}", "output": "x" * 300}
            )
    return {"model": "gpt-4.1", "instructions": "s", "input": items}


def _median(f: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'shape':<12} {'MB':>5} {'detect ms':>10} {'read ms':>9} {'share':>6}")
    for name, make in (("promptls", _chat), ("anthropic", _anthropic), ("responses", _responses)):
        text = json.dumps(make(args.messages))
        root = parse_json(text).root
        d = _median(lambda root=root: detect(root), args.repeat)
        r = _median(lambda text=text: parse_conversation(text, DocFormat.JSON), args.repeat)
        print(f"{name:<12} {len(text) / 1e6:>5.1f} {d * 1e3:>10.1f} {r * 1e3:>9.0f} {d / r:>6.1%}")


if __name__ == "__main__":
    main()
