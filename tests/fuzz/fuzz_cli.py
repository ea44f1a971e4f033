"""On-demand fuzz run of the command line with generated hostile documents.

    python tests/fuzz/fuzz_cli.py [--cases 3000] [--seed 1] [--timeout 60] [--subprocess-every 50]

Each case writes a hostile variant of a conversation (JSON, JSON Lines, a JSON Lines
dataset of one conversation per line, or YAML) and maybe hostile neighbours (FIFOs,
devices, dangling or looping symlinks, references with NUL bytes or over-long names, huge
sparse files), then runs ``assemble`` or ``lint`` in a
forked process (the engine is imported once, so thousands of cases take minutes) under an
address-space limit and a deadline; every ``--subprocess-every``-th case also runs as a
real ``python -m server.cli`` subprocess (``tests/support/limited.py``). A case fails on
a hang, a crash (a signal, an exit code other than 0, 1, 2), a traceback, output that is
not valid UTF-8, or JSON output that does not parse. The report: cases tried, failures by
kind (with the first reproductions), the peak memory of the worst case and the longest
time any case took.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from server.cli.main import main as cli_main  # noqa: E402  (the engine, imported once)
from server.workspace import analyze  # noqa: E402, F401  (warm imports before forking)
from tests.support.limited import promptls  # noqa: E402

MEMORY = 4 * 1024**3
WORDS = ["hello", "read_file", "café", "👍🏽", "\u2028", "\r", "{{CURRENT_DATETIME}}", "x" * 300]


# --- Documents ------------------------------------------------------------------------


def _message(rng: random.Random, i: int) -> dict[str, object]:
    role = rng.choice(["user", "assistant", "tool", "system", "reminder", "summary", "human"])
    m: dict[str, object] = {
        "id": f"m{i}",
        "role": role,
        "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12))),
    }
    if role == "assistant" and rng.random() < 0.3:
        m["tool_calls"] = [
            {
                "id": f"c{i}",
                "type": "function",
                "function": {"name": "read_file", "arguments": "{}"},
            }
        ]
    if role == "tool":
        m["tool_call_id"] = f"c{i - 1}"
    return m


def _document(rng: random.Random) -> dict[str, object]:
    n = rng.choice([0, 1, 2, 5, 20, 200])
    doc: dict[str, object] = {"messages": [_message(rng, i) for i in range(n)]}
    if rng.random() < 0.5:
        doc["settings"] = {"max_input_tokens": rng.choice([100, 4000, 128000])}
    return doc


def _dump(doc: object, fmt: str) -> str:
    if fmt == "dataset":  # one conversation per line: the messages, five a record
        msgs = doc["messages"] if isinstance(doc, dict) else []
        records = [{"messages": msgs[k : k + 5]} for k in range(0, len(msgs), 5)]
        return "\n".join(json.dumps(r, ensure_ascii=False) for r in records or [{}]) + "\n"
    if fmt == "json":
        return json.dumps(doc, ensure_ascii=False, indent=1)
    if fmt == "jsonl":
        msgs = doc["messages"] if isinstance(doc, dict) else []
        head = {k: v for k, v in doc.items() if k != "messages"} if isinstance(doc, dict) else {}
        lines = [json.dumps(head)] if head else []
        return "\n".join(lines + [json.dumps(m, ensure_ascii=False) for m in msgs]) + "\n"
    import yaml

    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)


# --- Mutations: each takes the text and the case folder, returns the new text -------------

Mutation = Callable[[random.Random, str, Path, str], str]


def _inside_a_string(rng: random.Random, text: str) -> int:
    quotes = [i for i, c in enumerate(text) if c == '"']
    return (rng.choice(quotes) + 1) if quotes else rng.randint(0, len(text))


def m_control(rng: random.Random, text: str, d: Path, fmt: str) -> str:
    at = _inside_a_string(rng, text)
    return text[:at] + chr(rng.choice([0, 1, 9, 27, 31, 127])) + text[at:]


def m_surrogate(rng: random.Random, text: str, d: Path, fmt: str) -> str:
    at = _inside_a_string(rng, text)
    esc = rng.choice(["\\ud800", "\\udc80", "\\udbff\\udbff", "\\ud83d", "\\uDFFF x"])
    return text[:at] + esc + text[at:]


def m_truncate(rng: random.Random, text: str, d: Path, fmt: str) -> str:
    return text[: rng.randint(0, len(text))]


def m_bytes(rng: random.Random, text: str, d: Path, fmt: str) -> str:
    data = bytearray(text.encode("utf-8", "surrogateescape"))
    for _ in range(rng.randint(1, 5)):
        if data:
            data[rng.randrange(len(data))] = rng.randrange(256)
    return data.decode("utf-8", "surrogateescape")  # written back as these bytes


def m_number(rng: random.Random, text: str, d: Path, fmt: str) -> str:
    n = "9" * rng.choice([101, 4301, 20000])
    if fmt == "yaml":
        return f"settings: {{max_input_tokens: {n}}}\n" + text.replace("settings:", "s2:", 1)
    return text.replace('"max_input_tokens": ', f'"max_input_tokens": {n}, "x": ', 1)


def m_nesting(rng: random.Random, text: str, d: Path, fmt: str) -> str:
    depth = rng.choice([200, 257, 3000, 50000])
    deep = "[" * depth + "]" * depth
    if fmt == "yaml":
        return text + f"\nextra: {deep}\n"
    at = _inside_a_string(rng, text) - 1
    return text[:at] + deep + "," + text[at:]


def m_alias_bomb(rng: random.Random, text: str, d: Path, fmt: str) -> str:
    width, levels = rng.choice([(9, 9), (2, 40), (50, 4)])
    lines = ['a0: &a0 ["lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    pad = "pad: " + "p" * rng.choice([0, 260_000]) + "\n"
    return pad + "\n".join(lines) + f"\nmessages:\n  - {{role: user, content: *a{levels - 1}}}\n"


def m_self_anchor(rng: random.Random, text: str, d: Path, fmt: str) -> str:
    return "messages: &m\n  - {role: user, content: hi}\n" + "  - *m\n" * rng.randint(1, 300)


def m_tags(rng: random.Random, text: str, d: Path, fmt: str) -> str:
    tag = rng.choice(["!!python/object", "!!binary", "!foo", "!!set", "!!omap", "!<tag:x>"])
    return text.replace("role:", f"role: {tag}", 1) if fmt == "yaml" else text


def m_duplicate(rng: random.Random, text: str, d: Path, fmt: str) -> str:
    if fmt == "yaml":
        return text + "messages: []\n"
    return text.replace('"role": ', '"role": "user", "role": ', rng.randint(1, 3))


def m_settings(rng: random.Random, text: str, d: Path, fmt: str) -> str:
    key = rng.choice(
        [
            "max_input_tokens",
            "reserved_tokens",
            "safety_margin",
            "encoding",
            "image_cap",
            "branch_tip",
            "rules",
            "provider",
        ]
    )
    value = rng.choice(
        [
            "true",
            "-1",
            "1e400",
            "nan",
            "foo_base",
            "[]",
            "{}",
            "null",
            '"auto"',
            "0",
            "10000000000000000000000",
        ]
    )
    return (
        f"settings: {{{key}: {value}}}\n" + text.replace("settings:", "s2:", 1)
        if (fmt == "yaml")
        else text.replace("{", f'{{"settings": {{"{key}": {value}}}, ', 1)
    )


def m_ids(rng: random.Random, text: str, d: Path, fmt: str) -> str:
    return text.replace("m0", rng.choice(["$system", "$reminder", "$x", "", "m1"]), 2)


def m_references(rng: random.Random, text: str, d: Path, fmt: str) -> str:
    kind = rng.choice(["nul", "long", "loop", "fifo", "zero", "dangling", "huge", "dir", "up"])
    unique = f"{kind}{rng.randrange(10**9)}.prompt.md"  # a case may mutate twice
    name = {"nul": "a\\u0000b.md", "long": "a" * 300 + ".md", "up": "../../etc/passwd"}.get(
        kind, unique
    )
    target = d / unique
    if kind == "loop":
        os.symlink(target.name, target)
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "zero":
        os.symlink("/dev/zero", target)
    elif kind == "dangling":
        os.symlink("nowhere.md", target)
    elif kind == "huge":
        with open(target, "wb") as f:
            f.truncate(rng.choice([65 * 1024**2, 1024**3]))
    elif kind == "dir":
        target.mkdir()
    field = rng.choice(["system_prompt", "project_files"])
    if field == "system_prompt":
        value: object = name
    else:
        value = [{"file_id": "f1", "filename": "f", "path": name}]
    ref = json.dumps({field: value})[1:-1]
    if fmt == "yaml":
        return "{" + ref + "}\n" if not text.strip() else f"{field}: {json.dumps(value)}\n" + text
    if fmt == "jsonl":
        return "{" + ref + "}\n" + text
    return text.replace("{", "{" + ref + ", ", 1) if text.lstrip().startswith("{") else text


def m_many(rng: random.Random, text: str, d: Path, fmt: str) -> str:
    n = rng.choice([25_000, 200_000, 1_000_000])
    one = '{"role":"user","content":"x"}'
    if fmt == "yaml":
        return "messages:\n" + "  - {role: user, content: x}\n" * min(n, 300_000)
    if fmt == "jsonl":
        return "\n".join([one] * n) + "\n"
    return "[" + ",".join([one] * n) + "]"


def m_unicode(rng: random.Random, text: str, d: Path, fmt: str) -> str:
    junk = rng.choice(["\u2028", "\r", "\r\r\n", "\ufeff", "\U0010ffff", "\u0085", "\x7f"])
    at = rng.randint(0, len(text))
    return text[:at] + junk * rng.randint(1, 50) + text[at:]


# The heavy ones (a million messages, an alias bomb) once, the cheap ones three times.
_CHEAP: list[Mutation] = [
    m_control,
    m_surrogate,
    m_truncate,
    m_bytes,
    m_number,
    m_nesting,
    m_self_anchor,
    m_tags,
    m_duplicate,
    m_settings,
    m_ids,
    m_references,
    m_unicode,
]
MUTATIONS: list[Mutation] = [*_CHEAP, *_CHEAP, *_CHEAP, m_alias_bomb, m_many]


def _folder_specials(rng: random.Random, d: Path) -> None:
    """Neighbours that ``lint .`` meets: special files named like documents."""
    kind = rng.choice(["fifo", "zero", "dangling", "loop", "gitignore-fifo", "outside", "none"])
    if kind == "fifo":
        os.mkfifo(d / "fifo.conv.json")
    elif kind == "zero":
        os.symlink("/dev/zero", d / "zero.conv.yaml")
    elif kind == "dangling":
        os.symlink("nowhere", d / "dangling.conv.json")
    elif kind == "loop":
        os.symlink("l2.conv.json", d / "l1.conv.json")
        os.symlink("l1.conv.json", d / "l2.conv.json")
    elif kind == "gitignore-fifo":
        os.mkfifo(d / ".gitignore")
    elif kind == "outside":
        os.symlink("/", d / "root")


# --- Running ------------------------------------------------------------------------


@dataclass
class Outcome:
    name: str
    seconds: float
    rss_mb: float
    problems: list[str]


def _run_forked(
    argv: list[str], cwd: Path, timeout: float
) -> tuple[int, bytes, bytes, float, float, bool]:
    out_path, err_path = cwd.parent / "stdout", cwd.parent / "stderr"
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            os.setsid()
            resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
            os.chdir(cwd)
            out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(out, 1)
            os.dup2(err, 2)
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            code = cli_main(argv)
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
            code = 70  # an exception escaped main(): a crash
        finally:
            os._exit(code)
    timed_out = False
    try:
        while True:
            got, status, usage = os.wait4(pid, os.WNOHANG)
            if got:
                break
            if time.monotonic() - start > timeout:
                timed_out = True
                os.killpg(pid, signal.SIGKILL)
                _, status, usage = os.wait4(pid, 0)
                break
            time.sleep(0.01)
    except BaseException:  # interrupted: leave no case running (it has its own session)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        raise
    seconds = time.monotonic() - start
    return (
        os.waitstatus_to_exitcode(status),
        out_path.read_bytes(),
        err_path.read_bytes(),
        seconds,
        usage.ru_maxrss / 1024,
        timed_out,
    )


def _problems(rc: int, out: bytes, err: bytes, timed_out: bool, json_out: bool) -> list[str]:
    res = []
    if timed_out:
        res.append("hang")
    elif rc < 0:
        res.append(f"crash: signal {-rc}")
    elif rc not in (0, 1, 2):
        res.append(f"crash: exit {rc}")
    for data in (out, err):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            res.append("invalid UTF-8")
            continue
        if "Traceback (most recent call last)" in text:
            res.append("traceback")
    if json_out and rc in (0, 1) and not timed_out:
        try:
            json.loads(out)
        except ValueError:
            # A dataset's records are printed as JSON Lines (`assemble --format json`): one
            # object a line, split at "\n" only (a string may hold U+2028 as it is).
            lines = out.decode("utf-8", "replace").removesuffix("\n").split("\n")
            try:
                if len(lines) < 2 or not all(isinstance(json.loads(x), dict) for x in lines):
                    res.append("JSON output does not parse")
            except ValueError:
                res.append("JSON output does not parse")
    return res


def run_case(
    i: int, rng: random.Random, base: Path, timeout: float, real: bool, execute: bool = True
) -> Outcome | None:
    d = base / f"case{i}" / "w"
    d.mkdir(parents=True)
    fmt = rng.choice(["json", "jsonl", "yaml", "dataset"])
    text = _dump(_document(rng), fmt)
    if fmt == "dataset":
        fmt = "jsonl"  # (its mutations are those of JSON Lines)
    names = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        mutation = rng.choice(MUTATIONS)
        names.append(mutation.__name__[2:])
        text = mutation(rng, text, d, fmt)
    doc = d / f"doc.conv.{fmt}"
    doc.write_bytes(text.encode("utf-8", "surrogateescape"))
    command = rng.choice(["assemble-json", "assemble-text", "lint-json", "lint-sarif", "lint-dir"])
    if command == "lint-dir":
        _folder_specials(rng, d)
    argv = {
        "assemble-json": ["assemble", "--format", "json", doc.name],
        "assemble-text": ["assemble", doc.name],
        "lint-json": ["lint", "--format", "json", doc.name],
        "lint-sarif": ["lint", "--format", "sarif", doc.name],
        "lint-dir": ["lint", "--format", "json", "."],
    }[command]
    name = f"case {i}: {fmt} {'+'.join(names)} | {' '.join(argv)}"
    if not execute:  # replaying the generator up to --start
        shutil.rmtree(base / f"case{i}", ignore_errors=True)
        return None
    rc, out, err, seconds, rss, timed_out = _run_forked(argv, d, timeout)
    problems = _problems(rc, out, err, timed_out, "json" in argv or "sarif" in argv)
    if real:
        r = promptls(*argv, cwd=d, timeout=timeout)
        problems += [f"subprocess: {p}" for p in r.problems()]
        seconds, rss = max(seconds, r.seconds), max(rss, r.max_rss_mb)
    shutil.rmtree(base / f"case{i}", ignore_errors=True)
    return Outcome(name, seconds, rss, problems)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--subprocess-every", type=int, default=50)
    parser.add_argument("--start", type=int, default=0, help="generate but skip cases before")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up on `kill` too
    rng = random.Random(args.seed)
    base = Path(tempfile.mkdtemp(prefix="promptls-fuzz-"))
    kinds: Counter[str] = Counter()
    examples: dict[str, str] = {}
    worst_rss = Outcome("", 0, 0, [])
    longest = Outcome("", 0, 0, [])
    started = time.monotonic()
    try:
        for i in range(args.cases):
            real = args.subprocess_every > 0 and i % args.subprocess_every == 0
            o = run_case(i, rng, base, args.timeout, real, execute=i >= args.start)
            if o is None:
                continue
            for p in o.problems:
                kind = p.removeprefix("subprocess: ").split(":")[0]
                kinds[kind] += 1
                examples.setdefault(kind, f"{o.name}: {p[:300]}")
            if o.rss_mb > worst_rss.rss_mb:
                worst_rss = o
            if o.seconds > longest.seconds:
                longest = o
            if (i + 1) % 250 == 0:
                print(f"… {i + 1} cases, {sum(kinds.values())} problems", file=sys.stderr)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"seed {args.seed}: {args.cases} cases in {time.monotonic() - started:.0f} s")
    for kind in ("hang", "crash", "traceback", "invalid UTF-8", "JSON output does not parse"):
        print(f"  {kind:28} {kinds.get(kind, 0)}")
    for kind, n in kinds.items():
        print(f"  first {kind} ({n}): {examples[kind]}")
    print(f"  peak memory of the worst case: {worst_rss.rss_mb:.0f} MB ({worst_rss.name})")
    print(f"  longest case: {longest.seconds:.1f} s ({longest.name})")
    return 1 if kinds else 0


if __name__ == "__main__":
    sys.exit(main())
