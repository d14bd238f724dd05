"""``mgedump``'s own flags: the bound recorded in the bundle, what else it writes, calibration data."""

from __future__ import annotations

from typing import Any

import click

from ...base.bounds import DEFAULT_MAXERR, parse_bounds
from ...options import PackOptions
from . import FILE, INT, Decorator, apply, comma_list, given, path_option, switch
from .data import data_from, data_options
from .optimize import optimize_from, optimize_options

NAMES = ("no_assert", "silent", "model_out", "embed_io_dump", "target_runtime")


def maxerr_option(help: str) -> Decorator:
    """``--maxerr X`` and ``--maxerr OUTPUT:X``, repeatable (:func:`~mgedump.base.bounds.parse_bounds`)."""
    return click.option("--maxerr", "maxerr", metavar="[OUTPUT:]X", multiple=True, default=None, help=help)


def error_stat_option(help: str) -> Decorator:
    """``--error-stat STAT`` and ``--error-stat OUTPUT:STAT``, repeatable (:func:`~mgedump.base.bounds.parse_bounds`;
    docs/assertion.md#error-statistics)."""
    return click.option("--error-stat", "error_stat", metavar="[OUTPUT:]STAT", multiple=True, default=None, help=help)


pack_options_flags = apply(
    [
        data_options,
        maxerr_option(
            "AssertEqual threshold recorded in the bundle; OUTPUT:X for one output (repeatable).  "
            f"[default: {DEFAULT_MAXERR}]"
        ),
        error_stat_option(
            "The statistic of each output's element errors that --maxerr bounds: max (default), p99, mean or "
            "median; OUTPUT:STAT for one output (repeatable). Recorded in the bundle; mgerun applies it."
        ),
        click.option(
            "--variants",
            "variants",
            metavar="LIST",
            default=None,
            help="Several variants of the model in one bundle, each proved: a comma list of fp32, ioc16, io16xc32, "
            "int8, int8-dynamic, or auto (every one this model can have). One that misses --maxerr is left out with "
            "its reason; mgerun --fitting picks the fastest on the target (docs/fitting.md).",
        ),
        switch("--no-assert", "no_assert", "Store no expected outputs: mgerun only runs and times."),
        click.option("--silent", "silent", is_flag=True, default=None, help="Record that mgerun prints failures only."),
        optimize_options,
        click.option(
            "--calibrate",
            "calibrate",
            metavar="SPEC",
            multiple=True,
            default=None,
            type=FILE,
            help="With --quantize int8 (static): calibrate the activation ranges on this data (repeatable; the -d "
            "grammar: files, images, @lists, generators) instead of the test cases.",
        ),
        switch(
            "--output-strip-info",
            "strip_info",
            "Also write OUT.json (operators, dtypes) and onnxruntime's reduced-build config.",
        ),
        path_option(
            "--output-model",
            "model_out",
            "Also write the bundled model (optimised, converted or quantized) as a plain ONNX file; its "
            "external data, if any, beside it as model.onnx.data.",
            output=True,
        ),
        click.option(
            "--target-runtime",
            "target_runtime",
            metavar="X.Y",
            default=None,
            help="The onnxruntime version on the target (e.g. 1.17): write the model at the newest IR and opsets it "
            "loads, proved like any rewrite; an operator it lacks is refused by name.",
        ),
        click.option(
            "--embed-io-dump",
            "embed_io_dump",
            type=INT,
            is_flag=False,
            flag_value=1,
            default=None,
            metavar="[N]",
            help="Store every tensor of the model as given on the first N test cases (default 1) in the bundle: "
            "mgerun then names the node where a failing test case first diverges.",
        ),
    ]
)


def parse_variants(text: str) -> tuple[str, ...]:
    """``--variants fp32,int8`` as names (checked by the pack against the precision modes it knows).

    Raises:
        UsageError: no name in it.
    """
    return comma_list("--variants", text, "fp32,ioc16,int8 or auto")


def pack_options(values: dict[str, Any], output: str) -> PackOptions:
    """What the flags ask ``mgedump`` to pack into ``output``."""
    cases, data, _ = data_from(values)
    bounds = parse_bounds(values.pop("maxerr", None) or (), values.pop("error_stat", None) or ())
    chosen = given(values, NAMES)
    calibrate = tuple(values.pop("calibrate", None) or ())
    variants = values.pop("variants", None)
    return PackOptions(
        cases=cases,
        data=data,
        bounds=bounds,
        optimize=optimize_from(values),
        calibrate=calibrate,
        strip_info=f"{output}.json" if values.pop("strip_info", None) else None,
        variants=parse_variants(variants) if variants is not None else (),
        **chosen,
    )
