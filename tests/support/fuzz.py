"""A seeded fuzz run against ``promptls serve`` over stdio: random edits, interleaved requests.

Used by the CI test (``tests/e2e/test_fuzz_edits.py``, a few hundred edits) and the run on
demand (``tests/fuzz/fuzz_lsp.py``, 10,000+). A client (pygls') starts the server as a
subprocess and, per document, sends incremental ``didChange`` edits at random places
(typing, deleting, pasting; line ends ``\\n``, ``\\r\\n`` and a lone ``\\r``; emoji), some
sent in bursts without waiting, and interleaves the requests an editor sends while typing
(outline, folding, hover, inlay hints, code lens, code actions, completion), some awaited,
most not. At each checkpoint (on opening, and after the last edit) it waits for the server to
publish the current version and compares what it published with ``promptls lint`` of the
same text, and the outline and the folds the server sends then with ones made afresh from
the text (the folds limited to a ``rangeLimit`` the client declares); it
also checks that versions are published in order, that every request is answered without
an error, and that each published version is published once.

Positions are computed here from the client's own text (``client_position``), not with
the server's conversion code, in UTF-32 (code points), so a desync of the server's text
shows as a mismatch.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import json
import os
import random
import re
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "TIKTOKEN_CACHE_DIR": ""}  # the offline cl100k_base only: fixed figures
PIECES = (
    "a",
    "x",
    " ",
    '"',
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\n",
    "\r\n",
    "\r",
    "😀",
    "é",
    "{{CURENT_DATETIME}}",
    "  - {id: z, role: user, content: hi}\n",
    '{"id": "z", "role": "user", "content": "hi"},',
)
_LINE_END = re.compile(r"\r\n|\r|\n")
# The client's ``foldingRange.rangeLimit``: the examples' larger conversations have more
# folds, so the limit's cut is checked too.
FOLDS_LIMIT = 40


@dataclass
class Report:
    """What a run saw."""

    edits: int = 0
    requests: int = 0
    request_errors: list[str] = field(default_factory=list)
    checkpoints: int = 0
    stale: list[str] = field(default_factory=list)  # checkpoints where publish != lint
    missing: list[str] = field(default_factory=list)  # versions never published in time
    out_of_order: list[str] = field(default_factory=list)
    republished: list[str] = field(default_factory=list)  # a version published twice
    publish_waits_s: list[float] = field(default_factory=list)  # last edit -> its publish
    stale_texts: dict[str, str] = field(default_factory=dict)  # the texts of stale checkpoints
    # Of each stale checkpoint: the text as opened and every edit since, ``(start, end,
    # new)`` in code points, in order (to replay them in process).
    stale_trails: dict[str, tuple[str, list[tuple[int, int, str]]]] = field(default_factory=dict)
    outlines: list[str] = field(default_factory=list)  # checkpoints whose outline != afresh
    folds: list[str] = field(default_factory=list)  # checkpoints whose folds != afresh

    def ok(self) -> bool:
        return not (
            self.request_errors
            or self.stale
            or self.missing
            or self.out_of_order
            or self.republished
            or self.outlines
            or self.folds
        )

    def summary(self) -> str:
        waits = sorted(self.publish_waits_s) or [0.0]
        return (
            f"edits {self.edits}, requests {self.requests} ({len(self.request_errors)} errors), "
            f"checkpoints {self.checkpoints}: stale {len(self.stale)}, "
            f"missing {len(self.missing)}, out of order {len(self.out_of_order)}, "
            f"published twice {len(self.republished)}, outlines differing "
            f"{len(self.outlines)}, folds differing {len(self.folds)}; wait for the last publish: "
            f"median {waits[len(waits) // 2] * 1000:.0f} ms, max {waits[-1] * 1000:.0f} ms"
        )


def _first_difference(a: list[Any], b: list[Any]) -> str:
    """Where two lists first differ: "i of n"."""
    first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    return f"{min(len(a), len(b)) if first is None else first} of {len(b)}"


def client_position(text: str, offset: int) -> lsp.Position:
    """An LSP position in UTF-32 as a client computes it (lines end at \\n, \\r\\n, \\r)."""
    line, start = 0, 0
    for m in _LINE_END.finditer(text, 0, offset):
        if m.end() > offset:
            break
        line, start = line + 1, m.end()
    return lsp.Position(line, offset - start)


def line_split_points(text: str) -> list[int]:
    """The line starts where a line can be added and removed again with positions LSP can
    express: not after a lone "\\r", which the "\\n" would join into one line end (removing
    the "\\n" alone then takes a position inside a "\\r\\n": a client sends none, and a
    server clamps it to the line's end, as the protocol says)."""
    return [m.end() for m in _LINE_END.finditer(text) if m.group() != "\r"]


class Fuzzer:
    """One server, one client; ``run`` fuzzes the documents one after another."""

    def __init__(self, workspace: Path, *, seed: int, log_file: Path) -> None:
        self.workspace = workspace
        self.rng = random.Random(seed)
        self.report = Report()
        self.client = LanguageClient("promptls-fuzz", "1")
        self.published: dict[str, list[tuple[int | None, list[lsp.Diagnostic], float]]] = {}
        self.log_file = log_file
        # The document's text as opened and the edits since (``Report.stale_trails``).
        self._trail: tuple[str, list[tuple[int, int, str]]] = ("", [])

        @self.client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_publish(params: lsp.PublishDiagnosticsParams) -> None:
            entry = (params.version, list(params.diagnostics), time.monotonic())
            self.published.setdefault(params.uri, []).append(entry)

        for method in (
            lsp.WORKSPACE_INLAY_HINT_REFRESH,
            lsp.WORKSPACE_CODE_LENS_REFRESH,
            lsp.CLIENT_REGISTER_CAPABILITY,
        ):
            self.client.feature(method)(lambda params: None)
        self.client.feature(lsp.WINDOW_SHOW_MESSAGE)(lambda params: None)
        self.client.feature(lsp.WINDOW_LOG_MESSAGE)(lambda params: None)

    async def start(self) -> None:
        await self.client.start_io(
            sys.executable,
            "-m",
            "server",
            "--log-file",
            str(self.log_file),
            env=ENV,
            cwd=str(REPO),
        )
        capabilities = lsp.ClientCapabilities(
            general=lsp.GeneralClientCapabilities(position_encodings=["utf-32"]),
            text_document=lsp.TextDocumentClientCapabilities(
                publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities(version_support=True),
                folding_range=lsp.FoldingRangeClientCapabilities(range_limit=FOLDS_LIMIT),
            ),
        )
        folder = lsp.WorkspaceFolder(uri=self.workspace.as_uri(), name="ws")
        await self.client.initialize_async(
            lsp.InitializeParams(capabilities=capabilities, workspace_folders=[folder])
        )
        self.client.initialized(lsp.InitializedParams())

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()

    async def run(
        self, paths: Sequence[Path], *, edits_per_document: int, checkpoints: int = 1
    ) -> Report:
        for path in paths:
            await self.fuzz_document(path, edits_per_document, checkpoints)
        return self.report

    async def fuzz_document(self, path: Path, n_edits: int, n_checkpoints: int) -> None:
        rng, uri = self.rng, path.as_uri()
        text = path.read_text(encoding="utf-8")
        language = "markdown" if path.name.endswith(".md") else "yaml"
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                text_document=lsp.TextDocumentItem(
                    uri=uri, language_id=language, version=1, text=text
                )
            )
        )
        # A checkpoint on the document as written first: whole, its messages keep their
        # stored nodes across the line added and removed, so the views kept by message are
        # checked where a random edit may have left nothing to keep.
        self._trail = (text, [])
        version = await self._checkpoint(path, uri, 1, text)
        pending: list[asyncio.Task[Any]] = []
        every = max(1, n_edits // max(1, n_checkpoints))
        for i in range(1, n_edits + 1):
            text, change = self._edit(text)
            version += 1
            self.client.text_document_did_change(
                lsp.DidChangeTextDocumentParams(
                    text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[change],
                )
            )
            self.report.edits += 1
            for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
                task = asyncio.create_task(self._request(uri, text))
                if rng.random() < 0.2:
                    await task
                else:
                    pending.append(task)
            pause = rng.choice([0, 0, 0, 0.001, 0.005, 0.02, 0.1])
            if pause:
                await asyncio.sleep(pause)
            if i % every == 0 or i == n_edits:
                version = await self._checkpoint(path, uri, version, text)
        await asyncio.gather(*pending)
        self.client.text_document_did_close(
            lsp.DidCloseTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
        )
        self._check_order(uri)

    def _edit(self, text: str) -> tuple[str, lsp.TextDocumentContentChangePartial]:
        rng = self.rng
        start = rng.randint(0, len(text))
        end = min(len(text), start + rng.choice([0, 0, 0, 1, 1, 2, 5, 30]))
        # A client never places a position inside a "\r\n" or a surrogate pair.
        start, end = (o - 1 if text[o - 1 : o + 1] == "\r\n" and o > 0 else o for o in (start, end))
        new = "" if rng.random() < 0.25 else rng.choice(PIECES)
        rng_lsp = lsp.Range(client_position(text, start), client_position(text, end))
        change = lsp.TextDocumentContentChangePartial(range=rng_lsp, text=new)
        self._trail[1].append((start, end, new))
        return text[:start] + new + text[end:], change

    async def _request(self, uri: str, text: str) -> None:
        rng, c = self.rng, self.client
        doc = lsp.TextDocumentIdentifier(uri=uri)
        pos = client_position(text, rng.randint(0, len(text)))
        whole = lsp.Range(lsp.Position(0, 0), client_position(text, len(text)))
        kind = rng.choice(["symbols", "folding", "hover", "inlay", "lens", "actions", "completion"])
        self.report.requests += 1
        try:
            if kind == "symbols":
                await c.text_document_document_symbol_async(
                    lsp.DocumentSymbolParams(text_document=doc)
                )
            elif kind == "folding":
                await c.text_document_folding_range_async(lsp.FoldingRangeParams(text_document=doc))
            elif kind == "hover":
                await c.text_document_hover_async(lsp.HoverParams(text_document=doc, position=pos))
            elif kind == "inlay":
                await c.text_document_inlay_hint_async(
                    lsp.InlayHintParams(text_document=doc, range=whole)
                )
            elif kind == "lens":
                await c.text_document_code_lens_async(lsp.CodeLensParams(text_document=doc))
            elif kind == "actions":
                await c.text_document_code_action_async(
                    lsp.CodeActionParams(
                        text_document=doc,
                        range=lsp.Range(pos, pos),
                        context=lsp.CodeActionContext(diagnostics=[]),
                    )
                )
            else:
                await c.text_document_completion_async(
                    lsp.CompletionParams(text_document=doc, position=pos)
                )
        except Exception as e:  # an error reply (or none): the run reports it
            self.report.request_errors.append(f"{kind}: {type(e).__name__}: {e}")

    async def _checkpoint(self, path: Path, uri: str, version: int, text: str) -> int:
        """Check the published version against ``promptls lint`` (and a conversation's
        outline); returns the document's version after the check (the outline's check
        adds a line and removes it)."""
        self.report.checkpoints += 1
        sent = time.monotonic()
        deadline = sent + 60
        while time.monotonic() < deadline:
            got = [p for p in self.published.get(uri, []) if p[0] == version]
            if got:
                break
            await asyncio.sleep(0.01)
        else:
            self.report.missing.append(f"{path.name} v{version}")
            return version
        self.report.publish_waits_s.append(got[0][2] - sent)
        places = _Places(text)
        ours = sorted(places.finding(*_from_lsp(d)) for d in got[0][1])
        theirs = sorted(places.finding(*f) for f in lint(path, text))
        if ours != theirs:
            only_ours = [d for d in ours if d not in theirs]
            only_lint = [d for d in theirs if d not in ours]
            name = f"{path.name} v{version}"
            self.report.stale.append(f"{name}: only published {only_ours}; only lint {only_lint}")
            self.report.stale_texts[name] = text
            self.report.stale_trails[name] = (self._trail[0], list(self._trail[1]))
        if ".conv." not in path.name:
            return version
        await self._check_views(path, uri, version, text)
        # A line added above the later messages and removed: the entries the server kept
        # for them move a line down and back.
        starts = line_split_points(text)
        if not starts:
            return version
        at = self.rng.choice(starts[len(starts) // 2 :])
        for start, end, new in ((at, at, "\n"), (at, at + 1, "")):
            self._trail[1].append((start, end, new))
            version += 1
            rng = lsp.Range(client_position(text, start), client_position(text, end))
            text = text[:start] + new + text[end:]
            self.client.text_document_did_change(
                lsp.DidChangeTextDocumentParams(
                    text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[lsp.TextDocumentContentChangePartial(range=rng, text=new)],
                )
            )
            if await self._wait_for(uri, version):
                await self._check_views(path, uri, version, text)
            else:
                self.report.missing.append(f"{path.name} v{version}")
        return version

    async def _wait_for(self, uri: str, version: int) -> bool:
        """Wait (a minute at most) for the publish of ``version``."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(p[0] == version for p in self.published.get(uri, [])):
                return True
            await asyncio.sleep(0.01)
        return False

    async def _check_views(self, path: Path, uri: str, version: int, text: str) -> None:
        """The outline and the folds the server sends for the version just published equal
        the ones made afresh from the same text (the server keeps both by message between
        versions)."""
        from assembly.ide import folding
        from assembly.ide.symbols import conversation_symbols
        from server.lsp.convert import TextMap
        from tests.support.engine import analyze
        from tests.support.lsp_reference import document_symbol

        doc = lsp.TextDocumentIdentifier(uri=uri)
        got = await self.client.text_document_document_symbol_async(
            lsp.DocumentSymbolParams(text_document=doc)
        )
        unstructure = self.client.protocol._converter.unstructure
        theirs = [unstructure(s) for s in got or []]
        conv = analyze(path, text=text, root=self.workspace).conversation
        tm = TextMap.of(text, "utf-32")
        ours = [unstructure(document_symbol(tm, s)) for s in conversation_symbols(conv)]
        name = f"{path.name} v{version}"
        if theirs != ours:
            self.report.outlines.append(f"{name}: entry {_first_difference(theirs, ours)} differs")
            self.report.stale_texts[name] = text
        folds = await self.client.text_document_folding_range_async(
            lsp.FoldingRangeParams(text_document=doc)
        )
        theirs = [(f.start_line, f.end_line, f.kind) for f in folds or []]
        folding._MEMO.clear()  # (afresh: this process's folds of earlier checks let go)
        made = folding.conversation_folds(conv, text, limit=FOLDS_LIMIT)
        ours = [(*(f.lines or (-1, -1)), None if f.kind is None else f.kind.value) for f in made]
        if theirs != ours:
            self.report.folds.append(f"{name}: fold {_first_difference(theirs, ours)} differs")
            self.report.stale_texts[name] = text

    def _check_order(self, uri: str) -> None:
        versions = [v for v, _, _ in self.published.get(uri, []) if v is not None]
        for a, b in itertools.pairwise(versions):
            if b < a:
                self.report.out_of_order.append(f"{uri}: v{b} after v{a}")
            elif a == b:
                self.report.republished.append(f"{uri}: v{a}")


class _Places:
    """Line and column (1-based, code points) to offsets in one text, an offset between
    the "\r" and the "\n" of a line break taken as the line's end (LSP has no position
    there, the command line shows its column: the same place)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in _LINE_END.finditer(text)]

    def offset(self, line: int, column: int) -> int:
        offset = self.starts[min(line, len(self.starts)) - 1] + column - 1
        if self.text[offset - 1 : offset + 1] == "\r\n":
            offset -= 1
        return offset

    def finding(
        self, code: str, line: int, column: int, end_line: int, end_column: int, message: str
    ) -> tuple[str, int, int, str]:
        return code, self.offset(line, column), self.offset(end_line, end_column), message


def _from_lsp(d: lsp.Diagnostic) -> tuple[str, int, int, int, int, str]:
    r = d.range
    return (
        str(d.code),
        r.start.line + 1,
        r.start.character + 1,
        r.end.line + 1,
        r.end.character + 1,
        d.message,
    )


def lint(path: Path, text: str) -> list[tuple[str, int, int, int, int, str]]:
    """``promptls lint --format json`` of ``text`` at ``path`` (the file is rewritten).

    The command runs in this process (``server.cli.main.main``, the entry point the
    ``promptls`` script calls), with the subprocess's environment, working directory and
    a UTF-8 stdout of its own: the same command, without paying a Python start-up per
    checkpoint. tests/server/test_lint.py runs ``promptls lint`` as a true subprocess.
    """
    from server.cli.main import main

    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="\n")
    with _environ(ENV), _cwd(REPO), contextlib.redirect_stdout(out), _quiet_stderr():
        main(["lint", "--format", "json", str(path)])
    out.flush()
    stdout = out.buffer.getvalue()  # type: ignore[attr-defined]
    findings = json.loads(stdout or b"[]")
    out = []
    for f in findings:
        if Path(f["file"]).resolve() != path.resolve():
            continue  # a finding in another file (a settings file): not published here
        r = f["range"]
        out.append(
            (
                f["code"],
                r["start"]["line"],
                r["start"]["column"],
                r["end"]["line"],
                r["end"]["column"],
                f["message"],
            )
        )
    return out


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _cwd(where: Path) -> Iterator[None]:
    saved = os.getcwd()
    os.chdir(where)
    try:
        yield
    finally:
        os.chdir(saved)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """The summary line ``lint`` prints on stderr (a subprocess's stderr was captured)."""
    with contextlib.redirect_stderr(io.StringIO()):
        yield


def workspace_from_examples(root: Path) -> list[Path]:
    """Copy the examples (conversations in JSON, JSON Lines and YAML, their prompts and
    documents) into ``root``, with a dataset made from the JSON one's turns; return the
    documents to fuzz."""
    import shutil

    shutil.copytree(REPO / "examples", root, dirs_exist_ok=True)
    (root / ".git").mkdir(exist_ok=True)
    names = (
        "support-agent.conv.yaml",
        "support-agent.conv.json",
        "support-agent.conv.jsonl",
        "branching.conv.yaml",
        DATASET_NAME,
    )
    (root / DATASET_NAME).write_text(_dataset(root / "support-agent.conv.json"), encoding="utf-8")
    prompts = sorted((root / "prompts").glob("*.prompt.md"))
    return [root / n for n in names] + prompts[:1]


def workspace_from_folders(root: Path, folders: Sequence[Path]) -> list[Path]:
    """Copy each of ``folders`` (its whole tree, so the files its documents name come
    along) into ``root``, one folder each; return the documents found there, in name
    order: what the server analyses (``assembly.host.kind_of``), conversations and prompt
    templates. For a run on material nobody here wrote: real logs, real prompts."""
    import shutil

    from assembly.host import kind_of

    (root / ".git").mkdir(parents=True, exist_ok=True)
    docs: list[Path] = []
    for k, folder in enumerate(folders):
        dest = root / f"{k}-{folder.name}"
        shutil.copytree(folder, dest)
        docs += sorted(p for p in dest.rglob("*") if p.is_file() and kind_of(p.name))
    return docs


DATASET_NAME = "support-agent-turns.conv.jsonl"


def _dataset(conversation: Path) -> str:
    """A dataset (one conversation per line): the conversation's messages, a record of four
    each, with its tools and its system prompt template on every other record."""
    doc = json.loads(conversation.read_text(encoding="utf-8"))
    lines = []
    for k in range(0, len(doc["messages"]), 4):
        record = {"messages": doc["messages"][k : k + 4], "tools": doc["tools"]}
        if k % 8 == 0:
            record["system_prompt"] = doc["system_prompt"]
        lines.append(json.dumps(record, ensure_ascii=False))
    return "\n".join(lines) + "\n"
