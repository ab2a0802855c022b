"""NVMe over Fabrics on RDMA: the connection's private data and the capsules on Sends.

Private data layouts from ``include/linux/nvme-rdma.h`` (``struct nvme_rdma_cm_req``,
``nvme_rdma_cm_rep``, ``nvme_rdma_cm_rej``, ``enum nvme_rdma_cm_status``), all
little-endian, which the host (``drivers/nvme/host/rdma.c``) and the target
(``drivers/nvme/target/rdma.c``) exchange through rdma_cm; on iWARP they travel as the
ULP private data of the MPA request, reply and reject. The NVMe-oF RDMA transport
binding adds CNTLID at bytes 8-9 of the request and reject status 0x09 (invalid
controller ID); Linux's header keeps those bytes reserved (``rsvd[24]``, written zero)
and its enum stops at 0x08, so both are read here but named as the specification's.

A command capsule is a 64-byte submission queue entry (NVMe base specification, "Submission
Queue Entry"; ``struct nvme_common_command`` in ``include/linux/nvme.h``) followed by any
in-capsule data; a response capsule is a 16-byte completion queue entry (``struct
nvme_completion``). Opcode 0x7F is a Fabrics command, its type in byte 4
(``struct nvmf_common_command`` ``fctype``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mpa_emu.wire.ulp.values import FieldValue

NVME_RDMA_IP_PORT = 4420
"""nvme-rdma.h ``NVME_RDMA_IP_PORT``."""
NVME_RDMA_MAX_QUEUE_SIZE = 128
"""nvme-rdma.h ``NVME_RDMA_MAX_QUEUE_SIZE``: the host's cap on an I/O queue."""
NVME_AQ_DEPTH = 32
"""include/linux/nvme.h ``NVME_AQ_DEPTH``: the admin queue's depth; the host asks hrqsize
32, hsqsize 31 for queue 0 (``nvme_rdma_route_resolved``) and the target refuses more
(``nvmet_rdma_parse_cm_connect_req``)."""
NVME_RDMA_CM_FMT_1_0 = 0x0
"""nvme-rdma.h ``enum nvme_rdma_cm_fmt``: the only record format."""
CM_REQ_SIZE = 32
"""``sizeof(struct nvme_rdma_cm_req)``: recfmt, qid, hrqsize, hsqsize, rsvd[24]."""
CM_REP_SIZE = 32
"""``sizeof(struct nvme_rdma_cm_rep)``: recfmt, crqsize, rsvd[28]."""
CM_REJ_SIZE = 4
"""``sizeof(struct nvme_rdma_cm_rej)``: recfmt, sts."""

CM_STATUS = {
    0x01: ("NVME_RDMA_CM_INVALID_LEN", "invalid length"),
    0x02: ("NVME_RDMA_CM_INVALID_RECFMT", "invalid record format"),
    0x03: ("NVME_RDMA_CM_INVALID_QID", "invalid queue ID"),
    0x04: ("NVME_RDMA_CM_INVALID_HSQSIZE", "invalid host SQ size"),
    0x05: ("NVME_RDMA_CM_INVALID_HRQSIZE", "invalid host RQ size"),
    0x06: ("NVME_RDMA_CM_NO_RSC", "resource not found"),
    0x07: ("NVME_RDMA_CM_INVALID_IRD", "invalid IRD"),
    0x08: ("NVME_RDMA_CM_INVALID_ORD", "Invalid ORD"),
    0x09: ("NVME_RDMA_CM_INVALID_CNTLID", "invalid controller ID"),
}
"""``enum nvme_rdma_cm_status`` with ``nvme_rdma_cm_msg``'s words (0x01-0x08), and the
transport binding's 0x09, which Linux does not define."""

INVALID_LEN, INVALID_RECFMT, INVALID_QID, INVALID_HSQSIZE = 0x01, 0x02, 0x03, 0x04
INVALID_HRQSIZE, NO_RSC = 0x05, 0x06


def status_name(sts: int) -> str:
    """``NVME_RDMA_CM_INVALID_HSQSIZE (invalid host SQ size)``; nvme_rdma_cm_msg's
    "unrecognized reason" for any other value."""
    name, words = CM_STATUS.get(sts, (f"status 0x{sts:02x}", "unrecognized reason"))
    return f"{name} ({words})"


def _zero(data: bytes) -> bool:
    return not any(data)


@dataclass(frozen=True, slots=True)
class CmRequest:
    """``struct nvme_rdma_cm_req``: the host's connect private data. ``hsqsize`` is 0's
    based (the target's receive queue is hsqsize + 1 entries), ``hrqsize`` is not."""

    qid: int
    hrqsize: int
    hsqsize: int
    cntlid: int = 0
    recfmt: int = NVME_RDMA_CM_FMT_1_0

    kind = "NVMe-RDMA connect request"

    @classmethod
    def decode(cls, data: bytes) -> CmRequest | None:
        """The request when ``data`` is 32 bytes with record format 1.0 and bytes 10-31
        zero (else None)."""
        if len(data) != CM_REQ_SIZE or not _zero(data[10:]):
            return None
        recfmt, qid, hrqsize, hsqsize, cntlid = struct.unpack_from("<HHHHH", data)
        if recfmt != NVME_RDMA_CM_FMT_1_0:
            return None
        return cls(qid, hrqsize, hsqsize, cntlid, recfmt)

    def encode(self) -> bytes:
        """The 32 bytes (as nvme_rdma_route_resolved fills them, CNTLID in bytes 8-9)."""
        return struct.pack("<HHHHH22x", self.recfmt, self.qid, self.hrqsize, self.hsqsize,
                           self.cntlid)

    @property
    def admin(self) -> bool:
        """QID 0: the admin queue."""
        return self.qid == 0

    def text(self) -> str:
        """One line."""
        queue = "admin queue" if self.admin else f"I/O queue {self.qid}"
        cntlid = f", CNTLID 0x{self.cntlid:04x}" if self.cntlid else ""
        return (f"{self.kind}: {queue} (QID {self.qid}), HRQSIZE {self.hrqsize}, HSQSIZE "
                f"{self.hsqsize} ({self.hsqsize + 1} entries){cntlid}")

    def fields(self) -> dict[str, FieldValue]:
        """recfmt, qid, hrqsize, hsqsize, cntlid."""
        return {"recfmt": self.recfmt, "qid": self.qid, "hrqsize": self.hrqsize,
                "hsqsize": self.hsqsize, "cntlid": self.cntlid}


@dataclass(frozen=True, slots=True)
class CmReply:
    """``struct nvme_rdma_cm_rep``: the target's accept private data."""

    crqsize: int
    recfmt: int = NVME_RDMA_CM_FMT_1_0

    kind = "NVMe-RDMA connect accept"

    @classmethod
    def decode(cls, data: bytes) -> CmReply | None:
        """The reply when ``data`` is 32 bytes, record format 1.0, bytes 4-31 zero."""
        if len(data) != CM_REP_SIZE or not _zero(data[4:]):
            return None
        recfmt, crqsize = struct.unpack_from("<HH", data)
        if recfmt != NVME_RDMA_CM_FMT_1_0:
            return None
        return cls(crqsize, recfmt)

    def encode(self) -> bytes:
        """The 32 bytes."""
        return struct.pack("<HH28x", self.recfmt, self.crqsize)

    def text(self) -> str:
        """One line."""
        return f"{self.kind}: CRQSIZE {self.crqsize}"

    def fields(self) -> dict[str, FieldValue]:
        """recfmt, crqsize."""
        return {"recfmt": self.recfmt, "crqsize": self.crqsize}


@dataclass(frozen=True, slots=True)
class CmReject:
    """``struct nvme_rdma_cm_rej``: the target's reject private data
    (``nvmet_rdma_cm_reject``)."""

    sts: int
    recfmt: int = NVME_RDMA_CM_FMT_1_0

    kind = "NVMe-RDMA connect reject"

    @classmethod
    def decode(cls, data: bytes) -> CmReject | None:
        """The reject when ``data`` is 4 bytes with record format 1.0."""
        if len(data) != CM_REJ_SIZE:
            return None
        recfmt, sts = struct.unpack("<HH", data)
        if recfmt != NVME_RDMA_CM_FMT_1_0:
            return None
        return cls(sts, recfmt)

    def encode(self) -> bytes:
        """The 4 bytes."""
        return struct.pack("<HH", self.recfmt, self.sts)

    @property
    def status_name(self) -> str:
        """The status by its enum name and nvme_rdma_cm_msg's words."""
        return status_name(self.sts)

    def text(self) -> str:
        """One line."""
        return f"{self.kind}: status {self.sts} {self.status_name}"

    def fields(self) -> dict[str, FieldValue]:
        """recfmt, sts, status_name."""
        return {"recfmt": self.recfmt, "sts": self.sts, "status_name": self.status_name}


FABRICS_OPCODE = 0x7F
"""``nvme_fabrics_command``: opcode 0x7F, type in byte 4."""
FABRICS_TYPES = {0x00: "Property Set", 0x01: "Connect", 0x04: "Property Get",
                 0x05: "Authentication Send", 0x06: "Authentication Receive",
                 0x08: "Disconnect"}
"""``enum nvmf_fabrics_opcode`` (include/linux/nvme.h)."""
ADMIN_OPCODES = {0x00: "Delete I/O SQ", 0x01: "Create I/O SQ", 0x02: "Get Log Page",
                 0x04: "Delete I/O CQ", 0x05: "Create I/O CQ", 0x06: "Identify",
                 0x08: "Abort", 0x09: "Set Features", 0x0A: "Get Features",
                 0x0C: "Asynchronous Event Request", 0x0D: "Namespace Management",
                 0x10: "Firmware Commit", 0x11: "Firmware Image Download",
                 0x18: "Keep Alive"}
"""``enum nvme_admin_opcode``."""
IO_OPCODES = {0x00: "Flush", 0x01: "Write", 0x02: "Read", 0x04: "Write Uncorrectable",
              0x05: "Compare", 0x08: "Write Zeroes", 0x09: "Dataset Management"}
"""``enum nvme_opcode`` (the NVM command set)."""
SQE_SIZE = 64
CQE_SIZE = 16


@dataclass(frozen=True, slots=True)
class CommandCapsule:
    """A command capsule: the SQE's opcode and command identifier, the queue kind (from
    the connection's QID), a Fabrics command's type (and a Connect's QID and SQSIZE),
    and the in-capsule data length."""

    opcode: int
    command_id: int
    admin: bool
    inline_length: int
    fctype: int | None = None
    connect_qid: int | None = None
    connect_sqsize: int | None = None

    kind = "NVMe command capsule"

    @classmethod
    def decode(cls, data: bytes, admin: bool, size: int | None = None) -> CommandCapsule | None:
        """The capsule when ``data`` (its first bytes; ``size`` the message's) holds a
        64-byte SQE; ``admin`` whether the connection is queue 0."""
        total = len(data) if size is None else size
        if len(data) < SQE_SIZE:
            return None
        opcode, command_id = data[0], struct.unpack_from("<H", data, 2)[0]
        fctype = qid = sqsize = None
        if opcode == FABRICS_OPCODE:
            fctype = data[4]
            if fctype == 0x01:  # struct nvmf_connect_command: qid at 42, sqsize at 44
                qid, sqsize = struct.unpack_from("<HH", data, 42)
        return cls(opcode, command_id, admin, total - SQE_SIZE, fctype, qid, sqsize)

    @property
    def name(self) -> str:
        """``Fabrics Connect``, ``Identify``, ``Write``."""
        if self.fctype is not None:
            return "Fabrics " + FABRICS_TYPES.get(self.fctype, f"type 0x{self.fctype:02x}")
        table = ADMIN_OPCODES if self.admin else IO_OPCODES
        return table.get(self.opcode, f"opcode 0x{self.opcode:02x}")

    def text(self) -> str:
        """One line."""
        queue = "admin" if self.admin else "I/O"
        extra = ""
        if self.connect_qid is not None:
            extra = f", Connect QID {self.connect_qid} SQSIZE {self.connect_sqsize}"
        inline = f", {self.inline_length:,} bytes in-capsule" if self.inline_length else ""
        return (f"{self.kind} ({queue} queue): {self.name} (opcode 0x{self.opcode:02x}, "
                f"CID {self.command_id}){extra}{inline}")

    def fields(self) -> dict[str, FieldValue]:
        """opcode, name, command_id, queue, fctype, inline_length."""
        return {"opcode": self.opcode, "name": self.name, "command_id": self.command_id,
                "queue": "admin" if self.admin else "io", "fctype": self.fctype,
                "connect_qid": self.connect_qid, "connect_sqsize": self.connect_sqsize,
                "inline_length": self.inline_length}


@dataclass(frozen=True, slots=True)
class ResponseCapsule:
    """A response capsule: the 16-byte CQE (``struct nvme_completion``: result, SQ head,
    SQ ID, command identifier, status with the phase bit in bit 0)."""

    command_id: int
    status: int
    sq_head: int
    sq_id: int
    result: int

    kind = "NVMe response capsule"

    @classmethod
    def decode(cls, data: bytes) -> ResponseCapsule | None:
        """The response when ``data`` is 16 bytes."""
        if len(data) != CQE_SIZE:
            return None
        result, sq_head, sq_id, cid, status = struct.unpack("<QHHHH", data)
        return cls(cid, status >> 1, sq_head, sq_id, result)

    def text(self) -> str:
        """One line: the status code type and code ([NVMe] Status Field)."""
        sct, sc = (self.status >> 8) & 0x7, self.status & 0xFF
        verdict = "success" if self.status == 0 else f"SCT {sct} SC 0x{sc:02x}"
        return f"{self.kind}: CID {self.command_id}, {verdict}, SQ head {self.sq_head}"

    def fields(self) -> dict[str, FieldValue]:
        """command_id, status, sq_head, sq_id, result."""
        return {"command_id": self.command_id, "status": self.status,
                "sq_head": self.sq_head, "sq_id": self.sq_id, "result": self.result}
