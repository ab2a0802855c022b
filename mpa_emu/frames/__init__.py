"""Scapy layers for MPA (RFC 5044, RFC 6581), DDP (RFC 5041) and RDMAP (RFC 5040).

Importing this package binds :class:`MPA` to TCP, so ``Ether(raw)`` of a segment whose
payload starts with an MPA key dissects as :class:`MPARequest` or :class:`MPAReply`.
FPDUs need conversation state: use :class:`MPAFPDU` directly, :func:`dissect_stream`, or
scapy's ``TCPSession`` (the :meth:`MPA.tcp_reassemble` hook). Nothing else in scapy's
configuration is changed; :func:`uninstall_bindings` takes the binding out again.
"""

from mpa_emu.frames.connect import MPAReply, MPARequest, SMBDIrdOrd, has_rtr_block
from mpa_emu.frames.ddp import DDP, DDPTagged, DDPUntagged, RDMAPReadRequest, RDMAPTerminate
from mpa_emu.frames.fpdu import MPAFPDU, MPAMarker, fpdu_wire_length
from mpa_emu.frames.stream import (
    MPA,
    ConversationState,
    dissect_stream,
    install_bindings,
    uninstall_bindings,
)

install_bindings()

__all__ = [
    "DDP",
    "MPA",
    "MPAFPDU",
    "ConversationState",
    "DDPTagged",
    "DDPUntagged",
    "MPAMarker",
    "MPAReply",
    "MPARequest",
    "RDMAPReadRequest",
    "RDMAPTerminate",
    "SMBDIrdOrd",
    "dissect_stream",
    "fpdu_wire_length",
    "has_rtr_block",
    "install_bindings",
    "uninstall_bindings",
]
