"""Captures on disk and the tools that judge them.

:mod:`~mpa_emu.capture.pcap` (pcap/pcapng reading and the deterministic pcapng writer),
:mod:`~mpa_emu.capture.checksums` (checksums as a capture tool reads them: good, bad, TX
offload artefact), :mod:`~mpa_emu.capture.tshark` (tshark as the independent judge, run
isolated from the user's Wireshark set-up) and :mod:`~mpa_emu.capture.spool` (temporary
spooling that keeps the reading commands' memory bounded).
"""
