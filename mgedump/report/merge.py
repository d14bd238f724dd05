"""Reports merged into one (``mgerun --merge``): the JSON reports of the shards of one run, as if one machine had
checked every bundle.

The merged report holds every bundle of every report, ordered by its path (the order one call over the folder
gives), with the same names, test cases and verdicts; its exit code is the worst of the reports' and of the
bundles' verdicts (a bundle with a failed test case fails, whatever its own exit code says); ``parts`` lists each report
merged (its file, shard, jobs, exit code and environment), and each bundle's ``part`` says which one ran it, so
JUnit's ``hostname`` and every page say where each bundle ran.

Refused, naming the reports: reports of different versions (mgedump or onnxruntime), reports of different runs
(another run identity, or none beside one) or not of the run merging them (a stale report, or a foreign one), a
bundle in two reports, shards of different runs (another count of shards, of bundles, another list of bundles or
another way of balancing), shards whose bundles
do not add up to the count their paths hold (balanced by different duration reports), a shard given twice or
missing, sharded and unsharded reports together, and a report that is itself merged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..base.errors import EXIT_FAILED, UsageError, worst_exit
from ..base.naming import option_name
from .bundles import BundleRecord
from .schema import RunReport
from .spread import PartRecord

MAX_SHARDS = 100_000  # --shard I/N takes no more


class MergeError(UsageError):
    """Reports that cannot be merged into one (exit code 2)."""


def merge(reports: Sequence[tuple[str, RunReport]], run: dict[str, str] | None = None) -> RunReport:
    """One report of every bundle of ``reports`` ((file, records) pairs, each checked already); ``run``, the
    identity of the run merging them (none: unknown), which every report must carry.

    Raises:
        MergeError: what the module docstring lists.
    """
    if not reports:
        raise MergeError("give the JSON reports to merge")
    for path, report in reports:
        if report.parts:
            raise MergeError(f"{path} is a merged report already: merge the reports it was made of")
    _check_versions(reports)
    common = _check_runs(reports, run)
    reports = _check_shards(reports)
    seen: dict[str, str] = {}
    bundles = []
    parts = []
    for index, (path, report) in enumerate(reports):
        for bundle in report.bundles:
            if bundle.name in seen:
                raise MergeError(f"bundle {bundle.name!r} is in {seen[bundle.name]} and in {path}: checked twice")
            seen[bundle.name] = path
            bundle.part = index
            bundle.exit_code = verdict_of(bundle)
            bundles.append(bundle)
        parts.append(_part(path, report))
    bundles.sort(key=lambda bundle: re.split(r"[\\/]", bundle.source))  # stable: variants keep their order
    return RunReport(
        bundles=bundles,
        # from the verdicts, and never better than a report says of itself
        exit_code=worst_exit([report.exit_code for _, report in reports] + [bundle.exit_code for bundle in bundles]),
        peak_rss_mib=max((r.peak_rss_mib for _, r in reports if r.peak_rss_mib is not None), default=None),
        environment=reports[0][1].environment,
        parts=parts,
        run=common,
    )


def verdict_of(bundle: BundleRecord) -> int:
    """A bundle's exit code as its verdicts give it: a failed output or test case fails the bundle whatever its own
    ``exit_code`` says (a report edited by hand, or written by another verifier, cannot pass a failure)."""
    failed = any(
        not case.passed or case.error is not None or any(not out.passed for out in case.outputs)
        for case in bundle.test_cases
    )
    return max(bundle.exit_code, EXIT_FAILED if failed else 0)


def _part(path: str, report: RunReport) -> PartRecord:
    part: PartRecord = {
        "report": path,
        "bundles": len(report.bundles),
        "exit_code": report.exit_code,
        "peak_rss_mib": report.peak_rss_mib,
        "environment": report.environment,
    }
    if report.run:
        part["run"] = report.run
    if report.shard:
        part["shard"] = report.shard
    if report.jobs:
        part["jobs"] = report.jobs
    return part


def _versions(report: RunReport) -> str:
    env = report.environment or {}
    return f"mgedump {env.get('mgedump') or 'unknown'}, onnxruntime {env.get('onnxruntime') or 'not installed'}"


def _check_versions(reports: Sequence[tuple[str, RunReport]]) -> None:
    groups: dict[str, list[str]] = {}
    for path, report in reports:
        groups.setdefault(_versions(report), []).append(path)
    if len(groups) > 1:
        described = "; ".join(f"{', '.join(paths)} ({versions})" for versions, paths in groups.items())
        raise MergeError(f"the reports are of different versions: {described}")


def _run_text(run: dict[str, str] | None) -> str:
    return "no run identity" if not run else f"run {run.get('id')!r} ({run.get('from')})"


def _check_runs(reports: Sequence[tuple[str, RunReport]], run: dict[str, str] | None) -> dict[str, str] | None:
    """The run every report is of: one identity (or none) for all, and the merging run's when it has one."""
    groups: dict[str | None, list[str]] = {}
    for path, report in reports:
        groups.setdefault((report.run or {}).get("id"), []).append(path)
    if len(groups) > 1:
        described = "; ".join(
            f"{', '.join(paths)} ({_run_text(next(r.run for p, r in reports if p == paths[0]))})"
            for paths in groups.values()
        )
        raise MergeError(
            f"the reports are of different runs: {described}",
            hint="a report left from an earlier run (a shard that wrote none in this one) cannot be merged",
        )
    common = reports[0][1].run
    if run is not None and (common or {}).get("id") != run["id"]:
        raise MergeError(
            f"{', '.join(path for path, _ in reports)}: {_run_text(common)}, not of this run ({_run_text(run)})",
            hint="a shard that wrote no report in this run fails the merge; to merge another run's, give its "
            f"{option_name('run_id')}",
        )
    return common


def _check_shards(reports: Sequence[tuple[str, RunReport]]) -> list[tuple[str, RunReport]]:
    """The reports in the order of their shards, after checking they are the shards of one run."""
    sharded = [(path, report) for path, report in reports if report.shard]
    if not sharded:
        return list(reports)
    if len(sharded) < len(reports):
        alone = next(path for path, report in reports if not report.shard)
        raise MergeError(f"{sharded[0][0]} is a shard, {alone} is not: merge the reports of one sharded run")
    for path, report in sharded:
        assert report.shard is not None
        index, total = report.shard["index"], report.shard["total"]
        if not 1 <= index <= total <= MAX_SHARDS:
            raise MergeError(f"{path} says it is shard {index} of {total}: not a shard {option_name('shard')} makes")
    first_path, first = sharded[0]
    assert first.shard is not None
    keys = (
        ("total", "count of shards"),
        ("of", "count of bundles"),
        ("list", "list of bundles"),
        ("by", "way of balancing"),
    )
    for key, what in keys:
        for path, report in sharded:
            assert report.shard is not None
            if report.shard.get(key) != first.shard.get(key):
                raise MergeError(
                    f"{first_path} and {path} are shards of different runs: another {what} "
                    f"({first.shard.get(key)} and {report.shard.get(key)})"
                )
    by_index: dict[int, str] = {}
    for path, report in sharded:
        assert report.shard is not None
        index = report.shard["index"]
        if index in by_index:
            raise MergeError(f"shard {index} of {first.shard['total']} is in {by_index[index]} and in {path}")
        by_index[index] = path
    for path, report in sharded:  # a shard's count of bundles is the bundles its report holds
        assert report.shard is not None
        held = len({bundle.source for bundle in report.bundles})
        if held != report.shard["bundles"]:
            raise MergeError(f"{path} says its shard checked {report.shard['bundles']} bundle(s), and holds {held}")
    missing = [str(i) for i in range(1, first.shard["total"] + 1) if i not in by_index]
    if missing:
        raise MergeError(
            f"shard(s) {', '.join(missing)} of {first.shard['total']} missing: merge the report of every shard",
            hint="a shard whose job failed before it wrote its report has to run again",
        )
    checked = sum(report.shard["bundles"] for _, report in sharded if report.shard)
    if checked != first.shard["of"]:
        raise MergeError(
            f"the shards checked {checked} bundle(s) of the {first.shard['of']} their paths hold: they did not share "
            "them out alike",
            hint=f"every shard must be given the same {option_name('shard_durations')} report (or none)",
        )
    return sorted(sharded, key=lambda item: item[1].shard["index"] if item[1].shard else 0)
