"""Running a scenario on the emulated network (:class:`mpa_emu.net.Network`) and checking
its expectations."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from mpa_emu.net import Accept, FaultConfig, Manual, Network, NvmeTarget, Reject, RunResult
from mpa_emu.net.host import Host, Policy
from mpa_emu.net.records import SpooledRecords
from mpa_emu.net.smbd import SmbdClient, SmbdServer
from mpa_emu.scenario.conns import ConnRecord, conn_ids
from mpa_emu.scenario.expect import ExpectResult, check_all
from mpa_emu.scenario.fields import ScenarioError
from mpa_emu.scenario.model import ConnectSpec, EventSpec, ListenSpec, Scenario
from mpa_emu.ulp.upper.ksmbd import KsmbdLimits
from mpa_emu.wire.addr import mac_bytes


class Progress(Protocol):
    """Something that watches a running network, e.g.
    :class:`mpa_emu.scenario.progress.ProgressBar`: ``watch(net, duration_ns)`` is entered
    just before the run and left when it ends (normally or not)."""

    def watch(self, net: Network, duration_ns: int | None) -> AbstractContextManager[None]:
        """A context that observes ``net`` while it runs; it must not change it."""
        ...


@dataclass
class ScenarioRun:
    """A finished run: the network (frames, hosts, trace), why it stopped, and the
    outcome of every expectation."""

    scenario: Scenario
    net: Network
    result: RunResult
    connections: dict[str, list[ConnRecord]] = field(default_factory=dict)
    listeners: dict[str, tuple[str, int]] = field(default_factory=dict)
    expectations: list[ExpectResult] = field(default_factory=list)
    interrupted: bool = False
    """Stopped by Ctrl-C (``interruptible`` runs only): the frames and trace so far are
    kept, the expectations were not checked."""

    @property
    def ok(self) -> bool:
        """Every expectation holds and the run was neither cut by the event bound nor
        interrupted."""
        return (all(e.ok for e in self.expectations) and not self.result.bounded
                and not self.interrupted)

    def failures(self) -> list[ExpectResult]:
        """The expectations that did not hold."""
        return [e for e in self.expectations if not e.ok]


def build_network(sc: Scenario, *, trace_stream: IO[str] | None = None,
                  records: SpooledRecords | None = None) -> Network:
    """The network of a scenario: wire, faults, named drops and hosts (nothing
    scheduled yet), keeping its records in ``records`` when given (on disk). A host
    the network refuses (a MAC already taken, a multicast MAC) is a
    :class:`ScenarioError` naming the host's line."""
    w = sc.wire
    faults = FaultConfig(loss=w.loss, duplicate=w.duplicate, reorder=w.reorder,
                         corrupt=w.corrupt, reorder_delay_ns=w.reorder_delay_ns)
    net = Network(sc.seed, latency_ns=w.latency_ns, faults=faults, tracing=True,
                  trace_stream=trace_stream, records=records)
    for h in sc.hosts:
        try:
            host = net.add_host(h.name, list(h.addresses), mac=h.mac, vlan=h.vlan,
                                config=h.config, mtu=h.mtu,
                                auto_neighbours=h.auto_neighbours,
                                stack=h.stack, params=dict(h.params))
        except ValueError as exc:  # e.g. a MAC taken by another host, or multicast
            where = f"{sc.path}:{h.line}" if h.line is not None else sc.path
            raise ScenarioError(f"{where}: host {h.name}: {exc}", line=h.line) from None
        for ip, mac in h.neighbours:
            host.set_neighbour(ip, None if mac is None else mac_bytes(mac))
    for d in w.drops:
        net.drop(d.frame, d.nth, count=d.count, sender=d.sender)
    return net


class _Schedule:
    """Puts the scenario's listeners, connects and events on the network's clock."""

    def __init__(self, sc: Scenario, net: Network, run: ScenarioRun) -> None:
        self.sc = sc
        self.net = net
        self.run = run

    def all(self) -> None:
        for ls in self.sc.listens:
            self.net.at(ls.at_ns, self._listen, ls)
        for c in self.sc.connects:
            for i in range(c.count):
                self.net.at(c.at_ns + i * c.interval_ns, self._connect, c)
        for ev in self.sc.events:
            self.net.at(ev.at_ns, self._event, ev)

    def _listen(self, ls: ListenSpec) -> None:
        host = self.net.host(ls.host)
        policy: Policy
        if ls.policy == "reject":
            policy = Reject(ls.private_data, ls.delay_ns)
        elif ls.policy == "manual":
            policy = Manual()
        elif ls.policy == "nvme-target":
            policy = NvmeTarget(**dict(ls.target), delay_ns=ls.delay_ns)
        elif ls.policy == "smbd-server":
            policy = SmbdServer(KsmbdLimits(**dict(ls.smbd)), ls.private_data, ls.delay_ns)
        else:
            policy = Accept(ls.private_data, ls.delay_ns)
        listener = host.guarded("create_listen", host.listen, ls.port, ls.address,
                                policy=policy, backlog=ls.backlog, ipv6=ls.ipv6, vlan=ls.vlan)
        if listener is not None and ls.name:
            self.run.listeners[ls.name] = (ls.host, listener)

    def _connect(self, c: ConnectSpec) -> None:
        host = self.net.host(c.host)
        remote: str | Host = self.net.host(c.to) if c.to in self.net.hosts else c.to
        conn = host.guarded("connect", host.connect, remote, c.port,
                            local_ip=c.local_address, local_port=c.local_port,
                            private_data=c.private_data, ird=c.ird, ord=c.ord)
        if conn is None:
            return
        if c.smbd_negotiate is not None:
            SmbdClient(c.smbd_negotiate).attach(host, conn)
        record = ConnRecord(c.host, conn)
        _note_tuple(record, host.node(conn))
        self.run.connections.setdefault(c.name or f"line {c.line}", []).append(record)

    def _event(self, ev: EventSpec) -> None:
        host = self.net.host(ev.host)
        act = ev.action
        if act == "remove_address":
            host.guarded(act, host.remove_address, ev.address)
        elif act == "add_address":
            host.guarded(act, host.add_address, ev.address, vlan=ev.vlan)
        elif act == "link_down":
            host.guarded(act, host.link_down)
        elif act == "teardown":
            host.guarded(act, host.teardown, ev.address, vlan=ev.vlan,
                         disconnect_all=ev.disconnect_all)
        elif act == "device_reset":
            host.guarded(act, host.device_reset)
        elif act == "set_neighbour":
            assert ev.address is not None
            host.set_neighbour(ev.address, mac_bytes(ev.mac) if ev.mac else None)
        elif act == "destroy_listener":
            assert ev.listener is not None
            found = self.run.listeners.get(ev.listener)
            if found is not None:
                owner = self.net.host(found[0])
                owner.guarded(act, owner.unlisten, found[1])
        else:
            assert ev.connection is not None
            for conn in conn_ids(self.run, ev.connection, ev.host):
                if act == "disconnect":
                    host.guarded(act, host.disconnect, conn, graceful=ev.graceful)
                elif act == "close":
                    host.guarded(act, host.close, conn)
                elif act == "modify_qp_err":
                    host.guarded(act, host.modify_qp_err, conn)
                elif act == "accept":
                    host.guarded(act, host.accept, conn, ev.private_data)
                else:
                    host.guarded(act, host.reject, conn, ev.private_data)


def _note_tuple(record: ConnRecord, view: Any) -> None:
    if view is None:
        return
    record.local_ip = getattr(view, "loc_addr", None)
    record.local_port = getattr(view, "loc_port", None)
    record.remote_ip = getattr(view, "rem_addr", None)
    record.remote_port = getattr(view, "rem_port", None)


def run_scenario(sc: Scenario, *, trace_stream: IO[str] | None = None,
                 progress: Progress | None = None,
                 interruptible: bool = False,
                 records: SpooledRecords | None = None) -> ScenarioRun:
    """Build the network, schedule everything, run until idle (or the duration), and
    check every expectation. With ``interruptible``, Ctrl-C (KeyboardInterrupt) ends the
    run early instead of propagating: the result has ``interrupted`` set, reason
    ``"interrupted"``, and what was captured until then. With ``records``
    (:class:`~mpa_emu.net.records.SpooledRecords`) the frames, journal, trace and upcalls
    go to disk: memory bounded by what is alive, whatever the run's length; the caller
    closes ``records`` once the reports are written."""
    net = build_network(sc, trace_stream=trace_stream, records=records)
    run = ScenarioRun(sc, net, RunResult("idle", 0, 0))
    _Schedule(sc, net, run).all()
    try:
        run.result = _run(net, sc, progress)
    except KeyboardInterrupt:
        if not interruptible:
            raise
        run.interrupted = True
        run.result = RunResult("interrupted", net.events_run, net.now_ns)
        return run
    run.expectations = check_all(run)
    return run


def _run(net: Network, sc: Scenario, progress: Progress | None) -> RunResult:
    if progress is None:
        return net.run(sc.duration_ns, max_events=sc.max_events)
    with progress.watch(net, sc.duration_ns):
        return net.run(sc.duration_ns, max_events=sc.max_events)
