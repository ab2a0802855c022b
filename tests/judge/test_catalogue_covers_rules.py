"""Every rule the judge can report has a cause in explain's catalogue.

The rules are the ``RULE_*`` keys of :mod:`mpa_emu.judge.rules` and the ``rule=`` keys
inspect's own findings carry; explain looks each up in
:data:`mpa_emu.judge.catalogue.CAUSES`, so one missing is a KeyError on a capture that
breaks it. The extra-bytes captures follow siw_recv_mpa_rr ("peer sent extra data",
-EPROTO, the socket released with bytes unread: RST) and cxgb4's process_mpa_request
("plen does not account for pkt size": abort, RST), no upcall at the responder.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from helpers.inspect_builders import Conversation, write_pcap
from helpers.real_like_captures import KEY_REQ
from helpers.stack_captures import CXGB4_SYN, LINUX_SYN, LINUX_SYNACK, block, mpa

import mpa_emu.judge.rules as rules
from mpa_emu.cli import main
from mpa_emu.judge.catalogue import CAUSES

ROOT = Path(__file__).resolve().parents[2]


def _finding_rules() -> set[str]:
    """The ``rule="..."`` keywords of inspect's findings, read from the source."""
    found: set[str] = set()
    for path in (ROOT / "mpa_emu" / "views" / "inspection").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "rule" \
                    and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str):
                found.add(node.value.value)
    return found


def test_every_rule_constant_has_a_cause() -> None:
    keys = {v for k, v in vars(rules).items() if k.startswith("RULE_")}
    assert "extra-bytes" in keys
    assert sorted(keys - CAUSES.keys()) == []


def test_every_finding_rule_has_a_cause() -> None:
    found = _finding_rules()
    assert found  # the walk finds the split-frame and wrong-key findings at least
    assert sorted(found - CAUSES.keys()) == []


def _request_with_trailing(server_syn: list[tuple[str, object]], server: str) -> Conversation:
    """siw's default request (rev 2, S, block without P2P) with 4 bytes behind it in the
    same segment; the responder releases its socket with them unread (RST)."""
    conv = Conversation(client="10.0.1.1", server=server, cport=41195)
    conv.handshake(LINUX_SYN, server_syn)
    conv.client_sends(mpa(KEY_REQ, 0x10, 2, block(16, 16)) + b"\0\0\0\0")
    return conv.server_sends(b"", flags="RA")


@pytest.mark.parametrize(("stack", "syn", "fn"), [
    ("siw", LINUX_SYNACK, "siw_recv_mpa_rr"),
    ("cxgb4", CXGB4_SYN, "process_mpa_request"),
])
def test_explain_extra_bytes(stack: str, syn: list[tuple[str, object]], fn: str,
                             tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_pcap(tmp_path / "extra.pcap", _request_with_trailing(syn, "10.0.1.2"))
    assert main(["explain", str(path), "--json", "-", "--profile",
                 f"10.0.1.2={stack}"]) == 1
    (conn,) = json.loads(capsys.readouterr().out)["connections"]
    assert (conn["verdict"], conn["cause"]) == ("failed", "extra-bytes")
    assert fn in conn["summary"] and "4 bytes follow" in conn["summary"]
    assert conn["responder_events"] == []
    assert conn["fix"] == CAUSES["extra-bytes"].fix
    text_code = main(["explain", str(path), "--profile", f"10.0.1.2={stack}"])
    assert text_code == 1
    assert "extra-bytes" in capsys.readouterr().out
