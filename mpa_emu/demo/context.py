"""What every demo story works with: the two hosts' addresses, the ports, the time
budget per story and :class:`DemoContext` (see :mod:`mpa_emu.demo.stories`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mpa_emu.net import Host, Network

CLIENT_IP = "192.0.2.1"  # RFC 5737 documentation addresses
SERVER_IP = "192.0.2.2"
ACCEPT_PORT = 31001
"""Ports no other tshark 4.0 dissector claims: Wireshark's MPA dissector is heuristic only
(``dissect_iwarp_mpa_heur``) and runs after the port-based ones."""
REJECT_PORT = 31002
CLOSE_PORT = 31003
MS = 1_000_000
STORY_BUDGET_NS = 10_000 * MS
"""Virtual time given to each story (its retransmissions and timers included); the next
story starts when it is spent, so the stories sit at 0 s, 10 s, 20 s... in the capture."""


@dataclass
class DemoContext:
    """What a story works with: the network, the two hosts, and the summary it adds to."""

    net: Network
    client: Host
    server: Host
    summary: list[str] = field(default_factory=list)

    def run_story(self, budget_ns: int = STORY_BUDGET_NS) -> None:
        """Run the network for the story's virtual time budget."""
        result = self.net.run(until_ns=self.net.now_ns + budget_ns)
        if result.bounded:
            self.summary.append(f"  note: the run stopped at its event bound ({result.events})")


Story = Callable[[DemoContext], None]
