"""``mgerun``'s flags for many bundles on many machines: ``--shard``, ``--shard-durations``, ``--jobs``,
``--jobs-timing`` and ``--merge``, turned into :class:`~mgedump.options.SpreadOptions` (docs/verify.md)."""

from __future__ import annotations

from typing import Any

import click

from ...base.errors import UsageError
from ...base.numbers import parse_int
from ...options import JOBS_TIMINGS, MAX_JOBS, SpreadOptions
from . import FILE, apply, given

NAMES = ("shard", "shard_durations", "jobs_timing")

spread_options_flags = apply(
    [
        click.option(
            "--shard",
            "shard",
            metavar="I/N|auto|auto/N",
            default=None,
            help="Check only shard I of N (from 1), stable by each bundle's path; auto: GitLab's CI_NODE_INDEX and "
            "CI_NODE_TOTAL; auto/N: Kubernetes' JOB_COMPLETION_INDEX (from 0) or GitLab's index.",
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
            help="Check N bundles at once in worker processes, each one bundle at a time (auto: one per core).",
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


def spread_options(values: dict[str, Any]) -> tuple[SpreadOptions, bool]:
    """How the flags ask ``mgerun`` to spread the bundles, and whether it merges reports instead."""
    merge = bool(values.pop("merge", None))
    jobs = values.pop("jobs", None)
    chosen = given(values, NAMES)
    if jobs is not None:
        chosen["jobs"] = _jobs(jobs)
    return SpreadOptions(**chosen), merge


def _jobs(value: str) -> int | str:
    if value.strip() == "auto":
        return "auto"
    try:
        return parse_int(value, "-j")
    except UsageError:
        raise UsageError(f"-j takes a count from 1 to {MAX_JOBS}, or auto; got {value!r}") from None
