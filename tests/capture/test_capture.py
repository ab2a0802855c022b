"""The pcapng writer: block layout, round trips through the reader, determinism, and
tshark's reading of the file (comments, interface names, nanosecond timestamps)."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpa_emu.capture.pcap import (
    LINKTYPE_ETHERNET,
    CaptureError,
    CaptureRecord,
    PcapngWriter,
    read_capture,
    write_pcapng,
)

# A 60-byte IPv4 ACK (frame from tests/wire/test_codec.py, v4 fin_ack).
FRAME = bytes.fromhex(
    "020000000a01020000000a020800450000283b4940004006"
    "6a33c0a80a02c0a80a0179189c41556677891122335d5011"
    "fffff3b60000000000000000")
T0 = 1_700_000_000_123_456_789


def written(build: object) -> bytes:
    stream = io.BytesIO()
    writer = PcapngWriter(stream)
    build(writer)  # type: ignore[operator]
    return stream.getvalue()


def test_section_header_block_layout() -> None:
    data = written(lambda w: None)
    # pcapng 4.1: type, total length 44, byte-order magic, version 1.0, section length -1,
    # shb_userappl (4) "mpa_emu" padded to 8, opt_endofopt, total length again.
    assert data == bytes.fromhex(
        "0a0d0d0a 2c000000 4d3c2b1a 0100 0000 ffffffffffffffff"
        "0400 0700 6d70615f656d7500 00000000 2c000000")


def test_interface_block_carries_name_and_nanosecond_resolution() -> None:
    data = written(lambda w: w.add_interface("hostA"))[44:]
    # pcapng 4.2: type 1, length 44, linktype 1, reserved, snaplen 262144,
    # if_name (2) "hostA" padded to 8, if_tsresol (9) = 9 padded to 4, endofopt.
    assert data == bytes.fromhex(
        "01000000 2c000000 0100 0000 00000400"
        "0200 0500 686f737441000000 0900 0100 09000000 00000000 2c000000")


def test_enhanced_packet_block_layout() -> None:
    def build(w: PcapngWriter) -> None:
        w.add_interface("hostA")
        w.write(0x0000000123456789, b"\xaa\xbb\xcc", comment="hi")

    data = written(build)[44 + 44:]
    # pcapng 4.3: type 6, length 48, interface 0, ts high 0x1, ts low 0x23456789 (both
    # u32 little-endian), caplen 3, len 3, data padded to 4, opt_comment (1) "hi" padded,
    # endofopt, length.
    assert data == bytes.fromhex(
        "06000000 30000000 00000000 01000000 89674523 03000000 03000000 aabbcc00"
        "0100 0200 68690000 00000000 30000000")


def test_frame_without_comment_has_no_options() -> None:
    def build(w: PcapngWriter) -> None:
        w.add_interface("a")
        w.write(5, FRAME)

    data = written(build)
    assert data[-4:] == (32 + 60).to_bytes(4, "little")
    assert [r.comment for r in read_capture(data)] == [None]


def test_interfaces_are_declared_once_per_name() -> None:
    def build(w: PcapngWriter) -> None:
        w.write(1, FRAME, interface="hostA/eth0")
        w.write(2, FRAME, interface="hostP/eth0")
        w.write(3, FRAME, interface="hostA/eth0")
        assert w.interfaces == {"hostA/eth0": 0, "hostP/eth0": 1}

    records = list(read_capture(written(build)))
    assert [(r.interface, r.interface_name) for r in records] == [
        (0, "hostA/eth0"), (1, "hostP/eth0"), (0, "hostA/eth0")]


def test_snaplen_cuts_the_frame_and_keeps_the_wire_length() -> None:
    def build(w: PcapngWriter) -> None:
        w.add_interface("short", snaplen=20)
        w.write(1, FRAME)

    (record,) = read_capture(written(build))
    assert record.frame == FRAME[:20] and record.orig_len == 60


def test_writer_refuses_misuse() -> None:
    w = PcapngWriter(io.BytesIO())
    w.add_interface("a")
    with pytest.raises(CaptureError, match="already declared"):
        w.add_interface("a")
    with pytest.raises(CaptureError, match="interface 1 is not declared"):
        w.write(0, FRAME, interface=1)
    with pytest.raises(CaptureError, match="outside"):
        w.write(-1, FRAME)
    with pytest.raises(CaptureError, match="outside"):
        w.write(1 << 64, FRAME)
    with pytest.raises(CaptureError, match="UTF-8"):
        w.write(0, FRAME, comment="\udcff")


records_strategy = st.lists(
    st.builds(
        CaptureRecord,
        time_ns=st.integers(0, (1 << 64) - 1),
        interface=st.just(0),
        interface_name=st.sampled_from(["hostA/eth0", "hostP/eth0", "peer/vlan100"]),
        linktype=st.just(LINKTYPE_ETHERNET),
        frame=st.binary(max_size=200),
        orig_len=st.just(-1),
        comment=st.one_of(st.none(), st.text(max_size=60)),
    ),
    max_size=30,
)


def _as_written(records: list[CaptureRecord]) -> list[CaptureRecord]:
    """What the reader should give back: interface indices in order of first use, the
    wire length equal to the frame length, an empty comment read as given."""
    order: dict[str | None, int] = {}
    out = []
    for r in records:
        index = order.setdefault(r.interface_name, len(order))
        out.append(CaptureRecord(r.time_ns, index, r.interface_name, r.linktype, r.frame,
                                 len(r.frame), r.comment))
    return out


@settings(max_examples=150, deadline=None)
@given(records_strategy)
def test_write_then_read_gives_the_same_records(records: list[CaptureRecord]) -> None:
    expected = _as_written(records)
    stream = io.BytesIO()
    with PcapngWriter(stream) as writer:
        for r in expected:
            writer.write(r.time_ns, r.frame, interface=r.interface_name or "",
                         comment=r.comment)
    assert list(read_capture(stream.getvalue())) == expected


@settings(max_examples=50, deadline=None)
@given(records_strategy)
def test_two_writes_of_the_same_records_are_byte_identical(
        records: list[CaptureRecord]) -> None:
    def once() -> bytes:
        stream = io.BytesIO()
        with PcapngWriter(stream) as writer:
            for r in _as_written(records):
                writer.write_record(r)
        return stream.getvalue()

    assert once() == once()


def test_write_pcapng_copies_records_read_from_a_file(tmp_path: Path) -> None:
    def build(w: PcapngWriter) -> None:
        w.write(T0, FRAME, interface="hostA/eth0", comment="one")
        w.write(T0 + 1, FRAME[:54], interface="hostP/eth0")

    original = list(read_capture(written(build)))
    copy = tmp_path / "copy.pcapng"
    write_pcapng(copy, original)
    assert list(read_capture(copy)) == original


# ---- tshark ------------------------------------------------------------------------

COMMENTS = [
    "irdma_send_syn: UNKNOWN -> SYN_SENT",
    "irdma_handle_syn_pkt: LISTENING -> SYN_RCVD (qhash done)",
    "irdma_send_mpa_reject: MPAREQ_RCVD -> FIN_WAIT1 « rejet »",
]


@pytest.mark.tshark
def test_tshark_reads_comments_interface_names_and_ns_timestamps(tmp_path: Path) -> None:
    if shutil.which("tshark") is None:
        pytest.fail("tshark is required (tools/test.sh installs it)")
    path = tmp_path / "flow.pcapng"
    times = [T0, T0 + 1, T0 + 1_000_000_999]
    with open(path, "wb") as stream, PcapngWriter(stream) as writer:
        for i, (t, comment) in enumerate(zip(times, COMMENTS, strict=True)):
            writer.write(t, FRAME, interface="hostA/eth0" if i != 1 else "hostP/eth0",
                         comment=comment)
    proc = subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", "-E", "separator=|",
         "-e", "frame.time_epoch", "-e", "frame.interface_name", "-e", "frame.comment",
         "-e", "frame.len", "-e", "tcp.flags"],
        capture_output=True, text=True, check=True)
    assert [line for line in proc.stderr.splitlines() if "Running as user" not in line] == []
    rows = [line.split("|") for line in proc.stdout.splitlines()]
    assert rows == [
        ["1700000000.123456789", "hostA/eth0", COMMENTS[0], "60", "0x0011"],
        ["1700000000.123456790", "hostP/eth0", COMMENTS[1], "60", "0x0011"],
        ["1700000001.123457788", "hostA/eth0", COMMENTS[2], "60", "0x0011"],
    ]


@pytest.mark.tshark
def test_tshark_decodes_an_irdma_connection_written_through_codec_and_writer(
        tmp_path: Path) -> None:
    """Codec and writer together: tshark finds the MPA request and reply of a v2
    connection, with each frame's comment and interface beside it."""
    if shutil.which("tshark") is None:
        pytest.fail("tshark is required (tools/test.sh installs it)")
    from mpa_emu.wire.codec import encode
    from mpa_emu.wire.mpa import FLAG_CRC, FLAG_ENHANCED, MpaFrame, RtrBlock
    from mpa_emu.wire.segment import ACK, SYN, Segment

    mac_a, mac_p = bytes.fromhex("020000000a01"), bytes.fromhex("020000000a02")
    ip_a, ip_p = bytes([192, 168, 10, 1]), bytes([192, 168, 10, 2])
    req = MpaFrame(request=True, rev=2, flags=FLAG_CRC | FLAG_ENHANCED,
                   rtr=RtrBlock(ird=127, ord=255, write0=True, read0=True)).to_bytes()
    rep = MpaFrame(request=False, rev=2, flags=FLAG_CRC | FLAG_ENHANCED,
                   rtr=RtrBlock(ird=127, ord=127, read0=True)).to_bytes()
    syn_opts = bytes.fromhex("020405b403030200")

    def a(seq: int, ack: int, flags: int, opts: bytes = b"", data: bytes = b"") -> Segment:
        return Segment(mac_a, mac_p, ip_a, ip_p, 40001, 31000, seq, ack, flags,
                       options=opts, payload=data)

    def p(seq: int, ack: int, flags: int, opts: bytes = b"", data: bytes = b"") -> Segment:
        return Segment(mac_p, mac_a, ip_p, ip_a, 31000, 40001, seq, ack, flags,
                       options=opts, payload=data)

    flow = [
        ("A", a(100, 0, SYN, syn_opts), "irdma_send_syn: UNKNOWN -> SYN_SENT"),
        ("P", p(500, 101, SYN | ACK, syn_opts), "irdma_send_syn: LISTENING -> SYN_RCVD"),
        ("A", a(101, 501, ACK), "irdma_send_ack: SYN_SENT -> SYN_SENT"),
        ("A", a(101, 501, ACK, data=req), "irdma_send_mpa_request: SYN_SENT -> MPAREQ_SENT"),
        ("P", p(501, 101 + len(req), ACK), "irdma_send_ack: ESTABLISHED -> MPAREQ_RCVD"),
        ("P", p(501, 101 + len(req), ACK, data=rep), "LSMM: MPAREQ_RCVD -> OFFLOADED"),
    ]
    path = tmp_path / "connection.pcapng"
    with open(path, "wb") as stream, PcapngWriter(stream) as writer:
        for i, (host, seg, comment) in enumerate(flow):
            writer.write(T0 + i * 1000, encode(seg), interface=f"host{host}/eth0",
                         comment=comment)
    proc = subprocess.run(
        ["tshark", "-r", str(path), "-o", "tcp.try_heuristic_first:TRUE",
         "--enable-heuristic", "iwarp_mpa_tcp", "-T", "fields", "-E", "separator=|",
         "-e", "frame.number", "-e", "frame.interface_name", "-e", "frame.comment",
         "-e", "_ws.col.Info"],
        capture_output=True, text=True, check=True)
    rows = [line.split("|") for line in proc.stdout.splitlines()]
    assert [(r[1], r[2]) for r in rows] == [(f"host{h}/eth0", c) for h, _, c in flow]
    assert "MPA Request Frame" in rows[3][3]
    assert "MPA Reply Frame" in rows[5][3]
