"""SMB Direct's negotiation emulated between any two stacks: the client sends cifs.ko's
Negotiate Request as the first Send once established, the smbd-server policy answers as
ksmbd does. Expected bytes are [MS-SMBD] 2.2.1 / 2.2.2's layouts packed here by hand, with
the values fs/smb/server/transport_rdma.c computes (smb_direct_prepare,
smb_direct_send_negotiate_response, smb_direct_check_recvmsg) and the checks of
fs/smb/client/smbdirect.c (process_negotiation_response)."""

from __future__ import annotations

import errno
import itertools
import json
import struct
from pathlib import Path

import pytest
from helpers.smbd_scenarios import EXAMPLE, example_on

from mpa_emu.cli import main
from mpa_emu.compiled import compiled_modules
from mpa_emu.errors import ConfigError
from mpa_emu.net import Network, SmbdClient, SmbdServer
from mpa_emu.scenario import ScenarioError, loads, run_scenario
from mpa_emu.stacks import STACKS
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.ulp.upper import cifs, ksmbd
from mpa_emu.ulp.upper.ksmbd import KsmbdLimits
from mpa_emu.ulp.upper.messages import sends_of_segments
from mpa_emu.views.explanation import explain_connection
from mpa_emu.views.inspection import inspect_capture
from mpa_emu.wire.ulp.smbd import NegotiateRequest

MIB = 1024 * 1024


def request(mn: int = 0x0100, mx: int = 0x0100, credits: int = 255, pref: int = 1364,
            maxrecv: int = 1364, maxfrag: int = MIB) -> bytes:
    """[MS-SMBD] 2.2.1: MinVersion, MaxVersion, Reserved, CreditsRequested (2 bytes each),
    PreferredSendSize, MaxReceiveSize, MaxFragmentedSize (4 bytes each), little-endian."""
    return struct.pack("<HHHHIII", mn, mx, 0, credits, pref, maxrecv, maxfrag)


def response(*, negotiated: int = 0x0100, creq: int = 255, cgr: int = 254, status: int = 0,
             rw: int = 8 * MIB, pref: int = 1364, maxrecv: int = 1364,
             maxfrag: int = 173910) -> bytes:
    """[MS-SMBD] 2.2.2: MinVersion, MaxVersion, NegotiatedVersion, Reserved,
    CreditsRequested, CreditsGranted (2 bytes each), Status, MaxReadWriteSize,
    PreferredSendSize, MaxReceiveSize, MaxFragmentedSize (4 bytes each)."""
    return struct.pack("<HHHHHHIIIII", 0x0100, 0x0100, negotiated, 0, creq, cgr, status,
                       rw, pref, maxrecv, maxfrag)


# -- ksmbd's answer (transport_rdma.c) ------------------------------------------------


def test_a_good_request_gets_what_smb_direct_prepare_computes() -> None:
    # Module defaults: receive_credit_max 255 (254 receives posted after the request's),
    # send_credit_target 255, max_send/receive_size 1364, SMBD_DEFAULT_IOSIZE 8 MiB;
    # max_fragmented_recv_size = 255 * 1364 / 2 = 173,910.
    got = ksmbd.answer(request())
    assert (got.response, got.disconnect, got.errno) == (response(), False, 0)


def test_sizes_are_the_minimum_of_both_sides() -> None:
    # st->max_recv_size = min(1364, PreferredSendSize), st->max_send_size = min(1364,
    # MaxReceiveSize), max_fragmented_recv_size = recv_credit_max * max_recv_size / 2.
    got = ksmbd.answer(request(pref=1000, maxrecv=512))
    assert got.response == response(pref=512, maxrecv=1000, maxfrag=255 * 1000 // 2)
    limits = KsmbdLimits(receive_credit_max=16, send_credit_target=32,
                         max_read_write_size=MIB)
    assert ksmbd.answer(request(), limits).response == response(
        creq=32, cgr=15, rw=MIB, maxfrag=16 * 1364 // 2)


def test_a_version_outside_1_0_gets_status_not_supported() -> None:
    # -EOPNOTSUPP: smb_direct_send_negotiate_response(failed): zeroed, versions 0x0100,
    # Status STATUS_NOT_SUPPORTED (0xC00000BB); no disconnect from ksmbd.
    for req in (request(mn=0x0200, mx=0x0200), request(mn=0x0000, mx=0x00FF)):
        got = ksmbd.answer(req)
        assert got.errno == -errno.EOPNOTSUPP and not got.disconnect
        assert got.response == struct.pack("<HHHHHHIIIII", 0x0100, 0x0100, 0, 0, 0, 0,
                                           0xC00000BB, 0, 0, 0, 0)


@pytest.mark.parametrize("req", [request(credits=0), request(maxrecv=128),
                                 request(maxfrag=128 * 1024)])
def test_a_request_ksmbd_aborts_gets_no_response_and_a_disconnect(req: bytes) -> None:
    got = ksmbd.answer(req)
    assert (got.response, got.disconnect, got.errno) == (None, True, -errno.ECONNABORTED)


def test_a_short_request_is_dropped_by_recv_done() -> None:
    got = ksmbd.answer(request()[:19])
    assert got.ignored and got.response is None and not got.disconnect


def test_ksmbd_refuses_its_own_bad_limits() -> None:
    # smb_direct_init_params: DIV_ROUND_UP(max_send_size, PAGE_SIZE) + 3 <= 6.
    assert KsmbdLimits(max_send_size=3 * 4096).problem() is None
    assert "too large" in str(KsmbdLimits(max_send_size=3 * 4096 + 1).problem())
    assert "init_smbd_max_io_size" in str(KsmbdLimits(max_read_write_size=4096).problem())
    with pytest.raises(ConfigError, match="max_send_size 20000 is too large"):
        SmbdServer(KsmbdLimits(max_send_size=20000))


# -- cifs.ko's checks (smbdirect.c) -----------------------------------------------------


def test_process_negotiation_response() -> None:
    assert cifs.check_response(response()).ok
    assert cifs.check_response(response()[:31]).why.startswith("packet_length=31")
    failed = ksmbd.answer(request(mn=0x0200, mx=0x0200)).response
    assert failed is not None
    assert cifs.check_response(failed).why == "negotiated_version=0"
    assert cifs.check_response(response(cgr=0)).why == "credits_granted==0"
    assert cifs.check_response(response(creq=0)).why == "credits_requested==0"
    assert cifs.check_response(response(pref=1365)).why == "preferred_send_size=1365"
    assert cifs.check_response(response(maxrecv=127)).why == "max_receive_size=127"
    assert cifs.check_response(response(maxfrag=131071)).why == "max_fragmented_size=131071"
    assert cifs.DEFAULT_REQUEST.encode() == request()


def test_sends_are_joined_by_msn_from_their_segments() -> None:
    # RFC 5041 section 4.4: untagged control 0x01 (0x41 with L), RDMAP Send 0x43,
    # QN, MSN, MO big-endian.
    def seg(body: bytes, msn: int, mo: int, last: bool) -> bytes:
        return bytes([0x41 if last else 0x01, 0x43]) + bytes(4) + \
            struct.pack("!III", 0, msn, mo) + body

    got = sends_of_segments([seg(b"abcd", 1, 0, False), seg(b"x", 2, 0, True),
                             seg(b"ef", 1, 4, True), seg(b"late", 3, 4, True)])
    assert got == [b"x", b"abcdef"]


# -- the emulation on every pair of stacks ----------------------------------------------


def _one_dialect(initiator: str, responder: str) -> bool:
    """The two stacks frame MPA alike (their framing fact's revision: RFC 5044/6581's 1
    or 2 on both sides, or the same private revision, erdma's 129): otherwise the
    responder refuses the request and no Send is ever posted."""
    revs = [STACKS[n].peer_framing(STACKS[n].defaults()).rev for n in (initiator, responder)]
    return revs[0] == revs[1] or max(revs) <= 2


@pytest.mark.parametrize(("initiator", "responder"),
                         [pair for pair in itertools.product(sorted(STACKS), sorted(STACKS))
                          if _one_dialect(*pair)])
def test_negotiation_on_every_pair_of_stacks(initiator: str, responder: str,
                                            tmp_path: Path) -> None:
    run = run_scenario(loads(example_on(initiator, responder), "smbd.toml"))
    assert run.ok, [e.text("smbd.toml") for e in run.failures()]
    pcap = tmp_path / "smbd.pcapng"
    run.net.write_pcapng(pcap)
    report = inspect_capture(pcap)
    good, refused = report.connections
    for conn in (good, refused):
        assert conn.ulp is not None and conn.ulp.protocol == "smb-direct"
    req, resp = good.ulp.messages
    assert (req.kind, req.side, req.msn, req.size) == ("Negotiate Request", "client", 1, 20)
    assert (resp.kind, resp.side, resp.msn, resp.size) == ("Negotiate Response", "server", 1,
                                                           32)
    assert resp.fields["credits_granted"] == 254 and resp.fields["max_fragmented_size"] == \
        173910 and resp.fields["status_name"] == "STATUS_SUCCESS"
    assert good.ulp.negotiated["server_max_receive_size"] == 1364
    # The refused request is the only Send on its connection; the server disconnects.
    assert [m.kind for m in refused.ulp.messages] == ["Negotiate Request"]
    assert refused.ulp.messages[0].fields["credits_requested"] == 0
    # The negotiation is sound; the MPA exchange under it may bend RFC 6581 section 5: a
    # reply that chooses more than one RTR type (qed_iwarp_mpa_v2_set_private writes every
    # type both sides offer) is a warning of inspect's, and no initiator here refuses it
    # (irdma_negotiate_mpa_v2_ird_ord, siw_proc_mpareply and qed's reply check each find
    # their own type among them), so both applications see ESTABLISHED and explain says ok.
    reply = good.reply
    assert reply is not None
    chosen = [reply.zero_len_send, reply.write_rtr, reply.read_rtr].count(True)
    rfc = [f for f in good.findings if f"chooses {chosen} RTR types" in f.text]
    assert [f.severity for f in rfc] == (["warning"] if chosen > 1 else [])
    causes = [explain_connection(c).cause for c in report.connections]
    assert causes == ["ok", "smbd-negotiate-refused"]


def _pair(client_stack: str = "siw", server_stack: str = "cxgb4",
          server: SmbdServer | None = None,
          req: NegotiateRequest = cifs.DEFAULT_REQUEST) -> tuple[Network, SmbdClient, int]:
    net = Network(seed=2)
    client = net.add_host("client", "192.0.2.1", stack=client_stack)
    srv = net.add_host("server", "192.0.2.2", stack=server_stack)
    srv.listen(5445, policy=server or SmbdServer())
    conn = client.connect(srv, 5445)
    smbd = SmbdClient(req).attach(client, conn)
    net.run()
    return net, smbd, conn


def test_python_api_negotiates() -> None:
    _net, smbd, _conn = _pair()
    assert smbd.outcome == "negotiated" and smbd.check is not None and smbd.check.ok
    assert smbd.response is not None and smbd.response.encode() == response()


def test_status_not_supported_makes_the_client_disconnect(tmp_path: Path) -> None:
    net, smbd, _ = _pair("cxgb4", "irdma", req=NegotiateRequest(0x0200, 0x0300, 255, 1364,
                                                                1364, MIB))
    assert smbd.outcome == "negotiation refused (negotiated_version=0): disconnected"
    pcap = tmp_path / "v.pcapng"
    net.write_pcapng(pcap)
    (conn,) = inspect_capture(pcap).connections
    assert conn.ulp is not None
    req, resp = conn.ulp.messages
    assert (req.kind, req.fields["min_version"]) == ("Negotiate Request", 0x0200)
    assert resp.fields["status"] == 0xC00000BB
    e = explain_connection(conn)
    assert e.cause == "smbd-negotiate-refused" and "STATUS_NOT_SUPPORTED" in e.summary
    assert e.evidence[:2] == [req.frame, resp.frame]
    # The client's FIN follows the response (cifs's rdma_disconnect).
    assert any(c[1] == "client" and c[0] > resp.frame for c in conn.closes)


def test_a_small_ksmbd_receive_size_is_refused_by_cifs() -> None:
    # max_fragmented_recv_size = 255 * 1024 / 2 = 130,560 (smb_direct_prepare) is below
    # SMBD_MIN_FRAGMENTED_SIZE (131,072) in process_negotiation_response.
    _net, smbd, _ = _pair(server=SmbdServer(KsmbdLimits(max_receive_size=1024)))
    assert smbd.response is not None and smbd.response.max_fragmented_size == 130560
    assert smbd.outcome == "negotiation refused (max_fragmented_size=130560): disconnected"


def test_server_records_its_answer() -> None:
    server = SmbdServer()
    _pair("irdma", "siw", server, NegotiateRequest(0x0100, 0x0100, 10, 1364, 100, MIB))
    ((_, answer),) = server.answers.items()
    assert answer.errno == -errno.ECONNABORTED and answer.disconnect


def test_post_send_needs_an_established_qp() -> None:
    for stack in sorted(STACKS):
        net = Network(seed=1)
        a = net.add_host("a", "192.0.2.1", stack=stack)
        b = net.add_host("b", "192.0.2.2", stack=stack)
        b.listen(5445)
        conn = a.connect(b, 5445)
        with pytest.raises(CmError) as info:
            a.post_send(conn, b"too early")
        assert info.value.errno == errno.EINVAL, stack
        # A wrong type: the pure package's ConfigError, or in the compiled build the
        # compiled method's own argument check (a one-line TypeError naming the type).
        with pytest.raises((ConfigError, TypeError)) as wrong:
            a.post_send(conn, "text")  # type: ignore[arg-type]
        if "mpa_emu.net.host" in compiled_modules():
            assert "bytes object expected" in str(wrong.value)
        else:
            assert isinstance(wrong.value, ConfigError)
            assert "payload must be bytes" in str(wrong.value)
        with pytest.raises(ConfigError, match="non-negative integer"):
            a.post_recv(conn, -1)


def test_runs_are_deterministic(tmp_path: Path) -> None:
    out = []
    for _ in range(2):
        run = run_scenario(loads(EXAMPLE.read_text(), "smbd.toml"))
        path = tmp_path / "x.pcapng"
        run.net.write_pcapng(path)
        out.append(path.read_bytes())
    assert out[0] == out[1]


def test_inspect_explain_json_and_html_agree(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    pcap = tmp_path / "ex.pcapng"
    run_scenario(loads(EXAMPLE.read_text(), "smbd.toml")).net.write_pcapng(pcap)
    assert main(["explain", "--json", "-", str(pcap)]) == 1
    entries = json.loads(capsys.readouterr().out)["connections"]
    refused = entries[1]
    assert refused["cause"] == "smbd-negotiate-refused"
    assert refused["ulp"]["causes"][0] == refused["cause"]
    assert main(["explain", str(pcap)]) == 1
    assert f"smbd-negotiate-refused: {refused['summary']}" in capsys.readouterr().out
    html = tmp_path / "x.html"
    assert main(["explain", "--html", str(html), str(pcap)]) == 1
    capsys.readouterr()
    assert "smbd-negotiate-refused" in html.read_text()
    main(["inspect", "--json", str(pcap)])
    conns = json.loads(capsys.readouterr().out)["connections"]
    assert conns[1]["ulp"]["diagnoses"][0]["cause"] == "smbd-negotiate-refused"
    assert conns[0]["ulp"]["negotiated"]["credits_granted"] == 254
    assert main(["inspect", "--fpdus", str(pcap)]) in (0, 1)
    text = capsys.readouterr().out
    assert "client MSN 1: 20 bytes: Negotiate Request: versions 1.0-1.0, CreditsRequested " \
        "255" in text
    assert "server MSN 1: 32 bytes: Negotiate Response: STATUS_SUCCESS" in text


# -- scenario errors ---------------------------------------------------------------------

BASE = ('[[host]]\nname = "a"\naddress = "192.0.2.1"\n[[host]]\nname = "b"\n'
        'address = "192.0.2.2"\n')


@pytest.mark.parametrize(("listen", "connect", "message"), [
    ('policy = "smbd-server"\nmax_send_size = 20000\n', "", "max_send_size 20000 is too large"),
    ('policy = "smbd-server"\nreceive_credit_max = 0\n', "", "expected an integer 1..65535"),
    ('policy = "smbd-server"\nmax_read_write_size = 1024\n', "", "init_smbd_max_io_size"),
    ("", 'smbd_negotiate = "yes"\n', "expected true or a table"),
    ("", "smbd_negotiate = { credits = 1 }\n", "unknown key 'credits'"),
    ("", "smbd_negotiate = { min_version = 65536 }\n", "expected an integer 0..65535"),
    ('policy = "smbd-server"\nmax_queue_size = 4\n', "", "unknown key 'max_queue_size'"),
])
def test_bad_smbd_keys_are_one_line_scenario_errors(listen: str, connect: str,
                                                   message: str) -> None:
    text = (BASE + f'[[listen]]\nhost = "b"\nport = 5445\n{listen}[[connect]]\nfrom = "a"\n'
            f'to = "b"\nport = 5445\n{connect}')
    with pytest.raises(ScenarioError) as info:
        loads(text)
    assert message in str(info.value) and "\n" not in str(info.value)


# -- the matrix's smbd-negotiate scenario -------------------------------------------------


@pytest.mark.parametrize(("initiator", "responder"), [
    ("irdma", "irdma"), ("irdma", "siw"), ("cxgb4", "irdma"), ("siw", "cxgb4"),
    ("siw(peer_to_peer=1)", "irdma"), ("cxgb4", "cxgb4")])
def test_matrix_cell_negotiates(initiator: str, responder: str, tmp_path: Path) -> None:
    from mpa_emu.matrix import parse_side, run_cell
    from mpa_emu.matrix.cell import CellSpec

    capture = tmp_path / "cell.pcapng"
    cell = run_cell(CellSpec(parse_side(initiator), parse_side(responder), "smbd-negotiate",
                             0, str(capture)))
    # The negotiation is above rdma_cm: the application's events are a connect's, with
    # no disconnect after the good negotiation.
    assert cell.status == "ran" and cell.initiator_events == ["RDMA_CM_EVENT_ESTABLISHED"]
    (conn,) = inspect_capture(capture).connections
    assert conn.ulp is not None and conn.ulp.recognised_by == "first message"
    req, resp = conn.ulp.messages
    assert req.fields["credits_requested"] == 255 and resp.fields["credits_granted"] == 254
    assert explain_connection(conn).cause == "ok"


def test_a_bad_version_without_response_is_named_with_ksmbds_answer(tmp_path: Path) -> None:
    # The server of this run answers nothing (a plain accept, its receive posted by
    # nobody); the client gives up at SMBD_NEGOTIATE_TIMEOUT and disconnects. explain
    # reads the 2.0-only request as one ksmbd refuses with -EOPNOTSUPP.
    net = Network(seed=3)
    client = net.add_host("client", "192.0.2.1", stack="irdma")
    server = net.add_host("server", "192.0.2.2", stack="irdma")
    server.listen(5445)
    conn = client.connect(server, 5445)
    smbd = SmbdClient(NegotiateRequest(0x0200, 0x0200, 255, 1364, 1364, MIB)).attach(
        client, conn)
    net.run()
    assert smbd.outcome == "no Negotiate Response in SMBD_NEGOTIATE_TIMEOUT: disconnected"
    pcap = tmp_path / "t.pcapng"
    net.write_pcapng(pcap)
    (c,) = inspect_capture(pcap).connections
    e = explain_connection(c)
    assert e.cause == "smbd-negotiate-refused"
    assert "(-EOPNOTSUPP, smb_direct_check_recvmsg): ksmbd answers it with " \
        "STATUS_NOT_SUPPORTED, yet no Negotiate Response came" in e.summary
    assert e.fix == "offer SMB Direct version 1.0 (0x0100) in MinVersion..MaxVersion"


def test_a_short_first_send_leaves_ksmbd_waiting_until_its_timeout() -> None:
    # recv_done drops a negotiate request under 20 bytes; the receives posted after it
    # are data transfer ones, so a good request later is not a negotiation either, and
    # smb_direct_prepare returns -ETIMEDOUT after SMB_DIRECT_NEGOTIATE_TIMEOUT (120 s).
    net = Network(seed=4)
    client = net.add_host("client", "192.0.2.1", stack="cxgb4")
    srv = net.add_host("server", "192.0.2.2", stack="siw")
    server = SmbdServer()
    srv.listen(5445, policy=server)
    conn = client.connect(srv, 5445)
    net.run_for(10_000_000)
    client.post_send(conn, request()[:19])
    net.run_for(1_000_000)
    client.post_send(conn, request())
    net.run()
    ((_, answer),) = server.answers.items()
    assert answer.ignored
    ends = [r for r in net.trace.of_kind("smbd") if "ETIMEDOUT" in str(r.fields.get("why"))]
    assert len(ends) == 1 and 120e9 <= ends[0].time_ns < 121e9
    assert [u.event.name for u in client.upcalls][-1] in ("DISCONNECT", "CLOSE")
