"""tshark, the independent judge, decodes the frames siw sends as iWARP: the MPA request
and reply, the RTR, the Terminate with siw's little-endian control word."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from helpers.siw_pair import KEY_REP, PEER_IP, SIW_IP, Pair, frame

from mpa_emu.capture.pcap import CaptureRecord, write_pcapng
from mpa_emu.net.network import Network
from mpa_emu.net.policy import Accept
from mpa_emu.wire import codec

OPTS = ["-o", "tcp.try_heuristic_first:TRUE", "--enable-heuristic", "iwarp_mpa_tcp"]

pytestmark = pytest.mark.tshark


@pytest.fixture(autouse=True)
def _need_tshark() -> None:
    if shutil.which("tshark") is None:
        pytest.fail("tshark is required (tools/test.sh installs it)")


def fields(path: Path, *names: str) -> list[list[str]]:
    proc = subprocess.run(["tshark", "-r", str(path), *OPTS, "-T", "fields",
                           "-E", "occurrence=f", *[a for n in names for a in ("-e", n)]],
                          capture_output=True, text=True, check=True)
    return [line.split("\t") for line in proc.stdout.splitlines()]


def test_siw_request_reply_and_read_rtr_decode_as_iwarp(tmp_path: Path) -> None:
    net = Network(seed=2)
    a = net.add_host("a", "192.0.2.1", stack="siw", params={"peer_to_peer": True})
    b = net.add_host("b", "192.0.2.2", stack="siw")
    b.listen(31000, policy=Accept(private_data=b"welcome"))
    a.connect(b, 31000, private_data=b"hello", ird=8, ord=8)
    net.run_for(1_000_000_000)
    cap = tmp_path / "siw.pcapng"
    net.write_pcapng(cap)
    rows = fields(cap, "frame.number", "iwarp_mpa.key.req", "iwarp_mpa.key.rep",
                  "iwarp_mpa.rev", "iwarp_mpa.pdlength", "iwarp_mpa.crc_flag",
                  "iwarp_rdma.opcode", "iwarp_ddp.qn", "iwarp_rdma.srcstag")
    mpa = [r for r in rows if r[3]]
    # siw_connect: rev 2, PD_Length 4 + 5, no C; the reply (siw_accept) likewise.
    assert [(r[3], r[4], r[5]) for r in mpa] == [("2", "9", "0"), ("2", "11", "0")]
    rdma = [r for r in rows if r[6]]
    # siw_proc_mpareq picks Write when the request offers both ("Writes are preferred"),
    # so the initiator's RTR is a zero-length RDMA Write (opcode 0); the responder
    # answers nothing; no Read Request is sent.
    assert [r[6] for r in rdma] == ["0x00"]
    assert [u.event.name for u in b.upcalls] == ["CONNECT_REQUEST", "ESTABLISHED"]


def test_siw_terminate_decodes_with_layer_and_etype_swapped(tmp_path: Path) -> None:
    # A siw initiator offering only the Write RTR (rtr_type 1) gets a reply that picks
    # Read: siw_proc_mpareply finds no matching RTR and sends a Terminate.
    p = Pair({"peer_to_peer": True, "rtr_type": 1})
    p.peer.listen(PEER_IP, 31000, 16)
    p.siw.connect(SIW_IP, PEER_IP, 31000, now_ns=0)
    p.run(1_000_000)
    sock = next(e.sock for e in p.peer_events if e.kind == "accepted")
    p.peer.send(sock, frame(KEY_REP, 0x10, 2, b"", struct.pack("!HH", 0x8010, 0x4010)),
                p.now)
    p.run(p.now + 1_000_000)
    cap = tmp_path / "term.pcapng"
    frames = [(t, codec.encode(seg)) for t, _, seg, _ in p.wire]
    write_pcapng(cap, [CaptureRecord(t, 0, "wire", 1, raw, len(raw)) for t, raw in frames])
    rows = [r for r in fields(cap, "frame.number", "iwarp_rdma.opcode",
                              "iwarp_rdma.term_layer", "iwarp_rdma.term_etype_rdma",
                              "iwarp_rdma.term_errcode_rdma") if r[1] == "0x07"]
    (row,) = rows
    # siw's bit-fields on a little-endian host put layer 2 (LLP) in the low nibble of the
    # first byte and etype 0 in the high nibble: byte 0x02. RFC 5040 reads the high
    # nibble as the layer, so tshark shows layer 0 (RDMAP) with RDMAP etype 2 (Remote
    # Operation Error); the ecode byte 0x07 (LLP_ECODE_NO_MATCHING_RTR) is where RFC 5040
    # puts it, read as an RDMAP error code.
    assert (int(row[2], 0), int(row[3], 0), int(row[4], 0)) == (0, 2, 7)
