"""``mpa-emu inspect CAPTURE``: one block per TCP connection of any pcap/pcapng."""

from __future__ import annotations

import argparse
import sys

from mpa_emu.capture.checksums import Mode
from mpa_emu.capture.pcap import capture_error
from mpa_emu.capture.spool import Spool
from mpa_emu.cli import CliError
from mpa_emu.cli.html_option import add_html_option, write_inspect_html
from mpa_emu.cli.stack_profile import (
    add_profile_argument,
    check_profile_addresses,
    endpoint_host,
    profiles_of,
)
from mpa_emu.cli.values import capture_port, positive
from mpa_emu.cli.wrote import check_writable, wrote
from mpa_emu.stacks import STACKS
from mpa_emu.views.inspection import (
    CaptureReport,
    ConnectionReport,
    InspectError,
    connection_block,
    connection_json,
    format_report,
    inspect_capture,
    report_head,
    report_json,
    report_json_around,
    stream_capture,
)

HELP = "tell the story of every TCP/MPA connection in a capture (pcap or pcapng)"

EPILOG = """\
For each connection: the handshake (who, ISNs, MSS/WS/SACK/TS), the MPA request and
reply (rev, flags, IRD/ORD, RTR offered and chosen, private data in hex and text, reject
reason), the RTR (MPA v2 with the RFC 6581 block only), the FPDUs (CRC judged only where
C was set in the request or reply, RFC 5044 section 7.1), RDMAP findings (Read Requests
never answered, MSN gaps, Terminates decoded), every FIN and RST, data after a FIN, a
fingerprint of each side and the stack it is judged as (STACK_LIST,
linux-userspace or unknown; --profile IP=STACK overrides it), and every problem found.
Each side is judged by its own stack's rules (what irdma_parse_mpa,
siw_proc_mpareq/siw_proc_mpareply or process_mpa_request/process_mpa_reply refuse): an
error names the stack, the rule and the kernel function; what only another stack would
refuse is a note.

--checksums offload (the default) reads TCP checksums as Wireshark users expect of a
capture taken on an endpoint: a checksum holding only the pseudo-header sum (or zero) is
a TX checksum offload artefact, noted once per side, never an error; strict makes it an
error (what the receiving NIC would see); off never checks.

exit codes: 0 no errors found, 1 errors found (in the selected connections, or frames that
are not in any connection), 2 unreadable file or usage
""".replace("STACK_LIST", ", ".join(STACKS))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mpa-emu inspect``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("capture", help="pcap or pcapng file (- reads standard input)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("-c", "--connection", type=positive, action="append", metavar="N",
                        help="only connection N (repeatable; numbers as printed)")
    parser.add_argument("-p", "--port", type=capture_port, action="append", metavar="PORT",
                        help="only connections with this TCP port on either side")
    parser.add_argument("--problems", action="store_true",
                        help="only connections with errors or warnings")
    parser.add_argument("--comments", action="store_true",
                        help="also list pcapng frame comments (mpa-emu captures carry the "
                             "kernel function and state change behind each frame)")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="list the hints too: what a stack other than a side's own "
                             "(a known kernel stack) would refuse")
    parser.add_argument("--fpdus", action="store_true",
                        help="list every FPDU: opcode, QN/MSN/MO or STag/TO, length, L bit, "
                             "CRC verdict")
    add_checksums_argument(parser)
    add_profile_argument(parser)
    add_html_option(parser)


def add_checksums_argument(parser: argparse.ArgumentParser) -> None:
    """``--checksums strict|offload|off`` (default offload), shared by the reading
    commands."""
    parser.add_argument("--checksums", choices=[m.value for m in Mode], default="offload",
                        help="how TCP checksums are read: strict (offload artefacts are "
                             "errors), offload (they are notes; the default), off")


def _selected(conn: ConnectionReport, args: argparse.Namespace) -> bool:
    if args.connection and conn.index not in args.connection:
        return False
    ports = {int(end.rsplit(":", 1)[1]) for end in (conn.client, conn.server)}
    if args.port and not ports & set(args.port):
        return False
    return not args.problems or any(f.severity in ("error", "warning")
                                    for f in conn.findings)


def run(args: argparse.Namespace) -> int:
    """Inspect the capture; exit 1 when any error was found in it.

    The capture is read as a stream and each connection is reported once it has ended
    (:func:`~mpa_emu.views.inspection.stream_connections`), so memory does not grow with the
    capture. The finished blocks wait in a :class:`~mpa_emu.capture.spool.Spool` (a temporary
    file) until the end, when the header (which counts everything) and the blocks in
    first-frame order are written. Reading standard input (``-``) as text, each block is
    printed as soon as its connection ends, in that order, and the header comes last.
    ``--html`` needs every connection at once and keeps the whole report in memory."""
    profiles = profiles_of(args)
    check_writable(args.html, "--html")
    if args.html is not None:
        return _run_whole(args)
    live = args.capture == "-" and not args.json
    report = CaptureReport(path=args.capture, checksums=args.checksums)
    shown = errors = total = 0
    endpoints: set[str] = set()
    with Spool() as spool:
        try:
            for conn in stream_capture(args.capture, report, Mode(args.checksums),
                                       profiles):
                total += 1
                endpoints.update(endpoint_host(e) for e in (conn.client, conn.server))
                if not _selected(conn, args):
                    report.hidden += 1
                    continue
                shown += 1
                errors += conn.errors
                if args.json:
                    spool.add(conn.index, connection_json(conn))
                elif live:
                    sys.stdout.write(connection_block(conn, args.comments, args.fpdus,
                                                      args.verbose) + "\n")
                    sys.stdout.flush()
                else:
                    spool.add(conn.index, connection_block(conn, args.comments, args.fpdus,
                                                           args.verbose))
        except InspectError as exc:
            raise CliError(capture_error(args.capture, str(exc))) from None
        _check_connections(args, total)
        check_profile_addresses(profiles, endpoints, args.capture)
        errors += len(report.problems)
        if args.json:
            for piece in report_json_around(report, spool.pieces()):
                sys.stdout.write(piece)
        elif live:
            sys.stdout.write(report_head(report, shown, errors) + "\n")
        else:
            sys.stdout.write(report_head(report, shown, errors))
            for piece in spool.pieces():
                sys.stdout.write("\n" + piece)
            sys.stdout.write("\n")
    return 1 if errors else 0


def _check_connections(args: argparse.Namespace, total: int) -> None:
    missing = sorted(n for n in set(args.connection or ()) if n > total)
    if missing:
        raise CliError(f"no connection {', '.join(map(str, missing))} in {args.capture} "
                       f"(it has {total})")


def _run_whole(args: argparse.Namespace) -> int:
    try:
        report = inspect_capture(args.capture, Mode(args.checksums), profiles_of(args))
    except InspectError as exc:
        raise CliError(capture_error(args.capture, str(exc))) from None
    _check_connections(args, len(report.connections))
    check_profile_addresses(profiles_of(args), (e for c in report.connections
                                                for e in (c.client, c.server)), args.capture)
    selected = [c for c in report.connections if _selected(c, args)]
    report.hidden = len(report.connections) - len(selected)
    report.connections = selected
    out = report_json(report) if args.json else format_report(report, comments=args.comments,
                                                           fpdus=args.fpdus,
                                                           hints=args.verbose)
    sys.stdout.write(out)
    write_inspect_html(args.html, report)
    if args.html is not None:
        wrote(args.html, "HTML report", stdout_is_data=args.json)
    return 1 if report.errors else 0
