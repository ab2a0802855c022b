"""The optional compiled build: ``MPA_EMU_COMPILE=1`` compiles the per-frame modules with
mypyc (a C compiler, Python's headers and mypy are then needed; build without isolation
so the environment's mypy is used). Without it the package is pure Python, as always;
the compiled modules behave the same and the same test suite runs on both builds
(tools/test.sh). Everything else about the package is in pyproject.toml.

    MPA_EMU_COMPILE=1 pip install --no-build-isolation .
"""

from __future__ import annotations

import os

from setuptools import setup


def _compiled_modules() -> list[str]:
    """COMPILED_MODULES of mpa_emu/compiled.py, read without importing the package."""
    import ast

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpa_emu", "compiled.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == \
                "COMPILED_MODULES":
            return list(ast.literal_eval(node.value))
    raise SystemExit("mpa_emu/compiled.py has no COMPILED_MODULES")


def main() -> None:
    if os.environ.get("MPA_EMU_COMPILE") == "1":
        from mypyc.build import mypycify

        modules = [m.replace(".", "/") + ".py" for m in _compiled_modules()]
        setup(ext_modules=mypycify(modules, opt_level="3"))
    else:
        setup()


if __name__ == "__main__":
    main()
