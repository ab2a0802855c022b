"""The words of replay's report say what happened: an application that was told nothing
is told "nothing", not "nothing more"."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.replay_cli import replay
from helpers.third_party_captures import SERVER, smb_direct_siw


def test_an_application_told_nothing_is_not_told_nothing_more(tmp_path: Path) -> None:
    # siw's request has no P2P bit: irdma_parse_mpa refuses it (-EOPNOTSUPP) before any
    # upcall, so irdma's listener hears of no CONNECT_REQUEST; the recorded server did.
    path = smb_direct_siw(tmp_path / "smb.pcap")
    rc, out, report = replay(path, "--emulate", SERVER, "--semantic", tmp_path=tmp_path)
    assert rc == 1
    assert report["upcalls"] == []
    first = next(line for line in out.splitlines() if line.startswith("first divergence:"))
    assert "irdma tells the application nothing (" in first
    assert "nothing more" not in first


ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "pcaps" / "real"


def test_a_semantic_match_says_so_and_lists_its_nic_warnings(tmp_path: Path) -> None:
    facts = json.loads((REAL / "real_v1_crc_on.json").read_text())
    server = facts["connections"][0]["server"].split(":")[0]
    rc, out, report = replay(REAL / "real_v1_crc_on.pcap", "--emulate", server,
                             "--semantic", tmp_path=tmp_path)
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].startswith("MATCH (semantic): every connection has the recorded "
                               "outcome; ")
    warnings = [d for d in report["divergences"] if d["severity"] == "warning"]
    assert warnings and f"{len(warnings)} NIC warning(s) (listed below)" in lines[0]
    # The server's Send after OFFLOADED (the sidecar's FPDU from the server) is one.
    sends = [f["frame"] for f in facts["connections"][0]["fpdus"] if f["from"] == "server"]
    assert {d["frame"] for d in warnings} & set(sends)
    at = lines.index(next(x for x in lines if x.startswith("NIC warnings (")))
    listed = lines[at + 1:at + 1 + len(warnings)]
    assert [x.split()[:3] for x in listed] == [["frame", str(d["frame"]), d["kind"] + ":"]
                                               for d in warnings]


def test_recorded_and_emulated_frame_numbers_are_labelled(tmp_path: Path) -> None:
    facts = json.loads((REAL / "real_peer_v2.json").read_text())
    conn = facts["connections"][0]
    client = conn["client"].split(":")[0]
    fin = next(f["frame"] for f in conn["fins"] if f["from"] == "client")
    _rc, out, _report = replay(REAL / "real_peer_v2.pcap", "--emulate", client, "--semantic",
                               tmp_path=tmp_path)
    lines = [x.strip() for x in out.splitlines()]
    at = lines.index(next(x for x in lines if x.startswith("outcome per connection")))
    assert lines[at + 1].startswith("frame numbers: a recorded event's frame is the "
                                    "capture's frame; an emulated one's is the capture frame")
    recorded = next(x for x in lines[at:] if x.startswith("recorded "))
    emulated = next(x for x in lines[at:] if x.startswith("emulated "))
    # The recorded host's FIN is a capture frame; the emulator's own FIN is not, so it
    # is numbered by the capture frame it followed.
    assert f"first close: FIN from the host at frame {fin}" in recorded
    assert "first close: FIN from the host after frame " in emulated
