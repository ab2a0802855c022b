"""iw_cm's handling of each driver upcall in each state (drivers/infiniband/core/iwcm.c:
cm_work_handler, cm_conn_req_handler, cm_conn_rep_handler, cm_conn_est_handler,
cm_disconnect_handler, cm_close_handler) and of the application's calls. The expected
outcome of every (state, event) pair is written here from iwcm.c."""

from __future__ import annotations

from errno import ECONNREFUSED, ECONNRESET

import pytest
from mpa_emu.stacks.contract.events import IwEvent

from mpa_emu.ulp.iwcm import IwCmState, Verb, on_upcall, on_verb

S = IwCmState

# iwcm.h: enum iw_cm_state counts from 0 in this order.
KERNEL_ORDER = ["IDLE", "LISTEN", "CONN_RECV", "CONN_SENT", "ESTABLISHED", "CLOSING",
                "DESTROYING"]

# (state, event, status) -> (passed up, state after, function, BUG)
CASES = [
    # cm_conn_rep_handler: BUG_ON(state != CONN_SENT); 0 -> ESTABLISHED, else IDLE
    (S.CONN_SENT, IwEvent.CONNECT_REPLY, 0, True, S.ESTABLISHED, "cm_conn_rep_handler", False),
    (S.CONN_SENT, IwEvent.CONNECT_REPLY, -ECONNREFUSED, True, S.IDLE, "cm_conn_rep_handler",
     False),
    (S.CONN_SENT, IwEvent.CONNECT_REPLY, -ECONNRESET, True, S.IDLE, "cm_conn_rep_handler",
     False),
    (S.ESTABLISHED, IwEvent.CONNECT_REPLY, 0, False, S.ESTABLISHED, "cm_conn_rep_handler",
     True),
    (S.IDLE, IwEvent.CONNECT_REPLY, 0, False, S.IDLE, "cm_conn_rep_handler", True),
    # cm_conn_est_handler: BUG_ON(state != CONN_RECV); -> ESTABLISHED
    (S.CONN_RECV, IwEvent.ESTABLISHED, 0, True, S.ESTABLISHED, "cm_conn_est_handler", False),
    (S.IDLE, IwEvent.ESTABLISHED, 0, False, S.IDLE, "cm_conn_est_handler", True),
    (S.ESTABLISHED, IwEvent.ESTABLISHED, 0, False, S.ESTABLISHED, "cm_conn_est_handler", True),
    # cm_disconnect_handler: ESTABLISHED -> CLOSING, nothing passed up in any state
    (S.ESTABLISHED, IwEvent.DISCONNECT, 0, False, S.CLOSING, "cm_disconnect_handler", False),
    (S.ESTABLISHED, IwEvent.DISCONNECT, -ECONNRESET, False, S.CLOSING,
     "cm_disconnect_handler", False),
    (S.CLOSING, IwEvent.DISCONNECT, 0, False, S.CLOSING, "cm_disconnect_handler", False),
    (S.IDLE, IwEvent.DISCONNECT, 0, False, S.IDLE, "cm_disconnect_handler", False),
    (S.CONN_RECV, IwEvent.DISCONNECT, 0, False, S.CONN_RECV, "cm_disconnect_handler", False),
    # cm_close_handler: ESTABLISHED/CLOSING -> IDLE and up; DESTROYING dropped; else BUG
    (S.ESTABLISHED, IwEvent.CLOSE, 0, True, S.IDLE, "cm_close_handler", False),
    (S.CLOSING, IwEvent.CLOSE, 0, True, S.IDLE, "cm_close_handler", False),
    (S.DESTROYING, IwEvent.CLOSE, 0, False, S.DESTROYING, "cm_close_handler", False),
    (S.IDLE, IwEvent.CLOSE, 0, False, S.IDLE, "cm_close_handler", True),
    (S.CONN_RECV, IwEvent.CLOSE, 0, False, S.CONN_RECV, "cm_close_handler", True),
    (S.CONN_SENT, IwEvent.CLOSE, 0, False, S.CONN_SENT, "cm_close_handler", True),
]


def test_state_values_are_the_kernels() -> None:
    assert [s.name for s in IwCmState] == KERNEL_ORDER
    assert [int(s) for s in IwCmState] == list(range(7))


@pytest.mark.parametrize(("state", "event", "status", "up", "new", "fn", "bug"), CASES)
def test_each_upcall_in_each_state(state: IwCmState, event: IwEvent, status: int, up: bool,
                                   new: IwCmState, fn: str, bug: bool) -> None:
    step = on_upcall(state, event, status)
    assert (step.passed_up, step.old, step.new, step.fn, step.bug) == \
        (up, state, new, fn, bug)
    if not up:
        assert step.note  # every event that does not go up says why


def test_connect_request_makes_a_child_in_conn_recv() -> None:
    """cm_conn_req_handler: a new id, CONN_RECV, the client's handler called."""
    step = on_upcall(S.LISTEN, IwEvent.CONNECT_REQUEST, 0)
    assert (step.passed_up, step.new, step.fn) == (True, S.CONN_RECV, "cm_conn_req_handler")


def test_connect_request_on_a_listener_going_away_is_rejected() -> None:
    """cm_conn_req_handler: listen id not LISTEN -> iw_cm_reject + iw_destroy_cm_id."""
    step = on_upcall(S.LISTEN, IwEvent.CONNECT_REQUEST, 0, listener_listening=False)
    assert (step.passed_up, step.new) == (False, S.DESTROYING)


@pytest.mark.parametrize("event", list(IwEvent))
def test_events_of_an_id_being_destroyed_are_dropped(event: IwEvent) -> None:
    """cm_work_handler: IWCM_F_DROP_EVENTS -> pr_debug("dropping event %d")."""
    step = on_upcall(S.DESTROYING, event, 0, dropping=True)
    assert (step.passed_up, step.fn) == (False, "cm_work_handler")
    assert f"dropping event {int(event)}" in step.note


@pytest.mark.parametrize(("state", "verb", "after"), [
    (S.IDLE, "connect", S.CONN_SENT),            # iw_cm_connect
    (S.CONN_SENT, "connect_failed", S.IDLE),      # iw_cm_connect's error path
    (S.CONN_RECV, "accept_failed", S.IDLE),       # iw_cm_accept's error path
    (S.CONN_RECV, "reject", S.IDLE),              # iw_cm_reject
    (S.ESTABLISHED, "reject", S.ESTABLISHED),     # iw_cm_reject: -EINVAL, no change
    (S.ESTABLISHED, "disconnect", S.CLOSING),     # iw_cm_disconnect
    (S.CLOSING, "disconnect", S.CLOSING),         # remote peer closed first
    (S.IDLE, "disconnect", S.IDLE),               # accept or connect returned !0
    (S.CONN_RECV, "disconnect", S.CONN_RECV),     # disconnect before accept
    (S.ESTABLISHED, "destroy", S.DESTROYING),     # destroy_cm_id
])
def test_verbs_move_the_state(state: IwCmState, verb: Verb, after: IwCmState) -> None:
    assert on_verb(state, verb) == after
