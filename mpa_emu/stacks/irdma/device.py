"""The device-level verbs and views of the CM core: link down, the QP moved to ERR, the
teardown of connections (``irdma_cm_teardown_connections``), a device reset
(``rf->reset``) and the read-only view of a connection's QP.

:class:`DeviceVerbs` is a base class of :class:`~mpa_emu.stacks.irdma.core.CmCore`; its methods
use the core through :class:`_Core`.
"""

from __future__ import annotations

from errno import EINVAL
from typing import Protocol

from mpa_emu.stacks.contract.base import CoreBase
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.irdma import teardown
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.netdevs import NetdevList
from mpa_emu.stacks.irdma.node import CmNode
from mpa_emu.stacks.irdma.nodes import NodeTable
from mpa_emu.stacks.irdma.offload.nic import Nic
from mpa_emu.stacks.irdma.states import NO_VLAN, VLAN_N_VID
from mpa_emu.stacks.irdma.view import QpView


class _Core(teardown.TeardownHost, Protocol):
    """What the device verbs use of the core."""

    config: CmConfig
    nodes: NodeTable
    nic: Nic
    netdevs: NetdevList
    rf_reset: bool
    _addresses: dict[bytes, int]
    _link_up: bool

    @property
    def base(self) -> CoreBase: ...
    def _enter(self, now_ns: int) -> None: ...
    def _finish(self) -> None: ...
    def _check_ip(self, ip: bytes) -> None: ...
    def _verb_node(self, conn: int) -> CmNode: ...
    def _if_notify_one(self, ip: bytes, vlan_id: int, *, ifup: bool) -> None: ...
    def disconnect(self, conn: int, *, graceful: bool, now_ns: int) -> None: ...


class DeviceVerbs:
    """Link down, ``modify_qp_err``, teardown, device reset and the QP view."""

    def link_down(self: _Core, *, now_ns: int) -> list[bytes]:
        """The port went down: ``irdma_netdevice_event(NETDEV_DOWN)`` only clears
        ``iw_status`` (the NIC then resets no TCP connection); the CM tears nothing down.
        IPv4 addresses survive a link down. addrconf removes the IPv6 ones unless
        ``keep_addr_on_down``, and each removal fires ``irdma_inet6addr_event`` ->
        ``irdma_if_notify(ifup=False)``. Returns the addresses removed."""
        self._enter(now_ns)
        self._link_up = False
        self.netdevs.up = False
        self.base.record("link_down", "irdma_netdevice_event", iw_status=0)
        removed: list[bytes] = []
        if not self.config.keep_addr_on_down:
            for ip, vlan_id in list(self._addresses.items()):
                if len(ip) == 16:
                    del self._addresses[ip]
                    removed.append(ip)
                    self._if_notify_one(ip, vlan_id, ifup=False)
        self._finish()
        return removed

    def modify_qp_err(self: _Core, conn: int, *, now_ns: int) -> None:
        """``ib_modify_qp(IB_QPS_ERR)`` on the QP of ``conn``. After offload it is the
        abortive :meth:`disconnect`. Before, only an active node has a QP (bound by
        ``irdma_connect``): it goes to ERR with no TCP state, nothing is sent and the CM
        carries on, but ``irdma_modify_qp(RTS)`` in ``irdma_cm_event_connected`` then
        fails (``iwarp_state > RTS``): no RTR goes out (see :meth:`_qp_error`)."""
        node = self._verb_node(conn)
        if node.qp is not None:
            self.disconnect(conn, graceful=False, now_ns=now_ns)
            return
        if not node.client:
            raise CmError(EINVAL, f"connection {conn} has no QP yet (passive, not "
                          "accepted)")
        self._enter(now_ns)
        self._qp_error(conn)
        self._finish()

    def _qp_error(self: _Core, conn: int) -> None:
        """Mark the driver QP of an active node before offload as moved to ERR
        (``irdma_modify_qp(ERR)`` with ``hw_tcp_state`` 0: no reset, no disconnect)."""
        node = self.nodes.by_conn.get(conn)
        if node is None or node.qp is not None or node.qp_error:
            return
        node.qp_error = True
        self.base.record("qp_state", "irdma_modify_qp", conn=conn, iwarp_state="ERROR",
                         reason="QP moved to ERR before offload: nothing sent")

    def teardown_connections(self: _Core, ip: bytes | None = None, *, vlan: int | None = None,
                             disconnect_all: bool = False, now_ns: int) -> list[int]:
        """``irdma_cm_teardown_connections(iwdev, ipaddr, nfo, disconnect_all)``: every
        node on ``ip`` and ``vlan`` (None = untagged, 0xFFFF), or all of them, has its QP
        moved to ERR. Returns the conn ids selected."""
        if not disconnect_all:
            if ip is None:
                raise CmError(EINVAL, "teardown needs an address or disconnect_all")
            self._check_ip(ip)
        if vlan is not None and not 0 <= vlan < VLAN_N_VID:
            raise CmError(EINVAL, f"VLAN id {vlan} out of range 0..4095")
        self._enter(now_ns)
        selected = teardown.teardown_connections(
            self, ip if ip is not None else bytes(4), NO_VLAN if vlan is None else vlan,
            disconnect_all, self.base.now_ns)
        self._finish()
        return selected

    def device_reset(self: _Core, *, now_ns: int) -> list[int]:
        """A reset of the PCI function (``rf->reset``): every connection is torn down
        (``irdma_cm_teardown_connections`` with ``disconnect_all``), no CQP command
        reaches the hardware (so nothing is sent), ``irdma_cm_disconn`` runs for each QP
        and the CLOSE upcalls follow; the hardware QPs are gone afterwards. Returns the
        conn ids torn down."""
        self._enter(now_ns)
        selected = teardown.device_reset(self, self.base.now_ns)
        self.nic.release_all()
        self._finish()
        return selected

    def qp_state(self: _Core, conn: int) -> QpView | None:
        """The QP of ``conn``: the offloaded QP's states, or for an active node before
        offload its driver QP (``IDLE``, or ``ERROR`` after :meth:`modify_qp_err`); None
        for a passive node not accepted yet or a freed node."""
        n = self.nodes.by_conn.get(conn)
        if n is None:
            return None
        if n.qp is not None:
            iw = n.qp.iwqp
            return QpView(conn, True, iw.iwarp_state.name, iw.hw_iwarp_state.name,
                          iw.ibqp_state.name, iw.hw_tcp_state.name, n.qp.tcp_state.name)
        if not n.client:
            return None
        iwarp = "ERROR" if n.qp_error else "IDLE"
        return QpView(conn, False, iwarp, iwarp, "ERR" if n.qp_error else "RTR",
                      "NON_EXISTENT", "NON_EXISTENT")
