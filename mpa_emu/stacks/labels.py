"""The one reader of a stack label, the inverse of :func:`mpa_emu.stacks.stack_label`:
``NAME`` or ``NAME(KEY=VALUE,...)``, as ``--side``, ``--profile`` and ``--stack`` take it.

It reads the text only; the registry (:func:`mpa_emu.stacks.parse_params`) checks the
name, the keys and the values.
"""

from __future__ import annotations

from mpa_emu.errors import ConfigError

LABEL_FORM = "write a stack as NAME or NAME(KEY=VALUE,...)"
"""What a malformed label's error says."""

_TRUE = ("true", "yes", "on")
_FALSE = ("false", "no", "off")


def split_label(text: str) -> tuple[str, dict[str, int | bool]]:
    """``cxgb4(mpa_rev=1,crc_enabled=0)`` -> ``("cxgb4", {"mpa_rev": 1, "crc_enabled":
    0})``; a label without parentheses is the name as given. Values are integers (any
    base ``int(x, 0)`` reads) or true/false (yes/no, on/off). A malformed label is a
    :class:`~mpa_emu.errors.ConfigError` (a ValueError) with one line quoting it."""
    if "(" not in text:
        return text, {}
    if not text.endswith(")"):
        raise ConfigError(f"{text!r}: {LABEL_FORM}")
    name, _, inner = text[:-1].partition("(")
    pairs: dict[str, int | bool] = {}
    for pair in filter(None, (p.strip() for p in inner.split(","))):
        key, eq, value = pair.partition("=")
        if not eq:
            raise ConfigError(f"{text!r}: {pair!r} is not KEY=VALUE")
        pairs[key.strip()] = label_value(value.strip(), text)
    return name.strip(), pairs


def label_value(value: str, whole: str) -> int | bool:
    """One value of a label: true/false words as booleans, else an integer; a
    ConfigError (a ValueError) quoting the label ``whole`` otherwise."""
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    try:
        return int(value, 0)
    except ValueError:
        raise ConfigError(f"{whole!r}: {value!r} is not a number") from None
