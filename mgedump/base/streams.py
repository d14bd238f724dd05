"""The standard streams when a command starts with one of them closed (``2>&-``, ``>&-``), or when a program that
embeds the library has none (``sys.stderr`` is None under ``pythonw`` and some services).

A closed standard file descriptor is a hazard beyond lost messages: the next file the process opens takes its
number, and whatever writes to that stream then writes into the file (onnxruntime's native logging writes to
descriptor 2: into a bundle being written, say). :func:`guard` gives each closed one the null device, so no
file can take its number and what is written to it goes nowhere, and remembers which were closed:
:func:`stdout_closed` lets a command refuse to write a report to a standard output that is not there rather
than drop it silently. :func:`is_terminal` asks whether a stream is a terminal without assuming there is one.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from typing import IO, Any

__all__ = ["guard", "is_terminal", "stdout_closed"]

_NAMES = {0: "stdin", 1: "stdout", 2: "stderr"}
_closed: set[int] = set()


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def guard() -> frozenset[int]:
    """Give each closed standard file descriptor (0, 1, 2) the null device, and Python a stream on each one it
    lacks; return the descriptors that were closed (remembered for :func:`stdout_closed`).

    Streams Python has (a test's capture, a redirection) are left as they are.
    """
    found = set()
    for fd, name in _NAMES.items():
        if not _is_open(fd):
            with contextlib.suppress(OSError):
                null = os.open(os.devnull, os.O_RDWR)
                if null != fd:  # the lowest free number: fd itself, unless a lower one is closed too
                    os.dup2(null, fd)
                    os.close(null)
            found.add(fd)
        if getattr(sys, name) is None:
            setattr(sys, name, _stream(fd, name))
    _closed.update(found)
    return frozenset(found)


def _stream(fd: int, name: str) -> IO[Any]:
    """A text stream on a standard descriptor (the null device when it was closed)."""
    try:
        return open(  # noqa: SIM115 - it lives as long as the process, as sys.stdout does
            fd, "r" if name == "stdin" else "w", encoding="utf-8", errors="backslashreplace", closefd=False
        )
    except OSError:
        return io.StringIO()


def stdout_closed() -> bool:
    """Whether the command started with its standard output closed (:func:`guard` saw it), or has none."""
    return 1 in _closed or sys.stdout is None


def is_terminal(stream: Any) -> bool:
    """Whether a stream is a terminal: False for None, a closed stream, or one without ``isatty``."""
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False
