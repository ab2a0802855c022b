"""How an emulated application answers a CONNECT_REQUEST upcall.

A listener carries one policy: :class:`Accept`, :class:`Reject`, :class:`Manual` (leave
the request pending for the user), :class:`NvmeTarget` (decide as an NVMe-oF target
does) or any callable ``(host, upcall) -> None``
(:data:`mpa_emu.net.host.Policy` is the union).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mpa_emu.stacks.contract.events import Upcall


class _Application(Protocol):
    """What a policy calls on its host (:class:`mpa_emu.net.host.Host`)."""

    @property
    def net(self) -> Any: ...

    def accept(self, conn: int, private_data: bytes = b"") -> None: ...

    def reject(self, conn: int, private_data: bytes = b"") -> None: ...

    def guarded(self, verb: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...


@dataclass(frozen=True, slots=True)
class Accept:
    """Accept with ``private_data`` in the MPA reply, ``delay_ns`` after the request."""

    private_data: bytes = b""
    delay_ns: int = 0


@dataclass(frozen=True, slots=True)
class Reject:
    """Reject with ``private_data`` in the MPA reject frame, ``delay_ns`` after the request."""

    private_data: bytes = b""
    delay_ns: int = 0


@dataclass(frozen=True, slots=True)
class Manual:
    """Leave the request pending: the user calls ``host.accept``/``host.reject`` later."""


@dataclass(frozen=True, slots=True)
class NvmeTarget:
    """Answer as an NVMe-oF RDMA target: nvmet-rdma's connect checks and the target's
    limits (:mod:`mpa_emu.ulp.upper.nvme_target`): the reject carries the NVMe-RDMA
    status, the accept the target's CRQSIZE. ``max_queue_size`` and ``max_qid`` None
    leave those checks out, as nvmet-rdma does."""

    max_queue_size: int | None = None
    max_qid: int | None = None
    aq_depth: int = 32
    delay_ns: int = 0

    def __call__(self, host: _Application, upcall: Upcall) -> None:
        """Decide on the CONNECT_REQUEST ``upcall`` and accept or reject it after
        ``delay_ns``, as the listener's other policies do."""
        from mpa_emu.ulp.upper.nvme_target import TargetLimits, decide

        limits = TargetLimits(self.aq_depth, self.max_queue_size, self.max_qid)
        # The upcall's private data may run past the MPA frame (irdma's v2 +4 quirk):
        # only the frame's own bytes are the request.
        data = upcall.private_data
        if upcall.private_data_past_frame:
            data = data[:-upcall.private_data_past_frame]
        answer = decide(data, limits)
        verb, fn = ("accept", host.accept) if answer.accept else ("reject", host.reject)
        host.net.after(self.delay_ns, host.guarded, verb, fn, upcall.conn,
                       answer.private_data)
