"""How an emulated application answers a CONNECT_REQUEST upcall.

A listener carries one policy: :class:`Accept`, :class:`Reject`, :class:`Manual` (leave
the request pending for the user) or any callable ``(host, upcall) -> None``
(:data:`mpa_emu.net.host.Policy` is the union).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Accept:
    """Accept with ``private_data`` in the MPA reply, ``delay_ns`` after the request."""

    private_data: bytes = b""
    delay_ns: int = 0


@dataclass(frozen=True, slots=True)
class Reject:
    """Reject with ``private_data`` in the MPA reject frame, ``delay_ns`` after the request."""

    private_data: bytes = b""
    delay_ns: int = 0


@dataclass(frozen=True, slots=True)
class Manual:
    """Leave the request pending: the user calls ``host.accept``/``host.reject`` later."""
