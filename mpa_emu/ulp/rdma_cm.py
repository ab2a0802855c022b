"""rdma_cm (``drivers/infiniband/core/cma.c``) over iw_cm: the ``struct rdma_cm_event`` an
application gets for each upcall of an iWARP driver, as librdmacm hands it over.

Feed one host's upcalls in order to :class:`RdmaCm` (:meth:`RdmaCm.upcall`), and the
application's verbs that move iw_cm's state (:meth:`RdmaCm.verb`,
:meth:`RdmaCm.listener_destroyed`); each upcall gives a :class:`UlpStep`: what iw_cm did
(:mod:`mpa_emu.ulp.iwcm`) and the :class:`RdmaCmEvent` delivered, or why none was.

The mapping, each row from its function in cma.c:

* ``iw_conn_req_handler`` (CONNECT_REQUEST on a listener): RDMA_CM_EVENT_CONNECT_REQUEST,
  status 0 (the event is zeroed and its status never set), private data and its length,
  ``initiator_depth`` = the upcall's IRD, ``responder_resources`` = its ORD.
* ``cma_iw_handler`` (only while the rdma_cm id is RDMA_CM_CONNECT, which an iWARP
  connection id stays in until it is destroyed):

  - CONNECT_REPLY status 0: RDMA_CM_EVENT_ESTABLISHED with IRD/ORD as above;
    -ECONNRESET or -ECONNREFUSED: RDMA_CM_EVENT_REJECTED; -ETIMEDOUT:
    RDMA_CM_EVENT_UNREACHABLE; any other status: RDMA_CM_EVENT_CONNECT_ERROR;
  - ESTABLISHED: RDMA_CM_EVENT_ESTABLISHED with IRD/ORD;
  - CLOSE: RDMA_CM_EVENT_DISCONNECTED;
  - anything else (DISCONNECT never reaches it: ``cm_disconnect_handler``): nothing.

  ``status`` is the upcall's status, private data and its length are the upcall's.

librdmacm (``rdma_get_cm_event``, librdmacm/cma.c) passes the kernel's ``status`` and
connection parameters through unchanged for these events (REJECTED also moves the QP to
ERR, ``ucma_modify_qp_err``); ``rdma_conn_param.private_data_len`` is a u8.

Computed outside the CM core, from the upcalls as they are delivered: the per-frame path
does not pay for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from errno import ECONNREFUSED, ECONNRESET, ETIMEDOUT
from typing import Any

from mpa_emu.capture.spool import RecordLog
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.ulp.iwcm import IwCmState, IwCmStep, Verb, on_upcall, on_verb

__all__ = ["RdmaCm", "RdmaCmEvent", "RdmaCmEventType", "UlpStep", "connect_reply_event",
           "map_upcall", "steps_for"]


class RdmaCmEventType(IntEnum):
    """``enum rdma_cm_event_type`` (include/rdma/rdma_cm.h), with the kernel's values;
    :attr:`kernel_name` is the name ``rdma_event_str`` prints."""

    ADDR_RESOLVED = 0
    ADDR_ERROR = 1
    ROUTE_RESOLVED = 2
    ROUTE_ERROR = 3
    CONNECT_REQUEST = 4
    CONNECT_RESPONSE = 5
    CONNECT_ERROR = 6
    UNREACHABLE = 7
    REJECTED = 8
    ESTABLISHED = 9
    DISCONNECTED = 10
    DEVICE_REMOVAL = 11
    MULTICAST_JOIN = 12
    MULTICAST_ERROR = 13
    ADDR_CHANGE = 14
    TIMEWAIT_EXIT = 15

    @property
    def kernel_name(self) -> str:
        """``RDMA_CM_EVENT_REJECTED``."""
        return f"RDMA_CM_EVENT_{self.name}"

    @classmethod
    def parse(cls, text: str) -> RdmaCmEventType:
        """From ``RDMA_CM_EVENT_REJECTED`` or ``REJECTED`` (any case); ValueError with
        the names allowed otherwise."""
        name = text.strip().upper()
        name = name.removeprefix("RDMA_CM_EVENT_")
        try:
            return cls[name]
        except KeyError:
            allowed = ", ".join(e.kernel_name for e in cls)
            raise ValueError(f"unknown rdma_cm event {text!r} (one of {allowed})") from None


@dataclass(frozen=True, slots=True)
class RdmaCmEvent:
    """One ``struct rdma_cm_event`` as the application gets it (``rdma_get_cm_event``):
    the event, its status (negative errno), the connection (the driver's id of the
    node), the virtual time, ``param.conn`` (private data and its u8 length,
    ``initiator_depth``, ``responder_resources``), the listener of a CONNECT_REQUEST, the
    upcall behind it and the cma.c function that made it."""

    event: RdmaCmEventType
    status: int
    conn: int
    time_ns: int
    private_data: bytes = b""
    private_data_len: int = 0
    initiator_depth: int = 0
    responder_resources: int = 0
    listener: int | None = None
    iw_event: IwEvent = IwEvent.CONNECT_REQUEST
    fn: str = "cma_iw_handler"

    @property
    def name(self) -> str:
        """``RDMA_CM_EVENT_REJECTED``."""
        return self.event.kernel_name

    def as_dict(self) -> dict[str, Any]:
        """Plain values for JSON (private data as hex)."""
        return {"t_ns": self.time_ns, "event": self.name, "value": int(self.event),
                "status": self.status, "conn": self.conn, "fn": self.fn,
                "iw_event": self.iw_event.name, "private_data": self.private_data.hex(),
                "private_data_len": self.private_data_len,
                "initiator_depth": self.initiator_depth,
                "responder_resources": self.responder_resources, "listener": self.listener}


@dataclass(frozen=True, slots=True)
class UlpStep:
    """One upcall through iw_cm and rdma_cm: what iw_cm did, the rdma_cm event delivered
    (None when nothing went up) and, then, why."""

    upcall: Upcall
    iwcm: IwCmStep
    event: RdmaCmEvent | None
    note: str = ""

    @property
    def trace_fn(self) -> str:
        """The function that decided: cma.c's for an event, iwcm.c's otherwise."""
        return self.event.fn if self.event is not None else self.iwcm.fn

    def trace_fields(self) -> dict[str, Any]:
        """The fields of the ``rdma_cm_event`` trace record: the connection, the upcall,
        iw_cm's state change, the rdma_cm event (``event`` None when nothing went up,
        ``note`` saying why) with its status, private data length and IRD/ORD."""
        ev = self.event
        up = self.upcall
        fields: dict[str, Any] = {
            "conn": up.conn, "iw_event": up.event.name, "iw_status": up.status,
            "iw_cm_old": self.iwcm.old.name, "iw_cm_new": self.iwcm.new.name,
            "iw_cm_fn": self.iwcm.fn,
            "event": ev.name if ev is not None else None,
            "status": ev.status if ev is not None else None}
        if ev is not None:
            fields.update(value=int(ev.event), private_data_len=ev.private_data_len,
                          initiator_depth=ev.initiator_depth,
                          responder_resources=ev.responder_resources)
        else:
            fields["note"] = self.note
        if self.iwcm.bug:
            fields["bug"] = True
        return fields

    def as_dict(self) -> dict[str, Any]:
        """Plain values for JSON."""
        return {"conn": self.upcall.conn, "iw_event": self.upcall.event.name,
                "iw_status": self.upcall.status, "iw_cm_fn": self.iwcm.fn,
                "iw_cm_state": [self.iwcm.old.name, self.iwcm.new.name],
                "rdma_cm": self.event.as_dict() if self.event is not None else None,
                "note": self.note, "bug": self.iwcm.bug}


def connect_reply_event(status: int) -> RdmaCmEventType:
    """``cma_iw_handler``'s switch on a CONNECT_REPLY's status."""
    if status == 0:
        return RdmaCmEventType.ESTABLISHED
    if status in (-ECONNRESET, -ECONNREFUSED):
        return RdmaCmEventType.REJECTED
    if status == -ETIMEDOUT:
        return RdmaCmEventType.UNREACHABLE
    return RdmaCmEventType.CONNECT_ERROR


def map_upcall(up: Upcall) -> RdmaCmEvent | None:
    """The rdma_cm event of one upcall iw_cm passed up (``iw_conn_req_handler`` for a
    CONNECT_REQUEST, ``cma_iw_handler`` for the rest); None for an event
    ``cma_iw_handler`` ignores (DISCONNECT)."""
    plen = up.private_data_len & 0xFF  # rdma_conn_param.private_data_len is a u8
    pdata = up.private_data[:plen]
    if up.event == IwEvent.CONNECT_REQUEST:
        return RdmaCmEvent(RdmaCmEventType.CONNECT_REQUEST, 0, up.conn, up.time_ns, pdata,
                           plen, up.ird, up.ord, up.listener, up.event,
                           "iw_conn_req_handler")
    ird = ord_ = 0
    if up.event == IwEvent.CONNECT_REPLY:
        kind = connect_reply_event(up.status)
        if kind == RdmaCmEventType.ESTABLISHED:
            ird, ord_ = up.ird, up.ord
    elif up.event == IwEvent.ESTABLISHED:
        kind = RdmaCmEventType.ESTABLISHED
        ird, ord_ = up.ird, up.ord
    elif up.event == IwEvent.CLOSE:
        kind = RdmaCmEventType.DISCONNECTED
    else:
        return None
    return RdmaCmEvent(kind, up.status, up.conn, up.time_ns, pdata, plen, ird, ord_,
                       up.listener, up.event, "cma_iw_handler")


class RdmaCm:
    """One host's iw_cm ids and rdma_cm event queue, fed in delivery order.

    An id is known from its first upcall: a CONNECT_REQUEST makes a passive one in
    CONN_RECV, a CONNECT_REPLY finds an active one in CONN_SENT (``iw_cm_connect``).
    ``events`` is the host's rdma_cm event queue, ``steps`` every upcall's outcome."""

    def __init__(self, events: RecordLog[RdmaCmEvent] | None = None,
                 steps: RecordLog[UlpStep] | None = None) -> None:
        self.states: dict[int, IwCmState] = {}
        """iw_cm state per connection."""
        self.events: RecordLog[RdmaCmEvent] = [] if events is None else events
        """The event queue: a list, or a log on disk for a bounded run."""
        self.steps: RecordLog[UlpStep] = [] if steps is None else steps
        self._dropping: set[int] = set()
        self._listeners_gone: set[int] = set()

    def state(self, conn: int) -> IwCmState | None:
        """The iw_cm state of ``conn``'s id (None before its first upcall)."""
        return self.states.get(conn)

    def verb(self, conn: int, verb: Verb) -> None:
        """The application called ``verb`` on ``conn`` (:func:`mpa_emu.ulp.iwcm.on_verb`)."""
        state = self.states.get(conn)
        if state is None:
            if verb != "connect":
                return
            state = IwCmState.IDLE
        self.states[conn] = on_verb(state, verb)
        if verb == "destroy":
            self._dropping.add(conn)

    def listener_destroyed(self, listener: int) -> None:
        """The listening id was destroyed (``rdma_destroy_id`` -> ``iw_destroy_cm_id``):
        its later CONNECT_REQUESTs are dropped (``IWCM_F_DROP_EVENTS``)."""
        self._listeners_gone.add(listener)

    def upcall(self, up: Upcall) -> UlpStep:
        """Run one upcall through iw_cm and rdma_cm; the event (if any) joins
        :attr:`events`."""
        step = self._step(up)
        self.steps.append(step)
        if step.event is not None:
            self.events.append(step.event)
        return step

    def _step(self, up: Upcall) -> UlpStep:
        conn = up.conn
        if up.event == IwEvent.CONNECT_REQUEST:
            dropping = up.listener is not None and up.listener in self._listeners_gone
            iw = on_upcall(IwCmState.LISTEN, up.event, up.status, dropping=dropping)
            if iw.passed_up:
                self.states[conn] = iw.new
                return UlpStep(up, iw, map_upcall(up))
            return UlpStep(up, iw, None, iw.note)
        state = self.states.get(conn)
        if state is None:
            state = IwCmState.CONN_SENT if up.event == IwEvent.CONNECT_REPLY \
                else IwCmState.IDLE
        if up.accept_error and state == IwCmState.CONN_RECV and conn not in self._dropping:
            # Not an event: irdma_accept's own return (its wait for the RTS AE), which
            # the emulator delivers late. The kernel's iw_cm_accept takes its error
            # path: CONN_RECV -> IDLE, no event. (A real ESTABLISHED with an error, as
            # qedr_iw_passive_complete sends, goes to cm_conn_est_handler below.)
            self.states[conn] = IwCmState.IDLE
            step = IwCmStep(False, state, IwCmState.IDLE, "iw_cm_accept",
                            f"the accept failed with {up.status}: rdma_accept returns "
                            "it, no event")
            return UlpStep(up, step, None, step.note)
        iw = on_upcall(state, up.event, up.status, dropping=conn in self._dropping)
        self.states[conn] = iw.new
        if not iw.passed_up:
            return UlpStep(up, iw, None, iw.note)
        event = map_upcall(up)
        if event is None:
            return UlpStep(up, iw, None, "cma_iw_handler ignores this event")
        return UlpStep(up, iw, event)


def steps_for(upcalls: Iterable[Upcall]) -> list[UlpStep]:
    """Every upcall of one host (in delivery order) through a fresh :class:`RdmaCm`,
    without verbs: for journals that keep only the upcalls (replay)."""
    cm = RdmaCm()
    return [cm.upcall(up) for up in upcalls]
