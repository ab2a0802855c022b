"""What other layers need to know about erdma, from erdma_cm.c and erdma_cm.h: the
judge's limits and timers, the CONNECT_REPLY statuses, the MPA framing of a peer that
copies erdma, the capture evidence, where its connection life differs, how replay and
the matrix play it, its words in reports and what its applications see. The registry's
``STACKS["erdma"]`` carries them as typed fields of :class:`~mpa_emu.stacks.base.Stack`
(its refusals are :mod:`mpa_emu.stacks.erdma.refusals`)."""

from __future__ import annotations

import errno
from collections.abc import Mapping

from mpa_emu.stacks.base import (
    ESTABLISHED_AT_REPLY,
    OVERLAY_CRC_OFF,
    RULED_OUT,
    Fingerprint,
    FrameExtension,
    HostConfig,
    Lifecycle,
    MatrixFacts,
    Outcomes,
    PeerFraming,
    ReplayFacts,
    ReplyStatuses,
    RevisionMark,
    StackFacts,
    Texts,
    Weights,
)
from mpa_emu.stacks.erdma.params import (
    CONNECT_TIMEOUT_NS,
    ERDMA_MAX_IRD,
    MPAREP_TIMEOUT_NS,
    MPAREQ_TIMEOUT_NS,
)
from mpa_emu.wire.erdma_mpa import EXT_FLAG_CC, EXT_SIZE, MAX_PRIVDATA, REVISION_EXT_1
from mpa_emu.wire.mpa import RtrBlock

_NS = 1_000_000_000

FACTS = StackFacts(
    name="erdma", title="Alibaba Elastic RDMA (erdma)",
    # erdma_recv_mpa_rr: PD_Length > MPA_MAX_PRIVDATA (RDMA_MAX_PRIVATE_DATA, 256) or a
    # revision other than MPA_REVISION_EXT_1 is -EPROTO.
    max_pd_length=MAX_PRIVDATA, pd_limit_fn="erdma_recv_mpa_rr",
    reassembles=True, reassembly_fn="erdma_recv_mpa_rr",
    # erdma_cm_queue_work: MPAREP_TIMEOUT (HZ * 10) in AWAIT_MPAREP, MPAREQ_TIMEOUT
    # (HZ * 20) otherwise; CONNECT_TIMEOUT (HZ * 10) on the TCP handshake.
    mpa_timer="erdma's MPA timer (erdma_cm_work_handler, ERDMA_CM_WORK_MPATIMEOUT): 10 s "
              "for the initiator awaiting the reply (MPAREP_TIMEOUT: CONNECT_REPLY "
              "-ETIMEDOUT), 20 s for the responder awaiting the request "
              "(MPAREQ_TIMEOUT: the socket is closed, no upcall); 10 s on the TCP "
              "handshake (CONNECT_TIMEOUT: CONNECT_REPLY -ETIMEDOUT)",
    mpa_timer_fix="the timers are constants in erdma_cm.h (a rebuilt erdma changes "
                  "them); make the peer answer in time, and in erdma's MPA dialect "
                  "(revision 129 with its extension): erdma takes no other",
    # erdma_cm.c writes no log line of its own (ibdev_* lines come from erdma_main.c)
    log_prefix="erdma",
)
"""erdma's MPA limits and timers (the judge's and the explanations')."""

STATUSES = ReplyStatuses(
    reject=-errno.ECONNRESET,
    reject_fn="erdma_proc_mpareply (MPA_RR_FLAG_REJECT)",
    reset=-errno.ECONNRESET,
    reset_fn="erdma_cm_work_handler (ERDMA_CM_WORK_PEER_CLOSE in AWAIT_MPAREP)",
    timeout=-errno.ETIMEDOUT,
    timeout_fn="erdma_cm_work_handler (ERDMA_CM_WORK_MPATIMEOUT in AWAIT_MPAREP)",
)
"""CONNECT_REPLY statuses of an erdma initiator."""


PEER_COOKIE = 0
"""The cookie a peer framing as erdma writes unless told another: erdma's own is the
QP's (``qp->attrs.iwarp.cookie``, which the device gives at create_qp_cmd), a value no
socket peer has."""


def peer_framing(p: Mapping[str, int | bool]) -> PeerFraming:
    """erdma_newconn_connected: ``bits`` 0 with MPA_REVISION_EXT_1 (129): no C, no M, no
    P2P, no RFC 6581 block, no RTR at any revision (erdma has no other); private data up
    to MPA_MAX_PRIVDATA (256). After the header, ``struct erdma_mpa_ext``
    (:mod:`mpa_emu.wire.erdma_mpa`): the QP's cookie and, in ``bits``, the QP's
    congestion control (``cc``, __mpa_ext_set_cc), in the request
    (erdma_newconn_connected) and the accepting reply (erdma_accept: ``bits`` cleared,
    then the CC). erdma_reject and erdma_proc_mpareq's reject leave ``ext_data`` as
    erdma_recv_mpa_rr read it: the request's own extension goes back. erdma_recv_mpa_rr
    refuses any revision but 129 (-EPROTO, nothing sent)."""
    ext = FrameExtension(cookie=PEER_COOKIE, bits=int(p["cc"]) & EXT_FLAG_CC,
                         reject_echoes_request=True, takes_only_ext=True)
    return PeerFraming(REVISION_EXT_1, False, False, "none", MAX_PRIVDATA, "none", False,
                       ext)


FINGERPRINT = Fingerprint(
    syn=None,  # a kernel socket (erdma_connect: sock_create): tcp_syn_options
    flag=None,  # erdma sets no flag bit of its own; its mark is the revision
    revision=RevisionMark(REVISION_EXT_1, EXT_SIZE,
                          "of revision 129 with an 8-byte extension after the header "
                          "(erdma_send_mpareqrep: MPA_REVISION_EXT_1, struct erdma_mpa_ext)",
                          6),
    weights=Weights(
        syn_linux_options=1,  # kernel_bindconnect on a kernel socket
        syn_mss_ws_only=0,
        no_crc=1,  # erdma_newconn_connected: bits 0, C never set
        own_crc=-3,  # erdma_proc_mpareq/erdma_proc_mpareply refuse C
        socket_request_crc=-3,
        mpa_rev1=-3,  # erdma speaks revision 129 only (erdma_recv_mpa_rr)
        no_p2p=RULED_OUT,  # erdma sends no RFC 6581 block at all
        socket_request_p2p=-3,
        request_write_and_read=-3,
        request_read_only=-3,
        reply_read_over_both=-3,
        reply_write_over_both=-3,
        bitfield_terminate=0,  # the device's Terminate is not in the driver
        rfc_terminate=0,
        syn_ts_no_sack=-2,  # a Linux socket (erdma_connect: sock_create): SACK permitted
        request_send_rtr=RULED_OUT,  # no RFC 6581 block at all
        reply_unoffered_rtr=0,
        synack_unasked_mss_ws=0,  # a Linux socket answers so too
        reply_several_rtrs=RULED_OUT,
    ),
)
"""erdma's evidence: a Linux socket's SYN and MPA frames of revision 129."""

LIFECYCLE = Lifecycle(
    # erdma_accept and erdma_proc_mpareply: ERDMA_EPSTATE_RDMA_MODE
    connected_state="RDMA_MODE",
    # erdma_cm_queue_work: MPAREP_TIMEOUT (HZ * 10) while AWAIT_MPAREP
    reply_timeout_s=10,
    # ERDMA_CM_WORK_PEER_CLOSE in AWAIT_MPAREP: CONNECT_REPLY(-ECONNRESET), no retry
    rst_retries_v1=False,
    # erdma_qp_cm_drop -> sock_release: a FIN (the parameter abort_sends_rst says else)
    abort_sends_rst=False,
    # erdma_cm_upcall passes PD_Length bytes of mpa.pdata: nothing added
    upcall_pdata_extra=0,
)
"""erdma's connection life where it differs from another stack's."""

REPLAY = ReplayFacts(
    # erdma has no revision parameter: erdma_newconn_connected always writes
    # MPA_REVISION_EXT_1 (129), so --mpa-rev has nothing to set
    rev_param="",
    # erdma's Transmit.conn is the kernel socket's (erdma_connect: sock_create;
    # erdma_accept_newconn: kernel_accept): replay finds the connection by the ports
    conn_is_node=False,
    # erdma_accept: cep->ird/ord and the QP's irq_size/orq_size from params->ird/ord
    accept_takes_ird_ord=True,
    # the model keeps the kernel socket's TCP past RTS (erdma_modify_qp_state_to_rts
    # hands it to the device, whose side is not in the driver): no NIC model
    nic_offload=False,
    aliases={},
    # the defaults, then a responder whose device runs another congestion control
    # (the CC of the extension's bits, __mpa_ext_set_cc)
    auto_labels=("erdma", "erdma(cc=1)"),
    # erdma_cm_llp_data_ready queues READ_MPAHDR: the reject's FIN is read with it
    frames_before_due_work=True,
)
"""How replay plays erdma."""

MATRIX = MatrixFacts(
    # cc=1 (Cubic, COMPROMISE_CC): two devices of different congestion control, which
    # erdma_accept and erdma_proc_mpareply settle on Cubic (docs/stacks/erdma.md)
    named_sets=({"cc": 1},),
    overlays={
        # erdma_newconn_connected clears the bits and sets MPA_REVISION_EXT_1: no
        # revision to choose, no C, no M; erdma_proc_mpareq refuses M and C; no RFC 6581
        # block, so no RTR. The one overlay erdma has is the one it always is: no CRC.
        OVERLAY_CRC_OFF: {},
    },
    # erdma_dev_attrs_init: max_ird = ERDMA_MAX_IRD, max_ord = ERDMA_MAX_ORD (128 each,
    # erdma_verbs.h), what erdma_connect and erdma_accept check and erdma_cm_upcall
    # reports in CONNECT_REQUEST
    max_ird=lambda params: ERDMA_MAX_IRD,
)
"""erdma in the matrix."""


def _crc_on(kind: str, config: HostConfig | None) -> str:
    # erdma_newconn_connected: bits = 0 (C cleared); erdma_proc_mpareq refuses a request
    # with C (reject_conn, C cleared), so an accepting reply never carries it either.
    del config
    return ("sets C, which erdma never does (erdma_newconn_connected clears the bits)"
            if kind == "request" else
            "sets C, which erdma never does (erdma_proc_mpareq rejects a request with C)")


def _flag_off(flag: str, kind: str) -> str:
    if flag == "C":
        return (" (erdma never sets C: erdma_newconn_connected clears the bits)"
                if kind == "request" else
                " (erdma never sets C: erdma_proc_mpareq rejects a request with C, "
                "clearing it)")
    if flag == "M":
        return (" (erdma never asks for markers: erdma_newconn_connected clears the bits)"
                if kind == "request" else
                " (erdma never asks for markers: erdma_proc_mpareq rejects a request "
                "with M, clearing it)")
    return ""


def _rtr(kind: str, ours: RtrBlock, theirs: RtrBlock, config: HostConfig | None
         ) -> list[str]:
    # erdma_send_mpareqrep writes no RFC 6581 block (struct erdma_mpa_ext instead): an
    # emulated erdma frame has none to differ.
    del kind, ours, theirs, config
    return []


TEXTS = Texts(
    crc_on=_crc_on, flag_off=_flag_off, rtr=_rtr,
    # erdma_cm.c has no pr_*, ibdev_* or dynamic-debug line (its only message is the
    # WARN of an undefined work type in erdma_cm_work_handler)
    debug_log="erdma: none ({fn} logs nothing: erdma_cm.c writes no kernel log line, "
              "and has no debug output to enable; the rdma_cm event of the "
              "initiator's application is what there is)",
    parse_fn="erdma_recv_mpa_rr",
    logs={},
    # erdma_cm_queue_work, ERDMA_CM_WORK_MPATIMEOUT: MPAREP_TIMEOUT (HZ * 10) for an
    # endpoint in AWAIT_MPAREP (erdma_newconn_connected: the initiator awaiting the
    # reply), MPAREQ_TIMEOUT (HZ * 20) otherwise (erdma_accept_newconn: AWAIT_MPAREQ,
    # the responder awaiting the request): the names read backwards
    reply_timer_s=MPAREP_TIMEOUT_NS // _NS,
    request_timer_s=MPAREQ_TIMEOUT_NS // _NS,
)
"""erdma's cause texts (it writes no kernel log line)."""

OUTCOMES = Outcomes(
    # erdma_connect: kernel_bindconnect with O_NONBLOCK (-EINPROGRESS), so a TCP failure
    # is an upcall: a RST to the SYN is TCP_CLOSE (erdma_cm_llp_state_change), PEER_CLOSE
    # in CONNECTING: CONNECT_REPLY -ECONNRESET (erdma_cm_work_handler); no SYN-ACK
    # within CONNECT_TIMEOUT (HZ * 10, long before the SYN's retries run out):
    # CONNECTTIMEOUT in CONNECTING, CONNECT_REPLY -ETIMEDOUT
    syn_refused=-errno.ECONNRESET, syn_timeout=-errno.ETIMEDOUT,
    connect_note="erdma connects without blocking (erdma_connect: kernel_bindconnect "
                 "with O_NONBLOCK): the failure comes as CONNECT_REPLY "
                 "(erdma_cm_work_handler), after CONNECT_TIMEOUT "
                 f"({CONNECT_TIMEOUT_NS // _NS} s) when no SYN-ACK comes",
    # No RTR: erdma_proc_mpareply gives CONNECT_REPLY 0 as it takes the reply, before
    # the initiator's device sends any FPDU; a Terminate comes after it
    setup_terminate=0,
    # erdma_accept: IW_CM_EVENT_ESTABLISHED right after erdma_send_mpareqrep
    responder_established=ESTABLISHED_AT_REPLY,
    # PEER_CLOSE in AWAIT_MPAREP: CONNECT_REPLY -ECONNRESET, no retry
    rst_retry="",
    # a Linux socket's TCP (and the device's after RTS, not in the driver)
    tcp_findings=(),
)
"""What erdma's applications see where explain tells outcomes apart."""
