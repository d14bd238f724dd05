"""Numbers read from text: flags, environment variables, version strings, the fields of files a command reads.

Every such number goes through :func:`parse_int` or :func:`parse_float`. Python's own ``int()`` and ``float()``
take any Unicode digit (``'１７'`` is 17, ``'²'`` passes ``str.isdigit()`` and fails ``int()``) and numbers of
thousands of digits (a ``ValueError`` past its integer-string limit, or a long wait below it); a command would
then accept what it later refuses, or end in a traceback. Here a number is ASCII digits only, at most
:data:`MAX_DIGITS` of them, and anything else is one line that names where it came from (exit code 2).
"""

from __future__ import annotations

import math
import re

from .errors import UsageError

MAX_DIGITS = 20  # every count, index, size or int64/uint64 value a command takes fits
MAX_FLOAT_CHARS = 40  # '-1.2345678901234567e-308' and the like, with room to spare

_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_SPECIAL = {  # as Python spells them; what may be infinite or NaN is the option's own check, with its message
    **dict.fromkeys(("inf", "+inf", "infinity", "+infinity"), math.inf),
    **dict.fromkeys(("-inf", "-infinity"), -math.inf),
    "nan": math.nan,
}


def parse_int(text: str, what: str, *, lowest: int | None = None, highest: int | None = None) -> int:
    """``text`` as an integer: ASCII digits (a sign allowed), at most :data:`MAX_DIGITS` of them, surrounding
    ASCII blanks ignored; within ``lowest`` and ``highest`` when given.

    Raises:
        UsageError: anything else, naming ``what`` (a flag, a variable, a field) and the text given.
    """
    stripped = text.strip(" \t\r\n")
    if not _INT.fullmatch(stripped) or len(stripped.lstrip("+-")) > MAX_DIGITS:
        raise UsageError(f"{what} takes a whole number in ASCII digits; got {shown(text)}")
    value = int(stripped)
    _check_range(value, what, lowest, highest)
    return value


def parse_float(text: str, what: str, *, lowest: float | None = None, highest: float | None = None) -> float:
    """``text`` as a float: ASCII digits, a point, an exponent (``1e-3``), ``inf`` or ``nan``; at most
    :data:`MAX_FLOAT_CHARS` characters; within ``lowest`` and ``highest`` when given.

    Raises:
        UsageError: anything else, naming ``what`` and the text given.
    """
    stripped = text.strip(" \t\r\n")
    special = _SPECIAL.get(stripped.lower())
    if special is None and (len(stripped) > MAX_FLOAT_CHARS or not _FLOAT.fullmatch(stripped)):
        raise UsageError(f"{what} takes a number in ASCII digits (e.g. 0.5 or 1e-3); got {shown(text)}")
    value = special if special is not None else float(stripped)
    _check_range(value, what, lowest, highest)
    return value


def _check_range(value: float, what: str, lowest: float | None, highest: float | None) -> None:
    if lowest is not None and value < lowest:
        raise UsageError(f"{what} must be at least {lowest}; got {value:g}")
    if highest is not None and value > highest:
        raise UsageError(f"{what} must be at most {highest}; got {value:g}")


def shown(text: str) -> str:
    """The text as a message quotes it: its repr, cut to 40 characters (a 5000-digit number is not echoed)."""
    return repr(text) if len(text) <= 40 else f"{text[:37]!r}... ({len(text)} characters)"


def parse_version(text: str, what: str) -> tuple[int, ...]:
    """``MAJOR.MINOR`` or ``MAJOR.MINOR.PATCH`` (``1.17``, ``1.17.3``), each part by :func:`parse_int`.

    Raises:
        UsageError: any other form, naming ``what``.
    """
    parts = text.strip(" \t\r\n").split(".")
    if len(parts) not in (2, 3) or not all(part and part.isascii() and part.isdigit() for part in parts):
        raise UsageError(f"{what} {shown(text)}: give onnxruntime's version as MAJOR.MINOR in ASCII digits, e.g. 1.17")
    return tuple(parse_int(part, what, lowest=0) for part in parts)
