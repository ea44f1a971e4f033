"""workspace/executeCommand: ``promptls.assemble`` returns the §7 JSON of a document.

``promptls.assembledHtml`` returns the same analysis drawn as the assembled view's HTML
(``server/htmlview.py``, the renderer of ``promptls assemble --format html``).

An open document is assembled from the analysis of its current version. A file that is
not open is read from disk only when it is a regular file inside a workspace folder
(``docs/security.md``), and analysed off the message loop with a time limit, so a large
file, a FIFO or a device named like a document never stalls the server.

``promptls.templateDiff`` (and the template lens' ``promptls.showTemplateDiff``) return the
conversations that read a template and ``promptls diff HEAD -- TEMPLATE`` as Markdown.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pygls.exceptions import JsonRpcContentModified, JsonRpcInternalError, JsonRpcInvalidParams
from pygls.uris import to_fs_path

from assembly.host import PROMPT_SUFFIX, Analysis
from server.lsp.app import PromptServer
from server.lsp.ext import (
    ASSEMBLE_COMMAND,
    ASSEMBLED_HTML_COMMAND,
    SHOW_ASSEMBLED_COMMAND,
    SHOW_TEMPLATE_DIFF_COMMAND,
    TEMPLATE_DIFF_COMMAND,
)
from server.lsp.handlers.code_lens import template_use_of
from server.lsp.handlers.documents import current_view
from server.output import assembly_json
from server.workspace import analyze

ASSEMBLE_TIMEOUT_S = 60.0  # the longest an unopened file's assembly may take


async def assemble(ls: PromptServer, *arguments: Any) -> dict[str, Any]:
    """Arguments: ``[document URI]``, or ``[document URI, record number]`` for one
    conversation of a dataset (default: its first); an open document is assembled from its
    buffer."""
    args: Any = arguments[0] if len(arguments) == 1 else list(arguments)
    record = args[1] if isinstance(args, list) and len(args) > 1 else None
    analysis = await _analysis(ls, _uri_argument(args))
    picked = _record(analysis, record)
    return assembly_json(picked, display_path=str(analysis.path), document=analysis.text)


def _record(analysis: Analysis, record: Any) -> Analysis:
    """A dataset's record (1-based; default the first); another document itself."""
    if not analysis.records:
        return analysis
    if record is None:
        return analysis.records[0]
    n = len(analysis.records)
    if not isinstance(record, int) or isinstance(record, bool) or not 1 <= record <= n:
        raise JsonRpcInvalidParams(f"no record {record!r}: the dataset has {n}")
    return analysis.records[record - 1]


async def assembled_html(ls: PromptServer, *args: Any) -> dict[str, Any]:
    """Arguments: ``[document URI, {"nonce": str, "record": int}]``; returns ``{"html": page}``.

    ``record`` (1-based, optional) picks one conversation of a dataset (default: its first);
    the page then names the record. A document that is one conversation takes no record.
    """
    options = args[1] if len(args) > 1 else {}
    nonce = options.get("nonce") if isinstance(options, dict) else None
    if not isinstance(nonce, str) or not nonce.isalnum():
        raise JsonRpcInvalidParams("promptls.assembledHtml needs {nonce: <letters and digits>}")
    record = options.get("record")
    if record is not None and (not isinstance(record, int) or isinstance(record, bool)):
        raise JsonRpcInvalidParams(
            f"promptls.assembledHtml: record must be a number, not {record!r}"
        )
    analysis = await _analysis(ls, _uri_argument(list(args[:1])))
    picked = _record(analysis, record)
    name = analysis.path.name
    if analysis.records:
        name = f"{name} (record {analysis.record_number(picked)})"
    from server.htmlview import render_html  # imported by the first page shown

    page = render_html(picked, display_path=name, webview=True, nonce=nonce, document=analysis.text)
    return {"html": page}


async def template_diff(ls: PromptServer, args: Any) -> dict[str, Any]:
    """Arguments: ``[template URI]``; the conversations that read the template and the diff
    of their assembled contexts, work tree against HEAD, as Markdown."""
    uri = _uri_argument(args)
    path = to_fs_path(uri) if uri.startswith("file:") else None
    if path is None or not path.lower().endswith(PROMPT_SUFFIX):
        raise JsonRpcInvalidParams(f"not a template (*{PROMPT_SUFFIX}): {uri}")
    if not ls.session.in_workspace(Path(path)):
        raise JsonRpcInvalidParams(f"not inside a workspace folder: {uri}")
    from server.cli.diff import DiffError  # imported by the first template diff

    try:
        use = await template_use_of(ls, Path(path))
    except DiffError as exc:
        raise JsonRpcInternalError(str(exc)) from exc
    return {
        "template": use.template,
        "title": use.lens_title(),
        "conversations": list(use.conversations),
        "delta": use.delta,
        "markdown": use.markdown(),
    }


async def _analysis(ls: PromptServer, uri: str) -> Analysis:
    s = ls.session
    if uri in s.documents:
        view = await current_view(ls, uri)
        if view is not None and view.fresh and isinstance(view.snap.analysis, Analysis):
            return view.snap.analysis
        if view is not None and view.snap.failure:
            raise JsonRpcInternalError(view.snap.failure[0].message)
        raise JsonRpcContentModified(f"{uri} is still being analysed; try again")
    path = to_fs_path(uri) if uri.startswith("file:") else None
    if path is None or not path.endswith((".json", ".jsonl", ".yaml", ".yml")):
        raise JsonRpcInvalidParams(f"not a conversation document: {uri}")
    target = Path(path)
    if not s.in_workspace(target):
        raise JsonRpcInvalidParams(f"not inside a workspace folder: {uri}")
    try:
        mode = os.stat(target).st_mode
    except OSError as e:
        raise JsonRpcInvalidParams(f"cannot read {uri}: {e.strerror}") from None
    if not stat.S_ISREG(mode):
        raise JsonRpcInvalidParams(f"not a regular file: {uri}")
    root, settings = s.root_for(target), dict(s.settings)
    try:
        return await asyncio.wait_for(
            asyncio.to_thread(analyze, target, root=root, editor_settings=settings),
            ASSEMBLE_TIMEOUT_S,
        )
    except TimeoutError:
        raise JsonRpcInternalError(
            f"assembling {uri} took longer than {ASSEMBLE_TIMEOUT_S:.0f} s"
        ) from None


def _uri_argument(args: Any) -> str:
    if isinstance(args, list) and args and isinstance(args[0], str):
        return args[0]
    if isinstance(args, str):
        return args
    raise JsonRpcInvalidParams("promptls.assemble takes one argument: the document URI")


HANDLERS: dict[str, Callable[..., Awaitable[dict[str, Any]]]] = {
    ASSEMBLE_COMMAND: assemble,
    SHOW_ASSEMBLED_COMMAND: assemble,
    ASSEMBLED_HTML_COMMAND: assembled_html,
    TEMPLATE_DIFF_COMMAND: template_diff,
    SHOW_TEMPLATE_DIFF_COMMAND: template_diff,
}
