"""The build: a regular install (``pip install .``) compiles the modules every frame passes
through with mypyc when it can (a C compiler that finds Python's headers, and mypy, which
the build brings itself, see build_backend.py), and installs the pure-Python package with
one line saying why when it cannot. ``MPA_EMU_COMPILE=1`` insists on the compiled build
(an error without a compiler), ``MPA_EMU_COMPILE=0`` installs the pure one. An editable
install (``pip install -e .``, for development) is always pure Python, so that an edited
``.py`` file is never shadowed by a compiled twin. ``mpa-emu --version`` names the build
that runs; docs/compiling.md has the details. Everything else about the package is in
pyproject.toml.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import sys
import sysconfig
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
NOTE = "build_note.txt"
"""Written into the installed package: which build this is and, if pure, why."""


def _compiled_modules() -> list[str]:
    """COMPILED_MODULES of mpa_emu/compiled.py, read without importing the package."""
    import ast

    path = os.path.join(ROOT, "mpa_emu", "compiled.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == \
                "COMPILED_MODULES":
            return list(ast.literal_eval(node.value))
    raise SystemExit("mpa_emu/compiled.py has no COMPILED_MODULES")


def _compiler_problem() -> str | None:
    """Why no C extension can be built here, or None: compiles a file that includes
    Python.h with the compiler setuptools would use."""
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.sysconfig import customize_compiler

    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        return f"Python's headers are missing (no Python.h in {include})"
    compiler = new_compiler()
    customize_compiler(compiler)
    with tempfile.TemporaryDirectory(prefix="mpa_emu_cc") as tmp:
        source = os.path.join(tmp, "probe.c")
        with open(source, "w", encoding="ascii") as f:
            f.write("#include <Python.h>\nint probe(void) { return 0; }\n")
        try:
            compiler.compile([source], output_dir=tmp, include_dirs=[include])
        except Exception as exc:  # CompileError, or the compiler is not there at all
            name = (getattr(compiler, "compiler", None) or ["cc"])[0]
            return f"no working C compiler ({name}: {str(exc).strip() or type(exc).__name__})"
    return None


def _decide() -> tuple[bool, str]:
    """(compile?, the reason when not)."""
    wanted = os.environ.get("MPA_EMU_COMPILE", "").strip()
    editable = any(arg in ("editable_wheel", "develop") for arg in sys.argv[1:])
    if wanted not in ("", "0", "1"):
        raise SystemExit(f"MPA_EMU_COMPILE={wanted!r}: use 1 (compiled) or 0 (pure Python)")
    if wanted == "0":
        return False, "MPA_EMU_COMPILE=0"
    if editable:
        if wanted == "1":
            raise SystemExit("MPA_EMU_COMPILE=1 needs a regular install (pip install .): an "
                             "editable install stays pure Python")
        return False, "editable install"
    problem = _compiler_problem()
    if problem is None and importlib.util.find_spec("mypyc") is None:
        problem = "mypy (which brings mypyc) is not installed in the build environment"
    if problem is not None and wanted == "1":
        raise SystemExit(f"MPA_EMU_COMPILE=1: cannot compile: {problem}")
    if problem is not None:
        return False, problem
    return True, ""


class _BuildPy(build_py):
    """build_py that records in the package which build it is (``mpa-emu --version``)."""

    note = "pure Python"

    def run(self) -> None:
        super().run()
        target = os.path.join(self.build_lib, "mpa_emu", NOTE)
        if os.path.isdir(os.path.dirname(target)):
            with open(target, "w", encoding="utf-8") as f:
                f.write(self.note + "\n")


class _BuildExt(build_ext):
    """build_ext that compiles the C files of an extension side by side, on every core.

    mypyc puts every compiled module into one shared library made of one C file per module
    (``multi_file``), and setuptools compiles the files of one extension one after the
    other: its ``parallel`` option only builds whole extensions side by side (here the
    one-file shims that import each module from the shared library). Both kinds of work
    go to one pool of ``os.cpu_count()`` compiler processes."""

    def build_extensions(self) -> None:
        compiler = self.compiler
        if getattr(compiler, "compiler_type", "") != "unix":
            super().build_extensions()  # another compiler class compiles its own way
            return
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:

            def compile_side_by_side(sources: Sequence[str], output_dir: str | None = None,
                                     macros: Any = None, include_dirs: Any = None,
                                     debug: bool = False, extra_preargs: Any = None,
                                     extra_postargs: Any = None,
                                     depends: Any = None) -> list[str]:
                # CCompiler.compile, with its loop over the sources run in the pool.
                macros, objects, extra_postargs, pp_opts, build = compiler._setup_compile(
                    output_dir, macros, include_dirs, sources, depends, extra_postargs)
                cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)
                jobs = [pool.submit(compiler._compile, obj, *build[obj], cc_args,
                                    extra_postargs, pp_opts)
                        for obj in objects if obj in build]  # the others are up to date
                for job in jobs:
                    job.result()
                return list(objects)

            compiler.compile = compile_side_by_side
            try:
                super().build_extensions()
            finally:
                del compiler.compile


def _build_base(kind: str) -> str:
    """``build/<kind>`` without the package tree a previous build left in it: a pure wheel
    must never pick up a compiled module of an earlier compiled build (an extension module
    is imported before the source beside it), nor a compiled one a module since dropped
    from the list."""
    base = os.path.join("build", kind)
    for stale in glob.glob(os.path.join(base, "lib*")):
        shutil.rmtree(stale)
    return base


def main() -> None:
    if not {"build_ext", "bdist_wheel", "build", "install"} & set(sys.argv[1:]):
        # Metadata (egg_info, dist_info), sdist, editable_wheel: nothing is compiled, and
        # mypyc's type check (half a minute) runs once, when the wheel is built.
        setup(cmdclass={"build_py": _BuildPy})
        return
    compile_it, reason = _decide()
    if not compile_it:
        if reason != "editable install":
            # The one line a user sees (pip shows it with -v; `mpa-emu --version` keeps it).
            print(f"mpa_emu: installing the pure-Python package (about 2x slower): {reason}",
                  file=sys.stderr)
        _BuildPy.note = f"pure Python ({reason})"
        setup(cmdclass={"build_py": _BuildPy},
              options={"build": {"build_base": _build_base("pure")}})
        return
    from mypyc.build import mypycify

    modules = [m.replace(".", "/") + ".py" for m in _compiled_modules()]
    _BuildPy.note = "compiled"
    # multi_file: one C file per module, so that _BuildExt compiles them on every core.
    setup(ext_modules=mypycify(modules, opt_level="3", multi_file=True),
          cmdclass={"build_py": _BuildPy, "build_ext": _BuildExt},
          options={"build": {"build_base": _build_base("compiled")},
                   "build_ext": {"parallel": os.cpu_count() or 1}})


if __name__ == "__main__":
    main()
