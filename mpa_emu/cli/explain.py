"""``mpa-emu explain CAPTURE``: per connection a verdict, its cause, what each application
saw, the log line to look for and the fix."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from mpa_emu.capture.checksums import Mode, mode_name
from mpa_emu.capture.pcap import capture_error
from mpa_emu.capture.spool import Spool
from mpa_emu.cli import CliError
from mpa_emu.cli.stack_profile import (
    add_profile_argument,
    check_profile_addresses,
    endpoint_host,
    profiles_of,
)
from mpa_emu.cli.wrote import check_writable, wrote
from mpa_emu.views.explain import (
    OWN_SECTIONS,
    ExplainPage,
    counts_line,
    explanation_json,
    explanation_text,
    json_head,
)
from mpa_emu.views.explanation import explain_connection
from mpa_emu.views.html.fpdu_fields import Fields, connection_rows
from mpa_emu.views.inspection import CaptureReport, InspectError, stream_capture

HELP = "explain each connection of a capture: verdict, cause, events, log line and fix"

EPILOG = """\
For each TCP connection: a verdict (ok, warning, failed) and its cause from the catalogue
in docs/explain.md (rejected by the application, no P2P, RTR mismatch, IRD/ORD, private
data over a stack's limit, MPA revision, CRC, markers, a split MPA frame, MPA timeout,
reset during the exchange, Terminate, receive buffer overflow, zero-length RTR refused,
data after FIN, ...), the frames that show it, the rdma_cm event and status each
application saw (cma_iw_handler), the kernel log line to look for and the fix. Each side
is judged by its own stack (fingerprint, or --profile IP=STACK). A failed connection
takes a few lines; --verbose adds the story.

--json FILE writes {"connections": [{"flow", "verdict", "cause", "initiator_event",
"initiator_status", "responder_events", "evidence", "fix", ...}]} in first-frame order
(- for standard output). The capture is read as a stream.

exit codes: 0 every connection ok or warning, 1 a connection failed, 2 unreadable input
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mpa-emu explain``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("capture", help="pcap or pcapng file (- reads standard input)")
    add_profile_argument(parser)
    parser.add_argument("--json", metavar="FILE", help="write the explanations as JSON "
                                                      "(- for standard output)")
    parser.add_argument("--html", metavar="REPORT.html",
                        help="write an HTML report, in memory flat in the capture's length "
                             "(ladder and frame fields read from the capture as the page "
                             "is written; the first 100 connections get a section and menu "
                             "entry each, the rest share one section)")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="tell the whole story of each connection")


def _open(path: str) -> TextIO:
    try:
        return sys.stdout if path == "-" else open(path, "w", encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None


def _write_html(target: str, page: ExplainPage, path: str, problems: list[str],
                name: str, fpdus: dict[int, list[Fields]]) -> None:
    try:
        with open(target, "w", encoding="utf-8") as out:
            page.write(out, path, problems, name=name, fpdus=fpdus)
    except OSError as exc:
        raise CliError(f"cannot write {target}: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    """Explain the capture; exit 1 when a connection failed. With ``--html`` the capture
    is read twice (the explanations, then the ladder), so standard input is first copied
    to a temporary file."""
    check_writable(args.json, "--json")
    check_writable(args.html, "--html")
    if args.capture == "-" and args.html is not None:
        import shutil
        import tempfile

        with tempfile.NamedTemporaryFile(prefix="mpa-emu-explain-", suffix=".pcap") as copy:
            shutil.copyfileobj(sys.stdin.buffer, copy)
            copy.flush()
            return _explain(args, copy.name)
    return _explain(args, args.capture)


def _explain(args: argparse.Namespace, path: str) -> int:
    profiles = profiles_of(args)
    report = CaptureReport(path=args.capture, checksums=mode_name(Mode.OFFLOAD))
    counts = {"ok": 0, "warning": 0, "failed": 0}
    fpdus: dict[int, list[Fields]] = {}
    explained_fpdus = 0
    text_out = args.json != "-"
    endpoints: set[str] = set()
    with Spool() as texts, Spool() as docs, ExplainPage(args.verbose) as page:
        try:
            for conn in stream_capture(path, report, Mode.OFFLOAD, profiles):
                endpoints.update(endpoint_host(e) for e in (conn.client, conn.server))
                e = explain_connection(conn)
                counts[e.verdict] += 1
                if text_out:
                    texts.add(conn.index, explanation_text(e, args.verbose))
                if args.json is not None:
                    docs.add(conn.index, explanation_json(e))
                if args.html is not None:
                    page.add(e)
                    if e.verdict != "ok" and explained_fpdus < OWN_SECTIONS:
                        # The panel decodes the FPDUs of the connections shown above the
                        # ladder; those of the others stay plain segments, so the page's
                        # memory does not grow with the capture.
                        explained_fpdus += 1
                        fpdus.update(connection_rows([conn]))
        except InspectError as exc:
            raise CliError(capture_error(args.capture, str(exc))) from None
        check_profile_addresses(profiles, endpoints, args.capture)
        if text_out:
            sys.stdout.write(counts_line(args.capture, counts=counts) + "\n")
            for p in report.problems:
                sys.stdout.write(f"  {p}\n")
            for piece in texts.pieces():
                sys.stdout.write("\n" + piece + "\n")
        if args.json is not None:
            out = _open(args.json)
            try:
                out.write(json_head(args.capture, counts, report.problems))
                first = True
                for piece in docs.pieces():
                    out.write(("\n" if first else ",\n") + piece)
                    first = False
                out.write("\n  ]\n}\n" if not first else "]\n}\n")
            finally:
                if out is not sys.stdout:
                    out.close()
        if args.html is not None:
            _write_html(args.html, page, path, report.problems, args.capture, fpdus)
            wrote(args.html, "HTML report", stdout_is_data=args.json == "-")
    return 1 if counts["failed"] else 0
