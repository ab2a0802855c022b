"""The upper protocols on a connection (SMB Direct, NVMe-oF, iSER, RPC-over-RDMA), as far
as they need no view: Send messages reassembled from a byte stream
(:mod:`~mpa_emu.ulp.upper.messages`), the report inspect keeps and its text
(:mod:`~mpa_emu.ulp.upper.report`), private data by format for scenarios
(:mod:`~mpa_emu.ulp.upper.formats`), the NVMe-oF target's decision
(:mod:`~mpa_emu.ulp.upper.nvme_target`) and SMB Direct's negotiation as ksmbd answers it
(:mod:`~mpa_emu.ulp.upper.ksmbd`) and cifs.ko asks and checks it
(:mod:`~mpa_emu.ulp.upper.cifs`); the emulated applications that run it are
:mod:`mpa_emu.net.smbd`. The analysis of an inspected connection is
:mod:`mpa_emu.views.upper_protocol`."""

from __future__ import annotations

from mpa_emu.ulp.upper.report import UlpBlock, UlpDiagnosis, UlpReport, message_line, ulp_lines

__all__ = ["UlpBlock", "UlpDiagnosis", "UlpReport", "message_line", "ulp_lines"]
