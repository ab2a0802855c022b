"""The real captures in pcaps/real against their sidecars, with tshark 4.0 as the
independent decoder (wireshark-mpa field names) and a struct decode of the TCP checksum
field. Nothing here asks mpa_emu what the captures contain."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

REAL = Path(__file__).resolve().parents[2] / "pcaps" / "real"
NAMES = sorted(p.stem for p in REAL.glob("*.pcap"))
OPTS = ["-o", "tcp.try_heuristic_first:TRUE", "--enable-heuristic", "iwarp_mpa_tcp",
        "--disable-heuristic", "rpcrdma_iwarp"]
FIELDS = ["frame.number", "ip.src", "tcp.srcport", "tcp.flags.fin", "tcp.flags.reset",
          "tcp.len", "iwarp_mpa.key.req", "iwarp_mpa.key.rep", "iwarp_mpa.marker_flag",
          "iwarp_mpa.crc_flag", "iwarp_mpa.rej_flag", "iwarp_mpa.rev",
          "iwarp_mpa.pdlength", "iwarp_mpa.privatedata", "iwarp_mpa.ulpdulength",
          "iwarp_mpa.crc", "iwarp_mpa.crc_check", "iwarp_rdma.opcode", "tcp.options.mss_val",
          "tcp.options.sack_perm", "tcp.options.timestamp.tsval", "tcp.options.wscale.shift"]

pytestmark = [pytest.mark.tshark,
              pytest.mark.skipif(shutil.which("tshark") is None, reason="needs tshark")]


def test_the_five_captures_are_present() -> None:
    assert NAMES == ["real_peer_v1_no_crc", "real_peer_v2", "real_second_non_mpa_conn",
                     "real_v1_crc_off_zero_crc", "real_v1_crc_on"]


def sidecar(name: str) -> dict[str, Any]:
    return json.loads((REAL / f"{name}.json").read_text())


def tshark_rows(name: str, *extra: str, fields: list[str] = FIELDS) -> list[dict[str, str]]:
    cmd = ["tshark", "-r", str(REAL / f"{name}.pcap"), *OPTS, *extra, "-T", "fields",
           "-E", "occurrence=a", "-E", "aggregator=;", "-E", "separator=\t"]
    for field in fields:
        cmd += ["-e", field]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60).stdout
    return [dict(zip(fields, line.split("\t"), strict=True)) for line in out.splitlines()]


def by_frame(name: str) -> dict[int, dict[str, str]]:
    return {int(r["frame.number"]): r for r in tshark_rows(name)}


def flag(value: str) -> bool:
    return value in ("1", "True")


@pytest.mark.parametrize("name", NAMES)
def test_mpa_request_and_reply_as_tshark_decodes_them(name: str) -> None:
    rows = by_frame(name)
    side = sidecar(name)
    assert len(rows) == side["frames"]
    mpa_conns = [c for c in side["connections"] if c["mpa"]]
    assert mpa_conns, "every real capture has an MPA connection"
    requests = [n for n, r in rows.items() if r["iwarp_mpa.key.req"]]
    replies = [n for n, r in rows.items() if r["iwarp_mpa.key.rep"]]
    assert requests == [c["mpa"]["request"]["frame"] for c in mpa_conns]
    assert replies == [c["mpa"]["reply"]["frame"] for c in mpa_conns]
    for conn in mpa_conns:
        for kind in ("request", "reply"):
            want = conn["mpa"][kind]
            got = rows[want["frame"]]
            assert flag(got["iwarp_mpa.marker_flag"]) == want["M"]
            assert flag(got["iwarp_mpa.crc_flag"]) == want["C"]
            assert flag(got["iwarp_mpa.rej_flag"]) == want["R"]
            assert int(got["iwarp_mpa.rev"]) == want["rev"]
            assert int(got["iwarp_mpa.pdlength"]) == want["pd_length"]
            assert got["iwarp_mpa.privatedata"].replace(":", "") == want["private_data_hex"]
            assert want["private_data_hex"].endswith(want["private_data_text"].encode().hex())


@pytest.mark.parametrize("name", NAMES)
def test_fpdus_as_tshark_decodes_them(name: str) -> None:
    rows = by_frame(name)
    want = [f for c in sidecar(name)["connections"] if c["mpa"] for f in c["fpdus"]]
    got = []
    for number, row in rows.items():
        lengths = [x for x in row["iwarp_mpa.ulpdulength"].split(";") if x]
        opcodes = [x for x in row["iwarp_rdma.opcode"].split(";") if x]
        crcs = [x for x in row["iwarp_mpa.crc"].split(";") if x]
        checked = [x for x in row["iwarp_mpa.crc_check"].split(";") if x]
        for i, length in enumerate(lengths):
            got.append((number, int(length), int(opcodes[i], 0),
                        "checked" if checked else "shown", int((checked or crcs)[i], 0)))
    # The sidecar holds the CRC32c value (stored little-endian on the wire); tshark
    # shows the same four bytes read big-endian (wireshark-mpa notes, FPDU CRC byte order).
    expected = [(f["frame"], f["ulpdu_length"], f["opcode"],
                 "checked" if f["crc_in_use"] else "shown",
                 int.from_bytes(int(f["crc_hex"], 16).to_bytes(4, "little"), "big"))
                for f in want]
    assert got == expected


@pytest.mark.parametrize("name", NAMES)
def test_crc_values_agree_with_negotiation(name: str) -> None:
    for conn in sidecar(name)["connections"]:
        if not conn["mpa"]:
            continue
        in_use = conn["mpa"]["request"]["C"] or conn["mpa"]["reply"]["C"]  # RFC 5044 7.1
        assert conn["mpa"]["crc_in_use"] == in_use
        for unit in conn["fpdus"]:
            assert unit["crc"] == ("correct" if in_use else "zero")


@pytest.mark.parametrize("name", NAMES)
def test_tshark_finds_good_crc32c_on_every_crc_fpdu(name: str) -> None:
    side = sidecar(name)
    if not any(c["mpa"] and c["mpa"]["crc_in_use"] for c in side["connections"]):
        return
    cmd = ["tshark", "-r", str(REAL / f"{name}.pcap"), *OPTS, "-O", "iwarp_mpa"]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60).stdout
    count = sum(len(c["fpdus"]) for c in side["connections"] if c["mpa"])
    assert text.count("Good CRC32") == count
    assert "Bad CRC32" not in text


@pytest.mark.parametrize("name", NAMES)
def test_fin_rst_and_data_after_fin(name: str) -> None:
    rows = by_frame(name)
    side = sidecar(name)
    client_ip = side["captured_on"]

    def who(row: dict[str, str]) -> str:
        return "client" if row["ip.src"] == client_ip else "server"

    fins = [{"frame": n, "from": who(r)} for n, r in rows.items() if flag(r["tcp.flags.fin"])]
    rsts = [{"frame": n, "from": who(r)} for n, r in rows.items()
            if flag(r["tcp.flags.reset"])]
    assert fins == [f for c in side["connections"] for f in c["fins"]]
    assert rsts == [r for c in side["connections"] for r in c["rsts"]]
    for conn in side["connections"]:
        for late in conn["data_after_fin"]:
            row = rows[late["frame"]]
            assert int(row["tcp.len"]) == late["bytes"]
            fin_frames = [f["frame"] for f in conn["fins"] if f["from"] != late["from"]]
            assert fin_frames and min(fin_frames) < late["frame"]


@pytest.mark.parametrize("name", NAMES)
def test_syn_options_are_linux_defaults(name: str) -> None:
    rows = by_frame(name)
    side = sidecar(name)
    syns = [r for r in rows.values() if r["tcp.options.mss_val"]]
    assert len(syns) == 2 * len(side["connections"])
    for row in syns:
        assert row["tcp.options.mss_val"] == "1460"
        assert row["tcp.options.sack_perm"] and row["tcp.options.timestamp.tsval"]
        assert row["tcp.options.wscale.shift"]
    for conn in side["connections"]:
        for end in ("client", "server"):
            assert conn["syn_options"][end] == ["MSS=1460", "SACK_PERM", "TS", "NOP", "WS=10"]


def ones_sum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f">{len(data) // 2}H", data))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def frames_of(path: Path) -> list[bytes]:
    raw = path.read_bytes()
    out, offset = [], 24
    while offset < len(raw):
        caplen = struct.unpack_from("<I", raw, offset + 8)[0]
        out.append(raw[offset + 16:offset + 16 + caplen])
        offset += 16 + caplen
    return out


@pytest.mark.parametrize("name", NAMES)
def test_offload_frames_carry_the_pseudo_header_partial_sum(name: str) -> None:
    side = sidecar(name)
    partial = side["checksums"]["offload_partial"]
    good = side["checksums"]["good"]
    assert partial and side["checksums"]["bad"] == []
    frames = frames_of(REAL / f"{name}.pcap")
    assert sorted(partial + good) == list(range(1, len(frames) + 1))
    for number, frame in enumerate(frames, 1):
        ip = frame[14:]
        total = struct.unpack_from(">H", ip, 2)[0]
        tcp = ip[(ip[0] & 0x0F) * 4:total]
        pseudo = ip[12:20] + struct.pack(">BBH", 0, 6, len(tcp))
        field = struct.unpack_from(">H", tcp, 16)[0]
        if number in partial:
            # RFC 793 pseudo header, summed but not complemented: what the stack leaves
            # for the NIC to finish (CHECKSUM_PARTIAL); only the capturing host sends it.
            assert field == ones_sum(pseudo), number
            assert ip[12:16] == bytes(map(int, side["captured_on"].split(".")))
        else:
            assert ones_sum(pseudo + tcp) == 0xFFFF, number


@pytest.mark.parametrize("name", NAMES)
def test_tshark_checksum_status_matches_the_offload_frames(name: str) -> None:
    fields = ["frame.number", "tcp.checksum.status"]
    rows = tshark_rows(name, "-o", "tcp.check_checksum:TRUE", fields=fields)
    bad = [int(r["frame.number"]) for r in rows if r["tcp.checksum.status"] == "0"]
    good = [int(r["frame.number"]) for r in rows if r["tcp.checksum.status"] == "1"]
    assert bad == sidecar(name)["checksums"]["offload_partial"]
    assert good == sidecar(name)["checksums"]["good"]


def test_the_first_capture_tells_the_issue_story() -> None:
    conn, = sidecar("real_v1_crc_off_zero_crc")["connections"]
    assert conn["mpa"]["request"]["rev"] == conn["mpa"]["reply"]["rev"] == 1
    assert [f["opcode_name"] for f in conn["fpdus"]] == [
        "Send", "Send", "RDMA Read Request", "Send"]
    assert [(f["qn"], f["msn"]) for f in conn["fpdus"]] == [(0, 1), (0, 2), (1, 1), (0, 3)]
    assert conn["fins"] == [{"frame": 14, "from": "server"}]
    assert [r["from"] for r in conn["rsts"]] == ["server", "server"]
    assert conn["data_after_fin"][0]["frame"] > 14


def test_the_second_connection_is_plain_text() -> None:
    first, second = sidecar("real_second_non_mpa_conn")["connections"]
    assert first["mpa"] and second["mpa"] is None
    assert first["server"] == second["server"] and first["client"] != second["client"]
