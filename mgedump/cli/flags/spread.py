"""``mgerun``'s flags for many bundles on many machines: ``--shard``, ``--shard-durations``, ``--jobs``,
``--jobs-timing`` and ``--merge``, turned into :class:`~mgedump.options.SpreadOptions` (docs/verify.md)."""

from __future__ import annotations

from typing import Any

import click

from ...base.errors import UsageError
from ...base.numbers import parse_float, parse_int
from ...options import JOBS_TIMINGS, MAX_JOBS, GateOptions, SpreadOptions
from . import FILE, apply, given

NAMES = ("shard", "shard_durations", "jobs_timing", "run_id")

spread_options_flags = apply(
    [
        click.option(
            "--shard",
            "shard",
            metavar="I/N|auto|auto/N",
            default=None,
            help="Check only shard I of N (from 1), stable by each bundle's path; auto: the CI's parallel-job "
            "variables (GitLab, CircleCI, Buildkite, Azure Pipelines, Bitbucket); auto/N: Kubernetes' "
            "JOB_COMPLETION_INDEX (from 0) first.",
        ),
        click.option(
            "--run-id",
            "run_id",
            metavar="ID",
            default=None,
            help="The run's identity, recorded in the report (default: the CI's, GITHUB_RUN_ID, CI_PIPELINE_ID, ...); "
            "--merge refuses reports of another run.",
        ),
        click.option(
            "--max-latency",
            "max_latency",
            metavar="[CASE:]MS",
            multiple=True,
            default=(),
            help="Latency gate: fail (exit 3) a test case whose percentile (--latency-percentile) is over MS beyond "
            "the noise; CASE: one test case's limit (repeatable).",
        ),
        click.option(
            "--latency-percentile",
            "latency_percentile",
            type=click.Choice(("p50", "p90", "p99")),
            default=None,
            help="What the latency gate compares: p50, p90 (the default) or p99.",
        ),
        click.option(
            "--baseline",
            "baseline",
            metavar="REPORT",
            type=FILE,
            default=None,
            help="Latency gate: compare each test case with this earlier --report-json of the same bundles.",
        ),
        click.option(
            "--max-slowdown",
            "max_slowdown",
            metavar="R",
            default=None,
            help="With --baseline: fail (exit 3) a test case slower than R times the baseline beyond the noise (1.10).",
        ),
        click.option(
            "--timeout",
            "timeout_s",
            metavar="SECONDS",
            default=None,
            help="Fail a bundle still running after SECONDS (its worker process is stopped) and go on with the rest.",
        ),
        click.option(
            "--shard-durations",
            "shard_durations",
            metavar="REPORT",
            type=FILE,
            default=None,
            help="Balance the shards by the times in this earlier --report-json (the stable hash where it has none).",
        ),
        click.option(
            "-j",
            "--jobs",
            "jobs",
            metavar="N|auto",
            default=None,
            help="Check N bundles at once in worker processes, each one bundle at a time (auto: one per CPU this process may use).",
        ),
        click.option(
            "--jobs-timing",
            "jobs_timing",
            type=click.Choice(JOBS_TIMINGS),
            default=None,
            help="With --jobs over 1: time nothing (none, the default), or each bundle alone afterwards (serial).",
        ),
        click.option(
            "--merge",
            "merge",
            is_flag=True,
            default=None,
            help="Merge the JSON reports given (of the shards of one run) into the reports asked for.",
        ),
    ]
)


def gate_options(values: dict[str, Any]) -> GateOptions:
    """The latency gate the flags ask for."""
    limits = []
    for text in values.pop("max_latency", None) or ():
        case, sep, ms = text.rpartition(":")
        index = parse_int(case, "--max-latency CASE") if sep else None
        limits.append((index, parse_float(ms, "--max-latency MS")))
    slowdown = values.pop("max_slowdown", None)
    return GateOptions(
        max_latency=tuple(limits),
        latency_percentile=values.pop("latency_percentile", None) or "p90",
        baseline=values.pop("baseline", None),
        max_slowdown=None if slowdown is None else parse_float(slowdown, "--max-slowdown"),
    )


def spread_options(values: dict[str, Any]) -> tuple[SpreadOptions, bool]:
    """How the flags ask ``mgerun`` to spread the bundles, and whether it merges reports instead."""
    merge = bool(values.pop("merge", None))
    jobs = values.pop("jobs", None)
    chosen = given(values, NAMES)
    if jobs is not None:
        chosen["jobs"] = _jobs(jobs)
    timeout = values.pop("timeout_s", None)
    if timeout is not None:
        chosen["timeout_s"] = parse_float(timeout, "--timeout")
    return SpreadOptions(**chosen), merge


def _jobs(value: str) -> int | str:
    if value.strip() == "auto":
        return "auto"
    try:
        return parse_int(value, "-j")
    except UsageError:
        raise UsageError(f"-j takes a count from 1 to {MAX_JOBS}, or auto; got {value!r}") from None
