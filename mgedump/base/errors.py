"""The project's exception types and the exit codes they map to.

A :class:`MgeError` is a user error: bad usage or bad input. The command line
prints its message as one line on stderr and exits with :attr:`MgeError.exit_code`
(2), with no traceback unless ``-v`` is given. Any other exception is a bug and
surfaces with its traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

EXIT_OK = 0  # done; every assertion passed
EXIT_FAILED = 1  # an assertion failed, or the model failed to run
EXIT_USAGE = 2  # bad usage or bad input
EXIT_INTERRUPTED = 130  # stopped by Ctrl-C (128 + SIGINT), as shells report it
EXIT_TERMINATED = 143  # stopped by SIGTERM (128 + 15), as shells report it


class Verdict:
    """The outcome of a command over test cases (``mgerun``'s :class:`~mgedump.commands.verify.Report`,
    ``mgediff``'s :class:`~mgedump.diagnose.divergence.DiffReport`): it passed when every test case passed, and
    :attr:`exit_code` is the command's exit code."""

    cases: Sequence[Any]  # each with a ``passed``

    @property
    def passed(self) -> bool:
        return all(case.passed for case in self.cases)

    @property
    def exit_code(self) -> int:
        """0 when every test case passed, else 1."""
        return EXIT_OK if self.passed else EXIT_FAILED


class Terminated(BaseException):
    """The process was asked to stop (SIGTERM, SIGHUP): raised so that every ``with`` block unwinds and temporary
    files go. ``signum`` is the signal (the exit code is 128 plus it, :data:`EXIT_TERMINATED` for SIGTERM).

    Not an Exception: nothing that catches errors may swallow it.
    """

    def __init__(self, signum: int = EXIT_TERMINATED - 128) -> None:
        super().__init__(signum)
        self.signum = signum


class MgeError(Exception):
    """A user error: bad usage or bad input (exit code 2)."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(self.one_line())

    def one_line(self) -> str:
        text = self.message if not self.hint else f"{self.message} (hint: {self.hint})"
        return " ".join(text.split())


class UsageError(MgeError):
    """An option that is out of range, or options that do not go together."""


class SpecError(MgeError):
    """A ``-d`` data spec that cannot be parsed or does not fit the model."""


class DataError(MgeError):
    """A data file that cannot be read, or data that does not fit the model."""


class ModelError(MgeError):
    """A model file that is missing, unreadable or not a usable ONNX model."""


class BundleError(MgeError):
    """A bundle that is malformed, of an unknown version, or tampered with."""


class OptimizeError(MgeError):
    """An optimisation the model cannot take: the optimised model fails to run, or misses ``--maxerr``."""


class OutputError(MgeError):
    """An output path that cannot be written."""


class RunError(MgeError):
    """The model failed to run on the data (exit code 1 at verify time).

    At pack time the data is the user's spec, so the packer re-raises it as a
    :class:`SpecError` (exit 2).
    """

    exit_code = EXIT_FAILED
