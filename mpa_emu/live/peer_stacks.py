"""What ``mpa-emu peer --stack NAME`` offers: the MPA settings of a stack's requests and
replies, from its registry parameters, so a kernel-socket peer frames MPA as that stack
does (the kernel does TCP). Each setting names the function that decides it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mpa_emu.stacks import parse_params


@dataclass(frozen=True, slots=True)
class PeerStack:
    """The MPA settings a stack's frames carry."""

    rev: int
    p2p: bool
    crc: bool
    rtr: str
    """Initiator: RTR types offered; responder: the one preferred (PeerOptions.rtr)."""
    max_private_data: int
    """The most private data the stack sends in one frame (the RFC 6581 block aside)."""
    v1_rtr: str = "none"
    """The RTR ("read", "write" or "none") the stack's initiator sends after an MPA v1
    reply: RFC 5044 has no RTR, but irdma and cxgb4 send one at every revision."""
    v1_wait_rtr: bool = False
    """Whether the stack's responder waits for an RTR after accepting a v1 request."""


def peer_stack(stack: str, params: Mapping[str, object] | None = None) -> PeerStack:
    """The settings of ``stack`` with ``params`` (checked by the registry; ValueError
    with one line naming the problem)."""
    p = parse_params(stack, dict(params or {}))
    if stack == "siw":
        # siw_connect: rev mpa_version (at most 2), C with mpa_crc_required, P2P and the
        # rtr_type RTRs with peer_to_peer; siw_proc_mpareq picks Write before Read.
        # Under v1 none: siw_proc_mpareply reads its RTR mode from the v2 block only.
        offered = {0: "none", 1: "write", 2: "read", 3: "both"}[int(p["rtr_type"])]
        return PeerStack(min(int(p["mpa_version"]), 2), bool(p["peer_to_peer"]),
                         bool(p["mpa_crc_required"]), offered, 256)
    if stack == "cxgb4":
        # send_mpa_req / send_mpa_reply: rev mpa_rev, C with crc_enabled, P2P with
        # peer2peer and the RTR of p2p_type (1 Read, 0 Write, else none);
        # MPA_MAX_PRIVATE_DATA 256 and a u8 length through iw_cm leave 255.
        # Under v1, process_mpa_reply / process_mpa_request take p2p_type as the RTR
        # with peer2peer (pre-RFC 6581 Chelsio peer-to-peer); rdma_init has the
        # initiator's firmware send it (build_rtr_msg).
        rtr = {0: "write", 1: "read"}.get(int(p["p2p_type"]), "none")
        # What the responder's firmware does without that RTR is not in the source: it
        # is not waited for.
        return PeerStack(max(int(p["mpa_rev"]), 1), bool(p["peer2peer"]),
                         bool(p["crc_enabled"]), rtr, 255,
                         rtr if p["peer2peer"] else "none")
    # irdma_send_mpa_request / irdma_build_mpa_v2: C always, P2P always, both RTRs
    # offered; irdma_negotiate_mpa_v2_ird_ord picks Read as responder; 512 bytes. Under
    # v1 irdma_cm_event_connected still posts send_rdma0_op's RTR (a zero-length Read:
    # only a v2 negotiation picks Write), and irdma_accept waits for the RTS AE it brings.
    return PeerStack(int(p.get("mpa_rev", 2)), True, True, "both", 512, "read", True)
