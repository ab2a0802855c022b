#!/usr/bin/env python3
"""Benchmark the segment codec and the capture reader.

Codec: the 11 frames of one irdma connection over IPv4 (SYN, SYN-ACK, ACK, MPA request,
ACK, MPA reply, ACK, FIN/ACK, ACK, FIN/ACK, ACK) in irdma's shape (window 65535, SYN
options 020405b4 030302 00, MPA v2 request and reply from mpa_emu.wire.mpa), built (Segment
to bytes) and parsed (bytes to Segment) three ways in one run:

* scapy: layers built with ``bytes(Ether()/IP()/TCP()/Raw())``, parsed with ``Ether(raw)``
  and the fields read into a Segment;
* codec: ``mpa_emu.wire.codec.encode`` / ``decode`` (validation and checksum verification);
* struct: a hand-written straight-line baseline for this one shape (IPv4, untagged):
  ``struct.pack`` plus checksums to build, ``struct.unpack_from`` into ``Segment(...)``
  to parse, no validation. "struct/tuple" parses into a tuple only, the floor.

Capture: write N frames with PcapngWriter (comment on each) and read them back with
read_capture.

Times are the best of several rounds of time.perf_counter over many repetitions.
Usage: python tools/bench_codec.py [--rounds 7] [--frames 100000]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import io
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path

if importlib.util.find_spec("mpa_emu") is None:  # not installed: the checkout's own
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mpa_emu.capture.pcap import PcapngWriter, read_capture
from mpa_emu.wire.codec import decode, encode
from mpa_emu.wire.mpa import FLAG_CRC, FLAG_ENHANCED, MpaFrame, RtrBlock
from mpa_emu.wire.segment import ACK, FIN, SYN, Segment

MAC_A = bytes.fromhex("020000000a01")
MAC_P = bytes.fromhex("020000000a02")
IP_A = bytes([192, 168, 10, 1])
IP_P = bytes([192, 168, 10, 2])
SYN_OPTIONS = bytes.fromhex("020405b4" "03030200")


def connection() -> list[Segment]:
    """The 11 segments of one connection, flow 2.5 of the irdma-cm spec, then close."""
    req = MpaFrame(request=True, rev=2, flags=FLAG_CRC | FLAG_ENHANCED,
                   rtr=RtrBlock(ird=127, ord=255, write0=True, read0=True),
                   private_data=b"rdma_cm private data").to_bytes()
    rep = MpaFrame(request=False, rev=2, flags=FLAG_CRC | FLAG_ENHANCED,
                   rtr=RtrBlock(ird=127, ord=127, read0=True),
                   private_data=b"accepted").to_bytes()
    ia, ip = 0x11223344, 0x55667788
    ids = iter(range(0x3B48, 0x3B60))

    def a(seq: int, ack: int, flags: int, options: bytes = b"", payload: bytes = b"") -> Segment:
        return Segment(MAC_A, MAC_P, IP_A, IP_P, 40001, 31000, seq, ack, flags,
                       options=options, payload=payload, ip_id=next(ids))

    def p(seq: int, ack: int, flags: int, options: bytes = b"", payload: bytes = b"") -> Segment:
        return Segment(MAC_P, MAC_A, IP_P, IP_A, 31000, 40001, seq, ack, flags,
                       options=options, payload=payload, ip_id=next(ids))

    a1, p1 = ia + 1, ip + 1
    a2, p2 = a1 + len(req), p1 + len(rep)
    return [
        a(ia, 0, SYN, SYN_OPTIONS),
        p(ip, a1, SYN | ACK, SYN_OPTIONS),
        a(a1, p1, ACK),
        a(a1, p1, ACK, payload=req),
        p(p1, a2, ACK),
        p(p1, a2, ACK, payload=rep),
        a(a2, p2, ACK),
        a(a2, p2, FIN | ACK),
        p(p2, a2 + 1, ACK),
        p(p2, a2 + 1, FIN | ACK),
        a(a2 + 1, p2 + 1, ACK),
    ]


# ---- the hand-written baseline ---------------------------------------------------

_HDR = struct.Struct("!6s6sHBBHHHBBH4s4sHHIIHHHH")


def struct_build(s: Segment) -> bytes:
    olen = len(s.options)
    total = 40 + olen + len(s.payload)
    hdr = bytearray(_HDR.pack(s.dst_mac, s.src_mac, 0x0800, 0x45, s.tos, total, s.ip_id,
                              0x4000, s.ttl, 6, 0, s.src_ip, s.dst_ip, s.sport, s.dport,
                              s.seq, s.ack, (5 + olen // 4) << 12 | s.flags, s.window, 0, 0))
    ip_sum = int.from_bytes(hdr[14:34], "big") % 0xFFFF
    hdr[24:26] = ((-ip_sum) % 0xFFFF).to_bytes(2, "big")
    tcp = bytes(hdr[34:]) + s.options + s.payload
    value = int.from_bytes(tcp, "big") << (8 * (len(tcp) & 1))
    tcp_sum = (value + int.from_bytes(s.src_ip + s.dst_ip, "big") + 6 + len(tcp)) % 0xFFFF
    frame = bytes(hdr[:34]) + tcp[:16] + ((-tcp_sum) % 0xFFFF).to_bytes(2, "big") + tcp[18:]
    return frame if len(frame) >= 60 else frame + bytes(60 - len(frame))


def struct_parse(raw: bytes) -> Segment:
    (dst, src, _t, _vi, tos, total, ip_id, frag, ttl, _p, _c, sip, dip, sport, dport, seq,
     ack, off_flags, window, _tc, urg) = _HDR.unpack_from(raw)
    hl = 34 + (off_flags >> 12) * 4
    return Segment(src, dst, sip, dip, sport, dport, seq, ack, off_flags & 0xFFF, window,
                   raw[54:hl], raw[hl:14 + total], None, 0, ttl, tos, ip_id,
                   bool(frag & 0x4000), urg)


def struct_parse_tuple(raw: bytes) -> tuple[object, ...]:
    fields = _HDR.unpack_from(raw)
    hl = 34 + (fields[18] >> 12) * 4
    return (*fields, raw[54:hl], raw[hl:14 + fields[5]])


# ---- scapy -------------------------------------------------------------------------

def scapy_layers() -> tuple[Callable[[Segment], bytes], Callable[[bytes], Segment]]:
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    def mac(b: bytes) -> str:
        return ":".join(f"{x:02x}" for x in b)

    def ip(b: bytes) -> str:
        return ".".join(str(x) for x in b)

    def build(s: Segment) -> bytes:
        opts = [("MSS", 1460), ("WScale", 2), ("EOL", None)] if s.options else []
        pkt = (Ether(src=mac(s.src_mac), dst=mac(s.dst_mac))
               / IP(src=ip(s.src_ip), dst=ip(s.dst_ip), tos=s.tos, id=s.ip_id, flags="DF",
                    ttl=s.ttl)
               / TCP(sport=s.sport, dport=s.dport, seq=s.seq, ack=s.ack, flags=s.flags,
                     window=s.window, options=opts))
        if s.payload:
            pkt = pkt / Raw(s.payload)
        raw = bytes(pkt)
        return raw if len(raw) >= 60 else raw + bytes(60 - len(raw))

    def parse(raw: bytes) -> Segment:
        pkt = Ether(raw)
        i, t = pkt[IP], pkt[TCP]
        hl = t.dataofs * 4
        tcp_raw = bytes(t)
        return Segment(bytes.fromhex(pkt.src.replace(":", "")),
                       bytes.fromhex(pkt.dst.replace(":", "")),
                       bytes(int(x) for x in i.src.split(".")),
                       bytes(int(x) for x in i.dst.split(".")),
                       t.sport, t.dport, t.seq, t.ack, int(t.flags), t.window,
                       tcp_raw[20:hl], tcp_raw[hl:i.len - 20], None, 0, i.ttl, i.tos, i.id,
                       bool(int(i.flags) & 2), t.urgptr)

    return build, parse


# ---- measurement -------------------------------------------------------------------

def best_of(rounds: int, work: dict[str, tuple[Callable[[], object], int]]
            ) -> dict[str, float]:
    """Seconds per call of each function: the best of ``rounds`` rounds, each round
    timing every function in turn (``reps`` calls), so a change in machine load hits
    all rows alike. The collector is off while timing."""
    best = dict.fromkeys(work, float("inf"))
    gc.collect()
    gc.disable()
    try:
        for _ in range(rounds):
            for name, (fn, reps) in work.items():
                start = time.perf_counter()
                for _ in range(reps):
                    fn()
                best[name] = min(best[name], (time.perf_counter() - start) / reps)
    finally:
        gc.enable()
    return best


def bench_codec(rounds: int) -> None:
    segs = connection()
    sbuild, sparse = scapy_layers()
    wires = [encode(s) for s in segs]
    # All three must agree before their speed means anything.
    for s, w in zip(segs, wires, strict=True):
        assert struct_build(s) == w == sbuild(s), s
        assert decode(w) == struct_parse(w) == sparse(w) == s, s

    def all_build(build: Callable[[Segment], object]) -> Callable[[], object]:
        def run() -> object:
            return [build(s) for s in segs]
        return run

    def all_parse(parse: Callable[[bytes], object]) -> Callable[[], object]:
        def run() -> object:
            return [parse(w) for w in wires]
        return run

    work: dict[str, tuple[Callable[[], object], int]] = {
        "scapy build": (all_build(sbuild), 20),
        "scapy parse": (all_parse(sparse), 20),
        "codec build": (all_build(encode), 1000),
        "codec parse": (all_parse(decode), 1000),
        "struct build": (all_build(struct_build), 1000),
        "struct parse": (all_parse(struct_parse), 1000),
        "struct/tuple parse": (all_parse(struct_parse_tuple), 1000),
    }
    best = best_of(rounds, work)
    results: dict[str, tuple[float | None, float]] = {
        name: (best[f"{name} build"] * 1e6 if f"{name} build" in best else None,
               best[f"{name} parse"] * 1e6)
        for name in ("scapy", "codec", "struct", "struct/tuple")}
    n = len(segs)
    base_b, base_p = results["struct"]
    assert base_b is not None
    print(f"codec benchmark: {n} frames of one irdma connection (IPv4), best of {rounds} "
          f"rounds, Python {sys.version.split()[0]}")
    print(f"{'':14}{'build/frame':>12}{'parse/frame':>12}{'all 11 (us)':>13}"
          f"{'build x':>9}{'parse x':>9}{'total x':>9}")
    for name, (b, p) in results.items():
        total = (b or 0.0) + p
        bt = f"{b / n:10.2f}us" if b is not None else f"{'-':>12}"
        bx = f"{b / base_b:9.2f}" if b is not None else f"{'-':>9}"
        tx = f"{total / (base_b + base_p):9.2f}" if b is not None else f"{'-':>9}"
        print(f"{name:14}{bt}{p / n:10.2f}us{total:13.1f}{bx}{p / base_p:9.2f}{tx}")
    print("(x = ratio to the hand-written struct baseline; 'all 11' = build + parse of the "
          "11 frames)")


def bench_capture(frames: int, rounds: int) -> None:
    wires = [encode(s) for s in connection()]
    comment = "irdma_handle_tcp_options: SYN_RCVD -> ESTABLISHED"

    def write() -> bytes:
        stream = io.BytesIO()
        writer = PcapngWriter(stream)
        a = writer.add_interface("hostA/eth0")
        p = writer.add_interface("hostP/eth0")
        for i in range(frames):
            writer.write(i * 1000, wires[i % 11], interface=a if i & 1 else p,
                         comment=comment)
        return stream.getvalue()

    data = write()

    def read() -> int:
        return sum(1 for _ in read_capture(data))

    assert read() == frames
    times = best_of(rounds, {"write": (write, 1), "read": (read, 1)})
    tw, tr = times["write"], times["read"]
    print(f"capture: {frames} frames with comments ({len(data) / 1e6:.1f} MB pcapng): "
          f"write {tw * 1e3:.0f} ms ({tw / frames * 1e6:.2f} us/frame), "
          f"read {tr * 1e3:.0f} ms ({tr / frames * 1e6:.2f} us/frame, "
          f"{frames / tr:,.0f} frames/s)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="rounds; the best counts")
    parser.add_argument("--frames", type=int, default=100_000,
                        help="frames for the capture write/read benchmark (0 to skip)")
    args = parser.parse_args()
    bench_codec(args.rounds)
    if args.frames:
        bench_capture(args.frames, max(1, args.rounds // 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
