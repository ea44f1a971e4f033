"""``python -m server``: start the language server on stdio."""

from __future__ import annotations

import sys

from server.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["serve", *sys.argv[1:]]))
