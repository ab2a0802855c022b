"""A capture's ladder and frame fields for an HTML page, read as the page is written.

A page draws its ladder in two passes (the lanes' spacing, then the rows) and writes
every frame's fields after it. Held in memory for a capture of 10^5 frames that was
hundreds of MB; here the rows wait in a temporary file, read again for each pass, and
the fields are decoded a frame at a time while written, so what a page costs is what
its report keeps, not the capture.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from mpa_emu.capture.checksums import Mode
from mpa_emu.capture.pcap import CaptureError, read_capture
from mpa_emu.views.diagram import capture_rows, columns
from mpa_emu.views.html.fields import Fields, record_fields
from mpa_emu.views.html.fpdu_fields import FpduRows
from mpa_emu.views.ladder import Row


class ParkedRows:
    """The ladder of a capture (:func:`mpa_emu.views.diagram.from_capture`'s rows and
    columns), parked in a temporary file: :attr:`rows` reads them again each time.
    Use as a context manager (or call :meth:`close`) to delete the file."""

    def __init__(self, path: str | Path, checksums: Mode = Mode.OFFLOAD) -> None:
        lanes: dict[str, int] = {}
        fd, self._path = tempfile.mkstemp(prefix="mpa-emu-ladder-")
        try:
            with os.fdopen(fd, "wb") as parked:
                for row in capture_rows(path, lanes, (), checksums):
                    pickle.dump((row.time_ns, row.source, row.target, row.label, row.detail,
                                 row.lost, row.frame), parked, protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:
            os.unlink(self._path)
            raise
        self._columns = columns(lanes)

    @property
    def columns(self) -> list[str]:
        """One title per lane."""
        return self._columns

    @property
    def rows(self) -> Iterator[Row]:
        """The rows, in order, read from the file (a new pass each time)."""
        return _unparked(self._path)

    def close(self) -> None:
        """Delete the temporary file."""
        if os.path.exists(self._path):
            os.unlink(self._path)

    def __enter__(self) -> ParkedRows:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _unparked(path: str) -> Iterator[Row]:
    with open(path, "rb") as parked:
        yield from _rows(parked)


def _rows(parked: BinaryIO) -> Iterator[Row]:
    # One pickle per row, each read by its own unpickler: a long-lived one would keep
    # every row it read in its memo.
    while True:
        try:
            fields = pickle.load(parked)
        except EOFError:
            return
        yield Row(*fields)


def streamed_fields(path: str | Path, checksums: Mode = Mode.OFFLOAD,
                    fpdus: FpduRows | None = None) -> Iterator[tuple[int, Fields]]:
    """:func:`mpa_emu.views.html.fields.capture_fields` a frame at a time: the same
    fields, read while the page is written; a capture cut short ends at the cut.
    ``fpdus``: inspect's FPDU rows by the frame each starts in (none when not given)."""
    rows = fpdus or {}
    base: int | None = None
    records = read_capture(path)
    number = 0
    while True:
        try:
            rec = next(records)
        except (StopIteration, CaptureError):
            return
        number += 1
        if base is None and rec.time_ns is not None:
            base = rec.time_ns
        yield number, record_fields(number, rec, base or 0, checksums, rows.get(number))
