"""replay plays and judges each side by its own stack (``--profile``): siw and cxgb4 run
their own cores, ``--profile auto`` picks the stack that explains a recording, and a
stack can be named per address.

The siw recording is pcaps/real/siw/siw_v2_accept.pcap: Linux sockets speaking siw's MPA
exchange with siw's defaults, byte for byte as siw_cm.c writes it. The premises checked
from its bytes below are siw_cm.c's: siw_connect with mpa_version 2 sends a rev 2
request with the enhanced bit (MPA_RR_FLAG_ENHANCED, 0x10) and the RFC 6581 block, no C
(mpa_crc_required off), no P2P and no RTR (peer_to_peer off), IRD/ORD as the application
asked (16/16); siw_proc_mpareq answers in the request's own header. Expected outcomes
come from those functions: siw_proc_mpareply reports CONNECT_REPLY 0 with the reply;
siw_accept reports ESTABLISHED with its reply when no RTR is awaited.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from helpers.replay_cli import PCAPS, replay
from mpa_emu.stacks.contract.api import NodeWatch, WatchedCore
from scapy.layers.inet import TCP
from scapy.utils import rdpcap

from mpa_emu.replay.stacks import auto_candidates, choose, parse_profile
from mpa_emu.stacks import STACKS
from mpa_emu.wire.addr import ip_bytes

SIW = PCAPS / "real" / "siw" / "siw_v2_accept.pcap"
CLIENT, SERVER = "192.0.2.1", "192.0.2.2"
REQUEST_FRAME, REPLY_FRAME = 4, 6


def _payload(path: Path, number: int) -> bytes:
    return bytes(rdpcap(str(path))[number - 1][TCP].payload)


def _sidecar(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.with_suffix(".json").read_text())
    return data


# ---- the premises, from the capture's bytes --------------------------------------------

@pytest.mark.parametrize(("frame", "key"), [(REQUEST_FRAME, b"MPA ID Req Frame"),
                                            (REPLY_FRAME, b"MPA ID Rep Frame")])
def test_the_siw_capture_speaks_siw_defaults(frame: int, key: bytes) -> None:
    payload = _payload(SIW, frame)
    assert payload[:16] == key
    flags, rev, pd_len = payload[16], payload[17], struct.unpack_from("!H", payload, 18)[0]
    assert rev == 2 and flags == 0x10  # enhanced only: no M, no C, no R
    ird_word, ord_word = struct.unpack_from("!HH", payload, 20)
    assert ird_word == 16 and ord_word == 16  # no P2P bit, no RTR bit
    assert pd_len == len(payload) - 20


# ---- --profile siw and --profile auto on siw-to-siw traffic -----------------------------

@pytest.mark.parametrize("ip", [CLIENT, SERVER])
def test_profile_siw_matches_either_side(ip: str, tmp_path: Path) -> None:
    rc, text, report = replay(SIW, "--emulate", ip, "--semantic", "--profile", "siw",
                              tmp_path=tmp_path)
    assert rc == 0, text
    assert report["profile"] == "siw" and report["stack"] == "siw"
    assert report["stacks"] == {ip: {"stack": "siw", "side": "emulated"}}
    assert text.splitlines()[1] == f"stacks: {ip} siw (emulated)"
    assert "irdma" not in text  # the report never names irdma for a siw side
    conn = report["semantic"]["connections"][0]
    if ip == CLIENT:
        # siw_proc_mpareply: CONNECT_REPLY 0 with the reply, RDMA_MODE.
        assert conn["recorded"]["established"] == REPLY_FRAME
        assert conn["emulated"]["upcalls"][0]["upcall"] == "CONNECT_REPLY status 0"
    else:
        # siw_proc_mpareq: CONNECT_REQUEST; siw_accept: ESTABLISHED with the reply.
        assert conn["recorded"]["established"] == REPLY_FRAME
        assert [u["upcall"] for u in conn["emulated"]["upcalls"]] == [
            "CONNECT_REQUEST", "ESTABLISHED"]


@pytest.mark.parametrize(("ip", "kind", "frame"), [(CLIENT, "request", REQUEST_FRAME),
                                                   (SERVER, "reply", REPLY_FRAME)])
def test_auto_picks_siw_for_siw_traffic(ip: str, kind: str, frame: int,
                                        tmp_path: Path) -> None:
    rc, text, report = replay(SIW, "--emulate", ip, "--semantic", "--profile", "auto",
                              tmp_path=tmp_path)
    assert rc == 0, text
    assert report["picked"] == "siw"
    assert "siw" in report["same_outcome_profiles"]
    # irdma_build_mpa_v2 always sets P2P and irdma_parse_mpa wants it (step 8);
    # cxgb4's crc_enabled (on by default) sets C where siw sent C=0.
    assert report["profiles"]["irdma"]["same_outcome"] is False
    assert report["profiles"]["cxgb4"]["same_outcome"] is False
    assert f"picked siw: {ip}:" in text
    assert f"MPA {kind} rev 2 (frame {frame})" in report["picked_why"]
    assert "report for siw:" in text
    assert report["stack"] == "siw"


def test_auto_without_a_match_names_the_closest_stack_and_its_rule(tmp_path: Path) -> None:
    # The siw reject capture: the recorded initiator's FIN (frame 9) follows the
    # responder's (frame 8); siw_proc_mpareply's error path releases the socket at once
    # (siw_cm_work_handler), so no stack has the recorded close order.
    cap = PCAPS / "real" / "siw" / "siw_v2_reject.pcap"
    rc, text, report = replay(cap, "--emulate", CLIENT, "--semantic", "--profile", "auto",
                              tmp_path=tmp_path)
    assert rc == 1, text
    assert report["same_outcome_profiles"] == []
    assert report["picked"] == "siw"
    assert report["picked_why"].startswith("closest: siw; first rule that differs: frame 8:")
    assert "siw_cm_work_handler" in report["picked_why"]
    assert "PROFILES with the recorded outcome: none" in text


# ---- a v1 peer without CRC ---------------------------------------------------------------

def test_a_v1_peer_without_crc_is_siw_with_mpa_version_1(tmp_path: Path) -> None:
    cap = PCAPS / "real" / "real_peer_v1_no_crc.pcap"
    request = _sidecar(cap)["connections"][0]["mpa"]["request"]
    assert request["rev"] == 1 and request["C"] is False
    rc, text, report = replay(cap, "--emulate", CLIENT, "--semantic", "--profile", "auto",
                              tmp_path=tmp_path)
    assert rc == 0, text
    # siw_connect with mpa_version 1: rev 1, no block; C only with mpa_crc_required.
    assert "siw(mpa_version=1)" in report["same_outcome_profiles"]
    assert report["picked"] == "siw(mpa_version=1)"
    assert "siw(mpa_version=1) [mpa-v1]" in text
    rc, text, report = replay(cap, "--emulate", CLIENT, "--semantic", "--profile", "mpa-v1",
                              tmp_path=tmp_path)
    assert rc == 0, text
    assert report["profile"] == "mpa-v1" and report["stack"] == "siw(mpa_version=1)"


# ---- irdma captures still pick irdma -----------------------------------------------------

@pytest.mark.parametrize("ip", ["192.168.10.1", "192.168.10.2"])
def test_irdma_capture_picks_irdma(ip: str, tmp_path: Path) -> None:
    # v2_accept.pcap is two irdma nodes: P2P and WRITE0|READ0 offered
    # (irdma_build_mpa_v2), READ0 picked (irdma_negotiate_mpa_v2_ird_ord), C set.
    request = _payload(PCAPS / "v2_accept.pcap", REQUEST_FRAME)
    assert request[16] & 0x40 and struct.unpack_from("!H", request, 20)[0] & 0x8000
    rc, text, report = replay(PCAPS / "v2_accept.pcap", "--emulate", ip, "--semantic",
                              "--profile", "auto", tmp_path=tmp_path)
    assert rc == 0, text
    assert report["same_outcome_profiles"] == ["irdma"]
    assert report["picked"] == "irdma"
    assert "stack" not in report  # an irdma report reads as it always did


# ---- one stack per address ---------------------------------------------------------------

def test_per_side_profile_names_each_side(tmp_path: Path) -> None:
    profile = f"{CLIENT}=siw,{SERVER}=cxgb4"
    rc, text, report = replay(SIW, "--emulate", CLIENT, "--semantic", "--profile", profile,
                              tmp_path=tmp_path)
    assert rc == 0, text
    assert report["stacks"] == {CLIENT: {"stack": "siw", "side": "emulated"},
                                SERVER: {"stack": "cxgb4", "side": "peer"}}
    assert f"stacks: {CLIENT} siw (emulated), {SERVER} cxgb4 (recorded peer)" in text
    rc, text, report = replay(SIW, "--emulate", SERVER, "--semantic", "--profile", profile,
                              tmp_path=tmp_path)
    assert rc == 1, text
    assert report["stack"] == "cxgb4"
    # process_mpa_request: crc_enabled (on by default) or the request's C; send_mpa_reply
    # sets C; the recorded siw reply (frame 6) has C=0.
    assert report["first_divergence"].startswith(
        f"frame {REPLY_FRAME}: cxgb4 sets C (send_mpa_reply")


# ---- byte mode with a Linux-TCP stack ----------------------------------------------------

def test_byte_mode_with_siw_compares_linux_tcp(tmp_path: Path) -> None:
    rc, text, report = replay(SIW, "--emulate", CLIENT, "--profile", "siw",
                              tmp_path=tmp_path)
    assert rc == 1, text
    first = report["divergences"][0]
    # siw rides Linux TCP: the SYN's window (64240) and option kinds (MSS 1460,
    # SACK_PERM, TS, NOP, WS 7) are the recorded ones (sidecar syn_options); only the
    # timestamp value, a per-connection random offset, differs.
    assert first["frame"] == 1
    assert [f["name"] for f in first["fields"]] == ["options"]
    assert _sidecar(SIW)["connections"][0]["syn_options"]["client"] == [
        "MSS=1460", "SACK_PERM", "TS", "NOP", "WS=7"]


# ---- parsing and the cores' watch -------------------------------------------------------

def test_profile_forms() -> None:
    ip = ip_bytes(CLIENT)
    assert parse_profile("siw(peer_to_peer=1)").emulated(ip).label == "siw(peer_to_peer=1)"
    assert parse_profile("mpa-v1").emulated(ip).label == "siw(mpa_version=1)"
    assert parse_profile("cxgb4(mpa_rev=1)").emulated(ip).label == "cxgb4(mpa_rev=1)"
    assert parse_profile("siw", mpa_rev=1).emulated(ip).label == "siw(mpa_version=1)"
    spec = parse_profile(f"{CLIENT}=siw(peer_to_peer=1,rtr_type=1),{SERVER}=cxgb4")
    assert spec.emulated(ip).label == "siw(peer_to_peer=1,rtr_type=1)"
    assert [c.label for c in spec.peers(ip).values()] == ["cxgb4"]
    assert parse_profile("irdma").emulated(ip).stack == "irdma"
    assert parse_profile("auto").auto
    labels = [c.label for c in auto_candidates()]
    assert labels[:4] == ["irdma", "siw", "siw(peer_to_peer=1)", "siw(mpa_version=1)"]
    assert {"cxgb4", "cxgb4(peer2peer=0)", "cxgb4(mpa_rev=1)"} <= set(labels)


@pytest.mark.parametrize(("text", "words"), [
    ("siw(bogus=1)", "unknown parameter 'bogus'"),
    ("siw(peer_to_peer=7)", "peer_to_peer must be"),
    ("nosuch", "unknown stack or profile 'nosuch'"),
    ("10.0.0.1=siw,10.0.0.1=cxgb4", "10.0.0.1 named twice"),
    ("siw(peer_to_peer=1", "unbalanced parentheses"),
    ("siw,cxgb4", "one stack, or ADDRESS=STACK"),
])
def test_bad_profiles_are_one_line_errors(text: str, words: str) -> None:
    with pytest.raises(ValueError) as exc:
        parse_profile(text)
    assert words in str(exc.value) and "\n" not in str(exc.value)


class _Watch:
    def __init__(self) -> None:
        self.events: list[tuple[str, int, object]] = []

    def node_created(self, conn: int, loc_port: int, rem: bytes, rem_port: int) -> None:
        self.events.append(("created", conn, (loc_port, rem, rem_port)))

    def state_changed(self, conn: int, state: Any) -> None:
        self.events.append(("state", conn, state.name))

    def node_freed(self, conn: int) -> None:
        self.events.append(("freed", conn, None))

    def qp_event(self, time_ns: int, conn: int, ae: str) -> None:
        self.events.append(("ae", conn, ae))


@pytest.mark.parametrize(("stack", "state"), [("siw", "CONNECTING"), ("cxgb4", "CONNECTING")])
def test_stack_cores_tell_a_node_watch(stack: str, state: str) -> None:
    core = STACKS[stack].make_core("h", b"\x02\x00\x00\x00\x00\x01", {}, seed=1, trace=None)
    assert isinstance(core, WatchedCore)
    watch = _Watch()
    typed: NodeWatch = watch
    core.watch_nodes(typed)
    local, remote = ip_bytes(CLIENT), ip_bytes(SERVER)
    core.add_address(local)
    core.set_neighbour(remote, b"\x02\x00\x00\x00\x00\x02")
    conn = core.connect(local, remote, 31000, local_port=40001, now_ns=0)
    # siw_connect and c4iw_connect: the endpoint, on these ports, in CONNECTING.
    assert watch.events[:2] == [("created", conn, (40001, remote, 31000)),
                                ("state", conn, state)]
    assert choose(stack).offloaded_state in STACKS[stack].states


def test_a_siw_responder_posts_receive_buffers_for_the_recorded_sends(tmp_path: Path) -> None:
    # The recorded server took the client's Send (frame 8, a zero CRC field, no CRC in
    # use): its application had posted a receive buffer (siw_post_receive), else
    # siw_proc_send would have answered with a Terminate. Replay posts one buffer per
    # possible Send: the client's payload after MPA over the smallest FPDU (24 bytes:
    # length, untagged DDP/RDMAP header, CRC), each as large as that payload.
    cap = PCAPS / "real" / "real_peer_v1_no_crc.pcap"
    after_mpa = [bytes(p[TCP].payload) for p in rdpcap(str(cap))
                 if p[TCP].sport != 31000 and bytes(p[TCP].payload)
                 and bytes(p[TCP].payload)[:3] != b"MPA"]
    total = sum(len(p) for p in after_mpa)
    assert total == 2 + 55 + 3 + 4  # the sidecar's one FPDU: ULPDU 55 bytes, pad 3
    rc, text, report = replay(cap, "--emulate", SERVER, "--semantic", "--profile", "mpa-v1",
                              tmp_path=tmp_path)
    assert rc == 0, text
    posted = [a for a in report["actions"] if a["verb"] == "post_recv"]
    assert [a["detail"] for a in posted] == [
        f"{total // 24 + 1} receive buffer(s) of {total} bytes"]
    assert "Terminate" not in text


def test_irdma_takes_its_registry_parameters_in_a_profile() -> None:
    from mpa_emu.replay.stacks import choose

    choice = choose("irdma(mpa_rev=1)")
    # IRDMA_CM_DEFAULT_MPA_VER rebuilt as 1: irdma_send_mpa_request sends rev 1.
    assert choice.config.mpa_rev == 1
    assert choice.label == "irdma(mpa_rev=1)"
    assert choose("irdma").label == "irdma"
