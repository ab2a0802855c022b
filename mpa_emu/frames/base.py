"""Pieces shared by the MPA/DDP/RDMAP scapy layers: a field that carries a dissection
verdict without taking wire bytes, and a base class that never raises on short input."""

from __future__ import annotations

from typing import Any

from scapy.config import conf
from scapy.fields import Field
from scapy.packet import Packet

TRUNCATED = "truncated"


class NoteField(Field[Any, bytes]):
    """A field with no bytes on the wire, filled in after dissection.

    It shows in ``show()`` and ``ls()`` like any other field, so a verdict such as
    ``problem = PD_Length 600 above 512`` or ``crc_ok = False`` sits beside the bytes it
    talks about. Building ignores it.
    """

    def __init__(self, name: str, default: Any = None) -> None:
        super().__init__(name, default, fmt="0s")

    def addfield(self, pkt: Packet, s: bytes, val: Any) -> bytes:
        return s

    def getfield(self, pkt: Packet, s: bytes) -> tuple[bytes, Any]:
        return s, None

    def i2repr(self, pkt: Packet | None, x: Any) -> str:
        return "" if x is None else repr(x)


class GuardedPacket(Packet):
    """A layer whose fixed part must be wholly present before its fields are read.

    Subclasses say how many bytes that is (:meth:`required_length`) and may add verdicts
    after a normal dissection (:meth:`diagnose`). When the bytes are short, no field is
    read: every field is ``None``, ``problem`` says why, and all the bytes go to a Raw
    payload, so nothing raises and nothing is lost.
    """

    def required_length(self, s: bytes) -> int:
        """Bytes needed to dissect the fixed part, judged from the bytes present."""
        return 0

    def diagnose(self) -> list[str]:
        """Problems found in a complete dissection (wire values that break a rule)."""
        return []

    @property
    def truncated(self) -> bool:
        """True when the layer was too short to dissect."""
        note = self.fields.get("problem")
        return isinstance(note, str) and note.startswith(TRUNCATED)

    def do_dissect(self, s: bytes) -> bytes:
        need = self.required_length(s)
        if len(s) < need:
            for f in self.fields_desc:
                self.fields[f.name] = None
            self.fields["problem"] = (f"{TRUNCATED} {self.name}: {len(s)} bytes present, "
                                      f"{need} needed")
            self.raw_packet_cache = b""
            self.raw_packet_cache_fields = {}
            self.explicit = 1
            return s
        rest: bytes = super().do_dissect(s)
        problems = self.diagnose()
        if problems:
            self.fields["problem"] = "; ".join(problems)
        return rest

    def describe(self) -> str:
        """One line for ``summary()`` of a layer that dissected completely."""
        return str(self.name)

    def mysummary(self) -> str:
        if self.truncated:
            return f"{self.name} ({self.problem})"
        return self.describe()

    def guess_payload_class(self, payload: bytes) -> Any:
        if self.truncated:
            return conf.raw_layer
        return super().guess_payload_class(payload)
