"""``-d`` and how test data is made: the flags every command has (docs/data-specs.md)."""

from __future__ import annotations

from typing import Any

import click

from ...base.errors import UsageError
from ...base.naming import option_name
from ...base.numbers import parse_int
from ...options import DataOptions
from . import FILE, apply, given, stated_number

DATA_HELP = (
    "Test case: '#rand(MIN,MAX[,dims][,...])', '#randn(MEAN,STD)', '#const(V)', an image, .npy, .npz or .pb file, "
    "'NAME:SOURCE;NAME:SOURCE', or @LIST (one test case per line). Repeatable."
)
NAMES = ("seed", "repeat", "resize_input", "input_transform", "input_shapes")

data_options = apply(
    [
        click.option("-d", "--data", "cases", metavar="SPEC", multiple=True, default=None, type=FILE, help=DATA_HELP),
        stated_number("--seed", "seed", "Seed of the random generators.", DataOptions),
        stated_number("--repeat", "repeat", "Repeat file data N times along axis 0 (batch).", DataOptions),
        click.option(
            "--resize-input", "resize_input", is_flag=True, default=None, help="Resize images to the model's H and W."
        ),
        click.option(
            "--input-transform",
            "input_transform",
            metavar="EXPR",
            default=None,
            help="Python expression of 'data' and 'np' applied to file data, e.g. 'data/255'.",
        ),
        click.option(
            "--input-shape",
            "input_shapes",
            metavar="NAME:d0,d1,...",
            multiple=True,
            default=None,
            help="Fix an input's shape for every source (symbolic dims); the name may be left out for a one-input "
            "model. Repeatable.",
        ),
    ]
)


def parse_input_shape(text: str) -> tuple[str | None, tuple[int, ...]]:
    """``--input-shape NAME:d0,d1,...`` (or ``d0,d1,...`` for a one-input model) as (name, dims).

    The name is everything before the last ``:``, so names that hold ``:``
    (``input:0:1,3,224,224``) work.

    Raises:
        UsageError: the dims are not whole numbers >= 0.
    """
    name, sep, dims = text.rpartition(":")
    try:
        shape = tuple(parse_int(d, "--input-shape") for d in dims.split(","))
    except UsageError:
        shape = ()
    if not shape or any(d < 0 or d >= 1 << 31 for d in shape):
        raise UsageError(f"--input-shape {text!r}: give NAME:d0,d1,... with whole numbers >= 0, e.g. x:1,3,224,224")
    return (name if sep else None), shape


def data_from(values: dict[str, Any]) -> tuple[tuple[str, ...], DataOptions, list[str]]:
    """The test cases, the data options, and the data flags given (even with their default: ``--seed 0``)."""
    cases = tuple(values.pop("cases", None) or ())
    chosen = given(values, NAMES)
    flags = [option_name(name) for name in chosen]
    if "input_shapes" in chosen:
        chosen["input_shapes"] = tuple(parse_input_shape(text) for text in chosen["input_shapes"])
    return cases, DataOptions(**chosen), flags
