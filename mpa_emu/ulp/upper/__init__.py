"""The upper protocols on a connection (SMB Direct, NVMe-oF, iSER, RPC-over-RDMA) as
inspect and explain tell them: :func:`analyse_connection` builds a
:class:`UlpReport` from what inspect read; :func:`ulp_lines` is its text."""

from __future__ import annotations

from mpa_emu.ulp.upper.analyse import analyse_connection
from mpa_emu.ulp.upper.report import UlpBlock, UlpDiagnosis, UlpReport, message_line, ulp_lines

__all__ = ["UlpBlock", "UlpDiagnosis", "UlpReport", "analyse_connection", "message_line",
           "ulp_lines"]
