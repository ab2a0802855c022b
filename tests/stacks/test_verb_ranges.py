"""Verb arguments outside the type iw_cm hands them to the driver in are refused before
anything changes, on every stack, from one table (:mod:`mpa_emu.stacks.verb_args`).

The bounds are the kernel's types: ports are the u16 ``sin_port`` of the sockaddrs in
``struct iw_cm_id`` (include/rdma/iw_cm.h), IRD and ORD the u32 fields of ``struct
iw_cm_conn_param``, a backlog the int of iw_cm_listen; private data cannot exceed the
16-bit PD_Length of RFC 5044 section 7.1. siw's connect took local_port 65536 and -1:
the connection stayed and its SYN broke every later run with an encoding error.
"""

from __future__ import annotations

import pytest

from mpa_emu.errors import MpaEmuError
from mpa_emu.net.network import Network
from mpa_emu.stacks import STACKS
from mpa_emu.stacks.verb_args import VERB_ARGS, VERBS, VerbArgumentError

S_NS = 1_000_000_000
SIW_IP, PEER_IP = bytes([192, 0, 2, 1]), bytes([192, 0, 2, 2])

BAD_CONNECT = [
    {"local_port": 65536}, {"local_port": -1}, {"port": 65536}, {"port": -1},
    {"ird": -1}, {"ord": 1 << 32}, {"private_data": bytes(65536)},
    {"private_data": "text"}, {"port": True}, {"local_port": 1.5},
]


@pytest.mark.parametrize("bad", BAD_CONNECT, ids=lambda b: ",".join(
    f"{k}={v!r}"[:24] for k, v in b.items()))
def test_siw_core_connect_refuses_before_anything_changes(bad: dict[str, object]) -> None:
    core = STACKS["siw"].make_core("a", b"\x02\0\0\0\0\x01", {}, seed=1, trace=None,
                                   mtu=1500)
    core.add_address(SIW_IP)
    args: dict[str, object] = {"local_port": None, "private_data": b"", "ird": 16,
                               "ord": 16}
    bad = dict(bad)
    port = bad.pop("port", 31000)
    args.update(bad)
    with pytest.raises(VerbArgumentError) as info:
        core.connect(SIW_IP, PEER_IP, port, now_ns=0, **args)  # type: ignore[arg-type]
    assert isinstance(info.value, MpaEmuError) and isinstance(info.value, ValueError)
    assert "\n" not in str(info.value)
    assert core.conns() == [] and core.frames_to_send() == [] and core.get_timer() is None


@pytest.mark.parametrize("stack", sorted(STACKS))
@pytest.mark.parametrize("bad", [{"local_port": 65536}, {"local_port": -1},
                                 {"port": 70000}, {"ird": -1}])
def test_every_stack_refuses_through_the_host_and_keeps_running(
        stack: str, bad: dict[str, object]) -> None:
    net = Network(seed=3)
    a = net.add_host("a", "192.0.2.1", stack=stack)
    b = net.add_host("b", "192.0.2.2", stack="siw")
    b.listen(31000)
    bad = dict(bad)
    port = bad.pop("port", 31000)
    with pytest.raises(VerbArgumentError):
        a.connect(b, port, **bad)  # type: ignore[arg-type]
    assert a.conns() == []
    net.run_for(200 * S_NS)  # nothing left behind that breaks a later run
    assert a.conns() == [] and not any(f.sender == "a" for f in net.frames)


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_listen_backlog_and_port_from_the_table(stack: str) -> None:
    net = Network(seed=3)
    a = net.add_host("a", "192.0.2.1", stack=stack)
    for kwargs in ({"port": 65536}, {"port": -5}, {"port": 31000, "backlog": -1},
                   {"port": 31000, "vlan": 4095}):
        kwargs = dict(kwargs)
        port = kwargs.pop("port")
        with pytest.raises(VerbArgumentError):
            a.listen(port, **kwargs)  # type: ignore[arg-type]


def test_the_table_names_a_type_for_every_argument() -> None:
    for verb, names in VERBS.items():
        for name in names:
            assert VERB_ARGS[name].why, (verb, name)
