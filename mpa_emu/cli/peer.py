"""``mpa-emu peer``: an MPA peer over ordinary kernel sockets (the kernel does TCP)."""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import json
import socket
import sys
from collections.abc import Callable

from mpa_emu.cli import CliError
from mpa_emu.cli.values import check_seconds
from mpa_emu.live import netns, peer
from mpa_emu.live.peer_stacks import PeerStack, peer_stack
from mpa_emu.stacks import DEFAULT_STACK, STACKS
from mpa_emu.wire import mpa

HELP = "MPA v1/v2 initiator or responder over kernel TCP sockets, to poke an iWARP node"


EPILOG = """\
The kernel does TCP; the peer frames MPA (v1 or v2 with the RFC 6581 block), sends the
RTR and prints every frame received. Guide: docs/live.md.

exit codes: 0 the MPA exchange completed (accepted or rejected), 1 it failed (refused,
reset, timeout, malformed frame), 2 bad option or namespace, 130 interrupted
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``mpa-emu peer``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--listen", type=int, metavar="PORT",
                      help="accept one connection on PORT and answer its MPA request")
    mode.add_argument("--connect", metavar="IP:PORT",
                      help="connect and send an MPA request ([v6addr]:PORT for IPv6)")
    parser.add_argument("--count", type=int, default=1, metavar="N",
                        help="with --listen: answer N connections one after another "
                             "(0: until interrupted; default 1)")
    parser.add_argument("--netns", metavar="NAME",
                        help="open the socket inside this network namespace")
    parser.add_argument("--bind", default="", metavar="IP",
                        help="listen on this address only (default: all, IPv4 and IPv6)")
    parser.add_argument("--stack", choices=list(STACKS),
                        help="frame MPA as this stack does (revision, C, P2P, RTRs, private "
                             "data limit; docs/stacks/); options below still override")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a parameter of --stack, named as the kernel names it "
                             "(repeatable)")
    parser.add_argument("--mpa-rev", type=int, choices=(1, 2),
                        help="MPA revision to offer (default 2, RFC 6581; a --stack of its "
                             "own dialect: its revision, 1 or 2 frame RFC 5044's layout)")
    parser.add_argument("--cookie", type=_number, metavar="N",
                        help="the cookie of the 8-byte extension a --stack of its own "
                             "dialect writes after the header (erdma: the QP's cookie; "
                             "default 0)")
    parser.add_argument("--ird", type=int, default=16, help="IRD advertised (v2, default 16)")
    parser.add_argument("--ord", type=int, default=16, help="ORD advertised (v2, default 16)")
    data = parser.add_mutually_exclusive_group()
    data.add_argument("--private-data", default="", metavar="TEXT",
                      help="private data as text (UTF-8)")
    data.add_argument("--private-data-hex", default="", metavar="HEX",
                      help="private data as hex bytes")
    parser.add_argument("--reject", action="store_true",
                        help="responder: reject the request (R flag) and close")
    parser.add_argument("--rtr", choices=("both", "read", "write", "none"),
                        help="initiator: RTR types offered; responder: preferred type")
    parser.add_argument("--no-p2p", action="store_true",
                        help="clear the RFC 6581 peer-to-peer bit (irdma resets such peers)")
    parser.add_argument("--no-crc", action="store_true", help="clear the C flag")
    parser.add_argument("--literal-ird-ord", action="store_true",
                        help="responder: advertise --ird/--ord as given instead of lowering "
                             "ORD to the initiator's IRD (RFC 6581 section 5)")
    parser.add_argument("--send", metavar="TEXT",
                        help="send one RDMA Send FPDU with TEXT after the RTR exchange")
    parser.add_argument("--timeout", type=float, default=5.0, metavar="S",
                        help="seconds to wait for each expected frame (default 5)")
    parser.add_argument("--hold", type=float, default=0.0, metavar="S",
                        help="keep the connection open S seconds, printing FPDUs received")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object with the whole report instead of lines")


def _number(text: str) -> int:
    """An integer in any base Python reads (``0x1234``, ``4660``)."""
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def parse_endpoint(text: str) -> tuple[str, int]:
    """``IP:PORT`` or ``[IPv6]:PORT`` into (ip, port); :class:`CliError` when malformed."""
    host, sep, port_text = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        # "fe80::1:80" is itself an IPv6 address: only brackets say where the port is.
        raise CliError(f"an IPv6 address with a port needs brackets, as in [{host}]:"
                       f"{port_text}; got {text!r}")
    try:
        ipaddress.ip_address(host)
        port = int(port_text)
    except ValueError:
        raise CliError(f"expected IP:PORT or [IPv6]:PORT, got {text!r}") from None
    if not sep or not 0 < port < 65536:
        raise CliError(f"port must be 1..65535 in {text!r}")
    return host, port


def _stack(args: argparse.Namespace) -> PeerStack:
    """The settings --stack gives (irdma's without it), --param values checked."""
    if args.param and not args.stack:
        raise CliError("--param goes with --stack NAME")
    raw: dict[str, object] = {}
    for pair in args.param:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise CliError(f"--param needs KEY=VALUE, got {pair!r}")
        text = value.strip()
        lowered = text.lower()
        if lowered in ("true", "false"):
            raw[key.strip()] = int(lowered == "true")
        else:
            try:
                raw[key.strip()] = int(text, 0)
            except ValueError:
                raw[key.strip()] = text
    name = args.stack or DEFAULT_STACK
    try:
        preset = peer_stack(name, raw)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if preset.rev not in (1, 2) and preset.ext is None:
        # Only RFC 5044 section 7.1's layout, or a dialect whose extension the framing
        # describes (erdma's struct erdma_mpa_ext), can be written.
        raise CliError(f"--stack {name}: it frames MPA revision {preset.rev} without a "
                       "known layout; this peer frames revisions 1 and 2 and erdma's 129")
    return preset


def _options(args: argparse.Namespace) -> peer.PeerOptions:
    preset = _stack(args)
    if args.mpa_rev is None:
        args.mpa_rev = preset.rev
    ext = preset.ext if args.mpa_rev == preset.rev else None
    if args.cookie is not None:
        if ext is None:
            raise CliError("--cookie goes with a --stack whose frames carry an extension "
                           "(erdma), at its own revision")
        if not 0 <= args.cookie <= 0xFFFFFFFF:
            raise CliError(f"--cookie must be 0..0xffffffff, got {args.cookie}")
        ext = dataclasses.replace(ext, cookie=args.cookie)
    if args.rtr is None:
        args.rtr = preset.rtr
    if args.private_data_hex:
        try:
            private = bytes.fromhex(args.private_data_hex)
        except ValueError:
            raise CliError(f"--private-data-hex is not hex: {args.private_data_hex!r}") from None
    else:
        private = args.private_data.encode()
    limit = mpa.MAX_PRIV_DATA_LEN - (mpa.RTR_MSG_SIZE if args.mpa_rev == 2 else 0)
    if len(private) > limit:
        raise CliError(f"private data is {len(private)} bytes; MPA rev {args.mpa_rev} "
                       f"allows {limit}")
    if args.stack and len(private) > preset.max_private_data:
        raise CliError(f"private data is {len(private)} bytes; {args.stack} sends at most "
                       f"{preset.max_private_data}")
    for name in ("ird", "ord"):
        value = getattr(args, name)
        if not 0 <= value <= mpa.IRD_ORD_MASK:
            raise CliError(f"--{name} must be 0..{mpa.IRD_ORD_MASK}, got {value}")
    if args.listen is not None and not 0 < args.listen < 65536:
        raise CliError(f"--listen port must be 1..65535, got {args.listen}")
    if args.count < 0:
        raise CliError("--count must be 0 (no limit) or more")
    if args.bind:
        try:
            ipaddress.ip_address(args.bind)
        except ValueError:
            raise CliError(f"--bind: not an IPv4 or IPv6 address: {args.bind!r}") from None
    check_seconds("--timeout", args.timeout, positive=True)
    check_seconds("--hold", args.hold)
    return peer.PeerOptions(
        rev=args.mpa_rev, ird=args.ird, ord=args.ord, private_data=private,
        reject=args.reject, p2p=preset.p2p and not args.no_p2p, rtr=args.rtr,
        crc=preset.crc and not args.no_crc,
        negotiate=not args.literal_ird_ord,
        v1_rtr=preset.v1_rtr if args.stack and not args.no_p2p else "none",
        v1_rtr_expected=bool(args.stack) and preset.v1_wait_rtr,
        send=args.send.encode() if args.send is not None else None,
        ext=ext, timeout=args.timeout, hold=args.hold)


def run(args: argparse.Namespace) -> int:
    """Run one exchange and print what was received. Exit 0 when the MPA exchange
    completed (accepted or rejected), 1 when it failed."""
    options = _options(args)
    say = _quiet if args.json else _print
    try:
        if args.connect:
            host, port = parse_endpoint(args.connect)
            with netns.entered_if(args.netns):  # a socket stays in the namespace it was created in
                sock = peer.open_connection(host, port, options.timeout)
            say(f"connected {peer.endpoint_text(sock.getsockname())} -> {args.connect}")
            with sock:
                report = peer.run_initiator(sock, options, log=say)
        else:
            with netns.entered_if(args.netns):
                listener = peer.open_listener(args.listen, args.bind)
            return _serve(listener, args, options, say)
    except netns.NetnsError as exc:
        raise CliError(str(exc)) from None
    except peer.PeerError as exc:
        if args.json:
            print(json.dumps({"error": str(exc)}), flush=True)
        else:
            print(f"error: {exc}", flush=True)
        return 1
    if args.json:
        print(json.dumps(report.to_dict(), sort_keys=True), flush=True)
    elif report.error is None and report.close == "open":
        _print("closing (FIN)")
    return 0 if report.error is None else 1


def _serve(listener: socket.socket, args: argparse.Namespace, options: peer.PeerOptions,
           say: Callable[[str], None]) -> int:
    """Answer ``--count`` connections in turn; exit 1 if any exchange failed."""
    failed = False
    served = 0
    with listener:
        # Always printed: scripts wait for this line before connecting.
        print(f"listening on port {args.listen}", flush=True,
              file=sys.stderr if args.json else sys.stdout)
        while args.count == 0 or served < args.count:
            sock = peer.accept_one(listener, options.timeout if args.count == 1 else None)
            served += 1
            with sock:
                try:
                    name = peer.endpoint_text(sock.getpeername())
                except OSError as exc:
                    # reset between the handshake and accept(): nothing to answer
                    say(f"accepted a connection already gone: {exc.strerror or exc}")
                    failed = True
                    continue
                say(f"accepted {name}")
                report = peer.run_responder(sock, options, log=say)
            if args.json:
                print(json.dumps(report.to_dict(), sort_keys=True), flush=True)
            elif report.error is None and report.close == "open":
                say("closing (FIN)")
            failed |= report.error is not None
    return 1 if failed else 0


def _quiet(line: str) -> None:
    del line


def _print(line: str) -> None:
    print(line, flush=True)
