"""One logger for status and warnings, on stderr; repeated warnings print once."""

from __future__ import annotations

import logging
import re
import sys

# C0 and C1 controls (escape sequences, carriage returns, newlines), and the Unicode ones that reorder or hide text
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")


def printable(text: str) -> str:
    """Text as it may reach a terminal: every control character escaped (``\\x1b``), so what came from a file (a
    spec, a tensor name, a manifest) can neither drive the terminal nor fake a line."""
    return _UNPRINTABLE.sub(
        lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text
    )


LOGGER_NAME = "mgedump"
logger = logging.getLogger(LOGGER_NAME)
_seen: set[str] = set()


def setup(verbosity: int = 0, *, prog: str = "mgedump") -> None:
    """Route the project's logger to stderr.

    Args:
        verbosity: -1 quiet (errors only), 0 warnings, 1 and more debug.
        prog: the program name that prefixes every line.
    """
    level = logging.WARNING if verbosity == 0 else logging.ERROR if verbosity < 0 else logging.DEBUG
    logger.setLevel(level)
    logger.propagate = False
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{prog}: %(levelname_lower)s: %(message)s"))
    handler.addFilter(_lower_level)
    logger.addHandler(handler)
    _seen.clear()


def _lower_level(record: logging.LogRecord) -> bool:
    record.levelname_lower = record.levelname.lower()
    record.msg, record.args = printable(record.getMessage()), None  # a warning may quote a file's contents
    return True


def warn_once(message: str) -> None:
    """Log a warning, unless the same text was already logged."""
    if message in _seen:
        return
    _seen.add(message)
    logger.warning(message)
