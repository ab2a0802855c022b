"""The driver-facing contract of the CM core.

Every driver of :class:`~mpa_emu.stacks.irdma.core.CmCore` (the virtual network, live mode on a TAP
device, replay) codes against this protocol, so test doubles can stand in for the core.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import Any, NamedTuple, Protocol, runtime_checkable

from mpa_emu.stacks.contract.events import Upcall
from mpa_emu.wire.segment import Segment, Transmit


class CoreApi(Protocol):
    """The sans-IO contract of :class:`mpa_emu.stacks.irdma.core.CmCore`: frames and verbs in with
    ``now_ns``, frames to send, upcalls and the next deadline out."""

    def add_address(self, ip: bytes, *, vlan: int | None = None, now_ns: int = 0) -> None: ...
    def remove_address(self, ip: bytes, *, now_ns: int) -> None: ...
    def link_down(self, *, now_ns: int) -> list[bytes]: ...
    def set_neighbour(self, ip: bytes, mac: bytes | None) -> None: ...
    def receive(self, frame: Segment, now_ns: int) -> None: ...
    def handle_timer(self, now_ns: int) -> None: ...
    def get_timer(self) -> int | None: ...
    def frames_to_send(self) -> list[Transmit]: ...
    def next_event(self) -> Upcall | None: ...
    def create_listen(self, ip: bytes | None, port: int, *, backlog: int = 16,
                      ipv6: bool = False, vlan: int | None = None, now_ns: int = 0) -> int: ...
    def destroy_listen(self, listener: int, *, now_ns: int) -> None: ...
    def connect(self, local_ip: bytes, remote_ip: bytes, remote_port: int, *,
                local_port: int | None = None, private_data: bytes = b"", ird: int = 16,
                ord: int = 16, now_ns: int) -> int: ...
    def accept(self, conn: int, *, private_data: bytes = b"", now_ns: int) -> None: ...
    def reject(self, conn: int, *, private_data: bytes = b"", now_ns: int) -> None: ...
    def close(self, conn: int, *, now_ns: int) -> None: ...
    def disconnect(self, conn: int, *, graceful: bool, now_ns: int) -> None: ...
    def modify_qp_err(self, conn: int, *, now_ns: int) -> None: ...
    def teardown_connections(self, ip: bytes | None = None, *, vlan: int | None = None,
                             disconnect_all: bool = False, now_ns: int) -> list[int]: ...
    def device_reset(self, *, now_ns: int) -> list[int]: ...
    def qp_state(self, conn: int) -> Any: ...
    def listener(self, ident: int) -> Any: ...
    def node(self, conn: int) -> Any: ...
    def conns(self) -> list[int]: ...


class NodeWatch(Protocol):
    """Typed notices of a core's nodes for a driver that follows them (replay), given to
    :class:`~mpa_emu.stacks.irdma.core.CmCore` as ``watch``; each comes as the change happens, with
    the kernel function's trace record when the core traces."""

    def node_created(self, conn: int, loc_port: int, rem: bytes, rem_port: int) -> None:
        """``irdma_make_cm_node`` made connection ``conn`` on these ports."""

    def state_changed(self, conn: int, state: IntEnum) -> None:
        """A row moved ``conn``'s node to ``state`` (irdma: a ``CmState``; another stack:
        its own state enum, e.g. ``SiwState``, ``EpState``)."""

    def node_freed(self, conn: int) -> None:
        """``irdma_destroy_connection`` freed ``conn``'s node."""

    def qp_event(self, time_ns: int, conn: int, ae: str) -> None:
        """``irdma_process_aeq`` took the asynchronous event ``ae`` (its IRDMA_AE_* name)
        of ``conn``'s QP."""


@runtime_checkable
class WatchedCore(Protocol):
    """A core that tells a :class:`NodeWatch` of its connections: irdma's
    :class:`~mpa_emu.stacks.irdma.core.CmCore` (also through its ``watch`` argument) and the
    registered stacks' cores (:mod:`mpa_emu.stacks`). Replay follows the emulated side's
    connections through it."""

    def watch_nodes(self, watch: NodeWatch | None) -> None:
        """From now on, tell ``watch`` of each connection's creation (with its ports),
        state changes and end (None: stop telling)."""


class ReceiveCompletion(Protocol):
    """One receive work completion as ``PostsSends.completions`` gives it: ``status``
    the ``IB_WC_*`` status without the prefix (``SUCCESS``, ``WR_FLUSH_ERR`` ...),
    ``data`` the bytes placed in the buffer."""

    @property
    def status(self) -> str: ...
    @property
    def data(self) -> bytes: ...


class SendCompletion(NamedTuple):
    """A receive completion that is only a status and the bytes placed (cxgb4's
    firmware, irdma's NIC model): a :class:`ReceiveCompletion`, also a ``(status,
    data)`` pair."""

    status: str
    data: bytes


@runtime_checkable
class PostsSends(Protocol):
    """A core whose application posts RDMA Sends on an RTS QP (ib_post_send with
    IB_WR_SEND): irdma's :class:`~mpa_emu.stacks.irdma.core.CmCore` (``irdma_post_send``),
    siw's (``siw_post_send``) and cxgb4's (``c4iw_post_send``). A QP that is not in RTS
    refuses the Send with ``CmError(-EINVAL)``. ``completions`` are the receive
    completions of the Sends the peer posted, oldest first (``Host.received_sends``
    keeps the SUCCESS ones)."""

    def post_send(self, conn: int, payload: bytes, *, now_ns: int) -> None: ...
    def completions(self, conn: int) -> Sequence[ReceiveCompletion]: ...
