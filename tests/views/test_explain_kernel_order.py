"""explain names the cause the receiving stack's own code reaches first.

Each capture's MPA frame breaks two of a stack's checks; the expected cause is the one the
kernel function tests first:

- irdma_parse_mpa (irdma/cm.c): ``priv_data_len > IETF_MAX_PRIV_DATA_LEN`` ("CM: large
  pri_data") comes before the revision check and long before ``priv_data_len +
  mpa_hdr_len > len`` (the frame split over segments) and ``len > IRDMA_MAX_CM_BUF``.
- siw_recv_mpa_rr (siw/siw_cm.c) reads the frame first: ``pd_len > MPA_MAX_PRIVDATA``,
  then "peer sent extra data"; only then siw_proc_mpareq checks the revision
  (``version > MPA_REVISION_2``), then an enhanced request shorter than ``struct
  mpa_v2_data``, then the M flag.
- process_mpa_request (cxgb4/cm.c): ``mpa->revision > mpa_rev`` ("MPA version mismatch")
  before ``plen > MPA_MAX_PRIVATE_DATA``.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from helpers.inspect_builders import Conversation, write_pcap

from mpa_emu.judge.profile import parse_profiles
from mpa_emu.views.explanation import explain_connection
from mpa_emu.views.inspection import inspect_capture

KEY_REQ = b"MPA ID Req Frame"


def _request(flags: int, rev: int, pd_length: int, body: bytes) -> bytes:
    return KEY_REQ + struct.pack("!BBH", flags, rev, pd_length) + body


def _explain(tmp_path: Path, server_stack: str, *segments: bytes) -> tuple[str, str, str]:
    conv = Conversation().handshake()
    for seg in segments:
        conv.client_sends(seg, flags="PA")
    conv.server_sends(b"", flags="R")
    path = write_pcap(tmp_path / "c.pcap", conv)
    report = inspect_capture(path, profiles=parse_profiles(
        [f"192.168.10.2={server_stack}", "192.168.10.1=linux-userspace"]))
    e = explain_connection(report.connections[0])
    return e.cause, e.summary, e.fix


def test_irdma_large_pri_data_before_split_frame(tmp_path: Path) -> None:
    # PD_Length 65535 in a 20-byte segment: over 512 and split; irdma_parse_mpa returns at
    # "CM: large pri_data" before it compares the frame with the segment.
    cause, summary, fix = _explain(tmp_path, "irdma", _request(0, 1, 65535, b""))
    assert cause == "pd-over-limit"
    assert "PD_Length 65535" in summary and "irdma_parse_mpa" in summary
    assert "MSS" not in fix


def test_irdma_large_pri_data_before_revision(tmp_path: Path) -> None:
    cause, summary, _ = _explain(tmp_path, "irdma", _request(0, 3, 600, b"\x00" * 600))
    assert cause == "pd-over-limit", summary


def test_irdma_revision_before_split_frame(tmp_path: Path) -> None:
    # rev 3 with PD_Length 40 of which only 8 bytes are in the segment.
    cause, summary, _ = _explain(tmp_path, "irdma", _request(0, 3, 40, b"\x00" * 8),
                                 b"\x00" * 32)
    assert cause == "revision", summary


def test_siw_extra_bytes_before_revision(tmp_path: Path) -> None:
    # siw_recv_mpa_rr finds the 4 bytes past a rev 3 frame before siw_proc_mpareq reads
    # its revision: the first refusal (the one explain names) is the extra bytes.
    conv = Conversation().handshake().client_sends(_request(0, 3, 0, b"") + b"XXXX",
                                                   flags="PA")
    conv.server_sends(b"", flags="R")
    path = write_pcap(tmp_path / "c.pcap", conv)
    report = inspect_capture(path, profiles=parse_profiles(["192.168.10.2=siw"]))
    refusals = report.connections[0].refusals
    assert [r.rule for r in refusals] == ["extra-bytes", "revision"]
    assert refusals[0].fn == "siw_recv_mpa_rr"


def test_siw_large_pd_before_revision(tmp_path: Path) -> None:
    cause, summary, _ = _explain(tmp_path, "siw", _request(0, 3, 300, b"\x00" * 300))
    assert cause == "pd-over-limit", summary
    assert "MPA_MAX_PRIVDATA" in summary


def test_siw_short_enhanced_block_before_markers(tmp_path: Path) -> None:
    # M and S set, rev 2, PD_Length 2: siw_proc_mpareq rejects the short block first.
    cause, summary, _ = _explain(tmp_path, "siw", _request(0x90, 2, 2, b"\x00\x00"))
    assert cause == "revision", summary
    assert "enhanced flag with fewer than 4 bytes" in summary


@pytest.mark.parametrize("pd", [300, 400])
def test_cxgb4_revision_before_pd_limit(tmp_path: Path, pd: int) -> None:
    cause, summary, _ = _explain(tmp_path, "cxgb4", _request(0, 3, pd, b"\x00" * pd))
    assert cause == "revision", summary
    assert "mpa_rev" in summary


def test_irdma_large_pri_data_log_line(tmp_path: Path) -> None:
    # irdma_parse_mpa: ibdev_dbg "CM: large pri_data %d" with the PD_Length read.
    conv = Conversation().handshake().client_sends(_request(0, 1, 65535, b""), flags="PA")
    conv.server_sends(b"", flags="R")
    path = write_pcap(tmp_path / "c.pcap", conv)
    report = inspect_capture(path, profiles=parse_profiles(["192.168.10.2=irdma"]))
    e = explain_connection(report.connections[0])
    assert "CM: large pri_data 65535" in e.log
