"""Building the language server: the pygls server class that owns the ``Session``."""

from __future__ import annotations

import logging
from typing import Any

from pygls.exceptions import JsonRpcContentModified
from pygls.lsp.server import LanguageServer

from server.session import Session

log = logging.getLogger(__name__)

try:
    from importlib.metadata import version as _version

    VERSION = _version("promptls")
except Exception:  # running from a source tree that is not installed
    VERSION = "0.0.0"


class PromptServer(LanguageServer):
    """A pygls server with one ``Session``; errors are logged, never fatal."""

    def __init__(self) -> None:
        super().__init__("promptls", VERSION)
        self.session = Session()
        self._error_shown = False

    def report_server_error(self, error: Exception, source: Any) -> None:
        if isinstance(error, JsonRpcContentModified) or isinstance(
            getattr(error, "__cause__", None), JsonRpcContentModified
        ):
            return  # the intended answer to a request about an outdated version
        log.error("error in %s", getattr(source, "__name__", source), exc_info=error)
        if self._error_shown:
            return
        self._error_shown = True
        super().report_server_error(error, source)


def build_server() -> PromptServer:
    from server import handlers  # the handlers import this module for PromptServer

    server = PromptServer()
    handlers.register(server)
    return server
