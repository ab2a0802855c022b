"""shared: equal ints and int tuples computed apart end up as one object, a value of
another type is never swapped in, and the table stays bounded."""

from __future__ import annotations

from mpa_emu.wire import interning
from mpa_emu.wire.interning import SHARED_MAX, shared


def _fresh_int(n: int) -> int:
    return int(str(n))  # a new object each call for n > 256


def test_equal_values_computed_apart_share_one_object() -> None:
    a, b = _fresh_int(65535), _fresh_int(65535)
    assert a is not b
    assert shared(a) is shared(b) == 65535
    t1, t2 = (2, _fresh_int(70000), 1), (2, _fresh_int(70000), 1)
    assert shared(t1) is shared(t2)


def test_a_value_of_another_type_is_returned_as_it_is() -> None:
    assert shared(True) is True  # remembered first: 1 == True
    assert type(shared(1)) is int and shared(1) == 1
    assert type(shared(1.0)) is float


def test_the_table_starts_over_when_full() -> None:
    for n in range(SHARED_MAX + 10):
        shared(_fresh_int(10_000_000 + n))
    assert len(interning._TABLE) <= SHARED_MAX
