"""What sits above every iWARP stack: iw_cm (``drivers/infiniband/core/iwcm.c``) and
rdma_cm (``drivers/infiniband/core/cma.c``), fed with a driver's upcalls
(:class:`~mpa_emu.stacks.contract.events.Upcall`) to give the ``rdma_cm`` events an application
sees.
See ``docs/ulp.md``."""

from mpa_emu.ulp.iwcm import IwCmState, IwCmStep, on_upcall, on_verb
from mpa_emu.ulp.rdma_cm import (
    RdmaCm,
    RdmaCmEvent,
    RdmaCmEventType,
    UlpStep,
    connect_reply_event,
    map_upcall,
)

__all__ = ["IwCmState", "IwCmStep", "RdmaCm", "RdmaCmEvent", "RdmaCmEventType", "UlpStep",
           "connect_reply_event", "map_upcall", "on_upcall", "on_verb"]
