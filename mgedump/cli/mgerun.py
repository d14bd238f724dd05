"""``mgerun BUNDLE``: verify every test case of a bundle and time the model."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..options import GRAPH_OPT_LEVELS, VerifyOptions
from .common import CONTEXT, DATA_FIELDS, common_options, data_options, data_options_from, given, setup, with_default
from .output import ProgressBar, RunPrinter

VERIFY_FIELDS = (
    "maxerr",
    "silent",
    "no_assert",
    "iters",
    "warmup",
    "threads",
    "provider",
    "graph_opt",
    "profile",
    "bin_out_dump",
    "report_json",
    "junit_xml",
    "report_html",
    "io_dump",
    "io_dump_budget_mb",
    "duration_s",
    "concurrency",
)


def parse_sweep(value: str | None) -> tuple[int, ...]:
    """``--repeat-sweep 1,2,4,8`` as batch sizes."""
    if not value:
        return ()
    try:
        sizes = tuple(int(part) for part in value.split(","))
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a comma-separated list of batch sizes, e.g. 1,2,4,8", param_hint="'--repeat-sweep'"
        ) from None
    if not sizes:
        raise click.BadParameter("give at least one batch size", param_hint="'--repeat-sweep'")
    return sizes


@click.command(context_settings=CONTEXT)
@click.argument("paths", metavar="BUNDLE_OR_MODEL...", nargs=-1)
@data_options
@click.option("--maxerr", type=float, default=None, help="Override the bundle's AssertEqual threshold.")
@click.option("--silent", is_flag=True, default=None, help="Print failures only.")
@click.option("--no-assert", is_flag=True, default=None, help="Run and time only; check nothing.")
@click.option(
    "--iter", "iters", type=int, default=None, help=with_default("Timed runs per test case.", VerifyOptions, "iters")
)
@click.option(
    "--warmup-iter",
    "warmup",
    type=int,
    default=None,
    help=with_default("Untimed runs before timing.", VerifyOptions, "warmup"),
)
@click.option(
    "--duration",
    "duration_s",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Time each test case for at least SECONDS (and at least --iter runs).",
)
@click.option(
    "--concurrency",
    type=int,
    default=None,
    metavar="N",
    help=with_default(
        "Threads issuing runs on the one session at once: latency and throughput under load.",
        VerifyOptions,
        "concurrency",
    ),
)
@click.option(
    "--thread", "threads", type=int, default=None, help="onnxruntime intra-op threads (default: onnxruntime's choice)."
)
@click.option(
    "--provider",
    metavar="NAME",
    default=None,
    help="Execution provider, e.g. CPU or CUDAExecutionProvider (default CPU).",
)
@click.option(
    "--graph-opt",
    type=click.Choice(GRAPH_OPT_LEVELS),
    default=None,
    help="onnxruntime graph optimisation level (default: onnxruntime's, all).",
)
@click.option("--profile", metavar="FILE", default=None, help="Write onnxruntime's profile (JSON) to FILE.")
@click.option("--bin-out-dump", metavar="DIR", default=None, help="Write every output as DIR/test_data_set_N/NAME.npy.")
@click.option(
    "--repeat-sweep",
    metavar="N,N,...",
    default=None,
    help="Also time each test case with its inputs repeated N times along axis 0.",
)
@click.option(
    "--report-json", metavar="FILE", default=None, help="Write a machine-readable report (schema in the README)."
)
@click.option("--junit-xml", metavar="FILE", default=None, help="Write a JUnit XML report (for CI test reporters).")
@click.option(
    "--report-html",
    metavar="FILE",
    default=None,
    help="Write a self-contained HTML report with plots (no network needed to view it).",
)
@click.option(
    "--io-dump", metavar="DIR", default=None, help="Write every tensor of every test case into DIR (an io dump)."
)
@click.option(
    "--io-dump-budget",
    "io_dump_budget_mb",
    type=int,
    default=None,
    metavar="MB",
    help=with_default(
        "MiB of tensors one run may expose; beyond it a test case runs in parts.", VerifyOptions, "io_dump_budget_mb"
    ),
)
@common_options
@click.pass_context
def mgerun_command(ctx: click.Context, paths: tuple[str, ...], verbose: int, quiet: bool | None, **values: Any) -> int:
    """Verify every test case of each BUNDLE and time it; exit with the worst outcome (1: a mismatch, 2: bad input).

    A folder stands for its *.mgetest bundles. With -d, BUNDLE_OR_MODEL is one
    plain ONNX model: run and time it on that data.

    \b
    Examples:
      mgerun model.mgetest
      mgerun model.mgetest --iter 100 --warmup-iter 5 --report-json report.json
      mgerun models/ --junit-xml junit.xml --report-html report.html
      mgerun model.onnx -d "#rand(0,255)" --thread 1 --concurrency 2 --duration 10
      mgerun --repeat-sweep 1,2,4,8 model.onnx -d cat.jpg
    """
    setup(verbose, quiet, "mgerun")
    from ..errors import UsageError
    from ..runs import expand_paths, verify_all
    from ..verifier import is_plain_model

    data = given(ctx, values, DATA_FIELDS)
    options = VerifyOptions(
        specs=values["specs"],
        data=data_options_from(ctx, values),
        repeat_sweep=parse_sweep(values["repeat_sweep"]),
        **given(ctx, values, VERIFY_FIELDS),
    )
    bundles = expand_paths(paths)
    if data and not all(is_plain_model(path, options) for path in bundles):
        flags = ", ".join("--" + name.removesuffix("s").replace("_", "-") for name in data)
        verb = "applies" if len(data) == 1 else "apply"
        raise UsageError(f"{flags} {verb} to a plain model with -d, not a bundle")
    many = len(bundles) > 1
    printer = RunPrinter(verbose, many)
    progress = ProgressBar() if sys.stderr.isatty() and not quiet else None
    summary = verify_all(
        bundles,
        options,
        on_start=printer.start,
        on_case=printer.case,
        on_bundle=printer.bundle,
        progress=progress,
    )
    printer.total(summary)
    return summary.exit_code
