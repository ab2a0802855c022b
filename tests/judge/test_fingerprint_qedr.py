"""qedr named from what qed puts on the wire, in captures the emulator writes for every
pair of stacks (one accepted connection each). The evidence, from qed_iwarp.c:

- the SYN: qed_iwarp_tcp_offload sets TCP_OFFLOAD_PARAMS_OPT2_TS_EN (qed_iwarp_setup:
  tcp_flags = QED_IWARP_TS_EN) and the offload parameters have no SACK bit: timestamps
  without SACK permitted, which a Linux socket (siw, erdma) never sends by default and
  irdma's and cxgb4's TCP do not send by default; a SYN-ACK says so only when the SYN
  it answers offered SACK (tcp options answer the SYN);
- the request: qed_iwarp_setup's rtr_type is SEND | WRITE | READ, and
  qed_iwarp_mpa_v2_set_private sets MPA_V2_SEND_RTR (RFC 6581's B bit): no other stack
  offers the zero-length Send RTR;
- the reply: qed_iwarp_mpa_received keeps every type both sides share (ep->rtr_type &=
  iwarp_info->rtr_type, and all of its own when none is shared), and
  qed_iwarp_mpa_v2_set_private sets each: a reply with several RTR types; every other
  stack chooses one.

Where none of that is on the wire (a qedr responder answering cxgb4: a SYN without SACK
or timestamps, a request offering only Read), qedr and cxgb4 cannot be told apart and
the fingerprint says so instead of guessing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mpa_emu.scenario import load_scenario, run_scenario
from mpa_emu.views.inspection import inspect_capture

SCENARIO = """\
name = "{ini} to {resp}"
seed = 7

[[host]]
name = "ini"
address = "192.0.2.1"
stack = "{ini}"

[[host]]
name = "resp"
address = "192.0.2.2"
stack = "{resp}"

[[listen]]
host = "resp"
port = 31000
private_data = "welcome"

[[connect]]
from = "ini"
to = "resp"
port = 31000
private_data = "hello"
"""


def _judged(tmp_path: Path, ini: str, resp: str) -> tuple[list[str], list[list[str]]]:
    path = tmp_path / f"{ini}-{resp}.toml"
    path.write_text(SCENARIO.format(ini=ini, resp=resp))
    run = run_scenario(load_scenario(path))
    capture = tmp_path / f"{ini}-{resp}.pcapng"
    run.net.write_pcapng(capture)
    (conn,) = inspect_capture(capture).connections
    return [s.stack for s in conn.stacks], [s.evidence for s in conn.stacks]


def test_qedr_to_qedr_is_qedr_on_both_sides(tmp_path: Path) -> None:
    stacks, evidence = _judged(tmp_path, "qedr", "qedr")
    assert stacks == ["qedr", "qedr"]
    client, server = (" ".join(e) for e in evidence)
    assert "timestamps and no SACK" in client and "zero-length Send RTR" in client
    assert "reply chose 3 RTR types" in server


@pytest.mark.parametrize("resp", ["irdma", "siw", "cxgb4", "erdma"])
def test_a_qedr_initiator_is_named_whoever_answers(tmp_path: Path, resp: str) -> None:
    # its SYN and its request are its own, whatever the responder does with them
    stacks, _ = _judged(tmp_path, "qedr", resp)
    assert stacks[0] == "qedr"
    assert stacks[1] != "qedr"


@pytest.mark.parametrize("ini", ["siw", "erdma"])
def test_a_qedr_responder_to_a_linux_socket_is_named_by_its_syn_ack(
        tmp_path: Path, ini: str) -> None:
    # the SYN offered SACK; qed's SYN-ACK has timestamps and no SACK
    stacks, evidence = _judged(tmp_path, ini, "qedr")
    assert stacks == [ini, "qedr"]
    assert any("timestamps and no SACK" in e for e in evidence[1])


def test_a_qedr_responder_to_irdma_is_named_by_its_reply(tmp_path: Path) -> None:
    # irdma offers Write and Read; qedr keeps both in its reply
    stacks, evidence = _judged(tmp_path, "irdma", "qedr")
    assert stacks == ["irdma", "qedr"]
    assert any("reply chose 2 RTR types" in e for e in evidence[1])


def test_a_qedr_responder_to_cxgb4_is_qedr_or_cxgb4(tmp_path: Path) -> None:
    stacks, evidence = _judged(tmp_path, "cxgb4", "qedr")
    assert stacks == ["cxgb4", "unknown"]
    assert "cxgb4 or qedr: the evidence does not tell them apart" in evidence[1]


@pytest.mark.parametrize(("ini", "resp"), [("irdma", "irdma"), ("siw", "siw"),
                                           ("erdma", "erdma"), ("cxgb4", "cxgb4")])
def test_the_other_stacks_own_captures_are_never_qedr(tmp_path: Path, ini: str,
                                                      resp: str) -> None:
    stacks, evidence = _judged(tmp_path, ini, resp)
    assert "qedr" not in stacks
    assert stacks[0] == ini
    # cxgb4 answering cxgb4 is what a qedr responder would send too (Read offered, Read
    # chosen, a SYN-ACK to a SYN without SACK or timestamps)
    if ini == "cxgb4":
        assert stacks[1] == "unknown"
        assert "cxgb4 or qedr: the evidence does not tell them apart" in evidence[1]
    else:
        assert stacks[1] == resp
