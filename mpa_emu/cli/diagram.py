"""``mpa-emu diagram CAPTURE|SCENARIO``: a ladder diagram, text or SVG."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from mpa_emu.capture.checksums import Mode
from mpa_emu.cli import CliError
from mpa_emu.cli.inspect import add_checksums_argument
from mpa_emu.cli.stack_profile import add_profile_argument, profiles_of
from mpa_emu.cli.values import capture_port
from mpa_emu.cli.wrote import wrote
from mpa_emu.views.diagram import DiagramError, Ladder, from_capture, from_run, park_capture
from mpa_emu.views.png import PngError, check_renderer, svg_to_png

HELP = "draw a ladder diagram of a capture or a scenario run (text, or SVG/PNG with -o)"

EPILOG = """\
A .toml argument is run as a scenario (frames, state changes, upcalls and drops);
anything else is read as a pcap/pcapng capture (frames, with mpa_emu's frame comments).
With -o FILE.svg the diagram is written as SVG, with -o FILE.png as PNG (rendered by
rsvg-convert, Debian's librsvg2-bin, or else headless Chromium; without either, a one-line
error), with -o FILE.txt as text; otherwise printed as text. Each frame's arrow starts
with its number (#4, as every report names frames), each FPDU shows its DDP L bit, and
the SVG's lanes are as far apart as the longest label needs: no label is cut. A capture
cut short is drawn up to the cut, with a last note saying where and why it ends.

Every frame of a capture is decoded whatever its checksums. --checksums offload (the
default) counts TX checksum offload artefacts (a TCP checksum holding only the
pseudo-header sum, or zero: frames sent by the host the capture was taken on) into one
note per sender, "TX checksum offload: not verified"; strict marks them on each frame;
off marks no checksum. FPDUs get a CRC verdict only where C was set in the MPA request
or reply (RFC 5044 section 7.1).

--stacks (or --profile IP=STACK, which overrides the fingerprint of that address) names
the stack each address is judged as in its lane title, as inspect judges it, and adds
to a frame what the receiving side's own stack refuses in it (an ERROR line naming the
stack, the rule and the kernel function).

exit codes: 0 drawn, 2 unreadable input, bad scenario or unwritable output
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mpa-emu diagram``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("source", help="capture (.pcap/.pcapng; - reads standard input) or "
                        "scenario (.toml)")
    parser.add_argument("-p", "--port", type=capture_port, action="append", metavar="PORT",
                        help="captures: only segments with this TCP port (repeatable)")
    parser.add_argument("-o", "--output", metavar="FILE.svg",
                        help="write SVG to this file (a .png name gets PNG, a .txt name "
                             "the text)")
    parser.add_argument("--logs", action="store_true",
                        help="scenarios: add what the drivers write to the kernel log (klog "
                             "lines; '(dyndbg)' marks those only dynamic debug shows)")
    add_checksums_argument(parser)
    parser.add_argument("--stacks", action="store_true",
                        help="captures: name the stack each address is judged as in its "
                             "lane title (implied by --profile)")
    add_profile_argument(parser)


def build(source: str, ports: list[int] | None = None,
          checksums: Mode = Mode.OFFLOAD, *, logs: bool = False) -> Ladder:
    """The ladder of a capture or scenario file (CliError when unusable); ``checksums``
    is the reading of a capture's TCP checksums."""
    if source.lower().endswith(".toml"):
        from mpa_emu.scenario import ScenarioError, load_scenario, run_scenario

        try:
            return from_run(run_scenario(load_scenario(source)).net, logs=logs)
        except ScenarioError as exc:
            raise CliError(str(exc)) from None
    try:
        return from_capture(source, ports or (), checksums)
    except DiagramError as exc:
        raise CliError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    """Draw. A capture is read as a stream and drawn from a temporary file
    (:func:`~mpa_emu.views.diagram.park_capture`), so memory does not grow with its length.
    A ``.png`` output is the SVG rendered by :mod:`mpa_emu.views.png`."""
    if args.output is not None and args.output.lower().endswith(".png"):
        try:
            check_renderer()
        except PngError as exc:
            raise CliError(str(exc)) from None
        with tempfile.TemporaryDirectory(prefix="mpa-emu-diagram-") as tmp:
            svg_path = Path(tmp) / "diagram.svg"
            _draw(args, str(svg_path), svg=True)
            try:
                svg_to_png(svg_path, Path(args.output))
            except PngError as exc:
                raise CliError(str(exc)) from None
        wrote(args.output, "PNG")
        return 0
    svg = args.output is not None and not args.output.endswith(".txt")
    code = _draw(args, args.output, svg)
    if args.output is not None:
        wrote(args.output, "SVG" if svg else "text")
    return code


def _draw(args: argparse.Namespace, output: str | None, svg: bool) -> int:
    profiles = profiles_of(args)
    if args.source.lower().endswith(".toml"):
        return _scenario(args.source, output, svg, args.logs)
    try:
        parked = park_capture(args.source, args.port or (), Mode(args.checksums))
    except DiagramError as exc:
        raise CliError(str(exc)) from None
    with parked:
        notes: dict[int, list[str]] = {}
        if (args.stacks or profiles) and args.source != "-":
            from mpa_emu.views.inspection.capture_stacks import address_stacks

            stacks, notes = address_stacks(args.source, profiles)
            parked.columns = [f"{c} ({'/'.join(stacks[c])})" if c in stacks else c
                              for c in parked.columns]
        return _write(output, lambda out: parked.write(out, svg, notes))


def _scenario(source: str, output: str | None, svg: bool, logs: bool = False) -> int:
    """Run a scenario with its records on disk and draw its ladder from them, a row at
    a time (the same drawing as :func:`build`'s, in memory bounded by what is alive)."""
    from mpa_emu.net.records import SpooledRecords
    from mpa_emu.scenario import ScenarioError, load_scenario, run_scenario
    from mpa_emu.views.diagram import lane_gap, write_svg
    from mpa_emu.views.ladder import column_titles, journal_rows, render_lines

    with SpooledRecords() as records:
        try:
            net = run_scenario(load_scenario(source), records=records).net
        except ScenarioError as exc:
            raise CliError(str(exc)) from None
        columns = column_titles(net)

        def draw(out: TextIO) -> None:
            if svg:
                # Two passes over the records: the lanes' spacing first, then the rows.
                gap = lane_gap((row for _, row in journal_rows(net, logs=logs)), len(columns))
                write_svg((row for _, row in journal_rows(net, logs=logs)), columns, out, gap)
                return
            for line in render_lines((row for _, row in journal_rows(net, logs=logs)), columns):
                out.write(line + "\n")

        return _write(output, draw)


def _write(output: str | None, draw: Callable[[TextIO], object]) -> int:
    if output is None:
        draw(sys.stdout)
        return 0
    try:
        with open(output, "w", encoding="utf-8") as out:
            draw(out)
    except OSError as exc:
        raise CliError(f"cannot write {output}: {exc.strerror or exc}") from None
    return 0
