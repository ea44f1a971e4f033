"""Custom protocol: command names and custom methods, mirrored in client-vscode/src/lspExt.ts."""

from __future__ import annotations

# workspace/executeCommand: arguments [document URI]; returns the `assemble --format json`
# object of that document (SPEC §7).
ASSEMBLE_COMMAND = "promptls.assemble"
# workspace/executeCommand: arguments [document URI]; asks the client to show the assembled
# view (the server answers with the same object; clients without a view ignore it).
SHOW_ASSEMBLED_COMMAND = "promptls.showAssembled"

# workspace/executeCommand: arguments [document URI, {"nonce": str}]; returns {"html": page}:
# the assembled view drawn by server/htmlview.py for a VS Code webview (its script carries the
# nonce, for the webview's Content-Security-Policy).
ASSEMBLED_HTML_COMMAND = "promptls.assembledHtml"

COMMANDS = (ASSEMBLE_COMMAND, SHOW_ASSEMBLED_COMMAND, ASSEMBLED_HTML_COMMAND)
