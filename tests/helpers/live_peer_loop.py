"""A looped MPA initiator (``mpa_emu.live.peer``'s code on Linux sockets) in a namespace: the
peer that ``mpa-emu fuzz --live --accept`` waits for."""

from __future__ import annotations

import contextlib
import threading

from mpa_emu.live import peer
from mpa_emu.live.netns import entered


class ConnectLoop(threading.Thread):
    """Connects to ``host:port`` again and again until stopped; counts attempts."""

    def __init__(self, ns: str, host: str, port: int) -> None:
        super().__init__(daemon=True)
        self.ns, self.host, self.port = ns, host, port
        self.stop = threading.Event()
        self.attempts = 0

    def run(self) -> None:
        options = peer.PeerOptions(timeout=1.0)
        with entered(self.ns):
            while not self.stop.is_set():
                self.attempts += 1
                try:
                    sock = peer.open_connection(self.host, self.port, 1.0)
                except peer.PeerError:
                    self.stop.wait(0.05)
                    continue
                with contextlib.closing(sock):
                    peer.run_initiator(sock, options)
