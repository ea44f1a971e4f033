"""Editor features over analysed documents: pure functions in editor words, no LSP.

Each module answers one editor question about a conversation or a prompt template that
``server.workspace`` has analysed: ``hover`` (what the model receives, at the cursor),
``inlay`` (each message's tokens), ``lens`` (the assembled total), ``navigation``,
``completion``. Inputs are the parsed document, its ``Assembly`` and settings, and
code-point offsets; outputs are small frozen dataclasses (offsets, ranges, labels,
Markdown). Only ``server/lsp/convert.py`` turns them into LSP values.
"""
