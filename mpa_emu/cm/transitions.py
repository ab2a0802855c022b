"""The one transition table of the irdma CM: every (state, input) pair of cm.c as data.

Theory of operation
===================

A node (``struct irdma_cm_node``) is always in one :class:`~mpa_emu.stacks.irdma.states.CmState`.
Everything that can happen to it is an :class:`~mpa_emu.stacks.irdma.states.Input`: a class of
received segment (as ``irdma_process_pkt`` sorts them), a verb of the application, a
timer running out, an asynchronous completion. For every pair of the two there is
exactly one :class:`~mpa_emu.stacks.irdma.contract.Row` in :data:`TABLE`, kernel "ignore" cases
included, so a missing case is a missing row that the tests catch, not a silent
fall-through.

What a row is
-------------
A row names

* ``run``: the action, a plain function of :mod:`mpa_emu.stacks.irdma.actions` (referenced here as
  a callable, so go-to-definition works and a typo fails at import);
* ``next_state``: where the action normally leaves the node, and ``may_reach``: the
  other states its error paths can leave it in (a reset that cannot be sent, a bad
  option, the application's private data over a limit);
* ``kernel_fn``: the cm.c function whose ``switch (cm_node->state)`` case the row is;
* ``note``: what the kernel does there, in a line;
* ``reachable``: False for the rows no input sequence can exercise (see below).

The core looks the row up with the node's state at the moment the input arrives, runs
the action, and then asserts that the node ended in ``next_state`` or one of
``may_reach`` (a node whose last reference went counts as ``CLOSED``). That check runs on
every input, in production as in the tests: a new code path that moves a node somewhere
the table does not say fails at once, with the row named.

Every state change goes through a row. ``CmCore._set_state`` refuses to run outside an
action, so nothing else (a verb, the receive path, a timer, teardown) can move a node
behind the table's back: where the kernel changes a state outside its big switches,
that place is an input with its own rows (``TEARDOWN`` for
``irdma_cm_teardown_connections``, the ``UNKNOWN``/``SYN`` row for the LISTENING a fresh
passive node gets in ``irdma_receive_ilq``).

What an action returns
----------------------
``action(cm, node, row, rx) -> Outcome``. ``rx`` is the segment for a packet input, the
verb's arguments (:class:`~mpa_emu.stacks.irdma.contract.VerbArgs`) for accept and reject, None
otherwise. The :class:`~mpa_emu.stacks.irdma.contract.Outcome` says two things to the caller:
``stop``, the kernel function returned an error so the rest of the segment is not
processed (``irdma_process_pkt`` only goes on to ``irdma_handle_fin_pkt`` when
``irdma_handle_ack_pkt`` returned 0), and ``error``, the -errno a verb returns after the
kernel ran its error path (``irdma_accept`` on a node whose peer reset, or whose
listener is gone). Misuse the kernel refuses without touching anything (close in a
closing state, a verb in a state it cannot serve) raises
:class:`~mpa_emu.stacks.contract.errors.CmError` from the action before any change.

Nested dispatch
---------------
One segment can run two rows, as in the kernel: an ACK carrying data runs its
``ACK_DATA`` row, and that action hands the payload to ``irdma_handle_rcv_mpa``, which
switches on the state again, now possibly the one the ACK just set (SYN_RCVD ->
ESTABLISHED -> the MPA request). That second switch is the ``MPA`` input, dispatched
from inside the first action; the outer row's ``may_reach`` covers where the inner one
can go. A segment with ACK and FIN runs the ACK row and then, unless it stopped, the
``FIN`` row. A fresh passive node runs ``UNKNOWN``/``SYN`` (LISTENING) and, nested,
``LISTENING``/``SYN`` (the passive open).

What bypasses the table
-----------------------
Only inputs that never reach a node's state switch:

* segments of a flow the NIC owns (after ``OFFLOADED`` the hardware TCP engine answers,
  ``irdma_receive_ilq`` never sees them): they go to the QP;
* segments no node matches: the SYN that creates a passive node (and then runs rows), a
  SYN the listener lookup or the neighbour table refuses, anything else (dropped, or
  answered by the host stack's RST when no qhash rule steers the SYN to the CM);
* segments ``irdma_check_seq`` refuses (dropped before ``irdma_handle_ack_pkt``);
* the disconnect path after offload (``mpa_emu.stacks.irdma.disconnect``): it works on the QP's
  states, not the node's, and reaches the node only through ``irdma_cm_close`` (the
  ``CLOSE`` rows);
* reference counting itself: a node freed by its last put is not a state change
  (``CLOSED`` is what the check assumes for it).

Unreachable rows
----------------
``reachable=False`` marks states the kernel never sets (:data:`NEVER_SET`), the
transient ones (``UNKNOWN`` lasts only inside ``irdma_connect`` and the creation of a
passive node, ``LISTENING`` only inside the SYN's ``irdma_receive_ilq``), and inputs a
state cannot meet (:func:`_reachable`). A test drives every reachable row on a real core
and checks the others are marked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from mpa_emu.errors import MpaEmuError
from mpa_emu.stacks.irdma import actions as a
from mpa_emu.stacks.irdma.contract import Action, Row
from mpa_emu.stacks.irdma.states import CmState, Input

S = CmState


NEVER_SET = frozenset({S.INITED, S.ONE_SIDE_ESTABLISHED, S.ACCEPTING, S.CLOSE_WAIT})
"""States declared in cm.h that cm.c never assigns."""
TRANSIENT = frozenset({S.UNKNOWN, S.LISTENING})
"""States that exist only inside one kernel call."""

_ALL = tuple(CmState)


@dataclass(frozen=True, slots=True)
class _Spec:
    action: Action
    next_state: CmState | None  # None: the state is left unchanged
    may_reach: tuple[CmState, ...] = ()
    note: str = ""


def _rows(inp: Input, fn: str, specific: dict[Iterable[CmState], _Spec],
          default: _Spec) -> dict[tuple[CmState, Input], Row]:
    by_state: dict[CmState, _Spec] = {}
    for states, spec in specific.items():
        for st in states:
            assert st not in by_state, (st, inp)
            by_state[st] = spec
    out: dict[tuple[CmState, Input], Row] = {}
    for st in _ALL:
        spec = by_state.get(st, default)
        nxt = st if spec.next_state is None else spec.next_state
        out[(st, inp)] = Row(st, inp, spec.action, nxt, frozenset(spec.may_reach), fn,
                             spec.note, reachable=_reachable(st, inp))
    return out


_HELD = frozenset(_ALL) - NEVER_SET - TRANSIENT
_ACTIVE_ONLY = frozenset({S.SYN_SENT, S.MPAREQ_SENT, S.MPAREJ_RCVD})
_PACKETS = frozenset({Input.SYN, Input.SYNACK, Input.ACK, Input.ACK_DATA, Input.FIN,
                      Input.RST, Input.NONE})
_REACHABLE_BY_INPUT: dict[Input, frozenset[CmState]] = {
    # irdma_handle_rcv_mpa is called only from the ACK rows of SYN_RCVD (after its move
    # to ESTABLISHED), ESTABLISHED and MPAREQ_SENT.
    Input.MPA: frozenset({S.ESTABLISHED, S.MPAREQ_SENT}),
    Input.CONNECT: frozenset({S.UNKNOWN}),
    # listener destruction only touches passive nodes; irdma_dec_refcnt_listen walks
    # cm_hash_tbl, so it also meets a node left LISTENING by a receive path stuck in
    # irdma_process_options (zero-length option loop)
    Input.DESTROY_LISTEN: (_HELD - _ACTIVE_ONLY) | {S.LISTENING},
    # states that hold a retransmission entry when it runs out: their own SYN, MPA
    # request, reject or FIN, or a late SYN-ACK (irdma_send_syn_cqp_callback sends it
    # whatever the state) that irdma_cm_timer_tick resends until expiry: after
    # a listener destroy, or after a peer that ACKed the ISN moved the node on first
    Input.RETRANS_EXPIRED: frozenset({S.SYN_SENT, S.SYN_RCVD, S.MPAREQ_SENT, S.FIN_WAIT1,
                                      S.LAST_ACK, S.LISTENER_DESTROYED, S.ESTABLISHED,
                                      S.MPAREQ_RCVD, S.FIN_WAIT2, S.CLOSING,
                                      # a late SYN-ACK entry that outlived a reject's
                                      # FIN exchange (irdma_handle_fin_pkt does not
                                      # clean up in FIN_WAIT2)
                                      S.TIME_WAIT}),
    # a close entry without QP is only scheduled on FIN_WAIT2 -> TIME_WAIT; a peer RST
    # then moves TIME_WAIT to CLOSED without cancelling it (irdma_handle_rst_pkt), and
    # the entry fires while another reference (a late qhash completion) keeps the node
    Input.CLOSE_TIMER: frozenset({S.TIME_WAIT, S.CLOSED}),
    # the qhash completion (AH latency) finds the passive node wherever the peer, the
    # application or a listener destroy took it meanwhile: irdma_check_seq only wants
    # ack == loc_seq_num, which before the SYN-ACK is the ISN itself
    Input.QHASH_DONE: _HELD - _ACTIVE_ONLY,
    # irdma_cm_teardown_connections resets only nodes without a QP: passive nodes the
    # application never accepted (active ones have theirs from irdma_connect on)
    Input.TEARDOWN: _HELD - _ACTIVE_ONLY - {S.OFFLOADED},
}


def _reachable(st: CmState, inp: Input) -> bool:
    if inp in _PACKETS:
        # a fresh passive node meets its SYN in UNKNOWN, then (nested) in LISTENING
        return st in _HELD or (st in TRANSIENT and inp == Input.SYN)
    if inp in _REACHABLE_BY_INPUT:
        return st in _REACHABLE_BY_INPUT[inp]
    return st in _HELD  # verbs: any node the application holds


_IGNORE = _Spec(a.ignore, None, note="ignored by the kernel")
_FREED = (S.CLOSED,)

TABLE: dict[tuple[CmState, Input], Row] = {}

# irdma_handle_syn_pkt
TABLE |= _rows(Input.SYN, "irdma_handle_syn_pkt", {
    (S.SYN_SENT, S.MPAREQ_SENT): _Spec(
        a.active_open_err_reset, S.CLOSED,
        note="no simultaneous open: +ref RST!, CLOSED, ABORTED"),
    (S.LISTENING,): _Spec(
        a.passive_open, S.SYN_RCVD, _FREED,
        note="backlog, options, AH (async); SYN-ACK after the qhash completion"),
    (S.CLOSED,): _Spec(a.reset_again, None, note="cleanup, +ref RST!"),
    (S.UNKNOWN,): _Spec(
        a.listen_syn, S.SYN_RCVD, _FREED,
        note="a node irdma_receive_ilq made for the SYN: LISTENING, then the SYN in it"),
}, _Spec(a.ignore, None, note="duplicate SYN: no SYN-ACK retransmission"))

# irdma_handle_synack_pkt
TABLE |= _rows(Input.SYNACK, "irdma_handle_synack_pkt", {
    (S.SYN_SENT,): _Spec(
        a.synack_active_open, S.MPAREQ_SENT, (S.CLOSED, S.SYN_SENT),
        note="check_syn, options, ACK, MPA request"),
    (S.MPAREQ_RCVD,): _Spec(a.passive_open_err_reset, S.CLOSED,
                            note="RST; the pending request is not told (the "
                                 "application still holds the node)"),
    (S.LISTENING,): _Spec(a.synack_reset_closed, S.CLOSED,
                          note="loc_seq_num = ack; RST!"),
    (S.CLOSED,): _Spec(a.synack_reset_again, None, note="loc_seq_num = ack; +ref RST!"),
}, _Spec(a.ignore, None, note="duplicate SYN-ACK: no re-ACK"))

# irdma_handle_ack_pkt (after irdma_check_seq), pure ACK and ACK with data
_ACK_COMMON: dict[Iterable[CmState], _Spec] = {
    (S.LISTENING,): _Spec(a.ack_reset_closed, S.CLOSED, note="cleanup; CLOSED; RST!"),
    (S.CLOSED,): _Spec(a.reset_again, None, note="cleanup; +ref RST!"),
    (S.LAST_ACK, S.CLOSING): _Spec(a.free_closed, S.CLOSED, note="cleanup; CLOSED; free"),
    (S.FIN_WAIT1,): _Spec(a.fin_wait1_acked, S.FIN_WAIT2, note="our FIN acknowledged"),
}
TABLE |= _rows(Input.ACK, "irdma_handle_ack_pkt", _ACK_COMMON | {
    (S.SYN_RCVD,): _Spec(a.syn_rcvd_ack, S.ESTABLISHED, _FREED,
                         note="third handshake ACK; option error -> RST"),
    (S.ESTABLISHED,): _Spec(a.cleanup, None, note="cleanup only"),
    (S.MPAREQ_SENT,): _Spec(a.mpareq_acked, None,
                            note="ack_rcvd = true: resends stop, the countdown goes on"),
}, _Spec(a.cleanup, None, note="cleanup only; payload ignored and not ACKed"))
TABLE |= _rows(Input.ACK_DATA, "irdma_handle_ack_pkt", _ACK_COMMON | {
    (S.SYN_RCVD,): _Spec(a.syn_rcvd_ack, S.MPAREQ_RCVD, _FREED,
                         note="MPA request piggy-backed on the third ACK"),
    (S.ESTABLISHED,): _Spec(a.established_data, S.MPAREQ_RCVD, _FREED,
                            note="rcv_nxt = seq + len; irdma_handle_rcv_mpa"),
    (S.MPAREQ_SENT,): _Spec(a.mpareq_sent_data, S.OFFLOADED, (S.MPAREJ_RCVD, S.CLOSED),
                            note="ack_rcvd = false; irdma_handle_rcv_mpa"),
}, _Spec(a.cleanup, None, note="cleanup only; payload ignored and not ACKed"))

# irdma_handle_rcv_mpa
TABLE |= _rows(Input.MPA, "irdma_handle_rcv_mpa", {
    (S.ESTABLISHED,): _Spec(a.mpa_request, S.MPAREQ_RCVD, _FREED,
                            note="ACK, MPA_REQ -> CONNECT_REQUEST; bad frame: RST"),
    (S.MPAREQ_SENT,): _Spec(a.mpa_reply, S.OFFLOADED, (S.MPAREJ_RCVD, S.CLOSED),
                            note="ACK; CONNECTED or MPA_REJECT; bad frame: RST, ABORTED"),
}, _Spec(a.mpa_unexpected, None, _FREED,
         note="parsed, then event UNKNOWN (dropped); bad frame: RST"))

# irdma_handle_fin_pkt
TABLE |= _rows(Input.FIN, "irdma_handle_fin_pkt", {
    (S.SYN_RCVD, S.SYN_SENT, S.ESTABLISHED, S.MPAREJ_RCVD): _Spec(
        a.fin_to_last_ack, S.LAST_ACK, note="rcv_nxt++; FIN|ACK (retransmitted)"),
    (S.MPAREQ_SENT,): _Spec(a.fin_abort, S.CLOSED, note="ABORTED; +ref RST!"),
    (S.FIN_WAIT1,): _Spec(a.fin_simultaneous, S.CLOSING, note="rcv_nxt++; ACK"),
    (S.FIN_WAIT2,): _Spec(a.fin_time_wait, S.TIME_WAIT,
                          note="rcv_nxt++; ACK; close timer HZ/10"),
    (S.TIME_WAIT,): _Spec(a.fin_again_free, S.CLOSED, note="rcv_nxt++; free, no ACK"),
}, _Spec(a.ignore, None, note="bad state: FIN ignored and not ACKed"))

# irdma_handle_rst_pkt (cleanup first, no sequence check)
TABLE |= _rows(Input.RST, "irdma_handle_rst_pkt", {
    (S.SYN_SENT, S.MPAREQ_SENT): _Spec(
        a.rst_active, S.SYN_SENT, (S.CLOSED,),
        note="MPA v2 -> v1: new SYN on the same 4-tuple; at v1: CLOSED, ABORTED"),
    (S.MPAREQ_RCVD,): _Spec(a.rst_indicated, None,
                            note="passive_state++: accept -> -ECONNRESET, reject frees"),
    (S.ESTABLISHED, S.SYN_RCVD, S.LISTENING): _Spec(
        a.passive_open_err_quiet, S.CLOSED, note="CLOSED, free, no upcall"),
    (S.OFFLOADED,): _Spec(a.active_open_err_quiet, S.CLOSED, (S.OFFLOADED,),
                          note="unreachable: OFFLOADED segments never reach the CM; the "
                               "QP's reset AE keeps a node whose accept still waits for "
                               "the RTR OFFLOADED (irdma_send_cm_event waits on "
                               "establish_comp)"),
    (S.FIN_WAIT1, S.FIN_WAIT2, S.LAST_ACK, S.TIME_WAIT): _Spec(
        a.free_closed, S.CLOSED, note="CLOSED; free"),
}, _Spec(a.cleanup, None, note="nothing but cleanup: the node lingers (no case in "
                                    "irdma_handle_rst_pkt)"))

# A segment with none of SYN, ACK, RST, FIN: IRDMA_PKT_TYPE_UNKNOWN without FIN.
TABLE |= _rows(Input.NONE, "irdma_process_pkt", {}, _IGNORE)

# ---- local actions: verbs, timers, completions ---------------------------------------------------

TABLE |= _rows(Input.CONNECT, "irdma_connect", {
    (S.UNKNOWN,): _Spec(a.connect, S.SYN_SENT, note="SYN (retransmitted)"),
}, _Spec(a.misuse, None, note="connect creates a fresh node"))

TABLE |= _rows(Input.ACCEPT, "irdma_accept", {
    (S.MPAREQ_RCVD,): _Spec(
        a.accept, S.OFFLOADED, (S.CLOSED, S.MPAREQ_RCVD),
        note="MPA reply by the QP (LSMM); passive_state 2 -> -ECONNRESET, freed (kept "
             "in MPAREQ_RCVD while a pending qhash completion still holds it)"),
    (S.LISTENER_DESTROYED,): _Spec(a.accept_listener_destroyed, S.CLOSED,
                                   (S.LISTENER_DESTROYED,),
                                   note="-EINVAL, node freed (kept while a pending qhash "
                                        "completion or a leaked reference holds it)"),
}, _Spec(a.misuse, None, note="no MPA request pending: CmError"))

TABLE |= _rows(Input.REJECT, "irdma_cm_reject", {
    (S.MPAREQ_RCVD,): _Spec(
        a.reject, S.FIN_WAIT1, _FREED,
        note="reply with R + ACK|FIN; after a peer RST: freed, no packet"),
    (S.LISTENER_DESTROYED,): _Spec(a.reject_listener_destroyed, S.CLOSED,
                                   (S.LISTENER_DESTROYED,),
                                   note="free, no packet (kept while a pending qhash "
                                        "completion or a leaked reference holds it)"),
}, _Spec(a.misuse, None, note="active node: no-op; passive, not pending: CmError"))

_CLOSE_RST = (S.SYN_RCVD, S.SYN_SENT, S.ONE_SIDE_ESTABLISHED, S.ESTABLISHED, S.ACCEPTING,
              S.MPAREQ_SENT, S.MPAREQ_RCVD, S.LISTENING)
TABLE |= _rows(Input.CLOSE, "irdma_cm_close", {
    _CLOSE_RST: _Spec(a.close_reset, None, _FREED,
                      note="cleanup; RST! (consumes the base reference)"),
    (S.CLOSE_WAIT,): _Spec(a.close_fin, S.LAST_ACK, note="unreachable: FIN"),
    (S.FIN_WAIT1, S.FIN_WAIT2, S.LAST_ACK, S.TIME_WAIT, S.CLOSING): _Spec(
        a.close_einval, None, note="-EINVAL, nothing"),
}, _Spec(a.close_free, None, _FREED,
         note="free: MPAREJ_RCVD, UNKNOWN, INITED, CLOSED, LISTENER_DESTROYED, OFFLOADED"))

TABLE |= _rows(Input.DESTROY_LISTEN, "irdma_dec_refcnt_listen", {
    tuple(st for st in _ALL if st < S.FIN_WAIT1): _Spec(
        a.listener_reset, S.LISTENER_DESTROYED, (S.CLOSED,),
        note="cleanup; RST; LISTENER_DESTROYED (base ref dropped unless MPAREQ_RCVD); "
             "RST failed: CLOSED and a leaked reference"),
}, _Spec(a.listener_leave, None,
         note="state >= FIN_WAIT1: left alone, the temporary reference dropped"))

TABLE |= _rows(Input.RETRANS_EXPIRED, "irdma_retrans_expired", {
    (S.SYN_RCVD, S.CLOSING): _Spec(a.expire_free, S.CLOSED, note="free, no RST"),
    (S.FIN_WAIT1, S.LAST_ACK): _Spec(a.expire_reset, S.CLOSED, note="RST! (frees)"),
}, _Spec(a.expire_abort, S.CLOSED, note="+ref RST!, ABORTED"))

TABLE |= _rows(Input.CLOSE_TIMER, "irdma_handle_close_entry", {
    (S.TIME_WAIT,): _Spec(a.close_entry_free, None, _FREED, note="TIME_WAIT over: free"),
}, _Spec(a.close_entry_free, None, _FREED,
         note="a close entry without QP frees the node whatever its state"))

TABLE |= _rows(Input.QHASH_DONE, "irdma_send_syn_cqp_callback", {},
               _Spec(a.send_synack, None, note="SYN|ACK whatever the state "
                                                      "(the callback does not check it)"))

TABLE |= _rows(Input.TEARDOWN, "irdma_cm_teardown_connections", {},
               _Spec(a.teardown_reset, S.CLOSED, _FREED,
                     note="no QP (a passive node never accepted): cleanup; CLOSED; +ref "
                          "RST!; put (the NULL check the kernel lacks)"))

assert len(TABLE) == len(_ALL) * len(Input)


class UnreachableRowRan(MpaEmuError, AssertionError):
    """A row marked ``reachable=False`` ran: the table or the core is wrong."""


STRICT_REACHABILITY = False
"""When True (the test suite sets it), a row marked unreachable that runs raises
:class:`UnreachableRowRan`; otherwise it is recorded in the trace as ``table_bug``."""


def unreachable_row_ran(r: Row, trace: Callable[..., Any]) -> None:
    """Report that row ``r``, marked unreachable, is about to run."""
    message = (f"{r.kernel_fn}: row {r.state.name} x {r.input.value} is marked "
               "unreachable but ran")
    if STRICT_REACHABILITY:
        raise UnreachableRowRan(message)
    trace("table_bug", r.kernel_fn, state=r.state.name, input=r.input.value,
          message=message)


def row(state: CmState, inp: Input) -> Row:
    """The row for ``(state, inp)``; every pair has one."""
    return TABLE[(state, inp)]
