"""textDocument/foldingRange: messages, arrays, long strings; template sections and fences.

The logic is ``assembly.ide.folding``; folds are of the version the request was sent for
(``documents.current_view``), found and converted off the message loop (a 10 MB
conversation has over ten thousand of them).
Requests that waited for the same analysis share one
computation (``Scheduler.shared``): an editor asks for the folds after every keystroke.
At most as many folds as the client's ``foldingRange.rangeLimit`` are sent, the outermost
first (``ide.folding.limit_folds``): VS Code asks for 5,000 and drops the others itself.
"""

from __future__ import annotations

from collections.abc import Callable

from lsprotocol import types as lsp

from assembly.host import Analysis
from assembly.ide import folding as ide_folding
from server.lsp import convert
from server.lsp.app import Prepared, PromptServer, prepare_json
from server.lsp.handlers.documents import current_view
from server.lsp.scheduler import View, checked


async def folding_range(ls: PromptServer, params: lsp.FoldingRangeParams) -> Prepared | None:
    view = await current_view(ls, params.text_document.uri, costly=True)
    if view is None or view.base is None:
        return None
    limit = ls.session.capabilities.folding_range_limit
    return await ls.session.scheduler.shared(
        view, "folding", lambda v, check: _folds(v, limit, check)
    )


def _folds(
    view: View, limit: int | None = None, check: Callable[[], None] = lambda: None
) -> Prepared | None:
    """The folds of the view's analysis, at most ``limit``, as the answer's JSON; ``check``
    is called between messages (it raises to stop: ``Scheduler.shared``)."""
    base = view.base
    a = base.analysis if base is not None else None
    if base is None or a is None:
        return None
    index = base.text_map.index
    if isinstance(a, Analysis):
        res = ide_folding.conversation_folds(
            a.conversation, a.text, index=index, limit=limit, check=check
        )
    else:
        res = ide_folding.template_folds(a.template, index=index, limit=limit)
    return prepare_json(
        convert.folding_range_json(view.text_map, view.carry(f)) for f in checked(res, check)
    )
