"""The Lua plugin's NVMe-RDMA private data fields under tshark, on captures whose bytes
tests/helpers/ulp_captures.py packs from include/linux/nvme-rdma.h (struct
nvme_rdma_cm_req, _rep, _rej): the expected values are those bytes, not the plugin's
output."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import ulp_captures as caps

pytestmark = pytest.mark.tshark

PLUGIN = Path(__file__).resolve().parents[2] / "mpa_emu" / "wireshark" / "mpa_v2.lua"
FIELDS = ["frame.number", "mpa_v2.nvme.recfmt", "mpa_v2.nvme.qid", "mpa_v2.nvme.hrqsize",
          "mpa_v2.nvme.hsqsize", "mpa_v2.nvme.cntlid", "mpa_v2.nvme.crqsize",
          "mpa_v2.nvme.sts"]


def rows(capture: Path) -> dict[int, dict[str, str]]:
    proc = subprocess.run(
        ["tshark", "-r", str(capture), "-o", "tcp.try_heuristic_first:TRUE",
         "--enable-heuristic", "iwarp_mpa_tcp", "-X", f"lua_script:{PLUGIN}",
         "-T", "fields", "-E", "header=y", *[a for f in FIELDS for a in ("-e", f)]],
        capture_output=True, text=True, check=True)
    assert "Lua: Error" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    header = lines[0].split("\t")
    out = {}
    for line in lines[1:]:
        row = dict(zip(header, line.split("\t"), strict=True))
        if any(row[f] for f in FIELDS[1:]):
            out[int(row["frame.number"])] = row
    return out


@pytest.fixture(autouse=True)
def _need_tshark() -> None:
    if shutil.which("tshark") is None:
        pytest.fail("tshark is required for the Lua plugin tests")


def test_connect_request_and_reject_fields(tmp_path: Path) -> None:
    got = rows(caps.nvme_reject(tmp_path / "rej.pcap", qid=1, hrqsize=1024, hsqsize=1023))
    req, rej = caps.NVME_FRAMES["request"], caps.NVME_FRAMES["reject"]
    assert set(got) == {req, rej}
    assert (got[req]["mpa_v2.nvme.qid"], got[req]["mpa_v2.nvme.hrqsize"],
            got[req]["mpa_v2.nvme.hsqsize"], got[req]["mpa_v2.nvme.recfmt"]) == \
        ("1", "1024", "1023", "0")
    assert got[rej]["mpa_v2.nvme.sts"] == "4" and not got[rej]["mpa_v2.nvme.qid"]


def test_accept_crqsize(tmp_path: Path) -> None:
    got = rows(caps.nvme_admin_accept(tmp_path / "acc.pcap"))
    req, rep = caps.NVME_FRAMES["request"], caps.NVME_FRAMES["reply"]
    assert got[req]["mpa_v2.nvme.qid"] == "0" and got[req]["mpa_v2.nvme.hsqsize"] == "31"
    assert got[rep]["mpa_v2.nvme.crqsize"] == "32"


def test_other_private_data_is_not_nvme(tmp_path: Path) -> None:
    # 4 bytes of an iSER CM header and RFC 8797's block are no NVMe-RDMA data.
    assert rows(caps.iser_login(tmp_path / "i.pcap")) == {}
    assert rows(caps.rpcrdma_inline(tmp_path / "r.pcap")) == {}
    assert rows(caps.unknown_pd(tmp_path / "u.pcap")) == {}
