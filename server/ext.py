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

# workspace/executeCommand: arguments [template URI] (a `*.prompt.md`); returns
# {"template", "title", "conversations", "delta", "markdown"}: the conversations that read the
# template and `promptls diff HEAD -- TEMPLATE --format markdown` (delta and the diff are
# null / a plain list outside git). See docs/diff.md.
TEMPLATE_DIFF_COMMAND = "promptls.templateDiff"
# workspace/executeCommand (the template's code lens): same answer; the client shows the
# Markdown (VS Code: a Markdown preview of an untitled document).
SHOW_TEMPLATE_DIFF_COMMAND = "promptls.showTemplateDiff"

COMMANDS = (
    ASSEMBLE_COMMAND,
    SHOW_ASSEMBLED_COMMAND,
    ASSEMBLED_HTML_COMMAND,
    TEMPLATE_DIFF_COMMAND,
    SHOW_TEMPLATE_DIFF_COMMAND,
)
