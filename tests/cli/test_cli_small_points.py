"""One-line errors and truthful lines of the commands that read a capture: a
``--profile`` address that is in no connection, ``judge --checksums`` before the capture,
what ``diagram -p`` filtered, and the "wrote FILE" lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpa_emu.cli import main

ROOT = Path(__file__).resolve().parents[2]
V2_ACCEPT = ROOT / "pcaps" / "v2_accept.pcap"
# pcaps/README.md: initiator A 192.168.10.1, responder B 192.168.10.2.


@pytest.mark.parametrize("command", ["inspect", "explain"])
def test_a_profile_address_not_in_the_capture_is_a_one_line_error(
        command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, str(V2_ACCEPT), "--profile", "10.9.9.9=siw"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--profile: 10.9.9.9 is not an address of any connection in" in err
    assert "192.168.10.1, 192.168.10.2" in err


@pytest.mark.parametrize("command", ["inspect", "explain"])
def test_a_profile_address_in_the_capture_is_taken(
        command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, str(V2_ACCEPT), "--profile", "192.168.10.1=irdma"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.tshark
def test_judge_bare_checksums_before_the_capture_is_strict(
        capsys: pytest.CaptureFixture[str]) -> None:
    # docs: "strict (a bare --checksums)"; the word after it is the capture, not a mode.
    assert main(["judge", "--checksums", str(V2_ACCEPT)]) == 0
    out = capsys.readouterr().out
    assert "checksums strict: tshark verifies IP and TCP checksums" in out
    assert main(["judge", str(V2_ACCEPT), "--checksums"]) == 0
    assert "checksums strict" in capsys.readouterr().out


def test_judge_checksums_with_a_wrong_mode_is_a_one_line_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["judge", "--checksums", "bogus", str(V2_ACCEPT)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "invalid choice: 'bogus'" in err
    assert main(["judge", "--checksums"]) == 2
    assert "required: capture" in capsys.readouterr().err


def test_diagram_port_filter_says_what_it_filtered(capsys: pytest.CaptureFixture[str]) -> None:
    # v2_accept's only connection is 40001 <-> 31000 (pcaps/README.md): port 9999 has
    # no frame, which is what the filter did, not a capture without IP.
    assert main(["diagram", str(V2_ACCEPT), "-p", "9999"]) == 0
    out = capsys.readouterr().out
    assert "(no IP frames)" not in out
    assert "(no TCP segment to or from port 9999: -p filtered out every frame)" in out


REJECT = ROOT / "scenarios" / "reject_with_private_data.toml"


def _wrote_lines(text: str) -> list[str]:
    return [x for x in text.splitlines() if x.startswith("wrote ")]


def test_every_written_file_is_announced(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    pcap, html = tmp_path / "r.pcapng", tmp_path / "r.html"
    assert main(["run", "-q", str(REJECT), "-o", str(pcap), "--html", str(html)]) == 0
    lines = _wrote_lines(capsys.readouterr().out)
    assert pcap.exists() and html.exists()
    assert lines[0].startswith(f"wrote {pcap} (") and lines[1] == f"wrote {html} (HTML report)"
    svg = tmp_path / "d.svg"
    assert main(["diagram", str(V2_ACCEPT), "-o", str(svg)]) == 0
    assert _wrote_lines(capsys.readouterr().out) == [f"wrote {svg} (SVG)"]
    for argv in (["replay", str(V2_ACCEPT), "--emulate", "192.168.10.2"],
                 ["inspect", str(V2_ACCEPT)], ["explain", str(V2_ACCEPT)]):
        page = tmp_path / f"{argv[0]}.html"
        main([*argv, "--html", str(page)])
        assert _wrote_lines(capsys.readouterr().out) == [f"wrote {page} (HTML report)"]


def test_the_wrote_line_keeps_out_of_json_on_standard_output(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    page = tmp_path / "i.html"
    assert main(["inspect", str(V2_ACCEPT), "--json", "--html", str(page)]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)
    assert _wrote_lines(captured.err) == [f"wrote {page} (HTML report)"]
    assert main(["explain", str(V2_ACCEPT), "--json", "-", "--html", str(page)]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)
    assert _wrote_lines(captured.err) == [f"wrote {page} (HTML report)"]


@pytest.mark.parametrize("argv", [
    ["inspect", str(V2_ACCEPT), "--html", "{missing}/r.html"],
    ["explain", str(V2_ACCEPT), "--html", "{missing}/r.html"],
    ["explain", str(V2_ACCEPT), "--json", "{missing}/r.json"],
    ["explain", str(V2_ACCEPT), "--json", "{dir}"],
])
def test_an_unwritable_output_stops_before_the_report(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [a.format(missing=tmp_path / "missing", dir=tmp_path) for a in argv]
    assert main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no report printed before the error
    assert captured.err.count("\n") == 1 and "cannot write " in captured.err
