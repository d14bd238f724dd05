"""``mgediff A B``: compare two runs tensor by tensor and name the node where B first diverges from A."""

from __future__ import annotations

from typing import Any

import click

from ..options import DiffOptions
from .common import CONTEXT, common_options, data_options, data_options_from, given, setup, with_default
from .output import print_diff


@click.command(context_settings=CONTEXT)
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@data_options
@click.option(
    "--maxerr",
    type=float,
    default=None,
    help="AssertEqual threshold per tensor (default: 1e-4; 1e-2 when either side holds float16).",
)
@click.option("--provider", metavar="NAME", default=None, help="Execution provider for the runs (default CPU).")
@click.option(
    "--io-dump-budget",
    "io_dump_budget_mb",
    type=int,
    default=None,
    metavar="MB",
    help=with_default("MiB of tensors one run may expose.", DiffOptions, "io_dump_budget_mb"),
)
@click.option("--report-json", metavar="FILE", default=None, help="Write the comparison as JSON.")
@common_options
@click.pass_context
def mgediff_command(ctx: click.Context, a: str, b: str, verbose: int, quiet: bool | None, **values: Any) -> int:
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
    from ..differ import diff

    options = DiffOptions(
        specs=values["specs"],
        data=data_options_from(ctx, values),
        **given(ctx, values, ["maxerr", "provider", "io_dump_budget_mb", "report_json"]),
    )
    report = diff(a, b, options)
    print_diff(report, verbose)
    return report.exit_code
