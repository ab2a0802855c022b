"""Dataclasses of the compiled modules that write their ``__init__`` out (the compiled
build then stores each field directly instead of running the dataclass's generated one):
the written ``__init__`` takes exactly the fields, in order, with the dataclass defaults,
and stores each once; a frozen one is replaced by ``fast_frozen_init`` in the pure build,
where Python refuses the stores."""

from __future__ import annotations

import ast
import dataclasses
import importlib
from typing import Any

import pytest
from helpers.source import definition_source

from mpa_emu.compiled import COMPILED_MODULES, compiled_modules


def _written() -> list[tuple[str, type]]:
    found = []
    for name in COMPILED_MODULES:
        module = importlib.import_module(name)
        for attr, obj in vars(module).items():
            if (isinstance(obj, type) and dataclasses.is_dataclass(obj)
                    and obj.__module__ == name
                    and definition_source(f"{name}.{attr}.__init__") is not None):
                found.append((f"{name}.{attr}", obj))
    return found


WRITTEN = _written()


def test_the_per_frame_classes_write_their_init() -> None:
    names = {n.rsplit(".", 1)[1] for n, _ in WRITTEN}
    assert {"Segment", "Transmit", "Upcall", "CapturedFrame", "MpaFrame"} <= names


@pytest.mark.parametrize(("path", "cls"), WRITTEN, ids=[n for n, _ in WRITTEN])
def test_a_written_init_takes_and_stores_exactly_the_fields(path: str, cls: Any) -> None:
    source = definition_source(f"{path}.__init__")
    assert source is not None
    fn = ast.parse(source).body[0]
    assert isinstance(fn, ast.FunctionDef)
    params = [a.arg for a in fn.args.args][1:]
    fields = dataclasses.fields(cls)
    assert params == [f.name for f in fields]
    defaults = [ast.literal_eval(d) for d in fn.args.defaults]
    expected = [None if f.default_factory is not dataclasses.MISSING else f.default
                for f in fields if f.default is not dataclasses.MISSING
                or f.default_factory is not dataclasses.MISSING]
    assert defaults == expected
    stored = [t.attr for node in fn.body if isinstance(node, ast.Assign)
              for t in node.targets if isinstance(t, ast.Attribute)]
    assert stored == [f.name for f in fields]


@pytest.mark.parametrize(("path", "cls"), WRITTEN, ids=[n for n, _ in WRITTEN])
def test_a_frozen_class_gets_the_pure_builds_init(path: str, cls: Any) -> None:
    if not cls.__dataclass_params__.frozen:
        return
    compiled = path.rsplit(".", 1)[0] in compiled_modules()
    # fast_frozen_init's __init__ is compiled from a string; a compiled class keeps its own
    code = getattr(cls.__init__, "__code__", None)
    assert (code is not None and code.co_filename == "<string>") is not compiled
