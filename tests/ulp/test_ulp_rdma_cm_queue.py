"""One host's rdma_cm event queue fed with upcalls and verbs in order (mpa_emu.ulp.RdmaCm):
the iw_cm state per connection and the events that reach the application, with the
cases iwcm.c drops (a DISCONNECT, a CLOSE after a reject, a request on a destroyed
listener)."""

from __future__ import annotations

from errno import ECONNREFUSED, ECONNRESET

from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.ulp.iwcm import IwCmState
from mpa_emu.ulp.rdma_cm import RdmaCm, RdmaCmEventType, steps_for

E = RdmaCmEventType


def _up(event: IwEvent, conn: int, status: int = 0, listener: int | None = None,
        t: int = 0) -> Upcall:
    return Upcall(event, conn, status, t, bytes(4), 1, bytes(4), 2, listener=listener)


def test_passive_accept_then_graceful_close() -> None:
    cm = RdmaCm()
    for up in (_up(IwEvent.CONNECT_REQUEST, 1, listener=1), _up(IwEvent.ESTABLISHED, 1),
               _up(IwEvent.DISCONNECT, 1), _up(IwEvent.CLOSE, 1)):
        cm.upcall(up)
    assert [e.event for e in cm.events] == [E.CONNECT_REQUEST, E.ESTABLISHED,
                                            E.DISCONNECTED]
    assert [(s.iwcm.old, s.iwcm.new) for s in cm.steps] == [
        (IwCmState.IDLE, IwCmState.CONN_RECV), (IwCmState.CONN_RECV, IwCmState.ESTABLISHED),
        (IwCmState.ESTABLISHED, IwCmState.CLOSING), (IwCmState.CLOSING, IwCmState.IDLE)]
    assert cm.steps[2].event is None and "cm_disconnect_handler" in cm.steps[2].note
    assert cm.state(1) == IwCmState.IDLE


def test_active_rejected() -> None:
    cm = RdmaCm()
    step = cm.upcall(_up(IwEvent.CONNECT_REPLY, 4, -ECONNREFUSED))
    assert step.iwcm.old == IwCmState.CONN_SENT  # iw_cm_connect put it there
    assert step.event is not None
    assert (step.event.event, step.event.status) == (E.REJECTED, -ECONNREFUSED)
    assert cm.state(4) == IwCmState.IDLE


def test_local_disconnect_then_close() -> None:
    """iw_cm_disconnect: ESTABLISHED -> CLOSING; the CLOSE then goes up from CLOSING."""
    cm = RdmaCm()
    cm.upcall(_up(IwEvent.CONNECT_REPLY, 2))
    cm.verb(2, "disconnect")
    assert cm.state(2) == IwCmState.CLOSING
    step = cm.upcall(_up(IwEvent.CLOSE, 2))
    assert step.event is not None and step.event.event == E.DISCONNECTED


def test_late_close_after_a_reject_is_a_bug_not_an_event() -> None:
    """iw_cm_reject leaves the id IDLE; cm_close_handler BUG()s on a CLOSE there."""
    cm = RdmaCm()
    cm.upcall(_up(IwEvent.CONNECT_REQUEST, 3, listener=1))
    cm.verb(3, "reject")
    assert cm.state(3) == IwCmState.IDLE
    step = cm.upcall(_up(IwEvent.CLOSE, 3))
    assert step.event is None and step.iwcm.bug
    assert "BUG()" in step.note
    assert [e.event for e in cm.events] == [E.CONNECT_REQUEST]


def test_request_on_a_destroyed_listener_is_dropped() -> None:
    """rdma_destroy_id on the listener: destroy_cm_id sets IWCM_F_DROP_EVENTS."""
    cm = RdmaCm()
    cm.listener_destroyed(9)
    step = cm.upcall(_up(IwEvent.CONNECT_REQUEST, 5, listener=9))
    assert step.event is None and step.iwcm.fn == "cm_work_handler"
    other = cm.upcall(_up(IwEvent.CONNECT_REQUEST, 6, listener=8))
    assert other.event is not None


def test_failed_accept_gives_no_event() -> None:
    """irdma_accept's error (the wait for the RTS AE, delivered late by the emulator as
    an ESTABLISHED with a status, marked accept_error): iw_cm_accept's error path, no
    rdma_cm event."""
    cm = RdmaCm()
    cm.upcall(_up(IwEvent.CONNECT_REQUEST, 7, listener=1))
    late = _up(IwEvent.ESTABLISHED, 7, -ECONNRESET)
    late.accept_error = True
    step = cm.upcall(late)
    assert step.event is None and "rdma_accept returns" in step.note
    assert cm.state(7) == IwCmState.IDLE


def test_an_established_upcall_with_an_error_goes_up_then_its_close() -> None:
    """qedr_iw_passive_complete upcalls ESTABLISHED with the failed handshake's status,
    then CLOSE: cm_conn_est_handler takes the first in CONN_RECV whatever its status
    (-> ESTABLISHED; cma_iw_handler makes RDMA_CM_EVENT_ESTABLISHED without looking at
    it), cm_close_handler the second (-> IDLE, DISCONNECTED). Neither is a BUG()."""
    cm = RdmaCm()
    cm.upcall(_up(IwEvent.CONNECT_REQUEST, 7, listener=1))
    est = cm.upcall(_up(IwEvent.ESTABLISHED, 7, -ECONNRESET))
    close = cm.upcall(_up(IwEvent.CLOSE, 7, -ECONNRESET))
    assert not est.iwcm.bug and not close.iwcm.bug
    assert [(e.event, e.status) for e in cm.events] == [
        (E.CONNECT_REQUEST, 0), (E.ESTABLISHED, -ECONNRESET), (E.DISCONNECTED, -ECONNRESET)]
    assert cm.state(7) == IwCmState.IDLE


def test_destroyed_id_drops_every_event() -> None:
    cm = RdmaCm()
    cm.upcall(_up(IwEvent.CONNECT_REPLY, 8))
    cm.verb(8, "destroy")
    step = cm.upcall(_up(IwEvent.CLOSE, 8))
    assert step.event is None and step.iwcm.fn == "cm_work_handler"


def test_steps_for_is_the_same_machine() -> None:
    ups = [_up(IwEvent.CONNECT_REQUEST, 1, listener=1), _up(IwEvent.ESTABLISHED, 1)]
    assert [s.event.event if s.event else None for s in steps_for(ups)] == \
        [E.CONNECT_REQUEST, E.ESTABLISHED]


def test_trace_fields_name_the_event_and_the_state_change() -> None:
    step = RdmaCm().upcall(_up(IwEvent.CONNECT_REPLY, 1, -ECONNRESET))
    fields = step.trace_fields()
    assert fields["event"] == "RDMA_CM_EVENT_REJECTED" and fields["value"] == 8
    assert (fields["iw_cm_old"], fields["iw_cm_new"]) == ("CONN_SENT", "IDLE")
    assert step.trace_fn == "cma_iw_handler"


def test_live_console_lines() -> None:
    """mpa-emu live prints the rdma_cm event after the upcall, and the kernel log lines."""
    from mpa_emu.live.console import nic_line, rdma_cm_line
    from mpa_emu.stacks.contract.trace import TraceRecord

    step = RdmaCm().upcall(_up(IwEvent.CONNECT_REPLY, 2, -ECONNREFUSED, t=12_000_000))
    assert rdma_cm_line(step) == \
        "t=0.012s conn 2 => RDMA_CM_EVENT_REJECTED status -111 (-ECONNREFUSED)"
    record = TraceRecord(28_000_000, "live", "kernel_log", "irdma_check_seq",
                         {"level": "debug", "text": "CM: seq number err",
                          "dynamic_debug": True, "conn": 1})
    assert nic_line(record) == \
        "t=0.028s klog debug (dyndbg): CM: seq number err (irdma_check_seq)"
