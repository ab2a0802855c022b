"""The checkout's own source of mpa_emu's modules and definitions.

Tests that read the code (citations, import graph, module size) read the ``.py`` files of
the checkout, never through the imported module: in the compiled build (docs/compiling.md)
a module is a shared object with no source of its own.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mpa_emu"
"""The checkout's package folder."""


def module_file(module: str) -> Path | None:
    """The ``.py`` file of ``module`` (``mpa_emu.x.y``) in the checkout, None if it has none."""
    parts = module.split(".")[1:]
    if not parts:
        return PACKAGE / "__init__.py"
    rel = Path(*parts)
    for path in (PACKAGE / rel.with_suffix(".py"), PACKAGE / rel / "__init__.py"):
        if path.is_file():
            return path
    return None


def definition_source(path: str) -> str | None:
    """The source of the function, method or class named by a dotted ``path``
    (``mpa_emu.stacks.irdma.tcp.check_seq``, ``mpa_emu.wire.mpa.RtrBlock.to_bytes``), or None."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:cut])
        file = module_file(module)
        if file is None or importlib.util.find_spec(module) is None:
            continue
        text = file.read_text()
        body: list[ast.stmt] = ast.parse(text).body
        node: ast.AST | None = None
        for name in parts[cut:]:
            node = next((n for n in body if isinstance(
                n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n.name == name),
                None)
            if node is None:
                break
            body = node.body  # type: ignore[attr-defined]
        if node is not None:
            return ast.get_source_segment(text, node)
    return None
