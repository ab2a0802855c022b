"""The capture reader on files it did not write: scapy's pcap (microsecond and
nanosecond, both byte orders) and pcapng, tshark's pcapng, hand-built big-endian
sections, other timestamp resolutions, Simple and obsolete Packet Blocks, and every
malformed file it must refuse with a clear error."""

from __future__ import annotations

import io
import shutil
import struct
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.l2 import Ether
from scapy.utils import PcapNgWriter, PcapWriter, wrpcap

from mpa_emu.capture.pcap import (
    CaptureError,
    CaptureRecord,
    PcapngWriter,
    read_capture,
    read_intact,
)

FRAMES = [
    bytes.fromhex("020000000a01020000000a020800450000283b49400040066a33c0a80a02c0a80a01"
                  "79189c41556677891122335d5011fffff3b60000000000000000"),
    bytes(range(1, 75)),
    b"\x07" * 61,
]
TIMES_NS = [1_700_000_000_123_456_789, 1_700_000_000_123_457_000, 1_700_000_005_000_000_001]


def scapy_pcap(path: Path, *, nano: bool, endianness: str = "") -> None:
    writer = PcapWriter(str(path), linktype=1, nano=nano, endianness=endianness, sync=True)
    for frame, t in zip(FRAMES, TIMES_NS, strict=True):
        pkt = Ether(frame)
        pkt.time = Decimal(t) / Decimal(1_000_000_000)
        writer.write(pkt)
    writer.close()


@pytest.mark.parametrize("endianness", ["<", ">"], ids=["little", "big"])
def test_reads_scapy_microsecond_pcap(tmp_path: Path, endianness: str) -> None:
    path = tmp_path / "us.pcap"
    scapy_pcap(path, nano=False, endianness=endianness)
    assert path.read_bytes()[:4] == (bytes.fromhex("d4c3b2a1") if endianness == "<"
                                     else bytes.fromhex("a1b2c3d4"))
    records = list(read_capture(path))
    assert [r.frame for r in records] == FRAMES
    # scapy rounds to the nearest microsecond.
    assert [r.time_ns for r in records] == [(t + 500) // 1000 * 1000 for t in TIMES_NS]
    assert {(r.interface, r.interface_name, r.linktype, r.comment) for r in records} == {
        (0, None, 1, None)}
    assert [r.orig_len for r in records] == [len(f) for f in FRAMES]


def test_reads_wrpcap_output(tmp_path: Path) -> None:
    path = tmp_path / "wrpcap.pcap"
    packets = [Ether(frame) for frame in FRAMES]
    for pkt, t in zip(packets, TIMES_NS, strict=True):
        pkt.time = Decimal(t) / Decimal(1_000_000_000)
    wrpcap(str(path), packets)
    records = list(read_capture(path))
    assert [r.frame for r in records] == FRAMES
    assert [r.time_ns for r in records] == [(t + 500) // 1000 * 1000 for t in TIMES_NS]
    assert {r.linktype for r in records} == {1}


@pytest.mark.parametrize("endianness", ["<", ">"], ids=["little", "big"])
def test_reads_nanosecond_pcap_to_the_nanosecond(tmp_path: Path, endianness: str) -> None:
    path = tmp_path / "ns.pcap"
    scapy_pcap(path, nano=True, endianness=endianness)
    assert path.read_bytes()[:4] in (bytes.fromhex("4d3cb2a1"), bytes.fromhex("a1b23c4d"))
    records = list(read_capture(path))
    assert [r.time_ns for r in records] == TIMES_NS
    assert [r.frame for r in records] == FRAMES


def test_reads_scapy_pcapng_with_comments(tmp_path: Path) -> None:
    path = tmp_path / "scapy.pcapng"
    writer = PcapNgWriter(str(path))
    for i, (frame, t) in enumerate(zip(FRAMES, TIMES_NS, strict=True)):
        pkt = Ether(frame)
        pkt.time = Decimal(t) / Decimal(1_000_000_000)
        pkt.comments = [f"comment {i}".encode()]
        writer.write(pkt)
    writer.close()
    records = list(read_capture(path))
    assert [r.frame for r in records] == FRAMES
    assert [r.comment for r in records] == ["comment 0", "comment 1", "comment 2"]
    # scapy declares microsecond resolution unless told otherwise.
    assert [r.time_ns for r in records] == [t // 1000 * 1000 for t in TIMES_NS]


def _our_pcapng(path: Path) -> Path:
    """FRAMES written by our PcapngWriter on two named interfaces, one comment each."""
    with open(path, "wb") as stream, PcapngWriter(stream) as writer:
        for i, (frame, t) in enumerate(zip(FRAMES, TIMES_NS, strict=True)):
            writer.write(t, frame, interface=f"host{i % 2}", comment=f"c{i}")
    return path


@pytest.mark.tshark
@pytest.mark.parametrize(("fmt", "named", "tick_ns"), [
    ("pcapng", True, 1), ("nsecpcap", False, 1), ("pcap", False, 1000)])
def test_reads_what_tshark_writes(tmp_path: Path, fmt: str, named: bool,
                                  tick_ns: int) -> None:
    if shutil.which("tshark") is None:
        pytest.fail("tshark is required (tools/test.sh installs it)")
    ours = _our_pcapng(tmp_path / "ours.pcapng")
    theirs = tmp_path / f"theirs.{fmt}"
    subprocess.run(["tshark", "-r", str(ours), "-F", fmt, "-w", str(theirs)], check=True,
                   capture_output=True)
    records = list(read_capture(theirs))
    assert [r.frame for r in records] == FRAMES
    assert [r.time_ns for r in records] == [t // tick_ns * tick_ns for t in TIMES_NS]
    if named:
        assert [(r.interface_name, r.comment) for r in records] == [
            ("host0", "c0"), ("host1", "c1"), ("host0", "c2")]


@pytest.mark.tshark
def test_tshark_rewrites_our_pcapng_byte_for_byte(tmp_path: Path) -> None:
    """Wireshark's own pcapng writer, fed our file, produces the same bytes: our blocks
    and options are laid out exactly as it would lay them out."""
    if shutil.which("tshark") is None:
        pytest.fail("tshark is required (tools/test.sh installs it)")
    ours = _our_pcapng(tmp_path / "ours.pcapng")
    theirs = tmp_path / "theirs.pcapng"
    subprocess.run(["tshark", "-r", str(ours), "-w", str(theirs)], check=True,
                   capture_output=True)
    assert theirs.read_bytes() == ours.read_bytes()


# ---- hand-built pcapng -------------------------------------------------------------

def option(endian: str, code: int, value: bytes) -> bytes:
    return struct.pack(endian + "HH", code, len(value)) + value + b"\x00" * (-len(value) % 4)


def block(endian: str, block_type: int, body: bytes) -> bytes:
    total = 12 + len(body)
    return struct.pack(endian + "II", block_type, total) + body + struct.pack(endian + "I",
                                                                              total)


def shb(endian: str) -> bytes:
    return block(endian, 0x0A0D0D0A, struct.pack(endian + "IHHq", 0x1A2B3C4D, 1, 0, -1))


def idb(endian: str, name: str | None = None, tsresol: int | None = None,
        tsoffset: int | None = None, snaplen: int = 0, linktype: int = 1) -> bytes:
    opts = b""
    if name is not None:
        opts += option(endian, 2, name.encode())
    if tsresol is not None:
        opts += option(endian, 9, bytes([tsresol]))
    if tsoffset is not None:
        opts += option(endian, 14, struct.pack(endian + "q", tsoffset))
    if opts:
        opts += b"\x00" * 4
    return block(endian, 1, struct.pack(endian + "HHI", linktype, 0, snaplen) + opts)


def epb(endian: str, iface: int, ticks: int, frame: bytes, comments: tuple[str, ...] = (),
        orig_len: int | None = None) -> bytes:
    opts = b"".join(option(endian, 1, c.encode()) for c in comments)
    if opts:
        opts += b"\x00" * 4
    body = struct.pack(endian + "IIIII", iface, ticks >> 32, ticks & 0xFFFFFFFF, len(frame),
                       len(frame) if orig_len is None else orig_len)
    return block(endian, 6, body + frame + b"\x00" * (-len(frame) % 4) + opts)


@pytest.mark.parametrize("endian", ["<", ">"], ids=["little", "big"])
def test_reads_sections_of_either_byte_order(endian: str) -> None:
    data = (shb(endian) + idb(endian, "a", 9) + idb(endian, "b", 6)
            + epb(endian, 1, 5, FRAMES[1], ("x",)) + epb(endian, 0, 7, FRAMES[0]))
    assert list(read_capture(data)) == [
        CaptureRecord(5000, 1, "b", 1, FRAMES[1], len(FRAMES[1]), "x"),
        CaptureRecord(7, 0, "a", 1, FRAMES[0], len(FRAMES[0]), None),
    ]


def test_a_new_section_resets_interfaces_and_byte_order() -> None:
    data = (shb("<") + idb("<", "first") + epb("<", 0, 1, FRAMES[2])
            + shb(">") + idb(">", "second", 9) + epb(">", 0, 2, FRAMES[2]))
    records = list(read_capture(data))
    assert [(r.interface_name, r.time_ns) for r in records] == [("first", 1000),
                                                                ("second", 2)]


@pytest.mark.parametrize(("tsresol", "ticks", "ns"), [
    (None, 3, 3000),  # default: microseconds
    (0, 2, 2_000_000_000),  # seconds
    (3, 5, 5_000_000),  # milliseconds
    (12, 123_456_789_999, 123_456_789),  # picoseconds, truncated to ns
    (0x80 | 10, 1024 * 3 + 512, 3_500_000_000),  # 2^-10 s
    (0x80 | 30, 1 << 30, 1_000_000_000),
])
def test_interface_timestamp_resolutions(tsresol: int | None, ticks: int, ns: int) -> None:
    data = shb("<") + idb("<", "x", tsresol) + epb("<", 0, ticks, FRAMES[0])
    assert [r.time_ns for r in read_capture(data)] == [ns]


def test_interface_timestamp_offset_adds_seconds() -> None:
    data = shb("<") + idb("<", "x", 9, tsoffset=1_600_000_000) + epb("<", 0, 42, FRAMES[0])
    assert [r.time_ns for r in read_capture(data)] == [1_600_000_000_000_000_042]


def test_multiple_comments_are_joined_by_newlines() -> None:
    data = shb("<") + idb("<", "x") + epb("<", 0, 1, FRAMES[0], ("one", "two"))
    assert [r.comment for r in read_capture(data)] == ["one\ntwo"]


def test_an_empty_second_comment_is_not_dropped() -> None:
    data = shb("<") + idb("<", "x") + epb("<", 0, 1, FRAMES[0], ("one", ""))
    assert [r.comment for r in read_capture(data)] == ["one\n"]


def test_simple_packet_block_has_no_timestamp_and_respects_snaplen() -> None:
    spb_body = struct.pack("<I", len(FRAMES[1])) + FRAMES[1] + b"\x00" * (-len(FRAMES[1]) % 4)
    data = shb("<") + idb("<", "eth", snaplen=40) + block("<", 3, spb_body)
    (record,) = read_capture(data)
    assert record == CaptureRecord(None, 0, "eth", 1, FRAMES[1][:40], len(FRAMES[1]))


def test_obsolete_packet_block_is_read() -> None:
    frame = FRAMES[2]
    body = struct.pack("<HHIIII", 0, 0, 0, 77, len(frame), 1500) + frame
    body += b"\x00" * (-len(frame) % 4) + option("<", 1, b"old") + b"\x00" * 4
    data = shb("<") + idb("<", "eth", 9) + block("<", 2, body)
    assert list(read_capture(data)) == [CaptureRecord(77, 0, "eth", 1, frame, 1500, "old")]


def test_unknown_blocks_are_skipped() -> None:
    nrb = block("<", 4, b"\x00" * 4)  # name resolution block, empty
    isb = block("<", 5, b"\x00" * 12)  # interface statistics
    data = shb("<") + idb("<", "x") + nrb + epb("<", 0, 1, FRAMES[0]) + isb
    assert [r.frame for r in read_capture(data)] == [FRAMES[0]]


def test_file_object_source(tmp_path: Path) -> None:
    path = tmp_path / "f.pcapng"
    path.write_bytes(shb("<") + idb("<", "x") + epb("<", 0, 1, FRAMES[0]))
    with open(path, "rb") as stream:
        assert [r.frame for r in read_capture(stream)] == [FRAMES[0]]


def test_large_capture_spanning_read_chunks() -> None:
    frame = bytes(range(256)) * 6  # 1536 bytes: 2,000 blocks cross several 1 MiB chunks
    data = shb("<") + idb("<", "x", 9) + b"".join(
        epb("<", 0, i, frame[: 60 + i % 1400]) for i in range(2000))
    records = list(read_capture(data))
    assert len(records) == 2000
    assert all(r.frame == frame[: 60 + i % 1400] and r.time_ns == i
               for i, r in enumerate(records))


# ---- refusals ----------------------------------------------------------------------

GOOD = shb("<") + idb("<", "x", 9) + epb("<", 0, 1, FRAMES[0])


def refusal(data: bytes) -> str:
    with pytest.raises(CaptureError) as info:
        list(read_capture(data))
    return str(info.value)


def test_empty_file() -> None:
    assert "empty file" in refusal(b"")


def test_unknown_magic() -> None:
    assert "not a pcap or pcapng file (starts with 50 4b 03 04)" in refusal(b"PK\x03\x04zip")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CaptureError, match="cannot open capture"):
        list(read_capture(tmp_path / "absent.pcapng"))


def test_truncated_pcap_header() -> None:
    assert "truncated pcap file header" in refusal(bytes.fromhex("d4c3b2a1") + b"\x02\x00")


def test_unsupported_pcap_version() -> None:
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 3, 0, 0, 0, 65535, 1)
    assert "unsupported pcap version 3.0" in refusal(header)


def _pcap(records: bytes) -> bytes:
    return struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1) + records


def test_truncated_pcap_record_header() -> None:
    assert "truncated pcap record header 0 at offset 24" in refusal(_pcap(b"\x00" * 10))


def test_truncated_pcap_record_data() -> None:
    record = struct.pack("<IIII", 1, 0, 60, 60) + FRAMES[0][:30]
    assert "truncated pcap record 0 at offset 24: 60 bytes announced" in refusal(
        _pcap(record))


def test_pcap_record_larger_than_any_snaplen() -> None:
    record = struct.pack("<IIII", 1, 0, 1 << 30, 1 << 30)
    assert "claims 1073741824 captured bytes" in refusal(_pcap(record))


def test_records_before_a_truncation_are_delivered() -> None:
    ok = struct.pack("<IIII", 1, 0, 60, 60) + FRAMES[0]
    got = []
    with pytest.raises(CaptureError):
        for record in read_capture(_pcap(ok + ok[:20])):
            got.append(record.frame)
    assert got == [FRAMES[0]]


def test_read_intact_returns_the_records_before_a_truncation_and_the_fault() -> None:
    ok = struct.pack("<IIII", 1, 0, 60, 60) + FRAMES[0]
    records, fault = read_intact(_pcap(ok + ok[:20]))
    assert [r.frame for r in records] == [FRAMES[0]]
    assert isinstance(fault, CaptureError) and "truncated pcap record 1 at offset 100" in str(fault)
    records, fault = read_intact(_pcap(ok + ok))
    assert [r.frame for r in records] == [FRAMES[0], FRAMES[0]] and fault is None
    records, fault = read_intact(b"")
    assert records == [] and fault is not None and "empty file" in str(fault)


def test_truncated_pcapng_block() -> None:
    assert "truncated pcapng block of type 0x00000006" in refusal(GOOD[:-3])


def test_truncated_pcapng_block_header() -> None:
    assert "truncated pcapng block header" in refusal(GOOD + b"\x06\x00\x00")


def test_block_length_not_a_multiple_of_four() -> None:
    bad = bytearray(GOOD)
    bad[len(GOOD) - 60 - 32 + 4] = 0x5D  # EPB total length 93
    assert "bad length 93" in refusal(bytes(bad))


def test_trailing_length_mismatch() -> None:
    bad = GOOD[:-4] + struct.pack("<I", 96)
    assert "trailing length differs" in refusal(bad)


def test_bad_byte_order_magic() -> None:
    bad = GOOD[:8] + b"\x00\x00\x00\x00" + GOOD[12:]
    assert "bad byte-order magic 00000000" in refusal(bad)


def test_packet_on_undeclared_interface() -> None:
    data = shb("<") + idb("<", "x") + epb("<", 3, 1, FRAMES[0])
    assert "refers to interface 3, but the section declares 1" in refusal(data)


def test_packet_before_any_interface() -> None:
    assert "declares 0" in refusal(shb("<") + epb("<", 0, 1, FRAMES[0]))


def test_captured_length_overrunning_the_block() -> None:
    body = struct.pack("<IIIII", 0, 0, 1, 200, 200) + FRAMES[0]
    data = shb("<") + idb("<", "x") + block("<", 6, body)
    assert "captured length 200 overruns the block" in refusal(data)


def test_option_overrunning_the_block() -> None:
    body = struct.pack("<IIIII", 0, 0, 1, 4, 4) + b"abcd" + struct.pack("<HH", 1, 40)
    data = shb("<") + idb("<", "x") + block("<", 6, body)
    assert "option 1 in the block at offset" in refusal(data)


def test_unsupported_pcapng_major_version() -> None:
    bad = block("<", 0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 2, 0, -1))
    assert "unsupported pcapng version 2" in refusal(bad)


# ---- fuzz: nothing but CaptureError ever escapes ---------------------------------------

_PCAP_OK = _pcap(struct.pack("<IIII", 1, 0, 60, 60) + FRAMES[0])
_PCAPNG_OK = GOOD + epb("<", 0, 2, FRAMES[1], ("a comment",))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([_PCAP_OK, _PCAPNG_OK]), st.lists(
    st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4), st.integers(0, 300))
def test_mutated_captures_read_or_raise_capture_error(
        data: bytes, edits: list[tuple[int, int]], cut: int) -> None:
    mutated = bytearray(data)
    for where, value in edits:
        mutated[where % len(data)] = value
    try:
        for record in read_capture(bytes(mutated[:len(data) - cut % len(data)])):
            assert isinstance(record.frame, bytes)
    except CaptureError as exc:
        assert str(exc)


MAGICS = [b"", bytes.fromhex("0a0d0d0a"), bytes.fromhex("d4c3b2a1"),
          bytes.fromhex("a1b23c4d"), bytes.fromhex("0a0d0d0a1c0000004d3c2b1a")]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(MAGICS), st.binary(max_size=200))
def test_random_bytes_read_or_raise_capture_error(magic: bytes, data: bytes) -> None:
    try:
        for record in read_capture(magic + data):
            assert isinstance(record.frame, bytes)
    except CaptureError as exc:
        assert str(exc)


def test_huge_announced_block_length_in_a_file_is_a_clean_truncation(tmp_path: Path) -> None:
    path = tmp_path / "huge.pcapng"
    path.write_bytes(shb("<") + struct.pack("<II", 6, 0xFFFFFFF0) + bytes(100))
    with pytest.raises(CaptureError, match="4294967280 bytes announced"):
        list(read_capture(path))


def test_a_failing_stream_is_a_capture_error(tmp_path: Path) -> None:
    directory = tmp_path / "a_directory"
    directory.mkdir()
    with pytest.raises(CaptureError, match="cannot open capture"):
        list(read_capture(directory))

    class Failing(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, buffer: object) -> int:
            raise OSError(5, "Input/output error")

    with pytest.raises(CaptureError, match="cannot read capture at offset 0"):
        list(read_capture(Failing()))
