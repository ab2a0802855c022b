"""tshark reads the emulated SMB Direct negotiation (mpa_emu/examples/smbd_negotiate.toml
on every pair of stacks) as iWARP: the Negotiate Request and Response are RDMAP Sends
(opcode 0x3, RFC 5040 section 4.2) on untagged queue 0 with MSN 1, its own smb_direct
dissector reads them with [MS-SMBD] 2.2.1 / 2.2.2's values (cifs.ko's request, ksmbd's
response), and no frame is malformed or carries an error."""

from __future__ import annotations

import itertools
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.smbd_scenarios import example_on

from mpa_emu.scenario import loads, run_scenario
from mpa_emu.stacks import STACKS

pytestmark = pytest.mark.tshark

FIELDS = ["frame.number", "frame.protocols", "iwarp_rdma.opcode", "iwarp_ddp.qn",
          "iwarp_ddp.msn", "iwarp_ddp.mo", "_ws.malformed", "_ws.expert.severity",
          "smb_direct.version.min", "smb_direct.credits.requested",
          "smb_direct.credits.granted", "smb_direct.max_read_write_size",
          "smb_direct.preferred_send_size", "smb_direct.max_receive_size",
          "smb_direct.max_fragmented_size"]
PI_ERROR = 0x00800000
"""epan/proto.h PI_ERROR: the expert severity of a dissector error."""


@pytest.fixture(autouse=True)
def _need_tshark() -> None:
    if shutil.which("tshark") is None:
        pytest.fail("tshark is required")


def rows(capture: Path) -> list[dict[str, str]]:
    proc = subprocess.run(
        ["tshark", "-r", str(capture), "-o", "tcp.try_heuristic_first:TRUE",
         "--enable-heuristic", "iwarp_mpa_tcp", "-T", "fields", "-E", "header=y",
         "-E", "occurrence=a", "-E", "aggregator=,",
         *[a for f in FIELDS for a in ("-e", f)]],
        capture_output=True, text=True, check=True)
    lines = proc.stdout.splitlines()
    header = lines[0].split("\t")
    return [dict(zip(header, line.split("\t"), strict=True)) for line in lines[1:]]


def _rfc_framing(initiator: str, responder: str) -> bool:
    """Both stacks frame MPA as RFC 5044/6581 do (their framing fact's revision is 1 or
    2). Two stacks of one private revision (erdma's 129) connect too, but tshark's MPA
    dissector reads such a frame by its PD_Length alone, without the 8-byte extension
    (docs/stacks/erdma.md), so where the FPDUs start is lost to it; the erdma stack's
    own tshark test checks its Sends with private data that keeps tshark in step."""
    revs = [STACKS[n].peer_framing(STACKS[n].defaults()).rev for n in (initiator, responder)]
    return max(revs) <= 2


@pytest.mark.parametrize(("initiator", "responder"),
                         [pair for pair in itertools.product(sorted(STACKS), sorted(STACKS))
                          if _rfc_framing(*pair)])
def test_tshark_decodes_the_negotiation_as_rdmap_sends(initiator: str, responder: str,
                                                      tmp_path: Path) -> None:
    run = run_scenario(loads(example_on(initiator, responder), "smbd.toml"))
    pcap = tmp_path / "smbd.pcapng"
    run.net.write_pcapng(pcap)
    got = rows(pcap)
    for row in got:
        assert not row["_ws.malformed"], row
        severities = [int(s) for s in row["_ws.expert.severity"].split(",") if s]
        assert all(s < PI_ERROR for s in severities), row
    sends = [r for r in got if r["iwarp_rdma.opcode"] == "0x03"]
    # Two connections: request and response on the first, the refused request alone.
    assert len(sends) == 3, [(r["frame.number"], r["frame.protocols"]) for r in got]
    for r in sends:
        assert r["frame.protocols"].endswith("iwarp_ddp_rdmap:smb_direct")
        assert (r["iwarp_ddp.qn"], r["iwarp_ddp.msn"], r["iwarp_ddp.mo"]) == ("0", "1", "0")
    request, resp, refused = sends
    assert (request["smb_direct.version.min"], request["smb_direct.credits.requested"],
            request["smb_direct.preferred_send_size"], request["smb_direct.max_receive_size"],
            request["smb_direct.max_fragmented_size"]) == ("0x0100", "255", "1364", "1364",
                                                           "1048576")
    assert (resp["smb_direct.credits.requested"], resp["smb_direct.credits.granted"],
            resp["smb_direct.max_read_write_size"], resp["smb_direct.preferred_send_size"],
            resp["smb_direct.max_receive_size"], resp["smb_direct.max_fragmented_size"]) == \
        ("255", "254", "8388608", "1364", "1364", "173910")
    assert refused["smb_direct.credits.requested"] == "0"
