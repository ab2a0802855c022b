"""What other layers need to know about siw, from siw_cm.c, siw_cm.h and iwarp.h: the
judge's limits and timers, the CONNECT_REPLY statuses, the MPA framing of a peer that
copies siw, and the capture evidence that names siw alone. The registry's
``STACKS["siw"]`` carries them as typed fields of :class:`~mpa_emu.stacks.base.Stack`."""

from __future__ import annotations

import errno
from collections.abc import Mapping

from mpa_emu.stacks.base import (
    ESTABLISHED_AT_CHOSEN_RTR,
    OVERLAY_CRC_OFF,
    OVERLAY_CRC_ON,
    OVERLAY_MPA_V1,
    OVERLAY_RTR_READ,
    OVERLAY_RTR_WRITE,
    RULED_OUT,
    Fingerprint,
    FlagMark,
    HostConfig,
    Lifecycle,
    MatrixFacts,
    Outcomes,
    PeerFraming,
    ReplayFacts,
    ReplyStatuses,
    StackFacts,
    Texts,
    Weights,
)
from mpa_emu.stacks.siw.params import MPAREP_TIMEOUT_NS, MPAREQ_TIMEOUT_NS
from mpa_emu.wire.mpa import RtrBlock

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
                       "none", False, None)


FINGERPRINT = Fingerprint(
    syn=None,  # a Linux socket: tcp_syn_options, nothing siw's own
    flag=FlagMark(0x08, "sets 0x08 (siw's MPA_RR_FLAG_GSO_EXP, try_gso)", 3),
    revision=None,  # siw_send_mpareqrep: MPA revision 1 or 2 (mpa_version), RFC 5044
    # section 7.1 layout
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
        syn_ts_no_sack=-2,  # a Linux socket: SACK permitted unless tcp_sack is off
        request_send_rtr=RULED_OUT,  # siw_main.c's rtr_type: Read and Write, no Send
        reply_unoffered_rtr=0,
        synack_unasked_mss_ws=0,  # a Linux socket answers so too
        reply_several_rtrs=RULED_OUT,  # siw_proc_mpareq sets the one type it picks
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

REPLAY = ReplayFacts(
    rev_param="mpa_version",
    # siw's Transmit.conn is the socket: replay finds the connection by the ports
    conn_is_node=False,
    # siw_accept: conn_param->ird/ord
    accept_takes_ird_ord=True,
    # siw runs over Linux TCP, its CM and QP in software
    nic_offload=False,
    # the old irdma-based profile names: siw's defaults, and a plain RFC 5044 peer
    # without CRC (siw_connect sends rev 1 with mpa_version 1 and sets C only with
    # mpa_crc_required, off by default)
    aliases={"siw": {}, "mpa-v1": {"mpa_version": 1}},
    auto_labels=("siw", "siw(peer_to_peer=1)", "mpa-v1"),
    # siw_cm_llp_data_ready defers too; its replays keep the timers-first order
    frames_before_due_work=False,
)
"""How replay plays siw."""

MATRIX = MatrixFacts(
    # peer_to_peer: what every RDMA-over-iWARP interop needs (docs/stacks/siw.md)
    named_sets=({"peer_to_peer": True},),
    overlays={
        OVERLAY_MPA_V1: {"mpa_version": 1},
        OVERLAY_CRC_ON: {"mpa_crc_required": True},
        OVERLAY_CRC_OFF: {"mpa_crc_required": False},
        # siw_connect: rtr_type 1 (MPA_V2_RDMA_WRITE_RTR), 2 (MPA_V2_RDMA_READ_RTR),
        # offered only with peer_to_peer; siw never asks for markers
        OVERLAY_RTR_WRITE: {"peer_to_peer": True, "rtr_type": 1},
        OVERLAY_RTR_READ: {"peer_to_peer": True, "rtr_type": 2},
    },
    # siw_query_device: SIW_MAX_IRD_QP
    max_ird=lambda params: 128,
)
"""siw in the matrix."""


def _crc_on(kind: str, config: HostConfig | None) -> str:
    # siw_connect: MPA_RR_FLAG_CRC only with mpa_crc_required; siw_proc_mpareq turns
    # the request's header into the reply in place, C as the request had it.
    return ("sets C (siw_connect: mpa_crc_required)" if kind == "request"
            else "sets C (siw_proc_mpareq answers with the request's flags, C included)")


def _flag_off(flag: str, kind: str) -> str:
    if flag == "C":
        return (" (siw_connect sets C only with mpa_crc_required, off by default)"
                if kind == "request" else
                " (siw_proc_mpareq answers with the request's flags)")
    if flag == "M":
        return " (siw never asks for markers; siw_proc_mpareq rejects a request with M)"
    return ""


def _rtr(kind: str, ours: RtrBlock, theirs: RtrBlock, config: HostConfig | None
         ) -> list[str]:
    out: list[str] = []
    request = kind == "request"
    if (ours.ird, ours.ord) != (theirs.ird, theirs.ord):
        out.append("siw_connect puts the application's IRD/ORD in the block (ORD 0 "
                   "raised to 1 with peer_to_peer)" if request else
                   "siw_accept takes the application's IRD/ORD, the ORD lowered to "
                   "the request's IRD and the IRD raised to its ORD "
                   "(relaxed_ird_negotiation)")
    if (ours.write0, ours.read0, ours.zero_len_send) != (theirs.write0, theirs.read0,
                                                         theirs.zero_len_send):
        out.append("siw_connect offers rtr_type's RTR only with peer_to_peer" if request
                   else "siw_proc_mpareq picks Write when offered, else Read, and "
                   "none without P2P")
    if ours.peer_to_peer != theirs.peer_to_peer:
        out.append("siw_connect sets P2P only with peer_to_peer" if request
                   else "siw_proc_mpareq echoes the request's P2P")
    return out


TEXTS = Texts(
    crc_on=_crc_on, flag_off=_flag_off, rtr=_rtr,
    debug_log="siw: dynamic debug ({fn}, siw_dbg_cep): echo 'module siw +p' > "
              "/sys/kernel/debug/dynamic_debug/control",
    parse_fn="",
    logs={
        "rtr-mismatch": "siw: ... rtr mode:  req %2x, got %2x (siw_dbg_cep, dynamic "
                        "debug)",
        "revision": "siw: ... mpa reply error: vers %d, enhcd %d (siw_dbg_cep, dynamic "
                    "debug)",
        "markers": "siw: ... reject: crc %d:%d:%d, m %d:%d (siw_dbg_cep, dynamic debug)",
        "rejected": "siw: ... got mpa reject (siw_dbg_cep, dynamic debug)",
        "ird-ord": "siw: ... ird %d, rep_ord %d, max_ord %d (siw_dbg_cep, dynamic debug)",
        "extra-bytes": "siw: ... peer sent extra data: %d (siw_dbg_cep, dynamic debug)",
    },
    # siw_cm.h: MPAREQ_TIMEOUT (HZ * 10) while AWAIT_MPAREP, MPAREP_TIMEOUT (HZ * 5)
    # while AWAIT_MPAREQ (siw_cm_queue_work, SIW_CM_WORK_MPATIMEOUT)
    reply_timer_s=MPAREQ_TIMEOUT_NS // 1_000_000_000,
    request_timer_s=MPAREP_TIMEOUT_NS // 1_000_000_000,
)
"""siw's cause texts and kernel log lines (siw_dbg_cep, dynamic debug)."""

OUTCOMES = Outcomes(
    # siw_connect: kernel_bindconnect blocks, so a refused or unanswered SYN fails
    # rdma_connect itself (no CONNECT_REPLY for a RST; the timeout as -ETIMEDOUT)
    syn_refused=None, syn_timeout=-errno.ETIMEDOUT,
    connect_note="siw connects with a blocking kernel_bindconnect: the application's "
                 "rdma_connect fails, no event",
    # a Terminate during set-up: siw_qp_llp_close, -EINVAL to the application
    setup_terminate=-errno.EINVAL,
    # siw_accept with an RTR chosen: wait_for_peer_rts, ESTABLISHED in
    # siw_rtr_data_ready when the peer's first FPDU comes
    responder_established=ESTABLISHED_AT_CHOSEN_RTR,
    rst_retry="",
    tcp_findings=(),
)
"""What siw's applications see where explain tells outcomes apart."""
