"""Capture and trace plumbing: pcapng per host interface with comments and virtual
timestamps, byte-identical for the same seed; JSON Lines trace with the wire's events."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mpa_emu.capture.pcap import read_capture
from mpa_emu.net import FaultConfig, Network

SECOND = 1_000_000_000


def lossy_run(fake_net: Any, seed: int, trace: io.StringIO | None = None) -> Network:
    net = fake_net(seed, faults=FaultConfig(loss=0.3, duplicate=0.1, corrupt=0.1),
                   trace_stream=trace)
    alice = net.add_host("alice", ["192.0.2.1", "192.0.2.11"])
    bob = net.add_host("bob", "192.0.2.2")
    bob.listen(31000)
    alice.listen(31001)
    for port in (31000, 31000, 31000):
        alice.connect("192.0.2.2", port)
    alice.connect("192.0.2.11", 31001, local_ip="192.0.2.1")  # loopback
    net.run(until_ns=5 * SECOND)
    return net


def pcapng_bytes(net: Network) -> bytes:
    out = io.BytesIO()
    net.write_pcapng(out)
    return out.getvalue()


def test_same_seed_gives_a_byte_identical_pcapng(fake_net: Any) -> None:
    first = pcapng_bytes(lossy_run(fake_net, 5))
    assert first == pcapng_bytes(lossy_run(fake_net, 5))
    assert first != pcapng_bytes(lossy_run(fake_net, 6))


def test_pcapng_has_one_interface_per_host_and_the_frame_comments(fake_net: Any) -> None:
    net = lossy_run(fake_net, 5)
    records = list(read_capture(pcapng_bytes(net)))
    assert len(records) == len(net.frames) > 10
    assert [(r.time_ns, r.interface_name, r.frame, r.comment) for r in records] == [
        (f.time_ns, f.interface, f.data, f.comment) for f in net.frames]
    assert {r.interface_name for r in records} == {"alice", "bob", "alice/lo"}
    assert any("wire: lost" in (r.comment or "") for r in records)
    assert any(r.comment == "fake_send_syn: SYN_SENT" for r in records)


def test_trace_stream_gets_core_and_wire_records_as_json_lines(fake_net: Any) -> None:
    stream = io.StringIO()
    net = lossy_run(fake_net, 5, trace=stream)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(lines) == len(net.trace.records)
    kinds = {(d["kind"], d["fn"]) for d in lines}
    assert ("segment_sent", "fake_send") in kinds
    assert ("fault", "wire") in kinds and ("segment_dropped", "wire") in kinds
    dropped = [d for d in lines if d["kind"] == "segment_dropped"]
    assert all(d["reason"] and isinstance(d["frame"], int) for d in dropped)


@pytest.mark.tshark
def test_tshark_reads_interfaces_comments_and_nanosecond_times(fake_net: Any,
                                                                tmp_path: Path) -> None:
    tshark = shutil.which("tshark")
    assert tshark, "tshark is required (tools/test.sh installs it)"
    net = lossy_run(fake_net, 5)
    path = tmp_path / "run.pcapng"
    net.write_pcapng(path)
    out = subprocess.run(
        [tshark, "-r", str(path), "-T", "fields", "-E", "separator=|",
         "-e", "frame.interface_name", "-e", "frame.time_epoch", "-e", "frame.comment"],
        capture_output=True, text=True, check=True, timeout=60).stdout.splitlines()
    assert len(out) == len(net.frames)
    for line, frame in zip(out, net.frames, strict=True):
        name, epoch, comment = line.split("|", 2)
        assert name == frame.interface
        seconds, _, fraction = epoch.partition(".")
        assert int(seconds) * SECOND + int(fraction.ljust(9, "0")[:9]) == frame.time_ns
        assert comment == frame.comment


@pytest.mark.tshark
def test_tshark_sees_the_bad_checksum_of_a_corrupted_frame(fake_net: Any,
                                                           tmp_path: Path) -> None:
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    tshark = shutil.which("tshark")
    assert tshark, "tshark is required (tools/test.sh installs it)"
    net = fake_net(3, faults=FaultConfig(corrupt=1.0))
    net.add_host("alice", "192.0.2.1")
    net.add_host("bob", "192.0.2.2")
    frame = (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
             / IP(src="192.0.2.1", dst="192.0.2.2") / TCP(sport=1, dport=9, flags="S"))
    net.inject(frame, via="alice")
    net.run()
    # The capture holds the bytes as sent; the copy that reached bob was corrupted.
    corrupted = bytearray(net.frames[0].data)
    note = next(n for n in net.frames[0].notes if n.startswith("wire: corrupted"))
    found = re.search(r"bit (\d) of byte (\d+) flipped", note)
    assert found is not None
    bit, byte = int(found[1]), int(found[2])
    corrupted[byte] ^= 0x80 >> bit
    net.frames[0].data = bytes(corrupted)
    path = tmp_path / "corrupt.pcapng"
    net.write_pcapng(path)
    out = subprocess.run(
        [tshark, "-r", str(path), "-o", "tcp.check_checksum:TRUE", "-o",
         "ip.check_checksum:TRUE", "-T", "fields", "-e", "tcp.checksum.status",
         "-e", "ip.checksum.status"],
        capture_output=True, text=True, check=True, timeout=60).stdout.split()
    assert out == ["0", "1"]  # TCP checksum Bad (0), IP header checksum Good (1)
