"""``mgerun BUNDLE``: verify every test case of a bundle and time the model."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..base.streams import is_terminal
from ..report import stdout_targets
from ..report.formats import asked
from .ci import CiOutput
from .common import CONTEXT, common_options, setup
from .flags.ci import ci_flags, ci_output, select_options
from .flags.spread import gate_options, spread_options, spread_options_flags
from .flags.verify import VerifyCommand, verify_options, verify_options_flags
from .output import ProgressBar
from .spread import SpreadPrinter, run_merge
from .status import Status


@click.command(cls=VerifyCommand, context_settings=CONTEXT)
@click.argument("paths", metavar="BUNDLE_OR_MODEL...", nargs=-1, type=click.Path())
@verify_options_flags
@spread_options_flags
@ci_flags
@common_options
def mgerun_command(paths: tuple[str, ...], verbose: int, quiet: bool | None, **values: Any) -> int:
    """Verify every test case of each BUNDLE and time it; exit with the worst outcome (1: a mismatch, 2: bad input).

    A folder stands for every *.mgetest bundle of its tree. With -d, BUNDLE_OR_MODEL is one
    plain ONNX model: run and time it on that data.

    \b
    Examples:
      mgerun model.mgetest
      mgerun model.mgetest --iter 100 --warmup-iter 5 --report-json report.json
      mgerun models/ --junit-xml junit.xml --report-html report.html
      mgerun models/ --jobs auto --shard 2/4 --report-json shard2.json
      mgerun --merge shard*.json --junit-xml junit.xml
      mgerun model.onnx -d "#rand(0,255)" --thread 1 --concurrency 2 --duration 10
      mgerun --repeat-sweep 1,2,4,8 model.onnx -d cat.jpg
    """
    setup(verbose, quiet, "mgerun")
    from ..commands.verify_many import plan_runs, verify_all

    spread, merge = spread_options(values)
    gate = gate_options(values)
    ci_wanted = ci_output(values)
    select = select_options(values)
    options, data_flags = verify_options(values)
    # a report on stdout (--report-json -) keeps stdout to itself: the lines people read go to stderr
    to_stdout = bool(stdout_targets([*(target for _, target in asked(options)), options.fitting_out]))
    if merge:
        from ..base.errors import UsageError

        if gate.active:
            raise UsageError("--merge merges reports: the latency gate applies where the bundles are timed")
        if select != type(select)():
            raise UsageError(
                "--merge merges reports: --rerun-failed, -x and --maxfail apply where the bundles are checked"
            )
        return run_merge(paths, options, spread, err=to_stdout, ci=CiOutput(ci_wanted, to_stdout, "mgerun --merge"))
    ci = CiOutput(ci_wanted, to_stdout)
    with ci.errors():  # a folder with no bundle, a report --rerun-failed cannot read: said to the CI too
        plan = plan_runs(paths, options, data_flags=data_flags, spread=spread, gate=gate, select=select)
    printer = SpreadPrinter(verbose, plan.many, err=to_stdout)
    printer.plan(plan)
    progress = ProgressBar() if is_terminal(sys.stderr) and not quiet else None
    with Status("mgerun", enabled=not quiet) as status, ci.errors():
        summary = verify_all(
            plan,
            options,
            on_start=printer.start,
            on_case=printer.case,
            on_bundle=printer.bundle,
            progress=progress,
            on_stage=status,
            on_record=printer.record,
        )
    printer.total(summary)
    if ci.active:
        ci.report(summary.record(), summary.gate)
    return summary.exit_code
