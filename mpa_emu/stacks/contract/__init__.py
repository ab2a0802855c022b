"""The contract every stack implements and shares, whatever its kernel source.

* :mod:`~mpa_emu.stacks.contract.api`: :class:`CoreApi`, the sans-IO core protocol every
  driver (the virtual network, replay, live mode) codes against, and :class:`NodeWatch`,
  the typed notices of a core's connections;
* :mod:`~mpa_emu.stacks.contract.events`: iw_cm's provider interface
  (include/rdma/iw_cm.h): :class:`IwEvent` and the :class:`Upcall` a stack hands up
  where the kernel's driver calls ``cm_id->event_handler``;
* :mod:`~mpa_emu.stacks.contract.errors`: :class:`CmError`, a verb the driver refuses,
  with the errno it returns;
* :mod:`~mpa_emu.stacks.contract.trace`: the structured trace and its records.

A stack never imports another stack; what two stacks share lives here or below
(:mod:`mpa_emu.wire`, :mod:`mpa_emu.stacks.tcp`).
"""

from mpa_emu.stacks.contract.api import CoreApi, NodeWatch, WatchedCore
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.stacks.contract.trace import Trace, TraceRecord

__all__ = ["CmError", "CoreApi", "IwEvent", "NodeWatch", "Trace", "TraceRecord", "Upcall",
           "WatchedCore"]
