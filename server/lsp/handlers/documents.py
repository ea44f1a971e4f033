"""didOpen / didChange / didSave / didClose, and scheduling analyses.

Every change replaces the document's ``DocState`` and schedules an analysis on the worker
thread: at once when none of the document is under way, else right after the running one
(changes in between coalesce; see ``server.lsp.scheduler``). When the analysis of the latest
state finishes, push clients get ``publishDiagnostics`` with the analysed version; one of
a state the document has moved on from is kept for answers, never published.

The text of the documents we analyse is ours, not pygls' (``server.lsp.app.PromptProtocol``):
``didOpen`` builds a ``Rope`` and ``didChange`` edits it (``convert.apply_lsp_changes``),
in time proportional to the edit.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.uris import to_fs_path

from assembly.ide import folding
from server.lsp import convert, outline
from server.lsp.app import PromptServer
from server.lsp.scheduler import SETTLE_S, View
from server.lsp.session import conversation_tools, document_kind
from server.lsp.state import DocState, Snapshot

log = logging.getLogger(__name__)


def did_open(ls: PromptServer, params: lsp.DidOpenTextDocumentParams) -> None:
    doc = params.text_document
    if document_kind(doc.uri) is not None:
        text = ls.protocol.document_text(doc.text)
        state = ls.session.open(doc.uri, doc.version, text, ls.protocol.take_counting())
        if state is not None:
            _changed(ls, state)


def did_change(ls: PromptServer, params: lsp.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    old = ls.session.documents.get(uri)
    if old is None:
        return  # not a document we analyse, or changed without being opened
    text, edit = convert.apply_lsp_changes(old.text, params.content_changes, ls.session.encoding)
    state = ls.session.change(uri, params.text_document.version, text, edit)
    if state is not None:
        _changed(ls, state)


def did_save(ls: PromptServer, params: lsp.DidSaveTextDocumentParams) -> None:
    path = to_fs_path(params.text_document.uri)
    if path:
        schedule_paths(ls, [Path(path)])


def did_close(ls: PromptServer, params: lsp.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    s = ls.session
    s.close(uri)
    outline.forget(uri)
    folding.forget()  # (of whichever conversation was folded last: the next one refolds)
    if not s.capabilities.pull_diagnostics:
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
    path = to_fs_path(uri)
    if path:  # dependents read the file from disk again
        schedule_paths(ls, [Path(path)])


def schedule(ls: PromptServer, uri: str) -> None:
    """Analyse an open document's current state (once its running analysis ends)."""
    ls.session.scheduler.changed(uri)


async def current_view(
    ls: PromptServer, uri: str, *, costly: bool = False, asked: Any = None
) -> View | None:
    """The analysis of the document's state when the request came, waiting (bounded) for
    it; else the newest finished one, mapped into the current text (``View.fresh``).
    ``costly``: the answer takes long to compute; let edits already sent arrive first.
    ``asked``: the request's params, whose positions are in the text it arrived at
    (``View.offset_of`` maps them into the current one)."""
    arrived = ls.protocol.arrival(asked) if asked is not None else None
    settle = SETTLE_S if costly else 0.0
    return await ls.session.scheduler.view(uri, settle=settle, arrived=arrived)


async def latest_view(ls: PromptServer, uri: str, *, asked: Any = None) -> View | None:
    """The latest finished analysis, current or not: for answers that must not wait."""
    arrived = ls.protocol.arrival(asked) if asked is not None else None
    return await ls.session.scheduler.view(uri, wait=False, arrived=arrived)


def schedule_all(ls: PromptServer) -> None:
    for uri in list(ls.session.documents):
        schedule(ls, uri)


def schedule_paths(ls: PromptServer, paths: list[Path]) -> None:
    """Re-analyse the documents that depend on ``paths`` (all of them for settings files)."""
    s = ls.session
    if any(p.name in ("pyproject.toml", "promptls.toml") for p in paths):
        schedule_all(ls)
        return
    for path in paths:
        for uri in s.dependents(path.resolve()):
            schedule(ls, uri)


def publish(ls: PromptServer, snap: Snapshot, previous: Snapshot | None = None) -> None:
    """Push the snapshot's diagnostics of this document (findings in other files stay out).

    Each finding is serialized as pygls would serialize its ``convert.to_lsp_diagnostic``,
    but for its ranges and its ``data`` (its offsets) once per look: a finding whose
    words and related messages are those of one ``previous`` published (most of them
    after a keystroke, and all of them after a paste or a deletion that moves every later
    line) reuses that serialization (``Snapshot.published``: the JSON around its ranges),
    and only its ranges, its related places' ranges and its ``data`` are written again."""
    kept = previous.published if previous is not None else {}
    made = snap.published
    m, uri = snap.text_map, snap.uri
    mine = [d for d in snap.diagnostics if d.path is None]
    elsewhere = [d for d in mine if any(r.path is not None for r in d.related)]
    # Related places in other files: converted with those files' maps (made once), each time.
    whole = iter(convert.to_lsp_diagnostics(m, elsewhere, uri, other_texts=snap.other_texts))
    unstructure = ls.protocol._converter.unstructure
    buf = bytearray(b'{"uri": ')
    buf += json.dumps(uri).encode("ascii")
    buf += b', "diagnostics": ['
    for k, d in enumerate(mine):
        if k:
            buf += b", "
        if elsewhere and any(r.path is not None for r in d.related):
            buf += json.dumps(unstructure(next(whole))).encode("ascii")
            continue
        key = (
            uri,
            d.code,
            d.severity,
            d.message,
            d.unnecessary,
            tuple(r.message for r in d.related),
        )
        parts = made.get(key) or kept.get(key)
        if parts is None:
            parts = _around_ranges(unstructure(convert.to_lsp_diagnostic(m, d, uri)))
        if parts is None:  # (a word that looks like the slot: written whole)
            fields = unstructure(convert.to_lsp_diagnostic(m, d, uri))
            del fields["data"]
            buf += json.dumps(fields).encode("ascii")[:-1]
        else:
            made[key] = parts
            buf += parts[0]
            buf += convert.RANGE_JSON % convert.lsp_span(m, d.range)
            buf += parts[1]
            for r, part in zip(d.related, parts[2:], strict=True):
                buf += convert.RANGE_JSON % convert.lsp_span(m, r.range)
                buf += part
        buf += b', "data": '
        buf += json.dumps(convert.diagnostic_data(d)).encode("ascii")
        buf += b"}"
    buf += b"]"
    if snap.version is not None:
        buf += b', "version": %d' % snap.version
    buf += b"}"
    ls.protocol.notify_prepared(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, bytes(buf))


_SLOT = "\x00range\x00"  # written in a range's place, then cut out
_SLOT_JSON = json.dumps(_SLOT).encode("ascii")


def _around_ranges(fields: dict[str, Any]) -> tuple[bytes, ...] | None:
    """A diagnostic's unstructured fields as JSON without its ``data`` and its closing
    brace, cut where its range and each related place's range go: ``(before the range,
    after it up to the first related range or the end, between related ranges …)``, so
    ``parts[0] + R + parts[1] + R1 + parts[2] …`` is the JSON (None: a word of it holds
    the slot)."""
    del fields["data"]  # (the last field: written after the others)
    fields["range"] = _SLOT
    related = fields.get("relatedInformation") or ()
    for info in related:
        info["location"]["range"] = _SLOT
    parts = json.dumps(fields).encode("ascii")[:-1].split(_SLOT_JSON)
    if len(parts) != 2 + len(related):
        return None
    return tuple(parts)


def install(ls: PromptServer) -> None:
    """Hand the scheduler the server's way of publishing a document's latest state."""
    ls.session.scheduler.on_current = lambda snap, prev: _finished(ls, snap, prev)


def _changed(ls: PromptServer, state: DocState) -> None:
    """A document's text changed: analyse it, and the open conversations that read it."""
    schedule(ls, state.uri)
    for dependent in ls.session.dependents(state.real_path):
        if dependent != state.uri:
            schedule(ls, dependent)


def _finished(ls: PromptServer, snap: Snapshot, previous: Snapshot | None) -> None:
    """A document's latest state was analysed: show it."""
    s = ls.session
    _templates_see_tools(ls, previous, snap)
    _refresh_views(ls)
    if s.capabilities.pull_diagnostics:
        # The client pulls after its own edits; a re-analysis of the same version (a file
        # it depends on changed, or the analysis failed) needs a nudge.
        reanalysed = previous is not None and previous.version == snap.version
        if (reanalysed or snap.failure is not None) and s.capabilities.diagnostic_refresh:
            ls.workspace_diagnostic_refresh(None)
        return
    publish(ls, snap, previous)


def _tool_names(snap: Snapshot | None) -> frozenset[str] | None:
    a = snap.analysis if snap is not None else None
    return conversation_tools(getattr(a, "parsed", None) or getattr(a, "conversation", None))


def _templates_see_tools(ls: PromptServer, previous: Snapshot | None, snap: Snapshot) -> None:
    """A conversation's tools (declared or called) changed: re-check the open templates
    it uses, whose instruction rules know the tools of the conversations that use them."""
    deps = getattr(snap.analysis, "dependencies", ())
    if not deps or _tool_names(previous) == _tool_names(snap):
        return
    s = ls.session
    for uri, doc in list(s.documents.items()):
        if doc.kind == "prompt" and doc.real_path in deps:
            schedule(ls, uri)


def _refresh_views(ls: PromptServer) -> None:
    """Ask the client to re-request inlay hints and code lenses, which show the latest
    finished analysis (they may have been answered from an older one)."""
    caps = ls.session.capabilities
    if caps.inlay_hint_refresh:
        ls.workspace_inlay_hint_refresh(None)
    if caps.code_lens_refresh:
        ls.workspace_code_lens_refresh(None)
