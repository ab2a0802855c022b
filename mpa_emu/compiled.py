"""Which build is running: the compiled build, in which the modules every frame goes
through are compiled with mypyc (what a regular ``pip install .`` makes where a C compiler
is found, see setup.py and docs/compiling.md), or the pure-Python package (an editable
install, ``MPA_EMU_COMPILE=0``, or no compiler). Both behave the same; the compiled one is
about twice as fast.
"""

from __future__ import annotations

import importlib
import importlib.machinery
from pathlib import Path

COMPILED_MODULES: tuple[str, ...] = (
    "mpa_emu.wire.segment",
    "mpa_emu.wire.codec",
    "mpa_emu.wire.mpa",
    "mpa_emu.wire.ddp",
    "mpa_emu.wire.seq",
    "mpa_emu.wire.interning",
    "mpa_emu.wire.addr",
    "mpa_emu.capture.pcap",
    "mpa_emu.capture.decode",
    "mpa_emu.capture.spool",
    "mpa_emu.net.network",
    "mpa_emu.net.captured",
    "mpa_emu.net.host",
    "mpa_emu.net.wire",
    "mpa_emu.net.policy",
    "mpa_emu.stacks.irdma.config",
    "mpa_emu.stacks.irdma.states",
    "mpa_emu.stacks.contract.events",
    "mpa_emu.stacks.contract.base",
    "mpa_emu.stacks.irdma.contract",
    "mpa_emu.stacks.irdma.core",
    "mpa_emu.stacks.irdma.actions",
    "mpa_emu.stacks.irdma.nodes",
    "mpa_emu.stacks.irdma.conn_index",
    "mpa_emu.stacks.irdma.node",
    "mpa_emu.stacks.irdma.send",
    "mpa_emu.stacks.irdma.timers",
    "mpa_emu.stacks.irdma.timing",
    "mpa_emu.stacks.irdma.upcalls",
    "mpa_emu.stacks.irdma.refs",
    "mpa_emu.stacks.irdma.disconnect",
    "mpa_emu.stacks.irdma.mpa_policy",
    "mpa_emu.stacks.irdma.tcp",
    "mpa_emu.stacks.irdma.pdata",
    "mpa_emu.stacks.irdma.table_views",
    "mpa_emu.stacks.irdma.offload.states",
    "mpa_emu.stacks.irdma.offload.qp",
    "mpa_emu.stacks.irdma.offload.qp_records",
    "mpa_emu.stacks.irdma.offload.nic",
    "mpa_emu.stacks.irdma.offload.iwqp",
    "mpa_emu.stacks.irdma.offload.terminate",
    "mpa_emu.replay.recording",
    "mpa_emu.replay.engine",
    "mpa_emu.replay.recording_source",
    "mpa_emu.replay.stream",
)
"""The modules the compiled build compiles: those a frame passes through between two
emulated hosts (the codec, the capture writer, the network, the CM core and the QP), and
those replay reads a capture with (the capture reader and decoder, the streamed pass)."""


def compiled_modules() -> list[str]:
    """The modules of :data:`COMPILED_MODULES` that were loaded from a compiled extension."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    found = []
    for name in COMPILED_MODULES:
        origin = getattr(importlib.import_module(name), "__file__", None) or ""
        if origin.endswith(suffixes):
            found.append(name)
    return found


def install_note() -> str:
    """What setup.py recorded when it installed the package (``pure Python (why)`` or
    ``compiled``), or ``""`` for an editable install or a checkout, which record nothing."""
    try:
        return (Path(__file__).with_name("build_note.txt")).read_text("utf-8").strip()
    except OSError:
        return ""


def build_name() -> str:
    """``"compiled (N of M hot modules)"``, or ``"pure Python"`` with the reason the install
    recorded for not compiling (``"pure Python (source tree)"`` for an editable install or a
    checkout)."""
    count = len(compiled_modules())
    if count:
        return f"compiled ({count} of {len(COMPILED_MODULES)} hot modules)"
    note = install_note()
    return note if note.startswith("pure Python") else "pure Python (source tree)"
