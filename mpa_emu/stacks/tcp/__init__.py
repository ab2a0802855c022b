"""A sans-IO host TCP shared by the socket-based stacks (siw rides the Linux TCP stack;
cxgb4's offloaded TCP is shaped by its own :class:`TcpShape`).

:class:`TcpStack` is the stack, :class:`TcpShape` what its segments look like,
:data:`LINUX` Linux's shape, :class:`TcpEvent` what a socket tells its owner.
"""

from mpa_emu.stacks.tcp.shape import LINUX, TcpShape
from mpa_emu.stacks.tcp.stack import TcpEvent, TcpStack

__all__ = ["LINUX", "TcpEvent", "TcpShape", "TcpStack"]
