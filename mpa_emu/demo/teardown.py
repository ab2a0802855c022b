"""The teardown story of ``mpa-emu demo``: bob listens on two addresses, alice holds two
connections to each; one address is removed (``irdma_if_notify(ifup=false)`` ->
``irdma_cm_teardown_connections``) and only its connections are reset.

Registered in :data:`mpa_emu.demo.stories.STORIES`.
"""

from __future__ import annotations

from mpa_emu.demo.context import MS, SERVER_IP, DemoContext
from mpa_emu.net import Accept, Host
from mpa_emu.stacks import STACKS
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.views.describe import errno_text
from mpa_emu.wire.addr import ip_bytes, ip_text
from mpa_emu.wire.segment import RST

SECOND_IP = "192.0.2.3"
"""The address bob brings up for this story and then loses."""
TEARDOWN_PORT = 31004
REMOVE_AFTER_NS = 50 * MS
"""When the address goes away, after the four connections are established."""


def _events(host: Host, conn: int, since_ns: int) -> str:
    names = []
    for up in host.upcalls:
        if up.conn == conn and up.time_ns >= since_ns:
            names.append(IwEvent(up.event).name
                         + (f"({errno_text(up.status)})" if up.status else ""))
    return ", ".join(names) or "none"


def _first(host: Host, conn: int, event: IwEvent, since_ns: int) -> Upcall | None:
    return next((u for u in host.upcalls if u.conn == conn and u.event == event
                 and u.time_ns >= since_ns), None)


def address_removal(ctx: DemoContext) -> None:
    """bob loses 192.0.2.3: only the connections on that address are reset."""
    alice, bob, net = ctx.client, ctx.server, ctx.net
    start = net.now_ns
    if ip_bytes(SECOND_IP) not in bob.addresses:
        bob.add_address(SECOND_IP)
    bob.listen(TEARDOWN_PORT, None, policy=Accept())  # wildcard: one child per address
    conns = {ip: [alice.connect(ip, TEARDOWN_PORT) for _ in range(2)]
             for ip in (SERVER_IP, SECOND_IP)}
    local_ports = {conn: alice.node(conn).loc_port for group in conns.values()
                   for conn in group}
    removed_at = start + REMOVE_AFTER_NS
    net.at(removed_at, bob.guarded, "remove_address", bob.remove_address, SECOND_IP)
    ctx.run_story()

    ctx.summary.append(f"teardown  bob listens on *:{TEARDOWN_PORT} ({SERVER_IP} and "
                       f"{SECOND_IP}); alice opens two connections to each")
    ctx.summary.append(f"  at {removed_at / 1e9:.3f} s bob removes {SECOND_IP} "
                       "(irdma_if_notify -> irdma_cm_teardown_connections)")
    resets = [f for f in net.frames if f.time_ns >= removed_at and f.segment is not None
              and f.segment.flags & RST]
    reset_ports = {f.segment.dport for f in resets if f.segment is not None}
    ctx.summary.append(f"  {len(resets)} RST on the wire, all from "
                       + ", ".join(sorted({ip_text(f.segment.src_ip) for f in resets
                                           if f.segment is not None})))
    for ip, group in conns.items():
        for conn in group:
            port = local_ports[conn]
            view = alice.node(conn)
            state = view.state.name if view is not None else "freed"
            verdict = "reset" if port in reset_ports else "untouched"
            ctx.summary.append(f"  alice :{port} -> {ip}: {verdict}; alice upcalls "
                               f"{_events(alice, conn, removed_at)}; "
                               f"node {state}")
    closes = [u for u in bob.upcalls if u.event == IwEvent.CLOSE and u.time_ns >= removed_at]
    if closes:
        delay = (closes[0].time_ns - removed_at) / MS
        ctx.summary.append(f"  bob: {len(closes)} CLOSE upcalls {delay:.0f} ms after the "
                           "removal (the 100 ms QP close timer on the shared CM timer, "
                           "which may slip to an expiry already pending: "
                           "irdma_schedule_cm_timer arms it only when idle)")
    connected = STACKS[alice.stack].lifecycle.connected_state
    survivors = [c for c in conns[SERVER_IP]
                 if (v := alice.node(c)) is not None and v.state.name == connected]
    ctx.summary.append(f"  {len(survivors)} of {len(conns[SERVER_IP])} connections on "
                       f"{SERVER_IP} still {connected}")
