"""inspect, judge (tshark) and explain agree on every connection of every capture.

For each capture in pcaps/ (pcaps/real and its siw/ included) and the hand-made
third-party-like captures (and the SMB Direct one cut at 80, 128 and 200 bytes by
``editcap -s``), the three commands' JSON outputs are read connection by
connection (tshark's ``tcp.stream`` numbers say which connection a judged frame belongs
to): where inspect reports an error, or tshark (judge) a problem on one of the
connection's frames, explain's verdict is not "ok"; every error inspect reports names a
cause of explain's catalogue.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import falloc_captures, real_like_captures, third_party_captures

from mpa_emu.cli import main
from mpa_emu.judge.catalogue import CAUSES

ROOT = Path(__file__).resolve().parents[2]
RECORDED = sorted(p for p in (ROOT / "pcaps").rglob("*.pcap*") if "golden" not in p.parts)
BUILT: dict[str, Callable[[Path], Path]] = {
    "ddp_version_zero": third_party_captures.ddp_version_zero,
    "siw_terminate": third_party_captures.siw_terminate,
    "smb_direct_siw": third_party_captures.smb_direct_siw,
    "snapped_v1": third_party_captures.snapped_v1,
    "linux_v1_offload": real_like_captures.linux_v1_offload,
    "v2_crc_errors": real_like_captures.v2_crc_errors,
    "falloc": falloc_captures.falloc,
}


def _cut(snap: int) -> Callable[[Path], Path]:
    def build(path: Path) -> Path:
        whole = falloc_captures.falloc(path.with_name("whole.pcap"))
        subprocess.run(["editcap", "-s", str(snap), str(whole), str(path)], check=True)
        return path
    return build


if shutil.which("editcap") is not None:
    BUILT.update({f"falloc_cut_{snap}": _cut(snap) for snap in (80, 128, 200)})

pytestmark = pytest.mark.skipif(shutil.which("tshark") is None, reason="needs tshark")


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    main(list(argv))
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def _streams(path: Path) -> dict[int, int]:
    rows = subprocess.run(["tshark", "-n", "-r", str(path), "-T", "fields", "-e",
                           "frame.number", "-e", "tcp.stream"], capture_output=True,
                          text=True, check=True).stdout.splitlines()
    out = {}
    for row in rows:
        number, _, stream = row.partition("\t")
        if stream:
            out[int(number)] = int(stream)
    return out


def check_agreement(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The assertion of the module docstring, for one capture."""
    inspected = _json(capsys, "inspect", "--json", str(path))
    judged = _json(capsys, "judge", "--json", str(path))
    explained = _json(capsys, "explain", "--json", "-", str(path))
    verdicts = {e["index"]: e for e in explained["connections"]}
    streams = _streams(path)
    judged_frames: dict[int, list[str]] = {}
    for problem in judged["problems"]:
        m = re.match(r"frame (\d+):", problem)
        if m:
            judged_frames.setdefault(int(m.group(1)), []).append(problem)
    for conn in inspected["connections"]:
        e = verdicts[conn["index"]]
        errors = [f for f in conn["findings"] if f["severity"] == "error"]
        for f in errors:
            assert f["rule"] in CAUSES, f"{path.name}: inspect error without a cause: {f}"
        stream = streams.get(conn["first_frame"])
        tshark = [p for n, ps in judged_frames.items()
                  if streams.get(n) == stream and conn["first_frame"] <= n
                  <= conn["last_frame"] for p in ps]
        where = f"{path.name} connection {conn['index']}"
        if errors or tshark:
            assert e["verdict"] != "ok", (f"{where}: explain says ok, inspect "
                                          f"{[f['text'] for f in errors]}, tshark {tshark}")
            assert e["cause"] in CAUSES and e["cause"] not in ("ok", "not-iwarp"), where


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_recorded_captures_agree(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    check_agreement(path, capsys)


@pytest.mark.parametrize("name", sorted(BUILT))
def test_built_captures_agree(name: str, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    check_agreement(BUILT[name](tmp_path / f"{name}.pcap"), capsys)


def test_ddp_version_zero_is_not_ok(tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    # The capture: DV 0 in frame 6, RV 0 in frame 7 (RFC 5041 / 5040 section 4.2).
    path = third_party_captures.ddp_version_zero(tmp_path / "dv0.pcap")
    e = _json(capsys, "explain", "--json", "-", str(path))["connections"][0]
    assert (e["verdict"], e["cause"]) == ("failed", "ddp-version")
    assert e["evidence"] == [third_party_captures.VERSION_FRAMES["dv0"]]
    assert any("RDMAP version 0" in n for n in e["notes"])
    assert main(["explain", str(path)]) == 1


def test_reset_after_established_is_a_warning(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    # An established v1 connection whose server resets it without any FIN (an address
    # removal tears connections down so).
    from helpers.inspect_builders import Conversation, write_pcap
    req = b"MPA ID Req Frame" + bytes.fromhex("00010000")
    rep = b"MPA ID Rep Frame" + bytes.fromhex("00010000")
    conv = Conversation().handshake().client_sends(req, "PA").server_sends(rep, "PA")
    conv.server_sends(b"", "R")
    path = write_pcap(tmp_path / "rst.pcap", conv)
    e = _json(capsys, "explain", "--json", "-", str(path))["connections"][0]
    assert (e["verdict"], e["cause"]) == ("warning", "reset-established")
    assert e["evidence"] == [5, 6]
    assert "frame 6" in e["summary"]
