"""``mgerun``'s flags for CI: ``--rerun-failed``, ``-x`` and ``--maxfail`` (turned into :class:`~mgedump.options.SelectOptions`;
docs/verify.md#stopping-early-and-running-again), and ``--no-ci-output`` (docs/ci.md#what-the-ci-shows)."""

from __future__ import annotations

from typing import Any

import click

from ...base.errors import UsageError
from ...options import SelectOptions
from . import FILE, INT, apply

ci_flags = apply(
    [
        click.option(
            "--rerun-failed",
            "rerun_failed",
            metavar="REPORT",
            type=FILE,
            default=None,
            help="Run only the bundles, variants and test cases that failed or could not run in this earlier "
            "--report-json (the bundles it names, or those of the paths given).",
        ),
        click.option(
            "-x",
            "--exitfirst",
            "exitfirst",
            is_flag=True,
            default=None,
            help="Stop after the first failing bundle (--maxfail 1).",
        ),
        click.option(
            "--maxfail",
            "maxfail",
            metavar="N",
            type=INT,
            default=None,
            help="Stop after N failing bundles (the ones running end); the reports list the rest as not run.",
        ),
        click.option(
            "--no-ci-output",
            "no_ci_output",
            is_flag=True,
            default=None,
            help="Write no GitHub job summary ($GITHUB_STEP_SUMMARY) and print no ::error annotations.",
        ),
    ]
)


def select_options(values: dict[str, Any]) -> SelectOptions:
    """Which bundles the flags ask ``mgerun`` to run, and when to stop."""
    exitfirst, maxfail = values.pop("exitfirst", None), values.pop("maxfail", None)
    if exitfirst and maxfail is not None and maxfail != 1:
        raise UsageError(f"-x is --maxfail 1; --maxfail {maxfail} was given too")
    return SelectOptions(rerun_failed=values.pop("rerun_failed", None), maxfail=1 if exitfirst else maxfail)


def ci_output(values: dict[str, Any]) -> bool:
    """Whether ``mgerun`` writes its CI output (``--no-ci-output``)."""
    return not values.pop("no_ci_output", None)
