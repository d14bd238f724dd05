"""One logger for status and warnings, on stderr; a warning repeated within one call of a command prints once.

Each command's library function (``pack``, ``verify``, ``verify_all``, ``diff``) runs in its own
:func:`warnings_scope`: the same warning on every test case prints once per call, and a library user who calls
``pack`` twice sees it twice. There is no process-wide memory of what was said.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from .text import terminal


def printable(text: object) -> str:
    """Text as it may reach a terminal (:func:`mgedump.base.text.terminal`): every control character and every
    character that reorders or hides text escaped (``\\x1b``), bytes that are not UTF-8 shown as ``\\xff``, so
    what came from a file (a spec, a tensor name, a manifest) can neither drive the terminal nor fake a line."""
    return terminal(text)


LOGGER_NAME = "mgedump"
logger = logging.getLogger(LOGGER_NAME)
_seen: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("mgedump_warnings_seen", default=None)


_program = "mgedump"


def program() -> str:
    """The command running, as :func:`setup` was told (``mgedump``, ``mgerun``, ``mgediff``): messages that
    refuse something name who refuses it."""
    return _program


def setup(verbosity: int = 0, *, prog: str = "mgedump") -> None:
    """Route the project's logger to stderr.

    Args:
        verbosity: -1 quiet (errors only), 0 warnings, 1 and more debug.
        prog: the program name that prefixes every line.
    """
    global _program
    _program = prog
    level = logging.WARNING if verbosity == 0 else logging.ERROR if verbosity < 0 else logging.DEBUG
    logger.setLevel(level)
    logger.propagate = False
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{prog}: %(levelname_lower)s: %(message)s"))
    handler.addFilter(_lower_level)
    logger.addHandler(handler)


def _lower_level(record: logging.LogRecord) -> bool:
    record.levelname_lower = record.levelname.lower()
    record.msg, record.args = printable(record.getMessage()), None  # a warning may quote a file's contents
    return True


def warn_once(message: str) -> None:
    """Log a warning, unless the same text was already logged in this scope (:func:`warnings_scope`)."""
    seen = _seen.get()
    if seen is not None:
        if message in seen:
            return
        seen.add(message)
    logger.warning(message)


@contextlib.contextmanager
def warnings_scope() -> Iterator[None]:
    """Within it, a repeated warning prints once; it starts with nothing said (a nested scope starts afresh)."""
    token = _seen.set(set())
    try:
        yield
    finally:
        _seen.reset(token)


F = TypeVar("F", bound=Callable[..., Any])


def fresh_warnings(function: F) -> F:
    """Run each call of ``function`` in its own :func:`warnings_scope`."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with warnings_scope():
            return function(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def no_status(text: str) -> None:
    """The status callback of a command called without one (``on_stage=None``): it says nothing."""
