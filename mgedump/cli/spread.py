"""What ``mgerun`` prints for many bundles on many machines: the shard it checks, each bundle a worker checked
(from its record), and ``--merge``."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from ..options import SpreadOptions, VerifyOptions
from ..report.spread import jobs_line, shard_line, spread_lines
from .output import RunPrinter, case_lines, environment_lines, op_profile_lines, say, timing_lines


class SpreadPrinter(RunPrinter):
    """:class:`~.output.RunPrinter`, and the bundles checked in worker processes, each printed whole when it is
    done (``== PATH``, its test cases, its timing if any, its verdict)."""

    def plan(self, plan: Any) -> None:
        """Before any work: the shard picked and the workers (on stderr, where status goes)."""
        for note in plan.notes:
            say(f"mgerun: note: {note}", err=True)
        if plan.shard:
            say(f"mgerun: {shard_line(plan.shard)}", err=True)
        if plan.spread.workers is not None:
            say(f"mgerun: {jobs_line({'workers': plan.spread.workers, 'timing': plan.spread.timing})}", err=True)

    def record(self, result: Any, bundle: Any, verbose: bool) -> None:
        """After a run a worker checked: ``result`` is its :class:`~mgedump.commands.verify_many.BundleResult`,
        ``bundle`` its :class:`~mgedump.report.schema.BundleRecord`."""
        self.start(result.path if result.variant is None else f"{result.path} [{result.variant}]")
        if result.error is not None:
            self.bundle(result)
            return
        lines = []
        for case in bundle.test_cases:
            lines += case_lines(case, verbose, self.verbose, bundle.packed_elsewhere)
        lines += timing_lines(bundle)
        lines += op_profile_lines(bundle.op_profile, None if self.verbose else 10)
        lines += environment_lines(bundle)
        last = bundle.verdict_line(f"{result.path}: " if self.many else "", quiet_pass=not (verbose or self.many))
        self._say([*lines, *([last] if last else [])])


def run_merge(paths: Sequence[str], options: VerifyOptions, spread: SpreadOptions, err: bool, ci: Any = None) -> int:
    """``mgerun --merge REPORT...``: merge, write the reports asked for, print the total, tell the CI
    (:class:`~.ci.CiOutput`); the merged exit code."""
    from ..base.errors import UsageError
    from ..base.naming import option_name
    from ..commands.merge import merge_reports

    if spread != SpreadOptions(run_id=spread.run_id):
        raise UsageError(
            f"{option_name('merge')} merges reports: {option_name('shard')}, {option_name('jobs')} and "
            f"{option_name('timeout_s')} do not apply"
        )
    with ci.errors() if ci is not None else contextlib.nullcontext():
        merged = merge_reports(paths, options, run_id=spread.run_id)
    from ..report.ci import counts, outcome_text

    lines = spread_lines(merged)
    lines.append(f"{len(merged.bundles)} bundle(s): {outcome_text(counts(merged))}; exit {merged.exit_code}")
    for line in lines:
        say(line, err=err)
    if ci is not None:
        ci.report(merged)
    return merged.exit_code
