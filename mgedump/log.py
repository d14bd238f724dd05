"""One logger for status and warnings, on stderr; repeated warnings print once."""

from __future__ import annotations

import logging
import sys

from .text import terminal


def printable(text: object) -> str:
    """Text as it may reach a terminal (:func:`mgedump.text.terminal`): every control character and every
    character that reorders or hides text escaped (``\\x1b``), bytes that are not UTF-8 shown as ``\\xff``, so
    what came from a file (a spec, a tensor name, a manifest) can neither drive the terminal nor fake a line."""
    return terminal(text)


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
