"""Custom protocol: command names and custom methods, mirrored in client-vscode/src/lspExt.ts."""

from __future__ import annotations

# workspace/executeCommand: arguments [document URI] or [document URI, record number]; returns
# the `assemble --format json` object of that document, or of that record (1-based, default 1)
# of a dataset (SPEC §7).
ASSEMBLE_COMMAND = "promptls.assemble"
# workspace/executeCommand: arguments as ASSEMBLE_COMMAND's (the code lens of a dataset record
# passes its number); asks the client to show the assembled view of that record (the server
# answers with the same object; clients without a view ignore it).
SHOW_ASSEMBLED_COMMAND = "promptls.showAssembled"

# workspace/executeCommand: arguments [document URI, {"nonce": str, "record"?: int}]; returns
# {"html": page}: the assembled view (of that record of a dataset, default 1) drawn by
# server/htmlview.py for a VS Code webview (its script carries the nonce, for the webview's
# Content-Security-Policy).
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
