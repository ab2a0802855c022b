"""tshark as an independent judge of the frames the emulator writes.

One :class:`Tshark` object runs the tshark binary on a capture file with the MPA options
of spec wireshark-mpa section 5 (``-o tcp.try_heuristic_first:TRUE --enable-heuristic
iwarp_mpa_tcp``, optionally ``--disable-heuristic rpcrdma_iwarp``) and returns typed
results:

* :meth:`Tshark.fields`: per-frame field values (``-T json -e ...``), every occurrence;
* :meth:`Tshark.expert`: the ``-q -z expert`` table (the only place tshark 4.0 shows the
  MPA Rev/Res/Reject expert infos; their counts are doubled there: packet-iwarp-mpa.c dissects each
  frame twice);
* :meth:`Tshark.tree_experts`: the expert infos visible in the tree (``_ws.expert``),
  frame by frame, including ``_ws.malformed``;
* :meth:`Tshark.crc_verdicts`: the FPDU CRC verdict text ("Good CRC32" / "Bad CRC32,
  should be ..."), which tshark shows only as text;
* :meth:`Tshark.problems`: everything of severity Error, malformed frames and bad CRCs,
  for "tshark finds nothing wrong" assertions.

tshark runs with an isolated configuration (:func:`isolated_environment`: an empty
personal configuration folder and an empty home, so neither the user's preferences nor the
plugins in their personal plugin folder load) and without name resolution, so a user's
Wireshark set-up cannot change a verdict. A missing tshark raises
:class:`TsharkNotFound`: tests that use the judge fail rather than skip.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import weakref
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpa_emu.errors import MpaEmuError

MPA_OPTIONS: tuple[str, ...] = (
    "-o", "tcp.try_heuristic_first:TRUE", "--enable-heuristic", "iwarp_mpa_tcp",
)
NO_RPCRDMA_OPTIONS: tuple[str, ...] = ("--disable-heuristic", "rpcrdma_iwarp")
TSHARK_ENV = "MPA_EMU_TSHARK"  # overrides the tshark found on PATH

# Expert severities and groups as tshark prints them numerically (epan/proto.h values).
SEVERITIES = {
    0x00100000: "Comment",
    0x00200000: "Chat",
    0x00400000: "Note",
    0x00600000: "Warning",
    0x00800000: "Error",
}
SEVERITY_RANK = {"Comment": 0, "Chat": 1, "Note": 2, "Warning": 3, "Error": 4}
GROUPS = {
    0x01000000: "Checksum",
    0x02000000: "Sequence",
    0x03000000: "Response",
    0x04000000: "Request",
    0x05000000: "Undecoded",
    0x06000000: "Reassemble",
    0x07000000: "Malformed",
    0x08000000: "Debug",
    0x09000000: "Protocol",
    0x0A000000: "Security",
    0x0B000000: "Comment",
    0x0C000000: "Decryption",
    0x0D000000: "Assumption",
    0x0E000000: "Deprecated",
    0x0F000000: "Receive",
    0x10000000: "Interface",
    0x11000000: "Dissector bug",
}
# Section titles of "-z expert" and the severity each lists.
_EXPERT_SECTIONS = {
    "Errors": "Error",
    "Warns": "Warning",
    "Notes": "Note",
    "Chats": "Chat",
    "Comments": "Comment",
}
_SECTION_RE = re.compile(r"^(Errors|Warns|Notes|Chats|Comments) \((\d+)\)$")
_CRC_RE = re.compile(
    r"CRC check: 0x(?P<value>[0-9a-fA-F]+) \((?P<verdict>Good CRC32|Bad CRC32, should be "
    r"0x(?P<expected>[0-9a-fA-F]+))\)")

Capture = str | os.PathLike[str]


class TsharkError(MpaEmuError, RuntimeError):
    """tshark could not judge: it failed, timed out or printed something unreadable."""


class TsharkNotFound(TsharkError):
    """No tshark binary: install the ``tshark`` package or set MPA_EMU_TSHARK."""


@dataclass(frozen=True, slots=True)
class ExpertInfo:
    """One row of ``tshark -q -z expert``."""

    severity: str  # "Error", "Warning", "Note", "Chat" or "Comment"
    group: str  # "Malformed", "Request", "Response", "Sequence", ...
    protocol: str  # as tshark prints it, e.g. "IWARP_MPA"
    summary: str
    count: int


@dataclass(frozen=True, slots=True)
class TreeExpert:
    """An expert info that sits in a frame's dissection tree. ``protocol`` is the
    dissector that raised it (PDML's protocol name, ``smb2``; for a malformed frame the
    one named in "[Malformed Packet: SMB2]"), empty where not read."""

    frame: int
    severity: str
    group: str
    message: str
    protocol: str = ""


ERROR_SEVERITY = 0x00800000
COUNTED_PROTOCOLS = ("iwarp", "tcp", "ip", "eth", "vlan", "frame", "_ws")
"""Dissectors whose expert infos speak about the iWARP traffic itself: MPA, DDP/RDMAP and
the TCP/IP/Ethernet under them (by name, lowercased prefix). Upper-layer dissectors
(SMB2, SMB Direct, RPC-over-RDMA, NVMe, ...) judge the application's bytes, not iWARP."""


def counted_protocol(protocol: str) -> bool:
    """True for a protocol of :data:`COUNTED_PROTOCOLS` (``IWARP_MPA``, ``TCP``, ``IPv4``);
    an unknown (empty) protocol counts."""
    name = protocol.strip().lower()
    return not name or name.startswith(COUNTED_PROTOCOLS)

@dataclass(frozen=True, slots=True)
class CrcVerdict:
    """tshark's reading of one FPDU CRC.

    ``status`` is "good" or "bad" when CRC was negotiated (``iwarp_mpa.crc_check``) and
    "unchecked" when it was not (``iwarp_mpa.crc``). ``expected`` is the value tshark
    wanted on a bad CRC. Values are as tshark prints them (the 4 bytes read big-endian).
    """

    frame: int
    value: int
    status: str
    expected: int | None
    text: str

    @property
    def good(self) -> bool:
        """True for "Good CRC32"."""
        return self.status == "good"


def isolated_environment(folder: str | os.PathLike[str],
                         base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a tshark that sees none of the user's Wireshark set-up.

    Wireshark reads preferences and profiles from ``$WIRESHARK_CONFIG_DIR`` (else
    ``$XDG_CONFIG_HOME/wireshark``) and loads personal plugins, Lua ones included, from
    ``$HOME/.local/lib/wireshark/plugins`` (``tshark -G folders``). All three point into
    ``folder``, which the caller keeps empty. ``base`` defaults to ``os.environ``.
    """
    root = os.fspath(folder)
    env = dict(os.environ if base is None else base)
    env["WIRESHARK_CONFIG_DIR"] = os.path.join(root, "wireshark-config")
    env["XDG_CONFIG_HOME"] = os.path.join(root, "config")
    env["HOME"] = root
    return env


def find_tshark(path: str | None = None) -> str:
    """The tshark binary: ``path``, else $MPA_EMU_TSHARK, else ``tshark`` on PATH."""
    candidate = path or os.environ.get(TSHARK_ENV) or shutil.which("tshark")
    if not candidate or not (Path(candidate).is_file() and os.access(candidate, os.X_OK)):
        raise TsharkNotFound(
            "tshark not found: install it (Debian: apt-get install tshark) or set "
            f"{TSHARK_ENV} to its path")
    return candidate


class Tshark:
    """A tshark judge. ``disable_rpcrdma`` stops the RPC-over-RDMA heuristic from
    claiming short Send payloads (spec wireshark-mpa section 2)."""

    def __init__(self, path: str | None = None, *, disable_rpcrdma: bool = False,
                 extra_options: Sequence[str] = (), timeout: float = 120.0) -> None:
        self.path = find_tshark(path)
        self.options: tuple[str, ...] = (
            *MPA_OPTIONS, *(NO_RPCRDMA_OPTIONS if disable_rpcrdma else ()), *extra_options)
        self.timeout = timeout
        self._config = tempfile.TemporaryDirectory(prefix="mpa-emu-tshark-")
        self._version: str | None = None
        weakref.finalize(self, self._config.cleanup)

    # ---- running ---------------------------------------------------------------------

    def run(self, capture: Capture, *args: str) -> str:
        """Run ``tshark -n -r capture <MPA options> args`` and return its stdout.

        Raises :class:`TsharkError` on a non-zero exit or a timeout, with tshark's
        stderr in the message.
        """
        argv = [self.path, "-n", "-r", os.fspath(capture), *self.options, *args]
        try:
            done = subprocess.run(argv, capture_output=True, text=True,
                                  env=isolated_environment(self._config.name),
                                  timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired:
            raise TsharkError(f"tshark timed out after {self.timeout} s on {capture}") \
                from None
        if done.returncode != 0:
            err = " ".join(line for line in done.stderr.splitlines()
                           if "Running as user" not in line)
            raise TsharkError(f"tshark exited {done.returncode} on {capture}: {err.strip()}")
        return done.stdout

    def run_lines(self, capture: Capture, *args: str) -> Iterator[str]:
        """:meth:`run`, its stdout line by line (newline kept) while tshark runs, so
        that output of any length is never held whole. tshark's stderr waits in a
        temporary file; the errors are those of :meth:`run`, raised once the lines are
        read (a timeout kills tshark and ends the lines)."""
        argv = [self.path, "-n", "-r", os.fspath(capture), *self.options, *args]
        with tempfile.TemporaryFile("w+") as errors:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errors, text=True,
                                    env=isolated_environment(self._config.name))
            timed_out = threading.Event()

            def kill() -> None:
                timed_out.set()
                proc.kill()

            timer = threading.Timer(self.timeout, kill)
            timer.start()
            try:
                assert proc.stdout is not None
                yield from proc.stdout
                proc.wait()
            finally:
                timer.cancel()
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                if proc.stdout is not None:
                    proc.stdout.close()
            if timed_out.is_set():
                raise TsharkError(f"tshark timed out after {self.timeout} s on {capture}")
            if proc.returncode != 0:
                errors.seek(0)
                err = " ".join(line for line in errors.read().splitlines()
                               if "Running as user" not in line)
                raise TsharkError(f"tshark exited {proc.returncode} on {capture}: "
                                  f"{err.strip()}")

    def version(self) -> str:
        """The first line of ``tshark --version`` (asked once per judge)."""
        if self._version is not None:
            return self._version
        done = subprocess.run([self.path, "--version"], capture_output=True, text=True,
                              env=isolated_environment(self._config.name),
                              timeout=self.timeout, check=False)
        self._version = done.stdout.splitlines()[0] if done.stdout else ""
        return self._version

    # ---- views -----------------------------------------------------------------------

    def summary(self, capture: Capture, display_filter: str | None = None) -> list[str]:
        """The one-line summaries, e.g. ``... MPA Request Frame``."""
        return list(self.summary_lines(capture, display_filter))

    def summary_lines(self, capture: Capture,
                      display_filter: str | None = None) -> Iterator[str]:
        """:meth:`summary` as tshark prints it, one line at a time."""
        args = ("-Y", display_filter) if display_filter else ()
        for line in self.run_lines(capture, *args):
            if line.strip():
                yield line.strip()

    def decode(self, capture: Capture, display_filter: str | None = None,
               protocols: Sequence[str] = ("iwarp_mpa", "iwarp_ddp_rdmap")) -> str:
        """The detail view of ``protocols`` (``-O``), as text."""
        args: list[str] = ["-O", ",".join(protocols)]
        if display_filter:
            args += ["-Y", display_filter]
        return self.run(capture, *args)

    def fields(self, capture: Capture, fields: Sequence[str],
               display_filter: str | None = None) -> list[dict[str, list[str]]]:
        """Per frame, every occurrence of each field as tshark shows it.

        Each dict holds ``frame.number`` plus the fields present in that frame; a field
        absent from a frame is absent from its dict. Frames outside ``display_filter``
        are left out.
        """
        names = ["frame.number", *(f for f in fields if f != "frame.number")]
        args: list[str] = ["-T", "json"]
        for name in names:
            args += ["-e", name]
        if display_filter:
            args += ["-Y", display_filter]
        out = self.run(capture, *args)
        if not out.strip():
            return []
        try:
            docs = json.loads(out)
        except json.JSONDecodeError as exc:
            raise TsharkError(f"tshark printed unreadable JSON: {exc}") from None
        rows: list[dict[str, list[str]]] = []
        for doc in docs:
            layers = doc.get("_source", {}).get("layers", {})
            rows.append({k: [str(v) for v in vals] for k, vals in layers.items()})
        return rows

    def field_by_frame(self, capture: Capture, fields: Sequence[str],
                       display_filter: str | None = None) -> dict[int, dict[str, list[str]]]:
        """:meth:`fields`, keyed by frame number."""
        return {int(row["frame.number"][0]): row
                for row in self.fields(capture, fields, display_filter)}

    def expert(self, capture: Capture, display_filter: str | None = None) -> list[ExpertInfo]:
        """The ``-q -z expert`` table (``-z expert,<filter>`` with a filter; note that
        PD_Length above 512 shows only with a filter, spec wireshark-mpa section 2)."""
        stat = f"expert,{display_filter}" if display_filter else "expert"
        return parse_expert_table(self.run(capture, "-q", "-z", stat))

    def tree_experts(self, capture: Capture) -> list[TreeExpert]:
        """Expert infos that sit in the tree, plus one Error/Malformed entry per frame
        tshark marks ``_ws.malformed``."""
        return list(self.tree_expert_stream(capture))

    def tree_expert_stream(self, capture: Capture) -> Iterator[TreeExpert]:
        """:meth:`tree_experts` as tshark finds them, frame by frame."""
        names = ["frame.number", "_ws.expert.severity", "_ws.expert.group",
                 "_ws.expert.message", "_ws.malformed"]
        args: list[str] = ["-T", "json"]
        for name in names:
            args += ["-e", name]
        for row in _json_rows(self.run_lines(capture, *args)):
            frame = int(row["frame.number"][0])
            sev = row.get("_ws.expert.severity", [])
            grp = row.get("_ws.expert.group", [])
            msg = row.get("_ws.expert.message", [])
            malformed_seen = False
            for i, message in enumerate(msg):
                expert = TreeExpert(frame=frame, severity=_decode(sev, i, SEVERITIES),
                                    group=_decode(grp, i, GROUPS), message=message)
                malformed_seen = malformed_seen or expert.group == "Malformed"
                yield expert
            if "_ws.malformed" in row and not malformed_seen:
                yield TreeExpert(frame=frame, severity="Error", group="Malformed",
                                 message="Malformed Packet")

    def tree_problem_stream(self, capture: Capture) -> Iterator[TreeExpert]:
        """The Error and Malformed expert infos in the tree, each with the protocol that
        raised it, read from tshark's PDML of the frames that carry one."""
        return _tree_problems_of(self.run_lines(
            capture, "-T", "pdml", "-Y",
            f"_ws.malformed || _ws.expert.severity >= {ERROR_SEVERITY:#x}"))

    def crc_verdicts(self, capture: Capture) -> list[CrcVerdict]:
        """The CRC of every FPDU as tshark judged it, in frame order."""
        return list(self.crc_verdict_stream(capture))

    def crc_verdict_stream(self, capture: Capture) -> Iterator[CrcVerdict]:
        """:meth:`crc_verdicts` one at a time, read from tshark's PDML as it comes."""
        return _crc_verdicts_of(self.run_lines(capture, "-T", "pdml", "-Y",
                                               "iwarp_mpa.fpdu"))

    def judge_stream(self, capture: Capture) -> Iterator[CrcVerdict | TreeExpert |
                                                          VersionFields]:
        """One PDML pass over the frames that carry an FPDU, an Error or Malformed expert
        info, or match :data:`VERSION_FILTER`: what :meth:`crc_verdict_stream` and
        :meth:`tree_problem_stream` find, and the DDP and RDMAP version fields of each
        frame :data:`VERSION_FILTER` matches, frame by frame (one tshark run where three
        were)."""
        wanted = (f"iwarp_mpa.fpdu || _ws.malformed || "
                  f"_ws.expert.severity >= {ERROR_SEVERITY:#x} || ({VERSION_FILTER})")
        return _judge_items_of(self.run_lines(capture, "-T", "pdml", "-Y", wanted))

    def problems(self, capture: Capture) -> list[str]:
        """Everything tshark finds wrong: Error-level expert infos (table and tree),
        malformed frames and bad CRCs, one line each. Empty means a clean capture."""
        out = [f"expert {e.severity}/{e.group} {e.protocol}: {e.summary} (x{e.count})"
               for e in self.expert(capture) if e.severity == "Error"]
        out += [f"frame {e.frame}: {e.severity}/{e.group}: {e.message}"
                for e in self.tree_experts(capture)
                if e.severity == "Error" or e.group == "Malformed"]
        out += [f"frame {v.frame}: {v.text}" for v in self.crc_verdicts(capture)
                if v.status == "bad"]
        return out


def _decode(values: list[str], index: int, names: dict[int, str]) -> str:
    if index >= len(values):
        return ""
    text = values[index]
    try:
        return names.get(int(text, 0), text)
    except ValueError:
        return text


_GROUP_NAMES = sorted(set(GROUPS.values()), key=len, reverse=True)
_ROW_RE = re.compile(r"^\s*(\d+) +(\S.*)$")


def _expert_row(severity: str, line: str) -> ExpertInfo | None:
    # tshark prints "%12u %10s %18s  %s": a long group name pushes the later columns
    # right, so the row is split on the known group names and the two-space gap.
    match = _ROW_RE.match(line)
    if match is None:
        return None
    rest = match.group(2)
    group = next((g for g in _GROUP_NAMES if rest.startswith(g + " ")),
                 rest.split(" ", 1)[0])
    protocol, _, summary = rest[len(group):].lstrip().partition("  ")
    return ExpertInfo(severity=severity, group=group, protocol=protocol.strip(),
                      summary=summary.strip(), count=int(match.group(1)))


def parse_expert_table(text: str) -> list[ExpertInfo]:
    """Parse the text of ``tshark -q -z expert`` into rows."""
    rows: list[ExpertInfo] = []
    severity: str | None = None
    for line in text.splitlines():
        section = _SECTION_RE.match(line.strip())
        if section:
            severity = _EXPERT_SECTIONS[section.group(1)]
            continue
        if severity is None:
            continue
        row = _expert_row(severity, line)
        if row is not None:
            rows.append(row)
    return rows


def parse_crc_verdicts(pdml: str) -> list[CrcVerdict]:
    """Read the FPDU CRC fields out of tshark's PDML."""
    if not pdml.strip():
        return []
    return list(_crc_verdicts_of(pdml.splitlines(keepends=True)))


class _Feed(io.RawIOBase):
    """Lines of text as a binary stream, for the XML parser."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = iter(lines)
        self._rest = b""
        self.blank = True
        """Nothing but white space read so far."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        # As many lines as fill the parser's buffer (16 KiB), not one a call: PDML is
        # about 30 lines a frame.
        want = len(buffer)
        parts = [self._rest]
        size = len(self._rest)
        while size < want:
            line = next(self._lines, None)
            if line is None:
                break
            data = line.encode("utf-8")
            if self.blank and line.strip():
                self.blank = False
            parts.append(data)
            size += len(data)
        rest = b"".join(parts)
        n = min(want, len(rest))
        buffer[:n] = rest[:n]
        self._rest = rest[n:]
        return n


def _crc_verdicts_of(lines: Iterable[str]) -> Iterator[CrcVerdict]:
    """The CRC fields of PDML read line by line; each packet is dropped once read."""
    feed = _Feed(lines)
    frame = 0
    try:
        for event, elem in ElementTree.iterparse(feed, events=("start", "end")):
            if event == "start":
                if elem.tag == "packet":
                    frame = 0
                continue
            if elem.tag == "packet":
                elem.clear()
                continue
            if elem.tag != "field":
                continue
            name = elem.get("name", "")
            if name == "frame.number":
                frame = int(elem.get("show", "0"))
            elif name == "iwarp_mpa.crc_check":
                text = elem.get("showname", "")
                match = _CRC_RE.search(text)
                if match is None:
                    raise TsharkError(f"frame {frame}: unexpected CRC text {text!r}")
                expected = match.group("expected")
                yield CrcVerdict(
                    frame=frame, value=int(match.group("value"), 16),
                    status="good" if expected is None else "bad",
                    expected=None if expected is None else int(expected, 16), text=text)
            elif name == "iwarp_mpa.crc":
                yield CrcVerdict(frame=frame, value=int(elem.get("show", "0"), 0),
                                 status="unchecked", expected=None,
                                 text=elem.get("showname", ""))
    except ElementTree.ParseError as exc:
        if feed.blank:
            return  # no output at all: no FPDU
        raise TsharkError(f"tshark printed unreadable PDML: {exc}") from None


_MALFORMED_RE = re.compile(r"\[Malformed Packet: (?P<protocol>[^\]]+)\]")


def _tree_problems_of(lines: Iterable[str]) -> Iterator[TreeExpert]:
    """Error/Malformed ``_ws.expert`` fields of PDML, each with its enclosing protocol."""
    feed = _Feed(lines)
    frame = 0
    protos: list[str] = []
    expert: dict[str, str] | None = None
    try:
        for event, elem in ElementTree.iterparse(feed, events=("start", "end")):
            tag, name = elem.tag, elem.get("name", "")
            if event == "start":
                if tag == "proto":
                    shown = _MALFORMED_RE.search(elem.get("showname", ""))
                    protos.append(shown.group("protocol") if shown else name)
                elif tag == "field" and name == "_ws.expert":
                    expert = {"protocol": protos[-1] if protos else ""}
                elif tag == "field" and expert is not None and name.startswith("_ws.expert."):
                    expert[name] = elem.get("show", "")
                elif tag == "field" and name == "frame.number":
                    frame = int(elem.get("show", "0"))
                continue
            if tag == "proto":
                protos.pop()
            elif tag == "packet":
                protos.clear()
                elem.clear()
            elif tag == "field" and name == "_ws.expert" and expert is not None:
                sev = _decode([expert.get("_ws.expert.severity", "")], 0, SEVERITIES)
                grp = _decode([expert.get("_ws.expert.group", "")], 0, GROUPS)
                if sev == "Error" or grp == "Malformed":
                    yield TreeExpert(frame=frame, severity=sev, group=grp,
                                     message=expert.get("_ws.expert.message", ""),
                                     protocol=expert["protocol"])
                expert = None
    except ElementTree.ParseError as exc:
        if feed.blank:
            return
        raise TsharkError(f"tshark printed unreadable PDML: {exc}") from None


VERSION_FILTER = "iwarp_ddp.dv != 1 || iwarp_rdma.version != 1"
"""tshark's decode of a DDP or RDMAP version other than 1 (RFC 5041 section 4.2, RFC 5040
section 4.2: both are 1)."""


@dataclass(frozen=True)
class VersionFields:
    """A frame's DDP and RDMAP version fields as tshark decodes them (every occurrence,
    in order), read for the frames of :meth:`Tshark.judge_stream`'s version filter."""

    frame: int
    ddp: tuple[str, ...]
    rdmap: tuple[str, ...]


def _version_filter_matches(values: list[str]) -> bool:
    """``field != 1`` as tshark 3.6 and later evaluate it: the field is present and no
    occurrence of it is 1 (``a != b`` is ``!(a == b)``, and ``==`` holds for any
    occurrence)."""
    return bool(values) and "1" not in values


def _judge_items_of(lines: Iterable[str]) -> Iterator[CrcVerdict | TreeExpert |
                                                      VersionFields]:
    """:meth:`Tshark.judge_stream`'s PDML read packet by packet; a packet's version fields
    are reported when :data:`VERSION_FILTER` matches it."""
    feed = _Feed(lines)
    frame = 0
    protos: list[str] = []
    expert: dict[str, str] | None = None
    ddp: list[str] = []
    rdmap: list[str] = []
    try:
        for event, elem in ElementTree.iterparse(feed, events=("start", "end")):
            tag, name = elem.tag, elem.get("name", "")
            if event == "start":
                if tag == "proto":
                    shown = _MALFORMED_RE.search(elem.get("showname", ""))
                    protos.append(shown.group("protocol") if shown else name)
                elif tag == "packet":
                    frame = 0
                    ddp = []
                    rdmap = []
                elif tag != "field":
                    pass
                elif name == "_ws.expert":
                    expert = {"protocol": protos[-1] if protos else ""}
                elif expert is not None and name.startswith("_ws.expert."):
                    expert[name] = elem.get("show", "")
                elif name == "frame.number":
                    frame = int(elem.get("show", "0"))
                continue
            if tag == "proto":
                protos.pop()
            elif tag == "packet":
                protos.clear()
                elem.clear()
                if _version_filter_matches(ddp) or _version_filter_matches(rdmap):
                    yield VersionFields(frame, tuple(ddp), tuple(rdmap))
            elif tag != "field":
                continue
            elif name == "_ws.expert" and expert is not None:
                sev = _decode([expert.get("_ws.expert.severity", "")], 0, SEVERITIES)
                grp = _decode([expert.get("_ws.expert.group", "")], 0, GROUPS)
                if sev == "Error" or grp == "Malformed":
                    yield TreeExpert(frame=frame, severity=sev, group=grp,
                                     message=expert.get("_ws.expert.message", ""),
                                     protocol=expert["protocol"])
                expert = None
            elif name == "iwarp_ddp.dv":
                ddp.append(elem.get("show", ""))
            elif name == "iwarp_rdma.version":
                rdmap.append(elem.get("show", ""))
            elif name == "iwarp_mpa.crc_check":
                text = elem.get("showname", "")
                match = _CRC_RE.search(text)
                if match is None:
                    raise TsharkError(f"frame {frame}: unexpected CRC text {text!r}")
                expected = match.group("expected")
                yield CrcVerdict(
                    frame=frame, value=int(match.group("value"), 16),
                    status="good" if expected is None else "bad",
                    expected=None if expected is None else int(expected, 16), text=text)
            elif name == "iwarp_mpa.crc":
                yield CrcVerdict(frame=frame, value=int(elem.get("show", "0"), 0),
                                 status="unchecked", expected=None,
                                 text=elem.get("showname", ""))
    except ElementTree.ParseError as exc:
        if feed.blank:
            return
        raise TsharkError(f"tshark printed unreadable PDML: {exc}") from None


def _json_rows(lines: Iterable[str]) -> Iterator[dict[str, list[str]]]:
    """The packets of ``tshark -T json -e ...`` output read line by line: tshark prints
    the list's brackets alone on their lines and each packet as an indented object
    closing with a line ``  }`` (or ``  },``)."""
    held: list[str] = []
    for line in lines:
        stripped = line.rstrip("\n")
        if not held and stripped.strip() in ("[", "]", ""):
            continue
        held.append(stripped)
        if stripped in ("  }", "  },"):
            text = "\n".join(held).rstrip(",")
            held = []
            try:
                doc = json.loads(text)
            except json.JSONDecodeError as exc:
                raise TsharkError(f"tshark printed unreadable JSON: {exc}") from None
            layers = doc.get("_source", {}).get("layers", {})
            yield {k: [str(v) for v in vals] for k, vals in layers.items()}
    if held:
        raise TsharkError("tshark printed unreadable JSON: it ends inside a packet")
