"""Render the docs' screenshots of the three HTML reports with headless Chromium:

    python tools/make_report_screenshots.py [--out docs/images]

- replay: pcaps/divergent_linux_synack.pcap played as 192.168.10.2 (a Linux SYN-ACK is
  not irdma's: window and options differ);
- inspect: pcaps/parse_pd_over_512.pcap (an MPA request with PD_Length 513);
- run: scenarios/reject_with_private_data.toml with its frame expectation asking for the
  private data "try later" instead of "it's not you" (a failed expectation).

Each page is opened at 1400x900 as a reader would see it first (the highlighted row is
scrolled into view and selected) and saved as PNG.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from browser import Chromium  # noqa: E402

from mpa_emu.cli import main as mpa_emu  # noqa: E402


def failing_scenario(directory: Path) -> Path:
    """The reject scenario expecting other private data than bob's policy sends."""
    text = (ROOT / "scenarios" / "reject_with_private_data.toml").read_text()
    path = directory / "reject_with_private_data.toml"
    path.write_text(text.replace('flags = "FA"\nprivate_data = "it\'s not you"',
                                 'flags = "FA"\nprivate_data = "try later"'))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        failing_scenario(work)
        # Relative paths, so that the pages' titles show no machine path.
        reports = {
            "replay": (ROOT, ["replay", "pcaps/divergent_linux_synack.pcap", "--emulate",
                              "192.168.10.2"]),
            "inspect": (ROOT, ["inspect", "pcaps/parse_pd_over_512.pcap"]),
            "run": (work, ["run", "-q", "reject_with_private_data.toml"]),
        }
        with Chromium(1400, 900) as browser:
            for name, (cwd, argv) in reports.items():
                html = work / f"{name}.html"
                os.chdir(cwd)
                with contextlib.redirect_stdout(io.StringIO()):
                    mpa_emu([*argv, "--html", str(html)])
                page = browser.open(html)
                if page.console_errors:
                    raise SystemExit(f"{name}: console errors {page.console_errors}")
                target = args.out / f"{name}-report.png"
                target.write_bytes(page.screenshot())
                print(f"{target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
