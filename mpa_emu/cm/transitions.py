"""The one transition table: every (state, input) row of spec 2.2 and 2.3 as data.

A row names the action the node runs (a method ``_act_<action>`` of the core), the state
it normally ends in, the other states the action may reach (error paths), and the cm.c
function it models. The kernel's explicit "ignore" cases are rows too. The core looks a
row up for every input and asserts afterwards that the node ended in ``next_state`` or in
one of ``may_reach`` (a node whose
reference count reached zero counts as ``CLOSED``).

``reachable=False`` marks rows no input sequence can exercise: states the kernel never
sets, the transient ones (``UNKNOWN`` lasts only inside ``irdma_connect``, ``LISTENING``
only inside the SYN's ``irdma_receive_ilq``), and inputs a state cannot meet (see
:func:`_reachable`). A test drives every reachable row and checks the others are marked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from mpa_emu.cm.states import CmState, Input

S = CmState


@dataclass(frozen=True, slots=True)
class Row:
    """One (state, input) row."""

    state: CmState
    input: Input
    action: str
    next_state: CmState
    may_reach: frozenset[CmState]
    kernel_fn: str
    note: str = ""
    reachable: bool = True
    allowed: frozenset[CmState] = frozenset()
    """Every state the node may be in after the action (``next_state`` and
    ``may_reach``), precomputed for the per-input check."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "allowed", self.may_reach | {self.next_state})


NEVER_SET = frozenset({S.INITED, S.ONE_SIDE_ESTABLISHED, S.ACCEPTING, S.CLOSE_WAIT})
"""States declared in cm.h that cm.c never assigns."""
TRANSIENT = frozenset({S.UNKNOWN, S.LISTENING})
"""States that exist only inside one kernel call."""

_ALL = tuple(CmState)


@dataclass(frozen=True, slots=True)
class _Spec:
    action: str
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
    # whatever the state, errata 2) that irdma_cm_timer_tick resends until expiry: after
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
}


def _reachable(st: CmState, inp: Input) -> bool:
    if inp in _PACKETS:
        return st in _HELD or (st == S.LISTENING and inp == Input.SYN)
    if inp in _REACHABLE_BY_INPUT:
        return st in _REACHABLE_BY_INPUT[inp]
    return st in _HELD  # verbs: any node the application holds


_IGNORE = _Spec("ignore", None, note="ignored by the kernel")
_FREED = (S.CLOSED,)

TABLE: dict[tuple[CmState, Input], Row] = {}

# irdma_handle_syn_pkt
TABLE |= _rows(Input.SYN, "irdma_handle_syn_pkt", {
    (S.SYN_SENT, S.MPAREQ_SENT): _Spec(
        "active_open_err_reset", S.CLOSED,
        note="no simultaneous open: +ref RST!, CLOSED, ABORTED"),
    (S.LISTENING,): _Spec(
        "passive_open", S.SYN_RCVD, _FREED,
        note="backlog, options, AH (async); SYN-ACK after the qhash completion"),
    (S.CLOSED,): _Spec("reset_again", None, note="cleanup, +ref RST!"),
}, _Spec("ignore", None, note="duplicate SYN: no SYN-ACK retransmission"))

# irdma_handle_synack_pkt
TABLE |= _rows(Input.SYNACK, "irdma_handle_synack_pkt", {
    (S.SYN_SENT,): _Spec(
        "synack_active_open", S.MPAREQ_SENT, (S.CLOSED, S.SYN_SENT),
        note="check_syn, options, ACK, MPA request"),
    (S.MPAREQ_RCVD,): _Spec("passive_open_err_reset", S.CLOSED,
                            note="RST; the pending request is not told (errata 6)"),
    (S.LISTENING,): _Spec("synack_reset_closed", S.CLOSED,
                          note="loc_seq_num = ack; RST!"),
    (S.CLOSED,): _Spec("synack_reset_again", None, note="loc_seq_num = ack; +ref RST!"),
}, _Spec("ignore", None, note="duplicate SYN-ACK: no re-ACK"))

# irdma_handle_ack_pkt (after irdma_check_seq), pure ACK and ACK with data
_ACK_COMMON: dict[Iterable[CmState], _Spec] = {
    (S.LISTENING,): _Spec("ack_reset_closed", S.CLOSED, note="cleanup; CLOSED; RST!"),
    (S.CLOSED,): _Spec("reset_again", None, note="cleanup; +ref RST!"),
    (S.LAST_ACK, S.CLOSING): _Spec("free_closed", S.CLOSED, note="cleanup; CLOSED; free"),
    (S.FIN_WAIT1,): _Spec("fin_wait1_acked", S.FIN_WAIT2, note="our FIN acknowledged"),
}
TABLE |= _rows(Input.ACK, "irdma_handle_ack_pkt", _ACK_COMMON | {
    (S.SYN_RCVD,): _Spec("syn_rcvd_ack", S.ESTABLISHED, _FREED,
                         note="third handshake ACK; option error -> RST"),
    (S.ESTABLISHED,): _Spec("cleanup", None, note="cleanup only"),
    (S.MPAREQ_SENT,): _Spec("mpareq_acked", None,
                            note="ack_rcvd = true: resends stop, the countdown goes on"),
}, _Spec("cleanup", None, note="cleanup only; payload ignored and not ACKed"))
TABLE |= _rows(Input.ACK_DATA, "irdma_handle_ack_pkt", _ACK_COMMON | {
    (S.SYN_RCVD,): _Spec("syn_rcvd_ack", S.MPAREQ_RCVD, _FREED,
                         note="MPA request piggy-backed on the third ACK"),
    (S.ESTABLISHED,): _Spec("established_data", S.MPAREQ_RCVD, _FREED,
                            note="rcv_nxt = seq + len; irdma_handle_rcv_mpa"),
    (S.MPAREQ_SENT,): _Spec("mpareq_sent_data", S.OFFLOADED, (S.MPAREJ_RCVD, S.CLOSED),
                            note="ack_rcvd = false; irdma_handle_rcv_mpa"),
}, _Spec("cleanup", None, note="cleanup only; payload ignored and not ACKed"))

# irdma_handle_rcv_mpa
TABLE |= _rows(Input.MPA, "irdma_handle_rcv_mpa", {
    (S.ESTABLISHED,): _Spec("mpa_request", S.MPAREQ_RCVD, _FREED,
                            note="ACK, MPA_REQ -> CONNECT_REQUEST; bad frame: RST"),
    (S.MPAREQ_SENT,): _Spec("mpa_reply", S.OFFLOADED, (S.MPAREJ_RCVD, S.CLOSED),
                            note="ACK; CONNECTED or MPA_REJECT; bad frame: RST, ABORTED"),
}, _Spec("mpa_unexpected", None, _FREED,
         note="parsed, then event UNKNOWN (dropped); bad frame: RST"))

# irdma_handle_fin_pkt
TABLE |= _rows(Input.FIN, "irdma_handle_fin_pkt", {
    (S.SYN_RCVD, S.SYN_SENT, S.ESTABLISHED, S.MPAREJ_RCVD): _Spec(
        "fin_to_last_ack", S.LAST_ACK, note="rcv_nxt++; FIN|ACK (retransmitted)"),
    (S.MPAREQ_SENT,): _Spec("fin_abort", S.CLOSED, note="ABORTED; +ref RST!"),
    (S.FIN_WAIT1,): _Spec("fin_simultaneous", S.CLOSING, note="rcv_nxt++; ACK"),
    (S.FIN_WAIT2,): _Spec("fin_time_wait", S.TIME_WAIT,
                          note="rcv_nxt++; ACK; close timer HZ/10"),
    (S.TIME_WAIT,): _Spec("fin_again_free", S.CLOSED, note="rcv_nxt++; free, no ACK"),
}, _Spec("ignore", None, note="bad state: FIN ignored and not ACKed"))

# irdma_handle_rst_pkt (cleanup first, no sequence check)
TABLE |= _rows(Input.RST, "irdma_handle_rst_pkt", {
    (S.SYN_SENT, S.MPAREQ_SENT): _Spec(
        "rst_active", S.SYN_SENT, (S.CLOSED,),
        note="MPA v2 -> v1: new SYN on the same 4-tuple; at v1: CLOSED, ABORTED"),
    (S.MPAREQ_RCVD,): _Spec("rst_indicated", None,
                            note="passive_state++: accept -> -ECONNRESET, reject frees"),
    (S.ESTABLISHED, S.SYN_RCVD, S.LISTENING): _Spec(
        "passive_open_err", S.CLOSED, note="CLOSED, free, no upcall"),
    (S.OFFLOADED,): _Spec("active_open_err", S.CLOSED, (S.OFFLOADED,),
                          note="unreachable: OFFLOADED segments never reach the CM; the "
                               "QP's reset AE keeps a node whose accept still waits for "
                               "the RTR OFFLOADED (irdma_send_cm_event waits on "
                               "establish_comp)"),
    (S.FIN_WAIT1, S.FIN_WAIT2, S.LAST_ACK, S.TIME_WAIT): _Spec(
        "free_closed", S.CLOSED, note="CLOSED; free"),
}, _Spec("cleanup", None, note="nothing but cleanup: the node lingers (spec 8)"))

# A segment with none of SYN, ACK, RST, FIN: IRDMA_PKT_TYPE_UNKNOWN without FIN.
TABLE |= _rows(Input.NONE, "irdma_process_pkt", {}, _IGNORE)

# ---- local actions (spec 2.3) ---------------------------------------------------

TABLE |= _rows(Input.CONNECT, "irdma_connect", {
    (S.UNKNOWN,): _Spec("connect", S.SYN_SENT, note="SYN (retransmitted)"),
}, _Spec("misuse", None, note="connect creates a fresh node"))

TABLE |= _rows(Input.ACCEPT, "irdma_accept", {
    (S.MPAREQ_RCVD,): _Spec(
        "accept", S.OFFLOADED, (S.CLOSED, S.MPAREQ_RCVD),
        note="MPA reply by the QP (LSMM); passive_state 2 -> -ECONNRESET, freed (kept "
             "in MPAREQ_RCVD while a pending qhash completion still holds it)"),
    (S.LISTENER_DESTROYED,): _Spec("accept_listener_destroyed", S.CLOSED,
                                   (S.LISTENER_DESTROYED,),
                                   note="-EINVAL, node freed (kept while a pending qhash "
                                        "completion or a leaked reference holds it)"),
}, _Spec("misuse", None, note="no MPA request pending: CmError"))

TABLE |= _rows(Input.REJECT, "irdma_cm_reject", {
    (S.MPAREQ_RCVD,): _Spec(
        "reject", S.FIN_WAIT1, _FREED,
        note="reply with R + ACK|FIN; after a peer RST: freed, no packet"),
    (S.LISTENER_DESTROYED,): _Spec("reject_listener_destroyed", S.CLOSED,
                                   (S.LISTENER_DESTROYED,),
                                   note="free, no packet (kept while a pending qhash "
                                        "completion or a leaked reference holds it)"),
}, _Spec("misuse", None, note="active node: no-op; passive, not pending: CmError"))

_CLOSE_RST = (S.SYN_RCVD, S.SYN_SENT, S.ONE_SIDE_ESTABLISHED, S.ESTABLISHED, S.ACCEPTING,
              S.MPAREQ_SENT, S.MPAREQ_RCVD, S.LISTENING)
TABLE |= _rows(Input.CLOSE, "irdma_cm_close", {
    _CLOSE_RST: _Spec("close_reset", None, _FREED,
                      note="cleanup; RST! (consumes the base reference)"),
    (S.CLOSE_WAIT,): _Spec("close_fin", S.LAST_ACK, note="unreachable: FIN"),
    (S.FIN_WAIT1, S.FIN_WAIT2, S.LAST_ACK, S.TIME_WAIT, S.CLOSING): _Spec(
        "close_einval", None, note="-EINVAL, nothing"),
}, _Spec("close_free", None, _FREED,
         note="free: MPAREJ_RCVD, UNKNOWN, INITED, CLOSED, LISTENER_DESTROYED, OFFLOADED"))

TABLE |= _rows(Input.DESTROY_LISTEN, "irdma_dec_refcnt_listen", {
    tuple(st for st in _ALL if st < S.FIN_WAIT1): _Spec(
        "listener_reset", S.LISTENER_DESTROYED, (S.CLOSED,),
        note="cleanup; RST; LISTENER_DESTROYED (base ref dropped unless MPAREQ_RCVD); "
             "RST failed: CLOSED and a leaked reference"),
}, _Spec("ignore", None, note="state >= FIN_WAIT1: left alone"))

TABLE |= _rows(Input.RETRANS_EXPIRED, "irdma_retrans_expired", {
    (S.SYN_RCVD, S.CLOSING): _Spec("expire_free", S.CLOSED, note="free, no RST"),
    (S.FIN_WAIT1, S.LAST_ACK): _Spec("expire_reset", S.CLOSED, note="RST! (frees)"),
}, _Spec("expire_abort", S.CLOSED, note="+ref RST!, ABORTED"))

TABLE |= _rows(Input.CLOSE_TIMER, "irdma_handle_close_entry", {
    (S.TIME_WAIT,): _Spec("close_entry_free", None, _FREED, note="TIME_WAIT over: free"),
}, _Spec("close_entry_free", None, _FREED,
         note="a close entry without QP frees the node whatever its state"))

TABLE |= _rows(Input.QHASH_DONE, "irdma_send_syn_cqp_callback", {},
               _Spec("send_synack", None, note="SYN|ACK whatever the state (errata 2)"))

assert len(TABLE) == len(_ALL) * len(Input)


class UnreachableRowRan(AssertionError):
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
