"""mpa_emu: a packet-level emulator and analyser of the Linux iWARP connection managers.

The package models the connection managers a Linux iWARP user meets, each from its own
kernel source: irdma (``drivers/infiniband/hw/irdma/cm.c``), siw
(``drivers/infiniband/sw/siw/siw_cm.c``), cxgb4 (``drivers/infiniband/hw/cxgb4/cm.c``),
qedr (``drivers/infiniband/hw/qedr/qedr_iw_cm.c`` over ``qed_iwarp.c``) and erdma
(``drivers/infiniband/hw/erdma/erdma_cm.c``), registered in :data:`mpa_emu.stacks.STACKS`.
It builds real Ethernet/IP/TCP frames carrying MPA v1/v2 (RFC 5044, RFC 6581), runs one
stack's CM state machine per emulated host, captures pcapng that Wireshark decodes as
iWARP, and inspects, judges and replays recorded captures, each side by its own stack's
rules.

The public API::

    from mpa_emu import Accept, Network, Reject  # hosts on a virtual wire
    from mpa_emu import CmConfig, CmCore, Quirks  # one host's CM, sans-IO
    from mpa_emu import MpaEmuError  # the base of every exception mpa_emu raises

Each name is imported when first asked for, so a command that needs only part of the
package (``mpa-emu replay`` needs no network of hosts) does not pay for the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mpa_emu.errors import MpaEmuError
    from mpa_emu.net import Accept, Host, Manual, Network, Policy, Reject
    from mpa_emu.stacks.irdma import CmConfig, CmCore, CmError, CmState, IwEvent, Quirks, Upcall
    from mpa_emu.wire.segment import Segment, Transmit

__version__ = "0.1.0"

_HOMES = {
    "CmConfig": "mpa_emu.stacks.irdma", "CmCore": "mpa_emu.stacks.irdma",
    "CmError": "mpa_emu.stacks.irdma",
    "CmState": "mpa_emu.stacks.irdma", "IwEvent": "mpa_emu.stacks.irdma",
    "Quirks": "mpa_emu.stacks.irdma",
    "Upcall": "mpa_emu.stacks.irdma", "MpaEmuError": "mpa_emu.errors", "Accept": "mpa_emu.net",
    "Host": "mpa_emu.net", "Manual": "mpa_emu.net", "Network": "mpa_emu.net",
    "Policy": "mpa_emu.net", "Reject": "mpa_emu.net", "Segment": "mpa_emu.wire.segment",
    "Transmit": "mpa_emu.wire.segment",
}
"""Each public name -> the module that defines it."""

__all__ = ["Accept", "CmConfig", "CmCore", "CmError", "CmState", "Host", "IwEvent",
           "Manual", "MpaEmuError", "Network", "Policy", "Quirks", "Reject", "Segment",
           "Transmit", "Upcall", "__version__"]


def __getattr__(name: str) -> object:
    """A public name, imported from its module when first asked for (PEP 562)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'mpa_emu' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
