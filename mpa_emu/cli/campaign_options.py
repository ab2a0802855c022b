"""The options every campaign command shares: ``-j N``, ``--scheduler ADDRESS`` and
``--junit FILE.xml``."""

from __future__ import annotations

import argparse

from mpa_emu.cli.values import positive


def add_campaign_arguments(parser: argparse.ArgumentParser, *, junit: bool = True) -> None:
    """Add ``-j/--jobs``, ``--scheduler`` and (with ``junit``) ``--junit``."""
    parser.add_argument("-j", "--jobs", type=positive, default=1, metavar="N",
                        help="run cases on N local processes (default 1: in this process)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="run cases on the Dask distributed cluster at ADDRESS "
                             "(tcp://host:8786; needs the mpa_emu[dask] extra)")
    if junit:
        parser.add_argument("--junit", metavar="FILE.xml",
                            help="write the cases' verdicts as JUnit XML (for CI)")
