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

from mpa_emu.addr import ip_bytes, mac_bytes
from mpa_emu.cli import CliError
from mpa_emu.cli.values import check_seconds

if TYPE_CHECKING:
    from mpa_emu.campaign.live_fuzz import LiveResult

DEFAULT_MAC = "02:6d:70:61:00:0f"
KEPT = ("silence", "loss of service")
"""Reactions whose cases are kept as pcapng."""


def add_live_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--live`` options of ``mpa-emu fuzz``."""
    group = parser.add_argument_group("against a real peer (--live, needs root)")
    group.add_argument("--live", metavar="IP:PORT",
                       help="fuzz the MPA peer listening at IP:PORT (IPv4) over a TAP")
    group.add_argument("--tap", default="mpafuzz0", metavar="NAME",
                       help="TAP interface to create (default mpafuzz0)")
    group.add_argument("--netns", metavar="NAME",
                       help="create the TAP inside this existing network namespace")
    group.add_argument("--address", metavar="IP",
                       help="the fuzzer's own address (on the peer's subnet)")
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
    try:
        ip = ip_bytes(host)
    except ValueError:
        raise CliError(f"--live needs IPv4:PORT, got {text!r}") from None
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or len(ip) != 4:
        raise CliError(f"--live needs IPv4:PORT, got {text!r}")
    return ip, int(port)


def run_live(args: argparse.Namespace) -> int:
    """The live campaign; exit 1 when a case caused a loss of service."""
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
        raise CliError("--live needs --address (the fuzzer's own IPv4 address)")
    try:
        ip = ip_bytes(args.address)
        mac = mac_bytes(args.mac)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if len(ip) != 4:
        raise CliError("--address must be IPv4")
    if args.host_address is not None:
        try:
            ipaddress.IPv4Interface(args.host_address)
            if "/" not in args.host_address:
                raise ValueError
        except ValueError:
            raise CliError(f"--host-address needs IPv4/PREFIX, got "
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
                netns.run_ip(["addr", "add", args.host_address, "dev", device.name],
                             args.netns)
        except netns.NetnsError as exc:
            raise CliError(str(exc)) from None
        wire = LiveWire(device, mac, ip, peer_ip, port)
        if not wire.resolve():
            raise CliError(f"no ARP answer from {args.live.rpartition(':')[0]} on "
                           f"{device.name}")
        fuzzer = LiveFuzzer(wire, args.seed, args.bound)
        started = time.monotonic()
        results: list[LiveResult] = []
        kept: list[Path] = []
        print(f"fuzz --live {args.live}: seed {args.seed}, up to {args.cases} cases, "
              f"reaction bound {args.bound:g} s", flush=True)
        for index in range(args.cases):
            if args.time_budget and time.monotonic() - started > args.time_budget:
                break
            c = case(args.seed, index)
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
