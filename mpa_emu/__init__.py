"""mpa_emu: a packet-level emulator of the Linux irdma iWARP connection manager.

The package models ``drivers/infiniband/hw/irdma/cm.c``: real Ethernet/IP/TCP frames
carrying MPA v1/v2 (RFC 5044, RFC 6581), an irdma CM state machine per emulated host,
pcapng capture that Wireshark decodes as iWARP, and replay of recorded captures.

The public API::

    from mpa_emu import Accept, Network, Reject  # hosts on a virtual wire
    from mpa_emu import CmConfig, CmCore, Quirks  # one host's CM, sans-IO
    from mpa_emu import MpaEmuError  # the base of every exception mpa_emu raises
"""

from mpa_emu.cm import CmConfig, CmCore, CmError, CmState, IwEvent, Quirks, Upcall
from mpa_emu.errors import MpaEmuError
from mpa_emu.net import Accept, Host, Manual, Network, Policy, Reject
from mpa_emu.wire.segment import Segment, Transmit

__version__ = "0.1.0"

__all__ = ["Accept", "CmConfig", "CmCore", "CmError", "CmState", "Host", "IwEvent",
           "Manual", "MpaEmuError", "Network", "Policy", "Quirks", "Reject", "Segment",
           "Transmit", "Upcall", "__version__"]
