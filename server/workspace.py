"""Loading a document with everything it depends on: the IO half of an analysis.

``analyze`` gathers what the pure ``assembly.host`` needs and nothing more: the document
text (or the file), the settings file found above it, and, through ``FileSources``, the
``*.prompt.md`` its ``system_prompt`` points to, the project files it names and the
tokenizer its settings ask for. Referenced paths resolve relative to the document and
only inside the workspace root (no ``..`` or symlink escape). The command line calls it
with a fresh host per document; the language server keeps one ``AnalysisHost`` per open
document and passes it with the edit, so each analysis builds on the previous one.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from assembly.diagnostics import Diagnostic, Severity
from assembly.host import (
    Analysis,
    AnalysisHost,
    Edit,
    FileText,
    Inputs,
    PromptAnalysis,
    document_format,
    resolve_outside,
)
from assembly.host import analyze_prompt as analyze_template
from assembly.model import Conversation
from assembly.rope import Rope
from assembly.settings import SettingsLayer
from assembly.text import TextRange
from assembly.tokens import Tokenizer
from server import files, precount
from server.config import ConfigFile, editor_layer, find_config
from server.tokenizers import TokenizerLoad, load_tokenizer

MAX_FILE_BYTES = files.MAX_FILE_BYTES

# ``settings_file``'s default: the settings file is looked up above the document. A caller
# that analyses many documents of a folder (``promptls lint``) looks it up once a folder
# and passes what it found (None: there is none), so the file is read and parsed once.
LOOK_UP: Final = "look up"


def find_root(path: Path) -> Path:
    """The workspace root of a file: the nearest ancestor with ``.git``, else its folder."""
    start = path.resolve().parent
    for cur in (start, *start.parents):
        if (cur / ".git").exists():
            return cur
    return start


def read_text(path: Path) -> tuple[str, list[Diagnostic]]:
    """Read a file as UTF-8; invalid bytes are replaced and reported where they are.

    Only a regular file of at most ``MAX_FILE_BYTES`` is read (its size is checked before
    reading, ``server.files``); anything else is an empty text and a diagnostic.
    """
    try:
        data = files.read_bytes(path, limit=MAX_FILE_BYTES)
    except files.FileProblem as problem:
        msg = f"cannot read {_clip(path.name)}: {problem.reason}"
        return "", [Diagnostic(problem.code, Severity.ERROR, msg, TextRange(0, 0))]
    # Drop a BOM first: decoding with "utf-8-sig" reports error offsets past the BOM, and
    # the replacing fallback would keep it as a U+FEFF that no parser accepts.
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", errors="replace")
        offset = len(data[: exc.start].decode("utf-8", errors="replace"))
        msg = f"invalid UTF-8 (byte 0x{data[exc.start]:02x}); it was replaced by U+FFFD"
        return text, [
            Diagnostic("syntax-error", Severity.ERROR, msg, TextRange(offset, offset + 1))
        ]


def analyze(
    path: Path,
    *,
    text: str | Rope | None = None,
    root: Path | None = None,
    editor_settings: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
    today: dt.date | None = None,
    select: Collection[str] | None = None,
    ignore: Collection[str] = (),
    overlay: Mapping[Path, str] | None = None,
    cold_cache: bool = True,
    pending: precount.PendingCounts | None = None,
    host: AnalysisHost | None = None,
    edit: Edit | None = None,
    settings_file: ConfigFile | Literal["look up"] | None = LOOK_UP,
    findings_only: bool = False,
) -> Analysis:
    """Read, configure, assemble and check one conversation document.

    ``overrides`` (command-line flags) win over every other settings source; ``select``
    and ``ignore`` choose the rules that run (see ``assembly.diagnostics.check``).
    ``overlay`` holds texts that replace files on disk (an editor's unsaved buffers).
    ``cold_cache=False`` says the document's texts were counted before (a re-analysis
    after an edit): then forking a counting child costs more than it saves. ``pending``
    is a counting child the caller started already (``precount.start_early``, or
    ``precount.start_open`` when the document's ``didOpen`` arrived: told here what to
    count with, or stopped when the document is not large or the cache not cold).
    ``host`` holds the document's previous analysis (``AnalysisHost.apply_change``, with
    ``edit`` the change since; None: compared), else the document is analysed afresh.
    ``settings_file``: the settings file above the document, when the caller found it
    (``find_config(path.parent, root)``); by default it is looked up. ``findings_only``:
    the caller reads only the findings (``Inputs.findings_only``), not the assembly's
    figures; a large document is assembled with its counts all the same (its counting
    child is already under way, and its budget is rarely far from full).
    """
    path = path.absolute()
    root = (root or find_root(path)).resolve()
    diags: list[Diagnostic] = []
    unreadable = False  # the file was not read: its empty text is not the author's
    if text is None:
        text, read_diags = read_text(path)
        diags.extend(read_diags)
        unreadable = any(d.code != "syntax-error" for d in read_diags)
    layers, others = _config_layers(path, root, editor_settings, diags, settings_file)
    large = cold_cache and len(text) >= precount.MIN_DOCUMENT_CHARS
    inputs = Inputs(
        path=path,
        today=today or dt.date.today(),
        layers=tuple(layers),
        overrides=overrides,
        select=select,
        ignore=ignore,
        diagnostics=tuple(diags),
        unreadable=unreadable,
        other_texts=others,
        dependencies=tuple(Path(p) for p in others),
        findings_only=findings_only and not large,
    )
    # A large document is counted by a forked child while this process parses it, with the
    # tokenizer the settings known so far ask for (if the document's own settings pick
    # another encoding, those counts are simply not used). A smaller one never is: its
    # settings are not resolved for it (`promptls lint` of many small files).
    if pending is not None and pending.awaiting:  # forked as its didOpen arrived
        if large:
            guess = resolve_outside(inputs)
            pending.count_with(document_format(path, text), guess.encoding, guess.model)
        else:
            pending.close()
            pending = None
    elif pending is None and large:
        guess = resolve_outside(inputs)
        tokenizer = load_tokenizer(guess.encoding, model=guess.model).tokenizer
        pending = precount.start(text, document_format(path, text), tokenizer)
    sources = FileSources(path, root, overlay or {}, pending)
    try:
        if host is None:
            return AnalysisHost().analyze(text, inputs, sources)
        return host.apply_change(text, edit, inputs, sources)
    finally:
        if pending is not None and pending.drain:
            pending.close()  # a child still counting goes on no longer than the analysis


def analyze_prompt(
    path: Path,
    *,
    text: str | None = None,
    root: Path | None = None,
    editor_settings: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
    select: Collection[str] | None = None,
    ignore: Collection[str] = (),
    user_tools: Collection[str] | None = None,
    settings_file: ConfigFile | Literal["look up"] | None = LOOK_UP,
) -> PromptAnalysis:
    """Read and check a ``*.prompt.md`` template on its own (``assembly.host.analyze_prompt``);
    ``settings_file`` as for ``analyze``."""
    path = path.absolute()
    root = (root or find_root(path)).resolve()
    diags: list[Diagnostic] = []
    if text is None:
        text, read_diags = read_text(path)
        diags.extend(read_diags)
    layers, others = _config_layers(path, root, editor_settings, diags, settings_file)
    inputs = Inputs(
        path=path,
        today=dt.date.today(),
        layers=tuple(layers),
        overrides=overrides,
        select=select,
        ignore=ignore,
        diagnostics=tuple(diags),
        other_texts=others,
    )
    sources = FileSources(path, root, {}, None)
    return analyze_template(text, inputs, sources, user_tools=user_tools)


@dataclass(frozen=True, slots=True)
class FileSources:
    """``assembly.host.Sources`` on the file system: references resolve relative to the
    document and inside ``root``; ``overlay`` texts win over the files on disk."""

    path: Path
    root: Path
    overlay: Mapping[Path, str]
    pending: precount.PendingCounts | None = None

    def read(self, ref: str) -> FileText:
        target, problem, code = resolve_reference(self.path, ref, self.root)
        if target is None:
            missing = _missing(self.path, ref, self.root) if code == "file-not-found" else None
            return FileText(None, code=code, problem=problem or "", missing=missing)
        text = self.overlay.get(target)
        if text is not None:
            return FileText(target, text)
        text, read_diags = read_text(target)
        return FileText(target, text, tuple(read_diags))

    def tokenizer(self, encoding: str | None, model: str | None) -> TokenizerLoad:
        return load_tokenizer(encoding, model=model)

    def counting(self, conversation: Conversation, tokenizer: Tokenizer) -> None:
        if self.pending is not None:
            self.pending.seed(conversation, tokenizer)


def resolve_reference(doc: Path, ref: str, root: Path) -> tuple[Path | None, str | None, str]:
    """Resolve ``ref`` relative to the document; return (path, problem, problem code).

    Never raises: a NUL byte, an over-long name, a symlink loop, a dangling link or a file
    that is not a regular one (a FIFO, a device) is a ``file-not-found`` with its reason.
    """
    try:
        target = (doc.parent / ref).resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        return None, f"cannot read `{_clip(ref)}`: {files.path_problem(exc)}", "file-not-found"
    if not target.is_relative_to(root):
        return None, f"`{_clip(ref)}` resolves outside the workspace", "path-outside-workspace"
    try:
        files.check_regular(target, limit=None)
    except files.FileProblem as problem:
        if problem.reason == "no such file":
            return None, f"file not found: `{_clip(ref)}`", "file-not-found"
        return None, f"cannot read `{_clip(ref)}`: {problem.reason}", "file-not-found"
    return target, None, ""


def _missing(doc: Path, ref: str, root: Path) -> Path | None:
    """The file ``ref`` names inside ``root`` that could not be read (None: it cannot be
    named: a NUL byte, a name too long, a link loop)."""
    try:
        target = (doc.parent / ref).resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    return target if target.is_relative_to(root) else None


def _clip(s: str, n: int = 120) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _config_layers(
    path: Path,
    root: Path,
    editor_settings: Mapping[str, Any] | None,
    diags: list[Diagnostic],
    settings_file: ConfigFile | Literal["look up"] | None = LOOK_UP,
) -> tuple[list[SettingsLayer], dict[str, str]]:
    """The settings file above ``path`` (``settings_file`` when given) and the editor's
    settings, as layers."""
    layers: list[SettingsLayer] = []
    others: dict[str, str] = {}
    config = find_config(path.parent, root) if isinstance(settings_file, str) else settings_file
    # An unreadable settings file is an error at it; the next one above applies meanwhile.
    for file in config.chain() if config is not None else ():
        others[str(file.path)] = file.text
        if file.layer is not None:
            layers.append(file.layer)
        elif file.error:
            rng = file.error_range or TextRange(0, 0)
            diags.append(
                Diagnostic("invalid-setting", Severity.ERROR, file.error, rng, path=str(file.path))
            )
    if editor_settings:
        layers.append(editor_layer(editor_settings))
    return layers, others
