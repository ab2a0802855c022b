"""siw's settings, named as siw names them.

Mainline keeps them as constants (siw_main.c, siw_cm.c) rather than module parameters:
a value other than the default means a rebuilt or patched siw.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mpa_emu.stacks.base import StackParam

_MAIN = "constant in siw_main.c: a non-default value means a rebuilt or patched siw"
_CM = "constant in siw_cm.c: a non-default value means a rebuilt or patched siw"

MPA_MAX_PRIVDATA = 256
"""iwarp.h: RDMA_MAX_PRIVATE_DATA, the longest PD_Length siw_recv_mpa_rr takes and the
longest private data siw_connect takes."""
SIW_MAX_IRD_QP = 128
SIW_MAX_ORD_QP = 128
"""siw.h; also the device's max_ird/max_ord (siw_device_create)."""
MPAREQ_TIMEOUT_NS = 10_000_000_000
"""siw_cm.h: MPAREQ_TIMEOUT (HZ * 10), the initiator's wait for the MPA reply."""
MPAREP_TIMEOUT_NS = 5_000_000_000
"""siw_cm.h: MPAREP_TIMEOUT (HZ * 5), the responder's wait for the MPA request."""

RTR_WRITE = 1
RTR_READ = 2

PARAMS: tuple[StackParam, ...] = (
    StackParam("mpa_version", int, 2, 0, 255, _MAIN,
               "MPA revision of the requests siw sends (siw_connect); above 2 siw warns "
               "\"Setting MPA version to 2\" and uses 2; 2 adds the RFC 6581 block."),
    StackParam("peer_to_peer", bool, False, 0, 1, _MAIN,
               "siw_connect: set P2P and offer the RTR types of rtr_type in requests; "
               "siw then sends the RTR the responder picks (siw_qp_mpa_rts)."),
    StackParam("mpa_crc_required", bool, False, 0, 1, _MAIN,
               "siw_connect sets C; siw_proc_mpareply refuses a reply without C "
               "(CONNECT_REPLY -ECONNREFUSED)."),
    StackParam("mpa_crc_strict", bool, False, 0, 1, _MAIN,
               "with mpa_crc_required off: a request with C is rejected "
               "(siw_proc_mpareq) and a reply with C refused (siw_proc_mpareply)."),
    StackParam("try_gso", bool, False, 0, 1, _MAIN,
               "siw_connect sets siw's own flag bit 0x08 (MPA_RR_FLAG_GSO_EXP, a reserved "
               "bit of RFC 5044) in the request; replies echo the request's bits."),
    StackParam("rtr_type", int, 3, 0, 3, _CM,
               "the RTR types a P2P request offers: 1 MPA_V2_RDMA_WRITE_RTR, 2 "
               "MPA_V2_RDMA_READ_RTR, 3 both (siw_cm.c's default), 0 MPA_V2_RDMA_NO_RTR."),
    StackParam("relaxed_ird_negotiation", bool, True, 0, 1, _CM,
               "siw_accept lowers an ORD and raises an IRD the request cannot meet; "
               "false refuses them (-EINVAL, -ENOMEM), and siw_proc_mpareply checks "
               "IRD/ORD strictly."),
)


@dataclass(frozen=True, slots=True)
class SiwParams:
    """The parameters of one siw host, typed."""

    mpa_version: int = 2
    peer_to_peer: bool = False
    mpa_crc_required: bool = False
    mpa_crc_strict: bool = False
    try_gso: bool = False
    rtr_type: int = RTR_WRITE | RTR_READ
    relaxed_ird_negotiation: bool = True

    @classmethod
    def from_mapping(cls, values: Mapping[str, int | bool]) -> SiwParams:
        """From :func:`mpa_emu.stacks.parse_params` output (missing keys: defaults)."""
        return cls(mpa_version=int(values.get("mpa_version", 2)),
                   peer_to_peer=bool(values.get("peer_to_peer", False)),
                   mpa_crc_required=bool(values.get("mpa_crc_required", False)),
                   mpa_crc_strict=bool(values.get("mpa_crc_strict", False)),
                   try_gso=bool(values.get("try_gso", False)),
                   rtr_type=int(values.get("rtr_type", RTR_WRITE | RTR_READ)),
                   relaxed_ird_negotiation=bool(values.get("relaxed_ird_negotiation",
                                                           True)))
