"""The analysis host: a document's analyses, each an immutable value, the next built from the last.

An ``Analysis`` is one version of a document read, configured, assembled and checked; it
never changes once made. An ``AnalysisHost`` (rust-analyzer's word) holds one document's
latest analysis and what the pipeline's stages keep for the next run (typed fields, one
per stage); ``apply_change(text, edit, …)`` gives the analysis of the next version from
the previous one, re-reading only what the edit touched, and ``analyze`` starts afresh.
A dataset (one conversation per JSON Lines line) is many documents in one: each record is
analysed as its line's own text, and keeps its analysis while its line is untouched
(``AnalysisHost._dataset``).

Pure: whatever an analysis needs besides the document's text comes in as values
(``Inputs``: the settings layers found outside the document, the date, the rule
selection) or through ``Sources`` (a file the document names, a tokenizer by encoding),
which the IO half implements (``server.workspace``; the tests give in-memory ones).
Templates (``*.prompt.md``) keep nothing between versions: ``analyze_prompt``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from bisect import bisect_right
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import PurePath
from typing import Any, Literal, Protocol

from assembly import seq
from assembly.assemble import AssembleOptions, Assembly, AssemblyCache, AssemblyError, assemble
from assembly.diagnostics import (
    COUNTED_CODES,
    RULES,
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
from assembly.documents import format_for_path, read_tools, tools_from_settings
from assembly.incremental import changed_span, reparse_conversation
from assembly.model import Conversation, DocFormat, Issue, PromptRef, PromptTemplate, ToolDef
from assembly.reading import parse_conversation
from assembly.rope import Rope
from assembly.settings import Settings, SettingsLayer, resolve_settings
from assembly.sysprompt import parse_prompt_text
from assembly.text import TextRange
from assembly.tokens import Tokenizer, bound_tokenizer

DOCUMENT_SOURCE = "<document>"
COMMAND_LINE_SOURCE = "command line"
PROMPT_SUFFIX = ".prompt.md"  # a template; conversations: ``documents.CONVERSATION_SUFFIXES``
RULE_CODES = frozenset(r.code for r in RULES)  # an unknown code of `rules` is a warning

DocKind = Literal["conversation", "prompt"]


def kind_of(name: str) -> DocKind | None:
    """The kind of document a file name says (``analyze_prompt`` for a template, an
    ``AnalysisHost`` for a conversation), or None for files that are neither."""
    if name.lower().endswith(PROMPT_SUFFIX):
        return "prompt"
    if format_for_path(name) is not None:
        return "conversation"
    return None


# ---------------------------------------------------------------------------- what goes in


@dataclass(frozen=True, slots=True)
class Edit:
    """Where two versions of a text differ: ``[start, old_end)`` of the old one became
    ``[start, new_end)`` of the new one (``Rope.changed_span``'s triple)."""

    start: int
    old_end: int
    new_end: int

    @staticmethod
    def replace(start: int, end: int, new_text: str) -> Edit:
        """The edit that replaces ``[start, end)`` with ``new_text``."""
        return Edit(start, end, start + len(new_text))

    @staticmethod
    def none(length: int) -> Edit:
        """No change to a text of ``length`` code points."""
        return Edit(length, length, length)

    @property
    def triple(self) -> tuple[int, int, int]:
        """``(start, old_end, new_end)``: the span ``reparse_conversation`` takes."""
        return self.start, self.old_end, self.new_end

    def fits(self, old_length: int, new_length: int) -> bool:
        """Whether this can be the edit from a text of ``old_length`` to one of ``new_length``."""
        return (
            0 <= self.start <= self.old_end <= old_length
            and self.start <= self.new_end <= new_length
            and new_length - self.new_end == old_length - self.old_end
        )

    def then(self, later: Edit) -> Edit:
        """This edit followed by ``later`` (whose offsets are in the text this one left),
        as one edit of the text before both: the smallest span covering both. An edit
        that changes nothing (``none``) leaves the other as it is."""
        if self.start == self.old_end == self.new_end:
            return later
        if later.start == later.old_end == later.new_end:
            return self
        start = min(self.start, later.start)
        end = max(self.new_end, later.old_end)  # in the text between the two edits
        return Edit(
            start,
            end - (self.new_end - self.old_end),
            end + (later.new_end - later.old_end),
        )


# A text that differs from the version set aside (``_Aside``) in no more than this (either
# side) is re-read from it when a re-read from the last version would parse further past
# its edit.
_SMALL = 1 << 16


@dataclass(frozen=True, slots=True)
class _Aside:
    """The version before the last edit that changed the number of messages, set aside.

    An edit that ends the message list early (a deletion from one message's text into a
    file's, a bracket typed or taken out) leaves the messages after it in the text, but as
    content the parse does not read; a deletion of many messages takes them out of it. The
    edit that brings them back (most often its undo) would read them all again from the
    version before it, which no longer has them. So the host keeps the version before,
    ``conv`` of ``text``, while the number of messages differs from its, and re-reads a
    version from it when the two texts are the same (an undo, a redo: it is that version,
    its messages the objects they were), or differ in a small span only (``changed_span``: a
    rope compares its shared chunks by identity) where the last version would read far past
    its edit (``reparse_conversation``'s ``reach``). The stages take it up from there: the
    pipeline's memo and the rule engine's state set aside hold what they made of it
    (``_generation`` in ``assemble`` and in the engine). Typing while the messages are away
    is re-read from the last version, as any keystroke is.
    """

    conv: Conversation
    text: str | Rope

    @staticmethod
    def kept(
        aside: _Aside | None, conv: Conversation, text: str | Rope, new: Conversation
    ) -> _Aside | None:
        """The version to set aside when ``conv`` of ``text`` became ``new``: that one when
        the edit changed the number of messages (for its undo), else ``aside`` while the
        number differs from its (its messages are still away, or the new ones still there)."""
        if conv.records or new.records:
            return None
        n = len(new.message_data)
        if n != len(conv.message_data):
            return _Aside(conv, text)
        if aside is not None and n != len(aside.conv.message_data):
            return aside
        return None


@dataclass(frozen=True, slots=True)
class FileText:
    """A file the document names (a template, a project file), as the IO half found it.

    ``path`` None: it was not read; ``code`` and ``problem`` say why (reported at the
    reference), and ``missing`` is the file looked for when it is in the workspace but not
    there (or not a regular file): the analysis depends on it all the same, so creating it
    analyses the document again. ``diagnostics`` are about its bytes (invalid UTF-8), in
    that file.
    """

    path: PurePath | None
    text: str = ""
    diagnostics: tuple[Diagnostic, ...] = ()
    code: str = ""
    problem: str = ""
    missing: PurePath | None = None


class LoadedTokenizer(Protocol):
    """A tokenizer chosen by encoding, and what to say when the one asked for was not there."""

    @property
    def tokenizer(self) -> Tokenizer: ...
    @property
    def requested(self) -> str: ...
    @property
    def warning(self) -> str | None: ...


class Sources(Protocol):
    """What an analysis reads from outside the document (implemented by the IO half)."""

    def read(self, ref: str) -> FileText:
        """The file ``ref`` (as the document writes it) names, relative to the document."""
        ...

    def tokenizer(self, encoding: str | None, model: str | None) -> LoadedTokenizer:
        """The tokenizer for ``encoding`` (or the model's), never failing: a fallback."""
        ...

    def counting(self, conversation: Conversation, tokenizer: Tokenizer) -> None:
        """A hint: ``conversation``'s texts are about to be counted with ``tokenizer``."""
        ...


@dataclass(frozen=True, slots=True)
class Inputs:
    """Everything an analysis reads besides the document's text and the files it names."""

    path: PurePath  # the document's (its name says the format; findings name it)
    today: dt.date  # for {{CURRENT_DATETIME}}
    layers: tuple[SettingsLayer, ...] = ()  # the settings file's and the editor's
    overrides: Mapping[str, Any] | None = None  # command-line flags: win over every source
    select: Collection[str] | None = None  # the rules that run (``diagnostics.check``)
    ignore: Collection[str] = ()
    # Found while gathering these: a settings file's error, the document's invalid bytes.
    diagnostics: tuple[Diagnostic, ...] = ()
    unreadable: bool = False  # the document was not read: its empty text is not the author's
    other_texts: Mapping[str, str] = field(default_factory=dict)  # the settings file's text
    dependencies: tuple[PurePath, ...] = ()  # the files read so far (the settings file)
    # The caller reads only the findings (``promptls lint``): the analysis' assembly may
    # hold bounds for the counts that decide nothing (``Assembly.counts_are_bounds``).
    findings_only: bool = False


# --------------------------------------------------------------------------- what comes out


@dataclass(frozen=True, slots=True)
class Analysis:
    """A document, its effective settings, its assembly and every diagnostic about it."""

    path: PurePath
    text: str | Rope  # a rope when it is an editor's buffer
    conversation: Conversation
    settings: Settings
    assembly: Assembly
    diagnostics: tuple[Diagnostic, ...]
    encoding_requested: str
    encoding_warning: str | None
    dependencies: tuple[PurePath, ...] = field(default=())
    # Texts of the other files that diagnostics point into, by path.
    other_texts: dict[str, str] = field(default_factory=dict)
    # The conversation exactly as read from ``text`` (before tools from a template are
    # added): what the next analysis re-reads incrementally.
    parsed: Conversation | None = None
    # A dataset (one conversation per JSON Lines line): each record's own analysis, of its
    # line's text alone (``text``, every range relative to ``base``: where the record's text
    # starts in the document). The fields above are then the first record's, except
    # ``text``, ``conversation`` (the dataset), ``diagnostics`` (every record's, placed in
    # the document), ``dependencies`` and ``other_texts`` (every record's).
    records: tuple[Analysis, ...] = ()
    base: int = 0

    def at(self, offset: int) -> Analysis:
        """The analysis that covers ``offset`` of the document: the record whose line holds
        it (read ``offset - base`` in it), else this."""
        k = bisect_right(self.records, offset, key=_BASE) - 1
        if k >= 0:
            r = self.records[k]
            root = r.conversation.root
            if root is not None and root.range.start <= offset - r.base <= root.range.end:
                return r
        return self

    def placed_at(self, base: int) -> Analysis:
        """This analysis of a dataset's record, its text starting at ``base`` of the
        document (``dataclasses.replace``, made by hand: a dataset moves every record below
        an edit that adds or removes characters, 10,000 of them in a large dataset)."""
        return Analysis(
            self.path,
            self.text,
            self.conversation,
            self.settings,
            self.assembly,
            self.diagnostics,
            self.encoding_requested,
            self.encoding_warning,
            self.dependencies,
            self.other_texts,
            self.parsed,
            self.records,
            base,
        )

    def record_number(self, record: Analysis) -> int:
        """1-based position of ``record`` among the dataset's records."""
        return next(k for k, r in enumerate(self.records, 1) if r is record)


@dataclass(frozen=True, slots=True)
class PromptAnalysis:
    """A prompt template checked on its own."""

    path: PurePath
    text: str
    template: PromptTemplate
    settings: Settings
    diagnostics: tuple[Diagnostic, ...]
    other_texts: dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------------------- the host


class AnalysisHost:
    """One document's latest analysis and what the stages keep for the next one.

    Not thread-safe: one host per document, used by one thread at a time (the server's
    analysis thread). When an analysis raises, the host forgets everything, so the next
    one starts afresh instead of from a half-updated cache.
    """

    def __init__(self) -> None:
        self.previous: Analysis | None = None
        self.assemble_cache = AssemblyCache()  # the ``assemble`` stage's
        self.rule_cache = RuleCache()  # the rule engine's
        self.records = _Records()  # a dataset's
        self.aside: _Aside | None = None  # the version before messages came or went

    def analyze(self, text: str | Rope, inputs: Inputs, sources: Sources) -> Analysis:
        """The analysis of ``text`` from scratch (nothing kept is used)."""
        self.reset()
        return self._run(text, None, inputs, sources)

    def apply_change(
        self, text: str | Rope, edit: Edit | None, inputs: Inputs, sources: Sources
    ) -> Analysis:
        """The analysis of ``text``, the previous analysis' text changed by ``edit``.

        Only the message the edit falls in is read again (when the previous version's
        parse allows it), and the stages reuse what they kept. ``edit`` None: not known
        (the texts are compared). Without a previous analysis, this is ``analyze``.
        """
        return self._run(text, edit, inputs, sources)

    def reset(self) -> None:
        """Forget the previous analysis and every stage's cache."""
        self.previous = None
        self.assemble_cache = AssemblyCache()
        self.rule_cache = RuleCache()
        self.records = _Records()
        self.aside = None

    def _run(
        self, text: str | Rope, edit: Edit | None, inputs: Inputs, sources: Sources
    ) -> Analysis:
        try:
            analysis = self._analysis(text, edit, inputs, sources)
        except BaseException:
            self.reset()
            raise
        finally:
            seq.forget()  # (what the stages shared of the two versions)
        self.previous = analysis
        return analysis

    def _analysis(
        self, text: str | Rope, edit: Edit | None, inputs: Inputs, sources: Sources
    ) -> Analysis:
        fmt = document_format(inputs.path, text)
        previous = self.previous
        conv = None
        change = None  # the previous text, and where this one differs from it
        if previous is not None and edit is not None and edit.fits(len(previous.text), len(text)):
            change = (previous.text, edit.start, edit.old_end, edit.new_end)
        else:
            edit = None
        aside, self.aside = self.aside, None
        if previous is not None and previous.parsed is not None:
            conv = self._reparsed(previous, text, fmt, edit, aside)
        if conv is None:
            conv = parse_conversation(text, fmt)
        diags = list(inputs.diagnostics)
        if not inputs.unreadable:
            diags.extend(from_issues(conv.issues))
        if conv.records:
            guess = resolve_outside(inputs)
            sources.counting(conv, sources.tokenizer(guess.encoding, guess.model).tokenizer)
            # (A document's caches: the next version that is no dataset starts afresh.)
            self.assemble_cache, self.rule_cache = AssemblyCache(), RuleCache()
            return self._dataset(conv, text, diags, inputs, sources)
        self.records = _Records()
        result = _conversation(
            conv,
            text,
            diags,
            inputs,
            sources,
            self.assemble_cache,
            self.rule_cache,
            count=True,
            change=change,
        )
        used = result.analysis.conversation
        if used is not conv and "messages" in used._views:
            # The copy (with the tools a template or the settings give) is the one whose
            # views were read: the next re-read of ``conv`` starts from them.
            conv._views["prior_views"] = used._views["messages"]
        if result.rule_cache is not self.rule_cache:
            self.rule_cache = result.rule_cache
        return dataclasses.replace(result.analysis, parsed=conv)

    def _reparsed(
        self,
        previous: Analysis,
        text: str | Rope,
        fmt: DocFormat,
        edit: Edit | None,
        aside: _Aside | None,
    ) -> Conversation | None:
        """The conversation of ``text`` re-read from the previous version's, or from the
        version set aside (``_Aside``) when that is the same text or the previous one would
        read far (the messages that went come back). None: read it whole. Sets the version
        to set aside for the next one."""
        parsed = previous.parsed
        assert parsed is not None
        span = edit.triple if edit is not None else None
        conv = None
        if aside is not None and edit is not None:
            # (Texts of two lengths differ: the span is found only when it is needed.)
            found = changed_span(aside.text, text) if len(aside.text) == len(text) else None
            if found is None or found[0] < len(text):  # (else the same text: the one aside)
                conv = reparse_conversation(
                    parsed, previous.text, text, fmt, span=span, reach=_SMALL
                )
                found = found or (changed_span(aside.text, text) if conv is None else None)
            if conv is None and found is not None and max(found[1:]) - found[0] <= _SMALL:
                conv = reparse_conversation(aside.conv, aside.text, text, fmt, span=found)
        if conv is None:
            conv = reparse_conversation(parsed, previous.text, text, fmt, span=span)
        if conv is not None and edit is not None:
            self.aside = _Aside.kept(aside, parsed, previous.text, conv)
        return conv

    def _dataset(
        self,
        conv: Conversation,
        text: str | Rope,
        diags: list[Diagnostic],
        inputs: Inputs,
        sources: Sources,
    ) -> Analysis:
        """A dataset: each record analysed as the JSON document its line's text is; the
        findings of all of them (each placed at its line) and of the lines themselves are
        the document's. A record the previous version had (the same object: its line was
        not touched) keeps its analysis while the inputs and every file it read are the
        same; it is only placed again when its line moved."""
        kept = self.records if self.records.inputs == inputs else _Records()
        files = _ReadOnce(sources)
        made = _Records(inputs)
        records: list[Analysis] = []
        every = list(diags)
        deps: dict[PurePath, None] = dict.fromkeys(inputs.dependencies)
        others = dict(inputs.other_texts)
        for r, base in zip(conv.records, conv.record_starts, strict=True):
            hit = kept.by_record.get(id(r))
            if hit is None or hit.record is not r or (hit.reads and not files.same(hit.reads)):
                own = str(text[base : base + r.length])
                reads = _Recording(files)
                a = _conversation(
                    r, own, from_issues(r.issues), inputs, reads, AssemblyCache(), RuleCache(), base
                ).analysis  # counted with the dataset (``_analysis``)
                placed = tuple(d.shifted(base) for d in a.diagnostics)
                hit = _Kept(r, a, tuple(reads.read_refs), placed)
            elif hit.analysis.base != base:  # its line moved
                a = hit.analysis.placed_at(base)
                placed = tuple(d.shifted(base) for d in a.diagnostics)
                hit = _Kept(r, a, hit.reads, placed)
            made.by_record[id(r)] = hit
            records.append(hit.analysis)
            every.extend(hit.placed)
            if hit.reads:  # (a record that reads no file depends on the inputs' alone)
                deps.update(dict.fromkeys(hit.analysis.dependencies))
                others.update(hit.analysis.other_texts)
        self.records = made
        every.sort(key=sort_key)
        return dataclasses.replace(
            records[0],
            text=text,
            conversation=conv,
            diagnostics=tuple(every),
            dependencies=tuple(deps),
            other_texts=others,
            parsed=conv,
            records=tuple(records),
            base=0,
        )


# ----------------------------------------------------------------------------- templates


def analyze_prompt(
    text: str, inputs: Inputs, sources: Sources, *, user_tools: Collection[str] | None = None
) -> PromptAnalysis:
    """Parse and check a ``*.prompt.md`` template on its own (no conversation).

    ``user_tools``: the tool names of the conversations that use this template (their
    ``system_prompt`` points here); they join the ``tools`` setting, so the instruction
    rules know the tools the template is sent with.
    """
    template = parse_prompt_text(text)
    diags = [*inputs.diagnostics, *from_issues(template.issues)]
    layers = list(inputs.layers)
    fm_settings = template.front_matter.get("settings")
    if isinstance(fm_settings, dict):
        layers.append(SettingsLayer(DOCUMENT_SOURCE, fm_settings, _front_matter_ranges(template)))
    diags += from_issues(_front_matter_issues(template))
    if inputs.overrides:
        layers.append(SettingsLayer(COMMAND_LINE_SOURCE, dict(inputs.overrides)))
    settings, setting_issues = resolve_settings(layers, rule_codes=RULE_CODES)
    diags.extend(from_setting_issues(setting_issues, document_source=DOCUMENT_SOURCE))
    if user_tools:
        settings = dataclasses.replace(
            settings, tools=[*(settings.tools or ()), *sorted(set(user_tools))]
        )
    load = sources.tokenizer(settings.encoding, settings.model)
    ctx = RuleContext(
        text=text,
        settings=settings,
        tokenizer=load.tokenizer,
        template=template,
        reported=tuple(diags),
    )
    try:
        found = check(ctx, select=inputs.select, ignore=inputs.ignore)
    except Exception as exc:  # a bug in a rule: the findings say so
        found = _with_internal_error(ctx.reported, exc, "checking the rules")
    return PromptAnalysis(
        path=inputs.path,
        text=text,
        template=template,
        settings=settings,
        diagnostics=tuple(found),
        other_texts=dict(inputs.other_texts),
    )


def resolve_outside(inputs: Inputs) -> Settings:
    """The settings known before the document is read (its own come later): what a
    tokenizer can be chosen by to count its texts while it is parsed."""
    layers = list(inputs.layers)
    if inputs.overrides:
        layers.append(SettingsLayer(COMMAND_LINE_SOURCE, dict(inputs.overrides)))
    return resolve_settings(layers)[0]


# Extensions that say the format of a file named on the command line without a
# conversation's suffix (a Claude Code session, ``<id>.jsonl``, may be one line long, which
# its first characters would take for JSON).
_LINES_SUFFIXES = (".jsonl", ".ndjson")


def document_format(path: PurePath, text: str | Rope) -> DocFormat:
    """The format a document's name says (``.conv.*``; ``.jsonl`` alone), else the one its
    first characters say."""
    found = format_for_path(path.name)
    if found is None and path.name.lower().endswith(_LINES_SUFFIXES):
        return DocFormat.JSONL
    return found or _sniff_format(str(text))


# ------------------------------------------------------------------------------- private


@dataclass(frozen=True, slots=True)
class _Result:
    """An analysis and the rule cache that made its findings (kept for the next run of the
    same document)."""

    analysis: Analysis
    rule_cache: RuleCache


_BASE = attrgetter("base")


@dataclass(frozen=True, slots=True)
class _Kept:
    """A dataset's record as the last analysis left it: its analysis, the files it read
    (``_Recording.read_refs``) and its findings placed in the document."""

    record: Conversation
    analysis: Analysis
    reads: tuple[tuple[str, FileText], ...]
    placed: tuple[Diagnostic, ...]


@dataclass(slots=True)
class _Records:
    """What a dataset's analysis keeps for the next, by record (``id``); valid for
    ``inputs`` only."""

    inputs: Inputs | None = None
    by_record: dict[int, _Kept] = field(default_factory=dict)


class _ReadOnce:
    """``Sources`` for one analysis of a dataset: each file read once, whatever the number
    of records naming it (a template every record points to)."""

    def __init__(self, sources: Sources) -> None:
        self.sources = sources
        self.files: dict[str, FileText] = {}

    def read(self, ref: str) -> FileText:
        found = self.files.get(ref)
        if found is None:
            found = self.files[ref] = self.sources.read(ref)
        return found

    def same(self, reads: tuple[tuple[str, FileText], ...]) -> bool:
        """Whether every file a record read reads the same now."""
        return all(self.read(ref) == found for ref, found in reads)


class _Recording:
    """``Sources`` for one record: what it reads, recorded (the files decide whether its
    analysis can be kept)."""

    def __init__(self, files: _ReadOnce) -> None:
        self.files = files
        self.read_refs: list[tuple[str, FileText]] = []

    def read(self, ref: str) -> FileText:
        found = self.files.read(ref)
        self.read_refs.append((ref, found))
        return found

    def tokenizer(self, encoding: str | None, model: str | None) -> LoadedTokenizer:
        return self.files.sources.tokenizer(encoding, model)

    def counting(self, conversation: Conversation, tokenizer: Tokenizer) -> None:
        self.files.sources.counting(conversation, tokenizer)


def _conversation(
    conv: Conversation,
    text: str | Rope,
    diags: list[Diagnostic],
    inputs: Inputs,
    sources: Sources,
    assemble_cache: AssemblyCache,
    rule_cache: RuleCache,
    base: int = 0,
    *,
    count: bool = False,
    change: tuple[str | Rope, int, int, int] | None = None,
) -> _Result:
    """Configure, assemble and check one conversation (a document, or a dataset's record
    whose text starts at ``base``); ``change``: the previous text and where ``text``
    differs from it, when known."""
    layers = list(inputs.layers)
    others = dict(inputs.other_texts)
    deps = list(inputs.dependencies)
    template, template_path = _template(conv, diags, deps, sources)
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
            conv = _with_tools(conv, tools)
            if template_path is not None:
                diags.extend(_elsewhere(from_issues(tool_issues), template_path))
    layers.append(SettingsLayer(DOCUMENT_SOURCE, conv.settings, conv.settings_ranges))
    if inputs.overrides:
        layers.append(SettingsLayer(COMMAND_LINE_SOURCE, dict(inputs.overrides)))
    settings, setting_issues = resolve_settings(layers, rule_codes=RULE_CODES)
    diags.extend(from_setting_issues(setting_issues, document_source=DOCUMENT_SOURCE))
    if conv.tools is None and settings.tools is not None:
        conv = _with_tools(conv, tools_from_settings(settings.tools))

    file_contents = _project_files(conv, diags, deps, sources)
    load = sources.tokenizer(settings.encoding, settings.model)
    if count:
        sources.counting(conv, load.tokenizer)
    opts = AssembleOptions(
        today=inputs.today, system_template=template, file_contents=file_contents
    )

    def checked(counter: Tokenizer, caches: tuple[AssemblyCache, RuleCache]) -> _Checked:
        """Assemble with ``counter`` and check the rules (which count with the tokenizer)."""
        result = assemble(conv, settings, counter, opts, cache=caches[0])
        reported = [*diags, *map(_pipeline_diagnostic, result.errors)]
        ctx = RuleContext(
            text=text,
            settings=settings,
            tokenizer=load.tokenizer,
            conversation=conv,
            assembly=result,
            template=template,
            template_path=str(template_path) if template_path is not None else None,
            reported=tuple(reported),
        )
        rules = caches[1]
        try:
            found = check(ctx, select=inputs.select, ignore=inputs.ignore, cache=rules, edit=change)
        except Exception as exc:  # a bug in a rule: the assembly stands, the findings say so
            rules = RuleCache()
            found = _with_internal_error(ctx.reported, exc, "checking the rules")
        return _Checked(result, found, rules)

    # Only the findings are wanted: assemble with bounds for counts first, and with the
    # counts only when a decision or a finding needs them (``tokens.BoundTokenizer``). The
    # caches of such a run are not kept: they hold bounds.
    bound = bound_tokenizer(load.tokenizer) if inputs.findings_only else None
    run = None
    if bound is not None:
        run = checked(bound, (AssemblyCache(), RuleCache()))
        if run.assembly.decided_by_counts or any(d.code in COUNTED_CODES for d in run.found):
            run = None
        else:
            run = dataclasses.replace(run, rule_cache=RuleCache())
    if run is None:
        run = checked(load.tokenizer, (assemble_cache, rule_cache))
    result, found, rule_cache = run.assembly, run.found, run.rule_cache
    analysis = Analysis(
        path=inputs.path,
        text=text,
        conversation=conv,
        settings=settings,
        assembly=result,
        diagnostics=tuple(found),
        encoding_requested=load.requested,
        encoding_warning=load.warning,
        dependencies=tuple(deps),
        other_texts=others,
        base=base,
    )
    return _Result(analysis, rule_cache)


@dataclass(frozen=True, slots=True)
class _Checked:
    """An assembly, the findings made of it and the rule cache that made them."""

    assembly: Assembly
    found: list[Diagnostic]
    rule_cache: RuleCache


def _pipeline_diagnostic(e: AssemblyError) -> Diagnostic:
    """A finding of the pipeline's own (it cannot assemble, or warns)."""
    return Diagnostic(
        e.code,
        Severity(e.severity),
        e.message,
        e.range,
        related=tuple(Related(r, m) for r, m in e.related),
    )


def _with_tools(conv: Conversation, tools: tuple[ToolDef, ...]) -> Conversation:
    """``conv`` with the tools a template or the settings give; its message views are
    those of ``conv`` (made from them when first read)."""
    res = dataclasses.replace(conv, tools=tools)
    views = conv._views.get("messages") or conv._views.get("prior_views")
    if views is not None:
        res._views["prior_views"] = views
    return res


def _template(
    conv: Conversation, diags: list[Diagnostic], deps: list[PurePath], sources: Sources
) -> tuple[PromptTemplate | None, PurePath | None]:
    ref = conv.system_prompt
    if not isinstance(ref, PromptRef):
        return None, None
    found = sources.read(ref.path)
    if found.path is None:
        diags.append(Diagnostic(found.code, Severity.ERROR, found.problem, ref.range))
        if found.missing is not None:
            deps.append(found.missing)
        return None, None
    diags.extend(_elsewhere(list(found.diagnostics), found.path))
    template = parse_prompt_text(found.text)
    diags.extend(_elsewhere(from_issues(template.issues), found.path))
    return template, found.path


def _project_files(
    conv: Conversation, diags: list[Diagnostic], deps: list[PurePath], sources: Sources
) -> dict[str, str]:
    res: dict[str, str] = {}
    for f in conv.project_files:
        if f.content is not None or f.path is None:
            continue
        found = sources.read(f.path)
        if found.path is None:
            diags.append(
                Diagnostic(found.code, Severity.ERROR, found.problem, f.path_range or f.range)
            )
            if found.missing is not None:
                deps.append(found.missing)
            continue
        deps.append(found.path)
        diags.extend(_elsewhere(list(found.diagnostics), found.path))
        res[f.file_id] = found.text
    return res


def _with_internal_error(
    reported: tuple[Diagnostic, ...], exc: Exception, during: str
) -> list[Diagnostic]:
    return sorted([*reported, from_exception(exc, during=during)], key=sort_key)


def _front_matter_issues(template: PromptTemplate) -> list[Issue]:
    """What is wrong with the front matter's ``tools`` and ``settings`` values, said on the
    template itself (a conversation using it says the tools' again: ``_conversation``)."""
    root = template.front_matter_root
    if root is None or not root.is_object:
        return []
    res = []
    tools = root.get("tools")
    if tools is not None:
        res += read_tools(tools)[1]
    settings = root.get("settings")
    if settings is not None and not settings.is_object:
        res.append(
            Issue("schema-error", "front matter `settings` must be a mapping", settings.range)
        )
    return res


def _front_matter_ranges(template: PromptTemplate) -> dict[str, TextRange]:
    root = template.front_matter_root
    node = root.get("settings") if root is not None else None
    if node is None or not node.is_object:
        return {}
    return {m.key: m.value.range for m in node.members}


def _elsewhere(diags: list[Diagnostic], target: PurePath) -> list[Diagnostic]:
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
