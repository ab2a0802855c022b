"""explain read against the stack models' own runs: the example scenarios of siw and
cxgb4 state the upcalls their kernel functions raise ([[expect.upcall]]); the capture of
each run, explained, must show the initiators the same CONNECT_REPLY statuses, mapped by
cma_iw_handler (cma.c: 0 ESTABLISHED, -ECONNRESET and -ECONNREFUSED REJECTED,
-ETIMEDOUT UNREACHABLE, any other CONNECT_ERROR)."""

from __future__ import annotations

import errno
import json
import tomllib
from pathlib import Path

import pytest

from mpa_emu.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "mpa_emu" / "examples"
CMA = {0: "RDMA_CM_EVENT_ESTABLISHED", -errno.ECONNRESET: "RDMA_CM_EVENT_REJECTED",
       -errno.ECONNREFUSED: "RDMA_CM_EVENT_REJECTED",
       -errno.ETIMEDOUT: "RDMA_CM_EVENT_UNREACHABLE"}


def _status(value: object) -> int:
    if isinstance(value, int):
        return value
    assert isinstance(value, str)
    return -getattr(errno, value.lstrip("-"))


# siw_stack's hosts run siw with peer_to_peer = 1 ([host.params]): a rebuilt siw that a
# fingerprint takes for a userspace library (siw's own P2P is off), so it is named.
@pytest.mark.parametrize("name, profile", [("siw_stack", ["--profile", "siw"]),
                                           ("cxgb4_rtr_mismatch", [])])
def test_initiators_see_what_the_scenario_expects(name: str, profile: list[str],
                                                  tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    scenario = EXAMPLES / f"{name}.toml"
    expected = sorted(_status(u["status"])
                      for u in tomllib.loads(scenario.read_text())["expect"]["upcall"]
                      if u["event"] == "CONNECT_REPLY")
    capture = tmp_path / "run.pcapng"
    assert main(["run", str(scenario), "-o", str(capture)]) == 0
    capsys.readouterr()
    main(["explain", str(capture), "--json", "-", *profile])
    conns = json.loads(capsys.readouterr().out)["connections"]
    assert sorted(c["initiator_status"] for c in conns) == expected
    for c in conns:
        assert c["initiator_event"] == CMA.get(c["initiator_status"],
                                               "RDMA_CM_EVENT_CONNECT_ERROR")


def test_cxgb4_responder_closed_after_its_established(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    # The scenario: the reader (cxgb4 responder) gets CLOSE -104 after the mismatch;
    # c4iw_accept_cr raised ESTABLISHED right after its reply.
    capture = tmp_path / "run.pcapng"
    assert main(["run", str(EXAMPLES / "cxgb4_rtr_mismatch.toml"), "-o", str(capture)]) == 0
    capsys.readouterr()
    assert main(["explain", str(capture), "--json", "-"]) == 1
    conns = json.loads(capsys.readouterr().out)["connections"]
    (failed,) = [c for c in conns if c["verdict"] == "failed"]
    assert failed["cause"] == "rtr-mismatch"
    assert failed["stacks"] == {"client": "cxgb4", "server": "cxgb4"}
    assert failed["responder_events"] == ["RDMA_CM_EVENT_CONNECT_REQUEST",
                                          "RDMA_CM_EVENT_ESTABLISHED",
                                          "RDMA_CM_EVENT_DISCONNECTED"]
