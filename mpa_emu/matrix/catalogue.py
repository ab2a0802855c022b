"""The scenarios a matrix runs between every ordered pair of sides.

Each :class:`Scenario` is a short script over one :class:`~mpa_emu.matrix.cell.CellRun`
(two hosts on one wire: ``initiator`` connects, ``responder`` listens), and optionally an
*overlay*: the parameters it lays over each side (a v1-only peer, an RTR type, CRC
required). Where a stack has no way to express the overlay the cell is not run and says
why (``n/a``), never guessed.

Faults that no application verb can cause (a peer that closes or resets its TCP
connection while the MPA exchange is in flight, an FPDU with an invalid STag) are frames
injected on the wire with the sequence numbers the connection is at, so every stack meets
the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpa_emu.matrix.sides import Side
from mpa_emu.stacks import STACKS
from mpa_emu.stacks.base import (
    OVERLAY_CRC_OFF,
    OVERLAY_CRC_ON,
    OVERLAY_MARKERS_ON,
    OVERLAY_MPA_V1,
    OVERLAY_RTR_READ,
    OVERLAY_RTR_SEND,
    OVERLAY_RTR_WRITE,
)

ConnectArgs = tuple[bytes, int, int]


@dataclass(frozen=True, slots=True)
class Scenario:
    """One matrix scenario: its name, what it shows, how the listener answers and what
    happens around the connection (see :mod:`mpa_emu.matrix.cell`)."""

    name: str
    doc: str
    listener: str = "accept"
    """``accept``, ``reject`` (with ``reject_pd`` bytes), ``manual``, ``nvme-target``
    (an NVMe-oF target whose queues hold 128 entries: :class:`mpa_emu.net.NvmeTarget`) or
    ``smbd-server`` (ksmbd's SMB Direct negotiation, :class:`mpa_emu.net.SmbdServer`; the
    initiator then negotiates as cifs.ko once established: :class:`mpa_emu.net.SmbdClient`)."""
    reject_pd: int = 0
    private_data: bytes = b""
    ird: int | None = None
    """IRD/ORD the initiator asks for; None = the stack's usual 16, ``-1`` = its maximum."""
    after_established: str = ""
    """``close`` (graceful), ``abort`` (abortive) or ``bad_write`` (an FPDU with an
    invalid STag injected from the initiator) once both sides are established."""
    during_mpa: str = ""
    """``fin`` or ``rst`` injected from the responder once the MPA request is on the wire."""
    initiator_overlay: str = ""
    responder_overlay: str = ""


MPA_V1 = OVERLAY_MPA_V1
CRC_ON = OVERLAY_CRC_ON
CRC_OFF = OVERLAY_CRC_OFF
MARKERS_ON = OVERLAY_MARKERS_ON
RTR_WRITE = OVERLAY_RTR_WRITE
RTR_READ = OVERLAY_RTR_READ
RTR_SEND = OVERLAY_RTR_SEND
# Each overlay's parameters, as each stack's registry entry names them, are the stack's
# own fact (MatrixFacts.overlays, mpa_emu/stacks/<stack>/; docs/stacks/*.md); a stack
# that leaves an overlay out has no such setting.


def overlay(side: Side, name: str) -> Side | str:
    """``side`` with overlay ``name`` applied, or the reason it cannot be."""
    if not name:
        return side
    params = STACKS[side.stack].matrix.overlays.get(name)
    if params is None:
        return f"{side.stack} has no setting for {name}"
    try:
        return side.with_params(params)
    except ValueError as exc:
        return str(exc)


def _reject(n: int) -> Scenario:
    return Scenario(f"reject-pd{n}", f"the responder's application rejects with {n} bytes "
                    "of private data", listener="reject", reject_pd=n)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("connect", "connect with 5 bytes of private data and IRD/ORD 16; accept",
             private_data=b"hello"),
    _reject(0), _reject(255), _reject(256), _reject(512),
    Scenario("v1-responder", "the responder speaks MPA rev 1 only",
             responder_overlay=MPA_V1),
    Scenario("v1-initiator", "the initiator speaks MPA rev 1 only",
             initiator_overlay=MPA_V1),
    Scenario("rtr-write", "both sides set to a zero-length RDMA Write RTR",
             initiator_overlay=RTR_WRITE, responder_overlay=RTR_WRITE),
    Scenario("rtr-read", "both sides set to a zero-length RDMA Read RTR",
             initiator_overlay=RTR_READ, responder_overlay=RTR_READ),
    Scenario("rtr-send", "both sides set to a zero-length Send RTR",
             initiator_overlay=RTR_SEND, responder_overlay=RTR_SEND),
    Scenario("ird-ord-0", "the initiator asks for IRD 0 and ORD 0", ird=0),
    Scenario("ird-ord-max", "the initiator asks for its stack's maximum IRD/ORD", ird=-1),
    Scenario("ird-ord-3fff", "the initiator asks for IRD/ORD 0x3FFF (the 14-bit field's "
             "largest value, RFC 6581 section 5)", ird=0x3FFF),
    Scenario("peer-close-mpa", "the responder's TCP sends a FIN once the MPA request is "
             "on the wire", listener="manual", during_mpa="fin"),
    Scenario("peer-reset-mpa", "the responder's TCP sends a RST once the MPA request is "
             "on the wire", listener="manual", during_mpa="rst"),
    Scenario("crc-mismatch", "the initiator requires CRC, the responder has it off",
             initiator_overlay=CRC_ON, responder_overlay=CRC_OFF),
    Scenario("markers-mismatch", "the initiator asks for markers",
             initiator_overlay=MARKERS_ON),
    Scenario("terminate-after-rts", "once established, an RDMA Write to an invalid STag "
             "reaches the responder", after_established="bad_write"),
    Scenario("graceful-close", "once established, the initiator disconnects gracefully",
             after_established="close"),
    Scenario("abortive-close", "once established, the initiator disconnects abortively",
             after_established="abort"),
    # struct nvme_rdma_cm_req (include/linux/nvme-rdma.h): recfmt 0, qid 1, hrqsize
    # 1024, hsqsize 1023 (0's based: 1,024 entries), rsvd[24].
    Scenario("nvme-queue-too-big", "an NVMe-oF connect of 1,024 entries against a target "
             "of 128: the reject carries NVME_RDMA_CM_INVALID_HSQSIZE",
             listener="nvme-target",
             private_data=bytes.fromhex("0000" "0100" "0004" "ff03") + bytes(24)),
    Scenario("smbd-negotiate", "once established, cifs.ko's SMB Direct Negotiate Request "
             "is the first Send and a ksmbd server answers it with its Negotiate Response "
             "(CreditsGranted 254, MaxFragmentedSize 173,910)", listener="smbd-server"),
)

BY_NAME: dict[str, Scenario] = {s.name: s for s in SCENARIOS}


def select(names: list[str] | None) -> list[Scenario]:
    """The scenarios named (all of them when ``names`` is empty); ValueError naming the
    unknown one."""
    if not names:
        return list(SCENARIOS)
    chosen = []
    for name in names:
        if name not in BY_NAME:
            raise ValueError(f"unknown scenario {name!r} (known: {', '.join(BY_NAME)})")
        chosen.append(BY_NAME[name])
    return chosen


