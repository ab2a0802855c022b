"""What inspect and explain say is what the capture shows: a DDP version error names
what the receiver did (a Terminate, a FIN) instead of asserting the rule's reaction, and
a side judged linux-userspace (an iWARP library over a Linux socket, no rdma_cm) gets no
rdma_cm events and no kernel functions in its name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.long_fpdu_capture import (
    FRAMES,
    VERSION_FIN_FRAMES,
    long_terminate,
    version_zero_then_fin,
)

from mpa_emu.cli import main


def _version_finding(out: str) -> str:
    return next(line for line in out.splitlines() if "DDP version 0, RFC 5041" in line)


def test_a_version_error_answered_by_a_fin_says_so(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = version_zero_then_fin(tmp_path / "fin.pcap")
    assert main(["inspect", str(path)]) == 1
    line = _version_finding(capsys.readouterr().out)
    assert f"frame {VERSION_FIN_FRAMES['send']}:" in line
    assert "(the receiver terminates" not in line
    assert line.endswith("the server sends no Terminate in the capture; its FIN follows "
                         f"at frame {VERSION_FIN_FRAMES['fin']}")


def test_a_version_error_answered_by_a_terminate_names_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = long_terminate(tmp_path / "long.pcap", sends=3)
    assert main(["inspect", str(path)]) == 1
    line = _version_finding(capsys.readouterr().out)
    assert line.endswith(f"the server sends a Terminate at frame {FRAMES['terminate']}")


KERNEL_WORDS = ("cma_iw_handler", "IW_CM_EVENT", "RDMA_CM_EVENT", "irdma_", "siw_", "c4iw_")


def test_linux_userspace_sides_get_no_rdma_cm_events(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # Both sides: Linux SYN options and MPA rev 1 without C: a userspace library
    # (judge.stacks: no kernel rules are known for it).
    path = long_terminate(tmp_path / "long.pcap", sends=3)
    report = tmp_path / "e.json"
    assert main(["explain", "-v", str(path), "--json", str(report)]) == 1
    text = capsys.readouterr().out
    (e,) = json.loads(report.read_text())["connections"]
    assert e["stacks"] == {"client": "linux-userspace", "server": "linux-userspace"}
    assert e["initiator_event"] == "" and e["initiator_events"] == []
    assert e["responder_events"] == []
    for word in KERNEL_WORDS:
        assert word not in text and word not in e["functions"], word
    assert "initiator and responder: judged linux-userspace" in text
    assert "  initiator   no rdma_cm (linux-userspace" in text
    assert "  responder   no rdma_cm (linux-userspace" in text
