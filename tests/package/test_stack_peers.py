"""Every stack a peer: outside ``mpa_emu/stacks/`` no module imports a stack's own modules
or compares a stack's name; what the other layers need of a stack is a typed fact of its
registry record (:class:`mpa_emu.stacks.base.Stack`), so a new stack is one folder and
one registry line, and a stack that leaves a fact out is a type error, never another
stack's answer.

Read from the source with :mod:`ast`, for every registered stack. Two exceptions: the
package's top-level re-export (``from mpa_emu import CmCore`` keeps working) and the
list of compiled module names in mpa_emu/compiled.py (strings, no import).
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import mpa_emu
from mpa_emu.stacks import STACKS
from mpa_emu.stacks import base as stack_base

pytestmark = pytest.mark.source

PACKAGE = Path(mpa_emu.__file__).parent
IMPORTS_ALLOWED = {"__init__.py"}
"""The top-level re-export of irdma's names (``mpa_emu.CmCore`` and the others)."""
MODULE_NAMES_ALLOWED = {"__init__.py", "compiled.py"}
"""Where a stack's module path may appear as text: the re-export's lazy table and the
compiled build's list of module names."""


def _outside_stacks() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py"))
            if p.relative_to(PACKAGE).parts[0] != "stacks"]


def _stack_module(name: str, stacks: set[str]) -> str | None:
    """The stack whose own module ``name`` is (``mpa_emu.stacks.siw.cep`` -> siw)."""
    parts = name.split(".")
    if parts[:2] == ["mpa_emu", "stacks"] and len(parts) > 2 and parts[2] in stacks:
        return parts[2]
    return None


def import_breaks(source: str, where: str, stacks: set[str], *,
                  allow_imports: bool = False, allow_names: bool = False) -> list[str]:
    """Each import of a stack's own module (``import mpa_emu.stacks.irdma.core``, ``from
    mpa_emu.stacks.siw import facts``, ``from mpa_emu.stacks import cxgb4``) and each
    text naming one (a dotted path in a docstring or an ``import_module`` argument)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        for name in names if not allow_imports else ():
            stack = _stack_module(name, stacks)
            if stack is not None:
                out.append(f"{where}:{node.lineno} imports {name} ({stack}'s own module)")
                break
        if not allow_names and isinstance(node, ast.Constant) and isinstance(node.value, str):
            for stack in sorted(stacks):
                if f"mpa_emu.stacks.{stack}" in node.value:
                    out.append(f"{where}:{node.lineno} names mpa_emu.stacks.{stack}")
    return out


def _constants(node: ast.expr) -> list[ast.Constant]:
    """``node`` if it is a constant, or the constants of a tuple, list or set literal."""
    if isinstance(node, ast.Constant):
        return [node]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [e for e in node.elts if isinstance(e, ast.Constant)]
    return []


def name_breaks(source: str, where: str, stacks: set[str]) -> list[str]:
    """Each comparison with a stack's name (``==``, ``!=``, ``in ("siw", ...)``), each
    dict keyed by one, and each ``case "siw":``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        found: list[ast.Constant] = []
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                found += _constants(operand)
        elif isinstance(node, ast.Dict):
            found += [k for k in node.keys if isinstance(k, ast.Constant)]
        elif isinstance(node, ast.MatchValue):
            found += _constants(node.value)
        for const in found:
            if isinstance(const.value, str) and const.value in stacks:
                out.append(f"{where}:{const.lineno} compares or keys on the stack name "
                           f"{const.value!r}")
    return out


def test_the_checks_see_every_kind_of_break() -> None:
    stacks = {"irdma", "siw", "qedr"}
    source = '''
"""See :class:`~mpa_emu.stacks.qedr.core.QedrCore`."""
import mpa_emu.stacks.siw.cep
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks import qedr, STACKS
from mpa_emu.stacks.base import Stack
from mpa_emu.stacks.contract.api import CoreApi
if name == "siw" or "qedr" != name or name in ("irdma", "other"):
    pass
TABLE = {"siw": 1, "other": 2}
match name:
    case "irdma":
        pass
ok = STACKS["siw"]
'''
    assert set(import_breaks(source, "x.py", stacks)) == {
        "x.py:2 names mpa_emu.stacks.qedr",
        "x.py:3 imports mpa_emu.stacks.siw.cep (siw's own module)",
        "x.py:4 imports mpa_emu.stacks.irdma.core (irdma's own module)",
        "x.py:5 imports mpa_emu.stacks.qedr (qedr's own module)",
    }
    assert set(name_breaks(source, "x.py", stacks)) == {
        "x.py:8 compares or keys on the stack name 'siw'",
        "x.py:8 compares or keys on the stack name 'qedr'",
        "x.py:8 compares or keys on the stack name 'irdma'",
        "x.py:10 compares or keys on the stack name 'siw'",
        "x.py:12 compares or keys on the stack name 'irdma'",
    }
    assert import_breaks(source, "x.py", stacks, allow_imports=True, allow_names=True) == []


def test_no_module_outside_the_stacks_imports_a_stack_s_own_modules() -> None:
    stacks = set(STACKS)
    breaks = []
    for path in _outside_stacks():
        rel = path.relative_to(PACKAGE).as_posix()
        breaks += import_breaks(path.read_text(encoding="utf-8"), f"mpa_emu/{rel}", stacks,
                                allow_imports=rel in IMPORTS_ALLOWED,
                                allow_names=rel in MODULE_NAMES_ALLOWED)
    assert breaks == [], "use the registry (mpa_emu.stacks.STACKS) and the contract " \
                         "(mpa_emu.stacks.contract):\n" + "\n".join(breaks)


def test_no_module_outside_the_stacks_compares_a_stack_s_name() -> None:
    stacks = set(STACKS)
    breaks = []
    for path in _outside_stacks():
        rel = path.relative_to(PACKAGE).as_posix()
        breaks += name_breaks(path.read_text(encoding="utf-8"), f"mpa_emu/{rel}", stacks)
    assert breaks == [], "make it a typed fact of the Stack record " \
                         "(mpa_emu/stacks/base.py, docs/stacks/README.md):\n" + "\n".join(breaks)


CONSTANTS_ALLOWED = {("wire/terminate_layouts.py", "SIW")}
"""Module constants that equal a stack's name without naming the stack: the Terminate
layout of siw's ``struct iwarp_terminate`` (a wire format, which the fingerprint weighs)."""


def constant_breaks(source: str, where: str, stacks: set[str],
                    allowed: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """Each module-level name bound to a stack's name (``SIW = "siw"``): a constant
    compared in place of the literal is the same comparison."""
    out = []
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None \
            else []
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if isinstance(value, ast.Constant) and value.value in stacks:
            for t in targets:
                if isinstance(t, ast.Name) and t.id not in allowed:
                    out.append(f"{where}:{node.lineno} binds {t.id} to the stack name "
                               f"{value.value!r}")
    return out


def test_the_constant_check_sees_a_stack_name_bound_to_a_name() -> None:
    source = 'IRDMA = "irdma"\nLAYOUT: str = "siw"\nOTHER = "rfc"\n'
    assert constant_breaks(source, "x.py", {"irdma", "siw"}, {"LAYOUT"}) == [
        "x.py:1 binds IRDMA to the stack name 'irdma'"]


def test_no_module_outside_the_stacks_keeps_a_stack_s_name_in_a_constant() -> None:
    stacks = set(STACKS)
    breaks = []
    for path in _outside_stacks():
        rel = path.relative_to(PACKAGE).as_posix()
        allowed = {name for where, name in CONSTANTS_ALLOWED if where == rel}
        breaks += constant_breaks(path.read_text(encoding="utf-8"), f"mpa_emu/{rel}",
                                  stacks, allowed)
    assert breaks == [], "make it a typed fact of the Stack record:\n" + "\n".join(breaks)


FACT_GROUPS = tuple(
    obj for obj in vars(stack_base).values()
    if isinstance(obj, type) and dataclasses.is_dataclass(obj)
    and obj.__module__ == stack_base.__name__)
"""Every record of mpa_emu/stacks/base.py: the Stack record and its groups of facts."""


@pytest.mark.parametrize("record", FACT_GROUPS, ids=lambda r: r.__name__)
def test_every_fact_is_required(record: type) -> None:
    for f in dataclasses.fields(record):
        assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, \
            f"{record.__name__}.{f.name} has a default: a stack could leave it out"


def test_every_fact_of_the_stack_record_is_documented() -> None:
    source = (PACKAGE / "stacks" / "base.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Stack")
    documented = set()
    for stmt, after in zip(cls.body, [*cls.body[1:], None], strict=True):
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            documented.add(stmt.target.id)
    # the first fields are described by the class docstring; every group added for
    # the other layers carries its own line
    later = {f.name for f in dataclasses.fields(stack_base.Stack)} - {
        "name", "title", "params", "make_core", "doc", "kernel_map", "facts",
        "statuses", "peer_framing", "fingerprint", "lifecycle"}
    assert later <= documented, sorted(later - documented)


def test_the_stacks_readme_lists_every_fact() -> None:
    readme = (PACKAGE.parent / "docs" / "stacks" / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("## What a stack owes the registry"):]
    table = table[:table.index("\n## ", 4)]
    for f in dataclasses.fields(stack_base.Stack):
        assert f"`{f.name}`" in table, f"docs/stacks/README.md does not list Stack.{f.name}"
