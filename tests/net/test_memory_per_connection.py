"""Memory held per established (offloaded) connection does not grow with the number of
connections: nothing kept per connection outlives its purpose (retransmission entries
of the core timer, received FPDUs, queued events) or grows with the table.

Measured with tracemalloc (bytes, not time); ``tools/bench.py --only p3`` gives the RSS
figure at 100,000 connections.
"""

from __future__ import annotations

import gc
import tracemalloc

import pytest
from mpa_emu.stacks.irdma.states import CmState

from mpa_emu.net import Accept, Network

CLIENT, SERVER, PORT = "192.0.2.1", "192.0.2.2", 31000
US = 1_000


def bytes_per_connection(count: int) -> tuple[float, float]:
    """Traced bytes per connection (both endpoints) once ``count`` connections are
    established, offloaded and idle, and at the peak while they were being opened."""
    net = Network(1, capture=False, tracing=False, keep_upcalls=False)
    alice = net.add_host("alice", CLIENT)
    bob = net.add_host("bob", SERVER)
    bob.listen(PORT, SERVER, policy=Accept(), backlog=1024)
    server = bob.address()
    net.run()
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for i in range(count):
            net.at(net.now_ns + (i // 8) * 100 * US, alice.connect, server, PORT,
                   local_port=10000 + i)
        result = net.run(max_events=count * 50)
        gc.collect()
        used, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.reason == "idle"
    for host in (alice, bob):
        conns = host.conns()
        assert len(conns) == count
        assert all(host.node(c).state is CmState.OFFLOADED for c in conns)
    return (used - base) / count, (peak - base) / count


@pytest.mark.memory
@pytest.mark.slow(5)
def test_bytes_per_connection_stay_flat_from_1000_to_4000_connections() -> None:
    small, small_peak = bytes_per_connection(1000)
    large, peak = bytes_per_connection(4000)
    # Flat: four times the connections cost four times the memory, within 15 %
    # (dict tables grow in powers of two).
    assert large <= 1.15 * small, (small, large)
    # Nothing piles up while connections open: the handshakes' retransmission entries
    # and frames go once they are done, not a second later (irdma_cm_timer_tick), so
    # what the peak holds beyond the end state (the handshakes in flight at the busiest
    # moment, about 1.4 MB here) does not grow with the number of connections.
    excess_small = (small_peak - small) * 1000
    excess_large = (peak - large) * 4000
    assert excess_large <= 1.25 * excess_small, (excess_small, excess_large)
    # And small: both endpoints' node, QP and table entries in under 2 KiB (1,024 B an
    # endpoint; about 780 B pure and 690 B compiled at this size).
    assert large < 2 * 1024, large
