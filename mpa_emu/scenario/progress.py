"""A one-line progress bar for long runs, drawn only when the output is a terminal.

The bar follows the wall clock, not virtual time: while the network runs, a background
thread redraws it about ten times a second with the virtual time reached (against the
scenario's duration when it has one), the frames so far and the connections the hosts
hold. It only reads the network, so a run with a bar is the same run as one without.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from mpa_emu.net import Network

WIDTH = 30
LINE = 100
INTERVAL_S = 0.1
"""Seconds between redraws (wall clock)."""


class ProgressBar:
    """Virtual time, frames and open connections, redrawn in place with a carriage return."""

    def __init__(self, stream: IO[str], label: str, interval_s: float = INTERVAL_S) -> None:
        self.stream = stream
        self.label = label
        self.interval_s = interval_s
        self.drawn = False
        self.draws = 0
        self._connections = 0

    def draw(self, now_ns: int, duration_ns: int | None, frames: int, connections: int) -> None:
        """Redraw the line for these counts."""
        seconds = now_ns / 1e9
        counts = f"{seconds:9.3f} s virtual  {frames} frames  {connections} connections"
        if duration_ns:
            done = min(now_ns / duration_ns, 1.0)
            filled = int(done * WIDTH)
            bar = "#" * filled + "." * (WIDTH - filled)
            text = f"{self.label} [{bar}] {done:4.0%} {counts}"
        else:
            text = f"{self.label} running: {counts}"
        self.stream.write("\r" + text[:LINE].ljust(LINE))
        self.stream.flush()
        self.drawn = True
        self.draws += 1

    def sample(self, net: Network, duration_ns: int | None) -> None:
        """Draw the network's current counts."""
        # A table that changes size under us keeps the last count.
        with contextlib.suppress(RuntimeError):
            self._connections = sum(len(host.conns()) for host in net.hosts.values())
        self.draw(net.now_ns, duration_ns, len(net.frames), self._connections)

    @contextlib.contextmanager
    def watch(self, net: Network, duration_ns: int | None) -> Iterator[None]:
        """Redraw every ``interval_s`` seconds while the body runs, then clear the line."""
        stop = threading.Event()

        def redraw() -> None:
            while not stop.wait(self.interval_s):
                self.sample(net, duration_ns)

        thread = threading.Thread(target=redraw, name="mpa-emu-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            self.finish()

    def finish(self) -> None:
        """Clear the line."""
        if self.drawn:
            self.stream.write("\r" + " " * LINE + "\r")
            self.stream.flush()
            self.drawn = False
