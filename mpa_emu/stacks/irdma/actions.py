"""The bodies of the transition table's rows, as plain functions over the core.

Every action has the signature ``action(cm, node, row, rx) -> Outcome`` (see
:mod:`mpa_emu.stacks.irdma.contract`): ``cm`` is the core seen through
:class:`~mpa_emu.stacks.irdma.contract.CoreOps`, ``row`` the row being run (its ``kernel_fn``
names the trace records), ``rx`` the segment or the verb's arguments. An action does
what the kernel's case does, in the kernel's order, and returns :data:`GO_ON` unless
the kernel function reports an error to its caller. The state changes an action makes
are the only ones a node ever sees; the core checks the result against the row.

The helpers in the first section are the cm.c functions several cases share
(``irdma_active_open_err``, ``irdma_passive_open_err``, ``irdma_handle_tcp_options``,
the application of ``irdma_parse_mpa``).
"""

from __future__ import annotations

from errno import ECONNRESET, EINVAL

from mpa_emu.errors import MpaEmuError
from mpa_emu.stacks.contract.errors import CmError, errno_name
from mpa_emu.stacks.irdma import log_lines, send
from mpa_emu.stacks.irdma.contract import GO_ON, STOP, CoreOps, Outcome, Row, Rx, VerbArgs
from mpa_emu.stacks.irdma.mpa_policy import MpaParseError, Negotiated, parse_mpa
from mpa_emu.stacks.irdma.node import CmNode, rdma0_code
from mpa_emu.stacks.irdma.offload.nic import HwQp
from mpa_emu.stacks.irdma.states import (
    CM_CLOSED,
    CM_CLOSING,
    CM_ESTABLISHED,
    CM_EVENT_ABORTED,
    CM_EVENT_CONNECTED,
    CM_EVENT_MPA_REJECT,
    CM_EVENT_MPA_REQ,
    CM_EVENT_UNKNOWN,
    CM_FIN_WAIT1,
    CM_FIN_WAIT2,
    CM_LAST_ACK,
    CM_LISTENER_DESTROYED,
    CM_LISTENING,
    CM_MPAREJ_RCVD,
    CM_MPAREQ_RCVD,
    CM_MPAREQ_SENT,
    CM_OFFLOADED,
    CM_SYN_RCVD,
    CM_SYN_SENT,
    CM_TIME_WAIT,
    IN_MPA,
    IN_SYN,
    SEND_RESET_EVENT,
)
from mpa_emu.stacks.irdma.tcp import process_options
from mpa_emu.stacks.irdma.upcalls import accept_complete, accept_failed, create_event, init_tsa_conn
from mpa_emu.wire.interning import shared_bytes
from mpa_emu.wire.segment import ACK, FIN, SYN, Segment
from mpa_emu.wire.seq import MASK as MASK32


class KernelHang(MpaEmuError):
    """``irdma_process_options`` would spin forever on this segment (a zero-length
    option, ``Quirks.zero_len_option_loop``)."""


# ---- shared cm.c helpers ------------------------------------------------------------

def active_open_err(cm: CoreOps, node: CmNode, *, reset: bool) -> None:
    """``irdma_active_open_err``: stop resending, maybe RST, CLOSED, ABORTED event."""
    send.cleanup(cm, node)
    cm.stats["connect_errs"] += 1
    old = node.state.name
    if reset:
        if cm.trace is not None:
            log_lines.emit(cm, log_lines.ACTIVE_OPEN_ERR, log_lines.node_ptr(cm, node),
                           int(node.state), conn=node.conn)
        send.send_reset_held(cm, node, f"irdma_send_reset: irdma_active_open_err "
                                       f"{old} -> CLOSED")
    cm.base.set_state(node, CM_CLOSED, "irdma_active_open_err", node.conn)
    create_event(cm, node, CM_EVENT_ABORTED)


def passive_open_err(cm: CoreOps, node: CmNode, *, reset: bool) -> None:
    """``irdma_passive_open_err``: CLOSED, then RST (consuming the reference) or put."""
    send.cleanup(cm, node)
    cm.stats["passive_errs"] += 1
    old = node.state.name
    cm.base.set_state(node, CM_CLOSED, "irdma_passive_open_err", node.conn)
    if cm.trace is not None:
        log_lines.emit(cm, log_lines.PASSIVE_OPEN_ERR, log_lines.node_ptr(cm, node),
                       int(node.state), conn=node.conn)
    if reset:
        if not send.send_reset(cm, node, f"irdma_send_reset: irdma_passive_open_err "
                                         f"{old} -> CLOSED"):
            # Unless another put follows (the SYN path does one), the node stays.
            cm._record_leak(node, "irdma_passive_open_err: RST not sent (no AH), its "
                           "reference is not consumed: CLOSED node with a leaked reference")
    else:
        cm._rem_ref(node)


def tcp_options(cm: CoreOps, node: CmNode, seg: Segment, *, passive: bool) -> bool:
    """``irdma_handle_tcp_options``; True on error (after the kernel's open error)."""
    st = node.settings
    if seg.options:
        if cm.trace is not None:
            log_lines.option_lines(cm, node, seg.options)
        res = process_options(seg.options, syn=bool(seg.flags & SYN), ipv4=node.ipv4,
                              mss=st.mss, snd_wscale=st.snd_wscale)
        if res.hang and cm.config.quirks.zero_len_option_loop:
            raise KernelHang(res.error)
        if res.error is not None:
            if cm.trace is not None:
                log_lines.emit(cm, log_lines.OPTIONS_RESET, log_lines.node_ptr(cm, node),
                               conn=node.conn)
            cm._drop(seg, "irdma_process_options", res.error, node)
            if passive:
                passive_open_err(cm, node, reset=True)
            else:
                active_open_err(cm, node, reset=True)
            return True
        mss, snd_wscale = res.mss, res.snd_wscale
    else:
        mss, snd_wscale = st.mss, st.snd_wscale
    node.record_tcp_options(mss, snd_wscale, (seg.window << (snd_wscale & 31)) & MASK32)
    return False


def parse(cm: CoreOps, node: CmNode, seg: Segment, initiator: bool) -> bool | None:
    """``irdma_parse_mpa`` applied to the node: the frame's R (reject) flag, or None
    after the error reaction (the open error with a RST)."""
    cfg = cm.config
    st = node.settings
    res = parse_mpa(seg.payload, node_rev=st.mpa_frame_rev, initiator=initiator,
                    ird_size=st.ird_size, ord_size=st.ord_size,
                    mpav2_ird_ord=st.mpav2_ird_ord, send_rdma0_op=st.send_rdma0_op,
                    require_p2p=cfg.p2p, prefer=cm.prefer, tail=cfg.quirks.v2_pdata_tail)
    if isinstance(res, MpaParseError):
        if res.step > 4:
            node.update_settings(mpa_frame_rev=seg.payload[17])
        if res.negotiated is not None:
            # irdma_negotiate_mpa_v2_ird_ord changed the node before failing; the
            # abort upcall (irdma_get_cmevent_info) reports these values
            apply_negotiated(node, res.negotiated)
        if cm.trace is not None and res.step <= len(log_lines.PARSE_MPA):
            parse_mpa_line(cm, node, seg.payload, res.step)
        cm._drop(seg, "irdma_parse_mpa",
                 f"step {res.step}: {res.reason} (-{errno_name(res.errno)})", node)
        if initiator:
            active_open_err(cm, node, reset=True)
        else:
            passive_open_err(cm, node, reset=True)
        return None
    if res.markers and not initiator and not cfg.accept_markers:
        cm._drop(seg, "irdma_parse_mpa", "M flag set and the profile refuses markers", node)
        passive_open_err(cm, node, reset=True)
        return None
    # shared: 100,000 connections with the same private data hold one copy
    node.pdata = shared_bytes(res.private_data if (cfg.quirks.v2_pdata_plus4 or res.rev == 1)
                              else res.user_data)
    node.record_mpa(res.rev, len(node.pdata), res.negotiated)
    if res.negotiated is not None and cm.trace is not None:
        st = node.settings
        log_lines.emit(cm, log_lines.NEGOTIATED, st.ord_size, st.ird_size,
                       conn=node.conn)
        cm.base.record("mpa_negotiated", "irdma_negotiate_mpa_v2_ird_ord", conn=node.conn,
                       ird=st.ird_size, ord=st.ord_size, rtr=st.send_rdma0_op.value)
    if res.reject and not initiator and node.state == CM_ESTABLISHED \
            and cm.trace is not None:
        log_lines.emit(cm, log_lines.STATE_FOR_REJECT, conn=node.conn)
    if res.markers:
        node.snd_mark_en = True
    return res.reject


def parse_mpa_line(cm: CoreOps, node: CmNode, payload: bytes, step: int) -> None:
    """The line ``irdma_parse_mpa`` logs as its check ``step`` (1 to 7) fails."""
    length = len(payload)
    pd_length = int.from_bytes(payload[18:20], "big") if length >= 20 else 0
    rev = payload[17] if length > 17 else 0
    args: tuple[int, ...] = {1: (length,), 2: (pd_length,), 3: (rev,), 4: (rev,), 5: (),
                             6: (pd_length, 20, length), 7: (length,)}[step]
    log_lines.emit(cm, log_lines.PARSE_MPA[step - 1], *args, conn=node.conn)


def apply_negotiated(node: CmNode, neg: Negotiated) -> None:
    """Store the IRD/ORD and RTR type ``irdma_negotiate_mpa_v2_ird_ord`` settled on."""
    node.update_settings(ird_size=neg.ird_size, ord_size=neg.ord_size,
                         mpav2_ird_ord=neg.mpav2_ird_ord,
                         rdma0_write=rdma0_code(neg.send_rdma0_op))


def _seg(rx: Rx) -> Segment:
    assert isinstance(rx, Segment), "a packet row runs with its segment"
    return rx


def _pdata(rx: Rx) -> bytes:
    assert isinstance(rx, VerbArgs), "a verb row runs with the verb's arguments"
    return rx.private_data


# ---- rows shared by many states -------------------------------------------------------

def ignore(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """The kernel's explicit "nothing to do" cases: the segment is dropped."""
    if r.kernel_fn == "irdma_handle_fin_pkt" and cm.trace is not None:
        log_lines.emit(cm, log_lines.FIN_BAD_STATE, int(node.state), conn=node.conn)
    if isinstance(rx, Segment):
        cm._drop(rx, r.kernel_fn, f"{node.state.name}: {r.note}", node)
    return GO_ON


def misuse(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """A verb in a state it cannot run in: the verb fails, nothing changes."""
    raise CmError(EINVAL, f"{r.kernel_fn} in state {node.state.name}")


def cleanup(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_cleanup_retrans_entry`` only; payload is neither taken nor ACKed."""
    send.cleanup(cm, node)
    if isinstance(rx, Segment) and rx.payload:
        cm._drop(rx, r.kernel_fn, f"{node.state.name}: payload ignored, not ACKed", node)
    return GO_ON


def active_open_err_reset(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_active_open_err(reset=1)``."""
    active_open_err(cm, node, reset=True)
    return GO_ON


def active_open_err_quiet(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_active_open_err(reset=0)``."""
    active_open_err(cm, node, reset=False)
    return GO_ON


def passive_open_err_reset(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_passive_open_err(reset=1)``; in MPAREQ_RCVD the application still holds
    the node (``irdma_handle_synack_pkt`` does not tell it)."""
    if node.state == CM_MPAREQ_RCVD:
        cm.base.record("kernel_bug", r.kernel_fn, conn=node.conn,
                       reason="node freed while the application holds it: a later accept/reject "
                       "is a use-after-free (irdma_handle_synack_pkt, MPAREQ_RCVD case)")
    passive_open_err(cm, node, reset=True)
    return GO_ON


def passive_open_err_quiet(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_passive_open_err(reset=0)``: CLOSED and freed, no upcall."""
    passive_open_err(cm, node, reset=False)
    return GO_ON


def reset_again(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """A CLOSED node hit again: cleanup, another RST on an extra reference."""
    send.cleanup(cm, node)
    send.send_reset_held(cm, node, f"irdma_send_reset: {r.kernel_fn} CLOSED")
    return GO_ON


def free_closed(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """Cleanup, CLOSED, drop the base reference."""
    send.cleanup(cm, node)
    cm.base.set_state(node, CM_CLOSED, r.kernel_fn, node.conn)
    cm._rem_ref(node)
    return GO_ON


# ---- irdma_handle_syn_pkt and the qhash completion --------------------------------------

def listen_syn(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """A node ``irdma_receive_ilq`` just made for a SYN on a listener: LISTENING, then
    the SYN is processed in that state (``irdma_process_pkt`` -> the LISTENING case of
    ``irdma_handle_syn_pkt``)."""
    cm.base.set_state(node, CM_LISTENING, "irdma_receive_ilq", node.conn)
    return cm._dispatch(node, IN_SYN, rx)


def passive_open(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_handle_syn_pkt`` in LISTENING: backlog, options, SYN_RCVD; the SYN-ACK
    waits for the conn-established qhash (``cm_create_ah(wait=false)`` on GEN_2,
    ``irdma_add_qh`` on GEN_1), whose completion holds a node reference."""
    seg = _seg(rx)
    lst = node.settings.listener
    assert lst is not None
    if lst.pend_accepts_cnt > lst.backlog:
        cm.stats["backlog_drops"] += 1
        cm._drop(seg, r.kernel_fn, f"backlog: pend_accepts_cnt {lst.pend_accepts_cnt} > "
                f"backlog {lst.backlog}", node)
        passive_open_err(cm, node, reset=False)
        return GO_ON
    if tcp_options(cm, node, seg, passive=True):
        passive_open_err(cm, node, reset=False)
        return GO_ON
    node.rcv_nxt = (seg.seq + 1) & MASK32
    node.accept_pend = True
    lst.pend_accepts_cnt += 1
    cm.base.set_state(node, CM_SYN_RCVD, r.kernel_fn, node.conn)
    node.refcnt += 1
    node.qhash_pending = True
    latency = cm.config.ah_latency_ns
    if latency <= 0:
        cm._post(node, None)
    else:
        cm.deferred.add(cm.base.now_ns + latency, "qhash", node)
    return GO_ON


def send_synack(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_send_syn_cqp_callback``: the SYN-ACK, whatever the state the node
    reached meanwhile (the callback does not look)."""
    if cm.config.gen == 2:
        node.ah_valid = not cm.config.ah_create_fails
    node.qhash_set = True
    send.send_syn(cm, node, True, f"irdma_send_syn: {node.state.name} "
                                  "(SYN|ACK from irdma_send_syn_cqp_callback)")
    return GO_ON


# ---- irdma_handle_synack_pkt --------------------------------------------------------------

def _set_rem_ack(node: CmNode, ack: int) -> None:
    # Usually the peer acknowledges all we sent: then one int object serves both fields
    # (an int above 256 is an object of its own, 32 bytes a connection).
    node.rem_ack_num = node.loc_seq_num if ack == node.loc_seq_num else ack


def synack_active_open(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_handle_synack_pkt`` in SYN_SENT: ``irdma_check_syn``, options, ACK and
    the MPA request."""
    seg = _seg(rx)
    send.cleanup(cm, node)
    if seg.ack != node.loc_seq_num:
        cm._drop(seg, "irdma_check_syn",
                f"SYN-ACK ack {seg.ack} != loc_seq_num {node.loc_seq_num}", node)
        active_open_err(cm, node, reset=True)
        if cm.trace is not None:
            log_lines.emit(cm, log_lines.CHECK_SYN_FAIL, conn=node.conn)
        return GO_ON
    _set_rem_ack(node, seg.ack)
    if tcp_options(cm, node, seg, passive=False):
        return GO_ON
    send.cleanup(cm, node)
    node.rcv_nxt = (seg.seq + 1) & MASK32
    send.send_ack(cm, node, "irdma_send_ack: SYN_SENT -> MPAREQ_SENT")
    if not send.send_mpa_request(cm, node, "irdma_send_mpa_request: SYN_SENT -> "
                                           "MPAREQ_SENT"):
        # irdma_handle_synack_pkt ignores irdma_send_mpa_request's error: the node
        # stays in SYN_SENT with no timer and nothing is reported
        return GO_ON
    cm.base.set_state(node, CM_MPAREQ_SENT, r.kernel_fn, node.conn)
    return GO_ON


def synack_reset_closed(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """SYN-ACK on a LISTENING node: ``loc_seq_num = ack``, CLOSED, RST."""
    node.loc_seq_num = _seg(rx).ack
    send.cleanup(cm, node)
    cm.base.set_state(node, CM_CLOSED, r.kernel_fn, node.conn)
    send.send_reset(cm, node, f"irdma_send_reset: {r.kernel_fn} LISTENING -> CLOSED")
    return GO_ON


def synack_reset_again(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """SYN-ACK on a CLOSED node: ``loc_seq_num = ack``, another RST."""
    node.loc_seq_num = _seg(rx).ack
    return reset_again(cm, node, r, rx)


# ---- irdma_handle_ack_pkt and irdma_handle_rcv_mpa ----------------------------------------

def ack_reset_closed(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """ACK on a LISTENING node: cleanup, CLOSED, RST."""
    send.cleanup(cm, node)
    cm.base.set_state(node, CM_CLOSED, r.kernel_fn, node.conn)
    send.send_reset(cm, node, f"irdma_send_reset: {r.kernel_fn} LISTENING -> CLOSED")
    return GO_ON


def fin_wait1_acked(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """Our FIN acknowledged: FIN_WAIT2 (which has no timer)."""
    send.cleanup(cm, node)
    cm.base.set_state(node, CM_FIN_WAIT2, r.kernel_fn, node.conn)
    return GO_ON


def syn_rcvd_ack(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """The third handshake ACK, maybe carrying the MPA request: ESTABLISHED, then the
    payload goes to ``irdma_handle_rcv_mpa`` (the ``MPA`` row of ESTABLISHED). An
    option error stops the segment (its FIN is not processed)."""
    seg = _seg(rx)
    send.cleanup(cm, node)
    if tcp_options(cm, node, seg, passive=True):
        return STOP
    _set_rem_ack(node, seg.ack)
    cm.base.set_state(node, CM_ESTABLISHED, r.kernel_fn, node.conn)
    if seg.payload:
        node.rcv_nxt = (seg.seq + len(seg.payload)) & MASK32
        cm._dispatch(node, IN_MPA, seg)
    return GO_ON


def mpareq_acked(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """A pure ACK of our MPA request: ``ack_rcvd``, resends stop, the countdown not."""
    _set_rem_ack(node, _seg(rx).ack)
    node.ack_rcvd = True
    return GO_ON


def established_data(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """Data in ESTABLISHED: ``rcv_nxt`` past it, then ``irdma_handle_rcv_mpa``."""
    seg = _seg(rx)
    send.cleanup(cm, node)
    node.rcv_nxt = (seg.seq + len(seg.payload)) & MASK32
    cm._dispatch(node, IN_MPA, seg)
    return GO_ON


def mpareq_sent_data(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """Data in MPAREQ_SENT (the reply): ``ack_rcvd`` cleared, ``irdma_handle_rcv_mpa``."""
    seg = _seg(rx)
    _set_rem_ack(node, seg.ack)
    node.rcv_nxt = (seg.seq + len(seg.payload)) & MASK32
    node.ack_rcvd = False
    cm._dispatch(node, IN_MPA, seg)
    return GO_ON


def mpa_request(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_handle_rcv_mpa`` in ESTABLISHED: the MPA request -> MPAREQ_RCVD, ACK,
    CONNECT_REQUEST; a bad frame is the passive open error with a RST."""
    seg = _seg(rx)
    reject = parse(cm, node, seg, initiator=False)
    if reject is None:
        return GO_ON
    if reject:
        cm.base.record("mpa_note", r.kernel_fn, conn=node.conn,
                       reason="R flag on a request: logged and ignored")
    cm.base.set_state(node, CM_MPAREQ_RCVD, r.kernel_fn, node.conn)
    send.send_ack(cm, node, "irdma_send_ack: ESTABLISHED -> MPAREQ_RCVD")
    node.update_settings(passive_state=0)
    create_event(cm, node, CM_EVENT_MPA_REQ)
    return GO_ON


def mpa_reply(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_handle_rcv_mpa`` in MPAREQ_SENT: the reply (OFFLOADED, CONNECTED) or
    the reject (MPAREJ_RCVD, MPA_REJECT), ACKed either way."""
    seg = _seg(rx)
    reject = parse(cm, node, seg, initiator=True)
    if reject is None:
        return GO_ON
    send.cleanup(cm, node)
    if reject:
        cm.base.set_state(node, CM_MPAREJ_RCVD, r.kernel_fn, node.conn)
        etype = CM_EVENT_MPA_REJECT
        comment = "irdma_send_ack: MPAREQ_SENT -> MPAREJ_RCVD"
    else:
        cm.base.set_state(node, CM_OFFLOADED, r.kernel_fn, node.conn)
        etype = CM_EVENT_CONNECTED
        comment = "irdma_send_ack: MPAREQ_SENT -> OFFLOADED"
    send.send_ack(cm, node, comment)
    create_event(cm, node, etype)
    return GO_ON


def mpa_unexpected(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """An MPA frame in another state: parsed (a bad one still resets), then its event
    type is UNKNOWN and ``irdma_cm_event_handler`` drops it."""
    seg = _seg(rx)
    if parse(cm, node, seg, initiator=False) is not None:
        if cm.trace is not None:
            # irdma_create_event(UNKNOWN) is queued and irdma_cm_event_handler says so
            log_lines.emit(cm, log_lines.WRONG_STATE, int(node.state), conn=node.conn)
            if node.cm_id:
                log_lines.create_event(cm, node, int(CM_EVENT_UNKNOWN))
                log_lines.emit(cm, log_lines.BAD_EVENT_TYPE, int(CM_EVENT_UNKNOWN),
                               conn=node.conn)
        cm._drop(seg, r.kernel_fn, f"MPA frame in {node.state.name}: event UNKNOWN "
                "(bad event type)", node)
    return GO_ON


# ---- irdma_handle_fin_pkt -------------------------------------------------------------------

def fin_to_last_ack(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """The peer closes first: ``rcv_nxt++``, LAST_ACK, our FIN (retransmitted)."""
    old = node.state.name
    node.rcv_nxt = (node.rcv_nxt + 1) & MASK32
    send.cleanup(cm, node)
    cm.base.set_state(node, CM_LAST_ACK, r.kernel_fn, node.conn)
    send.send_fin(cm, node, f"irdma_send_fin: {old} -> LAST_ACK")
    return GO_ON


def fin_abort(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """FIN while our MPA request waits: ABORTED, CLOSED, RST."""
    create_event(cm, node, CM_EVENT_ABORTED)
    node.rcv_nxt = (node.rcv_nxt + 1) & MASK32
    send.cleanup(cm, node)
    cm.base.set_state(node, CM_CLOSED, r.kernel_fn, node.conn)
    send.send_reset_held(cm, node, "irdma_send_reset: irdma_handle_fin_pkt "
                                   "MPAREQ_SENT -> CLOSED")
    return GO_ON


def fin_simultaneous(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """FIN in FIN_WAIT1: CLOSING and an ACK (no retransmission entry is left)."""
    node.rcv_nxt = (node.rcv_nxt + 1) & MASK32
    send.cleanup(cm, node)
    cm.base.set_state(node, CM_CLOSING, r.kernel_fn, node.conn)
    send.send_ack(cm, node, "irdma_send_ack: FIN_WAIT1 -> CLOSING")
    return GO_ON


def fin_time_wait(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """FIN in FIN_WAIT2: TIME_WAIT, ACK, a close entry in ``HZ/10``."""
    node.rcv_nxt = (node.rcv_nxt + 1) & MASK32
    send.cleanup(cm, node)
    cm.base.set_state(node, CM_TIME_WAIT, r.kernel_fn, node.conn)
    send.send_ack(cm, node, "irdma_send_ack: FIN_WAIT2 -> TIME_WAIT")
    send.schedule_close(cm, node)
    return GO_ON


def fin_again_free(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """A second FIN in TIME_WAIT: freed at once, not ACKed."""
    node.rcv_nxt = (node.rcv_nxt + 1) & MASK32
    send.cleanup(cm, node)
    cm.base.set_state(node, CM_CLOSED, r.kernel_fn, node.conn)
    cm._rem_ref(node)
    return GO_ON


# ---- irdma_handle_rst_pkt -------------------------------------------------------------------

def rst_active(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """RST in SYN_SENT/MPAREQ_SENT: at MPA v2 a new SYN at v1 on the same 4-tuple
    (``Quirks.mpa_v1_fallback``); at v1 the active open error."""
    if node.settings.mpa_frame_rev == 2 and cm.config.quirks.mpa_v1_fallback:
        old = node.state.name
        node.update_settings(mpa_frame_rev=1)
        cm.base.set_state(node, CM_SYN_SENT, r.kernel_fn, node.conn)
        if not send.send_syn(cm, node, False, f"irdma_send_syn: {old} -> SYN_SENT "
                                              "(MPA v1 retry after RST)"):
            active_open_err(cm, node, reset=False)
    else:
        active_open_err(cm, node, reset=False)
    return GO_ON


def rst_indicated(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """RST after the CONNECT_REQUEST went up: ``passive_state++``; the accept or reject
    that comes later sees it."""
    node.update_settings(passive_state=node.settings.passive_state + 1)
    return GO_ON


# ---- local actions --------------------------------------------------------------------------

def connect(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_connect``: SYN_SENT and the SYN (retransmitted)."""
    cm.base.set_state(node, CM_SYN_SENT, r.kernel_fn, node.conn)
    send.send_syn(cm, node, False, "irdma_send_syn: UNKNOWN -> SYN_SENT")
    return GO_ON


def accept(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_accept`` from MPAREQ_RCVD: offload, the MPA reply as the QP's LSMM, then
    (GEN_2) wait for the RTS AE. A peer RST before (``passive_state`` reaching
    ``SEND_RESET_EVENT``) fails the verb with -ECONNRESET."""
    if cm.trace is not None:
        log_lines.emit(cm, log_lines.ACCEPT_VLAN, node.vlan_id, conn=node.conn)
    pdata = _pdata(rx)
    node.update_settings(passive_state=node.settings.passive_state + 1)
    if node.settings.passive_state == SEND_RESET_EVENT:
        return Outcome(True, accept_failed(cm, node, -ECONNRESET,
                                           "peer reset before accept", returned=True))
    reply = send.cm_build_mpa_frame(cm, node, request=False, private_data=pdata)
    node.record_lsmm(len(reply), len(pdata))
    node.cm_id = True
    node.qp_linked = True
    cm.stats["accepts"] += 1
    init_tsa_conn(cm, node, r.kernel_fn)
    node.qhash_set = False
    if cm.config.gen == 2:
        node.ah_valid = False  # cm_free_ah
    qp: HwQp | None = node.qp
    if qp is None:
        return GO_ON
    if cm.config.gen == 2:
        node.rts_deadline = cm.base.now_ns + cm.config.rts_ae_timeout_ns
        cm.deferred.add(node.rts_deadline, "rts", node)
    qp.send_lsmm(reply, cm.base.now_ns)
    cm._drain_qp(node.key)
    if cm.config.gen == 1:
        accept_complete(cm, node)
    return GO_ON


def accept_listener_destroyed(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_accept`` after the listener went: -EINVAL, the node's reference
    dropped."""
    if cm.trace is not None:
        log_lines.emit(cm, log_lines.ACCEPT_VLAN, node.vlan_id, conn=node.conn)
    return Outcome(True, accept_failed(cm, node, -EINVAL, "listener destroyed",
                                       returned=True))


def reject(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_cm_reject`` from MPAREQ_RCVD: the reject frame with ACK|FIN
    (``irdma_send_mpa_reject``), FIN_WAIT1; after a peer RST freed without a packet."""
    pdata = _pdata(rx)
    send.cleanup(cm, node)
    node.update_settings(pdata_size=len(pdata), passive_state=node.settings.passive_state + 1)
    if node.settings.passive_state == SEND_RESET_EVENT:
        cm.base.record("reject_silent", r.kernel_fn, conn=node.conn,
                       reason="peer reset before: freed, no packet")
        cm.base.set_state(node, CM_CLOSED, r.kernel_fn, node.conn)
        cm._rem_ref(node)
        return GO_ON
    frame = send.cm_build_mpa_frame(cm, node, request=False, private_data=pdata,
                                    reject=True)
    seg_out = send.form(node, ACK | FIN, cm.mac, gen1=cm.config.gen == 1, payload=frame)
    if seg_out is None:
        cm.base.set_state(node, CM_CLOSED, r.kernel_fn, node.conn)
        if not send.send_reset(cm, node, "irdma_send_reset: irdma_cm_reject -> CLOSED"):
            cm.base.record("kernel_leak", r.kernel_fn, conn=node.conn,
                           reason="reject and RST both failed (no AH)")
        return GO_ON
    cm.base.set_state(node, CM_FIN_WAIT1, "irdma_send_mpa_reject", node.conn)
    send.schedule_send(cm, node, seg_out, "irdma_send_mpa_reject: MPAREQ_RCVD -> FIN_WAIT1",
                       retrans=True)
    return GO_ON


def reject_listener_destroyed(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_cm_reject`` after the listener went: freed, no packet."""
    node.held_by_app = False
    send.cleanup(cm, node)
    node.update_settings(passive_state=node.settings.passive_state + 1)
    if node.settings.passive_state == SEND_RESET_EVENT:
        cm.base.set_state(node, CM_CLOSED, r.kernel_fn, node.conn)
    cm._rem_ref(node)
    return GO_ON


def close_reset(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_cm_close`` in the early states: cleanup, RST (consuming the base
    reference). Refused when only the retransmission entry holds the node: the caller
    has no reference left (it went with an earlier RST or a listener destroy), and
    ``irdma_cleanup_retrans_entry``'s ``refcount_dec`` must not reach zero."""
    if node.send_entry is not None and node.refcnt == 1:
        raise CmError(EINVAL, f"irdma_cm_close in state {node.state.name}: the node is "
                      "held only by its retransmission entry, not by the caller")
    send.cleanup(cm, node)
    if not send.send_reset(cm, node, f"irdma_send_reset: irdma_cm_close "
                                     f"{node.state.name}"):
        cm._record_leak(node, "irdma_cm_close: RST not sent (no AH), base reference not "
                       "consumed")
        cm.base.record("kernel_leak", r.kernel_fn, conn=node.conn, reason=cm.leaks[node.conn])
    return GO_ON


def close_fin(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_cm_close`` in CLOSE_WAIT (never set by cm.c): LAST_ACK and our FIN."""
    cm.base.set_state(node, CM_LAST_ACK, r.kernel_fn, node.conn)
    send.send_fin(cm, node, "irdma_send_fin: CLOSE_WAIT -> LAST_ACK")
    return GO_ON


def close_einval(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_cm_close`` in a closing state: -EINVAL, nothing changes."""
    raise CmError(EINVAL, f"irdma_cm_close in state {node.state.name}")


def close_free(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_cm_close`` in the other states: drop the base reference."""
    cm._rem_ref(node)
    return GO_ON


def listener_reset(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_dec_refcnt_listen`` for one pending node (on the temporary reference of
    ``irdma_reset_list_prep``): cleanup, RST, LISTENER_DESTROYED; the base reference
    goes too unless the application holds the request (MPAREQ_RCVD). A RST that
    cannot be sent leaves the node CLOSED with a leaked reference."""
    send.cleanup(cm, node)
    old = node.state
    if not send.send_reset(cm, node, f"irdma_send_reset: irdma_dec_refcnt_listen "
                                     f"{old.name} -> LISTENER_DESTROYED"):
        cm.base.set_state(node, CM_CLOSED, r.kernel_fn, node.conn)
        cm._record_leak(node, "listener destroyed, RST not sent (no AH): CLOSED with a "
                       "leaked reference (irdma_dec_refcnt_listen ignores "
                       "irdma_send_reset's failure)")
        cm.base.record("kernel_leak", r.kernel_fn, conn=node.conn, reason=cm.leaks[node.conn])
        return GO_ON
    cm.base.set_state(node, CM_LISTENER_DESTROYED, r.kernel_fn, node.conn)
    if old != CM_MPAREQ_RCVD:
        cm._rem_ref(node)
    return GO_ON


def listener_leave(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_dec_refcnt_listen`` leaves a node at or past FIN_WAIT1 alone: only the
    temporary reference of ``irdma_reset_list_prep`` is dropped."""
    cm._rem_ref(node)
    return GO_ON


def expire_free(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_retrans_expired`` in SYN_RCVD/CLOSING: CLOSED and freed, no RST."""
    cm.base.set_state(node, CM_CLOSED, r.kernel_fn, node.conn)
    cm._rem_ref(node)
    return GO_ON


def expire_reset(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_retrans_expired`` in FIN_WAIT1/LAST_ACK: CLOSED, RST (freeing)."""
    old = node.state.name
    cm.base.set_state(node, CM_CLOSED, r.kernel_fn, node.conn)
    if not send.send_reset(cm, node, f"irdma_send_reset: irdma_retrans_expired {old} "
                                     "-> CLOSED"):
        cm._record_leak(node, "retransmissions expired, RST not sent (no AH)")
    return GO_ON


def expire_abort(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_retrans_expired`` in the other states: CLOSED, RST, ABORTED event."""
    old = node.state.name
    cm.base.set_state(node, CM_CLOSED, r.kernel_fn, node.conn)
    send.send_reset_held(cm, node, f"irdma_send_reset: irdma_retrans_expired {old} "
                                   "-> CLOSED")
    create_event(cm, node, CM_EVENT_ABORTED)
    return GO_ON


def close_entry_free(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_handle_close_entry`` without QP: the node is freed."""
    entry = node.close_entry
    if entry is not None:
        entry.live = False
        node.close_entry = None
    cm._rem_ref(node)
    return GO_ON


def teardown_reset(cm: CoreOps, node: CmNode, r: Row, rx: Rx) -> Outcome:
    """``irdma_cm_teardown_connections`` on a node without QP, as the NULL-checked
    kernel would (``Quirks.teardown_null_qp_oops`` off): cleanup, CLOSED, RST, put."""
    send.cleanup(cm, node)
    cm.base.set_state(node, CM_CLOSED, r.kernel_fn, node.conn)
    send.send_reset_held(cm, node, "irdma_send_reset: irdma_cm_teardown_connections "
                                   "-> CLOSED")
    cm._rem_ref(node)
    return GO_ON
