"""Capture siw-shaped reference traffic over real Linux TCP, for pcaps/real/siw/ (root).

siw (drivers/infiniband/sw/siw) rides the host's Linux TCP stack: its connection manager
opens ordinary kernel sockets (siw_connect: sock_create, kernel_bindconnect,
tcp_sock_set_nodelay; siw_create_listen and siw_accept_newconn on the passive side) and
writes the MPA frames with kernel_sendmsg. So the TCP shape of a siw connection is the
Linux stack's, and plain user-space sockets in two network namespaces show it exactly,
with the MPA bytes written here byte for byte as siw_cm.c writes them with its defaults
(siw_main.c: mpa_version 2, peer_to_peer false, mpa_crc_required false, try_gso false):

* request (siw_connect, siw_send_mpareqrep): key "MPA ID Req Frame", flags 0x10
  (MPA_RR_FLAG_ENHANCED only), rev 2, PD_Length = 4 + private data, the RFC 6581 block
  IRD/ORD from the application without P2P or RTR bits, then the private data;
* reply (siw_proc_mpareq, siw_accept): the request header with the key turned to
  "MPA ID Rep Frame", the same flags and rev, the block with the negotiated IRD/ORD;
* reject (siw_reject): the same header with MPA_RR_FLAG_REJECT added (flags 0x30), the
  block as siw_proc_mpareq prepared it, the reject's private data, then sock_release
  (a FIN: siw_recv_mpa_rr read the whole request, nothing is left unread).

The lab is tools/make_real_captures.py's (client 192.0.2.1 captured, server 192.0.2.2
port 31000, TX checksumming off on the server's veth, TSO off on the client's). Both
namespaces get Linux's default ``net.ipv4.tcp_rmem`` (4096 131072 6291456) and
``tcp_wmem`` (4096 16384 4194304), so the SYNs carry window scale 7 as on a stock host.

Captures:

siw_v2_accept.pcap
    siw initiator and responder defaults: MPA v2 without P2P (no RTR), IRD/ORD 16,
    private data both ways; the initiator disconnects first (siw_qp_cm_drop:
    sock_release, FIN), the responder closes on the peer close (SIW_CM_WORK_PEER_CLOSE).
siw_v2_reject.pcap
    the responder rejects with private data (siw_reject: reject frame, FIN); the
    initiator sees the reject (siw_proc_mpareply) and releases its socket (FIN).

Usage: python tools/make_siw_captures.py [--out DIR] [--sidecars-only] [NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import threading
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_real_captures import (
    CLIENT_IP,
    CLIENT_PORT,
    KEY_REP,
    KEY_REQ,
    Lab,
    connect,
    in_ns,
    join,
    listener,
    recv_exact,
    settle,
)
from real_capture_facts import capture_facts

FLAG_R, FLAG_S = 0x20, 0x10
IRD = ORD = 16
REQ_PD = b"siw initiator private data"
REP_PD = b"siw responder private data"
REJ_PD = b"siw responder says no"
RMEM = "4096 131072 6291456"
WMEM = "4096 16384 4194304"


def siw_frame(key: bytes, flags: int, ird: int, ord_: int, private_data: bytes) -> bytes:
    """siw_send_mpareqrep with enhanced_rdma_conn_est: struct mpa_rr (key, bits as
    flags byte and rev 2, PD_Length counting the 4-byte mpa_v2_data), then v2_ctrl
    (big-endian IRD and ORD, no P2P/RTR bits), then the private data."""
    return (key + struct.pack(">BBH", flags, 2, 4 + len(private_data))
            + struct.pack(">HH", ird, ord_) + private_data)


def recv_frame(sock: socket.socket) -> bytes:
    """siw_recv_mpa_rr: the 20-byte header, then PD_Length bytes."""
    head = recv_exact(sock, 20)
    return head + recv_exact(sock, struct.unpack(">H", head[18:20])[0])


def _set_tcp_defaults(name: str) -> None:
    from mpa_emu.live.netns import entered

    with entered(name):
        for key, value in (("net/ipv4/tcp_rmem", RMEM), ("net/ipv4/tcp_wmem", WMEM)):
            with open(f"/proc/sys/{key}", "w") as f:
                f.write(value)


def accept_scenario(lab: Lab) -> None:
    ready = threading.Event()

    def server() -> None:
        lsock = listener(ready)
        conn, _ = lsock.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # siw_accept_newconn
        request = recv_frame(conn)
        assert request[:16] == KEY_REQ
        settle()  # the application's accept
        conn.sendall(siw_frame(KEY_REP, request[16], IRD, ORD, REP_PD))
        assert conn.recv(64) == b""  # the initiator's FIN: SIW_CM_WORK_PEER_CLOSE
        conn.close()
        lsock.close()

    def client() -> None:
        ready.wait(5)
        sock = connect(CLIENT_PORT)
        sock.sendall(siw_frame(KEY_REQ, FLAG_S, IRD, ORD, REQ_PD))
        reply = recv_frame(sock)
        assert reply[:16] == KEY_REP and not reply[16] & FLAG_R
        settle()
        settle()  # connected; rdma_disconnect later
        sock.close()  # siw_qp_cm_drop: sock_release
        settle()

    join(in_ns(lab.server.name, server), in_ns(lab.client.name, client))


def reject_scenario(lab: Lab) -> None:
    ready = threading.Event()

    def server() -> None:
        lsock = listener(ready)
        conn, _ = lsock.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        request = recv_frame(conn)
        settle()  # the application's reject
        conn.sendall(siw_frame(KEY_REP, request[16] | FLAG_R, IRD, ORD, REJ_PD))
        conn.close()  # siw_reject: sock_release
        lsock.close()

    def client() -> None:
        ready.wait(5)
        sock = connect(CLIENT_PORT)
        sock.sendall(siw_frame(KEY_REQ, FLAG_S, IRD, ORD, REQ_PD))
        reply = recv_frame(sock)
        assert reply[16] & FLAG_R
        sock.close()  # siw_proc_mpareply -> release_cep: sock_release
        settle()

    join(in_ns(lab.server.name, server), in_ns(lab.client.name, client))


SCENARIOS: dict[str, Callable[[Lab], None]] = {
    "siw_v2_accept": accept_scenario,
    "siw_v2_reject": reject_scenario,
}
SHOWS = {
    "siw_v2_accept": "siw defaults over Linux TCP: MPA v2 without P2P, IRD/ORD 16, private "
    "data both ways, the initiator closes first",
    "siw_v2_reject": "siw defaults over Linux TCP: the responder rejects with private data "
    "and closes, the initiator closes on the reject",
}


def write_sidecar(name: str, out: Path) -> None:
    """NAME.json: the facts real_capture_facts decodes from the capture's bytes."""
    path = out / f"{name}.pcap"
    sidecar = {"capture": path.name, "shows": SHOWS[name], "captured_on": CLIENT_IP,
               "made_by": "tools/make_siw_captures.py", **capture_facts(path)}
    (out / f"{name}.json").write_text(json.dumps(sidecar, indent=1) + "\n")


def make(name: str, out: Path) -> Path:
    path = out / f"{name}.pcap"
    lab = Lab()
    try:
        _set_tcp_defaults(lab.client.name)
        _set_tcp_defaults(lab.server.name)
        with lab.capture(path):
            SCENARIOS[name](lab)
    finally:
        lab.close()
    os.chmod(path, 0o644)
    write_sidecar(name, out)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent
                        / "pcaps" / "real" / "siw")
    parser.add_argument("names", nargs="*", choices=[*SCENARIOS, []], metavar="NAME")
    parser.add_argument("--sidecars-only", action="store_true")
    args = parser.parse_args(argv)
    if args.sidecars_only:
        for name in args.names or list(SCENARIOS):
            write_sidecar(name, args.out)
        return 0
    if os.geteuid() != 0:
        parser.error("needs root (network namespaces, veth, tcpdump)")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.names or list(SCENARIOS):
        print(make(name, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
