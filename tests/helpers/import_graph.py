"""The package's import graph read from the source with :mod:`ast` (not from what happens
to be imported at run time): every ``import`` and ``from ... import`` of one mpa_emu module
by another, at module level, inside functions and under ``if TYPE_CHECKING:`` alike."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import mpa_emu

PACKAGE = Path(mpa_emu.__file__).parent

def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, level: int, current: str, is_package: bool) -> str:
    if level == 0:
        return name
    base = current.split(".")
    if not is_package:
        base = base[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (a package counts as its __init__); a
    fresh copy of the graph read once per session."""
    return {module: set(targets) for module, targets in _read_graph().items()}


@functools.cache
def _read_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(node.module or "", node.level, mod, is_package)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            for target in targets:
                # "import a.b.c" names a.b.c; keep the longest prefix that is a module
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != mod:
                    graph[mod].add(target)
    return graph
