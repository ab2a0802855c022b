"""siw's kernel log lines as trace records, determinism, and IPv6."""

from __future__ import annotations

import io

from mpa_emu.stacks.contract.events import IwEvent

from mpa_emu.net.network import Network
from mpa_emu.net.policy import Accept


def run(seed: int, params: dict[str, object] | None = None, ipv6: bool = False) -> Network:
    net = Network(seed=seed)
    a = net.add_host("a", "2001:db8::1" if ipv6 else "192.0.2.1", stack="siw",
                     params=params or {})
    b = net.add_host("b", "2001:db8::2" if ipv6 else "192.0.2.2", stack="siw")
    b.listen(31000, policy=Accept(private_data=b"ok"), ipv6=ipv6)
    a.connect(b.address(ipv6=ipv6), 31000, private_data=b"hi")
    net.run()
    return net


def test_mpa_version_above_2_warns_as_pr_warn() -> None:
    net = run(1, {"mpa_version": 3})
    logs = [r for r in net.trace.of_kind("kernel_log") if r.fn == "siw_connect"]
    # siw_connect: pr_warn("Setting MPA version to %u\n", MPA_REVISION_2), always printed
    assert [(r.fields["level"], r.fields["text"], r.fields["dynamic_debug"]) for r in logs] \
        == [("warn", "Setting MPA version to 2", False)]
    request = next(f.segment.payload for f in net.frames if f.segment.payload)
    assert request[17] == 2


def test_siw_dbg_cep_lines_are_dynamic_debug_with_the_cep_prefix() -> None:
    net = run(1)
    upcall_lines = [r for r in net.trace.of_kind("kernel_log") if r.fn == "siw_cm_upcall"]
    assert upcall_lines and all(r.fields["dynamic_debug"] for r in upcall_lines)
    # siw_dbg_cep: "CEP[0x%pK] %s: " then "[QP %u]: reason=%d, status=%d"; reason 1 is
    # IW_CM_EVENT_CONNECT_REQUEST, delivered before the endpoint has a QP (UINT_MAX).
    first = upcall_lines[0].fields["text"]
    assert first.startswith("CEP[0x") and first.endswith(
        "siw_cm_upcall: [QP 4294967295]: reason=1, status=0")


def test_same_seed_same_bytes_other_seed_other_isns() -> None:
    def pcap(seed: int) -> bytes:
        out = io.BytesIO()
        run(seed).write_pcapng(out)
        return out.getvalue()
    assert pcap(3) == pcap(3)
    assert pcap(3) != pcap(4)


def test_siw_over_ipv6() -> None:
    net = run(1, ipv6=True)
    ups = net.hosts["a"].upcalls
    assert ups[0].event == IwEvent.CONNECT_REPLY and ups[0].status == 0
    syn = net.frames[0].segment
    # MSS: MTU 1500 - 60 for IPv6
    assert len(syn.src_ip) == 16 and syn.options[:4] == bytes.fromhex("020405a0")
