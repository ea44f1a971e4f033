"""textDocument/codeLens: the assembled total at the top of a conversation, and on a
template the conversations that use it and what its changes since HEAD cost them.

The conversation lens is ``assembly.ide.lens``; clicking it runs ``promptls.showAssembled``
with the document URI (and, on each record of a dataset, the record's 1-based number),
which the server answers with the ``promptls.assemble`` object.
Lenses come from the latest finished analysis, moved into the current text when it is
older.

The template lens (``used by 2 conversations · +86 tokens vs HEAD``) is
``server.cli.diff.template_use``: the diff of the work tree against HEAD limited to the
template (the one diff implementation), computed off the event loop and cached per
version of the template's file on disk: it reads files as saved, so typing in the template
(each keystroke a version in the editor) computes nothing again, where each version
would analyse every conversation of the workspace once more. Clicking it runs
``promptls.showTemplateDiff``, answered like ``promptls.templateDiff`` with the diff as
Markdown.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types as lsp
from pygls.uris import to_fs_path

from assembly.host import PROMPT_SUFFIX, Analysis
from assembly.ide import lens, placed
from server.lsp import convert
from server.lsp.app import PromptServer
from server.lsp.ext import SHOW_ASSEMBLED_COMMAND, SHOW_TEMPLATE_DIFF_COMMAND
from server.lsp.handlers.documents import latest_view

if TYPE_CHECKING:
    from server.cli.diff import TemplateUse


async def code_lens(ls: PromptServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens] | None:
    uri = params.text_document.uri
    path = to_fs_path(uri) if uri.startswith("file:") else None
    if path is not None and path.lower().endswith(PROMPT_SUFFIX):
        return await _template_lens(ls, uri, Path(path))
    view = await latest_view(ls, uri)
    if view is None or view.base is None or not isinstance(view.base.analysis, Analysis):
        return None
    a = view.base.analysis
    if a.records:  # a dataset: a lens on each record's line
        lenses = [
            placed(x, r.base)  # (each record's of its own text)
            for k, r in enumerate(a.records, 1)
            for x in lens.conversation_lenses(
                r,
                command=SHOW_ASSEMBLED_COMMAND,
                arguments=(uri, k),
                at=r.conversation.root.range.start if r.conversation.root else 0,
            )
        ]
    else:
        lenses = lens.conversation_lenses(a, command=SHOW_ASSEMBLED_COMMAND, arguments=(uri,))
    return [convert.to_lsp_code_lens(view.text_map, view.carry(x)) for x in lenses]


async def _template_lens(ls: PromptServer, uri: str, path: Path) -> list[lsp.CodeLens] | None:
    if not ls.session.in_workspace(path):
        return None  # the lens searches a workspace folder, never a stranger's tree
    use = await template_use_of(ls, path)
    if not use.conversations:
        return None
    title = use.lens_title()
    command = lsp.Command(title=title, command=SHOW_TEMPLATE_DIFF_COMMAND, arguments=[uri])
    start = lsp.Position(line=0, character=0)
    return [lsp.CodeLens(range=lsp.Range(start=start, end=start), command=command)]


async def template_use_of(ls: PromptServer, path: Path) -> TemplateUse:
    """``template_use`` of the template at ``path``, cached per version of its file on
    disk (off the loop)."""
    s = ls.session
    key = path.resolve()
    try:
        st = key.stat()
        on_disk: object = (st.st_mtime_ns, st.st_size)
    except OSError:
        on_disk = None
    root = s.root_for(path)
    task = s.template_use(
        key,
        on_disk,
        lambda: asyncio.ensure_future(asyncio.to_thread(_template_use, key, root, dt.date.today())),
    )
    return await asyncio.shield(task)  # type: ignore[no-any-return]


def _template_use(path: Path, root: Path | None, today: dt.date) -> TemplateUse:
    # ``server.cli.diff`` (with the lint driver it shares code with) is imported by the
    # first template lens, off the loop, not by every server (1.7 MB resident).
    from server.cli.diff import template_use

    return template_use(path, root=root, today=today)
