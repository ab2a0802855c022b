"""The live driver: the sans-IO CM core on a TAP device, with the real clock.

This is the same core (any :class:`~mpa_emu.stacks.contract.api.CoreApi` the registry
makes) the virtual wire drives; only the edges differ. A frame read from the TAP is
answered by the host stack when it is ARP/ND or an echo request;
otherwise the NIC's filters (our MAC or a group address, a configured VLAN)
and the fault hook decide whether the codec's :class:`~mpa_emu.wire.segment.Segment` reaches
``core.receive``. Whatever the core emits is encoded and written to the TAP; its timers
fire when ``time.monotonic_ns()`` reaches them. ``now_ns`` is the monotonic clock
minus the instant the driver started, so the core sees time starting at 0 as it does on
the virtual wire.

Every frame crossing the TAP (both directions, ARP and ND included) goes to the capture
with a comment: the core's (``irdma_send_mpa_reject: MPAREQ_RCVD -> FIN_WAIT1``) for what
the emulated host sends, the fate of the frame for what it receives.

Single-threaded by design: call :meth:`LiveHost.poll`, :meth:`LiveHost.run_until` or
:meth:`LiveHost.run_for` from one thread; verbs run at once in that thread. A kernel peer
in the same process belongs in another thread (its sockets block).
"""

from __future__ import annotations

import contextlib
import heapq
import os
import select
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from mpa_emu.capture.spool import RecordLog
from mpa_emu.errors import MpaEmuError
from mpa_emu.live import icmp
from mpa_emu.live.neighbour import NeighbourResponder
from mpa_emu.net.policy import Accept, Manual, Reject
from mpa_emu.stacks.contract.api import CoreApi
from mpa_emu.stacks.contract.events import IwEvent, Transmit, Upcall
from mpa_emu.stacks.contract.trace import Trace, TraceRecord
from mpa_emu.ulp.rdma_cm import RdmaCm, RdmaCmEvent, UlpStep
from mpa_emu.wire import codec
from mpa_emu.wire.addr import ip_text, mac_text
from mpa_emu.wire.segment import Segment

__all__ = [
    "RX", "TX", "Accept", "Clock", "CoreApi", "DropMatching", "FaultHook", "FrameSink",
    "LiveError", "LiveHost", "LivePolicy", "Manual", "Reject", "TapLike", "VerbFailure",
]

RX = "rx"
TX = "tx"
SOLICIT_INTERVAL_S = 0.5
MAX_FRAMES_PER_POLL = 256


class LiveError(MpaEmuError):
    """A live-mode operation failed (neighbour unresolved, TAP gone); one-line message."""


class Clock(Protocol):
    """Nanoseconds from an arbitrary origin (``time.monotonic_ns`` by default)."""

    def __call__(self) -> int: ...


class FrameSink(Protocol):
    """Where captured frames go: a pcapng writer or a list in tests."""

    def add(self, time_ns: int, data: bytes, comment: str) -> None:
        """One frame; ``time_ns`` is wall-clock nanoseconds since the Unix epoch."""

    def close(self) -> None:
        """Flush and close."""


class TapLike(Protocol):
    """What the driver needs of :class:`~mpa_emu.live.tap.Tap`."""

    name: str

    def fileno(self) -> int: ...
    def read(self) -> bytes | None: ...
    def write(self, frame: bytes) -> None: ...


FaultHook = Callable[[str, Segment], bool]
"""``hook(direction, segment) -> True`` drops the frame: ``"rx"`` before the core sees
it (the frame crossed the TAP and is captured with a note), ``"tx"`` before it is written
(it never crosses the TAP and appears only in the trace)."""


@dataclass
class DropMatching:
    """A fault hook that drops the ``nth`` (1-based) frame in ``direction`` for which
    ``match(segment)`` is true, ``count`` times in a row. ``dropped`` lists what it took."""

    direction: str
    match: Callable[[Segment], bool]
    nth: int = 1
    count: int = 1
    seen: int = 0
    dropped: list[Segment] = field(default_factory=list)

    def __call__(self, direction: str, seg: Segment) -> bool:
        if direction != self.direction or not self.match(seg):
            return False
        self.seen += 1
        if self.nth <= self.seen < self.nth + self.count:
            self.dropped.append(seg)
            return True
        return False


LivePolicy = Accept | Reject | Manual | Callable[["LiveHost", Upcall], None]
"""How the emulated application answers a CONNECT_REQUEST: the scenario policies of
:mod:`mpa_emu.net.policy` (with their ``delay_ns``), or ``callback(host, upcall)``."""


@dataclass(frozen=True, slots=True)
class VerbFailure:
    """A verb run by a policy that the core refused (as the kernel returns an errno)."""

    time_ns: int
    verb: str
    errno: int
    message: str


class LiveHost:
    """One emulated irdma host attached to a TAP device."""

    def __init__(self, tap: TapLike, core: CoreApi, mac: bytes, *,
                 trace: Trace | None = None, capture: FrameSink | None = None,
                 fault: FaultHook | None = None, clock: Clock = time.monotonic_ns,
                 wall_clock: Clock = time.time_ns) -> None:
        self.tap = tap
        self.core = core
        self.mac = mac
        self.trace = trace
        self.capture = capture
        self.fault = fault
        self._clock = clock
        self._origin = clock()
        self.wall_origin_ns = wall_clock()
        """Wall-clock ns at core time 0: capture time = wall_origin_ns + now_ns."""
        self.neighbours = NeighbourResponder(mac)
        self.addresses: dict[bytes, int | None] = {}
        """Our addresses and their VLAN (``None`` = untagged)."""
        self.vlans: set[int | None] = set()
        """VLANs the NIC accepts frames on: every VLAN an address was ever added on (the
        VLAN device outlives its addresses)."""
        self.known: dict[bytes, bytes] = {}
        """Neighbour table learned from ARP/ND: packed IP -> MAC."""
        self.upcalls: list[Upcall] = []
        self.rdma_cm = RdmaCm()
        """iw_cm and rdma_cm above the driver (:mod:`mpa_emu.ulp`), fed with every upcall
        and the verbs that move iw_cm's state."""
        self.failures: list[VerbFailure] = []
        self.frames_in = 0
        self.frames_out = 0
        self._policies: dict[int, LivePolicy] = {}
        self._later: list[tuple[int, int, Callable[[], None]]] = []
        self._later_seq = 0
        self._callbacks: list[Callable[[LiveHost, Upcall], None]] = []
        self._failure_callbacks: list[Callable[[LiveHost, VerbFailure], None]] = []
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._shut = False

    # ---- clock and observability -------------------------------------------------

    @property
    def now_ns(self) -> int:
        """Core time: real monotonic nanoseconds since the driver started."""
        return self._clock() - self._origin

    def _note(self, kind: str, fn: str, **fields: Any) -> None:
        if self.trace is not None:
            self.trace.emit(TraceRecord(self.now_ns, "live", kind, fn, fields))

    def _capture(self, data: bytes, comment: str) -> None:
        if self.capture is not None:
            self.capture.add(self.wall_origin_ns + self.now_ns, data, comment)

    # ---- the local stack -----------------------------------------------------------

    def add_address(self, ip: bytes, vlan: int | None = None) -> None:
        """Bring up an address (optionally on an 802.1Q VLAN): the core owns it
        (irdma_if_notify with ifup) and ARP/ND answers for it on that VLAN."""
        if vlan is not None and not 0 <= vlan < 4095:
            raise LiveError(f"VLAN id must be 0..4094, got {vlan}")
        self.core.add_address(ip, vlan=vlan, now_ns=self.now_ns)
        self.neighbours.add_address(ip, vlan)
        self.addresses[ip] = vlan
        self.vlans.add(vlan)
        self._flush()

    def remove_address(self, ip: bytes) -> None:
        """Take an address down: irdma_if_notify(ifup=false) tears its connections down.
        Segments of connections that survive (the VLAN quirk) still reach the core."""
        if ip not in self.addresses:
            raise LiveError(f"no address {ip_text(ip)} on the emulated host")
        del self.addresses[ip]
        self.neighbours.remove_address(ip)
        self.core.remove_address(ip, now_ns=self.now_ns)
        self._flush()

    def resolve(self, ip: bytes, timeout_s: float = 3.0, source: bytes | None = None) -> bytes:
        """The MAC of neighbour ``ip``: ask with ARP or NS from ``source`` (default: our
        first address of that family) until it answers (the kernel's neighbour lookup
        in irdma_make_cm_node: irdma_addr_resolve_neigh / _ipv6)."""
        if ip in self.known:
            return self.known[ip]
        if source is None:
            source = self._source_for(ip)
        deadline = time.monotonic() + timeout_s
        while ip not in self.known:
            left = deadline - time.monotonic()
            if left <= 0:
                raise LiveError(f"neighbour {ip_text(ip)} did not answer "
                                f"{'ARP' if len(ip) == 4 else 'neighbour solicitation'} "
                                f"within {timeout_s:g} s")
            self._send_raw(self.neighbours.solicit(ip, source), "neighbour solicitation")
            self.run_until(lambda: ip in self.known, min(SOLICIT_INTERVAL_S, left))
        return self.known[ip]

    def _source_for(self, ip: bytes) -> bytes:
        for own in self.addresses:
            if len(own) == len(ip):
                return own
        raise LiveError(f"the emulated host has no {'IPv4' if len(ip) == 4 else 'IPv6'} "
                        f"address to reach {ip_text(ip)} from")

    # ---- verbs ---------------------------------------------------------------------

    def listen(self, port: int, ip: bytes | None = None, *, policy: LivePolicy | None = None,
               ipv6: bool = False, backlog: int = 16) -> int:
        """Create a listener (irdma_create_listen); ``ip`` None = wildcard; requests are
        answered by ``policy`` (default: accept at once without private data)."""
        if ip is not None:
            ipv6 = len(ip) == 16
        listener = self.core.create_listen(ip, port, backlog=backlog, ipv6=ipv6,
                                           now_ns=self.now_ns)
        self._policies[listener] = policy if policy is not None else Accept()
        self._flush()
        return listener

    def connect(self, remote_ip: bytes, port: int, *, local_ip: bytes | None = None,
                private_data: bytes = b"", ird: int = 16, ord: int = 16,
                resolve_timeout_s: float = 3.0) -> int:
        """Resolve the neighbour, then irdma_connect; returns the connection id."""
        local = local_ip if local_ip is not None else self._source_for(remote_ip)
        self.resolve(remote_ip, resolve_timeout_s, local)
        conn = self.core.connect(local, remote_ip, port, private_data=private_data,
                                 ird=ird, ord=ord, now_ns=self.now_ns)
        self._flush()
        return conn

    def accept(self, conn: int, private_data: bytes = b"") -> None:
        """irdma_accept."""
        try:
            self.core.accept(conn, private_data=private_data, now_ns=self.now_ns)
        except ValueError:
            self.rdma_cm.verb(conn, "accept_failed")  # iw_cm_accept's error path
            raise
        self._flush()

    def reject(self, conn: int, private_data: bytes = b"") -> None:
        """irdma_reject."""
        self.rdma_cm.verb(conn, "reject")  # iw_cm_reject: CONN_RECV -> IDLE first
        self.core.reject(conn, private_data=private_data, now_ns=self.now_ns)
        self._flush()

    def close(self, conn: int) -> None:
        """irdma_cm_close."""
        self.core.close(conn, now_ns=self.now_ns)
        self._flush()

    def disconnect(self, conn: int, *, graceful: bool = True) -> None:
        """Disconnect an offloaded connection: FIN (graceful) or RST (abortive)."""
        self.core.disconnect(conn, graceful=graceful, now_ns=self.now_ns)
        self.rdma_cm.verb(conn, "disconnect")  # iw_cm_disconnect: ESTABLISHED -> CLOSING
        self._flush()

    def teardown(self, ip: bytes | None = None, *, vlan: int | None = None,
                 disconnect_all: bool = False) -> list[int]:
        """``irdma_cm_teardown_connections`` on ``ip`` (and ``vlan``) or on every
        connection; returns the connection ids selected."""
        selected = self.core.teardown_connections(ip, vlan=vlan,
                                                  disconnect_all=disconnect_all,
                                                  now_ns=self.now_ns)
        self._flush()
        return selected

    def device_reset(self) -> list[int]:
        """A reset of the emulated NIC (``rf->reset``): every connection is closed
        without a frame on the wire; returns the connection ids."""
        selected = self.core.device_reset(now_ns=self.now_ns)
        self._note("device_reset", "irdma_cm_teardown_connections", conns=selected)
        self._flush()
        return selected

    def qp_state(self, conn: int) -> Any:
        """Read-only view of the connection's QP (iWARP and TCP states)."""
        return self.core.qp_state(conn)

    def after(self, delay_ns: int, fn: Callable[[], None]) -> None:
        """Run ``fn`` in the loop ``delay_ns`` from now (at once when 0), then flush."""
        if delay_ns <= 0:
            fn()
            return
        self._later_seq += 1
        heapq.heappush(self._later, (self.now_ns + delay_ns, self._later_seq, fn))

    def on_upcall(self, callback: Callable[[LiveHost, Upcall], None]) -> None:
        """Call ``callback(host, upcall)`` for every upcall, after the listener policy."""
        self._callbacks.append(callback)

    def on_failure(self, callback: Callable[[LiveHost, VerbFailure], None]) -> None:
        """Call ``callback(host, failure)`` when a policy's verb is refused by the core."""
        self._failure_callbacks.append(callback)

    def events(self, event: IwEvent | None = None) -> list[Upcall]:
        """Upcalls received so far, optionally of one kind."""
        return [u for u in self.upcalls if event is None or u.event == event]

    @property
    def cm_events(self) -> RecordLog[RdmaCmEvent]:
        """The rdma_cm event queue of the emulated host's application, in order
        (:mod:`mpa_emu.ulp.rdma_cm`), as :attr:`mpa_emu.net.host.Host.cm_events`."""
        return self.rdma_cm.events

    @property
    def ulp_steps(self) -> RecordLog[UlpStep]:
        """Every upcall through iw_cm and rdma_cm, in order."""
        return self.rdma_cm.steps

    # ---- the loop ------------------------------------------------------------------

    def wake(self) -> None:
        """Interrupt a :meth:`poll` waiting in another thread or in a signal handler."""
        # A full pipe already wakes the loop; after shutdown the pipe is closed.
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"\0")

    def poll(self, max_wait_s: float) -> None:
        """Wait for a frame, a timer or :meth:`wake` (at most ``max_wait_s``), then handle
        everything that is ready."""
        wait = max(0.0, max_wait_s)
        for deadline in (self.core.get_timer(), self._later[0][0] if self._later else None):
            if deadline is not None:
                wait = min(wait, max(0.0, (deadline - self.now_ns) / 1e9))
        readable, _, _ = select.select([self.tap.fileno(), self._wake_r], [], [], wait)
        if self._wake_r in readable:
            while True:
                try:
                    if not os.read(self._wake_r, 64):
                        break
                except BlockingIOError:
                    break
        for _ in range(MAX_FRAMES_PER_POLL):
            data = self.tap.read()
            if data is None:
                break
            self._receive(data)
            self._flush()  # answer each frame before the next, as the wire pumps
        self._fire_timers()
        self._flush()

    def run_until(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Poll until ``condition()`` holds or ``timeout_s`` passes; returns the condition."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            left = deadline - time.monotonic()
            if left <= 0:
                return condition()
            self.poll(min(left, 0.05))
        return True

    def run_for(self, seconds: float, stop: Callable[[], bool] | None = None) -> None:
        """Run for ``seconds`` of real time (or until ``stop()`` is true)."""
        self.run_until(stop if stop is not None else (lambda: False), seconds)

    def shutdown(self, grace_s: float = 1.0) -> None:
        """Close every connection (graceful disconnect when offloaded, irdma_cm_close
        otherwise), let the exchanges finish for up to ``grace_s``, flush the capture.
        Idempotent; the host is not polled again afterwards."""
        if self._shut:
            return
        self._shut = True
        for conn in list(self.core.conns()):
            node = self.core.node(conn)
            state = getattr(getattr(node, "state", None), "name", "")
            try:
                if state == "OFFLOADED":
                    self.core.disconnect(conn, graceful=True, now_ns=self.now_ns)
                else:
                    self.core.close(conn, now_ns=self.now_ns)
            except ValueError as exc:
                self._note("verb_failed", "shutdown", conn=conn, error=str(exc))
        self._flush()
        self.run_until(lambda: not self.core.conns(), grace_s)
        if self.capture is not None:
            self.capture.close()
            self.capture = None
        os.close(self._wake_r)
        os.close(self._wake_w)

    # ---- frames ----------------------------------------------------------------------

    def _receive(self, data: bytes) -> None:
        self.frames_in += 1
        answer = self.neighbours.handle(data)
        if answer is not None:
            self._capture(data, "received: neighbour discovery")
            for ip, mac in answer.learned:
                if self.known.get(ip) != mac:
                    self.known[ip] = mac
                    self.core.set_neighbour(ip, mac)
                    self._note("neighbour", "irdma_make_cm_node", ip=ip_text(ip),
                               mac=mac_text(mac))
            for reply in answer.replies:
                self._send_raw(reply, "neighbour advertisement")
            return
        echo = icmp.echo_reply(data, self.addresses, self.mac)
        if echo is not None:
            self._capture(data, "received: echo request (host stack)")
            self._send_raw(echo, "echo reply (host stack)")
            return
        try:
            seg = codec.decode(data)
        except codec.DecodeError as exc:
            # Not a TCP frame for the CM (ICMPv6, MLD, a bad checksum): the NIC passes
            # it to the host stack or drops it; the emulated CM never sees it.
            self._capture(data, f"received: not for the CM ({exc.reason})")
            return
        # The NIC's own filters: our MAC (or a group address) on a VLAN it has. What
        # passes goes to the CM whatever the IP: the CM's lookup decides (irdma_receive_ilq).
        if seg.dst_mac != self.mac and not seg.dst_mac[0] & 1:
            self._nic_drop(data, f"destination MAC {mac_text(seg.dst_mac)} is not ours")
            return
        if seg.vlan not in self.vlans:
            where = "untagged" if seg.vlan is None else f"VLAN {seg.vlan}"
            self._nic_drop(data, f"{where} is not configured")
            return
        if self.fault is not None and self.fault(RX, seg):
            self._capture(data, "received: dropped by the fault hook")
            self._note("fault", "live", direction=RX, what="dropped", flags=seg.flag_text,
                       seq=seg.seq, ack=seg.ack, length=len(seg.payload))
            return
        self._capture(data, "received")
        self.core.receive(seg, self.now_ns)

    def _nic_drop(self, data: bytes, reason: str) -> None:
        self._capture(data, f"received: dropped by the NIC: {reason}")
        self._note("segment_dropped", "nic", reason=reason)

    def _fire_timers(self) -> None:
        deadline = self.core.get_timer()
        if deadline is not None and deadline <= self.now_ns:
            self.core.handle_timer(self.now_ns)
        while self._later and self._later[0][0] <= self.now_ns:
            _due, _seq, fn = heapq.heappop(self._later)
            self._flush()
            fn()

    def _flush(self) -> None:
        progress = True
        while progress:
            progress = False
            for tx in self.core.frames_to_send():
                progress = True
                self._transmit(tx)
            upcall = self.core.next_event()
            while upcall is not None:
                progress = True
                self._deliver(upcall)
                upcall = self.core.next_event()

    def _transmit(self, tx: Transmit) -> None:
        seg = tx.segment
        if tx.loopback:
            # irdma_ipv4_is_lpb/irdma_ipv6_is_lpb: looped inside the NIC, never on the wire.
            self.core.receive(seg, self.now_ns)
            return
        if self.fault is not None and self.fault(TX, seg):
            self._note("fault", "live", direction=TX, what="dropped", comment=tx.comment,
                       flags=seg.flag_text, seq=seg.seq, ack=seg.ack, length=len(seg.payload))
            return
        self._send_raw(codec.encode(seg), tx.comment)

    def _send_raw(self, data: bytes, comment: str) -> None:
        self.frames_out += 1
        self._capture(data, comment)
        self.tap.write(data)

    def _deliver(self, upcall: Upcall) -> None:
        self.upcalls.append(upcall)
        step = self.rdma_cm.upcall(upcall)
        if self.trace is not None:
            self._note("rdma_cm_event", step.trace_fn, **step.trace_fields())
        if upcall.event == IwEvent.CONNECT_REQUEST:
            policy = self._policies.get(upcall.listener, Accept()) \
                if upcall.listener is not None else Accept()
            if isinstance(policy, Accept | Reject):
                verb = "accept" if isinstance(policy, Accept) else "reject"
                fn = self.core.accept if isinstance(policy, Accept) else self.core.reject
                conn, data = upcall.conn, policy.private_data
                self.after(policy.delay_ns, lambda: self._guarded(verb, fn, conn, data))
            elif not isinstance(policy, Manual):
                policy(self, upcall)
        for callback in self._callbacks:
            callback(self, upcall)

    def _guarded(self, verb: str, fn: Callable[..., None], conn: int, data: bytes) -> None:
        if verb == "reject":
            self.rdma_cm.verb(conn, "reject")  # iw_cm_reject: CONN_RECV -> IDLE first
        try:
            fn(conn, private_data=data, now_ns=self.now_ns)
        except ValueError as exc:  # CmError: the kernel would return -errno to the ULP
            if verb == "accept":
                self.rdma_cm.verb(conn, "accept_failed")  # iw_cm_accept's error path
            errno = int(getattr(exc, "errno", 0) or 0)
            failure = VerbFailure(self.now_ns, verb, errno, str(exc))
            self.failures.append(failure)
            for callback in self._failure_callbacks:
                callback(self, failure)
            self._note("verb_failed", "iw_cm", verb=verb, errno=errno, error=str(exc))
