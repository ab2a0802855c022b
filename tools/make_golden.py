#!/usr/bin/env python3
"""Regenerate the golden captures of the emulator's own scenarios in pcaps/golden/, and
the example captures of the other stacks in pcaps/ (``STACK_CAPTURES``: qedr and erdma,
each from its scenario file in scenarios/).

Each golden scenario runs two emulated irdma hosts on the virtual wire with a fixed seed
and writes the capture as pcapng; each stack capture runs its scenario file as ``mpa-emu
run`` does. The tests rebuild every scenario and compare the bytes
with the committed files (a change in behaviour shows up as a byte difference and is
reviewed by regenerating with this script), and replay each golden capture against the
state machine from both sides.

Usage: python tools/make_golden.py [--out DIR] [--stack-out DIR] [--check]
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mpa_emu.net.host import Host
from mpa_emu.net.network import Network
from mpa_emu.net.policy import Accept, Manual, Reject
from mpa_emu.scenario import load_scenario, run_scenario

ROOT = Path(__file__).resolve().parent.parent

SEED = 5044  # RFC 5044, for want of a better number
A4, P4 = "192.168.20.1", "192.168.20.2"
A6, P6 = "fd00:20::1", "fd00:20::2"
PORT = 31000


def two_hosts(a_ip: str, p_ip: str, vlan: int | None = None) -> tuple[Network, Host, Host]:
    """Hosts ``a`` (the initiator) and ``p`` on a wire seeded with SEED."""
    net = Network(SEED)
    return net, net.add_host("a", a_ip, vlan=vlan), net.add_host("p", p_ip, vlan=vlan)


def accept_v2() -> Network:
    """v2 accept with private data both ways, then a graceful disconnect by A."""
    net, a, p = two_hosts(A4, P4)
    p.listen(PORT, P4, policy=Accept(b"golden accept reply data", delay_ns=1_000_000))
    conn = a.connect(P4, PORT, private_data=b"golden request from the initiator", ird=8, ord=8)
    net.run_for(500_000_000)
    a.disconnect(conn, graceful=True)
    net.run_for(2_000_000_000)
    return net


def reject_v2() -> Network:
    """v2 reject with private data riding on ACK|FIN, both sides through TIME_WAIT."""
    net, a, p = two_hosts(A4, P4)
    p.listen(PORT, P4, policy=Reject(b"golden reject: no resources", delay_ns=2_000_000))
    a.connect(P4, PORT, private_data=b"golden request", ird=4, ord=4)
    net.run_for(2_000_000_000)
    return net


def accept_v2_ipv6() -> Network:
    """The accept flow over IPv6 (MSS 1440)."""
    net, a, p = two_hosts(A6, P6)
    p.listen(PORT, P6, policy=Accept(b"v6 reply", delay_ns=500_000))
    a.connect(P6, PORT, private_data=b"v6 request")
    net.run_for(1_000_000_000)
    return net


def unanswered_request() -> Network:
    """The application never answers: the initiator's countdown runs out after the
    RETRANS 32 schedule and it resets the connection."""
    net, a, p = two_hosts(A4, P4)
    p.listen(PORT, P4, policy=Manual())
    a.connect(P4, PORT, private_data=b"anyone there?")
    net.run_for(400_000_000_000)
    return net


def accept_v2_vlan() -> Network:
    """The accept flow on 802.1Q VLAN 42, then an abortive disconnect by P."""
    net, a, p = two_hosts(A4, P4, vlan=42)
    p.listen(PORT, P4, vlan=42, policy=Accept(b"vlan reply", delay_ns=300_000))
    a.connect(P4, PORT, private_data=b"vlan request")
    net.run_for(100_000_000)
    for conn in p.conns():
        p.disconnect(conn, graceful=False)
    net.run_for(1_000_000_000)
    return net


def syn_to_nobody() -> Network:
    """A SYN to a port without a listener (a silent host stack): resent on the RETRANS 32
    schedule, then RST at expiry."""
    net, a, _ = two_hosts(A4, P4)
    a.connect(P4, PORT + 1, private_data=b"hello?")
    net.run_for(400_000_000_000)
    return net


SCENARIOS: dict[str, Callable[[], Network]] = {
    "golden_accept_v2": accept_v2,
    "golden_reject_v2": reject_v2,
    "golden_accept_v2_ipv6": accept_v2_ipv6,
    "golden_unanswered_request": unanswered_request,
    "golden_accept_v2_vlan": accept_v2_vlan,
    "golden_syn_to_nobody": syn_to_nobody,
}
"""Scenario name -> builder."""

HOSTS: dict[str, tuple[str, ...]] = {  # the hosts the replay tests play, per scenario
    "golden_accept_v2": (A4, P4),
    "golden_reject_v2": (A4, P4),
    "golden_accept_v2_ipv6": (A6, P6),
    "golden_unanswered_request": (A4, P4),
    "golden_accept_v2_vlan": (A4, P4),
    "golden_syn_to_nobody": (A4,),  # P has no listener; replay would give it one
}


STACK_CAPTURES: dict[str, tuple[str, str]] = {
    # capture name -> (scenario file, the stack both its hosts run)
    "qedr-accept-reject": ("scenarios/qedr_stack.toml", "qedr"),
    "erdma-accept-reject": ("scenarios/erdma_stack.toml", "erdma"),
}
"""The example captures of stacks other than irdma, written to pcaps/: an accepted
connection with private data and a rejected one, each from its scenario file."""

STACK_HOSTS = ("192.0.2.1", "192.0.2.2")
"""The hosts of the stack scenarios (initiator, responder), both replayed."""


def render(name: str) -> bytes:
    """The pcapng bytes of one scenario."""
    buf = io.BytesIO()
    SCENARIOS[name]().write_pcapng(buf)
    return buf.getvalue()


def render_stack(name: str) -> bytes:
    """The pcapng bytes of one stack capture: its scenario file run as ``mpa-emu run``
    does (the file's seed), every expectation holding."""
    path, _stack = STACK_CAPTURES[name]
    run = run_scenario(load_scenario(ROOT / path))
    if not run.ok:
        raise SystemExit(f"{path}: an expectation failed; not writing {name}")
    buf = io.BytesIO()
    run.net.write_pcapng(buf)
    return buf.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "pcaps" / "golden")
    ap.add_argument("--stack-out", type=Path, default=ROOT / "pcaps",
                    help="where the stack captures go (default pcaps/)")
    ap.add_argument("--check", action="store_true",
                    help="compare with the files in --out instead of writing them")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    changed = 0
    jobs = [(args.out / f"{name}.pcapng", name, render) for name in SCENARIOS]
    jobs += [(args.stack_out / f"{name}.pcapng", name, render_stack)
             for name in STACK_CAPTURES]
    for path, name, build in jobs:
        data = build(name)
        if args.check:
            same = path.exists() and path.read_bytes() == data
            changed += not same
            print(f"{path.name}: {'same' if same else 'DIFFERS'}")
        else:
            path.write_bytes(data)
            print(f"{path.name}: {len(data)} bytes")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
