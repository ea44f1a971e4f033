"""The command line: ``promptls`` (``main``), ``lint`` (discovery, the worker pool, watching
and one renderer per output format) and ``diff``. ``python -m server.cli`` runs it."""
