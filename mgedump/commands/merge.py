"""``mgerun --merge REPORT.json...``: the JSON reports of the shards of one run merged into one report, written as
JSON, JUnit XML and HTML as if one machine had checked every bundle (:mod:`mgedump.report.merge`).

Every report is read with every field checked (:mod:`mgedump.report.checked`): a damaged or crafted report is
one line naming it, exit code 2, and nothing is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..base.errors import UsageError
from ..base.naming import option_name
from ..options import VerifyOptions
from ..report.checked import read_report
from ..report.formats import check_known, formats
from ..report.merge import merge
from ..report.schema import RunReport
from .verify import run_outputs
from .verify_many import write_report_files


def merge_reports(paths: Sequence[str], options: VerifyOptions | None = None) -> RunReport:
    """Merge the JSON reports at ``paths`` and write the reports ``options`` asks for (in the formats of
    :mod:`mgedump.report.formats`; nothing else applies).

    Returns:
        The merged report; its ``exit_code`` is the worst of every bundle's.

    Raises:
        UsageError: no report, an option that does not apply, outputs that collide with the inputs.
        ReportError: a report that cannot be read, or whose fields are not a report's.
        MergeError: reports that are not of one run (:mod:`mgedump.report.merge`).
    """
    options = options or VerifyOptions()
    check_known(options)
    _check_options(options)
    if not paths:
        raise UsageError(f"{option_name('merge')} takes the JSON reports to merge")
    outputs = run_outputs(options)
    outputs.check(paths)
    given: dict[str, str] = {}
    reports = []
    for path in paths:
        report, _ = read_report(path)
        if path in given:
            raise UsageError(f"report {path} is given twice")
        given[path] = path
        reports.append((path, report))
    merged = merge(reports)
    write_report_files(merged, options, paths)
    return merged


def _check_options(options: VerifyOptions) -> None:
    """Refuse what does not apply to merging: everything but the reports to write."""
    reports = [entry.option for entry in formats()]
    for field in dataclasses.fields(VerifyOptions):
        if field.name in reports or field.name == "reports":
            continue
        if getattr(options, field.name) != getattr(VerifyOptions(), field.name):
            raise UsageError(
                f"{option_name(field.name)} does not apply to {option_name('merge')}, which merges reports "
                f"(it takes {', '.join(option_name(name) for name in reports)})"
            )
