"""client-vscode/src/lspExt.ts mirrors server/lsp/ext.py (STYLE §2.1, rule 37)."""

from __future__ import annotations

import re
from pathlib import Path

from server.lsp import ext

ROOT = Path(__file__).resolve().parent.parent
LSP_EXT = ROOT / "client-vscode" / "src" / "lspExt.ts"


def test_every_server_command_is_in_lsp_ext() -> None:
    text = LSP_EXT.read_text(encoding="utf-8")
    missing = [name for name in ext.COMMANDS if f'"{name}"' not in text]
    assert missing == [], f"add to client-vscode/src/lspExt.ts: {missing}"


def test_lsp_ext_names_no_command_the_server_lacks() -> None:
    text = LSP_EXT.read_text(encoding="utf-8")
    names = set(re.findall(r'_COMMAND = "([^"]+)"', text))
    assert names == set(ext.COMMANDS)
