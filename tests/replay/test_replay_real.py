"""Every claim ``mpa-emu replay`` makes on the real captures of pcaps/real, as the sidecars
demand.

Each sidecar's ``replays`` list was written from the capture's facts (decoded with
``struct`` by tools/real_capture_facts.py) and the kernel source (irdma_build_mpa_v1/v2,
irdma_accept, irdma_record_ird_ord, irdma_negotiate_mpa_v2_ird_ord, irdma_parse_mpa), each
entry with its ``why``. The fact tests below check, from the capture's bytes and the
sidecar facts and without the emulator, the premises those expectations rest on."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from helpers.replay_cli import PCAPS, replay
from scapy.layers.inet import IP, TCP
from scapy.utils import rdpcap

REAL = PCAPS / "real"
SIDECARS = sorted(REAL.glob("*.json"))


def _meta(name: str) -> dict[str, Any]:
    return json.loads((REAL / f"{name}.json").read_text())


def _cases() -> list[Any]:
    cases = []
    for sidecar in SIDECARS:
        meta = json.loads(sidecar.read_text())
        for i, run in enumerate(meta["replays"]):
            tag = "-".join(a.lstrip("-") for a in run["args"]) or "frames"
            cases.append(pytest.param(meta, run,
                                      id=f"{sidecar.stem}-{i}-{run['emulate']}-{tag}"))
    return cases


def test_every_real_capture_has_replays_for_both_hosts_and_modes() -> None:
    assert len(SIDECARS) == 5
    for sidecar in SIDECARS:
        runs = json.loads(sidecar.read_text())["replays"]
        seen = {(r["emulate"], "--semantic" in r["args"]) for r in runs}
        assert seen == {(ip, sem) for ip in ("192.0.2.1", "192.0.2.2")
                        for sem in (False, True)}, sidecar.name
        modes = {r["args"][r["args"].index("--checksums") + 1] for r in runs
                 if "--checksums" in r["args"]}
        assert modes == {"strict", "off"}, sidecar.name
        assert all(r["why"] for r in runs), sidecar.name


@pytest.mark.parametrize(("meta", "run"), _cases())
def test_real_capture_replays_as_its_sidecar_says(meta: dict[str, Any], run: dict[str, Any],
                                                  tmp_path: Path) -> None:
    expect = run["expect"]
    rc, text, report = replay(REAL / meta["capture"], "--emulate", run["emulate"],
                              *run["args"], tmp_path=tmp_path)
    assert rc == expect["exit"], text
    assert report["verdict"] == expect["verdict"], text
    head = text.splitlines()[0]
    if "--profile" in run["args"] and "auto" in run["args"]:
        assert head.startswith("PROFILES with the recorded outcome:"), text
    else:
        assert head.startswith("MATCH" if rc == 0 else "DIVERGENCE"), text
    frame = expect.get("first_divergence_frame")
    if frame is not None:
        assert report["first_divergence_frame"] == frame, text
        assert f"at frame {frame}" in head, text
        first = report["first_divergence"]
        assert first.startswith(f"frame {frame}:"), first
        for word in expect.get("names", []):
            assert word in f"{head}\n{first}", (word, first)
        if "frame_is" in expect:
            conn, what = expect["frame_is"].split(".")
            assert meta["connections"][int(conn)]["mpa"][what]["frame"] == frame
    for word in expect.get("text", []):
        assert word in text, (word, text)
    if rc == 0 and "auto" not in run["args"]:
        assert not report["semantic"]["divergences"], text


# ---- the premises of the expectations, from the bytes and the sidecar facts ----------

def _sources(name: str) -> list[str]:
    return [p[IP].src for p in rdpcap(str(REAL / f"{name}.pcap"))]


@pytest.mark.parametrize("name", [s.stem for s in SIDECARS])
def test_strict_drops_only_what_the_client_sent(name: str) -> None:
    # Expected frame 2 "not sent" under --checksums strict rests on frame 1 (the client's
    # SYN) being an offload artefact; an unchanged result when emulating the client rests on
    # the server's frames all carrying complete checksums.
    meta = _meta(name)
    src = _sources(name)
    partial = meta["checksums"]["offload_partial"]
    assert 1 in partial and src[0] == "192.0.2.1"
    assert all(src[n - 1] == "192.0.2.1" for n in partial)


def test_the_non_mpa_payload_fails_irdma_parse_mpa_on_its_length() -> None:
    # irdma_parse_mpa checks, in order: at least 20 bytes, PD_Length <= 512
    # (IETF_MAX_PRIV_DATA_LEN, else -EOVERFLOW), the revision, then the key.
    packets = rdpcap(str(REAL / "real_second_non_mpa_conn.pcap"))
    payload = bytes(packets[17][TCP].payload)
    assert packets[17][TCP].sport == 40002 and len(payload) == 57
    assert not payload.startswith(b"MPA ID Req Frame")
    (pd_length,) = struct.unpack_from("!H", payload, 18)
    assert pd_length == 25455 > 512
    answer = bytes(packets[19][TCP].payload)
    assert packets[19][IP].src == "192.0.2.2" and len(answer) == 38
    assert _meta("real_second_non_mpa_conn")["connections"][1]["mpa"] is None


@pytest.mark.parametrize("name", ["real_v1_crc_off_zero_crc", "real_peer_v1_no_crc"])
def test_crc_off_captures_send_zero_crc_fields_where_irdma_would_check(name: str) -> None:
    # irdma always sets C, so with it CRC is in use (RFC 5044 section 7.1) and the first
    # client FPDU (frame 8) fails with its zero CRC field.
    conn = _meta(name)["connections"][0]
    mpa = conn["mpa"]
    assert mpa["request"]["C"] is False and mpa["reply"]["C"] is False
    assert mpa["request"]["rev"] == 1 and mpa["request"]["frame"] == 4
    assert mpa["reply"]["frame"] == 6
    first = conn["fpdus"][0]
    assert (first["frame"], first["from"], first["crc"]) == (8, "client", "zero")


def test_peer_v2_offers_read_only_with_ird_ord_16() -> None:
    # irdma_build_mpa_v2 offers WRITE0|READ0 in every request and irdma_accept replies with
    # the node's ird_size (max_hw_ird): both differ from this recording's 16/16 READ0.
    mpa = _meta("real_peer_v2")["connections"][0]["mpa"]
    for side in ("request", "reply"):
        block = mpa[side]["rfc6581"]
        assert (block["ird"], block["ord"], block["peer_to_peer"]) == (16, 16, True)
        assert (block["write_rtr"], block["read_rtr"]) == (False, True)
    assert mpa["request"]["rev"] == 2


@pytest.mark.parametrize("name", ["real_v1_crc_on", "real_second_non_mpa_conn"])
def test_crc_on_captures_set_c_both_ways_with_correct_crcs(name: str) -> None:
    conn = _meta(name)["connections"][0]
    assert conn["mpa"]["request"]["C"] and conn["mpa"]["reply"]["C"]
    assert conn["mpa"]["request"]["rev"] == 1
    assert {f["crc"] for f in conn["fpdus"]} == {"correct"}
