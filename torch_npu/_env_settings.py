"""Reading the package's environment variables: one rule per variable, one error format.

Every variable the Python side reads goes through these helpers, so that a bad value
(negative, too large, not a number, infinite) is refused with a ``ValueError`` naming
the variable, the value and what it accepts, instead of surfacing later as an
``OverflowError`` or being silently replaced. An empty value means "unset" for every
variable. The C++ runtime follows the same rules (``torch_npu/csrc/runtime/env_settings.h``).
"""
from __future__ import annotations

import math
import os

__all__ = ["read", "refuse", "read_seconds", "read_switch", "read_level", "read_integer", "read_distinct_ids"]

# Words a switch takes (compared case-insensitively, surrounding spaces ignored).
SWITCH_ON = ("1", "true", "yes", "on")
SWITCH_OFF = ("0", "false", "no", "off")


def read(name: str) -> str | None:
    """The variable's value, or None when it is unset or empty."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    return raw


def refuse(name: str, raw: str, accepted: str) -> ValueError:
    """The error for a bad value: ``NAME='value' is not valid: NAME must be <accepted>``."""
    return ValueError(f"{name}={raw!r} is not valid: {name} must be {accepted}")


def read_seconds(name: str, default: float, *, allow_zero: bool = False, maximum: float = 2147483647.0,
                 accepted: str | None = None) -> float:
    """A finite number of seconds in (0, maximum] (or [0, maximum]), or ``default`` when unset."""
    raw = read(name)
    if raw is None:
        return float(default)
    lower = "0" if allow_zero else "0 (exclusive)"
    rule = accepted or f"a number of seconds from {lower} to {maximum:.0f}, e.g. {name}=600"
    try:
        value = float(raw)
    except ValueError:
        raise refuse(name, raw, rule) from None
    if not math.isfinite(value) or value > maximum or value < 0 or (value == 0 and not allow_zero):
        raise refuse(name, raw, rule)
    return value


def read_switch(name: str, default: bool, *, accepted: str | None = None) -> bool:
    """An on/off switch (1/true/yes/on, 0/false/no/off), or ``default`` when unset."""
    raw = read(name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in SWITCH_ON:
        return True
    if word in SWITCH_OFF:
        return False
    rule = accepted or "1 (or true/yes/on) or 0 (or false/no/off)"
    raise refuse(name, raw, rule)


def read_level(name: str, default: int, levels: dict[int, str]) -> int:
    """One of the integer ``levels`` (value -> meaning), or ``default`` when unset.

    Only the plain decimal digits of a listed level are accepted ("2", not "2.0" or
    "two"), as the C++ side's ``read_integer`` does."""
    raw = read(name)
    if raw is None:
        return default
    word = raw.strip()
    if word.isascii() and word.isdigit() and int(word) in levels:
        return int(word)
    rule = " or ".join(f"{value} ({meaning})" for value, meaning in levels.items())
    raise refuse(name, raw, rule)


def read_integer(name: str, default: int, minimum: int, maximum: int, accepted: str) -> int:
    """A decimal integer in [minimum, maximum] (optional '-', digits, nothing else), or
    ``default`` when unset; the rule of ``env_settings::read_integer`` in C++."""
    raw = read(name)
    if raw is None:
        return default
    value = _parse_integer(raw, minimum, maximum)
    if value is None:
        raise refuse(name, raw, accepted)
    return value


def read_distinct_ids(name: str, count: int, accepted: str) -> list[int] | None:
    """A comma-separated list of distinct integers in [0, count), in the order given
    (spaces around items allowed), or None when unset; the rule the C++ runtime applies
    to ``ASCEND_RT_VISIBLE_DEVICES`` (``torch_npu/csrc/runtime/device.cpp``)."""
    raw = read(name)
    if raw is None:
        return None
    ids: list[int] = []
    for item in raw.split(","):
        value = _parse_integer(item.strip(" "), 0, count - 1)
        if value is None or value in ids:
            raise refuse(name, raw, accepted)
        ids.append(value)
    return ids


def _parse_integer(text: str, minimum: int, maximum: int) -> int | None:
    digits = text[1:] if text.startswith("-") else text
    if not digits or not all("0" <= c <= "9" for c in digits):
        return None
    value = int(text)
    return value if minimum <= value <= maximum else None
