"""The Linux-shaped host TCP: SYN options, ISNs, retransmission schedules, segmentation,
delayed ACKs, FIN states and RSTs, from the Linux TCP sources' constants
(include/net/tcp.h, net/ipv4/tcp_output.c, tcp_input.c, tcp_timer.c)."""

from __future__ import annotations

import errno
from collections.abc import Callable

import pytest

from mpa_emu.stacks.tcp import LINUX, TcpEvent, TcpStack
from mpa_emu.wire.segment import ACK, FIN, PSH, RST, SYN, Segment

MA, MB = b"\x02\x00\x00\x00\x00\x01", b"\x02\x00\x00\x00\x00\x02"
IA, IB = bytes([192, 0, 2, 1]), bytes([192, 0, 2, 2])
MS, S_NS = 1_000_000, 1_000_000_000
LAT = 10_000


class Wire:
    """Two stacks and a wire with a fixed latency; ``drop(seg)`` loses a segment."""

    def __init__(self, seed_a: int = 1, seed_b: int = 2) -> None:
        self.a = TcpStack("a", MA, LINUX, seed=seed_a)
        self.b = TcpStack("b", MB, LINUX, seed=seed_b)
        self.a.add_address(IA)
        self.b.add_address(IB)
        self.a.set_neighbour(IB, MB)
        self.b.set_neighbour(IA, MA)
        self.now = 0
        self.sent: list[tuple[int, str, Segment, str]] = []
        self.events: dict[str, list[TcpEvent]] = {"a": [], "b": []}
        self.flight: list[tuple[int, str, Segment]] = []
        self.drop: Callable[[str, Segment], bool] = lambda who, seg: False
        self.b_absent = False

    def collect(self) -> None:
        for who, st, other in (("a", self.a, "b"), ("b", self.b, "a")):
            for tx in st.frames_to_send():
                self.sent.append((self.now, who, tx.segment, tx.comment))
                if not self.drop(who, tx.segment) and not (other == "b" and self.b_absent):
                    self.flight.append((self.now + LAT, other, tx.segment))
            while (ev := st.next_event()) is not None:
                self.events[who].append(ev)

    def run(self, until: int) -> None:
        self.collect()
        while True:
            times = [t for t, _, _ in self.flight]
            times += [t for t in (self.a.get_timer(), self.b.get_timer()) if t is not None]
            if not times or min(times) > until:
                break
            self.now = min(times)
            due = [f for f in self.flight if f[0] <= self.now]
            if due:
                self.flight.remove(due[0])
                _, to, seg = due[0]
                (self.a if to == "a" else self.b).receive(seg, self.now)
            else:
                for st in (self.a, self.b):
                    t = st.get_timer()
                    if t is not None and t <= self.now:
                        st.handle_timer(self.now)
            self.collect()
        self.now = until

    def by(self, who: str) -> list[tuple[int, Segment, str]]:
        return [(t, s, c) for t, w, s, c in self.sent if w == who]


def established() -> tuple[Wire, int, int]:
    w = Wire()
    w.b.listen(IB, 80, 16)
    sa = w.a.connect(IA, IB, 80, 40000, 0)
    w.run(MS)
    sb = next(e.sock for e in w.events["b"] if e.kind == "accepted")
    return w, sa, sb


def test_syn_options_are_in_linux_order() -> None:
    w = Wire()
    w.a.connect(IA, IB, 80, None, 0)
    w.collect()
    (_, syn, comment), = w.by("a")
    # tcp_options_write: MSS 1460 (MTU 1500 - 40); SACK_PERM folded in front of the
    # timestamps (04 02 08 0a), TSecr 0 in a SYN; NOP then window scale 7.
    assert syn.flags == SYN and syn.window == 64240
    assert syn.options[:8] == bytes.fromhex("020405b40402080a")
    assert syn.options[12:] == bytes.fromhex("0000000001030307")
    assert comment.startswith("tcp_v4_connect")


def test_isn_comes_from_the_seed() -> None:
    def isn(seed: int) -> int:
        st = TcpStack("a", MA, LINUX, seed=seed)
        st.add_address(IA)
        st.set_neighbour(IB, MB)
        st.connect(IA, IB, 80, 40000, 0)
        return st.frames_to_send()[0].segment.seq
    assert isn(7) == isn(7) and isn(7) != isn(8)


def test_syn_retransmits_at_1_3_7_15_31_63_seconds_then_fails_at_127() -> None:
    w = Wire()
    w.b_absent = True
    w.a.connect(IA, IB, 80, 40000, 0)
    w.run(200 * S_NS)
    # TCP_TIMEOUT_INIT 1 s doubling; tcp_syn_retries 6: the connect fails with
    # ETIMEDOUT when the sixth retransmission's 64 s run out.
    assert [t // S_NS for t, seg, _ in w.by("a") if seg.flags & SYN] == [0, 1, 3, 7, 15, 31,
                                                                        63]
    (ev,) = w.events["a"]
    assert (ev.kind, ev.errno) == ("failed", errno.ETIMEDOUT)


def test_synack_retransmits_five_times_then_the_request_is_dropped() -> None:
    w = Wire()
    w.b.listen(IB, 80, 16)
    w.drop = lambda who, seg: who == "a" and not seg.flags & SYN  # the final ACK is lost
    w.a.connect(IA, IB, 80, 40000, 0)
    w.run(200 * S_NS)
    synacks = [t for t, seg, _ in w.by("b") if seg.flags == SYN | ACK]
    # tcp_synack_retries 5: the first SYN-ACK and five more, 1 s doubling.
    assert [(t - synacks[0]) // S_NS for t in synacks] == [0, 1, 3, 7, 15, 31]
    assert w.b.sockets() == []  # the request is gone after the last SYN-ACK timed out


def test_data_is_segmented_by_the_mss_with_psh_on_the_last() -> None:
    w, sa, _ = established()
    w.a.send(sa, bytes(3000), w.now)
    w.collect()
    data = [seg for _, seg, _ in w.by("a") if seg.payload]
    # MSS 1460 less 12 bytes of timestamps: 1448, 1448, 104.
    assert [len(s.payload) for s in data] == [1448, 1448, 104]
    assert [s.flags for s in data] == [ACK, ACK, PSH | ACK]


def test_lost_data_is_retransmitted_after_the_minimum_rto() -> None:
    w, sa, _ = established()
    lost: list[int] = []

    def once(who: str, seg: Segment) -> bool:
        if who == "a" and seg.payload and not lost:
            lost.append(1)
            return True
        return False
    w.drop = once
    start = w.now
    w.a.send(sa, b"x" * 10, w.now)
    w.run(w.now + S_NS)
    sends = [t for t, seg, _ in w.by("a") if seg.payload]
    # tcp_set_rto: srtt (tens of microseconds here) plus at least TCP_RTO_MIN (200 ms).
    assert len(sends) == 2
    assert 200 * MS <= sends[1] - start < 201 * MS


def test_quick_acks_then_delayed_acks() -> None:
    w, sa, _ = established()
    for _ in range(17):
        w.a.send(sa, b"x", w.now)
        w.run(w.now + MS)
    last = w.now
    w.run(w.now + 50 * MS)
    acks = [(t, c) for t, seg, c in w.by("b") if seg.flags == ACK]
    # TCP_MAX_QUICKACKS 16 quick ACKs, then TCP_DELACK_MIN (40 ms).
    assert [c for _, c in acks[-17:-1]] == ["tcp_send_ack: quick ACK"] * 16
    assert acks[-1][1] == "tcp_delack_timer: delayed ACK"
    assert acks[-1][0] - (last - MS) == 40 * MS + LAT


def test_active_close_goes_through_fin_wait_and_time_wait() -> None:
    w, sa, sb = established()
    w.a.shutdown(sa, w.now)
    w.run(w.now + MS)
    # tcp_fin: CLOSE_WAIT enters pingpong mode, the FIN's ACK waits for TCP_DELACK_MIN
    assert (w.a.state(sa), w.b.state(sb)) == ("FIN_WAIT1", "CLOSE_WAIT")
    w.run(w.now + 40 * MS)
    assert (w.a.state(sa), w.b.state(sb)) == ("FIN_WAIT2", "CLOSE_WAIT")
    w.b.shutdown(sb, w.now)
    w.run(w.now + MS)
    assert (w.a.state(sa), w.b.state(sb)) == ("TIME_WAIT", None)
    closed_at = w.now
    w.run(w.now + 61 * S_NS)
    assert w.a.state(sa) is None  # TCP_TIMEWAIT_LEN 60 s
    fins = [seg.flags for _, seg, _ in w.by("a") + w.by("b") if seg.flags & FIN]
    assert fins == [FIN | ACK, FIN | ACK]
    assert closed_at > 0


def test_rst_for_a_syn_to_a_closed_port() -> None:
    w = Wire()
    w.a.connect(IA, IB, 81, 40000, 0)
    w.run(MS)
    (_, rst, comment), = w.by("b")
    syn = w.by("a")[0][1]
    # tcp_v4_send_reset: no ACK in the SYN, so RST|ACK with seq 0, ack = SYN seq + 1.
    assert (rst.flags, rst.seq, rst.ack) == (RST | ACK, 0, (syn.seq + 1) % 2**32)
    assert comment.startswith("tcp_v4_send_reset")
    assert [(e.kind, e.errno) for e in w.events["a"]] == [("failed", errno.ECONNREFUSED)]


def test_abort_sends_rst_ack_at_snd_nxt_and_the_peer_sees_a_reset() -> None:
    w, sa, sb = established()
    w.a.abort(sa, w.now)
    w.run(w.now + MS)
    rst = [seg for _, seg, _ in w.by("a") if seg.flags & RST]
    assert [s.flags for s in rst] == [RST | ACK]
    assert [e.kind for e in w.events["b"]][-1] == "reset" and w.b.state(sb) is None


def test_data_after_close_is_answered_with_rst() -> None:
    w, sa, sb = established()
    w.b.shutdown(sb, w.now)
    w.run(w.now + MS)
    w.a.send(sa, b"late", w.now)
    w.run(w.now + MS)
    # tcp_rcv_state_process: data for a closed (orphaned) FIN_WAIT2 socket is TCPABORTONDATA.
    assert any(seg.flags & RST for _, seg, _ in w.by("b"))


# ---- out-of-window ACKs: tcp_oow_rate_limited (net/ipv4/tcp_input.c) ----------------


def _forged(w: Wire, to: str, *, flags: int, payload: bytes = b"") -> Segment:
    """A segment from the other host to ``to``, its numbers taken from the last segment
    ``to`` sent (so seq is the receiver's rcv_nxt and ack its snd_nxt): in window."""
    last = next(s for _, who, s, _ in reversed(w.sent) if who == to)
    src_mac, src_ip = (MB, IB) if to == "a" else (MA, IA)
    dst_mac, dst_ip = (MA, IA) if to == "a" else (MB, IB)
    return Segment(src_mac, dst_mac, src_ip, dst_ip, last.dport, last.sport,
                   last.ack, last.seq + len(last.payload), flags, 500, b"", payload)


def test_two_forged_segments_do_not_start_an_ack_loop() -> None:
    # Each host takes one forged byte in window (quick ACK, TCP_MAX_QUICKACKS), so each
    # then acknowledges a byte its peer never sent. tcp_ack refuses an ACK of unsent data
    # (SKB_DROP_REASON_TCP_ACK_UNSENT_DATA) and tcp_rcv_established discards the
    # segment without answering: the two quick ACKs are all that follow.
    w, _, _ = established()
    w.run(w.now + MS)
    fa, fb = _forged(w, "a", flags=ACK | PSH, payload=b"x"), \
        _forged(w, "b", flags=ACK | PSH, payload=b"y")
    before = len(w.sent)
    w.a.receive(fa, w.now)
    w.b.receive(fb, w.now)
    w.run(w.now + S_NS)
    after = w.sent[before:]
    assert [(who, seg.flags, seg.payload) for _, who, seg, _ in after] == [
        ("a", ACK, b""), ("b", ACK, b"")]
    assert w.a.get_timer() is None or w.a.get_timer() > w.now  # nothing pending at once


def _syn_challenges(shape_limit_ns: int | None, gaps_ms: list[int]) -> list[int]:
    """Forged SYNs to an established socket at the given gaps; the times (ms after the
    first) at which a challenge ACK went out."""
    w, _, _ = established()
    if shape_limit_ns is not None:
        from dataclasses import replace
        w.a.shape = replace(w.a.shape, invalid_ratelimit_ns=shape_limit_ns)
    w.run(w.now + S_NS)
    start = w.now
    syn = _forged(w, "a", flags=SYN)
    for gap in gaps_ms:
        w.run(start + gap * MS)
        w.a.receive(syn, w.now)
        w.collect()
    w.run(w.now + MS)
    return [(t - start) // MS for t, who, _, c in w.sent
            if who == "a" and t >= start and c.startswith("tcp_send_challenge_ack")]


def test_challenge_acks_are_limited_to_one_per_500_ms() -> None:
    # RFC 5961 4.2 via tcp_send_challenge_ack: __tcp_oow_rate_limited lets one ACK out
    # per sysctl_tcp_invalid_ratelimit (HZ/2, 500 ms) per socket; the host-wide
    # tcp_challenge_ack_limit is INT_MAX by default.
    assert _syn_challenges(None, [0, 100, 499, 500, 700, 1000]) == [0, 500, 1000]


def test_the_limit_is_the_named_sysctl() -> None:
    assert LINUX.invalid_ratelimit_ns == 500 * MS
    assert _syn_challenges(0, [0, 100, 200]) == [0, 100, 200]  # 0 disables it
    assert _syn_challenges(50 * MS, [0, 40, 60]) == [0, 60]


def test_rst_in_window_challenge_shares_the_socket_limit() -> None:
    w, _, _ = established()
    w.run(w.now + S_NS)
    start = w.now
    rst = _forged(w, "a", flags=RST)
    rst = Segment(rst.src_mac, rst.dst_mac, rst.src_ip, rst.dst_ip, rst.sport, rst.dport,
                  rst.seq + 10, 0, RST, 0)  # in window, not rcv_nxt: tcp_validate_incoming
    w.a.receive(rst, w.now)
    w.a.receive(_forged(w, "a", flags=SYN), w.now + MS)
    w.collect()
    acks = [c for t, who, _, c in w.sent if who == "a" and t >= start]
    assert acks == ["tcp_send_challenge_ack: RST in window"]


def _last_from(net: object, sender: str) -> Segment:
    frames = net.frames  # type: ignore[attr-defined]
    return next(f.segment for f in reversed(frames)
                if f.sender == sender and f.segment is not None)



@pytest.mark.parametrize("stacks", [("siw", "siw"), ("cxgb4", "cxgb4"), ("siw", "cxgb4")])
def test_hosts_of_the_linux_tcp_model_go_idle_after_forged_segments(
        stacks: tuple[str, str]) -> None:
    from mpa_emu.net.network import Network
    from mpa_emu.wire import codec

    net = Network(seed=7)
    a = net.add_host("a", "192.0.2.1", stack=stacks[0])
    b = net.add_host("b", "192.0.2.2", stack=stacks[1])
    b.listen(31000)
    a.connect(b, 31000)
    net.run_for(S_NS)
    from_a, from_b = _last_from(net, "a"), _last_from(net, "b")
    for seg, to in ((from_a, "b"), (from_b, "a")):
        # the other side's next byte, acknowledging what it has: in window, one byte
        forged = Segment(seg.src_mac, seg.dst_mac, seg.src_ip, seg.dst_ip, seg.sport,
                         seg.dport, (seg.seq + len(seg.payload)) & 0xFFFFFFFF, seg.ack,
                         ACK | PSH, 500, b"", b"z")
        net.inject(codec.encode(forged), to=to, via="a" if to == "b" else "b")
    result = net.run(max_events=20_000)
    assert result.reason == "idle", result
