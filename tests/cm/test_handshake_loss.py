"""Loss of each handshake frame: the kernel's retransmission recovers (irdma_cm_timer_tick)."""

from __future__ import annotations

from errno import ECONNREFUSED

import pytest
from helpers.cm_harness import IP_A, IP_P, MS, PORT, S_NS, Pair, Sent, make_pair
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.states import CmState


def lose(nth_src: str, comment_start: str):  # type: ignore[no-untyped-def]
    """Drop the first frame from ``nth_src`` whose comment starts with the text."""
    done: list[bool] = []

    def drop(s: Sent) -> bool:
        if not done and s.src == nth_src and s.tx.comment.startswith(comment_start):
            done.append(True)
            return True
        return False
    return drop


def accept_when_requested(pair: Pair, until: int) -> None:
    pair.p.create_listen(IP_P, PORT)
    pair.a.connect(IP_A, IP_P, PORT, private_data=b"p", now_ns=0)
    pair.pump()
    step = 10 * MS
    t = 0
    accepted = False
    while t < until:
        t += step
        pair.at(t)
        if not accepted and pair.events("P"):
            pair.p.accept(pair.events("P")[0].conn, now_ns=pair.now)
            pair.pump()
            accepted = True


@pytest.mark.parametrize(("src", "comment", "request_at"), [
    ("A", "irdma_send_syn", 1 * S_NS),
    ("P", "irdma_send_syn", 1 * S_NS),  # the SYN-ACK: only P's timer resends it
    ("A", "irdma_send_ack", 0),  # third ACK: the MPA request carries the same ACK
    ("A", "irdma_send_mpa_request", 1 * S_NS),
    ("P", "irdma_send_ack", 0),  # ACK of the request: A resends it, P ignores the copy
])
def test_connection_recovers_from_one_lost_handshake_frame(src: str, comment: str,
                                                           request_at: int) -> None:
    pair = make_pair()
    pair.drop = lose(src, comment)
    accept_when_requested(pair, 3 * S_NS)
    assert sum(not s.delivered for s in pair.log) == 1
    [req] = [u for u in pair.events("P") if u.event is IwEvent.CONNECT_REQUEST]
    assert req.time_ns == request_at
    replies = [u for u in pair.events("A") if u.event is IwEvent.CONNECT_REPLY]
    assert [u.status for u in replies] == [0]
    est = [u for u in pair.events("P") if u.event is IwEvent.ESTABLISHED]
    assert [u.status for u in est] == [0]
    assert [pair.a.node(c).state for c in pair.a.conns()] == [CmState.OFFLOADED]  # type: ignore[union-attr]


def test_duplicate_mpa_request_in_mpareq_rcvd_is_not_acked() -> None:
    pair = make_pair()
    pair.drop = lose("P", "irdma_send_ack")
    pair.p.create_listen(IP_P, PORT)
    pair.a.connect(IP_A, IP_P, PORT, now_ns=0)
    pair.pump()
    n_p = len(pair.frames("P"))
    pair.at(1 * S_NS)  # A resends the request
    assert pair.frames("A")[-1].tx.comment.startswith("irdma_cm_timer_tick: retransmit #1")
    assert len(pair.frames("P")) == n_p  # payload ignored in MPAREQ_RCVD, no ACK
    assert len(pair.events("P")) == 1


def test_lost_reject_is_resent_and_refuses_the_initiator() -> None:
    pair = make_pair()
    pair.drop = lose("P", "irdma_send_mpa_reject")
    pair.p.create_listen(IP_P, PORT)
    pair.a.connect(IP_A, IP_P, PORT, now_ns=0)
    pair.pump()
    pair.p.reject(pair.events("P")[0].conn, private_data=b"no", now_ns=0)
    pair.pump()
    pair.at(1 * S_NS)
    [rep] = pair.events("A")
    assert (rep.status, rep.time_ns) == (-ECONNREFUSED, 1 * S_NS)
    pair.run_out()
    assert pair.a.conns() == [] and pair.p.conns() == []


def test_lost_mpa_reply_is_recovered_by_the_offloaded_qp() -> None:
    pair = make_pair()
    pair.drop = lose("P", "irdma_sc_send_lsmm")
    accept_when_requested(pair, 3 * S_NS)
    assert [u.status for u in pair.events("A")] == [0]
    assert pair.events("A")[0].time_ns > 0
