"""The emulated network: hosts running a Linux iWARP connection manager each (irdma, siw,
cxgb4, qedr, erdma: :data:`mpa_emu.stacks.STACKS`) on one virtual wire, in virtual time.

Quick start::

    from mpa_emu.net import Network, Reject
    net = Network(seed=1)
    alice = net.add_host("alice", "192.0.2.1")
    bob = net.add_host("bob", "192.0.2.2")
    bob.listen(31000, policy=Reject(b"busy"))
    alice.connect("192.0.2.2", 31000, private_data=b"hello")
    net.run()
    net.write_pcapng("out.pcapng")
"""

from mpa_emu.net.faults import DropRule, FaultConfig, drop_nth, frame_kind
from mpa_emu.net.host import Callback, Host, Policy, VerbFailure
from mpa_emu.net.network import CapturedFrame, Network, RunResult, ScheduledCall, derive_seed
from mpa_emu.net.policy import Accept, Manual, NvmeTarget, Reject
from mpa_emu.net.smbd import SmbdClient, SmbdServer
from mpa_emu.net.wire import Wire

__all__ = [
    "Accept", "Callback", "CapturedFrame", "DropRule", "FaultConfig", "Host", "Manual", "Network",
    "NvmeTarget", "Policy", "Reject", "RunResult", "ScheduledCall", "SmbdClient", "SmbdServer",
    "VerbFailure", "Wire",
    "derive_seed", "drop_nth", "frame_kind",
]
