"""What other layers need to know about siw, from siw_cm.c, siw_cm.h and iwarp.h: the
judge's limits and timers, the CONNECT_REPLY statuses, the MPA framing of a peer that
copies siw, and the capture evidence that names siw alone. The registry's
``STACKS["siw"]`` carries them as typed fields of :class:`~mpa_emu.stacks.base.Stack`."""

from __future__ import annotations

import errno
from collections.abc import Mapping

from mpa_emu.stacks.base import (
    Fingerprint,
    FlagMark,
    Lifecycle,
    PeerFraming,
    ReplyStatuses,
    StackFacts,
    Weights,
)

FACTS = StackFacts(
    name="siw", title="Soft-iWARP (siw)",
    # siw_recv_mpa_rr: PD_Length > MPA_MAX_PRIVDATA (RDMA_MAX_PRIVATE_DATA, 256).
    max_pd_length=256, pd_limit_fn="siw_recv_mpa_rr",
    reassembles=True, reassembly_fn="siw_recv_mpa_rr",
    # siw_cm.h: MPAREQ_TIMEOUT (HZ * 10) while AWAIT_MPAREP, MPAREP_TIMEOUT (HZ * 5)
    # while AWAIT_MPAREQ (siw_cm_queue_work).
    mpa_timer="siw's MPA timer (siw_cm_work_handler, SIW_CM_WORK_MPATIMEOUT): 10 s "
              "for the initiator awaiting the reply (MPAREQ_TIMEOUT: CONNECT_REPLY "
              "-ETIMEDOUT), 5 s for the responder awaiting the request "
              "(MPAREP_TIMEOUT: the socket is closed, no upcall)",
    mpa_timer_fix="the timers are constants in siw_cm.h (a rebuilt siw changes "
                  "them); make the peer answer in time",
    log_prefix="siw",
)
"""siw's MPA limits and timers (the judge's and the explanations')."""

STATUSES = ReplyStatuses(
    reject=-errno.ECONNRESET, reject_fn="siw_proc_mpareply (\"got mpa reject\")",
    reset=-errno.ECONNRESET,
    reset_fn="siw_cm_work_handler (SIW_CM_WORK_PEER_CLOSE in AWAIT_MPAREP)",
    timeout=-errno.ETIMEDOUT,
    timeout_fn="siw_cm_work_handler (SIW_CM_WORK_MPATIMEOUT in AWAIT_MPAREP)",
)
"""CONNECT_REPLY statuses of a siw initiator."""

_RTR_OFFERED = {0: "none", 1: "write", 2: "read", 3: "both"}


def peer_framing(p: Mapping[str, int | bool]) -> PeerFraming:
    """siw_connect: rev ``mpa_version`` (at most 2), C with ``mpa_crc_required``, P2P and
    the ``rtr_type`` RTRs with ``peer_to_peer``; siw_proc_mpareq picks Write before Read;
    MPA_MAX_PRIVDATA 256. Under v1 no RTR either way: siw_proc_mpareply reads its RTR
    mode from the v2 block only."""
    return PeerFraming(min(int(p["mpa_version"]), 2), bool(p["peer_to_peer"]),
                       bool(p["mpa_crc_required"]), _RTR_OFFERED[int(p["rtr_type"])], 256,
                       "none", False)


FINGERPRINT = Fingerprint(
    syn=None,  # a Linux socket: tcp_syn_options, nothing siw's own
    flag=FlagMark(0x08, "sets 0x08 (siw's MPA_RR_FLAG_GSO_EXP, try_gso)", 3),
    weights=Weights(
        syn_linux_options=1,  # a kernel socket: tcp_syn_options
        syn_mss_ws_only=0,
        no_crc=1,  # siw_connect: C only with mpa_crc_required (off)
        own_crc=0,
        socket_request_crc=-1,  # mpa_crc_required is a constant, off
        mpa_rev1=0,  # siw_main.c: mpa_version 2
        no_p2p=2,  # siw_connect: P2P only with peer_to_peer (off)
        socket_request_p2p=-1,  # peer_to_peer is a constant, off
        request_write_and_read=0,
        request_read_only=0,
        reply_read_over_both=0,
        reply_write_over_both=1,  # siw_proc_mpareq: Write before Read
        bitfield_terminate=3,  # struct iwarp_terminate's C bit-fields (iwarp.h)
        rfc_terminate=-2,
    ),
)
"""MPA_RR_FLAG_GSO_EXP (cpu_to_be16(0x0800): bit 0x08 of the flags byte) when siw is
built with try_gso (siw_connect, siw_accept)."""

LIFECYCLE = Lifecycle(
    # siw_accept and siw_proc_mpareply: SIW_EPSTATE_RDMA_MODE
    connected_state="RDMA_MODE",
    # siw_cm_queue_work: MPAREQ_TIMEOUT (HZ * 10) while AWAIT_MPAREP
    reply_timeout_s=10,
    # SIW_CM_WORK_PEER_CLOSE in AWAIT_MPAREP: CONNECT_REPLY(-ECONNRESET), no retry
    rst_retries_v1=False,
    # siw_qp_cm_drop -> sock_release: tcp_close sends a FIN (a RST only with unread data)
    abort_sends_rst=False,
    # siw_cm_upcall: "Hide MPA V2 IRD/ORD control": the block is not passed up
    upcall_pdata_extra=0,
)
"""siw's connection life where it differs from another stack's."""
