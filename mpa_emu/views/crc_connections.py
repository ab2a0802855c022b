"""Which TCP connections of a capture negotiated MPA CRC, held only while they matter.

A view that names CRC verdicts (RFC 5044 section 7.1: CRC is used when either side's
request or reply sets C) must remember that per connection, but a capture of a million
connections must not make it remember a million. A connection is forgotten once it has
been closed (an RST, or a FIN from each side: RFC 9293 section 3.6) for
:data:`LINGER_FRAMES` frames, the window :mod:`mpa_emu.views.inspection` gives late
retransmissions too; a new SYN on the same ports forgets it at once.
"""

from __future__ import annotations

from mpa_emu.views.inspection import connections
from mpa_emu.wire.segment import FIN, RST

_FIN_LOW = 1
_FIN_HIGH = 2


def connection_key(src_ip: bytes, sport: int, dst_ip: bytes,
                   dport: int) -> tuple[bytes, int]:
    """One key for both directions of a TCP connection, and the sender's side (the FIN
    bit :meth:`CrcConnections.ending` records for it)."""
    a = src_ip + sport.to_bytes(2, "big")
    b = dst_ip + dport.to_bytes(2, "big")
    return (a + b, _FIN_LOW) if a <= b else (b + a, _FIN_HIGH)


class CrcConnections:
    """The connections that negotiated CRC and have not been forgotten."""

    __slots__ = ("_closed_at", "_fins", "linger")

    def __init__(self, linger: int | None = None) -> None:
        self.linger = connections.LINGER_FRAMES if linger is None else linger
        self._fins: dict[bytes, int] = {}
        """Connection -> the FIN bits of the sides that sent one."""
        self._closed_at: dict[bytes, int] = {}
        """Closed connection -> frame number it closed at, oldest first."""

    def __contains__(self, conn: bytes) -> bool:
        return conn in self._fins

    def __len__(self) -> int:
        return len(self._fins)

    def negotiated(self, conn: bytes) -> None:
        """An MPA request or reply of ``conn`` set C."""
        self._fins.setdefault(conn, 0)

    def started(self, conn: bytes) -> None:
        """A SYN opens a new connection on ``conn``'s ports."""
        if self._fins.pop(conn, None) is not None:
            self._closed_at.pop(conn, None)

    def ending(self, conn: bytes, side: int, flags: int, number: int) -> None:
        """Frame ``number`` of ``conn`` from ``side`` carries ``flags`` (FIN, RST)."""
        fins = self._fins.get(conn)
        if fins is None or conn in self._closed_at:
            return
        if flags & FIN:
            fins |= side
            self._fins[conn] = fins
        if flags & RST or fins == _FIN_LOW | _FIN_HIGH:
            self._closed_at[conn] = number

    def expire(self, number: int) -> None:
        """Forget the connections closed :attr:`linger` or more frames before frame
        ``number``."""
        closed = self._closed_at
        while closed:
            conn, at = next(iter(closed.items()))
            if number - at < self.linger:
                return
            del closed[conn]
            del self._fins[conn]
