"""A one-line progress bar for long runs, drawn only when the output is a terminal."""

from __future__ import annotations

from typing import IO

WIDTH = 30


class ProgressBar:
    """Virtual time reached (against the scenario's duration when it has one) and frames
    so far, redrawn in place with a carriage return."""

    def __init__(self, stream: IO[str], label: str) -> None:
        self.stream = stream
        self.label = label
        self.drawn = False

    def update(self, now_ns: int, duration_ns: int | None, frames: int) -> None:
        """Redraw for the current virtual time."""
        seconds = now_ns / 1e9
        if duration_ns:
            done = min(now_ns / duration_ns, 1.0)
            filled = int(done * WIDTH)
            bar = "#" * filled + "." * (WIDTH - filled)
            text = f"{self.label} [{bar}] {done:4.0%} {seconds:9.3f} s  {frames} frames"
        else:
            text = f"{self.label} running: {seconds:9.3f} s virtual, {frames} frames"
        self.stream.write("\r" + text[:100])
        self.stream.flush()
        self.drawn = True

    def finish(self) -> None:
        """Clear the line."""
        if self.drawn:
            self.stream.write("\r" + " " * 100 + "\r")
            self.stream.flush()
