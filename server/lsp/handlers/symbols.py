"""textDocument/documentSymbol: the outline of messages, document keys and sections.

The logic is ``assembly.ide.symbols``; the outline is of the version the request was sent
for (``documents.current_view``). It is built and converted off the message loop: a 10 MB
conversation has ten thousand messages, and their outline takes a few hundred
milliseconds, during which hovers must still answer. Requests that waited for the same
analysis share one computation (``Scheduler.shared``): an editor asks for the outline
after every keystroke. A conversation's message entries are kept between versions
(``server.lsp.outline``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from lsprotocol import types as lsp

from assembly.host import Analysis
from assembly.ide import symbols as ide_symbols
from server.lsp import convert, outline
from server.lsp.app import Prepared, PromptServer, prepare_json
from server.lsp.handlers.documents import current_view
from server.lsp.scheduler import View, checked


async def document_symbol(ls: PromptServer, params: lsp.DocumentSymbolParams) -> Prepared | None:
    view = await current_view(ls, params.text_document.uri, costly=True)
    if view is None or view.base is None:
        return None
    uri = params.text_document.uri
    return await ls.session.scheduler.shared(
        view, "symbols", lambda v, check: _prepared(uri, v, check)
    )


def _prepared(uri: str, view: View, check: Callable[[], None] = lambda: None) -> Prepared | None:
    """The outline's JSON; ``check`` is called between entries (it raises to stop:
    ``Scheduler.shared``).

    A conversation's first outline is not stopped: its entries are kept only once it is
    whole (``server.lsp.outline``), and every later outline makes only what changed (a
    tenth of the first at 10 MB), so given up and asked again while the user types, it
    would be made from nothing each time and not shown until a pause as long as it takes.
    """
    a = view.base.analysis if view.base is not None else None
    if isinstance(a, Analysis) and view.span is None:
        if not outline.kept(uri):
            check = _never
        entries = outline.conversation_outline(uri, a.conversation, view.text_map)
        return prepare_json(checked(entries, check))
    symbols = checked(_outline(view), check)
    return prepare_json(convert.document_symbol_json(view.text_map, s) for s in symbols)


def _outline(view: View) -> Iterator[ide_symbols.Symbol]:
    """The symbols of the view's analysis, carried into the current text."""
    a = view.base.analysis if view.base is not None else None
    if isinstance(a, Analysis):
        res = ide_symbols.conversation_symbols(a.conversation)
    elif a is not None:
        res = ide_symbols.template_symbols(a.template)
    else:
        return iter(())
    return (view.carry(s) for s in res)


def _never() -> None:
    """A checkpoint that never stops the computation."""
