"""What the text outputs print of a document's own strings: its control characters made visible.

A document can hold any character (a raw ESC in a YAML comment, an escaped ``\\u001b`` in a
message id, a C1 CSI from invalid bytes read as Latin-1 elsewhere); printed as they are, they
would be interpreted by the terminal (clear the screen, retitle the window, rewrite the line
with a carriage return, hide text). ``visible`` maps each C0 control character but the line
feed and tab to its Unicode Control Picture (U+2400 + code, so ESC prints as ``␛``), DEL to
``␡`` and each C1 control character to U+FFFD, one character for one, so columns computed
before the mapping stay right. The JSON, SARIF and GitLab outputs escape them already.
"""

from __future__ import annotations

_TABLE: dict[int, str] = {c: chr(0x2400 + c) for c in range(0x20) if c not in (0x09, 0x0A)}
_TABLE[0x7F] = "\u2421"
_TABLE.update({c: "\ufffd" for c in range(0x80, 0xA0)})


def visible(text: str) -> str:
    """``text`` with its control characters (but line feed and tab) made visible."""
    return text.translate(_TABLE)
