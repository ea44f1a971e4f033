"""What ``promptls lint`` looks for in a folder, known before the engine is imported: the
document suffixes, the folders it never walks (``server.cli.lint.discover`` walks with
these), and a bounded count of a small folder's documents (``documents_below``), by which
``main`` decides to fork a counting child early. The standard library only."""

from __future__ import annotations

import os
import stat

# The documents' suffixes, any case (``assembly.documents.CONVERSATION_SUFFIXES`` and
# ``assembly.host.PROMPT_SUFFIX``: a test checks they are the same).
DOCUMENT_SUFFIXES = (".conv.json", ".conv.jsonl", ".conv.yaml", ".conv.yml", ".prompt.md")
SKIP_DIRS = frozenset({".git", "node_modules", ".venv"})
# The most folder entries ``documents_below`` reads: a larger tree is walked once, by
# discovery.
MAX_SCAN_ENTRIES = 1_000


def documents_below(top: str, most: int) -> tuple[int, int] | None:
    """How many documents discovery could find under the folder ``top``, and their bytes:
    every regular file it would consider (the document suffixes, outside ``SKIP_DIRS``),
    before ``.gitignore`` and ``exclude`` take some away. None: more than ``most``, or a
    tree of more than ``MAX_SCAN_ENTRIES`` entries.

    Files that a settings file's ``include`` adds are not counted: a folder may hold more
    than this says (``main`` then has forked a counting child that lint's workers do not
    use: ``tokenizers.count_elsewhere`` serves only the process that forked it)."""
    n = total = entries = 0
    todo = [top]
    while todo:
        try:
            with os.scandir(todo.pop()) as it:
                for entry in it:
                    entries += 1
                    if entries > MAX_SCAN_ENTRIES:
                        return None
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            if entry.name not in SKIP_DIRS:
                                todo.append(entry.path)
                            continue
                        if not entry.name.lower().endswith(DOCUMENT_SUFFIXES):
                            continue
                        st = entry.stat()
                    except (OSError, ValueError):
                        continue  # discovery skips it too, with a note
                    if stat.S_ISREG(st.st_mode):
                        n, total = n + 1, total + st.st_size
                        if n > most:
                            return None
        except (OSError, ValueError):
            continue  # an unreadable folder: discovery says so
    return n, total
