"""Architecture invariants (STYLE §2.2, docs/architecture.md): checked by tests, as
rust-analyzer's tidy does.

- ``assembly`` never imports ``server``, ``pygls`` or ``lsprotocol``, and does no IO.
- No import circle among the modules of ``assembly`` and ``server``. Every import counts,
  wherever it is written: one inside a function or under ``if TYPE_CHECKING:`` still makes
  one module depend on the other (deferring it only hides the circle from the
  interpreter). A package's ``__init__`` is not a dependency of its submodules: importing
  ``a.b`` runs ``a/__init__.py``, which in this code base holds no code that imports back.
- No private name (``_x``) is imported from another module, or read from one as an
  attribute (``module._x``): a name used elsewhere is public.
- The tests of the pure library (tests/assembly) import nothing from ``server``; they
  reach the real tokenizer through ``tests/support/engine.py``, the one harness module
  that loads it with the IO layer.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN_IN_ASSEMBLY = ("pygls", "lsprotocol", "server")
IO_CALLS = {"open", "print", "input"}
IO_MODULES = ("os", "pathlib", "socket", "subprocess", "urllib", "http", "requests", "time")
# Pure path arithmetic: an analysis names its document and the files it read.
PURE_FROM_IO_MODULES = {"pathlib": {"PurePath", "PurePosixPath", "PureWindowsPath"}}
PACKAGES = ("assembly", "server")

# Reworked on other branches of issue 13 (the coordinator removes each entry as it goes).


@cache
def _tree(path: Path) -> ast.Module:
    """``path`` parsed once per session: the checks below walk each module several times."""
    return ast.parse(path.read_text(encoding="utf-8"))


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
        for name in _imports(_tree(path))
        if name.split(".")[0] in FORBIDDEN_IN_ASSEMBLY
    ]
    assert offenders == []


def test_assembly_does_no_io() -> None:
    offenders = []
    for path in _assembly_modules():
        tree = _tree(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [(a.name, None) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [(node.module, a.name) for a in node.names]
            else:
                continue
            for module, name in names:
                top = module.split(".")[0]
                if top in IO_MODULES and name not in PURE_FROM_IO_MODULES.get(top, ()):
                    offenders.append(f"{path.relative_to(ROOT)}: import {module} {name or ''}")
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
        if path.stat().st_size and ast.get_docstring(_tree(path)) is None
    ]
    assert missing == []


# ------------------------------------------------------------------ the module graph


def _modules() -> dict[str, Path]:
    res = {}
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            res[".".join(parts)] = path
    return res


def _imported(module: str, path: Path, mods: dict[str, Path]) -> Iterator[tuple[str, str | None]]:
    """(module imported, the name taken from it if any) for every import in ``path``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, None
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = package
                for _ in range(node.level - 1):
                    pkg = pkg.rpartition(".")[0]
                base = f"{pkg}.{base}" if base else pkg
            for a in node.names:
                if f"{base}.{a.name}" in mods:
                    yield f"{base}.{a.name}", None  # a submodule, not a name of ``base``
                else:
                    yield base, a.name


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {
        m: {t for t, _ in _imported(m, p, mods) if t in mods and t != m} for m, p in mods.items()
    }


def _circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_circle_finder_finds_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert _circles(graph) == [frozenset({"a", "b", "c"})]


def test_no_import_circle() -> None:
    assert sorted(sorted(c) for c in _circles(_graph())) == []


def test_server_is_layered() -> None:
    """``server.lsp`` and ``server.cli`` are two front ends over the shared IO modules of
    ``server``: those never import either, and the protocol imports of the command line
    only ``server.cli.diff`` (a template's code lens is ``promptls diff`` limited to the
    conversations that use it); ``promptls serve`` starts the protocol."""
    offenders = []
    for m, targets in _graph().items():
        for t in targets:
            shared = m.startswith("server.") and not m.startswith(("server.lsp", "server.cli"))
            if shared and t.startswith(("server.lsp", "server.cli")) and m != "server.__main__":
                offenders.append(f"{m} -> {t}")
            if m.startswith("server.lsp") and t.startswith("server.cli") and t != "server.cli.diff":
                offenders.append(f"{m} -> {t}")
    assert offenders == []


def _private_uses() -> set[tuple[str, str, str]]:
    """(user, module, private name) for every private name one module takes from another."""
    mods = _modules()
    found = set()
    for m, path in mods.items():
        aliases: dict[str, str] = {}
        for target, name in _imported(m, path, mods):
            if name is not None and target in mods and target != m:
                if name.startswith("_") and not name.startswith("__"):
                    found.add((m, target, name))
        tree = _tree(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname and a.name in mods:
                        aliases[a.asname] = a.name
            elif isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    if full in mods:
                        aliases[a.asname or a.name] = full
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and aliases[node.value.id] != m
            ):
                found.add((m, aliases[node.value.id], node.attr))
    return found


def test_no_private_name_is_imported_across_modules() -> None:
    assert sorted(_private_uses()) == []


def test_the_tests_of_the_pure_library_import_nothing_from_the_server() -> None:
    offenders = []
    for path in sorted((ROOT / "tests" / "assembly").rglob("*.py")):
        for name in _imports(_tree(path)):
            if name.split(".")[0] in FORBIDDEN_IN_ASSEMBLY:
                offenders.append(f"{path.relative_to(ROOT)}: {name}")
    assert offenders == []
