"""``--html FILE`` without a browser: one self-contained document (nothing to fetch), the
frames and marks it carries, hostile text kept as text, and one-line errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mpa_emu.cli import main

ROOT = Path(__file__).resolve().parents[2]
REJECT = ROOT / "scenarios" / "reject_with_private_data.toml"


def _data(html: str) -> dict[str, object]:
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>',
                      html, re.S)
    assert found is not None
    data: dict[str, object] = json.loads(found.group(1))
    return data


def _assert_self_contained(html: str) -> None:
    assert html.startswith("<!DOCTYPE html>")
    # Nothing loads from anywhere: no external script, style, image, font or frame.
    for pattern in (r"<script[^>]*\ssrc=", r"<link\b", r"<img\b", r"<iframe\b", r"@import",
                    r"url\((?!#)", r"\shref=\"(?!#)"):
        assert re.search(pattern, html) is None, pattern
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", html))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls


@pytest.mark.parametrize("argv, code", [
    (["replay", str(ROOT / "pcaps" / "divergent_linux_synack.pcap"), "--emulate",
      "192.168.10.2"], 1),
    (["inspect", str(ROOT / "pcaps" / "v2_accept.pcap")], 0),
    (["run", "-q", str(REJECT)], 0),
])
def test_html_report_is_one_self_contained_page(argv: list[str], code: int,
                                                tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.html"
    assert main([*argv, "--html", str(out)]) == code
    capsys.readouterr()
    html = out.read_text(encoding="utf-8")
    _assert_self_contained(html)
    assert html.count("<svg") == 1 and html.count("<script") == 2
    frames = _data(html)["frames"]
    assert isinstance(frames, dict) and "1" in frames


def test_divergent_frame_is_marked_and_matched_frames_too(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    out = tmp_path / "replay.html"
    main(["replay", str(ROOT / "pcaps" / "divergent_linux_synack.pcap"), "--emulate",
          "192.168.10.2", "--html", str(out)])
    capsys.readouterr()
    html = out.read_text(encoding="utf-8")
    # The sidecar's first divergence: frame 2, the SYN-ACK; the first red row.
    marked = re.findall(r'<g class="row (hl|ok)" data-row="\d+" data-frame="(\d+)"', html)
    assert marked[0] == ("hl", "2")


def test_private_data_that_looks_like_markup_stays_text(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    hostile = "</script><b>"  # as long as the reason it replaces: 12 bytes
    text = REJECT.read_text().replace("it's not you", hostile)
    scenario = tmp_path / "hostile.toml"
    scenario.write_text(text)
    out = tmp_path / "run.html"
    assert main(["run", "-q", str(scenario), "--html", str(out)]) == 0
    capsys.readouterr()
    html = out.read_text(encoding="utf-8")
    assert hostile not in html and html.count("</script>") == 2
    frames = _data(html)["frames"]
    assert isinstance(frames, dict)
    assert any(value == f'"{hostile}"' for fields in frames.values()
               for _name, value in fields)


@pytest.mark.parametrize("argv", [
    ["replay", str(ROOT / "pcaps" / "v2_accept.pcap"), "--emulate", "192.168.10.2"],
    ["inspect", str(ROOT / "pcaps" / "v2_accept.pcap")],
    ["run", "-q", str(REJECT)],
])
def test_unwritable_html_is_a_one_line_error(argv: list[str], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "missing" / "report.html"
    assert main([*argv, "--html", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot write {target}" in err
    assert "Traceback" not in err


def test_html_needs_a_single_scenario(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(REJECT), str(REJECT), "--html", str(tmp_path / "r.html")]) == 2
    assert "--html need a single scenario file" in capsys.readouterr().err


def test_docs_commands_write_reports_and_their_screenshots_exist(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    doc = (ROOT / "docs" / "html-reports.md").read_text(encoding="utf-8")
    block = re.search(r"```sh\n(.*?)```", doc, re.S)
    assert block is not None
    monkeypatch.chdir(ROOT)
    commands = block.group(1).split("\n")
    written = 0
    for command in filter(None, commands):
        argv = command.split()[1:]
        target = tmp_path / argv[-1]
        argv[-1] = str(target)
        # replay, inspect and explain show a failure (exit 1), the run passes (exit 0).
        assert main(argv) == (0 if argv[0] == "run" else 1)
        assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
        written += 1
    assert written == 4
    capsys.readouterr()
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", doc)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(images) == 3
    for image in images + re.findall(r"!\[[^\]]*\]\(([^)]+)\)", readme):
        base = ROOT / "docs" if not image.startswith("docs/") else ROOT
        data = (base / image).read_bytes()
        # A PNG (signature, IHDR) of the 1400x900 page Chromium rendered.
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
        assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == \
            (1400, 900)


def test_ctrl_c_keeps_an_html_report_of_the_run_so_far(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from mpa_emu.scenario import runner

    def interrupted(net: object, sc: object, progress: object) -> object:
        net.run(25_000)  # type: ignore[attr-defined]
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "_run", interrupted)
    out = tmp_path / "run.html"
    assert main(["run", str(ROOT / "scenarios" / "v2_accept.toml"), "--html", str(out)]) == 130
    assert f"written so far: --html {out}" in capsys.readouterr().err
    html = out.read_text(encoding="utf-8")
    assert ("INTERRUPTED at 0.000025 s (virtual) after 4 frames: expectations not checked"
            in html)
    # SYN, SYN-ACK, ACK and the MPA request left before 25 us: four frames to explain.
    frames = _data(html)["frames"]
    assert isinstance(frames, dict) and sorted(frames) == ["1", "2", "3", "4"]


def _marked(html: str) -> list[str]:
    box = html[html.index('id="highlight"'):]
    box = box[:box.index("</section>")]
    return re.findall(r'<tr class="diff"><th>([^<]*)</th>', box)


@pytest.mark.parametrize("tolerance, time_marked", [("0.01", False), ("0.00001", True)])
def test_replay_box_marks_a_time_only_outside_the_tolerance(tmp_path: Path, tolerance: str,
                                                            time_marked: bool) -> None:
    # The capture holds the SYN-ACK at t=0.000040 s, the emulator answers the SYN at
    # once: 40 us is inside 10 ms (the default) and outside 10 us.
    html = tmp_path / "r.html"
    main(["replay", str(ROOT / "pcaps" / "divergent_linux_synack.pcap"), "--emulate",
          "192.168.10.2", "--time-tolerance", tolerance, "--html", str(html)])
    marked = _marked(html.read_text())
    assert "window" in marked
    assert ("time" in marked) is time_marked
