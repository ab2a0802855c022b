"""The text ladder: frame arrows with flags, seq, ack, length and MPA summaries, notes
for lost frames, upcalls and state changes on the right lane."""

from __future__ import annotations

import struct
import subprocess
from errno import ECONNREFUSED
from pathlib import Path
from typing import Any

from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.stacks.contract.trace import TraceRecord
from mpa_emu.views import describe, ladder

KEY_REQ = b"MPA ID Req Frame".hex()
KEY_REP = b"MPA ID Rep Frame".hex()
# Spec wireshark-mpa section 7: the v2 request of the reference capture.
V2_REQUEST = bytes.fromhex(KEY_REQ + "50020018" + "8010c010" + b"hello from initiator".hex())
# Its reject: R|C|S, rev 2, PD_Length 16, RTR P2P IRD 16 / READ0 ORD 16, "it's not you".
V2_REJECT = bytes.fromhex(KEY_REP + "70020010" + "80104010" + b"it's not you".hex())
V1_REPLY = bytes.fromhex(KEY_REP + "00010000")


def test_mpa_summary_of_a_v2_request_shows_ird_ord_p2p_rtr_and_private_data() -> None:
    assert describe.mpa_summary(V2_REQUEST) == \
        'MPA Req v2 IRD 16 ORD 16 P2P RTR=RW CRC pd="hello from initiator"'


def test_mpa_summary_of_a_reject_and_a_v1_reply() -> None:
    assert describe.mpa_summary(V2_REJECT) == \
        'MPA Rej v2 IRD 16 ORD 16 P2P RTR=R CRC pd="it\'s not you"'
    assert describe.mpa_summary(V1_REPLY) == "MPA Rep v1"
    assert describe.mpa_summary(b"GET / HTTP/1.1\r\n\r\n....") is None


def test_mpa_summary_reports_a_truncated_frame() -> None:
    assert describe.mpa_summary(V2_REQUEST[:30]) == "MPA Req v2 PD_Length 24 (truncated)"


def test_fpdu_summary_names_the_rdmap_opcode_and_checks_the_crc() -> None:
    from mpa_emu.wire.mpa import frame_fpdu

    # DDP tagged+last (0xc1), RDMAP v1 opcode 1 (Read Request): irdma_sc_send_rtt's RTR READ.
    read_request = bytes.fromhex("c141") + bytes(26)
    fpdu = frame_fpdu(read_request)
    assert describe.fpdu_summary(fpdu) == "FPDU RDMA Read Request ulpdu=28 L=1"
    broken = fpdu[:-1] + bytes([fpdu[-1] ^ 1])
    assert describe.fpdu_summary(broken) == "FPDU RDMA Read Request ulpdu=28 L=1 bad CRC"
    not_last = frame_fpdu(bytes.fromhex("8141") + bytes(26))  # tagged, L clear
    assert describe.fpdu_summary(not_last) == "FPDU RDMA Read Request ulpdu=28 L=0"


def test_options_are_spelled_out() -> None:
    # Hand-decoded: MSS (kind 2, len 4) 0x05b4, WS (kind 3, len 3) shift.cnt 2 (RFC 7323
    # section 2.2: the option carries the exponent, shown as it is), EOL.
    assert describe.options_label(bytes.fromhex("020405b403030200")) == "MSS=1460 WS=2 EOL"
    # NOP NOP, Timestamps (kind 8, len 10) TSval 1 TSecr 2; SACK permitted (kind 4, len 2).
    assert describe.options_label(bytes.fromhex("0101080a0000000100000002")) == "TSval=1 TSecr=2"
    assert describe.options_label(bytes.fromhex("04020000")) == "SACK_PERM EOL"
    assert describe.options_label(bytes.fromhex("1e00")) == "opt30 (bad length)"


def test_options_read_as_tshark_reads_them(tmp_path: Path) -> None:
    """A Linux-style SYN's options: the ladder names them as tshark's Info column does,
    except WS, which it shows as the shift count the option carries (RFC 7323 section
    2.2) where tshark shows the factor 2^shift."""
    opts = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (3735928559, 0)), ("NOP", None),
            ("WScale", 7)]
    syn = (Ether() / IP(src="192.0.2.1", dst="192.0.2.2")
           / TCP(sport=40000, dport=31000, flags="S", options=opts))
    path = tmp_path / "syn.pcap"
    wrpcap(str(path), [syn])
    info = subprocess.run(["tshark", "-n", "-r", str(path), "-T", "fields", "-e", "_ws.col.Info"],
                          capture_output=True, text=True, check=True).stdout.strip()
    theirs = info.split("Len=0 ", 1)[1].split()
    assert theirs == ["MSS=1460", "SACK_PERM", "TSval=3735928559", "TSecr=0", "WS=128"]
    factor = int(theirs[-1].removeprefix("WS="))
    ours = describe.options_label(bytes(syn[TCP])[20:]).split()
    assert ours == [*theirs[:-1], f"WS={factor.bit_length() - 1}"]


def test_a_long_label_wraps_and_is_never_cut(fake_net: Any) -> None:
    net = fake_net(1)
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2")
    label = "40000>31000 [SYN] " + " ".join(f"word{i}" for i in range(40))
    rows = [ladder.Row(0, 0, 1, label)]
    text = ladder.render(rows, [alice.name, bob.name])
    assert "..." not in text
    arrow, rest = text.splitlines()[1:3]
    shown = arrow.split("|-- ", 1)[1].rsplit(" -", 1)[0]
    assert f"{shown} {rest.strip('| ')}" == label


def test_upcall_and_state_labels() -> None:
    up = Upcall(IwEvent.CONNECT_REPLY, 3, -ECONNREFUSED, 0, b"\xc0\x00\x02\x01", 1,
                b"\xc0\x00\x02\x02", 2, private_data=b"busy", private_data_len=4)
    assert describe.upcall_label(up) == '<< CONNECT_REPLY -ECONNREFUSED ird=0 ord=0 pd="busy"'
    record = TraceRecord(0, "bob", "state_changed", "irdma_send_mpa_reject",
                         {"conn": 2, "old": "MPAREQ_RCVD", "new": "FIN_WAIT1"})
    assert ladder.state_change_text(record) == "[#2] MPAREQ_RCVD -> FIN_WAIT1"


def test_ladder_draws_arrows_both_ways_and_marks_the_lost_frame(fake_net: Any) -> None:
    net = fake_net(1)
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2")
    net.drop("SYN-ACK")
    bob.listen(31000)
    alice.connect("192.0.2.2", 31000)
    net.run()
    lines = ladder.ladder(net).splitlines()
    assert lines[0].startswith(" " * ladder.TIME_WIDTH + " alice 192.0.2.1")
    assert "bob 192.0.2.2" in lines[0]
    syn, lost, note = lines[1], lines[2], lines[3]
    # Frames are numbered from 1 as in the capture file: the SYN is frame 1.
    assert syn.startswith("0.000000    |-- #1 40001>31000 [SYN] seq=") and syn.endswith("->|")
    assert "MSS=1460 WS=2 EOL" in syn
    assert lost.startswith("0.000010    |x--") and "#2 " in lost and "[SYN, ACK]" in lost
    assert lost.endswith("--|")
    assert "wire: dropped (the first SYN-ACK)" in note
    assert lines[-2].startswith(" " * 12 + "| << CONNECT_REPLY")
    # cma_iw_handler: CONNECT_REPLY status 0 -> RDMA_CM_EVENT_ESTABLISHED, on the line after
    assert lines[-1].startswith(" " * 12 + "| => RDMA_CM_EVENT_ESTABLISHED status 0")
    resent = [line for line in lines if line.startswith("1.000000")]
    assert resent and "[SYN]" in resent[0]


def test_ladder_needs_the_journal(fake_net: Any) -> None:
    net = fake_net(tracing=False)
    net.add_host("alice", "192.0.2.1")
    try:
        ladder.ladder(net)
    except ValueError as exc:
        assert "tracing=True" in str(exc)
    else:
        raise AssertionError("ladder without a journal did not complain")


def test_teardown_demo_ladder_names_the_addresses(tmp_path: Path) -> None:
    """bob sends from two addresses: the ladder header lists both and each arrow names
    its endpoints; the resets tshark sees from the removed address are drawn as such."""
    from mpa_emu.demo.stories import run_demo

    result = run_demo(0)
    title, text = result.ladders[-1]
    assert "192.0.2.3" in title
    lines = text.splitlines()
    assert lines[0].split()[-3:] == ["bob", "192.0.2.2", "192.0.2.3"]
    path = tmp_path / "demo.pcapng"
    result.net.write_pcapng(path)
    resets = subprocess.run(
        ["tshark", "-n", "-r", str(path), "-Y", "tcp.flags.reset == 1", "-T", "fields",
         "-e", "ip.src", "-e", "tcp.srcport", "-e", "ip.dst", "-e", "tcp.dstport"],
        capture_output=True, text=True, check=True).stdout.split("\n")
    resets = [r.split("\t") for r in resets if r]
    assert resets and all(src == "192.0.2.3" for src, *_ in resets)
    for src, sport, dst, dport in resets:
        assert any(f"{src}:{sport}>{dst}:{dport} [RST, ACK]" in line for line in lines)


def test_fpdu_summary_of_a_read_request_names_its_sink_and_source() -> None:
    from mpa_emu.wire.mpa import frame_fpdu

    # Untagged (0x41: L, DV 1), RDMAP v1 Read Request (0x41); QN 1, MSN 1, MO 0; sink
    # STag 0x5a5a TO 0x10000, size 4096, source STag 0x77 TO 0x2000 (RFC 5040 4.4).
    rr = bytes.fromhex("4141") + struct.pack("!IIIIIQIIQ", 0, 1, 1, 0, 0x5A5A, 0x10000,
                                             4096, 0x77, 0x2000)
    assert describe.fpdu_summary(frame_fpdu(rr)) == (
        "FPDU RDMA Read Request ulpdu=46 L=1 sink STag 0x5a5a TO 0x10000, source STag 0x77 "
        "TO 0x2000")
