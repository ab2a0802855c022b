"""Misuse of the Network API gets a clear error naming the problem."""

from __future__ import annotations

import pytest

from mpa_emu.net import Network


def test_a_taken_host_name_is_named_as_taken() -> None:
    net = Network(seed=1)
    net.add_host("a", "192.0.2.1")
    with pytest.raises(ValueError, match="host name 'a' is taken"):
        net.add_host("a", "192.0.2.9")


@pytest.mark.parametrize("name", ["", "a/b"])
def test_an_empty_or_slashed_host_name_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="is empty or contains '/'"):
        Network(seed=1).add_host(name, "192.0.2.1")


def test_running_until_a_time_in_the_past_is_refused() -> None:
    net = Network(seed=1)
    net.add_host("a", "192.0.2.1")
    net.run(until_ns=5_000)
    with pytest.raises(ValueError, match="in the past"):
        net.run(until_ns=4_999)
    assert net.run(until_ns=5_000).reason == "idle"
