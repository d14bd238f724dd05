"""``mgedump MODEL -d SPEC -o OUT``: pack a model and its test cases into a bundle."""

from __future__ import annotations

from typing import Any

import click

from ..base.deps import require
from ..options import PackOptions
from .common import CONTEXT, common_options, setup
from .declared import build, declared_options
from .output import print_packed
from .status import Status


@click.command(context_settings=CONTEXT)
@click.argument("model", metavar="MODEL", type=click.Path())
@click.option(
    "-o", "--output", required=True, metavar="OUT", type=click.Path(), help="The bundle to write (e.g. model.mgetest)."
)
@declared_options(PackOptions)
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
    for module in ("onnx", "onnxruntime"):
        require(module, purpose="packing a model")
    from ..commands.pack import pack

    options = build(PackOptions, ctx, values)
    with Status("mgedump", enabled=not quiet) as status:
        result = pack(model, output, options, on_stage=status)
    if not quiet:
        print_packed(output, result)
    return 0
