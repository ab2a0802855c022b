"""One replay driver: the whole-capture and the streamed replay differ only in their frame
source and their sink, never by a class overriding its parent's private methods."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import mpa_emu.replay
from mpa_emu.replay.engine import Engine, KeepAll
from mpa_emu.replay.recording_source import RecordingSource
from mpa_emu.replay.stream import CompareAndForget, StreamSource


def _replay_classes() -> list[type]:
    found = []
    for info in pkgutil.iter_modules(mpa_emu.replay.__path__, "mpa_emu.replay."):
        module = importlib.import_module(info.name)
        found += [obj for obj in vars(module).values()
                  if inspect.isclass(obj) and obj.__module__ == info.name]
    return found


def _private_overrides(cls: type) -> list[str]:
    out = []
    for name in vars(cls):
        # dunders and the compiled build's __internal names are not a parent's privates
        if not name.startswith("_") or name.startswith("__"):
            continue
        for base in cls.__mro__[1:]:
            # the package's own classes (typing's Protocol keeps private names of its own)
            if base.__module__.startswith(("mpa_emu.", "tests.", "test_")) \
                    and name in vars(base):
                out.append(f"{cls.__qualname__}.{name} overrides {base.__qualname__}")
    return out


def test_the_check_sees_a_private_override() -> None:
    class Parent:
        def _step(self) -> None: ...

    class Child(Parent):
        def _step(self) -> None: ...

    assert _private_overrides(Child) == ["test_the_check_sees_a_private_override.<locals>"
                                         ".Child._step overrides test_the_check_sees_a_"
                                         "private_override.<locals>.Parent"]


def test_no_replay_class_overrides_a_private_method_of_its_parent() -> None:
    classes = _replay_classes()
    assert Engine in classes and StreamSource in classes
    assert [o for cls in classes for o in _private_overrides(cls)] == []


def test_the_two_replays_share_the_driver() -> None:
    assert not issubclass(StreamSource, Engine)
    for strategy in (RecordingSource, StreamSource, KeepAll, CompareAndForget):
        assert not issubclass(strategy, Engine)
