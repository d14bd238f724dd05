"""``mgerun``'s own flags: how it verifies and times, and the reports it writes."""

from __future__ import annotations

from typing import Any

import click

from ...base.bounds import parse_bounds
from ...base.errors import UsageError
from ...base.numbers import parse_int
from ...model.session import SessionSettings, Setting, settings
from ...options import VerifyOptions
from ...report.formats import ReportFormat, formats
from ..plugin_options import setting_flag
from . import FLOAT, INT, OUTPUT, apply, given, path_option, stated_number, stating, switch, value_option
from .data import data_from, data_options
from .pack import error_stat_option, maxerr_option

NAMES = (
    "silent",
    "no_assert",
    "iters",
    "warmup",
    "duration_s",
    "concurrency",
    "profile",
    "bin_out_dump",
    "io_dump",
    "io_dump_budget_mb",
    "variant",
    "fitting",
    "fitting_out",
    "fitting_budget_s",
    "config",
)


def _session_param(entry: Setting) -> tuple[list[str], dict[str, Any]]:
    """A session setting's click option: its declarations and attributes."""
    attrs: dict[str, Any] = {"default": None, "help": entry.about}
    if entry.choices:
        attrs["type"] = click.Choice(entry.choices)
    else:
        attrs["type"] = {int: INT, float: FLOAT}.get(entry.kind, entry.kind)  # numbers in ASCII digits
        if entry.metavar:
            attrs["metavar"] = entry.metavar
    return [setting_flag(entry), entry.name], attrs


def session_option(name: str) -> Any:
    """The flag of one session setting, as a decorator (for its place in ``--help``)."""
    decls, attrs = _session_param(next(s for s in settings() if s.name == name))
    return click.option(*decls, **attrs)


def io_dump_budget(help: str, cls: type) -> Any:
    """``--io-dump-budget MB``: how much of a run's tensors one run may expose (mgerun and mgediff)."""
    return click.option(
        "--io-dump-budget",
        "io_dump_budget_mb",
        type=INT,
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
        error_stat_option(
            "Override the statistic of the element errors the bundle bounds (max, p99, mean or median; every "
            "output's); OUTPUT:STAT for one output (repeatable). --error-stat max checks the largest error again."
        ),
        click.option("--silent", "silent", is_flag=True, default=None, help="Print failures only."),
        click.option("--no-assert", "no_assert", is_flag=True, default=None, help="Run and time only; check nothing."),
        stated_number("--iter", "iters", "Timed runs per test case.", VerifyOptions),
        stated_number("--warmup-iter", "warmup", "Untimed runs before timing.", VerifyOptions),
        click.option(
            "--duration",
            "duration_s",
            type=FLOAT,
            metavar="SECONDS",
            default=None,
            help="Time each test case for at least SECONDS (and at least --iter runs).",
        ),
        click.option(
            "--concurrency",
            "concurrency",
            type=INT,
            metavar="N",
            default=None,
            help=stating(
                "Threads issuing runs on the one session at once: latency and throughput under load.",
                VerifyOptions,
                "concurrency",
            ),
        ),
        session_option("threads"),
        session_option("provider"),
        session_option("graph_opt"),
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
        session_option("execution_mode"),
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
            type=FLOAT,
            metavar="SECONDS",
            default=None,
            help=stating("With --fitting: the seconds the whole search may take.", VerifyOptions, "fitting_budget_s"),
        ),
        path_option(
            "--config", "config", "Run exactly the choice --fitting-out wrote: its variant with its session settings."
        ),
    ]
)


_REPORT_FLAGS: dict[ReportFormat, click.Option] = {}
REPORTS_BEFORE = "io_dump"  # in --help, the report flags come just before --io-dump


def report_flag(entry: ReportFormat) -> click.Option:
    """The flag of a report format: its option's keyword spelled as a flag (``junit_xml`` is ``--junit-xml``),
    taking the path to write (``-``: standard output, where the format allows it)."""
    if entry not in _REPORT_FLAGS:
        flag = "--" + entry.option.replace("_", "-")
        _REPORT_FLAGS[entry] = click.Option(
            [flag, entry.option], metavar="FILE", type=OUTPUT, default=None, help=entry.help
        )
    return _REPORT_FLAGS[entry]


class VerifyCommand(click.Command):
    """``mgerun``: its flags, the report formats' flags (the registry's as it runs, :mod:`mgedump.report.formats`),
    and one for each session setting registered after it was made (a plugin's); so a format or a setting
    registered after this module was imported has its flag too."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)  # the command's own, then --help
        known = {p.name for p in params}
        late: list[click.Parameter] = []
        for entry in settings():
            if entry.name not in known:
                decls, attrs = _session_param(entry)
                late.append(click.Option(decls, **attrs))
        params = params[:-1] + late + params[-1:]
        at = next(k for k, param in enumerate(params) if param.name == REPORTS_BEFORE)
        return [*params[:at], *(report_flag(entry) for entry in formats()), *params[at:]]


def parse_sweep(value: str) -> tuple[int, ...]:
    """``--repeat-sweep 1,2,4,8`` as batch sizes.

    Raises:
        UsageError: not a comma-separated list of whole numbers.
    """
    try:
        return tuple(parse_int(part, "--repeat-sweep") for part in value.split(","))
    except UsageError:
        raise UsageError(
            f"--repeat-sweep {value!r} is not a comma-separated list of batch sizes, e.g. 1,2,4,8"
        ) from None


def verify_options(values: dict[str, Any]) -> tuple[VerifyOptions, list[str]]:
    """How the flags ask ``mgerun`` to verify, and the data flags given (they apply to a plain model only)."""
    cases, data, data_flags = data_from(values)
    bounds = parse_bounds(values.pop("maxerr", None) or (), values.pop("error_stat", None) or ())
    sweep = values.pop("repeat_sweep", None)
    chosen = given(values, NAMES)
    reports = given(values, [entry.option for entry in formats()])
    session = SessionSettings.given({entry.name: values.pop(entry.name, None) for entry in settings()})
    options = VerifyOptions(
        session=session,
        cases=cases,
        data=data,
        bounds=bounds,
        repeat_sweep=parse_sweep(sweep) if sweep is not None else (),
        reports=reports,
        **chosen,
    )
    return options, data_flags
