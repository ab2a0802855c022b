"""What other layers need to know about cxgb4, from drivers/infiniband/hw/cxgb4/cm.c: the
judge's limits and timers, the CONNECT_REPLY statuses, the MPA framing of a peer that
copies cxgb4, and the capture evidence that names cxgb4 alone. The registry's
``STACKS["cxgb4"]`` carries them as typed fields of :class:`~mpa_emu.stacks.base.Stack`."""

from __future__ import annotations

import errno
from collections.abc import Mapping

from mpa_emu.stacks.base import (
    ESTABLISHED_AT_REPLY,
    OVERLAY_CRC_OFF,
    OVERLAY_CRC_ON,
    OVERLAY_MARKERS_ON,
    OVERLAY_MPA_V1,
    OVERLAY_RTR_READ,
    OVERLAY_RTR_WRITE,
    RULED_OUT,
    Fingerprint,
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
from mpa_emu.stacks.cxgb4.params import PARAM_SPECS
from mpa_emu.wire.mpa import RtrBlock

_EP_TIMEOUT = int(next(spec[2] for spec in PARAM_SPECS if spec[0] == "ep_timeout_secs"))
"""ep_timeout_secs' default (cm.c)."""

FACTS = StackFacts(
    name="cxgb4", title="Chelsio T4/T5/T6 (iw_cxgb4)",
    # process_mpa_request / process_mpa_reply: plen > MPA_MAX_PRIVATE_DATA (256).
    max_pd_length=256, pd_limit_fn="process_mpa_request, process_mpa_reply",
    reassembles=True, reassembly_fn="process_mpa_request, process_mpa_reply",
    # ep_timeout_secs (module parameter, default 60): ep_timeout -> process_timeout.
    mpa_timer="cxgb4's endpoint timer (ep_timeout -> process_timeout, module "
              "parameter ep_timeout_secs, 60 s by default): CONNECT_REPLY "
              "-ETIMEDOUT for the initiator, an abort for the responder",
    mpa_timer_fix="iw_cxgb4 ep_timeout_secs=N (module parameter) if the peer is "
                  "slow, else make the peer answer",
    log_prefix="iw_cxgb4",
)
"""cxgb4's MPA limits and timers (the judge's and the explanations')."""

STATUSES = ReplyStatuses(
    reject=-errno.ECONNREFUSED, reject_fn="process_mpa_reply (MPA_REJECT)",
    reset=-errno.ECONNRESET, reset_fn="peer_abort / peer_close in MPA_REQ_SENT",
    timeout=-errno.ETIMEDOUT, timeout_fn="process_timeout in MPA_REQ_SENT",
)
"""CONNECT_REPLY statuses of a cxgb4 initiator."""


def peer_framing(p: Mapping[str, int | bool]) -> PeerFraming:
    """send_mpa_req / send_mpa_reply: rev ``mpa_rev``, C with ``crc_enabled``, P2P with
    ``peer2peer`` and the RTR of ``p2p_type`` (1 Read, 0 Write, else none);
    MPA_MAX_PRIVATE_DATA 256 and a u8 length through iw_cm leave 255. Under v1,
    process_mpa_reply / process_mpa_request take ``p2p_type`` as the RTR with
    ``peer2peer`` (pre-RFC 6581 Chelsio peer-to-peer), which rdma_init has the
    initiator's firmware send (build_rtr_msg); what the responder's firmware does
    without it is not in the source, so it is not waited for."""
    rtr = {0: "write", 1: "read"}.get(int(p["p2p_type"]), "none")
    return PeerFraming(max(int(p["mpa_rev"]), 1), bool(p["peer2peer"]),
                       bool(p["crc_enabled"]), rtr, 255,
                       rtr if p["peer2peer"] else "none", False, None)


FINGERPRINT = Fingerprint(
    syn=None,
    flag=None,
    revision=None,  # send_mpa_req/send_mpa_reply: mpa_rev 1 or 2, RFC 5044 layout
    weights=Weights(
        # send_connect / accept_cr: TSTAMPS_EN_F and SACK_EN_F only with
        # enable_tcp_timestamps / enable_tcp_sack (0), WND_SCALE_EN_F by default
        syn_linux_options=-2,
        syn_mss_ws_only=1,
        no_crc=-1,  # send_mpa_req: MPA_CRC with crc_enabled (1)
        own_crc=1,
        socket_request_crc=0,
        mpa_rev1=0,  # mpa_rev 2
        no_p2p=-1,  # send_mpa_req: P2P with peer2peer (1)
        socket_request_p2p=0,
        request_write_and_read=0,
        request_read_only=2,  # p2p_type FW_RI_INIT_P2PTYPE_READ_REQ: the Read RTR only
        reply_read_over_both=0,
        reply_write_over_both=1,  # process_mpa_request: Write before Read
        bitfield_terminate=0,
        rfc_terminate=0,
        # enable_tcp_timestamps without enable_tcp_sack (both off by default)
        syn_ts_no_sack=0,
        request_send_rtr=RULED_OUT,  # send_mpa_req: the one p2p_type RTR (Read or Write)
        reply_unoffered_rtr=0,  # send_mpa_reply: its own p2p_type
        synack_unasked_mss_ws=1,  # its offloaded TCP defaults
        reply_several_rtrs=RULED_OUT,  # send_mpa_reply: the one p2p_type RTR
    ),
)
"""Nothing on the wire names cxgb4 alone (its SYN options follow module parameters,
enable_tcp_timestamps, enable_tcp_sack, enable_tcp_window_scaling; its MPA flags are
RFC 5044's); the weights say what the rest of the evidence says for it."""

LIFECYCLE = Lifecycle(
    # process_mpa_reply and c4iw_accept_cr: FPDU_MODE
    connected_state="FPDU_MODE",
    # start_ep_timer: ep_timeout_secs (module parameter, 60) -> process_timeout
    reply_timeout_s=60,
    # peer_abort in MPA_REQ_SENT with mpa_rev 2, not yet tried with v1:
    # retry_with_mpa_v1, c4iw_reconnect, no upcall
    rst_retries_v1=True,
    # c4iw_ep_disconnect(abrupt) -> send_abort: CPL_ABORT_REQ, a RST
    abort_sends_rst=True,
    # connect_request_upcall / connect_reply_upcall: plen - sizeof(mpa_v2_conn_params)
    upcall_pdata_extra=0,
)
"""cxgb4's connection life where it differs from another stack's."""

REPLAY = ReplayFacts(
    rev_param="mpa_rev",
    # cxgb4's Transmit.conn is the endpoint's socket: replay finds it by the ports
    conn_is_node=False,
    # c4iw_accept_cr: conn_param->ird/ord
    accept_takes_ird_ord=True,
    # the model keeps the endpoint and its QP in software (no NIC model of its own)
    nic_offload=False,
    aliases={},
    # the defaults, peer2peer off (the RTR-less Chelsio default of old), and a v1-only
    # responder that aborts a rev 2 request in process_mpa_request
    auto_labels=("cxgb4", "cxgb4(peer2peer=0)", "cxgb4(mpa_rev=1)"),
    # the offload NIC model handles each segment as it comes
    frames_before_due_work=False,
)
"""How replay plays cxgb4."""

MATRIX = MatrixFacts(
    # peer2peer=0: cxgb4 without the RTR (docs/stacks/cxgb4.md)
    named_sets=({"peer2peer": False},),
    overlays={
        OVERLAY_MPA_V1: {"mpa_rev": 1},
        OVERLAY_CRC_ON: {"crc_enabled": True},
        OVERLAY_CRC_OFF: {"crc_enabled": False},
        OVERLAY_MARKERS_ON: {"markers_enabled": True},
        # send_mpa_req: p2p_type FW_RI_INIT_P2PTYPE_RDMA_WRITE (0) / READ_REQ (1)
        OVERLAY_RTR_WRITE: {"peer2peer": True, "p2p_type": 0},
        OVERLAY_RTR_READ: {"peer2peer": True, "p2p_type": 1},
    },
    # c4iw_query_device: max_qp_rd_atom = c4iw_max_read_depth (module parameter)
    max_ird=lambda params: int(params["c4iw_max_read_depth"]),
)
"""cxgb4 in the matrix."""


def _crc_on(kind: str, config: HostConfig | None) -> str:
    # send_mpa_req: MPA_CRC with crc_enabled; process_mpa_request: crc_enabled of the
    # reply is the request's C or the module parameter.
    return ("sets C (send_mpa_req: crc_enabled (module parameter, on by default))"
            if kind == "request" else
            "sets C (send_mpa_reply: crc_enabled, or the request's C (process_mpa_request))")


def _flag_off(flag: str, kind: str) -> str:
    if flag == "C":
        return (" (send_mpa_req sets C only with crc_enabled)" if kind == "request"
                else " (send_mpa_reply: crc_enabled or the request's C)")
    if flag == "M":
        return " (send_mpa_req/send_mpa_reply set M only with markers_enabled)"
    return ""


def _rtr(kind: str, ours: RtrBlock, theirs: RtrBlock, config: HostConfig | None
         ) -> list[str]:
    out: list[str] = []
    request = kind == "request"
    if (ours.ird, ours.ord) != (theirs.ird, theirs.ord):
        out.append("c4iw_connect takes the application's IRD/ORD (ORD 0 raised to 1 "
                   "with peer2peer; send_mpa_req)" if request else
                   "c4iw_accept_cr takes the application's IRD/ORD, adjusted to the "
                   "request's (relaxed IRD negotiation; send_mpa_reply)")
    if (ours.write0, ours.read0, ours.zero_len_send) != (theirs.write0, theirs.read0,
                                                         theirs.zero_len_send):
        out.append("send_mpa_req offers p2p_type's RTR (1: Read, 0: Write) only with "
                   "peer2peer" if request else
                   "process_mpa_request keeps the RTR of p2p_type the request offers "
                   "(send_mpa_reply)")
    if ours.peer_to_peer != theirs.peer_to_peer:
        out.append("send_mpa_req sets P2P only with peer2peer" if request
                   else "send_mpa_reply sets P2P with peer2peer and a P2P request")
    return out


TEXTS = Texts(
    crc_on=_crc_on, flag_off=_flag_off, rtr=_rtr,
    debug_log="iw_cxgb4: {fn} (KERN_ERR lines, or c4iw_debug=1)",
    parse_fn="",
    logs={
        "rtr-mismatch": "iw_cxgb4: process_mpa_reply: RTR mismatch, sending TERM "
                        "(KERN_ERR)",
        "no-p2p": "iw_cxgb4: process_mpa_reply: RTR mismatch, sending TERM (KERN_ERR)",
        "ird-ord": "iw_cxgb4: process_mpa_reply: Insufficient IRD, sending TERM "
                   "(KERN_ERR)",
        "revision": "iw_cxgb4: process_mpa_req/reply MPA version mismatch. Local = 2, "
                    "Received = N (KERN_ERR)",
    },
    # start_ep_timer in MPA_REQ_SENT and MPA_REQ_WAIT: ep_timeout_secs (module
    # parameter, 60 by default) -> process_timeout
    reply_timer_s=_EP_TIMEOUT, request_timer_s=_EP_TIMEOUT,
)
"""cxgb4's cause texts and kernel log lines (KERN_ERR)."""

OUTCOMES = Outcomes(
    # act_open_rpl: a RST to the SYN -> -ECONNREFUSED (status2errno); the SYN's
    # retries run out -> -ETIMEDOUT
    syn_refused=-errno.ECONNREFUSED, syn_timeout=-errno.ETIMEDOUT, connect_note="",
    # process_mpa_reply's Terminate path: connect_reply_upcall(-ENOMEM)
    setup_terminate=-errno.ENOMEM,
    # c4iw_accept_cr: established_upcall right after send_mpa_reply
    responder_established=ESTABLISHED_AT_REPLY,
    # peer_abort in MPA_REQ_SENT retries with MPA v1 (retry_with_mpa_v1,
    # c4iw_reconnect: new ports), which explain does not tell yet
    rst_retry="",
    tcp_findings=(),
)
"""What cxgb4's applications see where explain tells outcomes apart."""
