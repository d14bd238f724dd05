"""``mgedump MODEL -d SPEC -o OUT``: pack a model and its test cases into a bundle."""

from __future__ import annotations

from typing import Any

import click

from ..errors import UsageError
from ..options import ENABLE_FLAGS, PackOptions
from .common import CONTEXT, common_options, data_options, data_options_from, given, setup, with_default
from .output import print_packed


def optimize_options(f: Any) -> Any:
    """``--optimize-for-inference`` and the ``--enable-*`` flags (DESIGN section 5), from the one flag table."""
    for flag in reversed(ENABLE_FLAGS):
        aliases = ["--" + alias.replace("_", "-") for alias in flag.aliases]
        f = click.option(flag.option, *aliases, flag.name, is_flag=True, default=None, help=flag.help)(f)
    return click.option(
        "--optimize-for-inference",
        is_flag=True,
        default=None,
        help="Portable rewrites: constant folding, Identity/Dropout removal, BatchNorm and bias folded into Conv/Gemm.",
    )(f)


@click.command(context_settings=CONTEXT)
@click.argument("model", metavar="MODEL")
@click.option("-o", "--output", required=True, metavar="OUT", help="The bundle to write (e.g. model.mgetest).")
@data_options
@click.option(
    "--maxerr",
    type=float,
    default=None,
    help=with_default("AssertEqual threshold recorded in the bundle.", PackOptions, "maxerr"),
)
@click.option("--no-assert", is_flag=True, default=None, help="Store no expected outputs: mgerun only runs and times.")
@click.option("--silent", is_flag=True, default=None, help="Record that mgerun prints failures only.")
@optimize_options
@click.option(
    "--discard-var-name",
    is_flag=True,
    default=None,
    help="Rename internal tensors and weights, drop node names and doc strings.",
)
@click.option(
    "--output-strip-info",
    is_flag=True,
    default=None,
    help="Also write OUT.json (operators, dtypes) and onnxruntime's reduced-build config.",
)
@click.option(
    "--fp32-nodes",
    metavar="PATTERN[,PATTERN]",
    default=None,
    help="With --enable-ioc16/--enable-io16xc32: keep these nodes float32 (globs of node names or op types, "
    "e.g. 'Softmax,*/ln/*').",
)
@click.option(
    "--embed-io-dump",
    type=int,
    is_flag=False,
    flag_value=1,
    default=None,
    metavar="[N]",
    help="Store every tensor of the model as given on the first N test cases (default 1) in the bundle: "
    "mgerun then names the node where a failing test case first diverges.",
)
@common_options
@click.pass_context
def mgedump_command(
    ctx: click.Context, model: str, output: str, verbose: int, quiet: bool | None, **values: Any
) -> int:
    """Pack MODEL (ONNX) with test cases from -d into one bundle OUT.

    \b
    Examples:
      mgedump model.onnx -d "#rand(0,255)" -o model.mgetest
      mgedump model.onnx -d cat.jpg -d dog.jpg --resize-input --input-transform "data/255" -o model.mgetest
      mgedump model.onnx -d "input:0:#rand(0,1);len:#const(7)" -o model.mgetest
      mgedump model.onnx -d @testcases.txt -o model.mgetest
    """
    setup(verbose, quiet, "mgedump")
    from ..options import OptimizeOptions
    from ..packer import pack

    flags = [flag.name for flag in ENABLE_FLAGS]
    chosen = given(ctx, values, ["optimize_for_inference", "discard_var_name", *flags])
    if values["fp32_nodes"] is not None:
        chosen["fp32_nodes"] = values["fp32_nodes"].split(",")
        if not any(p.strip() for p in chosen["fp32_nodes"]):
            raise UsageError(f"--fp32-nodes {values['fp32_nodes']!r} names no node pattern (e.g. 'Softmax,*/ln/*')")
    optimize = OptimizeOptions.from_flags(**chosen)
    options = PackOptions(
        specs=values["specs"],
        data=data_options_from(ctx, values),
        optimize=optimize,
        strip_info=f"{output}.json" if values["output_strip_info"] else None,
        **given(ctx, values, ["maxerr", "no_assert", "silent", "embed_io_dump"]),
    )
    result = pack(model, output, options)
    if not quiet:
        print_packed(output, result)
    return 0
