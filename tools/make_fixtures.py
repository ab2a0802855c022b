#!/usr/bin/env python3
"""Build the replay fixtures in pcaps/ from the reference behaviour, not from the emulator.

Every frame below is written out by hand from the kernel behaviour: the canonical flows,
the per-state reactions (irdma_handle_*_pkt), the MPA bytes (irdma_build_mpa_v1/v2,
irdma_parse_mpa; RFC 5044 section 7.1, RFC 6581 section 5), the segment shape
(irdma_form_ah_cm_frame), the retransmission schedule (irdma_cm_timer_tick's C int HZ << n
for RETRANS=32 at HZ=1000) and the backlog (irdma_handle_syn_pkt).
Frames are assembled with scapy and the MPA byte layout of mpa_emu.wire.mpa; nothing here runs
the CM state machine, so replaying these captures is an independent check of it.

Each fixture NAME gets pcaps/NAME.pcap (or .pcapng) and a sidecar pcaps/NAME.json that
says what the capture shows, which host replay emulates, with which options, and what
replay must answer (exit code, verdict, and for deliberately divergent runs the capture
frame number of the first divergence).

Usage: python tools/make_fixtures.py [--out DIR] [--check]   (--check runs tshark)
"""

from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Packet, Raw
from scapy.utils import PcapNgWriter, PcapWriter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mpa_emu.wire.mpa import (
    FLAG_CRC,
    FLAG_ENHANCED,
    FLAG_REJECT,
    MpaFrame,
    RtrBlock,
    frame_fpdu,
)

BASE_TIME = Decimal(1767225600)  # 2026-01-01T00:00:00Z: a fixed epoch, so files are stable
WINDOW = 65535  # IRDMA_CM_DEFAULT_RCV_WND_SCALED >> 2, the unscaled field (irdma_form_ah_cm_frame)
MASK32 = 0xFFFFFFFF

MAC_A = "02:00:00:0a:00:01"
MAC_P = "02:00:00:0a:00:02"
IP4_A, IP4_P = "192.168.10.1", "192.168.10.2"
IP6_A, IP6_P = "fd00:10::1", "fd00:10::2"
PORT_A, PORT_P = 40001, 31000

# Initial sequence numbers: arbitrary fixed values (the kernel uses secure_tcp_seq).
ISN_A = 0x6B8B4567
ISN_P = 0x327B23C6

# Passive irdma defaults (irdma_negotiate_mpa_v2_ird_ord): ird_size = max_hw_ird 127, ord_size =
# max_hw_ord 255.
P_IRD, P_ORD = 127, 255
# Active defaults used by the fixtures' applications (iw_cm conn_param).
A_IRD, A_ORD = 16, 16

PD_REQ = b"hello from the initiator, queue pair 17"
PD_REP = b"welcome, responder queue pair 4"
PD_REJ = b"it's not you, it's the listener"


def s32(x: int) -> int:
    return x & MASK32


def syn_options(mss: int) -> list[tuple[str, Any]]:
    """irdma_send_syn: MSS + WS(2) + EOL, 8 bytes, doff 7 (RFC 9293 section 3.1)."""
    return [("MSS", mss), ("WScale", 2), ("EOL", None)]


def linux_syn_options(mss: int, tsval: int) -> list[tuple[str, Any]]:
    """A Linux TCP stack's SYN options: MSS, SACK-permitted, timestamps, NOP, WS 7."""
    return [("MSS", mss), ("SAckOK", b""), ("Timestamp", (tsval, 0)), ("NOP", None),
            ("WScale", 7)]


def mpa_request_v2(pd: bytes, ird: int = A_IRD, ord_: int = A_ORD) -> bytes:
    """irdma_build_mpa_v2 for a request: C|S, rev 2, P2P, offers WRITE0 and READ0 (4.3)."""
    return MpaFrame(request=True, rev=2, flags=FLAG_CRC | FLAG_ENHANCED,
                    rtr=RtrBlock(ird=ird, ord=ord_, write0=True, read0=True),
                    private_data=pd).to_bytes()


def mpa_request_v1(pd: bytes, flags: int = FLAG_CRC) -> bytes:
    """irdma_build_mpa_v1 for a request: C, rev 1, no RFC 6581 block."""
    return MpaFrame(request=True, rev=1, flags=flags, private_data=pd).to_bytes()


def responder_block(peer_ird: int = A_IRD, peer_ord: int = A_ORD) -> RtrBlock:
    """What a passive irdma node advertises after irdma_negotiate_mpa_v2_ird_ord on a
    request offering READ0: IRD stays 127 (or 1 when the peer ORD is 0), ORD = min(255,
    peer IRD), READ0 chosen over WRITE0 (irdma_negotiate_mpa_v2_ird_ord)."""
    ird = 1 if peer_ord == 0 else P_IRD
    return RtrBlock(ird=ird, ord=min(P_ORD, peer_ird), read0=True)


def mpa_reply_v2(pd: bytes, reject: bool = False, block: RtrBlock | None = None) -> bytes:
    flags = FLAG_CRC | FLAG_ENHANCED | (FLAG_REJECT if reject else 0)
    return MpaFrame(request=False, rev=2, flags=flags, rtr=block or responder_block(),
                    private_data=pd).to_bytes()


def mpa_reply_v1(pd: bytes, reject: bool = False) -> bytes:
    flags = FLAG_CRC | (FLAG_REJECT if reject else 0)
    return MpaFrame(request=False, rev=1, flags=flags, private_data=pd).to_bytes()


def rtr_read0() -> bytes:
    """The active side's RTR (irdma_sc_send_rtt with read0, RFC 6581 section 5): a zero-length RDMA
    Read Request, sink STag 0xabcd, source STag 0x1234, TO 0, as one FPDU. DDP untagged
    (L=1, DV=1), QN 1 (RDMA Read Request queue), MSN 1, MO 0 (RFC 5041 section 5);
    RDMAP version 1, opcode 1 (RFC 5040 section 4)."""
    ddp = bytes([0x41, 0x41]) + struct.pack("!IIII", 0, 1, 1, 0)
    read_req = struct.pack("!IQIIQ", 0xABCD, 0, 0, 0x1234, 0)
    return frame_fpdu(ddp + read_req)


def read_response0() -> bytes:
    """The responder NIC's answer to the read0 RTR: a zero-length RDMA Read Response
    (RFC 5040 section 5.3: every Read Request gets one; RFC 6581 section 3 makes the RTR
    an ordinary zero-length Read, and irdma_sc_send_rtt's READ completes only on it).
    DDP tagged (T=1, L=1, DV=1), RDMAP version 1, opcode 2, the request's sink STag
    0xabcd and sink TO 0 (RFC 5041 section 4.2), as one FPDU."""
    return frame_fpdu(bytes([0xC1, 0x42]) + struct.pack("!IQ", 0xABCD, 0))


@dataclass
class Capture:
    """Frames of one fixture in order, each with an absolute time in microseconds."""

    frames: list[tuple[int, Packet]] = field(default_factory=list)

    def add(self, t_us: int, pkt: Packet) -> int:
        if self.frames and t_us < self.frames[-1][0]:
            raise ValueError(f"frame {len(self.frames) + 1} goes back in time")
        self.frames.append((t_us, pkt))
        return len(self.frames)


@dataclass
class Conn:
    """One TCP conversation between an active host A and a passive host P."""

    cap: Capture
    a_ip: str = IP4_A
    p_ip: str = IP4_P
    a_port: int = PORT_A
    p_port: int = PORT_P
    vlan: int | None = None
    a_mac: str = MAC_A
    p_mac: str = MAC_P

    def _frame(self, from_a: bool, flags: str, seq: int, ack: int, payload: bytes,
               options: list[tuple[str, Any]] | None, window: int) -> Packet:
        src_mac, dst_mac = (self.a_mac, self.p_mac) if from_a else (self.p_mac, self.a_mac)
        src, dst = (self.a_ip, self.p_ip) if from_a else (self.p_ip, self.a_ip)
        sport, dport = (self.a_port, self.p_port) if from_a else (self.p_port, self.a_port)
        l2: Packet = Ether(src=src_mac, dst=dst_mac)
        if self.vlan is not None:
            l2 = l2 / Dot1Q(vlan=self.vlan, prio=0)
        # GEN_2: the hardware adds L3 from the AH: TTL / hop limit 64, tos 0, DF (5.1).
        l3: Packet = (IPv6(src=src, dst=dst, hlim=64) if ":" in src
                      else IP(src=src, dst=dst, ttl=64, flags="DF", id=0))
        tcp = TCP(sport=sport, dport=dport, flags=flags, seq=s32(seq), ack=s32(ack),
                  window=window, options=options or [])
        pkt = l2 / l3 / tcp
        if payload:
            pkt = pkt / Raw(load=payload)
        return pkt

    def a(self, t_us: int, flags: str, seq: int, ack: int, payload: bytes = b"",
          options: list[tuple[str, Any]] | None = None, window: int = WINDOW) -> int:
        return self.cap.add(t_us, self._frame(True, flags, seq, ack, payload, options, window))

    def p(self, t_us: int, flags: str, seq: int, ack: int, payload: bytes = b"",
          options: list[tuple[str, Any]] | None = None, window: int = WINDOW) -> int:
        return self.cap.add(t_us, self._frame(False, flags, seq, ack, payload, options, window))

    @property
    def mss(self) -> int:
        return 1440 if ":" in self.a_ip else 1460  # IRDMA_MTU_TO_MSS_IPV6/_IPV4


# ---- retransmission schedule (irdma_cm_timer_tick) ----------------------------------

def resend_times_ms(retrans: int = 32, hz: int = 1000) -> tuple[list[int], int]:
    """Resend times (ms after the original send) and the expiry time, computed the way
    the compiled kernel does: the gap after the n-th resend is the C int ``HZ << n``
    with the shift count taken mod 32, a negative result capped at 12 s, and a zero gap
    meaning the next jiffy (irdma_cm_timer_tick)."""
    times: list[int] = []
    due = hz  # IRDMA_RETRY_TIMEOUT after the first send
    for n in range(1, retrans + 1):
        times.append(due)
        raw = (hz << (n % 32)) & MASK32
        gap = raw - (1 << 32) if raw & 0x80000000 else raw
        gap = 12 * hz if gap < 0 or gap > 12 * hz else gap
        due = due + max(gap, 1)  # a zero gap fires on the next jiffy
    ms_per_jiffy = 1000 // hz
    return [t * ms_per_jiffy for t in times], due * ms_per_jiffy


# ---- fixtures ------------------------------------------------------------------------

@dataclass
class Fixture:
    name: str
    title: str
    shows: str
    cites: list[str]
    """The kernel functions (with their file) and RFC sections the fixture shows."""
    cap: Capture
    replays: list[dict[str, Any]]
    pcapng: bool = False
    tshark_errors: list[str] = field(default_factory=list)
    mpa_frames: list[int] = field(default_factory=list)


def run(emulate: str, *, args: list[str] | None = None, exit_code: int = 0,
        first_divergence: int | None = None, why: str = "",
        warnings: bool | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"emulate": emulate, "args": args or [],
                           "expect": {"exit": exit_code,
                                      "verdict": {0: "match", 1: "divergence"}[exit_code]}}
    if first_divergence is not None:
        out["expect"]["first_divergence_frame"] = first_divergence
    if warnings is not None:
        out["expect"]["offload_warnings"] = warnings
    if why:
        out["why"] = why
    return out


def handshake(c: Conn, t0: int, mss_a: int | None = None) -> tuple[int, int]:
    """SYN, SYN-ACK (MSS = min of both), ACK (irdma_send_syn, irdma_handle_syn_pkt,
    irdma_handle_synack_pkt). Returns the times."""
    mss = c.mss if mss_a is None else mss_a
    c.a(t0, "S", ISN_A, 0, options=syn_options(mss))
    c.p(t0 + 60, "SA", ISN_P, ISN_A + 1, options=syn_options(min(c.mss, mss)))
    c.a(t0 + 140, "A", ISN_A + 1, ISN_P + 1)
    return t0 + 60, t0 + 140


def mpa_exchange(c: Conn, t: int, req: bytes, rep: bytes, *, a_seq: int = ISN_A + 1,
                 p_seq: int = ISN_P + 1, ack_after: int = 80,
                 ack_rtr: bool = True) -> list[int]:
    """After the handshake: A's request at ``t``, P's ACK ``ack_after`` later, P's reply
    1 ms after that, A's ACK and READ RTR (irdma_send_mpa_request, irdma_accept, irdma_sc_send_rtt),
    P's zero-length Read
    Response carrying the ACK of the RTR and A's ACK of it (RFC 5040 section 5.3).
    ``a_seq``/``p_seq`` are each side's next sequence number. Returns the frame numbers
    of the MPA frames."""
    L, R = len(req), len(rep)
    rtr = rtr_read0()
    t_ack = t + ack_after
    n_req = c.a(t, "A", a_seq, p_seq, req)                        # MPAREQ_SENT
    c.p(t_ack, "A", p_seq, a_seq + L)                             # ACK -> CONNECT_REQUEST
    n_rep = c.p(t_ack + 1_000, "A", p_seq, a_seq + L, rep)        # LSMM, OFFLOADED
    c.a(t_ack + 1_070, "A", a_seq + L, p_seq + R)                 # CM ACK of the reply
    c.a(t_ack + 1_090, "A", a_seq + L, p_seq + R, rtr)            # [HW] RTR
    if ack_rtr:
        resp = read_response0()
        c.p(t_ack + 1_170, "A", p_seq + R, a_seq + L + len(rtr), resp)  # [HW] Read Response
        c.a(t_ack + 1_250, "A", a_seq + L + len(rtr), p_seq + R + len(resp))  # [HW] its ACK
    return [n_req, n_rep]


def accept_flow(c: Conn, *, ack_rtr: bool = True) -> list[int]:
    """Spec 2.5 accept flow, v2. Returns the frame numbers of the MPA frames."""
    handshake(c, 0)
    return mpa_exchange(c, 150, mpa_request_v2(PD_REQ), mpa_reply_v2(PD_REP), ack_rtr=ack_rtr)


def reject_flow(c: Conn, rep: bytes, req: bytes) -> list[int]:
    """Spec 2.5 reject flow: ACK|FIN + reject, A ACKs the reply then FIN|ACK, P's first
    ACK is dropped by check_seq, P ends in TIME_WAIT after one ACK."""
    handshake(c, 0)
    L, R = len(req), len(rep)
    n_req = c.a(150, "A", ISN_A + 1, ISN_P + 1, req)
    c.p(230, "A", ISN_P + 1, ISN_A + 1 + L)
    n_rej = c.p(2_230, "FA", ISN_P + 1, ISN_A + 1 + L, rep)      # irdma_send_mpa_reject
    c.a(2_300, "A", ISN_A + 1 + L, ISN_P + 1 + R)                 # FIN not counted yet
    c.a(2_310, "FA", ISN_A + 1 + L, ISN_P + 2 + R)                # MPAREJ_RCVD -> LAST_ACK
    c.p(2_380, "A", ISN_P + 2 + R, ISN_A + 2 + L)                 # FIN_WAIT2 -> TIME_WAIT
    return [n_req, n_rej]


def both(extra: list[str] | None = None) -> list[dict[str, Any]]:
    return [run(IP4_P, args=extra), run(IP4_A, args=extra)]


def fx_v2_accept() -> Fixture:
    cap = Capture()
    mpa = accept_flow(Conn(cap))
    return Fixture("v2_accept", "MPA v2 accept (canonical)",
                   "irdma to irdma over IPv4: handshake, v2 request with RTR block offering "
                   "WRITE0|READ0, v2 reply choosing READ0 with IRD 127 / ORD 16, the RTR "
                   "(zero-length RDMA Read Request), the responder NIC's zero-length Read "
                   "Response carrying the ACK of it, and the initiator NIC's ACK.",
                   ["irdma_send_mpa_request (cm.c)", "irdma_accept (cm.c)",
                    "irdma_build_mpa_v2 (cm.c)", "irdma_negotiate_mpa_v2_ird_ord (cm.c)",
                    "irdma_send_syn (cm.c)", "irdma_sc_send_rtt (ctrl.c)", "RFC 5044 section 7.1",
                    "RFC 6581 section 5", "RFC 5040 section 5.3"], cap, both(),
                   mpa_frames=mpa)


def fx_v2_reject() -> Fixture:
    cap = Capture()
    req = mpa_request_v2(PD_REQ)
    mpa = reject_flow(Conn(cap), mpa_reply_v2(PD_REJ, reject=True), req)
    return Fixture("v2_reject", "MPA v2 reject (canonical)",
                   "P rejects with private data; the reject rides on ACK|FIN (FIN_WAIT1). "
                   "A ACKs the reply without counting the FIN, then sends FIN|ACK from "
                   "LAST_ACK. P's check_seq drops A's first ACK silently (it does not ack "
                   "the FIN); the FIN|ACK takes P through FIN_WAIT2 to TIME_WAIT and P "
                   "sends one ACK.",
                   ["irdma_reject (cm.c)", "irdma_send_mpa_reject (cm.c)",
                    "irdma_handle_fin_pkt (cm.c)", "RFC 5044 section 7.1"],
                   cap, both(), mpa_frames=mpa)


def fx_reject_variant(name: str, rev: int, pd: bytes) -> Fixture:
    cap = Capture()
    if rev == 2:
        req = mpa_request_v2(PD_REQ)
        rep = mpa_reply_v2(pd, reject=True)
        runs = both()
    else:
        req = mpa_request_v1(PD_REQ)
        rep = mpa_reply_v1(pd, reject=True)
        # An irdma initiator starts at rev 2: emulating A must diverge at its request.
        runs = [run(IP4_P), run(IP4_A, exit_code=1, first_divergence=4,
                                why="irdma sends an MPA v2 request; the recorded "
                                    "initiator sent v1")]
    mpa = reject_flow(Conn(cap), rep, req)
    return Fixture(name, f"MPA v{rev} reject, {len(pd)} bytes of private data",
                   f"Reject variant: rev {rev} request and reject, reject private data of "
                   f"{len(pd)} bytes (the u8 limit of irdma_reject is 255).",
                   ["irdma_reject (cm.c)", "irdma_send_mpa_reject (cm.c)",
                    "irdma_handle_fin_pkt (cm.c)", "RFC 5044 section 7.1"],
                   cap, runs, mpa_frames=mpa)


def fx_parse_failure(name: str, payload: bytes, what: str, errno: str,
                     tshark_errors: list[str] | None = None, decoded: bool = True) -> Fixture:
    """Passive irdma in ESTABLISHED receives a bad MPA request: irdma_parse_mpa fails,
    passive_open_err(reset=1) sends RST|ACK seq=loc_seq_num ack=rcv_nxt, where rcv_nxt
    was already advanced over the payload (irdma_handle_ack_pkt, irdma_parse_mpa)."""
    cap = Capture()
    c = Conn(cap)
    handshake(c, 0)
    c.a(150, "A", ISN_A + 1, ISN_P + 1, payload)
    c.p(210, "RA", ISN_P + 1, ISN_A + 1 + len(payload))
    c.a(1_150, "R", ISN_A + 1 + len(payload), 0)  # the peer gives up; nothing follows
    return Fixture(f"parse_{name}", f"irdma_parse_mpa failure: {what}",
                   f"A bad MPA request ({what}, {errno}) makes the passive node answer "
                   "with RST|ACK and close without an upcall; A's later RST finds no node "
                   "and is dropped silently.",
                   ["irdma_parse_mpa (cm.c)", "irdma_handle_ack_pkt (cm.c)",
                    "RFC 5044 section 7.1"],
                   cap, [run(IP4_P)],
                   tshark_errors=tshark_errors or [], mpa_frames=[4] if decoded else [])


def fx_parse_failure_active() -> Fixture:
    """Active irdma in MPAREQ_SENT receives a reply with the request key:
    active_open_err(reset=1): RST|ACK seq=loc_seq_num ack=rcv_nxt, CONNECT_REPLY(-ECONNRESET)."""
    cap = Capture()
    c = Conn(cap)
    handshake(c, 0)
    req = mpa_request_v2(PD_REQ)
    L = len(req)
    c.a(150, "A", ISN_A + 1, ISN_P + 1, req)
    c.p(230, "A", ISN_P + 1, ISN_A + 1 + L)
    bad = mpa_request_v2(PD_REP)  # "MPA ID Req Frame" where a reply is due
    c.p(1_230, "A", ISN_P + 1, ISN_A + 1 + L, bad)
    c.a(1_290, "RA", ISN_A + 1 + L, ISN_P + 1 + len(bad))
    return Fixture("parse_active_wrong_key", "irdma_parse_mpa failure on the active side",
                   "The initiator receives a frame with the request key in MPAREQ_SENT: "
                   "-EINVAL, RST|ACK and CONNECT_REPLY(-ECONNRESET).",
                   ["irdma_parse_mpa (cm.c)", "irdma_handle_ack_pkt (cm.c)",
                    "RFC 5044 section 7.1"],
                   cap, [run(IP4_A)], mpa_frames=[4])


def fx_check_seq() -> Fixture:
    """irdma_check_seq drops: bad ack and out-of-window seq are dropped silently."""
    cap = Capture()
    c = Conn(cap)
    req = mpa_request_v2(PD_REQ)
    L = len(req)
    c.a(0, "S", ISN_A, 0, options=syn_options(1460))
    c.p(60, "SA", ISN_P, ISN_A + 1, options=syn_options(1460))
    c.a(140, "A", ISN_A + 1, ISN_P + 7)                           # ack != loc_seq_num
    c.a(150, "A", ISN_A + 1, ISN_P + 7, req)                      # same: dropped
    c.a(300_000, "A", ISN_A + 1 + 70_000, ISN_P + 1, req)         # seq beyond rcv_wnd
    c.p(1_000_060, "SA", ISN_P, ISN_A + 1, options=syn_options(1460))  # timer resend
    c.a(1_000_140, "A", ISN_A + 1, ISN_P + 1, req)                # good: ESTABLISHED
    c.p(1_000_200, "A", ISN_P + 1, ISN_A + 1 + L)                 # MPAREQ_RCVD, ACK
    c.a(2_000_000, "A", ISN_A + 1 + L, ISN_P + 2)                 # ack beyond: dropped
    c.a(2_500_000, "FA", ISN_A + 1 + L, ISN_P + 1)                # FIN in MPAREQ_RCVD: ignored
    return Fixture("check_seq_drops", "irdma_check_seq drops",
                   "Segments whose ack is not loc_seq_num or whose seq is outside "
                   "[rcv_nxt, rcv_nxt+65535] are dropped without any answer: the SYN-ACK is "
                   "resent by the timer at 1 s only; after MPAREQ_RCVD a bad ACK and a FIN "
                   "get no answer (the application never decides). The capture's silence "
                   "after each of them is the proof.",
                   ["irdma_check_seq (cm.c)", "irdma_process_pkt (cm.c)",
                    "RFC 9293 section 3.10.7.4"], cap, [run(IP4_P)])


def fx_duplicate_syn() -> Fixture:
    cap = Capture()
    c = Conn(cap)
    c.a(0, "S", ISN_A, 0, options=syn_options(1460))
    c.p(60, "SA", ISN_P, ISN_A + 1, options=syn_options(1460))
    c.a(500_000, "S", ISN_A, 0, options=syn_options(1460))        # duplicate: ignored
    c.p(1_000_060, "SA", ISN_P, ISN_A + 1, options=syn_options(1460))  # timer only
    c.a(1_000_140, "A", ISN_A + 1, ISN_P + 1)
    n_req, n_rep = mpa_exchange(c, 1_000_150, mpa_request_v2(PD_REQ), mpa_reply_v2(PD_REP))
    return Fixture("duplicate_syn", "Duplicate SYN in SYN_RCVD is ignored",
                   "A retransmits its SYN at 0.5 s; the passive node in SYN_RCVD ignores "
                   "it (no SYN-ACK until its own timer fires at 1 s), then the connection "
                   "completes normally.",
                   ["irdma_handle_syn_pkt (cm.c)", "irdma_cm_timer_tick (cm.c)"],
                   cap, [run(IP4_P)], mpa_frames=[n_req, n_rep])


def fx_retrans_syn() -> Fixture:
    cap = Capture()
    c = Conn(cap)
    c.a(0, "S", ISN_A, 0, options=syn_options(1460))
    times, expiry = resend_times_ms()
    for t in times:
        c.a(t * 1000, "S", ISN_A, 0, options=syn_options(1460))
    # retrans_expired in SYN_SENT: +ref RST! + ABORTED; rcv_nxt unset, so ack = 0.
    c.a(expiry * 1000, "RA", ISN_A + 1, 0)
    return Fixture("retrans_syn_expiry", "SYN retransmitted to expiry (RETRANS 32, HZ 1000)",
                   "An unanswered SYN is resent at 1, 3, 7, 15, 27 s, then every 12 s up to "
                   "315 s, then three times one jiffy apart; at 316.003 s the entry expires "
                   "and the active node sends RST|ACK (ack 0) and aborts.",
                   ["irdma_schedule_cm_timer (cm.c)", "irdma_cm_timer_tick (cm.c)",
                    "irdma_retrans_expired (cm.c)"], cap,
                   [run(IP4_A, args=["--time-tolerance", "0.002"])])


def fx_retrans_synack() -> Fixture:
    cap = Capture()
    c = Conn(cap)
    c.a(0, "S", ISN_A, 0, options=syn_options(1460))
    c.p(0, "SA", ISN_P, ISN_A + 1, options=syn_options(1460))
    times, expiry = resend_times_ms()
    for t in times:
        c.p(t * 1000, "SA", ISN_P, ISN_A + 1, options=syn_options(1460))
    # retrans_expired in SYN_RCVD frees the node silently; A's late RST finds no node.
    c.a((expiry + 4_000) * 1000, "R", ISN_A + 1, 0)
    return Fixture("retrans_synack_expiry", "SYN-ACK retransmitted to expiry",
                   "The initiator's third ACK never arrives: the passive node resends its "
                   "SYN-ACK on the RETRANS 32 schedule and is then freed silently (no RST); "
                   "a late RST from A meets no node and gets no answer.",
                   ["irdma_schedule_cm_timer (cm.c)", "irdma_cm_timer_tick (cm.c)",
                    "irdma_retrans_expired (cm.c)"], cap,
                   [run(IP4_P, args=["--time-tolerance", "0.002"])])


def fx_retrans_mpareq(acked: bool) -> Fixture:
    cap = Capture()
    c = Conn(cap)
    handshake(c, 0)
    req = mpa_request_v2(PD_REQ)
    L = len(req)
    c.a(150, "A", ISN_A + 1, ISN_P + 1, req)
    times, expiry = resend_times_ms()
    if acked:
        c.p(230, "A", ISN_P + 1, ISN_A + 1 + L)  # ack_rcvd: no resends, countdown goes on
    else:
        for t in times:
            c.a(150 + t * 1000, "A", ISN_A + 1, ISN_P + 1, req)
    c.a(150 + expiry * 1000, "RA", ISN_A + 1 + L, ISN_P + 1)
    if acked:
        name, title = "retrans_mpareq_acked", "MPA request ACKed, reply never comes"
        shows = ("The responder ACKs the request but its application never answers. The "
                 "initiator sends nothing more (ack_rcvd) while the countdown continues: "
                 "at 316.003 s after the request, RST|ACK and CONNECT_REPLY(-ECONNRESET). "
                 "The passive node keeps the RST for the pending decision (no frame).")
        runs = [run(IP4_A, args=["--time-tolerance", "0.002"]),
                run(IP4_P, args=["--time-tolerance", "0.002"])]
    else:
        name, title = "retrans_mpareq_expiry", "MPA request retransmitted to expiry"
        shows = ("The responder never ACKs the MPA request: it is resent with the same "
                 "seq and ack on the RETRANS 32 schedule; expiry sends RST|ACK.")
        runs = [run(IP4_A, args=["--time-tolerance", "0.002"])]
    return Fixture(name, title, shows,
                   ["irdma_cm_timer_tick (cm.c)", "irdma_handle_ack_pkt (cm.c)"], cap, runs)


def fx_retrans_reject_fin() -> Fixture:
    cap = Capture()
    c = Conn(cap)
    handshake(c, 0)
    req = mpa_request_v2(PD_REQ)
    rep = mpa_reply_v2(PD_REJ, reject=True)
    L, R = len(req), len(rep)
    c.a(150, "A", ISN_A + 1, ISN_P + 1, req)
    c.p(230, "A", ISN_P + 1, ISN_A + 1 + L)
    c.p(2_230, "FA", ISN_P + 1, ISN_A + 1 + L, rep)
    times, expiry = resend_times_ms()
    for t in times:
        c.p(2_230 + t * 1000, "FA", ISN_P + 1, ISN_A + 1 + L, rep)
    # retrans_expired in FIN_WAIT1: RST! with seq = loc_seq_num (after the FIN).
    c.p(2_230 + expiry * 1000, "RA", ISN_P + 2 + R, ISN_A + 1 + L)
    return Fixture("retrans_reject_expiry", "Reject (ACK|FIN) retransmitted to expiry",
                   "The initiator vanishes after the reject: the ACK|FIN + reject segment is "
                   "resent identically on the RETRANS 32 schedule, then FIN_WAIT1 expiry "
                   "sends RST|ACK.",
                   ["irdma_reject (cm.c)", "irdma_cm_timer_tick (cm.c)",
                    "irdma_retrans_expired (cm.c)"], cap,
                   [run(IP4_P, args=["--time-tolerance", "0.002"])], mpa_frames=[4, 6])


def fx_fallback_v1() -> Fixture:
    cap = Capture()
    c = Conn(cap)
    handshake(c, 0)
    req2 = mpa_request_v2(PD_REQ)
    L = len(req2)
    c.a(150, "A", ISN_A + 1, ISN_P + 1, req2)
    c.p(210, "RA", ISN_P + 1, ISN_A + 1 + L)  # a v1-only responder resets the v2 request
    # irdma_handle_rst_pkt: rev 2 -> 1, SYN_SENT, SYN again with seq = loc_seq_num.
    s2 = ISN_A + 1 + L
    isn_p2 = 0x5A17C0DE
    c.a(260, "S", s2, 0, options=syn_options(1460))
    c.p(330, "SA", isn_p2, s2 + 1, options=syn_options(1460))
    c.a(400, "A", s2 + 1, isn_p2 + 1)
    # The READ RTR is sent even after a v1 reply (irdma_cm_init_tsa_conn).
    n_req, n_rep = mpa_exchange(c, 410, mpa_request_v1(PD_REQ), mpa_reply_v1(PD_REP),
                                a_seq=s2 + 1, p_seq=isn_p2 + 1, ack_rtr=False)
    return Fixture("fallback_v2_to_v1", "MPA v2 to v1 fall back after a RST",
                   "A v1-only responder resets the v2 request; the irdma initiator retries "
                   "once on the same ports with MPA v1 (SYN seq = loc_seq_num), then "
                   "completes with a v1 request and reply and still sends the READ RTR.",
                   ["irdma_handle_rst_pkt (cm.c)", "irdma_build_mpa_v1 (cm.c)",
                    "irdma_negotiate_mpa_v2_ird_ord (cm.c)", "RFC 5044 section 7.1"], cap,
                   [run(IP4_A)], mpa_frames=[4, n_req, n_rep])


def fx_syn_refused() -> Fixture:
    """A connection refused at TCP level (the host stack RSTs the SYN) is retried once
    with MPA v1 on the same ports, the SYN carrying seq = loc_seq_num = ISN+1; the second
    RST finds rev 1 and ends in active_open_err(false): CLOSED, CONNECT_REPLY(-ECONNRESET),
    no RST and no more SYNs (irdma_handle_rst_pkt; the host stack answers unmatched SYNs)."""
    cap = Capture()
    c = Conn(cap)
    c.a(0, "S", ISN_A, 0, options=syn_options(1460))
    c.p(50, "RA", 0, ISN_A + 1)
    c.a(50, "S", ISN_A + 1, 0, options=syn_options(1460))
    c.p(100, "RA", 0, ISN_A + 2)
    c.p(5_000_000, "RA", 0, ISN_A + 2)  # a stray late RST: no node, no answer
    return Fixture("fallback_syn_refused", "SYN refused twice: one v1 retry, then abort",
                   "The responder's host stack resets the SYN. irdma retries once with MPA "
                   "v1 on the same 4-tuple (SYN seq = ISN+1, no ACK); the second RST aborts "
                   "the connection silently. Five seconds of silence prove that neither "
                   "SYN is retransmitted afterwards.",
                   ["irdma_handle_rst_pkt (cm.c)", "irdma_find_listener (cm.c)"], cap, [run(IP4_A)])


def fx_mss_min_piggyback() -> Fixture:
    """The SYN-ACK advertises min(own MSS, peer MSS) (irdma_process_options), and an MPA request
    carried by the third handshake ACK itself is fine (irdma_handle_ack_pkt in SYN_RCVD)."""
    cap = Capture()
    c = Conn(cap)
    c.a(0, "S", ISN_A, 0, options=syn_options(1400))
    c.p(60, "SA", ISN_P, ISN_A + 1, options=syn_options(1400))
    # The request rides on the third handshake segment: SYN_RCVD -> ESTABLISHED -> MPAREQ_RCVD.
    n_req, n_rep = mpa_exchange(c, 140, mpa_request_v2(PD_REQ), mpa_reply_v2(PD_REP),
                                ack_after=60)
    return Fixture("mss_min_piggybacked_request", "MSS 1400 peer; request on the third ACK",
                   "The initiator offers MSS 1400, so the SYN-ACK advertises 1400; it sends "
                   "its MPA request in the third handshake segment (no separate pure ACK), "
                   "which the passive node takes straight from SYN_RCVD to MPAREQ_RCVD.",
                   ["irdma_process_options (cm.c)", "irdma_handle_ack_pkt (cm.c)"],
                   cap, [run(IP4_P)],
                   mpa_frames=[n_req, n_rep])


def fx_syn_bad_mss() -> Fixture:
    """GEN_2 (the default): a SYN whose MSS is below 536 fails irdma_handle_tcp_options;
    without an address handle nothing can be sent, so the SYN is dropped silently (errata
    1, no RST although irdma_handle_tcp_options asks for one), and so is every resend."""
    cap = Capture()
    c = Conn(cap)
    for t in (0, 1_000_000, 3_000_000, 7_000_000):
        c.a(t, "S", ISN_A, 0, options=syn_options(500))
    c.a(8_000_000, "R", ISN_A + 1, 0)
    return Fixture("syn_bad_mss_dropped", "SYN with MSS 500 dropped silently (GEN_2)",
                   "MSS 500 is below the IPv4 minimum of 536: the option check fails and, "
                   "on GEN_2, no RST can be built, so the passive side stays silent through "
                   "all the initiator's resends.",
                   ["irdma_form_ah_cm_frame (cm.c)", "irdma_handle_tcp_options (cm.c)",
                    "irdma_handle_syn_pkt (cm.c)"], cap, [run(IP4_P)])


def fx_ipv6() -> Fixture:
    cap = Capture()
    mpa = accept_flow(Conn(cap, a_ip=IP6_A, p_ip=IP6_P))
    return Fixture("v2_accept_ipv6", "MPA v2 accept over IPv6",
                   "The canonical accept flow over IPv6: MSS 1440 (MTU - 60), hop limit 64.",
                   ["irdma_send_syn (cm.c)", "irdma_process_options (cm.c)",
                    "IRDMA_MTU_TO_MSS_IPV6 (cm.h)", "RFC 8200 section 5"], cap,
                   [run(IP6_P), run(IP6_A)], pcapng=True, mpa_frames=mpa)


def fx_vlan() -> Fixture:
    cap = Capture()
    mpa = accept_flow(Conn(cap, vlan=100))
    return Fixture("v2_accept_vlan", "MPA v2 accept on VLAN 100",
                   "The canonical accept flow tagged 802.1Q VLAN 100, priority 0.",
                   ["irdma_form_ah_cm_frame (cm.c)", "irdma_find_listener (cm.c)"],
                   cap, both(), mpa_frames=mpa)


def fx_backlog() -> Fixture:
    """Backlog 1: pend_accepts_cnt > backlog drops, so two handshakes are admitted and the
    third SYN (and its retransmissions) get no answer (irdma_handle_syn_pkt: pend_accepts_cnt >
    backlog)."""
    cap = Capture()
    req = mpa_request_v2(PD_REQ)
    L = len(req)
    conns = [Conn(cap, a_port=PORT_A + i) for i in range(3)]
    for i, c in enumerate(conns[:2]):
        t = i * 1_000
        c.a(t, "S", ISN_A + i, 0, options=syn_options(1460))
        c.p(t + 60, "SA", ISN_P + i, ISN_A + i + 1, options=syn_options(1460))
        c.a(t + 140, "A", ISN_A + i + 1, ISN_P + i + 1)
        c.a(t + 150, "A", ISN_A + i + 1, ISN_P + i + 1, req)
        c.p(t + 230, "A", ISN_P + i + 1, ISN_A + i + 1 + L)
    third = conns[2]
    for t in (2_000, 1_002_000, 3_002_000):
        third.a(t, "S", ISN_A + 2, 0, options=syn_options(1460))
    third.a(3_500_000, "R", ISN_A + 3, 0)
    return Fixture("backlog_drop", "Backlog drop (backlog 1 admits 2)",
                   "With --backlog 1 two handshakes are pending (the check is strictly "
                   "greater); the third client's SYN and its resends are dropped silently.",
                   ["irdma_handle_syn_pkt (cm.c)"], cap,
                   [run(IP4_P, args=["--backlog", "1"]),
                    run(IP4_P, args=["--backlog", "2"], exit_code=1, first_divergence=11,
                        why="with backlog 2 the third SYN is admitted and answered, which "
                            "the capture shows did not happen")])


def fx_linux_peer_synack() -> Fixture:
    """A Linux TCP responder (SACK, timestamps, WS 7, window 64240) in place of irdma:
    emulating it as irdma must diverge at its SYN-ACK (frame 2)."""
    cap = Capture()
    c = Conn(cap)
    c.a(0, "S", ISN_A, 0, options=syn_options(1460))
    c.p(40, "SA", ISN_P, ISN_A + 1, options=linux_syn_options(1460, 1000), window=64240)
    c.a(100, "A", ISN_A + 1, ISN_P + 1)
    req = mpa_request_v2(PD_REQ)
    c.a(110, "A", ISN_A + 1, ISN_P + 1, req)
    c.p(150, "A", ISN_P + 1, ISN_A + 1 + len(req), window=502)
    return Fixture("divergent_linux_synack", "A Linux TCP stack is not irdma",
                   "The responder is a Linux TCP stack (SACK, timestamps, WS 7, window "
                   "64240). Replaying it as irdma must report the SYN-ACK (frame 2) as the "
                   "first divergence; --semantic accepts it.",
                   ["irdma_process_options (cm.c)", "irdma_handle_tcp_options (cm.c)"], cap,
                   [run(IP4_P, exit_code=1, first_divergence=2,
                        why="irdma's SYN-ACK has window 65535 and MSS+WS2+EOL only"),
                    run(IP4_P, args=["--semantic"])])


def fx_no_p2p_peer() -> Fixture:
    """A siw initiator with default settings (v2, no P2P) is reset by an irdma responder
    (irdma_negotiate_mpa_v2_ird_ord: -EOPNOTSUPP)."""
    cap = Capture()
    c = Conn(cap)
    handshake(c, 0)
    req = MpaFrame(request=True, rev=2, flags=FLAG_CRC | FLAG_ENHANCED,
                   rtr=RtrBlock(ird=16, ord=16, peer_to_peer=False, write0=True, read0=True),
                   private_data=PD_REQ).to_bytes()
    c.a(150, "A", ISN_A + 1, ISN_P + 1, req)
    c.p(210, "RA", ISN_P + 1, ISN_A + 1 + len(req))
    return Fixture("parse_v2_no_p2p", "v2 request without P2P (siw default) is reset",
                   "irdma_negotiate_mpa_v2_ird_ord requires the P2P bit: -EOPNOTSUPP, so "
                   "the passive node answers RST|ACK with no upcall.",
                   ["irdma_negotiate_mpa_v2_ird_ord (cm.c)", "irdma_parse_mpa (cm.c)", "siw_cm.c",
                    "RFC 6581 section 5"], cap, [run(IP4_P)], mpa_frames=[4])


def fx_softiwarp_rping() -> Fixture:
    """Shaped after the one public iWARP capture found (SoftUiWARP rping against a siw
    server, spec wireshark-mpa 8): Linux TCP stacks on both sides (SACK, timestamps,
    WS 7), MPA v1 with flags 0x00 (no CRC) and no private data. Emulating the server as
    irdma cannot match byte for byte (irdma's SYN-ACK differs), and --semantic names the
    difference in outcome: the v1 request is accepted (rev 1 <= 2, the C bit is never
    checked by irdma_parse_mpa) and answered with a v1 reply, but irdma_build_mpa_v1 always sets C,
    so CRC would be in use (RFC 5044 section 7.1: when either side sets C) where both
    recorded frames have C=0."""
    cap = Capture()
    c = Conn(cap, a_ip="10.10.1.1", p_ip="10.10.1.2", a_port=42742, p_port=9999)
    isn_c, isn_s = 0x1C3F5A21, 0x77E10B4D
    ts = [("NOP", None), ("NOP", None), ("Timestamp", (3_000_000, 0))]
    c.a(0, "S", isn_c, 0, options=linux_syn_options(1460, 3_000_000), window=64240)
    c.p(45, "SA", isn_s, isn_c + 1, options=linux_syn_options(1460, 9_000_000), window=65160)
    c.a(90, "A", isn_c + 1, isn_s + 1, options=ts, window=502)
    req = mpa_request_v1(b"", flags=0x00)
    rep = MpaFrame(request=False, rev=1, flags=0x00).to_bytes()
    n_req = c.a(120, "A", isn_c + 1, isn_s + 1, req, options=ts, window=502)
    c.p(160, "A", isn_s + 1, isn_c + 1 + len(req), options=ts, window=509)
    n_rep = c.p(900, "A", isn_s + 1, isn_c + 1 + len(req), rep, options=ts, window=509)
    c.a(950, "A", isn_c + 1 + len(req), isn_s + 1 + len(rep), options=ts, window=502)
    server = "10.10.1.2"
    return Fixture("softiwarp_v1_semantic", "A siw-like peer with MPA v1, no CRC",
                   "Linux TCP with SACK and timestamps on both sides and an MPA v1 "
                   "exchange without CRC, as in the SoftUiWARP rping capture. Replaying the "
                   "server as irdma diverges at its SYN-ACK (frame 2) byte for byte; in "
                   "--semantic mode it diverges at the reply (frame 6): irdma always sets "
                   "C, so CRC would be in use where the recording negotiated it off.",
                   ["irdma_build_mpa_v1 (cm.c)", "irdma_parse_mpa (cm.c)",
                    "irdma_process_options (cm.c)", "RFC 5044 section 7.1"], cap,
                   [run(server, exit_code=1, first_divergence=2,
                        why="irdma's SYN-ACK carries MSS+WS2+EOL and window 65535"),
                    run(server, args=["--semantic"], exit_code=1, first_divergence=n_rep,
                        why="irdma_build_mpa_v1 always sets C; both recorded MPA frames "
                            "have C=0 (RFC 5044 section 7.1: CRC is used when either side "
                            "sets C)")], mpa_frames=[n_req, n_rep])


def build_all() -> list[Fixture]:
    req_ok = mpa_request_v2(PD_REQ)
    fx: list[Fixture] = [
        fx_v2_accept(),
        fx_v2_reject(),
        fx_reject_variant("reject_v1", 1, PD_REJ),
        fx_reject_variant("reject_v1_empty", 1, b""),
        fx_reject_variant("reject_v2_empty", 2, b""),
        fx_reject_variant("reject_v2_pd255", 2, bytes(range(255))),
        fx_parse_failure("short", b"MPA ID Req", "payload shorter than 20 bytes", "-EINVAL",
                         decoded=False),
        fx_parse_failure("pd_over_512",
                         MpaFrame(request=True, rev=2, flags=FLAG_CRC | FLAG_ENHANCED,
                                  rtr=RtrBlock(16, 16, write0=True, read0=True),
                                  private_data=bytes(509)).to_bytes(),
                         "PD_Length 513 > 512", "-EOVERFLOW",
                         tshark_errors=["iwarp_mpa.bad_length"]),
        fx_parse_failure("bad_rev", MpaFrame(request=True, rev=3, flags=FLAG_CRC,
                                             private_data=PD_REQ).to_bytes(),
                         "Rev 3", "-EINVAL"),
        fx_parse_failure("wrong_key", MpaFrame(request=False, rev=2,
                                               flags=FLAG_CRC | FLAG_ENHANCED,
                                               rtr=RtrBlock(16, 16, write0=True, read0=True),
                                               private_data=PD_REQ).to_bytes(),
                         "reply key where a request is due", "-EINVAL", decoded=False),
        fx_parse_failure("truncated", req_ok[:40], "PD_Length larger than the segment",
                         "-EOVERFLOW", decoded=False),
        fx_parse_failure("over_544", req_ok + bytes(600 - len(req_ok)),
                         "segment payload of 600 bytes > 544", "-EOVERFLOW"),
        fx_parse_failure("no_rtr_bit",
                         MpaFrame(request=True, rev=2, flags=FLAG_CRC | FLAG_ENHANCED,
                                  rtr=RtrBlock(16, 16), private_data=PD_REQ).to_bytes(),
                         "v2 block offering neither WRITE0 nor READ0", "-EOPNOTSUPP"),
        fx_no_p2p_peer(),
        fx_parse_failure_active(),
        fx_check_seq(),
        fx_duplicate_syn(),
        fx_retrans_syn(),
        fx_retrans_synack(),
        fx_retrans_mpareq(acked=False),
        fx_retrans_mpareq(acked=True),
        fx_retrans_reject_fin(),
        fx_fallback_v1(),
        fx_syn_refused(),
        fx_mss_min_piggyback(),
        fx_syn_bad_mss(),
        fx_ipv6(),
        fx_vlan(),
        fx_backlog(),
        fx_linux_peer_synack(),
        fx_softiwarp_rping(),
    ]
    return fx


def write_capture(path: Path, cap: Capture, pcapng: bool) -> None:
    writer: Callable[[str], Any] = PcapNgWriter if pcapng else PcapWriter
    w = writer(str(path)) if pcapng else PcapWriter(str(path), linktype=1, sync=True)
    for t_us, pkt in cap.frames:
        pkt.time = BASE_TIME + Decimal(t_us) / Decimal(1_000_000)
        w.write(pkt)
    w.close()


def write_fixture(out: Path, fx: Fixture) -> Path:
    ext = "pcapng" if fx.pcapng else "pcap"
    cap_path = out / f"{fx.name}.{ext}"
    write_capture(cap_path, fx.cap, fx.pcapng)
    for replay in fx.replays:
        if "--semantic" not in replay["args"]:
            # Every frame the emulated host sent is compared; a match matches them all.
            replay["expect"]["compared"] = sum(
                1 for _t, pkt in fx.cap.frames
                if (pkt[IPv6].src if IPv6 in pkt else pkt[IP].src) == replay["emulate"])
    sidecar = {
        "capture": cap_path.name,
        "title": fx.title,
        "shows": fx.shows,
        "cites": fx.cites,
        "frames": len(fx.cap.frames),
        "tshark": {"mpa_frames": fx.mpa_frames, "expected_errors": fx.tshark_errors},
        "replays": fx.replays,
    }
    (out / f"{fx.name}.json").write_text(json.dumps(sidecar, indent=2) + "\n")
    return cap_path


TSHARK_OPTS = ["-o", "tcp.try_heuristic_first:TRUE", "--enable-heuristic", "iwarp_mpa_tcp"]


def tshark_check(cap_path: Path, fx: Fixture) -> list[str]:
    """Problems tshark sees: undecoded MPA frames, unexpected Error/Malformed items."""
    problems: list[str] = []
    fields = subprocess.run(
        ["tshark", "-r", str(cap_path), *TSHARK_OPTS, "-Y", "iwarp_mpa.req || iwarp_mpa.rep",
         "-T", "fields", "-e", "frame.number"],
        capture_output=True, text=True, check=False)
    decoded = {int(x) for x in fields.stdout.split()}
    problems += [f"frame {n} not decoded as MPA" for n in fx.mpa_frames if n not in decoded]
    bad = subprocess.run(
        ["tshark", "-r", str(cap_path), *TSHARK_OPTS, "-Y",
         '_ws.expert.severity >= "Error" || _ws.malformed', "-T", "fields",
         "-e", "frame.number", "-e", "_ws.expert.message"],
        capture_output=True, text=True, check=False)
    lines = [ln for ln in bad.stdout.splitlines() if ln.strip()]
    if lines and not fx.tshark_errors:
        problems += [f"tshark error: {ln}" for ln in lines]
    if fx.tshark_errors and not lines:
        problems.append(f"expected tshark errors {fx.tshark_errors}, saw none")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "pcaps")
    ap.add_argument("--check", action="store_true", help="check every fixture with tshark")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for fx in build_all():
        path = write_fixture(args.out, fx)
        if args.check:
            problems = tshark_check(path, fx)
            for p in problems:
                print(f"{fx.name}: {p}", file=sys.stderr)
            failed += bool(problems)
        print(f"{path.name}: {len(fx.cap.frames)} frames")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
