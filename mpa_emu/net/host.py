"""An emulated host: one NIC (MAC, addresses with their VLANs, MTU), a neighbour table
and one Linux iWARP connection manager running on it (any
:class:`~mpa_emu.stacks.contract.api.CoreApi` the registry :data:`mpa_emu.stacks.STACKS` makes).

Verbs (listen, connect, accept, reject, close, disconnect) act at the network's current
virtual time; schedule them for later with :meth:`Network.at <mpa_emu.net.network.Network.at>`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from errno import EOPNOTSUPP
from typing import Any, Protocol, TypeAlias

from mpa_emu.capture.spool import RecordLog
from mpa_emu.errors import ConfigError
from mpa_emu.net.policy import Accept, Manual, Reject
from mpa_emu.stacks import DEFAULT_STACK
from mpa_emu.stacks.base import HostConfig
from mpa_emu.stacks.contract.api import CoreApi, PostsSends
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IW_CONNECT_REQUEST, IwEvent, Upcall
from mpa_emu.stacks.verb_args import check_verb_args
from mpa_emu.ulp.rdma_cm import RdmaCm, RdmaCmEvent, UlpStep
from mpa_emu.wire.addr import ip_bytes, ip_text, mac_text

Address = str | bytes

Callback: TypeAlias = Callable[["Host", Upcall], None]
"""A listener policy written as a function: called with the host and the
CONNECT_REQUEST upcall."""
Policy: TypeAlias = Accept | Reject | Manual | Callback
"""How a listener answers a CONNECT_REQUEST (see :mod:`mpa_emu.net.policy`)."""
HostCore: TypeAlias = CoreApi
"""A host's connection manager: any :class:`~mpa_emu.stacks.contract.api.CoreApi` the
registry makes."""

DEFAULT_MTU = 1500
"""The interface MTU of a host when neither ``mtu`` nor a configuration record sets one
(Ethernet's)."""


class HostNetwork(Protocol):
    """What a host uses of the network it sits on (:class:`mpa_emu.net.network.Network`)."""

    @property
    def now_ns(self) -> int:
        """The network's virtual time."""

    def pump(self, only: Host | None = None) -> None:
        """Deliver what the cores produced at the current time."""

    def refresh_neighbours(self) -> None:
        """Refill the automatic neighbour entries of every host."""

    def after(self, delay_ns: int, fn: Callable[..., Any], *args: Any,
              **kwargs: Any) -> object:
        """Run ``fn`` ``delay_ns`` after the current virtual time."""

    def note(self, host: str, kind: str, fn: str, **fields: Any) -> None:
        """Add a network-level record to the trace."""


def as_ip(value: Address) -> bytes:
    """Packed address from text or packed bytes (4 or 16); ConfigError (a ValueError)
    otherwise."""
    if isinstance(value, bytes):
        if len(value) not in (4, 16):
            raise ConfigError(f"a packed address has 4 or 16 bytes, got {len(value)}")
        return value
    if not isinstance(value, str):
        raise ConfigError(f"an address is text or 4/16 packed bytes, got {value!r}")
    try:
        return ip_bytes(value)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


@dataclass(frozen=True, slots=True)
class VerbFailure:
    """A verb run through :meth:`Host.guarded` (listener policies use it) that was
    refused: by the core (``errno`` set) or as bad input (``errno`` 0)."""

    time_ns: int
    verb: str
    errno: int
    message: str


class Host:
    """One emulated host on the network, running one Linux iWARP connection manager
    (``stack``: a key of :data:`mpa_emu.stacks.STACKS`). Create it with ``Network.add_host``; the
    verbs are iw_cm's provider calls, each named below with the function of every stack
    that implements it."""

    def __init__(self, net: HostNetwork, name: str, mac: bytes, config: HostConfig | None,
                 core: HostCore, *, auto_neighbours: bool = True, stack: str = DEFAULT_STACK,
                 params: dict[str, int | bool] | None = None, mtu: int | None = None) -> None:
        self.net = net
        self.name = name
        self.mac = mac
        self.config = config
        """The stack's configuration record (irdma's ``CmConfig``), None for a stack its
        parameters configure alone (:attr:`mpa_emu.stacks.base.Stack.config`)."""
        self._mtu = (mtu if mtu is not None else config.mtu if config is not None
                     else DEFAULT_MTU)
        self.core = core
        self.stack = stack
        """The connection manager this host runs (a key of ``mpa_emu.stacks.STACKS``)."""
        self.params: dict[str, int | bool] = dict(params or {})
        """The stack's parameters, every one filled in (``mpa_emu.stacks.parse_params``)."""
        self.auto_neighbours = auto_neighbours
        self.addresses: dict[bytes, int | None] = {}
        """Packed address -> VLAN id (``None`` = untagged)."""
        self.timer_stale = True
        """Set whenever something calls into the core: the network then re-reads
        :attr:`timer_deadline` from ``core.get_timer()``."""
        self.timer_deadline: int | None = None
        self.link_up = True
        """False after :meth:`link_down`: the NIC drops every arriving frame."""
        self.devices: list[int | None] = [None]
        """VLAN ids of the host's network devices in registration order: the lower
        (untagged, ``None``) device first, then a VLAN device for each VLAN the first time
        an address is added on it. A device stays when its last address goes."""
        self.vlan_set: frozenset[int | None] = frozenset(self.devices)
        """The same as :attr:`vlans`, kept up to date for the receive path."""
        self.upcalls: RecordLog[Upcall] = []
        """Every upcall delivered to this host's application, in order (``Upcall.time_ns``)."""
        self.rdma_cm = RdmaCm()
        self._tracing = getattr(net, "trace", None) is not None
        """iw_cm and rdma_cm above the driver (:mod:`mpa_emu.ulp`): fed with every kept
        upcall and the verbs that move iw_cm's state."""
        self.failures: list[VerbFailure] = []
        self._manual_neighbours: set[bytes] = set()
        self._policies: dict[int, Policy] = {}
        self._callbacks: list[tuple[IwEvent | None, Callable[[Host, Upcall], None]]] = []

    def __repr__(self) -> str:
        addrs = ", ".join(ip_text(a) for a in self.addresses)
        return f"Host({self.name!r}, {mac_text(self.mac)}, [{addrs}])"

    def _acted(self) -> None:
        """After a call into the core: its deadline may have moved; send what it queued."""
        self.timer_stale = True
        self.net.pump()

    # ---- the NIC and the local stack ---------------------------------------------

    @property
    def mtu(self) -> int:
        """The interface MTU (the configuration record's ``mtu``, or ``add_host(mtu=)``)."""
        return self._mtu

    @property
    def vlans(self) -> frozenset[int | None]:
        """VLANs this host has a device on (``None`` = untagged, the lower device); its
        NIC receives only these. A VLAN device outlives its addresses, so the per-
        connection qhash entry of ``irdma_connect`` still steers a late segment to the CM
        after the last address of the VLAN went (irdma_if_notify removes only the
        listeners' SYN entries)."""
        return self.vlan_set

    def add_address(self, ip: Address, *, vlan: int | None = None) -> None:
        """Bring up an address (optionally on a VLAN sub-interface)."""
        if vlan is not None and not 0 <= vlan < 4095:
            raise ConfigError(f"VLAN id must be 0..4094, got {vlan}")
        packed = as_ip(ip)
        self.core.add_address(packed, vlan=vlan, now_ns=self.net.now_ns)
        self.addresses[packed] = vlan
        if vlan not in self.devices:
            self.devices.append(vlan)  # register_netdevice of the VLAN device
        self.vlan_set = frozenset(self.devices)
        self.timer_stale = True
        self.net.refresh_neighbours()

    def remove_address(self, ip: Address) -> None:
        """Take an address down (irdma_if_notify with ifup false; siw and cxgb4 keep
        their connections: no teardown by address in siw_cm.c or cxgb4's cm.c)."""
        packed = as_ip(ip)
        if packed not in self.addresses:
            raise ConfigError(f"{self.name} has no address {ip_text(packed)}")
        self.core.remove_address(packed, now_ns=self.net.now_ns)
        del self.addresses[packed]
        self._acted()

    def link_down(self) -> None:
        """The interface loses its link: frames no longer reach it and the core is told
        (irdma: ``irdma_netdevice_event``, IPv4 connections stay, IPv6 addresses go unless
        ``CmConfig.keep_addr_on_down``, tearing their connections down; siw:
        ``siw_netdev_event`` reports a port error only; iw_cxgb4 reacts to nothing)."""
        self.link_up = False
        for ip in self.core.link_down(now_ns=self.net.now_ns):
            self.addresses.pop(ip, None)
        self._acted()

    def set_neighbour(self, ip: Address, mac: bytes | None) -> None:
        """Set a neighbour entry by hand (``None`` = unresolved); automatic filling
        leaves this address alone afterwards."""
        packed = as_ip(ip)
        self._manual_neighbours.add(packed)
        self.core.set_neighbour(packed, mac)
        self.timer_stale = True

    def learn_neighbour(self, ip: bytes, mac: bytes) -> None:
        """Automatic neighbour entry (skipped for addresses set by hand)."""
        if self.auto_neighbours and ip not in self._manual_neighbours:
            self.core.set_neighbour(ip, mac)

    def address(self, ipv6: bool = False) -> bytes:
        """This host's first address of one family."""
        for packed in self.addresses:
            if (len(packed) == 16) == ipv6:
                return packed
        family = "IPv6" if ipv6 else "IPv4"
        raise ConfigError(f"{self.name} has no {family} address")

    # ---- verbs -----------------------------------------------------------------

    def listen(self, port: int, ip: Address | None = None, *, policy: Policy | None = None,
               backlog: int = 16, ipv6: bool = False, vlan: int | None = None) -> int:
        """Create a listener (``ip`` None = wildcard) answering requests with ``policy``
        (default :class:`Accept`); returns the listener id."""
        check_verb_args("listen", port=port, backlog=backlog, vlan=vlan)
        if policy is not None and not isinstance(policy, (Accept, Reject, Manual)) \
                and not callable(policy):
            raise ConfigError(f"listen: policy must be Accept, Reject, Manual or a "
                              f"function, got {policy!r}")
        packed = None if ip is None else as_ip(ip)
        if packed is not None:
            ipv6 = len(packed) == 16
        listener = self.core.create_listen(packed, port, backlog=backlog, ipv6=ipv6, vlan=vlan,
                                           now_ns=self.net.now_ns)
        self._policies[listener] = policy if policy is not None else Accept()
        self._acted()
        return listener

    def unlisten(self, listener: int) -> None:
        """Destroy a listener (iw_cm's destroy_listen: irdma_destroy_listen,
        siw_destroy_listen, c4iw_destroy_listen)."""
        self.core.destroy_listen(listener, now_ns=self.net.now_ns)
        self.rdma_cm.listener_destroyed(listener)
        self._acted()

    def connect(self, remote: Address | Host, port: int, *, local_ip: Address | None = None,
                local_port: int | None = None, private_data: bytes = b"", ird: int = 16,
                ord: int = 16) -> int:
        """Start an active connection (iw_cm's connect: irdma_connect, siw_connect,
        c4iw_connect); returns the connection id."""
        check_verb_args("connect", port=port, local_port=local_port,
                        private_data=private_data, ird=ird, ord=ord)
        if isinstance(remote, Host):
            rem = remote.address(ipv6=local_ip is not None and len(as_ip(local_ip)) == 16)
        else:
            rem = as_ip(remote)
        loc = as_ip(local_ip) if local_ip is not None else self.address(ipv6=len(rem) == 16)
        conn = self.core.connect(loc, rem, port, local_port=local_port,
                                 private_data=private_data, ird=ird, ord=ord,
                                 now_ns=self.net.now_ns)
        self._acted()
        return conn

    def accept(self, conn: int, private_data: bytes = b"") -> None:
        """Accept a pending request (iw_cm's accept: irdma_accept, siw_accept,
        c4iw_accept_cr)."""
        check_verb_args("accept", private_data=private_data)
        try:
            self.core.accept(conn, private_data=private_data, now_ns=self.net.now_ns)
        except CmError as exc:
            if not exc.before_iw_cm:
                self.rdma_cm.verb(conn, "accept_failed")  # iw_cm_accept's error path
            raise
        self._acted()

    def reject(self, conn: int, private_data: bytes = b"") -> None:
        """Reject a pending request with ``private_data`` (iw_cm's reject: irdma_reject,
        siw_reject, c4iw_reject_cr)."""
        check_verb_args("reject", private_data=private_data)
        try:
            self.core.reject(conn, private_data=private_data, now_ns=self.net.now_ns)
        except CmError as exc:
            if not exc.before_iw_cm:
                self.rdma_cm.verb(conn, "reject")  # iw_cm_reject: CONN_RECV -> IDLE first
            raise
        self.rdma_cm.verb(conn, "reject")  # iw_cm_reject: CONN_RECV -> IDLE first
        self._acted()

    def close(self, conn: int) -> None:
        """Close a connection from below the application (irdma: irdma_cm_close; siw and
        cxgb4: iw_destroy_cm_id on its cm_id, each core's ``close`` says what follows)."""
        self.core.close(conn, now_ns=self.net.now_ns)
        self._acted()

    def disconnect(self, conn: int, *, graceful: bool = True) -> None:
        """Disconnect a connection past MPA (iw_cm_disconnect: the QP to CLOSING or
        ERROR): a FIN (graceful) or, abortive, a RST (irdma's hardware TCP, cxgb4's
        send_abort) or a FIN (siw's sock_release)."""
        self.core.disconnect(conn, graceful=graceful, now_ns=self.net.now_ns)
        self.rdma_cm.verb(conn, "disconnect")  # iw_cm_disconnect: ESTABLISHED -> CLOSING
        self._acted()

    def modify_qp_err(self, conn: int) -> None:
        """``ib_modify_qp(IB_QPS_ERR)`` on the connection's QP: the abortive disconnect
        past MPA; before it (irdma's active connection), the QP only goes to ERR and the
        later ``irdma_modify_qp(RTS)`` fails, so no RTR is sent."""
        self.core.modify_qp_err(conn, now_ns=self.net.now_ns)
        self._acted()

    def teardown(self, ip: Address | None = None, *, vlan: int | None = None,
                 disconnect_all: bool = False) -> list[int]:
        """``irdma_cm_teardown_connections`` (the stack's own teardown where it has one):
        move the QPs of the connections on ``ip``
        (and ``vlan``, None = untagged), or of all connections, to ERR. Returns the
        connection ids selected."""
        packed = None if ip is None else as_ip(ip)
        selected = self.core.teardown_connections(packed, vlan=vlan,
                                                  disconnect_all=disconnect_all,
                                                  now_ns=self.net.now_ns)
        self._acted()
        return selected

    def device_reset(self) -> list[int]:
        """A reset of the NIC's PCI function (``rf->reset``): every connection is torn
        down without a frame on the wire and closed (CLOSE upcalls); returns the ids."""
        selected = self.core.device_reset(now_ns=self.net.now_ns)
        self._acted()
        return selected

    def qp_state(self, conn: int) -> Any:
        """Read-only view of the connection's QP (its iWARP and TCP states, as the
        stack's core gives them), None when it has none."""
        return self.core.qp_state(conn)

    def listener(self, ident: int) -> Any:
        """Read-only view of a listener (with the stack's own fields,
        :attr:`Stack.listener_facts <mpa_emu.stacks.base.Stack.listener_facts>`), None once
        it left the listen list."""
        return self.core.listener(ident)

    def node(self, conn: int) -> Any:
        """Read-only view of a connection's node (irdma's cm_node, siw's cep, cxgb4's
        endpoint; ``state`` by the kernel's name), None once freed."""
        return self.core.node(conn)

    def conns(self) -> list[int]:
        """Connection ids the core still holds."""
        return self.core.conns()

    # ---- upcalls ---------------------------------------------------------------

    def on(self, callback: Callable[[Host, Upcall], None], event: IwEvent | None = None) -> None:
        """Call ``callback(host, upcall)`` for every upcall (or only those of ``event``)."""
        self._callbacks.append((event, callback))

    def events(self, event: IwEvent | None = None) -> list[Upcall]:
        """Recorded upcalls, optionally of one kind."""
        return [u for u in self.upcalls if event is None or u.event == event]

    @property
    def cm_events(self) -> RecordLog[RdmaCmEvent]:
        """The host's rdma_cm event queue, in order: what ``rdma_get_cm_event`` returns
        to the application for the upcalls so far (:mod:`mpa_emu.ulp.rdma_cm`); empty on
        a network that does not keep upcalls (``keep_upcalls=False``)."""
        return self.rdma_cm.events

    @property
    def ulp_steps(self) -> RecordLog[UlpStep]:
        """Every kept upcall through iw_cm and rdma_cm, in order: the iw_cm state
        change and the rdma_cm event delivered, or why none was."""
        return self.rdma_cm.steps

    def deliver(self, upcall: Upcall, keep: bool = True) -> None:
        """Hand one upcall to the application: record it, apply the listener policy to a
        CONNECT_REQUEST (:class:`Manual` for a listener not made with :meth:`listen`),
        then run the callbacks."""
        if keep:
            self.upcalls.append(upcall)
            step = self.rdma_cm.upcall(upcall)
            if self._tracing:
                self.net.note(self.name, "rdma_cm_event", step.trace_fn,
                              **step.trace_fields())
        if upcall.event == IW_CONNECT_REQUEST:
            # A listener made on the core directly has no policy: its requests wait for
            # the user, as with Manual.
            policy = self._policies.get(upcall.listener, Manual()) \
                if upcall.listener is not None else Manual()
            self._apply(policy, upcall)
        for event, callback in self._callbacks:
            if event is None or event == upcall.event:
                callback(self, upcall)

    def _apply(self, policy: Policy, upcall: Upcall) -> None:
        if isinstance(policy, Manual):
            return
        if isinstance(policy, Accept):
            self._verb_later(policy.delay_ns, "accept", self.accept, upcall.conn,
                             policy.private_data)
        elif isinstance(policy, Reject):
            self._verb_later(policy.delay_ns, "reject", self.reject, upcall.conn,
                             policy.private_data)
        else:
            policy(self, upcall)

    def _verb_later(self, delay_ns: int, verb: str, fn: Callable[..., Any], *args: Any) -> None:
        self.net.after(delay_ns, self.guarded, verb, fn, *args)

    # ---- the QP's data verbs, once the connection is established --------------------

    def post_send(self, conn: int, payload: bytes) -> None:
        """Post an RDMA Send of ``payload`` on the connection's QP (ib_post_send,
        IB_WR_SEND: irdma_post_send, siw_post_send, c4iw_post_send); the stack cuts it
        into DDP segments (RFC 5041 section 5.1). A QP not in RTS refuses it
        (``CmError`` -EINVAL)."""
        if not isinstance(payload, (bytes, bytearray)):
            raise ConfigError(f"post_send: payload must be bytes, got {payload!r}")
        # Typed as object, so that the call below is the protocol's on every stack (the
        # compiled build would call a narrowed HostCore union as irdma's CmCore).
        core: object = self.core
        if not isinstance(core, PostsSends):
            raise CmError(EOPNOTSUPP, f"post_send: the {self.stack} model posts no Sends")
        core.post_send(conn, bytes(payload), now_ns=self.net.now_ns)
        self._acted()

    def post_recv(self, conn: int, length: int) -> None:
        """Post a receive buffer of ``length`` bytes for the peer's next Send
        (ib_post_recv: siw_post_receive, c4iw_post_receive). irdma's NIC model keeps no
        receive queue (it takes every Send), so on irdma nothing is posted."""
        if isinstance(length, bool) or not isinstance(length, int) or length < 0:
            raise ConfigError(f"post_recv: length must be a non-negative integer, got "
                              f"{length!r}")
        post = getattr(self.core, "post_recv", None)
        if post is not None:
            post(conn, length, now_ns=self.net.now_ns)
            self._acted()

    def received_sends(self, conn: int) -> list[bytes]:
        """The Send messages the connection's QP has taken so far, oldest first, each as
        placed in its receive buffer: the receive completions with status SUCCESS of a
        core that posts Sends (``PostsSends.completions``: siw's and cxgb4's receive
        queues, irdma's NIC model's Sends); nothing for one that does not."""
        core = self.core
        if not isinstance(core, PostsSends):
            return []
        out: list[bytes] = []
        for c in core.completions(conn):
            # qedr's and erdma's completions are (status, data) pairs
            done: Any = c
            status, data = (done.status, done.data) if hasattr(done, "status") else done
            if status == "SUCCESS":
                out.append(bytes(data))
        return out

    def guarded(self, verb: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a verb on behalf of a policy; a refusal (CmError) is recorded, not raised,
        as an application would see an error return."""
        try:
            return fn(*args, **kwargs)
        except ValueError as exc:
            errno = int(getattr(exc, "errno", 0) or 0)
            failure = VerbFailure(self.net.now_ns, verb, errno, str(exc))
            self.failures.append(failure)
            self.net.note(self.name, "verb_failed", "iw_cm", verb=verb, errno=errno,
                          error=str(exc))
            return None
