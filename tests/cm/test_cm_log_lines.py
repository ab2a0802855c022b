"""What irdma's cm.c writes to the kernel log, as kernel_log trace records: the format
strings of cm.c filled in, their level and dynamic-debug flag, at the points the kernel
prints them. Expected strings are cm.c's formats with the values the test set up."""

from __future__ import annotations

import re
import struct
from dataclasses import replace

from helpers import mpa_bytes
from helpers.cm_harness import IP_A, IP_P, MAC_A, MAC_P, PORT, make_pair, syn_rcvd, to_host
from mpa_emu.stacks.contract.trace import Trace, TraceRecord
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.irdma.profiles import profile

from mpa_emu import Network
from mpa_emu.stacks.irdma import log_lines
from mpa_emu.wire.segment import ACK, FIN, SYN

HASHED = re.compile(r"^00000000[0-9a-f]{8}$")


def _logs(trace: Trace | None, fn: str | None = None) -> list[TraceRecord]:
    assert trace is not None
    return [r for r in trace.of_kind("kernel_log") if fn is None or r.fn == fn]


def test_cformat_fills_cm_c_conversions() -> None:
    assert log_lines.cformat("CM: rem_port=0x%04x, loc_port=0x%04x x=%x u=%u d=%d\n",
                             31000, 49152, 255, 7, -111) == \
        "CM: rem_port=0x7918, loc_port=0xc000 x=ff u=7 d=-111"
    assert log_lines.cformat("a=%pI4 p=%p s=%pS", "1.2.3.4", "00000000deadbeef", "f") == \
        "a=1.2.3.4 p=00000000deadbeef s=f"


def test_pi4_of_a_host_order_array_prints_the_bytes_reversed() -> None:
    """loc_addr holds ntohl(addr); on little-endian memory its bytes are reversed, and
    %pI4 prints memory bytes in order."""
    host_order_in_memory = struct.pack("<I", 0xC0000201)  # 192.0.2.1 as a host u32
    assert log_lines.pi4(bytes([192, 0, 2, 1])) == ".".join(map(str, host_order_in_memory))
    assert log_lines.pi4(bytes([192, 0, 2, 1])) == "1.2.0.192"


def test_pointer_stand_in_is_stable_and_hashed_looking() -> None:
    a = log_lines.pointer("bob", "cm_node", 1)
    assert HASHED.match(a) and a == log_lines.pointer("bob", "cm_node", 1)
    assert a != log_lines.pointer("alice", "cm_node", 1)


def test_only_one_line_of_cm_c_is_not_dynamic_debug() -> None:
    """Every line of cm.c is ibdev_dbg but irdma_make_cm_node's TOS warning."""
    loud = [line for line in log_lines.CATALOGUE if not line.dynamic_debug]
    assert loud == [log_lines.TOS_MISMATCH]
    assert log_lines.TOS_MISMATCH.level == "warn"
    assert all(line.level == "debug" for line in log_lines.CATALOGUE if line.dynamic_debug)


def test_send_cm_event_line_prints_accelerated_after_state() -> None:
    """irdma_send_cm_event passes (accelerated, state) to "state=%d accel=%d"."""
    pair = make_pair()
    pair.p.create_listen(IP_P, PORT)
    pair.a.connect(IP_A, IP_P, PORT, now_ns=0)
    pair.pump()
    [req] = [r for r in _logs(pair.p.trace, "irdma_send_cm_event")]
    # CONNECT_REQUEST (1) from MPAREQ_RCVD (9), not accelerated (0), status 0
    assert re.fullmatch(r"CM: cm_node 00000000[0-9a-f]{8} cm_id=00000000[0-9a-f]{8} "
                        r"state=0 accel=9 event_type=1 status=0", req.fields["text"])
    assert (req.fields["level"], req.fields["dynamic_debug"]) == ("debug", True)


def test_create_event_line_names_local_as_dst() -> None:
    pair = make_pair()
    pair.p.create_listen(IP_P, PORT)
    pair.a.connect(IP_A, IP_P, PORT, now_ns=0)
    pair.pump()
    [ev] = _logs(pair.p.trace, "irdma_create_event")
    # IRDMA_CM_EVENT_MPA_REQ = 2; dst = P's own 10.0.0.2, src = A's 10.0.0.1, reversed
    assert ev.fields["text"].endswith("type=2 dst=2.0.0.10 src=1.0.0.10")


def test_bad_mpa_key_logs_its_check() -> None:
    """irdma_parse_mpa check 5: "CM: Unexpected MPA Key received"."""
    core, synack = syn_rcvd(seed=3)
    core.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=ACK, seq=101,
                         ack=synack.seq + 1, src_mac=MAC_A), 0)
    bad = b"X" * 16 + bytes([0x00, 1, 0, 0])
    core.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=ACK, seq=101,
                         ack=synack.seq + 1, payload=bad, src_mac=MAC_A), 0)
    texts = [r.fields["text"] for r in _logs(core.trace, "irdma_parse_mpa")]
    assert texts == ["CM: Unexpected MPA Key received"]
    [err] = _logs(core.trace, "irdma_passive_open_err")
    assert err.fields["text"].endswith("state =19")  # IRDMA_CM_STATE_CLOSED after the move


def test_out_of_window_ack_logs_seq_number_err() -> None:
    core, synack = syn_rcvd(seed=3)
    core.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=ACK, seq=101,
                         ack=synack.seq + 7, src_mac=MAC_A), 0)
    assert [r.fields["text"] for r in _logs(core.trace, "irdma_check_seq")] == \
        ["CM: seq number err"]


def test_tos_mismatch_is_a_warning() -> None:
    """irdma_make_cm_node: listener->tos != cm_info->tos -> ibdev_warn, then the DCB line
    with max(tos) and rt_tos2priority (TOS 0x10 -> priority 6)."""
    core = CmCore("P", MAC_P, CmConfig(), seed=1, trace=Trace())
    core.add_address(IP_P)
    core.set_neighbour(IP_A, MAC_A)
    core.create_listen(IP_P, PORT)
    syn = replace(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=SYN, seq=100,
                          src_mac=MAC_A), tos=0x10)
    core.receive(syn, 0)
    [warn, dcb] = _logs(core.trace, "irdma_make_cm_node")
    assert warn.fields == {"level": "warn", "dynamic_debug": False, "conn": None,
                           "text": "application TOS[0] and remote client TOS[16] mismatch"}
    assert dcb.fields["text"] == "DCB: listener: TOS:[16] UP:[6]"


def test_syn_steered_to_a_destroyed_listener_finds_none() -> None:
    """A destroyed listener that a pending node still references keeps its SYN qhash: a
    new SYN reaches the CM, irdma_find_listener(ACTIVE) finds nothing."""
    pair = make_pair()
    lid = pair.p.create_listen(IP_P, PORT)
    pair.a.connect(IP_A, IP_P, PORT, now_ns=0)
    pair.pump()  # P's node waits in MPAREQ_RCVD: the application holds it
    pair.p.destroy_listen(lid, now_ns=0)
    pair.pump()
    pair.a.connect(IP_A, IP_P, PORT, now_ns=0)
    pair.pump()
    assert [r.fields["text"] for r in _logs(pair.p.trace, "irdma_receive_ilq")] == \
        ["CM: no listener found"]


def test_no_log_without_a_trace_or_for_other_profiles() -> None:
    net = Network(seed=2)
    siw = net.add_host("siwpeer", "192.0.2.3", config=profile("siw"))
    irdma = net.add_host("irdma", "192.0.2.4")
    siw.listen(31000)
    irdma.connect("192.0.2.3", 31000)
    net.run()
    assert net.trace is not None
    hosts = {r.host for r in net.trace.of_kind("kernel_log")}
    assert hosts == {"irdma"}
    quiet = Network(seed=2, tracing=False)
    a = quiet.add_host("a", "192.0.2.1")
    b = quiet.add_host("b", "192.0.2.2")
    b.listen(31000)
    a.connect(b, 31000)
    quiet.run()
    assert quiet.trace is None and a.core.trace is None


def test_request_then_fin_logs_negotiation_event_and_bad_state() -> None:
    """A v2 request with IRD 16 / ORD 16 (ctrl 0x8010 / 0xC010): irdma_negotiate_mpa_v2_
    ird_ord logs the node's ORD and IRD after it, irdma_create_event MPA_REQ (2), then
    irdma_send_cm_event CONNECT_REQUEST (1) from MPAREQ_RCVD (9); a FIN in MPAREQ_RCVD
    is irdma_handle_fin_pkt's default: "bad state node state = 9"."""
    core, synack = syn_rcvd(seed=3)
    request = mpa_bytes.frame(pdata=b"hi")
    core.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=ACK, seq=101,
                         ack=synack.seq + 1, payload=request, src_mac=MAC_A), 0)
    node = core.node(1)
    assert node is not None
    [neg] = _logs(core.trace, "irdma_negotiate_mpa_v2_ird_ord")
    assert neg.fields["text"] == f"CM: MPAV2 Negotiated ORD: {node.ord_size}, IRD: " \
                                 f"{node.ird_size}"
    assert [r.fields["text"].split(" type=")[1][:1]
            for r in _logs(core.trace, "irdma_create_event")] == ["2"]
    [up] = _logs(core.trace, "irdma_send_cm_event")
    assert up.fields["text"].endswith("state=0 accel=9 event_type=1 status=0")
    core.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=FIN | ACK,
                         seq=101 + len(request), ack=synack.seq + 1, src_mac=MAC_A), 0)
    assert [r.fields["text"] for r in _logs(core.trace, "irdma_handle_fin_pkt")] == \
        ["CM: bad state node state = 9"]
