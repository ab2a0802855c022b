"""Live mode: an emulated iWARP host (irdma, siw, cxgb4, qedr or erdma) on a TAP device,
talking to the real Linux TCP stack.

:mod:`~mpa_emu.live.tap` opens the TAP file descriptor, :mod:`~mpa_emu.live.neighbour`
answers ARP and IPv6 neighbour discovery for the emulated addresses,
:mod:`~mpa_emu.live.driver` runs the same sans-IO CM core as the virtual wire against
real frames and the real clock, and :mod:`~mpa_emu.live.netns` creates the network
namespaces the live tests use.
"""
