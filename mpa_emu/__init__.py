"""mpa_emu: a packet-level emulator of the Linux irdma iWARP connection manager.

The package models ``drivers/infiniband/hw/irdma/cm.c``: real Ethernet/IP/TCP frames
carrying MPA v1/v2 (RFC 5044, RFC 6581), an irdma CM state machine per emulated host,
pcapng capture that Wireshark decodes as iWARP, and replay of recorded captures.
"""

__version__ = "0.1.0"
