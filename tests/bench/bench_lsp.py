"""Benchmark: the language server over stdio on 1 MB and 10 MB conversations (on demand).

The documents come from ``tests/bench/gen_conversation.py`` (run as is). A minimal
JSON-RPC client (subprocess pipes, a reader thread that timestamps every message as it
arrives) drives two servers in the same run: ``python -m server`` and a trivial pygls
server (incremental sync, one fixed diagnostic per change, a constant hover), so the
figures can be told apart from what pygls and the transport cost anyway.

Per server and document it measures: didOpen -> first ``publishDiagnostics``; ``--edits``
one-character incremental ``didChange``s at varied places inside message contents, each
waiting for the ``publishDiagnostics`` of its version (median, p95); ``--hovers`` hover
round trips at varied positions while idle (median, p95); a hover sent right after a
``didChange``, while the server analyses it; a typing burst of ``--burst`` keystrokes sent
back to back, each followed by an outline and a folding request (as editors send them),
timed from the last keystroke to the ``publishDiagnostics`` of its version (and how many
versions of the burst were published); and the server process's peak RSS (VmHWM) when the
open's diagnostics arrived and at the end.

    python tests/bench/bench_lsp.py [--edits 30] [--hovers 100] [--burst 30] [--sizes 1,10]

``--root`` (another checkout, e.g. the starting commit) runs its server too, in the same
run, for a before/after pair.

``--kinds`` measures instead, for the promptls server only (``--root``: the checkout whose
``server`` runs, e.g. another worktree, for a before/after pair run back to back), every
edit kind on every format (JSON, JSON Lines, YAML) and size: typing inside a message, typing
a new message at the end character by character (through the syntax-broken states),
deleting a span across two messages and putting it back, inserting a message in the
middle and deleting it, typing in a message id, changing a role and back, typing in a
tool-call id, typing in the document's settings (JSONL: its header line), the kinds of
real documents (a deletion into an uploaded file's text, typing beside an SDK's field, a
Windows path typed into a message), and hover; each keystroke waits for the
``publishDiagnostics`` of its version (median, p95; a kind that alternates an edit and its
undo also gets a row for each half). Then the
outline and the folds, as editors ask for them after each change (the first of the
document; after typing in a message, at once and 250 ms later as VS Code asks; after
pasting and deleting a message, which moves every later line), request -> response; and
typing at a person's pace (a key every 150 ms) with both asked after each key and cancelled
at the next (as VS Code does): each key -> its diagnostics, the keys of ``--pace-runs`` runs
pooled. ``--views-only`` times the outline and the folds rows alone; ``--only TEXT`` times
only the edit kinds whose name has TEXT (then the views).
``--formats`` also takes ``dataset``: a JSON Lines dataset (a conversation per line,
``{"messages": [...]}``, ``DATASET_RECORD`` messages each, made from the JSON
conversation's messages), timed on the edits of its records (typing in a message, a new
record typed at the end, deleting across two records and putting it back, a record pasted
in the middle and deleted, a role changed and back) and without the views.

    python tests/bench/bench_lsp.py --kinds [--per-kind 8] [--formats json,jsonl,yaml]
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchkit import print_table

ROOT = Path(__file__).resolve().parents[2]
GEN = Path(__file__).resolve().parent / "gen_conversation.py"
SIZES = {1: ("1000", "1000000"), 10: ("10000", "10000000")}  # MB -> messages, bytes
TIMEOUT_S = 300.0

TRIVIAL_SERVER = textwrap.dedent(
    '''
    """A trivial pygls server: the floor the real one is compared with."""
    from lsprotocol import types as lsp
    from pygls.lsp.server import LanguageServer

    server = LanguageServer("trivial", "0")  # incremental sync by default
    DIAG = lsp.Diagnostic(
        range=lsp.Range(lsp.Position(0, 0), lsp.Position(0, 1)), message="one diagnostic"
    )

    def publish(ls, uri):
        doc = ls.workspace.get_text_document(uri)
        ls.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, version=doc.version, diagnostics=[DIAG])
        )

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls, params):
        publish(ls, params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls, params):
        publish(ls, params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(ls, params):
        return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.PlainText, value="x"))

    if __name__ == "__main__":
        server.start_io()
    '''
)

CAPABILITIES: dict[str, Any] = {
    "general": {"positionEncodings": ["utf-16"]},
    "textDocument": {
        "synchronization": {"didSave": True, "dynamicRegistration": False},
        "publishDiagnostics": {"versionSupport": True, "relatedInformation": True},
        "hover": {"contentFormat": ["markdown", "plaintext"]},
        # As VS Code's client sends them.
        "documentSymbol": {"hierarchicalDocumentSymbolSupport": True},
        "foldingRange": {"rangeLimit": 5000, "lineFoldingOnly": True},
    },
    "workspace": {
        "configuration": False,
        "didChangeWatchedFiles": {"dynamicRegistration": True},
    },
}


@dataclass
class Result:
    server: str
    size: str
    open_s: float = 0.0
    open_cpu_s: float = 0.0  # the server process's CPU time over the open (its children's not)
    edits_s: list[float] = field(default_factory=list)
    hovers_s: list[float] = field(default_factory=list)
    busy_hovers_s: list[float] = field(default_factory=list)
    hover_note: str = ""
    codes: list[str] = field(default_factory=list)  # of the last publishDiagnostics
    burst_s: float = 0.0  # last keystroke of the burst -> its publishDiagnostics
    burst_published: int = 0  # versions of the burst published
    open_rss_kb: int = 0  # the server's peak RSS when the open's diagnostics arrived
    peak_rss_kb: int = 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edits", type=int, default=30)
    ap.add_argument("--hovers", type=int, default=100)
    ap.add_argument("--busy-hovers", type=int, default=10)
    ap.add_argument("--burst", type=int, default=30, help="keystrokes of the typing burst")
    ap.add_argument("--sizes", default="1,10", help="document sizes in MB: 1, 10 or both")
    ap.add_argument("--corpus", type=Path, help="reuse or create the documents in this folder")
    ap.add_argument("--kinds", action="store_true", help="time every edit kind (see above)")
    ap.add_argument("--per-kind", type=int, default=8, help="keystrokes per edit kind")
    ap.add_argument("--formats", default="json,jsonl,yaml", help="also: dataset (--kinds)")
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout whose server runs")
    ap.add_argument("--only", default="", help="--kinds: the edit kinds whose name has this")
    ap.add_argument(
        "--views-only", action="store_true", help="--kinds: the outline and folds rows only"
    )
    ap.add_argument(
        "--pace-runs",
        type=int,
        default=4,
        help="--kinds: runs of the paced typing, their keys pooled (one run moves a lot)",
    )
    args = ap.parse_args()
    if not GEN.is_file():
        print(f"generator not found: {GEN}", file=sys.stderr)
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="promptls-lsp-bench-"))
    atexit.register(shutil.rmtree, scratch, True)  # the generated files go
    work = scratch
    corpus = args.corpus or work
    corpus.mkdir(parents=True, exist_ok=True)
    trivial = work / "trivial_server.py"
    trivial.write_text(TRIVIAL_SERVER, encoding="utf-8")
    servers = {"promptls": ([sys.executable, "-m", "server"], ROOT)}
    if args.root.resolve() != ROOT:  # a before/after pair in the same run
        servers[f"promptls@{args.root.name}"] = ([sys.executable, "-m", "server"], args.root)
    servers["trivial pygls"] = ([sys.executable, str(trivial)], ROOT)
    print(f"{os.cpu_count()} cores; python {sys.version.split()[0]}; work dir {work}")
    if args.kinds:
        return _kinds_main(args, corpus)
    results = []
    for mb in (int(s) for s in args.sizes.split(",")):
        doc = _generate(corpus, mb)
        print(f"{doc.name}: {doc.stat().st_size:,} bytes")
        for name, (command, cwd) in servers.items():
            res = _run(name, command, cwd, doc, f"{mb} MB", args)
            results.append(res)
            print(f"  {name}: done", flush=True)
    _print_table(results)
    # Every server runs on this script's interpreter: a checkout whose dependencies its
    # environment lacks ends each analysis in an internal error, and its rows time that.
    failed = [r for r in results if "internal-error" in r.codes]
    for r in failed:
        print(
            f"{r.server} {r.size}: its last analysis ended in an internal error; its times are"
            " not of an analysis (does this interpreter's environment hold that checkout's"
            " dependencies?)",
            file=sys.stderr,
        )
    return 1 if failed else 0


# A dataset (``--formats dataset``): the JSON conversation's messages, this many a record,
# with the keys a fine-tuning record has.
DATASET_RECORD = 20
_DATASET_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")


def _generate(corpus: Path, mb: int, fmt: str = "json") -> Path:
    if fmt == "dataset":
        out = corpus / f"bench-{mb}mb-dataset.conv.jsonl"
        if not out.is_file():
            source = json.loads(_generate(corpus, mb).read_text(encoding="utf-8"))
            messages = [{k: m[k] for k in _DATASET_KEYS if k in m} for m in source["messages"]]
            out.write_text(
                "".join(
                    json.dumps({"messages": messages[i : i + DATASET_RECORD]}) + "\n"
                    for i in range(0, len(messages), DATASET_RECORD)
                ),
                encoding="utf-8",
            )
        return out
    messages, target = SIZES[mb]
    out = corpus / f"bench-{mb}mb.conv.{fmt}"
    if not out.is_file():
        subprocess.run(
            [
                sys.executable,
                str(GEN),
                "--messages",
                messages,
                "--target-bytes",
                target,
                "--format",
                fmt,
                "--out",
                str(out),
            ],
            check=True,
        )
    return out


# ------------------------------------------------------------------------ edit kinds

Edit = tuple[int, int, str]  # [start, end) of the current text becomes the string


def _kinds_main(args: argparse.Namespace, corpus: Path) -> int:
    command = [sys.executable, "-m", "server"]
    rows: list[tuple[str, str, str, list[float]]] = []
    print(f"server: {args.root}")
    for mb in (int(s) for s in args.sizes.split(",")):
        for fmt in args.formats.split(","):
            doc = _generate(corpus, mb, fmt)
            print(f"{doc.name}: {doc.stat().st_size:,} bytes", flush=True)
            for kind, times in _run_kinds(command, args.root, doc, fmt, args):
                rows.append((fmt, f"{mb} MB", kind, times))
    head = ("format", "size", "edit kind", "median", "p95", "n")
    table = [head]
    for fmt, size, kind, times in rows:
        table.append(
            (fmt, size, kind, _ms(statistics.median(times)), _ms(_p95(times)), str(len(times)))
        )
    print()
    print_table(table, left=3)
    print(
        "\nEach keystroke timed from its didChange to the publishDiagnostics of its version;"
        " the outline and the folds from request to response."
    )
    return 0


def _run_kinds(
    command: list[str], root: Path, doc: Path, fmt: str, args: argparse.Namespace
) -> list[tuple[str, list[float]]]:
    n = args.per_kind
    text = doc.read_text(encoding="utf-8")
    uri = doc.as_uri()
    rpc = Rpc(command, root, doc.parent / f"{doc.stem}-{fmt}-kinds.stderr.log")
    res: list[tuple[str, list[float]]] = []
    try:
        language = "jsonl" if fmt == "dataset" else fmt
        res.append(("open", [_start(rpc, doc, text, language)[0]]))
        version = 1
        kinds = _DATASET_KINDS if fmt == "dataset" else _KINDS
        for kind, make in [] if args.views_only else kinds:
            if args.only not in kind:
                continue
            times: list[float] = []
            for edit in make(text, fmt, n):
                if edit is None:
                    continue
                text, version, sent = _send_edit(rpc, uri, text, version, edit)
                got, _ = rpc.wait(_diagnostics_of(uri, version))
                times.append(got - sent)
            if times:
                res.append((kind, times))
            if times and kind.endswith((", undo", ", back")):  # each half on its own too
                what = kind.rsplit(", ", 1)[0]
                res.append((f"  {what}: the edit", times[0::2]))
                res.append((f"  {what}: its {kind.rsplit(', ', 1)[1]}", times[1::2]))
        if fmt != "dataset":
            text, version = _views(rpc, uri, text, fmt, n, version, res, args.pace_runs)
        hovers = []
        for position in [] if args.views_only else _hover_positions(text, 4 * n):
            request_id, sent = rpc.request(
                "textDocument/hover", {"textDocument": {"uri": uri}, "position": position}
            )
            got, _ = rpc.response(request_id)
            hovers.append(got - sent)
        if hovers:
            res.append(("hover", hovers))
    finally:
        rpc.close()
    return res


def _send_edit(rpc: Rpc, uri: str, text: str, version: int, edit: Edit) -> tuple[str, int, float]:
    """Send ``edit`` of ``text`` as the next version's ``didChange``: the new text, its
    version, when it was sent. (The new text is made first: copying 10 MB holds the GIL
    for tens of milliseconds, and the reader thread would time the answer after it.)"""
    start, end, new = edit
    version += 1
    change = {
        "range": {"start": _position(text, start), "end": _position(text, end)},
        "text": new,
    }
    text = text[:start] + new + text[end:]
    return text, version, _did_change(rpc, uri, version, change)


_VIEWS = (("outline", "textDocument/documentSymbol"), ("folds", "textDocument/foldingRange"))
PACE_S = 0.15  # between two keys typed at a person's pace
# After a change, VS Code asks for the folds no sooner than this (its folding controller's
# debounce: ``languageFeatureDebounceService.for(…, 'Folding', { min: 200 })``).
PAUSE_S = 0.25


def _views(
    rpc: Rpc,
    uri: str,
    text: str,
    fmt: str,
    n: int,
    version: int,
    res: list[Any],
    pace_runs: int = 1,
) -> tuple[str, int]:
    """The outline and the folds as an editor asks for them after a change: the first of
    the document, then after each of ``n`` keystrokes in a message (asked once the change's
    diagnostics arrived, and again ``PAUSE_S`` later, as VS Code asks) and of ``n`` pastes
    and deletions of a message in the middle (every later line moves); request ->
    response."""

    def ask(method: str) -> float:
        request_id, sent = rpc.request(method, {"textDocument": {"uri": uri}})
        got, _ = rpc.response(request_id)
        return got - sent

    for label, method in _VIEWS:
        res.append((f"{label}: the first", [ask(method)]))
    for what, make, pause in (
        ("after typing", _type_in_message, 0.0),
        (f"{PAUSE_S * 1000:.0f} ms after typing", _type_in_message, PAUSE_S),
        ("after a paste", _insert_middle, 0.0),
    ):
        times: dict[str, list[float]] = {label: [] for label, _ in _VIEWS}
        for edit in make(text, fmt, n):
            if edit is None:
                continue
            text, version, _ = _send_edit(rpc, uri, text, version, edit)
            rpc.wait(_diagnostics_of(uri, version))
            time.sleep(pause)
            for label, method in _VIEWS:
                times[label].append(ask(method))
        res.extend((f"{label} {what}", t) for label, t in times.items())
        if make is _insert_middle:  # each half on its own too (as the edit kinds)
            for label, t in times.items():
                res.append((f"  {label} after the paste", t[0::2]))
                res.append((f"  {label} after its undo", t[1::2]))
    # Typing at a person's pace, the outline and the folds asked after each key (their
    # answers not awaited; those still pending cancelled at the next key, as VS Code
    # does): each key's diagnostics, as an editor shows them. A run's figure moves a lot
    # (whether the views of one key overlap the next key's analysis decides it): the keys
    # of ``pace_runs`` runs are pooled.
    keys: list[float] = []
    for _ in range(max(1, pace_runs)):
        text, version, typed = _paced(rpc, uri, text, fmt, 2 * n, version)
        keys += typed
        time.sleep(1.0)  # the last answers
        rpc.drop(lambda m: "result" in m or "error" in m)
    res.append((f"typing every {PACE_S * 1000:.0f} ms, with outline and folds", keys))
    return text, version


def _paced(
    rpc: Rpc, uri: str, text: str, fmt: str, n: int, version: int
) -> tuple[str, int, list[float]]:
    """``n`` keys typed in a message a ``PACE_S`` apart, the views asked after each and
    cancelled at the next: the new text, its version, each key -> its diagnostics."""
    at = _middle(text, _content_key(fmt)) + len(_content_key(fmt)) + 3
    sent_at: dict[int, float] = {}
    pending: list[int] = []
    for k in range(n):
        for request_id in pending:
            rpc.notify("$/cancelRequest", {"id": request_id})
        text, version, sent = _send_edit(rpc, uri, text, version, (at + k, at + k, "y"))
        sent_at[version] = sent
        pending = [rpc.request(m, {"textDocument": {"uri": uri}})[0] for _, m in _VIEWS]
        time.sleep(PACE_S)
    # Versions typed while one was analysed are published together (with the next one):
    # a key's diagnostics are those of the first version published at or after it.
    published: list[tuple[int, float]] = []
    while not published or published[-1][0] < version:
        got, msg = rpc.wait(_diagnostics_of(uri, None))
        published.append((msg["params"]["version"], got))
    keys = [next(t for p, t in published if p >= v) - sent for v, sent in sent_at.items()]
    return text, version, keys


def _middle(text: str, needle: str, k: int = 0) -> int:
    """The offset of an occurrence of ``needle`` past the middle of the text (the k-th)."""
    i = text.index(needle, len(text) // 2)
    for _ in range(k):
        i = text.index(needle, i + 1)
    return i


def _content_key(fmt: str) -> str:
    return "content: " if fmt == "yaml" else '"content": "'


def _type_in_message(text: str, fmt: str, n: int) -> list[Edit | None]:
    at = _middle(text, _content_key(fmt)) + len(_content_key(fmt)) + 3
    return [(at + k, at + k, "x") for k in range(n)]


def _type_new_message(text: str, fmt: str, n: int) -> list[Edit | None]:
    """Character by character, the start of a new last message (syntax-broken on the way)."""
    if fmt == "json":
        at = text.rindex("}", 0, text.rindex("]")) + 1
        typed = ',\n    {"id": "new", "role": "user", "content": "and then?"}'
    elif fmt == "jsonl":
        at = len(text.rstrip("\n"))
        typed = '\n{"id": "new", "role": "user", "content": "and then?"}'
    else:
        at = len(text.rstrip("\n"))
        typed = "\n- id: new\n  role: user\n  content: and then?"
    return _typed(at, typed, n)


def _typed(at: int, typed: str, n: int) -> list[Edit | None]:
    """``typed`` typed at ``at`` in ``n`` keystrokes of a few characters each."""
    step = max(1, len(typed) // n)
    res: list[Edit | None] = []
    done = 0
    while done < len(typed):
        chunk = typed[done : done + step] if len(res) < n - 1 else typed[done:]
        res.append((at + done, at + done, chunk))
        done += len(chunk)
    return res


def _type_new_record(text: str, fmt: str, n: int) -> list[Edit | None]:
    """A dataset: character by character, a new record on a last line of its own."""
    typed = '\n{"messages": [{"role": "user", "content": "and then?"}]}'
    return _typed(len(text.rstrip("\n")), typed, n)


def _insert_record(text: str, fmt: str, n: int) -> list[Edit | None]:
    """A dataset: paste a whole record (a line) in the middle, then delete it."""
    at = _middle(text, "\n{") + 1
    new = '{"messages": [{"role": "user", "content": "a pasted record"}]}\n'
    res: list[Edit | None] = []
    for _ in range(max(1, n // 2)):
        res.append((at, at, new))
        res.append((at, at + len(new), ""))
    return res


def _delete_across(text: str, fmt: str, n: int) -> list[Edit | None]:
    """Delete from inside one message's content into the next one's, then put it back."""
    res: list[Edit | None] = []
    key = _content_key(fmt)
    for k in range(max(1, n // 2)):
        a = _middle(text, key, 2 * k) + len(key) + 2
        b = text.index(key, a) + len(key) + 2
        res.append((a, b, ""))
        res.append((a, a, text[a:b]))
    return res


def _insert_middle(text: str, fmt: str, n: int) -> list[Edit | None]:
    """Paste a whole message in the middle, then delete it (each time before the next
    message)."""
    if fmt == "json":
        start = "\n    {"
        new = '    {"id": "pasted", "role": "user", "content": "a pasted message"},\n'
    elif fmt == "jsonl":
        start = "\n{"
        new = '{"id": "pasted", "role": "user", "content": "a pasted message"}\n'
    else:
        start = "\n- "
        new = "- id: pasted\n  role: user\n  content: a pasted message\n"
    res: list[Edit | None] = []
    for k in range(max(1, n // 2)):
        where = _middle(text, start, k) + 1
        res.append((where, where, new))
        res.append((where, where + len(new), ""))
    return res


def _type_in_id(text: str, fmt: str, n: int) -> list[Edit | None]:
    key = "id: m" if fmt == "yaml" else '"id": "m'
    at = _middle(text, key) + len(key)
    return [(at + k, at + k, "z") for k in range(n)]


def _change_role(text: str, fmt: str, n: int) -> list[Edit | None]:
    key = "role: user" if fmt == "yaml" else '"role": "user"'
    at = _middle(text, key) + len(key) - (4 if fmt == "yaml" else 5)
    res: list[Edit | None] = []
    for _ in range(max(1, n // 2)):
        res.append((at, at + 4, "system"))
        res.append((at, at + 6, "user"))
    return res


def _type_in_tool_call_id(text: str, fmt: str, n: int) -> list[Edit | None]:
    key = "tool_call_id: " if fmt == "yaml" else '"tool_call_id": "'
    at = _middle(text, key) + len(key) + 2
    return [(at + k, at + k, "q") for k in range(n)]


def _type_in_settings(text: str, fmt: str, n: int) -> list[Edit | None]:
    """In the document's settings (JSONL: its header line): the model name."""
    key = "model: gpt-4o" if fmt == "yaml" else '"model": "gpt-4o'
    at = text.index(key) + len(key)
    res: list[Edit | None] = []
    for _ in range(max(1, n // 2)):
        res.append((at, at, "-mini"))
        res.append((at, at + 5, ""))
    return res


def _delete_into_file(text: str, fmt: str, n: int) -> list[Edit | None]:
    """Delete from inside a message's content into the content of a file uploaded with it,
    then put it back (JSON: the message list ends there, the rest of the document is
    content after its end)."""
    key, files = _content_key(fmt), ("\n  files:" if fmt == "yaml" else '"files": [')
    res: list[Edit | None] = []
    for k in range(max(1, n // 2)):
        f = _middle(text, files, k)
        a = text.rindex(key, 0, f) + len(key) + 2
        b = text.index(key, f) + len(key) + 2
        res.append((a, b, ""))
        res.append((a, a, text[a:b]))
    return res


def _type_beside_a_finding(text: str, fmt: str, n: int) -> list[Edit | None]:
    """An unknown key (an SDK's field) added to the document's head, typing in a message
    while it is there (the whole read of the messages took every keystroke then), and the
    key taken out again: a real log's finding outside the edit."""
    if fmt == "yaml":
        at, key = 0, "sdk_field: 1\n"
    elif fmt == "jsonl":
        at, key = 1, '"sdk_field": 1, '
    else:
        at, key = text.index("{") + 1, '\n  "sdk_field": 1,'
    typed = _type_in_message(text, fmt, n)
    moved: list[Edit | None] = [
        (s + len(key), e + len(key), new) for s, e, new in (x for x in typed if x)
    ]
    return [(at, at, key), *moved, (at, at + len(key), "")]


def _type_at_line_start(text: str, fmt: str, n: int) -> list[Edit | None]:
    """A ``-`` typed at the start of a message's line, then deleted (YAML: ``-- id: m5``
    becomes a top-level key and ends the list; JSON and JSON Lines: a syntax error)."""
    needle = {"json": "\n    {", "jsonl": "\n{"}.get(fmt, "\n- ")
    res: list[Edit | None] = []
    for k in range(max(1, n // 2)):
        at = _middle(text, needle, k) + 1
        res.append((at, at, "-"))
        res.append((at, at + 1, ""))
    return res


def _type_a_path(text: str, fmt: str, n: int) -> list[Edit | None]:
    """A Windows path typed into a message's text (in JSON a backslash before a letter no
    escape starts with is a finding inside the string until it is doubled), then deleted."""
    at = _middle(text, _content_key(fmt)) + len(_content_key(fmt)) + 3
    path = "C:\\Users\\me\\notes.txt"
    typed: list[Edit | None] = [(at + k, at + k, path[k % len(path)]) for k in range(n)]
    return [*typed, (at, at + n, "")]


_KINDS: list[tuple[str, Callable[[str, str, int], list[Edit | None]]]] = [
    ("type in a message", _type_in_message),
    ("type a new message at the end", _type_new_message),
    ("delete across messages, undo", _delete_across),
    ("insert a message in the middle, undo", _insert_middle),
    ("type in a message id", _type_in_id),
    ("change a role, back", _change_role),
    ("type in a tool-call id", _type_in_tool_call_id),
    ("type in the settings (header)", _type_in_settings),
    ("type `-` at a message's line start, undo", _type_at_line_start),
    ("delete into an uploaded file's text, undo", _delete_into_file),
    ("type in a message, an SDK field at the head", _type_beside_a_finding),
    ("type a Windows path in a message", _type_a_path),
]
_DATASET_KINDS = [
    ("type in a message", _type_in_message),
    ("type a new record at the end", _type_new_record),
    ("delete across records, undo", _delete_across),
    ("insert a record in the middle, undo", _insert_record),
    ("change a role, back", _change_role),
]


# --------------------------------------------------------------------------- the client


class Rpc:
    """A JSON-RPC connection to a server process; every incoming message is timestamped."""

    def __init__(self, command: list[str], cwd: Path, stderr: Path) -> None:
        self._err = stderr.open("wb")
        self.proc = subprocess.Popen(
            command, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err
        )
        self._next_id = 0
        self._lock = threading.Condition()
        self._inbox: list[tuple[float, dict[str, Any]]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def notify(self, method: str, params: Any) -> float:
        """Send a notification; return the time it was written."""
        return self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Any) -> tuple[int, float]:
        self._next_id += 1
        sent = self._send(
            {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}
        )
        return self._next_id, sent

    def response(self, request_id: int) -> tuple[float, dict[str, Any]]:
        return self.wait(lambda m: m.get("id") == request_id and "method" not in m)

    def wait(self, pred: Callable[[dict[str, Any]], bool]) -> tuple[float, dict[str, Any]]:
        """Wait for (and consume) the first message that satisfies ``pred``."""
        deadline = time.monotonic() + TIMEOUT_S
        with self._lock:
            while True:
                for i, (t, msg) in enumerate(self._inbox):
                    if pred(msg):
                        del self._inbox[i]
                        return t, msg
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise TimeoutError("no answer from the server")
                self._lock.wait(left)

    def take(self, pred: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        """Consume the first message already received that satisfies ``pred``, if any."""
        with self._lock:
            for i, (_, msg) in enumerate(self._inbox):
                if pred(msg):
                    del self._inbox[i]
                    return msg
        return None

    def drop(self, pred: Callable[[dict[str, Any]], bool]) -> None:
        with self._lock:
            self._inbox = [(t, m) for t, m in self._inbox if not pred(m)]

    def close(self) -> None:
        try:
            request_id, _ = self.request("shutdown", None)
            self.response(request_id)
            self.notify("exit", None)
            self.proc.wait(timeout=10)
        except (TimeoutError, OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self._err.close()

    def _send(self, msg: dict[str, Any]) -> float:
        body = json.dumps(msg, ensure_ascii=False).encode("utf-8")
        assert self.proc.stdin is not None
        now = time.perf_counter()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()
        return now

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = 0
            while True:
                line = out.readline()
                if not line:
                    with self._lock:
                        self._lock.notify_all()
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            body = out.read(length)
            now = time.perf_counter()  # when it arrived (parsing a 3 MB outline takes a while)
            msg = json.loads(body)
            if "method" in msg and "id" in msg:  # a request from the server
                self._answer(msg)
                continue
            with self._lock:
                self._inbox.append((now, msg))
                self._lock.notify_all()

    def _answer(self, msg: dict[str, Any]) -> None:
        result: Any = None
        if msg["method"] == "workspace/configuration":
            result = [None for _ in msg["params"]["items"]]
        self._send({"jsonrpc": "2.0", "id": msg["id"], "result": result})


# ---------------------------------------------------------------------------- a session


def _start(rpc: Rpc, doc: Path, text: str, language: str) -> tuple[float, float]:
    """Initialize the server with ``doc``'s folder as the workspace and open ``doc``:
    seconds from ``didOpen`` to the first ``publishDiagnostics`` of version 1, and the
    server process's CPU seconds meanwhile (on a loaded machine the steadier figure)."""
    request_id, _ = rpc.request(
        "initialize",
        {
            "processId": os.getpid(),
            "rootUri": doc.parent.as_uri(),
            "capabilities": CAPABILITIES,
            "workspaceFolders": [{"uri": doc.parent.as_uri(), "name": "bench"}],
        },
    )
    rpc.response(request_id)
    rpc.notify("initialized", {})
    uri = doc.as_uri()
    cpu = _cpu_s(rpc.proc.pid)
    sent = rpc.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": language, "version": 1, "text": text}},
    )
    got, _ = rpc.wait(_diagnostics_of(uri, 1))
    return got - sent, _cpu_s(rpc.proc.pid) - cpu


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _run(
    name: str, command: list[str], cwd: Path, doc: Path, size: str, args: argparse.Namespace
) -> Result:
    res = Result(name, size)
    text = doc.read_text(encoding="utf-8")
    uri = doc.as_uri()
    log = doc.parent / f"{doc.stem}-{name.replace(' ', '-').replace('@', '-')}.stderr.log"
    rpc = Rpc(command, cwd, log)
    try:
        res.open_s, res.open_cpu_s = _start(rpc, doc, text, "json")
        res.open_rss_kb = _peak_rss_kb(rpc.proc.pid)
        version = 1
        places = _edit_places(text, args.edits + args.busy_hovers)
        for offset in places[: args.edits]:
            version += 1
            text, change = _insert(text, offset + (version - 2), "x")
            sent = _did_change(rpc, uri, version, change)
            got, _ = rpc.wait(_diagnostics_of(uri, version))
            res.edits_s.append(got - sent)
        hover_at = _hover_positions(text, args.hovers)
        for position in hover_at:
            request_id, sent = rpc.request(
                "textDocument/hover", {"textDocument": {"uri": uri}, "position": position}
            )
            got, msg = rpc.response(request_id)
            res.hovers_s.append(got - sent)
            if "error" in msg and not res.hover_note:
                res.hover_note = f"hover answered an error: {msg['error'].get('message')}"
        for i, offset in enumerate(places[args.edits :]):
            version += 1
            text, change = _insert(text, offset + (version - 2), "x")
            _did_change(rpc, uri, version, change)
            request_id, sent = rpc.request(
                "textDocument/hover",
                {"textDocument": {"uri": uri}, "position": hover_at[i % len(hover_at)]},
            )
            got, _ = rpc.response(request_id)
            res.busy_hovers_s.append(got - sent)
            _, msg = rpc.wait(_diagnostics_of(uri, version))
            res.codes = sorted(str(d.get("code")) for d in msg["params"]["diagnostics"])
        if args.burst:
            version = _burst(rpc, uri, text, version, args.burst, res)
        res.peak_rss_kb = _peak_rss_kb(rpc.proc.pid)
    finally:
        rpc.close()
    return res


def _burst(rpc: Rpc, uri: str, text: str, version: int, n: int, res: Result) -> int:
    """Type ``n`` characters in one message, an outline and a folding request after each."""
    at = text.index('"content": "', len(text) // 2) + len('"content": "')
    first = version + 1
    sent = 0.0
    for k in range(n):
        version += 1
        text, change = _insert(text, at + k, "y")
        sent = _did_change(rpc, uri, version, change)
        for method in ("textDocument/documentSymbol", "textDocument/foldingRange"):
            rpc.request(method, {"textDocument": {"uri": uri}})
    got, _ = rpc.wait(_diagnostics_of(uri, version))
    res.burst_s = got - sent
    time.sleep(0.5)  # anything still under way would publish now
    res.burst_published = 1 + sum(
        1 for v in range(first, version) if rpc.take(_diagnostics_of(uri, v)) is not None
    )
    return version


def _diagnostics_of(uri: str, version: int | None) -> Callable[[dict[str, Any]], bool]:
    """The publish of ``version`` of ``uri`` (None: of any version)."""

    def pred(msg: dict[str, Any]) -> bool:
        if msg.get("method") != "textDocument/publishDiagnostics":
            return False
        params = msg["params"]
        if params["uri"] != uri:
            return False
        return version is None or params.get("version") == version

    return pred


def _did_change(rpc: Rpc, uri: str, version: int, change: dict[str, Any]) -> float:
    return rpc.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": version}, "contentChanges": [change]},
    )


def _edit_places(text: str, n: int) -> list[int]:
    """``n`` offsets inside message contents, spread over the document, in order."""
    key = '"content": "'
    start = text.index('"messages"')
    places = []
    i = text.find(key, start)
    while i != -1:
        places.append(i + len(key))
        i = text.find(key, i + 1)
    step = max(1, len(places) // n)
    chosen = places[::step][:n]
    # A few characters into the content (never inside an escape sequence).
    res = []
    for k, p in enumerate(chosen):
        skip = k % 5
        while skip and any(c in text[p : p + skip + 1] for c in '\\"'):
            skip -= 1
        res.append(p + skip)
    return res


def _insert(text: str, offset: int, new: str) -> tuple[str, dict[str, Any]]:
    position = _position(text, offset)
    change = {"range": {"start": position, "end": position}, "text": new}
    return text[:offset] + new + text[offset:], change


def _position(text: str, offset: int) -> dict[str, int]:
    line = text.count("\n", 0, offset)
    line_start = text.rfind("\n", 0, offset) + 1
    units = len(text[line_start:offset].encode("utf-16-le")) // 2
    return {"line": line, "character": units}


def _hover_positions(text: str, n: int) -> list[dict[str, int]]:
    """The document head, then message roles and contents spread over the document."""
    res = [{"line": 0, "character": 0}]
    lines = text.split("\n")
    wanted = [
        i
        for i, line in enumerate(lines)
        if any(key in line for key in ('"role"', '"content"', "role: ", "content: "))
    ]
    step = max(1, len(wanted) // max(1, n - 1))
    for i in wanted[::step][: n - 1]:
        line = lines[i]
        at = line.find('"role"') if '"role"' in line else line.find('"content"')
        if at < 0:
            at = len(line) - len(line.lstrip(" -"))
        res.append({"line": i, "character": at + 2})
    return res


def _peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


# ----------------------------------------------------------------------------- the table


def _print_table(results: list[Result]) -> None:
    head = (
        "server",
        "doc",
        "open->diags",
        "open CPU",
        "edit->diags med",
        "p95",
        "hover med",
        "p95",
        "hover while busy med",
        "max",
        "burst: last key->diags",
        "published",
        "open peak RSS",
        "peak RSS",
    )
    rows = [head]
    for r in results:
        rows.append(
            (
                r.server,
                r.size,
                _ms(r.open_s),
                _ms(r.open_cpu_s),
                _ms(statistics.median(r.edits_s)),
                _ms(_p95(r.edits_s)),
                _ms(statistics.median(r.hovers_s)),
                _ms(_p95(r.hovers_s)),
                _ms(statistics.median(r.busy_hovers_s)) if r.busy_hovers_s else "-",
                _ms(max(r.busy_hovers_s)) if r.busy_hovers_s else "-",
                _ms(r.burst_s) if r.burst_published else "-",
                str(r.burst_published) if r.burst_published else "-",
                f"{r.open_rss_kb / 1024:.0f} MB",
                f"{r.peak_rss_kb / 1024:.0f} MB",
            )
        )
    print()
    print_table(rows, left=2)
    n_edits = max((len(r.edits_s) for r in results), default=0)
    n_hovers = max((len(r.hovers_s) for r in results), default=0)
    print(f"\n{n_edits} edits and {n_hovers} hovers per row; p95 = nearest rank.")
    for r in results:
        print(f"{r.server} {r.size}: last diagnostics {r.codes}. {r.hover_note}")


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, -(-95 * len(ordered) // 100) - 1)]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


if __name__ == "__main__":
    sys.exit(main())
