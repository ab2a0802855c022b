"""Why siw's or cxgb4's MPA frame differs from a recorded one, in kernel terms: the rule
(and its function) that set the emulated side's C flag and RFC 6581 block. irdma's own
causes stay in :mod:`mpa_emu.replay.semantic`."""

from __future__ import annotations

from mpa_emu.replay.stacks import StackChoice
from mpa_emu.wire import mpa


def crc_on(stack: StackChoice, kind: str) -> str:
    """Why the emulated side set C where the recording has C=0."""
    if stack.stack == "siw":
        # siw_connect: MPA_RR_FLAG_CRC only with mpa_crc_required; siw_proc_mpareq turns
        # the request's header into the reply in place, C as the request had it.
        return ("siw_connect: mpa_crc_required" if kind == "request"
                else "siw_proc_mpareq answers with the request's flags, C included")
    if stack.stack == "cxgb4":
        # send_mpa_req: MPA_CRC with crc_enabled; process_mpa_request: crc_enabled of
        # the reply is the request's C or the module parameter.
        return ("send_mpa_req: crc_enabled (module parameter, on by default)"
                if kind == "request" else
                "send_mpa_reply: crc_enabled, or the request's C (process_mpa_request)")
    return "the stack's default"


def flag_off(stack: StackChoice, name: str, kind: str) -> str:
    """Why the emulated side's flag ``name`` (M, C) differs where it did not set it."""
    if name == "C" and stack.stack == "siw":
        return (" (siw_connect sets C only with mpa_crc_required, off by default)"
                if kind == "request" else
                " (siw_proc_mpareq answers with the request's flags)")
    if name == "C" and stack.stack == "cxgb4":
        return (" (send_mpa_req sets C only with crc_enabled)" if kind == "request"
                else " (send_mpa_reply: crc_enabled or the request's C)")
    if name == "M" and stack.stack == "siw":
        return " (siw never asks for markers; siw_proc_mpareq rejects a request with M)"
    if name == "M" and stack.stack == "cxgb4":
        return " (send_mpa_req/send_mpa_reply set M only with markers_enabled)"
    return ""


def rtr(stack: StackChoice, kind: str, ours: mpa.RtrBlock, theirs: mpa.RtrBlock
        ) -> list[str]:
    """Why the emulated side's RFC 6581 block differs from the recorded one."""
    out: list[str] = []
    request = kind == "request"
    name = stack.stack
    if (ours.ird, ours.ord) != (theirs.ird, theirs.ord):
        if name == "siw":
            out.append("siw_connect puts the application's IRD/ORD in the block (ORD 0 "
                       "raised to 1 with peer_to_peer)" if request else
                       "siw_accept takes the application's IRD/ORD, the ORD lowered to "
                       "the request's IRD and the IRD raised to its ORD "
                       "(relaxed_ird_negotiation)")
        elif name == "cxgb4":
            out.append("c4iw_connect takes the application's IRD/ORD (ORD 0 raised to 1 "
                       "with peer2peer; send_mpa_req)" if request else
                       "c4iw_accept_cr takes the application's IRD/ORD, adjusted to the "
                       "request's (relaxed IRD negotiation; send_mpa_reply)")
    if (ours.write0, ours.read0, ours.zero_len_send) != (theirs.write0, theirs.read0,
                                                         theirs.zero_len_send):
        if name == "siw":
            out.append("siw_connect offers rtr_type's RTR only with peer_to_peer" if request
                       else "siw_proc_mpareq picks Write when offered, else Read, and "
                       "none without P2P")
        elif name == "cxgb4":
            out.append("send_mpa_req offers p2p_type's RTR (1: Read, 0: Write) only with "
                       "peer2peer" if request else
                       "process_mpa_request keeps the RTR of p2p_type the request offers "
                       "(send_mpa_reply)")
    if ours.peer_to_peer != theirs.peer_to_peer:
        if name == "siw":
            out.append("siw_connect sets P2P only with peer_to_peer" if request
                       else "siw_proc_mpareq echoes the request's P2P")
        elif name == "cxgb4":
            out.append("send_mpa_req sets P2P only with peer2peer" if request
                       else "send_mpa_reply sets P2P with peer2peer and a P2P request")
    return out
