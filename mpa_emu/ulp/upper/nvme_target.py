"""An NVMe-oF RDMA target's answer to a connect, decided as nvmet-rdma decides it.

``nvmet_rdma_parse_cm_connect_req`` (drivers/nvme/target/rdma.c), in its order:

1. no private data (``private_data_len == 0``): ``NVME_RDMA_CM_INVALID_LEN``;
2. a record format other than ``NVME_RDMA_CM_FMT_1_0``: ``NVME_RDMA_CM_INVALID_RECFMT``;
3. the admin queue (QID 0) with ``hsqsize + 1`` above ``NVME_AQ_DEPTH`` (32):
   ``NVME_RDMA_CM_INVALID_HSQSIZE``.

nvmet-rdma checks nothing else at connect time ("XXX: Should we enforce some kind of
max for IO queues?"); the limits a target of its own may keep are parameters here, each
None (nvmet-rdma's behaviour) unless given: ``max_queue_size`` (an I/O queue's
``hsqsize + 1`` above it: ``INVALID_HSQSIZE``; its ``hrqsize`` above it:
``INVALID_HRQSIZE``) and ``max_qid`` (a QID above it: ``INVALID_QID``). A reject carries
``struct nvme_rdma_cm_rej`` (``nvmet_rdma_cm_reject``); an accept ``struct
nvme_rdma_cm_rep`` with ``crqsize`` = the queue's receive size, ``hsqsize + 1``
(``nvmet_rdma_cm_accept``). Private data shorter than the 32-byte request is read with
zeros after it, as the kernel's zeroed receive buffer would give.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpa_emu.wire.ulp import nvme_rdma


@dataclass(frozen=True, slots=True)
class TargetLimits:
    """What the target checks: nvmet-rdma's admin queue depth, and the optional limits
    of the module docstring."""

    aq_depth: int = nvme_rdma.NVME_AQ_DEPTH
    max_queue_size: int | None = None
    max_qid: int | None = None


@dataclass(frozen=True, slots=True)
class TargetAnswer:
    """Accept (``status`` 0) or reject with ``status``; the private data to send and
    the rule that decided."""

    status: int
    private_data: bytes
    why: str

    @property
    def accept(self) -> bool:
        """The target accepts."""
        return self.status == 0


def _reject(status: int, why: str) -> TargetAnswer:
    return TargetAnswer(status, nvme_rdma.CmReject(status).encode(), why)


def decide(private_data: bytes, limits: TargetLimits = TargetLimits()) -> TargetAnswer:
    """The target's answer to a connect carrying ``private_data``."""
    if not private_data:
        return _reject(nvme_rdma.INVALID_LEN, "nvmet_rdma_parse_cm_connect_req: no "
                       "private data")
    raw = (private_data + bytes(nvme_rdma.CM_REQ_SIZE))[:nvme_rdma.CM_REQ_SIZE]
    recfmt, qid, hrqsize, hsqsize = (int.from_bytes(raw[i:i + 2], "little")
                                     for i in (0, 2, 4, 6))
    if recfmt != nvme_rdma.NVME_RDMA_CM_FMT_1_0:
        return _reject(nvme_rdma.INVALID_RECFMT, f"nvmet_rdma_parse_cm_connect_req: "
                       f"recfmt {recfmt}")
    entries = hsqsize + 1
    if qid == 0 and entries > limits.aq_depth:
        return _reject(nvme_rdma.INVALID_HSQSIZE, f"nvmet_rdma_parse_cm_connect_req: admin "
                       f"queue of {entries} entries > NVME_AQ_DEPTH {limits.aq_depth}")
    if limits.max_qid is not None and qid > limits.max_qid:
        return _reject(nvme_rdma.INVALID_QID, f"the target's limit: QID {qid} > "
                       f"{limits.max_qid}")
    if qid and limits.max_queue_size is not None:
        if entries > limits.max_queue_size:
            return _reject(nvme_rdma.INVALID_HSQSIZE, f"the target's limit: {entries} "
                           f"entries > {limits.max_queue_size}")
        if hrqsize > limits.max_queue_size:
            return _reject(nvme_rdma.INVALID_HRQSIZE, f"the target's limit: HRQSIZE "
                           f"{hrqsize} > {limits.max_queue_size}")
    return TargetAnswer(0, nvme_rdma.CmReply(entries & 0xFFFF).encode(),
                        f"nvmet_rdma_cm_accept: crqsize {entries & 0xFFFF}")
