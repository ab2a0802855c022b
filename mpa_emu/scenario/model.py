"""A validated scenario as typed values. Every item keeps the line it came from, so the
runner can name it in failures."""

from __future__ import annotations

from dataclasses import dataclass, field

from mpa_emu.stacks import DEFAULT_STACK
from mpa_emu.stacks.base import HostConfig
from mpa_emu.wire.ulp.smbd import NegotiateRequest


@dataclass(frozen=True, slots=True)
class HostSpec:
    """``[[host]]``: one emulated host, running any registered stack."""

    name: str
    addresses: tuple[str, ...]
    vlan: int | None
    mac: str | None
    config: HostConfig | None
    """The stack's configuration record (``profile`` and ``[host.config]``: irdma's
    ``CmConfig``), None for a stack its ``[host.params]`` configure alone."""
    neighbours: tuple[tuple[str, str | None], ...]
    auto_neighbours: bool
    line: int | None
    stack: str = DEFAULT_STACK
    """The connection manager (a key of ``mpa_emu.stacks.STACKS``)."""
    params: tuple[tuple[str, int | bool], ...] = ()
    """``[host.params]``: the stack's parameters, as checked."""
    mtu: int | None = None
    """``mtu``: the interface MTU (also in :attr:`config` when the stack has a record)."""


@dataclass(frozen=True, slots=True)
class ListenSpec:
    """``[[listen]]``: a listener and how its application answers requests."""

    host: str
    address: str | None
    port: int
    backlog: int
    ipv6: bool
    vlan: int | None
    policy: str
    private_data: bytes
    delay_ns: int
    at_ns: int
    name: str | None
    line: int | None
    target: tuple[tuple[str, int], ...] = ()
    """``policy = "nvme-target"``: its limits (max_queue_size, max_qid, aq_depth)."""
    smbd: tuple[tuple[str, int], ...] = ()
    """``policy = "smbd-server"``: ksmbd's limits given (receive_credit_max,
    send_credit_target, max_send_size, max_receive_size, max_read_write_size)."""


@dataclass(frozen=True, slots=True)
class ConnectSpec:
    """``[[connect]]``: ``count`` active opens from ``host`` to ``to``:``port``."""

    host: str
    to: str
    port: int
    local_address: str | None
    local_port: int | None
    private_data: bytes
    ird: int
    ord: int
    at_ns: int
    count: int
    interval_ns: int
    name: str | None
    line: int | None
    smbd_negotiate: NegotiateRequest | None = None
    """``smbd_negotiate``: the SMB Direct Negotiate Request the client sends once the
    connection is established (cifs.ko's, :mod:`mpa_emu.ulp.upper.cifs`), or None."""


EVENT_ACTIONS = ("remove_address", "add_address", "link_down", "disconnect",
                 "destroy_listener", "close", "accept", "reject", "set_neighbour",
                 "teardown", "device_reset", "modify_qp_err")

VERBS = ("connect", "create_listen", *EVENT_ACTIONS)
"""Verbs a scenario runs on behalf of its application; a refusal is a verb failure."""


@dataclass(frozen=True, slots=True)
class EventSpec:
    """``[[event]]``: something that happens at a virtual time."""

    at_ns: int
    action: str
    host: str
    address: str | None = None
    vlan: int | None = None
    connection: str | None = None
    listener: str | None = None
    graceful: bool = True
    private_data: bytes = b""
    mac: str | None = None
    disconnect_all: bool = False
    line: int | None = None


@dataclass(frozen=True, slots=True)
class DropSpec:
    """``[[wire.drop]]``: drop the ``nth`` frame of a kind (``count`` of them)."""

    frame: str
    nth: int
    count: int
    sender: str | None
    line: int | None


@dataclass(frozen=True, slots=True)
class WireSpec:
    """``[wire]``: latency and random faults."""

    latency_ns: int = 10_000
    loss: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0
    corrupt: float = 0.0
    reorder_delay_ns: int = 50_000
    drops: tuple[DropSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class UpcallExpect:
    """``[[expect.upcall]]``: upcalls on a host matching every given field."""

    host: str
    event: str
    status: int | None
    private_data: bytes | None
    private_data_len: int | None
    ird: int | None
    ord: int | None
    connection: str | None
    count: int | None
    line: int | None


@dataclass(frozen=True, slots=True)
class StateExpect:
    """``[[expect.state]]``: the final state of a named connection's node (on its own
    host, or its peer node on another host); ``"freed"`` when the node is gone."""

    host: str
    connection: str
    state: str | None
    line: int | None
    iwarp_state: str | None = None
    """The QP's ``iwarp_state`` (``"none"``: the node has no QP)."""
    tcp_state: str | None = None
    """The NIC's TCP state of the offloaded connection (``NON_EXISTENT`` before)."""


@dataclass(frozen=True, slots=True)
class ListenerExpect:
    """``[[expect.listener]]``: whether a named listener's TCP_SYN qhash entry is
    installed at the end (``"freed"``-like absence counts as not installed)."""

    host: str
    listener: str
    syn_qhash: bool
    line: int | None


@dataclass(frozen=True, slots=True)
class FrameExpect:
    """``[[expect.frame]]``: captured frames matching every given field."""

    kind: str | None
    sender: str | None
    flags: str | None
    private_data: bytes | None
    mpa_rev: int | None
    rtr: tuple[str, ...] | None
    lost: bool | None
    count: int | None
    min: int | None
    max: int | None
    line: int | None


@dataclass(frozen=True, slots=True)
class FailureExpect:
    """``[[expect.verb_failure]]``: a verb the core refused (errno)."""

    host: str
    verb: str | None
    errno: int | None
    count: int | None
    line: int | None


@dataclass(frozen=True, slots=True)
class TraceExpect:
    """``[[expect.trace]]``: trace records of a kind (``kernel_bug``, ``kernel_leak``,
    ``segment_dropped``, ...), optionally from one host and kernel function, whose fields
    contain ``text``."""

    kind: str
    host: str | None
    fn: str | None
    text: str | None
    count: int | None
    line: int | None


@dataclass(frozen=True, slots=True)
class CmEventExpect:
    """``[[expect.cm_event]]``: rdma_cm events on a host (``RDMA_CM_EVENT_REJECTED``...,
    :mod:`mpa_emu.ulp.rdma_cm`) matching every given field: status, the named connection,
    the virtual time ``at``."""

    host: str
    event: str
    status: int | None
    connection: str | None
    at_ns: int | None
    count: int | None
    line: int | None


@dataclass(frozen=True, slots=True)
class Scenario:
    """A whole scenario file."""

    name: str
    description: str
    path: str
    seed: int
    duration_ns: int | None
    max_events: int
    wire: WireSpec
    hosts: tuple[HostSpec, ...]
    listens: tuple[ListenSpec, ...]
    connects: tuple[ConnectSpec, ...]
    events: tuple[EventSpec, ...]
    upcalls: tuple[UpcallExpect, ...] = ()
    states: tuple[StateExpect, ...] = ()
    frames: tuple[FrameExpect, ...] = ()
    failures: tuple[FailureExpect, ...] = ()
    traces: tuple[TraceExpect, ...] = ()
    tags: tuple[str, ...] = field(default=())
    listeners: tuple[ListenerExpect, ...] = ()
    cm_events: tuple[CmEventExpect, ...] = ()

    @property
    def expectation_count(self) -> int:
        """How many expectations the file states."""
        return (len(self.upcalls) + len(self.states) + len(self.frames) + len(self.failures)
                + len(self.traces) + len(self.listeners) + len(self.cm_events))
