"""``mpa-emu live``: an emulated iWARP host (any registered stack) on a TAP device,
talking to the Linux stack."""

from __future__ import annotations

import argparse
import ipaddress
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, TextIO

from mpa_emu.cli import CliError
from mpa_emu.cli.peer import parse_endpoint
from mpa_emu.cli.values import check_range, check_seconds, check_writable, seed
from mpa_emu.live import driver, netns, tap
from mpa_emu.live.console import ObservedTrace, nic_line, rdma_cm_line
from mpa_emu.live.sinks import PcapngSink
from mpa_emu.ranges import FRONT_VERB_RANGES
from mpa_emu.stacks import DEFAULT_STACK, STACKS, parse_params
from mpa_emu.stacks.base import ConfigRecord, HostConfig
from mpa_emu.stacks.contract.api import CoreApi
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.stacks.contract.trace import TraceRecord
from mpa_emu.views.describe import upcall_line
from mpa_emu.wire.addr import ip_bytes, mac_bytes

HELP = (f"run an emulated iWARP host (--stack {', '.join(list(STACKS)[:-1])} or "
        f"{list(STACKS)[-1]}) on a TAP device against the real Linux TCP stack")

_RECORDS: dict[str, ConfigRecord] = {name: st.config for name, st in STACKS.items()
                                     if st.config is not None}
"""The stacks with a configuration record (irdma's CmConfig), which --profile,
--retrans and --host-stack-rst set."""
_DEFAULT_RECORD = _RECORDS.get(DEFAULT_STACK) or next(iter(_RECORDS.values()))
"""The record --profile's default and --retrans's range come from (the default
stack's)."""
DEFAULT_MAC = "02:6d:70:61:00:02"


EPILOG = """\
Needs root (a TAP device). Runs until --duration or Ctrl-C/SIGTERM, then closes every
connection and flushes the capture and trace. Prints every upcall and what the NIC did
(AEs, Terminates sent and received, the QP's close) as it happens. Guide and examples:
docs/live.md.

exit codes: 0 ran and stopped (--duration or SIGTERM), 1 a --connect failed or ended
with a non-zero CONNECT_REPLY, 2 bad option, unusable TAP or namespace, 130 stopped by
Ctrl-C (SIGINT) with no connect failure

Started with SIGINT ignored (a job started with `&` from a script), it keeps ignoring
Ctrl-C, as the shell asks; SIGTERM stops it.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``mpa-emu live``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("--tap", required=True, metavar="NAME",
                        help="TAP interface to create or attach to (the Linux side)")
    parser.add_argument("--netns", metavar="NAME",
                        help="create the TAP inside this existing network namespace "
                             "(ip netns add NAME) instead of the current one")
    parser.add_argument("--address", action="append", required=True, metavar="IP[@VLAN]",
                        help="address of the emulated host (repeatable, IPv4 or IPv6); IP@VLAN "
                             "puts it on an 802.1Q VLAN")
    parser.add_argument("--mac", default=DEFAULT_MAC,
                        help=f"MAC of the emulated host (default {DEFAULT_MAC})")
    parser.add_argument("--host-address", action="append", default=[], metavar="IP/PREFIX",
                        help="also put this address on the Linux side of the TAP and bring "
                             "it up (repeatable; otherwise configure it yourself)")
    parser.add_argument("--listen", action="append", type=int, default=[], metavar="PORT",
                        help="listen on PORT on every address (repeatable)")
    parser.add_argument("--connect", action="append", default=[], metavar="IP:PORT",
                        help="connect to IP:PORT from the emulated host (repeatable)")
    policy = parser.add_mutually_exclusive_group()
    policy.add_argument("--accept", action="store_true", help="accept requests (default)")
    policy.add_argument("--reject", action="store_true", help="reject requests")
    parser.add_argument("--delay", type=float, default=0.0, metavar="SECONDS",
                        help="answer each request SECONDS after it arrives (default 0)")
    parser.add_argument("--stack", default=DEFAULT_STACK, choices=list(STACKS),
                        help="the iWARP stack the emulated host runs (default irdma; "
                             "docs/stacks/)")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a parameter of --stack, named as the kernel names it "
                             "(repeatable; e.g. --stack siw --param peer_to_peer=1)")
    parser.add_argument("--profile", default=_DEFAULT_RECORD.default_profile,
                        choices=sorted({p for r in _RECORDS.values() for p in r.profiles}),
                        help=f"{' or '.join(_RECORDS)}'s CM configuration (default "
                             f"{_DEFAULT_RECORD.default_profile})")
    parser.add_argument("--retrans", type=int, metavar="N",
                        help="retransmissions before giving up (default: the profile's, "
                             "32 as mainline since v6.3; 8 before)")
    parser.add_argument("--host-stack-rst", action="store_true",
                        help="a SYN matching no listener gets a RST from the host stack")
    parser.add_argument("--private-data", default="", metavar="TEXT",
                        help="private data of our MPA requests, replies and rejects")
    parser.add_argument("--ird", type=int, default=16, help="IRD of connects (default 16)")
    parser.add_argument("--ord", type=int, default=16, help="ORD of connects (default 16)")
    parser.add_argument("-o", "--output", metavar="FILE.pcapng",
                        help="capture every frame crossing the TAP, with comments")
    parser.add_argument("--trace", metavar="FILE.jsonl", help="write the structured trace")
    parser.add_argument("--device-reset-at", type=float, metavar="SECONDS",
                        help="reset the emulated NIC this long after start (rf->reset: "
                             "every connection closed, nothing sent)")
    parser.add_argument("--duration", type=float, metavar="SECONDS",
                        help="stop after SECONDS (default: until Ctrl-C)")
    parser.add_argument("--seed", type=seed, default=0, metavar="N",
                        help="seed of the CM core (ISNs; default 0)")
    parser.add_argument("--grace", type=float, default=1.0, metavar="SECONDS",
                        help="time given to closing connections at shutdown (default 1)")


def parse_address(text: str) -> tuple[bytes, int | None]:
    """``IP`` or ``IP@VLAN`` into (packed address, VLAN id or None); CliError if bad."""
    ip_part, sep, vlan_part = text.partition("@")
    try:
        ip = ip_bytes(ip_part)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if not sep:
        return ip, None
    if not vlan_part.isdigit() or not 0 <= int(vlan_part) <= 4094:
        raise CliError(f"VLAN id must be 0..4094 in {text!r}")
    return ip, int(vlan_part)


def _check(args: argparse.Namespace) -> None:
    for port in args.listen:
        check_range("--listen port", port, FRONT_VERB_RANGES["port"])
    for cidr in args.host_address:
        try:
            ipaddress.ip_interface(cidr)
            if "/" not in cidr:
                raise ValueError(cidr)
        except ValueError:
            raise CliError(f"--host-address needs IP/PREFIX, got {cidr!r}") from None
    check_seconds("--duration", args.duration, positive=True)
    check_seconds("--delay", args.delay)
    check_seconds("--grace", args.grace)
    check_seconds("--device-reset-at", args.device_reset_at)
    record = _RECORDS.get(args.stack)
    # --retrans is checked first whatever the stack
    check_range("--retrans", args.retrans, (record or _DEFAULT_RECORD).ranges["retrans"])
    check_range("--ird", args.ird, FRONT_VERB_RANGES["ird"])
    check_range("--ord", args.ord, FRONT_VERB_RANGES["ord"])
    # Before the TAP exists: a typo in an output path must not leave a device behind.
    check_writable("-o", args.output)
    check_writable("--trace", args.trace)
    if record is None:
        record_only = [name for name, used in (("--profile",
                                                args.profile != _DEFAULT_RECORD.default_profile),
                                               ("--retrans", args.retrans is not None),
                                               ("--host-stack-rst", args.host_stack_rst))
                       if used]
        if record_only:
            owners = " or ".join(f"{name}'s" for name in _RECORDS)
            raise CliError(f"{', '.join(record_only)} set {owners} configuration; "
                           f"--stack {args.stack} takes --param KEY=VALUE")
    args.stack_params = _stack_params(args.stack, args.param)
    if len(args.private_data.encode()) > 255:
        # irdma_reject: pdata_len is a u8; irdma_connect copies into a 512-byte buffer.
        raise CliError("--private-data is limited to 255 bytes")


def _stack_params(stack: str, pairs: list[str]) -> dict[str, int | bool]:
    """``--param KEY=VALUE`` options checked by the stack's registry entry."""
    raw: dict[str, object] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise CliError(f"--param needs KEY=VALUE, got {pair!r}")
        raw[key.strip()] = _param_value(value.strip())
    try:
        return parse_params(stack, raw)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _param_value(text: str) -> object:
    """``1``, ``0x10``, ``true``/``false`` as numbers; anything else as given, for the
    registry to refuse by name."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return int(lowered == "true")
    try:
        return int(text, 0)
    except ValueError:
        return text


def _make_core(args: argparse.Namespace, mac: bytes, trace: ObservedTrace) -> CoreApi:
    """The core of a stack with a configuration record from --profile (irdma's
    CmCore), or the --stack's core with its --param values."""
    record = _RECORDS.get(args.stack)
    if record is not None and not args.param:
        return record.make_core("live", mac, _config(args, record), seed=args.seed,
                                trace=trace)
    return STACKS[args.stack].make_core("live", mac, args.stack_params, seed=args.seed,
                                        trace=trace)


def _config(args: argparse.Namespace, record: ConfigRecord) -> HostConfig:
    overrides: dict[str, Any] = {"host_stack_rst": args.host_stack_rst}
    if args.retrans is not None:
        overrides["retrans"] = args.retrans
    return record.profiles[args.profile](**overrides)


def run(args: argparse.Namespace) -> int:
    """Run until ``--duration`` passes or SIGINT/SIGTERM; then close every connection
    and flush the capture."""
    _check(args)
    addresses = [parse_address(text) for text in args.address]
    try:
        mac = mac_bytes(args.mac)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    targets = [parse_endpoint(text) for text in args.connect]
    private = args.private_data.encode()
    try:
        with netns.entered_if(args.netns):  # the TAP belongs to the namespace it is created in
            device = tap.Tap(args.tap)
    except (tap.TapError, netns.NetnsError) as exc:
        raise CliError(str(exc)) from None
    trace_file: TextIO | None = None
    try:
        with netns.entered_if(args.netns):
            tap.set_link_up(device.name)
        for cidr in args.host_address:
            netns.run_ip(["addr", "replace", cidr, "dev", device.name], args.netns)
        trace_file = open(args.trace, "w") if args.trace else None  # noqa: SIM115
        trace = ObservedTrace(stream=trace_file, keep=False, observer=_print_nic)
        capture = PcapngSink(args.output, device.name,
                             f"emulated {args.stack} host {args.mac}") if args.output else None
        core = _make_core(args, mac, trace)
        host = driver.LiveHost(device, core, mac, trace=trace, capture=capture)
        return _serve(host, args, addresses, targets, private)
    except (tap.TapError, netns.NetnsError, OSError) as exc:
        raise CliError(str(exc)) from None
    finally:
        device.close()
        if trace_file is not None:
            trace_file.close()


def _print_nic(record: TraceRecord) -> None:
    line = nic_line(record)
    if line is not None:
        print(line, flush=True)


def _serve(host: driver.LiveHost, args: argparse.Namespace,
           addresses: list[tuple[bytes, int | None]],
           targets: list[tuple[str, int]], private: bytes) -> int:
    stop = {"now": False, "interrupted": False}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop["now"] = True
        stop["interrupted"] = stop["interrupted"] or signum == signal.SIGINT
        host.wake()

    previous: dict[int, Callable[[int, FrameType | None], Any] | int | None] = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        # A signal ignored from the start stays ignored, as Python leaves SIGINT and as
        # the shell asks of a job started with `&` from a script: Ctrl-C meant for the
        # foreground job must not stop it. SIGTERM still does.
        if signal.getsignal(sig) is not signal.SIG_IGN:
            previous[sig] = signal.signal(sig, on_signal)
    failed = False
    ours: set[int] = set()

    def on_upcall(_host: driver.LiveHost, upcall: Upcall) -> None:
        nonlocal failed
        print(upcall_line(upcall), flush=True)
        steps = _host.ulp_steps
        if steps and steps[-1].upcall is upcall:
            print(rdma_cm_line(steps[-1]), flush=True)
        if (upcall.event == IwEvent.CONNECT_REPLY and upcall.conn in ours
                and upcall.status != 0):
            failed = True  # irdma_connect's CONNECT_REPLY carried an error

    try:
        host.on_upcall(on_upcall)
        host.on_failure(lambda _host, failure: print(
            f"t={failure.time_ns / 1e9:.3f}s {failure.verb} refused: {failure.message}",
            file=sys.stderr, flush=True))
        for ip, vlan in addresses:
            host.add_address(ip, vlan)
        delay_ns = round(args.delay * 1e9)
        policy: driver.LivePolicy = driver.Reject(private, delay_ns) if args.reject \
            else driver.Accept(private, delay_ns)
        for port in args.listen:
            for family_v6 in sorted({len(ip) == 16 for ip, _vlan in addresses}):
                host.listen(port, None, policy=policy, ipv6=family_v6)
            print(f"listening on port {port}", flush=True)
        for ip_text_, port in targets:
            try:
                conn = host.connect(ip_bytes(ip_text_), port, private_data=private,
                                    ird=args.ird, ord=args.ord)
                ours.add(conn)
                # A looped-back connect can be answered before connect() returns.
                failed = failed or any(u.conn == conn and u.status != 0
                                       for u in host.events(IwEvent.CONNECT_REPLY))
                print(f"connecting to {ip_text_}:{port} (conn {conn})", flush=True)
            except (driver.LiveError, ValueError) as exc:
                print(f"connect to {ip_text_}:{port} failed: {exc}", file=sys.stderr, flush=True)
                failed = True
        if args.device_reset_at is not None:
            host.after(round(args.device_reset_at * 1e9), lambda: print(
                f"device reset: closed {len(host.device_reset())} connection(s)",
                flush=True))
        duration = args.duration if args.duration is not None else float("inf")
        host.run_for(duration, stop=lambda: stop["now"])
    finally:
        print("shutting down: closing every connection", flush=True)
        host.shutdown(args.grace)
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
    print(f"frames in {host.frames_in}, out {host.frames_out}, upcalls {len(host.upcalls)}",
          flush=True)
    if failed:
        return 1
    return 130 if stop["interrupted"] else 0
