"""tools/mpa_v2.lua under tshark: every field matches the bytes of the RFC 6581 block.

Expected values are read off the frames' bytes as the spec lays them out (wireshark-mpa
sections 6.2 and 7), not from the plugin's own output.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.inspect_builders import Conversation, write_pcap, write_pcapng

pytestmark = pytest.mark.tshark

PLUGIN = Path(__file__).resolve().parents[2] / "tools" / "mpa_v2.lua"
OPTS = ["-o", "tcp.try_heuristic_first:TRUE", "--enable-heuristic", "iwarp_mpa_tcp"]
FIELDS = ["frame.number", "mpa_v2.request", "mpa_v2.reject", "mpa_v2.p2p",
          "mpa_v2.zero_len_send", "mpa_v2.write_rtr", "mpa_v2.read_rtr", "mpa_v2.ird",
          "mpa_v2.ord", "mpa_v2.no_ird_ord", "mpa_v2.private_data_len",
          "mpa_v2.private_data", "mpa_v2.private_data_text"]

KEY_REQ = bytes.fromhex("4d504120494420526571204672616d65")
KEY_REP = bytes.fromhex("4d504120494420526570204672616d65")

# Spec wireshark-mpa section 7: the v2 accept capture's request and reply.
V2_REQUEST = KEY_REQ + bytes.fromhex("50020018" "8010c010") + b"hello from initiator"
V2_REPLY = KEY_REP + bytes.fromhex("5002000b" "80104010") + b"welcome"
# Section 7: "rej_flag 1 res 0x10 rev 2 pdlength 16 8010401069742773206e6f7420796f75".
V2_REJECT = KEY_REP + bytes.fromhex("70020010" "80104010") + b"it's not you"


def tshark_fields(capture: Path, *extra: str) -> list[dict[str, str]]:
    """One dict per frame that has mpa_v2 fields (frame number always included)."""
    proc = subprocess.run(
        ["tshark", "-r", str(capture), *OPTS, "-X", f"lua_script:{PLUGIN}", *extra,
         "-T", "fields", "-E", "header=y", "-E", "occurrence=f",
         *[a for f in FIELDS for a in ("-e", f)]],
        capture_output=True, text=True, check=True)
    assert "Lua: Error" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    header = lines[0].split("\t")
    rows = [dict(zip(header, line.split("\t"), strict=True)) for line in lines[1:]]
    return [r for r in rows if r["mpa_v2.ird"] or r["mpa_v2.request"]]


@pytest.fixture(autouse=True)
def _need_tshark() -> None:
    if shutil.which("tshark") is None:
        pytest.fail("tshark is required for the Lua plugin tests (tools/test.sh installs it)")


def test_v2_request_and_reply_fields_match_the_block(tmp_path: Path) -> None:
    conv = (Conversation().handshake().client_sends(V2_REQUEST).ack_from_server()
            .server_sends(V2_REPLY).ack_from_client())
    rows = tshark_fields(write_pcap(tmp_path / "accept.pcap", conv))
    assert [r["frame.number"] for r in rows] == ["4", "6"]
    req, rep = rows
    # 0x8010: A set, B clear, IRD 16. 0xc010: C and D set, ORD 16.
    assert (req["mpa_v2.request"], req["mpa_v2.p2p"], req["mpa_v2.zero_len_send"],
            req["mpa_v2.write_rtr"], req["mpa_v2.read_rtr"], req["mpa_v2.ird"],
            req["mpa_v2.ord"]) == ("1", "1", "0", "1", "1", "16", "16")
    assert req["mpa_v2.private_data"] == b"hello from initiator".hex()
    assert req["mpa_v2.private_data_text"] == "hello from initiator"
    assert req["mpa_v2.private_data_len"] == "20"
    # 0x4010: only D, the responder's single RTR choice (RFC 6581 section 5).
    assert (rep["mpa_v2.request"], rep["mpa_v2.reject"], rep["mpa_v2.write_rtr"],
            rep["mpa_v2.read_rtr"]) == ("0", "0", "0", "1")
    assert rep["mpa_v2.private_data"] == b"welcome".hex()
    assert rep["mpa_v2.no_ird_ord"] == "0"


def test_reject_reply_shows_reject_and_reason(tmp_path: Path) -> None:
    conv = (Conversation().handshake().client_sends(V2_REQUEST).ack_from_server()
            .server_sends(V2_REJECT, flags="FA"))
    rows = tshark_fields(write_pcapng(tmp_path / "reject.pcapng", conv))
    rep = rows[-1]
    assert rep["mpa_v2.reject"] == "1"
    assert rep["mpa_v2.private_data_text"] == "it's not you"


def test_display_filter_on_rtr_bits_selects_frames(tmp_path: Path) -> None:
    conv = (Conversation().handshake().client_sends(V2_REQUEST).ack_from_server()
            .server_sends(V2_REPLY).ack_from_client())
    cap = write_pcap(tmp_path / "f.pcap", conv)
    rows = tshark_fields(cap, "-Y", "mpa_v2.read_rtr == 1 && mpa_v2.write_rtr == 0")
    assert [r["frame.number"] for r in rows] == ["6"]
    rows = tshark_fields(cap, "-Y", "mpa_v2.ird == 16 && mpa_v2.request == 1")
    assert [r["frame.number"] for r in rows] == ["4"]


def test_v1_and_rev2_without_enhanced_flag_get_no_fields(tmp_path: Path) -> None:
    v1 = KEY_REQ + bytes.fromhex("40010004") + b"abcd"
    rev2_no_s = KEY_REQ + bytes.fromhex("40020008" "8010c010") + b"abcd"
    c1 = Conversation(cport=40010).handshake().client_sends(v1)
    c2 = Conversation(cport=40011).handshake().client_sends(rev2_no_s)
    assert tshark_fields(write_pcap(tmp_path / "v1.pcap", c1, c2)) == []


def test_no_ird_ord_zero_len_send_and_empty_ulp_data(tmp_path: Path) -> None:
    # IRD word 0xffff: A, B and IRD 0x3FFF; ORD word 0x3fff: no RTR bits, ORD 0x3FFF.
    req = KEY_REQ + bytes.fromhex("50020004" "ffff3fff")
    conv = Conversation().handshake().client_sends(req)
    (row,) = tshark_fields(write_pcap(tmp_path / "n.pcap", conv))
    assert (row["mpa_v2.p2p"], row["mpa_v2.zero_len_send"], row["mpa_v2.ird"],
            row["mpa_v2.ord"], row["mpa_v2.no_ird_ord"]) == ("1", "1", "16383", "16383", "1")
    assert row["mpa_v2.private_data_len"] == "0"
    assert row["mpa_v2.private_data"] == ""


def test_vlan_and_ipv6_frames_are_decoded(tmp_path: Path) -> None:
    conv = (Conversation(client="fd00::1", server="fd00::2", vlan=100).handshake()
            .client_sends(V2_REQUEST))
    (row,) = tshark_fields(write_pcap(tmp_path / "v6.pcap", conv))
    assert row["mpa_v2.ird"] == "16"
    assert row["mpa_v2.private_data_text"] == "hello from initiator"


def test_block_shorter_than_four_bytes_is_flagged(tmp_path: Path) -> None:
    req = KEY_REQ + bytes.fromhex("50020002" "8010")
    conv = Conversation().handshake().client_sends(req)
    cap = write_pcap(tmp_path / "short.pcap", conv)
    proc = subprocess.run(["tshark", "-r", str(cap), *OPTS, "-X", f"lua_script:{PLUGIN}",
                           "-Y", "mpa_v2.short_block"], capture_output=True, text=True,
                          check=True)
    assert len(proc.stdout.splitlines()) == 1


def _block_words(payload: bytes) -> tuple[int, int]:
    """The two 16-bit words after an MPA frame's 20-byte header (RFC 6581 section 5)."""
    return int.from_bytes(payload[20:22], "big"), int.from_bytes(payload[22:24], "big")


@pytest.mark.parametrize("name", ["v2_accept", "irdma_initiator_siw_responder",
                                  "siw_initiator_irdma_responder"])
def test_fields_match_the_bytes_of_the_projects_captures(tmp_path: Path, name: str) -> None:
    from mpa_emu.scenario import load_scenario, run_scenario
    from mpa_emu.wire import mpa

    root = Path(__file__).resolve().parents[2]
    run = run_scenario(load_scenario(root / "scenarios" / f"{name}.toml"))
    cap = tmp_path / f"{name}.pcapng"
    run.net.write_pcapng(cap)
    rows = {int(r["frame.number"]): r for r in tshark_fields(cap)}
    expected = {}
    for i, frame in enumerate(run.net.frames, start=1):
        seg = frame.segment
        if seg is None or not mpa.looks_like_mpa(seg.payload) or seg.payload[17] != 2:
            continue
        ird_word, ord_word = _block_words(seg.payload)
        pd_length = int.from_bytes(seg.payload[18:20], "big")
        expected[i] = {
            "mpa_v2.request": "1" if seg.payload[:16] == KEY_REQ else "0",
            "mpa_v2.p2p": str(ird_word >> 15), "mpa_v2.zero_len_send": str(ird_word >> 14 & 1),
            "mpa_v2.write_rtr": str(ord_word >> 15), "mpa_v2.read_rtr": str(ord_word >> 14 & 1),
            "mpa_v2.ird": str(ird_word & 0x3FFF), "mpa_v2.ord": str(ord_word & 0x3FFF),
            "mpa_v2.private_data": seg.payload[24:20 + pd_length].hex(),
        }
    assert expected, "the scenario has no MPA v2 frames"
    assert sorted(rows) == sorted(expected)
    for number, want in expected.items():
        got = {k: rows[number][k] for k in want}
        assert got == want, f"frame {number}"


def _filtered(cap: Path, expr: str) -> list[str]:
    proc = subprocess.run(["tshark", "-r", str(cap), *OPTS, "-X", f"lua_script:{PLUGIN}",
                           "-Y", expr, "-T", "fields", "-e", "frame.number"],
                          capture_output=True, text=True, check=True)
    assert "Lua: Error" not in proc.stderr, proc.stderr
    return proc.stdout.split()


def test_rtr_words_and_reply_checks_against_the_request(tmp_path: Path) -> None:
    only_read = KEY_REQ + bytes.fromhex("50020004" "80104010")   # offers Read only
    write_reply = KEY_REP + bytes.fromhex("50020004" "80108010")  # chooses Write
    both_reply = KEY_REP + bytes.fromhex("50020004" "8010c010")   # chooses Write and Read
    c1 = Conversation(cport=40020).handshake().client_sends(only_read).server_sends(write_reply)
    c2 = Conversation(cport=40021).handshake().client_sends(V2_REQUEST).server_sends(both_reply)
    c3 = (Conversation(cport=40022).handshake().client_sends(V2_REQUEST)
          .server_sends(V2_REPLY))
    cap = write_pcap(tmp_path / "rtr.pcap", c1, c2, c3)
    assert _filtered(cap, 'mpa_v2.rtr == "write read"') == ["9", "10", "14"]
    assert _filtered(cap, "mpa_v2.rtr_not_offered") == ["5"]
    assert _filtered(cap, "mpa_v2.many_rtr") == ["10"]
    assert _filtered(cap, 'mpa_v2.rtr == "read" && mpa_v2.request == 0') == ["15"]
