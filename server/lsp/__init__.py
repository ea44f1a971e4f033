"""The language server: the protocol (``app``), the open documents' state (``session``),
when analyses run (``scheduler``), positions in LSP units (``convert``) and one module per
feature (``handlers``). It reads documents through ``server.workspace``, like the command line."""
