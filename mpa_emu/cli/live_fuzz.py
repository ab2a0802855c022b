"""``mpa-emu fuzz --live IP:PORT``: the live campaign's command side: set up the TAP,
run the cases within the bounds, print the reaction table, keep the captures of the
cases that met silence or a loss of service."""

from __future__ import annotations

import argparse
import ipaddress
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mpa_emu.cli import CliError
from mpa_emu.cli.values import check_seconds
from mpa_emu.wire.addr import ip_bytes, mac_bytes

if TYPE_CHECKING:
    from mpa_emu.campaign.live_fuzz import LiveResult

DEFAULT_MAC = "02:6d:70:61:00:0f"
KEPT = ("silence", "loss of service")
"""Reactions whose cases are kept as pcapng."""


def add_live_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--live`` options of ``mpa-emu fuzz``."""
    group = parser.add_argument_group("against a real peer (--live, needs root)")
    group.add_argument("--live", metavar="IP:PORT",
                       help="fuzz the MPA peer listening at IP:PORT over a TAP (IPv6 as "
                            "[ADDR]:PORT)")
    group.add_argument("--accept", action="store_true",
                       help="accept mode: listen on PORT at --address; the peer at IP "
                            "connects (start its client in a loop) and gets mutated answers")
    group.add_argument("--tap", default="mpafuzz0", metavar="NAME",
                       help="TAP interface to create (default mpafuzz0)")
    group.add_argument("--netns", metavar="NAME",
                       help="create the TAP inside this existing network namespace")
    group.add_argument("--address", metavar="IP",
                       help="the fuzzer's own address (on the peer's subnet, the peer's "
                            "family)")
    group.add_argument("--mac", default=DEFAULT_MAC, help=f"the fuzzer's MAC (default "
                       f"{DEFAULT_MAC})")
    group.add_argument("--host-address", metavar="IP/PREFIX",
                       help="put this address on the Linux side of the TAP and bring it up")
    group.add_argument("--bound", type=float, default=0.5, metavar="SECONDS",
                       help="how long a reaction is awaited (default 0.5)")
    group.add_argument("--json", metavar="FILE.json",
                       help="write every case with its reaction as JSON")


def _endpoint(text: str) -> tuple[bytes, int]:
    host, sep, port = text.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    try:
        ip = ip_bytes(host[1:-1] if bracketed else host)
    except ValueError:
        raise CliError(f"--live needs IPv4:PORT or [IPv6]:PORT, got {text!r}") from None
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 \
            or bracketed != (len(ip) == 16):
        raise CliError(f"--live needs IPv4:PORT or [IPv6]:PORT, got {text!r}")
    return ip, int(port)


def run_live(args: argparse.Namespace) -> int:
    """The live campaign; exit 1 when a case caused a loss of service."""
    from mpa_emu.campaign.live_accept import AcceptFuzzer, accept_case
    from mpa_emu.campaign.live_fuzz import (
        LiveFuzzer,
        LiveResult,
        LiveWire,
        case,
        write_case_capture,
    )
    from mpa_emu.live import netns, tap

    peer_ip, port = _endpoint(args.live)
    if args.jobs > 1 or args.scheduler or args.reproduce:
        raise CliError("--live runs on one TAP: no -j, --scheduler or --reproduce")
    if args.address is None:
        raise CliError("--live needs --address (the fuzzer's own address)")
    try:
        ip = ip_bytes(args.address)
        mac = mac_bytes(args.mac)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    family = "IPv4" if len(peer_ip) == 4 else "IPv6"
    if len(ip) != len(peer_ip):
        raise CliError(f"--address must be {family}, as the peer's address is")
    if args.host_address is not None:
        try:
            host_if = ipaddress.ip_interface(args.host_address)
            if "/" not in args.host_address or host_if.version != (4 if len(ip) == 4 else 6):
                raise ValueError
        except ValueError:
            raise CliError(f"--host-address needs {family}/PREFIX, got "
                           f"{args.host_address!r}") from None
    check_seconds("--bound", args.bound, positive=True)
    try:
        with netns.entered_if(args.netns):
            device = tap.Tap(args.tap)
    except (tap.TapError, netns.NetnsError) as exc:
        raise CliError(str(exc)) from None
    try:
        try:
            netns.run_ip(["link", "set", device.name, "up"], args.netns)
            if args.host_address:
                # nodad: an IPv6 address is usable at once, not after duplicate
                # address detection (RFC 4862 section 5.4)
                netns.run_ip(["addr", "add", args.host_address, "dev", device.name,
                              *(["nodad"] if len(ip) == 16 else [])], args.netns)
        except netns.NetnsError as exc:
            raise CliError(str(exc)) from None
        wire = LiveWire(device, mac, ip, peer_ip, port)
        if not wire.resolve():
            raise CliError(f"no {'ARP' if len(ip) == 4 else 'ND'} answer from "
                           f"{args.live.rpartition(':')[0]} on {device.name}")
        fuzzer: LiveFuzzer | AcceptFuzzer = (
            AcceptFuzzer(wire, port, args.seed, args.bound) if args.accept
            else LiveFuzzer(wire, args.seed, args.bound))
        make_case = accept_case if args.accept else case
        started = time.monotonic()
        results: list[LiveResult] = []
        kept: list[Path] = []
        print(f"fuzz --live {args.live}"
              + (f" --accept (listening on port {port}; the peer connects)"
                 if args.accept else "")
              + f": seed {args.seed}, up to {args.cases} cases, "
              f"reaction bound {args.bound:g} s", flush=True)
        for index in range(args.cases):
            if args.time_budget and time.monotonic() - started > args.time_budget:
                break
            c = make_case(args.seed, index)
            wire.frames.clear()
            reaction = fuzzer.run_case(c)
            result = LiveResult(c, reaction.text(), fuzzer.still_answers())
            results.append(result)
            if result.group in KEPT:
                try:
                    kept.append(write_case_capture(Path(args.out), result, wire.frames))
                except OSError as exc:
                    raise CliError(f"cannot write to {args.out}: "
                                   f"{exc.strerror or exc}") from None
            if not result.answers_after and not fuzzer.still_answers():
                print(f"case {c.index} ({c.name}): the peer no longer accepts "
                      "connections; stopping", flush=True)
                break
    finally:
        device.close()
    seconds = time.monotonic() - started
    _table(results)
    if args.json:
        try:
            Path(args.json).write_text(json.dumps([
                {"case": r.case.index, "name": r.case.name, "reaction": r.reaction,
                 "answers_after": r.answers_after, "group": r.group} for r in results],
                indent=1) + "\n", encoding="utf-8")
        except OSError as exc:
            raise CliError(f"cannot write {args.json}: {exc.strerror or exc}") from None
    print(f"{len(results)} cases in {seconds:.1f} s ({len(results) / seconds:.1f} cases/s); "
          f"{len(kept)} capture(s) of silence or loss of service in {args.out}/"
          if kept else f"{len(results)} cases in {seconds:.1f} s "
          f"({len(results) / seconds:.1f} cases/s)", flush=True)
    return 1 if any(r.group == "loss of service" for r in results) else 0


def _table(results: list[LiveResult]) -> None:
    groups: dict[str, list[LiveResult]] = {}
    for r in results:
        groups.setdefault(r.group, []).append(r)
    width = max((len(g) for g in groups), default=8)
    print(f"{'reaction':<{width}}  cases  examples")
    for group, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        examples = "; ".join(f"{m.case.index} {m.case.name}" for m in members[:3])
        more = f" (+{len(members) - 3} more)" if len(members) > 3 else ""
        print(f"{group:<{width}}  {len(members):>5}  {examples}{more}")
