"""What a report says of how its bundles were spread: the shard a call checked, its worker processes and how it
timed them, and for a merged report, each report merged (one line each, as the console and the HTML page show)."""

from __future__ import annotations

from typing import Any

from ..model.environment import summary as environment_summary

TIMINGS = {
    "alone": "each timed as it was checked, with nothing else running",
    "serial": "checked in parallel, then each timed alone, one after another",
    "none": "checked in parallel, not timed (figures taken beside other jobs are not comparable)",
}


def shard_line(shard: dict[str, Any]) -> str:
    """``shard 2 of 4 (GitLab's CI_NODE_INDEX=2 and CI_NODE_TOTAL=4), by hash: 50 of 200 bundle(s)``."""
    return (
        f"shard {shard.get('index')} of {shard.get('total')} ({shard.get('from')}), by {shard.get('by')}: "
        f"{shard.get('bundles')} of {shard.get('of')} bundle(s)"
    )


def jobs_line(jobs: dict[str, Any]) -> str:
    """``2 worker processes: checked in parallel, not timed (...)``."""
    workers = jobs.get("workers")
    return f"{workers} worker process(es): {TIMINGS.get(str(jobs.get('timing')), str(jobs.get('timing')))}"


def part_line(index: int, part: dict[str, Any]) -> str:
    """One report merged: where it came from, its shard and jobs, where it ran."""
    line = f"part {index + 1}: {part.get('report')}, {part.get('bundles')} bundle(s), exit {part.get('exit_code')}"
    if part.get("shard"):
        line += f"; {shard_line(part['shard'])}"
    if part.get("jobs"):
        line += f"; {jobs_line(part['jobs'])}"
    if part.get("environment"):
        line += f"; ran with {environment_summary(part['environment'])}"
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
