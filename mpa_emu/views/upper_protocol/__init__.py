"""The upper protocol of an inspected connection (SMB Direct, NVMe-oF, iSER,
RPC-over-RDMA): :func:`analyse_connection` builds its
:class:`~mpa_emu.ulp.upper.report.UlpReport` from what inspect read, with the diagnoses
of :mod:`~mpa_emu.views.upper_protocol.diagnose`; :mod:`~mpa_emu.views.upper_protocol.explain`
puts them in explain's terms."""

from __future__ import annotations

from mpa_emu.views.upper_protocol.analyse import analyse_connection

__all__ = ["analyse_connection"]
