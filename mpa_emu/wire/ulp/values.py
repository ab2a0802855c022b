"""What every decoded upper-protocol structure offers the views: a name, one line of
text, and its fields as plain JSON values."""

from __future__ import annotations

from typing import Protocol

FieldValue = int | str | bool | None
"""A decoded field as JSON holds it."""


class Decoded(Protocol):
    """A decoded private data block or message."""

    @property
    def kind(self) -> str:
        """What it is, in its specification's words (``Negotiate Request``)."""
        ...

    def text(self) -> str:
        """One line: the kind and its fields."""
        ...

    def fields(self) -> dict[str, FieldValue]:
        """The fields by their specification's names (snake case)."""
        ...


def size_text(n: int) -> str:
    """``16,520 bytes``."""
    return f"{n:,} bytes" if n != 1 else "1 byte"
