"""Long captures for memory tests: copies of the golden MPA v2 connection one after the
other, each from its own client port with its own sequence numbers, so that every copy
is a connection of its own that opens, speaks MPA and closes. The two hosts stay the
same: what a reading command keeps per host (a lane, a fingerprint) does not grow."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from mpa_emu.capture.pcap import PcapngWriter, read_capture
from mpa_emu.wire import codec
from mpa_emu.wire.addr import ip_bytes
from mpa_emu.wire.segment import ACK

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "pcaps" / "golden" / "golden_accept_v2.pcapng"
SERVER_TEXT = "192.168.20.2"
SERVER = ip_bytes(SERVER_TEXT)
CLIENT = ip_bytes("10.9.0.1")
MASK32 = 0xFFFFFFFF


def write_copies(path: Path, connections: int, spacing_ns: int = 1_000_000_000) -> int:
    """Write ``connections`` copies of the template, ``spacing_ns`` apart; returns the
    number of frames written. Frames are written as they are made (the copies do not
    overlap in time), so building a long capture holds one copy at a time."""
    template = [(r.time_ns or 0, codec.decode(r.frame)) for r in read_capture(TEMPLATE)]
    t0 = template[0][0]
    assert template[-1][0] - t0 < spacing_ns
    written = 0
    with open(path, "wb") as out:
        writer = PcapngWriter(out, application="test")
        writer.add_interface("test")
        for i in range(connections):
            client = CLIENT
            port = 20000 + i % 40000
            dc = (i * 2_654_435_761) & MASK32
            ds = (i * 40_503 + 12_345) & MASK32
            for t, seg in template:
                from_client = seg.src_ip != SERVER
                mine, theirs = (dc, ds) if from_client else (ds, dc)
                new = replace(seg, src_ip=client if from_client else SERVER,
                              dst_ip=SERVER if from_client else client,
                              sport=port if from_client else seg.sport,
                              dport=seg.dport if from_client else port,
                              seq=(seg.seq + mine) & MASK32,
                              ack=(seg.ack + theirs) & MASK32 if seg.flags & ACK else seg.ack)
                writer.write(1_700_000_000_000_000_000 + i * spacing_ns + t - t0,
                             codec.encode(new))
                written += 1
        writer.flush()
    return written
