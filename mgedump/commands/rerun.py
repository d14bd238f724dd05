"""``mgerun --rerun-failed REPORT``: run again only what failed in an earlier JSON report
(docs/verify.md#stopping-early-and-running-again).

What failed is each bundle entry that could not run (every test case of it again) or whose verdict is a failure
(its failed test cases again, or every one when none is named), keyed by the report's name for it and its variant.
With paths, the bundles they hold are matched by the names this call gives them (the path below the folder given,
as the earlier call named them); without, the failed entries' ``source`` paths are run, under their names of then.
A bundle the earlier run did not reach (``--maxfail``) did not fail, and is not run again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..base.errors import UsageError
from ..base.naming import option_name
from ..report.checked import read_report
from ..report.merge import verdict_of

Key = tuple[str, "str | None"]  # a bundle's name (without its variant) and its variant


@dataclass(frozen=True)
class Failed:
    """What failed in a report: each run by :data:`Key`, with its failed test cases (none: every one), and each
    bundle's path by its name, in the report's order."""

    report: str
    runs: dict[Key, tuple[int, ...] | None] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)


def failed_in(path: str) -> Failed:
    """What failed or could not run in the JSON report at ``path``.

    Raises:
        ReportError: the report cannot be read, or is not one (one line, exit code 2).
    """
    report, _ = read_report(path, "report")
    failed = Failed(path)
    for bundle in report.bundles:
        if bundle.not_run is not None:
            continue
        if bundle.error is None and verdict_of(bundle) == 0:
            continue
        cases = tuple(case.index for case in bundle.failed_cases())
        key = (bundle.base_name, bundle.variant)
        failed.runs[key] = cases if bundle.error is None and cases else None
        failed.sources.setdefault(key[0], bundle.source)
    return failed


def select_failed(
    failed: Failed,
    bundles: Sequence[str],
    names: Sequence[str],
    runs: Sequence[tuple[str, str | None]],
    none_ok: bool = False,
) -> tuple[list[str], list[str], list[tuple[str, str | None]], list[tuple[int, ...] | None]]:
    """The bundles, their names, their runs and each run's test cases to run again (none: every one), of those a
    call found (``names`` what it calls each of ``bundles``).

    Raises:
        UsageError: none of what failed is among them (unless ``none_ok``: a shard may hold none of them).
    """
    name_of = dict(zip(bundles, names, strict=True))
    kept_runs = [(path, variant) for path, variant in runs if (name_of[path], variant) in failed.runs]
    if not kept_runs and not none_ok:
        shown = ", ".join(sorted({name for name, _ in failed.runs})[:5])
        raise UsageError(
            f"{option_name('rerun_failed')} {failed.report}: none of the bundles that failed in it ({shown}) is among "
            "the paths given",
            hint="give the paths the earlier run was given, or none to run the bundles it names",
        )
    kept = {path for path, _ in kept_runs}
    pairs = [(path, name) for path, name in zip(bundles, names, strict=True) if path in kept]
    cases = [failed.runs[(name_of[path], variant)] for path, variant in kept_runs]
    return [p for p, _ in pairs], [n for _, n in pairs], kept_runs, cases
