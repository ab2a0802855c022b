"""Defects a fuzzer found on the late qhash completion path (GEN_1, or a non-zero AH
latency): the SYN-ACK of ``irdma_send_syn_cqp_callback`` goes out after the handshake
moved on, because the peer learned the passive ISN from the RST of an earlier
``irdma_cm_close`` and acknowledged it. Expected behaviour from cm.c:
``irdma_free_retrans_entry`` drops the entry's reference with ``refcount_dec`` (a count
reaching zero there saturates and leaks, it never frees), ``irdma_cm_reject`` goes on to
``irdma_send_mpa_reject`` regardless, ``irdma_retrans_expired`` aborts every state it
does not name, and ``irdma_handle_close_entry`` puts a reference whatever the state."""

from __future__ import annotations

import pytest
from helpers.cm_harness import IP_A, IP_P, MAC_A, MAC_P, MS, PORT, to_host
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.irdma.node import REFCOUNT_SATURATED
from mpa_emu.stacks.irdma.states import CmState, Input
from mpa_emu.stacks.irdma.transitions import UnreachableRowRan, row

from mpa_emu.stacks.irdma import transitions
from mpa_emu.wire import mpa
from mpa_emu.wire.segment import ACK, FIN, RST, SYN, Segment

REQ_V2 = mpa.MpaFrame(request=True, rev=2, rtr=mpa.RtrBlock(16, 16, write0=True, read0=True),
                      flags=0x50, private_data=b"r").to_bytes()
V1_REQ = mpa.MpaFrame(request=True, rev=1).to_bytes()


class Setup:
    """GEN_1, AH latency 1 ms, a listener on IP_P:PORT, a hand-made peer on port 5000."""

    def __init__(self, cfg: CmConfig | None = None) -> None:
        self.core = CmCore("P", MAC_P, cfg or CmConfig(gen=1, ah_latency_ns=MS), seed=3,
                           trace=Trace())
        self.core.add_address(IP_P)
        self.core.set_neighbour(IP_A, MAC_A)
        self.lid = self.core.create_listen(IP_P, PORT)
        self.now = 0

    def peer(self, flags: int, seq: int, ack: int = 0, payload: bytes = b"",
             options: bytes = b"") -> list[Segment]:
        self.now += 10
        self.core.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=flags, seq=seq,
                                  ack=ack, payload=payload, options=options,
                                  src_mac=MAC_A), self.now)
        return [t.segment for t in self.core.frames_to_send()]

    def request_after_close_v1(self) -> tuple[int, int]:
        """As :meth:`request_after_close` with an MPA v1 request."""
        return self.request_after_close(V1_REQ)

    def request_after_close(self, request: bytes = REQ_V2) -> tuple[int, int]:
        """SYN; the application's close in SYN_RCVD (RST with seq = ISN); the peer
        ACKs the ISN and sends its MPA request: CONNECT_REQUEST. Returns (conn, ISN)."""
        assert self.peer(SYN, 100) == []  # the SYN-ACK waits for the qhash completion
        [conn] = self.core.conns()
        view = self.core.node(conn)
        assert view is not None
        isn = view.loc_seq_num
        self.core.close(conn, now_ns=self.now)
        [rst] = [t.segment for t in self.core.frames_to_send()]
        assert rst.flags & RST and rst.seq == isn
        self.peer(ACK, 101, isn)
        self.peer(ACK, 101, isn, request)
        up = self.core.next_event()
        assert up is not None and up.conn == conn
        return conn, isn


def test_reject_after_the_late_synack_saturates_the_refcount_instead_of_escaping() -> None:
    s = Setup()
    conn, isn = s.request_after_close()
    s.core.handle_timer(s.now + MS)  # the late SYN-ACK: its entry holds the only reference
    [synack] = [t.segment for t in s.core.frames_to_send()]
    assert synack.flags == SYN | ACK and synack.seq == isn
    s.core.reject(conn, private_data=b"no", now_ns=s.now + MS + 1)
    # irdma_cm_reject: irdma_cleanup_retrans_entry (refcount_dec hits 0: WARN and
    # saturation), then irdma_send_mpa_reject sends the reply with R and FIN anyway
    [rej] = [t.segment for t in s.core.frames_to_send()]
    assert rej.flags == ACK | FIN
    # hand-decoded: the reply key, R (0x20) in the flags byte, the data at the end
    assert rej.payload[:16] == b"MPA ID Rep Frame" and rej.payload[16] & 0x20
    assert rej.payload.endswith(b"no")
    view = s.core.node(conn)
    assert view is not None and view.state == CmState.FIN_WAIT1
    assert view.refcnt >= REFCOUNT_SATURATED - 8
    bugs = [r.fields["reason"] for r in s.core.trace.of_kind("kernel_bug")]  # type: ignore[union-attr]
    assert "refcount_t: decrement hit 0; leaking memory" in bugs
    # the node can never be freed now: every timer runs out and it is still there, named
    while (t := s.core.get_timer()) is not None:
        s.core.handle_timer(t)
        s.core.frames_to_send()
    [(left, _, reason)] = s.core.leak_report()
    assert left == conn and reason is not None and "refcount_dec hit 0" in reason


def test_late_synack_entry_on_a_time_wait_node_aborts_at_expiry() -> None:
    # the table marks TIME_WAIT x retrans_expired reachable, and irdma_retrans_expired's
    # default branch (+ref, RST, ABORTED) ends the node in CLOSED
    r = row(CmState.TIME_WAIT, Input.RETRANS_EXPIRED)
    assert r.reachable and r.action == "expire_abort" and r.next_state == CmState.CLOSED
    assert row(CmState.CLOSED, Input.CLOSE_TIMER).reachable
    assert row(CmState.LISTENING, Input.DESTROY_LISTEN).reachable


def test_an_unreachable_row_that_runs_fails_under_the_strict_check() -> None:
    # CONNECT exists only in UNKNOWN (irdma_connect creates the node): a node in
    # SYN_RCVD meeting it is a core bug the check must catch
    s = Setup(CmConfig())
    s.peer(SYN, 100)
    [conn] = s.core.conns()
    node = s.core._cm_node(conn)
    assert node is not None and not row(node.state, Input.CONNECT).reachable
    assert transitions.STRICT_REACHABILITY  # the suite's autouse fixture
    with pytest.raises(UnreachableRowRan, match="SYN_RCVD x connect"):
        s.core._dispatch(node, Input.CONNECT, None)


def test_unreachable_row_outside_the_strict_check_is_recorded() -> None:
    s = Setup(CmConfig())
    s.peer(SYN, 100)
    [conn] = s.core.conns()
    node = s.core._cm_node(conn)
    assert node is not None
    transitions.STRICT_REACHABILITY = False  # restored by the autouse fixture
    with pytest.raises(CmError):  # the misuse row itself refuses
        s.core._dispatch(node, Input.CONNECT, None)
    [rec] = s.core.trace.of_kind("table_bug")  # type: ignore[union-attr]
    assert rec.fields["state"] == "SYN_RCVD" and rec.fields["input"] == "connect"


def test_the_first_leak_cause_of_a_stuck_receive_path_is_kept() -> None:
    # GEN_2: the LISTENING node has no AH yet, so irdma_dec_refcnt_listen's RST fails
    # later; the first cause, the option loop, is the one reported
    s = Setup(CmConfig())
    s.peer(SYN, 100, options=bytes.fromhex("03000000"))
    [conn] = s.core.conns()
    s.core.destroy_listen(s.lid, now_ns=s.now)
    report = dict((c, why) for c, _, why in s.core.leak_report())
    assert report[conn] is not None and report[conn].startswith(
        "receive path stuck in irdma_process_options")


def test_a_stuck_receive_path_loses_every_later_cm_segment() -> None:
    # irdma_process_options never returns: no later segment, for any 4-tuple, is
    # processed by the CM (a new SYN gets no node and no SYN-ACK)
    s = Setup(CmConfig())
    s.peer(SYN, 100, options=bytes.fromhex("03000000"))
    before = s.core.conns()
    s.core.receive(to_host(MAC_P, IP_A, IP_P, 5001, PORT, flags=SYN, seq=7,
                           src_mac=MAC_A), s.now + 1)
    assert s.core.conns() == before and s.core.frames_to_send() == []


def test_overwritten_reject_entry_then_time_wait_ends_freed_or_named() -> None:
    # A v1 request; reject (FIN_WAIT1, the reject's entry holds a reference); the late
    # SYN-ACK's irdma_schedule_cm_timer overwrites that entry (its reference leaks); the
    # peer ACKs everything (FIN_WAIT2: the SYN-ACK entry is cleaned up) and sends
    # FIN|ACK (TIME_WAIT). References, as in cm.c: the base one went with the close's
    # RST, the qhash completion's with its callback, the SYN-ACK entry's with the
    # cleanup; the TIME_WAIT close entry's put (irdma_handle_close_entry) then drops the
    # one the overwritten entry leaked, and the node is freed.
    s = Setup()
    conn, _isn = s.request_after_close_v1()
    s.core.reject(conn, now_ns=s.now)
    [rej] = [t.segment for t in s.core.frames_to_send()]
    assert rej.flags == ACK | FIN
    s.core.handle_timer(s.now + MS)
    [synack] = [t.segment for t in s.core.frames_to_send()]
    assert synack.flags == SYN | ACK
    leaks = [r.fields["reason"] for r in s.core.trace.of_kind("kernel_leak")]  # type: ignore[union-attr]
    assert "send entry overwritten: its node reference leaks" in leaks
    view = s.core.node(conn)
    assert view is not None and view.state == CmState.FIN_WAIT1
    [(_, _, reason)] = s.core.leak_report()
    assert reason is not None and "overwrote a live send entry" in reason
    seq = 101 + len(V1_REQ)
    s.now += MS + 10
    s.peer(ACK, seq, view.loc_seq_num)
    s.peer(ACK | FIN, seq, view.loc_seq_num)
    view = s.core.node(conn)
    assert view is not None and view.state == CmState.TIME_WAIT
    while (t := s.core.get_timer()) is not None:
        s.core.handle_timer(t)
        s.core.frames_to_send()
    assert s.core.node(conn) is None and s.core.leak_report() == []
