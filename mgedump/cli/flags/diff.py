"""``mgediff``'s own flags."""

from __future__ import annotations

from typing import Any

import click

from ...base.bounds import DEFAULT_MAXERR
from ...options import FLOAT16_MAXERR, DiffOptions
from . import FLOAT, apply, given, path_option, value_option
from .data import data_from, data_options
from .verify import io_dump_budget

diff_options_flags = apply(
    [
        data_options,
        click.option(
            "--maxerr",
            "maxerr",
            type=FLOAT,
            default=None,
            help=f"AssertEqual threshold per tensor (default: {DEFAULT_MAXERR:g}; {FLOAT16_MAXERR:g} when either "
            "side holds float16).",
        ),
        click.option(
            "--provider",
            "provider",
            metavar="NAME",
            default=None,
            help="Execution provider for the runs (default CPU).",
        ),  # fmt: skip
        io_dump_budget("MiB of tensors one run may expose.", DiffOptions),
        value_option(
            "--variant",
            "variant",
            "NAME",
            "Of a bundle of several variants (mgedump --variants), run this one (a bundle of several needs it).",
        ),
        path_option("--report-json", "report_json", "Write the comparison as JSON.", output=True),
    ]
)


def diff_options(values: dict[str, Any]) -> DiffOptions:
    """How the flags ask ``mgediff`` to compare."""
    cases, data, _ = data_from(values)
    return DiffOptions(
        cases=cases, data=data, **given(values, ("maxerr", "provider", "io_dump_budget_mb", "variant", "report_json"))
    )
