"""replay's with_ack: a segment with another acknowledgement number and every other
field as it was."""

from __future__ import annotations

import dataclasses

from mpa_emu.replay.engine import with_ack
from mpa_emu.wire.segment import Segment


def test_with_ack_changes_the_ack_and_copies_every_other_field() -> None:
    fields = dataclasses.fields(Segment)
    # Distinct values per field (bytes, ints, a bool), written here, none a default.
    values: dict[str, object] = {}
    for i, f in enumerate(fields):
        if f.name.endswith(("_mac", "_ip")) or f.name in ("options", "payload"):
            values[f.name] = bytes([i]) * 4
        elif f.name == "df":
            values[f.name] = False
        else:
            values[f.name] = 100 + i
    seg = Segment(**values)  # type: ignore[arg-type]
    moved = with_ack(seg, 7)
    assert moved.ack == 7
    assert dataclasses.replace(seg, ack=7) == moved
