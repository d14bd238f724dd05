"""The reports of ``mgerun``: typed records (:mod:`.schema`, which names them all; they live in :mod:`.bundles`,
:mod:`.cases` and :mod:`.timings`, JSON values in :mod:`.jsonvalues`) that every renderer reads, the JSON report
(report version 2), JUnit XML for CI servers (:mod:`.junit`) and a self-contained HTML page for people
(:mod:`.html`, plots in :mod:`.svg`).

Rendering every report from the one :class:`~.schema.RunReport` keeps them in
agreement, and lets a report be rendered again later from a saved JSON file
(``RunReport.from_json``). A report's target ``-`` is standard output
(:func:`write_report`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone

from ..base.errors import OutputError
from ..base.outputs import STDOUT, is_stdout

__all__ = [
    "STDOUT",
    "bundle_name",
    "is_stdout",
    "report_name",
    "silence_stdout",
    "stdout_targets",
    "unique_names",
    "write_report",
]


def bundle_name(path: str) -> str:
    """What a bundle is called in reports and per-bundle output names: its file name without its suffix."""
    from ..bundle.format import BUNDLE_SUFFIX  # here: the bundle package imports numpy

    base = os.path.basename(str(path))
    return base.removesuffix(BUNDLE_SUFFIX) or base


def report_name(name: str, variant: str | None) -> str:
    """What the reports call one run of a bundle: its name, and ``[variant]`` after it for a variant of several."""
    return name if variant is None else f"{name}[{variant}]"


def unique_names(paths: Sequence[str]) -> list[str]:
    """What the reports call each bundle of one call: its :func:`bundle_name`, or, where two bundles share it
    (``x/a/m.mgetest`` and ``x/b/m.mgetest``), as many of their last path components as tell them apart
    (``a/m``, ``b/m``), so that no two suites or sections of a report share a name."""
    from ..bundle.format import BUNDLE_SUFFIX

    names = [bundle_name(path) for path in paths]
    parts = [os.path.normpath(os.path.abspath(str(path))).removesuffix(BUNDLE_SUFFIX).split(os.sep) for path in paths]
    for name in {n for n in names if names.count(n) > 1}:
        group = [k for k, n in enumerate(names) if n == name]
        for depth in range(2, max(len(parts[k]) for k in group) + 1):
            tails = ["/".join(parts[k][-depth:]) for k in group]
            if len(set(tails)) == len(tails) or depth == max(len(parts[k]) for k in group):
                for k, tail in zip(group, tails, strict=True):
                    names[k] = tail
                break
    return names


def utc_timestamp() -> str:
    """Now, ISO 8601 in UTC to the second: ``2025-01-31T09:30:00Z``."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def stdout_targets(targets: Iterable[str | None]) -> list[str]:
    """The targets among these that are standard output."""
    return [t for t in targets if t and is_stdout(t)]


def write_report(target: str, data: bytes, protected: Iterable[str] = ()) -> None:
    """Write one report: to standard output for ``-`` (and its other names, see :func:`is_stdout`), else
    atomically beside the target (:func:`mgedump.base.fileio.write_bytes_atomic`).

    A reader that closes the pipe early (``mgerun ... --report-json - | head -c 10``) ends the writing quietly:
    standard output is pointed at the null device, so nothing written later fails either.

    Raises:
        OutputError: the target cannot be written.
    """
    if not is_stdout(target):
        from ..base.fileio import write_bytes_atomic

        write_bytes_atomic(target, data, protected)
        return
    if sys.stdout is None:  # a program with no standard output (pythonw, a service)
        raise OutputError(f"cannot write the report {target}: there is no standard output")
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
    except OSError as exc:  # a full disk, an I/O error: the report asked for is not there
        silence_stdout()
        raise OutputError(f"cannot write the report {target} to standard output: {exc.strerror or exc}") from None


def silence_stdout() -> None:
    """Point standard output at the null device: after a reader closed the pipe, what is still printed (and
    Python's own flush at exit) goes nowhere instead of failing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
