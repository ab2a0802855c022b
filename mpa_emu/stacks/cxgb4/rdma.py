"""RDMA mode: what the adapter's firmware does after ``FW_RI_INIT_WR`` (``rdma_init``,
``post_terminate``, the FPDUs it takes, ``c4iw_ev_dispatch`` for an error CQE) and
cm.c's ``terminate``."""

from __future__ import annotations

from mpa_emu.stacks.contract.api import SendCompletion
from mpa_emu.stacks.cxgb4 import fpdu_rx, frames
from mpa_emu.stacks.cxgb4.closing import c4iw_ep_disconnect
from mpa_emu.stacks.cxgb4.cm import Cxgb4Cm, ep_send
from mpa_emu.stacks.cxgb4.endpoint import Endpoint
from mpa_emu.stacks.cxgb4.states import (
    P2pType,
    QpState,
)
from mpa_emu.wire import ddp, mpa


def rdma_init(cm: Cxgb4Cm, ep: Endpoint) -> None:
    """``c4iw_modify_qp(RTS)`` -> ``rdma_init``: the initiator's firmware sends the
    RTR (``build_rtr_msg``) unless the negotiated type is DISABLED."""
    ep.qp = QpState.RTS
    cm.base.record("qp_state", "rdma_init", conn=ep.conn, new="RTS",
                     p2p_type=ep.attr_p2p_type)
    if ep.attr_initiator:
        rtr = frames.rtr(ep.attr_p2p_type, crc=ep.attr_crc)
        if rtr is not None:
            kind = "zero-length RDMA Write" if ep.attr_p2p_type == P2pType.RDMA_WRITE \
                else "zero-length RDMA Read Request"
            ep_send(cm, ep, rtr, f"rdma_init: RTR, {kind} (build_rtr_msg)")


def post_terminate(cm: Cxgb4Cm, ep: Endpoint, layer_etype: int, ecode: int) -> None:
    """``c4iw_modify_qp(TERMINATE, send_term)`` -> ``post_terminate``."""
    ep.qp = QpState.TERMINATE
    ep_send(cm, ep, frames.terminate(layer_etype, ecode, crc=ep.attr_crc),
               f"post_terminate: Terminate layer_etype {layer_etype:#04x} "
               f"ecode {ecode:#04x}")


def rdma_rx(cm: Cxgb4Cm, ep: Endpoint, data: bytes) -> None:
    """The adapter takes whole FPDUs in order (:func:`fpdu_rx.check`, the RFC rules):
    a Terminate raises ``CPL_RDMA_TERMINATE``, a zero-length Read Request gets its
    zero-length Read Response, a Send fills a posted receive buffer; a refused FPDU
    is an error CQE (:meth:`c4iw_ev_dispatch`)."""
    ep.rx_fpdu += data
    while ep.qp == QpState.RTS and len(ep.rx_fpdu) >= 2:
        try:
            fpdu = mpa.unframe_fpdu(bytes(ep.rx_fpdu))
        except mpa.MpaFormatError:
            return  # wait for the rest of the FPDU
        del ep.rx_fpdu[:fpdu.wire_length]
        partial = None if ep.rx_partial is None else len(ep.rx_partial)
        verdict = fpdu_rx.check(fpdu, crc=ep.attr_crc, recvq=ep.recvq, msn=ep.rx_msn,
                                partial=partial, room=ep.rx_room)
        if verdict.error is not None:
            c4iw_ev_dispatch(cm, ep, verdict.error)
            return
        if verdict.kind == "terminate":
            terminate(cm, ep)
            return
        if verdict.kind == "read":
            ep_send(cm, ep, frames.read_response(verdict.sink_stag, verdict.sink_to,
                                                crc=ep.attr_crc),
                       "firmware: RDMA Read Response (zero-length, answers the RTR)")
        elif verdict.kind == "recv":
            if ep.rx_partial is None:
                ep.rx_partial, ep.rx_room = bytearray(), verdict.room
            ep.rx_partial += verdict.data
            if verdict.last:
                message, ep.rx_partial = bytes(ep.rx_partial), None
                ep.rx_msn += 1
                ep.completions.append(SendCompletion("SUCCESS", message))
                cm.base.record("recv_completion", "firmware RDMA", conn=ep.conn,
                                 status="SUCCESS", bytes=len(message))
        else:
            raw = fpdu.ulpdu
            cm.base.record("fpdu_received", "firmware RDMA", conn=ep.conn,
                             opcode=ddp.OPCODE_NAMES.get(raw[1] & 0x0F, str(raw[1] & 0x0F)),
                             len=len(raw))


def c4iw_ev_dispatch(cm: Cxgb4Cm, ep: Endpoint, err: fpdu_rx.ErrCqe) -> None:
    """``c4iw_ev_dispatch`` -> ``post_qp_event`` for the adapter's error CQE:
    ``dump_err_cqe`` logs it, the QP goes from RTS to TERMINATE (``c4iw_modify_qp``,
    not internal: ``post_terminate`` and a graceful ``c4iw_ep_disconnect``), then the
    IB event. ``post_terminate`` gets no CQE from ``c4iw_modify_qp`` (it passes
    NULL), so the Terminate carries ``build_term_codes(NULL)``: RDMAP local
    catastrophic, 0, not the codes the CQE status maps to."""
    mapped = fpdu_rx.build_term_codes(err)
    cm.base.record("err_cqe", "c4iw_ev_dispatch", conn=ep.conn, status=err.name,
                     opcode=err.opcode, rq=err.rq, term_codes_for_status=list(mapped))
    cm.base.kernel_log("err", "dump_err_cqe", f"AE qpid {ep.conn} opcode {err.opcode} "
                         f"status {err.status:#x} type {0 if err.rq else 1} len "
                         f"{err.length:#x} wrid.hi 0x0 wrid.lo 0x0")
    if ep.qp == QpState.RTS:
        ep.qp = QpState.TERMINATE
        cm.base.record("qp_state", "c4iw_modify_qp", conn=ep.conn, new="TERMINATE")
        layer_etype, ecode = fpdu_rx.build_term_codes(None)
        ep_send(cm, ep, frames.terminate(layer_etype, ecode, crc=ep.attr_crc),
                   f"post_terminate: Terminate layer_etype {layer_etype:#04x} ecode "
                   f"{ecode:#04x} (after {err.name})")
        c4iw_ep_disconnect(cm, ep, False)
    cm.base.record("qp_event", "post_qp_event", conn=ep.conn, event=fpdu_rx.ib_event(err))


def terminate(cm: Cxgb4Cm, ep: Endpoint) -> None:
    """``terminate``: a Terminate arrived: QP to TERMINATE and an abortive close."""
    cm.base.kernel_log("warn", "terminate", f"TERM received tid {ep.conn} qpid {ep.conn}")
    ep.qp = QpState.TERMINATE
    c4iw_ep_disconnect(cm, ep, True)
