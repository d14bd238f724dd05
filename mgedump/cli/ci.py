"""What ``mgerun`` gives the CI engine it runs in, beside its lines and its reports (docs/ci.md#what-the-ci-shows):
on GitHub Actions, a job summary appended to the file ``$GITHUB_STEP_SUMMARY`` names, and an ``::error`` workflow
command per failure (when ``GITHUB_ACTIONS`` is ``true``). ``--no-ci-output`` turns both off.

A summary that cannot be written is one warning; the verdict and the exit code stay the run's."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

from ..base.errors import MgeError
from ..base.log import warn_once
from .output import say


class CiOutput:
    """The CI output of one call, on or off, written where the environment says.

    Args:
        enabled: not ``--no-ci-output``.
        err: the annotations go to stderr (a report holds stdout).
        title: what the summary's heading calls the call (``mgerun``, ``mgerun --merge``).
        environ: where the CI's variables are read (none: this process's environment).
    """

    def __init__(
        self, enabled: bool, err: bool, title: str = "mgerun", environ: Mapping[str, str] | None = None
    ) -> None:
        env = os.environ if environ is None else environ
        self.title = title
        self.err = err
        self.annotate = enabled and env.get("GITHUB_ACTIONS") == "true"
        self.summary_file = (env.get("GITHUB_STEP_SUMMARY") or None) if enabled else None
        self.workspace = env.get("GITHUB_WORKSPACE") or None

    @property
    def active(self) -> bool:
        """It writes or prints something."""
        return bool(self.annotate or self.summary_file)

    def report(self, report: Any, gate: dict[str, Any] | None = None) -> None:
        """After a run or a merge: ``report`` is its :class:`~mgedump.report.schema.RunReport`, ``gate`` the latency
        gate's verdict (none: no gate)."""
        if not self.active:
            return
        from ..commands.gate import gate_lines
        from ..report.ci import step_summary, workflow_commands

        if self.annotate:
            for line in workflow_commands(report, self.workspace):
                say(line, err=self.err)
        if self.summary_file:
            self._append(step_summary(report, gate_lines(gate, False), self.title))

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """Within it, an error that stops the call (one bundle that cannot be read, reports that cannot be merged)
        is said to the CI too, then raised on."""
        try:
            yield
        except MgeError as exc:
            self.error(exc.one_line(), exc.exit_code)
            raise

    def error(self, message: str, exit_code: int) -> None:
        """A call that stopped with an error before it had a report."""
        if not self.active:
            return
        from ..report.ci import error_annotation, error_summary

        if self.annotate:
            say(error_annotation(message, self.title), err=self.err)
        if self.summary_file:
            self._append(error_summary(message, exit_code, self.title))

    def _append(self, text: str) -> None:
        from ..report.ci import append_summary

        assert self.summary_file is not None
        why = append_summary(self.summary_file, text)
        if why is not None:
            warn_once(f"no job summary: GITHUB_STEP_SUMMARY={self.summary_file}: {why}")
