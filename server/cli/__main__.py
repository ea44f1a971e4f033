"""``python -m server.cli``: the ``promptls`` command line."""

from __future__ import annotations

from server.cli.main import run

if __name__ == "__main__":
    run()
