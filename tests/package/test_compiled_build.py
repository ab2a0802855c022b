"""The compiled build (setup.py, docs/compiling.md): a regular install compiles where it
can and says why not where it cannot, its module list is one list, every module on it
exists, and the build a test run sees is the one it asked for. tools/test.sh runs the
whole suite twice: on the pure-Python package, then on the compiled build with
MPA_EMU_EXPECT_COMPILED=1."""

from __future__ import annotations

import ast
import importlib.machinery
import os
import runpy
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from helpers.source import PACKAGE, module_file

from mpa_emu.compiled import COMPILED_MODULES, build_name, compiled_modules

ROOT = PACKAGE.parent


def test_setup_compiles_exactly_the_listed_modules() -> None:
    read = runpy.run_path(str(ROOT / "setup.py"), run_name="not_main")
    assert read["_compiled_modules"]() == list(COMPILED_MODULES)


def _setup(monkeypatch: pytest.MonkeyPatch, compile_env: str | None,
           *argv: str) -> dict[str, Any]:
    if compile_env is None:
        monkeypatch.delenv("MPA_EMU_COMPILE", raising=False)
    else:
        monkeypatch.setenv("MPA_EMU_COMPILE", compile_env)
    monkeypatch.setattr(sys, "argv", ["setup.py", *argv])
    return runpy.run_path(str(ROOT / "setup.py"), run_name="not_main")


def test_a_regular_install_compiles_where_a_compiler_is_found(
        monkeypatch: pytest.MonkeyPatch) -> None:
    read = _setup(monkeypatch, None, "bdist_wheel")
    problem = read["_compiler_problem"]()
    if shutil.which("cc") is None:
        pytest.fail("a C compiler is needed here (tools/test.sh installs gcc)")
    assert problem is None
    assert read["_decide"]() == (True, "")


def test_no_compiler_means_the_pure_package_and_says_why(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    read = _setup(monkeypatch, None, "bdist_wheel")
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    compile_it, reason = read["_decide"]()
    assert not compile_it
    assert reason.startswith("no working C compiler (") and "no-such-cc" in reason
    # MPA_EMU_COMPILE=1 insists: an error that says why, not a silent pure build.
    monkeypatch.setenv("MPA_EMU_COMPILE", "1")
    with pytest.raises(SystemExit, match="MPA_EMU_COMPILE=1: cannot compile: no working C"):
        read["_decide"]()


def test_the_environment_forces_either_build_and_editable_stays_pure(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert _setup(monkeypatch, "0", "bdist_wheel")["_decide"]() == (False, "MPA_EMU_COMPILE=0")
    assert _setup(monkeypatch, None, "editable_wheel")["_decide"]() == \
        (False, "editable install")
    with pytest.raises(SystemExit, match="needs a regular install"):
        _setup(monkeypatch, "1", "editable_wheel")["_decide"]()
    with pytest.raises(SystemExit, match=r"use 1 \(compiled\) or 0"):
        _setup(monkeypatch, "yes", "bdist_wheel")["_decide"]()


def test_the_build_backend_asks_for_mypy_and_the_dependencies_only_to_compile(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    backend = runpy.run_path(str(ROOT / "build_backend.py"), run_name="not_main")
    # setuptools' own answer (its egg_info run) is not what is tested here.
    monkeypatch.setattr(backend["_setuptools"], "get_requires_for_build_wheel",
                        lambda config_settings=None: ["setuptools-own"])
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "dependencies"]
    monkeypatch.delenv("MPA_EMU_COMPILE", raising=False)
    wanted = backend["get_requires_for_build_wheel"]()
    assert wanted == ["setuptools-own", backend["MYPY"], *dependencies]
    monkeypatch.setenv("MPA_EMU_COMPILE", "0")
    assert backend["get_requires_for_build_wheel"]() == ["setuptools-own"]


def test_every_listed_module_is_a_source_module_of_the_package() -> None:
    assert len(set(COMPILED_MODULES)) == len(COMPILED_MODULES)
    for name in COMPILED_MODULES:
        assert module_file(name) is not None, name
        assert module_file(name).name != "__init__.py", name  # type: ignore[union-attr]


def test_the_build_under_test_is_the_one_asked_for() -> None:
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    loaded_compiled = [m for m, mod in sys.modules.items()
                       if m.startswith("mpa_emu.") and (getattr(mod, "__file__", "") or ""
                                                        ).endswith(suffixes)]
    if os.environ.get("MPA_EMU_EXPECT_COMPILED") == "1":
        assert compiled_modules() == list(COMPILED_MODULES)
        assert build_name() == f"compiled ({len(COMPILED_MODULES)} of " \
            f"{len(COMPILED_MODULES)} hot modules)"
        # the installed copy, not the checkout, is what the suite imports
        assert Path(sys.modules["mpa_emu"].__file__ or "").parent != PACKAGE
    else:
        # no stale compiled module shadows the source of the pure-Python run
        assert compiled_modules() == []
        assert loaded_compiled == []
        assert build_name().startswith("pure Python (")


def test_version_names_the_build() -> None:
    out = subprocess.run([sys.executable, "-P", "-m", "mpa_emu", "--version"],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.startswith("mpa-emu 0.1.0 (")
    expected = "compiled" if os.environ.get("MPA_EMU_EXPECT_COMPILED") == "1" else "pure Python"
    assert expected in out


def test_a_compiled_function_names_each_caught_exception_once() -> None:
    # A compiled function gives a local one type: ``except A as exc`` and later
    # ``except B as exc`` in the same function make the second raise TypeError there.
    reused = []
    for name in COMPILED_MODULES:
        path = module_file(name)
        assert path is not None
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            caught: dict[str, set[str]] = {}
            for node in ast.walk(fn):
                if isinstance(node, ast.ExceptHandler) and node.name and node.type:
                    caught.setdefault(node.name, set()).add(ast.unparse(node.type))
            reused += [f"{name}.{fn.name}: {var}" for var, kinds in caught.items()
                       if len(kinds) > 1]
    assert reused == []
