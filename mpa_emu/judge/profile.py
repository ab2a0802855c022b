"""``--profile 10.0.0.1=siw,10.0.0.2=cxgb4``: the stack of a side, given by the user.

A profile names the stack at an IP address; a bare stack name (``--profile siw``) is
every side. Given, it overrides the fingerprint of that side.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from mpa_emu.errors import MpaEmuError
from mpa_emu.judge.stacks import STACK_NAMES

EVERY_SIDE = "*"


class ProfileError(MpaEmuError, ValueError):
    """A ``--profile`` value that cannot be read; the message is one line."""


@dataclass(frozen=True, slots=True)
class Profiles:
    """Stacks by IP address (text as :func:`ipaddress.ip_address` normalises it), with
    :data:`EVERY_SIDE` for a bare name."""

    by_address: dict[str, str] = field(default_factory=dict)

    def stack_of(self, address: str) -> str | None:
        """The stack given for ``address`` (``10.0.0.1``, ``[fd00::1]:5445`` or
        ``10.0.0.1:4000``), or None."""
        host = _host(address)
        return self.by_address.get(host, self.by_address.get(EVERY_SIDE))

    def __bool__(self) -> bool:
        return bool(self.by_address)


def _host(endpoint: str) -> str:
    text = endpoint
    if text.startswith("["):
        text = text[1:].split("]", 1)[0]
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return text


def parse_profiles(values: list[str] | None) -> Profiles:
    """Read ``--profile`` values (each ``IP=STACK[,IP=STACK...]`` or ``STACK``); raises
    :class:`ProfileError` naming the bad part."""
    out: dict[str, str] = {}
    for value in values or []:
        for part in value.split(","):
            part = part.strip()
            if not part:
                continue
            address, sep, stack = part.rpartition("=")
            if not sep:
                address, stack = EVERY_SIDE, part
            if stack not in STACK_NAMES:
                raise ProfileError(f"unknown stack {stack!r} in --profile {part!r} (known: "
                                   f"{', '.join(STACK_NAMES)})")
            if address != EVERY_SIDE:
                try:
                    address = str(ipaddress.ip_address(address.strip("[]")))
                except ValueError:
                    raise ProfileError(f"--profile {part!r}: {address!r} is not an IP "
                                       "address") from None
            out[address] = stack
    return Profiles(out)
