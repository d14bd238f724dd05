"""``mgedump MODEL -d SPEC -o OUT``: pack a model and its test cases into a bundle."""

from __future__ import annotations

from typing import Any

import click

from ..base.deps import require, require_installed
from .common import CONTEXT, common_options, setup
from .flags import OUTPUT
from .flags.pack import pack_options, pack_options_flags
from .output import print_packed
from .status import Status


@click.command(context_settings=CONTEXT)
@click.argument("model", metavar="MODEL", type=click.Path())
@click.option(
    "-o", "--output", required=True, metavar="OUT", type=OUTPUT, help="The bundle to write (e.g. model.mgetest)."
)
@pack_options_flags
@common_options
def mgedump_command(model: str, output: str, verbose: int, quiet: bool | None, **values: Any) -> int:
    """Pack MODEL (ONNX) with test cases from -d into one bundle OUT.

    \b
    Examples:
      mgedump model.onnx -d "#rand(0,255)" -o model.mgetest
      mgedump model.onnx -d cat.jpg -d dog.jpg --resize-input --input-transform "data/255" -o model.mgetest
      mgedump model.onnx -d "input:0:#rand(0,1);len:#const(7)" -o model.mgetest
      mgedump model.onnx -d @testcases.txt -o model.mgetest
    """
    setup(verbose, quiet, "mgedump")
    require_installed("onnx", purpose="packing a model")  # imported by the paths that rewrite the model, not here
    require("onnxruntime", purpose="packing a model")
    from ..commands.pack import pack

    options = pack_options(values, output)
    with Status("mgedump", enabled=not quiet) as status:
        result = pack(model, output, options, on_stage=status)
    if not quiet:
        print_packed(output, result)
    return 0
