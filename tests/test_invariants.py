"""Architecture invariants (STYLE §2.2): checked by tests, as rust-analyzer's tidy does."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN_IN_ASSEMBLY = ("pygls", "lsprotocol", "server")
IO_CALLS = {"open", "print", "input"}
IO_MODULES = ("os", "pathlib", "socket", "subprocess", "urllib", "http", "requests", "time")


def _imports(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _assembly_modules() -> list[Path]:
    return sorted((ROOT / "assembly").rglob("*.py"))


def test_assembly_never_imports_the_server_or_lsp() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in _assembly_modules()
        for name in _imports(ast.parse(path.read_text(encoding="utf-8")))
        if name.split(".")[0] in FORBIDDEN_IN_ASSEMBLY
    ]
    assert offenders == []


def test_assembly_does_no_io() -> None:
    offenders = []
    for path in _assembly_modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name in _imports(tree):
            if name.split(".")[0] in IO_MODULES:
                offenders.append(f"{path.relative_to(ROOT)}: import {name}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in IO_CALLS
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.func.id}()")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in ("today", "now", "getenv", "utcnow"):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.func.attr}()")
            if isinstance(node, ast.Attribute) and node.attr == "environ":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: .environ")
    assert offenders == []


def test_every_module_has_a_docstring() -> None:
    missing = [
        str(path.relative_to(ROOT))
        for folder in ("assembly", "server")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.stat().st_size
        and ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) is None
    ]
    assert missing == []
