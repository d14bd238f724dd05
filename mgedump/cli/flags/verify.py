"""``mgerun``'s own flags: how it verifies and times, and the reports it writes."""

from __future__ import annotations

from typing import Any

import click

from ...base.bounds import parse_bounds
from ...base.errors import UsageError
from ...options import EXECUTION_MODES, GRAPH_OPT_LEVELS, VerifyOptions
from . import apply, choice_option, given, path_option, stating, switch, value_option
from .data import data_from, data_options
from .pack import maxerr_option

NAMES = (
    "silent",
    "no_assert",
    "iters",
    "warmup",
    "duration_s",
    "concurrency",
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
    "variant",
    "execution_mode",
    "fitting",
    "fitting_out",
    "fitting_budget_s",
    "config",
)


def io_dump_budget(help: str, cls: type) -> Any:
    """``--io-dump-budget MB``: how much of a run's tensors one run may expose (mgerun and mgediff)."""
    return click.option(
        "--io-dump-budget",
        "io_dump_budget_mb",
        type=int,
        metavar="MB",
        default=None,
        help=stating(help, cls, "io_dump_budget_mb"),
    )


verify_options_flags = apply(
    [
        data_options,
        maxerr_option(
            "Override the bundle's AssertEqual thresholds (every output's); OUTPUT:X for one output (repeatable)."
        ),
        click.option("--silent", "silent", is_flag=True, default=None, help="Print failures only."),
        click.option("--no-assert", "no_assert", is_flag=True, default=None, help="Run and time only; check nothing."),
        click.option(
            "--iter", "iters", type=int, default=None, help=stating("Timed runs per test case.", VerifyOptions, "iters")
        ),
        click.option(
            "--warmup-iter",
            "warmup",
            type=int,
            default=None,
            help=stating("Untimed runs before timing.", VerifyOptions, "warmup"),
        ),
        click.option(
            "--duration",
            "duration_s",
            type=float,
            metavar="SECONDS",
            default=None,
            help="Time each test case for at least SECONDS (and at least --iter runs).",
        ),
        click.option(
            "--concurrency",
            "concurrency",
            type=int,
            metavar="N",
            default=None,
            help=stating(
                "Threads issuing runs on the one session at once: latency and throughput under load.",
                VerifyOptions,
                "concurrency",
            ),
        ),
        click.option(
            "--thread",
            "threads",
            type=int,
            default=None,
            help="onnxruntime intra-op threads (default: onnxruntime's choice).",
        ),
        value_option(
            "--provider", "provider", "NAME", "Execution provider, e.g. CPU or CUDAExecutionProvider (default CPU)."
        ),
        choice_option(
            "--graph-opt",
            "graph_opt",
            GRAPH_OPT_LEVELS,
            "onnxruntime graph optimisation level (default: onnxruntime's, all).",
        ),
        path_option("--profile", "profile", "Write onnxruntime's profile (JSON) to FILE.", output=True),
        path_option(
            "--bin-out-dump", "bin_out_dump", "Write every output as DIR/test_data_set_N/NAME.npy.", metavar="DIR"
        ),
        click.option(
            "--repeat-sweep",
            "repeat_sweep",
            metavar="N,N,...",
            default=None,
            help="Also time each test case with its inputs repeated N times along axis 0.",
        ),
        path_option("--report-json", "report_json", "Write a machine-readable report (docs/reports.md).", output=True),
        path_option("--junit-xml", "junit_xml", "Write a JUnit XML report (for CI test reporters).", output=True),
        path_option(
            "--report-html",
            "report_html",
            "Write a self-contained HTML report with plots (no network needed to view it).",
            output=True,
        ),
        path_option(
            "--io-dump", "io_dump", "Write every tensor of every test case into DIR (an io dump).", metavar="DIR"
        ),
        io_dump_budget("MiB of tensors one run may expose; beyond it a test case runs in parts.", VerifyOptions),
        value_option(
            "--variant",
            "variant",
            "NAME",
            "Of a bundle of several variants (mgedump --variants), run and time this one (default: every variant).",
        ),
        choice_option(
            "--execution-mode",
            "execution_mode",
            EXECUTION_MODES,
            "onnxruntime's execution of the graph: sequential (its default) or parallel branches.",
        ),
        switch(
            "--fitting",
            "fitting",
            "Verify every variant, time the passing ones under the settings this machine offers (providers, "
            "threads, graph optimisation, execution mode) and run the fastest proven one (docs/fitting.md).",
        ),
        path_option(
            "--fitting-out",
            "fitting_out",
            "With --fitting: write the choice (variant and session settings, JSON) to FILE, for --config.",
            output=True,
        ),
        click.option(
            "--fitting-budget",
            "fitting_budget_s",
            type=float,
            metavar="SECONDS",
            default=None,
            help=stating("With --fitting: the seconds the whole search may take.", VerifyOptions, "fitting_budget_s"),
        ),
        path_option(
            "--config", "config", "Run exactly the choice --fitting-out wrote: its variant with its session settings."
        ),
    ]
)


def parse_sweep(value: str) -> tuple[int, ...]:
    """``--repeat-sweep 1,2,4,8`` as batch sizes.

    Raises:
        UsageError: not a comma-separated list of whole numbers.
    """
    try:
        return tuple(int(part) for part in value.split(","))
    except ValueError:
        raise UsageError(
            f"--repeat-sweep {value!r} is not a comma-separated list of batch sizes, e.g. 1,2,4,8"
        ) from None


def verify_options(values: dict[str, Any]) -> tuple[VerifyOptions, list[str]]:
    """How the flags ask ``mgerun`` to verify, and the data flags given (they apply to a plain model only)."""
    cases, data, data_flags = data_from(values)
    bounds = parse_bounds(values.pop("maxerr", None) or ())
    sweep = values.pop("repeat_sweep", None)
    chosen = given(values, NAMES)
    options = VerifyOptions(
        cases=cases,
        data=data,
        bounds=bounds,
        repeat_sweep=parse_sweep(sweep) if sweep is not None else (),
        **chosen,
    )
    return options, data_flags
