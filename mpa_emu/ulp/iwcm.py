"""iw_cm (``drivers/infiniband/core/iwcm.c``): what the iWARP connection manager does with
each upcall a driver hands it, per ``iw_cm_id`` and its ``enum iw_cm_state``.

A pure function of the state and the upcall: :func:`on_upcall` says whether iw_cm passes
the event up to its client (rdma_cm's ``cma_iw_handler``, or ``iw_conn_req_handler`` for a
listener), the state it leaves the id in and the function that decided. The verbs the
application calls through rdma_cm move the state too (:func:`on_verb`).

Every rule names its function in iwcm.c:

* ``cm_event_handler`` queues the event on the id's work list; ``cm_work_handler`` runs it
  unless ``destroy_cm_id`` set ``IWCM_F_DROP_EVENTS`` ("dropping event %d", pr_debug).
* ``cm_conn_req_handler`` (CONNECT_REQUEST on a listener): a new child id in CONN_RECV;
  when the listener is no longer LISTEN the child is rejected and destroyed, nothing goes
  up; otherwise the client's handler gets the event.
* ``cm_conn_rep_handler`` (CONNECT_REPLY): BUG_ON a state other than CONN_SENT; status 0
  -> ESTABLISHED, any other status (REJECTED or RESET) -> IDLE; always passed up.
* ``cm_conn_est_handler`` (ESTABLISHED): BUG_ON a state other than CONN_RECV;
  -> ESTABLISHED; passed up.
* ``cm_disconnect_handler`` (DISCONNECT): ESTABLISHED -> CLOSING, any other state
  unchanged; never passed up.
* ``cm_close_handler`` (CLOSE): ESTABLISHED or CLOSING -> IDLE and passed up;
  DESTROYING: dropped; any other state: BUG().

Where iwcm.c would ``BUG()``, the outcome says so (``bug``) and passes nothing up: the
emulator reports what the kernel would do instead of crashing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

from mpa_emu.stacks.contract.events import IwEvent

__all__ = ["IwCmState", "IwCmStep", "Verb", "on_upcall", "on_verb"]


class IwCmState(IntEnum):
    """``enum iw_cm_state`` (drivers/infiniband/core/iwcm.h), with its values."""

    IDLE = 0
    LISTEN = 1
    CONN_RECV = 2
    CONN_SENT = 3
    ESTABLISHED = 4
    CLOSING = 5
    DESTROYING = 6


@dataclass(frozen=True, slots=True)
class IwCmStep:
    """What iw_cm did with one upcall: ``passed_up`` (the client's ``cm_handler`` ran),
    the state before and after, the iwcm.c function, and why, in words, when nothing
    went up. ``bug`` is set where iwcm.c would ``BUG()`` / ``BUG_ON()``."""

    passed_up: bool
    old: IwCmState
    new: IwCmState
    fn: str
    note: str = ""
    bug: bool = False


Verb = Literal["connect", "connect_failed", "accept_failed", "reject", "disconnect",
               "destroy"]
"""The application's calls (through rdma_cm) that move an iw_cm id's state."""


def on_upcall(state: IwCmState, event: IwEvent, status: int, *, dropping: bool = False,
              listener_listening: bool = True) -> IwCmStep:
    """iw_cm's handling of one driver upcall on an id in ``state``.

    ``dropping`` is ``IWCM_F_DROP_EVENTS`` (the id is being destroyed); for a
    CONNECT_REQUEST ``state`` is the new child's (CONN_RECV) and ``listener_listening``
    whether the listening id is still LISTEN."""
    if dropping:
        return IwCmStep(False, state, state, "cm_work_handler",
                        f"IWCM_F_DROP_EVENTS: the id is being destroyed (pr_debug "
                        f"\"dropping event {int(event)}\")")
    if event == IwEvent.CONNECT_REQUEST:
        return _conn_req(listener_listening)
    if event == IwEvent.CONNECT_REPLY:
        return _conn_rep(state, status)
    if event == IwEvent.ESTABLISHED:
        return _conn_est(state)
    if event == IwEvent.DISCONNECT:
        return _disconnect(state)
    return _close(state)


def _conn_req(listener_listening: bool) -> IwCmStep:
    """``cm_conn_req_handler``: the child id starts in CONN_RECV."""
    new = IwCmState.CONN_RECV
    if not listener_listening:
        # the listening id is being destroyed: iw_cm_reject + iw_destroy_cm_id on the child
        return IwCmStep(False, IwCmState.IDLE, IwCmState.DESTROYING, "cm_conn_req_handler",
                        "the listening id is not LISTEN: the child is rejected and "
                        "destroyed")
    return IwCmStep(True, IwCmState.IDLE, new, "cm_conn_req_handler")


def _conn_rep(state: IwCmState, status: int) -> IwCmStep:
    """``cm_conn_rep_handler``."""
    if state != IwCmState.CONN_SENT:
        return IwCmStep(False, state, state, "cm_conn_rep_handler",
                        f"BUG_ON(state != CONN_SENT): the id is {state.name}", bug=True)
    new = IwCmState.ESTABLISHED if status == 0 else IwCmState.IDLE
    return IwCmStep(True, state, new, "cm_conn_rep_handler")


def _conn_est(state: IwCmState) -> IwCmStep:
    """``cm_conn_est_handler``."""
    if state != IwCmState.CONN_RECV:
        return IwCmStep(False, state, state, "cm_conn_est_handler",
                        f"BUG_ON(state != CONN_RECV): the id is {state.name}", bug=True)
    return IwCmStep(True, state, IwCmState.ESTABLISHED, "cm_conn_est_handler")


def _disconnect(state: IwCmState) -> IwCmStep:
    """``cm_disconnect_handler``: the state moves, the client is never called."""
    new = IwCmState.CLOSING if state == IwCmState.ESTABLISHED else state
    return IwCmStep(False, state, new, "cm_disconnect_handler",
                    "cm_disconnect_handler passes nothing up")


def _close(state: IwCmState) -> IwCmStep:
    """``cm_close_handler``."""
    if state in (IwCmState.ESTABLISHED, IwCmState.CLOSING):
        return IwCmStep(True, state, IwCmState.IDLE, "cm_close_handler")
    if state == IwCmState.DESTROYING:
        return IwCmStep(False, state, state, "cm_close_handler",
                        "DESTROYING: the close completes the destroy, nothing goes up")
    return IwCmStep(False, state, state, "cm_close_handler",
                    f"BUG(): CLOSE on an id in {state.name}", bug=True)


def on_verb(state: IwCmState, verb: Verb) -> IwCmState:
    """The state after the application's call (each rule's function in iwcm.c):

    * ``connect``: ``iw_cm_connect`` IDLE -> CONN_SENT; ``connect_failed``: its error path
      (the provider's connect returned an error) back to IDLE.
    * ``accept_failed``: ``iw_cm_accept``'s error path, CONN_RECV -> IDLE (an error on
      accept precludes provider events).
    * ``reject``: ``iw_cm_reject`` CONN_RECV -> IDLE (any other state: -EINVAL, no change).
    * ``disconnect``: ``iw_cm_disconnect`` ESTABLISHED -> CLOSING (CLOSING, IDLE and
      CONN_RECV unchanged).
    * ``destroy``: ``destroy_cm_id`` -> DESTROYING (and ``IWCM_F_DROP_EVENTS``).
    """
    if verb == "connect":
        return IwCmState.CONN_SENT if state == IwCmState.IDLE else state
    if verb == "connect_failed":
        return IwCmState.IDLE
    if verb in ("accept_failed", "reject"):
        return IwCmState.IDLE if state == IwCmState.CONN_RECV else state
    if verb == "disconnect":
        return IwCmState.CLOSING if state == IwCmState.ESTABLISHED else state
    return IwCmState.DESTROYING
