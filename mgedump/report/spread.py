"""What a report says of how its bundles were spread: the shard a call checked, its worker processes and how it
timed them, and for a merged report, each report merged (one line each, as the console and the HTML page show).

The records' types, :class:`ShardRecord`, :class:`JobsRecord` and :class:`PartRecord`, are
docs/reports.md, "Shards, jobs and merged reports"; a report read back is checked against them first
(:mod:`.checked`)."""

from __future__ import annotations

from typing import Any, TypedDict

from ..base.jsontypes import JsonObject
from ..model.environment import summary as environment_summary

# "from" is a keyword: the functional form names it
_Shard = TypedDict("_Shard", {"index": int, "total": int, "from": str, "by": str, "bundles": int, "of": int})


class ShardRecord(_Shard, total=False):
    """The shard a call checked: its index of total, where they came from, how the bundles were shared out, how
    many it checked of how many, and the hash of the list of bundles shared out (the same for every shard of a
    run; absent in reports of older versions)."""

    list: str


class _Jobs(TypedDict):
    workers: int
    timing: str


class JobsRecord(_Jobs, total=False):
    """The worker processes of a call and how their bundles were timed; the workers' largest peak memory."""

    worker_peak_rss_mib: float


class _Part(TypedDict):
    report: str
    bundles: int
    exit_code: int
    peak_rss_mib: float | None
    environment: JsonObject | None


class PartRecord(_Part, total=False):
    """A report merged into another: its file, its count of bundles, exit code, peak memory and environment, and
    its run, shard and jobs when it has them."""

    run: dict[str, str]
    shard: ShardRecord
    jobs: JobsRecord


TIMINGS = {
    "alone": "each timed as it was checked, with nothing else running",
    "serial": "checked in parallel, then each timed alone, one after another",
    "none": "checked in parallel, not timed (figures taken beside other jobs are not comparable)",
}


def shard_line(shard: ShardRecord) -> str:
    """``shard 2 of 4 (GitLab's CI_NODE_INDEX=2 and CI_NODE_TOTAL=4), by hash: 50 of 200 bundle(s)``."""
    return (
        f"shard {shard.get('index')} of {shard.get('total')} ({shard.get('from')}), by {shard.get('by')}: "
        f"{shard.get('bundles')} of {shard.get('of')} bundle(s)"
    )


def jobs_line(jobs: JobsRecord) -> str:
    """``2 worker processes: checked in parallel, not timed (...)``."""
    workers = jobs.get("workers")
    return f"{workers} worker process(es): {TIMINGS.get(str(jobs.get('timing')), str(jobs.get('timing')))}"


def part_line(index: int, part: PartRecord) -> str:
    """One report merged: where it came from, its shard and jobs, where it ran."""
    line = f"part {index + 1}: {part.get('report')}, {part.get('bundles')} bundle(s), exit {part.get('exit_code')}"
    if part.get("shard"):
        line += f"; {shard_line(part['shard'])}"
    if part.get("jobs"):
        line += f"; {jobs_line(part['jobs'])}"
    environment = part.get("environment")
    if environment:
        line += f"; ran with {environment_summary(environment)}"
    return line


def spread_lines(report: Any) -> list[str]:
    """The lines of a :class:`~mgedump.report.schema.RunReport`: its shard, its jobs, or its parts."""
    lines = []
    if report.shard:
        lines.append(shard_line(report.shard))
    if report.jobs:
        lines.append(jobs_line(report.jobs))
    if report.parts:
        lines.append(f"merged from {len(report.parts)} report(s):")
        lines += [part_line(k, part) for k, part in enumerate(report.parts)]
    return lines
