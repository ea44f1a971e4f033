"""Loading a document with everything it depends on: the IO half of the pipeline.

``analyze`` reads nothing itself beyond what it is told: the document text (or the file),
the settings file found above it, the ``*.prompt.md`` its ``system_prompt`` points to and
the project files given by ``path``. Referenced paths resolve relative to the document and
only inside the workspace root (no ``..`` or symlink escape). Then it calls the pure
``assembly`` pipeline. The command line uses it now; the language server will use it with
its own text and editor settings.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assembly.assemble import AssembleOptions, Assembly, assemble
from assembly.assemble_cache import AssemblyCache
from assembly.diagnostics import (
    Diagnostic,
    Related,
    RuleCache,
    RuleContext,
    Severity,
    check,
    from_exception,
    from_issues,
    from_setting_issues,
    sort_key,
)
from assembly.documents import (
    format_for_path,
    parse_conversation,
    read_tools,
    tools_from_settings,
)
from assembly.incremental import reparse_conversation
from assembly.model import Conversation, DocFormat, PromptRef, PromptTemplate
from assembly.prompts import parse_prompt
from assembly.rope import Rope
from assembly.settings import Settings, SettingsLayer, resolve_settings
from assembly.text import TextRange
from server import files, precount
from server.config import editor_layer, find_config
from server.tokenizers import load_tokenizer

MAX_FILE_BYTES = files.MAX_FILE_BYTES
DOCUMENT_SOURCE = "<document>"


@dataclass(frozen=True, slots=True)
class Analysis:
    """A document, its effective settings, its assembly and every diagnostic about it."""

    path: Path
    text: str | Rope  # a rope when it is an editor's buffer
    conversation: Conversation
    settings: Settings
    assembly: Assembly
    diagnostics: tuple[Diagnostic, ...]
    encoding_requested: str
    encoding_warning: str | None
    dependencies: tuple[Path, ...] = field(default=())
    # Texts of the other files that diagnostics point into, by path.
    other_texts: dict[str, str] = field(default_factory=dict)
    # The conversation exactly as read from ``text`` (before tools from a template are
    # added): what the next analysis may re-read incrementally (``previous``).
    parsed: Conversation | None = None
    # What the stages keep for the next analysis of the same document, by stage name.
    caches: dict[str, Any] = field(default_factory=dict)
    # A dataset (one conversation per JSON Lines line): each record's own analysis. The
    # fields above are then the first record's, except ``conversation`` (the dataset) and
    # ``diagnostics`` (every record's).
    records: tuple[Analysis, ...] = ()

    def at(self, offset: int) -> Analysis:
        """The analysis that covers ``offset``: the record whose line holds it, else this."""
        for r in self.records:
            root = r.conversation.root
            if root is not None and root.range.start <= offset <= root.range.end:
                return r
        return self

    def record_number(self, record: Analysis) -> int:
        """1-based position of ``record`` among the dataset's records."""
        return next(k for k, r in enumerate(self.records, 1) if r is record)


@dataclass(frozen=True, slots=True)
class PromptAnalysis:
    """A prompt template checked on its own."""

    path: Path
    text: str
    template: PromptTemplate
    settings: Settings
    diagnostics: tuple[Diagnostic, ...]
    other_texts: dict[str, str] = field(default_factory=dict)


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
    previous: Analysis | None = None,
) -> Analysis:
    """Parse, configure and assemble one conversation document.

    ``overrides`` (command-line flags) win over every other settings source; ``select``
    and ``ignore`` choose the rules that run (see ``assembly.diagnostics.check``).
    ``overlay`` holds texts that replace files on disk (an editor's unsaved buffers).
    ``cold_cache=False`` says the document's texts were counted before (a re-analysis
    after an edit): then forking a counting child costs more than it saves. ``pending``
    is a counting child the caller started already (``precount.start_early``).
    ``previous`` is the previous analysis of this document: after an edit inside one
    message, only that message is parsed again, and the stages reuse what it cached.
    """
    path = path.absolute()
    root = (root or find_root(path)).resolve()
    diags: list[Diagnostic] = []
    unreadable = False  # the file was not read: its empty text is not the author's
    if text is None:
        text, read_diags = read_text(path)
        diags.extend(read_diags)
        unreadable = any(d.code != "syntax-error" for d in read_diags)
    deps: list[Path] = []
    layers, others = _config_layers(path, root, editor_settings, diags)
    deps.extend(Path(p) for p in others)

    # A large document is counted by a forked child while this process parses it, with the
    # tokenizer the settings known so far ask for (if the document's own settings pick
    # another encoding, those counts are simply not used).
    guess = resolve_settings([*layers, SettingsLayer("command line", dict(overrides or {}))])[0]
    guess_tokenizer = load_tokenizer(guess.encoding, model=guess.model).tokenizer
    # A rope (an editor's buffer) is joined into one string only for a full parse: after
    # an edit inside one message, only that message is read out of it.
    fmt = format_for_path(path.name) or _sniff_format(str(text))
    if pending is None and cold_cache:
        pending = precount.start(str(text), fmt, guess_tokenizer)
    conv = None
    if previous is not None and previous.parsed is not None:
        conv = reparse_conversation(previous.parsed, previous.text, text, fmt)
    if conv is None:
        conv = parse_conversation(str(text), fmt)
    parsed = conv
    if not unreadable:
        diags.extend(from_issues(conv.issues))
    common: dict[str, Any] = dict(
        path=path,
        root=root,
        text=text,
        diags=diags,
        layers=layers,
        others=others,
        deps=deps,
        overrides=overrides,
        today=today,
        select=select,
        ignore=ignore,
        overlay=overlay,
    )
    if conv.records:
        if pending is not None:
            pending.seed(conv, guess_tokenizer)
        return _analyze_dataset(conv, **common)
    return _analyze_conversation(conv, **common, pending=pending, previous=previous, parsed=parsed)


def _analyze_dataset(conv: Conversation, *, diags: list[Diagnostic], **kw: Any) -> Analysis:
    """A dataset: each record analysed as its own conversation; the findings of all of them
    (each at its line) and of the lines themselves are the document's."""
    records = tuple(
        _analyze_conversation(
            r,
            diags=from_issues(r.issues),
            **{
                **kw,
                "layers": list(kw["layers"]),
                "others": dict(kw["others"]),
                "deps": list(kw["deps"]),
            },
        )
        for r in conv.records
    )
    first = records[0]
    every = [*diags, *(d for r in records for d in r.diagnostics)]
    every.sort(key=sort_key)
    return dataclasses.replace(
        first,
        conversation=conv,
        diagnostics=tuple(every),
        parsed=None,
        caches={},
        records=records,
    )


def _analyze_conversation(
    conv: Conversation,
    *,
    path: Path,
    root: Path,
    text: str | Rope,
    diags: list[Diagnostic],
    layers: list[SettingsLayer],
    others: dict[str, str],
    deps: list[Path],
    overrides: Mapping[str, Any] | None,
    today: dt.date | None,
    select: Collection[str] | None,
    ignore: Collection[str],
    overlay: Mapping[Path, str] | None,
    pending: precount.PendingCounts | None = None,
    previous: Analysis | None = None,
    parsed: Conversation | None = None,
) -> Analysis:

    template, template_path = _load_template(conv, path, root, diags, overlay or {})
    if template is not None and template_path is not None:
        others[str(template_path)] = template.text
    if template_path is not None:
        deps.append(template_path)
    if template is not None and template.front_matter:
        fm_settings = template.front_matter.get("settings")
        if isinstance(fm_settings, dict):
            layers.append(SettingsLayer(str(template_path), fm_settings))
        fm_tools = template.front_matter_root.get("tools") if template.front_matter_root else None
        if conv.tools is None and fm_tools is not None:
            tools, tool_issues = read_tools(fm_tools)
            conv = _replace(conv, tools=tools)
            if template_path is not None:
                diags.extend(_elsewhere(from_issues(tool_issues), template_path))
    layers.append(SettingsLayer(DOCUMENT_SOURCE, conv.settings, conv.settings_ranges))
    if overrides:
        layers.append(SettingsLayer("command line", dict(overrides)))
    settings, setting_issues = resolve_settings(layers)
    diags.extend(from_setting_issues(setting_issues, document_source=DOCUMENT_SOURCE))
    if conv.tools is None and settings.tools is not None:
        conv = _replace(conv, tools=tools_from_settings(settings.tools))

    file_contents = _load_project_files(conv, path, root, diags, deps, overlay or {})
    load = load_tokenizer(settings.encoding, model=settings.model)
    if pending is not None:
        pending.seed(conv, load.tokenizer)
    opts = AssembleOptions(
        today=today or dt.date.today(), system_template=template, file_contents=file_contents
    )
    assemble_cache = previous.caches.get("assemble") if previous is not None else None
    if not isinstance(assemble_cache, AssemblyCache):
        assemble_cache = AssemblyCache()
    result = assemble(conv, settings, load.tokenizer, opts, cache=assemble_cache)
    diags.extend(
        Diagnostic(
            e.code,
            Severity(e.severity),
            e.message,
            e.range,
            related=tuple(Related(r, m) for r, m in e.related),
        )
        for e in result.errors
    )
    ctx = RuleContext(
        text=text,
        settings=settings,
        tokenizer=load.tokenizer,
        conversation=conv,
        assembly=result,
        template=template,
        template_path=str(template_path) if template_path is not None else None,
        reported=tuple(diags),
    )
    rules_cache = previous.caches.get("rules") if previous is not None else None
    if not isinstance(rules_cache, RuleCache):
        rules_cache = RuleCache()
    try:
        diags = check(ctx, select=select, ignore=ignore, cache=rules_cache)
    except Exception as exc:  # a bug in a rule: the assembly stands, the findings say so
        rules_cache = RuleCache()
        diags = _with_internal_error(ctx.reported, exc, "checking the rules")
    return Analysis(
        path=path,
        text=text,
        conversation=conv,
        settings=settings,
        assembly=result,
        diagnostics=tuple(diags),
        encoding_requested=load.requested,
        encoding_warning=load.warning,
        dependencies=tuple(deps),
        other_texts=others,
        parsed=parsed,
        caches={"assemble": assemble_cache, "rules": rules_cache},
    )


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
) -> PromptAnalysis:
    """Parse and check a ``*.prompt.md`` template on its own (no conversation).

    ``user_tools``: the tool names of the conversations that use this template (their
    ``system_prompt`` points here); they join the ``tools`` setting, so the instruction
    rules know the tools the template is sent with.
    """
    path = path.absolute()
    root = (root or find_root(path)).resolve()
    diags: list[Diagnostic] = []
    if text is None:
        text, read_diags = read_text(path)
        diags.extend(read_diags)
    template = parse_prompt(text)
    diags.extend(from_issues(template.issues))
    layers, others = _config_layers(path, root, editor_settings, diags)
    fm_settings = template.front_matter.get("settings")
    if isinstance(fm_settings, dict):
        layers.append(SettingsLayer(DOCUMENT_SOURCE, fm_settings, _front_matter_ranges(template)))
    if overrides:
        layers.append(SettingsLayer("command line", dict(overrides)))
    settings, setting_issues = resolve_settings(layers)
    diags.extend(from_setting_issues(setting_issues, document_source=DOCUMENT_SOURCE))
    if user_tools:
        settings = settings.model_copy(
            update={"tools": [*(settings.tools or ()), *sorted(set(user_tools))]}
        )
    load = load_tokenizer(settings.encoding, model=settings.model)
    ctx = RuleContext(
        text=text,
        settings=settings,
        tokenizer=load.tokenizer,
        template=template,
        reported=tuple(diags),
    )
    try:
        found = check(ctx, select=select, ignore=ignore)
    except Exception as exc:  # a bug in a rule: the findings say so
        found = _with_internal_error(ctx.reported, exc, "checking the rules")
    return PromptAnalysis(
        path=path,
        text=text,
        template=template,
        settings=settings,
        diagnostics=tuple(found),
        other_texts=others,
    )


def _with_internal_error(
    reported: tuple[Diagnostic, ...], exc: Exception, during: str
) -> list[Diagnostic]:
    return sorted([*reported, from_exception(exc, during=during)], key=sort_key)


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


def _clip(s: str, n: int = 120) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _config_layers(
    path: Path, root: Path, editor_settings: Mapping[str, Any] | None, diags: list[Diagnostic]
) -> tuple[list[SettingsLayer], dict[str, str]]:
    """The settings file above ``path`` and the editor's settings, as layers."""
    layers: list[SettingsLayer] = []
    others: dict[str, str] = {}
    config = find_config(path.parent, root)
    if config is not None:
        others[str(config.path)] = config.text
        if config.layer is not None:
            layers.append(config.layer)
        elif config.error:
            rng = config.error_range or TextRange(0, 0)
            diags.append(
                Diagnostic(
                    "invalid-setting", Severity.ERROR, config.error, rng, path=str(config.path)
                )
            )
    if editor_settings:
        layers.append(editor_layer(editor_settings))
    return layers, others


def _front_matter_ranges(template: PromptTemplate) -> dict[str, TextRange]:
    root = template.front_matter_root
    node = root.get("settings") if root is not None else None
    if node is None or not node.is_object:
        return {}
    return {m.key: m.value.range for m in node.members}


def _load_template(
    conv: Conversation,
    path: Path,
    root: Path,
    diags: list[Diagnostic],
    overlay: Mapping[Path, str],
) -> tuple[PromptTemplate | None, Path | None]:
    ref = conv.system_prompt
    if not isinstance(ref, PromptRef):
        return None, None
    target, problem, code = resolve_reference(path, ref.path, root)
    if target is None:
        diags.append(Diagnostic(code, Severity.ERROR, problem or "", ref.range))
        return None, None
    text, read_diags = _read_with_overlay(target, overlay)
    diags.extend(_elsewhere(read_diags, target))
    template = parse_prompt(text)
    diags.extend(_elsewhere(from_issues(template.issues), target))
    return template, target


def _load_project_files(
    conv: Conversation,
    path: Path,
    root: Path,
    diags: list[Diagnostic],
    deps: list[Path],
    overlay: Mapping[Path, str],
) -> dict[str, str]:
    res: dict[str, str] = {}
    for f in conv.project_files:
        if f.content is not None or f.path is None:
            continue
        rng = f.path_range or f.range
        target, problem, code = resolve_reference(path, f.path, root)
        if target is None:
            diags.append(Diagnostic(code, Severity.ERROR, problem or "", rng))
            continue
        deps.append(target)
        text, read_diags = _read_with_overlay(target, overlay)
        diags.extend(_elsewhere(read_diags, target))
        res[f.file_id] = text
    return res


def _read_with_overlay(target: Path, overlay: Mapping[Path, str]) -> tuple[str, list[Diagnostic]]:
    text = overlay.get(target)
    if text is not None:
        return text, []
    return read_text(target)


def _elsewhere(diags: list[Diagnostic], target: Path) -> list[Diagnostic]:
    return [
        Diagnostic(d.code, d.severity, d.message, d.range, path=str(target), related=d.related)
        for d in diags
    ]


def _sniff_format(text: str) -> DocFormat:
    stripped = text.lstrip()
    if stripped.startswith("["):
        return DocFormat.JSON
    if stripped.startswith("{"):
        first, _, rest = stripped.partition("\n")
        if rest.strip().startswith("{") and first.rstrip().endswith("}"):
            return DocFormat.JSONL
        return DocFormat.JSON
    return DocFormat.YAML


def _replace(conv: Conversation, **changes: Any) -> Conversation:
    return dataclasses.replace(conv, **changes)
