"""What the commands print: result lines and tables on stdout, status and progress on stderr."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from ..base.bounds import err_text
from ..base.log import printable, warn_once
from ..model.environment import summary as environment_summary

if TYPE_CHECKING:
    from ..report.schema import BundleRecord, CaseRecord, OpRow


def say(line: str = "", err: bool = False) -> None:
    """Print one line (to stdout, or stderr with ``err``), escaped (:func:`mgedump.base.text.terminal`). A reader that
    closed stdout early (``mgerun ... | head -1``) ends the printing quietly, and so does a stream that cannot be
    written (a full disk: said once on stderr); the command goes on to its own exit code."""
    try:
        click.echo(printable(line), err=err)
    except OSError as exc:
        if err:
            return
        from ..report import silence_stdout

        silence_stdout()
        if not isinstance(exc, BrokenPipeError):
            warn_once(f"cannot write to standard output ({exc.strerror or exc}): its lines are lost")


def print_packed(output: str, result: Any) -> None:
    """The one status line (two when optimised) after a pack."""
    manifest = result.manifest
    assertion = manifest.assertion
    say(
        f"mgedump: wrote {output}: {result.test_cases} test case(s), "
        f"{len(manifest.inputs)} input(s), {len(manifest.outputs)} output(s), "
        + (f"maxerr {assertion.bounds.default.maxerr:g}" if assertion.enabled else "no assertions"),
        err=True,
    )
    if manifest.optimizations:
        worst = max((c["err"] for c in result.self_check if c["err"] is not None), default=0.0)
        needs = f"; needs {', '.join(manifest.requirements)}" if manifest.requirements else ""
        say(
            f"mgedump: optimised ({', '.join(manifest.optimizations)}); self-check worst err={worst:.3g}{needs}",
            err=True,
        )
    for line in result.notes:  # the precision mode's summary, then what the optimisation says
        say(f"mgedump: {line}", err=True)


def case_lines(
    case: CaseRecord, show_passing: bool = False, verbose: int = 0, elsewhere: Sequence[str] = ()
) -> list[str]:
    """One test case: a head line, then every output (``show_passing``) or the failures only (silent).

    Args:
        verbose: 1 and more: every run's latency too.
        elsewhere: what differs from where the bundle was packed, said beside a failed check.
    """
    lines = []
    for out in case.outputs:
        if not out.passed:
            lines += out.failure or [f"{out.name} failed"]
        elif show_passing:
            lines.append(f"{err_text(out.err, out.error_stat, out.max_err)} (name={out.name})")
    if case.error:
        lines.insert(0, f"{case.head}: FAILED: {case.error}")
    elif lines or show_passing:
        lines.insert(0, case.head)
    if case.diagnosis is not None:
        lines.append(f"  {case.diagnosis.line()}")
    if not case.passed and elsewhere:
        lines.append("  where it ran differs from where it was packed: " + "; ".join(elsewhere))
    if verbose > 0 and case.timing.latencies_ms:
        lines.append("  iterations (ms): " + " ".join(f"{ms:.3f}" for ms in case.timing.latencies_ms))
    return lines


def table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows as aligned text: the first column left-aligned, the others right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.rjust(width) if i else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


def fitting_lines(fitting: Any, limit: int | None = 12) -> list[str]:
    """A bundle's fitting: each variant's verification, the ranked candidates (the first ``limit``), the choice."""
    lines = [
        f"variant {v['name']}: " + ("passed" if v["passed"] else f"FAILED{': ' + v['error'] if v['error'] else ''}")
        for v in fitting.variants
    ]
    rows = fitting.table()
    if len(rows) > 1:
        shown = rows if limit is None else rows[: limit + 1]
        lines += table(shown)
        if len(shown) < len(rows):
            lines.append(f"... and {len(rows) - len(shown)} more candidate(s) (-v, or the JSON report, lists them all)")
    return [*lines, fitting.choice_line()]


def timing_lines(bundle: BundleRecord) -> list[str]:
    """The latency table (ms) of every test case, then the batch sweep if any."""
    from ..report.schema import STATS, rate_text  # here: a pack prints no table, and never reads the reports

    lines: list[str] = []
    load = bundle.session.concurrency if bundle.session else 1
    title = "latency (ms)" if load == 1 else f"latency (ms), {load} at once"
    if bundle.profile:  # onnxruntime's profiler records every kernel: it slows every run it times
        title += ", profiled"
    rows = [[title, "batch", "iters", *STATS, "inf/s", "samples/s"]]
    for case in bundle.test_cases:
        timing = case.timing
        if not timing.latency.count:
            continue
        rows.append(
            [
                f"test case {case.index}",
                str(timing.batch),
                str(timing.latency.count),
                *(timing.latency.cell(stat) for stat in STATS),
                rate_text(timing.inferences_per_s),
                rate_text(timing.samples_per_s),
            ]
        )
    if len(rows) > 1:
        lines += table(rows)
        if bundle.profile:
            lines.append(
                "  (--profile was on: onnxruntime records every kernel, so these runs are slower; time without it)"
            )
    sweep = [["batch sweep (ms)", "batch", "median", "min", "p90", "ms/sample", "inf/s", "samples/s"]]
    for case in bundle.test_cases:
        for timing in case.sweep:
            per_sample = timing.ms_per_sample
            sweep.append(
                [
                    f"test case {case.index}",
                    str(timing.batch),
                    timing.latency.cell("median"),
                    timing.latency.cell("min"),
                    timing.latency.cell("p90"),
                    "-" if per_sample is None else f"{per_sample:.3f}",
                    rate_text(timing.inferences_per_s),
                    rate_text(timing.sample_rate),
                ]
            )
    if len(sweep) > 1:
        lines += table(sweep)
    return lines


def op_profile_lines(op_profile: Sequence[OpRow] | None, top: int | None = 10) -> list[str]:
    """The time per operator type of ``--profile``, as load_and_run's profiler prints it."""
    if not op_profile:
        return []
    rows = [["op type (profile)", "nodes", "calls", "total ms", "ms/run", "share"]]
    for row in op_profile[:top]:
        nodes = "-" if row.nodes is None else f"{row.nodes:g}"
        per_run = "-" if row.ms_per_run is None else f"{row.ms_per_run:.3f}"
        rows.append([row.op_type, nodes, str(row.calls), f"{row.total_ms:.3f}", per_run, f"{row.share:.1%}"])
    lines = table(rows)
    if top is not None and len(op_profile) > top:
        lines.append(f"... and {len(op_profile) - top} more op type(s) (-v lists them all)")
    return lines


def environment_lines(bundle: BundleRecord) -> list[str]:
    """What differs between where a bundle was packed and where it ran (or that the former is unknown)."""
    if not bundle.environment_differences:
        return []
    if not bundle.packed_environment:
        return list(bundle.environment_differences)
    return ["where it ran differs from where it was packed: " + "; ".join(bundle.environment_differences)]


class RunPrinter:
    """What ``mgerun`` prints as it goes: each test case; after each bundle its timing, cold start, operator
    profile, what differs from where it was packed, and its verdict; at the end, where it ran and, with several
    bundles, the total. Everything is rendered from the report's records (:mod:`mgedump.report.schema`).

    --silent leaves out passing assertions only: the timing is always printed, as load_and_run prints it.

    Args:
        err: print on stderr (a report goes to stdout: ``--report-json -``).
    """

    def __init__(self, verbose: int = 0, many: bool = False, err: bool = False) -> None:
        self.verbose = verbose
        self.many = many
        self.err = err
        self._fitted: Any = None  # the report whose fitting was printed (before its first test case)

    def _say(self, lines: Sequence[str]) -> None:
        for line in lines:
            say(line, err=self.err)

    def start(self, path: str) -> None:
        if self.many:
            self._say([f"== {path}"])

    def case(self, case: Any, report: Any) -> None:
        """After each test case: ``case`` is a :class:`~mgedump.commands.verify.CaseReport` of ``report``."""
        if getattr(report, "fitting", None) is not None and report is not self._fitted:
            self._fitted = report
            self._say(self._fitting(report))
        elsewhere = differences_known(report)
        self._say(case_lines(case.record(), report.verbose, self.verbose, elsewhere))

    def _fitting(self, report: Any) -> list[str]:
        """``--fitting``: every variant verified, the ranked candidates and the choice, then the head of the
        chosen variant's run (its test cases and timing follow)."""
        from ..model.session import SessionSettings
        from ..report.fitting import FittingRecord

        fitting = FittingRecord.of(report.fitting)
        lines = fitting_lines(fitting, None if self.verbose else 12)
        chosen = fitting.chosen
        if chosen is not None:
            settings = SessionSettings.from_json(chosen).text()
            lines.append(f"the chosen {chosen['variant']} ({settings}), verified and timed on every test case:")
        else:  # the report of the first variant that failed: its failures, as it ran them
            lines.append(f"variant {report.variant or fitting.variants[0]['name']}, as it failed:")
        return lines

    def bundle(self, result: Any) -> None:
        """After each bundle: ``result`` is a :class:`~mgedump.commands.verify_many.BundleResult`."""
        if result.error is not None:  # only with several bundles: one alone raises
            message = result.error.one_line()
            say(f"mgerun: error: {message}", err=True)
            self._say(
                [f"{result.path}: ERROR (exit {result.error.exit_code}): {message.removeprefix(result.path + ': ')}"]
            )
            return
        bundle = result.record()
        lines = []
        if bundle.fitting is not None and result.report is not self._fitted:  # no test case printed it
            lines += self._fitting(result.report)
            if bundle.fitting.chosen is None:
                for case in bundle.test_cases:
                    lines += case_lines(case, False, self.verbose)
        lines += timing_lines(bundle)
        cold = bundle.cold_start.line(None if self.many else bundle.peak_rss_mib)
        lines += [cold] if cold else []
        lines += op_profile_lines(bundle.op_profile, None if self.verbose else 10)
        if not self.many:  # with several, said once at the end
            lines.append(f"ran with {environment_summary(result.report.environment)}")
        lines += environment_lines(bundle)
        last = bundle.verdict_line(
            f"{result.path}: " if self.many else "", quiet_pass=not (result.report.verbose or self.many)
        )
        lines += [last] if last else []
        self._say(lines)

    def total(self, summary: Any) -> None:
        """At the end, with several bundles: where they ran, and how many passed."""
        lines = []
        if summary.environment and self.many:
            lines.append(f"ran with {environment_summary(summary.environment)}")
        if self.many:
            from ..report.ci import outcome_text

            counts = {"passed": 0, "failed": 0, "errors": 0, "not_run": 0}
            for result in summary.results:
                outcome = "not_run" if getattr(result, "not_run", None) else "errors" if result.error else None
                counts[outcome or ("passed" if result.exit_code == 0 else "failed")] += 1
            runs = len(summary.results)
            bundles = len({result.path for result in summary.results})
            what = f"{bundles} bundle(s)" if runs == bundles else f"{runs} runs of {bundles} bundle(s)"
            left = next((result.not_run for result in summary.results if getattr(result, "not_run", None)), None)
            if left:
                lines.append(f"{left.removeprefix('not run: ')}: {counts['not_run']} not run")
            lines.append(
                f"{what}: {outcome_text(counts)}; peak memory {summary.peak_rss_mib:.0f} MiB; exit {summary.exit_code}"
            )
        if getattr(summary, "gate", None):
            from ..commands.gate import gate_lines

            lines[-1:-1] = gate_lines(summary.gate, self.verbose > 0) if self.many else []
            if not self.many:
                lines += gate_lines(summary.gate, self.verbose > 0)
        self._say(lines)


def differences_known(report: Any) -> list[str]:
    """What differs from a known packing environment (none when it is unknown: that is said once per bundle)."""
    return report.environment_differences() if report.packed_environment else []


class ProgressBar:
    """Long timing runs as click's progress bar on a terminal's stderr (one bar per label, with its rate and the
    time left); the CLI makes one only for a terminal: CI logs get the result lines."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._label = ""
        self._done = 0

    def __call__(self, label: str, done: int, total: int) -> None:
        if self._bar is None or label != self._label or done < self._done:
            self.close()
            self._bar = click.progressbar(
                length=total, label=printable(label), file=sys.stderr, show_eta=True, show_pos=True, width=30
            )
            self._bar.__enter__()
            self._label, self._done = label, 0
        self._bar.update(done - self._done)
        self._done = done
        if done >= total:
            self.close()

    def close(self) -> None:
        """Finish the bar on the screen, then wipe it: what prints next starts on a clean line."""
        if self._bar is None:
            return
        self._bar.render_finish = lambda: None  # no newline left behind: the line is wiped below
        self._bar.__exit__(None, None, None)
        sys.stderr.write("\r" + " " * (shutil.get_terminal_size().columns - 1) + "\r")
        sys.stderr.flush()
        self._bar = None


def diff_lines(report: Any, verbose: int = 0, top: int = 10) -> list[str]:
    """``mgediff``'s report: per test case, what matched, the worst tensor, the first divergence, the nodes that
    introduce the most error."""

    lines = [f"A: {report.a}", f"B: {report.b}", f"maxerr {report.maxerr:g} ({report.maxerr_source})"]
    for case in report.cases:
        worst = case.worst()
        worst_text = "nothing to compare" if worst is None else f"worst err {worst.err:.3g} ({worst.name})"
        lines.append(
            f"test case {case.test_case}: {len(case.tensors)} tensors matched, {len(case.only_a)} in A only, "
            f"{len(case.only_b)} in B only; {worst_text}: {'PASSED' if case.passed else 'FAILED'}"
        )
        internal = case.above_unjudged() if case.passed and hasattr(case, "above_unjudged") else []
        if internal:
            worst_inside = max(internal, key=lambda t: t.err)
            lines.append(
                f"  {len(internal)} internal tensor(s) above maxerr (worst {worst_inside.name} err "
                f"{worst_inside.err:.3g}): float16 on one side, so the model's outputs decide"
            )
        differing = {n: e for n, e in case.input_errs.items() if e > case.maxerr}
        if differing:
            lines.append("  the inputs differ: " + ", ".join(f"{n} err {e:.3g}" for n, e in differing.items()))
        first = case.first_divergence
        if first is not None:
            lines.append(f"  first divergence: {first.describe()}")
        elif not case.passed:
            lines.append("  no node introduces the error: it comes in with the inputs, or from tensors B renamed")
        introducers = case.introducers()[:top]
        if len(introducers) > 1 or (introducers and verbose):
            rows = [["err", "node", "op", "output", "cause"]]
            rows += [[f"{n.err:.3g}", n.node.name, n.node.op_type, n.output.name, n.cause or ""] for n in introducers]
            lines.append("  nodes that introduce the most error:")
            lines += ["    " + line for line in table(rows)]
        if verbose:
            for side, names in (("A", case.only_a), ("B", case.only_b)):
                if names:
                    lines.append(f"  in {side} only: " + ", ".join(names))
    failed = [c for c in report.cases if not c.passed]
    lines.append(
        f"FAILED: {len(failed)} of {len(report.cases)} test case(s) have a tensor above maxerr"
        if failed
        else f"all {len(report.cases)} test case(s) within maxerr"
    )
    return lines


def print_diff(report: Any, verbose: int = 0, err: bool = False) -> None:
    """``mgediff``'s lines: on stdout, or on stderr when the JSON report has stdout to itself (``err``)."""
    for line in diff_lines(report, verbose):
        say(line, err=err)
