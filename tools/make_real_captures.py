"""Capture real Linux TCP traffic carrying MPA, for pcaps/real/ (needs root).

Two network namespaces joined by a veth pair: the client host C (192.0.2.1, where the
capture is taken, like a tcpdump on a Linux endpoint) and the server host S (192.0.2.2).
The endpoints are ordinary kernel sockets, so every TCP header (SYN options MSS, SACK_PERM,
timestamps, window scale; ACKs, FINs, RSTs) is the Linux stack's own.

Checksums: veth hands the sender's socket buffer to the peer unchanged, so with TX
checksum offload on (the veth default) a frame carries only the pseudo-header partial sum
(the folded, uncomplemented sum of source, destination, protocol and TCP length), on
*both* sides of the pair. The script turns TX checksumming off on S's veth (SIOCETHTOOL
ETHTOOL_STXCSUM), so S's frames carry complete checksums, as frames received from a remote
host do, while C's frames keep the partial sums a capture on a Linux host shows for frames
that host sent. TSO is off on C's veth so that one large write leaves as MSS-sized frames,
as on a NIC, instead of one super-frame.

The plain-socket endpoints build MPA bytes by hand: RFC 5044 section 7.1 request/reply
(key, flags M 0x80 / C 0x40 / R 0x20, Rev, PD_Length, private data), section 6 FPDUs
(ULPDU_Length, ULPDU, pad to a 4-byte boundary, CRC32c stored little-endian as Wireshark
and siw read it, or zero), RFC 5041 section 4 DDP headers and RFC 5040 section 4 RDMAP
control bytes.

Captures (server port 31000, client port 40001 unless said):

real_v1_crc_off_zero_crc.pcap
    MPA v1, C=0 in request and reply, private data both ways. The client sends two Send
    FPDUs (MSN 1, 2 on QN 0) and an RDMA Read Request (QN 1, MSN 1), every CRC field
    zero. The server closes (FIN) without answering the Read; the client, after reading
    the FIN, writes one more Send FPDU of 2000 bytes (two TCP segments): data after FIN.
    The server's closed socket answers the first segment with a RST and the second one,
    which no socket owns any more, with another RST.
real_second_non_mpa_conn.pcap
    Connection 1 (client port 40001): MPA v1 with C=1 both ways, one Send each way with
    correct CRC32c, client then server close. Connection 2 (client port 40002) to the
    same server port: plain text, no MPA, closed by the client.
real_v1_crc_on.pcap
    MPA v1 with C=1 in request and reply, private data both ways; client Sends MSN 1 and
    2, the server one Send (MSN 1), all with correct CRC32c; the client closes first,
    then the server. For replay with --profile mpa-v1.
real_peer_v2.pcap
    ``mpa-emu peer --connect`` against ``mpa-emu peer --listen``, MPA v2 (RFC 6581
    block, IRD/ORD 16, P2P), C=1, private data both ways, Read RTR (zero-length Read
    Request and Read Response), one Send with correct CRC32c.
real_peer_v1_no_crc.pcap
    ``mpa-emu peer`` pair, ``--mpa-rev 1 --no-crc``, private data both ways, one Send
    whose CRC field is zero.

Timestamps, ports of the peer captures, ISNs and TCP timestamp values differ per run:
the committed captures are the fixtures and this script documents how they were made.
Each run also rewrites the sidecar skeleton facts it decodes (see pcaps/real/README.md).

Usage: python tools/make_real_captures.py [--out DIR] [--sidecars-only] [NAME ...]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import crc32c

from mpa_emu.live.netns import Namespace, entered, run_ip

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_capture_facts import capture_facts

CLIENT_IP, SERVER_IP = "192.0.2.1", "192.0.2.2"
SERVER_PORT = 31000
CLIENT_PORT, SECOND_CLIENT_PORT = 40001, 40002
KEY_REQ, KEY_REP = b"MPA ID Req Frame", b"MPA ID Rep Frame"
FLAG_M, FLAG_C, FLAG_R = 0x80, 0x40, 0x20

SIOCETHTOOL = 0x8946
ETHTOOL_STXCSUM = 0x17
ETHTOOL_STSO = 0x1F


# ---- MPA / DDP / RDMAP bytes (RFC 5044, 5041, 5040) ---------------------------------

def mpa_frame(key: bytes, flags: int, rev: int, private_data: bytes) -> bytes:
    """RFC 5044 section 7.1: key, flags, Rev, PD_Length (big-endian), private data."""
    return key + struct.pack(">BBH", flags, rev, len(private_data)) + private_data


def fpdu(ulpdu: bytes, with_crc: bool) -> bytes:
    """RFC 5044 section 6: ULPDU_Length, ULPDU, pad, CRC32c (little-endian) or zero."""
    body = struct.pack(">H", len(ulpdu)) + ulpdu
    body += bytes(-len(body) % 4)
    crc = crc32c.crc32c(body) if with_crc else 0
    return body + struct.pack("<I", crc)


def untagged(rdmap_opcode: int, qn: int, msn: int, mo: int = 0) -> bytes:
    """RFC 5041 section 4.3 untagged header with L=1, DV=1; RFC 5040 section 4.3 puts
    RV=1 and the opcode in the first RsvdULP byte."""
    return struct.pack(">BBIIII", 0x41, 0x40 | rdmap_opcode, 0, qn, msn, mo)


def send_ulpdu(payload: bytes, msn: int) -> bytes:
    """RDMA Send (opcode 3) on QN 0 (RFC 5040 section 5.3)."""
    return untagged(3, 0, msn) + payload


def read_request_ulpdu(msn: int, sink_stag: int, sink_to: int, size: int,
                       src_stag: int, src_to: int) -> bytes:
    """RDMA Read Request (opcode 1) on QN 1 with the RFC 5040 section 4.4 header."""
    return untagged(1, 1, msn) + struct.pack(">IQIIQ", sink_stag, sink_to, size,
                                             src_stag, src_to)


def payload(text: str, size: int) -> bytes:
    """Deterministic Send payload: ``text`` repeated to ``size`` bytes."""
    raw = text.encode()
    return (raw * (size // len(raw) + 1))[:size]


# ---- the lab ------------------------------------------------------------------------

def _ethtool_set(dev: str, cmd: int, value: int) -> None:
    data = ctypes.create_string_buffer(struct.pack("II", cmd, value))
    ifreq = struct.pack("16sP16x", dev.encode(), ctypes.addressof(data))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifreq)


class Lab:
    """Client and server namespaces joined by a veth pair; tcpdump on the client side."""

    def __init__(self) -> None:
        tag = f"{os.getpid()}"
        self.client = Namespace(f"rcapc{tag}")
        self.server = Namespace(f"rcaps{tag}")
        self.cdev, self.sdev = f"rcc{tag}", f"rcs{tag}"
        run_ip(["link", "add", self.cdev, "netns", self.client.name, "type", "veth",
                "peer", "name", self.sdev, "netns", self.server.name])
        self.client.ip("addr", "add", f"{CLIENT_IP}/24", "dev", self.cdev)
        self.server.ip("addr", "add", f"{SERVER_IP}/24", "dev", self.sdev)
        with entered(self.server.name):
            _ethtool_set(self.sdev, ETHTOOL_STXCSUM, 0)
        with entered(self.client.name):
            _ethtool_set(self.cdev, ETHTOOL_STSO, 0)
        self.client.ip("link", "set", self.cdev, "up")
        self.server.ip("link", "set", self.sdev, "up")

    def close(self) -> None:
        self.client.close()
        self.server.close()

    @contextlib.contextmanager
    def capture(self, path: Path) -> Iterator[None]:
        """tcpdump on the client's veth for the duration of the block."""
        tcpdump = shutil.which("tcpdump")
        if tcpdump is None:
            raise SystemExit("error: tcpdump is not installed")
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.client.name, tcpdump, "-i", self.cdev, "-n",
             "--immediate-mode", "-U", "-s", "0", "-w", str(path), "tcp"],
            stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        line = proc.stderr.readline()
        if "listening on" not in line:
            proc.kill()
            raise SystemExit(f"error: tcpdump did not start: {line.strip()}")
        try:
            yield
            time.sleep(0.5)
        finally:
            # SIGTERM, not SIGINT: a script started with `&` hands its children SIGINT
            # ignored. tcpdump writes out the capture on either.
            proc.send_signal(signal.SIGTERM)
            proc.wait(10)


def in_ns(name: str, fn: Callable[[], Any]) -> threading.Thread:
    """Run ``fn`` in a thread inside namespace ``name``; errors end the script."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with entered(name):
                fn()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.errors = errors  # type: ignore[attr-defined]
    return thread


def join(*threads: threading.Thread) -> None:
    for thread in threads:
        thread.join(20)
        if thread.is_alive():
            raise SystemExit("error: an endpoint thread is still running after 20 s")
        errors = thread.errors  # type: ignore[attr-defined]
        if errors:
            raise errors[0]


def listener(ready: threading.Event) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((SERVER_IP, SERVER_PORT))
    sock.listen(4)
    ready.set()
    return sock


def connect(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((CLIENT_IP, port))
    sock.settimeout(10)
    sock.connect((SERVER_IP, SERVER_PORT))
    return sock


def recv_exact(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError(f"EOF after {len(data)} of {count} bytes")
        data += chunk
    return data


def recv_mpa(sock: socket.socket) -> bytes:
    head = recv_exact(sock, 20)
    return head + recv_exact(sock, struct.unpack(">H", head[18:20])[0])


def recv_fpdu(sock: socket.socket) -> bytes:
    head = recv_exact(sock, 2)
    ulen = struct.unpack(">H", head)[0]
    return head + recv_exact(sock, ulen + (-(ulen + 2) % 4) + 4)


def settle() -> None:
    """Let the previous segment (and its ACK) cross the veth before the next write."""
    time.sleep(0.05)


# ---- the scenarios ------------------------------------------------------------------

V1_CLIENT_PD = b"v1 client: plain socket, CRC off"
V1_SERVER_PD = b"v1 server: userspace iWARP stack"


def v1_crc_off_zero_crc(lab: Lab) -> None:
    ready = threading.Event()

    def server() -> None:
        with listener(ready) as lsock:
            conn, _ = lsock.accept()
            request = recv_mpa(conn)
            assert request[:16] == KEY_REQ and request[16] == 0 and request[17] == 1
            conn.sendall(mpa_frame(KEY_REP, 0, 1, V1_SERVER_PD))
            for _ in range(3):
                recv_fpdu(conn)
            settle()
            conn.close()  # FIN; later client data draws the RSTs
            time.sleep(1.0)

    def client() -> None:
        sock = connect(CLIENT_PORT)
        sock.sendall(mpa_frame(KEY_REQ, 0, 1, V1_CLIENT_PD))
        recv_mpa(sock)
        settle()
        sock.sendall(fpdu(send_ulpdu(payload("first Send after MPA v1 ", 48), 1), False))
        settle()
        sock.sendall(fpdu(send_ulpdu(payload("second Send, CRC field zero ", 61), 2),
                          False))
        settle()
        sock.sendall(fpdu(read_request_ulpdu(1, 0x00001234, 0x1000, 4096, 0x00005678,
                                             0x2000), False))
        assert sock.recv(100) == b""  # the server's FIN
        settle()
        sock.sendall(fpdu(send_ulpdu(payload("data after the server's FIN ", 2000), 3),
                          False))
        time.sleep(0.5)
        sock.close()

    srv = in_ns(lab.server.name, server)
    ready.wait(5)
    join(in_ns(lab.client.name, client), srv)


CRC_CLIENT_PD = b"v1 client: CRC on, C=1"
CRC_SERVER_PD = b"v1 server: CRC on, C=1"


def _crc_on_exchange(sock: socket.socket, client_sends: int) -> None:
    sock.sendall(mpa_frame(KEY_REQ, FLAG_C, 1, CRC_CLIENT_PD))
    recv_mpa(sock)
    settle()
    for msn in range(1, client_sends + 1):
        sock.sendall(fpdu(send_ulpdu(payload(f"client Send {msn} with CRC32c ", 40), msn),
                          True))
        settle()
    recv_fpdu(sock)


def _crc_on_server(conn: socket.socket, client_sends: int) -> None:
    request = recv_mpa(conn)
    assert request[:16] == KEY_REQ and request[16] == FLAG_C
    conn.sendall(mpa_frame(KEY_REP, FLAG_C, 1, CRC_SERVER_PD))
    for _ in range(client_sends):
        recv_fpdu(conn)
    conn.sendall(fpdu(send_ulpdu(payload("server Send 1 with CRC32c ", 44), 1), True))
    assert conn.recv(100) == b""  # the client's FIN
    settle()
    conn.close()


def v1_crc_on(lab: Lab) -> None:
    ready = threading.Event()

    def server() -> None:
        with listener(ready) as lsock:
            conn, _ = lsock.accept()
            _crc_on_server(conn, 2)

    def client() -> None:
        sock = connect(CLIENT_PORT)
        _crc_on_exchange(sock, 2)
        settle()
        sock.close()
        time.sleep(0.3)

    srv = in_ns(lab.server.name, server)
    ready.wait(5)
    join(in_ns(lab.client.name, client), srv)


PLAIN_REQUEST = b"HELLO 31000: this connection speaks plain text, not MPA\r\n"
PLAIN_REPLY = b"ERR this port expects an MPA request\r\n"


def second_non_mpa_conn(lab: Lab) -> None:
    ready = threading.Event()

    def server() -> None:
        with listener(ready) as lsock:
            conn, _ = lsock.accept()
            _crc_on_server(conn, 1)
            conn2, _ = lsock.accept()
            assert recv_exact(conn2, len(PLAIN_REQUEST)) == PLAIN_REQUEST
            conn2.sendall(PLAIN_REPLY)
            assert conn2.recv(100) == b""
            conn2.close()

    def client() -> None:
        sock = connect(CLIENT_PORT)
        _crc_on_exchange(sock, 1)
        settle()
        sock.close()
        time.sleep(0.3)
        sock2 = connect(SECOND_CLIENT_PORT)
        sock2.sendall(PLAIN_REQUEST)
        assert recv_exact(sock2, len(PLAIN_REPLY)) == PLAIN_REPLY
        settle()
        sock2.close()
        time.sleep(0.3)

    srv = in_ns(lab.server.name, server)
    ready.wait(5)
    join(in_ns(lab.client.name, client), srv)


def _peer_pair(lab: Lab, args: list[str]) -> None:
    cli = [sys.executable, "-m", "mpa_emu", "peer"]
    responder = subprocess.Popen(
        [*cli, "--netns", lab.server.name, "--listen", str(SERVER_PORT), "--bind",
         SERVER_IP, "--private-data", "peer responder private data", "--hold", "1",
         *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(1.0)
    initiator = subprocess.run(
        [*cli, "--netns", lab.client.name, "--connect", f"{SERVER_IP}:{SERVER_PORT}",
         "--private-data", "peer initiator private data",
         "--send", "Send from mpa-emu peer over Linux TCP", *args],
        capture_output=True, text=True, timeout=30, check=False)
    out, _ = responder.communicate(timeout=30)
    if initiator.returncode != 0 or responder.returncode != 0:
        raise SystemExit(f"error: peer failed:\n{initiator.stdout}{initiator.stderr}\n{out}")


def peer_v2(lab: Lab) -> None:
    _peer_pair(lab, ["--mpa-rev", "2", "--rtr", "read"])


def peer_v1_no_crc(lab: Lab) -> None:
    _peer_pair(lab, ["--mpa-rev", "1", "--no-crc"])


SCENARIOS: dict[str, Callable[[Lab], None]] = {
    "real_v1_crc_off_zero_crc": v1_crc_off_zero_crc,
    "real_second_non_mpa_conn": second_non_mpa_conn,
    "real_v1_crc_on": v1_crc_on,
    "real_peer_v2": peer_v2,
    "real_peer_v1_no_crc": peer_v1_no_crc,
}


SHOWS = {
    "real_v1_crc_off_zero_crc": "Linux TCP client (SACK/TS/WS, TX checksum offload) speaking "
    "MPA v1 C=0 to a userspace server; Sends and a Read Request with zero CRC fields; "
    "server FIN, client data after the FIN, two RSTs from the server",
    "real_second_non_mpa_conn": "an MPA v1 C=1 connection, then a second, plain-text TCP "
    "connection from the same client to the same server port",
    "real_v1_crc_on": "MPA v1 with C=1 on both sides and correct CRC32c FPDUs both ways, "
    "graceful close",
    "real_peer_v2": "mpa-emu peer initiator and responder over Linux TCP: MPA v2, C=1, "
    "IRD/ORD 16, P2P Read RTR, one Send, private data both ways",
    "real_peer_v1_no_crc": "mpa-emu peer pair over Linux TCP: MPA v1 with --no-crc, "
    "private data both ways, one Send with a zero CRC field",
}


def write_sidecar(name: str, out: Path) -> None:
    """Write NAME.json: the facts decoded from the capture's bytes by real_capture_facts,
    keeping the hand-written ``replays`` expectations of an existing sidecar."""
    path = out / f"{name}.pcap"
    sidecar = {"capture": path.name, "shows": SHOWS[name], "captured_on": CLIENT_IP,
               "made_by": "tools/make_real_captures.py", **capture_facts(path)}
    old = out / f"{name}.json"
    if old.is_file():
        # The replay expectations are written by hand from the kernel source: keep them.
        kept = json.loads(old.read_text()).get("replays")
        if kept is not None:
            sidecar["replays"] = kept
    (out / f"{name}.json").write_text(json.dumps(sidecar, indent=1) + "\n")


def make(name: str, out: Path) -> Path:
    """Run one scenario in a fresh lab, write the capture and its sidecar, return the
    capture's path."""
    path = out / f"{name}.pcap"
    lab = Lab()
    try:
        with lab.capture(path):
            SCENARIOS[name](lab)
    finally:
        lab.close()
    os.chmod(path, 0o644)
    write_sidecar(name, out)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parent.parent / "pcaps" / "real")
    parser.add_argument("names", nargs="*", choices=[*SCENARIOS, []], metavar="NAME")
    parser.add_argument("--sidecars-only", action="store_true",
                        help="rewrite the sidecars from the existing captures")
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
