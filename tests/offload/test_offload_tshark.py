"""tshark as the independent judge of what the offloaded QPs put on the wire: the MPA
reply sent as LSMM, the RTR (zero-length RDMA Read Request), Sends and the final RST
decode as iWARP with "Good CRC32" (wireshark-mpa sections 2, 5 and 7)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.offload_peer import A_IP, A_MAC, A_PORT, P_IP, P_MAC, P_PORT, P_RCV, P_SEQ, REPLY
from mpa_emu.stacks.irdma.offload import Ae, OffloadedQp, QpInit
from mpa_emu.stacks.irdma.offload.terminate import build_terminate

from mpa_emu.capture.pcap import PcapngWriter
from mpa_emu.wire import codec, mpa
from mpa_emu.wire.segment import ACK, SYN, Segment

TSHARK_OPTS = ["-o", "tcp.try_heuristic_first:TRUE", "--enable-heuristic", "iwarp_mpa_tcp",
               "--disable-heuristic", "rpcrdma_iwarp"]
REQUEST = mpa.MpaFrame(request=True, rev=2, flags=mpa.FLAG_CRC | mpa.FLAG_ENHANCED,
                       rtr=mpa.RtrBlock(ird=16, ord=16, write0=True, read0=True),
                       private_data=b"hello from initiator").to_bytes()
IA = P_RCV - len(REQUEST) - 1  # the initiator's ISN, so that Ia + 1 + L = P_RCV
IP_ = P_SEQ - 1


def seg(active: bool, seq: int, ack: int, flags: int, payload: bytes = b"") -> Segment:
    src = (A_MAC, A_IP, A_PORT) if active else (P_MAC, P_IP, P_PORT)
    dst = (P_MAC, P_IP, P_PORT) if active else (A_MAC, A_IP, A_PORT)
    return Segment(src_mac=src[0], dst_mac=dst[0], src_ip=src[1], dst_ip=dst[1],
                   sport=src[2], dport=dst[2], seq=seq, ack=ack, flags=flags,
                   payload=payload)


def conversation(rtr_op: str) -> list[Segment]:
    """Handshake and MPA request by hand (the CM's part), then both QPs (the NIC's)."""
    frames = [
        seg(True, IA, 0, SYN),
        seg(False, IP_, IA + 1, SYN | ACK),
        seg(True, IA + 1, IP_ + 1, ACK),
        seg(True, IA + 1, IP_ + 1, ACK, REQUEST),
        seg(False, P_SEQ, P_RCV, ACK),
    ]
    common = dict(gen=2, vlan=None, pcp=0, tos=0, ttl=64, snd_wnd=65535 << 2, snd_wscale=2,
                  rcv_wscale=2, mss=1460, rtr_op=rtr_op, ird=16, ord=16, mpa_rev=2, crc=True,
                  snd_markers=False, rcv_markers=False)
    passive = OffloadedQp(QpInit(conn=2, active=False, local_mac=P_MAC, remote_mac=A_MAC,
                                 local_ip=P_IP, remote_ip=A_IP, local_port=P_PORT,
                                 remote_port=A_PORT, snd_nxt=P_SEQ, rcv_nxt=P_RCV,
                                 **common))  # type: ignore[arg-type]
    active = OffloadedQp(QpInit(conn=1, active=True, local_mac=A_MAC, remote_mac=P_MAC,
                                local_ip=A_IP, remote_ip=P_IP, local_port=A_PORT,
                                remote_port=P_PORT, snd_nxt=P_RCV,
                                rcv_nxt=P_SEQ + len(REPLY), **common))  # type: ignore[arg-type]

    def exchange(src: OffloadedQp, dst: OffloadedQp) -> None:
        for tx in src.frames_to_send():
            frames.append(tx.segment)
            dst.receive(tx.segment, 0)

    passive.send_lsmm(REPLY, 0)
    exchange(passive, active)
    active.send_rtr(0)
    exchange(active, passive)
    exchange(passive, active)
    passive.post_send(b"a Send from the responder, long enough for tshark", 0)
    exchange(passive, active)
    exchange(active, passive)
    active.modify_qp("err", 0)
    exchange(active, passive)
    return frames


def tshark_fields(path: Path, *fields: str) -> list[list[str]]:
    args = ["tshark", "-r", str(path), *TSHARK_OPTS, "-T", "fields", "-E", "occurrence=a"]
    for field in fields:
        args += ["-e", field]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return [line.split("\t") for line in out.splitlines()]


def write(frames: list[Segment], path: Path) -> None:
    with path.open("wb") as stream:
        writer = PcapngWriter(stream)
        writer.add_interface("wire")
        for index, frame in enumerate(frames):
            writer.write(index * 1000, codec.encode(frame))


@pytest.mark.tshark
@pytest.mark.parametrize("rtr_op, opcode", [("read", "0x01"), ("write", "0x00")])
def test_tshark_decodes_rtr_and_send_with_good_crc(tmp_path: Path, rtr_op: str,
                                                   opcode: str) -> None:
    assert shutil.which("tshark") is not None, "tshark is a test dependency: install it"
    path = tmp_path / f"offload_{rtr_op}.pcapng"
    frames = conversation(rtr_op)
    write(frames, path)
    rows = tshark_fields(path, "frame.number", "tcp.flags.str", "iwarp_rdma.opcode")
    by_frame = {int(row[0]): row for row in rows}
    fpdu_rows = [row for row in rows if row[2]]
    # The RTR, the responder's zero-length Read Response to a read0 RTR (RFC 5040
    # section 5.3, opcode 0x02), then the Send.
    expected = [opcode, "0x02", "0x03"] if rtr_op == "read" else [opcode, "0x03"]
    assert [row[2] for row in fpdu_rows] == expected
    detail = subprocess.run(["tshark", "-r", str(path), *TSHARK_OPTS, "-O", "iwarp_mpa",
                             "-Y", "iwarp_mpa.fpdu"], capture_output=True, text=True,
                            check=True).stdout
    verdicts = [line.strip() for line in detail.splitlines() if "CRC check" in line]
    assert len(verdicts) == len(expected) and all("Good CRC32" in v for v in verdicts)
    assert by_frame[len(frames)][1].count("R") == 1  # the abortive close is a RST


@pytest.mark.tshark
def test_tshark_sees_the_lsmm_as_the_mpa_reply(tmp_path: Path) -> None:
    assert shutil.which("tshark") is not None, "tshark is a test dependency: install it"
    path = tmp_path / "offload_reply.pcapng"
    frames = conversation("read")
    write(frames, path)
    rows = tshark_fields(path, "frame.number", "iwarp_mpa.key.rep", "iwarp_mpa.pdlength",
                         "iwarp_mpa.privatedata")
    replies = [row for row in rows if row[1]]
    assert len(replies) == 1
    # PD_Length 11 = 4-byte RFC 6581 block + "welcome" (RFC 6581 section 5); read0 chosen: 0x4010
    assert replies[0][2] == "11" and replies[0][3] == "801040107765" "6c636f6d65"


@pytest.mark.tshark
def test_tshark_decodes_the_terminate_for_a_crc_error(tmp_path: Path) -> None:
    assert shutil.which("tshark") is not None, "tshark is a test dependency: install it"
    frames = conversation("read")[:-1]  # without the closing RST
    passive_ack = next(f for f in reversed(frames) if f.sport == P_PORT)
    active_last = next(f for f in reversed(frames) if f.sport == A_PORT)
    bad_ulpdu = bytes.fromhex("4143" "00000000" "00000000" "00000001" "00000000") + b"hi"
    bad = seg(True, active_last.seq + len(active_last.payload), passive_ack.seq + len(
        passive_ack.payload), ACK, mpa.frame_fpdu(bad_ulpdu, crc=0))
    frames.append(bad)
    # irdma_bld_terminate_hdr for IRDMA_AE_LLP_RECEIVED_MPA_CRC_ERROR, sent by the NIC
    term = build_terminate(Ae.LLP_RECEIVED_MPA_CRC_ERROR, bytes(bad.payload))
    frames.append(seg(False, bad.ack, bad.seq + len(bad.payload), ACK, mpa.frame_fpdu(term)))
    path = tmp_path / "terminate.pcapng"
    write(frames, path)
    rows = tshark_fields(path, "iwarp_rdma.opcode", "iwarp_ddp.qn", "iwarp_rdma.term_layer",
                         "iwarp_rdma.term_errcode",
                         "iwarp_rdma.term_hdrct_m", "iwarp_rdma.term_ddp_seg_len")
    [row] = [r for r in rows if r[0] == "0x07"]
    # RFC 5040 section 4.8: Layer 2 (LLP), EType 3 on the DDP_LLP row of irdma, error
    # code 2 (MPA CRC); M set, DDP Segment Length 0x0014 (the bad ULPDU_LENGTH, 20)
    assert row[1:] == ["2", "0x02", "0x02", "1", "0014"]
