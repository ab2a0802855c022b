"""The [MS-SMBD] 6.1 IRD/ORD negotiate header decoded the same in every view.

The header is 8 bytes, IRD then ORD; Linux SMB Direct writes each big-endian
(``cpu_to_be32`` in ``_smbd_get_connection``) and reads a little-endian one as written by
"broken clients (old cifs.ko)" (``smbd_conn_upcall``). The test captures carry IRD 32
(SMBD_CM_RESPONDER_RESOURCES) and ORD 1 (initiator_depth), the bytes written here.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest
from helpers.inspect_builders import write_pcap
from helpers.stack_captures import SMBD_IRD, SMBD_ORD, siw_smb_direct
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap

from mpa_emu.capture.tshark import Tshark
from mpa_emu.cli import main
from mpa_emu.frames import MPAReply, MPARequest, SMBDIrdOrd
from mpa_emu.views.describe import mpa_summary
from mpa_emu.wire.private_data import LegacyIrdOrd, decode_legacy, encode_legacy

BIG = struct.pack(">II", 32, 1)
LITTLE = struct.pack("<II", 32, 1)


def test_decode_reads_big_endian_first_then_little() -> None:
    assert decode_legacy(BIG) == LegacyIrdOrd(32, 1, "big")
    assert decode_legacy(LITTLE) == LegacyIrdOrd(32, 1, "little")
    assert decode_legacy(LITTLE).broken  # type: ignore[union-attr]
    assert encode_legacy(32, 1) == BIG and encode_legacy(32, 1, "little") == LITTLE


@pytest.mark.parametrize("data", [b"hello!!!", b"\x00" * 8, BIG[:7], BIG + b"\x00"])
def test_other_bytes_are_not_the_header(data: bytes) -> None:
    assert decode_legacy(data) is None


def _capture(tmp_path: Path, order: str = ">") -> Path:
    return write_pcap(tmp_path / "smbd.pcap", siw_smb_direct(legacy_order=order))


def test_text_json_and_html_say_the_same(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = _capture(tmp_path)
    wanted = f"MS-SMBD legacy IRD/ORD: IRD {SMBD_IRD}, ORD {SMBD_ORD}"
    assert main(["inspect", str(path)]) == 0
    text = capsys.readouterr().out
    assert text.count(f"= {wanted}") == 2  # request and reply
    assert main(["inspect", "--json", str(path)]) == 0
    conn = json.loads(capsys.readouterr().out)["connections"][0]
    for frame in ("request", "reply"):
        assert conn[frame]["legacy"] == {"ird": SMBD_IRD, "ord": SMBD_ORD,
                                         "byte_order": "big"}
        assert conn[frame]["private_data"] == BIG.hex()
    html = tmp_path / "r.html"
    assert main(["inspect", str(path), "--html", str(html)]) == 0
    capsys.readouterr()
    page = html.read_text()
    assert page.count(wanted) >= 4  # the story of both frames, and their frame fields
    assert main(["diagram", str(path)]) == 0
    assert f"MS-SMBD legacy IRD {SMBD_IRD} ORD {SMBD_ORD}" in capsys.readouterr().out


def test_little_endian_header_is_named_broken(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--json", str(_capture(tmp_path, "<"))]) == 0
    conn = json.loads(capsys.readouterr().out)["connections"][0]
    assert conn["request"]["legacy"] == {"ird": 32, "ord": 1, "byte_order": "little"}
    request = rdpcap(str(tmp_path / "smbd.pcap"))[3]
    assert mpa_summary(bytes(request.payload.payload.payload)).endswith(
        "MS-SMBD legacy IRD 32 ORD 1 (LE)")


def test_scapy_layers_read_and_build_the_header(tmp_path: Path) -> None:
    frames = rdpcap(str(_capture(tmp_path)))
    request = Ether(bytes(frames[3]))[MPARequest]
    reply = Ether(bytes(frames[5]))[MPAReply]
    assert request.legacy == LegacyIrdOrd(32, 1, "big")
    assert reply.legacy == LegacyIrdOrd(32, 1, "big")
    assert "MS-SMBD legacy IRD/ORD: IRD 32, ORD 1" in request.summary()
    assert bytes(SMBDIrdOrd(ird=32, ord=1)) == BIG
    assert SMBDIrdOrd(BIG).ird == 32 and SMBDIrdOrd(BIG).ord == 1


def _plugin() -> str:
    return str(Path(__file__).resolve().parents[2] / "mpa_emu" / "wireshark" / "mpa_v2.lua")


@pytest.mark.tshark
def test_lua_plugin_gives_wireshark_46_names_and_keeps_the_old_ones(tmp_path: Path) -> None:
    judge = Tshark(extra_options=("-X", f"lua_script:{_plugin()}"))
    version = re.search(r"(\d+)\.(\d+)", judge.version())
    assert version is not None
    names = ["iwarp_mpa.legacy.ird", "iwarp_mpa.legacy.ord", "iwarp_mpa.enhanced.ird",
             "iwarp_mpa.enhanced.ord", "iwarp_mpa.enhanced.a", "mpa_v2.ird", "mpa_v2.ord"]
    rows = judge.field_by_frame(_capture(tmp_path), names, "iwarp_mpa.legacy")
    assert sorted(rows) == [4, 6]
    for row in rows.values():
        assert row["iwarp_mpa.legacy.ird"] == ["32"]
        assert row["iwarp_mpa.legacy.ord"] == ["1"]
        assert row["iwarp_mpa.enhanced.ird"] == ["32"] == row["mpa_v2.ird"]
        assert row["iwarp_mpa.enhanced.ord"] == ["1"] == row["mpa_v2.ord"]


@pytest.mark.tshark
def test_lua_plugin_flags_a_little_endian_header(tmp_path: Path) -> None:
    judge = Tshark(extra_options=("-X", f"lua_script:{_plugin()}"))
    rows = judge.field_by_frame(_capture(tmp_path, "<"), ["iwarp_mpa.legacy.ird",
                                                          "iwarp_mpa.legacy.ord"],
                                "iwarp_mpa.broken_le_legacy")
    assert sorted(rows) == [4, 6]
    assert all(r["iwarp_mpa.legacy.ird"] == ["32"] and r["iwarp_mpa.legacy.ord"] == ["1"]
               for r in rows.values())
