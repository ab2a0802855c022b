"""The transition table: complete, and every reachable (state, input) row driven on a
real core, ending where the row says."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from helpers.cm_harness import IP_A, IP_P, MAC_A, MAC_P, MS, PORT, S_NS, to_host
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.irdma.config import CmConfig, Quirks
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.irdma.states import CmState, Input
from mpa_emu.stacks.irdma.transitions import TABLE, row

from mpa_emu.wire import mpa
from mpa_emu.wire.segment import ACK, FIN, RST, SYN, Segment

S = CmState
PEER_PORT = 5000


def test_every_state_input_pair_has_exactly_one_row() -> None:
    assert len(TABLE) == len(CmState) * len(Input)
    for st in CmState:
        for inp in Input:
            r = row(st, inp)
            assert (r.state, r.input) == (st, inp)
            assert r.kernel_fn.startswith("irdma_")
            assert r.next_state in r.allowed


def test_kernel_ignore_rows_are_rows() -> None:
    assert row(S.MPAREQ_SENT, Input.SYNACK).action == "ignore"  # no re-ACK
    assert row(S.SYN_RCVD, Input.SYN).action == "ignore"  # no SYN-ACK resend
    assert row(S.MPAREQ_RCVD, Input.FIN).action == "ignore"  # FIN not ACKed
    assert row(S.CLOSING, Input.RST).action == "cleanup"  # lingers


@dataclass
class Lab:
    """One core under test with a hand-driven peer at IP_A:5000."""

    cfg: CmConfig = field(default_factory=CmConfig)
    core: CmCore = field(init=False)
    conn: int = 0
    listener: int = 0
    now: int = 0

    def __post_init__(self) -> None:
        self.core = CmCore("H", MAC_P, self.cfg, seed=5, trace=Trace())
        self.core.add_address(IP_P)
        self.core.set_neighbour(IP_A, MAC_A)

    def seg(self, flags: int, *, seq: int | None = None, ack: int | None = None,
            payload: bytes = b"") -> Segment:
        view = self.core.node(self.conn) if self.conn else None
        if seq is None:
            seq = view.rcv_nxt if view is not None else 7000
        if ack is None:
            ack = view.loc_seq_num if view is not None else 0
        lport = view.loc_port if view is not None else PORT
        return to_host(MAC_P, IP_A, IP_P, PEER_PORT, lport, flags=flags, seq=seq, ack=ack,
                       payload=payload, src_mac=MAC_A)

    def send(self, seg: Segment) -> None:
        self.core.receive(seg, self.now)
        self.core.frames_to_send()

    def state(self) -> CmState:
        view = self.core.node(self.conn)
        return S.CLOSED if view is None else view.state

    def advance(self, ns: int) -> None:
        self.now += ns
        self.core.handle_timer(self.now)
        self.core.frames_to_send()


REQUEST = mpa.MpaFrame(request=True, rev=2, flags=0x50,
                       rtr=mpa.RtrBlock(ird=16, ord=16, write0=True, read0=True),
                       private_data=b"req").to_bytes()


def reply(reject: bool) -> bytes:
    return mpa.MpaFrame(request=False, rev=2, flags=0x70 if reject else 0x50,
                        rtr=mpa.RtrBlock(ird=16, ord=16, read0=True),
                        private_data=b"rep").to_bytes()


# ---- recipes: bring a fresh core's node into a state -----------------------------

def active(lab: Lab) -> None:
    lab.conn = lab.core.connect(IP_P, IP_A, PEER_PORT, now_ns=0)
    lab.core.frames_to_send()


def mpareq_sent(lab: Lab) -> None:
    active(lab)
    lab.send(lab.seg(SYN | ACK, seq=9000))


def mparej_rcvd(lab: Lab) -> None:
    mpareq_sent(lab)
    lab.send(lab.seg(ACK, payload=reply(True)))


def syn_rcvd(lab: Lab) -> None:
    lab.listener = lab.core.create_listen(IP_P, PORT)
    lab.send(to_host(MAC_P, IP_A, IP_P, PEER_PORT, PORT, flags=SYN, seq=7000,
                     src_mac=MAC_A))
    lab.conn = lab.core.conns()[0]


def established(lab: Lab) -> None:
    syn_rcvd(lab)
    lab.send(lab.seg(ACK))


def mpareq_rcvd(lab: Lab) -> None:
    established(lab)
    lab.send(lab.seg(ACK, payload=REQUEST))


def fin_wait1(lab: Lab) -> None:
    mpareq_rcvd(lab)
    lab.core.reject(lab.conn, now_ns=0)
    lab.core.frames_to_send()


def fin_wait2(lab: Lab) -> None:
    fin_wait1(lab)
    lab.send(lab.seg(ACK))


def time_wait(lab: Lab) -> None:
    fin_wait2(lab)
    lab.send(lab.seg(ACK | FIN))


def closing(lab: Lab) -> None:
    fin_wait1(lab)
    lab.send(lab.seg(FIN))  # FIN-only whose ack field equals loc_seq_num


def last_ack(lab: Lab) -> None:
    established(lab)
    lab.send(lab.seg(ACK | FIN))


def listener_destroyed(lab: Lab) -> None:
    mpareq_rcvd(lab)
    lab.core.destroy_listen(lab.listener, now_ns=0)
    lab.core.frames_to_send()


def offloaded(lab: Lab) -> None:
    mpareq_rcvd(lab)
    lab.core.accept(lab.conn, now_ns=0)
    lab.core.frames_to_send()


def closed_leaked(lab: Lab) -> None:
    # GEN_2, AH not yet valid: the listener's RST cannot be sent (irdma_form_ah_cm_frame)
    syn_rcvd(lab)
    lab.core.destroy_listen(lab.listener, now_ns=0)


RECIPES: dict[CmState, tuple[Callable[[Lab], None], CmConfig]] = {
    S.SYN_SENT: (active, CmConfig()),
    S.MPAREQ_SENT: (mpareq_sent, CmConfig()),
    S.MPAREJ_RCVD: (mparej_rcvd, CmConfig()),
    S.SYN_RCVD: (syn_rcvd, CmConfig()),
    S.ESTABLISHED: (established, CmConfig()),
    S.MPAREQ_RCVD: (mpareq_rcvd, CmConfig()),
    S.OFFLOADED: (offloaded, CmConfig()),
    S.FIN_WAIT1: (fin_wait1, CmConfig()),
    S.FIN_WAIT2: (fin_wait2, CmConfig()),
    S.TIME_WAIT: (time_wait, CmConfig()),
    S.LAST_ACK: (last_ack, CmConfig()),
    S.CLOSING: (closing, CmConfig()),
    S.LISTENER_DESTROYED: (listener_destroyed, CmConfig()),
    S.CLOSED: (closed_leaked, CmConfig(ah_latency_ns=S_NS)),
}


def prepared(state: CmState, **cfg: object) -> Lab:
    recipe, base = RECIPES[state]
    lab = Lab(CmConfig(**{**{f: getattr(base, f) for f in base.__dataclass_fields__},
                          **cfg}))  # type: ignore[arg-type]
    recipe(lab)
    assert lab.state() is state, f"recipe for {state.name} reached {lab.state().name}"
    return lab


def drive(lab: Lab, inp: Input) -> None:
    core = lab.core
    if inp is Input.SYN:
        lab.send(lab.seg(SYN, seq=777, ack=0))
    elif inp is Input.SYNACK:
        lab.send(lab.seg(SYN | ACK, seq=777))
    elif inp is Input.ACK:
        lab.send(lab.seg(ACK))
    elif inp in (Input.ACK_DATA, Input.MPA):
        view = core.node(lab.conn)
        frame = reply(False) if view and view.state is S.MPAREQ_SENT else REQUEST
        lab.send(lab.seg(ACK, payload=frame))
    elif inp is Input.FIN:
        lab.send(lab.seg(FIN))
    elif inp is Input.RST:
        lab.send(lab.seg(RST | ACK))
    elif inp is Input.NONE:
        lab.send(lab.seg(0, payload=b"xx"))
    elif inp is Input.ACCEPT:
        core.accept(lab.conn, now_ns=lab.now)
    elif inp is Input.REJECT:
        core.reject(lab.conn, now_ns=lab.now)
    elif inp is Input.CLOSE:
        core.close(lab.conn, now_ns=lab.now)
    elif inp is Input.DESTROY_LISTEN:
        if core.listener(lab.listener) is not None and \
                core.listener(lab.listener).state.name == "PASSIVE":  # type: ignore[union-attr]
            core.create_listen(IP_P, PORT, now_ns=lab.now)  # reuse the dying listener
        core.destroy_listen(lab.listener, now_ns=lab.now)
    elif inp is Input.QHASH_DONE:
        lab.advance(2 * MS)  # past the AH latency, before any CM timer
    elif inp in (Input.RETRANS_EXPIRED, Input.CLOSE_TIMER):
        lab.advance(2 * S_NS)  # past the first resend and the close timer
    elif inp is Input.TEARDOWN:
        core.remove_address(IP_P, now_ns=lab.now)  # irdma_cm_teardown_connections
    else:  # pragma: no cover
        raise AssertionError(inp)
    core.frames_to_send()


LATE_SYNACK = frozenset({S.LISTENER_DESTROYED, S.ESTABLISHED, S.MPAREQ_RCVD, S.FIN_WAIT2,
                         S.CLOSING})
"""States a passive node can reach before its delayed SYN-ACK goes out (a peer that ACKs
the ISN, the application, a listener destroy), so the SYN-ACK entry runs out there."""


def before_synack(state: CmState, **cfg: object) -> Lab:
    """GEN_1 with a 1 ms qhash latency: the recipe runs before the SYN-ACK is sent."""
    lab = Lab(CmConfig(gen=1, ah_latency_ns=MS, **cfg))  # type: ignore[arg-type]
    RECIPES[state][0](lab)
    assert lab.state() is state
    return lab


def setup_for(r_state: CmState, inp: Input) -> Lab:
    if inp is Input.TEARDOWN:
        # the NULL-checked teardown: a node without QP gets the CM's RST and is freed
        return prepared(r_state, quirks=Quirks(teardown_null_qp_oops=False))
    if inp is Input.RETRANS_EXPIRED and r_state in LATE_SYNACK:
        lab = before_synack(r_state, retrans=0)
        lab.advance(2 * MS)  # the SYN-ACK, with a send entry that never resends
        view = lab.core.node(lab.conn)
        assert view is not None and view.state is r_state and view.retransmitting
        return lab
    if inp is Input.RETRANS_EXPIRED:
        return prepared(r_state, retrans=0)
    if inp is Input.QHASH_DONE:
        if r_state is S.CLOSED:
            lab = Lab(CmConfig(ah_latency_ns=MS))
            syn_rcvd(lab)
            lab.send(lab.seg(RST | ACK))
        elif r_state is S.LISTENER_DESTROYED:
            lab = Lab(CmConfig(gen=1, ah_latency_ns=MS))
            syn_rcvd(lab)
            lab.core.destroy_listen(lab.listener, now_ns=0)
        else:
            lab = before_synack(r_state)
        assert lab.state() is r_state
        assert lab.core.get_timer() == MS  # the qhash completion is the next deadline
        return lab
    return prepared(r_state)


RETURNS_ERROR = frozenset({"accept_listener_destroyed"})
"""Actions whose kernel function runs its error path and then returns -errno: the verb
raises CmError after the node moved where the row says."""

DRIVEN = [(r.state, r.input) for r in TABLE.values()
          if r.reachable and r.state not in (S.UNKNOWN, S.LISTENING)]


@pytest.mark.parametrize(("state", "inp"), DRIVEN, ids=[f"{s.name}-{i.value}"
                                                       for s, i in DRIVEN])
def test_row_drives_the_node_where_the_table_says(state: CmState, inp: Input) -> None:
    r = row(state, inp)
    lab = setup_for(state, inp)
    before = lab.state()
    try:
        drive(lab, inp)
    except CmError:
        if r.action in RETURNS_ERROR:
            assert lab.state() in r.allowed
            return
        assert r.action in ("misuse", "close_einval"), f"unexpected CmError for {r}"
        assert lab.state() is before
        return
    assert r.action not in RETURNS_ERROR, f"{r} should have returned an error"
    assert r.action not in ("misuse", "close_einval") or (
        inp is Input.REJECT and lab.core.node(lab.conn) is not None
        and lab.core.node(lab.conn).client), f"{r} should have been refused"  # type: ignore[union-attr]
    assert lab.state() in r.allowed, (
        f"{state.name}/{inp.value} -> {lab.state().name}, table: "
        f"{sorted(s.name for s in r.allowed)}")


def test_transient_rows_are_driven_by_connect_and_the_first_syn() -> None:
    lab = Lab()
    active(lab)
    assert lab.state() in row(S.UNKNOWN, Input.CONNECT).allowed
    lab2 = Lab()
    syn_rcvd(lab2)
    assert lab2.state() in row(S.LISTENING, Input.SYN).allowed


def test_unreachable_rows_are_the_kernel_states_never_held_or_impossible_inputs() -> None:
    for r in TABLE.values():
        if r.state in (S.INITED, S.ONE_SIDE_ESTABLISHED, S.ACCEPTING, S.CLOSE_WAIT):
            assert not r.reachable
    assert not row(S.MPAREQ_RCVD, Input.MPA).reachable
    assert not row(S.SYN_SENT, Input.DESTROY_LISTEN).reachable
    assert row(S.TIME_WAIT, Input.CLOSE_TIMER).reachable
