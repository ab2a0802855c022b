"""fast_frozen_init: the replacement __init__ takes exactly what the dataclass one takes
and leaves a class that behaves the same."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from mpa_emu.cm.events import IwEvent, Transmit, Upcall
from mpa_emu.cm.trace import TraceRecord, make_record
from mpa_emu.wire.fastinit import fast_constructor, fast_frozen_init
from mpa_emu.wire.segment import Segment


def _make() -> type:
    return dataclasses.make_dataclass(
        "_Fast", [("a", int), ("b", bytes, dataclasses.field(default=b"x")),
                  ("c", int | None, dataclasses.field(default=None))],
        frozen=True, slots=True)


_Plain = _make()
_Fast = fast_frozen_init(_make())


def test_parameters_and_defaults_are_those_of_the_dataclass() -> None:
    assert str(inspect.signature(_Fast)) == str(inspect.signature(_Plain))
    assert _Fast.__init__ is not _Plain.__init__


def test_positional_keyword_and_default_arguments_fill_the_fields() -> None:
    assert dataclasses.astuple(_Fast(1)) == (1, b"x", None)
    assert dataclasses.astuple(_Fast(1, c=3)) == (1, b"x", 3)
    assert dataclasses.astuple(_Fast(b=b"y", a=2)) == (2, b"y", None)
    with pytest.raises(TypeError):
        _Fast()
    with pytest.raises(TypeError):
        _Fast(1, d=4)


def test_the_class_stays_frozen_comparable_hashable_and_replaceable() -> None:
    obj = _Fast(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        obj.a = 2  # type: ignore[misc]
    assert obj == _Fast(1) and hash(obj) == hash(_Fast(1)) and obj != _Fast(2)
    assert dataclasses.replace(obj, a=5) == _Fast(5)


def test_a_class_with_a_default_factory_keeps_the_dataclass_init() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class WithFactory:
        items: list[int] = dataclasses.field(default_factory=list)

    init = WithFactory.__init__
    assert fast_frozen_init(WithFactory).__init__ is init
    assert WithFactory().items == [] and WithFactory().items is not WithFactory().items


@pytest.mark.parametrize("cls", [Segment, Upcall, Transmit])
def test_the_per_frame_classes_use_it_with_their_declared_defaults(cls: type) -> None:
    params = inspect.signature(cls).parameters
    for f in dataclasses.fields(cls):
        default = params[f.name].default
        expected = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        assert default == expected, f.name
    assert cls.__init__.__qualname__ == f"{cls.__name__}.__init__"


def test_an_upcall_built_positionally_has_every_field_in_order() -> None:
    up = Upcall(IwEvent.CLOSE, 7, -104, 5, b"\x01" * 4, 1, b"\x02" * 4, 2)
    assert (up.event, up.conn, up.status, up.time_ns, up.local_port, up.remote_port,
            up.private_data, up.listener) == (IwEvent.CLOSE, 7, -104, 5, 1, 2, b"", None)


def test_fast_constructor_makes_the_same_object_without_calling_init() -> None:
    cls = _make()
    make = fast_constructor(cls)
    assert make is not cls
    assert make(1) == cls(1) and type(make(1)) is cls
    assert make(2, b"y", 3) == cls(2, b"y", 3) and make(a=4, c=5) == cls(4, c=5)
    with pytest.raises(TypeError):
        make()


def test_fast_constructor_of_a_class_it_cannot_serve_is_the_class() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class WithFactory:
        items: list[int] = dataclasses.field(default_factory=list)

    assert fast_constructor(WithFactory) is WithFactory


def test_make_record_is_the_trace_record_its_constructor_makes() -> None:
    fields = {"conn": 3, "old": "SYN_SENT"}
    made = make_record(42, "alice", "state_changed", "irdma_send_syn", fields)
    built = TraceRecord(42, "alice", "state_changed", "irdma_send_syn", fields)
    assert type(made) is TraceRecord and made == built
    assert made.fields is fields
    assert made.to_json() == ('{"conn":3,"fn":"irdma_send_syn","host":"alice",'
                              '"kind":"state_changed","old":"SYN_SENT","t_ns":42}')
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.kind = "other"  # type: ignore[misc]
