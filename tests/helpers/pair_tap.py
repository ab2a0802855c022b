"""A TAP stand-in for tests that need no root: one end of a SOCK_DGRAM socket pair keeps
frame boundaries as a TAP file descriptor does."""

from __future__ import annotations

import socket


class PairTap:
    """One end of a SOCK_DGRAM pair: frame boundaries kept, like a TAP fd."""

    def __init__(self, sock: socket.socket, name: str = "pair0") -> None:
        self.sock, self.name = sock, name
        sock.setblocking(False)

    def fileno(self) -> int:
        return self.sock.fileno()

    def read(self) -> bytes | None:
        try:
            return self.sock.recv(65536)
        except BlockingIOError:
            return None

    def write(self, frame: bytes) -> None:
        self.sock.send(frame)

    def close(self) -> None:
        self.sock.close()
