"""Reading a scenario file: TOML (``tomllib``) checked key by key into
:class:`~mpa_emu.scenario.model.Scenario`. Every problem is a :class:`ScenarioError`
naming the file, the line and the key; nothing else escapes."""

from __future__ import annotations

import errno as errno_names
import re
import tomllib
from dataclasses import fields, is_dataclass, replace
from pathlib import Path
from typing import Any

from mpa_emu.net.faults import FRAME_KINDS
from mpa_emu.ranges import EMULATOR_RANGES, FRONT_VERB_RANGES, HOST_RANGES
from mpa_emu.scenario.fields import ScenarioError, Source, Table
from mpa_emu.scenario.model import (
    EVENT_ACTIONS,
    VERBS,
    CmEventExpect,
    ConnectSpec,
    DropSpec,
    EventSpec,
    FailureExpect,
    FrameExpect,
    HostSpec,
    ListenerExpect,
    ListenSpec,
    Scenario,
    StateExpect,
    TraceExpect,
    UpcallExpect,
    WireSpec,
)
from mpa_emu.stacks import DEFAULT_STACK, STACKS, parse_params
from mpa_emu.stacks.base import ConfigRecord
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.ulp.rdma_cm import RdmaCmEventType
from mpa_emu.ulp.upper.cifs import DEFAULT_REQUEST
from mpa_emu.ulp.upper.ksmbd import ACCEPT_PRIVATE_DATA, KsmbdLimits
from mpa_emu.wire.addr import ip_bytes, mac_bytes
from mpa_emu.wire.ulp.smbd import NegotiateRequest

CAPTURE_MAGICS = frozenset(bytes.fromhex(m) for m in (
    "d4c3b2a1", "a1b2c3d4", "4d3cb2a1", "a1b23c4d", "0a0d0d0a"))
"""First bytes of pcap (both byte orders, micro- and nanosecond) and pcapng files."""

STATE_NAMES = ("UNKNOWN", "INITED", "LISTENING", "SYN_RCVD", "SYN_SENT",
               "ONE_SIDE_ESTABLISHED", "ESTABLISHED", "ACCEPTING", "MPAREQ_SENT",
               "MPAREQ_RCVD", "MPAREJ_RCVD", "OFFLOADED", "FIN_WAIT1", "FIN_WAIT2",
               "CLOSE_WAIT", "TIME_WAIT", "LAST_ACK", "CLOSING", "LISTENER_DESTROYED",
               "CLOSED")
"""enum irdma_cm_node_state without the prefix, in kernel order (cm.h)."""

IWARP_STATE_NAMES = ("none", "INVALID", "IDLE", "RTS", "CLOSING", "RTR", "TERMINATE",
                     "ERROR")
"""IRDMA_QP_STATE_* without the prefix; ``none`` for a node without a QP."""

TCP_STATE_NAMES = ("none", "NON_EXISTENT", "CLOSED", "LISTEN", "SYN_SENT", "SYN_RECEIVED",
                   "ESTABLISHED", "CLOSE_WAIT", "FIN_WAIT_1", "CLOSING", "LAST_ACK",
                   "FIN_WAIT_2", "TIME_WAIT")
"""IRDMA_TCP_STATE_* without the prefix; ``none`` for a node without a QP."""

MAX_EVENTS_DEFAULT = 2_000_000

_COUNT = EMULATOR_RANGES["expect_count"]


def load_scenario(path: str | Path) -> Scenario:
    """Read and check a scenario file."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ScenarioError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if raw[:4] in CAPTURE_MAGICS:
        raise ScenarioError(f"{p}: a packet capture, not a scenario file (for captures: "
                            "mpa-emu inspect, diagram or replay)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{p}: not UTF-8 text (byte {exc.start})") from None
    return loads(text, str(p))


def loads(text: str, name: str = "<scenario>") -> Scenario:
    """Check a scenario given as TOML text; ``name`` is used in messages."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"at line (\d+)", str(exc))
        line = int(found.group(1)) if found else None
        where = f"{name}:{line}" if line is not None else name
        raise ScenarioError(f"{where}: invalid TOML: {exc}", line=line) from None
    source = Source(name, text)
    return _Loader(source).scenario(Table(source, (), data))


_SMBD_LIMITS = (("receive_credit_max", 0xFFFF), ("send_credit_target", 0xFFFF),
                ("max_send_size", 0xFFFFFFFF), ("max_receive_size", 0xFFFFFFFF),
                ("max_read_write_size", 0xFFFFFFFF))
"""``policy = "smbd-server"``'s keys (:class:`~mpa_emu.ulp.upper.ksmbd.KsmbdLimits`)
and the largest value of each field ([MS-SMBD] 2.2.2: 16- and 32-bit)."""
_SMBD_REQUEST = (("min_version", 0xFFFF), ("max_version", 0xFFFF),
                 ("credits_requested", 0xFFFF), ("preferred_send_size", 0xFFFFFFFF),
                 ("max_receive_size", 0xFFFFFFFF), ("max_fragmented_size", 0xFFFFFFFF))
"""``smbd_negotiate``'s keys: the Negotiate Request's fields ([MS-SMBD] 2.2.1)."""


def _smbd_negotiate(t: Table) -> NegotiateRequest | None:
    """``smbd_negotiate = true`` (cifs.ko's request) or a table of the request's fields,
    each defaulting to cifs.ko's (:data:`mpa_emu.ulp.upper.cifs.DEFAULT_REQUEST`)."""
    raw = t.raw("smbd_negotiate")
    if raw is None or raw is False:
        return None
    if raw is True:
        return DEFAULT_REQUEST
    if not isinstance(raw, dict):
        raise t.error("smbd_negotiate", "expected true or a table of Negotiate Request "
                      f"fields ({', '.join(k for k, _ in _SMBD_REQUEST)})")
    sub = t.table("smbd_negotiate")
    assert sub is not None
    values = {key: sub.integer(key, getattr(DEFAULT_REQUEST, key), lo=0, hi=hi)
              for key, hi in _SMBD_REQUEST}
    sub.done()
    return NegotiateRequest(**values)


def _errno(table: Table, key: str) -> int | None:
    """``0``, ``-111``, ``"ECONNREFUSED"`` or ``"-ECONNREFUSED"`` -> status int."""
    value = table.raw(key)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        name = value.lstrip("-")
        number = getattr(errno_names, name, None)
        if isinstance(number, int):
            return -number if key == "status" else number
    raise table.error(key, f"expected 0, a negative errno or a name such as "
                      f"\"ECONNREFUSED\", got {value!r}")


class _Loader:
    def __init__(self, source: Source) -> None:
        self.source = source
        self.host_names: set[str] = set()
        self.host_addresses: dict[str, str] = {}  # address text -> host
        self.host_stacks: dict[str, str] = {}  # host -> stack name

    def scenario(self, top: Table) -> Scenario:
        name = top.text("name", default=Path(self.source.name).stem)
        description = top.text("description", default="")
        seed = top.ranged("seed", EMULATOR_RANGES["seed"], default=0)
        duration = top.duration("duration")
        max_events = top.ranged("max_events", EMULATOR_RANGES["max_events"],
                                default=MAX_EVENTS_DEFAULT)
        tags = tuple(top.strings("tags"))
        wire_table = top.table("wire")
        wire = self.wire(wire_table) if wire_table is not None else WireSpec()
        host_tables = top.tables("host")
        if not host_tables:
            raise top.error(None, "a scenario needs at least one [[host]]")
        hosts = tuple(self.host(t) for t in host_tables)
        listen_tables = top.tables("listen")
        listens = tuple(self.listen(t) for t in listen_tables)
        self._unique_names(listen_tables, listens, "[[listen]]")
        connect_tables = top.tables("connect")
        connects = tuple(self.connect(t) for t in connect_tables)
        self._unique_names(connect_tables, connects, "[[connect]]")
        conn_names = {c.name for c in connects if c.name is not None}
        listener_names = {ls.name for ls in listens if ls.name is not None}
        events = tuple(self.event(t, conn_names, listener_names) for t in top.tables("event"))
        expect = top.table("expect")
        upcalls: tuple[UpcallExpect, ...] = ()
        states: tuple[StateExpect, ...] = ()
        frames: tuple[FrameExpect, ...] = ()
        failures: tuple[FailureExpect, ...] = ()
        traces: tuple[TraceExpect, ...] = ()
        listeners: tuple[ListenerExpect, ...] = ()
        cm_events: tuple[CmEventExpect, ...] = ()
        if expect is not None:
            upcalls = tuple(self.expect_upcall(t, conn_names) for t in expect.tables("upcall"))
            states = tuple(self.expect_state(t, conn_names) for t in expect.tables("state"))
            frames = tuple(self.expect_frame(t) for t in expect.tables("frame"))
            failures = tuple(self.expect_failure(t) for t in expect.tables("verb_failure"))
            traces = tuple(self.expect_trace(t) for t in expect.tables("trace"))
            listeners = tuple(self.expect_listener(t, listener_names)
                              for t in expect.tables("listener"))
            cm_events = tuple(self.expect_cm_event(t, conn_names)
                              for t in expect.tables("cm_event"))
            expect.done()
        top.done()
        for d in wire.drops:
            if d.sender is not None:
                self._check_host(top, "wire", d.sender)
        return Scenario(name=name, description=description, path=self.source.name,
                        seed=seed, duration_ns=duration, max_events=max_events, wire=wire,
                        hosts=hosts, listens=listens, connects=connects, events=events,
                        upcalls=upcalls, states=states, frames=frames, failures=failures,
                        traces=traces, tags=tags, listeners=listeners,
                        cm_events=cm_events)

    # ---- sections --------------------------------------------------------------

    def wire(self, t: Table) -> WireSpec:
        drops = []
        for d in t.tables("drop"):
            frame = d.text("frame", required=True, choices=FRAME_KINDS)
            drops.append(DropSpec(frame=frame,
                                  nth=d.ranged("nth", EMULATOR_RANGES["nth"], default=1),
                                  count=d.ranged("count", EMULATOR_RANGES["drop_count"],
                                                 default=1),
                                  sender=d.text("from"), line=d.line()))
            d.done()
        latency = t.duration("latency", default=10_000)
        if latency > EMULATOR_RANGES["latency_ns"].hi:
            raise t.error("latency", EMULATOR_RANGES["latency_ns"].problem(latency) or "")
        spec = WireSpec(latency_ns=latency,
                        loss=t.prob("loss"), duplicate=t.prob("duplicate"),
                        reorder=t.prob("reorder"), corrupt=t.prob("corrupt"),
                        reorder_delay_ns=t.duration("reorder_delay", default=50_000),
                        drops=tuple(drops))
        t.done()
        return spec

    def host(self, t: Table) -> HostSpec:
        name = t.text("name", required=True)
        if not name or "/" in name:
            raise t.error("name", f"a host name must be non-empty without '/', got {name!r}")
        if name in self.host_names:
            raise t.error("name", f"host {name!r} is defined twice")
        self.host_names.add(name)
        addresses = t.strings("address")
        if t.has("address") and not addresses:
            raise t.error("address", "an empty array: give at least one address, or leave "
                                     "the key out")
        for a in addresses:
            self._address(t, "address", a)
            if a in self.host_addresses:
                raise t.error("address", f"{a} already belongs to {self.host_addresses[a]}")
            self.host_addresses[a] = name
        vlan = t.ranged("vlan", FRONT_VERB_RANGES["vlan"])
        mac = self._mac(t, "mac")
        stack = t.text("stack", default=DEFAULT_STACK, choices=tuple(sorted(STACKS)))
        self.host_stacks[name] = stack
        record = STACKS[stack].config
        config: Any = None  # the record (a dataclass), None for a stack without one
        if record is None:
            for key in ("profile", "config"):
                if t.has(key):
                    raise t.error(key, f"{key!r} sets {_record_words()}; a {stack} host "
                                       "takes [host.params]")
            mtu = t.ranged("mtu", HOST_RANGES["mtu"])
        else:
            profile_name = t.text("profile", default=record.default_profile,
                                  choices=tuple(record.profiles))
            config = record.profiles[profile_name]()
            mtu = t.ranged("mtu", record.ranges["mtu"])
            cfg_table = t.table("config")
            if cfg_table is not None:
                config = self.config(cfg_table, config, record)
        params = self.params(t.table("params"), stack)
        if mtu is not None and config is not None:
            config = replace(config, mtu=mtu)
        neighbours = []
        nb = t.table("neighbours")
        if nb is not None:
            for ip in list(nb.data):
                value = nb.text(ip)
                self._address(nb, ip, ip)
                if value == "unresolved":
                    neighbours.append((ip, None))
                    continue
                try:
                    mac_bytes(value)
                except ValueError as exc:
                    raise nb.error(ip, f"{exc} (or \"unresolved\")") from None
                neighbours.append((ip, value))
            nb.done()
        auto = t.flag("auto_neighbours", default=True)
        spec = HostSpec(name=name, addresses=tuple(addresses), vlan=vlan, mac=mac,
                        config=config, neighbours=tuple(neighbours), auto_neighbours=auto,
                        line=t.line(), stack=stack, params=params, mtu=mtu)
        t.done()
        return spec

    @staticmethod
    def params(t: Table | None, stack: str) -> tuple[tuple[str, int | bool], ...]:
        """``[host.params]``: the stack's parameters, each checked by name, type and range
        (:func:`mpa_emu.stacks.parse_params`)."""
        if t is None:
            return ()
        out: list[tuple[str, int | bool]] = []
        for key in list(t.data):
            value = t.raw(key)
            try:
                out.append((key, parse_params(stack, {key: value})[key]))
            except ValueError as exc:
                raise t.error(key, str(exc)) from None
        t.done()
        return tuple(out)

    def config(self, t: Table, base: Any, record: ConfigRecord, path: str = "") -> Any:
        """``[host.config]`` (and its sub-tables, such as ``[host.config.quirks]``): each
        field of the stack's record by the type of its value in ``base``, integers in
        :attr:`ConfigRecord.ranges`, texts among :attr:`ConfigRecord.choices`."""
        changes: dict[str, Any] = {}
        for f in fields(base):
            current = getattr(base, f.name)
            if f.name in record.fixed or is_dataclass(current) or not t.has(f.name):
                t.raw(f.name)
                continue
            changes[f.name] = self._typed(t, f.name, current, record)
        for dotted, allowed in record.choices.items():
            key = dotted[len(path):] if dotted.startswith(path) else ""
            if key and "." not in key and changes.get(key) not in (None, *allowed):
                raise t.error(key, "expected " + " or ".join(f'"{c}"' for c in allowed))
        for f in fields(base):
            current = getattr(base, f.name)
            sub = t.table(f.name) if is_dataclass(current) else None
            if sub is not None:
                changes[f.name] = self.config(sub, current, record, f"{path}{f.name}.")
        t.done()
        return replace(base, **changes)

    @staticmethod
    def _typed(t: Table, key: str, current: Any, record: ConfigRecord) -> Any:
        if isinstance(current, bool):
            return t.flag(key)
        if isinstance(current, int):
            return t.ranged(key, record.ranges[key])
        return t.text(key)

    def listen(self, t: Table) -> ListenSpec:
        host = self._host(t, "host", required=True)
        address = t.text("address")
        if address in ("*", "any", "0.0.0.0", "::"):
            ipv6_wild = address == "::"
            address = None
        else:
            ipv6_wild = False
            if address is not None:
                self._address(t, "address", address)
        policy = t.text("policy", default="accept",
                        choices=("accept", "reject", "manual", "nvme-target", "smbd-server"))
        target: tuple[tuple[str, int], ...] = ()
        if policy == "nvme-target":
            # nvmet-rdma's admin queue depth and a target's own limits (nvme_target.py).
            target = tuple((key, value) for key, value in (
                ("max_queue_size", t.integer("max_queue_size", lo=1, hi=0x10000)),
                ("max_qid", t.integer("max_qid", lo=0, hi=0xFFFF)),
                ("aq_depth", t.integer("aq_depth", lo=1, hi=0x10000))) if value is not None)
        smbd: tuple[tuple[str, int], ...] = ()
        private_data = t.data_bytes("private_data")
        if policy == "smbd-server":
            # ksmbd's limits (transport_rdma.c's module defaults unless given; ksmbd.py).
            smbd = tuple((key, value) for key, hi in _SMBD_LIMITS
                         if (value := t.integer(key, lo=1, hi=hi)) is not None)
            problem = KsmbdLimits(**dict(smbd)).problem()
            if problem is not None:
                raise t.error(None, f"policy \"smbd-server\": {problem}")
            if private_data is None:  # smb_direct_accept_client's IRD/ORD header
                private_data = ACCEPT_PRIVATE_DATA
        spec = ListenSpec(host=host, address=address,
                          port=t.ranged("port", FRONT_VERB_RANGES["port"], required=True),
                          backlog=t.ranged("backlog", FRONT_VERB_RANGES["backlog"], default=16),
                          ipv6=bool(t.flag("ipv6", default=False)) or ipv6_wild
                          or (address is not None and ":" in address),
                          vlan=t.ranged("vlan", FRONT_VERB_RANGES["vlan"]), policy=policy,
                          private_data=private_data or b"",
                          delay_ns=t.duration("delay", default=0),
                          at_ns=t.duration("at", default=0), name=t.text("name"),
                          line=t.line(), target=target, smbd=smbd)
        t.done()
        return spec

    def connect(self, t: Table) -> ConnectSpec:
        host = self._host(t, "from", required=True)
        to = t.text("to", required=True)
        if to not in self.host_names:
            try:
                ip_bytes(to)
            except ValueError:
                hosts = ", ".join(sorted(self.host_names)) or "none"
                raise t.error("to", f"unknown host {to!r} (hosts: {hosts}; or give an "
                                    "IPv4 or IPv6 address)") from None
        local = t.text("local_address")
        if local is not None:
            self._address(t, "local_address", local)
        spec = ConnectSpec(host=host, to=to, port=t.integer("port", required=True, lo=0, hi=65535),
                           local_address=local,
                           local_port=t.ranged("local_port", FRONT_VERB_RANGES["port"]),
                           private_data=t.data_bytes("private_data") or b"",
                           ird=t.ranged("ird", FRONT_VERB_RANGES["ird"], default=16),
                           ord=t.ranged("ord", FRONT_VERB_RANGES["ord"], default=16),
                           at_ns=t.duration("at", default=0),
                           count=t.ranged("count", EMULATOR_RANGES["connect_count"],
                                          default=1),
                           interval_ns=t.duration("interval", default=1_000_000),
                           name=t.text("name"), line=t.line(),
                           smbd_negotiate=_smbd_negotiate(t))
        last = spec.at_ns + (spec.count - 1) * spec.interval_ns
        if last > EMULATOR_RANGES["time_ns"].hi:
            raise t.error("interval", f"the last of {spec.count} connects would start at "
                          f"{last} ns, past the latest virtual time "
                          f"{EMULATOR_RANGES['time_ns'].hi} ns")
        t.done()
        return spec

    def event(self, t: Table, conns: set[str], listeners: set[str]) -> EventSpec:
        action = t.text("action", required=True, choices=EVENT_ACTIONS)
        host = self._host(t, "host", required=True)
        address = t.text("address")
        if address is not None:
            self._address(t, "address", address)
        connection = self._reference(t, "connection", conns, "connect")
        listener = self._reference(t, "listener", listeners, "listen")
        needs = {"remove_address": "address", "add_address": "address",
                 "set_neighbour": "address", "destroy_listener": "listener"}
        if action in needs and t.raw(needs[action]) is None:
            raise t.error(None, f"action {action!r} needs key {needs[action]!r}")
        if action in ("disconnect", "close", "accept", "reject", "modify_qp_err") \
                and connection is None:
            raise t.error(None, f"action {action!r} needs key 'connection'")
        mac = self._mac(t, "mac")
        spec = EventSpec(at_ns=t.duration("at", required=True), action=action, host=host,
                         address=address, vlan=t.ranged("vlan", FRONT_VERB_RANGES["vlan"]),
                         connection=connection, listener=listener,
                         graceful=bool(t.flag("graceful", default=True)),
                         private_data=t.data_bytes("private_data") or b"",
                         mac=mac, disconnect_all=bool(t.flag("disconnect_all", default=False)),
                         line=t.line())
        if action == "teardown" and (address is None) == (not spec.disconnect_all):
            raise t.error(None, "action 'teardown' needs 'address' or disconnect_all = true, "
                                "not both")
        t.done()
        return spec

    # ---- expectations ------------------------------------------------------------

    def expect_upcall(self, t: Table, conns: set[str]) -> UpcallExpect:
        host = self._host(t, "host", required=True)
        event = t.text("event", required=True, choices=tuple(e.name for e in IwEvent))
        connection = self._reference(t, "connection", conns, "connect")
        spec = UpcallExpect(host=host, event=event, status=_errno(t, "status"),
                            private_data=t.data_bytes("private_data"),
                            private_data_len=t.integer("private_data_len", lo=0),
                            ird=t.integer("ird", lo=0), ord=t.integer("ord", lo=0),
                            connection=connection, count=t.ranged("count", _COUNT),
                            line=t.line())
        t.done()
        return spec

    def expect_cm_event(self, t: Table, conns: set[str]) -> CmEventExpect:
        host = self._host(t, "host", required=True)
        name = t.text("event", required=True)
        try:
            event = RdmaCmEventType.parse(name).kernel_name
        except ValueError as exc:
            raise t.error("event", str(exc)) from None
        connection = self._reference(t, "connection", conns, "connect")
        spec = CmEventExpect(host=host, event=event, status=_errno(t, "status"),
                             connection=connection, at_ns=t.duration("at"),
                             count=t.integer("count", lo=0), line=t.line())
        t.done()
        return spec

    def expect_state(self, t: Table, conns: set[str]) -> StateExpect:
        host = self._host(t, "host", required=True)
        connection = self._reference(t, "connection", conns, "connect", required=True)
        names = STACKS[self.host_stacks.get(host, DEFAULT_STACK)].states or STATE_NAMES
        state = t.text("state", choices=(*names, "freed"))
        iwarp = t.text("iwarp_state", choices=IWARP_STATE_NAMES)
        tcp = t.text("tcp_state", choices=TCP_STATE_NAMES)
        if state is None and iwarp is None and tcp is None:
            raise t.error(None, "expect.state needs 'state', 'iwarp_state' or 'tcp_state'")
        spec = StateExpect(host=host, connection=connection, state=state, line=t.line(),
                           iwarp_state=iwarp, tcp_state=tcp)
        t.done()
        return spec

    def expect_listener(self, t: Table, listeners: set[str]) -> ListenerExpect:
        host = self._host(t, "host", required=True)
        name = self._reference(t, "listener", listeners, "listen", required=True)
        flag = t.flag("syn_qhash")
        if flag is None:
            raise t.error(None, "expect.listener needs 'syn_qhash' (true or false)")
        stack = self.host_stacks.get(host, DEFAULT_STACK)
        if "syn_qhash_installed" not in STACKS[stack].listener_facts:
            # the TCP_SYN qhash entry is irdma's (irdma_manage_qhash): the NIC steering
            # SYNs to the CM; siw listens on a kernel socket, cxgb4 on a server tid
            raise t.error("syn_qhash", f"not for this stack: host {host!r} runs {stack}, "
                          "whose listeners have no TCP_SYN qhash entry (irdma's, "
                          "irdma_manage_qhash)")
        spec = ListenerExpect(host=host, listener=name, syn_qhash=bool(flag), line=t.line())
        t.done()
        return spec

    def expect_frame(self, t: Table) -> FrameExpect:
        sender = self._host(t, "from")
        spec = FrameExpect(kind=t.text("kind", choices=FRAME_KINDS), sender=sender,
                           flags=t.text("flags"), private_data=t.data_bytes("private_data"),
                           mpa_rev=t.integer("mpa_rev", lo=0, hi=255),
                           rtr=self._rtr(t), lost=t.flag("lost"),
                           count=t.ranged("count", _COUNT), min=t.ranged("min", _COUNT),
                           max=t.ranged("max", _COUNT), line=t.line())
        if spec.flags is not None and set(spec.flags) - set("FSRPAUEC"):
            raise t.error("flags", f"TCP flags are letters of FSRPAUEC, got {spec.flags!r}")
        t.done()
        return spec

    @staticmethod
    def _rtr(t: Table) -> tuple[str, ...] | None:
        if not t.has("rtr"):
            t.raw("rtr")
            return None
        names = t.strings("rtr")
        words = [w for n in names for w in n.split()]
        bad = [w for w in words if w not in ("send", "write", "read", "none")]
        if bad:
            raise t.error("rtr", f"RTR types are send, write, read or none; got {bad[0]!r}")
        return tuple(sorted(w for w in words if w != "none"))

    def expect_failure(self, t: Table) -> FailureExpect:
        host = self._host(t, "host", required=True)
        spec = FailureExpect(host=host, verb=t.text("verb", choices=VERBS),
                             errno=_errno(t, "errno"),
                             count=t.ranged("count", _COUNT), line=t.line())
        t.done()
        return spec

    def expect_trace(self, t: Table) -> TraceExpect:
        host = self._host(t, "host")
        spec = TraceExpect(kind=t.text("kind", required=True), host=host, fn=t.text("fn"),
                           text=t.text("text"), count=t.ranged("count", _COUNT),
                           line=t.line())
        t.done()
        return spec

    # ---- checks ------------------------------------------------------------------

    @staticmethod
    def _unique_names(tables: list[Table], specs: tuple[ListenSpec | ConnectSpec, ...],
                      section: str) -> None:
        """Events and expectations refer to these by name: two with one name would make
        the reference ambiguous."""
        seen: dict[str, int] = {}
        for t, spec in zip(tables, specs, strict=True):
            if spec.name is None:
                continue
            line = t.line("name") or 0
            if spec.name in seen:
                raise t.error("name", f"{section} name {spec.name!r} is already used on line "
                                      f"{seen[spec.name]}")
            seen[spec.name] = line

    def _host(self, t: Table, key: str, *, required: bool = False) -> Any:
        """The ``[[host]]`` name under ``key`` (``None`` when optional and absent)."""
        name = t.text(key, required=required)
        return None if name is None else self._check_host(t, key, name)

    @staticmethod
    def _reference(t: Table, key: str, known: set[str], section: str, *,
                   required: bool = False) -> Any:
        """The name of a ``[[section]]`` under ``key``: one of ``known``, or ``None`` when
        optional and absent."""
        name = t.text(key, required=required)
        if name is not None and name not in known:
            raise t.error(key, f"no [[{section}]] named {name!r}")
        return name

    def _check_host(self, t: Table, key: str, name: str) -> str:
        if name not in self.host_names:
            known = ", ".join(sorted(self.host_names)) or "none"
            raise t.error(key, f"no [[host]] named {name!r} (hosts: {known})")
        return name

    @staticmethod
    def _mac(t: Table, key: str) -> Any:
        """The MAC address under ``key`` as written, checked (``None`` when absent)."""
        mac = t.text(key)
        if mac is not None:
            try:
                mac_bytes(mac)
            except ValueError as exc:
                raise t.error(key, str(exc)) from None
        return mac

    @staticmethod
    def _address(t: Table, key: str, text: str) -> None:
        try:
            ip_bytes(text)
        except ValueError as exc:
            raise t.error(key, str(exc)) from None


__all__ = ["STATE_NAMES", "ScenarioError", "load_scenario", "loads"]


def _record_words() -> str:
    """``irdma's CmConfig``: the configuration record of each stack that has one."""
    return " or ".join(
        f"{st.name}'s {type(st.config.profiles[st.config.default_profile]()).__name__}"
        for st in STACKS.values() if st.config is not None)
