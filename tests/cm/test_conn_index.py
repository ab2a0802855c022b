"""The node table's index by connection id behaves as a dict filed in id order, and
costs no more than its live connections."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mpa_emu.stacks.irdma.conn_index import SPARSE_MIN, ConnIndex


def _same(index: ConnIndex[str], model: dict[int, str], probe: range) -> None:
    assert len(index) == len(model)
    assert list(index) == list(model)
    assert index.values() == list(model.values())
    for conn in probe:
        assert index.get(conn) == model.get(conn)
        assert (conn in index) == (conn in model)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 400), st.integers(1, 3)),
                max_size=400))
def test_behaves_as_a_dict_in_id_order(steps: list[tuple[bool, int, int]]) -> None:
    index: ConnIndex[str] = ConnIndex()
    model: dict[int, str] = {}
    next_id = 1
    for adding, pick, gap in steps:
        if adding or not model:
            next_id += gap - 1  # an id may be skipped
            index.add(next_id, f"n{next_id}")
            model[next_id] = f"n{next_id}"
            next_id += 1
        else:
            conn = list(model)[pick % len(model)]
            assert index.pop(conn) == model.pop(conn)
            assert index.pop(conn) is None
    _same(index, model, range(next_id + 2))


def test_a_long_lived_connection_does_not_pin_the_dead_ones() -> None:
    index: ConnIndex[str] = ConnIndex()
    index.add(1, "old")
    for conn in range(2, 100_002):
        index.add(conn, "short")
        index.pop(conn)
    assert index[1] == "old" and len(index) == 1
    assert len(index._slots) < SPARSE_MIN  # the window holds no dead ids
    index.add(200_000, "new")
    assert list(index) == [1, 200_000] and index.values() == ["old", "new"]
    assert index.pop(1) == "old" and list(index) == [200_000]


def test_first_in_first_out_keeps_the_window_short() -> None:
    index: ConnIndex[int] = ConnIndex()
    for conn in range(1, 1001):
        index.add(conn, conn)
    for conn in range(1, 100_001):
        index.add(conn + 1000, conn + 1000)
        assert index.pop(conn) == conn
    assert len(index) == 1000 and len(index._slots) <= 2000
    assert list(index) == list(range(100_001, 101_001))


def test_ids_must_increase() -> None:
    index: ConnIndex[str] = ConnIndex()
    index.add(5, "a")
    index.pop(5)
    with pytest.raises(ValueError, match="not above"):
        index.add(5, "b")
    with pytest.raises(KeyError):
        _ = index[5]
