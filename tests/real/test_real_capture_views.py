"""inspect, diagram and judge on the real captures of pcaps/real: every claim checked
against the sidecars (decoded from the frames' bytes by tools/real_capture_facts.py,
checked against tshark by test_real_captures.py), never against mpa_emu's own output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mpa_emu.capture.checksums import Mode
from mpa_emu.cli import main
from mpa_emu.views.diagram import from_capture
from mpa_emu.views.inspection import ConnectionReport, inspect_capture

REAL = Path(__file__).resolve().parents[2] / "pcaps" / "real"
CAPTURES = sorted(p.stem for p in REAL.glob("*.pcap"))
CRC_WORDS = {"correct": "good", "zero": "zero", "wrong": "bad"}


def sidecar(name: str) -> dict[str, Any]:
    return json.loads((REAL / f"{name}.json").read_text())  # type: ignore[no-any-return]


def pairs(name: str) -> list[tuple[dict[str, Any], ConnectionReport]]:
    facts = sidecar(name)
    report = inspect_capture(REAL / f"{name}.pcap")
    assert len(report.connections) == len(facts["connections"])
    return list(zip(facts["connections"], report.connections, strict=True))


def test_there_are_real_captures() -> None:
    assert len(CAPTURES) >= 5


@pytest.mark.parametrize("name", CAPTURES)
def test_offload_reading_notes_exactly_the_partial_sums_and_finds_no_error(
        name: str, capsys: pytest.CaptureFixture[str]) -> None:
    facts = sidecar(name)
    assert main(["inspect", str(REAL / f"{name}.pcap")]) == (1 if facts["checksums"]["bad"]
                                                              else 0)
    out = capsys.readouterr().out
    assert "ERROR" not in out and "checksums offload" in out
    report = inspect_capture(REAL / f"{name}.pcap")
    noted = 0
    for conn in report.connections:
        for f in conn.findings:
            if "TX checksum offload: not verified" in f.text:
                noted += int(f.text.split("(")[1].split(" frame")[0])
    assert noted == len(facts["checksums"]["offload_partial"])


@pytest.mark.parametrize("name", CAPTURES)
def test_strict_reading_flags_exactly_the_partial_sums(name: str) -> None:
    report = inspect_capture(REAL / f"{name}.pcap", Mode.STRICT)
    flagged = sorted(f.frame for c in report.connections for f in c.findings
                     if f.text.startswith("bad TCP checksum") and f.frame is not None)
    assert flagged == sorted(sidecar(name)["checksums"]["offload_partial"])


@pytest.mark.parametrize("name", CAPTURES)
def test_crc_verdicts_only_where_negotiated(name: str) -> None:
    for facts, conn in pairs(name):
        if facts["mpa"] is None:
            assert conn.fpdu_list == []
            continue
        assert conn.crc is facts["mpa"]["crc_in_use"]
        listed = [(f.frame, f.side) for f in conn.fpdu_list]
        assert listed == [(f["first_frame"], f["from"]) for f in facts["fpdus"]]
        for want, got in zip(facts["fpdus"], conn.fpdu_list, strict=True):
            assert got.crc == (CRC_WORDS[want["crc"]] if want["crc_in_use"] else None)
            assert (got.ulpdu_length, got.last, got.opcode) == (
                want["ulpdu_length"], want["last"], want["opcode"])
            if not want["tagged"]:
                assert (got.qn, got.msn, got.mo) == (want["qn"], want["msn"], want["mo"])


@pytest.mark.parametrize("name", CAPTURES)
def test_ending_lists_every_fin_and_rst_and_data_after_fin(name: str) -> None:
    for facts, conn in pairs(name):
        for fin in facts["fins"]:
            assert f"FIN from the {fin['from']} (frame {fin['frame']})" in conn.ended
        for rst in facts["rsts"]:
            assert f"RST from the {rst['from']} (frame {rst['frame']})" in conn.ended
        after = facts.get("data_after_fin", [])
        if after:
            total = sum(a["bytes"] for a in after)
            side = after[0]["from"]
            assert f"{side} data after the" in conn.ended and f"{total} bytes" in conn.ended
        else:
            assert "data after" not in conn.ended


@pytest.mark.parametrize("name", CAPTURES)
def test_rtr_only_for_v2_with_the_block(name: str) -> None:
    for facts, conn in pairs(name):
        mpa = facts["mpa"]
        if mpa is None or mpa["request"]["rev"] == 1:
            assert conn.rtr == ""
        else:
            first = next(f for f in facts["fpdus"] if f["from"] == "client")
            assert conn.rtr.startswith(f"frame {first['first_frame']}: ")


@pytest.mark.parametrize("name", CAPTURES)
def test_fingerprint_names_the_linux_syn_options(name: str) -> None:
    for facts, conn in pairs(name):
        assert facts["syn_options"]["client"][:4] == ["MSS=1460", "SACK_PERM", "TS", "NOP"]
        assert conn.fingerprints[0].startswith(
            "client: Linux-like TCP stack (SYN options MSS, SACK, TS, NOP, WS;")


@pytest.mark.parametrize("name", CAPTURES)
def test_diagram_decodes_every_frame_and_gives_crc_only_where_negotiated(name: str) -> None:
    facts = sidecar(name)
    text = from_capture(REAL / f"{name}.pcap").text()
    assert "not decoded" not in text
    n = len(facts["checksums"]["offload_partial"])
    assert f"{facts['captured_on']}: TX checksum offload: not verified ({n} frames" in text
    wrong = [f for c in facts["connections"] if c["mpa"] for f in c["fpdus"]
             if f["crc_in_use"] and f["crc"] != "correct"]
    verdicts = text.count(" bad CRC") + text.count(" zero CRC")
    assert verdicts == len(wrong)


@pytest.mark.tshark
def test_judge_agrees_with_inspect_on_the_offload_capture(
        capsys: pytest.CaptureFixture[str]) -> None:
    name = "real_v1_crc_off_zero_crc"
    facts = sidecar(name)
    path = str(REAL / f"{name}.pcap")
    assert main(["judge", path, "--no-rpcrdma", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["checksums"]["offload"] == {
        facts["captured_on"]: facts["checksums"]["offload_partial"]}
    assert report["problems"] == []
    assert all(v["status"] == "unchecked" for v in report["crc"])
    assert main(["judge", path, "--no-rpcrdma", "--checksums", "strict"]) == 1
    assert main(["inspect", path, "--checksums", "strict"]) == 1
