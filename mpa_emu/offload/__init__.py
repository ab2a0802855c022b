"""What the NIC does after OFFLOADED: the hardware TCP engine and iWARP QP of one
connection (:class:`OffloadedQp`), driven by the CM core and reporting back through
asynchronous events (:class:`Ae`)."""

from mpa_emu.stacks.irdma.offload.iwqp import IwQp
from mpa_emu.stacks.irdma.offload.qp import OffloadedQp, QpError, QpInit, ReceivedMessage
from mpa_emu.stacks.irdma.offload.states import Ae, IbQpState, IwarpState, TcpState

__all__ = ["Ae", "IbQpState", "IwQp", "IwarpState", "OffloadedQp", "QpError", "QpInit",
           "ReceivedMessage", "TcpState"]
