"""The package's layers: a module imports only from its own package or from a package
of a lower layer, read from the source with :mod:`ast` (function-level and
``TYPE_CHECKING`` imports count). :data:`LAYERS` is the one statement of the order:
README.md's Layout list and the picture in docs/architecture.md are checked against it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers.import_graph import import_graph

pytestmark = pytest.mark.source

ROOT = Path(__file__).resolve().parents[2]

LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("ranges", "gc_tuning", "compiled"),
    ("wire",),
    ("frames", "capture"),
    ("stacks",),
    ("ulp",),
    ("net",),
    ("__init__",),
    ("judge",),
    ("views",),
    ("scenario", "replay"),
    ("live",),
    ("campaign", "demo"),
    ("matrix",),
    ("cli", "pytest_plugin"),
    ("__main__",),
)
"""Lowest first. A unit is a subpackage of mpa_emu or one of its top-level modules
(``__init__`` is the package's public API). Units of one layer never import each other."""

STACK_SHARED = {"base", "contract", "tcp", "mpa_stream", "verb_args", "refusals", "deadlines"}
"""Parts of mpa_emu.stacks every stack may use (the Stack and StackParam records, the
contract every core implements, the host TCP, MPA over a byte stream, the verb argument
ranges, the records of the refusal rules, the timer heap); every other child of stacks is
one stack's room, which never imports another room."""

RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def unit_of(module: str) -> str:
    """``mpa_emu.stacks.irdma.core`` -> ``cm``; ``mpa_emu`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def layer_breaks(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a unit of the same or a higher layer, and of an unknown unit."""
    out = []
    for module, targets in sorted(graph.items()):
        here = unit_of(module)
        for target in sorted(targets):
            there = unit_of(target)
            if here == there:
                continue
            if here not in RANK or there not in RANK:
                unknown = here if here not in RANK else there
                out.append(f"{module} -> {target}: {unknown} is in no layer")
            elif RANK[there] >= RANK[here]:
                out.append(f"{module} -> {target}: {there} is not below {here}")
    return out


def room_breaks(graph: dict[str, set[str]]) -> list[str]:
    """Imports from one stack's room into another's (or from a shared part into a room)."""
    def room(module: str) -> str | None:
        parts = module.split(".")
        if len(parts) < 3 or parts[1] != "stacks":
            return None
        return parts[2]

    out = []
    for module, targets in sorted(graph.items()):
        here = room(module)
        if here is None:
            continue
        for target in sorted(targets):
            there = room(target)
            if there is None or there == here or there in STACK_SHARED:
                continue
            out.append(f"{module} -> {target}: stack rooms never import each other")
    return out


def test_the_checks_see_an_upward_import_and_a_room_crossing() -> None:
    graph = {"mpa_emu.wire.mpa": {"mpa_emu.views.describe"},
             "mpa_emu.views.describe": {"mpa_emu.wire.mpa", "mpa_emu.views.ladder"},
             "mpa_emu.replay.engine": {"mpa_emu.scenario.load"},
             "mpa_emu.stacks.siw.cm": {"mpa_emu.stacks.cxgb4.cm", "mpa_emu.stacks.tcp.stack",
                                       "mpa_emu.stacks.contract.api"},
             "mpa_emu.nowhere.x": {"mpa_emu.wire.mpa"}}
    assert layer_breaks(graph) == [
        "mpa_emu.nowhere.x -> mpa_emu.wire.mpa: nowhere is in no layer",
        "mpa_emu.replay.engine -> mpa_emu.scenario.load: scenario is not below replay",
        "mpa_emu.wire.mpa -> mpa_emu.views.describe: views is not below wire",
    ]
    assert room_breaks(graph) == [
        "mpa_emu.stacks.siw.cm -> mpa_emu.stacks.cxgb4.cm: stack rooms never import "
        "each other"]


def test_every_import_goes_down_the_layers() -> None:
    assert layer_breaks(import_graph()) == []


def test_no_stack_imports_another() -> None:
    assert room_breaks(import_graph()) == []


def test_the_readme_lists_the_packages_in_layer_order() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index("## Layout"):]
    block = block[block.index("```\nmpa_emu/"):]
    block = block[:block.index("\n```", 4)]
    listed = re.findall(r"^  (\w+)/", block, re.M)
    package = {p.name for p in (ROOT / "mpa_emu").iterdir()
               if (p / "__init__.py").exists()}
    assert set(listed) >= package
    ranks = [RANK[name] for name in listed if name != "examples"]
    assert ranks == sorted(ranks)


def test_the_architecture_picture_draws_the_layers() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = text.index("<!-- layers -->")
    picture = text[text.index("```\n", start) + 4:]
    picture = picture[:picture.index("```")]
    # the units stand in the first 40 columns, a line's description after them
    drawn = [tuple(re.findall(r"\w+", line[:40])) for line in picture.splitlines()
             if re.search(r"\w", line[:40])]
    assert tuple(reversed(drawn)) == LAYERS
