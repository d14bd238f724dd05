"""``mgediff A B``: compare two runs tensor by tensor and name the node where B first diverges from A."""

from __future__ import annotations

from typing import Any

import click

from ..base.deps import require
from ..report import stdout_targets
from .common import CONTEXT, common_options, setup
from .flags.diff import diff_options, diff_options_flags
from .output import print_diff


@click.command(context_settings=CONTEXT)
@click.argument("a", metavar="A", type=click.Path())
@click.argument("b", metavar="B", type=click.Path())
@diff_options_flags
@common_options
def mgediff_command(a: str, b: str, verbose: int, quiet: bool | None, **values: Any) -> int:
    """Compare A and B tensor by tensor; name the node of B that first introduces error.

    A and B are each an io dump (mgerun --io-dump DIR), a bundle or an ONNX
    model. Models and bundles run with every tensor exposed: on -d specs, else
    a bundle's test cases, else the inputs an io dump recorded. Exit 0 when no
    shared tensor exceeds maxerr, 1 when one does, 2 on bad input.

    \b
    Examples:
      mgediff model.onnx model_fp16.onnx -d "#rand(0,1)"
      mgediff ref_dump/ target_dump/
      mgediff model.onnx model.mgetest          # the bundle's test cases, both sides
    """
    setup(verbose, quiet, "mgediff")
    for module in ("onnx", "onnxruntime"):
        require(module, purpose="comparing runs")
    from ..commands.diff import diff

    options = diff_options(values)
    report = diff(a, b, options)
    # a report on stdout (--report-json -) keeps stdout to itself: the lines people read go to stderr
    print_diff(report, verbose, err=bool(stdout_targets([options.report_json])))
    return report.exit_code
