"""What a CI engine shows of a run beside the report files (docs/ci.md#what-the-ci-shows): GitHub's job summary,
Markdown appended to the file ``$GITHUB_STEP_SUMMARY`` names, and GitHub's ``::error`` workflow commands, one per
failing test case or bundle, which GitHub shows as annotations on the run and on the file.

Both render from the report's records (:class:`~mgedump.report.schema.RunReport`), so they say what the other
reports say: the same names, the same counts, each failure's reason as :meth:`CaseRecord.reason
<mgedump.report.cases.CaseRecord.reason>` gives it. Text from outside is cleaned for its sink: the summary by
:func:`mgedump.base.text.markdown`, the workflow commands by :func:`mgedump.base.text.terminal` and then escaped as
GitHub's rules for workflow commands say (``%``, ``\\r`` and ``\\n`` in the message; ``:`` and ``,`` too in a
property).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence

from ..base import text
from .schema import BundleRecord, RunReport

MAX_ROWS = 50  # failing rows the summary lists, then one counting the rest (a summary is for reading)
MAX_ANNOTATIONS = 50  # ::error lines printed (GitHub shows only so many of a step); then one counting the rest


def counts(report: RunReport) -> dict[str, int]:
    """The bundles and test cases of a report by outcome: ``bundles``, ``passed``, ``failed``, ``errors`` (could
    not run), ``not_run`` (left by ``--maxfail``), and ``cases``, ``cases_passed``, ``cases_failed``,
    ``cases_errors`` (the model failed to run)."""
    found = dict.fromkeys(
        ("bundles", "passed", "failed", "errors", "not_run", "cases", "cases_passed", "cases_failed", "cases_errors"), 0
    )
    for bundle in report.bundles:
        found["bundles"] += 1
        if bundle.not_run:
            found["not_run"] += 1
            continue
        found["errors" if bundle.error else "passed" if bundle.exit_code == 0 else "failed"] += 1
        for case in bundle.test_cases:
            found["cases"] += 1
            found["cases_errors" if case.error else "cases_passed" if case.passed else "cases_failed"] += 1
    return found


def outcome_text(found: Mapping[str, int]) -> str:
    """The bundles' outcomes as every summary of a run says them: ``P passed, F failed, E could not run`` and, when
    some were left, ``, N not run`` (``found``: the bundle keys of :func:`counts`)."""
    line = f"{found['passed']} passed, {found['failed']} failed, {found['errors']} could not run"
    return line + (f", {found['not_run']} not run" if found["not_run"] else "")


def failures(report: RunReport) -> list[tuple[BundleRecord, str, str]]:
    """Every failure of a report, in its order: (bundle, what failed: ``test case N (...)`` or ``""`` for the bundle
    itself, why), a bundle that could not run as one entry, a failing bundle as one per failed test case."""
    found: list[tuple[BundleRecord, str, str]] = []
    for bundle in report.bundles:
        if bundle.not_run:
            continue
        if bundle.error is not None:
            found.append((bundle, "", f"could not run (exit {bundle.exit_code}): {bundle.error}"))
            continue
        failed = bundle.failed_cases()
        found += [(bundle, case.short_head, case.reason()) for case in failed]
        if bundle.exit_code != 0 and not failed:
            found.append((bundle, "", f"failed (exit {bundle.exit_code})"))
    return found


def step_summary(report: RunReport, gate_lines: Sequence[str] = (), title: str = "mgerun") -> str:
    """The run as a GitHub job summary: the verdict, the counts, a table of what failed and why (the first
    :data:`MAX_ROWS`), the bundles not run, and the latency gate's lines."""
    found = counts(report)
    verdict = "passed" if report.exit_code == 0 else f"FAILED (exit {report.exit_code})"
    lines = [f"### {text.markdown(title)}: {verdict}", ""]
    line = f"{found['bundles']} bundle(s): {outcome_text(found)}"
    line += (
        f"; {found['cases']} test case(s): {found['cases_passed']} passed, {found['cases_failed']} failed, "
        f"{found['cases_errors']} could not run"
    )
    lines += [line, ""]
    failed = failures(report)
    if failed:
        lines += ["| bundle | test case | reason |", "|---|---|---|"]
        for bundle, what, why in failed[:MAX_ROWS]:
            lines.append(f"| {text.markdown(bundle.name)} | {text.markdown(what)} | {text.markdown(why)} |")
        if len(failed) > MAX_ROWS:
            lines.append(f"| and {len(failed) - MAX_ROWS} more | | |")
        lines.append("")
    left = [bundle for bundle in report.bundles if bundle.not_run]
    if left:
        shown = ", ".join(text.markdown(bundle.name) for bundle in left[:MAX_ROWS])
        more = f" and {len(left) - MAX_ROWS} more" if len(left) > MAX_ROWS else ""
        why = (left[0].not_run or "").removeprefix("not run: ")
        lines += [f"Not run ({text.markdown(why)}): {shown}{more}", ""]
    if gate_lines:
        lines += [f"- {text.markdown(gate)}" for gate in gate_lines] + [""]
    return "\n".join(lines) + "\n"


def _data(value: str) -> str:
    """A workflow command's message, escaped as GitHub's rules say."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(value: str) -> str:
    """A workflow command's property value, escaped as GitHub's rules say."""
    return _data(value).replace(":", "%3A").replace(",", "%2C")


def _in_workspace(path: str, workspace: str | None) -> str:
    """A bundle's path as GitHub places an annotation: relative to the workspace (the repository checked out) when
    it is inside it, else as given."""
    if not workspace:
        return path
    try:
        inside = os.path.relpath(os.path.abspath(path), os.path.abspath(workspace))
    except ValueError:  # another drive (Windows)
        return path
    return path if inside == ".." or inside.startswith(".." + os.sep) else inside


def workflow_commands(report: RunReport, workspace: str | None = None) -> list[str]:
    """GitHub's ``::error file=PATH,title=TITLE::MESSAGE`` workflow commands, one per failure (:func:`failures`; the
    first :data:`MAX_ANNOTATIONS`, then one counting the rest); ``PATH`` relative to ``workspace``
    (``GITHUB_WORKSPACE``) when the bundle is inside it."""
    found = failures(report)
    lines = []
    for bundle, what, why in found[:MAX_ANNOTATIONS]:
        title = f"mgerun: {bundle.name}" + (f" {what}" if what else "")
        path = _in_workspace(bundle.source, workspace)
        lines.append(
            f"::error file={_property(text.terminal(path))},title={_property(text.terminal(title))}::"
            f"{_data(text.terminal(why))}"
        )
    if len(found) > MAX_ANNOTATIONS:
        lines.append(f"::error title=mgerun::{len(found) - MAX_ANNOTATIONS} more failure(s): see the reports")
    return lines


def append_summary(path: str, summary: str) -> str | None:
    """Append ``summary`` to the job summary file at ``path`` (created if missing, never truncated); the reason it
    could not, one line, or none. A path that is not a regular file (a folder, a FIFO, a device) is refused without
    writing or waiting."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        return f"cannot open it: {exc.strerror or exc}"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "not a regular file"
        data = summary.encode("utf-8", "surrogateescape")
        while data:
            data = data[os.write(fd, data) :]
    except OSError as exc:
        return f"cannot write it: {exc.strerror or exc}"
    finally:
        os.close(fd)
    return None


def error_summary(message: str, exit_code: int, title: str = "mgerun") -> str:
    """The job summary of a call that stopped before it had a report (a bundle that cannot be read, reports that
    cannot be merged): its one-line error."""
    return f"### {text.markdown(title)}: FAILED (exit {exit_code})\n\n{text.markdown(message)}\n\n"


def error_annotation(message: str, title: str = "mgerun") -> str:
    """The ``::error`` workflow command of such a call."""
    return f"::error title={_property(text.terminal(title))}::{_data(text.terminal(message))}"
