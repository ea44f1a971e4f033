"""``python -m server.cli``: the ``promptls`` command line."""

from __future__ import annotations

import sys

from server.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
