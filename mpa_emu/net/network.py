"""The simulation: hosts on one virtual wire, a virtual clock and a deterministic scheduler.

One seed drives everything: each host's CM core gets a seed derived from it (its ISNs)
and the wire its own ``random.Random`` (the faults). The loop delivers due frames, runs
due scheduled calls, fires due core timers, and after every step drains each core's
outbox and upcall queue; when nothing is due the clock jumps to the next deadline.

Data flows one way: core -> ``Transmit`` -> wire -> receiving core. When a frame is
turned into bytes and back:

* :func:`mpa_emu.wire.codec.encode` runs once per frame, and only when something needs the
  bytes: the capture is on, the wire has drop rules or faults (they act on bytes), or
  :func:`mpa_emu.wire.codec.round_trips` cannot promise that the bytes decode to the same
  segment. With capture off on a perfect wire the receiver gets the sender's segment.
* :func:`mpa_emu.wire.codec.decode` runs only where the segment behind the bytes is not
  known: bytes that went through the wire's rules and faults, segments that may not
  round-trip, and injected bytes (decoded when injected). On a perfect wire a captured
  frame is encoded once and never decoded: the receiver gets the segment it came from.

Loopback frames
(``irdma_ipv4_is_lpb``/``irdma_ipv6_is_lpb``, ``do_lpb`` in ``irdma_make_cm_node``)
never reach the wire: the core hands them to its own peer node, and the network only
captures them, when asked, on a separate ``<host>/lo`` interface.
"""

from __future__ import annotations

import gc
import hashlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from heapq import heappop, heappush
from typing import IO, Any, Final, Protocol

from mpa_emu.capture.pcap import PcapngWriter
from mpa_emu.capture.spool import RecordLog
from mpa_emu.errors import ConfigError, UsageError
from mpa_emu.gc_tuning import YOUNG_COLLECTION
from mpa_emu.net.captured import CapturedFrame as CapturedFrame
from mpa_emu.net.captured import JournalEntry as JournalEntry
from mpa_emu.net.captured import to_scapy_packet as to_scapy_packet
from mpa_emu.net.faults import DropRule, FaultConfig, drop_nth, frame_kind
from mpa_emu.net.host import DEFAULT_MTU, Address, Host, as_ip
from mpa_emu.net.records import SpooledRecords
from mpa_emu.net.wire import Wire
from mpa_emu.ranges import EMULATOR_RANGES, check_value
from mpa_emu.stacks import DEFAULT_STACK, parse_params, stack_label, stack_of
from mpa_emu.stacks.contract.api import CoreApi
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.trace import Trace, TraceRecord, make_record
from mpa_emu.wire import codec
from mpa_emu.wire.addr import ip_text, mac_bytes, mac_text
from mpa_emu.wire.segment import Segment, Transmit

JOURNAL_TRACE_KINDS: Final = frozenset({"state_changed", "segment_dropped", "node_freed",
                                 "kernel_leak", "kernel_bug", "verb_failed", "run_bound",
                                 "rdma_cm_event", "kernel_log"})
"""Trace kinds the journal keeps next to frames and upcalls."""

LOOPBACK_NOTE: Final = "loopback inside the NIC, never on the wire (irdma_make_cm_node: do_lpb)"

_DELIVER: Final = 0
_CALL: Final = 1


def derive_seed(seed: int, label: str) -> int:
    """A 64-bit seed for one component, derived from the network seed and a label.

    Uses BLAKE2b rather than ``hash()`` so it does not depend on PYTHONHASHSEED.
    """
    digest = hashlib.blake2b(f"{seed}:{label}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


class CoreFactory(Protocol):
    """Builds the core of a host whose stack has a configuration record, from that
    record (by default the stack's own :attr:`~mpa_emu.stacks.base.ConfigRecord.make_core`:
    irdma's ``CmCore``); tests stand in for it."""

    def __call__(self, name: str, mac: bytes, config: Any, *, seed: int,
                 trace: Trace | None) -> CoreApi: ...


class JournalTrace(Trace):
    """The network's trace: records as usual, and hands each one to ``observer`` so the
    network can interleave state changes with frames and upcalls in causal order."""

    def __init__(self, stream: IO[str] | None,
                 observer: Callable[[TraceRecord], None] | None = None,
                 log: RecordLog[TraceRecord] | None = None) -> None:
        super().__init__(stream, log=log)
        self.observer = observer

    def emit(self, record: TraceRecord) -> None:
        """Record one entry and show it to the observer."""
        if self._keep:
            self._log.append(record)
        if self._stream is not None:
            self._stream.write(record.to_json() + "\n")
        if self.observer is not None:
            self.observer(record)


@dataclass(slots=True)
class ScheduledCall:
    """A user action scheduled at a virtual time; ``result`` once it ran, or ``error``
    when the core refused it (a :class:`~mpa_emu.stacks.contract.errors.CmError`; any other
    exception
    propagates out of :meth:`Network.run`)."""

    time_ns: int
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    done: bool = False
    result: Any = None
    error: CmError | None = None

    def __init__(self, time_ns: int, fn: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any], done: bool = False, result: Any = None,
                 error: CmError | None = None) -> None:
        # Written out: the compiled build then stores each field directly.
        self.time_ns = time_ns
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.done = done
        self.result = result
        self.error = error


@dataclass(frozen=True, slots=True)
class RunResult:
    """Why :meth:`Network.run` returned: ``"idle"`` (nothing left to do), ``"until"``
    (the time limit) or ``"max_events"`` (the event bound was hit: something may loop)."""

    reason: str
    events: int
    now_ns: int

    @property
    def bounded(self) -> bool:
        """True when the event bound stopped the run."""
        return self.reason == "max_events"


class Network:
    """Emulated hosts on one virtual Ethernet wire, driven in virtual time.

    ``latency_ns`` is the one-way wire latency, ``faults`` the random faults.
    ``capture`` keeps every frame (see :attr:`frames`, :meth:`write_pcapng`);
    ``capture_loopback`` adds loopback frames on ``<host>/lo``. ``tracing`` keeps a
    :class:`~mpa_emu.stacks.contract.trace.Trace` of the cores and the wire (streamed as JSON Lines
    to
    ``trace_stream`` when given). ``keep_upcalls`` records upcalls in ``Host.upcalls``.
    ``records`` keeps the frames, the journal, the trace records and the upcalls on
    disk instead of in lists (:class:`~mpa_emu.net.records.SpooledRecords`: memory
    bounded by what is alive, read back the same way).
    """

    def __init__(self, seed: int = 0, *, latency_ns: int = 10_000,
                 faults: FaultConfig | None = None, capture: bool = True,
                 capture_loopback: bool = True, tracing: bool = True,
                 trace_stream: IO[str] | None = None, keep_upcalls: bool = True,
                 core_factory: CoreFactory | None = None,
                 records: SpooledRecords | None = None) -> None:
        check_value("seed", seed, EMULATOR_RANGES["seed"])
        check_value("latency_ns", latency_ns, EMULATOR_RANGES["latency_ns"])
        self.seed = seed
        self.now_ns = 0
        self.wire = Wire(latency_ns=latency_ns, faults=faults, seed=derive_seed(seed, "wire"))
        self.capture = capture
        self.capture_loopback = capture_loopback
        self.keep_upcalls = keep_upcalls
        self.records = records
        self.journal: RecordLog[JournalEntry] | None = None
        if tracing:
            self.journal = records.journal() if records is not None else []
        self.delivery_tap: Callable[[Host, bytes | Segment], None] | None = None
        """Called with every frame handed to a host's NIC, before the NIC's checks: the
        bytes as the wire carried them (a fault may have changed them), or the segment
        itself when a perfect wire carried it without encoding."""
        """Frames, upcalls and trace records in causal order (kept when ``tracing``)."""
        self.trace: Trace | None = None
        if tracing or trace_stream is not None:
            self.trace = JournalTrace(trace_stream, self._journal_record if tracing else None,
                                      records.trace() if records is not None else None)
        self.frames: RecordLog[CapturedFrame] = (
            records.frames() if records is not None else [])
        self.events_run = 0
        """Events run so far by every :meth:`run` call, an interrupted one included."""
        self.hosts: dict[str, Host] = {}
        self._host_list: list[Host] = []
        self._by_mac: dict[bytes, Host] = {}
        self._core_factory: CoreFactory | None = core_factory
        self._queue: list[tuple[int, int, int, Any, Any]] = []
        self._seq = 0
        self._pumping = False
        self._running = False
        self._frame_count = 0

    def _journal_record(self, record: TraceRecord) -> None:
        if self.journal is not None and record.kind in JOURNAL_TRACE_KINDS:
            self.journal.append(JournalEntry("trace", record.host, record.time_ns, record))

    # ---- building the network ----------------------------------------------------

    def add_host(self, name: str, ip: Address | list[Address] | None = None, *,
                 mac: str | bytes | None = None, vlan: int | None = None,
                 config: Any = None, mtu: int | None = None,
                 auto_neighbours: bool = True, stack: str = DEFAULT_STACK,
                 params: Mapping[str, object] | None = None) -> Host:
        """Add a host with its addresses (all on ``vlan``; add more with
        ``Host.add_address``). ``mtu`` overrides ``config.mtu``. Neighbour entries for
        hosts sharing a VLAN are filled automatically unless ``auto_neighbours`` is False.

        ``stack`` names the connection manager the host runs (irdma, siw, cxgb4, qedr or
        erdma: a key of :data:`mpa_emu.stacks.STACKS`;
        :data:`~mpa_emu.stacks.DEFAULT_STACK` when not given), ``params`` its parameters
        as the kernel names them (checked by :func:`mpa_emu.stacks.parse_params`;
        ValueError with one line naming the key).
        ``config`` is the configuration record of a stack that has one
        (:attr:`Stack.config <mpa_emu.stacks.base.Stack.config>`: irdma's ``CmConfig``;
        its default profile when not given); other stacks take only its ``mtu``."""
        if not name or "/" in name:
            raise ConfigError(f"host name {name!r} is empty or contains '/'")
        if name in self.hosts:
            raise ConfigError(f"host name {name!r} is taken")
        addresses = [] if ip is None else ip if isinstance(ip, list) else [ip]
        for address in addresses:  # refuse bad input before anything is built
            as_ip(address)
        if vlan is not None and not 0 <= vlan < 4095:
            raise ConfigError(f"VLAN id must be 0..4094, got {vlan}")
        st = stack_of(stack)
        parsed = parse_params(stack, params or {})
        raw_mac = self._pick_mac(mac)
        record = st.config
        seed = derive_seed(self.seed, f"core:{name}")
        if record is not None:
            cfg: Any = (config if config is not None
                        else record.profiles[record.default_profile]())
            if mtu is not None:
                cfg = replace(cfg, mtu=mtu)
            if parsed != st.defaults():
                cfg = record.with_params(cfg, parsed)
            factory = self._core_factory or record.make_core
            core = factory(name, raw_mac, cfg, seed=seed, trace=self.trace)
            host_mtu = cfg.mtu
        else:
            cfg = None
            host_mtu = (mtu if mtu is not None else config.mtu if config is not None
                        else DEFAULT_MTU)
            core = st.make_core(name, raw_mac, parsed, seed=seed, trace=self.trace,
                                mtu=host_mtu)
        host = Host(self, name, raw_mac, cfg, core, auto_neighbours=auto_neighbours,
                    stack=stack, params=parsed, mtu=host_mtu)
        if self.records is not None:
            host.upcalls = self.records.upcalls()
            host.rdma_cm = self.records.rdma_cm()
        self.hosts[name] = host
        self._host_list.append(host)
        self._by_mac[raw_mac] = host
        for address in addresses:
            host.add_address(address, vlan=vlan)
        self.refresh_neighbours()
        return host

    def _pick_mac(self, mac: str | bytes | None) -> bytes:
        if mac is None:  # locally administered 02:00:00:00:00:01, ...:02, first free
            number = len(self._host_list) + 1
            while (raw := b"\x02\x00" + number.to_bytes(4, "big")) in self._by_mac:
                number += 1
        elif isinstance(mac, str):
            try:
                raw = mac_bytes(mac)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        elif isinstance(mac, bytes):
            raw = mac
        else:
            raise ConfigError(f"host MAC must be text or 6 bytes, got {mac!r}")
        if len(raw) != 6 or raw[0] & 1:
            raise ConfigError(f"host MAC must be 6 bytes and unicast, got {raw.hex(':')}")
        if raw in self._by_mac:
            raise ConfigError(f"MAC {mac_text(raw)} already belongs to {self._by_mac[raw].name}")
        return raw

    def host(self, name: str | Host) -> Host:
        """A host by name (a Host is returned as is)."""
        if isinstance(name, Host):
            return name
        try:
            return self.hosts[name]
        except KeyError:
            raise ConfigError(f"no host named {name!r}") from None

    def refresh_neighbours(self) -> None:
        """Fill each host's neighbour table with the addresses of the hosts it shares a
        VLAN with (hosts on one wire resolve each other: ``irdma_make_cm_node`` needs a resolved
        neighbour)."""
        for host in self._host_list:
            vlans = set(host.addresses.values())  # ARP/ND needs an address on the VLAN
            for other in self._host_list:
                if other is host:
                    continue
                for ip, vlan in other.addresses.items():
                    if vlan in vlans:
                        host.learn_neighbour(ip, other.mac)

    def drop(self, rule: DropRule | str, nth: int = 1, *, count: int = 1,
             sender: str | None = None) -> DropRule:
        """Drop a named frame: ``net.drop("SYN-ACK")`` drops the first SYN-ACK,
        ``net.drop("MPA request", 2)`` the second MPA request; or pass a DropRule."""
        if isinstance(rule, str):
            rule = drop_nth(rule, nth, count=count, sender=sender)
        return self.wire.add_rule(rule)

    # ---- scheduling --------------------------------------------------------------

    def at(self, time_ns: int, fn: Callable[..., Any], *args: Any,
           **kwargs: Any) -> ScheduledCall:
        """Run ``fn(*args, **kwargs)`` at virtual time ``time_ns`` (not in the past)."""
        check_value("time_ns", time_ns, EMULATOR_RANGES["time_ns"])
        if time_ns < self.now_ns:
            raise ConfigError(f"cannot schedule at {time_ns} ns: the clock is at {self.now_ns} ns")
        if not callable(fn):
            raise ConfigError(f"cannot schedule {fn!r}: not callable")
        call = ScheduledCall(time_ns, fn, args, kwargs)
        self._push(time_ns, _CALL, call, None)
        return call

    def after(self, delay_ns: int, fn: Callable[..., Any], *args: Any,
              **kwargs: Any) -> ScheduledCall:
        """Run ``fn`` ``delay_ns`` after the current virtual time."""
        check_value("delay_ns", delay_ns, EMULATOR_RANGES["time_ns"])
        return self.at(self.now_ns + delay_ns, fn, *args, **kwargs)

    def inject(self, frame: Any, *, via: str | Host | None = None,
               to: str | Host | None = None, at_ns: int | None = None,
               comment: str = "") -> ScheduledCall:
        """Put a frame on the wire from ``via``'s interface at ``at_ns`` (default now).

        ``frame`` is a scapy packet (``Ether()/IP()/TCP()/...``, mpa_emu's layers
        included) or raw bytes. It is delivered by destination MAC, or to ``to`` whatever
        its MAC. Bytes that do not decode still travel; the receiving NIC drops them.
        Without ``via`` the sender is the host owning the frame's source MAC, else, on a
        wire between two hosts, the one that does not receive it.
        """
        if isinstance(frame, (str, int, float, bool)) or frame is None:
            raise ConfigError(f"inject: a frame is a scapy packet or bytes, got {frame!r}")
        try:
            data = bytes(frame)
        except TypeError:
            raise ConfigError(f"inject: a frame is a scapy packet or bytes, got "
                              f"{type(frame).__name__}") from None
        target = self.host(to) if to is not None else None
        sender = self.host(via) if via is not None else self._injector(data, target)
        when = self.now_ns if at_ns is None else at_ns
        return self.at(when, self._inject_now, sender, target, data, comment)

    def _injector(self, data: bytes, target: Host | None) -> Host:
        """The host whose interface an injected frame without ``via`` leaves from."""
        owner = self._by_mac.get(data[6:12])
        if owner is not None:
            return owner
        receiver = target or self._by_mac.get(data[:6])
        others = [h for h in self._host_list if h is not receiver]
        if len(self._host_list) == 2 and receiver is not None and len(others) == 1:
            return others[0]
        raise ConfigError(
            f"inject: say via= which host's interface the frame leaves from (source MAC "
            f"{data[6:12].hex(':')} is no host's; hosts: {', '.join(self.hosts) or 'none'})")

    def _push(self, time_ns: int, kind: int, a: Any, b: Any) -> None:
        self._seq += 1
        heappush(self._queue, (time_ns, self._seq, kind, a, b))

    # ---- the loop ----------------------------------------------------------------

    def run(self, until_ns: int | None = None, *, max_events: int = 1_000_000) -> RunResult:
        """Run until nothing is left to do, until virtual time ``until_ns``, or until
        ``max_events`` events (deliveries, calls, timer firings) have run.

        With ``until_ns`` the clock ends at ``until_ns`` even when the network went idle
        earlier, so calls scheduled next are relative to it. Hitting the event bound is
        reported in the result and the trace, never silent. While it runs, the garbage
        collector's young generation is collected less often (as in
        :func:`mpa_emu.gc_tuning.fewer_young_collections`).
        """
        if self._running:
            raise UsageError("Network.run is not re-entrant: schedule work with at()/after() "
                               "from callbacks instead of running the network inside them")
        if until_ns is not None:
            check_value("until_ns", until_ns, EMULATOR_RANGES["time_ns"])
        check_value("max_events", max_events, EMULATOR_RANGES["max_events"])
        if until_ns is not None and until_ns < self.now_ns:
            raise ConfigError(f"until_ns {until_ns} is in the past (the clock is at {self.now_ns})")
        self._running = True
        # fewer_young_collections(), written out: a context manager is a generator, which
        # costs a short cycle of one run() per cycle more than the run's own bookkeeping.
        thresholds = gc.get_threshold()
        gc.set_threshold(max(thresholds[0], YOUNG_COLLECTION), *thresholds[1:])
        try:
            return self._run(until_ns, max_events)
        finally:
            gc.set_threshold(*thresholds)
            self._running = False

    def _run(self, until_ns: int | None, max_events: int) -> RunResult:
        events = 0
        hosts = self._host_list
        for host in hosts:  # anything may have been called on the cores since last time
            host.timer_stale = True
        self.pump()
        queue = self._queue
        reason = "idle"
        records = self.records
        try:
            while True:
                if records is not None and not events & 63:
                    records.settle()  # between events: no frame is half-captured
                when = queue[0][0] if queue else None
                timer_host: Host | None = None
                for host in hosts:
                    # A core's deadline moves only when something calls into it: re-read it
                    # then, not on every step (get_timer is not free).
                    if host.timer_stale:
                        host.timer_deadline = host.core.get_timer()
                        host.timer_stale = False
                    deadline = host.timer_deadline
                    if deadline is not None and (when is None or deadline < when):
                        when, timer_host = deadline, host
                if when is None:
                    break
                if until_ns is not None and when > until_ns:
                    reason = "until"
                    break
                if events >= max_events:
                    reason = "max_events"
                    self.note("network", "run_bound", "network.run", max_events=max_events,
                              next_ns=when)
                    break
                events += 1
                if when > self.now_ns:
                    self.now_ns = when
                if timer_host is not None:
                    timer_host.timer_stale = True
                    timer_host.core.handle_timer(self.now_ns)
                else:
                    _, _, kind, a, b = heappop(queue)
                    if kind == _DELIVER:
                        a.timer_stale = True
                        self._deliver(a, b)
                        self.pump(a)
                        continue
                    for host in hosts:  # user code may call into any core
                        host.timer_stale = True
                    self._call(a)
                    self.pump()
                    continue
                self.pump(timer_host)
        finally:
            # Counted even when Ctrl-C (KeyboardInterrupt) cuts the loop short.
            self.events_run += events
            if records is not None:
                records.settle()
        if until_ns is not None and reason != "max_events" and until_ns > self.now_ns:
            self.now_ns = until_ns
        return RunResult(reason, events, self.now_ns)

    def run_for(self, duration_ns: int, *, max_events: int = 1_000_000) -> RunResult:
        """Run for ``duration_ns`` of virtual time from now."""
        check_value("duration_ns", duration_ns, EMULATOR_RANGES["time_ns"])
        return self.run(self.now_ns + duration_ns, max_events=max_events)

    def pump(self, only: Host | None = None) -> None:
        """Drain every core's outbox and upcall queue at the current time, again after
        any upcall was delivered (its policy or callback may make any host act), until
        all are empty. ``only`` names the one host that can have output (the one that
        just received a frame or fired a timer): the first pass looks at it alone."""
        if self._pumping:
            return
        self._pumping = True
        try:
            again = True
            keep = self.keep_upcalls
            journal = self.journal
            hosts: list[Host] = self._host_list if only is None else [only]
            while again:
                again = False
                for host in hosts:
                    core = host.core
                    outbox = core.frames_to_send()
                    if outbox:
                        for tx in outbox:
                            self._transmit(host, tx)
                    upcall = core.next_event()
                    while upcall is not None:
                        again = True
                        if journal is not None:
                            journal.append(JournalEntry("upcall", host.name, self.now_ns, upcall))
                        host.deliver(upcall, keep)
                        upcall = core.next_event()
                if again:
                    hosts = self._host_list
                    for host in hosts:
                        host.timer_stale = True
        finally:
            self._pumping = False

    def _call(self, call: ScheduledCall) -> None:
        try:
            call.result = call.fn(*call.args, **call.kwargs)
        except CmError as exc:  # the verb refused: recorded, as the kernel returns it
            call.error = exc
            self.note("network", "verb_failed", getattr(call.fn, "__name__", "call"),
                      errno=int(getattr(exc, "errno", 0) or 0), error=str(exc))
        finally:
            call.done = True

    # ---- frames on the wire ------------------------------------------------------

    def _capture(self, interface: str, sender: str, receivers: tuple[str, ...], data: bytes,
                 origin: str, seg: Segment | None, loopback: bool) -> CapturedFrame:
        self._frame_count += 1
        frame = CapturedFrame(len(self.frames), self.now_ns, interface, sender, receivers,
                              data, origin, seg, loopback)
        self.frames.append(frame)
        if self.journal is not None:
            self.journal.append(JournalEntry("frame", sender, self.now_ns, frame))
        return frame

    def _transmit(self, host: Host, tx: Transmit) -> None:
        seg = tx.segment
        if tx.loopback:
            if not (self.capture and self.capture_loopback):
                self._frame_count += 1
            else:
                frame = self._capture(f"{host.name}/lo", host.name, (host.name,),
                                      codec.encode(seg), tx.comment, seg, True)
                frame.notes.append(LOOPBACK_NOTE)
            return  # the core has already handed it to the local peer node (do_lpb)
        wire = self.wire
        if not wire.rules and not wire.faults.any:
            dst_mac = seg.dst_mac
            owner = self._by_mac.get(dst_mac) if not dst_mac[0] & 1 else None
            if owner is not None and codec.round_trips(seg):
                # A perfect wire to one known host, in one pass: the frame is encoded
                # only for the capture, and the receiver gets the segment itself (the
                # bytes would decode to exactly it), never decoding anything.
                self._frame_count += 1
                now = self.now_ns
                captured: CapturedFrame | None = None
                if self.capture:
                    frames = self.frames
                    captured = CapturedFrame(len(frames), now, host.name, host.name,
                                             (owner.name,), codec.encode(seg), tx.comment,
                                             None, False, decodes=True)
                    frames.append(captured)
                    if self.journal is not None:
                        self.journal.append(JournalEntry("frame", host.name, now, captured))
                    captured.in_flight = 1
                self._seq += 1
                heappush(self._queue, (now + wire.latency_ns, self._seq,
                                             _DELIVER, owner, (seg, captured, False)))
                return
        self._put_on_wire(host, None, codec.encode(seg), seg, tx.comment)

    def _inject_now(self, sender: Host, target: Host | None, data: bytes, comment: str) -> None:
        try:
            seg: Segment | None = codec.decode(data)
        except codec.DecodeError:
            seg = None
        origin = f"injected: {comment}" if comment else "injected"
        self._put_on_wire(sender, target, data, seg, origin)

    def _put_on_wire(self, sender: Host, target: Host | None, data: bytes,
                     seg: Segment | None, origin: str) -> None:
        if target is not None:
            receivers: list[Host] = [target]
        elif data[0] & 1:  # broadcast or multicast: every other host
            receivers = [h for h in self._host_list if h is not sender]
        else:
            owner = self._by_mac.get(data[:6])
            receivers = [owner] if owner is not None else []
        frame: CapturedFrame | None = None
        if self.capture:
            frame = self._capture(sender.name, sender.name, tuple(h.name for h in receivers),
                                  data, origin, seg, False)
        else:
            self._frame_count += 1
        wire = self.wire
        forced = target is not None
        if receivers and not wire.rules and not wire.faults.any:  # a perfect wire
            when = self.now_ns + wire.latency_ns
            # The receiver decodes the bytes sent; when they are known to decode to
            # ``seg`` the decode is skipped.
            item = (seg if seg is not None and codec.round_trips(seg) else data, frame,
                    forced)
            if frame is not None:
                frame.in_flight += len(receivers)
            for receiver in receivers:
                self._seq += 1
                heappush(self._queue, (when, self._seq, _DELIVER, receiver, item))
            return
        index = frame.index if frame is not None else -1
        outcome = wire.carry(data, seg, sender.name)
        if frame is not None and outcome.notes:
            frame.notes.extend(outcome.notes)
        if outcome.notes:
            self.note(sender.name, "fault", "wire", frame=index, what=outcome.note,
                      segment=frame_kind(seg) if seg is not None else "undecodable")
        if outcome.lost is not None:
            self.note(sender.name, "segment_dropped", "wire", frame=index, reason=outcome.lost)
            return
        if not receivers:
            reason = f"no host owns destination MAC {data[:6].hex(':')}"
            if frame is not None:
                frame.notes.append(f"not delivered: {reason}")
            self.note(sender.name, "segment_dropped", "wire", frame=index, reason=reason)
            return
        if frame is not None:
            frame.in_flight += len(outcome.flights) * len(receivers)
        for flight in outcome.flights:
            for receiver in receivers:
                self._push(self.now_ns + flight.delay_ns, _DELIVER, receiver,
                           (flight.data, frame, forced))

    def _deliver(self, host: Host,
                 item: tuple[bytes | Segment, CapturedFrame | None, bool]) -> None:
        data, frame, forced = item
        if frame is not None:
            # Its notes and delivery count are final once every delivery has run.
            frame.in_flight -= 1
        if self.delivery_tap is not None:
            self.delivery_tap(host, data)
        if not host.link_up:
            self._nic_drop(host, frame, "link is down")
            return
        if isinstance(data, Segment):  # known to be what the wire bytes decode to
            seg = data
        else:
            try:
                seg = codec.decode(data)
            except codec.DecodeError as exc:
                self._nic_drop(host, frame, f"bad frame ({exc})")
                return
        if not forced and seg.dst_mac != host.mac and not seg.dst_mac[0] & 1:
            self._nic_drop(host, frame, f"destination MAC {mac_text(seg.dst_mac)} is not ours")
            return
        if seg.vlan not in host.vlan_set:
            where = "untagged" if seg.vlan is None else f"VLAN {seg.vlan}"
            self._nic_drop(host, frame, f"{where} is not configured on {host.name}")
            return
        # Only a frame longer than the MTU plus the Ethernet header can carry an IP
        # packet over the MTU; a segment without its bytes is measured directly.
        # A segment's IP header, TCP header and options take at most 100 bytes.
        if len(data) - 14 > host.mtu if type(data) is bytes \
                else len(seg.payload) + 100 > host.mtu:
            ip_len = (20 if seg.ipv4 else 40) + 20 + (len(seg.options) + 3) // 4 * 4 \
                + len(seg.payload)
            if ip_len > host.mtu:
                self._nic_drop(host, frame, f"IP packet of {ip_len} bytes exceeds MTU {host.mtu}")
                return
        if frame is not None:
            frame.delivered += 1
        host.core.receive(seg, self.now_ns)

    def _nic_drop(self, host: Host, frame: CapturedFrame | None, reason: str) -> None:
        if frame is not None:
            frame.notes.append(f"dropped by {host.name}'s NIC: {reason}")
        self.note(host.name, "segment_dropped", "nic",
                  frame=frame.index if frame is not None else -1, reason=reason)

    # ---- observability -----------------------------------------------------------

    def note(self, host: str, kind: str, fn: str, **fields: Any) -> None:
        """Add a network-level record (wire faults, NIC drops, run bounds) to the trace."""
        if self.trace is not None:
            self.trace.emit(make_record(self.now_ns, host, kind, fn, fields))

    def packet(self, number: int) -> Any:
        """Captured frame ``number`` as a scapy packet, numbered from 1 like Wireshark,
        tshark, ladders and frame comments (frame 1 is ``frames[0]``)."""
        if not 1 <= number <= len(self.frames):
            raise ConfigError(f"no captured frame {number}: frames are numbered 1 to "
                             f"{len(self.frames)}, like Wireshark's")
        return self.frames[number - 1].packet()

    def packets(self) -> Iterator[Any]:
        """Every captured frame as a scapy packet, in capture order."""
        return (f.packet() for f in self.frames)

    def write_pcapng(self, target: str | os.PathLike[str] | IO[bytes]) -> int:
        """Write every captured frame to a pcapng file (a path or a binary stream).

        One interface per host (then ``<host>/lo`` for loopback frames), timestamps from
        the virtual clock in nanoseconds, each frame's comment naming the kernel function
        and transition and what the wire or the receiving NIC did to it. Same seed and
        scenario, same bytes. Returns the number of frames written.
        """
        if isinstance(target, str | os.PathLike):
            with open(target, "wb") as stream:
                return self.write_pcapng(stream)
        writer = PcapngWriter(target, application="mpa_emu")
        for name in self.interfaces():
            host = self.hosts.get(name.split("/")[0])
            description = None
            if host is not None:
                addrs = " ".join(ip_text(a) for a in host.addresses)
                # a stack with a configuration record is named alone: the record, not
                # the label, says how it is set
                kind = (host.stack if host.config is not None
                        else stack_label(host.stack, host.params))
                description = f"emulated {kind} host {host.name} {mac_text(host.mac)} {addrs}"
                if name.endswith("/lo"):
                    description += " (NIC loopback, not on the wire)"
            writer.add_interface(name, description=description)
        for frame in self.frames:
            writer.write(frame.time_ns, frame.data, interface=frame.interface,
                         comment=frame.comment)
        writer.flush()
        return len(self.frames)

    @property
    def frames_sent(self) -> int:
        """Frames put on the wire or looped back so far (counted even without capture)."""
        return self._frame_count

    def interfaces(self) -> list[str]:
        """Capture interface names: one per host, then ``<host>/lo`` for loopback."""
        names = [h.name for h in self._host_list]
        names += sorted({f.interface for f in self.frames if f.loopback})
        return names
