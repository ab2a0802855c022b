"""Dataclasses of the compiled modules that write their ``__init__`` out (the compiled
build then stores each field directly instead of running the dataclass's generated one):
the written ``__init__`` takes exactly the fields, in order, with the dataclass defaults,
and stores each once. Such a class is a plain slotted dataclass, not a frozen one (Python
refuses the stores of a frozen one), and the same ``__init__`` runs in both builds."""

from __future__ import annotations

import ast
import dataclasses
import importlib
from typing import Any

import pytest
from helpers.source import PACKAGE, definition_source

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
    assert {"Segment", "Transmit", "Upcall", "CapturedFrame", "MpaFrame", "QpInit",
            "ReceivedMessage", "JournalEntry", "DdpSegment", "Fpdu"} <= names


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
def test_a_class_with_a_written_init_is_plain_and_slotted(path: str, cls: Any) -> None:
    assert not cls.__dataclass_params__.frozen
    assert "__slots__" in cls.__dict__ or path.rsplit(".", 1)[0] in compiled_modules()


@pytest.mark.source
def test_no_code_is_generated_from_strings() -> None:
    # The package's own code is what it runs: no exec or eval of generated source.
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = [node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call)
                 and isinstance(node.func, ast.Name) and node.func.id in ("exec", "eval")]
        assert calls == [], path
