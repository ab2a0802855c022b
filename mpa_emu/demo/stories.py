"""The stories of ``mpa-emu demo``: two irdma hosts, one connection accepted with MPA v2
IRD/ORD negotiation, one rejected with private data, one closed.

Each story is a small function taking a :class:`DemoContext`; :data:`STORIES` lists them
in order. A story from another module is added with one line in :data:`STORIES`, as
``"package.module:function"`` (imported when the demo runs).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import IO

from mpa_emu.demo.context import (
    ACCEPT_PORT,
    CLIENT_IP,
    CLOSE_PORT,
    MS,
    REJECT_PORT,
    SERVER_IP,
    STORY_BUDGET_NS,
    DemoContext,
    Story,
)
from mpa_emu.demo.teardown import address_removal
from mpa_emu.net import Accept, Host, Network, Reject
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.views.describe import errno_text, text_or_hex
from mpa_emu.views.ladder import ladder
from mpa_emu.wire import mpa

__all__ = ["ACCEPT_PORT", "CLIENT_IP", "CLOSE_PORT", "MS", "REJECT_PORT", "SERVER_IP",
           "STORIES", "STORY_BUDGET_NS", "DemoContext", "DemoResult", "Story", "resolve",
           "run_demo"]


def _upcall(host: Host, conn: int, event: IwEvent, since_ns: int) -> Upcall | None:
    for upcall in host.upcalls:
        if upcall.conn == conn and upcall.event == event and upcall.time_ns >= since_ns:
            return upcall
    return None


def _requests(host: Host, since_ns: int) -> list[Upcall]:
    return [u for u in host.upcalls
            if u.event == IwEvent.CONNECT_REQUEST and u.time_ns >= since_ns]


def _status(upcall: Upcall | None) -> str:
    if upcall is None:
        return "none"
    return "0" if upcall.status == 0 else errno_text(upcall.status)


def _plus4(upcall: Upcall) -> str:
    """Explain the v2 length quirk of irdma_parse_mpa when the upcall shows it."""
    if upcall.private_data_len >= 4 and upcall.private_data.endswith(b"\0" * 4):
        return ": the ULP's bytes + 4, irdma's v2 quirk"
    return ""


def _rtr_choice(net: Network, port: int) -> str:
    """The RTR the responder chose, from the MPA reply on the wire (RFC 6581 section 5)."""
    for frame in net.frames:
        seg = frame.segment
        if seg is None or seg.sport != port or frame.kind != "MPA reply":
            continue
        rtr = mpa.decode_frame(seg.payload).rtr
        if rtr is None:
            return "none (MPA v1)"
        if rtr.read0:
            return "zero-length RDMA Read"
        if rtr.write0:
            return "zero-length RDMA Write"
        return "zero-length Send" if rtr.zero_len_send else "none"
    return "no MPA reply seen"


def accepted_connection(ctx: DemoContext) -> None:
    """alice connects with IRD 4 / ORD 8; bob accepts: MPA v2 negotiation, RTR, ESTABLISHED."""
    start = ctx.net.now_ns
    ctx.server.listen(ACCEPT_PORT, SERVER_IP, policy=Accept(b"welcome from bob"))
    conn = ctx.client.connect(SERVER_IP, ACCEPT_PORT, private_data=b"hello from alice",
                              ird=4, ord=8)
    ctx.run_story()
    reply = _upcall(ctx.client, conn, IwEvent.CONNECT_REPLY, start)
    requests = _requests(ctx.server, start)
    established = (_upcall(ctx.server, requests[0].conn, IwEvent.ESTABLISHED, start)
                   if requests else None)
    ctx.summary.append(f"accepted  192.0.2.1 -> {SERVER_IP}:{ACCEPT_PORT}")
    ctx.summary.append(f"  alice asked IRD 4 ORD 8; CONNECT_REPLY status {_status(reply)}"
                       + (f", negotiated IRD {reply.ird} ORD {reply.ord}" if reply else ""))
    if requests:
        req = requests[0]
        ctx.summary.append(f"  bob CONNECT_REQUEST IRD {req.ird} ORD {req.ord} (the kernel "
                           f"leaves ORD unset), pd {text_or_hex(req.private_data)} "
                           f"(reported length {req.private_data_len}{_plus4(req)})")
    ctx.summary.append(f"  bob ESTABLISHED status {_status(established)}"
                       + (f", IRD {established.ird} ORD {established.ord}" if established
                          else ""))
    ctx.summary.append(f"  RTR chosen by bob: {_rtr_choice(ctx.net, ACCEPT_PORT)}")


def rejected_connection(ctx: DemoContext) -> None:
    """bob rejects with private data: MPA reject + FIN, alice gets -ECONNREFUSED."""
    start = ctx.net.now_ns
    reason = b"sorry, no resources"
    ctx.server.listen(REJECT_PORT, SERVER_IP, policy=Reject(reason))
    conn = ctx.client.connect(SERVER_IP, REJECT_PORT, private_data=b"may I?")
    ctx.run_story()
    reply = _upcall(ctx.client, conn, IwEvent.CONNECT_REPLY, start)
    ctx.summary.append(f"rejected  192.0.2.1 -> {SERVER_IP}:{REJECT_PORT}")
    ctx.summary.append(f"  bob rejected with pd {reason.decode()!r} (hex {reason.hex()})")
    if reply is None:
        ctx.summary.append("  alice got no CONNECT_REPLY")
        return
    ctx.summary.append(f"  alice CONNECT_REPLY status {_status(reply)}, "
                       f"pd {text_or_hex(reply.private_data)}")
    ctx.summary.append(f"    hex {reply.private_data.hex()}, reported length "
                       f"{reply.private_data_len}{_plus4(reply)}")


def closed_connection(ctx: DemoContext) -> None:
    """A connection accepted, then closed gracefully by alice (FIN from the QP)."""
    start = ctx.net.now_ns
    ctx.server.listen(CLOSE_PORT, SERVER_IP, policy=Accept())
    conn = ctx.client.connect(SERVER_IP, CLOSE_PORT)

    def close_when_connected(host: Host, upcall: Upcall) -> None:
        if upcall.conn == conn and upcall.event == IwEvent.CONNECT_REPLY and \
                upcall.status == 0:
            ctx.net.after(MS, host.guarded, "disconnect", host.disconnect, conn, graceful=True)

    ctx.client.on(close_when_connected, IwEvent.CONNECT_REPLY)
    ctx.run_story()
    ctx.summary.append(f"closed    192.0.2.1 -> {SERVER_IP}:{CLOSE_PORT}")
    for host in (ctx.client, ctx.server):
        events = [u for u in host.upcalls if u.time_ns >= start]
        names = ", ".join(f"{IwEvent(u.event).name}"
                          + (f"({errno_text(u.status)})" if u.status else "") for u in events)
        ctx.summary.append(f"  {host.name}: {names or 'no upcalls'}")


STORIES: list[Story | str] = [
    accepted_connection,
    rejected_connection,
    closed_connection,
    address_removal,
]
"""The demo, in order. A story may also be given by name, ``"package.module:function"``
(imported when the demo runs), e.g. from a user's own module."""


def resolve(story: Story | str) -> Story:
    """A story function from the list entry: a ``"module:function"`` name given by the
    user is imported here (a plug-in, not one of the package's own layers)."""
    if not isinstance(story, str):
        return story
    module_name, _, attr = story.partition(":")
    fn: Story = getattr(importlib.import_module(module_name), attr)
    return fn


@dataclass
class DemoResult:
    """What the demo produced. ``failures`` names the stories that did not run through
    (unavailable, or stopped by an exception); the others are complete."""

    net: Network
    ladders: list[tuple[str, str]]
    summary: list[str]
    failures: list[str] = field(default_factory=list)


def run_demo(seed: int = 0, *, trace_stream: IO[str] | None = None,
             stories: list[Story | str] | None = None, logs: bool = False) -> DemoResult:
    """Run every story on one two-host network; returns the ladders (``logs``: with the
    drivers' kernel log lines) and the summary.

    A story that cannot be imported or raises is reported in the summary and in
    ``failures``; the stories after it still run.
    """
    net = Network(seed, trace_stream=trace_stream)
    client = net.add_host("alice", CLIENT_IP)
    server = net.add_host("bob", SERVER_IP)
    ctx = DemoContext(net, client, server)
    ladders: list[tuple[str, str]] = []
    failures: list[str] = []
    for entry in stories if stories is not None else STORIES:
        name = entry if isinstance(entry, str) else entry.__name__
        try:
            story = resolve(entry)
        except (ImportError, AttributeError) as exc:
            ctx.summary.append(f"story {entry!r} unavailable: {exc}")
            failures.append(name)
            continue
        start = net.now_ns
        title = (story.__doc__ or story.__name__).strip().splitlines()[0]
        try:
            story(ctx)
        except Exception as exc:  # an emulator bug: report it, keep the other stories
            ctx.summary.append(f"story {name} failed at {net.now_ns / 1e9:.6f} s: "
                               f"{type(exc).__name__}: {exc}")
            failures.append(name)
            title += "  [failed]"
        ladders.append((title, ladder(net, since_ns=start, logs=logs)))
    return DemoResult(net, ladders, ctx.summary, failures)
