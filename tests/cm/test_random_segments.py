"""Property: whatever a peer sends, receive() never raises, a verb either acts or raises
CmError having changed nothing (but irdma_accept's own failures), and once the clock has
run out nothing is left behind except what the kernel itself leaks, each leak named."""

from __future__ import annotations

from dataclasses import dataclass

from cm_harness import IP_A, IP_P, MAC_A, MAC_P, PORT, S_NS, to_host
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpa_emu import mpa
from mpa_emu.cm.config import CmConfig, Quirks
from mpa_emu.cm.core import CmCore
from mpa_emu.cm.errors import CmError
from mpa_emu.cm.states import CmState
from mpa_emu.segment import ACK, FIN, PSH, RST, SYN
from mpa_emu.trace import Trace

PEER_PORTS = (5000, 5001)
ACTIVE_PEER_PORT = 6000

REQ = mpa.MpaFrame(request=True, rev=2, rtr=mpa.RtrBlock(16, 16, write0=True, read0=True),
                   flags=0x50, private_data=b"r").to_bytes()
REP = mpa.MpaFrame(request=False, rev=2, rtr=mpa.RtrBlock(16, 16, read0=True),
                   flags=0x50).to_bytes()
REJ = mpa.MpaFrame(request=False, rev=2, rtr=mpa.RtrBlock(16, 16, read0=True),
                   flags=0x70, private_data=b"no").to_bytes()
V1REQ = mpa.MpaFrame(request=True, rev=1).to_bytes()

FLAGS = [SYN, SYN | ACK, ACK, ACK | FIN, FIN, RST, RST | ACK, 0, SYN | FIN, SYN | RST,
         ACK | PSH, FIN | RST]
OPTIONS = [b"", bytes.fromhex("020405b403030200"), bytes.fromhex("0203"),
           bytes.fromhex("0204010003030200"), bytes.fromhex("01010303"),
           bytes.fromhex("0300"), bytes.fromhex("080a000000010000000004020000"),
           bytes.fromhex("02040218")]
CONFIGS = [CmConfig(retrans=8), CmConfig(retrans=8, gen=1),
           CmConfig(retrans=8, ah_latency_ns=S_NS // 2),
           CmConfig(retrans=8, quirks=Quirks(zero_len_option_loop=False)),
           CmConfig(retrans=8, hz=250, host_stack_rst=True)]


@dataclass(frozen=True)
class SegStep:
    target: int  # 0, 1: passive peers; 2: the active node's peer
    flags: int
    seq_valid: bool
    seq_delta: int
    ack_valid: bool
    ack_delta: int
    payload: bytes
    options: bytes


@dataclass(frozen=True)
class VerbStep:
    verb: str
    pick: int
    data: bytes


@dataclass(frozen=True)
class Wait:
    ns: int


payloads = st.one_of(st.sampled_from([b"", b"", REQ, REP, REJ, V1REQ, REQ[:10],
                                      REQ + b"x", REP[:22]]),
                     st.binary(max_size=600))
# mostly in-window, exactly acknowledging segments, so the handshakes make progress
valid = st.sampled_from([True, True, True, False])
delta = st.sampled_from([0] * 8 + [1, -1, 2])
flags = st.sampled_from([ACK] * 6 + [ACK | FIN] * 2 + [SYN] * 2 + FLAGS)
seg_steps = st.builds(SegStep, st.integers(0, 2), flags, valid, delta,
                      valid, delta, payloads,
                      st.sampled_from(OPTIONS[:2] * 3 + OPTIONS[2:]))
verb_steps = st.builds(VerbStep, st.sampled_from(["accept", "reject", "close", "connect",
                                                  "destroy_listen", "listen",
                                                  "disconnect"]),
                       st.integers(0, 7), st.sampled_from([b"", b"pd", bytes(300)]))
waits = st.builds(Wait, st.sampled_from([0, 1_000_000, 100_000_000, S_NS, 13 * S_NS]))
steps = st.lists(st.one_of(seg_steps, seg_steps, seg_steps, verb_steps, waits),
                 max_size=60)


def build(core: CmCore, step: SegStep) -> object:
    if step.target == 2:
        sport, dport = ACTIVE_PEER_PORT, 49152
    else:
        sport, dport = PEER_PORTS[step.target], PORT
    node = next((core.node(c) for c in core.conns()
                 if core.node(c) is not None and core.node(c).rem_port == sport  # type: ignore[union-attr]
                 and core.node(c).loc_port == dport), None)  # type: ignore[union-attr]
    seq = (node.rcv_nxt if node and step.seq_valid else 4242) + step.seq_delta
    ack = (node.loc_seq_num if node and step.ack_valid else 99) + step.ack_delta
    return to_host(MAC_P, IP_A, IP_P, sport, dport, flags=step.flags, seq=seq, ack=ack,
                   payload=step.payload, options=step.options, src_mac=MAC_A)


def prelude(core: CmCore, passive: bool, active: bool) -> None:
    """Optionally bring peer 0 to MPAREQ_RCVD and the active node to MPAREQ_SENT with
    well-formed segments, so the random part starts deep in the state machine."""
    if passive:
        core.receive(build(core, SegStep(0, SYN, True, 0, True, 0, b"", OPTIONS[1])), 0)
        core.handle_timer(S_NS // 2)
        core.receive(build(core, SegStep(0, ACK, True, 0, True, 0, b"", b"")), S_NS // 2)
        core.receive(build(core, SegStep(0, ACK, True, 0, True, 0, REQ, b"")), S_NS // 2)
    if active:
        core.receive(build(core, SegStep(2, SYN | ACK, False, 0, True, 0, b"",
                                         OPTIONS[1])), S_NS // 2)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cfg=st.sampled_from(CONFIGS), script=steps, deep_passive=st.booleans(),
       deep_active=st.booleans())
def test_random_segments_never_escape_and_leave_only_named_kernel_leaks(
        cfg: CmConfig, script: list[SegStep | VerbStep | Wait], deep_passive: bool,
        deep_active: bool) -> None:
    trace = Trace()
    core = CmCore("P", MAC_P, cfg, seed=11, trace=trace)
    core.add_address(IP_P)
    core.set_neighbour(IP_A, MAC_A)
    lid = core.create_listen(IP_P, PORT, backlog=2)
    core.connect(IP_P, IP_A, ACTIVE_PEER_PORT, local_port=49152, now_ns=0)
    prelude(core, deep_passive, deep_active)
    now = S_NS // 2
    for step in script:
        if isinstance(step, Wait):
            now += step.ns
            core.handle_timer(now)
        elif isinstance(step, SegStep):
            core.receive(build(core, step), now)  # type: ignore[arg-type]
        else:
            conns = core.conns()
            conn = conns[step.pick % len(conns)] if conns else step.pick
            core.frames_to_send()
            before = [core.node(c) for c in conns]
            target = core.node(conn)
            try:
                if step.verb == "accept":
                    core.accept(conn, private_data=step.data, now_ns=now)
                elif step.verb == "reject":
                    core.reject(conn, private_data=step.data, now_ns=now)
                elif step.verb == "close":
                    core.close(conn, now_ns=now)
                elif step.verb == "disconnect":
                    core.disconnect(conn, graceful=bool(step.pick & 1), now_ns=now)
                elif step.verb == "connect":
                    core.connect(IP_P, IP_A, ACTIVE_PEER_PORT, local_port=49152,
                                 now_ns=now)
                elif step.verb == "destroy_listen":
                    core.destroy_listen(lid, now_ns=now)
                else:
                    lid = core.create_listen(IP_P, PORT, backlog=step.pick, now_ns=now)
            except CmError:
                # irdma_accept runs its error path (the node released) before returning
                # -EINVAL/-ECONNRESET; every other refusal leaves everything as it was
                if not (step.verb == "accept" and target is not None
                        and target.state in (CmState.MPAREQ_RCVD,
                                             CmState.LISTENER_DESTROYED)):
                    assert [core.node(c) for c in conns] == before
                    assert core.conns() == conns and core.frames_to_send() == []
        core.frames_to_send()
        while core.next_event() is not None:
            pass
    end = now + 3000 * S_NS
    while (t := core.get_timer()) is not None and t <= end:
        core.handle_timer(t)
        core.frames_to_send()
    assert core.get_timer() is None
    report = core.leak_report()
    unexplained = [(c, s.name) for c, s, why in report if why is None]
    assert not unexplained
    assert len(list(trace.of_kind("kernel_leak"))) >= len(report)
