"""mpa-emu diagram: the ladder of a scenario run or a capture, as text and SVG."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers.inspect_builders import Conversation, write_pcap

from mpa_emu.cli import main
from mpa_emu.scenario import load_scenario, run_scenario
from mpa_emu.views.diagram import from_capture, from_run

ROOT = Path(__file__).resolve().parents[2]
REJECT = ROOT / "scenarios" / "reject_with_private_data.toml"
SVG = "{http://www.w3.org/2000/svg}"


def reject_ladder_text() -> str:
    return from_run(run_scenario(load_scenario(REJECT)).net).text()


def test_reject_scenario_text_shows_the_reject_frame_with_its_private_data() -> None:
    text = reject_ladder_text()
    lines = text.splitlines()
    arrow = next(i for i, line in enumerate(lines) if "[FIN, ACK]" in line and "len=36" in line)
    assert "<-" in lines[arrow]  # from bob (right lane) to alice
    assert 'MPA Rej v2' in lines[arrow + 1] and "pd=\"it's not you\"" in lines[arrow + 1]
    assert "MPAREQ_RCVD -> FIN_WAIT1" in text
    assert "<< CONNECT_REPLY -ECONNREFUSED" in text


def test_reject_scenario_svg_is_well_formed_and_has_the_reject(tmp_path: Path) -> None:
    out = tmp_path / "reject.svg"
    assert main(["diagram", str(REJECT), "-o", str(out)]) == 0
    root = ET.parse(out).getroot()
    assert root.tag == f"{SVG}svg"
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    reject = [t for t in texts if t.startswith("MPA Rej v2")]
    assert reject and "it's not you" in reject[0]
    arrows = [ln for ln in root.iter(f"{SVG}line") if ln.get("class") == "arrow"]
    assert len(arrows) == 9  # every frame of the run
    assert any(t.startswith("<< CONNECT_REPLY -ECONNREFUSED") for t in texts)


def test_capture_ladder_uses_addresses_as_lanes_and_shows_comments(tmp_path: Path) -> None:
    pcap = tmp_path / "r.pcapng"
    assert main(["run", "-q", str(REJECT), "-o", str(pcap)]) == 0
    ladder = from_capture(pcap)
    assert ladder.columns == ["192.0.2.1", "192.0.2.2"]
    text = ladder.text()
    assert "irdma_send_mpa_reject: MPAREQ_RCVD -> FIN_WAIT1" in text
    assert "pd=\"it's not you\"" in text


def test_foreign_capture_and_lost_lanes(tmp_path: Path) -> None:
    conv = Conversation(client="fd00::1", server="fd00::2", vlan=7).handshake()
    ladder = from_capture(write_pcap(tmp_path / "c.pcap", conv))
    assert ladder.columns == ["fd00::1", "fd00::2"]
    assert len(ladder.rows) == 3
    run = run_scenario(load_scenario(ROOT / "scenarios" / "lost_synack.toml"))
    lost = [r for r in from_run(run.net).rows if r.lost]
    assert len(lost) == 1 and "[SYN, ACK]" in lost[0].label
    assert 'class="lost"' in from_run(run.net).svg()


def test_bad_inputs_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"not a capture")
    assert main(["diagram", str(junk)]) == 2
    bad = tmp_path / "bad.toml"
    bad.write_text("seed = 'x'\n")
    assert main(["diagram", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "mpa-emu diagram: error:" in err and "bad.toml:1: seed" in err


def test_capture_ladder_filtered_by_port(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    a = Conversation(cport=40001).handshake()
    b = Conversation(cport=40002).handshake().client_sends(b"x" * 8)
    cap = write_pcap(tmp_path / "two.pcap", a, b)
    assert len(from_capture(cap, ports=[40002]).rows) == 4
    assert main(["diagram", "--port", "40001", str(cap)]) == 0
    out = capsys.readouterr().out
    assert "40001>31000" in out and "40002" not in out


def _relinked(src: Path, dst: Path, linktype: int, strip: int, prefix: bytes = b"") -> Path:
    """``src`` (a little-endian Ethernet pcap) rewritten with another link type: each
    frame loses its first ``strip`` bytes and gains ``prefix``."""
    data = src.read_bytes()
    header = bytearray(data[:24])
    header[20:24] = linktype.to_bytes(4, "little")
    out, pos = bytes(header), 24
    while pos < len(data):
        sec, usec, caplen = (int.from_bytes(data[pos + i:pos + i + 4], "little")
                             for i in (0, 4, 8))
        frame = prefix + data[pos + 16 + strip:pos + 16 + caplen]
        out += b"".join(n.to_bytes(4, "little") for n in (sec, usec, len(frame), len(frame)))
        out += frame
        pos += 16 + caplen
    dst.write_bytes(out)
    return dst


@pytest.mark.parametrize(("linktype", "strip", "prefix"), [
    (101, 14, b""),                                         # raw IP (tcpdump on a tun)
    (113, 14, bytes.fromhex("0000 0001 0006 020000000001 0000 0800")),  # Linux cooked
])
def test_capture_ladder_reads_raw_ip_and_linux_cooked_captures(
        tmp_path: Path, linktype: int, strip: int, prefix: bytes) -> None:
    source = ROOT / "pcaps" / "v2_accept.pcap"
    relinked = _relinked(source, tmp_path / "other.pcap", linktype, strip, prefix)
    assert from_capture(relinked).text() == from_capture(source).text()


def test_capture_ladder_says_which_link_type_it_cannot_read(tmp_path: Path) -> None:
    # Link type 147 (user 0) holding Ethernet bytes must not be read as Ethernet.
    odd = _relinked(ROOT / "pcaps" / "v2_accept.pcap", tmp_path / "odd.pcap", 147, 0)
    text = from_capture(odd).text()
    assert "#1 not decoded (link type 147 not supported)" in text
    assert "[SYN]" not in text


def test_scenario_suffix_is_recognised_in_any_case(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    upper = tmp_path / "REJECT.TOML"
    upper.write_text(REJECT.read_text())
    assert main(["diagram", str(upper)]) == 0
    assert capsys.readouterr().out == reject_ladder_text()


def test_capture_cut_short_is_drawn_up_to_the_cut(tmp_path: Path) -> None:
    source = ROOT / "pcaps" / "v2_accept.pcap"
    data = source.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[:-10])  # the tenth and last record loses its end
    whole = from_capture(source).text().splitlines()
    text = from_capture(cut).text().splitlines()
    # Every line of the first nine frames, then one note naming the damage.
    assert text[:-1] == whole[:len(text) - 1]
    # The tenth frame, the initiator NIC's ACK of the zero-length Read Response; record 9
    # (the Read Response: 16-byte record header, 54 + 20 bytes) ends at 770 + 90.
    assert "len=0" in whole[len(text) - 1]
    assert text[-1].strip().rstrip("| ") == (
        "| capture ends after frame 9: truncated pcap record 9 at offset 860: 54 bytes "
        "announced")


def test_svg_notes_wrap_before_the_next_lane_and_keep_every_word(tmp_path: Path) -> None:
    out = tmp_path / "reject.svg"
    assert main(["diagram", str(REJECT), "-o", str(out)]) == 0
    root = ET.parse(out).getroot()
    lanes = [float(line.get("x1", "0")) for line in root.iter(f"{SVG}line")
             if line.get("class") == "lane"]
    notes = [t for t in root.iter(f"{SVG}text") if t.get("class") in ("note", "upcall")]
    for t in notes:
        x, text = float(t.get("x", "0")), "".join(t.itertext())
        assert not any(x < lane < x + len(text) * 6.7 for lane in lanes), text
    # alice's upcall is longer than the gap to bob's lane: it continues on the next line.
    texts = ["".join(t.itertext()) for t in notes]
    start = next(i for i, t in enumerate(texts) if t.startswith("<< CONNECT_REPLY"))
    assert " ".join(texts[start:]).startswith(
        "<< CONNECT_REPLY -ECONNREFUSED ird=16 ord=16 pd=\"it's not you\" +4 past the "
        "frame: 00000000")
